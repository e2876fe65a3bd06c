#include "kernels/shape/common.hpp"

#include <cstring>
#include <limits>
#include <type_traits>
#include <set>

#include "kernels/checks.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::shape {

Status bad(std::string_view op, const std::string& msg) {
  return invalid_argument(std::string(op) + ": " + msg);
}

Status check_infer(std::string_view op, std::span<const TensorType> in, size_t min, size_t max) {
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), min, max, 1, 1));
  if (in[0].dtype == DType::kInvalid) return bad(op, "operand 0 must be given");
  LOOM_RETURN_IF_ERROR(element_count(in[0].shape).status().with_context(std::string(op) +
                                                                       ": input"));
  return Status();
}


Status check_operand(std::string_view op, std::string_view name, const TensorRef& t) {
  auto count = element_count(t.shape);
  if (!count.ok()) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + ": " +
                            count.status().message());
  }
  const size_t es = dtype_size(t.dtype);
  if (es == 0) {
    return unimplemented(std::string(op) + ": " + std::string(name) +
                         " has an unsupported dtype " + std::string(dtype_name(t.dtype)));
  }
  if (*count > SIZE_MAX / es || *count * es != t.byte_size) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + " of shape " +
                            shape_to_string(t.shape) + " and dtype " +
                            std::string(dtype_name(t.dtype)) + " needs " +
                            std::to_string(*count * es) + " bytes, has " +
                            std::to_string(t.byte_size));
  }
  if (t.data == nullptr && t.byte_size != 0) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + " has no data");
  }
  return Status();
}

std::vector<TensorType> types_of(std::span<const TensorRef> inputs) {
  std::vector<TensorType> types(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].present()) continue;
    types[i].dtype = inputs[i].dtype;
    types[i].shape.assign(inputs[i].shape.begin(), inputs[i].shape.end());
    types[i].value = &inputs[i];
  }
  return types;
}

Status check_results(std::string_view op, std::span<const TensorRef> outputs,
                     const std::vector<TensorType>& want) {
  if (outputs.size() != want.size()) {
    return invalid_argument(std::string(op) + ": produces " + std::to_string(want.size()) +
                            " outputs, got " + std::to_string(outputs.size()));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string name = "output " + std::to_string(i);
    if (outputs[i].dtype != want[i].dtype) {
      return invalid_argument(std::string(op) + ": " + name + " has dtype " +
                              std::string(dtype_name(outputs[i].dtype)) + ", expected " +
                              std::string(dtype_name(want[i].dtype)));
    }
    LOOM_RETURN_IF_ERROR(check_output_shape(op, name, outputs[i].shape, want[i].shape));
    LOOM_RETURN_IF_ERROR(check_operand(op, name, outputs[i]));
  }
  return Status();
}

Shape strides_of(std::span<const int64_t> shape) {
  Shape s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

void strided_copy(size_t elem, std::span<const int64_t> out_shape,
                  std::span<const int64_t> strides, int64_t base, const std::byte* in,
                  std::byte* out) {
  const size_t rank = out_shape.size();
  for (int64_t d : out_shape) {
    if (d == 0) return;
  }
  if (rank == 0) {
    std::memcpy(out, in + base * static_cast<int64_t>(elem), elem);
    return;
  }
  // The innermost dimension is copied in one block when it is contiguous.
  const int64_t inner = out_shape[rank - 1];
  const int64_t inner_stride = strides[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  int64_t offset = base;
  const int64_t e = static_cast<int64_t>(elem);
  while (true) {
    if (inner_stride == 1) {
      std::memcpy(out, in + offset * e, static_cast<size_t>(inner) * elem);
      out += inner * e;
    } else {
      int64_t o = offset;
      for (int64_t j = 0; j < inner; ++j, o += inner_stride) {
        std::memcpy(out, in + o * e, elem);
        out += e;
      }
    }
    // Advance the outer dimensions like an odometer.
    size_t d = rank - 1;
    while (true) {
      if (d == 0) return;
      --d;
      ++idx[d];
      offset += strides[d];
      if (idx[d] < out_shape[d]) break;
      offset -= strides[d] * out_shape[d];
      idx[d] = 0;
    }
  }
}

namespace {

template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Half>) {
    return to_half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return to_bfloat16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    // Out-of-range floats to integers are undefined in C++; saturate.
    if (!(v == v)) return T{};
    if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

template <typename T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return to_float(v);
  } else {
    return static_cast<double>(v);
  }
}

}  // namespace

Status store_scalar(std::string_view op, DType dtype, double v, std::byte* dst) {
  return visit_dtype(op, dtype, [&]<typename T>() {
    const T x = from_double<T>(v);
    std::memcpy(dst, &x, sizeof(T));
    return Status();
  });
}

Result<double> load_scalar(std::string_view op, std::string_view name, const TensorRef& t,
                           size_t i) {
  const size_t es = dtype_size(t.dtype);
  if (es == 0 || t.data == nullptr || (i + 1) * es > t.byte_size) {
    return invalid_argument(std::string(op) + ": operand '" + std::string(name) +
                            "' has no element " + std::to_string(i));
  }
  double out = 0;
  LOOM_RETURN_IF_ERROR(visit_dtype(op, t.dtype, [&]<typename T>() {
    T x;
    std::memcpy(&x, static_cast<const std::byte*>(t.data) + i * sizeof(T), sizeof(T));
    out = to_double(x);
    return Status();
  }));
  return out;
}

Result<std::vector<double>> read_floats(std::string_view op, std::string_view name,
                                        const TensorRef& t) {
  if (!is_float_dtype(t.dtype)) {
    return invalid_argument(std::string(op) + ": operand '" + std::string(name) +
                            "' must be a float tensor, got " + std::string(dtype_name(t.dtype)));
  }
  LOOM_RETURN_IF_ERROR(check_operand(op, name, t));
  const size_t n = t.byte_size / dtype_size(t.dtype);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    LOOM_ASSIGN_OR_RETURN(out[i], load_scalar(op, name, t, i));
  }
  return out;
}

Result<std::vector<int64_t>> ints_from_attr_or_input(std::string_view op,
                                                     std::span<const TensorType> in,
                                                     size_t index, std::string_view name,
                                                     const Attributes& attrs,
                                                     int32_t input_opset, bool* present) {
  const TensorType* t = optional_type(in, index);
  if (!attrs.opset_before(input_opset) && t != nullptr) {
    *present = true;
    // A 0-D one (one value) is taken too, as ONNX Runtime does (ONNX's
    // test_loop13_seq unsqueezes with scalar axes).
    if (t->shape.size() > 1) {
      return invalid_argument(std::string(op) + ": operand '" + std::string(name) +
                              "' must be 1-D, got shape " + shape_to_string(t->shape));
    }
    return constant_ints(op, index, name, *t);
  }
  if (attrs.opset_before(input_opset) && t != nullptr) {
    return invalid_argument(std::string(op) + ": takes '" + std::string(name) +
                            "' as an attribute before opset " + std::to_string(input_opset) +
                            ", not as operand " + std::to_string(index));
  }
  const AttributeDef* a = attrs.find(name);
  *present = a != nullptr && a->kind == AttributeKind::kInts;
  return attrs.get_ints(name);
}

Result<std::vector<int64_t>> normalize_axes(std::string_view op, std::string_view what,
                                            std::vector<int64_t> axes, int64_t rank) {
  std::set<int64_t> seen;
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) {
      return invalid_argument(std::string(op) + ": " + std::string(what) + " has axis " +
                              std::to_string(a) + ", out of range for rank " +
                              std::to_string(rank));
    }
    if (a < 0) a += rank;
    if (!seen.insert(a).second) {
      return invalid_argument(std::string(op) + ": " + std::string(what) + " repeats axis " +
                              std::to_string(a));
    }
  }
  return axes;
}

}  // namespace loom::kernels::shape
