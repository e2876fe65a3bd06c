#include "compile.hpp"

#include <cstring>

namespace loom::cpu_simd {
namespace {

// The blob dtype of a graph.fbs dtype (the enums share their values); a
// dtype blobs cannot hold has dtype_size 0.
loom_dtype_t lowering_dtype(gfb::DType d) { return static_cast<loom_dtype_t>(d); }

}  // namespace

std::vector<int64_t> GraphView::shape(int32_t i) const {
  const auto* s = tensor(i).shape();
  if (s == nullptr) return {};
  return std::vector<int64_t>(s->begin(), s->end());
}

std::string GraphView::node_label(size_t index) const {
  const gfb::Node& n = *graph->nodes()->Get(static_cast<uint32_t>(index));
  std::string label = n.name() != nullptr && n.name()->size() != 0 ? n.name()->str()
                                                                   : "#" + std::to_string(index);
  return "node " + label + " (" + n.op_type()->str() + ")";
}

GraphView lowering_view(const sdk::GraphView& view) {
  GraphView g;
  g.graph = &view.raw();
  g.tensor_count = view.tensor_count();
  g.is_input.assign(g.tensor_count, false);
  for (size_t t = 0; t < g.tensor_count; ++t) g.is_input[t] = view.tensor(t).is_graph_input();
  return g;
}

sdk::Status compile_supported(const sdk::GraphView& view, sdk::Claims* claims) {
  const GraphView g = lowering_view(view);
  for (size_t n = 0; n < view.node_count(); ++n) {
    std::vector<BlobNode> ignored;
    std::string why;
    if (lower_node(g, n, &ignored, &why)) LOOM_SDK_RETURN_IF_ERROR(claims->claim(n));
  }
  return sdk::Status();
}

sdk::Status compile_graph(const sdk::GraphView& view, BlobGraph* out) {
  const GraphView g = lowering_view(view);
  BlobGraph blob;
  // Graph tensor -> blob tensor; UINT32_MAX until first met.
  std::vector<uint32_t> map(g.tensor_count, UINT32_MAX);
  auto add_tensor = [&](int32_t t) {
    BlobTensor bt;
    bt.dtype = lowering_dtype(g.tensor(t).dtype());
    bt.shape = g.shape(t);
    blob.tensors.push_back(std::move(bt));
    map[static_cast<size_t>(t)] = static_cast<uint32_t>(blob.tensors.size() - 1);
    return map[static_cast<size_t>(t)];
  };
  if (g.graph->inputs() != nullptr) {
    for (uint32_t i = 0; i < g.graph->inputs()->size(); ++i) {
      const int32_t t = g.graph->inputs()->Get(i);
      if (dtype_size(lowering_dtype(g.tensor(t).dtype())) == 0) {
        return sdk::invalid_argument("compile: graph input " + std::to_string(i) + " (" +
                                     g.tensor(t).name()->str() + ") is " +
                                     gfb::EnumNameDType(g.tensor(t).dtype()) +
                                     "; cpu-simd takes f32, bool, i32 and i64 inputs only");
      }
      if (map[static_cast<size_t>(t)] != UINT32_MAX) {
        return sdk::invalid_argument("compile: graph input " + std::to_string(i) + " (" +
                                     g.tensor(t).name()->str() + ") is listed twice");
      }
      blob.inputs.push_back(add_tensor(t));
      // A program parameter is the same on every run: the executable may
      // pack it once (Conv and MatMul weights).
      blob.tensors.back().parameter = g.tensor(t).parameter() != nullptr;
    }
  }
  const size_t nodes = g.graph->nodes() == nullptr ? 0 : g.graph->nodes()->size();
  for (size_t n = 0; n < nodes; ++n) {
    std::vector<BlobNode> lowered;
    std::string why;
    if (!lower_node(g, n, &lowered, &why)) {
      return sdk::invalid_argument("compile: " + g.node_label(n) + " is not supported by cpu-simd: " +
                                   why);
    }
    for (BlobNode& node : lowered) {
      for (uint32_t& operand : node.inputs) {
        const int32_t t = static_cast<int32_t>(operand);
        if (map[operand] == UINT32_MAX) {
          const gfb::Tensor& gt = g.tensor(t);
          if (gt.data() == nullptr || gt.parameter() != nullptr) {
            return sdk::invalid_argument("compile: " + g.node_label(n) + " reads tensor " +
                                         gt.name()->str() +
                                         ", which is neither a graph input, an inline constant, "
                                         "nor written by an earlier node");
          }
          const uint32_t b = add_tensor(t);
          BlobTensor& bt = blob.tensors[b];
          bt.constant = true;
          bt.data.resize(gt.data()->size() / sizeof(float));
          if (!bt.data.empty()) std::memcpy(bt.data.data(), gt.data()->data(), gt.data()->size());
        }
        operand = map[operand];
      }
      const int32_t o = static_cast<int32_t>(node.outputs[0]);
      if (map[node.outputs[0]] != UINT32_MAX) {
        return sdk::invalid_argument("compile: " + g.node_label(n) + " writes tensor " +
                                     g.tensor(o).name()->str() + ", which already has a producer");
      }
      node.outputs[0] = add_tensor(o);
      blob.nodes.push_back(std::move(node));
    }
  }
  if (g.graph->outputs() != nullptr) {
    for (uint32_t i = 0; i < g.graph->outputs()->size(); ++i) {
      const int32_t t = g.graph->outputs()->Get(i);
      if (map[static_cast<size_t>(t)] == UINT32_MAX) {
        return sdk::invalid_argument("compile: graph output " + std::to_string(i) + " (" +
                                     g.tensor(t).name()->str() + ") is not written by any node");
      }
      blob.outputs.push_back(map[static_cast<size_t>(t)]);
    }
  }
  fold_hard_swish(&blob);
  std::string error;
  if (!validate(blob, &error)) {
    return sdk::invalid_argument("compile: the cpu-simd graph is invalid: " + error);
  }
  *out = std::move(blob);
  return sdk::Status();
}

}  // namespace loom::cpu_simd
