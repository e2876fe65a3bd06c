// Lowering of the format-3 operators: reductions, Gather with constant
// indices, Resize (its sampling positions computed here), ConvTranspose and
// LayerNormalization. Same rules as lower.cpp: claim only what runs exactly
// as the ONNX operator of that opset specifies, refuse the rest with why.
#include <algorithm>
#include <cmath>
#include <string>

#include "lowering.hpp"

namespace loom::cpu_simd::lowering {

// ReduceMean, ReduceSum, ReduceMax, ReduceMin: axes from the attribute or,
// from opset 13 (ReduceSum) / 18 (the others), from an inline constant
// input; no axes reduce everything unless noop_with_empty_axes. A reduction
// over an empty axis (whose ONNX result is 0, NaN or an infinity depending
// on the operator) is refused.
bool lower_reduce(Lowering& l, Op op) {
  BlobNode& n = l.node();
  n.op = op;
  const int64_t input_axes_from = op == Op::kReduceSum ? 13 : 18;
  const bool axes_input = l.opset() >= input_axes_from;
  if (!l.check_attributes({{"axes", 1}, {"keepdims", 1}, {"noop_with_empty_axes", input_axes_from}}) ||
      !l.check_inputs(1, axes_input ? 2 : 1)) {
    return false;
  }
  if (axes_input && l.has("axes")) {
    return l.fail("attribute 'axes' is an input from opset " + std::to_string(input_axes_from));
  }
  int64_t keepdims = 1, noop = 0;
  Shape axes;
  if (!l.get_int("keepdims", 1, &keepdims) || !l.get_int("noop_with_empty_axes", 0, &noop) ||
      !l.get_ints("axes", &axes)) {
    return false;
  }
  if ((keepdims != 0 && keepdims != 1) || (noop != 0 && noop != 1)) {
    return l.fail("keepdims and noop_with_empty_axes must be 0 or 1");
  }
  if (axes_input && l.present(1) && !l.constant_i64s(1, &axes)) return false;
  if (!l.data(0) || !l.output(1)) return false;
  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axes.empty() && noop == 1) {
    n.op = Op::kCopy;
    return l.output_shape() == x || l.fail("output shape differs from the input's");
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  std::vector<bool> seen(x.size(), false);
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return l.fail("axis " + std::to_string(a) + " is out of range");
    if (a < 0) a += rank;
    if (seen[static_cast<size_t>(a)]) return l.fail("axis " + std::to_string(a) + " is given twice");
    seen[static_cast<size_t>(a)] = true;
    if (x[static_cast<size_t>(a)] == 0) return l.fail("reduced axis " + std::to_string(a) + " is empty");
  }
  if (axes.empty()) {  // a scalar: nothing to reduce
    n.op = Op::kCopy;
    return l.output_shape() == x || l.fail("output shape differs from the input's");
  }
  std::sort(axes.begin(), axes.end());
  n.ints = {keepdims};
  n.ints.insert(n.ints.end(), axes.begin(), axes.end());
  return true;
}

// Gather with indices that are an inline i64 or i32 constant (what exporters
// write for x[:, 0] and friends); negative indices count from the end.
bool lower_gather(Lowering& l) {
  BlobNode& n = l.node();
  n.op = Op::kGather;
  int64_t axis = 0;
  if (!l.check_attributes({{"axis", 1}}) || !l.check_inputs(2, 2) || !l.get_int("axis", 0, &axis)) {
    return false;
  }
  Shape values, index_shape;
  if (!l.constant_indices(1, &values, &index_shape) || !l.moved(0) || !l.moved_output(1)) return false;
  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (axis < -rank || axis >= rank) return l.fail("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  if (x.size() + index_shape.size() > kMaxRank + 1) return l.fail("the output rank exceeds " + std::to_string(kMaxRank));
  const int64_t extent = x[static_cast<size_t>(axis)];
  for (int64_t& v : values) {
    if (v < -extent || v >= extent) {
      return l.fail("index " + std::to_string(v) + " is outside axis " + std::to_string(axis) +
                    " of extent " + std::to_string(extent));
    }
    if (v < 0) v += extent;
  }
  n.axis = axis;
  n.ints = {static_cast<int64_t>(index_shape.size())};
  n.ints.insert(n.ints.end(), index_shape.begin(), index_shape.end());
  n.ints.insert(n.ints.end(), values.begin(), values.end());
  return true;
}

// Resize from opset 11: nearest (any nearest_mode) or linear (separable over
// every resized axis), the coordinate modes half_pixel, pytorch_half_pixel,
// align_corners, asymmetric and tf_half_pixel_for_nn, constant scales or
// sizes (with axes from opset 18). The sampling positions are computed here
// once, in double precision, into the blob's tap table. Refused: cubic,
// tf_crop_and_resize, half_pixel_symmetric, antialias, exclude_outside,
// keep_aspect_ratio_policy other than stretch, align_corners with a scale
// that does not give a whole output length, and align_corners or
// pytorch_half_pixel shrinking an axis to one element (where ONNX's
// reference and its formula disagree).
bool lower_resize(Lowering& l) {
  BlobNode& n = l.node();
  n.op = Op::kResize;
  if (l.opset() < 11) return l.fail("Resize before opset 11 is not supported");
  std::string mode, coord_name, rounding_name, policy;
  int64_t antialias = 0, exclude_outside = 0;
  float cubic_a = 0, extrapolation = 0;
  Shape axes;
  if (!l.check_attributes({{"coordinate_transformation_mode", 11}, {"cubic_coeff_a", 11},
                           {"exclude_outside", 11}, {"extrapolation_value", 11}, {"mode", 11},
                           {"nearest_mode", 11}, {"antialias", 18}, {"axes", 18},
                           {"keep_aspect_ratio_policy", 18}}) ||
      !l.check_inputs(1, 4) || !l.get_string("mode", "nearest", &mode) ||
      !l.get_string("coordinate_transformation_mode", "half_pixel", &coord_name) ||
      !l.get_string("nearest_mode", "round_prefer_floor", &rounding_name) ||
      !l.get_string("keep_aspect_ratio_policy", "stretch", &policy) ||
      !l.get_int("antialias", 0, &antialias) || !l.get_int("exclude_outside", 0, &exclude_outside) ||
      !l.get_float("cubic_coeff_a", -0.75f, &cubic_a) ||
      !l.get_float("extrapolation_value", 0.0f, &extrapolation) || !l.get_ints("axes", &axes)) {
    return false;
  }
  const bool linear = mode == "linear";
  if (!linear && mode != "nearest") return l.fail("mode " + mode + " is not supported (nearest and linear are)");
  ResizeCoordMode coord;
  if (coord_name == "half_pixel") coord = ResizeCoordMode::kHalfPixel;
  else if (coord_name == "pytorch_half_pixel") coord = ResizeCoordMode::kPytorchHalfPixel;
  else if (coord_name == "align_corners") coord = ResizeCoordMode::kAlignCorners;
  else if (coord_name == "asymmetric") coord = ResizeCoordMode::kAsymmetric;
  else if (coord_name == "tf_half_pixel_for_nn") coord = ResizeCoordMode::kTfHalfPixelForNn;
  else return l.fail("coordinate_transformation_mode " + coord_name + " is not supported");
  ResizeRounding rounding;
  if (rounding_name == "round_prefer_floor") rounding = ResizeRounding::kRoundPreferFloor;
  else if (rounding_name == "round_prefer_ceil") rounding = ResizeRounding::kRoundPreferCeil;
  else if (rounding_name == "floor") rounding = ResizeRounding::kFloor;
  else if (rounding_name == "ceil") rounding = ResizeRounding::kCeil;
  else return l.fail("nearest_mode " + rounding_name + " is unknown");
  if (antialias != 0) return l.fail("antialias is not supported");
  if (exclude_outside != 0) return l.fail("exclude_outside is not supported");
  if (policy != "stretch") return l.fail("keep_aspect_ratio_policy " + policy + " is not supported");
  if (!l.data(0) || !l.output(1)) return false;
  const Shape x = l.shape_of(0), y = l.output_shape();
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank == 0 || y.size() != x.size()) return l.fail("X and Y must have the same rank, at least 1");
  const bool open = is_open(x);
  for (int64_t d : x) {
    if ((d < 1 && !(open && d == -1)) || d > kMaxAttr) {
      return l.fail("input shape " + detail::shape_string(x) + " has an empty or huge axis");
    }
  }
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
  auto given = [&](size_t i) { return l.present(i) && l.shape_of(i) != Shape{0}; };
  std::vector<float> scales;
  Shape sizes;
  if (given(2) && !l.constant_f32s(2, &scales)) return false;
  if (given(3) && !l.constant_i64s(3, &sizes)) return false;
  if (scales.empty() == sizes.empty()) return l.fail("exactly one of scales and sizes must be given");
  if ((scales.empty() ? sizes.size() : scales.size()) != axes.size()) {
    return l.fail("scales or sizes do not name every resized axis once");
  }
  if (open && scales.empty()) {
    // The sampling of a Resize to sizes follows the input's extent, which
    // this binding leaves open (the compiler reads a Resize to a multiple
    // of its input as scales where it can: unify_shape_targets).
    return l.fail("Resize to sizes of an input with open dimensions " + detail::shape_string(x) +
                  " (by scales it is run per binding)");
  }
  std::vector<double> scale(x.size(), 1.0);
  Shape want = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = static_cast<size_t>(axes[i]);
    const double in = static_cast<double>(x[a]);
    if (!scales.empty()) {
      const double s = scales[i];
      if (!(s > 0) || !std::isfinite(s) || (x[a] > 0 && in * s >= static_cast<double>(kMaxAttr))) {
        return l.fail("scale " + std::to_string(s) + " is not a positive finite factor");
      }
      scale[a] = s;
      want[a] = x[a] < 0 ? -1 : static_cast<int64_t>(std::floor(in * s));
    } else {
      if (sizes[i] < 1 || sizes[i] > kMaxAttr) return l.fail("size " + std::to_string(sizes[i]) + " is out of range");
      want[a] = sizes[i];
      scale[a] = static_cast<double>(sizes[i]) / in;
    }
  }
  if (open) {
    // The open form (format 8): the taps are made per binding by
    // bind_shapes; the declared output is checked there too, and at a
    // probe binding by check_open_node now.
    n.ints = {linear ? 3 : 2, static_cast<int64_t>(coord), static_cast<int64_t>(rounding)};
    n.floats.assign(scale.begin(), scale.end());
    for (size_t a = 0; a < x.size(); ++a) {
      if (static_cast<double>(n.floats[a]) != scale[a]) return l.fail("a scale is not an f32 value");
    }
    return true;
  }
  if (want != y) {
    return l.fail("the output is declared " + detail::shape_string(y) + ", the scales give " +
                  detail::shape_string(want));
  }
  std::string error;
  if (!resize_static_form(linear, coord, rounding, scale, x, y, &n.ints, &n.floats, &error)) return l.fail(error);
  return true;
}

// ConvTranspose with explicit pads (or auto_pad VALID) and output_padding
// below the stride; output_shape and auto_pad SAME_* are refused.
bool lower_conv_transpose(Lowering& l) {
  BlobNode& n = l.node();
  n.op = Op::kConvTranspose;
  if (!l.check_attributes({{"auto_pad", 1}, {"dilations", 1}, {"group", 1}, {"kernel_shape", 1},
                           {"output_padding", 1}, {"output_shape", 1}, {"pads", 1}, {"strides", 1}}) ||
      !l.check_inputs(2, 3) || !l.data(0) || !l.data(1) || (l.present(2) && !l.data(2)) ||
      !l.output(1)) {
    return false;
  }
  if (l.has("output_shape")) return l.fail("attribute 'output_shape' is not supported");
  const Shape x = l.shape_of(0), w = l.shape_of(1);
  if (x.size() < 3 || x.size() > static_cast<size_t>(2 + kMaxSpatial) || w.size() != x.size()) {
    return l.fail("input rank " + std::to_string(x.size()) + " is not 3 to " + std::to_string(2 + kMaxSpatial) +
                  " or differs from the weight's");
  }
  const size_t k = x.size() - 2;
  Shape kernel, strides, dilations, pads, output_padding;
  std::string auto_pad;
  int64_t group = 1;
  if (!l.get_ints("kernel_shape", &kernel) || !l.get_ints("strides", &strides) ||
      !l.get_ints("dilations", &dilations) || !l.get_ints("pads", &pads) ||
      !l.get_ints("output_padding", &output_padding) || !l.get_string("auto_pad", "NOTSET", &auto_pad) ||
      !l.get_int("group", 1, &group)) {
    return false;
  }
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return l.fail("auto_pad " + auto_pad + " is not supported");
  if (auto_pad == "VALID" && !pads.empty()) return l.fail("pads together with auto_pad VALID");
  const Shape from_w(w.begin() + 2, w.end());
  if (kernel.empty()) kernel = from_w;
  if (kernel != from_w) return l.fail("kernel_shape disagrees with the weight's shape");
  if (strides.empty()) strides.assign(k, 1);
  if (dilations.empty()) dilations.assign(k, 1);
  if (output_padding.empty()) output_padding.assign(k, 0);
  if (pads.empty()) pads.assign(2 * k, 0);
  if (strides.size() != k || dilations.size() != k || output_padding.size() != k || pads.size() != 2 * k) {
    return l.fail("strides, dilations, output_padding and pads need " + std::to_string(k) + " (pads " +
                  std::to_string(2 * k) + ") entries");
  }
  if (group < 1 || group > kMaxAttr || x[1] % group != 0 || w[0] != x[1]) {
    return l.fail("group " + std::to_string(group) + " does not divide the input channels or the weight");
  }
  for (size_t i = 0; i < k; ++i) {
    if (strides[i] < 1 || dilations[i] < 1 || strides[i] > kMaxAttr || dilations[i] > kMaxAttr ||
        pads[i] < 0 || pads[k + i] < 0 || pads[i] > kMaxAttr || pads[k + i] > kMaxAttr ||
        output_padding[i] < 0 || output_padding[i] >= strides[i]) {
      return l.fail("strides and dilations must be positive, pads >= 0, output_padding below the stride");
    }
  }
  n.ints = {static_cast<int64_t>(k), group};
  for (const Shape* v : {&kernel, &strides, &dilations}) n.ints.insert(n.ints.end(), v->begin(), v->end());
  n.ints.insert(n.ints.end(), pads.begin(), pads.end());  // begins, then ends
  n.ints.insert(n.ints.end(), output_padding.begin(), output_padding.end());
  return true;
}

// LayerNormalization (opset 17): normalizes over axes [axis, rank) with
// Scale and B of exactly those dims; stash_type 1 (f32) and the Mean and
// InvStdDev outputs left out.
bool lower_layer_norm(Lowering& l) {
  BlobNode& n = l.node();
  n.op = Op::kLayerNormalization;
  int64_t axis = -1, stash = 1;
  if (!l.check_attributes({{"axis", 17}, {"epsilon", 17}, {"stash_type", 17}}) || !l.check_inputs(2, 3) ||
      !l.get_int("axis", -1, &axis) || !l.get_float("epsilon", 1e-5f, &n.alpha) ||
      !l.get_int("stash_type", 1, &stash) || !l.data(0) || !l.data(1) || (l.present(2) && !l.data(2)) ||
      !l.output(3)) {
    return false;
  }
  if (stash != 1) return l.fail("stash_type " + std::to_string(stash) + " is not supported (1 is)");
  const int64_t rank = static_cast<int64_t>(l.shape_of(0).size());
  if (axis < -rank || axis >= rank) return l.fail("axis " + std::to_string(axis) + " is out of range");
  n.axis = axis < 0 ? axis + rank : axis;
  if (!(n.alpha >= 0.0f) || n.alpha > 1.0f) return l.fail("epsilon is not in [0, 1]");
  return true;
}

// Slice: starts, ends, axes and steps as attributes before opset 10 (no
// steps) and as inline i64 or i32 constants from 10, with ONNX's clamping:
// a negative index counts from the end; for a positive step start and end
// are clamped to [0, dim], for a negative one start to [0, dim - 1] and
// end to [-1, dim - 1]. The blob gets each axis' first index, step and
// count.
bool lower_slice(Lowering& l) {
  BlobNode& n = l.node();
  n.op = Op::kSlice;
  const bool inputs = l.opset() >= 10;
  Shape starts, ends, axes, steps;
  if (!inputs) {
    if (!l.check_attributes({{"axes", 1}, {"ends", 1}, {"starts", 1}}) || !l.check_inputs(1, 1) ||
        !l.get_ints("starts", &starts) || !l.get_ints("ends", &ends) || !l.get_ints("axes", &axes)) {
      return false;
    }
    if (!l.has("starts") || !l.has("ends")) return l.fail("attributes 'starts' and 'ends' are required");
  } else {
    if (!l.check_attributes({}) || !l.check_inputs(3, 5)) return false;
    Shape shape;
    const auto list = [&](size_t i, Shape* v) {
      if (!l.constant_indices(i, v, &shape)) return false;
      return shape.size() == 1 || l.fail("input " + std::to_string(i) + " must be 1-D");
    };
    if (!list(1, &starts) || !list(2, &ends)) return false;
    if (l.present(3) && !list(3, &axes)) return false;
    if (l.present(4) && !list(4, &steps)) return false;
  }
  if (!l.moved(0) || !l.moved_output(1)) return false;
  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank == 0) return l.fail("a scalar cannot be sliced");
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return l.fail("starts, ends, axes and steps differ in length");
  }
  Shape first(x.size(), 0), step(x.size(), 1), count = x;
  std::vector<bool> named(x.size(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = axes[i];
    if (a < -rank || a >= rank || (a < 0 && !inputs)) return l.fail("axis " + std::to_string(a) + " is out of range");
    if (a < 0) a += rank;
    if (named[static_cast<size_t>(a)]) return l.fail("axis " + std::to_string(a) + " is given twice");
    named[static_cast<size_t>(a)] = true;
    const int64_t dim = x[static_cast<size_t>(a)], s = steps[i];
    if (s == 0 || s < -kMaxAttr || s > kMaxAttr) return l.fail("step " + std::to_string(s) + " is 0 or too large");
    step[static_cast<size_t>(a)] = s;
    if (dim == 0) continue;  // an empty axis stays empty
    const auto from_end = [dim](int64_t v) { return v < 0 ? (v < -dim ? -1 : v + dim) : v; };
    int64_t b = from_end(starts[i]), e = from_end(ends[i]);
    if (s > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    const int64_t span = s > 0 ? e - b : b - e;
    const int64_t len = span <= 0 ? 0 : (span + (s > 0 ? s : -s) - 1) / (s > 0 ? s : -s);
    first[static_cast<size_t>(a)] = len == 0 ? 0 : b;
    step[static_cast<size_t>(a)] = s;
    count[static_cast<size_t>(a)] = len;
  }
  if (count != l.output_shape()) {
    return l.fail("the output is declared " + detail::shape_string(l.output_shape()) + ", the slice gives " +
                  detail::shape_string(count));
  }
  n.ints = first;
  n.ints.insert(n.ints.end(), step.begin(), step.end());
  n.ints.insert(n.ints.end(), count.begin(), count.end());
  return true;
}

}  // namespace loom::cpu_simd::lowering
