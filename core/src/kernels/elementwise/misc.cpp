// Elementwise operators with their own operand rules: Cast, CastLike, Clip,
// Identity, Dropout (inference only) and the linear (de)quantization.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/elementwise/common.hpp"

namespace loom::kernels::elementwise {
namespace {

// ---------------------------------------------------------------- Cast

Result<DType> cast_target(const Attributes& a) {
  if (a.find("to") == nullptr) return invalid_argument("Cast: attribute 'to' is required");
  return dtype_from_onnx_number("Cast", "to", a.get_int("to", 0));
}

Status convert_all(std::string_view op, const TensorRef& in, const TensorRef& out) {
  const size_t n = count_of(in);
  return visit_dtype(op, in.dtype, [&]<typename From>() -> Status {
    return visit_dtype(op, out.dtype, [&]<typename To>() -> Status {
      To* o = static_cast<To*>(out.data);
      if constexpr (std::is_same_v<From, bool>) {
        // Read bools as bytes: anything but 0/1 in a bool object is UB.
        const auto* i = static_cast<const uint8_t*>(in.data);
        for (size_t k = 0; k < n; ++k) o[k] = convert<To>(i[k] != 0);
      } else {
        const From* i = static_cast<const From*>(in.data);
        for (size_t k = 0; k < n; ++k) o[k] = convert<To>(i[k]);
      }
      return Status();
    });
  });
}

Status cast_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                const Attributes& attrs) {
  LOOM_RETURN_IF_ERROR(check_arity("Cast", inputs.size(), 1, 1, outputs.size(), 1));
  LOOM_ASSIGN_OR_RETURN(DType to, cast_target(attrs));
  LOOM_RETURN_IF_ERROR(check_operand("Cast", "input", inputs[0]));
  LOOM_RETURN_IF_ERROR(check_operand("Cast", "output", outputs[0], to));
  LOOM_RETURN_IF_ERROR(check_shape("Cast", "output", outputs[0].shape, inputs[0].shape));
  return convert_all("Cast", inputs[0], outputs[0]);
}

Result<std::vector<TensorType>> cast_infer(std::span<const TensorType> inputs,
                                           const Attributes& attrs) {
  LOOM_RETURN_IF_ERROR(check_arity("Cast", inputs.size(), 1, 1, 1, 1));
  LOOM_ASSIGN_OR_RETURN(DType to, cast_target(attrs));
  if (dtype_size(inputs[0].dtype) == 0) return unsupported_dtype("Cast", "input", inputs[0].dtype);
  LOOM_RETURN_IF_ERROR(check_infer_shape("Cast", "input", inputs[0].shape));
  return std::vector<TensorType>{{to, inputs[0].shape}};
}

// CastLike: the second operand only gives the target dtype.
Status castlike_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                    const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("CastLike", inputs.size(), 2, 2, outputs.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand("CastLike", "input", inputs[0]));
  if (dtype_size(inputs[1].dtype) == 0) {
    return unsupported_dtype("CastLike", "target_type", inputs[1].dtype);
  }
  LOOM_RETURN_IF_ERROR(check_operand("CastLike", "output", outputs[0], inputs[1].dtype));
  LOOM_RETURN_IF_ERROR(check_shape("CastLike", "output", outputs[0].shape, inputs[0].shape));
  return convert_all("CastLike", inputs[0], outputs[0]);
}

Result<std::vector<TensorType>> castlike_infer(std::span<const TensorType> inputs,
                                               const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("CastLike", inputs.size(), 2, 2, 1, 1));
  if (dtype_size(inputs[0].dtype) == 0) {
    return unsupported_dtype("CastLike", "input", inputs[0].dtype);
  }
  if (dtype_size(inputs[1].dtype) == 0) {
    return unsupported_dtype("CastLike", "target_type", inputs[1].dtype);
  }
  LOOM_RETURN_IF_ERROR(check_infer_shape("CastLike", "input", inputs[0].shape));
  return std::vector<TensorType>{{inputs[1].dtype, inputs[0].shape}};
}

// ---------------------------------------------------------------- Identity

Status identity_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                    const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("Identity", inputs.size(), 1, 1, outputs.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand("Identity", "input", inputs[0]));
  LOOM_RETURN_IF_ERROR(check_operand("Identity", "output", outputs[0], inputs[0].dtype));
  LOOM_RETURN_IF_ERROR(check_shape("Identity", "output", outputs[0].shape, inputs[0].shape));
  if (inputs[0].byte_size != 0) {
    std::memmove(outputs[0].data, inputs[0].data, inputs[0].byte_size);
  }
  return Status();
}

Result<std::vector<TensorType>> identity_infer(std::span<const TensorType> inputs,
                                               const Attributes&) {
  LOOM_RETURN_IF_ERROR(check_arity("Identity", inputs.size(), 1, 1, 1, 1));
  if (dtype_size(inputs[0].dtype) == 0) {
    return unsupported_dtype("Identity", "input", inputs[0].dtype);
  }
  LOOM_RETURN_IF_ERROR(check_infer_shape("Identity", "input", inputs[0].shape));
  return std::vector<TensorType>{{inputs[0].dtype, inputs[0].shape}};
}

// ---------------------------------------------------------------- Clip

bool clip_takes(DType d, const Attributes& a) {
  return is_float_dtype(d) || (is_int_dtype(d) && !a.opset_before(12));
}

// A present min/max operand (opset 11+) must be a single element of X's type.
Status check_bound(const TensorRef& t, std::string_view name, DType dtype) {
  if (!t.present()) return Status();
  LOOM_RETURN_IF_ERROR(check_operand("Clip", name, t, dtype));
  if (count_of(t) != 1) {
    return invalid_argument("Clip: operand '" + std::string(name) +
                            "' must be a scalar, got shape " + shape_to_string(t.shape));
  }
  return Status();
}

Status clip_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                const Attributes& attrs) {
  const bool old = attrs.opset_before(11);
  LOOM_RETURN_IF_ERROR(check_arity("Clip", inputs.size(), 1, old ? 1 : 3, outputs.size(), 1));
  const TensorRef& x = inputs[0];
  LOOM_RETURN_IF_ERROR(check_operand("Clip", "input", x));
  if (!clip_takes(x.dtype, attrs)) return unsupported_dtype("Clip", "input", x.dtype);
  LOOM_RETURN_IF_ERROR(check_operand("Clip", "output", outputs[0], x.dtype));
  LOOM_RETURN_IF_ERROR(check_shape("Clip", "output", outputs[0].shape, x.shape));
  const TensorRef none;
  const TensorRef& lo_t = inputs.size() > 1 ? inputs[1] : none;
  const TensorRef& hi_t = inputs.size() > 2 ? inputs[2] : none;
  LOOM_RETURN_IF_ERROR(check_bound(lo_t, "min", x.dtype));
  LOOM_RETURN_IF_ERROR(check_bound(hi_t, "max", x.dtype));
  const size_t n = count_of(x);
  return visit_dtype("Clip", x.dtype, [&]<typename T>() -> Status {
    if constexpr (!std::is_same_v<T, bool>) {
      using C = compute_t<T>;
      C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
      if (old) {
        lo = static_cast<C>(attrs.get_float("min", std::numeric_limits<float>::lowest()));
        hi = static_cast<C>(attrs.get_float("max", std::numeric_limits<float>::max()));
      }
      if (lo_t.present()) lo = load(*static_cast<const T*>(lo_t.data));
      if (hi_t.present()) hi = load(*static_cast<const T*>(hi_t.data));
      const T* in = static_cast<const T*>(x.data);
      T* out = static_cast<T*>(outputs[0].data);
      // min(max(x, lo), hi) as the spec states: lo > hi gives hi; NaN stays.
      for (size_t i = 0; i < n; ++i) {
        C v = load(in[i]);
        if (v < lo) v = lo;
        if (v > hi) v = hi;
        out[i] = store<T>(v);
      }
    }
    return Status();
  });
}

Result<std::vector<TensorType>> clip_infer(std::span<const TensorType> inputs,
                                           const Attributes& attrs) {
  const bool old = attrs.opset_before(11);
  LOOM_RETURN_IF_ERROR(check_arity("Clip", inputs.size(), 1, old ? 1 : 3, 1, 1));
  if (!clip_takes(inputs[0].dtype, attrs)) {
    return unsupported_dtype("Clip", "input", inputs[0].dtype);
  }
  for (size_t k = 1; k < inputs.size(); ++k) {
    if (inputs[k].dtype == DType::kInvalid) continue;
    LOOM_RETURN_IF_ERROR(
        check_dtype("Clip", k == 1 ? "min" : "max", inputs[k].dtype, inputs[0].dtype));
  }
  LOOM_RETURN_IF_ERROR(check_infer_shape("Clip", "input", inputs[0].shape));
  return std::vector<TensorType>{{inputs[0].dtype, inputs[0].shape}};
}

// ---------------------------------------------------------------- Dropout

// Before opset 10 the mask has the data's dtype; from 10 it is bool.
DType mask_dtype(DType data, const Attributes& a) {
  return a.opset_before(10) ? data : DType::kBool;
}

Status dropout_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                   const Attributes& attrs) {
  const bool old = attrs.opset_before(12);
  LOOM_RETURN_IF_ERROR(check_arity("Dropout", inputs.size(), 1, old ? 1 : 3, 1, 1));
  if (outputs.empty() || outputs.size() > 2) {
    return invalid_argument("Dropout: produces 1 or 2 outputs, got " +
                            std::to_string(outputs.size()));
  }
  const TensorRef& x = inputs[0];
  LOOM_RETURN_IF_ERROR(check_operand("Dropout", "data", x));
  if (!is_float_dtype(x.dtype)) return unsupported_dtype("Dropout", "data", x.dtype);
  if (inputs.size() > 2 && inputs[2].present()) {
    LOOM_RETURN_IF_ERROR(check_operand("Dropout", "training_mode", inputs[2], DType::kBool));
    if (count_of(inputs[2]) != 1) {
      return invalid_argument("Dropout: operand 'training_mode' must be a scalar");
    }
    const bool training = *static_cast<const uint8_t*>(inputs[2].data) != 0;
    double ratio = 0.5;
    if (inputs[1].present()) {
      LOOM_RETURN_IF_ERROR(check_operand("Dropout", "ratio", inputs[1]));
      if (count_of(inputs[1]) != 1) {
        return invalid_argument("Dropout: operand 'ratio' must be a scalar");
      }
      LOOM_RETURN_IF_ERROR(visit_dtype("Dropout", inputs[1].dtype, [&]<typename T>() -> Status {
        ratio = static_cast<double>(load(*static_cast<const T*>(inputs[1].data)));
        return Status();
      }));
    }
    // Training with a nonzero ratio drops at random: no reference result.
    if (training && ratio != 0.0) {
      return unimplemented("Dropout: training_mode with a nonzero ratio is random; "
                           "only inference is supported");
    }
  }
  LOOM_RETURN_IF_ERROR(check_operand("Dropout", "output", outputs[0], x.dtype));
  LOOM_RETURN_IF_ERROR(check_shape("Dropout", "output", outputs[0].shape, x.shape));
  if (x.byte_size != 0) std::memmove(outputs[0].data, x.data, x.byte_size);
  if (outputs.size() == 2) {
    const TensorRef& mask = outputs[1];
    LOOM_RETURN_IF_ERROR(check_operand("Dropout", "mask", mask, mask_dtype(x.dtype, attrs)));
    LOOM_RETURN_IF_ERROR(check_shape("Dropout", "mask", mask.shape, x.shape));
    return visit_dtype("Dropout", mask.dtype, [&]<typename T>() -> Status {
      T* m = static_cast<T*>(mask.data);
      const size_t n = count_of(mask);
      for (size_t i = 0; i < n; ++i) m[i] = convert<T>(true);
      return Status();
    });
  }
  return Status();
}

// Gives both outputs; a node without the mask uses the first.
Result<std::vector<TensorType>> dropout_infer(std::span<const TensorType> inputs,
                                              const Attributes& attrs) {
  LOOM_RETURN_IF_ERROR(
      check_arity("Dropout", inputs.size(), 1, attrs.opset_before(12) ? 1 : 3, 1, 1));
  if (!is_float_dtype(inputs[0].dtype)) {
    return unsupported_dtype("Dropout", "data", inputs[0].dtype);
  }
  if (inputs.size() > 2 && inputs[2].dtype != DType::kInvalid) {
    LOOM_RETURN_IF_ERROR(check_dtype("Dropout", "training_mode", inputs[2].dtype, DType::kBool));
  }
  LOOM_RETURN_IF_ERROR(check_infer_shape("Dropout", "data", inputs[0].shape));
  return std::vector<TensorType>{{inputs[0].dtype, inputs[0].shape},
                                 {mask_dtype(inputs[0].dtype, attrs), inputs[0].shape}};
}

// ---------------------------------------------------------------- (De)QuantizeLinear

// Where each element's scale and zero point come from: one for the tensor,
// or one per index along `axis` (opset 13).
struct QuantLayout {
  int64_t channels = 1;  // 1: per-tensor
  int64_t inner = 1;     // elements per step along the axis
};

Result<QuantLayout> quant_layout(std::string_view op, std::span<const int64_t> x,
                                 std::span<const int64_t> scale, const Attributes& attrs) {
  QuantLayout q;
  auto count = element_count(scale);
  if (!count.ok()) return count.status().with_context(std::string(op) + ": scale");
  if (scale.size() == 0 || (scale.size() == 1 && *count == 1)) return q;
  if (scale.size() != 1 || attrs.opset_before(13)) {
    return invalid_argument(std::string(op) + ": scale must be a scalar" +
                            (attrs.opset_before(13) ? "" : " or 1-D") + ", got shape " +
                            shape_to_string(scale));
  }
  LOOM_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(op, attrs.get_int("axis", 1),
                                                     static_cast<int64_t>(x.size())));
  if (x[axis] != scale[0]) {
    return invalid_argument(std::string(op) + ": scale has " + std::to_string(scale[0]) +
                            " elements, but axis " + std::to_string(axis) + " of input " +
                            shape_to_string(x) + " has " + std::to_string(x[axis]));
  }
  q.channels = scale[0];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) q.inner *= x[d];
  return q;
}

// A zero point has its scale's shape, or both have one element. At run
// time (check_zero_point) and at compile time (check_zero_point_shape, on
// the shapes the graph declares; a dimension left open waits for the run).
Status zero_point_shape_rule(std::string_view op, std::span<const int64_t> zp, std::span<const int64_t> scale) {
  auto elements = [](std::span<const int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  };
  if (!std::equal(zp.begin(), zp.end(), scale.begin(), scale.end()) &&
      !(elements(zp) == 1 && elements(scale) == 1)) {
    return invalid_argument(std::string(op) + ": zero_point " + shape_to_string(zp) +
                            " must have the shape of scale " + shape_to_string(scale));
  }
  return Status();
}

Status check_zero_point(std::string_view op, const TensorRef& zp, const TensorRef& scale,
                        DType want) {
  LOOM_RETURN_IF_ERROR(check_operand(op, "zero_point", zp, want));
  return zero_point_shape_rule(op, zp.shape, scale.shape);
}

Status check_zero_point_shape(std::string_view op, const TensorType& zp, const TensorType& scale) {
  if (zp.dtype == DType::kInvalid) return Status();  // left out
  auto known = [](const Shape& shape) {
    return std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d >= 0; });
  };
  if (!known(zp.shape) || !known(scale.shape)) return Status();
  return zero_point_shape_rule(op, zp.shape, scale.shape);
}

Status quantize_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                    const Attributes& attrs) {
  constexpr std::string_view op = "QuantizeLinear";
  LOOM_RETURN_IF_ERROR(check_arity(op, inputs.size(), 2, 3, outputs.size(), 1));
  const TensorRef &x = inputs[0], &scale = inputs[1], &y = outputs[0];
  const bool has_zp = inputs.size() > 2 && inputs[2].present();
  LOOM_RETURN_IF_ERROR(check_operand(op, "x", x, DType::kF32));
  LOOM_RETURN_IF_ERROR(check_operand(op, "y_scale", scale, DType::kF32));
  const DType out = has_zp ? inputs[2].dtype : DType::kU8;
  if (out != DType::kU8 && out != DType::kI8) return unsupported_dtype(op, "y_zero_point", out);
  if (has_zp) LOOM_RETURN_IF_ERROR(check_zero_point(op, inputs[2], scale, out));
  LOOM_RETURN_IF_ERROR(check_operand(op, "y", y, out));
  LOOM_RETURN_IF_ERROR(check_shape(op, "y", y.shape, x.shape));
  LOOM_ASSIGN_OR_RETURN(QuantLayout q, quant_layout(op, x.shape, scale.shape, attrs));
  LOOM_RETURN_IF_ERROR(check_scale_values(op, "y_scale", scale));
  const float* xs = static_cast<const float*>(x.data);
  const float* ss = static_cast<const float*>(scale.data);
  const size_t n = count_of(x);
  auto quantize = [&]<typename Q>() {
    const Q* zp = has_zp ? static_cast<const Q*>(inputs[2].data) : nullptr;
    Q* ys = static_cast<Q*>(y.data);
    for (size_t i = 0; i < n; ++i) {
      const size_t c = q.channels == 1 ? 0 : (i / q.inner) % q.channels;
      // Round half to even (the default rounding mode), then saturate.
      float v = std::nearbyint(xs[i] / ss[c]) + (zp ? static_cast<float>(zp[c]) : 0.0f);
      ys[i] = convert<Q>(std::clamp(v, static_cast<float>(std::numeric_limits<Q>::min()),
                                    static_cast<float>(std::numeric_limits<Q>::max())));
    }
  };
  if (out == DType::kU8) {
    quantize.template operator()<uint8_t>();
  } else {
    quantize.template operator()<int8_t>();
  }
  return Status();
}

Result<std::vector<TensorType>> quantize_infer(std::span<const TensorType> inputs,
                                               const Attributes& attrs) {
  constexpr std::string_view op = "QuantizeLinear";
  LOOM_RETURN_IF_ERROR(check_arity(op, inputs.size(), 2, 3, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "x", inputs[0].dtype, DType::kF32));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "y_scale", inputs[1].dtype, DType::kF32));
  DType out = DType::kU8;
  if (inputs.size() > 2 && inputs[2].dtype != DType::kInvalid) out = inputs[2].dtype;
  if (out != DType::kU8 && out != DType::kI8) return unsupported_dtype(op, "y_zero_point", out);
  LOOM_RETURN_IF_ERROR(check_infer_shape(op, "x", inputs[0].shape));
  LOOM_RETURN_IF_ERROR(quant_layout(op, inputs[0].shape, inputs[1].shape, attrs).status());
  if (inputs.size() > 2) LOOM_RETURN_IF_ERROR(check_zero_point_shape(op, inputs[2], inputs[1]));
  if (inputs[1].value != nullptr) {
    LOOM_RETURN_IF_ERROR(check_scale_values(op, "y_scale", *inputs[1].value));
  }
  return std::vector<TensorType>{{out, inputs[0].shape}};
}

// ONNX defines DequantizeLinear of i32 (a bias) with zero point 0 only.
Status check_i32_zero_point(const TensorRef& zp) {
  if (zp.dtype != DType::kI32 || zp.data == nullptr) return Status();
  for (size_t i = 0; i < zp.byte_size / sizeof(int32_t); ++i) {
    int32_t v;
    std::memcpy(&v, static_cast<const std::byte*>(zp.data) + i * sizeof v, sizeof v);
    if (v != 0) {
      return invalid_argument("DequantizeLinear: x_zero_point is " + std::to_string(v) +
                              "; an i32 x takes zero point 0 only");
    }
  }
  return Status();
}

bool dequant_takes(DType d) { return d == DType::kU8 || d == DType::kI8 || d == DType::kI32; }

Status dequantize_run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                      const Attributes& attrs) {
  constexpr std::string_view op = "DequantizeLinear";
  LOOM_RETURN_IF_ERROR(check_arity(op, inputs.size(), 2, 3, outputs.size(), 1));
  const TensorRef &x = inputs[0], &scale = inputs[1], &y = outputs[0];
  const bool has_zp = inputs.size() > 2 && inputs[2].present();
  LOOM_RETURN_IF_ERROR(check_operand(op, "x", x));
  if (!dequant_takes(x.dtype)) return unsupported_dtype(op, "x", x.dtype);
  LOOM_RETURN_IF_ERROR(check_operand(op, "x_scale", scale, DType::kF32));
  if (has_zp) LOOM_RETURN_IF_ERROR(check_zero_point(op, inputs[2], scale, x.dtype));
  if (has_zp && x.dtype == DType::kI32) LOOM_RETURN_IF_ERROR(check_i32_zero_point(inputs[2]));
  LOOM_RETURN_IF_ERROR(check_operand(op, "y", y, DType::kF32));
  LOOM_RETURN_IF_ERROR(check_shape(op, "y", y.shape, x.shape));
  LOOM_ASSIGN_OR_RETURN(QuantLayout q, quant_layout(op, x.shape, scale.shape, attrs));
  const float* ss = static_cast<const float*>(scale.data);
  float* ys = static_cast<float*>(y.data);
  const size_t n = count_of(x);
  return visit_dtype(op, x.dtype, [&]<typename Q>() -> Status {
    if constexpr (is_integer<Q>) {
      const Q* xs = static_cast<const Q*>(x.data);
      const Q* zp = has_zp ? static_cast<const Q*>(inputs[2].data) : nullptr;
      for (size_t i = 0; i < n; ++i) {
        const size_t c = q.channels == 1 ? 0 : (i / q.inner) % q.channels;
        const int64_t diff = static_cast<int64_t>(xs[i]) - (zp ? static_cast<int64_t>(zp[c]) : 0);
        ys[i] = static_cast<float>(diff) * ss[c];
      }
    }
    return Status();
  });
}

Result<std::vector<TensorType>> dequantize_infer(std::span<const TensorType> inputs,
                                                 const Attributes& attrs) {
  constexpr std::string_view op = "DequantizeLinear";
  LOOM_RETURN_IF_ERROR(check_arity(op, inputs.size(), 2, 3, 1, 1));
  if (!dequant_takes(inputs[0].dtype)) return unsupported_dtype(op, "x", inputs[0].dtype);
  LOOM_RETURN_IF_ERROR(check_dtype(op, "x_scale", inputs[1].dtype, DType::kF32));
  if (inputs.size() > 2 && inputs[2].dtype != DType::kInvalid) {
    LOOM_RETURN_IF_ERROR(check_dtype(op, "x_zero_point", inputs[2].dtype, inputs[0].dtype));
  }
  LOOM_RETURN_IF_ERROR(check_infer_shape(op, "x", inputs[0].shape));
  LOOM_RETURN_IF_ERROR(quant_layout(op, inputs[0].shape, inputs[1].shape, attrs).status());
  if (inputs.size() > 2) LOOM_RETURN_IF_ERROR(check_zero_point_shape(op, inputs[2], inputs[1]));
  if (inputs[1].value != nullptr) {
    LOOM_RETURN_IF_ERROR(check_scale_values(op, "x_scale", *inputs[1].value));
  }
  if (inputs[0].dtype == DType::kI32 && inputs.size() > 2 && inputs[2].value != nullptr) {
    LOOM_RETURN_IF_ERROR(check_i32_zero_point(*inputs[2].value));
  }
  return std::vector<TensorType>{{DType::kF32, inputs[0].shape}};
}

// DynamicQuantizeLinear: u8 quantization with the scale and zero point
// chosen from the data's range (which always includes 0).
Status dynamic_quantize_run(std::span<const TensorRef> inputs,
                            std::span<const TensorRef> outputs, const Attributes&) {
  constexpr std::string_view op = "DynamicQuantizeLinear";
  LOOM_RETURN_IF_ERROR(check_arity(op, inputs.size(), 1, 1, outputs.size(), 3));
  const TensorRef& x = inputs[0];
  LOOM_RETURN_IF_ERROR(check_operand(op, "x", x, DType::kF32));
  LOOM_RETURN_IF_ERROR(check_operand(op, "y", outputs[0], DType::kU8));
  LOOM_RETURN_IF_ERROR(check_shape(op, "y", outputs[0].shape, x.shape));
  LOOM_RETURN_IF_ERROR(check_operand(op, "y_scale", outputs[1], DType::kF32));
  LOOM_RETURN_IF_ERROR(check_shape(op, "y_scale", outputs[1].shape, {}));
  LOOM_RETURN_IF_ERROR(check_operand(op, "y_zero_point", outputs[2], DType::kU8));
  LOOM_RETURN_IF_ERROR(check_shape(op, "y_zero_point", outputs[2].shape, {}));
  const float* xs = static_cast<const float*>(x.data);
  const size_t n = count_of(x);
  float lo = 0.0f, hi = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    lo = std::min(lo, xs[i]);
    hi = std::max(hi, xs[i]);
  }
  const float scale = (hi - lo) / 255.0f;
  // All zeros (or no elements): any scale works; 0 with zero point 0 keeps y = 0.
  const float zp =
      scale == 0.0f ? 0.0f : std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
  uint8_t* ys = static_cast<uint8_t*>(outputs[0].data);
  for (size_t i = 0; i < n; ++i) {
    const float v = scale == 0.0f ? 0.0f : std::nearbyint(xs[i] / scale) + zp;
    ys[i] = convert<uint8_t>(std::clamp(v, 0.0f, 255.0f));
  }
  *static_cast<float*>(outputs[1].data) = scale;
  *static_cast<uint8_t*>(outputs[2].data) = static_cast<uint8_t>(zp);
  return Status();
}

Result<std::vector<TensorType>> dynamic_quantize_infer(std::span<const TensorType> inputs,
                                                       const Attributes&) {
  constexpr std::string_view op = "DynamicQuantizeLinear";
  LOOM_RETURN_IF_ERROR(check_arity(op, inputs.size(), 1, 1, 3, 3));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "x", inputs[0].dtype, DType::kF32));
  LOOM_RETURN_IF_ERROR(check_infer_shape(op, "x", inputs[0].shape));
  return std::vector<TensorType>{
      {DType::kU8, inputs[0].shape}, {DType::kF32, {}}, {DType::kU8, {}}};
}

}  // namespace

void register_misc(KernelRegistry& r) {
  r.add({"Cast", &cast_run, &cast_infer});
  r.add({"CastLike", &castlike_run, &castlike_infer});
  r.add({"Identity", &identity_run, &identity_infer});
  r.add({"Clip", &clip_run, &clip_infer});
  r.add({"Dropout", &dropout_run, &dropout_infer});
  r.add({"QuantizeLinear", &quantize_run, &quantize_infer});
  r.add({"DequantizeLinear", &dequantize_run, &dequantize_infer});
  r.add({"DynamicQuantizeLinear", &dynamic_quantize_run, &dynamic_quantize_infer});
}

}  // namespace loom::kernels::elementwise
