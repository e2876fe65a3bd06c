// The Resize shape rules of cpu-simd's blob (formats 2 and up; the open
// form of format 8): the static tap tables compile writes and bind_shapes
// recomputes per binding for an open input. Header-only, on top of
// blob_ops.hpp; included by blob_shape_rules.hpp, whose infer_output_shape
// and decoder use it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/cpu_simd/blob_ops.hpp"

namespace loom::cpu_simd {

// A Resize node has one of two forms (ints[0]):
// - static (0 nearest, 1 linear): [linear, output dims[rank], per axis and
//   output position: i0, i1], floats = linear: the weight of i1 per axis and
//   output position. Written for static inputs; the kernels run this form.
// - open (2 nearest, 3 linear; format 8): [2 + linear, coordinate mode
//   (ResizeCoordMode), nearest rounding (ResizeRounding)], floats = the
//   scale of every axis. Written when the input has open dimensions;
//   bind_shapes turns it into the static form for each binding
//   (resize_static_form), with the output floor(input * scale).
enum class ResizeCoordMode : int64_t { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNn };
enum class ResizeRounding : int64_t { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };
inline constexpr int64_t kResizeCoordModes = 5;
inline constexpr int64_t kResizeRoundings = 4;

namespace detail {

// Where output position `o` of an axis resized from `in` to `out` elements
// (factor `scale`) samples the input, in input coordinates.
inline double resize_source(ResizeCoordMode coord, double scale, int64_t in, int64_t out, int64_t o) {
  const double p = static_cast<double>(o);
  switch (coord) {
    case ResizeCoordMode::kHalfPixel: return (p + 0.5) / scale - 0.5;
    case ResizeCoordMode::kPytorchHalfPixel: return out > 1 ? (p + 0.5) / scale - 0.5 : -0.5;
    case ResizeCoordMode::kAlignCorners:
      return out > 1 ? p * static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
    case ResizeCoordMode::kAsymmetric: return p / scale;
    case ResizeCoordMode::kTfHalfPixelForNn: return (p + 0.5) / scale;
  }
  return 0.0;
}

inline int64_t resize_clamp(double v, int64_t in) {
  if (!(v > 0)) return 0;
  return v >= static_cast<double>(in - 1) ? in - 1 : static_cast<int64_t>(v);
}

}  // namespace detail

// The static form of a Resize from `x` to `y` (same rank, no empty axis)
// sampling axis a at factor scale[a]: fills `ints` and `floats` (see above).
// False with `*error` when a mode does not hold at these shapes.
inline bool resize_static_form(bool linear, ResizeCoordMode coord, ResizeRounding rounding,
                               const std::vector<double>& scale, const std::vector<int64_t>& x,
                               const std::vector<int64_t>& y, std::vector<int64_t>* ints,
                               std::vector<float>* floats, std::string* error) {
  using detail::shape_string;
  uint64_t positions = 0;
  for (size_t a = 0; a < y.size(); ++a) {
    if (a >= x.size() || x[a] < 1 || y[a] < 1 || y[a] > kMaxAttr) {
      *error = "Resize: input " + shape_string(x) + " or output " + shape_string(y) + " has an empty or huge axis";
      return false;
    }
    positions += static_cast<uint64_t>(y[a]);
  }
  if (positions > (uint64_t{1} << 24)) {
    *error = "Resize: the output " + shape_string(y) + " is too large for a tap table";
    return false;
  }
  ints->assign(1, linear ? 1 : 0);
  ints->insert(ints->end(), y.begin(), y.end());
  floats->clear();
  for (size_t a = 0; a < x.size(); ++a) {
    const double length = scale[a] * static_cast<double>(x[a]);
    if (coord == ResizeCoordMode::kAlignCorners && std::fabs(length - static_cast<double>(y[a])) > 1e-9 * length) {
      *error = "Resize: align_corners with scale " + std::to_string(scale[a]) + " on axis " + std::to_string(a) +
               " does not give a whole output length";
      return false;
    }
    if ((coord == ResizeCoordMode::kAlignCorners || coord == ResizeCoordMode::kPytorchHalfPixel) && y[a] == 1 &&
        x[a] != 1) {
      *error = "Resize: shrinking axis " + std::to_string(a) + " to one element is not supported in this mode";
      return false;
    }
    for (int64_t o = 0; o < y[a]; ++o) {
      const double c = detail::resize_source(coord, scale[a], x[a], y[a], o);
      if (!std::isfinite(c)) {
        *error = "Resize: a sampling position is not finite";
        return false;
      }
      const double lo = std::floor(c), frac = c - lo;
      if (linear) {
        ints->push_back(detail::resize_clamp(lo, x[a]));
        ints->push_back(detail::resize_clamp(lo + 1, x[a]));
        floats->push_back(static_cast<float>(frac));
      } else {
        bool up = false;
        if (frac != 0) {
          if (rounding == ResizeRounding::kRoundPreferFloor) up = frac > 0.5;
          else if (rounding == ResizeRounding::kRoundPreferCeil) up = frac >= 0.5;
          else up = rounding == ResizeRounding::kCeil;
        }
        const int64_t i = detail::resize_clamp(up ? lo + 1 : lo, x[a]);
        ints->push_back(i);
        ints->push_back(i);
      }
    }
  }
  return true;
}

// True when `node` is a Resize in the open form.
inline bool is_open_resize(const BlobNode& node) {
  return node.op == Op::kResize && !node.ints.empty() && (node.ints[0] == 2 || node.ints[0] == 3);
}

// The output of an open-form Resize of `x`, floor(x * scale) per axis;
// false with `*error` when the form is malformed or the output is empty or
// huge.
// The open form's own fields for an input shaped `x` (open dimensions
// allowed): ints, codes, one positive finite scale per axis.
inline bool check_open_resize_form(const BlobNode& node, const std::vector<int64_t>& x, std::string* error) {
  using detail::shape_string;
  const std::vector<int64_t>& v = node.ints;
  if (v.size() != 3 || v[1] < 0 || v[1] >= kResizeCoordModes || v[2] < 0 || v[2] >= kResizeRoundings ||
      node.floats.size() != x.size() || x.empty()) {
    *error = "Resize: the open form needs ints [2 or 3, coordinate mode 0-4, rounding 0-3] and one scale per axis "
             "of input " + shape_string(x) + ", got " + std::to_string(v.size()) + " ints and " +
             std::to_string(node.floats.size()) + " scales";
    return false;
  }
  for (size_t a = 0; a < x.size(); ++a) {
    const float s = node.floats[a];
    if (!(s > 0) || !std::isfinite(s)) {
      *error = "Resize: scale " + std::to_string(s) + " on axis " + std::to_string(a) + " is not a positive finite factor";
      return false;
    }
  }
  return true;
}

inline bool open_resize_shape(const BlobNode& node, const std::vector<int64_t>& x, std::vector<int64_t>* out,
                              std::string* error) {
  using detail::shape_string;
  if (!check_open_resize_form(node, x, error)) return false;
  out->resize(x.size());
  for (size_t a = 0; a < x.size(); ++a) {
    const double s = node.floats[a];
    const double n = std::floor(static_cast<double>(x[a]) * s);
    if (x[a] < 1 || n < 1 || n > static_cast<double>(kMaxAttr)) {
      *error = "Resize: scale " + std::to_string(s) + " on axis " + std::to_string(a) + " of input " +
               shape_string(x) + " gives no output length in 1 to 2^31";
      return false;
    }
    (*out)[a] = static_cast<int64_t>(n);
  }
  return true;
}

// The static form of an open-form Resize at input `x` (bind_shapes).
inline bool bind_open_resize(BlobNode* node, const std::vector<int64_t>& x, std::string* error) {
  std::vector<int64_t> y;
  if (!open_resize_shape(*node, x, &y, error)) return false;
  const bool linear = node->ints[0] == 3;
  const std::vector<double> scale(node->floats.begin(), node->floats.end());
  std::vector<int64_t> ints;
  std::vector<float> floats;
  if (!resize_static_form(linear, static_cast<ResizeCoordMode>(node->ints[1]),
                          static_cast<ResizeRounding>(node->ints[2]), scale, x, y, &ints, &floats, error)) {
    return false;
  }
  node->ints = std::move(ints);
  node->floats = std::move(floats);
  return true;
}

}  // namespace loom::cpu_simd
