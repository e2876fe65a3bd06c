// Operand checks shared by the reference kernels. Each error names the
// operator and the operand; none of them allocates on success.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "kernels/kernel.hpp"

namespace loom::kernels {

// The operand counts of one call lie in [min_inputs, max_inputs] and equal
// `outputs_expected`.
Status check_arity(std::string_view op, size_t inputs, size_t min_inputs,
                   size_t max_inputs, size_t outputs, size_t outputs_expected);

// An f32 operand whose byte_size matches its shape and whose data is set.
Status check_f32_operand(std::string_view op, std::string_view name,
                         const TensorRef& t);

// The dtype of an operand at infer time is f32.
Status check_f32_type(std::string_view op, std::string_view name, DType dtype);

// The output `name` has exactly `expected` as its shape.
Status check_output_shape(std::string_view op, std::string_view name,
                          std::span<const int64_t> actual,
                          std::span<const int64_t> expected);

// The DType of an ONNX TensorProto.DataType number given in attribute
// `attribute` (Cast's `to`, EyeLike's `dtype`, ...): kUnimplemented for a
// type Loom does not support, kInvalidArgument for a number that is none.
Result<DType> dtype_from_onnx_number(std::string_view op, std::string_view attribute, int64_t to);

// Quantization parameters. A scale's elements must be positive and finite
// (a zero, negative, infinite or NaN scale has no meaning and would divide by
// zero when requantizing): checked on the value wherever it is known, a
// constant at compile time (infer) and every operand at run time. `name` is
// the ONNX operand name ("y_scale").
Status check_scale_values(std::string_view op, std::string_view name, const TensorRef& t);
// Infer time: an optional quantization operand `t` (absent: dtype kInvalid)
// is f32 for a scale, `zero_point_dtype` for a zero point, a scalar or a
// 1-D tensor of 1 or `channels` elements; a known scale value is checked as
// above. `channels` 0 takes any length (per-axis layouts checked elsewhere).
Status check_quant_operand(std::string_view op, std::string_view name, const TensorType& t,
                           int64_t channels, DType zero_point_dtype);

inline const float* in_data(const TensorRef& t) { return static_cast<const float*>(t.data); }
inline float* out_data(const TensorRef& t) { return static_cast<float*>(t.data); }

}  // namespace loom::kernels
