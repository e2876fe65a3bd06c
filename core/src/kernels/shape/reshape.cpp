// Reshape, Flatten, Squeeze, Unsqueeze (the data is copied unchanged, only
// the shape differs), Shape, Size, ConstantOfShape and Range (new tensors).
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/shape/common.hpp"
#include "kernels/shape/ops.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::shape {
namespace {

// Ops whose output holds the input's bytes unchanged.
template <auto Infer>
Status copy_run(std::string_view op, std::span<const TensorRef> inputs,
                std::span<const TensorRef> outputs, const Attributes& a,
                const std::vector<std::string_view>& names) {
  LOOM_RETURN_IF_ERROR(
      prologue(op, inputs, outputs, names,
               [&](std::span<const TensorType> t) { return Infer(t, a); })
          .status());
  if (inputs[0].byte_size != 0) std::memcpy(outputs[0].data, inputs[0].data, inputs[0].byte_size);
  return Status();
}

}  // namespace

// ---------------------------------------------------------------- Reshape

Result<std::vector<TensorType>> reshape_infer(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "Reshape";
  LOOM_RETURN_IF_ERROR(check_infer(op, in, 2, 2));
  if (in[1].shape.size() != 1) {
    return bad(op, "operand 'shape' must be 1-D, got shape " + shape_to_string(in[1].shape));
  }
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> target, constant_ints(op, 1, "shape", in[1]));
  const bool allow_zero = !a.opset_before(14) && a.get_int("allowzero", 0) != 0;
  const uint64_t count = *element_count(in[0].shape);
  Shape out(target.size());
  int64_t infer_at = -1;
  uint64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allow_zero) {
      if (i >= in[0].shape.size()) {
        return bad(op, "shape " + shape_to_string(target) + " copies dimension " +
                           std::to_string(i) + " (0) but the input " +
                           shape_to_string(in[0].shape) + " has rank " +
                           std::to_string(in[0].shape.size()));
      }
      d = in[0].shape[i];
    } else if (d == -1) {
      if (infer_at >= 0) return bad(op, "shape " + shape_to_string(target) + " has more than one -1");
      infer_at = static_cast<int64_t>(i);
      continue;
    } else if (d < 0) {
      return bad(op, "shape " + shape_to_string(target) + " has a negative dimension " +
                         std::to_string(d));
    }
    out[i] = d;
    if (d != 0 && known > UINT64_MAX / static_cast<uint64_t>(d)) {
      return bad(op, "shape " + shape_to_string(target) + " overflows");
    }
    known *= static_cast<uint64_t>(d);
  }
  if (infer_at >= 0) {
    if (known == 0 || count % known != 0) {
      return bad(op, "cannot infer the -1 in shape " + shape_to_string(target) +
                         " for an input of shape " + shape_to_string(in[0].shape));
    }
    out[infer_at] = static_cast<int64_t>(count / known);
  } else if (known != count) {
    return bad(op, "input of shape " + shape_to_string(in[0].shape) + " (" +
                       std::to_string(count) + " elements) cannot become shape " +
                       shape_to_string(target) + " (" + std::to_string(known) + " elements)");
  }
  return std::vector<TensorType>{{in[0].dtype, std::move(out)}};
}

Status reshape_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                   const Attributes& a) {
  return copy_run<&reshape_infer>("Reshape", in, out, a, {"data", "shape"});
}

// ---------------------------------------------------------------- Flatten

Result<std::vector<TensorType>> flatten_infer(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "Flatten";
  LOOM_RETURN_IF_ERROR(check_infer(op, in, 1, 1));
  const int64_t rank = static_cast<int64_t>(in[0].shape.size());
  int64_t axis = a.get_int("axis", 1);
  const int64_t lowest = a.opset_before(11) ? 0 : -rank;
  if (axis < lowest || axis > rank) {
    return bad(op, "attribute 'axis' " + std::to_string(axis) + " out of range [" +
                       std::to_string(lowest) + ", " + std::to_string(rank) + "] for input " +
                       shape_to_string(in[0].shape));
  }
  if (axis < 0) axis += rank;
  const size_t ax = static_cast<size_t>(axis);
  Shape out = {product(in[0].shape, 0, ax), product(in[0].shape, ax, in[0].shape.size())};
  return std::vector<TensorType>{{in[0].dtype, std::move(out)}};
}

Status flatten_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                   const Attributes& a) {
  return copy_run<&flatten_infer>("Flatten", in, out, a, {"input"});
}

// ---------------------------------------------------------------- Squeeze / Unsqueeze

Result<std::vector<TensorType>> squeeze_infer(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "Squeeze";
  LOOM_RETURN_IF_ERROR(check_infer(op, in, 1, 2));
  bool given = false;
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                        ints_from_attr_or_input(op, in, 1, "axes", a, 13, &given));
  const Shape& s = in[0].shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  std::vector<bool> drop(s.size(), false);
  if (given) {
    LOOM_ASSIGN_OR_RETURN(axes, normalize_axes(op, "axes", std::move(axes), rank));
    for (int64_t ax : axes) {
      if (s[ax] != 1) {
        return bad(op, "axis " + std::to_string(ax) + " of input " + shape_to_string(s) +
                           " is not 1");
      }
      drop[ax] = true;
    }
  } else {
    for (size_t i = 0; i < s.size(); ++i) drop[i] = s[i] == 1;
  }
  Shape out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!drop[i]) out.push_back(s[i]);
  }
  return std::vector<TensorType>{{in[0].dtype, std::move(out)}};
}

Status squeeze_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                   const Attributes& a) {
  return copy_run<&squeeze_infer>("Squeeze", in, out, a, {"data", "axes"});
}

Result<std::vector<TensorType>> unsqueeze_infer(std::span<const TensorType> in,
                                                const Attributes& a) {
  constexpr std::string_view op = "Unsqueeze";
  LOOM_RETURN_IF_ERROR(check_infer(op, in, 1, 2));
  bool given = false;
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                        ints_from_attr_or_input(op, in, 1, "axes", a, 13, &given));
  if (!given) return bad(op, "needs 'axes'");
  const Shape& s = in[0].shape;
  const int64_t out_rank = static_cast<int64_t>(s.size() + axes.size());
  if (a.opset_before(11)) {
    for (int64_t ax : axes) {
      if (ax < 0) return bad(op, "negative axis " + std::to_string(ax) + " before opset 11");
    }
  }
  LOOM_ASSIGN_OR_RETURN(axes, normalize_axes(op, "axes", std::move(axes), out_rank));
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int64_t ax : axes) inserted[ax] = true;
  Shape out(static_cast<size_t>(out_rank));
  size_t next = 0;
  for (size_t i = 0; i < out.size(); ++i) out[i] = inserted[i] ? 1 : s[next++];
  return std::vector<TensorType>{{in[0].dtype, std::move(out)}};
}

Status unsqueeze_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                     const Attributes& a) {
  return copy_run<&unsqueeze_infer>("Unsqueeze", in, out, a, {"data", "axes"});
}

// ---------------------------------------------------------------- Shape / Size

namespace {

// Shape's [start, end) slice of the dimensions (opset 15), clamped.
std::pair<int64_t, int64_t> shape_window(int64_t rank, const Attributes& a) {
  if (a.opset_before(15)) return {0, rank};
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return v < 0 ? 0 : (v > rank ? rank : v);
  };
  const int64_t start = clamp(a.get_int("start", 0));
  const int64_t end = clamp(a.get_int("end", rank));
  return {start, end < start ? start : end};
}

}  // namespace

Result<std::vector<TensorType>> shape_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_infer("Shape", in, 1, 1));
  auto [start, end] = shape_window(static_cast<int64_t>(in[0].shape.size()), a);
  return std::vector<TensorType>{{DType::kI64, Shape{end - start}}};
}

Status shape_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                 const Attributes& a) {
  LOOM_RETURN_IF_ERROR(prologue("Shape", in, out, {"data"},
                                [&](std::span<const TensorType> t) { return shape_infer(t, a); })
                           .status());
  auto [start, end] = shape_window(static_cast<int64_t>(in[0].shape.size()), a);
  if (end > start) {
    std::memcpy(out[0].data, in[0].shape.data() + start,
                static_cast<size_t>(end - start) * sizeof(int64_t));
  }
  return Status();
}

Result<std::vector<TensorType>> size_infer(std::span<const TensorType> in, const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_infer("Size", in, 1, 1));
  return std::vector<TensorType>{{DType::kI64, Shape{}}};
}

Status size_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                const Attributes& a) {
  LOOM_RETURN_IF_ERROR(prologue("Size", in, out, {"data"},
                                [&](std::span<const TensorType> t) { return size_infer(t, a); })
                           .status());
  const int64_t n = static_cast<int64_t>(*element_count(in[0].shape));
  std::memcpy(out[0].data, &n, sizeof n);
  return Status();
}

// ---------------------------------------------------------------- ConstantOfShape

Result<std::vector<TensorType>> constant_of_shape_infer(std::span<const TensorType> in,
                                                        const Attributes& a) {
  constexpr std::string_view op = "ConstantOfShape";
  LOOM_RETURN_IF_ERROR(check_infer(op, in, 1, 1));
  if (in[0].shape.size() != 1) {
    return bad(op, "operand 'input' must be 1-D, got shape " + shape_to_string(in[0].shape));
  }
  LOOM_ASSIGN_OR_RETURN(Shape out, constant_ints(op, 0, "input", in[0]));
  for (int64_t d : out) {
    if (d < 0) return bad(op, "shape " + shape_to_string(out) + " has a negative dimension");
  }
  LOOM_RETURN_IF_ERROR(element_count(out).status().with_context(std::string(op) + ": shape"));
  DType dtype = DType::kF32;
  const TensorRef value = a.get_tensor("value");
  if (value.present()) {
    LOOM_RETURN_IF_ERROR(check_operand(op, "attribute 'value'", value));
    if (value.byte_size != dtype_size(value.dtype)) {
      return bad(op, "attribute 'value' must hold one element, has shape " +
                         shape_to_string(value.shape));
    }
    dtype = value.dtype;
  } else if (a.find("value") != nullptr) {
    return bad(op, "attribute 'value' must be a tensor");
  }
  return std::vector<TensorType>{{dtype, std::move(out)}};
}

Status constant_of_shape_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                             const Attributes& a) {
  LOOM_RETURN_IF_ERROR(prologue("ConstantOfShape", in, out, {"input"},
                                [&](std::span<const TensorType> t) {
                                  return constant_of_shape_infer(t, a);
                                })
                           .status());
  const TensorRef value = a.get_tensor("value");
  const size_t es = dtype_size(out[0].dtype);
  auto* dst = static_cast<std::byte*>(out[0].data);
  if (!value.present()) {
    if (out[0].byte_size != 0) std::memset(dst, 0, out[0].byte_size);  // f32 zero
    return Status();
  }
  for (size_t off = 0; off < out[0].byte_size; off += es) std::memcpy(dst + off, value.data, es);
  return Status();
}

// ---------------------------------------------------------------- Range

namespace {

// Guards against a Range whose operands ask for an absurd allocation.
constexpr double kMaxRangeElements = 1ull << 32;

Result<int64_t> range_count(std::span<const TensorRef> v, DType dtype) {
  constexpr std::string_view op = "Range";
  const char* names[] = {"start", "limit", "delta"};
  double x[3];
  for (size_t i = 0; i < 3; ++i) {
    if (v[i].dtype != dtype) {
      return bad(op, std::string("operand '") + names[i] + "' has dtype " +
                         std::string(dtype_name(v[i].dtype)) + ", 'start' has " +
                         std::string(dtype_name(dtype)));
    }
    auto count = element_count(v[i].shape);
    if (!count.ok() || *count != 1) {
      return bad(op, std::string("operand '") + names[i] + "' must be a scalar, got shape " +
                         shape_to_string(v[i].shape));
    }
    LOOM_ASSIGN_OR_RETURN(x[i], load_scalar(op, names[i], v[i], 0));
  }
  if (x[2] == 0) return bad(op, "'delta' is 0");
  if (is_int_dtype(dtype)) {
    // Exact in 128 bits: i64 operands near the limits do not fit a double.
    __int128 iv[3];
    for (size_t i = 0; i < 3; ++i) {
      if (dtype == DType::kI64) {
        int64_t t;
        std::memcpy(&t, v[i].data, 8);
        iv[i] = t;
      } else {
        iv[i] = static_cast<__int128>(x[i]);  // i16/i32 are exact in a double
      }
    }
    const __int128 span = iv[1] - iv[0], d = iv[2];
    // ceil(span / d) with C++'s truncating division.
    __int128 n = span / d;
    if (n * d != span && ((span > 0) == (d > 0))) ++n;
    if (n > static_cast<__int128>(kMaxRangeElements)) {
      return bad(op, "would produce more than 2^32 elements");
    }
    return n > 0 ? static_cast<int64_t>(n) : 0;
  }
  const double n = std::ceil((x[1] - x[0]) / x[2]);
  if (!(n == n)) return bad(op, "operands are not finite");
  if (n > kMaxRangeElements) return bad(op, "would produce more than 2^32 elements");
  return n > 0 ? static_cast<int64_t>(n) : 0;
}

}  // namespace

Result<std::vector<TensorType>> range_infer(std::span<const TensorType> in, const Attributes&) {
  constexpr std::string_view op = "Range";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 3, 3, 1, 1));
  const DType dt = in[0].dtype;
  if (dt != DType::kF32 && dt != DType::kF64 && dt != DType::kI16 && dt != DType::kI32 &&
      dt != DType::kI64) {
    return unimplemented(std::string(op) + ": dtype " + std::string(dtype_name(dt)) +
                         " is not supported (f32, f64, i16, i32, i64)");
  }
  const char* names[] = {"start", "limit", "delta"};
  TensorRef refs[3];
  for (size_t i = 0; i < 3; ++i) {
    if (in[i].value == nullptr) return needs_constant(op, i, names[i]);
    refs[i] = *in[i].value;
  }
  LOOM_ASSIGN_OR_RETURN(int64_t n, range_count(refs, dt));
  return std::vector<TensorType>{{dt, Shape{n}}};
}

Status range_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                 const Attributes& a) {
  LOOM_RETURN_IF_ERROR(prologue("Range", in, out, {"start", "limit", "delta"},
                                [&](std::span<const TensorType> t) { return range_infer(t, a); })
                           .status());
  return visit_dtype("Range", in[0].dtype, [&]<typename T>() -> Status {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      T start, delta;
      std::memcpy(&start, in[0].data, sizeof(T));
      std::memcpy(&delta, in[2].data, sizeof(T));
      T* y = static_cast<T*>(out[0].data);
      const size_t n = out[0].byte_size / sizeof(T);
      for (size_t i = 0; i < n; ++i) y[i] = static_cast<T>(start + static_cast<T>(i) * delta);
      return Status();
    } else {
      return unimplemented("Range: unsupported dtype");
    }
  });
}

}  // namespace loom::kernels::shape
