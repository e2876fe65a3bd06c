// The int8 kernels of blob format 4 (quantize, dequantize, qconv): their
// push-constant layouts, builders and validation, and which device features
// they need. Header-only; included by kernels.hpp (validate_dispatch calls
// validate_int8_dispatch).
//
//   quantize   bindings x (f32), table (f32: channels scales, then channels
//              zero points), y (u8 or i8). push: count, channels, inner,
//              signed (1 when y is i8). Element i uses channel
//              (i / inner) % channels. 1-D grid over count.
//   dequantize bindings x (u8, i8 or i32), table (as quantize), y (f32).
//              push: count, channels, inner, x dtype (DType: 1, 2 or 3).
//   qconv      bindings x (u8/i8), w (u8/i8), table (i32: per output
//              channel bias, w zero point, requantization multiplier as f32
//              bits), y (u8/i8: QLinearConv; i32: ConvInteger). push: conv's
//              first 16 (N, C, H, W, M, OH, OW, KH, KW, strides, dilations,
//              pad top, pad left, group), x zero point (i32 bits), y zero
//              point (i32 bits), types (x dtype | w dtype << 4 | y dtype <<
//              8 | b layout << 12). NCHW x, [M, C/group, KH, KW] w, or with
//              b layout (QLinearMatMul, MatMulInteger: rows of A as N images
//              of C channels, 1x1, one group) w is B as [C, M]. One
//              invocation per output, 1-D grid over N*M*OH*OW.
#pragma once

#include <string>

#include "loom/vulkan_compute/kernels.hpp"

namespace loom::vulkan {

// What a device offers of what the int8 kernels need (device.cpp reads it
// from VkPhysicalDeviceShaderFloat16Int8Features, VkPhysicalDevice8Bit-
// StorageFeatures, VkPhysicalDeviceFeatures and VkPhysicalDeviceShader-
// IntegerDotProductFeatures).
struct Int8Features {
  bool shader_int8 = false;      // shaderInt8 (VK_KHR_shader_float16_int8 / 1.2)
  bool storage_8bit = false;     // storageBuffer8BitAccess (VK_KHR_8bit_storage / 1.2)
  bool float64 = false;          // shaderFloat64 (exact requantization and quotients)
  bool integer_dot = false;      // shaderIntegerDotProduct (1.3): the convolutions use it (int8_dot.hpp)
};

// The features the int8 kernels need that `f` lacks, named as Vulkan names
// them and comma-separated; empty when the int8 kernels can run.
inline std::string int8_missing(const Int8Features& f) {
  std::string m;
  auto need = [&](bool have, const char* name) {
    if (!have) m += (m.empty() ? "" : ", ") + std::string(name);
  };
  need(f.shader_int8, "shaderInt8");
  need(f.storage_8bit, "storageBuffer8BitAccess");
  need(f.float64, "shaderFloat64");
  return m;
}

inline constexpr uint32_t kQConvPush = 19;
inline constexpr uint32_t kQConvBLayout = 1u << 12;

inline BlobDispatch make_quantize(uint32_t x, uint32_t table, uint32_t y, uint64_t count, uint32_t channels,
                                  uint64_t inner, bool is_signed) {
  BlobDispatch d;
  d.kernel = Kernel::kQuantize;
  d.bindings = {x, table, y};
  d.push = {static_cast<uint32_t>(count), channels, static_cast<uint32_t>(inner), is_signed ? 1u : 0u};
  linear_groups(count, d.groups);
  return d;
}

inline BlobDispatch make_dequantize(uint32_t x, uint32_t table, uint32_t y, uint64_t count, uint32_t channels,
                                    uint64_t inner, DType x_dtype) {
  BlobDispatch d;
  d.kernel = Kernel::kDequantize;
  d.bindings = {x, table, y};
  d.push = {static_cast<uint32_t>(count), channels, static_cast<uint32_t>(inner), static_cast<uint32_t>(x_dtype)};
  linear_groups(count, d.groups);
  return d;
}

// p as for conv (bias, act and splits unused: the bias is in the table);
// `b_layout`: w is a matmul's B, [C, M] (p a 1x1 convolution of one group).
// `round_first`: add y's zero point after rounding (kQConvRoundFirst, the
// fused QDQ form; format 5).
inline BlobDispatch make_qconv(const ConvParams& p, uint32_t x, uint32_t w, uint32_t table, uint32_t y,
                               int32_t x_zero, int32_t y_zero, DType xt, DType wt, DType yt,
                               bool b_layout = false, bool round_first = false) {
  BlobDispatch d;
  d.kernel = Kernel::kQConv;
  d.bindings = {x, w, table, y};
  d.push = {p.n,  p.c,  p.h,  p.w,  p.m,  p.oh, p.ow, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw, p.pt, p.pl, p.group,
            static_cast<uint32_t>(x_zero), static_cast<uint32_t>(y_zero),
            static_cast<uint32_t>(xt) | static_cast<uint32_t>(wt) << 4 | static_cast<uint32_t>(yt) << 8 |
                (b_layout ? kQConvBLayout : 0u) | (round_first ? kQConvRoundFirst : 0u)};
  linear_groups(uint64_t{p.n} * p.m * p.oh * p.ow, d.groups);
  return d;
}

// A transposed qconv (format 6, kQConvTransposed): the fused
// DequantizeLinear -> ConvTranspose -> QuantizeLinear. p as for
// make_conv_transpose (ConvTranspose's geometry), w [C, M / group, KH, KW];
// the sum is ConvTranspose's over the taps that reach each output, in i32,
// requantized as make_qconv's round_first.
inline BlobDispatch make_qconv_transpose(const ConvParams& p, uint32_t x, uint32_t w, uint32_t table, uint32_t y,
                                         int32_t x_zero, int32_t y_zero, DType xt, DType wt, DType yt) {
  BlobDispatch d = make_qconv(p, x, w, table, y, x_zero, y_zero, xt, wt, yt, false, true);
  d.push[kQConvTypesPush] |= kQConvTransposed;
  return d;
}

// qbinary (format 5): a quantized Add or Mul of two u8 / i8 tensors with
// binary's broadcasting (its 21 push constants: count, op 0 Add or 2 Mul,
// rank, dims, a and b strides), then types (a dtype | b dtype << 4 | y
// dtype << 8, kQBinarySwap), the three zero points and three f32
// parameters: Add u_ratio, w_ratio, fixed; Mul ratio (then unused, 0).
// ONNX Runtime's QLinearAdd / QLinearMul arithmetic (qbinary.comp).
inline constexpr uint32_t kQBinaryPush = 3 + 3 * kBinaryMaxRank + 7;
inline constexpr uint32_t kQBinarySwap = 1u << 12;  // Add: u is b (a is constant along the last dimension)

inline BlobDispatch make_qbinary(const BlobDispatch& binary, uint32_t a, uint32_t b, uint32_t y, DType at, DType bt,
                                 DType yt, bool swap, int32_t a_zero, int32_t b_zero, int32_t y_zero,
                                 const float params[3]) {
  BlobDispatch d = binary;
  d.kernel = Kernel::kQBinary;
  d.bindings = {a, b, y};
  d.push.resize(3 + 3 * kBinaryMaxRank);
  d.push.push_back(static_cast<uint32_t>(at) | static_cast<uint32_t>(bt) << 4 | static_cast<uint32_t>(yt) << 8 |
                   (swap ? kQBinarySwap : 0u));
  d.push.push_back(static_cast<uint32_t>(a_zero));
  d.push.push_back(static_cast<uint32_t>(b_zero));
  d.push.push_back(static_cast<uint32_t>(y_zero));
  for (int i = 0; i < 3; ++i) d.push.push_back(float_bits(params[i]));
  return d;
}

// validate_dispatch for the int8 kernels: bindings, push constants, the
// bound tensors' dtypes and sizes; `groups` gets the grid the kernel needs.
inline bool validate_int8_dispatch(const BlobProgram& prog, const BlobDispatch& d, const std::string& where,
                                   uint32_t groups[3], std::string* error) {
  auto fail = [&](const std::string& m) {
    *error = where + m;
    return false;
  };
  auto tensor = [&](size_t b) -> const BlobTensor& { return prog.tensors[d.bindings[b]]; };
  auto is8 = [](DType t) { return t == DType::kU8 || t == DType::kI8; };
  auto type_fail = [&](const char* what, DType t) {
    return fail(std::string(what) + " is " + dtype_text(t) + ", which the kernel does not take");
  };
  const size_t want_bindings = d.kernel == Kernel::kQConv ? 4 : 3;
  const size_t want_push = d.kernel == Kernel::kQConv ? kQConvPush : 4;
  if (d.bindings.size() != want_bindings || d.push.size() != want_push) {
    return fail("has " + std::to_string(d.bindings.size()) + " bindings and " + std::to_string(d.push.size()) +
                " push constants, the kernel takes " + std::to_string(want_bindings) + " and " +
                std::to_string(want_push));
  }
  if (d.kernel == Kernel::kQuantize || d.kernel == Kernel::kDequantize) {
    const bool quantize = d.kernel == Kernel::kQuantize;
    const uint64_t count = d.push[0], channels = d.push[1], inner = d.push[2];
    const DType xt = tensor(0).dtype, yt = tensor(2).dtype;
    if (quantize && xt != DType::kF32) return type_fail("x", xt);
    if (quantize && !is8(yt)) return type_fail("y", yt);
    if (quantize && d.push[3] != (yt == DType::kI8 ? 1u : 0u)) return fail("the signed flag does not match y");
    if (!quantize && !is8(xt) && xt != DType::kI32) return type_fail("x", xt);
    if (!quantize && yt != DType::kF32) return type_fail("y", yt);
    if (!quantize && d.push[3] != static_cast<uint32_t>(xt)) return fail("the x dtype push constant does not match x");
    if (tensor(1).dtype != DType::kF32) return type_fail("the table", tensor(1).dtype);
    if (channels == 0 || inner == 0) return fail("channels and inner must be at least 1");
    if (tensor(0).elements() != count || tensor(2).elements() != count) {
      return fail("count " + std::to_string(count) + " differs from x's " + std::to_string(tensor(0).elements()) +
                  " and y's " + std::to_string(tensor(2).elements()) + " elements");
    }
    if (channels > 1 && count % (channels * inner) != 0) {
      return fail(std::to_string(channels) + " channels of " + std::to_string(inner) + " do not divide count " +
                  std::to_string(count));
    }
    if (tensor(1).elements() != 2 * channels) {
      return fail("the table has " + std::to_string(tensor(1).elements()) + " elements, 2 x channels is " +
                  std::to_string(2 * channels));
    }
    linear_groups(count, groups);
    return true;
  }
  // kQConv
  const uint32_t* q = d.push.data();
  const uint64_t n = q[0], c = q[1], h = q[2], w = q[3], m = q[4], oh = q[5], ow = q[6];
  const uint64_t kh = q[7], kw = q[8], group = q[15];
  for (int i = 7; i <= 15; ++i) {
    if (q[i] == 0 && i != 13 && i != 14) return fail("push constant " + std::to_string(i) + " is 0");
  }
  if (c % group != 0 || m % group != 0) {
    return fail("channels " + std::to_string(c) + " -> " + std::to_string(m) + " do not divide into " +
                std::to_string(group) + " groups");
  }
  const uint32_t types = q[18];
  const bool transposed = (types & kQConvTransposed) != 0;
  if ((types >> 15) != 0 || (types & 15) != static_cast<uint32_t>(tensor(0).dtype) ||
      ((types >> 4) & 15) != static_cast<uint32_t>(tensor(1).dtype) ||
      ((types >> 8) & 15) != static_cast<uint32_t>(tensor(3).dtype)) {
    return fail("the types push constant " + std::to_string(types) + " does not match x, w and y");
  }
  if ((types & kQConvBLayout) && (kh != 1 || kw != 1 || h != 1 || w != 1 || oh != 1 || ow != 1 || group != 1 ||
                                  q[13] != 0 || q[14] != 0)) {
    return fail("a matmul's B layout needs a 1x1 convolution of 1x1 images in one group");
  }
  if (transposed && ((types & kQConvBLayout) || !(types & kQConvRoundFirst) || static_cast<DType>((types >> 8) & 15) == DType::kI32)) {
    return fail("a transposed qconv takes neither the B layout nor an i32 y, and rounds first");
  }
  if (!is8(tensor(0).dtype)) return type_fail("x", tensor(0).dtype);
  if (!is8(tensor(1).dtype)) return type_fail("w", tensor(1).dtype);
  if (tensor(2).dtype != DType::kI32) return type_fail("the table", tensor(2).dtype);
  const DType yt = tensor(3).dtype;
  if (!is8(yt) && yt != DType::kI32) return type_fail("y", yt);
  const int32_t x_zero = static_cast<int32_t>(q[16]), y_zero = static_cast<int32_t>(q[17]);
  auto in_range = [](int32_t v, DType t) { return t == DType::kU8 ? v >= 0 && v <= 255 : v >= -128 && v <= 127; };
  if (!in_range(x_zero, tensor(0).dtype)) return fail("x zero point " + std::to_string(x_zero) + " is outside x's type");
  if (yt != DType::kI32 && !in_range(y_zero, yt)) return fail("y zero point " + std::to_string(y_zero) + " is outside y's type");
  if (yt == DType::kI32 && y_zero != 0) return fail("an i32 y takes no zero point");
  const uint64_t weights = transposed ? c * (m / group) * kh * kw : m * (c / group) * kh * kw;
  if (tensor(0).elements() != n * c * h * w || tensor(1).elements() != weights ||
      tensor(3).elements() != n * m * oh * ow || tensor(2).elements() != 3 * m) {
    return fail("tensor sizes do not match N " + std::to_string(n) + ", C " + std::to_string(c) + ", H " +
                std::to_string(h) + ", W " + std::to_string(w) + ", M " + std::to_string(m) + ", OH " +
                std::to_string(oh) + ", OW " + std::to_string(ow) + ", kernel " + std::to_string(kh) + "x" +
                std::to_string(kw) + " (table: 3 x M)");
  }
  linear_groups(n * m * oh * ow, groups);
  return true;
}

}  // namespace loom::vulkan
