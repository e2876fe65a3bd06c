// Softmax, LogSoftmax and Hardmax over f32, f64, f16 and bf16 (f16/bf16 in
// float, the others in their own type with a double sum).
//
// Axis semantics changed at opset 13. Before, the input is coerced to 2-D
// [prod(shape[:axis]), prod(shape[axis:])] with `axis` defaulting to 1, and
// each row is normalized over the whole flattened trailing part. From 13,
// the operator works along the single dimension `axis`, default -1. Both are
// one loop over (outer, n, inner) slices: the old form has inner = 1.
// Numerically stable: each slice's maximum is subtracted before exp().
#include <cmath>
#include <limits>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/ops.hpp"
#include "kernels/reduce/reduce.hpp"
#include "kernels/reduce/common.hpp"
#include "kernels/util.hpp"

namespace loom::kernels {
namespace {

enum class Mode { kSoftmax, kLogSoftmax, kHardmax };

std::string_view op_name(Mode m) {
  switch (m) {
    case Mode::kSoftmax: return "Softmax";
    case Mode::kLogSoftmax: return "LogSoftmax";
    case Mode::kHardmax: return "Hardmax";
  }
  return "Softmax";
}

struct Slices {
  int64_t outer = 1, n = 1, inner = 1;
};

Result<Slices> slices(Mode mode, std::span<const int64_t> shape, const Attributes& a) {
  const std::string_view op = op_name(mode);
  const int64_t rank = static_cast<int64_t>(shape.size());
  const bool coerce_2d = a.opset_before(13);
  const int64_t axis = a.get_int("axis", coerce_2d ? 1 : -1);
  if (rank == 0 || axis < -rank || axis >= rank) {
    return invalid_argument(std::string(op) + ": axis " + std::to_string(axis) +
                            " is out of range for input of shape " + shape_to_string(shape) +
                            " (rank " + std::to_string(rank) + ")");
  }
  const size_t ax = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  Slices s;
  s.outer = reduce::product(shape, 0, ax);
  if (coerce_2d) {
    s.n = reduce::product(shape, ax, shape.size());
  } else {
    s.n = shape[ax];
    s.inner = reduce::product(shape, ax + 1, shape.size());
  }
  return s;
}

template <typename T>
void normalize(Mode mode, const Slices& s, const T* x, T* y) {
  using reduce::from_double;
  using reduce::to_double;
  const int64_t n = s.n, inner = s.inner;
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      if (n == 0) continue;
      double max = to_double(x[base]);
      int64_t arg = 0;
      for (int64_t j = 1; j < n; ++j) {
        const double v = to_double(x[base + j * inner]);
        if (v > max) {
          max = v;
          arg = j;
        }
      }
      if (mode == Mode::kHardmax) {
        for (int64_t j = 0; j < n; ++j) y[base + j * inner] = from_double<T>(j == arg ? 1.0 : 0.0);
        continue;
      }
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(to_double(x[base + j * inner]) - max);
      if (mode == Mode::kSoftmax) {
        const double inv = 1.0 / sum;
        for (int64_t j = 0; j < n; ++j) {
          y[base + j * inner] = from_double<T>(std::exp(to_double(x[base + j * inner]) - max) * inv);
        }
      } else {
        const double log_sum = std::log(sum);
        for (int64_t j = 0; j < n; ++j) {
          y[base + j * inner] = from_double<T>(to_double(x[base + j * inner]) - max - log_sum);
        }
      }
    }
  }
}

Status run(Mode mode, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
           const Attributes& a) {
  const std::string_view op = op_name(mode);
  LOOM_RETURN_IF_ERROR(check_arity(op, inputs.size(), 1, 1, outputs.size(), 1));
  const TensorRef& x = inputs[0];
  LOOM_RETURN_IF_ERROR(reduce::check_operand(op, "input", x));
  if (!is_float_dtype(x.dtype)) return reduce::unsupported_dtype(op, "input", x.dtype);
  LOOM_RETURN_IF_ERROR(reduce::check_operand_dtype(op, "output", outputs[0], x.dtype));
  LOOM_RETURN_IF_ERROR(check_output_shape(op, "output", outputs[0].shape, x.shape));
  LOOM_ASSIGN_OR_RETURN(Slices s, slices(mode, x.shape, a));
  return visit_dtype(op, x.dtype, [&]<typename T>() -> Status {
    if constexpr (reduce::kIsFloatLike<T>) {
      normalize<T>(mode, s, static_cast<const T*>(x.data), static_cast<T*>(outputs[0].data));
    }
    return Status();
  });
}

Result<std::vector<TensorType>> infer(Mode mode, std::span<const TensorType> inputs,
                                      const Attributes& a) {
  const std::string_view op = op_name(mode);
  LOOM_RETURN_IF_ERROR(check_arity(op, inputs.size(), 1, 1, 1, 1));
  if (!is_float_dtype(inputs[0].dtype)) {
    return reduce::unsupported_dtype(op, "input", inputs[0].dtype);
  }
  LOOM_RETURN_IF_ERROR(element_count(inputs[0].shape).status().with_context(
      std::string(op) + ": input"));
  LOOM_RETURN_IF_ERROR(slices(mode, inputs[0].shape, a).status());
  return std::vector<TensorType>{{inputs[0].dtype, inputs[0].shape}};
}

}  // namespace

namespace ops {
Status softmax_run(std::span<const TensorRef> i, std::span<const TensorRef> o,
                   const Attributes& a) {
  return run(Mode::kSoftmax, i, o, a);
}
Result<std::vector<TensorType>> softmax_infer(std::span<const TensorType> i, const Attributes& a) {
  return infer(Mode::kSoftmax, i, a);
}
}  // namespace ops

namespace reduce {
Status log_softmax_run(std::span<const TensorRef> i, std::span<const TensorRef> o,
                       const Attributes& a) {
  return run(Mode::kLogSoftmax, i, o, a);
}
Result<std::vector<TensorType>> log_softmax_infer(std::span<const TensorType> i,
                                                  const Attributes& a) {
  return infer(Mode::kLogSoftmax, i, a);
}
Status hardmax_run(std::span<const TensorRef> i, std::span<const TensorRef> o,
                   const Attributes& a) {
  return run(Mode::kHardmax, i, o, a);
}
Result<std::vector<TensorType>> hardmax_infer(std::span<const TensorType> i, const Attributes& a) {
  return infer(Mode::kHardmax, i, a);
}
}  // namespace reduce

}  // namespace loom::kernels
