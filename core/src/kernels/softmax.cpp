// Softmax along one axis (ONNX opset 13 semantics), numerically stable:
// the maximum of each slice is subtracted before exponentiation.
#include <cmath>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/ops.hpp"

namespace loom::kernels::ops {
namespace {

Result<size_t> normalized_axis(std::span<const int64_t> shape, const Attributes& attributes) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t axis = attributes.get_int("axis", -1);
  if (axis < -rank || axis >= rank) {
    return invalid_argument("Softmax: axis " + std::to_string(axis) +
                            " is out of range for input of shape " + shape_to_string(shape) +
                            " (rank " + std::to_string(rank) + ")");
  }
  return static_cast<size_t>(axis < 0 ? axis + rank : axis);
}

}  // namespace

Status softmax_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                   const Attributes& attributes) {
  LOOM_RETURN_IF_ERROR(check_arity("Softmax", inputs.size(), 1, 1, outputs.size(), 1));
  LOOM_RETURN_IF_ERROR(check_f32_operand("Softmax", "input", inputs[0]));
  LOOM_RETURN_IF_ERROR(check_f32_operand("Softmax", "output", outputs[0]));
  LOOM_RETURN_IF_ERROR(
      check_output_shape("Softmax", "output", outputs[0].shape, inputs[0].shape));
  std::span<const int64_t> shape = inputs[0].shape;
  LOOM_ASSIGN_OR_RETURN(size_t axis, normalized_axis(shape, attributes));
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[axis];
  const float* x = in_data(inputs[0]);
  float* y = out_data(outputs[0]);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      if (n == 0) continue;
      float max = x[base];
      for (int64_t j = 1; j < n; ++j) max = std::fmax(max, x[base + j * inner]);
      float sum = 0.0f;
      for (int64_t j = 0; j < n; ++j) {
        const float e = std::exp(x[base + j * inner] - max);
        y[base + j * inner] = e;
        sum += e;
      }
      const float inv = 1.0f / sum;
      for (int64_t j = 0; j < n; ++j) y[base + j * inner] *= inv;
    }
  }
  return Status();
}

Result<std::vector<TensorType>> softmax_infer(std::span<const TensorType> inputs,
                                              const Attributes& attributes) {
  LOOM_RETURN_IF_ERROR(check_arity("Softmax", inputs.size(), 1, 1, 1, 1));
  LOOM_RETURN_IF_ERROR(check_f32_type("Softmax", "input", inputs[0].dtype));
  LOOM_RETURN_IF_ERROR(element_count(inputs[0].shape).status().with_context("Softmax: input"));
  LOOM_RETURN_IF_ERROR(normalized_axis(inputs[0].shape, attributes).status());
  return std::vector<TensorType>{{DType::kF32, inputs[0].shape}};
}

}  // namespace loom::kernels::ops
