// Lowering of Resize (opset 11 on): nearest and linear modes become one
// resize dispatch reading a tap table that this file computes in double
// precision at compile time, so the coordinate transformation and the
// nearest rounding are the ONNX formulas evaluated once on the host.
#include <cmath>
#include <string>

#include "lowering.hpp"

namespace loom::vulkan::lowering {
namespace {

enum class Coord { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNn };
enum class Rounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

// Input coordinates above this are not exact as f32 table entries.
constexpr int64_t kMaxResizeInput = int64_t{1} << 24;

bool parse_coord(const std::string& s, Coord* out) {
  if (s == "half_pixel") *out = Coord::kHalfPixel;
  else if (s == "pytorch_half_pixel") *out = Coord::kPytorchHalfPixel;
  else if (s == "align_corners") *out = Coord::kAlignCorners;
  else if (s == "asymmetric") *out = Coord::kAsymmetric;
  else if (s == "tf_half_pixel_for_nn") *out = Coord::kTfHalfPixelForNn;
  else return false;
  return true;
}

bool parse_rounding(const std::string& s, Rounding* out) {
  if (s == "round_prefer_floor") *out = Rounding::kRoundPreferFloor;
  else if (s == "round_prefer_ceil") *out = Rounding::kRoundPreferCeil;
  else if (s == "floor") *out = Rounding::kFloor;
  else if (s == "ceil") *out = Rounding::kCeil;
  else return false;
  return true;
}

// The input coordinate of output coordinate `o` along an axis of `in`
// elements resized to `out` by `scale`.
double source_coordinate(Coord coord, double scale, int64_t in, int64_t out, int64_t o) {
  const double x = static_cast<double>(o);
  switch (coord) {
    case Coord::kHalfPixel: return (x + 0.5) / scale - 0.5;
    case Coord::kPytorchHalfPixel: return out == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    case Coord::kAlignCorners:
      return out == 1 ? 0.0 : x * static_cast<double>(in - 1) / static_cast<double>(out - 1);
    case Coord::kAsymmetric: return x / scale;
    case Coord::kTfHalfPixelForNn: return (x + 0.5) / scale;
  }
  return 0;
}

int64_t clamp_index(double v, int64_t in) {
  if (!(v > 0)) return 0;
  const double last = static_cast<double>(in - 1);
  return v >= last ? in - 1 : static_cast<int64_t>(v);
}

}  // namespace

// Resize, opset 11 on: mode nearest (all four nearest_mode values) or
// linear (n-linear over every resized axis), coordinate_transformation_mode
// half_pixel, pytorch_half_pixel, align_corners, asymmetric or
// tf_half_pixel_for_nn; constant scales or sizes (with axes from opset 18).
// Refused: cubic, tf_crop_and_resize and half_pixel_symmetric, antialias,
// keep_aspect_ratio_policy other than stretch, exclude_outside; and where
// the spec and its reference implementation part ways: align_corners with
// a scale that does not give a whole output length, and align_corners or
// pytorch_half_pixel resizing an axis down to one element.
bool lower_resize(Lowering& l) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kResize;
  if (l.opset() < 11) return l.fail("Resize before opset 11 is not supported");
  std::string mode, coord_name, rounding_name, policy;
  int64_t antialias = 0, exclude_outside = 0;
  Shape axes;
  if (!l.attributes({"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a",
                     "exclude_outside", "extrapolation_value", "keep_aspect_ratio_policy", "mode",
                     "nearest_mode"}) ||
      !l.get_string("mode", "nearest", &mode) ||
      !l.get_string("coordinate_transformation_mode", "half_pixel", &coord_name) ||
      !l.get_string("nearest_mode", "round_prefer_floor", &rounding_name) ||
      !l.get_string("keep_aspect_ratio_policy", "stretch", &policy) || !l.get_int("antialias", 0, &antialias) ||
      !l.get_int("exclude_outside", 0, &exclude_outside) || !l.get_ints("axes", &axes) || !l.inputs(1, 4)) {
    return false;
  }
  const bool linear = mode == "linear";
  if (!linear && mode != "nearest") return l.fail("mode " + mode + " is not supported (nearest and linear are)");
  Coord coord = Coord::kHalfPixel;
  Rounding rounding = Rounding::kRoundPreferFloor;
  if (!parse_coord(coord_name, &coord)) {
    return l.fail("coordinate_transformation_mode " + coord_name + " is not supported");
  }
  if (!parse_rounding(rounding_name, &rounding)) return l.fail("nearest_mode " + rounding_name + " is unknown");
  if (antialias != 0) return l.fail("antialias is not supported");
  if (exclude_outside != 0) return l.fail("exclude_outside is not supported");
  if (policy != "stretch") return l.fail("keep_aspect_ratio_policy " + policy + " is not supported");
  if (!l.data(0) || !l.output()) return false;

  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank == 0 || rank > static_cast<int64_t>(kBinaryMaxRank)) {
    return l.fail("X has rank " + std::to_string(rank) + "; ranks 1 to 6 are supported");
  }
  for (int64_t d : x) {
    if (d < 1 || d > kMaxResizeInput) return l.fail("input shape " + shape_text(x) + " is empty or too large");
  }
  // Which axes the scales or sizes name.
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  std::vector<bool> named(x.size(), false);
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return l.fail("axis " + std::to_string(a) + " is out of range");
    if (a < 0) a += rank;
    if (named[static_cast<size_t>(a)]) return l.fail("axis " + std::to_string(a) + " is given twice");
    named[static_cast<size_t>(a)] = true;
  }
  auto empty = [&](size_t i) { return !l.present(i) || l.shape_of(i) == Shape{0}; };
  std::vector<float> given_scales;
  Shape sizes;
  if (!empty(2) && !l.constant_f32s(2, &given_scales)) return false;
  if (!empty(3) && !l.constant_i64s(3, &sizes)) return false;
  if (given_scales.empty() == sizes.empty()) return l.fail("exactly one of scales and sizes must be given");
  const size_t given = given_scales.empty() ? sizes.size() : given_scales.size();
  if (given != axes.size()) {
    return l.fail(std::to_string(given) + " scales or sizes for " + std::to_string(axes.size()) + " axes");
  }
  std::vector<double> scale(x.size(), 1.0);
  Shape want = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = static_cast<size_t>(axes[i]);
    const double in = static_cast<double>(x[a]);
    if (!given_scales.empty()) {
      const double s = given_scales[i];
      if (!(s > 0) || !std::isfinite(s) || in * s >= static_cast<double>(int64_t{1} << 31)) {
        return l.fail("scale " + std::to_string(s) + " is not a positive finite factor");
      }
      scale[a] = s;
      want[a] = static_cast<int64_t>(std::floor(in * s));
    } else {
      if (sizes[i] < 1) return l.fail("size " + std::to_string(sizes[i]) + " is not positive");
      want[a] = sizes[i];
      scale[a] = static_cast<double>(sizes[i]) / in;
    }
  }
  if (!l.output_is(want)) return l.fail("output shape " + shape_text(l.output_shape()) + ", expected " + shape_text(want));
  const Shape y = want;
  int64_t taps = 0;
  for (int64_t d : y) taps += d;
  if (taps > kMaxResizeInput) {
    return l.fail("output shape " + shape_text(y) + " needs a tap table of more than 2^24 entries");
  }
  for (size_t a = 0; a < x.size(); ++a) {
    const double length = scale[a] * static_cast<double>(x[a]);
    if (coord == Coord::kAlignCorners && std::fabs(length - static_cast<double>(y[a])) > 1e-9 * length) {
      return l.fail("align_corners with scale " + std::to_string(scale[a]) + " on axis " + std::to_string(a) +
                    " does not give a whole output length");
    }
    if ((coord == Coord::kAlignCorners || coord == Coord::kPytorchHalfPixel) && y[a] == 1 && x[a] != 1) {
      return l.fail(coord_name + " resizing axis " + std::to_string(a) + " to one element is not supported");
    }
  }

  o.in_dims = x;
  o.dims = y;
  o.table.clear();
  for (size_t a = 0; a < x.size(); ++a) {
    for (int64_t out = 0; out < y[a]; ++out) {
      const double c = source_coordinate(coord, scale[a], x[a], y[a], out);
      if (!std::isfinite(c)) return l.fail("a source coordinate is not finite");
      const double lo = std::floor(c), r = c - lo;
      int64_t i0 = 0, i1 = 0;
      float w = 0;
      if (linear) {
        i0 = clamp_index(lo, x[a]);
        i1 = clamp_index(lo + 1, x[a]);
        w = static_cast<float>(r);
      } else {
        bool up = false;
        if (r != 0) {
          switch (rounding) {
            case Rounding::kRoundPreferFloor: up = r > 0.5; break;
            case Rounding::kRoundPreferCeil: up = r >= 0.5; break;
            case Rounding::kFloor: up = false; break;
            case Rounding::kCeil: up = true; break;
          }
        }
        i0 = i1 = clamp_index(up ? lo + 1 : lo, x[a]);
      }
      o.table.push_back(static_cast<float>(i0));
      o.table.push_back(static_cast<float>(i1));
      o.table.push_back(w);
    }
  }
  return true;
}

}  // namespace loom::vulkan::lowering
