// Resize (opsets 10-19) and Upsample (7-9): nearest, linear and cubic
// interpolation, separable over every axis, following the ONNX reference
// implementation's coordinate arithmetic (in double) so results match the
// backend test data. f32 only. Opset 18's forms: `antialias` (linear and
// cubic stretch their filter by 1 / scale when downscaling, normalized to
// sum 1), `axes` (scales, sizes and roi name a subset of the axes; the
// others keep their size) and `keep_aspect_ratio_policy` (with sizes:
// not_larger / not_smaller take the smallest / largest of the named axes'
// ratios for all of them, each output size round_half_up(scale * input)).
//
// Upsample and Resize-10 map output coordinate x to x / scale ("asymmetric")
// and pick the nearest input element by flooring.
#include <array>
#include <cmath>
#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/shape/common.hpp"
#include "kernels/shape/ops.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::shape {
namespace {

enum class Interp { kNearest, kLinear, kCubic };
enum class Coord { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNn,
                   kTfCropAndResize };
enum class Rounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeSpec {
  Interp interp = Interp::kNearest;
  Coord coord = Coord::kHalfPixel;
  Rounding rounding = Rounding::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
  bool antialias = false;
  enum class Aspect { kStretch, kNotLarger, kNotSmaller } aspect = Aspect::kStretch;
  std::vector<int64_t> axes;  // opset 18 `axes` as given (empty: every axis)
  std::vector<double> scales;
  std::vector<double> roi;  // [starts..., ends...] for tf_crop_and_resize
  Shape out;
};

Status parse_modes(std::string_view op, const Attributes& a, bool legacy, ResizeSpec* spec) {
  const std::string_view mode = a.get_string("mode", "nearest");
  if (mode == "nearest") {
    spec->interp = Interp::kNearest;
  } else if (mode == "linear" || (legacy && mode == "bilinear")) {
    spec->interp = Interp::kLinear;
  } else if (mode == "cubic" && !legacy) {
    spec->interp = Interp::kCubic;
  } else {
    return bad(op, "unknown 'mode' '" + std::string(mode) + "'");
  }
  if (legacy) {
    spec->coord = Coord::kAsymmetric;
    spec->rounding = Rounding::kFloor;
    return Status();
  }
  const std::string_view coord = a.get_string("coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel") {
    spec->coord = Coord::kHalfPixel;
  } else if (coord == "pytorch_half_pixel") {
    spec->coord = Coord::kPytorchHalfPixel;
  } else if (coord == "align_corners") {
    spec->coord = Coord::kAlignCorners;
  } else if (coord == "asymmetric") {
    spec->coord = Coord::kAsymmetric;
  } else if (coord == "tf_half_pixel_for_nn") {
    spec->coord = Coord::kTfHalfPixelForNn;
  } else if (coord == "tf_crop_and_resize") {
    spec->coord = Coord::kTfCropAndResize;
  } else {
    return bad(op, "unknown 'coordinate_transformation_mode' '" + std::string(coord) + "'");
  }
  const std::string_view nearest = a.get_string("nearest_mode", "round_prefer_floor");
  if (nearest == "round_prefer_floor") {
    spec->rounding = Rounding::kRoundPreferFloor;
  } else if (nearest == "round_prefer_ceil") {
    spec->rounding = Rounding::kRoundPreferCeil;
  } else if (nearest == "floor") {
    spec->rounding = Rounding::kFloor;
  } else if (nearest == "ceil") {
    spec->rounding = Rounding::kCeil;
  } else {
    return bad(op, "unknown 'nearest_mode' '" + std::string(nearest) + "'");
  }
  spec->cubic_a = a.get_float("cubic_coeff_a", -0.75f);
  spec->exclude_outside = a.get_int("exclude_outside", 0) != 0;
  spec->extrapolation = a.get_float("extrapolation_value", 0.0f);
  if (a.opset_before(18)) return Status();
  spec->antialias = a.get_int("antialias", 0) != 0;
  if (spec->antialias && spec->interp == Interp::kNearest) {
    return bad(op, "'antialias' applies to the linear and cubic modes, not to nearest");
  }
  const std::string_view aspect = a.get_string("keep_aspect_ratio_policy", "stretch");
  if (aspect == "stretch") {
    spec->aspect = ResizeSpec::Aspect::kStretch;
  } else if (aspect == "not_larger") {
    spec->aspect = ResizeSpec::Aspect::kNotLarger;
  } else if (aspect == "not_smaller") {
    spec->aspect = ResizeSpec::Aspect::kNotSmaller;
  } else {
    return bad(op, "unknown 'keep_aspect_ratio_policy' '" + std::string(aspect) + "'");
  }
  if (a.find("axes") != nullptr) spec->axes = a.get_ints("axes");
  return Status();
}

// Opset 18's `axes`: the axes that scales, sizes and roi name, in their
// order, normalized and checked (in range, none twice); every axis without it.
Result<std::vector<size_t>> named_axes(std::string_view op, const ResizeSpec& spec, size_t rank) {
  std::vector<size_t> axes;
  if (spec.axes.empty()) {
    for (size_t d = 0; d < rank; ++d) axes.push_back(d);
    return axes;
  }
  std::vector<bool> seen(rank, false);
  const int64_t r = static_cast<int64_t>(rank);
  std::string given = "'axes' [";  // as written (shape_to_string shows -1 as ?)
  for (size_t i = 0; i < spec.axes.size(); ++i) given += (i ? ", " : "") + std::to_string(spec.axes[i]);
  given += "]";
  for (int64_t a : spec.axes) {
    if (a < -r || a >= r) {
      return bad(op, given + ": axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    }
    const size_t d = static_cast<size_t>(a < 0 ? a + r : a);
    if (seen[d]) return bad(op, given + " names axis " + std::to_string(d) + " twice");
    seen[d] = true;
    axes.push_back(d);
  }
  return axes;
}

// Output dimensions from scales: floor(in * scale), like the reference.
// `axes`: the axes the given scales name (named_axes); the others keep 1.
Status shape_from_scales(std::string_view op, const Shape& in, const std::vector<size_t>& axes,
                         ResizeSpec* spec) {
  if (spec->scales.size() != axes.size()) {
    return bad(op, "'scales' has " + std::to_string(spec->scales.size()) + " entries, " +
                       (spec->axes.empty() ? "the input " + shape_to_string(in) + " has rank " +
                                                 std::to_string(in.size())
                                           : "'axes' names " + std::to_string(axes.size())));
  }
  std::vector<double> full(in.size(), 1.0);
  for (size_t i = 0; i < axes.size(); ++i) full[axes[i]] = spec->scales[i];
  spec->scales = std::move(full);
  spec->out.resize(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    const double s = spec->scales[d];
    const double n = std::floor(static_cast<double>(in[d]) * s);
    if (!(s > 0) || !(n < 9.0e15)) {
      return bad(op, "'scales' " + std::to_string(s) + " for axis " + std::to_string(d) +
                         " must be positive and finite");
    }
    spec->out[d] = static_cast<int64_t>(n);
  }
  return Status();
}

Result<ResizeSpec> resize_spec(std::string_view op, std::span<const TensorType> in,
                               const Attributes& a, bool upsample, bool need_roi) {
  ResizeSpec spec;
  // Upsample 7 has scales as an attribute; Upsample 9 and Resize 10 take
  // (X, scales); Resize 11+ takes (X, roi, scales, sizes).
  const bool attr_scales = upsample && a.opset_before(9);
  const bool legacy = upsample || a.opset_before(11);
  const size_t max_in = attr_scales ? 1 : (legacy ? 2 : 4);
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), attr_scales ? 1 : 2, max_in, 1, 1));
  if (!legacy && in.size() < 3) {
    // Resize 13 may leave out roi and scales when sizes is given; one of
    // scales and sizes must be there.
    return bad(op, "needs operand 'scales' or 'sizes'");
  }
  if (in[0].dtype == DType::kInvalid) return bad(op, "operand 'X' must be given");
  LOOM_RETURN_IF_ERROR(element_count(in[0].shape).status().with_context(std::string(op) + ": X"));
  LOOM_RETURN_IF_ERROR(check_f32_type(op, "X", in[0].dtype));
  LOOM_RETURN_IF_ERROR(parse_modes(op, a, legacy, &spec));
  const Shape& s = in[0].shape;
  if (attr_scales) {
    std::vector<float> f = a.get_floats("scales");
    if (a.find("scales") == nullptr) return bad(op, "needs attribute 'scales'");
    spec.scales.assign(f.begin(), f.end());
    std::vector<size_t> every(s.size());
    for (size_t d = 0; d < s.size(); ++d) every[d] = d;
    LOOM_RETURN_IF_ERROR(shape_from_scales(op, s, every, &spec));
    return spec;
  }
  LOOM_ASSIGN_OR_RETURN(const std::vector<size_t> axes, named_axes(op, spec, s.size()));
  const size_t scales_at = legacy ? 1 : 2;
  const TensorType* scales = optional_type(in, scales_at);
  const TensorType* sizes = legacy ? nullptr : optional_type(in, 3);
  bool have_scales = false;
  if (scales != nullptr) {
    auto n = element_count(scales->shape);
    have_scales = !n.ok() || *n != 0;  // opset 11 passes an empty scales with sizes
  }
  if (have_scales && sizes != nullptr) return bad(op, "takes 'scales' or 'sizes', not both");
  if (have_scales) {
    if (scales->shape.size() != 1) {
      return bad(op, "'scales' must be 1-D, got shape " + shape_to_string(scales->shape));
    }
    if (scales->value == nullptr) return needs_constant(op, scales_at, "scales");
    LOOM_ASSIGN_OR_RETURN(spec.scales, read_floats(op, "scales", *scales->value));
    LOOM_RETURN_IF_ERROR(shape_from_scales(op, s, axes, &spec));
  } else if (sizes != nullptr) {
    if (sizes->shape.size() != 1) {
      return bad(op, "'sizes' must be 1-D, got shape " + shape_to_string(sizes->shape));
    }
    LOOM_ASSIGN_OR_RETURN(const Shape given, constant_ints(op, 3, "sizes", *sizes));
    if (given.size() != axes.size()) {
      return bad(op, "'sizes' has " + std::to_string(given.size()) + " entries, " +
                         (spec.axes.empty() ? "the input " + shape_to_string(s) + " has rank " +
                                                  std::to_string(s.size())
                                            : "'axes' names " + std::to_string(axes.size())));
    }
    spec.out = s;
    spec.scales.assign(s.size(), 1.0);
    for (size_t i = 0; i < axes.size(); ++i) {
      const size_t d = axes[i];
      if (given[i] < 0) return bad(op, "'sizes' " + shape_to_string(given) + " is negative");
      spec.out[d] = given[i];
      spec.scales[d] = s[d] == 0 ? 1.0 : static_cast<double>(given[i]) / static_cast<double>(s[d]);
    }
    if (spec.aspect != ResizeSpec::Aspect::kStretch && !axes.empty()) {
      // One ratio for every named axis, the output sizes rounded half up.
      double scale = spec.scales[axes[0]];
      for (size_t d : axes) {
        scale = spec.aspect == ResizeSpec::Aspect::kNotLarger ? std::min(scale, spec.scales[d])
                                                               : std::max(scale, spec.scales[d]);
      }
      for (size_t d : axes) {
        const double n = std::floor(scale * static_cast<double>(s[d]) + 0.5);
        if (!(n < 9.0e15)) return bad(op, "'sizes' give a ratio " + std::to_string(scale) + " that is too large");
        spec.scales[d] = scale;
        spec.out[d] = static_cast<int64_t>(n);
      }
    }
  } else {
    return bad(op, "needs operand 'scales' or 'sizes'");
  }
  LOOM_RETURN_IF_ERROR(element_count(spec.out).status().with_context(std::string(op) + ": output"));
  if (spec.coord == Coord::kTfCropAndResize && need_roi) {
    const TensorType* roi = optional_type(in, 1);
    if (roi == nullptr || roi->value == nullptr) {
      return bad(op, "'tf_crop_and_resize' needs operand 'roi'");
    }
    LOOM_ASSIGN_OR_RETURN(std::vector<double> given, read_floats(op, "roi", *roi->value));
    if (given.size() != 2 * axes.size()) {
      return bad(op, "'roi' has " + std::to_string(given.size()) + " entries, expected " +
                         std::to_string(2 * axes.size()));
    }
    // Axes 'axes' leaves out take the whole extent, [0, 1].
    spec.roi.assign(2 * s.size(), 0.0);
    for (size_t d = 0; d < s.size(); ++d) spec.roi[s.size() + d] = 1.0;
    for (size_t i = 0; i < axes.size(); ++i) {
      spec.roi[axes[i]] = given[i];
      spec.roi[s.size() + axes[i]] = given[axes.size() + i];
    }
  }
  return spec;
}

// The input elements and weights that output coordinate o of one axis reads
// (at most 4, more with antialias when downscaling); `outside` when
// tf_crop_and_resize puts it outside the input.
struct Taps {
  std::vector<int64_t> index = std::vector<int64_t>(4, 0);
  std::vector<double> weight = std::vector<double>(4, 0.0);
  int count = 0;
  bool outside = false;
};

// Antialiased linear or cubic taps at x (opset 18): the filter stretched by
// max(1, 1 / scale), its weights normalized to sum 1. As in ONNX's reference,
// an x on a whole number counts as ratio 1 from the element before it, and
// the taps are the filter's width of elements nearest x.
void antialias_taps(const ResizeSpec& spec, double scale, double x, Taps* t) {
  const double s = std::min(scale, 1.0);
  double base = std::floor(x);
  double r = x - base;
  if (r == 0) {
    r = 1;
    base -= 1;
  }
  const bool cubic = spec.interp == Interp::kCubic;
  const int64_t start = static_cast<int64_t>(std::floor((cubic ? -2.0 : -1.0) / s) + 1);
  const int64_t n = 2 - 2 * start;
  const double A = spec.cubic_a;
  t->index.resize(static_cast<size_t>(n));
  t->weight.resize(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double u = std::fabs(static_cast<double>(start + k) - r) * s;
    double w;
    if (!cubic) {
      w = std::clamp(1 - u, 0.0, 1.0);
    } else if (u <= 1) {
      w = ((A + 2) * u - (A + 3)) * u * u + 1;
    } else if (u < 2) {
      w = ((u - 5) * u + 8) * u * A - 4 * A;
    } else {
      w = 0;
    }
    t->index[static_cast<size_t>(k)] = static_cast<int64_t>(base) + start + k;
    t->weight[static_cast<size_t>(k)] = w;
    sum += w;
  }
  for (double& w : t->weight) w /= sum;
  t->count = static_cast<int>(n);
}

std::array<double, 4> cubic_coeffs(double r, double A) {
  const double s = 1 - r;
  return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
          ((A + 2) * r - (A + 3)) * r * r + 1, ((A + 2) * s - (A + 3)) * s * s + 1,
          ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A};
}

Taps taps_for(const ResizeSpec& spec, size_t d, int64_t in_len, int64_t o) {
  Taps t;
  const double scale = spec.scales[d];
  const double out_len = scale * static_cast<double>(in_len);
  const double in_last = static_cast<double>(in_len - 1);
  const double xo = static_cast<double>(o);
  double x = 0;
  switch (spec.coord) {
    case Coord::kHalfPixel: x = (xo + 0.5) / scale - 0.5; break;
    case Coord::kPytorchHalfPixel:
      x = std::fabs(out_len - 1) < 1e-9 ? -0.5 : (xo + 0.5) / scale - 0.5;
      break;
    case Coord::kAlignCorners:
      x = std::fabs(out_len - 1) < 1e-9 ? 0 : xo * in_last / (out_len - 1);
      break;
    case Coord::kAsymmetric: x = xo / scale; break;
    case Coord::kTfHalfPixelForNn: x = (xo + 0.5) / scale; break;
    case Coord::kTfCropAndResize: {
      const double r0 = spec.roi[d], r1 = spec.roi[d + spec.scales.size()];
      x = std::fabs(out_len - 1) < 1e-9 ? (r1 - r0) * in_last / 2
                                        : xo * (r1 - r0) * in_last / (out_len - 1);
      x += r0 * in_last;
      if (x < 0 || x > in_last) {
        t.outside = true;
        return t;
      }
      break;
    }
  }
  if (!std::isfinite(x)) {  // a NaN/inf roi or cubic input: nothing to read
    t.outside = true;
    return t;
  }
  const double x0 = std::floor(x);
  const double r = x - x0;
  const int64_t i0 = static_cast<int64_t>(x0);
  // Antialiased taps for linear and cubic (parse_modes refuses nearest).
  if (spec.antialias) {
    antialias_taps(spec, scale, x, &t);
  } else switch (spec.interp) {
    case Interp::kNearest: {
      bool up = false;
      if (r != 0) {
        switch (spec.rounding) {
          case Rounding::kRoundPreferFloor: up = r > 0.5; break;
          case Rounding::kRoundPreferCeil: up = r >= 0.5; break;
          case Rounding::kFloor: up = false; break;
          case Rounding::kCeil: up = true; break;
        }
      }
      t.index[0] = i0 + (up ? 1 : 0);
      t.weight[0] = 1;
      t.count = 1;
      break;
    }
    case Interp::kLinear:
      t.index = {i0, i0 + 1, 0, 0};
      t.weight = {1 - r, r, 0, 0};
      t.count = 2;
      break;
    case Interp::kCubic: {
      t.index = {i0 - 1, i0, i0 + 1, i0 + 2};
      const std::array<double, 4> c = cubic_coeffs(r, spec.cubic_a);
      t.weight.assign(c.begin(), c.end());
      t.count = 4;
      break;
    }
  }
  if (spec.exclude_outside && spec.interp != Interp::kNearest) {
    double sum = 0;
    for (int k = 0; k < t.count; ++k) {
      if (t.index[k] < 0 || t.index[k] >= in_len) t.weight[k] = 0;
      sum += t.weight[k];
    }
    if (sum != 0) {
      for (int k = 0; k < t.count; ++k) t.weight[k] /= sum;
    }
  }
  // Neighbours past the edge repeat the edge element; zero weights go.
  int kept = 0;
  for (int k = 0; k < t.count; ++k) {
    if (t.weight[k] == 0 && t.count > 1) continue;
    t.index[kept] = std::clamp<int64_t>(t.index[k], 0, in_len - 1);
    t.weight[kept] = t.weight[k];
    ++kept;
  }
  t.count = kept;
  return t;
}

Status resize_common(std::string_view op, bool upsample, std::span<const TensorRef> in,
                     std::span<const TensorRef> out, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(prologue(op, in, out, {"X", "roi", "scales", "sizes"},
                                [&](std::span<const TensorType> t) -> Result<std::vector<TensorType>> {
                                  LOOM_ASSIGN_OR_RETURN(ResizeSpec s,
                                                        resize_spec(op, t, a, upsample, false));
                                  return std::vector<TensorType>{{DType::kF32, std::move(s.out)}};
                                })
                           .status());
  std::vector<TensorType> types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(ResizeSpec spec, resize_spec(op, types, a, upsample, true));
  const Shape s(in[0].shape.begin(), in[0].shape.end());
  const size_t rank = s.size();
  const uint64_t total = *element_count(spec.out);
  if (total == 0) return Status();
  for (int64_t d : s) {
    if (d == 0) return bad(op, "cannot resize the empty input " + shape_to_string(s));
  }
  std::vector<std::vector<Taps>> taps(rank);
  for (size_t d = 0; d < rank; ++d) {
    taps[d].resize(static_cast<size_t>(spec.out[d]));
    for (int64_t o = 0; o < spec.out[d]; ++o) taps[d][o] = taps_for(spec, d, s[d], o);
  }
  const Shape strides = strides_of(s);
  const float* x = in_data(in[0]);
  float* y = out_data(out[0]);
  std::vector<int64_t> idx(rank, 0);
  // Sums weight * x over the product of every axis's taps.
  auto gather = [&](auto&& self, size_t d, int64_t offset, double w) -> double {
    if (d == rank) return w * static_cast<double>(x[offset]);
    const Taps& t = taps[d][idx[d]];
    double acc = 0;
    for (int k = 0; k < t.count; ++k) {
      acc += self(self, d + 1, offset + t.index[k] * strides[d], w * t.weight[k]);
    }
    return acc;
  };
  for (uint64_t i = 0; i < total; ++i) {
    bool outside = false;
    for (size_t d = 0; d < rank; ++d) outside = outside || taps[d][idx[d]].outside;
    y[i] = outside ? static_cast<float>(spec.extrapolation)
                   : static_cast<float>(gather(gather, 0, 0, 1.0));
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < spec.out[d]) break;
      idx[d] = 0;
    }
  }
  return Status();
}

}  // namespace

Result<std::vector<TensorType>> resize_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(ResizeSpec s, resize_spec("Resize", in, a, false, false));
  return std::vector<TensorType>{{DType::kF32, std::move(s.out)}};
}

Status resize_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                  const Attributes& a) {
  return resize_common("Resize", false, in, out, a);
}

Result<std::vector<TensorType>> upsample_infer(std::span<const TensorType> in,
                                               const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(ResizeSpec s, resize_spec("Upsample", in, a, true, false));
  return std::vector<TensorType>{{DType::kF32, std::move(s.out)}};
}

Status upsample_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                    const Attributes& a) {
  return resize_common("Upsample", true, in, out, a);
}

}  // namespace loom::kernels::shape
