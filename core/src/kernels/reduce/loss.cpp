// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 12-13): the
// losses are deterministic functions of their inputs, so they run at
// inference like any reduction.
//
// Input [N, C] or [N, C, d1, ..., dk] (float), target/labels [N] or
// [N, d1, ..., dk] (int32/int64), optional weight [C]. Each element's loss
// is -input[n, t, d...] * weight[t]; an element whose target equals
// `ignore_index` contributes 0 and no weight. `reduction` none keeps the
// per-element losses, sum adds them, mean (the default) divides the sum by
// the total weight of the elements not ignored. SoftmaxCrossEntropyLoss
// takes the log-softmax of the scores over axis 1 first and may return it as
// its second output. A target outside [0, C) that is not ignored is an
// error naming the element.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/checks.hpp"
#include "kernels/reduce/common.hpp"
#include "kernels/reduce/reduce.hpp"
#include "kernels/util.hpp"

namespace loom::kernels {
namespace {

constexpr std::string_view kNll = "NegativeLogLikelihoodLoss";
constexpr std::string_view kSce = "SoftmaxCrossEntropyLoss";

enum class LossReduction { kNone, kSum, kMean };

Result<LossReduction> loss_reduction(std::string_view op, const Attributes& a) {
  const std::string_view r = a.get_string("reduction", "mean");
  if (r == "none") return LossReduction::kNone;
  if (r == "sum") return LossReduction::kSum;
  if (r == "mean") return LossReduction::kMean;
  return invalid_argument(std::string(op) + ": unknown 'reduction' '" + std::string(r) +
                          "' (none, sum, mean)");
}

// Checks the operands' types and shapes; returns the output shape.
Result<Shape> loss_shapes(std::string_view op, DType x_dtype, std::span<const int64_t> x,
                          DType t_dtype, std::span<const int64_t> t, const DType* w_dtype,
                          std::span<const int64_t> w, LossReduction reduction) {
  const char* x_name = op == kNll ? "input" : "scores";
  const char* t_name = op == kNll ? "target" : "labels";
  if (!is_float_dtype(x_dtype)) return reduce::unsupported_dtype(op, x_name, x_dtype);
  if (t_dtype != DType::kI32 && t_dtype != DType::kI64) {
    return invalid_argument(std::string(op) + ": '" + t_name + "' must be int32 or int64, got " +
                            std::string(dtype_name(t_dtype)));
  }
  if (x.size() < 2) {
    return invalid_argument(std::string(op) + ": '" + x_name + "' must have rank 2 or more (N, C, ...), got " +
                            shape_to_string(x));
  }
  Shape expect{x[0]};
  expect.insert(expect.end(), x.begin() + 2, x.end());
  if (!std::equal(t.begin(), t.end(), expect.begin(), expect.end())) {
    return invalid_argument(std::string(op) + ": '" + t_name + "' has shape " + shape_to_string(t) +
                            "; '" + x_name + "' " + shape_to_string(x) + " needs " +
                            shape_to_string(expect));
  }
  if (w_dtype != nullptr) {
    if (*w_dtype != x_dtype) {
      return invalid_argument(std::string(op) + ": 'weight' has dtype " + std::string(dtype_name(*w_dtype)) +
                              ", '" + x_name + "' has " + std::string(dtype_name(x_dtype)));
    }
    if (w.size() != 1 || w[0] != x[1]) {
      return invalid_argument(std::string(op) + ": 'weight' has shape " + shape_to_string(w) + "; expected [" +
                              std::to_string(x[1]) + "] (C of '" + x_name + "')");
    }
  }
  if (reduction == LossReduction::kNone) return expect;
  return Shape{};
}

int64_t label_at(const TensorRef& t, int64_t i) {
  return t.dtype == DType::kI32 ? static_cast<const int32_t*>(t.data)[i]
                                : static_cast<const int64_t*>(t.data)[i];
}

// The loss over log-probabilities `logp` (double, [N, C, D] flattened).
template <typename T>
Status nll_from(std::string_view op, const std::vector<double>& logp, std::span<const int64_t> x_shape,
                const TensorRef& target, const TensorRef* weight, LossReduction reduction,
                const Attributes& a, T* out) {
  const int64_t n = x_shape[0], c = x_shape[1];
  const int64_t d = reduce::product(x_shape, 2, x_shape.size());
  const AttributeDef* ignore_attr = a.find("ignore_index");
  const bool has_ignore = ignore_attr != nullptr;
  const int64_t ignore = a.get_int("ignore_index", 0);
  const T* w = weight != nullptr ? static_cast<const T*>(weight->data) : nullptr;
  double sum = 0.0, total_weight = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      const int64_t k = i * d + j;
      const int64_t label = label_at(target, k);
      double loss = 0.0;
      if (!(has_ignore && label == ignore)) {
        if (label < 0 || label >= c) {
          return invalid_argument(std::string(op) + ": target " + std::to_string(label) + " at element " +
                                  std::to_string(k) + " is outside [0, " + std::to_string(c) +
                                  ") and is not 'ignore_index'");
        }
        const double wt = w != nullptr ? reduce::to_double(w[label]) : 1.0;
        loss = -logp[static_cast<size_t>((i * c + label) * d + j)] * wt;
        total_weight += wt;
      }
      if (reduction == LossReduction::kNone) {
        out[k] = reduce::from_double<T>(loss);
      } else {
        sum += loss;
      }
    }
  }
  if (reduction == LossReduction::kSum) out[0] = reduce::from_double<T>(sum);
  if (reduction == LossReduction::kMean) out[0] = reduce::from_double<T>(sum / total_weight);
  return Status();
}

Status loss_run(std::string_view op, std::span<const TensorRef> in, std::span<const TensorRef> out,
                const Attributes& a) {
  const bool sce = op == kSce;
  // SoftmaxCrossEntropyLoss's second output, log_prob, is optional.
  const size_t outputs = sce && out.size() == 2 ? 2 : 1;
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 2, 3, out.size(), outputs));
  const TensorRef &x = in[0], &t = in[1];
  LOOM_RETURN_IF_ERROR(reduce::check_operand(op, sce ? "scores" : "input", x));
  LOOM_RETURN_IF_ERROR(reduce::check_operand(op, sce ? "labels" : "target", t));
  const TensorRef* w = in.size() > 2 && in[2].present() ? &in[2] : nullptr;
  if (w != nullptr) LOOM_RETURN_IF_ERROR(reduce::check_operand(op, "weight", *w));
  LOOM_ASSIGN_OR_RETURN(LossReduction reduction, loss_reduction(op, a));
  LOOM_ASSIGN_OR_RETURN(Shape shape, loss_shapes(op, x.dtype, x.shape, t.dtype, t.shape,
                                                 w != nullptr ? &w->dtype : nullptr,
                                                 w != nullptr ? w->shape : std::span<const int64_t>(),
                                                 reduction));
  LOOM_RETURN_IF_ERROR(reduce::check_operand_dtype(op, "output", out[0], x.dtype));
  LOOM_RETURN_IF_ERROR(check_output_shape(op, "output", out[0].shape, shape));
  const bool log_prob_out = sce && out.size() > 1 && out[1].present();
  if (log_prob_out) {
    LOOM_RETURN_IF_ERROR(reduce::check_operand_dtype(op, "log_prob", out[1], x.dtype));
    LOOM_RETURN_IF_ERROR(check_output_shape(op, "log_prob", out[1].shape, x.shape));
  }
  return visit_dtype(op, x.dtype, [&]<typename T>() -> Status {
    if constexpr (reduce::kIsFloatLike<T>) {
      const T* xp = static_cast<const T*>(x.data);
      const size_t count = static_cast<size_t>(reduce::product(x.shape, 0, x.shape.size()));
      std::vector<double> logp(count);
      for (size_t i = 0; i < count; ++i) logp[i] = reduce::to_double(xp[i]);
      if (sce) {
        const int64_t n = x.shape[0], c = x.shape[1];
        const int64_t d = reduce::product(x.shape, 2, x.shape.size());
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < d; ++j) {
            double max = -std::numeric_limits<double>::infinity();
            for (int64_t k = 0; k < c; ++k) max = std::max(max, logp[(i * c + k) * d + j]);
            double s = 0.0;
            for (int64_t k = 0; k < c; ++k) s += std::exp(logp[(i * c + k) * d + j] - max);
            const double shift = max + std::log(s);
            for (int64_t k = 0; k < c; ++k) logp[(i * c + k) * d + j] -= shift;
          }
        }
        if (log_prob_out) {
          T* lp = static_cast<T*>(out[1].data);
          for (size_t i = 0; i < count; ++i) lp[i] = reduce::from_double<T>(logp[i]);
        }
      }
      return nll_from<T>(op, logp, x.shape, t, w, reduction, a, static_cast<T*>(out[0].data));
    }
    return Status();
  });
}

Result<std::vector<TensorType>> loss_infer(std::string_view op, std::span<const TensorType> in,
                                           const Attributes& a) {
  const bool sce = op == kSce;
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 2, 3, 1, 1));
  const bool has_w = in.size() > 2 && in[2].dtype != DType::kInvalid;
  LOOM_RETURN_IF_ERROR(element_count(in[0].shape).status().with_context(std::string(op)));
  LOOM_ASSIGN_OR_RETURN(LossReduction reduction, loss_reduction(op, a));
  LOOM_ASSIGN_OR_RETURN(Shape shape, loss_shapes(op, in[0].dtype, in[0].shape, in[1].dtype, in[1].shape,
                                                 has_w ? &in[2].dtype : nullptr,
                                                 has_w ? std::span<const int64_t>(in[2].shape)
                                                       : std::span<const int64_t>(),
                                                 reduction));
  std::vector<TensorType> out{{in[0].dtype, shape}};
  if (sce) out.push_back({in[0].dtype, in[0].shape});
  return out;
}

}  // namespace

namespace reduce {
Status nll_loss_run(std::span<const TensorRef> i, std::span<const TensorRef> o, const Attributes& a) {
  return loss_run(kNll, i, o, a);
}
Result<std::vector<TensorType>> nll_loss_infer(std::span<const TensorType> i, const Attributes& a) {
  return loss_infer(kNll, i, a);
}
Status softmax_cross_entropy_loss_run(std::span<const TensorRef> i, std::span<const TensorRef> o,
                                      const Attributes& a) {
  return loss_run(kSce, i, o, a);
}
Result<std::vector<TensorType>> softmax_cross_entropy_loss_infer(std::span<const TensorType> i,
                                                                 const Attributes& a) {
  return loss_infer(kSce, i, a);
}
}  // namespace reduce

}  // namespace loom::kernels
