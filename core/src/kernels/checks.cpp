#include "kernels/checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>

namespace loom::kernels {

Status check_arity(std::string_view op, size_t inputs, size_t min_inputs,
                   size_t max_inputs, size_t outputs, size_t outputs_expected) {
  if (inputs < min_inputs || inputs > max_inputs) {
    std::string want = min_inputs == max_inputs
                           ? std::to_string(min_inputs)
                           : std::to_string(min_inputs) + " to " + std::to_string(max_inputs);
    return invalid_argument(std::string(op) + ": takes " + want + " inputs, got " +
                            std::to_string(inputs));
  }
  if (outputs != outputs_expected) {
    return invalid_argument(std::string(op) + ": produces " +
                            std::to_string(outputs_expected) + " outputs, got " +
                            std::to_string(outputs));
  }
  return Status();
}

Status check_f32_type(std::string_view op, std::string_view name, DType dtype) {
  if (dtype != DType::kF32) {
    return unimplemented(std::string(op) + ": " + std::string(name) + " has dtype " +
                         std::string(dtype_name(dtype)) + ", only f32 is supported");
  }
  return Status();
}

Status check_f32_operand(std::string_view op, std::string_view name, const TensorRef& t) {
  LOOM_RETURN_IF_ERROR(check_f32_type(op, name, t.dtype));
  auto count = element_count(t.shape);
  if (!count.ok()) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + ": " +
                            count.status().message());
  }
  if (*count > SIZE_MAX / sizeof(float) || *count * sizeof(float) != t.byte_size) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + " of shape " +
                            shape_to_string(t.shape) + " needs " +
                            std::to_string(*count * sizeof(float)) + " bytes, has " +
                            std::to_string(t.byte_size));
  }
  if (t.data == nullptr && t.byte_size != 0) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + " has no data");
  }
  return Status();
}

Status check_output_shape(std::string_view op, std::string_view name,
                          std::span<const int64_t> actual,
                          std::span<const int64_t> expected) {
  if (!std::equal(actual.begin(), actual.end(), expected.begin(), expected.end())) {
    return invalid_argument(std::string(op) + ": output " + std::string(name) + " is " +
                            shape_to_string(actual) + ", expected " +
                            shape_to_string(expected));
  }
  return Status();
}

Result<DType> dtype_from_onnx_number(std::string_view op, std::string_view attribute, int64_t to) {
  switch (to) {
    case 1: return DType::kF32;
    case 2: return DType::kU8;
    case 3: return DType::kI8;
    case 4: return DType::kU16;
    case 5: return DType::kI16;
    case 6: return DType::kI32;
    case 7: return DType::kI64;
    case 9: return DType::kBool;
    case 10: return DType::kF16;
    case 11: return DType::kF64;
    case 12: return DType::kU32;
    case 13: return DType::kU64;
    case 16: return DType::kBF16;
    default: break;
  }
  if (to == 8 || to == 14 || to == 15 || (to >= 17 && to <= 23)) {
    return unimplemented(std::string(op) + ": attribute '" + std::string(attribute) + "' names ONNX data type " +
                         std::to_string(to) + ", which Loom does not support");
  }
  return invalid_argument(std::string(op) + ": attribute '" + std::string(attribute) + "' is " + std::to_string(to) +
                          ", not an ONNX data type");
}

Status check_scale_values(std::string_view op, std::string_view name, const TensorRef& t) {
  if (t.dtype != DType::kF32 || t.data == nullptr) return Status();
  const size_t n = t.byte_size / sizeof(float);
  for (size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, static_cast<const std::byte*>(t.data) + i * sizeof(float), sizeof v);
    if (!(v > 0.0f) || !std::isfinite(v)) {
      std::ostringstream s;
      s << op << ": " << name;
      if (n > 1) s << "[" << i << "]";
      s << " is " << v << "; a quantization scale must be positive and finite";
      return invalid_argument(s.str());
    }
  }
  return Status();
}

Status check_quant_operand(std::string_view op, std::string_view name, const TensorType& t,
                           int64_t channels, DType zero_point_dtype) {
  if (t.dtype == DType::kInvalid) return Status();  // left out
  const bool scale = name.ends_with("scale");
  const DType want = scale ? DType::kF32 : zero_point_dtype;
  if (t.dtype != want) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + " has dtype " +
                            std::string(dtype_name(t.dtype)) + ", expected " +
                            std::string(dtype_name(want)) +
                            (scale ? "" : " (a zero point has its quantized operand's type)"));
  }
  auto count = element_count(t.shape);
  if (!count.ok()) return count.status().with_context(std::string(op) + ": " + std::string(name));
  if (t.shape.size() > 1 || (channels > 0 && *count != 1 && static_cast<int64_t>(*count) != channels)) {
    return invalid_argument(std::string(op) + ": " + std::string(name) +
                            " must be a scalar or have " +
                            (channels > 0 ? std::to_string(channels) : std::string("one per channel")) +
                            " elements, got shape " + shape_to_string(t.shape));
  }
  if (scale && t.value != nullptr) return check_scale_values(op, name, *t.value);
  return Status();
}

}  // namespace loom::kernels
