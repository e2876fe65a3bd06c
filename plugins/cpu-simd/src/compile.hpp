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
//
// A lowering may write and read tensors of its own (LSTM's packed output):
// operand ids kScratchTensor + k, which compile_graph turns into new blob
// tensors of the shape the writing node's rule gives.
inline constexpr uint32_t kScratchTensor = 0xFFFFFF00u;
bool lower_node(const sdk::GraphView& g, size_t index, std::vector<BlobNode>* out, std::string* why,
                bool* invalid = nullptr);

// compile_supported: claims every node lower_node accepts, and the invalid
// ones (so that compile names them in its error).
// `notes`, when given: why quantized nodes were declined (sdk::DeclineNotes).
sdk::Status compile_supported(const sdk::GraphView& view, sdk::Claims* claims,
                              std::vector<std::string>* notes = nullptr);

// compile: the blob graph of the whole subgraph (every node must lower).
// `notes` (when given) receives quantized_notes of the graph.
sdk::Status compile_graph(const sdk::GraphView& view, BlobGraph* out,
                          std::vector<std::string>* notes = nullptr);

// Readers, producers and graph outputs of every tensor of a blob graph
// (compile_rewrite.cpp), for the rewrites and the compile notes.
struct TensorUses {
  std::vector<size_t> readers;    // node operands reading the tensor
  std::vector<int64_t> reader;    // the last node reading it, -1 for none
  std::vector<int64_t> producer;  // the node writing it, -1 for none
  std::vector<bool> output;       // a graph output
};
TensorUses tensor_uses(const BlobGraph& g);
// The node writing `t` when it is `op`, else nullptr.
const BlobNode* producer_if(const BlobGraph& g, const TensorUses& u, uint32_t t, Op op);

// What compile did with the quantized part of a graph, one line a step
// (compile_notes.cpp), for the compile notes the plugin logs (info level):
// "int8: node conv1 (Conv): one QLinearConv step with its DequantizeLinear
// inputs and QuantizeLinear output", and for every other node reading a
// DequantizeLinear's output, that it runs in f32 and why ("f32: node pool1
// (MaxPool): cpu-simd has no int8 MaxPool; ..."). Empty for a graph without
// quantized tensors. `blob` is the graph after fuse_qdq and before
// fold_constant_dequantize.
std::vector<std::string> quantized_notes(const sdk::GraphView& g, const BlobGraph& blob);

// x * HardSigmoid(x) with alpha 1/6 and beta 0.5 (MobileNetV3's exporters
// write HardSwish so) becomes one HardSwish node, when the HardSigmoid's
// output is read by that Mul alone: one pass over x instead of two, and a
// Conv before it takes it as a fused activation. Returns how many were
// folded. (compile_rewrite.cpp)
size_t fold_hard_swish(BlobGraph* g);

// QDQ fusion: DequantizeLinear (u8 / i8 activation, per tensor) and
// DequantizeLinear (u8 / i8 weight, per tensor or per output channel) into
// Conv, MatMul (2-D weight) or Gemm (alpha 1, beta 1, no transA), an
// optional bias (an f32 constant, or a DequantizeLinear of i32), an optional
// Relu or Clip, then QuantizeLinear (per tensor): the group becomes one
// QLinearConv or QLinearMatMul (format 7 where it needs the output clamp, a
// matmul bias or trans_b), which computes what that QLinear operator with the
// same scales computes, then clamps to the activation's bounds quantized
// (exact, as QuantizeLinear is monotonic). Every intermediate must be read by
// the next member alone; the DequantizeLinear nodes stay while something else
// reads them. A bias becomes i32 in accumulator units: as it is when it is a
// DequantizeLinear of i32 with zero point 0 and scale x_scale * w_scale[m]
// (f32 product), else nearbyint(bias / (x_scale * w_scale[m])) (needs constant
// scales and a constant bias; a group whose bias leaves i32 is not fused).
// The clamp needs a constant output scale and zero point. Returns how many
// groups were fused. (compile_rewrite.cpp)
size_t fuse_qdq(BlobGraph* g);

// A DequantizeLinear whose operands are all blob constants (a weight the
// host left unfolded for fuse_qdq, in a group that did not fuse) becomes the
// f32 constant it computes, so its reader packs it once as before. Returns
// how many were folded. (compile_rewrite.cpp)
size_t fold_constant_dequantize(BlobGraph* g);

}  // namespace loom::cpu_simd
