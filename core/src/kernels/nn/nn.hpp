// The nn family of reference kernels: convolutions, matrix products, the
// normalizations, the pools and their quantized/integer forms. Declarations
// of the run/infer pairs (nn/registry.cpp lists them) and the helpers the
// family's files share: operand checks for any dtype, per-tensor/per-channel
// quantization parameters, and the window geometry that convolutions and
// pools have in common (strides, dilations, pads, auto_pad, ceil_mode).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

#include "kernels/kernel.hpp"

namespace loom::kernels::nn {

#define LOOM_NN_DECLARE_OP(name)                                                 \
  Status name##_run(std::span<const TensorRef> inputs,                           \
                    std::span<const TensorRef> outputs, const Attributes& attributes); \
  Result<std::vector<TensorType>> name##_infer(std::span<const TensorType> inputs, \
                                               const Attributes& attributes)

LOOM_NN_DECLARE_OP(conv);
LOOM_NN_DECLARE_OP(conv_transpose);
LOOM_NN_DECLARE_OP(conv_integer);
LOOM_NN_DECLARE_OP(qlinear_conv);
LOOM_NN_DECLARE_OP(matmul_integer);
LOOM_NN_DECLARE_OP(qlinear_matmul);
LOOM_NN_DECLARE_OP(batch_norm);
LOOM_NN_DECLARE_OP(instance_norm);
LOOM_NN_DECLARE_OP(layer_norm);
LOOM_NN_DECLARE_OP(group_norm);
LOOM_NN_DECLARE_OP(col2im);
LOOM_NN_DECLARE_OP(lp_norm);
LOOM_NN_DECLARE_OP(mean_variance_norm);
LOOM_NN_DECLARE_OP(max_pool);
LOOM_NN_DECLARE_OP(average_pool);
LOOM_NN_DECLARE_OP(lp_pool);
LOOM_NN_DECLARE_OP(global_average_pool);
LOOM_NN_DECLARE_OP(global_max_pool);
LOOM_NN_DECLARE_OP(global_lp_pool);
LOOM_NN_DECLARE_OP(lrn);
LOOM_NN_DECLARE_OP(grid_sample);
LOOM_NN_DECLARE_OP(det);
LOOM_NN_DECLARE_OP(rnn);
LOOM_NN_DECLARE_OP(gru);
LOOM_NN_DECLARE_OP(lstm);
LOOM_NN_DECLARE_OP(roi_align);
LOOM_NN_DECLARE_OP(max_unpool);

#undef LOOM_NN_DECLARE_OP

// ------------------------------------------------------------ operand checks

// kUnimplemented "<op>: <name> has dtype <d>, supported: <list>" unless
// `dtype` is one of `allowed`.
Status check_dtype(std::string_view op, std::string_view name, DType dtype,
                   std::initializer_list<DType> allowed);
// A present operand whose byte_size matches its shape and dtype and whose
// data is set (any dtype but kInvalid).
Status check_data(std::string_view op, std::string_view name, const TensorRef& t);
// Calls fn.template operator()<T>() with T the C type of an 8-bit integer
// dtype (u8 or i8); any other dtype is check_dtype's error for `name`.
template <typename Fn>
Status visit_int8(std::string_view op, std::string_view name, DType d, Fn&& fn) {
  if (d == DType::kU8) return fn.template operator()<uint8_t>();
  if (d == DType::kI8) return fn.template operator()<int8_t>();
  return check_dtype(op, name, d, {DType::kU8, DType::kI8});
}
// Both of the above.
Status check_operand(std::string_view op, std::string_view name, const TensorRef& t,
                     std::initializer_list<DType> allowed);
// The number of elements of a shape already validated by check_data (or an
// infer-time shape: then an error on negative/overflowing dimensions).
Result<int64_t> checked_count(std::string_view op, std::string_view name,
                              std::span<const int64_t> shape);

// A quantization parameter (scale or zero point) that is one value for the
// whole tensor or one per channel: at(i) is element i, or the only element.
struct PerChannel {
  const void* data = nullptr;
  DType dtype = DType::kInvalid;
  int64_t count = 0;  // 0 when the operand was left out: at() is then 0
  double at(int64_t i) const;
};
// Views `t` as a PerChannel with 1 or `channels` elements (rank 0 or 1);
// absent operands give count 0 when `optional`. A `name` ending in "scale"
// must be f32, any other (a zero point) u8 or i8.
Status per_channel(std::string_view op, std::string_view name, const TensorRef& t,
                   int64_t channels, bool optional, PerChannel* out);

// Rounds half to even and saturates to the range of u8 (unsigned) or i8.
int32_t requantize(double value, bool is_unsigned);

// ------------------------------------------------------------ window geometry

// Convolutions and pools handle 1 to 3 spatial dimensions; arrays are padded
// to three with size-1 dimensions so that loops are always three deep.
inline constexpr size_t kMaxSpatial = 3;

struct Window {
  size_t rank = 0;  // spatial dimensions actually present
  std::array<int64_t, kMaxSpatial> in{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1},
      dilation{1, 1, 1}, pad_begin{}, pad_end{}, out{1, 1, 1};
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
};

// The forward window of Conv and the pools over `in_spatial` with the
// kernel extent `kernel` (from W or kernel_shape): reads strides, dilations,
// pads and auto_pad, and ceil_mode when `allow_ceil`. Validates every
// attribute against the spatial rank; errors name `op`.
Status forward_window(std::string_view op, std::span<const int64_t> in_spatial,
                      std::span<const int64_t> kernel, const Attributes& attributes,
                      bool allow_ceil, Window* w);

// Reads an ints attribute that, when given, has `per_dim` entries per
// spatial dimension (2 for pads), each in [lo, 2^31]; `fallback` fills
// *out when the attribute is absent.
Status spatial_ints(std::string_view op, const Attributes& a, std::string_view name,
                    size_t rank, size_t per_dim, int64_t lo, int64_t fallback,
                    std::array<int64_t, 2 * kMaxSpatial>* out);

// An N-C-spatial input shape split for the window: checks rank 3-5.
Status check_spatial_input(std::string_view op, std::string_view name,
                           std::span<const int64_t> shape);

}  // namespace loom::kernels::nn
