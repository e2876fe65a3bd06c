// Open-shape bitstreams (format 2) at one binding: the concrete shape of
// every tensor, computed node by node from the shapes of the inputs with the
// same rules the loader checks static bitstreams with (infer_node), and the
// activation layout for those shapes. The kernels and the timing model then
// run the bound bitstream exactly as they run a static one.
#pragma once

#include <cstdint>
#include <vector>

#include "bitstream.hpp"

namespace loom::fpga_stub {

// Binds `open` (a decoded, validated bitstream) to `input_shapes`, one per
// bitstream input. `*out` receives the tensors, nodes and I/O lists of
// `open` with every shape concrete, every byte size computed and the
// activation tensors laid out again (out->activation_bytes); its weights are
// left empty (constants keep their offsets into the weights already on the
// device). INVALID_ARGUMENT, one line, naming the input, the dimension and
// both values when a shape does not fit, or the node whose rule fails at
// this binding.
Status bind_shapes(const Bitstream& open, const std::vector<std::vector<int64_t>>& input_shapes,
                   Bitstream* out);

}  // namespace loom::fpga_stub
