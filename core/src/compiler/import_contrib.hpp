// ONNX Runtime's quantized contrib operators (domain com.microsoft) that
// its quantizer writes in the QOperator form around QLinearConv and
// QLinearMatMul: QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
// QLinearGlobalAveragePool, QLinearAveragePool and QLinearConcat. Each is
// read as the default-domain nodes that say the same thing: a
// DequantizeLinear per quantized input, the f32 operator, a QuantizeLinear
// to the output's scale and zero point (private to the importer).
//
// ONNX Runtime computes the same in float with its scale ratios folded
// (QLinearAdd: a * (sa / sc) + b * (sb / sc) + zc, rounded), so the two
// differ only by float rounding before the final rounding: at most 1 unit
// of the quantized output. Every plugin and the reference kernels run the
// expanded nodes; cpu-simd turns DequantizeLinear -> Sigmoid / LeakyRelu
// -> QuantizeLinear into one table of the 256 values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "loom/status.hpp"

namespace loom::compiler {

inline constexpr const char* kContribDomain = "com.microsoft";

// Whether `node` is one of the contrib operators expand_contrib_node reads.
bool is_expanded_contrib(const graph::Node& node);

// Adds a tensor to the graph being read under a name no other tensor has
// (the given name, suffixed when taken); its index.
using AddTensor = std::function<Result<int32_t>(graph::Tensor)>;

// Appends to `out` the default-domain nodes (of opset `default_opset`, at
// least 10) that `node` (is_expanded_contrib, inputs and outputs read) is
// made of. `graph` holds what has been read so far: the dtype of a
// quantized input or zero point that is a graph input or a constant decides
// the dtype of an output zero point the node leaves out. Errors name the
// node (`where`) and what was wrong with it.
Status expand_contrib_node(const graph::Node& node, int64_t default_opset, const graph::Graph& graph,
                           const std::string& where, const AddTensor& add, std::vector<graph::Node>* out);

}  // namespace loom::compiler
