// Conv, ConvTranspose, ConvInteger and QLinearConv: direct loops over the
// output (Conv family) or scatter over the input (ConvTranspose). One loop
// nest serves the float and the integer forms; the element loads subtract
// zero points and the emit step adds bias and requantizes.
#include <string>

#include "kernels/checks.hpp"
#include "kernels/nn/nn.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::nn {
namespace {

struct ConvGeom {
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0, mg = 0;
  Window w;
  std::array<int64_t, 2 + kMaxSpatial> out{};
  size_t out_rank = 0;
  std::span<const int64_t> out_shape() const { return {out.data(), out_rank}; }
};

// Checks X [N, C, D...] against W [M, C/group, k...] and computes the
// output [N, M, O...].
Status conv_geometry(std::string_view op, std::span<const int64_t> x,
                     std::span<const int64_t> w, const Attributes& a, ConvGeom* g) {
  LOOM_RETURN_IF_ERROR(check_spatial_input(op, "X", x));
  if (w.size() != x.size()) {
    return invalid_argument(std::string(op) + ": W has shape " + shape_to_string(w) +
                            ", expected rank " + std::to_string(x.size()) + " like X " +
                            shape_to_string(x));
  }
  for (int64_t d : w) {
    if (d < 0) {
      return invalid_argument(std::string(op) + ": W has a negative dimension: " +
                              shape_to_string(w));
    }
  }
  const int64_t group = a.get_int("group", 1);
  if (group < 1 || x[1] % group != 0 || w[0] % group != 0 || w[1] != x[1] / group) {
    return invalid_argument(std::string(op) + ": group " + std::to_string(group) +
                            " does not fit X " + shape_to_string(x) + " and W " +
                            shape_to_string(w) + " (need W[1] * group == C, M % group == 0)");
  }
  auto kernel = w.subspan(2);
  if (a.find("kernel_shape") != nullptr) {
    std::vector<int64_t> ks = a.get_ints("kernel_shape");
    if (!std::equal(ks.begin(), ks.end(), kernel.begin(), kernel.end())) {
      return invalid_argument(std::string(op) + ": attribute 'kernel_shape' " +
                              shape_to_string(ks) + " disagrees with W " + shape_to_string(w));
    }
  }
  LOOM_RETURN_IF_ERROR(forward_window(op, x.subspan(2), kernel, a, false, &g->w));
  g->n = x[0];
  g->c = x[1];
  g->m = w[0];
  g->group = group;
  g->cg = x[1] / group;
  g->mg = w[0] / group;
  g->out_rank = x.size();
  g->out[0] = g->n;
  g->out[1] = g->m;
  for (size_t i = 0; i < g->w.rank; ++i) g->out[2 + i] = g->w.out[i];
  return Status();
}

// For each output element: acc = sum over the window of load_x(x index) *
// load_w(w index, m); then emit(y index, m, acc).
template <typename Acc, typename LoadX, typename LoadW, typename Emit>
void conv_loop(const ConvGeom& g, LoadX load_x, LoadW load_w, Emit emit) {
  const Window& w = g.w;
  const int64_t in_size = w.in_size(), k_size = w.kernel_size(), out_size = w.out_size();
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t m = 0; m < g.m; ++m) {
      const int64_t c0 = (m / g.mg) * g.cg;
      int64_t y_index = (n * g.m + m) * out_size;
      for (int64_t o0 = 0; o0 < w.out[0]; ++o0) {
        for (int64_t o1 = 0; o1 < w.out[1]; ++o1) {
          for (int64_t o2 = 0; o2 < w.out[2]; ++o2, ++y_index) {
            Acc acc = 0;
            for (int64_t ic = 0; ic < g.cg; ++ic) {
              const int64_t x_base = (n * g.c + c0 + ic) * in_size;
              const int64_t w_base = (m * g.cg + ic) * k_size;
              for (int64_t k0 = 0; k0 < w.kernel[0]; ++k0) {
                const int64_t i0 = o0 * w.stride[0] - w.pad_begin[0] + k0 * w.dilation[0];
                if (i0 < 0 || i0 >= w.in[0]) continue;
                for (int64_t k1 = 0; k1 < w.kernel[1]; ++k1) {
                  const int64_t i1 = o1 * w.stride[1] - w.pad_begin[1] + k1 * w.dilation[1];
                  if (i1 < 0 || i1 >= w.in[1]) continue;
                  for (int64_t k2 = 0; k2 < w.kernel[2]; ++k2) {
                    const int64_t i2 = o2 * w.stride[2] - w.pad_begin[2] + k2 * w.dilation[2];
                    if (i2 < 0 || i2 >= w.in[2]) continue;
                    acc += load_x(x_base + (i0 * w.in[1] + i1) * w.in[2] + i2) *
                           load_w(w_base + (k0 * w.kernel[1] + k1) * w.kernel[2] + k2, m);
                  }
                }
              }
            }
            emit(y_index, m, acc);
          }
        }
      }
    }
  }
}

// A 1-D per-output-channel operand (bias) of `m` elements.
Status check_channel_vector(std::string_view op, std::string_view name,
                            std::span<const int64_t> shape, int64_t m) {
  if (shape.size() != 1 || shape[0] != m) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + " has shape " +
                            shape_to_string(shape) + ", expected [" + std::to_string(m) + "]");
  }
  return Status();
}

}  // namespace

// ------------------------------------------------------------------ Conv

Result<std::vector<TensorType>> conv_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity("Conv", in.size(), 2, 3, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype("Conv", "X", in[0].dtype, {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_dtype("Conv", "W", in[1].dtype, {DType::kF32}));
  ConvGeom g;
  LOOM_RETURN_IF_ERROR(conv_geometry("Conv", in[0].shape, in[1].shape, a, &g));
  if (in.size() == 3 && in[2].dtype != DType::kInvalid) {
    LOOM_RETURN_IF_ERROR(check_dtype("Conv", "B", in[2].dtype, {DType::kF32}));
    LOOM_RETURN_IF_ERROR(check_channel_vector("Conv", "B", in[2].shape, g.m));
  }
  auto out = g.out_shape();
  return std::vector<TensorType>{{DType::kF32, Shape(out.begin(), out.end())}};
}

Status conv_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity("Conv", in.size(), 2, 3, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand("Conv", "X", in[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand("Conv", "W", in[1], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand("Conv", "Y", out[0], {DType::kF32}));
  ConvGeom g;
  LOOM_RETURN_IF_ERROR(conv_geometry("Conv", in[0].shape, in[1].shape, a, &g));
  const float* bias = nullptr;
  if (in.size() == 3 && in[2].present()) {
    LOOM_RETURN_IF_ERROR(check_operand("Conv", "B", in[2], {DType::kF32}));
    LOOM_RETURN_IF_ERROR(check_channel_vector("Conv", "B", in[2].shape, g.m));
    bias = in_data(in[2]);
  }
  LOOM_RETURN_IF_ERROR(check_output_shape("Conv", "Y", out[0].shape, g.out_shape()));
  const float* x = in_data(in[0]);
  const float* w = in_data(in[1]);
  float* y = out_data(out[0]);
  conv_loop<float>(
      g, [&](int64_t i) { return x[i]; }, [&](int64_t i, int64_t) { return w[i]; },
      [&](int64_t i, int64_t m, float acc) { y[i] = acc + (bias ? bias[m] : 0.0f); });
  return Status();
}

// ------------------------------------------------------------ ConvInteger

Result<std::vector<TensorType>> conv_integer_infer(std::span<const TensorType> in,
                                                   const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity("ConvInteger", in.size(), 2, 4, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype("ConvInteger", "x", in[0].dtype, {DType::kU8, DType::kI8}));
  LOOM_RETURN_IF_ERROR(check_dtype("ConvInteger", "w", in[1].dtype, {DType::kU8, DType::kI8}));
  ConvGeom g;
  LOOM_RETURN_IF_ERROR(conv_geometry("ConvInteger", in[0].shape, in[1].shape, a, &g));
  if (in.size() > 2) {
    LOOM_RETURN_IF_ERROR(check_quant_operand("ConvInteger", "x_zero_point", in[2], 1, in[0].dtype));
  }
  if (in.size() > 3) {
    LOOM_RETURN_IF_ERROR(check_quant_operand("ConvInteger", "w_zero_point", in[3], g.m, in[1].dtype));
  }
  auto out = g.out_shape();
  return std::vector<TensorType>{{DType::kI32, Shape(out.begin(), out.end())}};
}

Status conv_integer_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                        const Attributes& a) {
  constexpr std::string_view op = "ConvInteger";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 2, 4, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_data(op, "x", in[0]));
  LOOM_RETURN_IF_ERROR(check_data(op, "w", in[1]));
  LOOM_RETURN_IF_ERROR(check_operand(op, "y", out[0], {DType::kI32}));
  ConvGeom g;
  LOOM_RETURN_IF_ERROR(conv_geometry(op, in[0].shape, in[1].shape, a, &g));
  LOOM_RETURN_IF_ERROR(check_output_shape(op, "y", out[0].shape, g.out_shape()));
  PerChannel xzp, wzp;
  const TensorRef none;
  LOOM_RETURN_IF_ERROR(per_channel(op, "x_zero_point", in.size() > 2 ? in[2] : none, 1, true, &xzp));
  LOOM_RETURN_IF_ERROR(per_channel(op, "w_zero_point", in.size() > 3 ? in[3] : none, g.m, true, &wzp));
  const int32_t xz = static_cast<int32_t>(xzp.at(0));
  int32_t* y = static_cast<int32_t*>(out[0].data);
  return visit_int8(op, "x", in[0].dtype, [&]<typename TX>() {
    return visit_int8(op, "w", in[1].dtype, [&]<typename TW>() {
      const TX* x = static_cast<const TX*>(in[0].data);
      const TW* w = static_cast<const TW*>(in[1].data);
      conv_loop<int64_t>(
          g, [&](int64_t i) { return int64_t{x[i]} - xz; },
          [&](int64_t i, int64_t m) {
            return int64_t{w[i]} - static_cast<int64_t>(wzp.at(m));
          },
          [&](int64_t i, int64_t, int64_t acc) { y[i] = static_cast<int32_t>(acc); });
      return Status();
    });
  });
}

// ------------------------------------------------------------ QLinearConv
// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
// y_zero_point, B (optional i32).

Result<std::vector<TensorType>> qlinear_conv_infer(std::span<const TensorType> in,
                                                   const Attributes& a) {
  constexpr std::string_view op = "QLinearConv";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 8, 9, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "x", in[0].dtype, {DType::kU8, DType::kI8}));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "w", in[3].dtype, {DType::kU8, DType::kI8}));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "y_zero_point", in[7].dtype, {DType::kU8, DType::kI8}));
  ConvGeom g;
  LOOM_RETURN_IF_ERROR(conv_geometry(op, in[0].shape, in[3].shape, a, &g));
  LOOM_RETURN_IF_ERROR(check_quant_operand(op, "x_scale", in[1], 1, DType::kInvalid));
  LOOM_RETURN_IF_ERROR(check_quant_operand(op, "x_zero_point", in[2], 1, in[0].dtype));
  LOOM_RETURN_IF_ERROR(check_quant_operand(op, "w_scale", in[4], g.m, DType::kInvalid));
  LOOM_RETURN_IF_ERROR(check_quant_operand(op, "w_zero_point", in[5], g.m, in[3].dtype));
  LOOM_RETURN_IF_ERROR(check_quant_operand(op, "y_scale", in[6], 1, DType::kInvalid));
  LOOM_RETURN_IF_ERROR(check_quant_operand(op, "y_zero_point", in[7], 1, in[7].dtype));
  auto out = g.out_shape();
  return std::vector<TensorType>{{in[7].dtype, Shape(out.begin(), out.end())}};
}

Status qlinear_conv_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                        const Attributes& a) {
  constexpr std::string_view op = "QLinearConv";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 8, 9, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_data(op, "x", in[0]));
  LOOM_RETURN_IF_ERROR(check_data(op, "w", in[3]));
  LOOM_RETURN_IF_ERROR(check_operand(op, "y_zero_point", in[7], {DType::kU8, DType::kI8}));
  LOOM_RETURN_IF_ERROR(check_operand(op, "y", out[0], {in[7].dtype}));
  ConvGeom g;
  LOOM_RETURN_IF_ERROR(conv_geometry(op, in[0].shape, in[3].shape, a, &g));
  LOOM_RETURN_IF_ERROR(check_output_shape(op, "y", out[0].shape, g.out_shape()));
  PerChannel xs, xzp, ws, wzp, ys, yzp;
  LOOM_RETURN_IF_ERROR(per_channel(op, "x_scale", in[1], 1, false, &xs));
  LOOM_RETURN_IF_ERROR(per_channel(op, "x_zero_point", in[2], 1, false, &xzp));
  LOOM_RETURN_IF_ERROR(per_channel(op, "w_scale", in[4], g.m, false, &ws));
  LOOM_RETURN_IF_ERROR(per_channel(op, "w_zero_point", in[5], g.m, false, &wzp));
  LOOM_RETURN_IF_ERROR(per_channel(op, "y_scale", in[6], 1, false, &ys));
  LOOM_RETURN_IF_ERROR(per_channel(op, "y_zero_point", in[7], 1, false, &yzp));
  const int32_t* bias = nullptr;
  if (in.size() == 9 && in[8].present()) {
    LOOM_RETURN_IF_ERROR(check_operand(op, "B", in[8], {DType::kI32}));
    LOOM_RETURN_IF_ERROR(check_channel_vector(op, "B", in[8].shape, g.m));
    bias = static_cast<const int32_t*>(in[8].data);
  }
  if (!(ys.at(0) > 0.0)) {
    return invalid_argument(std::string(op) + ": y_scale must be positive");
  }
  const int32_t xz = static_cast<int32_t>(xzp.at(0));
  const double y_scale = ys.at(0), y_zero = yzp.at(0);
  const bool y_unsigned = out[0].dtype == DType::kU8;
  return visit_int8(op, "x", in[0].dtype, [&]<typename TX>() {
    return visit_int8(op, "w", in[3].dtype, [&]<typename TW>() {
      const TX* x = static_cast<const TX*>(in[0].data);
      const TW* w = static_cast<const TW*>(in[3].data);
      conv_loop<int64_t>(
          g, [&](int64_t i) { return int64_t{x[i]} - xz; },
          [&](int64_t i, int64_t m) {
            return int64_t{w[i]} - static_cast<int64_t>(wzp.at(m));
          },
          [&](int64_t i, int64_t m, int64_t acc) {
            // i32 accumulation as the spec states, wrapping on overflow.
            const int64_t total = int64_t{static_cast<int32_t>(acc)} + (bias ? bias[m] : 0);
            // Computed in float like the ONNX reference, then rounded.
            const float scaled = static_cast<float>(total) *
                                 (static_cast<float>(xs.at(0)) * static_cast<float>(ws.at(m)) /
                                  static_cast<float>(y_scale));
            const int32_t q = requantize(static_cast<double>(scaled) + y_zero, y_unsigned);
            if (y_unsigned) {
              static_cast<uint8_t*>(out[0].data)[i] = static_cast<uint8_t>(q);
            } else {
              static_cast<int8_t*>(out[0].data)[i] = static_cast<int8_t>(q);
            }
          });
      return Status();
    });
  });
}

}  // namespace loom::kernels::nn
