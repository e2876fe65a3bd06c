// Add (numpy broadcasting) and Relu.
#include <string>

#include "kernels/broadcast.hpp"
#include "kernels/checks.hpp"
#include "kernels/ops.hpp"

namespace loom::kernels::ops {

Status add_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
               const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("Add", inputs.size(), 2, 2, outputs.size(), 1));
  LOOM_RETURN_IF_ERROR(check_f32_operand("Add", "A", inputs[0]));
  LOOM_RETURN_IF_ERROR(check_f32_operand("Add", "B", inputs[1]));
  LOOM_RETURN_IF_ERROR(check_f32_operand("Add", "C", outputs[0]));
  BroadcastPlan plan;
  LOOM_RETURN_IF_ERROR(
      plan_broadcast("Add", "A", inputs[0].shape, "B", inputs[1].shape, &plan));
  LOOM_RETURN_IF_ERROR(check_output_shape("Add", "C", outputs[0].shape, plan.shape()));
  const float* a = in_data(inputs[0]);
  const float* b = in_data(inputs[1]);
  float* c = out_data(outputs[0]);
  for_each_broadcast(plan, [&](int64_t o, int64_t ia, int64_t ib) { c[o] = a[ia] + b[ib]; });
  return Status();
}

Result<std::vector<TensorType>> add_infer(std::span<const TensorType> inputs,
                                          const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("Add", inputs.size(), 2, 2, 1, 1));
  LOOM_RETURN_IF_ERROR(check_f32_type("Add", "A", inputs[0].dtype));
  LOOM_RETURN_IF_ERROR(check_f32_type("Add", "B", inputs[1].dtype));
  LOOM_ASSIGN_OR_RETURN(Shape shape,
                        broadcast_shape("Add", "A", inputs[0].shape, "B", inputs[1].shape));
  return std::vector<TensorType>{{DType::kF32, std::move(shape)}};
}

Status relu_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("Relu", inputs.size(), 1, 1, outputs.size(), 1));
  LOOM_RETURN_IF_ERROR(check_f32_operand("Relu", "X", inputs[0]));
  LOOM_RETURN_IF_ERROR(check_f32_operand("Relu", "Y", outputs[0]));
  LOOM_RETURN_IF_ERROR(check_output_shape("Relu", "Y", outputs[0].shape, inputs[0].shape));
  const float* x = in_data(inputs[0]);
  float* y = out_data(outputs[0]);
  const size_t n = inputs[0].byte_size / sizeof(float);
  // `x < 0 ? 0 : x` keeps NaN as NaN, like numpy's maximum.
  for (size_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
  return Status();
}

Result<std::vector<TensorType>> relu_infer(std::span<const TensorType> inputs,
                                           const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("Relu", inputs.size(), 1, 1, 1, 1));
  LOOM_RETURN_IF_ERROR(check_f32_type("Relu", "X", inputs[0].dtype));
  LOOM_RETURN_IF_ERROR(element_count(inputs[0].shape).status().with_context("Relu: X"));
  return std::vector<TensorType>{{DType::kF32, inputs[0].shape}};
}

}  // namespace loom::kernels::ops
