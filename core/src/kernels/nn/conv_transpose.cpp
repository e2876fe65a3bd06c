// ConvTranspose: every input element scatters x * W into the output window
// it reaches; the output is zeroed first and the bias added last. Pads may
// come out negative when output_shape asks for more than the natural size;
// the scatter simply drops contributions that land outside the output.
#include <algorithm>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/nn/nn.hpp"

namespace loom::kernels::nn {
namespace {

constexpr std::string_view kOp = "ConvTranspose";

struct TransposeGeom {
  int64_t n = 0, c = 0, m = 0, cg = 0, mg = 0;
  Window w;  // `in` is X's spatial size, `out` Y's
  std::array<int64_t, 2 + kMaxSpatial> out{};
  size_t out_rank = 0;
  std::span<const int64_t> out_shape() const { return {out.data(), out_rank}; }
};

Status transpose_geometry(std::span<const int64_t> x, std::span<const int64_t> wshape,
                          const Attributes& a, TransposeGeom* g) {
  LOOM_RETURN_IF_ERROR(check_spatial_input(kOp, "X", x));
  if (wshape.size() != x.size()) {
    return invalid_argument("ConvTranspose: W has shape " + shape_to_string(wshape) +
                            ", expected rank " + std::to_string(x.size()) + " like X " +
                            shape_to_string(x));
  }
  for (int64_t d : wshape) {
    if (d < 0) {
      return invalid_argument("ConvTranspose: W has a negative dimension: " +
                              shape_to_string(wshape));
    }
  }
  const int64_t group = a.get_int("group", 1);
  if (group < 1 || wshape[0] != x[1] || x[1] % group != 0 || wshape[1] > (int64_t{1} << 31)) {
    return invalid_argument("ConvTranspose: group " + std::to_string(group) +
                            " does not fit X " + shape_to_string(x) + " and W " +
                            shape_to_string(wshape) + " (need W[0] == C, C % group == 0)");
  }
  const size_t rank = x.size() - 2;
  auto kernel = wshape.subspan(2);
  if (a.find("kernel_shape") != nullptr) {
    std::vector<int64_t> ks = a.get_ints("kernel_shape");
    if (!std::equal(ks.begin(), ks.end(), kernel.begin(), kernel.end())) {
      return invalid_argument("ConvTranspose: attribute 'kernel_shape' " + shape_to_string(ks) +
                              " disagrees with W " + shape_to_string(wshape));
    }
  }
  std::array<int64_t, 2 * kMaxSpatial> strides, dilations, pads, out_pad;
  LOOM_RETURN_IF_ERROR(spatial_ints(kOp, a, "strides", rank, 1, 1, 1, &strides));
  LOOM_RETURN_IF_ERROR(spatial_ints(kOp, a, "dilations", rank, 1, 1, 1, &dilations));
  LOOM_RETURN_IF_ERROR(spatial_ints(kOp, a, "pads", rank, 2, 0, 0, &pads));
  LOOM_RETURN_IF_ERROR(spatial_ints(kOp, a, "output_padding", rank, 1, 0, 0, &out_pad));
  std::vector<int64_t> out_shape = a.get_ints("output_shape");
  if (out_shape.size() == rank + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (!out_shape.empty() && out_shape.size() != rank) {
    return invalid_argument("ConvTranspose: attribute 'output_shape' " +
                            shape_to_string(out_shape) + " does not match " +
                            std::to_string(rank) + " spatial dims");
  }
  const std::string_view auto_pad = a.get_string("auto_pad", "NOTSET");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!same && auto_pad != "NOTSET" && auto_pad != "VALID") {
    return invalid_argument("ConvTranspose: attribute 'auto_pad' is '" + std::string(auto_pad) +
                            "', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  }
  Window& w = g->w;
  w = Window{};
  w.rank = rank;
  for (size_t i = 0; i < rank; ++i) {
    if (kernel[i] < 1 || kernel[i] > (int64_t{1} << 31) || x[2 + i] > (int64_t{1} << 40)) {
      return invalid_argument("ConvTranspose: bad kernel extent or input size in W " +
                              shape_to_string(wshape) + ", X " + shape_to_string(x));
    }
    w.in[i] = x[2 + i];
    w.kernel[i] = kernel[i];
    w.stride[i] = strides[i];
    w.dilation[i] = dilations[i];
    const int64_t eff = (kernel[i] - 1) * dilations[i] + 1;
    const int64_t natural = strides[i] * (x[2 + i] - 1) + out_pad[i] + eff;
    if (!out_shape.empty() || same) {
      const int64_t want = !out_shape.empty() ? out_shape[i] : x[2 + i] * strides[i];
      if (want < 0 || want > (int64_t{1} << 31)) {
        return invalid_argument("ConvTranspose: output_shape out of range: " +
                                shape_to_string(out_shape));
      }
      const int64_t total = natural - want;
      // SAME_LOWER puts the odd pixel at the start; SAME_UPPER and an
      // explicit output_shape at the end (what the ONNX test data expects).
      w.pad_begin[i] = auto_pad == "SAME_LOWER" ? total - total / 2 : total / 2;
      w.pad_end[i] = total - w.pad_begin[i];
      w.out[i] = want;
    } else {
      if (auto_pad == "NOTSET") {
        w.pad_begin[i] = pads[i];
        w.pad_end[i] = pads[i + rank];
      }
      w.out[i] = natural - w.pad_begin[i] - w.pad_end[i];
      if (w.out[i] < 0) {
        return invalid_argument("ConvTranspose: pads leave a negative output size in spatial dim " +
                                std::to_string(i));
      }
    }
  }
  g->n = x[0];
  g->c = x[1];
  g->cg = x[1] / group;
  g->mg = wshape[1];
  g->m = wshape[1] * group;
  g->out_rank = x.size();
  g->out[0] = g->n;
  g->out[1] = g->m;
  for (size_t i = 0; i < rank; ++i) g->out[2 + i] = w.out[i];
  return Status();
}

Status check_bias(std::span<const int64_t> shape, int64_t m) {
  if (shape.size() != 1 || shape[0] != m) {
    return invalid_argument("ConvTranspose: B has shape " + shape_to_string(shape) +
                            ", expected [" + std::to_string(m) + "]");
  }
  return Status();
}

}  // namespace

Result<std::vector<TensorType>> conv_transpose_infer(std::span<const TensorType> in,
                                                     const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kOp, in.size(), 2, 3, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(kOp, "X", in[0].dtype, {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_dtype(kOp, "W", in[1].dtype, {DType::kF32}));
  TransposeGeom g;
  LOOM_RETURN_IF_ERROR(transpose_geometry(in[0].shape, in[1].shape, a, &g));
  if (in.size() == 3 && in[2].dtype != DType::kInvalid) {
    LOOM_RETURN_IF_ERROR(check_dtype(kOp, "B", in[2].dtype, {DType::kF32}));
    LOOM_RETURN_IF_ERROR(check_bias(in[2].shape, g.m));
  }
  auto out = g.out_shape();
  return std::vector<TensorType>{{DType::kF32, Shape(out.begin(), out.end())}};
}

Status conv_transpose_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                          const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kOp, in.size(), 2, 3, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand(kOp, "X", in[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(kOp, "W", in[1], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(kOp, "Y", out[0], {DType::kF32}));
  TransposeGeom g;
  LOOM_RETURN_IF_ERROR(transpose_geometry(in[0].shape, in[1].shape, a, &g));
  const float* bias = nullptr;
  if (in.size() == 3 && in[2].present()) {
    LOOM_RETURN_IF_ERROR(check_operand(kOp, "B", in[2], {DType::kF32}));
    LOOM_RETURN_IF_ERROR(check_bias(in[2].shape, g.m));
    bias = in_data(in[2]);
  }
  LOOM_RETURN_IF_ERROR(check_output_shape(kOp, "Y", out[0].shape, g.out_shape()));
  const Window& w = g.w;
  const float* x = in_data(in[0]);
  const float* wt = in_data(in[1]);
  float* y = out_data(out[0]);
  const int64_t in_size = w.in_size(), out_size = w.out_size(), k_size = w.kernel_size();
  std::fill(y, y + g.n * g.m * out_size, 0.0f);
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t c = 0; c < g.c; ++c) {
      const int64_t m0 = (c / g.cg) * g.mg;
      const float* xc = x + (n * g.c + c) * in_size;
      for (int64_t ml = 0; ml < g.mg; ++ml) {
        float* ym = y + (n * g.m + m0 + ml) * out_size;
        const float* wk = wt + (c * g.mg + ml) * k_size;
        for (int64_t i0 = 0; i0 < w.in[0]; ++i0) {
          for (int64_t i1 = 0; i1 < w.in[1]; ++i1) {
            for (int64_t i2 = 0; i2 < w.in[2]; ++i2) {
              const float xv = xc[(i0 * w.in[1] + i1) * w.in[2] + i2];
              for (int64_t k0 = 0; k0 < w.kernel[0]; ++k0) {
                const int64_t o0 = i0 * w.stride[0] - w.pad_begin[0] + k0 * w.dilation[0];
                if (o0 < 0 || o0 >= w.out[0]) continue;
                for (int64_t k1 = 0; k1 < w.kernel[1]; ++k1) {
                  const int64_t o1 = i1 * w.stride[1] - w.pad_begin[1] + k1 * w.dilation[1];
                  if (o1 < 0 || o1 >= w.out[1]) continue;
                  for (int64_t k2 = 0; k2 < w.kernel[2]; ++k2) {
                    const int64_t o2 = i2 * w.stride[2] - w.pad_begin[2] + k2 * w.dilation[2];
                    if (o2 < 0 || o2 >= w.out[2]) continue;
                    ym[(o0 * w.out[1] + o1) * w.out[2] + o2] +=
                        xv * wk[(k0 * w.kernel[1] + k1) * w.kernel[2] + k2];
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  if (bias != nullptr) {
    for (int64_t n = 0; n < g.n; ++n) {
      for (int64_t m = 0; m < g.m; ++m) {
        float* ym = y + (n * g.m + m) * out_size;
        for (int64_t i = 0; i < out_size; ++i) ym[i] += bias[m];
      }
    }
  }
  return Status();
}

}  // namespace loom::kernels::nn
