// ArgMax, ArgMin, TopK and CumSum: the reductions and scans along one axis.
//
// ArgMax/ArgMin: axis (default 0), keepdims (default 1), select_last_index
// (opset 12+, default 0: the first extreme wins a tie). i64 output.
// TopK: k is an attribute before opset 10 and a 1-element i64 input after;
// largest and sorted came at 11 (default 1). Ties keep the lower index first.
// The output is always sorted (sorted=0 leaves the order unspecified).
// CumSum: axis is an i32/i64 scalar (or 1-element) input; exclusive, reverse.
#include <algorithm>
#include <numeric>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/reduce/reduce.hpp"
#include "kernels/reduce/common.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::reduce {
namespace {

bool numeric(DType d) { return d != DType::kBool && dtype_size(d) != 0; }

// NaN counts as larger than every number (NumPy's argmax/sort order).
template <typename T>
bool greater(T a, T b) {
  const auto x = comparable(a), y = comparable(b);
  if constexpr (kIsFloatLike<T>) {
    if (std::isnan(x)) return !std::isnan(y);
    if (std::isnan(y)) return false;
  }
  return x > y;
}

// ---------------------------------------------------------------- ArgMax / ArgMin

struct ArgPlan {
  size_t axis;
  Shape out_shape;
};

Result<ArgPlan> arg_plan(std::string_view op, std::span<const int64_t> shape,
                         const Attributes& a) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0) return invalid_argument(std::string(op) + ": input 'data' must not be a scalar");
  const int64_t axis = a.get_int("axis", 0);
  auto n = normalize_axis(op, axis, rank);
  if (!n.ok()) {
    return invalid_argument(std::string(op) + ": 'axis' " + std::to_string(axis) +
                            " is out of range for input of shape " + shape_to_string(shape));
  }
  ArgPlan p{static_cast<size_t>(*n), {}};
  if (shape[p.axis] == 0) {
    return invalid_argument(std::string(op) + ": input 'data' of shape " +
                            shape_to_string(shape) + " is empty along axis " +
                            std::to_string(axis));
  }
  const bool keepdims = a.get_int("keepdims", 1) != 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d != p.axis) {
      p.out_shape.push_back(shape[d]);
    } else if (keepdims) {
      p.out_shape.push_back(1);
    }
  }
  return p;
}

Status arg_run(bool is_max, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
               const Attributes& a) {
  const std::string_view op = is_max ? "ArgMax" : "ArgMin";
  LOOM_RETURN_IF_ERROR(check_arity(op, inputs.size(), 1, 1, outputs.size(), 1));
  const TensorRef& x = inputs[0];
  LOOM_RETURN_IF_ERROR(check_operand(op, "data", x));
  if (!numeric(x.dtype)) return unsupported_dtype(op, "input 'data'", x.dtype);
  LOOM_RETURN_IF_ERROR(check_operand_dtype(op, "reduced", outputs[0], DType::kI64));
  LOOM_ASSIGN_OR_RETURN(ArgPlan plan, arg_plan(op, x.shape, a));
  LOOM_RETURN_IF_ERROR(check_output_shape(op, "reduced", outputs[0].shape, plan.out_shape));
  const bool last = a.get_int("select_last_index", 0) != 0;
  const int64_t outer = product(x.shape, 0, plan.axis);
  const int64_t n = x.shape[plan.axis];
  const int64_t inner = product(x.shape, plan.axis + 1, x.shape.size());
  int64_t* y = static_cast<int64_t*>(outputs[0].data);
  return visit_dtype(op, x.dtype, [&]<typename T>() -> Status {
    const T* xp = static_cast<const T*>(x.data);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* base = xp + o * n * inner + i;
        int64_t best = 0;
        for (int64_t j = 1; j < n; ++j) {
          const T v = base[j * inner], b = base[best * inner];
          const bool better = is_max ? greater(v, b) : greater(b, v);
          const bool tie = !greater(v, b) && !greater(b, v);
          if (better || (last && tie)) best = j;
        }
        y[o * inner + i] = best;
      }
    }
    return Status();
  });
}

Result<std::vector<TensorType>> arg_infer(bool is_max, std::span<const TensorType> inputs,
                                          const Attributes& a) {
  const std::string_view op = is_max ? "ArgMax" : "ArgMin";
  LOOM_RETURN_IF_ERROR(check_arity(op, inputs.size(), 1, 1, 1, 1));
  if (!numeric(inputs[0].dtype)) return unsupported_dtype(op, "input 'data'", inputs[0].dtype);
  LOOM_RETURN_IF_ERROR(element_count(inputs[0].shape).status().with_context(
      std::string(op) + ": input 'data'"));
  LOOM_ASSIGN_OR_RETURN(ArgPlan plan, arg_plan(op, inputs[0].shape, a));
  return std::vector<TensorType>{{DType::kI64, std::move(plan.out_shape)}};
}

}  // namespace

Status argmax_run(std::span<const TensorRef> i, std::span<const TensorRef> o, const Attributes& a) {
  return arg_run(true, i, o, a);
}
Result<std::vector<TensorType>> argmax_infer(std::span<const TensorType> i, const Attributes& a) {
  return arg_infer(true, i, a);
}
Status argmin_run(std::span<const TensorRef> i, std::span<const TensorRef> o, const Attributes& a) {
  return arg_run(false, i, o, a);
}
Result<std::vector<TensorType>> argmin_infer(std::span<const TensorType> i, const Attributes& a) {
  return arg_infer(false, i, a);
}

// ---------------------------------------------------------------- TopK

namespace {

Result<int64_t> topk_k(const Attributes& a, const std::vector<int64_t>& k_input) {
  if (a.opset_before(10)) {
    if (a.find("k") == nullptr) return invalid_argument("TopK: attribute 'k' is missing");
    return a.get_int("k", -1);
  }
  if (k_input.size() != 1) {
    return invalid_argument("TopK: input 'K' must hold exactly one value, got " +
                            std::to_string(k_input.size()));
  }
  return k_input[0];
}

Result<Shape> topk_shape(std::span<const int64_t> shape, int64_t k, const Attributes& a,
                         size_t* axis_out) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0) return invalid_argument("TopK: input 'X' must not be a scalar");
  const int64_t axis = a.get_int("axis", -1);
  auto n = normalize_axis("TopK", axis, rank);
  if (!n.ok()) {
    return invalid_argument("TopK: 'axis' " + std::to_string(axis) +
                            " is out of range for input of shape " + shape_to_string(shape));
  }
  if (k < 0 || k > shape[*n]) {
    return invalid_argument("TopK: k " + std::to_string(k) + " must be in [0, " +
                            std::to_string(shape[*n]) + "] for input of shape " +
                            shape_to_string(shape) + " along axis " + std::to_string(axis));
  }
  Shape out(shape.begin(), shape.end());
  out[*n] = k;
  *axis_out = static_cast<size_t>(*n);
  return out;
}

}  // namespace

Status topk_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                const Attributes& a) {
  const bool k_input = !a.opset_before(10);
  LOOM_RETURN_IF_ERROR(check_arity("TopK", inputs.size(), k_input ? 2 : 1, k_input ? 2 : 1,
                                   outputs.size(), 2));
  const TensorRef& x = inputs[0];
  LOOM_RETURN_IF_ERROR(check_operand("TopK", "X", x));
  if (!numeric(x.dtype)) return unsupported_dtype("TopK", "input 'X'", x.dtype);
  std::vector<int64_t> kv;
  if (k_input) {
    LOOM_ASSIGN_OR_RETURN(kv, read_ints("TopK", "K", inputs[1]));
  }
  LOOM_ASSIGN_OR_RETURN(int64_t k, topk_k(a, kv));
  size_t axis = 0;
  LOOM_ASSIGN_OR_RETURN(Shape out_shape, topk_shape(x.shape, k, a, &axis));
  LOOM_RETURN_IF_ERROR(check_operand_dtype("TopK", "Values", outputs[0], x.dtype));
  LOOM_RETURN_IF_ERROR(check_operand_dtype("TopK", "Indices", outputs[1], DType::kI64));
  LOOM_RETURN_IF_ERROR(check_output_shape("TopK", "Values", outputs[0].shape, out_shape));
  LOOM_RETURN_IF_ERROR(check_output_shape("TopK", "Indices", outputs[1].shape, out_shape));
  const bool largest = a.get_int("largest", 1) != 0;
  const int64_t outer = product(x.shape, 0, axis);
  const int64_t n = x.shape[axis];
  const int64_t inner = product(x.shape, axis + 1, x.shape.size());
  int64_t* idx_out = static_cast<int64_t*>(outputs[1].data);
  std::vector<int64_t> order(static_cast<size_t>(n));
  return visit_dtype("TopK", x.dtype, [&]<typename T>() -> Status {
    const T* xp = static_cast<const T*>(x.data);
    T* vals = static_cast<T*>(outputs[0].data);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* base = xp + o * n * inner + i;
        std::iota(order.begin(), order.end(), int64_t{0});
        // Stable, so equal values keep the lower index first.
        std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) {
          return largest ? greater(base[l * inner], base[r * inner])
                         : greater(base[r * inner], base[l * inner]);
        });
        for (int64_t j = 0; j < k; ++j) {
          const int64_t dst = o * k * inner + j * inner + i;
          vals[dst] = base[order[j] * inner];
          idx_out[dst] = order[j];
        }
      }
    }
    return Status();
  });
}

Result<std::vector<TensorType>> topk_infer(std::span<const TensorType> inputs,
                                           const Attributes& a) {
  const bool k_input = !a.opset_before(10);
  LOOM_RETURN_IF_ERROR(check_arity("TopK", inputs.size(), k_input ? 2 : 1, k_input ? 2 : 1, 2, 2));
  if (!numeric(inputs[0].dtype)) return unsupported_dtype("TopK", "input 'X'", inputs[0].dtype);
  LOOM_RETURN_IF_ERROR(element_count(inputs[0].shape).status().with_context("TopK: input 'X'"));
  std::vector<int64_t> kv;
  if (k_input) {
    LOOM_ASSIGN_OR_RETURN(kv, constant_ints("TopK", 1, "K", inputs[1]));
  }
  LOOM_ASSIGN_OR_RETURN(int64_t k, topk_k(a, kv));
  size_t axis = 0;
  LOOM_ASSIGN_OR_RETURN(Shape out_shape, topk_shape(inputs[0].shape, k, a, &axis));
  return std::vector<TensorType>{{inputs[0].dtype, out_shape}, {DType::kI64, out_shape}};
}

// ---------------------------------------------------------------- CumSum

Status cumsum_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                  const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity("CumSum", inputs.size(), 2, 2, outputs.size(), 1));
  const TensorRef& x = inputs[0];
  LOOM_RETURN_IF_ERROR(check_operand("CumSum", "x", x));
  if (!numeric(x.dtype)) return unsupported_dtype("CumSum", "input 'x'", x.dtype);
  LOOM_RETURN_IF_ERROR(check_operand_dtype("CumSum", "y", outputs[0], x.dtype));
  LOOM_RETURN_IF_ERROR(check_output_shape("CumSum", "y", outputs[0].shape, x.shape));
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axis_v, read_ints("CumSum", "axis", inputs[1]));
  if (axis_v.size() != 1 || inputs[1].shape.size() > 1) {
    return invalid_argument("CumSum: input 'axis' must be a scalar, got shape " +
                            shape_to_string(inputs[1].shape));
  }
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  if (rank == 0) return invalid_argument("CumSum: input 'x' must not be a scalar");
  auto axis = normalize_axis("CumSum", axis_v[0], rank);
  if (!axis.ok()) {
    return invalid_argument("CumSum: 'axis' " + std::to_string(axis_v[0]) +
                            " is out of range for input of shape " + shape_to_string(x.shape));
  }
  const size_t ax = static_cast<size_t>(*axis);
  const bool exclusive = a.get_int("exclusive", 0) != 0;
  const bool reverse = a.get_int("reverse", 0) != 0;
  const int64_t outer = product(x.shape, 0, ax);
  const int64_t n = x.shape[ax];
  const int64_t inner = product(x.shape, ax + 1, x.shape.size());
  return visit_dtype("CumSum", x.dtype, [&]<typename T>() -> Status {
    const T* xp = static_cast<const T*>(x.data);
    T* yp = static_cast<T*>(outputs[0].data);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * n * inner + i;
        // Integers wrap (unsigned arithmetic); floats accumulate in double.
        double fsum = 0.0;
        uint64_t isum = 0;
        for (int64_t s = 0; s < n; ++s) {
          const int64_t j = reverse ? n - 1 - s : s;
          const T v = xp[base + j * inner];
          if constexpr (kIsFloatLike<T>) {
            if (exclusive) {
              yp[base + j * inner] = from_double<T>(fsum);
              fsum += to_double(v);
            } else {
              fsum += to_double(v);
              yp[base + j * inner] = from_double<T>(fsum);
            }
          } else if constexpr (!std::is_same_v<T, bool>) {
            const uint64_t u = std::is_signed_v<T> ? static_cast<uint64_t>(static_cast<int64_t>(v))
                                                   : static_cast<uint64_t>(v);
            if (exclusive) {
              yp[base + j * inner] = static_cast<T>(isum);
              isum += u;
            } else {
              isum += u;
              yp[base + j * inner] = static_cast<T>(isum);
            }
          }
        }
      }
    }
    return Status();
  });
}

Result<std::vector<TensorType>> cumsum_infer(std::span<const TensorType> inputs,
                                             const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("CumSum", inputs.size(), 2, 2, 1, 1));
  if (!numeric(inputs[0].dtype)) return unsupported_dtype("CumSum", "input 'x'", inputs[0].dtype);
  if (inputs[1].dtype != DType::kI32 && inputs[1].dtype != DType::kI64) {
    return invalid_argument("CumSum: input 'axis' must be i32 or i64, got " +
                            std::string(dtype_name(inputs[1].dtype)));
  }
  if (inputs[0].shape.empty()) return invalid_argument("CumSum: input 'x' must not be a scalar");
  LOOM_RETURN_IF_ERROR(element_count(inputs[0].shape).status().with_context("CumSum: input 'x'"));
  return std::vector<TensorType>{{inputs[0].dtype, inputs[0].shape}};
}

}  // namespace loom::kernels::reduce
