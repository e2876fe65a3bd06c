// GridSample (opset 16; opset 20's 'linear'/'cubic' names too) on 4-D f32
// input: X [N, C, H, W] sampled at grid [N, H_out, W_out, 2], whose last
// axis holds (x, y) normalized to [-1, 1].
//
// A normalized coordinate becomes a pixel coordinate by align_corners (1:
// -1 and 1 are the centres of the corner pixels; 0: their outer edges). The
// padding mode then moves it: 'border' clamps it into the image, 'reflection'
// reflects it off the image's edges (its corner centres with align_corners,
// else its outer edges); 'zeros' leaves it. Interpolation reads pixels, a
// pixel outside the image being 0 ('zeros'), the nearest edge pixel
// ('border') or its reflection ('reflection'): nearest (round half to even),
// bilinear, or bicubic (Keys, a = -0.75) over the 4x4 neighbourhood.
#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/nn/nn.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::nn {
namespace {

constexpr std::string_view kGridSample = "GridSample";

enum class GsMode { kNearest, kLinear, kCubic };
enum class GsPadding { kZeros, kBorder, kReflection };

struct GsParams {
  GsMode mode = GsMode::kLinear;
  GsPadding padding = GsPadding::kZeros;
  bool align_corners = false;
};

Result<GsParams> gs_params(const Attributes& a) {
  GsParams p;
  const std::string_view mode = a.get_string("mode", a.opset_before(20) ? "bilinear" : "linear");
  if (mode == "nearest") {
    p.mode = GsMode::kNearest;
  } else if (mode == "bilinear" || mode == "linear") {
    p.mode = GsMode::kLinear;
  } else if (mode == "bicubic" || mode == "cubic") {
    p.mode = GsMode::kCubic;
  } else {
    return invalid_argument("GridSample: unknown 'mode' '" + std::string(mode) + "'");
  }
  const std::string_view pad = a.get_string("padding_mode", "zeros");
  if (pad == "zeros") {
    p.padding = GsPadding::kZeros;
  } else if (pad == "border") {
    p.padding = GsPadding::kBorder;
  } else if (pad == "reflection") {
    p.padding = GsPadding::kReflection;
  } else {
    return invalid_argument("GridSample: unknown 'padding_mode' '" + std::string(pad) + "'");
  }
  const int64_t ac = a.get_int("align_corners", 0);
  if (ac != 0 && ac != 1) {
    return invalid_argument("GridSample: attribute 'align_corners' must be 0 or 1, got " + std::to_string(ac));
  }
  p.align_corners = ac == 1;
  return p;
}

Result<Shape> gs_output_shape(std::span<const int64_t> x, std::span<const int64_t> grid) {
  if (x.size() != 4) {
    return unimplemented("GridSample: input 'X' must be 4-D [N, C, H, W] (Loom implements the 2-D "
                         "form), got shape " + shape_to_string(x));
  }
  if (grid.size() != 4 || grid[0] != x[0] || grid[3] != 2) {
    return invalid_argument("GridSample: 'grid' must be [N, H_out, W_out, 2] with N = " + std::to_string(x[0]) +
                            ", got shape " + shape_to_string(grid));
  }
  return Shape{x[0], x[1], grid[1], grid[2]};
}

// Reflects `v` into [lo, hi] (a mirror at each end, repeated).
double gs_reflect(double v, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (v < lo) {
    const double d = lo - v;
    const double n = std::floor(d / range);
    const double r = d - n * range;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (v > hi) {
    const double d = v - hi;
    const double n = std::floor(d / range);
    const double r = d - n * range;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return v;
}

struct GsPlane {
  const float* data;
  int64_t h, w;
  GsPadding padding;
  double lo_x, hi_x, lo_y, hi_y;  // the reflection bounds

  double at(double fy, double fx) const {
    int64_t y = static_cast<int64_t>(fy), x = static_cast<int64_t>(fx);
    switch (padding) {
      case GsPadding::kZeros:
        if (y < 0 || y >= h || x < 0 || x >= w) return 0.0;
        break;
      case GsPadding::kBorder:
        y = std::clamp<int64_t>(y, 0, h - 1);
        x = std::clamp<int64_t>(x, 0, w - 1);
        break;
      case GsPadding::kReflection:
        y = std::clamp<int64_t>(static_cast<int64_t>(gs_reflect(fy, lo_y, hi_y)), 0, h - 1);
        x = std::clamp<int64_t>(static_cast<int64_t>(gs_reflect(fx, lo_x, hi_x)), 0, w - 1);
        break;
    }
    return data[y * w + x];
  }
};

void cubic_coeffs(double t, double c[4]) {
  constexpr double a = -0.75;
  const double x0 = t + 1, x1 = t, x2 = 1 - t, x3 = 2 - t;
  c[0] = ((a * x0 - 5 * a) * x0 + 8 * a) * x0 - 4 * a;
  c[1] = ((a + 2) * x1 - (a + 3)) * x1 * x1 + 1;
  c[2] = ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1;
  c[3] = ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a;
}

double gs_sample(const GsPlane& p, const GsParams& params, double x, double y) {
  switch (params.mode) {
    case GsMode::kNearest:
      return p.at(std::nearbyint(y), std::nearbyint(x));
    case GsMode::kLinear: {
      const double x0 = std::floor(x), y0 = std::floor(y);
      const double dx = x - x0, dy = y - y0;
      return (1 - dy) * ((1 - dx) * p.at(y0, x0) + dx * p.at(y0, x0 + 1)) +
             dy * ((1 - dx) * p.at(y0 + 1, x0) + dx * p.at(y0 + 1, x0 + 1));
    }
    case GsMode::kCubic: {
      const double x0 = std::floor(x) - 1, y0 = std::floor(y) - 1;
      double cx[4], cy[4];
      cubic_coeffs(x - std::floor(x), cx);
      cubic_coeffs(y - std::floor(y), cy);
      double sum = 0;
      for (int i = 0; i < 4; ++i) {
        double row = 0;
        for (int j = 0; j < 4; ++j) row += cx[j] * p.at(y0 + i, x0 + j);
        sum += cy[i] * row;
      }
      return sum;
    }
  }
  return 0.0;
}

}  // namespace

Result<std::vector<TensorType>> grid_sample_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kGridSample, in.size(), 2, 2, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(kGridSample, "X", in[0].dtype, {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_dtype(kGridSample, "grid", in[1].dtype, {DType::kF32}));
  LOOM_RETURN_IF_ERROR(gs_params(a).status());
  LOOM_ASSIGN_OR_RETURN(Shape out, gs_output_shape(in[0].shape, in[1].shape));
  LOOM_RETURN_IF_ERROR(checked_count(kGridSample, "Y", out).status());
  return std::vector<TensorType>{{DType::kF32, out}};
}

Status grid_sample_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kGridSample, in.size(), 2, 2, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand(kGridSample, "X", in[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(kGridSample, "grid", in[1], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(kGridSample, "Y", out[0], {DType::kF32}));
  LOOM_ASSIGN_OR_RETURN(GsParams params, gs_params(a));
  LOOM_ASSIGN_OR_RETURN(Shape shape, gs_output_shape(in[0].shape, in[1].shape));
  LOOM_RETURN_IF_ERROR(check_output_shape(kGridSample, "Y", out[0].shape, shape));
  const int64_t n = shape[0], c = shape[1], ho = shape[2], wo = shape[3];
  const int64_t h = in[0].shape[2], w = in[0].shape[3];
  const float* x = in_data(in[0]);
  const float* grid = in_data(in[1]);
  float* y = out_data(out[0]);
  if (h == 0 || w == 0) {
    for (int64_t i = 0; i < n * c * ho * wo; ++i) y[i] = 0.0f;
    return Status();
  }
  auto denormalize = [&](double v, int64_t size) {
    return params.align_corners ? (v + 1) / 2 * static_cast<double>(size - 1)
                                : ((v + 1) * static_cast<double>(size) - 1) / 2;
  };
  const double lo_x = params.align_corners ? 0.0 : -0.5, hi_x = params.align_corners ? w - 1.0 : w - 0.5;
  const double lo_y = params.align_corners ? 0.0 : -0.5, hi_y = params.align_corners ? h - 1.0 : h - 0.5;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const GsPlane plane{x + (b * c + ch) * h * w, h, w, params.padding, lo_x, hi_x, lo_y, hi_y};
      for (int64_t i = 0; i < ho; ++i) {
        for (int64_t j = 0; j < wo; ++j) {
          const float* g = grid + ((b * ho + i) * wo + j) * 2;
          double gx = denormalize(g[0], w), gy = denormalize(g[1], h);
          if (!std::isfinite(gx) || !std::isfinite(gy)) {
            return invalid_argument("GridSample: 'grid' holds a value that is not finite at [" + std::to_string(b) +
                                    ", " + std::to_string(i) + ", " + std::to_string(j) + "]");
          }
          if (params.padding == GsPadding::kBorder) {
            gx = std::clamp(gx, 0.0, w - 1.0);
            gy = std::clamp(gy, 0.0, h - 1.0);
          } else if (params.padding == GsPadding::kReflection) {
            gx = gs_reflect(gx, lo_x, hi_x);
            gy = gs_reflect(gy, lo_y, hi_y);
          } else {
            // Far outside, every pixel read is padding: keep the integer
            // conversions of at() in range.
            gx = std::clamp(gx, -4.0 - w, 4.0 + 2.0 * w);
            gy = std::clamp(gy, -4.0 - h, 4.0 + 2.0 * h);
          }
          y[((b * c + ch) * ho + i) * wo + j] = static_cast<float>(gs_sample(plane, params, gx, gy));
        }
      }
    }
  }
  return Status();
}

}  // namespace loom::kernels::nn
