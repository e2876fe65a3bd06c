// Lowering of the quantized operators onto the int8 kernels (blob format 4,
// int8_kernels.hpp): QuantizeLinear, DequantizeLinear (per tensor and per
// axis, u8 and i8; DequantizeLinear also i32), QLinearConv and ConvInteger
// (2-D), QLinearMatMul and MatMulInteger (a 2-D B, as a 1x1 convolution). Declined, so that the node runs elsewhere, with the reason:
//  - where the compile target cannot run the int8 kernels (its devices lack
//    shaderInt8, storageBuffer8BitAccess or shaderFloat64, named);
//  - 16-bit (or float 8 / int 4, which graph.fbs cannot hold) types, blocked
//    quantization (block_size), output_dtype;
//  - scales, zero points and biases that are not inline constants (the
//    compiler folds them into a table), and values the reference kernels
//    refuse (a scale that is not positive and finite, a non-zero zero point
//    of an i32 DequantizeLinear): those run on the reference kernels, which
//    report the error.
#include <cmath>
#include <cstring>
#include <string>

#include "lowering.hpp"

namespace loom::vulkan::lowering {
namespace {

bool is8(loom_dtype_t d) { return d == LOOM_DTYPE_U8 || d == LOOM_DTYPE_I8; }

DType blob_dtype(loom_dtype_t d) {
  switch (d) {
    case LOOM_DTYPE_U8: return DType::kU8;
    case LOOM_DTYPE_I8: return DType::kI8;
    case LOOM_DTYPE_I32: return DType::kI32;
    default: return DType::kF32;
  }
}

bool one_element(const Shape& s) {
  uint64_t n = 1;
  for (int64_t d : s) n *= static_cast<uint64_t>(d < 0 ? 0 : d);
  return n == 1;
}

// The checks every quantized node starts with.
bool quant_common(Lowering& l) {
  const std::string why = l.int8_unavailable();
  if (!why.empty()) return l.fail(why);
  return true;
}

// Input i: an inline constant of `dtype`, its values as int64 (integers)
// or floats.
bool constant_ints(Lowering& l, size_t i, const char* what, loom_dtype_t dtype, std::vector<int64_t>* out) {
  sdk::TensorView t(nullptr, -1);
  if (!l.node().constant_input(i, &t).ok()) {
    return l.fail(std::string(what) + " is not an inline constant (vulkan-compute folds it into its table)");
  }
  if (t.dtype() != dtype) {
    return l.fail(std::string(what) + " is " + sdk::dtype_name(t.dtype()) + ", expected " + sdk::dtype_name(dtype));
  }
  return l.ok(t.read_ints(out));
}

// A scale: f32 inline constant, one element or `channels` (0: one only),
// every value positive and finite (the reference kernels refuse others).
bool constant_scales(Lowering& l, size_t i, const char* what, int64_t channels, std::vector<float>* out) {
  sdk::TensorView t(nullptr, -1);
  if (!l.node().constant_input(i, &t).ok()) {
    return l.fail(std::string(what) + " is not an inline constant (vulkan-compute folds it into its table)");
  }
  if (t.dtype() != LOOM_DTYPE_F32) {
    return l.fail(std::string(what) + " is " + sdk::dtype_name(t.dtype()) + ", expected f32");
  }
  const Shape s = t.shape();
  if (!one_element(s) && !(channels > 0 && s == Shape{channels})) {
    return l.fail(std::string(what) + " has shape " + shape_text(s) + ", expected one element" +
                  (channels > 0 ? " or [" + std::to_string(channels) + "]" : std::string()));
  }
  if (!l.ok(t.read_floats(out))) return false;
  for (float v : *out) {
    if (!(v > 0.0f) || !std::isfinite(v)) {
      return l.fail(std::string(what) + " holds " + std::to_string(v) +
                    "; a scale must be positive and finite (the reference kernels report it)");
    }
  }
  return true;
}

// A zero point of `dtype` with the shape of its scale (`count` values), or
// zeros when absent.
bool zero_points(Lowering& l, size_t i, const char* what, loom_dtype_t dtype, size_t count,
                 std::vector<int64_t>* out) {
  if (!l.present(i)) {
    out->assign(count, 0);
    return true;
  }
  if (!constant_ints(l, i, what, dtype, out)) return false;
  if (out->size() == 1 && count > 1) out->assign(count, (*out)[0]);
  if (out->size() != count) {
    return l.fail(std::string(what) + " has " + std::to_string(out->size()) + " values, its scale " +
                  std::to_string(count));
  }
  return true;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

bool lower_quantize(Lowering& l, bool quantize) {
  Lowered& o = l.out();
  o.kind = quantize ? Lowered::Kind::kQuantize : Lowered::Kind::kDequantize;
  if (!quant_common(l)) return false;
  if (l.opset() < 10) return l.fail("opset " + std::to_string(l.opset()) + " has no " + l.op());
  if (l.has("block_size")) {
    int64_t block = 0;
    if (!l.get_int("block_size", 0, &block)) return false;
    if (block != 0) return l.fail("blocked quantization (block_size " + std::to_string(block) + ") is not run");
  }
  if (l.has("output_dtype")) return l.fail("output_dtype is not run by vulkan-compute");
  if (!l.attributes({{"axis", 13}, {"saturate", 19}, {"block_size", 21}}) || !l.inputs(2, 3)) return false;
  const loom_dtype_t xd = l.node().input(0).dtype();
  loom_dtype_t zd = l.present(2) ? l.node().input(2).dtype() : (quantize ? LOOM_DTYPE_U8 : xd);
  if (quantize ? !is8(zd) : !(is8(xd) || xd == LOOM_DTYPE_I32)) {
    return l.fail(std::string(quantize ? "the zero point" : "x") + " is " + sdk::dtype_name(quantize ? zd : xd) +
                  "; vulkan-compute quantizes to u8 and i8 and dequantizes u8, i8 and i32");
  }
  if (!quantize && zd != xd) return l.fail("the zero point's type differs from x's");
  if (!(quantize ? l.data(0) : l.typed_data(0, xd)) || !l.output(quantize ? zd : LOOM_DTYPE_F32) ||
      !same_shape_out(l)) {
    return false;
  }
  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = 1;
  if (!l.get_int("axis", 1, &axis)) return false;
  const Shape s = l.node().input(1).shape();
  int64_t channels = 0;
  o.inner = 1;
  if (!one_element(s)) {
    if (l.opset() < 13) return l.fail("a per-axis scale before opset 13");
    if (axis < -rank || axis >= rank) return l.fail("axis " + std::to_string(axis) + " is out of range");
    if (axis < 0) axis += rank;
    channels = x[static_cast<size_t>(axis)];
    for (int64_t d = axis + 1; d < rank; ++d) o.inner *= static_cast<uint64_t>(x[static_cast<size_t>(d)]);
  }
  if (l.present(2)) {
    // The reference kernels want the zero point in the scale's shape.
    const Shape z = l.node().input(2).shape();
    if (z != s && !(one_element(z) && one_element(s))) {
      return l.fail("the zero point has shape " + shape_text(z) + ", the scale " + shape_text(s) +
                    " (the reference kernels report it)");
    }
  }
  std::vector<float> scales;
  std::vector<int64_t> zeros;
  if (!constant_scales(l, 1, "the scale", channels, &scales) ||
      !zero_points(l, 2, "the zero point", zd, scales.size(), &zeros)) {
    return false;
  }
  if (!quantize && xd == LOOM_DTYPE_I32) {
    for (int64_t z : zeros) {
      if (z != 0) return l.fail("an i32 x takes zero point 0 only (the reference kernels report it)");
    }
  }
  o.channels = static_cast<uint32_t>(scales.size());
  o.table_dtype = DType::kF32;
  for (float v : scales) o.words.push_back(bits_of(v));
  for (int64_t z : zeros) o.words.push_back(bits_of(static_cast<float>(z)));
  o.x_dtype = blob_dtype(xd);
  o.y_dtype = quantize ? blob_dtype(zd) : DType::kF32;
  return true;
}

bool lower_qconv(Lowering& l, bool qlinear) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kQConv;
  if (!quant_common(l)) return false;
  if (l.opset() < 10) return l.fail("opset " + std::to_string(l.opset()) + " has no " + l.op());
  if (!l.attributes({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}) ||
      !l.inputs(qlinear ? 8 : 2, qlinear ? 9 : 4)) {
    return false;
  }
  const size_t wi = qlinear ? 3 : 1;
  const loom_dtype_t xd = l.node().input(0).dtype(), wd = l.node().input(wi).dtype();
  if (!is8(xd) || !is8(wd)) return l.fail("x and w must be u8 or i8");
  loom_dtype_t yd = LOOM_DTYPE_I32;
  if (qlinear) {
    yd = l.present(7) ? l.node().input(7).dtype() : LOOM_DTYPE_INVALID;
    if (!is8(yd)) return l.fail("y_zero_point must be u8 or i8");
  }
  if (!l.typed_data(0, xd) || !l.typed_data(wi, wd) || !l.output(yd) || !conv_geometry(l, wi, false, &o.conv)) {
    return false;
  }
  const int64_t m = l.shape_of(wi)[0];
  std::vector<float> xs, ws, ys;
  std::vector<int64_t> xz, wz, yz, bias(static_cast<size_t>(m), 0);
  if (qlinear) {
    if (!constant_scales(l, 1, "x_scale", 0, &xs) || !zero_points(l, 2, "x_zero_point", xd, 1, &xz) ||
        !constant_scales(l, 4, "w_scale", m, &ws) ||
        !zero_points(l, 5, "w_zero_point", wd, static_cast<size_t>(m), &wz) ||
        !constant_scales(l, 6, "y_scale", 0, &ys) ||
        !zero_points(l, 7, "y_zero_point", yd, 1, &yz)) {
      return false;
    }
    if (l.present(8)) {
      if (!constant_ints(l, 8, "the bias", LOOM_DTYPE_I32, &bias)) return false;
      if (bias.size() != static_cast<size_t>(m)) return l.fail("the bias must have M elements");
    }
  } else {
    if (!zero_points(l, 2, "x_zero_point", xd, 1, &xz)) return false;
    if (l.present(3)) {
      const Shape z = l.node().input(3).shape();
      if (!one_element(z) && z != Shape{m}) return l.fail("w_zero_point must have one or M elements");
    }
    if (!zero_points(l, 3, "w_zero_point", wd, l.present(3) && !one_element(l.node().input(3).shape()) ? m : 1, &wz)) {
      return false;
    }
    yz = {0};
  }
  if (wz.size() == 1) wz.assign(static_cast<size_t>(m), wz[0]);
  if (wz.size() != static_cast<size_t>(m)) return l.fail("w_zero_point must have one or M elements");
  for (int64_t c = 0; c < m; ++c) {
    const size_t k = static_cast<size_t>(c);
    // The reference kernel's multiplier, in f32: x_scale * w_scale / y_scale.
    const float multiplier = qlinear ? xs[0] * ws[ws.size() == 1 ? 0 : k] / ys[0] : 0.0f;
    o.words.push_back(static_cast<uint32_t>(static_cast<int32_t>(bias[k])));
    o.words.push_back(static_cast<uint32_t>(static_cast<int32_t>(wz[k])));
    o.words.push_back(bits_of(multiplier));
  }
  o.table_dtype = DType::kI32;
  o.x_dtype = blob_dtype(xd);
  o.w_dtype = blob_dtype(wd);
  o.y_dtype = blob_dtype(yd);
  o.x_zero = static_cast<int32_t>(xz[0]);
  o.y_zero = static_cast<int32_t>(yz[0]);
  return true;
}

// QLinearMatMul / MatMulInteger of A [..., M, K] (any rank >= 2, the
// leading dimensions flattened into rows) and a 2-D B [K, N] (an inline
// constant or given at run time), as the qconv kernel's 1x1 convolution of
// a batch of rows x with B read as [K, N] (the b layout): per-column b
// scales and zero points are per output channel. Declined: batched B, 1-D
// operands, per-row a scales or zero points.
bool lower_qmatmul(Lowering& l, bool qlinear) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kQConv;
  if (!quant_common(l)) return false;
  if (l.opset() < 10) return l.fail("opset " + std::to_string(l.opset()) + " has no " + l.op());
  if (!l.attributes({}) || !l.inputs(qlinear ? 8 : 2, qlinear ? 8 : 4)) return false;
  const size_t bi = qlinear ? 3 : 1;
  const loom_dtype_t ad = l.node().input(0).dtype(), bd = l.present(bi) ? l.node().input(bi).dtype() : LOOM_DTYPE_INVALID;
  if (!is8(ad) || !is8(bd)) return l.fail("A and B must be u8 or i8");
  loom_dtype_t yd = LOOM_DTYPE_I32;
  if (qlinear) {
    yd = l.node().input(7).dtype();
    if (!is8(yd)) return l.fail("y_zero_point must be u8 or i8");
  }
  if (!l.typed_data(0, ad) || !l.typed_data(bi, bd) || !l.output(yd)) return false;
  const Shape a = l.shape_of(0), bs = l.shape_of(bi);
  if (a.size() < 2 || bs.size() != 2) {
    return l.fail("A " + shape_text(a) + " and B " + shape_text(bs) + ": vulkan-compute runs A of rank >= 2 with a 2-D B");
  }
  const int64_t k = bs[0], n = bs[1];
  if (a.back() != k) return l.fail("A " + shape_text(a) + " and B " + shape_text(bs) + " do not multiply");
  Shape want(a.begin(), a.end() - 1);
  want.push_back(n);
  if (!l.output_is(want)) return l.fail("output shape " + shape_text(l.output_shape()) + " does not match A x B");
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < a.size(); ++d) rows *= a[d];
  if (rows <= 0 || k <= 0 || n <= 0) return l.fail("empty operands are not run");
  const int64_t m = a[a.size() - 2];
  std::vector<float> as, bscale, ys;
  std::vector<int64_t> az, bz, yz;
  auto per_row = [&](size_t i) {
    return l.present(i) && !one_element(l.node().input(i).shape()) && m > 1;
  };
  if (per_row(qlinear ? 1 : 2) || per_row(qlinear ? 2 : 2)) {
    return l.fail("per-row scales or zero points of A are not run by vulkan-compute");
  }
  auto b_count = [&](size_t i) -> size_t {
    return l.present(i) && !one_element(l.node().input(i).shape()) ? static_cast<size_t>(n) : 1;
  };
  if (qlinear) {
    if (!constant_scales(l, 1, "a_scale", 0, &as) || !zero_points(l, 2, "a_zero_point", ad, 1, &az) ||
        !constant_scales(l, 4, "b_scale", n, &bscale) ||
        !zero_points(l, 5, "b_zero_point", bd, static_cast<size_t>(n), &bz) ||
        !constant_scales(l, 6, "y_scale", 0, &ys) ||
        !zero_points(l, 7, "y_zero_point", yd, 1, &yz)) {
      return false;
    }
  } else {
    if (!zero_points(l, 2, "a_zero_point", ad, 1, &az) || !zero_points(l, 3, "b_zero_point", bd, b_count(3), &bz)) {
      return false;
    }
    yz = {0};
  }
  if (bz.size() == 1) bz.assign(static_cast<size_t>(n), bz[0]);
  if (bz.size() != static_cast<size_t>(n)) return l.fail("b_zero_point must have one or N elements");
  for (int64_t j = 0; j < n; ++j) {
    const size_t c = static_cast<size_t>(j);
    // The reference kernel's multiplier, in f32: a_scale * b_scale / y_scale.
    const float multiplier = qlinear ? as[0] * bscale[bscale.size() == 1 ? 0 : c] / ys[0] : 0.0f;
    o.words.push_back(0);  // no bias
    o.words.push_back(static_cast<uint32_t>(static_cast<int32_t>(bz[c])));
    o.words.push_back(bits_of(multiplier));
  }
  ConvParams& cp = o.conv;
  cp = ConvParams();
  cp.n = static_cast<uint32_t>(rows);
  cp.c = static_cast<uint32_t>(k);
  cp.m = static_cast<uint32_t>(n);
  o.b_layout = true;
  o.table_dtype = DType::kI32;
  o.x_dtype = blob_dtype(ad);
  o.w_dtype = blob_dtype(bd);
  o.y_dtype = blob_dtype(yd);
  o.x_zero = static_cast<int32_t>(az[0]);
  o.y_zero = static_cast<int32_t>(yz[0]);
  return true;
}

}  // namespace loom::vulkan::lowering
