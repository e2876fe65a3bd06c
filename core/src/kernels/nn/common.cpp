// Shared helpers of the nn family (see nn/nn.hpp).
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/nn/nn.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::nn {

Status check_dtype(std::string_view op, std::string_view name, DType dtype,
                   std::initializer_list<DType> allowed) {
  std::string list;
  for (DType d : allowed) {
    if (d == dtype) return Status();
    if (!list.empty()) list += ", ";
    list += dtype_name(d);
  }
  return unimplemented(std::string(op) + ": " + std::string(name) + " has dtype " +
                       std::string(dtype_name(dtype)) + ", supported: " + list);
}

Result<int64_t> checked_count(std::string_view op, std::string_view name,
                              std::span<const int64_t> shape) {
  auto count = element_count(shape);
  if (!count.ok() || *count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / 16)) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + " has a bad shape " +
                            shape_to_string(shape));
  }
  return static_cast<int64_t>(*count);
}

Status check_data(std::string_view op, std::string_view name, const TensorRef& t) {
  if (!t.present()) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + " is missing");
  }
  auto count = checked_count(op, name, t.shape);
  LOOM_RETURN_IF_ERROR(count.status());
  const uint64_t need = static_cast<uint64_t>(*count) * dtype_size(t.dtype);
  if (dtype_size(t.dtype) == 0 || need != t.byte_size) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + " of shape " +
                            shape_to_string(t.shape) + " needs " +
                            std::to_string(need) + " bytes, has " +
                            std::to_string(t.byte_size));
  }
  if (t.data == nullptr && t.byte_size != 0) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + " has no data");
  }
  return Status();
}

Status check_operand(std::string_view op, std::string_view name, const TensorRef& t,
                     std::initializer_list<DType> allowed) {
  if (t.present()) LOOM_RETURN_IF_ERROR(check_dtype(op, name, t.dtype, allowed));
  return check_data(op, name, t);
}

double PerChannel::at(int64_t i) const {
  if (count == 0) return 0.0;
  const int64_t k = count == 1 ? 0 : i;
  const auto* p = static_cast<const std::byte*>(data);
  switch (dtype) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, p + k * 4, 4);
      return v;
    }
    case DType::kU8: return static_cast<double>(std::to_integer<uint8_t>(p[k]));
    case DType::kI8: return static_cast<double>(static_cast<int8_t>(std::to_integer<uint8_t>(p[k])));
    case DType::kI32: {
      int32_t v;
      std::memcpy(&v, p + k * 4, 4);
      return v;
    }
    default: return 0.0;
  }
}

Status per_channel(std::string_view op, std::string_view name, const TensorRef& t,
                   int64_t channels, bool optional, PerChannel* out) {
  *out = PerChannel{};
  if (!t.present()) {
    if (optional) return Status();
    return invalid_argument(std::string(op) + ": " + std::string(name) + " is missing");
  }
  // Scales are f32; zero points have the quantized operand's type.
  const bool scale = name.ends_with("scale");
  if (scale) {
    LOOM_RETURN_IF_ERROR(check_operand(op, name, t, {DType::kF32}));
  } else {
    LOOM_RETURN_IF_ERROR(check_operand(op, name, t, {DType::kU8, DType::kI8}));
  }
  auto count = checked_count(op, name, t.shape);
  LOOM_RETURN_IF_ERROR(count.status());
  if (t.shape.size() > 1 || (*count != 1 && *count != channels)) {
    return invalid_argument(std::string(op) + ": " + std::string(name) +
                            " must be a scalar or have " + std::to_string(channels) +
                            " elements, got shape " + shape_to_string(t.shape));
  }
  if (scale) LOOM_RETURN_IF_ERROR(check_scale_values(op, name, t));
  *out = PerChannel{t.data, t.dtype, *count};
  return Status();
}

int32_t requantize(double value, bool is_unsigned) {
  // nearbyint rounds half to even in the default rounding mode.
  double r = std::nearbyint(value);
  const double lo = is_unsigned ? 0.0 : -128.0;
  const double hi = is_unsigned ? 255.0 : 127.0;
  if (!(r >= lo)) r = lo;  // also maps NaN to the low end
  if (r > hi) r = hi;
  return static_cast<int32_t>(r);
}

Status check_spatial_input(std::string_view op, std::string_view name,
                           std::span<const int64_t> shape) {
  if (shape.size() < 3 || shape.size() > 2 + kMaxSpatial) {
    return unimplemented(std::string(op) + ": input '" + std::string(name) +
                         "' must have rank 3-5 (N, C, 1-3 spatial dims), got " +
                         shape_to_string(shape));
  }
  for (int64_t d : shape) {
    if (d < 0) {
      return invalid_argument(std::string(op) + ": input '" + std::string(name) +
                              "' has a negative dimension: " + shape_to_string(shape));
    }
  }
  return Status();
}

Status spatial_ints(std::string_view op, const Attributes& a, std::string_view name,
                    size_t rank, size_t per_dim, int64_t lo, int64_t fallback,
                    std::array<int64_t, 2 * kMaxSpatial>* out) {
  out->fill(fallback);
  if (a.find(name) == nullptr) return Status();
  std::vector<int64_t> v = a.get_ints(name);
  if (v.size() != rank * per_dim) {
    return invalid_argument(std::string(op) + ": attribute '" + std::string(name) + "' has " +
                            std::to_string(v.size()) + " values, expected " +
                            std::to_string(rank * per_dim) + " for " + std::to_string(rank) +
                            " spatial dims");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < lo || v[i] > (int64_t{1} << 31)) {
      return invalid_argument(std::string(op) + ": attribute '" + std::string(name) +
                              "' value " + std::to_string(v[i]) + " out of range (min " +
                              std::to_string(lo) + ")");
    }
    (*out)[i] = v[i];
  }
  return Status();
}

Status forward_window(std::string_view op, std::span<const int64_t> in_spatial,
                      std::span<const int64_t> kernel, const Attributes& a, bool allow_ceil,
                      Window* w) {
  const size_t rank = in_spatial.size();
  *w = Window{};
  if (rank == 0 || rank > kMaxSpatial || kernel.size() != rank) {
    return invalid_argument(std::string(op) + ": kernel has " + std::to_string(kernel.size()) +
                            " spatial dims, input has " + std::to_string(rank));
  }
  w->rank = rank;
  std::array<int64_t, 2 * kMaxSpatial> strides, dilations, pads;
  LOOM_RETURN_IF_ERROR(spatial_ints(op, a, "strides", rank, 1, 1, 1, &strides));
  LOOM_RETURN_IF_ERROR(spatial_ints(op, a, "dilations", rank, 1, 1, 1, &dilations));
  LOOM_RETURN_IF_ERROR(spatial_ints(op, a, "pads", rank, 2, 0, 0, &pads));
  const std::string_view auto_pad = a.get_string("auto_pad", "NOTSET");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!same && auto_pad != "NOTSET" && auto_pad != "VALID") {
    return invalid_argument(std::string(op) + ": attribute 'auto_pad' is '" +
                            std::string(auto_pad) +
                            "', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  }
  const int64_t ceil_mode = allow_ceil ? a.get_int("ceil_mode", 0) : 0;
  if (ceil_mode != 0 && ceil_mode != 1) {
    return invalid_argument(std::string(op) + ": attribute 'ceil_mode' must be 0 or 1, got " +
                            std::to_string(ceil_mode));
  }
  for (size_t i = 0; i < rank; ++i) {
    if (kernel[i] < 1 || kernel[i] > (int64_t{1} << 31)) {
      return invalid_argument(std::string(op) + ": kernel extent " + std::to_string(kernel[i]) +
                              " in spatial dim " + std::to_string(i) + " must be >= 1");
    }
    w->in[i] = in_spatial[i];
    w->kernel[i] = kernel[i];
    w->stride[i] = strides[i];
    w->dilation[i] = dilations[i];
    const int64_t eff = (kernel[i] - 1) * dilations[i] + 1;
    if (same) {
      w->out[i] = (in_spatial[i] + strides[i] - 1) / strides[i];
      int64_t total = (w->out[i] - 1) * strides[i] + eff - in_spatial[i];
      if (total < 0) total = 0;
      // The odd pixel goes at the end for SAME_UPPER, at the start for LOWER.
      w->pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w->pad_end[i] = total - w->pad_begin[i];
      continue;
    }
    if (auto_pad == "NOTSET") {
      w->pad_begin[i] = pads[i];
      w->pad_end[i] = pads[i + rank];
    }
    const int64_t span = in_spatial[i] + w->pad_begin[i] + w->pad_end[i] - eff;
    if (span < 0) {
      return invalid_argument(std::string(op) + ": kernel extent " + std::to_string(eff) +
                              " exceeds the padded input (" +
                              std::to_string(in_spatial[i] + w->pad_begin[i] + w->pad_end[i]) +
                              ") in spatial dim " + std::to_string(i));
    }
    int64_t out = (ceil_mode ? span + strides[i] - 1 : span) / strides[i] + 1;
    // A last window that would start inside the end padding is dropped.
    if (ceil_mode && (out - 1) * strides[i] >= in_spatial[i] + w->pad_begin[i]) --out;
    w->out[i] = out;
  }
  return Status();
}

}  // namespace loom::kernels::nn
