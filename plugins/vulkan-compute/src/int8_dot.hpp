// Integer dot products for the int8 convolutions: how a format-4 program
// runs its QLinearConv / ConvInteger / QLinearMatMul / MatMulInteger
// dispatches (qconv.comp) on a device with shaderIntegerDotProduct. Blobs
// stay the same on every device; the rewrite happens when one is loaded.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "loom/vulkan_compute/blob_format.hpp"

namespace loom::vulkan {

// Rewrites, in `program` (decoded and validated, its data section still
// there), each qconv dispatch whose weight is a constant of the blob into a
// qpack dispatch (x into words of four channels, qpack.comp) and a
// qconv_dot dispatch (qconv_dot.comp: the same push constants, table and y,
// the same bytes). The weights are packed here, once: each such dispatch
// gets a new constant tensor, whose bytes are put in `*constants` under its
// index; the packed x of all of them share one new intermediate tensor
// (the dispatches run one after another). Returns the number of dispatches
// rewritten; a dispatch the rewrite cannot take (a weight given at run
// time, sizes past 2^31 words) stays on qconv.comp.
size_t use_integer_dot(BlobProgram* program, std::map<uint32_t, std::vector<uint8_t>>* constants);

}  // namespace loom::vulkan
