// Lowering of the operators that move elements without arithmetic beyond
// indexing: Slice and Concat, each as strided box copies (the copy kernel).
#include <algorithm>
#include <limits>

#include "lowering.hpp"

namespace loom::vulkan::lowering {
std::vector<uint64_t> contiguous_strides(const Shape& s) {
  std::vector<uint64_t> stride(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) stride[d - 1] = stride[d] * static_cast<uint64_t>(s[d]);
  return stride;
}

namespace {

bool any_empty(const Shape& s) {
  return std::any_of(s.begin(), s.end(), [](int64_t d) { return d == 0; });
}

}  // namespace

// Slice: attributes starts/ends/axes before opset 10, then constant i64
// inputs starts, ends, axes and steps (any non-zero step, negative ones
// reading backwards); starts and ends clamped as ONNX specifies.
bool lower_slice(Lowering& l) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kCopy;
  Shape starts, ends, axes, steps;
  if (l.opset() < 10) {
    if (!l.attributes({"starts", "ends", "axes"}) || !l.inputs(1, 1) || !l.get_ints("starts", &starts) ||
        !l.get_ints("ends", &ends) || !l.get_ints("axes", &axes)) {
      return false;
    }
  } else {
    if (!l.attributes({}) || !l.inputs(3, 5) || !l.constant_i64s(1, &starts) || !l.constant_i64s(2, &ends) ||
        (l.present(3) && !l.constant_i64s(3, &axes)) || (l.present(4) && !l.constant_i64s(4, &steps))) {
      return false;
    }
  }
  if (!l.data(0) || !l.output()) return false;
  const Shape x = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank > static_cast<int64_t>(kBinaryMaxRank)) return l.fail("rank " + std::to_string(rank) + " exceeds 6");
  if (any_empty(x)) return l.fail("empty tensors are not supported");
  if (axes.empty()) {
    for (int64_t d = 0; d < static_cast<int64_t>(starts.size()); ++d) axes.push_back(d);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return l.fail("starts, ends, axes and steps differ in length");
  }
  Shape start(x.size(), 0), step(x.size(), 1), count = x;
  std::vector<bool> seen(x.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (a < -rank || a >= rank || (a < 0 && l.opset() < 11)) {
      return l.fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    }
    if (a < 0) a += rank;
    if (seen[static_cast<size_t>(a)]) return l.fail("axis " + std::to_string(a) + " is given twice");
    seen[static_cast<size_t>(a)] = true;
    const int64_t dim = x[static_cast<size_t>(a)], t = steps[i];
    if (t == 0) return l.fail("a step is 0");
    if (t == std::numeric_limits<int64_t>::min()) return l.fail("step " + std::to_string(t) + " is out of range");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;  // no overflow: dim >= 0
    if (e < 0) e += dim;
    int64_t n = 0;
    if (t > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      n = e > s ? (e - s + t - 1) / t : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      n = s > e ? (s - e + (-t) - 1) / (-t) : 0;
    }
    if (n == 0) return l.fail("the slice is empty; empty tensors are not supported");
    start[static_cast<size_t>(a)] = s;
    step[static_cast<size_t>(a)] = t;
    count[static_cast<size_t>(a)] = n;
  }
  if (!l.output_is(count)) return l.fail("output shape " + shape_text(l.output_shape()) + ", expected " + shape_text(count));
  const Shape out = count;
  const std::vector<uint64_t> xs = contiguous_strides(x);
  CopyBox box;
  box.dims = count;
  box.sy = contiguous_strides(out);
  for (size_t d = 0; d < x.size(); ++d) {
    box.x0 += static_cast<uint64_t>(start[d]) * xs[d];
    box.sx.push_back(step[d] * static_cast<int64_t>(xs[d]));
  }
  o.boxes.push_back(std::move(box));
  return true;
}

// Concat along `axis` (negative from opset 11): each input copied into its
// part of the output.
bool lower_concat(Lowering& l) {
  Lowered& o = l.out();
  o.kind = Lowered::Kind::kCopy;
  int64_t axis = 0;
  if (!l.attributes({"axis"}) || !l.has("axis") || !l.get_int("axis", 0, &axis) ||
      !l.inputs(1, 64) || !l.output()) {
    return !l.has("axis") ? l.fail("attribute 'axis' is missing") : false;
  }
  for (size_t i = 0; i < l.input_count(); ++i) {
    if (!l.data(i)) return false;
  }
  const Shape first = l.shape_of(0);
  const int64_t rank = static_cast<int64_t>(first.size());
  if (rank == 0 || rank > static_cast<int64_t>(kBinaryMaxRank)) {
    return l.fail("rank " + std::to_string(rank) + " is not 1 to 6");
  }
  if (axis < -rank || axis >= rank || (axis < 0 && l.opset() < 11)) {
    return l.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  if (axis < 0) axis += rank;
  Shape want = first;
  want[static_cast<size_t>(axis)] = 0;
  for (size_t i = 0; i < l.input_count(); ++i) {
    const Shape s = l.shape_of(i);
    if (s.size() != first.size()) return l.fail("input " + std::to_string(i) + " has rank " + std::to_string(s.size()));
    for (int64_t d = 0; d < rank; ++d) {
      if (d != axis && s[static_cast<size_t>(d)] != first[static_cast<size_t>(d)]) {
        return l.fail("input " + std::to_string(i) + " has shape " + shape_text(s) + ", input 0 " +
                      shape_text(first));
      }
    }
    want[static_cast<size_t>(axis)] += s[static_cast<size_t>(axis)];
  }
  if (!l.output_is(want)) {
    return l.fail("output shape " + shape_text(l.output_shape()) + ", the inputs give " + shape_text(want));
  }
  const Shape out = want;
  const std::vector<uint64_t> ys = contiguous_strides(out);
  int64_t at = 0;
  for (size_t i = 0; i < l.input_count(); ++i) {
    const Shape s = l.shape_of(i);
    if (any_empty(s)) return l.fail("empty tensors are not supported");
    CopyBox box;
    box.dims = s;
    const std::vector<uint64_t> xs = contiguous_strides(s);
    box.sx.assign(xs.begin(), xs.end());
    box.sy = ys;
    box.y0 = static_cast<uint64_t>(at) * ys[static_cast<size_t>(axis)];
    at += s[static_cast<size_t>(axis)];
    o.boxes.push_back(std::move(box));
  }
  return true;
}

}  // namespace loom::vulkan::lowering
