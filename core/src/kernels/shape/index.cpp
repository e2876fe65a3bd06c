// Index-driven data movement: GatherElements, ScatterElements (and Scatter,
// its opset 9-10 name), GatherND, ScatterND, OneHot, ReverseSequence, Trilu.
// Indices are i32 or i64; an index out of range is an error at run time
// naming it.
#include <cstring>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/shape/common.hpp"
#include "kernels/shape/ops.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::shape {
namespace {

Status check_index_dtype(std::string_view op, std::string_view name, DType d) {
  if (d != DType::kI32 && d != DType::kI64) {
    return bad(op, "operand '" + std::string(name) + "' must be i32 or i64, got " +
                       std::string(dtype_name(d)));
  }
  return Status();
}

int64_t index_at(const TensorRef& t, size_t i) {
  if (t.dtype == DType::kI64) {
    int64_t v;
    std::memcpy(&v, src(t) + i * 8, 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, src(t) + i * 4, 4);
  return v;
}

// `idx` in [-dim, dim) made non-negative, else an error naming the element.
Result<int64_t> checked_index(std::string_view op, std::string_view name, size_t i, int64_t idx,
                              int64_t dim) {
  if (idx < -dim || idx >= dim) {
    return out_of_range(std::string(op) + ": " + std::string(name) + "[" + std::to_string(i) +
                        "] = " + std::to_string(idx) + " is out of range for a dimension of " +
                        std::to_string(dim));
  }
  return idx < 0 ? idx + dim : idx;
}

Result<size_t> elements_axis(std::string_view op, std::span<const TensorType> in,
                             const Attributes& a) {
  const int64_t rank = static_cast<int64_t>(in[0].shape.size());
  const int64_t axis = a.get_int("axis", 0);
  if (axis < -rank || axis >= rank) {
    return bad(op, "attribute 'axis' " + std::to_string(axis) + " out of range for rank " +
                       std::to_string(rank));
  }
  if (in[1].shape.size() != in[0].shape.size()) {
    return bad(op, "'indices' " + shape_to_string(in[1].shape) + " must have the rank of 'data' " +
                       shape_to_string(in[0].shape));
  }
  const size_t ax = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  for (size_t d = 0; d < in[0].shape.size(); ++d) {
    // Off the axis, every index must address an element of 'data'.
    if (in[1].shape[d] < 0 || (d != ax && in[1].shape[d] > in[0].shape[d])) {
      return bad(op, "'indices' " + shape_to_string(in[1].shape) + " exceeds 'data' " +
                         shape_to_string(in[0].shape) + " in dimension " + std::to_string(d));
    }
  }
  return ax;
}

// A scatter's `reduction`: 0 none, 1 add, 2 mul, 3 max, 4 min (max and min
// from opset 18).
Result<int> scatter_reduction(std::string_view op, const Attributes& a) {
  const std::string_view r = a.get_string("reduction", "none");
  if (r == "none") return 0;
  if (r == "add") return 1;
  if (r == "mul") return 2;
  if ((r == "max" || r == "min") && !a.opset_before(18)) return r == "max" ? 3 : 4;
  return bad(op, "unknown 'reduction' '" + std::string(r) + "' (none, add, mul; max and min from opset 18)");
}

// Applies `reduction` (scatter_reduction's code) of u onto the element at y.
template <typename T>
void reduce_into(T& y, const T& u, int reduction) {
  if constexpr (std::is_same_v<T, bool>) {
    y = reduction == 3 ? (y || u) : reduction == 4 ? (y && u) : u;
  } else if constexpr (std::is_arithmetic_v<T>) {
    switch (reduction) {
      case 1: y = static_cast<T>(y + u); break;
      case 2: y = static_cast<T>(y * u); break;
      case 3: y = y < u ? u : y; break;
      case 4: y = u < y ? u : y; break;
      default: y = u; break;
    }
  } else {
    if (reduction == 0) {
      y = u;
      return;
    }
    const float fy = to_float(y), fu = to_float(u);
    const float v = reduction == 1   ? fy + fu
                    : reduction == 2 ? fy * fu
                    : reduction == 3 ? (fy < fu ? fu : fy)
                                     : (fu < fy ? fu : fy);
    if constexpr (std::is_same_v<T, Half>) y = to_half(v);
    else y = to_bfloat16(v);
  }
}

// Calls fn(flat index of an element of `shape`, its offset in a tensor of
// `other` shape with the same index, and the coordinate along `axis`).
template <typename Fn>
Status for_each_element(std::span<const int64_t> shape, std::span<const int64_t> other,
                        size_t axis, Fn&& fn) {
  const uint64_t total = *element_count(shape);
  const size_t rank = shape.size();
  const Shape strides = strides_of(other);
  std::vector<int64_t> idx(rank, 0);
  for (uint64_t i = 0; i < total; ++i) {
    int64_t base = 0;
    for (size_t d = 0; d < rank; ++d) {
      if (d != axis) base += idx[d] * strides[d];
    }
    LOOM_RETURN_IF_ERROR(fn(i, base, strides[axis]));
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return Status();
}

}  // namespace

// ---------------------------------------------------------------- GatherElements

Result<std::vector<TensorType>> gather_elements_infer(std::span<const TensorType> in,
                                                      const Attributes& a) {
  constexpr std::string_view op = "GatherElements";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 2, 2, 1, 1));
  LOOM_RETURN_IF_ERROR(check_index_dtype(op, "indices", in[1].dtype));
  LOOM_RETURN_IF_ERROR(elements_axis(op, in, a).status());
  return std::vector<TensorType>{{in[0].dtype, in[1].shape}};
}

Status gather_elements_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                           const Attributes& a) {
  constexpr std::string_view op = "GatherElements";
  LOOM_RETURN_IF_ERROR(prologue(op, in, out, {"data", "indices"},
                                [&](std::span<const TensorType> t) {
                                  return gather_elements_infer(t, a);
                                })
                           .status());
  std::vector<TensorType> types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(size_t axis, elements_axis(op, types, a));
  const size_t es = dtype_size(in[0].dtype);
  const int64_t dim = in[0].shape[axis];
  return for_each_element(in[1].shape, in[0].shape, axis,
                          [&](uint64_t i, int64_t base, int64_t stride) -> Status {
                            LOOM_ASSIGN_OR_RETURN(int64_t idx,
                                                  checked_index(op, "indices", i, index_at(in[1], i), dim));
                            std::memcpy(dst(out[0]) + i * es, src(in[0]) + (base + idx * stride) * es, es);
                            return Status();
                          });
}

// ---------------------------------------------------------------- ScatterElements

Result<std::vector<TensorType>> scatter_elements_infer(std::span<const TensorType> in,
                                                       const Attributes& a) {
  constexpr std::string_view op = "ScatterElements";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 3, 3, 1, 1));
  LOOM_RETURN_IF_ERROR(check_index_dtype(op, "indices", in[1].dtype));
  LOOM_RETURN_IF_ERROR(elements_axis(op, in, a).status());
  if (in[2].shape != in[1].shape || in[2].dtype != in[0].dtype) {
    return bad(op, "'updates' " + std::string(dtype_name(in[2].dtype)) + " " +
                       shape_to_string(in[2].shape) + " must have the shape of 'indices' " +
                       shape_to_string(in[1].shape) + " and the dtype of 'data'");
  }
  LOOM_ASSIGN_OR_RETURN(int reduction, scatter_reduction(op, a));
  if (reduction != 0 && !is_float_dtype(in[0].dtype) && !is_int_dtype(in[0].dtype)) {
    return unimplemented(std::string(op) + ": reduction on dtype " +
                         std::string(dtype_name(in[0].dtype)));
  }
  return std::vector<TensorType>{{in[0].dtype, in[0].shape}};
}

Status scatter_elements_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                            const Attributes& a) {
  constexpr std::string_view op = "ScatterElements";
  LOOM_RETURN_IF_ERROR(prologue(op, in, out, {"data", "indices", "updates"},
                                [&](std::span<const TensorType> t) {
                                  return scatter_elements_infer(t, a);
                                })
                           .status());
  std::vector<TensorType> types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(size_t axis, elements_axis(op, types, a));
  if (in[0].byte_size != 0) std::memcpy(out[0].data, in[0].data, in[0].byte_size);
  LOOM_ASSIGN_OR_RETURN(int reduction, scatter_reduction(op, a));
  const int64_t dim = in[0].shape[axis];
  return visit_dtype(op, in[0].dtype, [&]<typename T>() -> Status {
    T* y = static_cast<T*>(out[0].data);
    const T* u = static_cast<const T*>(in[2].data);
    return for_each_element(in[1].shape, in[0].shape, axis,
                            [&](uint64_t i, int64_t base, int64_t stride) -> Status {
                              LOOM_ASSIGN_OR_RETURN(
                                  int64_t idx, checked_index(op, "indices", i, index_at(in[1], i), dim));
                              reduce_into(y[base + idx * stride], u[i], reduction);
                              return Status();
                            });
  });
}

// ---------------------------------------------------------------- GatherND

namespace {

struct GatherNdPlan {
  int64_t batch_dims = 0;
  int64_t last = 0;       // indices.shape[-1]
  Shape out;
};

Result<GatherNdPlan> gather_nd_plan(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "GatherND";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 2, 2, 1, 1));
  LOOM_RETURN_IF_ERROR(check_index_dtype(op, "indices", in[1].dtype));
  const Shape& d = in[0].shape;
  const Shape& ix = in[1].shape;
  GatherNdPlan p;
  p.batch_dims = a.opset_before(12) ? 0 : a.get_int("batch_dims", 0);
  const int64_t r = static_cast<int64_t>(d.size()), q = static_cast<int64_t>(ix.size());
  if (r < 1 || q < 1 || p.batch_dims < 0 || p.batch_dims >= std::min(r, q)) {
    return bad(op, "'data' " + shape_to_string(d) + " and 'indices' " + shape_to_string(ix) +
                       " do not fit batch_dims " + std::to_string(p.batch_dims));
  }
  p.last = ix.back();
  if (p.last < 1 || p.last > r - p.batch_dims) {
    return bad(op, "the last dimension of 'indices' " + shape_to_string(ix) +
                       " must lie in [1, " + std::to_string(r - p.batch_dims) + "]");
  }
  for (int64_t b = 0; b < p.batch_dims; ++b) {
    if (d[b] != ix[b]) return bad(op, "batch dimensions of 'data' and 'indices' differ");
  }
  p.out.assign(ix.begin(), ix.end() - 1);
  p.out.insert(p.out.end(), d.begin() + p.batch_dims + p.last, d.end());
  LOOM_RETURN_IF_ERROR(element_count(p.out).status().with_context("GatherND: output"));
  return p;
}

}  // namespace

Result<std::vector<TensorType>> gather_nd_infer(std::span<const TensorType> in,
                                                const Attributes& a) {
  LOOM_ASSIGN_OR_RETURN(GatherNdPlan p, gather_nd_plan(in, a));
  return std::vector<TensorType>{{in[0].dtype, std::move(p.out)}};
}

Status gather_nd_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                     const Attributes& a) {
  constexpr std::string_view op = "GatherND";
  LOOM_RETURN_IF_ERROR(prologue(op, in, out, {"data", "indices"},
                                [&](std::span<const TensorType> t) { return gather_nd_infer(t, a); })
                           .status());
  std::vector<TensorType> types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(GatherNdPlan p, gather_nd_plan(types, a));
  const auto& d = in[0].shape;
  const auto& ix = in[1].shape;
  const size_t es = dtype_size(in[0].dtype);
  const Shape strides = strides_of(d);
  const size_t b = static_cast<size_t>(p.batch_dims);
  const int64_t batches = product(d, 0, b);
  const int64_t per_batch = product(ix, b, ix.size() - 1);  // index tuples per batch
  const size_t slice = static_cast<size_t>(product(d, b + p.last, d.size())) * es;
  const int64_t batch_stride = b == 0 ? 0 : strides[b - 1];
  std::byte* y = dst(out[0]);
  size_t tuple = 0;
  for (int64_t n = 0; n < batches; ++n) {
    for (int64_t j = 0; j < per_batch; ++j, ++tuple) {
      int64_t offset = n * batch_stride;
      for (int64_t k = 0; k < p.last; ++k) {
        const size_t at = tuple * static_cast<size_t>(p.last) + static_cast<size_t>(k);
        LOOM_ASSIGN_OR_RETURN(int64_t idx,
                              checked_index(op, "indices", at, index_at(in[1], at), d[b + k]));
        offset += idx * strides[b + k];
      }
      if (slice != 0) std::memcpy(y, src(in[0]) + offset * static_cast<int64_t>(es), slice);
      y += slice;
    }
  }
  return Status();
}

// ---------------------------------------------------------------- ScatterND

namespace {

Result<int> scatter_nd_check(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "ScatterND";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 3, 3, 1, 1));
  LOOM_RETURN_IF_ERROR(check_index_dtype(op, "indices", in[1].dtype));
  const Shape& d = in[0].shape;
  const Shape& ix = in[1].shape;
  if (ix.empty() || ix.back() < 1 || ix.back() > static_cast<int64_t>(d.size())) {
    return bad(op, "'indices' " + shape_to_string(ix) + " must end in a dimension in [1, " +
                       std::to_string(d.size()) + "]");
  }
  Shape want(ix.begin(), ix.end() - 1);
  want.insert(want.end(), d.begin() + ix.back(), d.end());
  if (in[2].shape != want || in[2].dtype != in[0].dtype) {
    return bad(op, "'updates' " + std::string(dtype_name(in[2].dtype)) + " " +
                       shape_to_string(in[2].shape) + " must be " +
                       std::string(dtype_name(in[0].dtype)) + " " + shape_to_string(want));
  }
  return scatter_reduction(op, a);
}

}  // namespace

Result<std::vector<TensorType>> scatter_nd_infer(std::span<const TensorType> in,
                                                 const Attributes& a) {
  LOOM_RETURN_IF_ERROR(scatter_nd_check(in, a).status());
  return std::vector<TensorType>{{in[0].dtype, in[0].shape}};
}

Status scatter_nd_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                      const Attributes& a) {
  constexpr std::string_view op = "ScatterND";
  LOOM_RETURN_IF_ERROR(prologue(op, in, out, {"data", "indices", "updates"},
                                [&](std::span<const TensorType> t) { return scatter_nd_infer(t, a); })
                           .status());
  std::vector<TensorType> types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(int reduction, scatter_nd_check(types, a));
  if (in[0].byte_size != 0) std::memcpy(out[0].data, in[0].data, in[0].byte_size);
  const auto& d = in[0].shape;
  const auto& ix = in[1].shape;
  const size_t k = static_cast<size_t>(ix.back());
  const Shape strides = strides_of(d);
  const int64_t tuples = product(ix, 0, ix.size() - 1);
  const int64_t slice = product(d, k, d.size());
  return visit_dtype(op, in[0].dtype, [&]<typename T>() -> Status {
    T* y = static_cast<T*>(out[0].data);
    const T* u = static_cast<const T*>(in[2].data);
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = 0;
      for (size_t j = 0; j < k; ++j) {
        const size_t at = static_cast<size_t>(t) * k + j;
        LOOM_ASSIGN_OR_RETURN(int64_t idx, checked_index(op, "indices", at, index_at(in[1], at), d[j]));
        offset += idx * strides[j];
      }
      for (int64_t e = 0; e < slice; ++e) reduce_into(y[offset + e], u[t * slice + e], reduction);
    }
    return Status();
  });
}

// ---------------------------------------------------------------- OneHot

namespace {

Result<int64_t> one_hot_depth(std::span<const TensorType> in) {
  constexpr std::string_view op = "OneHot";
  if (in[1].value == nullptr) return needs_constant(op, 1, "depth");
  auto n = element_count(in[1].shape);
  if (!n.ok() || *n != 1) return bad(op, "'depth' must hold one value, got shape " + shape_to_string(in[1].shape));
  LOOM_ASSIGN_OR_RETURN(double depth, load_scalar(op, "depth", *in[1].value, 0));
  if (!(depth >= 1) || depth > 9.0e15) return bad(op, "'depth' " + std::to_string(depth) + " must be >= 1");
  return static_cast<int64_t>(depth);
}

}  // namespace

Result<std::vector<TensorType>> one_hot_infer(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "OneHot";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 3, 3, 1, 1));
  if (!is_int_dtype(in[0].dtype) && !is_float_dtype(in[0].dtype)) {
    return bad(op, "'indices' must be numeric, got " + std::string(dtype_name(in[0].dtype)));
  }
  auto nv = element_count(in[2].shape);
  if (in[2].shape.size() != 1 || !nv.ok() || *nv != 2) {
    return bad(op, "'values' must be [off, on], got shape " + shape_to_string(in[2].shape));
  }
  LOOM_ASSIGN_OR_RETURN(int64_t depth, one_hot_depth(in));
  const int64_t rank = static_cast<int64_t>(in[0].shape.size()) + 1;
  int64_t axis = a.get_int("axis", -1);
  if (axis < -rank || axis >= rank) {
    return bad(op, "attribute 'axis' " + std::to_string(axis) + " out of range for rank " +
                       std::to_string(rank));
  }
  if (axis < 0) axis += rank;
  Shape out = in[0].shape;
  out.insert(out.begin() + axis, depth);
  LOOM_RETURN_IF_ERROR(element_count(out).status().with_context("OneHot: output"));
  return std::vector<TensorType>{{in[2].dtype, std::move(out)}};
}

Status one_hot_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                   const Attributes& a) {
  constexpr std::string_view op = "OneHot";
  LOOM_RETURN_IF_ERROR(prologue(op, in, out, {"indices", "depth", "values"},
                                [&](std::span<const TensorType> t) { return one_hot_infer(t, a); })
                           .status());
  std::vector<TensorType> types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(int64_t depth, one_hot_depth(types));
  const int64_t rank = static_cast<int64_t>(out[0].shape.size());
  int64_t axis = a.get_int("axis", -1);
  if (axis < 0) axis += rank;
  const int64_t outer = product(in[0].shape, 0, static_cast<size_t>(axis));
  const int64_t inner = product(in[0].shape, static_cast<size_t>(axis), in[0].shape.size());
  const size_t es = dtype_size(out[0].dtype);
  const std::byte* off = src(in[2]);
  const std::byte* on = off + es;
  std::byte* y = dst(out[0]);
  for (size_t k = 0; k < out[0].byte_size; k += es) std::memcpy(y + k, off, es);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      LOOM_ASSIGN_OR_RETURN(double v, load_scalar(op, "indices", in[0], static_cast<size_t>(o * inner + i)));
      if (!(v > -9.0e15 && v < 9.0e15)) continue;  // far out of range (or NaN): all 'off'
      int64_t idx = static_cast<int64_t>(v);
      if (idx < 0) idx += depth;
      if (idx < 0 || idx >= depth) continue;  // out of range: all 'off'
      std::memcpy(y + ((o * depth + idx) * inner + i) * static_cast<int64_t>(es), on, es);
    }
  }
  return Status();
}

// ---------------------------------------------------------------- ReverseSequence

namespace {

Result<std::pair<size_t, size_t>> reverse_axes(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "ReverseSequence";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 2, 2, 1, 1));
  if (in[1].dtype != DType::kI64) return bad(op, "'sequence_lens' must be i64");
  const int64_t batch = a.get_int("batch_axis", 1), time = a.get_int("time_axis", 0);
  if (in[0].shape.size() < 2 || (batch != 0 && batch != 1) || (time != 0 && time != 1) ||
      batch == time) {
    return bad(op, "needs rank >= 2 and batch_axis/time_axis 0 and 1, got " +
                       std::to_string(batch) + "/" + std::to_string(time) + " for " +
                       shape_to_string(in[0].shape));
  }
  if (in[1].shape != Shape{in[0].shape[batch]}) {
    return bad(op, "'sequence_lens' " + shape_to_string(in[1].shape) + " must be [" +
                       std::to_string(in[0].shape[batch]) + "]");
  }
  return std::pair<size_t, size_t>{batch, time};
}

}  // namespace

Result<std::vector<TensorType>> reverse_sequence_infer(std::span<const TensorType> in,
                                                       const Attributes& a) {
  LOOM_RETURN_IF_ERROR(reverse_axes(in, a).status());
  return std::vector<TensorType>{{in[0].dtype, in[0].shape}};
}

Status reverse_sequence_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                            const Attributes& a) {
  constexpr std::string_view op = "ReverseSequence";
  LOOM_RETURN_IF_ERROR(prologue(op, in, out, {"input", "sequence_lens"},
                                [&](std::span<const TensorType> t) {
                                  return reverse_sequence_infer(t, a);
                                })
                           .status());
  std::vector<TensorType> types = types_of(in);
  LOOM_ASSIGN_OR_RETURN(auto axes, reverse_axes(types, a));
  const auto [batch_axis, time_axis] = axes;
  const auto& s = in[0].shape;
  const size_t es = dtype_size(in[0].dtype);
  const Shape strides = strides_of(s);
  const size_t block = static_cast<size_t>(product(s, 2, s.size())) * es;
  for (int64_t b = 0; b < s[batch_axis]; ++b) {
    const int64_t len = index_at(in[1], static_cast<size_t>(b));
    if (len < 0 || len > s[time_axis]) {
      return out_of_range("ReverseSequence: sequence_lens[" + std::to_string(b) + "] = " +
                          std::to_string(len) + " is out of range [0, " +
                          std::to_string(s[time_axis]) + "]");
    }
    for (int64_t t = 0; t < s[time_axis]; ++t) {
      const int64_t from = t < len ? len - 1 - t : t;
      const int64_t dst_off = b * strides[batch_axis] + t * strides[time_axis];
      const int64_t src_off = b * strides[batch_axis] + from * strides[time_axis];
      if (block != 0) {
        std::memcpy(dst(out[0]) + dst_off * static_cast<int64_t>(es),
                    src(in[0]) + src_off * static_cast<int64_t>(es), block);
      }
    }
  }
  return Status();
}

// ---------------------------------------------------------------- Trilu

Result<std::vector<TensorType>> trilu_infer(std::span<const TensorType> in, const Attributes&) {
  constexpr std::string_view op = "Trilu";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 1, 2, 1, 1));
  if (in[0].shape.size() < 2) {
    return bad(op, "input must have rank >= 2, got " + shape_to_string(in[0].shape));
  }
  if (const TensorType* k = optional_type(in, 1)) {
    auto n = element_count(k->shape);
    if (k->dtype != DType::kI64 || !n.ok() || *n != 1) {
      return bad(op, "'k' must be an i64 scalar, got " + std::string(dtype_name(k->dtype)) + " " +
                         shape_to_string(k->shape));
    }
  }
  return std::vector<TensorType>{{in[0].dtype, in[0].shape}};
}

Status trilu_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                 const Attributes& a) {
  LOOM_RETURN_IF_ERROR(prologue("Trilu", in, out, {"input", "k"},
                                [&](std::span<const TensorType> t) { return trilu_infer(t, a); })
                           .status());
  int64_t k = 0;
  if (const TensorRef* kr = optional_ref(in, 1)) k = index_at(*kr, 0);
  const bool upper = a.get_int("upper", 1) != 0;
  const auto& s = in[0].shape;
  const int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  const int64_t mats = product(s, 0, s.size() - 2);
  const size_t es = dtype_size(in[0].dtype);
  if (in[0].byte_size != 0) std::memcpy(out[0].data, in[0].data, in[0].byte_size);
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        // Compared in 128 bits: k may be any i64.
        const __int128 diff = static_cast<__int128>(j) - i;
        const bool keep = upper ? diff >= k : diff <= k;
        // Zero bytes are zero in every dtype.
        if (!keep) std::memset(dst(out[0]) + ((m * rows + i) * cols + j) * static_cast<int64_t>(es), 0, es);
      }
    }
  }
  return Status();
}

}  // namespace loom::kernels::shape
