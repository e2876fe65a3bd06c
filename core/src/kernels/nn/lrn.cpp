// LRN (local response normalization across channels, opsets 1 and 13):
// for X [N, C, d1, ...], each element is divided by
// (bias + alpha / size * sum of x^2 over the channels
//  [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] clipped to [0, C))^beta.
#include <cmath>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/nn/nn.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::nn {
namespace {

constexpr std::string_view kLrn = "LRN";

struct LrnParams {
  double alpha = 1e-4, beta = 0.75, bias = 1.0;
  int64_t size = 0;
};

Result<LrnParams> lrn_params(std::span<const int64_t> x, const Attributes& a) {
  if (x.size() < 3) {
    return invalid_argument("LRN: input 'X' must have rank >= 3 (N, C, D1, ...), got " + shape_to_string(x));
  }
  if (a.find("size") == nullptr) return invalid_argument("LRN: attribute 'size' is required");
  LrnParams p;
  p.size = a.get_int("size", 0);
  if (p.size < 1) return invalid_argument("LRN: attribute 'size' must be positive, got " + std::to_string(p.size));
  p.alpha = a.get_float("alpha", 1e-4f);
  p.beta = a.get_float("beta", 0.75f);
  p.bias = a.get_float("bias", 1.0f);
  return p;
}

}  // namespace

Result<std::vector<TensorType>> lrn_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kLrn, in.size(), 1, 1, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(kLrn, "X", in[0].dtype, {DType::kF32}));
  LOOM_RETURN_IF_ERROR(lrn_params(in[0].shape, a).status());
  return std::vector<TensorType>{{DType::kF32, in[0].shape}};
}

Status lrn_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kLrn, in.size(), 1, 1, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand(kLrn, "X", in[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(kLrn, "Y", out[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_output_shape(kLrn, "Y", out[0].shape, in[0].shape));
  LOOM_ASSIGN_OR_RETURN(LrnParams p, lrn_params(in[0].shape, a));
  const int64_t n = in[0].shape[0], c = in[0].shape[1];
  int64_t inner = 1;
  for (size_t i = 2; i < in[0].shape.size(); ++i) inner *= in[0].shape[i];
  const int64_t before = (p.size - 1) / 2, after = p.size - 1 - before;
  const float* x = in_data(in[0]);
  float* y = out_data(out[0]);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t lo = std::max<int64_t>(0, ch - before);
      const int64_t hi = std::min<int64_t>(c - 1, ch > INT64_MAX - after ? c - 1 : ch + after);
      for (int64_t i = 0; i < inner; ++i) {
        double sq = 0.0;
        for (int64_t k = lo; k <= hi; ++k) {
          const double v = x[(b * c + k) * inner + i];
          sq += v * v;
        }
        const int64_t at = (b * c + ch) * inner + i;
        y[at] = static_cast<float>(x[at] / std::pow(p.bias + p.alpha / static_cast<double>(p.size) * sq, p.beta));
      }
    }
  }
  return Status();
}

}  // namespace loom::kernels::nn
