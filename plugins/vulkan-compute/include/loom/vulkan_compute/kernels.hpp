// The kernels of the vulkan-compute blob format: push-constant layouts,
// builders (used by the compiler and by tests), and the validator run on
// every dispatch at executable_check and load. Header-only.
//
// 1-D kernels (unary, binary) run 256 invocations per workgroup over a 2-D
// grid: x = min(groups, 65535), y = ceil(groups / 65535).
//
//   unary   bindings x, y.       push: count, op, alpha (f32 bits), beta (f32 bits)
//   binary  bindings a, b, y.    push: count, op, rank, dims[6], a strides[6],
//                                      b strides[6] (element strides; 0 broadcasts)
//   matmul  bindings a, b, c, y. push: M, N, K, batch, a batch stride,
//           b batch stride, c batch stride, flags, alpha, beta, c row stride,
//           c column stride. flags: bit 0 A transposed (stored K x M), bit 1 B
//           transposed (N x K), bit 2 add beta * C, bits 3-4 activation
//           (0 none, 1 Relu). y[b, m, n] = act(alpha * sum_k A B + beta * C).
//           Workgroups: ceil(N / 128), ceil(M / 128), batch; 16 x 16
//           invocations, each computing 8 x 8 outputs of a 128 x 128 tile.
//   softmax bindings x, y.       push: rows, n, inner, log (0 Softmax, 1
//           LogSoftmax). The tensors are viewed as (rows / inner, n, inner);
//           one invocation per row, 1-D grid over rows.
//   conv    bindings x, w, bias, y. push: N, C, H, W, M (output channels), OH,
//           OW, KH, KW, stride h, stride w, dilation h, dilation w, pad top,
//           pad left, group, flags (bit 2 bias, bits 3-4 activation as for
//           matmul), and from format 2 an optional 18th, splits S (1 when
//           absent). NCHW x, [M, C/group, KH, KW] w. Workgroups:
//           ceil(OH*OW / 64), ceil(M/group / 64), N*group*S; 16 x 16
//           invocations of 4 x 4 outputs of a 64 x 64 tile. With S > 1 the
//           reduction over (channel, kh, kw) is split into S slices (split-K,
//           for convolutions with few output tiles and a long reduction):
//           y holds S partial results, [S, N, M, OH, OW], bias added to slice
//           0 only, no activation; a reduce dispatch sums them.
//   pool    bindings x, y. push: planes (N*C), H, W, OH, OW, KH, KW, stride h,
//           stride w, dilation h, dilation w, pad top, pad left, mode (0 max,
//           1 average of the positions inside x, 2 average over KH*KW).
//           1-D grid over planes*OH*OW outputs.
//   reduce  bindings x, y. push: rows (outer * inner), n, inner, op (0 sum,
//           1 mean, 2 max, from format 2 also 3: sum then Relu) over the
//           middle axis of an (outer, n, inner) view of x; y has `rows`
//           elements. 1-D grid over rows.
//   layernorm bindings x, scale, bias, y. push: rows, n, has bias (0/1; bias
//           is bound to scale when 0), epsilon (f32 bits). Normalizes each
//           of `rows` runs of n consecutive elements; scale and bias have n
//           elements. 1-D grid over rows.
//   copy    bindings x, y. push: count, rank, x offset, y offset, dims[6],
//           x strides[6] (signed, as i32 bits), y strides[6]. Copies the box
//           of `dims`: element i of the box from x[x offset + sum i_d sx_d]
//           to y[y offset + sum i_d sy_d] (Slice, Concat). 1-D grid over
//           count.
//   resize  bindings x, table, y. push: count, rank, in dims[6], out dims[6].
//           The table holds 3 floats (i0, i1, w) per output coordinate of
//           each axis, axes in order (3 * sum of out dims floats); axis d
//           at output coordinate o reads (1 - w) * x[i0] + w * x[i1] along
//           d, taps clamped to [0, in dim - 1]: n-linear (and nearest, with
//           i0 == i1, w == 0) interpolation over every axis. 1-D grid over
//           count.
//   direct_conv bindings x, w, bias, y. push: as conv (17; no splits).
//           One invocation per output element, 1-D grid over N*M*OH*OW: for
//           grouped convolutions with few channels per group (depthwise).
//   conv_transpose bindings x, w, bias, y. push: as conv (N, C, H, W, M, OH,
//           OW, KH, KW, strides, dilations, pad top, pad left, group, flags
//           with bit 2 bias only). NCHW x, [C, M/group, KH, KW] w; one
//           invocation per output element, 1-D grid over N*M*OH*OW.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "loom/vulkan_compute/blob_format.hpp"

namespace loom::vulkan {

enum class UnaryOp : uint32_t {
  kIdentity = 0, kRelu, kSigmoid, kTanh, kExp, kSqrt, kErf, kAbs, kNeg, kClip, kHardSigmoid,
  kHardSwish, kLeakyRelu, kLog, kReciprocal, kFloor, kCeil, kElu, kSoftplus, kSin, kCos,
  kCount
};

// kCopyA copies a (b is not read): Transpose and Expand as strided copies.
enum class BinaryOp : uint32_t { kAdd = 0, kSub, kMul, kDiv, kPow, kMax, kMin, kPRelu, kCopyA, kCount };

inline constexpr uint32_t kBinaryMaxRank = 6;
inline constexpr uint32_t kLinearGroupSize = 256;
inline constexpr uint32_t kMatMulTile = 128;
inline constexpr uint32_t kConvTile = 64;
inline constexpr uint32_t kMatMulTransA = 1u, kMatMulTransB = 2u, kMatMulBias = 4u;
inline constexpr uint32_t kMatMulActShift = 3u;

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The 2-D grid of a 1-D kernel over `count` elements.
inline void linear_groups(uint64_t count, uint32_t out[3]) {
  const uint64_t groups = (count + kLinearGroupSize - 1) / kLinearGroupSize;
  out[0] = static_cast<uint32_t>(groups < 65535 ? groups : 65535);
  out[1] = static_cast<uint32_t>(groups == 0 ? 0 : (groups + 65534) / 65535);
  out[2] = groups == 0 ? 0 : 1;
}

inline BlobDispatch make_unary(UnaryOp op, uint32_t x, uint32_t y, uint64_t count, float alpha = 0,
                               float beta = 0) {
  BlobDispatch d;
  d.kernel = Kernel::kUnary;
  d.bindings = {x, y};
  d.push = {static_cast<uint32_t>(count), static_cast<uint32_t>(op), float_bits(alpha),
            float_bits(beta)};
  linear_groups(count, d.groups);
  return d;
}

// `dims` is the output shape (rank <= 6); `sa`/`sb` the element strides of
// a and b per output dimension (0 where the operand broadcasts).
inline BlobDispatch make_binary(BinaryOp op, uint32_t a, uint32_t b, uint32_t y,
                                const std::vector<int64_t>& dims, const std::vector<uint64_t>& sa,
                                const std::vector<uint64_t>& sb) {
  BlobDispatch d;
  d.kernel = Kernel::kBinary;
  d.bindings = {a, b, y};
  uint64_t count = 1;
  for (int64_t v : dims) count *= static_cast<uint64_t>(v);
  d.push.assign(3 + 3 * kBinaryMaxRank, 0);
  d.push[0] = static_cast<uint32_t>(count);
  d.push[1] = static_cast<uint32_t>(op);
  d.push[2] = static_cast<uint32_t>(dims.size());
  for (size_t i = 0; i < dims.size() && i < kBinaryMaxRank; ++i) {
    d.push[3 + i] = static_cast<uint32_t>(dims[i]);
    d.push[3 + kBinaryMaxRank + i] = static_cast<uint32_t>(sa[i]);
    d.push[3 + 2 * kBinaryMaxRank + i] = static_cast<uint32_t>(sb[i]);
  }
  linear_groups(count, d.groups);
  return d;
}

struct MatMulParams {
  uint32_t m = 0, n = 0, k = 0, batch = 1;
  uint32_t a_stride = 0, b_stride = 0, c_stride = 0;  // per batch, in elements
  bool trans_a = false, trans_b = false, bias = false;
  uint32_t act = 0;  // 0 none, 1 relu
  float alpha = 1, beta = 1;
  uint32_t c_row = 0, c_col = 0;  // C strides per output row / column
};

// `c` is ignored (bound to `a`) when !p.bias.
inline BlobDispatch make_matmul(const MatMulParams& p, uint32_t a, uint32_t b, uint32_t c,
                                uint32_t y) {
  BlobDispatch d;
  d.kernel = Kernel::kMatMul;
  d.bindings = {a, b, p.bias ? c : a, y};
  const uint32_t flags = (p.trans_a ? kMatMulTransA : 0) | (p.trans_b ? kMatMulTransB : 0) |
                         (p.bias ? kMatMulBias : 0) | (p.act << kMatMulActShift);
  d.push = {p.m, p.n, p.k, p.batch, p.a_stride, p.b_stride, p.c_stride, flags,
            float_bits(p.alpha), float_bits(p.beta), p.c_row, p.c_col};
  d.groups[0] = (p.n + kMatMulTile - 1) / kMatMulTile;
  d.groups[1] = (p.m + kMatMulTile - 1) / kMatMulTile;
  d.groups[2] = p.batch;
  return d;
}

// Softmax (or LogSoftmax) over the middle axis of an (outer, n, inner) view.
inline BlobDispatch make_softmax(uint32_t x, uint32_t y, uint64_t outer, uint64_t n, uint64_t inner,
                                 bool log_softmax) {
  BlobDispatch d;
  d.kernel = Kernel::kSoftmax;
  d.bindings = {x, y};
  d.push = {static_cast<uint32_t>(outer * inner), static_cast<uint32_t>(n),
            static_cast<uint32_t>(inner), log_softmax ? 1u : 0u};
  linear_groups(outer * inner, d.groups);
  return d;
}

struct ConvParams {
  uint32_t n = 1, c = 1, h = 1, w = 1, m = 1, oh = 1, ow = 1, kh = 1, kw = 1;
  uint32_t sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, group = 1;
  bool bias = false;
  uint32_t act = 0;
  uint32_t splits = 1;  // split-K slices (y then holds `splits` partial results)
};

inline constexpr uint32_t kConvMaxSplits = 64;

// Whether a convolution runs as direct_conv rather than as conv's implicit
// GEMM: grouped, fewer than 16 output channels per group (the GEMM's tile
// would be mostly empty rows) and a short reduction per output.
inline bool conv_is_direct(const ConvParams& p) {
  return p.group > 1 && p.m / p.group < 16 && uint64_t{p.c / p.group} * p.kh * p.kw <= 256;
}

inline constexpr uint32_t kReduceSumRelu = 3;

// How many split-K slices a convolution gets: enough for about 128
// workgroups when its output tiles are fewer than 64, each slice at least
// 256 deep in its reduction, at most 16. 1 (no split) otherwise.
inline uint32_t conv_splits(const ConvParams& p) {
  if (p.group == 0) return 1;
  const uint64_t tiles = ((uint64_t{p.oh} * p.ow + kConvTile - 1) / kConvTile) *
                         ((p.m / p.group + kConvTile - 1) / kConvTile) * p.n * p.group;
  const uint64_t k = uint64_t{p.c / p.group} * p.kh * p.kw;
  if (tiles == 0 || tiles >= 64 || k < 512) return 1;
  uint64_t s = std::min<uint64_t>({16, (128 + tiles - 1) / tiles, k / 256});
  if (uint64_t{p.n} * p.group * s > 65535) s = 1;
  return static_cast<uint32_t>(std::max<uint64_t>(s, 1));
}

// `bias` is ignored (bound to `x`) when !p.bias.
inline BlobDispatch make_conv(const ConvParams& p, uint32_t x, uint32_t w, uint32_t bias,
                              uint32_t y) {
  BlobDispatch d;
  d.kernel = Kernel::kConv;
  d.bindings = {x, w, p.bias ? bias : x, y};
  d.push = {p.n,  p.c,  p.h,  p.w,  p.m,  p.oh, p.ow,   p.kh, p.kw,
            p.sh, p.sw, p.dh, p.dw, p.pt, p.pl, p.group,
            (p.bias ? kMatMulBias : 0) | (p.act << kMatMulActShift)};
  if (p.splits != 1) d.push.push_back(p.splits);  // format 2
  const uint64_t pixels = uint64_t{p.oh} * p.ow;
  d.groups[0] = static_cast<uint32_t>((pixels + kConvTile - 1) / kConvTile);
  d.groups[1] = p.group == 0 ? 0 : (p.m / p.group + kConvTile - 1) / kConvTile;
  d.groups[2] = p.n * p.group * p.splits;
  return d;
}

// conv's bindings and 17 push constants (never split), one invocation per
// output.
inline BlobDispatch make_direct_conv(const ConvParams& p, uint32_t x, uint32_t w, uint32_t bias,
                                     uint32_t y) {
  ConvParams whole = p;
  whole.splits = 1;
  BlobDispatch d = make_conv(whole, x, w, bias, y);
  d.kernel = Kernel::kDirectConv;
  linear_groups(uint64_t{p.n} * p.m * p.oh * p.ow, d.groups);
  return d;
}

struct PoolParams {
  uint32_t planes = 1, h = 1, w = 1, oh = 1, ow = 1, kh = 1, kw = 1;
  uint32_t sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, mode = 0;
};

inline BlobDispatch make_pool(const PoolParams& p, uint32_t x, uint32_t y) {
  BlobDispatch d;
  d.kernel = Kernel::kPool;
  d.bindings = {x, y};
  d.push = {p.planes, p.h, p.w, p.oh, p.ow, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw, p.pt, p.pl, p.mode};
  linear_groups(uint64_t{p.planes} * p.oh * p.ow, d.groups);
  return d;
}

// ReduceSum (op 0), ReduceMean (1) or ReduceMax (2) over the middle axis of
// an (outer, n, inner) view.
inline BlobDispatch make_reduce(uint32_t x, uint32_t y, uint64_t outer, uint64_t n, uint64_t inner,
                                uint32_t op) {
  BlobDispatch d;
  d.kernel = Kernel::kReduce;
  d.bindings = {x, y};
  d.push = {static_cast<uint32_t>(outer * inner), static_cast<uint32_t>(n),
            static_cast<uint32_t>(inner), op};
  linear_groups(outer * inner, d.groups);
  return d;
}

// LayerNormalization of `rows` runs of n elements; `bias` is ignored (bound
// to `scale`) when !has_bias.
inline BlobDispatch make_layernorm(uint32_t x, uint32_t scale, uint32_t bias, uint32_t y,
                                   uint64_t rows, uint64_t n, bool has_bias, float epsilon) {
  BlobDispatch d;
  d.kernel = Kernel::kLayerNorm;
  d.bindings = {x, scale, has_bias ? bias : scale, y};
  d.push = {static_cast<uint32_t>(rows), static_cast<uint32_t>(n), has_bias ? 1u : 0u,
            float_bits(epsilon)};
  linear_groups(rows, d.groups);
  return d;
}

// A strided box copy (Slice, Concat). `dims` has at most kBinaryMaxRank
// entries; x strides may be negative.
inline BlobDispatch make_copy(uint32_t x, uint32_t y, const std::vector<int64_t>& dims,
                              const std::vector<int64_t>& sx, const std::vector<uint64_t>& sy,
                              uint64_t x0, uint64_t y0) {
  BlobDispatch d;
  d.kernel = Kernel::kCopy;
  d.bindings = {x, y};
  uint64_t count = 1;
  for (int64_t v : dims) count *= static_cast<uint64_t>(v);
  d.push.assign(4 + 3 * kBinaryMaxRank, 0);
  d.push[0] = static_cast<uint32_t>(count);
  d.push[1] = static_cast<uint32_t>(dims.size());
  d.push[2] = static_cast<uint32_t>(x0);
  d.push[3] = static_cast<uint32_t>(y0);
  for (size_t i = 0; i < dims.size() && i < kBinaryMaxRank; ++i) {
    d.push[4 + i] = static_cast<uint32_t>(dims[i]);
    d.push[4 + kBinaryMaxRank + i] = static_cast<uint32_t>(static_cast<int32_t>(sx[i]));
    d.push[4 + 2 * kBinaryMaxRank + i] = static_cast<uint32_t>(sy[i]);
  }
  linear_groups(count, d.groups);
  return d;
}

// Resize through per-axis tap tables (the table's layout: see the kernel
// list above). `in` and `out` have the same rank, at most kBinaryMaxRank.
inline BlobDispatch make_resize(uint32_t x, uint32_t table, uint32_t y, const std::vector<int64_t>& in,
                                const std::vector<int64_t>& out) {
  BlobDispatch d;
  d.kernel = Kernel::kResize;
  d.bindings = {x, table, y};
  uint64_t count = 1;
  for (int64_t v : out) count *= static_cast<uint64_t>(v);
  d.push.assign(2 + 2 * kBinaryMaxRank, 0);
  d.push[0] = static_cast<uint32_t>(count);
  d.push[1] = static_cast<uint32_t>(out.size());
  for (size_t i = 0; i < out.size() && i < kBinaryMaxRank; ++i) {
    d.push[2 + i] = static_cast<uint32_t>(in[i]);
    d.push[2 + kBinaryMaxRank + i] = static_cast<uint32_t>(out[i]);
  }
  linear_groups(count, d.groups);
  return d;
}

// A 2-D transposed convolution; ConvParams as for conv (m is the output
// channels, all groups; act must be 0). `bias` is ignored (bound to `x`)
// when !p.bias.
inline BlobDispatch make_conv_transpose(const ConvParams& p, uint32_t x, uint32_t w, uint32_t bias,
                                        uint32_t y) {
  BlobDispatch d;
  d.kernel = Kernel::kConvTranspose;
  d.bindings = {x, w, p.bias ? bias : x, y};
  d.push = {p.n,  p.c,  p.h,  p.w,  p.m,  p.oh, p.ow,   p.kh, p.kw,
            p.sh, p.sw, p.dh, p.dw, p.pt, p.pl, p.group, p.bias ? kMatMulBias : 0u};
  linear_groups(uint64_t{p.n} * p.m * p.oh * p.ow, d.groups);
  return d;
}

struct Int8Features;
inline bool validate_int8_dispatch(const BlobProgram& prog, const BlobDispatch& d, const std::string& where,
                                   uint32_t groups[3], std::string* error);

// Checks one dispatch of a structurally decoded program: binding and push
// counts, that every index the kernel computes from its push constants lies
// inside the bound tensors, and that the workgroup counts are the ones the
// kernel needs. False with `*error` ("dispatch 2 (binary): operand a reaches
// element 40, the tensor has 24") otherwise.
inline bool validate_dispatch(const BlobProgram& prog, size_t index, std::string* error) {
  const BlobDispatch& d = prog.dispatches[index];
  static const char* const kNames[] = {"unary",  "binary", "matmul",        "softmax",
                                       "conv",   "pool",   "reduce",        "layernorm",
                                       "copy",   "resize", "conv_transpose", "direct_conv",
                                       "quantize", "dequantize", "qconv", "qbinary"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kBlobKernels, "a name for every kernel a blob may name");
  const std::string where = "dispatch " + std::to_string(index) + " (" +
                            kNames[static_cast<uint32_t>(d.kernel)] + "): ";
  auto fail = [&](const std::string& m) {
    *error = where + m;
    return false;
  };
  auto elements = [&](size_t binding) { return prog.tensors[d.bindings[binding]].elements(); };
  auto need = [&](size_t bindings, size_t push) {
    if (d.bindings.size() != bindings || d.push.size() != push) {
      *error = where + "has " + std::to_string(d.bindings.size()) + " bindings and " +
               std::to_string(d.push.size()) + " push constants, the kernel takes " +
               std::to_string(bindings) + " and " + std::to_string(push);
      return false;
    }
    return true;
  };
  auto reach = [&](const char* what, uint64_t last, uint64_t have) {
    if (last < have) return true;
    *error = where + "operand " + what + " reaches element " + std::to_string(last) +
             ", the tensor has " + std::to_string(have);
    return false;
  };
  uint32_t groups[3] = {0, 0, 0};
  if (!is_int8_kernel(d.kernel)) {
    // The f32 kernels read and write f32 only (format 4 has other dtypes).
    for (uint32_t b : d.bindings) {
      if (prog.tensors[b].dtype != DType::kF32) {
        return fail("binds tensor " + std::to_string(b) + " of " + dtype_text(prog.tensors[b].dtype) +
                    "; the kernel takes f32");
      }
    }
  }
  switch (d.kernel) {
    case Kernel::kQuantize:
    case Kernel::kDequantize:
    case Kernel::kQConv:
      if (!validate_int8_dispatch(prog, d, where, groups, error)) return false;
      break;
    case Kernel::kUnary: {
      if (!need(2, 4)) return false;
      const uint64_t count = d.push[0];
      if (d.push[1] >= static_cast<uint32_t>(UnaryOp::kCount)) {
        return fail("unknown unary op " + std::to_string(d.push[1]));
      }
      if (elements(0) != count || elements(1) != count) {
        return fail("count " + std::to_string(count) + " differs from the tensors' " +
                    std::to_string(elements(0)) + " and " + std::to_string(elements(1)) +
                    " elements");
      }
      linear_groups(count, groups);
      break;
    }
    case Kernel::kQBinary:
    case Kernel::kBinary: {
      const bool quantized = d.kernel == Kernel::kQBinary;
      if (!need(3, 3 + 3 * kBinaryMaxRank + (quantized ? 7 : 0))) return false;
      const uint64_t count = d.push[0];
      const uint32_t rank = d.push[2];
      if (d.push[1] >= static_cast<uint32_t>(BinaryOp::kCount)) {
        return fail("unknown binary op " + std::to_string(d.push[1]));
      }
      if (quantized) {
        // Add or Mul of u8 / i8 tensors, the types and zero points theirs.
        const uint32_t types = d.push[3 + 3 * kBinaryMaxRank];
        auto is8 = [](DType t) { return t == DType::kU8 || t == DType::kI8; };
        const DType ta = prog.tensors[d.bindings[0]].dtype, tb = prog.tensors[d.bindings[1]].dtype,
                    ty = prog.tensors[d.bindings[2]].dtype;
        if (d.push[1] != static_cast<uint32_t>(BinaryOp::kAdd) && d.push[1] != static_cast<uint32_t>(BinaryOp::kMul)) {
          return fail("qbinary runs Add or Mul, not op " + std::to_string(d.push[1]));
        }
        if (!is8(ta) || !is8(tb) || !is8(ty) || (types & 15) != static_cast<uint32_t>(ta) ||
            ((types >> 4) & 15) != static_cast<uint32_t>(tb) || ((types >> 8) & 15) != static_cast<uint32_t>(ty) ||
            (types >> 13) != 0) {
          return fail("the types push constant " + std::to_string(types) + " does not match a, b and y (u8 or i8)");
        }
        const DType zt[3] = {ta, tb, ty};
        for (int z = 0; z < 3; ++z) {
          const auto v = static_cast<int32_t>(d.push[4 + 3 * kBinaryMaxRank + z]);
          if (zt[z] == DType::kU8 ? (v < 0 || v > 255) : (v < -128 || v > 127)) {
            return fail("zero point " + std::to_string(z) + " (" + std::to_string(v) + ") is outside its type");
          }
        }
      }
      if (rank > kBinaryMaxRank) return fail("rank " + std::to_string(rank) + " exceeds 6");
      uint64_t product = 1, last_a = 0, last_b = 0;
      for (uint32_t i = 0; i < rank; ++i) {
        const uint64_t dim = d.push[3 + i];
        product *= dim;
        if (dim == 0) continue;
        last_a += (dim - 1) * d.push[3 + kBinaryMaxRank + i];
        last_b += (dim - 1) * d.push[3 + 2 * kBinaryMaxRank + i];
      }
      if (product != count || elements(2) != count) {
        return fail("count " + std::to_string(count) + ", dims give " + std::to_string(product) +
                    ", output has " + std::to_string(elements(2)));
      }
      if (count != 0 && (!reach("a", last_a, elements(0)) || !reach("b", last_b, elements(1)))) {
        return false;
      }
      linear_groups(count, groups);
      break;
    }
    case Kernel::kMatMul: {
      if (!need(4, 12)) return false;
      const uint64_t m = d.push[0], n = d.push[1], k = d.push[2], batch = d.push[3];
      const uint32_t flags = d.push[7];
      if ((flags >> kMatMulActShift) > 1 || (flags & ~((3u << kMatMulActShift) | 7u)) != 0) {
        return fail("unknown flags " + std::to_string(flags));
      }
      if (batch > 65535) return fail("batch " + std::to_string(batch) + " exceeds 65535");
      if (elements(3) != batch * m * n) {
        return fail("output has " + std::to_string(elements(3)) + " elements, batch*M*N is " +
                    std::to_string(batch * m * n));
      }
      if (batch != 0 && m != 0 && n != 0) {
        if (k != 0 && (!reach("A", (batch - 1) * d.push[4] + m * k - 1, elements(0)) ||
                       !reach("B", (batch - 1) * d.push[5] + k * n - 1, elements(1)))) {
          return false;
        }
        if ((flags & kMatMulBias) &&
            !reach("C", (batch - 1) * d.push[6] + (m - 1) * d.push[10] + (n - 1) * d.push[11],
                   elements(2))) {
          return false;
        }
      }
      groups[0] = static_cast<uint32_t>((n + kMatMulTile - 1) / kMatMulTile);
      groups[1] = static_cast<uint32_t>((m + kMatMulTile - 1) / kMatMulTile);
      groups[2] = static_cast<uint32_t>(batch);
      break;
    }
    case Kernel::kSoftmax: {
      if (!need(2, 4)) return false;
      const uint64_t rows = d.push[0], n = d.push[1], inner = d.push[2];
      if (inner == 0 || rows % inner != 0 || d.push[3] > 1) {
        return fail("rows " + std::to_string(rows) + " and inner " + std::to_string(inner) +
                    " do not form a view, or log flag " + std::to_string(d.push[3]) + " is not 0/1");
      }
      if (rows * n != elements(0) || rows * n != elements(1)) {
        return fail("rows x n = " + std::to_string(rows * n) + " differs from the tensors' " +
                    std::to_string(elements(0)) + " and " + std::to_string(elements(1)) +
                    " elements");
      }
      linear_groups(rows, groups);
      break;
    }
    case Kernel::kConv:
    case Kernel::kDirectConv:
    case Kernel::kConvTranspose: {
      // The same push layout; the weight layout, flags and grid differ.
      const bool transposed = d.kernel == Kernel::kConvTranspose;
      const bool direct = d.kernel == Kernel::kDirectConv;
      if (transposed || direct || d.push.size() != 18) {
        if (!need(4, 17)) return false;
      } else if (d.bindings.size() != 4) {
        return need(4, 18);
      }
      const uint32_t* q = d.push.data();
      const uint64_t splits = d.push.size() == 18 ? q[17] : 1;
      if (splits == 0 || splits > kConvMaxSplits) {
        return fail("splits " + std::to_string(splits) + " is outside 1.." +
                    std::to_string(kConvMaxSplits));
      }
      const uint64_t n = q[0], c = q[1], h = q[2], w = q[3], m = q[4], oh = q[5], ow = q[6];
      const uint64_t kh = q[7], kw = q[8], group = q[15], flags = q[16];
      for (int i = 7; i <= 15; ++i) {
        if (q[i] == 0 && i != 13 && i != 14) return fail("push constant " + std::to_string(i) + " is 0");
      }
      if (c % group != 0 || m % group != 0) {
        return fail("channels " + std::to_string(c) + " -> " + std::to_string(m) +
                    " do not divide into " + std::to_string(group) + " groups");
      }
      const uint64_t known = transposed ? uint64_t{kMatMulBias} : (3u << kMatMulActShift) | kMatMulBias;
      if ((flags & ~known) != 0 || (flags >> kMatMulActShift) > 1) {
        return fail("unknown flags " + std::to_string(flags));
      }
      if (!transposed && n * group * splits > 65535) return fail("N x group x splits exceeds 65535");
      if (splits > 1 && (flags >> kMatMulActShift) != 0) {
        return fail("a split convolution writes partial results: it takes no activation");
      }
      const uint64_t weights = transposed ? c * (m / group) * kh * kw : m * (c / group) * kh * kw;
      if (elements(0) != n * c * h * w || elements(1) != weights ||
          elements(3) != splits * n * m * oh * ow || ((flags & kMatMulBias) && elements(2) < m)) {
        return fail("tensor sizes do not match N " + std::to_string(n) + ", C " + std::to_string(c) +
                    ", H " + std::to_string(h) + ", W " + std::to_string(w) + ", M " +
                    std::to_string(m) + ", OH " + std::to_string(oh) + ", OW " +
                    std::to_string(ow) + ", kernel " + std::to_string(kh) + "x" + std::to_string(kw));
      }
      if (transposed || direct) {
        linear_groups(n * m * oh * ow, groups);
      } else {
        groups[0] = static_cast<uint32_t>((oh * ow + kConvTile - 1) / kConvTile);
        groups[1] = static_cast<uint32_t>((m / group + kConvTile - 1) / kConvTile);
        groups[2] = static_cast<uint32_t>(n * group * splits);
      }
      break;
    }
    case Kernel::kPool: {
      if (!need(2, 14)) return false;
      const uint32_t* q = d.push.data();
      for (int i = 5; i <= 10; ++i) {
        if (q[i] == 0) return fail("push constant " + std::to_string(i) + " is 0");
      }
      if (q[13] > 2) return fail("unknown mode " + std::to_string(q[13]));
      const uint64_t planes = q[0], outputs = planes * q[3] * q[4];
      if (elements(0) != planes * q[1] * q[2] || elements(1) != outputs) {
        return fail("tensor sizes do not match " + std::to_string(planes) + " planes of " +
                    std::to_string(q[1]) + "x" + std::to_string(q[2]) + " -> " +
                    std::to_string(q[3]) + "x" + std::to_string(q[4]));
      }
      linear_groups(outputs, groups);
      break;
    }
    case Kernel::kReduce: {
      if (!need(2, 4)) return false;
      const uint64_t rows = d.push[0], n = d.push[1], inner = d.push[2];
      if (inner == 0 || rows % inner != 0 || d.push[3] > kReduceSumRelu) {
        return fail("rows " + std::to_string(rows) + " and inner " + std::to_string(inner) +
                    " do not form a view, or op " + std::to_string(d.push[3]) + " is unknown");
      }
      if (rows * n != elements(0) || rows != elements(1)) {
        return fail("rows x n = " + std::to_string(rows * n) + " and rows " + std::to_string(rows) +
                    " differ from the tensors' " + std::to_string(elements(0)) + " and " +
                    std::to_string(elements(1)) + " elements");
      }
      linear_groups(rows, groups);
      break;
    }
    case Kernel::kLayerNorm: {
      if (!need(4, 4)) return false;
      const uint64_t rows = d.push[0], n = d.push[1];
      if (n == 0 || d.push[2] > 1) {
        return fail("n " + std::to_string(n) + " is 0 or the bias flag " + std::to_string(d.push[2]) +
                    " is not 0/1");
      }
      if (rows * n != elements(0) || rows * n != elements(3) || elements(1) != n ||
          (d.push[2] == 1 && elements(2) != n)) {
        return fail("rows " + std::to_string(rows) + " x n " + std::to_string(n) +
                    " does not match x, y, scale and bias (" + std::to_string(elements(0)) + ", " +
                    std::to_string(elements(3)) + ", " + std::to_string(elements(1)) + ", " +
                    std::to_string(elements(2)) + " elements)");
      }
      linear_groups(rows, groups);
      break;
    }
    case Kernel::kCopy: {
      if (!need(2, 4 + 3 * kBinaryMaxRank)) return false;
      const uint64_t count = d.push[0];
      const uint32_t rank = d.push[1];
      if (rank > kBinaryMaxRank) return fail("rank " + std::to_string(rank) + " exceeds 6");
      // The lowest and highest element of x and y the box reaches.
      int64_t x_low = d.push[2], x_high = d.push[2];
      uint64_t y_high = d.push[3], product = 1;
      for (uint32_t i = 0; i < rank; ++i) {
        const uint64_t dim = d.push[4 + i];
        product *= dim;
        if (dim == 0) continue;
        const int64_t sx = static_cast<int32_t>(d.push[4 + kBinaryMaxRank + i]);
        (sx < 0 ? x_low : x_high) += static_cast<int64_t>(dim - 1) * sx;
        y_high += (dim - 1) * d.push[4 + 2 * kBinaryMaxRank + i];
      }
      for (uint32_t i = rank; i < kBinaryMaxRank; ++i) {
        if (d.push[4 + i] != 0 || d.push[4 + kBinaryMaxRank + i] != 0 || d.push[4 + 2 * kBinaryMaxRank + i] != 0) {
          return fail("dimension " + std::to_string(i) + " is past the rank but not zero");
        }
      }
      if (product != count) {
        return fail("count " + std::to_string(count) + ", dims give " + std::to_string(product));
      }
      if (count != 0) {
        if (x_low < 0) return fail("operand x reaches element " + std::to_string(x_low));
        if (!reach("x", static_cast<uint64_t>(x_high), elements(0)) || !reach("y", y_high, elements(1))) {
          return false;
        }
      }
      linear_groups(count, groups);
      break;
    }
    case Kernel::kResize: {
      if (!need(3, 2 + 2 * kBinaryMaxRank)) return false;
      const uint64_t count = d.push[0];
      const uint32_t rank = d.push[1];
      if (rank > kBinaryMaxRank) return fail("rank " + std::to_string(rank) + " exceeds 6");
      uint64_t in_count = 1, out_count = 1, taps = 0;
      for (uint32_t i = 0; i < kBinaryMaxRank; ++i) {
        const uint64_t in = d.push[2 + i], out = d.push[2 + kBinaryMaxRank + i];
        if (i >= rank) {
          if (in != 0 || out != 0) return fail("dimension " + std::to_string(i) + " is past the rank but not zero");
          continue;
        }
        if (in == 0 || out == 0) return fail("dimension " + std::to_string(i) + " is empty");
        in_count *= in;
        out_count *= out;
        taps += 3 * out;
      }
      if (count != out_count || elements(2) != count || elements(0) != in_count || elements(1) != taps) {
        return fail("x, table and y have " + std::to_string(elements(0)) + ", " +
                    std::to_string(elements(1)) + " and " + std::to_string(elements(2)) +
                    " elements; the dims need " + std::to_string(in_count) + ", " + std::to_string(taps) +
                    " and " + std::to_string(out_count) + " (count " + std::to_string(count) + ")");
      }
      linear_groups(count, groups);
      break;
    }
    default:
      return fail("unknown kernel");
  }
  for (int i = 0; i < 3; ++i) {
    if (d.groups[i] != groups[i]) {
      return fail("workgroups (" + std::to_string(d.groups[0]) + ", " + std::to_string(d.groups[1]) +
                  ", " + std::to_string(d.groups[2]) + ") differ from the (" +
                  std::to_string(groups[0]) + ", " + std::to_string(groups[1]) + ", " +
                  std::to_string(groups[2]) + ") the kernel needs");
    }
  }
  uint32_t written = d.bindings.back();
  if (prog.tensors[written].kind == TensorKind::kAlias) written = prog.tensors[written].alias;
  const TensorKind kind = prog.tensors[written].kind;
  if (kind != TensorKind::kIntermediate && kind != TensorKind::kOutput) {
    return fail("writes tensor " + std::to_string(written) +
                ", which is an input or a constant");
  }
  return true;
}

// decode_structure plus validate_dispatch on every dispatch, and element
// counts below 2^32 (the kernels index with 32 bits).
inline bool decode(const void* blob, size_t size, BlobProgram* out, std::string* error) {
  BlobProgram prog;
  if (!decode_structure(blob, size, &prog, error)) return false;
  for (size_t t = 0; t < prog.tensors.size(); ++t) {
    if (prog.tensors[t].elements() >= (uint64_t{1} << 32)) {
      *error = "tensor " + std::to_string(t) + " has 2^32 or more elements";
      return false;
    }
  }
  for (size_t i = 0; i < prog.dispatches.size(); ++i) {
    if (!validate_dispatch(prog, i, error)) return false;
  }
  *out = std::move(prog);
  return true;
}

}  // namespace loom::vulkan

#include "loom/vulkan_compute/int8_kernels.hpp"
