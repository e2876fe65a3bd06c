// The work of a vulkan-compute blob, dispatch by dispatch: floating-point
// operations and bytes moved, read from each dispatch's push constants and
// bound tensors, which executable_estimate turns into time with the device's
// measured rates (see the plugin's README, "Estimates"). Header-only so that
// tests check the counts without a Vulkan device.
//
//   matmul          2 * M * N * K * batch (+ M * N * batch with C)
//   conv            2 * N * M * OH * OW * (C / group) * KH * KW
//   conv_transpose  2 * N * C * H * W * (M / group) * KH * KW
//   pool            planes * OH * OW * KH * KW
//   softmax         5 per element; layernorm 8 per element
//   reduce          one per element read; unary, binary, resize one per output
//   copy            none (data movement)
// Bytes: every distinct bound tensor read or written once, except copy,
// which moves its box (count elements read and written), not whole tensors.
//
// `executed_flops` is what the shader runs, which the estimate uses: matmul
// and conv compute whole tiles (128 x 128 and 64 x 64 outputs per workgroup,
// K in slices of 16) whatever the shapes, so a matmul of one row or a
// depthwise convolution (one output channel per group) costs its tiles, not
// its useful operations. For the other kernels it equals `flops`.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "loom/vulkan_compute/blob_format.hpp"

namespace loom::vulkan {

// Which measured rate bounds a dispatch's arithmetic.
enum class WorkKind : uint8_t {
  kMatMul,  // matmul
  kConv,    // conv, conv_transpose
  kOther,   // elementwise, reductions, pooling, normalization: bound by memory
  kData,    // copy: no arithmetic
};

// The work of one dispatch.
struct DispatchWork {
  WorkKind kind = WorkKind::kOther;
  double flops = 0;           // the operator's useful operations
  double executed_flops = 0;  // with the kernel's tile padding
  double bytes = 0;
  double workgroups = 0;  // the dispatch's grid
};

// The depth of the K slices matmul.comp and conv.comp load per step.
inline constexpr uint32_t kTileDepth = 16;

// Outputs per workgroup of matmul.comp (128 x 128) and conv.comp (64 x 64).
inline constexpr double kMatMulTileOutputs = 128.0 * 128.0;
inline constexpr double kConvTileOutputs = 64.0 * 64.0;

// The work of dispatch `index` of `program`, which decode() accepted (so
// every push constant the kernel reads is present).
inline DispatchWork dispatch_work(const BlobProgram& program, size_t index) {
  const BlobDispatch& d = program.dispatches[index];
  auto q = [&](size_t i) -> double { return i < d.push.size() ? static_cast<double>(d.push[i]) : 0.0; };
  DispatchWork w;
  for (size_t b = 0; b < d.bindings.size(); ++b) {
    bool seen = false;
    for (size_t a = 0; a < b; ++a) seen |= d.bindings[a] == d.bindings[b];
    if (!seen && d.bindings[b] < program.tensors.size()) {
      w.bytes += static_cast<double>(program.tensors[d.bindings[b]].bytes());
    }
  }
  const double workgroups =
      static_cast<double>(d.groups[0]) * static_cast<double>(d.groups[1]) * d.groups[2];
  w.workgroups = workgroups;
  auto padded = [](double k) { return std::ceil(k / kTileDepth) * kTileDepth; };
  switch (d.kernel) {
    case Kernel::kMatMul: {
      const double mnb = q(0) * q(1) * q(3);
      w.kind = WorkKind::kMatMul;
      w.flops = 2 * mnb * q(2) + ((d.push.size() > 7 && (d.push[7] & 4u)) ? mnb : 0.0);
      w.executed_flops = 2 * workgroups * kMatMulTileOutputs * padded(q(2));
      break;
    }
    case Kernel::kConv: {
      const double group = q(15) == 0 ? 1 : q(15);
      const double k = (q(1) / group) * q(7) * q(8);
      // Split-K (format 2): each of the splits x more workgroups reduces
      // ceil(steps / splits) 16-deep steps.
      const double splits = d.push.size() > 17 && q(17) > 0 ? q(17) : 1;
      w.kind = WorkKind::kConv;
      w.flops = 2 * q(0) * q(4) * q(5) * q(6) * k;
      w.executed_flops =
          2 * workgroups * kConvTileOutputs * std::ceil(padded(k) / kTileDepth / splits) * kTileDepth;
      break;
    }
    case Kernel::kDirectConv:  // one invocation per output: no padding
    case Kernel::kQConv: {     // (int8: counted as the f32 direct convolution)
      if (qconv_transposed(d)) {  // as the f32 transposed convolution
        const double group = q(15) == 0 ? 1 : q(15);
        w.kind = WorkKind::kConv;
        w.flops = 2 * q(0) * q(1) * q(2) * q(3) * (q(4) / group) * q(7) * q(8);
        break;
      }
      const double group = q(15) == 0 ? 1 : q(15);
      w.kind = WorkKind::kConv;
      w.flops = 2 * q(0) * q(4) * q(5) * q(6) * (q(1) / group) * q(7) * q(8);
      break;
    }
    case Kernel::kConvTranspose: {
      const double group = q(15) == 0 ? 1 : q(15);
      w.kind = WorkKind::kConv;
      w.flops = 2 * q(0) * q(1) * q(2) * q(3) * (q(4) / group) * q(7) * q(8);
      break;
    }
    case Kernel::kPool: w.flops = q(0) * q(3) * q(4) * q(5) * q(6); break;
    case Kernel::kSoftmax: w.flops = 5 * q(0) * q(1); break;
    case Kernel::kLayerNorm: w.flops = 8 * q(0) * q(1); break;
    case Kernel::kReduce: w.flops = q(0) * q(1); break;
    case Kernel::kCopy:
      w.kind = WorkKind::kData;
      w.bytes = 2 * 4 * q(0);
      break;
    default: w.flops = q(0); break;  // unary, binary, resize: push[0] is the output count
  }
  if (d.kernel != Kernel::kMatMul && d.kernel != Kernel::kConv) w.executed_flops = w.flops;
  return w;
}

// The work of every dispatch of `program`, in order.
inline std::vector<DispatchWork> program_work(const BlobProgram& program) {
  std::vector<DispatchWork> out;
  out.reserve(program.dispatches.size());
  for (size_t i = 0; i < program.dispatches.size(); ++i) out.push_back(dispatch_work(program, i));
  return out;
}

}  // namespace loom::vulkan
