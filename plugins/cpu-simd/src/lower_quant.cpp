// Lowering of the quantized operators (blob format 6): QuantizeLinear,
// DequantizeLinear, QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger.
//
// Two kinds of "no" (docs: plugins/cpu-simd/README.md, "Quantized operators"):
//  - legal ONNX that cpu-simd does not run (per-row scales or zero points of
//    the MatMul forms' A, float 8 / int 4 / 16-bit types, blocked
//    quantization; over open shapes, a per-channel axis left open, and SAME
//    padding, which lower.cpp's open_shapes_ok refuses): declined, so the
//    node runs on the reference kernels;
//  - input that no implementation can run correctly (a scale that is zero,
//    negative or not finite, a per-channel scale or zero point whose length is
//    not the channel count, a zero point whose dtype differs from its data's):
//    Lowering::invalid(), which compile_supported still claims so that
//    `compile` fails with one line naming the node instead of the reference
//    kernels producing a wrong answer. Such checks need the values, so they
//    apply to inline constants; values bound at run time are checked by the
//    executable before every run (an INVALID_ARGUMENT naming the node).
#include <cmath>
#include <string>

#include "lowering.hpp"

namespace loom::cpu_simd::lowering {

namespace {

bool is8(gfb::DType d) { return d == gfb::DType::u8 || d == gfb::DType::i8; }

bool one_element(const Shape& s) { return s.empty() || (s.size() == 1 && s[0] == 1); }

// Input `i`, a u8 / i8 / i32 / f32 tensor that the kernels read at run time.
bool quant_operand(Lowering& l, size_t i, const char* what) {
  if (!l.present(i)) return l.fail(std::string(what) + " is missing");
  const gfb::DType d = l.dtype_of(i);
  if (!is8(d) && d != gfb::DType::i32 && d != gfb::DType::f32) {
    return l.fail(std::string(what) + " is " + gfb::EnumNameDType(d) + "; cpu-simd runs u8, i8, i32 and f32 here");
  }
  if (!l.shape_ok(l.shape_of(i), what)) return false;
  for (int64_t d : l.shape_of(i)) {
    if (d == 0) return l.fail(std::string(what) + " is empty, which cpu-simd's int8 steps do not run");
  }
  l.node().inputs.push_back(static_cast<uint32_t>(l.input(i)));
  return true;
}

// A scale operand: f32, one element or `channels` (0: one element only).
// When it is an inline constant every value must be positive and finite.
bool scale_operand(Lowering& l, size_t i, const char* what, int64_t channels) {
  if (!l.present(i)) return l.fail(std::string(what) + " is missing");
  if (l.dtype_of(i) != gfb::DType::f32) {
    return l.fail(std::string(what) + " is " + gfb::EnumNameDType(l.dtype_of(i)) + "; cpu-simd takes f32 scales");
  }
  const Shape s = l.shape_of(i);
  if (!one_element(s)) {
    if (channels <= 0 || s.size() != 1) {
      return channels <= 0 && s.size() == 1
                 ? l.fail(std::string(what) + " " + detail::shape_string(s) +
                          " is per row or per channel, which cpu-simd does not run here")
                 : l.invalid(std::string(what) + " has shape " + detail::shape_string(s) +
                             ", expected one element" + (channels > 0 ? " or [" + std::to_string(channels) + "]" : ""));
    }
    if (s[0] != channels) {
      return l.invalid(std::string(what) + " has " + std::to_string(s[0]) + " entries, the channel count is " +
                       std::to_string(channels));
    }
  }
  std::vector<float> values;
  if (l.constant_values(i, &values)) {
    for (size_t k = 0; k < values.size(); ++k) {
      if (!(values[k] > 0.0f) || !std::isfinite(values[k])) {
        return l.invalid(std::string(what) + (values.size() > 1 ? " entry " + std::to_string(k) : std::string()) +
                         " is " + std::to_string(values[k]) + "; a scale must be positive and finite");
      }
    }
  }
  return quant_operand(l, i, what);
}

// A zero point operand of `want`'s dtype, the shape of scale operand `scale`.
bool zero_point_operand(Lowering& l, size_t i, const char* what, gfb::DType want, size_t scale) {
  const gfb::DType d = l.dtype_of(i);
  if (d != want) {
    return (is8(d) || d == gfb::DType::i32) && (is8(want) || want == gfb::DType::i32)
               ? l.invalid(std::string(what) + " is " + gfb::EnumNameDType(d) + " but its data is " +
                           gfb::EnumNameDType(want) + "; ONNX requires one type")
               : l.fail(std::string(what) + " is " + gfb::EnumNameDType(d) + ", which cpu-simd does not run");
  }
  const Shape z = l.shape_of(i);
  if (scale != SIZE_MAX && l.present(scale)) {
    const Shape s = l.shape_of(scale);
    if (z != s && !(one_element(z) && one_element(s))) {
      return l.invalid(std::string(what) + " has shape " + detail::shape_string(z) + ", its scale " +
                       detail::shape_string(s));
    }
  } else if (!one_element(z)) {
    return l.fail(std::string(what) + " " + detail::shape_string(z) + " is per row or per channel, "
                  "which cpu-simd does not run here");
  }
  return quant_operand(l, i, what);
}

// Conv geometry shared with lower_window: builds a temporary Conv lowering
// is not possible (operands differ), so the attributes are read here the
// same way.
bool conv_ints(Lowering& l, const Shape& x, const Shape& w) {
  if (!l.check_attributes({{"auto_pad", 10}, {"dilations", 10}, {"group", 10}, {"kernel_shape", 10},
                           {"pads", 10}, {"strides", 10}})) {
    return false;
  }
  if (x.size() < 3 || x.size() > static_cast<size_t>(2 + kMaxSpatial) || w.size() != x.size()) {
    return l.fail("input rank " + std::to_string(x.size()) + " and weight rank " + std::to_string(w.size()) +
                  " must be equal and 3 to " + std::to_string(2 + kMaxSpatial));
  }
  const size_t k = x.size() - 2;
  Shape kernel, strides, dilations, pads;
  std::string auto_pad;
  int64_t group = 1;
  if (!l.get_ints("kernel_shape", &kernel) || !l.get_ints("strides", &strides) ||
      !l.get_ints("dilations", &dilations) || !l.get_ints("pads", &pads) ||
      !l.get_string("auto_pad", "NOTSET", &auto_pad) || !l.get_int("group", 1, &group)) {
    return false;
  }
  const Shape from_w(w.begin() + 2, w.end());
  if (kernel.empty()) kernel = from_w;
  if (kernel != from_w) return l.fail("kernel_shape disagrees with the weight's shape");
  if (strides.empty()) strides.assign(k, 1);
  if (dilations.empty()) dilations.assign(k, 1);
  if (strides.size() != k || dilations.size() != k) {
    return l.fail("strides and dilations need " + std::to_string(k) + " entries");
  }
  for (size_t i = 0; i < k; ++i) {
    if (strides[i] < 1 || dilations[i] < 1 || strides[i] > kMaxAttr || dilations[i] > kMaxAttr) {
      return l.fail("strides and dilations must be positive and < 2^31");
    }
  }
  Shape begin(k, 0), end(k, 0);
  if (auto_pad == "NOTSET") {
    if (!pads.empty()) {
      if (pads.size() != 2 * k) return l.fail("pads needs " + std::to_string(2 * k) + " entries");
      for (size_t i = 0; i < k; ++i) {
        begin[i] = pads[i];
        end[i] = pads[k + i];
        if (begin[i] < 0 || end[i] < 0 || begin[i] > kMaxAttr || end[i] > kMaxAttr) {
          return l.fail("pads must be >= 0 and < 2^31");
        }
      }
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (!pads.empty()) return l.fail("pads together with auto_pad " + auto_pad);
    for (size_t i = 0; i < k; ++i) {
      const int64_t out = (x[2 + i] + strides[i] - 1) / strides[i];
      const int64_t span = (kernel[i] - 1) * dilations[i] + 1;
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + span - x[2 + i]);
      begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end[i] = total - begin[i];
    }
  } else if (auto_pad != "VALID") {
    return l.fail("auto_pad '" + auto_pad + "' is unknown");
  } else if (!pads.empty()) {
    return l.fail("pads together with auto_pad VALID");
  }
  BlobNode& n = l.node();
  n.ints = {static_cast<int64_t>(k), group};
  for (const Shape* v : {&kernel, &strides, &dilations, &begin, &end}) n.ints.insert(n.ints.end(), v->begin(), v->end());
  return true;
}

// MatMul shapes the int8 step runs: A of rank >= 2 with a 2-D B, or A and B
// of one rank (3 or 4) whose batch dimensions are equal.
bool matmul_shapes_ok(Lowering& l, const Shape& a, const Shape& b) {
  if (a.size() < 2 || b.size() < 2) return l.fail("1-D operands are not run by cpu-simd's int8 matmul");
  if (b.size() == 2) return true;
  if (a.size() != b.size() || a.size() > 4 || !std::equal(a.begin(), a.end() - 2, b.begin())) {
    return l.fail("A " + detail::shape_string(a) + " and B " + detail::shape_string(b) +
                  " need batch broadcasting, which cpu-simd's int8 matmul does not run");
  }
  return true;
}

bool quantize_linear(Lowering& l, bool quantize) {
  BlobNode& n = l.node();
  n.op = quantize ? Op::kQuantizeLinear : Op::kDequantizeLinear;
  if (l.opset() < 10) return l.fail("opset " + std::to_string(l.opset()) + " has no QuantizeLinear");
  if (l.opset() >= 19) {
    // Opsets 19 and later add float 8 types, `saturate`, blocked quantization
    // and `output_dtype`; accepted only as far as they change nothing here.
    if (!l.check_attributes({{"axis", 13}, {"saturate", 19}})) return false;
  } else if (!l.check_attributes({{"axis", 13}})) {
    return false;
  }
  if (!l.check_inputs(2, 3)) return false;
  const Shape x = l.shape_of(0);
  int64_t axis = 1;
  if (!l.get_int("axis", 1, &axis)) return false;
  const int64_t rank = static_cast<int64_t>(x.size());
  const Shape s = l.shape_of(1);
  int64_t channels = 0;
  if (!one_element(s)) {
    if (l.opset() < 13) return l.invalid("the scale must be a scalar before opset 13");
    if (axis < -rank || axis >= rank) return l.invalid("axis " + std::to_string(axis) + " is out of range");
    if (axis < 0) axis += rank;
    channels = x[static_cast<size_t>(axis)];
    if (channels < 0) {
      return l.fail("axis " + std::to_string(axis) + " of x " + detail::shape_string(x) +
                    " is open, which per-channel quantization on cpu-simd needs bound");
    }
  } else {
    axis = std::max<int64_t>(0, std::min<int64_t>(axis < 0 ? axis + rank : axis, rank - 1));
  }
  n.axis = axis;
  const gfb::DType xd = l.dtype_of(0);
  if (quantize ? xd != gfb::DType::f32 : !(is8(xd) || xd == gfb::DType::i32)) {
    return l.fail(std::string("x is ") + gfb::EnumNameDType(xd) + ", which cpu-simd does not run here");
  }
  if (!quant_operand(l, 0, "x") || !scale_operand(l, 1, "the scale", channels)) return false;
  gfb::DType y = quantize ? gfb::DType::u8 : gfb::DType::f32;
  if (l.present(2)) {
    const gfb::DType z = l.dtype_of(2);
    if (quantize && !is8(z)) return l.fail(std::string("the zero point is ") + gfb::EnumNameDType(z) + ", which cpu-simd does not run");
    if (!zero_point_operand(l, 2, "the zero point", quantize ? z : xd, 1)) return false;
    if (quantize) y = z;
  }
  return l.output(1, y);
}

bool qlinear(Lowering& l, bool conv) {
  BlobNode& n = l.node();
  n.op = conv ? Op::kQLinearConv : Op::kQLinearMatMul;
  if (l.opset() < 10) return l.fail("opset " + std::to_string(l.opset()) + " has no QLinear operators");
  if (!l.check_inputs(8, conv ? 9 : 8)) return false;
  if (!conv && !l.check_attributes({})) return false;
  const gfb::DType xd = l.dtype_of(0), wd = l.dtype_of(3);
  if (!is8(xd) || !is8(wd)) return l.fail("x and w must be u8 or i8");
  const Shape x = l.shape_of(0), w = l.shape_of(3);
  if (conv ? !conv_ints(l, x, w) : !matmul_shapes_ok(l, x, w)) return false;
  const int64_t channels = conv ? w[0] : w.back();
  if (!l.present(7)) return l.fail("y_zero_point is missing");
  const gfb::DType yd = l.dtype_of(7);
  if (!is8(yd)) return l.fail("y_zero_point must be u8 or i8");
  if (!quant_operand(l, 0, "x") || !scale_operand(l, 1, "x_scale", 0) ||
      !zero_point_operand(l, 2, "x_zero_point", xd, 1) || !quant_operand(l, 3, "w") ||
      !scale_operand(l, 4, "w_scale", channels) || !zero_point_operand(l, 5, "w_zero_point", wd, 4) ||
      !scale_operand(l, 6, "y_scale", 0) || !zero_point_operand(l, 7, "y_zero_point", yd, 6)) {
    return false;
  }
  if (conv && l.present(8)) {
    if (l.dtype_of(8) != gfb::DType::i32) return l.invalid("the bias must be i32");
    if (l.shape_of(8) != Shape{channels}) {
      return l.invalid("the bias has shape " + detail::shape_string(l.shape_of(8)) + ", expected [" +
                       std::to_string(channels) + "]");
    }
    if (!quant_operand(l, 8, "the bias")) return false;
  }
  return l.output(1, yd);
}

bool integer(Lowering& l, bool conv) {
  BlobNode& n = l.node();
  n.op = conv ? Op::kConvInteger : Op::kMatMulInteger;
  if (l.opset() < 10) return l.fail("opset " + std::to_string(l.opset()) + " has no integer operators");
  if (!l.check_inputs(2, 4)) return false;
  if (!conv && !l.check_attributes({})) return false;
  const gfb::DType xd = l.dtype_of(0), wd = l.dtype_of(1);
  if (!is8(xd) || !is8(wd)) return l.fail("the operands must be u8 or i8");
  const Shape x = l.shape_of(0), w = l.shape_of(1);
  if (conv ? !conv_ints(l, x, w) : !matmul_shapes_ok(l, x, w)) return false;
  const int64_t channels = conv ? w[0] : w.back();
  if (!quant_operand(l, 0, "x") || !quant_operand(l, 1, "w")) return false;
  int mask = 0;
  if (l.present(2)) {
    if (!zero_point_operand(l, 2, "the x zero point", xd, SIZE_MAX)) return false;
    mask |= 1;
  }
  if (l.present(3)) {
    const Shape z = l.shape_of(3);
    if (!one_element(z) && z != Shape{channels}) {
      return l.invalid("the w zero point has shape " + detail::shape_string(z) + ", expected one element or [" +
                       std::to_string(channels) + "]");
    }
    if (l.dtype_of(3) != wd) {
      return l.invalid(std::string("the w zero point is ") + gfb::EnumNameDType(l.dtype_of(3)) + " but w is " +
                       gfb::EnumNameDType(wd) + "; ONNX requires one type");
    }
    if (!quant_operand(l, 3, "the w zero point")) return false;
    mask |= 2;
  }
  n.trans_a = mask;
  return l.output(1, gfb::DType::i32);
}

}  // namespace

bool lower_quantize(Lowering& l) { return quantize_linear(l, true); }
bool lower_dequantize(Lowering& l) { return quantize_linear(l, false); }
bool lower_qlinear_conv(Lowering& l) { return qlinear(l, true); }
bool lower_qlinear_matmul(Lowering& l) { return qlinear(l, false); }
bool lower_conv_integer(Lowering& l) { return integer(l, true); }
bool lower_matmul_integer(Lowering& l) { return integer(l, false); }

// DynamicQuantizeLinear (opset 11; blob format 10): three single-output
// nodes reading x, the scale, the zero point, then y from x and those two
// (blob_dql_rules.hpp). All three outputs must be present.
bool lower_dynamic_quantize(Lowering& l) {
  if (l.opset() < 11) return l.fail("opset " + std::to_string(l.opset()) + " is not supported");
  if (!l.check_attributes({}) || !l.check_inputs(1, 1) || !l.data(0)) return false;
  if (l.output_count() != 3) return l.fail("has " + std::to_string(l.output_count()) + " outputs, expected 3");
  if (!l.output_ok(0, gfb::DType::u8) || !l.output_ok(1, gfb::DType::f32) || !l.output_ok(2, gfb::DType::u8)) {
    return false;
  }
  if (!l.output_shape(1).empty() || !l.output_shape(2).empty()) {
    return l.invalid("y_scale and y_zero_point must be scalars, declared " + detail::shape_string(l.output_shape(1)) +
                     " and " + detail::shape_string(l.output_shape(2)));
  }
  const uint32_t x = l.node().inputs[0];
  const auto scale = static_cast<uint32_t>(l.output_index(1));
  const auto zp = static_cast<uint32_t>(l.output_index(2));
  BlobNode& s = l.node();
  s.op = Op::kDynamicQuantizeScale;
  s.outputs = {scale};
  BlobNode& z = l.add_node();
  z.op = Op::kDynamicQuantizeZeroPoint;
  z.inputs = {x};
  z.outputs = {zp};
  BlobNode& y = l.add_node();
  y.op = Op::kDynamicQuantize;
  y.inputs = {x, scale, zp};
  y.outputs = {static_cast<uint32_t>(l.output_index(0))};
  return true;
}

}  // namespace loom::cpu_simd::lowering
