// The QDQ form of a quantized convolution or matmul, fused at compile time
// (and of a quantized Add / Mul: two per-tensor DequantizeLinear -> Add /
// Mul -> QuantizeLinear becomes one qbinary with ONNX Runtime's QLinearAdd /
// QLinearMul arithmetic):
// DequantizeLinear (x) and DequantizeLinear (constant weights, and an i32
// bias) -> Conv / MatMul / Gemm -> QuantizeLinear, as quantizers write it,
// becomes one qconv dispatch on the quantized bytes (QLinearConv /
// QLinearMatMul of the same operands), so the model's convolutions and
// matmuls run in int8 instead of in f32 between the int8 kernels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/vulkan_compute/blob_format.hpp"

namespace loom::vulkan {

// Fuses every conv / direct_conv dispatch of `p` (before split-K), and
// every matmul one (A not transposed, one B for every batch, alpha 1, C
// only as a bias of one value per column with beta 1: a batch of 1x1
// convolutions, B as [K, N] or transposed as [N, K, 1, 1]), that:
// reads x from a per-tensor dequantize of a u8 / i8 tensor; reads w from a
// dequantize (per tensor, or per output channel) of a u8 / i8 constant;
// reads its bias, if any, from a dequantize of an i32 constant with zero
// point 0 and scale x_scale * w_scale[c] (the f32 product, as quantizers
// write it: the bias is then exactly those integers); folds no activation;
// and writes an intermediate whose only reader (`readers`: per blob tensor,
// the graph operands reading it) is a per-tensor quantize to u8 / i8. The
// quantize goes, and so does each dequantize whose output nothing else
// reads. The result is QLinearConv's requantization of the exact integer
// sum with the zero point added after rounding, as QuantizeLinear does
// (kQConvRoundFirst, format 5), within 1 unit of the unfused f32 steps.
// A conv_transpose dispatch (ConvTranspose) fuses the same way into a
// transposed qconv (kQConvTransposed, format 6; per output channel weight
// scales on axis 1 with one group only). Returns the number of nodes fused
// (convolutions, transposed ones, matmuls, Adds and Muls).
// With `labels` (per dispatch, the graph node it came from) and `notes`:
// for each convolution reading a dequantized x, a line saying whether it
// became an int8 qconv or stays f32, and why.
size_t fuse_qdq(BlobProgram* p, const std::vector<uint32_t>& readers,
                const std::vector<std::string>* labels = nullptr, std::vector<std::string>* notes = nullptr);

}  // namespace loom::vulkan
