// MatMul (numpy matmul semantics, as ONNX states them) and Gemm.
#include <array>
#include <string>

#include "kernels/broadcast.hpp"
#include "kernels/checks.hpp"
#include "kernels/ops.hpp"

namespace loom::kernels::ops {
namespace {

// The geometry of one MatMul: batch broadcast, the matrix sizes and the
// output shape, computed without touching the heap.
struct MatMulDims {
  int64_t m = 1, k = 1, n = 1;
  BroadcastPlan batch;
  std::array<int64_t, kMaxKernelRank + 2> out{};
  size_t out_rank = 0;
  std::span<const int64_t> out_shape() const { return {out.data(), out_rank}; }
};

std::string operands(std::span<const int64_t> a, std::span<const int64_t> b) {
  return "A is " + shape_to_string(a) + ", B is " + shape_to_string(b);
}

Status matmul_dims(std::span<const int64_t> a, std::span<const int64_t> b, MatMulDims* d) {
  if (a.empty() || b.empty()) {
    return invalid_argument("MatMul: operands must have rank >= 1: " + operands(a, b));
  }
  for (int64_t x : a) {
    if (x < 0) return invalid_argument("MatMul: negative dimension in A: " + operands(a, b));
  }
  for (int64_t x : b) {
    if (x < 0) return invalid_argument("MatMul: negative dimension in B: " + operands(a, b));
  }
  // A 1-D A is a row vector [1, K], a 1-D B a column vector [K, 1]; the
  // added dimension is dropped from the result.
  const bool a_vec = a.size() == 1;
  const bool b_vec = b.size() == 1;
  d->m = a_vec ? 1 : a[a.size() - 2];
  const int64_t ka = a.back();
  const int64_t kb = b_vec ? b[0] : b[b.size() - 2];
  d->n = b_vec ? 1 : b.back();
  if (ka != kb) {
    return invalid_argument("MatMul: inner dimensions differ: " + operands(a, b));
  }
  d->k = ka;
  auto a_batch = a.size() > 2 ? a.first(a.size() - 2) : std::span<const int64_t>{};
  auto b_batch = b.size() > 2 ? b.first(b.size() - 2) : std::span<const int64_t>{};
  Status s = plan_broadcast("MatMul", "A", a_batch, "B", b_batch, &d->batch);
  if (!s.ok()) {
    return invalid_argument("MatMul: batch dimensions do not broadcast: " + operands(a, b));
  }
  d->out_rank = 0;
  for (size_t i = 0; i < d->batch.rank; ++i) d->out[d->out_rank++] = d->batch.dims[i];
  if (!a_vec) d->out[d->out_rank++] = d->m;
  if (!b_vec) d->out[d->out_rank++] = d->n;
  return Status();
}

// C[m, n] = A[m, k] * B[k, n], all row-major and dense.
void matmul_block(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * n;
    for (int64_t j = 0; j < n; ++j) row[j] = 0.0f;
    for (int64_t p = 0; p < k; ++p) {
      const float av = a[i * k + p];
      const float* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
    }
  }
}

}  // namespace

Status matmul_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                  const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("MatMul", inputs.size(), 2, 2, outputs.size(), 1));
  LOOM_RETURN_IF_ERROR(check_f32_operand("MatMul", "A", inputs[0]));
  LOOM_RETURN_IF_ERROR(check_f32_operand("MatMul", "B", inputs[1]));
  LOOM_RETURN_IF_ERROR(check_f32_operand("MatMul", "Y", outputs[0]));
  MatMulDims d;
  LOOM_RETURN_IF_ERROR(matmul_dims(inputs[0].shape, inputs[1].shape, &d));
  LOOM_RETURN_IF_ERROR(check_output_shape("MatMul", "Y", outputs[0].shape, d.out_shape()));
  const float* a = in_data(inputs[0]);
  const float* b = in_data(inputs[1]);
  float* y = out_data(outputs[0]);
  const int64_t a_step = d.m * d.k, b_step = d.k * d.n, y_step = d.m * d.n;
  if (y_step == 0) return Status();
  for_each_broadcast(d.batch, [&](int64_t o, int64_t ia, int64_t ib) {
    matmul_block(a + ia * a_step, b + ib * b_step, y + o * y_step, d.m, d.k, d.n);
  });
  return Status();
}

Result<std::vector<TensorType>> matmul_infer(std::span<const TensorType> inputs,
                                             const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("MatMul", inputs.size(), 2, 2, 1, 1));
  LOOM_RETURN_IF_ERROR(check_f32_type("MatMul", "A", inputs[0].dtype));
  LOOM_RETURN_IF_ERROR(check_f32_type("MatMul", "B", inputs[1].dtype));
  MatMulDims d;
  LOOM_RETURN_IF_ERROR(matmul_dims(inputs[0].shape, inputs[1].shape, &d));
  auto out = d.out_shape();
  return std::vector<TensorType>{{DType::kF32, Shape(out.begin(), out.end())}};
}

namespace {

struct GemmDims {
  int64_t m = 0, k = 0, n = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
  std::array<int64_t, 2> out{};
};

Status gemm_dims(std::span<const int64_t> a, std::span<const int64_t> b,
                 const std::span<const int64_t>* c, const Attributes& attributes,
                 GemmDims* d) {
  if (a.size() != 2 || b.size() != 2) {
    return invalid_argument("Gemm: A and B must be 2-D: A is " + shape_to_string(a) +
                            ", B is " + shape_to_string(b));
  }
  const int64_t trans_a = attributes.get_int("transA", 0);
  const int64_t trans_b = attributes.get_int("transB", 0);
  if ((trans_a != 0 && trans_a != 1) || (trans_b != 0 && trans_b != 1)) {
    return invalid_argument("Gemm: transA and transB must be 0 or 1, got transA=" +
                            std::to_string(trans_a) + ", transB=" + std::to_string(trans_b));
  }
  for (int64_t x : a) {
    if (x < 0) return invalid_argument("Gemm: negative dimension in A " + shape_to_string(a));
  }
  for (int64_t x : b) {
    if (x < 0) return invalid_argument("Gemm: negative dimension in B " + shape_to_string(b));
  }
  d->trans_a = trans_a == 1;
  d->trans_b = trans_b == 1;
  d->alpha = attributes.get_float("alpha", 1.0f);
  d->beta = attributes.get_float("beta", 1.0f);
  d->m = d->trans_a ? a[1] : a[0];
  d->k = d->trans_a ? a[0] : a[1];
  const int64_t kb = d->trans_b ? b[1] : b[0];
  d->n = d->trans_b ? b[0] : b[1];
  if (d->k != kb) {
    return invalid_argument("Gemm: inner dimensions differ: A is " + shape_to_string(a) +
                            (d->trans_a ? " (transposed)" : "") + ", B is " +
                            shape_to_string(b) + (d->trans_b ? " (transposed)" : ""));
  }
  d->out = {d->m, d->n};
  if (c != nullptr) {
    // C broadcasts one way only: to (M, N), never the other way round.
    BroadcastPlan plan;
    Status s = plan_broadcast("Gemm", "C", *c, "Y", d->out, &plan);
    if (!s.ok() || plan.rank != 2 || plan.dims[0] != d->m || plan.dims[1] != d->n) {
      return invalid_argument("Gemm: C is " + shape_to_string(*c) +
                              ", does not broadcast to " + shape_to_string(d->out));
    }
  }
  return Status();
}

}  // namespace

Status gemm_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                const Attributes& attributes) {
  LOOM_RETURN_IF_ERROR(check_arity("Gemm", inputs.size(), 2, 3, outputs.size(), 1));
  LOOM_RETURN_IF_ERROR(check_f32_operand("Gemm", "A", inputs[0]));
  LOOM_RETURN_IF_ERROR(check_f32_operand("Gemm", "B", inputs[1]));
  const bool has_c = inputs.size() == 3;
  if (has_c) LOOM_RETURN_IF_ERROR(check_f32_operand("Gemm", "C", inputs[2]));
  LOOM_RETURN_IF_ERROR(check_f32_operand("Gemm", "Y", outputs[0]));
  GemmDims d;
  std::span<const int64_t> c_shape = has_c ? inputs[2].shape : std::span<const int64_t>{};
  LOOM_RETURN_IF_ERROR(gemm_dims(inputs[0].shape, inputs[1].shape,
                                 has_c ? &c_shape : nullptr, attributes, &d));
  LOOM_RETURN_IF_ERROR(check_output_shape("Gemm", "Y", outputs[0].shape, d.out));
  const float* a = in_data(inputs[0]);
  const float* b = in_data(inputs[1]);
  float* y = out_data(outputs[0]);
  // Element (i, p) of op(A) and (p, j) of op(B).
  const int64_t a_i = d.trans_a ? 1 : d.k, a_p = d.trans_a ? d.m : 1;
  const int64_t b_p = d.trans_b ? 1 : d.n, b_j = d.trans_b ? d.k : 1;
  for (int64_t i = 0; i < d.m; ++i) {
    float* row = y + i * d.n;
    for (int64_t j = 0; j < d.n; ++j) row[j] = 0.0f;
    for (int64_t p = 0; p < d.k; ++p) {
      const float av = a[i * a_i + p * a_p];
      const float* bp = b + p * b_p;
      for (int64_t j = 0; j < d.n; ++j) row[j] += av * bp[j * b_j];
    }
    for (int64_t j = 0; j < d.n; ++j) row[j] *= d.alpha;
  }
  if (has_c) {
    BroadcastPlan plan;
    LOOM_RETURN_IF_ERROR(plan_broadcast("Gemm", "C", c_shape, "Y", d.out, &plan));
    const float* c = in_data(inputs[2]);
    const float beta = d.beta;
    for_each_broadcast(plan, [&](int64_t o, int64_t ic, int64_t) { y[o] += beta * c[ic]; });
  }
  return Status();
}

Result<std::vector<TensorType>> gemm_infer(std::span<const TensorType> inputs,
                                           const Attributes& attributes) {
  LOOM_RETURN_IF_ERROR(check_arity("Gemm", inputs.size(), 2, 3, 1, 1));
  LOOM_RETURN_IF_ERROR(check_f32_type("Gemm", "A", inputs[0].dtype));
  LOOM_RETURN_IF_ERROR(check_f32_type("Gemm", "B", inputs[1].dtype));
  std::span<const int64_t> c_shape;
  if (inputs.size() == 3) {
    LOOM_RETURN_IF_ERROR(check_f32_type("Gemm", "C", inputs[2].dtype));
    c_shape = inputs[2].shape;
  }
  GemmDims d;
  LOOM_RETURN_IF_ERROR(gemm_dims(inputs[0].shape, inputs[1].shape,
                                 inputs.size() == 3 ? &c_shape : nullptr, attributes, &d));
  return std::vector<TensorType>{{DType::kF32, Shape{d.m, d.n}}};
}

}  // namespace loom::kernels::ops
