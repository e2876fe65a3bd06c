// The quantized steps of a cpu-simd schedule (blob format 6): QLinearConv,
// ConvInteger, QLinearMatMul and MatMulInteger on oneDNN's int8 primitives,
// QuantizeLinear and DequantizeLinear on plain loops.
//
// How the integer operators compute, and why so (exactness): oneDNN 2.6 runs
// u8 / s8 sources against s8 weights only, and its zero-point attributes do
// not cover per-channel weight zero points. So a step asks oneDNN for the
// plain product P = x * ws in s32, where ws = w - c is the weight shifted
// into s8 (c = 128 for u8 weights, 0 for s8) and packed once, and adds the
// zero-point terms itself, in 64-bit integers:
//
//   sum (x - xz)(w - wz[m]) = P - xz * Tw[m, o] + (c - wz[m]) * (R[o] - xz * Cnt[o])
//
// with, over the taps of output position o that fall inside the input (a
// pad contributes nothing, as (x - xz) is 0 there in ONNX's definition):
// Tw the sum of ws, R the sum of x within the group, Cnt the count of those
// taps times the group's input channels. Tw and Cnt are computed when the
// weights are packed; R only when some c - wz[m] is not 0. The sum is then
// wrapped to i32 (as ONNX and the reference kernels define it) and, for the
// QLinear forms, requantized exactly as the reference kernels do:
// float(acc + bias) * (float(x_scale) * float(w_scale[m]) / float(y_scale)),
// widened to double, plus the output zero point, rounded half to even
// (nearbyint in the default rounding mode) and saturated to the output type.
// Results therefore equal the reference kernels bit for bit. Where oneDNN's
// kernels lack VNNI their u8 x s8 products saturate in 16-bit pairs, so
// there, unless the weights are small enough that no pair can (u8 x, the
// two largest magnitudes of each output channel summing to at most 128),
// the weights are split in two halves of 7 and 1 bits and P takes two
// passes (Int8Step::split, PackedInt8::two_pass). Format 7's fused QDQ steps add an output clamp
// (floats [lo, hi], applied after the saturation), a QLinearMatMul bias (as
// QLinearConv's) and a transposed B (trans_b: transposed when packed);
// format 10's trans_a 1 (every fused step) rounds before adding the output
// zero point (Int8Step::round_first). Such a QLinearConv with constant
// parameters may instead requantize inside oneDNN's convolution, with the
// same result (Int8Step::fused_prim says when).
#pragma once

#include <memory>
#include <vector>

#include "loom/cpu_simd/blob_format.hpp"
#include "loom/plugin.hpp"
#include "thread_pool.hpp"

namespace loom::cpu_simd {

struct Int8Step;

// Plans node `index` of `graph` (a quantized operator that validate()
// accepted). `fixed[t]`: tensor t is a constant or a parameter, so a weight
// read from it is packed once. `avx2`: the plain kernels run AVX2 (or
// wider), so the requantization may too. `nhwc`: the schedule would hand a
// QLinearConv its x and take its y channels-last (NHWC); the step says
// whether it does so in Int8Step::io_nhwc (u8 x of rank 4 only), and
// otherwise reads and writes plain tensors. Fails with a message naming
// the node when oneDNN has no primitive for its shapes.
sdk::Status make_int8_step(const BlobGraph& graph, size_t index, const std::vector<bool>& fixed, bool avx2,
                           bool nhwc, std::shared_ptr<Int8Step>* out);

// Runs the step: `ins[i]` is the data of the node's input i, `out` its
// output. Scales and zero points are read here and checked (a scale that is
// not positive and finite is INVALID_ARGUMENT naming the node). Safe to call
// from several threads at once on one step. The requantization of
// channels-last QLinearConv / ConvInteger results is split among `pool`'s
// threads by output position.
sdk::Status run_int8_step(Int8Step& step, const std::vector<const void*>& ins, void* out, ThreadPool& pool);

// Bytes of packed weights the step holds (0 before its first run).
uint64_t int8_packed_bytes(const Int8Step& step);

}  // namespace loom::cpu_simd
