// Det (opset 11): the determinant of each square matrix of X [*, M, M]
// (f32), by Gaussian elimination with partial pivoting in double.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/checks.hpp"
#include "kernels/nn/nn.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::nn {
namespace {

constexpr std::string_view kDet = "Det";

Result<Shape> det_shape(std::span<const int64_t> x) {
  if (x.size() < 2 || x[x.size() - 1] != x[x.size() - 2]) {
    return invalid_argument("Det: input 'X' must be [*, M, M] (square matrices), got shape " + shape_to_string(x));
  }
  return Shape(x.begin(), x.end() - 2);
}

double determinant(std::vector<double>& a, int64_t m) {
  double det = 1.0;
  for (int64_t col = 0; col < m; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < m; ++r) {
      if (std::fabs(a[r * m + col]) > std::fabs(a[pivot * m + col])) pivot = r;
    }
    if (a[pivot * m + col] == 0.0) return 0.0;
    if (pivot != col) {
      for (int64_t k = 0; k < m; ++k) std::swap(a[pivot * m + k], a[col * m + k]);
      det = -det;
    }
    const double p = a[col * m + col];
    det *= p;
    for (int64_t r = col + 1; r < m; ++r) {
      const double f = a[r * m + col] / p;
      for (int64_t k = col; k < m; ++k) a[r * m + k] -= f * a[col * m + k];
    }
  }
  return det;
}

}  // namespace

Result<std::vector<TensorType>> det_infer(std::span<const TensorType> in, const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity(kDet, in.size(), 1, 1, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(kDet, "X", in[0].dtype, {DType::kF32}));
  LOOM_ASSIGN_OR_RETURN(Shape out, det_shape(in[0].shape));
  LOOM_RETURN_IF_ERROR(checked_count(kDet, "X", in[0].shape).status());
  return std::vector<TensorType>{{DType::kF32, out}};
}

Status det_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity(kDet, in.size(), 1, 1, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand(kDet, "X", in[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(kDet, "Y", out[0], {DType::kF32}));
  LOOM_ASSIGN_OR_RETURN(Shape shape, det_shape(in[0].shape));
  LOOM_RETURN_IF_ERROR(check_output_shape(kDet, "Y", out[0].shape, shape));
  const int64_t m = in[0].shape.back();
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  const float* x = in_data(in[0]);
  float* y = out_data(out[0]);
  std::vector<double> a(static_cast<size_t>(m * m));
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t k = 0; k < m * m; ++k) a[static_cast<size_t>(k)] = x[i * m * m + k];
    y[i] = static_cast<float>(determinant(a, m));
  }
  return Status();
}

}  // namespace loom::kernels::nn
