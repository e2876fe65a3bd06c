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

// Lowers node `index` to blob nodes (one; Split one Slice per output) whose
// operands are graph tensor indices, checking op type, domain, opset, every
// attribute, dtypes, constant operands and the output shapes. False with
// `*why` when cpu-simd cannot run the node exactly as ONNX specifies; then
// `*invalid` (when given) says whether the node is bad input that no kernel
// runs correctly (a zero scale, a mismatched zero point), which compile
// reports rather than leaving the node to another device.
bool lower_node(const sdk::GraphView& g, size_t index, std::vector<BlobNode>* out, std::string* why,
                bool* invalid = nullptr);

// compile_supported: claims every node lower_node accepts, and the invalid
// ones (so that compile names them in its error).
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
