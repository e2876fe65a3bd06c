// The DynamicQuantizeLinear operators of blob format 10: ONNX's one node
// with three outputs becomes three single-output nodes, each reading the
// f32 input x:
//   kDynamicQuantizeScale      x -> y_scale (f32, shape []): (max - min) / 255
//                              over x's range widened to include 0;
//   kDynamicQuantizeZeroPoint  x -> y_zero_point (u8, shape []):
//                              round(clamp(-min / scale, 0, 255)), 0 when the
//                              scale is 0;
//   kDynamicQuantize           x, y_scale, y_zero_point -> y (u8, x's shape):
//                              clamp(round(x / scale) + zp, 0, 255), 0 when
//                              the scale is 0.
// Rounding is half to even; NaN elements do not widen the range and
// quantize to 0. No attributes. Included by blob_shape_rules.hpp.
#pragma once

#include <string>
#include <vector>

#include "loom/cpu_simd/blob_ops.hpp"

namespace loom::cpu_simd {

// Whether `node` needs format 10: Round, the DynamicQuantizeLinear nodes, a
// Cast to u8 or i8 (format_version_for also counts a Cast reading u8 or
// i8, which formats 6 to 9 read as bool bytes).
inline bool uses_format10(const BlobNode& node) {
  return node.op == Op::kRound || is_dynamic_quant(node.op) ||
         (node.op == Op::kCast && node.ints.size() == 1 && quant_dtype_code(node.ints[0]));
}

// The output shape of a DynamicQuantizeLinear node; false with `*error`
// naming the operand.
inline bool infer_dynamic_quant_shape(const BlobNode& node, const std::vector<const std::vector<int64_t>*>& in,
                                      std::vector<int64_t>* out, std::string* error) {
  const std::string op = op_name(node.op);
  if (!node.ints.empty() || !node.floats.empty()) {
    *error = op + ": unexpected attribute lists (" + std::to_string(node.ints.size()) + " ints, " +
             std::to_string(node.floats.size()) + " floats)";
    return false;
  }
  if (node.op == Op::kDynamicQuantize) {
    for (size_t i = 1; i < 3; ++i) {
      if (!in[i]->empty()) {
        *error = op + ": " + (i == 1 ? "y_scale " : "y_zero_point ") + detail::shape_string(*in[i]) +
                 " must be a scalar []";
        return false;
      }
    }
    *out = *in[0];
  } else {
    out->clear();
  }
  return true;
}

// Their dtypes: x f32, y_scale f32, y_zero_point u8, y u8.
inline bool check_dynamic_quant_dtypes(const BlobNode& node, const std::vector<loom_dtype_t>& in,
                                       loom_dtype_t out, std::string* error) {
  const std::string op = op_name(node.op);
  static const char* const kNames[3] = {"x", "y_scale", "y_zero_point"};
  static const loom_dtype_t kWant[3] = {LOOM_DTYPE_F32, LOOM_DTYPE_F32, LOOM_DTYPE_U8};
  for (size_t i = 0; i < in.size() && i < 3; ++i) {
    if (in[i] != kWant[i]) {
      *error = op + ": " + kNames[i] + " is " + dtype_name(in[i]) + ", expected " + dtype_name(kWant[i]);
      return false;
    }
  }
  const loom_dtype_t want = node.op == Op::kDynamicQuantizeScale ? LOOM_DTYPE_F32 : LOOM_DTYPE_U8;
  if (out != want) {
    *error = op + ": the output is " + dtype_name(out) + ", expected " + dtype_name(want);
    return false;
  }
  return true;
}

}  // namespace loom::cpu_simd
