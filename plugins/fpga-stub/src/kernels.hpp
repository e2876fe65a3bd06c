// The simulated datapath: one function per operator, run by the command
// processor on device memory. Nodes have passed check_node, so every index
// computed here stays inside the tensors it names.
#pragma once

#include <cstddef>

#include "bitstream.hpp"

namespace loom::fpga_stub {

// Runs `node` of `bs`; `data[t]` is the device address of tensor t (null for
// absent optional operands). Thread-compatible: one node at a time per
// activation region.
void run_node(const Bitstream& bs, const BsNode& node, std::byte* const* data);

// Round half to even and saturate to u8 or i8 (NaN becomes the low end),
// as the reference kernels requantize.
int32_t requantize(double value, bool is_unsigned);

}  // namespace loom::fpga_stub
