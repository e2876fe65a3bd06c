// Data movement: Transpose, Concat, Split, Slice, Gather, Expand, Tile,
// DepthToSpace, SpaceToDepth. Every kernel copies whole elements by their
// byte size, so every dtype works; most are one strided_copy().
#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/broadcast.hpp"
#include "kernels/checks.hpp"
#include "kernels/shape/common.hpp"
#include "kernels/shape/ops.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::shape {
namespace {

template <typename Infer>
Status run_prologue(std::string_view op, std::span<const TensorRef> in,
                    std::span<const TensorRef> out, const std::vector<std::string_view>& names,
                    Infer infer, const Attributes& a) {
  return prologue(op, in, out, names,
                  [&](std::span<const TensorType> t) { return infer(t, a); })
      .status();
}

}  // namespace

// ---------------------------------------------------------------- Transpose

namespace {

Result<std::vector<int64_t>> transpose_perm(std::span<const int64_t> shape, const Attributes& a) {
  const size_t rank = shape.size();
  std::vector<int64_t> perm = a.get_ints("perm");
  if (a.find("perm") == nullptr) {
    perm.resize(rank);
    for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);
    return perm;
  }
  if (perm.size() != rank) {
    return bad("Transpose", "attribute 'perm' " + shape_to_string(perm) + " has " +
                                std::to_string(perm.size()) + " entries, the input " +
                                shape_to_string(shape) + " has rank " + std::to_string(rank));
  }
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p]) {
      return bad("Transpose", "attribute 'perm' " + shape_to_string(perm) +
                                  " is not a permutation of 0.." + std::to_string(rank - 1));
    }
    seen[p] = true;
  }
  return perm;
}

}  // namespace

Result<std::vector<TensorType>> transpose_infer(std::span<const TensorType> in,
                                                const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_infer("Transpose", in, 1, 1));
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> perm, transpose_perm(in[0].shape, a));
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = in[0].shape[perm[i]];
  return std::vector<TensorType>{{in[0].dtype, std::move(out)}};
}

Status transpose_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                     const Attributes& a) {
  LOOM_RETURN_IF_ERROR(run_prologue("Transpose", in, out, {"data"}, transpose_infer, a));
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> perm, transpose_perm(in[0].shape, a));
  const Shape in_strides = strides_of(in[0].shape);
  Shape strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = in_strides[perm[i]];
  strided_copy(dtype_size(in[0].dtype), out[0].shape, strides, 0, src(in[0]), dst(out[0]));
  return Status();
}

// ---------------------------------------------------------------- Concat

namespace {

Result<size_t> concat_axis(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "Concat";
  const AttributeDef* attr = a.find("axis");
  if (attr == nullptr || attr->kind != AttributeKind::kInt) return bad(op, "needs attribute 'axis'");
  const int64_t rank = static_cast<int64_t>(in[0].shape.size());
  if (attr->i < 0 && a.opset_before(11)) {
    return bad(op, "negative 'axis' " + std::to_string(attr->i) + " before opset 11");
  }
  if (attr->i < -rank || attr->i >= rank) {
    return bad(op, "attribute 'axis' " + std::to_string(attr->i) + " out of range for rank " +
                       std::to_string(rank));
  }
  return static_cast<size_t>(attr->i < 0 ? attr->i + rank : attr->i);
}

}  // namespace

Result<std::vector<TensorType>> concat_infer(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "Concat";
  if (in.empty()) return bad(op, "takes at least 1 input, got 0");
  LOOM_RETURN_IF_ERROR(check_infer(op, in.first(1), 1, 1));
  LOOM_ASSIGN_OR_RETURN(size_t axis, concat_axis(in, a));
  Shape out = in[0].shape;
  for (size_t i = 1; i < in.size(); ++i) {
    const TensorType& t = in[i];
    if (t.dtype != in[0].dtype) {
      return bad(op, "input " + std::to_string(i) + " has dtype " +
                         std::string(dtype_name(t.dtype)) + ", input 0 has " +
                         std::string(dtype_name(in[0].dtype)));
    }
    bool same = t.shape.size() == out.size();
    for (size_t d = 0; same && d < out.size(); ++d) same = d == axis || t.shape[d] == out[d];
    if (!same || t.shape[axis] < 0) {
      return bad(op, "input " + std::to_string(i) + " of shape " + shape_to_string(t.shape) +
                         " does not match input 0 " + shape_to_string(in[0].shape) +
                         " outside axis " + std::to_string(axis));
    }
    if (t.shape[axis] > INT64_MAX - out[axis]) return bad(op, "output dimension overflows");
    out[axis] += t.shape[axis];
  }
  LOOM_RETURN_IF_ERROR(element_count(out).status().with_context(std::string(op) + ": output"));
  return std::vector<TensorType>{{in[0].dtype, std::move(out)}};
}

Status concat_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                  const Attributes& a) {
  LOOM_RETURN_IF_ERROR(run_prologue("Concat", in, out, {}, concat_infer, a));
  std::vector<TensorType> types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(size_t axis, concat_axis(types, a));
  const size_t es = dtype_size(out[0].dtype);
  const int64_t outer = product(out[0].shape, 0, axis);
  const int64_t inner = product(out[0].shape, axis + 1, out[0].shape.size());
  std::byte* y = dst(out[0]);
  for (int64_t o = 0; o < outer; ++o) {
    for (const TensorRef& t : in) {
      const size_t block = static_cast<size_t>(t.shape[axis] * inner) * es;
      if (block == 0) continue;
      std::memcpy(y, src(t) + o * block, block);
      y += block;
    }
  }
  return Status();
}

// ---------------------------------------------------------------- Split

namespace {

// The sizes of the parts along the axis. `outputs` is the number of outputs
// when known (run), 0 at infer time, where the attribute 'num_outputs' (the
// opset-18 name) gives it if the split sizes are not given.
Result<std::vector<int64_t>> split_sizes(std::span<const TensorType> in, const Attributes& a,
                                         size_t outputs, size_t* axis_out) {
  constexpr std::string_view op = "Split";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 1, 2, 1, 1));
  if (in[0].dtype == DType::kInvalid) return bad(op, "operand 'input' must be given");
  LOOM_RETURN_IF_ERROR(element_count(in[0].shape).status().with_context("Split: input"));
  const int64_t rank = static_cast<int64_t>(in[0].shape.size());
  const int64_t axis = a.get_int("axis", 0);
  // Negative axes are spec'd from opset 11, but PyTorch exports them for
  // older opsets too (the backend test GLU): accepted at every opset.
  if (axis < -rank || axis >= rank) {
    return bad(op, "attribute 'axis' " + std::to_string(axis) + " out of range for rank " +
                       std::to_string(rank));
  }
  const size_t ax = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  *axis_out = ax;
  const int64_t dim = in[0].shape[ax];
  bool given = false;
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                        ints_from_attr_or_input(op, in, 1, "split", a, 13, &given));
  if (given && !sizes.empty()) {
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0 || s > dim) return bad(op, "'split' " + shape_to_string(sizes) + " has a bad size");
      sum += s;
    }
    if (sum != dim) {
      return bad(op, "'split' " + shape_to_string(sizes) + " sums to " + std::to_string(sum) +
                         ", dimension " + std::to_string(ax) + " of input " +
                         shape_to_string(in[0].shape) + " is " + std::to_string(dim));
    }
    if (outputs != 0 && outputs != sizes.size()) {
      return bad(op, "'split' has " + std::to_string(sizes.size()) + " parts, the node has " +
                         std::to_string(outputs) + " outputs");
    }
    return sizes;
  }
  int64_t n = static_cast<int64_t>(outputs);
  if (n == 0) n = a.get_int("num_outputs", 0);
  if (n <= 0) {
    return bad(op, "without 'split' the number of outputs must be known (attribute "
                   "'num_outputs')");
  }
  if (n > dim && dim > 0) {
    return bad(op, "cannot split dimension " + std::to_string(dim) + " into " +
                       std::to_string(n) + " parts");
  }
  // Equal parts; like opset 18, the last part is smaller when n does not divide.
  const int64_t part = (dim + n - 1) / n;
  sizes.assign(static_cast<size_t>(n), part);
  if (dim % n != 0) {
    if (a.opset_before(18)) {
      return bad(op, "dimension " + std::to_string(dim) + " does not split into " +
                         std::to_string(n) + " equal parts");
    }
    sizes.back() = dim - part * (n - 1);
    if (sizes.back() < 0) return bad(op, "cannot split into " + std::to_string(n) + " parts");
  }
  return sizes;
}

Result<std::vector<TensorType>> split_types(std::span<const TensorType> in, const Attributes& a,
                                            size_t outputs) {
  size_t axis = 0;
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, split_sizes(in, a, outputs, &axis));
  std::vector<TensorType> out;
  for (int64_t s : sizes) {
    Shape shape = in[0].shape;
    shape[axis] = s;
    out.push_back({in[0].dtype, std::move(shape)});
  }
  return out;
}

}  // namespace

Result<std::vector<TensorType>> split_infer(std::span<const TensorType> in, const Attributes& a) {
  return split_types(in, a, 0);
}

Status split_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                 const Attributes& a) {
  LOOM_RETURN_IF_ERROR(prologue("Split", in, out, {"input", "split"},
                                [&](std::span<const TensorType> t) {
                                  return split_types(t, a, out.size());
                                })
                           .status());
  std::vector<TensorType> types = types_of(in);
  size_t axis = 0;
  LOOM_RETURN_IF_ERROR(split_sizes(types, a, out.size(), &axis).status());
  const size_t es = dtype_size(in[0].dtype);
  const int64_t outer = product(in[0].shape, 0, axis);
  const int64_t inner = product(in[0].shape, axis + 1, in[0].shape.size());
  const std::byte* x = src(in[0]);
  for (int64_t o = 0; o < outer; ++o) {
    for (const TensorRef& t : out) {
      const size_t block = static_cast<size_t>(t.shape[axis] * inner) * es;
      if (block == 0) continue;
      std::memcpy(dst(t) + o * block, x, block);
      x += block;
    }
  }
  return Status();
}

// ---------------------------------------------------------------- Slice

namespace {

struct SlicePlan {
  Shape shape;
  Shape strides;
  int64_t base = 0;
};

Result<SlicePlan> slice_plan(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "Slice";
  const bool old = a.opset_before(10);
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), old ? 1 : 3, old ? 1 : 5, 1, 1));
  if (in[0].dtype == DType::kInvalid) return bad(op, "operand 'data' must be given");
  LOOM_RETURN_IF_ERROR(element_count(in[0].shape).status().with_context("Slice: data"));
  const Shape& s = in[0].shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  std::vector<int64_t> starts, ends, axes, steps;
  bool has_axes = false, has_steps = false;
  if (old) {
    starts = a.get_ints("starts");
    ends = a.get_ints("ends");
    has_axes = a.find("axes") != nullptr;
    axes = a.get_ints("axes");
  } else {
    const char* names[] = {"starts", "ends", "axes", "steps"};
    std::vector<int64_t>* lists[] = {&starts, &ends, &axes, &steps};
    for (size_t i = 0; i < 4; ++i) {
      const TensorType* t = optional_type(in, i + 1);
      if (t == nullptr) {
        if (i < 2) return bad(op, std::string("operand '") + names[i] + "' must be given");
        continue;
      }
      if (t->shape.size() != 1) {
        return bad(op, std::string("operand '") + names[i] + "' must be 1-D, got shape " +
                           shape_to_string(t->shape));
      }
      LOOM_ASSIGN_OR_RETURN(*lists[i], constant_ints(op, i + 1, names[i], *t));
      if (i == 2) has_axes = true;
      if (i == 3) has_steps = true;
    }
  }
  if (ends.size() != starts.size()) {
    return bad(op, "'starts' has " + std::to_string(starts.size()) + " entries, 'ends' has " +
                       std::to_string(ends.size()));
  }
  if (!has_axes) {
    axes.resize(starts.size());
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
  }
  if (!has_steps) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    return bad(op, "'axes' and 'steps' must have as many entries as 'starts' (" +
                       std::to_string(starts.size()) + ")");
  }
  LOOM_ASSIGN_OR_RETURN(axes, normalize_axes(op, "'axes'", std::move(axes), rank));
  SlicePlan p;
  p.shape = s;
  p.strides = strides_of(s);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t ax = axes[i];
    const int64_t dim = s[ax];
    const int64_t step = steps[i];
    if (step == 0) return bad(op, "'steps' has a 0 for axis " + std::to_string(ax));
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    // |step| without overflow, also for INT64_MIN.
    const uint64_t abs_step =
        step > 0 ? static_cast<uint64_t>(step) : static_cast<uint64_t>(-(step + 1)) + 1;
    uint64_t distance = 0;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      if (end > start) distance = static_cast<uint64_t>(end - start);
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      if (start > end) distance = static_cast<uint64_t>(start - end);
    }
    const int64_t len = distance == 0 ? 0 : static_cast<int64_t>((distance - 1) / abs_step + 1);
    p.shape[ax] = len;
    if (len > 0) p.base += start * p.strides[ax];
    // With two or more elements, step * stride stays inside the tensor.
    p.strides[ax] = len > 1 ? p.strides[ax] * step : 0;
  }
  return p;
}

}  // namespace

Result<std::vector<TensorType>> slice_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(SlicePlan p, slice_plan(in, a));
  return std::vector<TensorType>{{in[0].dtype, std::move(p.shape)}};
}

Status slice_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                 const Attributes& a) {
  LOOM_RETURN_IF_ERROR(
      run_prologue("Slice", in, out, {"data", "starts", "ends", "axes", "steps"}, slice_infer, a));
  std::vector<TensorType> types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(SlicePlan p, slice_plan(types, a));
  strided_copy(dtype_size(in[0].dtype), p.shape, p.strides, p.base, src(in[0]), dst(out[0]));
  return Status();
}

// ---------------------------------------------------------------- Gather

namespace {

Result<size_t> gather_axis(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "Gather";
  LOOM_RETURN_IF_ERROR(check_infer(op, in, 2, 2));
  if (in[1].dtype != DType::kI32 && in[1].dtype != DType::kI64) {
    return bad(op, "operand 'indices' must be i32 or i64, got " +
                       std::string(dtype_name(in[1].dtype)));
  }
  const int64_t rank = static_cast<int64_t>(in[0].shape.size());
  const int64_t axis = a.get_int("axis", 0);
  if (axis < -rank || axis >= rank) {
    return bad(op, "attribute 'axis' " + std::to_string(axis) + " out of range for 'data' " +
                       shape_to_string(in[0].shape));
  }
  return static_cast<size_t>(axis < 0 ? axis + rank : axis);
}

}  // namespace

Result<std::vector<TensorType>> gather_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(size_t axis, gather_axis(in, a));
  Shape out(in[0].shape.begin(), in[0].shape.begin() + axis);
  out.insert(out.end(), in[1].shape.begin(), in[1].shape.end());
  out.insert(out.end(), in[0].shape.begin() + axis + 1, in[0].shape.end());
  LOOM_RETURN_IF_ERROR(element_count(out).status().with_context("Gather: output"));
  return std::vector<TensorType>{{in[0].dtype, std::move(out)}};
}

Status gather_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                  const Attributes& a) {
  LOOM_RETURN_IF_ERROR(run_prologue("Gather", in, out, {"data", "indices"}, gather_infer, a));
  std::vector<TensorType> types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(size_t axis, gather_axis(types, a));
  const size_t es = dtype_size(in[0].dtype);
  const int64_t outer = product(in[0].shape, 0, axis);
  const int64_t dim = in[0].shape[axis];
  const size_t block = static_cast<size_t>(product(in[0].shape, axis + 1, in[0].shape.size())) * es;
  const size_t count = *element_count(in[1].shape);
  const std::byte* x = src(in[0]);
  std::byte* y = dst(out[0]);
  const bool i64 = in[1].dtype == DType::kI64;
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t j = 0; j < count; ++j) {
      int64_t idx;
      if (i64) {
        std::memcpy(&idx, src(in[1]) + j * 8, 8);
      } else {
        int32_t v;
        std::memcpy(&v, src(in[1]) + j * 4, 4);
        idx = v;
      }
      if (idx < -dim || idx >= dim) {
        return out_of_range("Gather: indices[" + std::to_string(j) + "] = " +
                            std::to_string(idx) + " is out of range for dimension " +
                            std::to_string(axis) + " of size " + std::to_string(dim));
      }
      if (idx < 0) idx += dim;
      if (block != 0) std::memcpy(y, x + (o * dim + idx) * static_cast<int64_t>(block), block);
      y += block;
    }
  }
  return Status();
}

// ---------------------------------------------------------------- Expand

Result<std::vector<TensorType>> expand_infer(std::span<const TensorType> in, const Attributes&) {
  constexpr std::string_view op = "Expand";
  LOOM_RETURN_IF_ERROR(check_infer(op, in, 2, 2));
  if (in[1].shape.size() != 1) {
    return bad(op, "operand 'shape' must be 1-D, got shape " + shape_to_string(in[1].shape));
  }
  LOOM_ASSIGN_OR_RETURN(Shape target, constant_ints(op, 1, "shape", in[1]));
  for (int64_t d : target) {
    if (d < 0) return bad(op, "'shape' " + shape_to_string(target) + " has a negative dimension");
  }
  LOOM_ASSIGN_OR_RETURN(Shape out, broadcast_shape(op, "input", in[0].shape, "shape", target));
  LOOM_RETURN_IF_ERROR(element_count(out).status().with_context("Expand: output"));
  return std::vector<TensorType>{{in[0].dtype, std::move(out)}};
}

Status expand_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                  const Attributes& a) {
  LOOM_RETURN_IF_ERROR(run_prologue("Expand", in, out, {"input", "shape"}, expand_infer, a));
  const size_t rank = out[0].shape.size();
  const size_t lead = rank - in[0].shape.size();
  const Shape in_strides = strides_of(in[0].shape);
  Shape strides(rank, 0);
  for (size_t d = lead; d < rank; ++d) {
    strides[d] = in[0].shape[d - lead] == 1 ? 0 : in_strides[d - lead];
  }
  strided_copy(dtype_size(in[0].dtype), out[0].shape, strides, 0, src(in[0]), dst(out[0]));
  return Status();
}

// ---------------------------------------------------------------- Tile

Result<std::vector<TensorType>> tile_infer(std::span<const TensorType> in, const Attributes&) {
  constexpr std::string_view op = "Tile";
  LOOM_RETURN_IF_ERROR(check_infer(op, in, 2, 2));
  if (in[1].shape.size() != 1) {
    return bad(op, "operand 'repeats' must be 1-D, got shape " + shape_to_string(in[1].shape));
  }
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> reps, constant_ints(op, 1, "repeats", in[1]));
  if (reps.size() != in[0].shape.size()) {
    return bad(op, "'repeats' has " + std::to_string(reps.size()) + " entries, the input " +
                       shape_to_string(in[0].shape) + " has rank " +
                       std::to_string(in[0].shape.size()));
  }
  Shape out = in[0].shape;
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) return bad(op, "'repeats' " + shape_to_string(reps) + " has a negative entry");
    if (out[i] != 0 && reps[i] > INT64_MAX / out[i]) return bad(op, "output shape overflows");
    out[i] *= reps[i];
  }
  LOOM_RETURN_IF_ERROR(element_count(out).status().with_context("Tile: output"));
  return std::vector<TensorType>{{in[0].dtype, std::move(out)}};
}

Status tile_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                const Attributes& a) {
  LOOM_RETURN_IF_ERROR(run_prologue("Tile", in, out, {"input", "repeats"}, tile_infer, a));
  // Each repeat of the input is a strided copy into a window of the output.
  const size_t rank = in[0].shape.size();
  const size_t es = dtype_size(in[0].dtype);
  const uint64_t total = *element_count(out[0].shape);
  if (total == 0) return Status();
  if (rank == 0) {
    std::memcpy(dst(out[0]), src(in[0]), es);
    return Status();
  }
  const Shape in_strides = strides_of(in[0].shape);
  std::vector<int64_t> idx(rank, 0), pos(rank, 0);
  int64_t offset = 0;
  std::byte* y = dst(out[0]);
  const std::byte* x = src(in[0]);
  for (uint64_t i = 0; i < total; ++i) {
    std::memcpy(y + i * es, x + offset * static_cast<int64_t>(es), es);
    for (size_t d = rank; d-- > 0;) {
      ++idx[d];
      ++pos[d];
      offset += in_strides[d];
      if (pos[d] == in[0].shape[d]) {
        pos[d] = 0;
        offset -= in_strides[d] * in[0].shape[d];
      }
      if (idx[d] < out[0].shape[d]) break;
      idx[d] = 0;  // pos[d] wrapped to 0 too: out dim is a multiple of the input dim
    }
  }
  return Status();
}

// ---------------------------------------------------------------- DepthToSpace / SpaceToDepth

namespace {

Result<int64_t> blocksize(std::string_view op, std::span<const TensorType> in,
                          const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_infer(op, in, 1, 1));
  if (in[0].shape.size() != 4) {
    return bad(op, "input must have rank 4 (N, C, H, W), got " + shape_to_string(in[0].shape));
  }
  const int64_t b = a.get_int("blocksize", 0);
  if (b <= 0 || b > (1 << 20)) {
    return bad(op, "attribute 'blocksize' must be positive, got " + std::to_string(b));
  }
  return b;
}

bool crd_mode(const Attributes& a) {
  return !a.opset_before(11) && a.get_string("mode", "DCR") == "CRD";
}

}  // namespace

Result<std::vector<TensorType>> depth_to_space_infer(std::span<const TensorType> in,
                                                     const Attributes& a) {
  constexpr std::string_view op = "DepthToSpace";
  LOOM_ASSIGN_OR_RETURN(int64_t b, blocksize(op, in, a));
  const std::string_view mode = a.get_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") return bad(op, "unknown 'mode' " + std::string(mode));
  const Shape& s = in[0].shape;
  if (s[1] % (b * b) != 0) {
    return bad(op, "channels " + std::to_string(s[1]) + " are not a multiple of blocksize^2 " +
                       std::to_string(b * b));
  }
  Shape out = {s[0], s[1] / (b * b), s[2] * b, s[3] * b};
  LOOM_RETURN_IF_ERROR(element_count(out).status().with_context("DepthToSpace: output"));
  return std::vector<TensorType>{{in[0].dtype, std::move(out)}};
}

Status depth_to_space_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                          const Attributes& a) {
  LOOM_RETURN_IF_ERROR(run_prologue("DepthToSpace", in, out, {"input"}, depth_to_space_infer, a));
  const auto& s = in[0].shape;
  const int64_t b = a.get_int("blocksize", 0);
  const int64_t c = s[1] / (b * b);
  // The input viewed as 6-D, read in the output's order [N, C', H, b, W, b].
  Shape view, view_strides, strides;
  if (crd_mode(a)) {
    view = {s[0], c, b, b, s[2], s[3]};
    view_strides = strides_of(view);
    strides = {view_strides[0], view_strides[1], view_strides[4], view_strides[2], view_strides[5],
               view_strides[3]};
  } else {
    view = {s[0], b, b, c, s[2], s[3]};
    view_strides = strides_of(view);
    strides = {view_strides[0], view_strides[3], view_strides[4], view_strides[1], view_strides[5],
               view_strides[2]};
  }
  const Shape out6 = {s[0], c, s[2], b, s[3], b};
  strided_copy(dtype_size(in[0].dtype), out6, strides, 0, src(in[0]), dst(out[0]));
  return Status();
}

Result<std::vector<TensorType>> space_to_depth_infer(std::span<const TensorType> in,
                                                     const Attributes& a) {
  constexpr std::string_view op = "SpaceToDepth";
  LOOM_ASSIGN_OR_RETURN(int64_t b, blocksize(op, in, a));
  const Shape& s = in[0].shape;
  if (s[2] % b != 0 || s[3] % b != 0) {
    return bad(op, "height and width of " + shape_to_string(s) +
                       " must be multiples of blocksize " + std::to_string(b));
  }
  Shape out = {s[0], s[1] * b * b, s[2] / b, s[3] / b};
  LOOM_RETURN_IF_ERROR(element_count(out).status().with_context("SpaceToDepth: output"));
  return std::vector<TensorType>{{in[0].dtype, std::move(out)}};
}

Status space_to_depth_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                          const Attributes& a) {
  LOOM_RETURN_IF_ERROR(run_prologue("SpaceToDepth", in, out, {"input"}, space_to_depth_infer, a));
  const auto& s = in[0].shape;
  const int64_t b = a.get_int("blocksize", 0);
  // The input viewed as [N, C, H/b, b, W/b, b], read as [N, b, b, C, H/b, W/b].
  const Shape view = {s[0], s[1], s[2] / b, b, s[3] / b, b};
  const Shape vs = strides_of(view);
  const Shape strides = {vs[0], vs[3], vs[5], vs[1], vs[2], vs[4]};
  const Shape out6 = {s[0], b, b, s[1], s[2] / b, s[3] / b};
  strided_copy(dtype_size(in[0].dtype), out6, strides, 0, src(in[0]), dst(out[0]));
  return Status();
}

}  // namespace loom::kernels::shape
