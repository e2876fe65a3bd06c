// Node-by-node lowering of graph.fbs for vulkan-compute (over the SDK's
// verified sdk::GraphView): per node, what it becomes (a kernel dispatch or an alias)
// in graph tensor indices, or why the plugin does not claim it. A node is
// claimed only when the plugin computes it as the ONNX operator of its
// opset specifies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/graph/graph_generated.h"
#include "loom/sdk/graph.hpp"
#include "loom/vulkan_compute/kernels.hpp"
#include "loom/plugin.hpp"

namespace loom::vulkan {

// The compile side needs no Vulkan: it builds without the Vulkan headers
// (the fuzz harness of format-3 blobs compiles it).
using sdk::Status;
namespace gfb = loom::graph::fb;
using Shape = std::vector<int64_t>;

// The element count of `s` when it is below 2^31 (the kernels' limit).
bool element_count(const Shape& s, uint64_t* out);
std::string shape_text(const Shape& s);

// One strided box copy (make_copy's arguments): from operand i to the output.
struct CopyBox {
  Shape dims;
  std::vector<int64_t> sx;
  std::vector<uint64_t> sy;
  uint64_t x0 = 0, y0 = 0;
};

// What one node becomes, in graph tensor indices.
struct Lowered {
  enum class Kind { kUnary, kBinary, kMatMul, kAlias, kSoftmax, kConv, kPool, kReduce, kLayerNorm, kCopy, kResize,
                    kConvTranspose, kQuantize, kDequantize, kQConv } kind = Kind::kUnary;
  UnaryOp unary = UnaryOp::kIdentity;
  float alpha = 0, beta = 0;
  BinaryOp binary = BinaryOp::kAdd;
  Shape dims;
  std::vector<uint64_t> sa, sb;
  MatMulParams mm;
  ConvParams conv;
  PoolParams pool;
  uint64_t outer = 0, n = 0, inner = 0;  // softmax view
  bool log_softmax = false;
  uint32_t reduce_op = 0;  // 0 sum, 1 mean, 2 max
  bool has_bias = false;   // layernorm: operands are x, scale[, bias]
  Shape in_dims;               // kResize: X's shape (`dims` is Y's)
  std::vector<float> table;    // kResize: the tap table, a constant made by the compiler
  std::vector<CopyBox> boxes;  // kCopy: one per operand (Slice: 1, Concat: each input)
  // kQuantize, kDequantize, kQConv (format 4): the table the compiler makes
  // (int8_kernels.hpp: scales and zero points as f32, or per output channel
  // bias, w zero point and multiplier as i32), the per-axis channel count
  // (`inner` as for softmax), operand dtypes and the zero points pushed.
  std::vector<uint32_t> words;
  DType table_dtype = DType::kF32;
  uint32_t channels = 1;
  DType x_dtype = DType::kF32, w_dtype = DType::kF32, y_dtype = DType::kF32;
  int32_t x_zero = 0, y_zero = 0;
  bool b_layout = false;  // kQConv of QLinearMatMul / MatMulInteger: w is B, [K, N]
  std::vector<int32_t> operands;  // data operands, in binding order (bias last for matmul)
  int32_t output = -1;
};

// Strides of `s` (right-aligned) over the output dims `out`: 0 where s
// broadcasts. False when s does not broadcast to out.
bool broadcast_strides(const Shape& s, const Shape& out, std::vector<uint64_t>* strides);

// Lowers node `n`; false with `*why` when vulkan-compute does not claim it.
// With `bound` (binding an open graph, ABI 1.2: one shape per graph tensor,
// the node's operands' concrete) the operands' shapes are read from it and
// the output's shape, by the operator's rule, is checked against the
// declared one (rank, fixed dimensions) and the kernels' limits and written
// to it (lowering.hpp, class Lowering).
// `int8_unavailable`: why the compile target cannot run the int8 kernels
// (the devices' missing features), or empty when it can; NULL: it cannot
// (quantized nodes are declined with kNoInt8Target).
bool lower_node(const sdk::GraphView& g, size_t n, Lowered* out, std::string* why,
                std::vector<Shape>* bound = nullptr, const std::string* int8_unavailable = nullptr);

inline constexpr const char* kNoInt8Target = "no Vulkan device of this plugin runs the int8 kernels";

}  // namespace loom::vulkan
