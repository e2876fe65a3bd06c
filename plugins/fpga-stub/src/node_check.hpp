// The rules of each device operator (node_check.cpp): what a node must be
// for the kernels to run it safely, and the work it costs the timing model.
// Used by decode (every node of a blob), the compiler (a node it lowers) and
// the device (the cost of each launch).
#pragma once

#include <cstddef>
#include <cstdint>

#include "bitstream.hpp"

namespace loom::fpga_stub {

// Checks one node against the tensors it names: arity, dtypes, constant
// operands, parameters and the output shape the operator computes from its
// inputs. Kernels rely on this: a node that passes cannot read or write out
// of bounds.
Status check_node(const Bitstream& bs, size_t index);
// check_node's rules, except that the output's recorded shape is not
// compared: the shape the operator computes from its (static) inputs is
// stored in *out_shape. The output's dtype must still match. Reshape and
// Flatten compute nothing: their output must be recorded static.
Status infer_node(const Bitstream& bs, size_t index, std::vector<int64_t>* out_shape);

// Per-node work for the timing model, of a node check_node accepted (for an
// open bitstream: of its bound form, bind_shapes).
struct NodeCost {
  uint64_t int8_macs = 0;
  uint64_t f32_ops = 0;
};
NodeCost node_cost(const Bitstream& bs, const BsNode& node);

}  // namespace loom::fpga_stub
