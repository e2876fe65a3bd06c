// The compile side of cpu-simd: graph.fbs (schemas/graph.fbs) in, a blob
// graph out. The SDK verifies the buffer (sdk::GraphView::open) before the
// plugin's compile members run; compile.cpp assembles the blob;
// lower.cpp decides, node by node, what cpu-simd runs exactly as ONNX
// specifies and turns it into blob nodes (one, or one per output for Split).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/cpu_simd/blob_format.hpp"
#include "loom/graph/graph_generated.h"
#include "loom/plugin.hpp"
#include "loom/sdk/graph.hpp"

namespace loom::cpu_simd {

namespace gfb = loom::graph::fb;

// The lowering's view of a graph that sdk::GraphView::open verified: every
// table passed the flatbuffers verifier and every tensor index (graph
// inputs/outputs, node operands) is in range.
struct GraphView {
  const gfb::Graph* graph = nullptr;
  size_t tensor_count = 0;
  std::vector<bool> is_input;  // per tensor: listed in Graph.inputs

  const gfb::Tensor& tensor(int32_t i) const { return *graph->tensors()->Get(static_cast<uint32_t>(i)); }
  // The tensor's shape (an absent vector is a scalar).
  std::vector<int64_t> shape(int32_t i) const;
  // The node's name for messages: `name` (op_type), or "#index" when unnamed.
  std::string node_label(size_t index) const;
};

// The lowering's view of `view` (borrows the same buffer).
GraphView lowering_view(const sdk::GraphView& view);

// Lowers node `index` to blob nodes (one; Split one Slice per output) whose
// operands are graph tensor indices, checking op type, domain, opset, every
// attribute, dtypes, constant operands and the output shapes. False with
// `*why` when cpu-simd cannot run the node exactly as ONNX specifies.
bool lower_node(const GraphView& g, size_t index, std::vector<BlobNode>* out, std::string* why);

// compile_supported: claims every node lower_node accepts.
sdk::Status compile_supported(const sdk::GraphView& view, sdk::Claims* claims);

// compile: the blob graph of the whole subgraph (every node must lower).
sdk::Status compile_graph(const sdk::GraphView& view, BlobGraph* out);

// x * HardSigmoid(x) with alpha 1/6 and beta 0.5 (MobileNetV3's exporters
// write HardSwish so) becomes one HardSwish node, when the HardSigmoid's
// output is read by that Mul alone: one pass over x instead of two, and a
// Conv before it takes it as a fused activation. Returns how many were
// folded. (compile_rewrite.cpp)
size_t fold_hard_swish(BlobGraph* g);

}  // namespace loom::cpu_simd
