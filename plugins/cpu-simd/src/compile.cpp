#include "compile.hpp"

#include <algorithm>
#include <cstring>

namespace loom::cpu_simd {

sdk::Status compile_supported(const sdk::GraphView& g, sdk::Claims* claims, std::vector<std::string>* notes) {
  sdk::DeclineNotes declined;
  for (size_t n = 0; n < g.node_count(); ++n) {
    std::vector<BlobNode> ignored;
    std::string why;
    bool invalid = false;
    if (lower_node(g, n, &ignored, &why, &invalid) || invalid) {
      LOOM_SDK_RETURN_IF_ERROR(claims->claim(n));
    } else if (sdk::is_quantized_op(g.node(n).op_type())) {
      declined.add(g.node(n).label(), why);
    }
  }
  if (notes != nullptr) *notes = declined.lines();
  return sdk::Status();
}

sdk::Status compile_graph(const sdk::GraphView& g, BlobGraph* out, std::vector<std::string>* notes) {
  BlobGraph blob;
  // Graph tensor -> blob tensor; UINT32_MAX until first met.
  std::vector<uint32_t> map(g.tensor_count(), UINT32_MAX);
  auto add_tensor = [&](const sdk::TensorView& t) {
    BlobTensor bt;
    bt.dtype = t.dtype();
    bt.shape = t.shape();
    bt.name = t.name();
    blob.tensors.push_back(std::move(bt));
    map[static_cast<size_t>(t.index())] = static_cast<uint32_t>(blob.tensors.size() - 1);
    return map[static_cast<size_t>(t.index())];
  };
  for (size_t i = 0; i < g.input_count(); ++i) {
    const sdk::TensorView t = g.input(i);
    if (dtype_size(t.dtype()) == 0) {  // not a blob dtype
      return sdk::invalid_argument("compile: graph input " + std::to_string(i) + " (" + t.name() + ") is " +
                                   sdk::dtype_name(t.dtype()) +
                                   "; cpu-simd takes f32, bool, i32, i64, u8 and i8 inputs only");
    }
    if (map[static_cast<size_t>(t.index())] != UINT32_MAX) {
      return sdk::invalid_argument("compile: graph input " + std::to_string(i) + " (" + t.name() +
                                   ") is listed twice");
    }
    blob.inputs.push_back(add_tensor(t));
    // A program parameter is the same on every run: the executable may
    // pack it once (Conv and MatMul weights).
    blob.tensors.back().parameter = t.is_parameter();
  }
  for (size_t n = 0; n < g.node_count(); ++n) {
    std::vector<BlobNode> lowered;
    std::string why;
    if (!lower_node(g, n, &lowered, &why)) {
      return sdk::invalid_argument("compile: " + g.node(n).label() + " is not supported by cpu-simd: " + why);
    }
    // This node's scratch tensors (kScratchTensor + k) -> blob tensors.
    std::vector<uint32_t> scratch;
    for (BlobNode& node : lowered) {
      for (uint32_t& operand : node.inputs) {
        if (operand >= kScratchTensor) {
          if (operand - kScratchTensor >= scratch.size()) {
            return sdk::invalid_argument("compile: " + g.node(n).label() + " reads a scratch tensor before writing it");
          }
          operand = scratch[operand - kScratchTensor];
          continue;
        }
        if (map[operand] == UINT32_MAX) {
          const sdk::TensorView t = g.tensor(operand);
          if (!t.has_data()) {
            return sdk::invalid_argument("compile: " + g.node(n).label() + " reads tensor " + t.name() +
                                         ", which is neither a graph input, an inline constant, "
                                         "nor written by an earlier node");
          }
          const uint32_t b = add_tensor(t);
          BlobTensor& bt = blob.tensors[b];
          bt.constant = true;
          if (t.dtype() == LOOM_DTYPE_F32) {
            LOOM_SDK_RETURN_IF_ERROR(t.read_floats(&bt.data));
          } else {
            // Format 6: u8, i8 and i32 constants (zero points, biases, small
            // weights) travel as their bytes; lower_node allowed no others.
            bt.bytes.assign(t.data(), t.data() + t.data_size());
          }
        }
        operand = map[operand];
      }
      if (node.outputs[0] >= kScratchTensor) {
        std::vector<const std::vector<int64_t>*> in;
        for (uint32_t t : node.inputs) in.push_back(&blob.tensors[t].shape);
        BlobTensor bt;
        std::string error;
        if (!infer_output_shape(node, in, &bt.shape, &error)) {
          return sdk::invalid_argument("compile: " + g.node(n).label() + ": " + error);
        }
        scratch.resize(std::max<size_t>(scratch.size(), node.outputs[0] - kScratchTensor + 1));
        scratch[node.outputs[0] - kScratchTensor] = static_cast<uint32_t>(blob.tensors.size());
        node.outputs[0] = static_cast<uint32_t>(blob.tensors.size());
        blob.tensors.push_back(std::move(bt));
        node.origin = static_cast<int64_t>(n);
        blob.nodes.push_back(std::move(node));
        continue;
      }
      const sdk::TensorView o = g.tensor(node.outputs[0]);
      if (map[node.outputs[0]] != UINT32_MAX) {
        return sdk::invalid_argument("compile: " + g.node(n).label() + " writes tensor " + o.name() +
                                     ", which already has a producer");
      }
      node.outputs[0] = add_tensor(o);
      node.origin = static_cast<int64_t>(n);
      blob.nodes.push_back(std::move(node));
    }
  }
  for (size_t i = 0; i < g.output_count(); ++i) {
    const sdk::TensorView t = g.output(i);
    if (map[static_cast<size_t>(t.index())] == UINT32_MAX) {
      return sdk::invalid_argument("compile: graph output " + std::to_string(i) + " (" + t.name() +
                                   ") is not written by any node");
    }
    blob.outputs.push_back(map[static_cast<size_t>(t.index())]);
  }
  fold_hard_swish(&blob);
  fuse_qdq(&blob);
  if (notes != nullptr) *notes = quantized_notes(g, blob);
  fold_constant_dequantize(&blob);
  std::string error;
  if (!validate(blob, &error)) {
    return sdk::invalid_argument("compile: the cpu-simd graph is invalid: " + error);
  }
  *out = std::move(blob);
  return sdk::Status();
}

}  // namespace loom::cpu_simd
