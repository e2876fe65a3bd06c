// MatMul (numpy matmul semantics, as ONNX states them), Gemm, and the
// integer forms MatMulInteger and QLinearMatMul (nn family).
#include <algorithm>
#include <array>
#include <limits>
#include <string>

#include "kernels/broadcast.hpp"
#include "kernels/checks.hpp"
#include "kernels/nn/nn.hpp"
#include "kernels/ops.hpp"
#include "kernels/util.hpp"

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

Status matmul_dims(std::span<const int64_t> a, std::span<const int64_t> b, MatMulDims* d,
                   std::string_view op = "MatMul") {
  const std::string name(op);
  if (a.empty() || b.empty()) {
    return invalid_argument(name + ": operands must have rank >= 1: " + operands(a, b));
  }
  for (int64_t x : a) {
    if (x < 0) return invalid_argument(name + ": negative dimension in A: " + operands(a, b));
  }
  for (int64_t x : b) {
    if (x < 0) return invalid_argument(name + ": negative dimension in B: " + operands(a, b));
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
    return invalid_argument(name + ": inner dimensions differ: " + operands(a, b));
  }
  d->k = ka;
  auto a_batch = a.size() > 2 ? a.first(a.size() - 2) : std::span<const int64_t>{};
  auto b_batch = b.size() > 2 ? b.first(b.size() - 2) : std::span<const int64_t>{};
  Status s = plan_broadcast(op, "A", a_batch, "B", b_batch, &d->batch);
  if (!s.ok()) {
    return invalid_argument(name + ": batch dimensions do not broadcast: " + operands(a, b));
  }
  d->out_rank = 0;
  for (size_t i = 0; i < d->batch.rank; ++i) d->out[d->out_rank++] = d->batch.dims[i];
  if (!a_vec) d->out[d->out_rank++] = d->m;
  if (!b_vec) d->out[d->out_rank++] = d->n;
  return Status();
}

// The arithmetic of one element type: f16/bf16 compute in float, the other
// types in themselves (integers wrap like the ONNX reference's numpy).
template <typename T>
struct Arith {
  using Acc = T;
  static Acc load(T v) { return v; }
  static T store(Acc v) { return v; }
};
// Signed integers accumulate unsigned so that overflow wraps instead of
// being undefined.
template <>
struct Arith<int32_t> {
  using Acc = uint32_t;
  static Acc load(int32_t v) { return static_cast<Acc>(v); }
  static int32_t store(Acc v) { return static_cast<int32_t>(v); }
};
template <>
struct Arith<int64_t> {
  using Acc = uint64_t;
  static Acc load(int64_t v) { return static_cast<Acc>(v); }
  static int64_t store(Acc v) { return static_cast<int64_t>(v); }
};
template <>
struct Arith<Half> {
  using Acc = float;
  static float load(Half v) { return to_float(v); }
  static Half store(float v) { return to_half(v); }
};
template <>
struct Arith<BFloat16> {
  using Acc = float;
  static float load(BFloat16 v) { return to_float(v); }
  static BFloat16 store(float v) { return to_bfloat16(v); }
};

// C[m, n] = A[m, k] * B[k, n], all row-major and dense. `load_a(i, p)` and
// `load_b(p, j)` give the accumulator-typed elements; `store(i, j, acc)`
// writes one result.
template <typename Acc, typename LoadA, typename LoadB, typename Store>
void matmul_block(int64_t m, int64_t k, int64_t n, LoadA load_a, LoadB load_b, Store store) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      Acc acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += load_a(i, p) * load_b(p, j);
      store(i, j, acc);
    }
  }
}

constexpr std::initializer_list<DType> kMatMulTypes = {
    DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
    DType::kI32, DType::kI64, DType::kU32, DType::kU64};

}  // namespace

Status matmul_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                  const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("MatMul", inputs.size(), 2, 2, outputs.size(), 1));
  LOOM_RETURN_IF_ERROR(nn::check_operand("MatMul", "A", inputs[0], kMatMulTypes));
  LOOM_RETURN_IF_ERROR(nn::check_operand("MatMul", "B", inputs[1], {inputs[0].dtype}));
  LOOM_RETURN_IF_ERROR(nn::check_operand("MatMul", "Y", outputs[0], {inputs[0].dtype}));
  MatMulDims d;
  LOOM_RETURN_IF_ERROR(matmul_dims(inputs[0].shape, inputs[1].shape, &d));
  LOOM_RETURN_IF_ERROR(check_output_shape("MatMul", "Y", outputs[0].shape, d.out_shape()));
  const int64_t a_step = d.m * d.k, b_step = d.k * d.n, y_step = d.m * d.n;
  if (y_step == 0) return Status();
  return visit_dtype("MatMul", inputs[0].dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool> || sizeof(T) < 2) {
      return nn::check_dtype("MatMul", "A", inputs[0].dtype, kMatMulTypes);
    } else {
      using A = Arith<T>;
      const T* a = static_cast<const T*>(inputs[0].data);
      const T* b = static_cast<const T*>(inputs[1].data);
      T* y = static_cast<T*>(outputs[0].data);
      for_each_broadcast(d.batch, [&](int64_t o, int64_t ia, int64_t ib) {
        const T* ab = a + ia * a_step;
        const T* bb = b + ib * b_step;
        T* yb = y + o * y_step;
        matmul_block<typename A::Acc>(
            d.m, d.k, d.n, [&](int64_t i, int64_t p) { return A::load(ab[i * d.k + p]); },
            [&](int64_t p, int64_t j) { return A::load(bb[p * d.n + j]); },
            [&](int64_t i, int64_t j, typename A::Acc v) { yb[i * d.n + j] = A::store(v); });
      });
      return Status();
    }
  });
}

Result<std::vector<TensorType>> matmul_infer(std::span<const TensorType> inputs,
                                             const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("MatMul", inputs.size(), 2, 2, 1, 1));
  LOOM_RETURN_IF_ERROR(nn::check_dtype("MatMul", "A", inputs[0].dtype, kMatMulTypes));
  LOOM_RETURN_IF_ERROR(nn::check_dtype("MatMul", "B", inputs[1].dtype, {inputs[0].dtype}));
  MatMulDims d;
  LOOM_RETURN_IF_ERROR(matmul_dims(inputs[0].shape, inputs[1].shape, &d));
  auto out = d.out_shape();
  return std::vector<TensorType>{{inputs[0].dtype, Shape(out.begin(), out.end())}};
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
  LOOM_RETURN_IF_ERROR(nn::check_operand("Gemm", "A", inputs[0], kMatMulTypes));
  const DType dt = inputs[0].dtype;
  LOOM_RETURN_IF_ERROR(nn::check_operand("Gemm", "B", inputs[1], {dt}));
  const bool has_c = inputs.size() == 3 && inputs[2].present();
  if (has_c) LOOM_RETURN_IF_ERROR(nn::check_operand("Gemm", "C", inputs[2], {dt}));
  if (!has_c && attributes.opset_before(11)) {
    return invalid_argument("Gemm: input 'C' is required before opset 11");
  }
  LOOM_RETURN_IF_ERROR(nn::check_operand("Gemm", "Y", outputs[0], {dt}));
  GemmDims d;
  std::span<const int64_t> c_shape = has_c ? inputs[2].shape : std::span<const int64_t>{};
  LOOM_RETURN_IF_ERROR(gemm_dims(inputs[0].shape, inputs[1].shape,
                                 has_c ? &c_shape : nullptr, attributes, &d));
  LOOM_RETURN_IF_ERROR(check_output_shape("Gemm", "Y", outputs[0].shape, d.out));
  BroadcastPlan plan;
  if (has_c) LOOM_RETURN_IF_ERROR(plan_broadcast("Gemm", "C", c_shape, "Y", d.out, &plan));
  // Element (i, p) of op(A) and (p, j) of op(B).
  const int64_t a_i = d.trans_a ? 1 : d.k, a_p = d.trans_a ? d.m : 1;
  const int64_t b_p = d.trans_b ? 1 : d.n, b_j = d.trans_b ? d.k : 1;
  return visit_dtype("Gemm", dt, [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool> || sizeof(T) < 2) {
      return nn::check_dtype("Gemm", "A", dt, kMatMulTypes);
    } else {
      using Ar = Arith<T>;
      using Acc = typename Ar::Acc;
      const T* a = static_cast<const T*>(inputs[0].data);
      const T* b = static_cast<const T*>(inputs[1].data);
      T* y = static_cast<T*>(outputs[0].data);
      // alpha and beta are float attributes; integer types scale through
      // double and truncate like the reference's numpy cast.
      auto scale = [](Acc v, float f) -> Acc {
        if constexpr (std::is_floating_point_v<Acc>) {
          return static_cast<Acc>(v * static_cast<Acc>(f));
        } else {
          if (f == 1.0f) return v;
          const double scaled = static_cast<double>(Ar::store(v)) * f;
          // Out-of-range values saturate instead of being undefined.
          const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
          const double hi = static_cast<double>(std::numeric_limits<T>::max());
          const double c = scaled != scaled ? 0.0 : std::clamp(scaled, lo, hi);
          return Ar::load(c >= hi ? std::numeric_limits<T>::max() : static_cast<T>(c));
        }
      };
      matmul_block<Acc>(
          d.m, d.k, d.n, [&](int64_t i, int64_t p) { return Ar::load(a[i * a_i + p * a_p]); },
          [&](int64_t p, int64_t j) { return Ar::load(b[p * b_p + j * b_j]); },
          [&](int64_t i, int64_t j, Acc v) { y[i * d.n + j] = Ar::store(scale(v, d.alpha)); });
      if (has_c) {
        const T* c = static_cast<const T*>(inputs[2].data);
        for_each_broadcast(plan, [&](int64_t o, int64_t ic, int64_t) {
          y[o] = Ar::store(Ar::load(y[o]) + scale(Ar::load(c[ic]), d.beta));
        });
      }
      return Status();
    }
  });
}

Result<std::vector<TensorType>> gemm_infer(std::span<const TensorType> inputs,
                                           const Attributes& attributes) {
  LOOM_RETURN_IF_ERROR(check_arity("Gemm", inputs.size(), 2, 3, 1, 1));
  LOOM_RETURN_IF_ERROR(nn::check_dtype("Gemm", "A", inputs[0].dtype, kMatMulTypes));
  LOOM_RETURN_IF_ERROR(nn::check_dtype("Gemm", "B", inputs[1].dtype, {inputs[0].dtype}));
  std::span<const int64_t> c_shape;
  const bool has_c = inputs.size() == 3 && inputs[2].dtype != DType::kInvalid;
  if (has_c) {
    LOOM_RETURN_IF_ERROR(nn::check_dtype("Gemm", "C", inputs[2].dtype, {inputs[0].dtype}));
    c_shape = inputs[2].shape;
  } else if (attributes.opset_before(11)) {
    return invalid_argument("Gemm: input 'C' is required before opset 11");
  }
  GemmDims d;
  LOOM_RETURN_IF_ERROR(gemm_dims(inputs[0].shape, inputs[1].shape,
                                 has_c ? &c_shape : nullptr, attributes, &d));
  return std::vector<TensorType>{{inputs[0].dtype, Shape{d.m, d.n}}};
}

}  // namespace loom::kernels::ops

// ------------------------------------------------- MatMulInteger, QLinearMatMul
// Both take u8/i8 operands with zero points: scalar (per tensor), one per
// row of A ([M]) or one per column of B ([N]). Products accumulate in i32.

namespace loom::kernels::nn {
namespace {

// Runs the integer product of A and B (already checked) and hands each
// accumulated sum to emit(y index, row i, column j, acc).
template <typename Emit>
Status integer_matmul(std::string_view op, const TensorRef& a, const TensorRef& b,
                      const ops::MatMulDims& d, const PerChannel& a_zero,
                      const PerChannel& b_zero, Emit emit) {
  const int64_t a_step = d.m * d.k, b_step = d.k * d.n, y_step = d.m * d.n;
  if (y_step == 0) return Status();
  return visit_int8(op, "A", a.dtype, [&]<typename TA>() {
    return visit_int8(op, "B", b.dtype, [&]<typename TB>() {
      const TA* pa = static_cast<const TA*>(a.data);
      const TB* pb = static_cast<const TB*>(b.data);
      for_each_broadcast(d.batch, [&](int64_t o, int64_t ia, int64_t ib) {
        const TA* ab = pa + ia * a_step;
        const TB* bb = pb + ib * b_step;
        // Accumulated in 64 bits and wrapped to i32: overflow is defined.
        ops::matmul_block<int64_t>(
            d.m, d.k, d.n,
            [&](int64_t i, int64_t p) {
              return int64_t{ab[i * d.k + p]} - static_cast<int64_t>(a_zero.at(i));
            },
            [&](int64_t p, int64_t j) {
              return int64_t{bb[p * d.n + j]} - static_cast<int64_t>(b_zero.at(j));
            },
            [&](int64_t i, int64_t j, int64_t acc) {
              emit(o * y_step + i * d.n + j, i, j, static_cast<int32_t>(acc));
            });
      });
      return Status();
    });
  });
}

}  // namespace

Result<std::vector<TensorType>> matmul_integer_infer(std::span<const TensorType> in,
                                                     const Attributes&) {
  constexpr std::string_view op = "MatMulInteger";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 2, 4, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "A", in[0].dtype, {DType::kU8, DType::kI8}));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "B", in[1].dtype, {DType::kU8, DType::kI8}));
  ops::MatMulDims d;
  LOOM_RETURN_IF_ERROR(ops::matmul_dims(in[0].shape, in[1].shape, &d, op));
  if (in.size() > 2) LOOM_RETURN_IF_ERROR(check_quant_operand(op, "a_zero_point", in[2], d.m, in[0].dtype));
  if (in.size() > 3) LOOM_RETURN_IF_ERROR(check_quant_operand(op, "b_zero_point", in[3], d.n, in[1].dtype));
  auto out = d.out_shape();
  return std::vector<TensorType>{{DType::kI32, Shape(out.begin(), out.end())}};
}

Status matmul_integer_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                          const Attributes&) {
  constexpr std::string_view op = "MatMulInteger";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 2, 4, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand(op, "A", in[0], {DType::kU8, DType::kI8}));
  LOOM_RETURN_IF_ERROR(check_operand(op, "B", in[1], {DType::kU8, DType::kI8}));
  LOOM_RETURN_IF_ERROR(check_operand(op, "Y", out[0], {DType::kI32}));
  ops::MatMulDims d;
  LOOM_RETURN_IF_ERROR(ops::matmul_dims(in[0].shape, in[1].shape, &d, op));
  LOOM_RETURN_IF_ERROR(check_output_shape(op, "Y", out[0].shape, d.out_shape()));
  const TensorRef none;
  PerChannel az, bz;
  LOOM_RETURN_IF_ERROR(per_channel(op, "a_zero_point", in.size() > 2 ? in[2] : none, d.m, true, &az));
  LOOM_RETURN_IF_ERROR(per_channel(op, "b_zero_point", in.size() > 3 ? in[3] : none, d.n, true, &bz));
  int32_t* y = static_cast<int32_t*>(out[0].data);
  return integer_matmul(op, in[0], in[1], d, az, bz,
                        [&](int64_t o, int64_t, int64_t, int32_t acc) { y[o] = acc; });
}

// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
// y_zero_point; y has y_zero_point's dtype.
Result<std::vector<TensorType>> qlinear_matmul_infer(std::span<const TensorType> in,
                                                     const Attributes&) {
  constexpr std::string_view op = "QLinearMatMul";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 8, 8, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "a", in[0].dtype, {DType::kU8, DType::kI8}));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "b", in[3].dtype, {DType::kU8, DType::kI8}));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "y_zero_point", in[7].dtype, {DType::kU8, DType::kI8}));
  ops::MatMulDims d;
  LOOM_RETURN_IF_ERROR(ops::matmul_dims(in[0].shape, in[3].shape, &d, op));
  LOOM_RETURN_IF_ERROR(check_quant_operand(op, "a_scale", in[1], d.m, DType::kInvalid));
  LOOM_RETURN_IF_ERROR(check_quant_operand(op, "a_zero_point", in[2], d.m, in[0].dtype));
  LOOM_RETURN_IF_ERROR(check_quant_operand(op, "b_scale", in[4], d.n, DType::kInvalid));
  LOOM_RETURN_IF_ERROR(check_quant_operand(op, "b_zero_point", in[5], d.n, in[3].dtype));
  LOOM_RETURN_IF_ERROR(check_quant_operand(op, "y_scale", in[6], 1, DType::kInvalid));
  LOOM_RETURN_IF_ERROR(check_quant_operand(op, "y_zero_point", in[7], 1, in[7].dtype));
  auto out = d.out_shape();
  return std::vector<TensorType>{{in[7].dtype, Shape(out.begin(), out.end())}};
}

Status qlinear_matmul_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                          const Attributes&) {
  constexpr std::string_view op = "QLinearMatMul";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 8, 8, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand(op, "a", in[0], {DType::kU8, DType::kI8}));
  LOOM_RETURN_IF_ERROR(check_operand(op, "b", in[3], {DType::kU8, DType::kI8}));
  LOOM_RETURN_IF_ERROR(check_operand(op, "y_zero_point", in[7], {DType::kU8, DType::kI8}));
  LOOM_RETURN_IF_ERROR(check_operand(op, "y", out[0], {in[7].dtype}));
  ops::MatMulDims d;
  LOOM_RETURN_IF_ERROR(ops::matmul_dims(in[0].shape, in[3].shape, &d, op));
  LOOM_RETURN_IF_ERROR(check_output_shape(op, "y", out[0].shape, d.out_shape()));
  PerChannel as, az, bs, bz, ys, yz;
  LOOM_RETURN_IF_ERROR(per_channel(op, "a_scale", in[1], d.m, false, &as));
  LOOM_RETURN_IF_ERROR(per_channel(op, "a_zero_point", in[2], d.m, false, &az));
  LOOM_RETURN_IF_ERROR(per_channel(op, "b_scale", in[4], d.n, false, &bs));
  LOOM_RETURN_IF_ERROR(per_channel(op, "b_zero_point", in[5], d.n, false, &bz));
  LOOM_RETURN_IF_ERROR(per_channel(op, "y_scale", in[6], 1, false, &ys));
  LOOM_RETURN_IF_ERROR(per_channel(op, "y_zero_point", in[7], 1, false, &yz));
  if (!(ys.at(0) > 0.0)) return invalid_argument("QLinearMatMul: y_scale must be positive");
  const bool y_unsigned = out[0].dtype == DType::kU8;
  const float y_scale = static_cast<float>(ys.at(0));
  const double y_zero = yz.at(0);
  return integer_matmul(op, in[0], in[3], d, az, bz,
                        [&](int64_t o, int64_t i, int64_t j, int32_t acc) {
                          const float k = static_cast<float>(as.at(i)) *
                                          static_cast<float>(bs.at(j)) / y_scale;
                          const int32_t q = requantize(
                              static_cast<double>(static_cast<float>(acc) * k) + y_zero,
                              y_unsigned);
                          if (y_unsigned) {
                            static_cast<uint8_t*>(out[0].data)[o] = static_cast<uint8_t>(q);
                          } else {
                            static_cast<int8_t*>(out[0].data)[o] = static_cast<int8_t>(q);
                          }
                        });
}

}  // namespace loom::kernels::nn
