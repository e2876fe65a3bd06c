// The Reduce* operators (Sum, Mean, Max, Min, Prod, L1, L2, LogSum,
// LogSumExp, SumSquare) and the family's shared operand helpers.
//
// Axes: an attribute for every operator in opsets 7-17 except ReduceSum,
// whose axes became an optional second input at opset 13 (together with
// noop_with_empty_axes); opset 18 moved the others the same way, so an
// axes input is accepted for every operator when the node's opset is 18 or
// unknown. Empty axes reduce every dimension unless noop_with_empty_axes.
//
// Floating types accumulate in double. Integer sums and products wrap like
// two's-complement arithmetic (the way NumPy, the ONNX reference, does);
// integer Max/Min compare exactly; the other integer reductions go through
// double and are clamped to the type.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/reduce/reduce.hpp"
#include "kernels/reduce/common.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::reduce {

// ---------------------------------------------------------------- shared helpers

Status unsupported_dtype(std::string_view op, std::string_view what, DType dtype) {
  return unimplemented(std::string(op) + ": " + std::string(what) + " has dtype " +
                       std::string(dtype_name(dtype)) + ", which is not supported");
}

Status check_operand(std::string_view op, std::string_view name, const TensorRef& t) {
  const size_t es = dtype_size(t.dtype);
  if (es == 0) {
    return invalid_argument(std::string(op) + ": operand '" + std::string(name) +
                            "' is missing or has an invalid dtype");
  }
  auto count = element_count(t.shape);
  if (!count.ok()) {
    return invalid_argument(std::string(op) + ": operand '" + std::string(name) + "': " +
                            count.status().message());
  }
  if (*count > SIZE_MAX / es || *count * es != t.byte_size) {
    return invalid_argument(std::string(op) + ": operand '" + std::string(name) +
                            "' of shape " + shape_to_string(t.shape) + " and dtype " +
                            std::string(dtype_name(t.dtype)) + " has " +
                            std::to_string(t.byte_size) + " bytes");
  }
  if (t.data == nullptr && t.byte_size != 0) {
    return invalid_argument(std::string(op) + ": operand '" + std::string(name) +
                            "' has no data");
  }
  return Status();
}

Status check_operand_dtype(std::string_view op, std::string_view name, const TensorRef& t,
                           DType dtype) {
  if (t.dtype != dtype) {
    return invalid_argument(std::string(op) + ": operand '" + std::string(name) +
                            "' has dtype " + std::string(dtype_name(t.dtype)) + ", expected " +
                            std::string(dtype_name(dtype)));
  }
  return check_operand(op, name, t);
}

std::vector<int64_t> strides_of(std::span<const int64_t> shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

int64_t product(std::span<const int64_t> shape, size_t begin, size_t end) {
  // A zero dimension first: the other dimensions of an empty tensor may
  // multiply past 2^63 (found by tests/fuzz, onnx_import).
  for (size_t d = begin; d < end && d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
  }
  int64_t p = 1;
  for (size_t d = begin; d < end && d < shape.size(); ++d) p *= shape[d];
  return p;
}

namespace {

enum class Kind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// Which dimensions a node reduces and the output shape.
struct Plan {
  std::vector<bool> reduced;
  Shape out_shape;
};

bool axes_input_allowed(std::string_view op, const Attributes& a) {
  return (op == "ReduceSum" && !a.opset_before(13)) || !a.opset_before(18);
}

Result<Plan> make_plan(std::string_view op, std::span<const int64_t> shape,
                       const std::vector<int64_t>& axes, bool from_input, const Attributes& a) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const bool keepdims = a.get_int("keepdims", 1) != 0;
  const bool noop = from_input && a.get_int("noop_with_empty_axes", 0) != 0;
  Plan p;
  p.reduced.assign(shape.size(), axes.empty() && !noop);
  for (int64_t axis : axes) {
    auto n = normalize_axis(op, axis, rank);
    if (!n.ok()) {
      return invalid_argument(std::string(op) + ": 'axes' value " + std::to_string(axis) +
                              " is out of range for input of shape " + shape_to_string(shape));
    }
    if (p.reduced[*n]) {
      return invalid_argument(std::string(op) + ": 'axes' names axis " + std::to_string(axis) +
                              " twice");
    }
    p.reduced[*n] = true;
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!p.reduced[d]) {
      p.out_shape.push_back(shape[d]);
    } else if (keepdims) {
      p.out_shape.push_back(1);
    }
  }
  return p;
}

// Calls fn(input_index, output_index) for every input element in order;
// ostride is the output stride of each input dimension (0 when reduced).
template <typename Fn>
void for_each_element(std::span<const int64_t> shape, const std::vector<int64_t>& ostride,
                      int64_t count, Fn&& fn) {
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t o = 0;
  for (int64_t i = 0; i < count; ++i) {
    fn(i, o);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) {
        o += ostride[d];
        break;
      }
      o -= ostride[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

template <typename T, typename A>
A to_acc(T x) {
  if constexpr (std::is_same_v<A, double>) {
    return to_double(x);
  } else if constexpr (std::is_same_v<A, uint64_t>) {
    // Integer sums wrap modulo 2^64 (defined for unsigned), then narrow.
    if constexpr (std::is_signed_v<T>) {
      return static_cast<uint64_t>(static_cast<int64_t>(x));
    } else {
      return static_cast<uint64_t>(x);
    }
  } else {
    return x;
  }
}

template <typename T, typename A>
T from_acc(A a) {
  if constexpr (std::is_same_v<A, double>) {
    return from_double<T>(a);
  } else {
    return static_cast<T>(a);  // modular narrowing (C++20) or the same type
  }
}

template <typename A>
A initial(Kind kind) {
  switch (kind) {
    case Kind::kProd: return A(1);
    case Kind::kMax:
      if constexpr (std::is_floating_point_v<A>) return -std::numeric_limits<A>::infinity();
      return std::numeric_limits<A>::lowest();
    case Kind::kMin:
      if constexpr (std::is_floating_point_v<A>) return std::numeric_limits<A>::infinity();
      return std::numeric_limits<A>::max();
    default: return A(0);
  }
}

template <typename T, typename A>
void accumulate(Kind kind, std::span<const int64_t> shape, const std::vector<int64_t>& ostride,
                int64_t in_count, int64_t group, const T* x, T* y, int64_t out_count) {
  std::vector<A> acc(static_cast<size_t>(out_count), initial<A>(kind));
  std::vector<double> shift;  // LogSumExp: the maximum of each group
  if (kind == Kind::kLogSumExp) {
    shift.assign(static_cast<size_t>(out_count), -std::numeric_limits<double>::infinity());
    for_each_element(shape, ostride, in_count, [&](int64_t i, int64_t o) {
      shift[o] = std::max(shift[o], to_double(x[i]));
    });
    for (double& m : shift) {
      if (!std::isfinite(m)) m = 0.0;  // all -inf (or empty): keep exp() finite
    }
  }
  for_each_element(shape, ostride, in_count, [&](int64_t i, int64_t o) {
    A& a = acc[o];
    const A v = to_acc<T, A>(x[i]);
    switch (kind) {
      case Kind::kSum:
      case Kind::kMean:
      case Kind::kLogSum: a += v; break;
      case Kind::kProd: a *= v; break;
      case Kind::kMax:
        if constexpr (std::is_floating_point_v<A>) {
          if (std::isnan(v) || v > a) a = v;
        } else if (v > a) {
          a = v;
        }
        break;
      case Kind::kMin:
        if constexpr (std::is_floating_point_v<A>) {
          if (std::isnan(v) || v < a) a = v;
        } else if (v < a) {
          a = v;
        }
        break;
      case Kind::kL1:
        if constexpr (std::is_same_v<A, uint64_t>) {
          a += (std::is_signed_v<T> && x[i] < 0) ? A(0) - v : v;
        } else if constexpr (std::is_floating_point_v<A>) {
          a += std::fabs(v);
        }
        break;
      case Kind::kL2:
      case Kind::kSumSquare: a += v * v; break;
      case Kind::kLogSumExp:
        if constexpr (std::is_floating_point_v<A>) a += std::exp(v - shift[o]);
        break;
    }
  });
  for (int64_t o = 0; o < out_count; ++o) {
    A a = acc[o];
    if constexpr (std::is_floating_point_v<A>) {
      switch (kind) {
        case Kind::kMean: a /= static_cast<double>(group); break;
        case Kind::kL2: a = std::sqrt(a); break;
        case Kind::kLogSum: a = std::log(a); break;
        case Kind::kLogSumExp: a = shift[o] + std::log(a); break;
        default: break;
      }
    }
    y[o] = from_acc<T, A>(a);
  }
}

std::string_view op_name(Kind kind) {
  switch (kind) {
    case Kind::kSum: return "ReduceSum";
    case Kind::kMean: return "ReduceMean";
    case Kind::kMax: return "ReduceMax";
    case Kind::kMin: return "ReduceMin";
    case Kind::kProd: return "ReduceProd";
    case Kind::kL1: return "ReduceL1";
    case Kind::kL2: return "ReduceL2";
    case Kind::kLogSum: return "ReduceLogSum";
    case Kind::kLogSumExp: return "ReduceLogSumExp";
    case Kind::kSumSquare: return "ReduceSumSquare";
  }
  return "Reduce";
}

Status reduce_run(Kind kind, std::span<const TensorRef> inputs,
                  std::span<const TensorRef> outputs, const Attributes& a) {
  const std::string_view op = op_name(kind);
  const bool input_axes = axes_input_allowed(op, a);
  LOOM_RETURN_IF_ERROR(check_arity(op, inputs.size(), 1, input_axes ? 2 : 1, outputs.size(), 1));
  const TensorRef& x = inputs[0];
  const TensorRef& y = outputs[0];
  LOOM_RETURN_IF_ERROR(check_operand(op, "data", x));
  if (!supported(x.dtype)) return unsupported_dtype(op, "input 'data'", x.dtype);
  LOOM_RETURN_IF_ERROR(check_operand_dtype(op, "reduced", y, x.dtype));
  std::vector<int64_t> axes;
  const bool from_input = inputs.size() > 1 && inputs[1].present();
  if (from_input) {
    LOOM_ASSIGN_OR_RETURN(axes, read_ints(op, "axes", inputs[1]));
  } else {
    axes = a.get_ints("axes");
  }
  LOOM_ASSIGN_OR_RETURN(Plan plan, make_plan(op, x.shape, axes, input_axes, a));
  LOOM_RETURN_IF_ERROR(check_output_shape(op, "reduced", y.shape, plan.out_shape));
  // Output strides per input dimension; reduced dimensions do not move.
  std::vector<int64_t> ostride(x.shape.size(), 0);
  int64_t stride = 1, group = 1;
  for (size_t d = x.shape.size(); d-- > 0;) {
    if (!plan.reduced[d]) ostride[d] = stride;
    int64_t& acc = plan.reduced[d] ? group : stride;
    // Only an empty input can get here with dimensions whose product
    // overflows (its data would not fit in memory otherwise).
    if (__builtin_mul_overflow(acc, x.shape[d], &acc)) {
      return invalid_argument(std::string(op) + ": input 'data' of shape " +
                              shape_to_string(x.shape) +
                              " has dimensions that multiply past 2^63");
    }
  }
  const int64_t in_count = product(x.shape, 0, x.shape.size());
  const int64_t out_count = stride;
  return visit_dtype(op, x.dtype, [&]<typename T>() -> Status {
    const T* xp = static_cast<const T*>(x.data);
    T* yp = static_cast<T*>(y.data);
    if constexpr (!std::is_same_v<T, bool>) {
      if constexpr (std::is_integral_v<T>) {
        if (kind == Kind::kMax || kind == Kind::kMin) {
          accumulate<T, T>(kind, x.shape, ostride, in_count, group, xp, yp, out_count);
          return Status();
        }
        if (kind == Kind::kSum || kind == Kind::kProd || kind == Kind::kL1 ||
            kind == Kind::kSumSquare) {
          accumulate<T, uint64_t>(kind, x.shape, ostride, in_count, group, xp, yp, out_count);
          return Status();
        }
      }
      accumulate<T, double>(kind, x.shape, ostride, in_count, group, xp, yp, out_count);
    }
    return Status();
  });
}

Result<std::vector<TensorType>> reduce_infer(Kind kind, std::span<const TensorType> inputs,
                                             const Attributes& a) {
  const std::string_view op = op_name(kind);
  const bool input_axes = axes_input_allowed(op, a);
  LOOM_RETURN_IF_ERROR(check_arity(op, inputs.size(), 1, input_axes ? 2 : 1, 1, 1));
  if (!supported(inputs[0].dtype)) return unsupported_dtype(op, "input 'data'", inputs[0].dtype);
  LOOM_RETURN_IF_ERROR(element_count(inputs[0].shape).status().with_context(
      std::string(op) + ": input 'data'"));
  std::vector<int64_t> axes;
  if (inputs.size() > 1 && inputs[1].dtype != DType::kInvalid) {
    LOOM_ASSIGN_OR_RETURN(axes, constant_ints(op, 1, "axes", inputs[1]));
  } else {
    axes = a.get_ints("axes");
  }
  LOOM_ASSIGN_OR_RETURN(Plan plan, make_plan(op, inputs[0].shape, axes, input_axes, a));
  return std::vector<TensorType>{{inputs[0].dtype, std::move(plan.out_shape)}};
}

}  // namespace

#define LOOM_REDUCE_DEFINE(name, kind)                                                   \
  Status name##_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs, \
                    const Attributes& attributes) {                                      \
    return reduce_run(kind, inputs, outputs, attributes);                                \
  }                                                                                      \
  Result<std::vector<TensorType>> name##_infer(std::span<const TensorType> inputs,       \
                                               const Attributes& attributes) {           \
    return reduce_infer(kind, inputs, attributes);                                       \
  }

LOOM_REDUCE_DEFINE(reduce_sum, Kind::kSum)
LOOM_REDUCE_DEFINE(reduce_mean, Kind::kMean)
LOOM_REDUCE_DEFINE(reduce_max, Kind::kMax)
LOOM_REDUCE_DEFINE(reduce_min, Kind::kMin)
LOOM_REDUCE_DEFINE(reduce_prod, Kind::kProd)
LOOM_REDUCE_DEFINE(reduce_l1, Kind::kL1)
LOOM_REDUCE_DEFINE(reduce_l2, Kind::kL2)
LOOM_REDUCE_DEFINE(reduce_log_sum, Kind::kLogSum)
LOOM_REDUCE_DEFINE(reduce_log_sum_exp, Kind::kLogSumExp)
LOOM_REDUCE_DEFINE(reduce_sum_square, Kind::kSumSquare)

#undef LOOM_REDUCE_DEFINE

}  // namespace loom::kernels::reduce
