#include "compile.hpp"

#include <cstring>

namespace loom::cpu_simd {
namespace {

// The blob dtype of a graph.fbs dtype (the enums share their values); a
// dtype blobs cannot hold has dtype_size 0.
loom_dtype_t lowering_dtype(gfb::DType d) { return static_cast<loom_dtype_t>(d); }

// Verifier limits: a graph.fbs buffer is a few tables per node; these bound
// the verifier's work on hostile input without limiting real graphs.
constexpr flatbuffers::uoffset_t kMaxDepth = 64;
constexpr flatbuffers::uoffset_t kMaxTables = 10'000'000;

sdk::Status check_index(const GraphView& g, int32_t index, bool allow_absent,
                        const std::string& where) {
  if (index == -1 && allow_absent) return sdk::Status();
  if (index < 0 || static_cast<size_t>(index) >= g.tensor_count) {
    return sdk::invalid_argument("graph.fbs: " + where + ": tensor index " +
                                 std::to_string(index) + " out of range (" +
                                 std::to_string(g.tensor_count) + " tensors)");
  }
  return sdk::Status();
}

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

sdk::Status open_graph(const void* data, size_t size, GraphView* out) {
  if (data == nullptr || size == 0) return sdk::invalid_argument("graph.fbs: empty buffer");
  if (size < 8 || !gfb::GraphBufferHasIdentifier(data)) {
    return sdk::invalid_argument("graph.fbs: missing file identifier \"LMGR\"");
  }
  flatbuffers::Verifier verifier(static_cast<const uint8_t*>(data), size, kMaxDepth, kMaxTables);
  if (!gfb::VerifyGraphBuffer(verifier)) {
    return sdk::invalid_argument("graph.fbs: the buffer of " + std::to_string(size) +
                                 " bytes fails flatbuffers verification");
  }
  GraphView g;
  g.graph = gfb::GetGraph(data);
  g.tensor_count = g.graph->tensors() == nullptr ? 0 : g.graph->tensors()->size();
  g.is_input.assign(g.tensor_count, false);
  if (g.graph->inputs() != nullptr) {
    for (uint32_t i = 0; i < g.graph->inputs()->size(); ++i) {
      const int32_t t = g.graph->inputs()->Get(i);
      LOOM_SDK_RETURN_IF_ERROR(check_index(g, t, false, "graph input " + std::to_string(i)));
      g.is_input[static_cast<size_t>(t)] = true;
    }
  }
  if (g.graph->outputs() != nullptr) {
    for (uint32_t i = 0; i < g.graph->outputs()->size(); ++i) {
      LOOM_SDK_RETURN_IF_ERROR(
          check_index(g, g.graph->outputs()->Get(i), false, "graph output " + std::to_string(i)));
    }
  }
  const uint32_t nodes = g.graph->nodes() == nullptr ? 0 : g.graph->nodes()->size();
  for (uint32_t n = 0; n < nodes; ++n) {
    const gfb::Node& node = *g.graph->nodes()->Get(n);
    const std::string where = "node " + std::to_string(n);
    for (int pass = 0; pass < 2; ++pass) {
      const auto* list = pass == 0 ? node.inputs() : node.outputs();
      if (list == nullptr) continue;
      for (uint32_t i = 0; i < list->size(); ++i) {
        LOOM_SDK_RETURN_IF_ERROR(check_index(
            g, list->Get(i), true, where + (pass == 0 ? " input " : " output ") + std::to_string(i)));
      }
    }
  }
  *out = std::move(g);
  return sdk::Status();
}

sdk::Status compile_supported(const void* data, size_t size, size_t node_count, bool* out) {
  GraphView g;
  LOOM_SDK_RETURN_IF_ERROR(open_graph(data, size, &g));
  const size_t nodes = g.graph->nodes() == nullptr ? 0 : g.graph->nodes()->size();
  if (nodes != node_count) {
    return sdk::invalid_argument("compile_supported: node_count is " + std::to_string(node_count) +
                                 ", the graph has " + std::to_string(nodes) + " nodes");
  }
  for (size_t n = 0; n < nodes; ++n) {
    std::vector<BlobNode> ignored;
    std::string why;
    out[n] = lower_node(g, n, &ignored, &why);
  }
  return sdk::Status();
}

sdk::Status compile_graph(const void* data, size_t size, BlobGraph* out) {
  GraphView g;
  LOOM_SDK_RETURN_IF_ERROR(open_graph(data, size, &g));
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
