// RoiAlign (opsets 10, 16) and MaxUnpool (opsets 9, 11) on f32 data.
//
// RoiAlign: for each region of interest r (rois[r] = x1, y1, x2, y2 in input
// coordinates, times spatial_scale) on image batch_indices[r], the region is
// split into output_height x output_width bins, each sampled on a grid of
// sampling_ratio^2 points (or ceil(roi size / bins) per axis when 0) by
// bilinear interpolation; 'avg' averages the samples, 'max' takes their
// maximum of the four weighted corner values (what onnxruntime computes, and
// the ONNX test data with it). coordinate_transformation_mode 'half_pixel'
// (opset 16's default) shifts the region by -0.5 pixel and lets it be
// smaller than a pixel; 'output_half_pixel' (opset 10's only behaviour) does
// not shift and makes each side at least one pixel.
//
// MaxUnpool: Y starts at zeros and takes X[i] at the element that I[i]
// names. I[i] is a flat index into the default output shape, (in - 1) *
// stride - pads + kernel per spatial axis, batch and channel included (as
// MaxPool's Indices are); an output_shape input (a constant: it decides the
// shape) at least that large keeps the element's coordinates, so the extra
// rows and columns stay zero (what the ONNX test data expects).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/nn/nn.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::nn {
namespace {

constexpr std::string_view kRoiAlign = "RoiAlign";
constexpr std::string_view kMaxUnpool = "MaxUnpool";

struct RoiParams {
  bool max = false;
  bool half_pixel = true;
  int64_t out_h = 1, out_w = 1, sampling = 0;
  double scale = 1.0;
};

Result<RoiParams> roi_params(const Attributes& a) {
  RoiParams p;
  const std::string_view mode = a.get_string("mode", "avg");
  if (mode == "max") {
    p.max = true;
  } else if (mode != "avg") {
    return invalid_argument("RoiAlign: attribute 'mode' is '" + std::string(mode) + "'; expected avg or max");
  }
  const std::string_view ctm =
      a.opset_before(16) ? "output_half_pixel" : a.get_string("coordinate_transformation_mode", "half_pixel");
  if (ctm == "output_half_pixel") {
    p.half_pixel = false;
  } else if (ctm != "half_pixel") {
    return invalid_argument("RoiAlign: attribute 'coordinate_transformation_mode' is '" + std::string(ctm) +
                            "'; expected half_pixel or output_half_pixel");
  }
  p.out_h = a.get_int("output_height", 1);
  p.out_w = a.get_int("output_width", 1);
  p.sampling = a.get_int("sampling_ratio", 0);
  p.scale = a.get_float("spatial_scale", 1.0f);
  if (p.out_h <= 0 || p.out_w <= 0 || p.out_h > (1 << 20) || p.out_w > (1 << 20)) {
    return invalid_argument("RoiAlign: attributes 'output_height' and 'output_width' must be positive, got " +
                            std::to_string(p.out_h) + " and " + std::to_string(p.out_w));
  }
  if (p.sampling < 0 || p.sampling > 1024) {
    return invalid_argument("RoiAlign: attribute 'sampling_ratio' must lie in [0, 1024], got " +
                            std::to_string(p.sampling));
  }
  if (!std::isfinite(p.scale)) return invalid_argument("RoiAlign: attribute 'spatial_scale' is not finite");
  return p;
}

Result<Shape> roi_shape(std::span<const int64_t> x, std::span<const int64_t> rois, std::span<const int64_t> idx,
                        const RoiParams& p) {
  if (x.size() != 4) {
    return invalid_argument("RoiAlign: input 'X' must be 4-D [N, C, H, W], got shape " + shape_to_string(x));
  }
  if (rois.size() != 2 || rois[1] != 4) {
    return invalid_argument("RoiAlign: input 'rois' must be [num_rois, 4], got shape " + shape_to_string(rois));
  }
  if (idx.size() != 1 || idx[0] != rois[0]) {
    return invalid_argument("RoiAlign: input 'batch_indices' must be [" + std::to_string(rois[0]) +
                            "] (one per roi), got shape " + shape_to_string(idx));
  }
  return Shape{rois[0], x[1], p.out_h, p.out_w};
}

// The value at (y, x) of an h x w plane by bilinear interpolation, 0 outside
// [-1, h] x [-1, w]; `corner_max` gives the largest weighted corner instead.
double roi_sample(const float* plane, int64_t h, int64_t w, double y, double x, bool corner_max) {
  if (y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(w)) return 0.0;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1, x1;
  if (y0 >= h - 1) {
    y0 = y1 = h - 1;
    y = static_cast<double>(y0);
  } else {
    y1 = y0 + 1;
  }
  if (x0 >= w - 1) {
    x0 = x1 = w - 1;
    x = static_cast<double>(x0);
  } else {
    x1 = x0 + 1;
  }
  const double ly = y - y0, lx = x - x0, hy = 1 - ly, hx = 1 - lx;
  const double v[4] = {hy * hx * plane[y0 * w + x0], hy * lx * plane[y0 * w + x1], ly * hx * plane[y1 * w + x0],
                       ly * lx * plane[y1 * w + x1]};
  if (corner_max) return std::max({v[0], v[1], v[2], v[3]});
  return v[0] + v[1] + v[2] + v[3];
}

Result<Shape> unpool_default_shape(std::span<const int64_t> x, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_spatial_input(kMaxUnpool, "X", x));
  const size_t rank = x.size() - 2;
  const std::vector<int64_t> kernel = a.get_ints("kernel_shape");
  if (kernel.size() != rank) {
    return invalid_argument("MaxUnpool: attribute 'kernel_shape' has " + std::to_string(kernel.size()) +
                            " values; X has " + std::to_string(rank) + " spatial dimensions");
  }
  std::array<int64_t, 2 * kMaxSpatial> strides{}, pads{};
  LOOM_RETURN_IF_ERROR(spatial_ints(kMaxUnpool, a, "strides", rank, 1, 1, 1, &strides));
  LOOM_RETURN_IF_ERROR(spatial_ints(kMaxUnpool, a, "pads", rank, 2, 0, 0, &pads));
  Shape out{x[0], x[1]};
  for (size_t i = 0; i < rank; ++i) {
    if (kernel[i] <= 0 || kernel[i] > (int64_t{1} << 31)) {
      return invalid_argument("MaxUnpool: attribute 'kernel_shape' holds " + std::to_string(kernel[i]));
    }
    const int64_t d = (x[2 + i] - 1) * strides[i] - pads[i] - pads[rank + i] + kernel[i];
    if (d <= 0) {
      return invalid_argument("MaxUnpool: spatial dimension " + std::to_string(i) + " of the output would be " +
                              std::to_string(d));
    }
    out.push_back(d);
  }
  return out;
}

Result<Shape> unpool_shape(std::span<const int64_t> x, std::span<const int64_t> ind, const TensorRef* out_shape,
                           bool has_out_shape, const Attributes& a) {
  if (!std::equal(x.begin(), x.end(), ind.begin(), ind.end())) {
    return invalid_argument("MaxUnpool: input 'I' has shape " + shape_to_string(ind) + "; it must be X's, " +
                            shape_to_string(x));
  }
  LOOM_ASSIGN_OR_RETURN(Shape def, unpool_default_shape(x, a));
  if (!has_out_shape) return def;
  if (out_shape == nullptr) return needs_constant(kMaxUnpool, 2, "output_shape");
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> v, read_ints(kMaxUnpool, "output_shape", *out_shape));
  if (v.size() != x.size() || v[0] != x[0] || v[1] != x[1]) {
    return invalid_argument("MaxUnpool: input 'output_shape' is " + shape_to_string(v) + "; it must have rank " +
                            std::to_string(x.size()) + " and start with X's " + std::to_string(x[0]) + ", " +
                            std::to_string(x[1]));
  }
  for (size_t i = 2; i < v.size(); ++i) {
    if (v[i] < def[i] || v[i] > (int64_t{1} << 31)) {
      return invalid_argument("MaxUnpool: input 'output_shape' is " + shape_to_string(v) + "; each spatial size "
                              "must be at least the default " + shape_to_string(def));
    }
  }
  return Shape(v.begin(), v.end());
}

}  // namespace

Result<std::vector<TensorType>> roi_align_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kRoiAlign, in.size(), 3, 3, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(kRoiAlign, "X", in[0].dtype, {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_dtype(kRoiAlign, "rois", in[1].dtype, {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_dtype(kRoiAlign, "batch_indices", in[2].dtype, {DType::kI64}));
  LOOM_ASSIGN_OR_RETURN(RoiParams p, roi_params(a));
  LOOM_ASSIGN_OR_RETURN(Shape out, roi_shape(in[0].shape, in[1].shape, in[2].shape, p));
  LOOM_RETURN_IF_ERROR(checked_count(kRoiAlign, "Y", out).status());
  return std::vector<TensorType>{{DType::kF32, out}};
}

Status roi_align_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kRoiAlign, in.size(), 3, 3, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand(kRoiAlign, "X", in[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(kRoiAlign, "rois", in[1], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(kRoiAlign, "batch_indices", in[2], {DType::kI64}));
  LOOM_RETURN_IF_ERROR(check_operand(kRoiAlign, "Y", out[0], {DType::kF32}));
  LOOM_ASSIGN_OR_RETURN(RoiParams p, roi_params(a));
  LOOM_ASSIGN_OR_RETURN(Shape shape, roi_shape(in[0].shape, in[1].shape, in[2].shape, p));
  LOOM_RETURN_IF_ERROR(check_output_shape(kRoiAlign, "Y", out[0].shape, shape));
  const int64_t n = in[0].shape[0], c = in[0].shape[1], h = in[0].shape[2], w = in[0].shape[3];
  const float* x = in_data(in[0]);
  const float* rois = in_data(in[1]);
  const auto* batch = static_cast<const int64_t*>(in[2].data);
  float* y = out_data(out[0]);
  const double offset = p.half_pixel ? 0.5 : 0.0;
  for (int64_t r = 0; r < shape[0]; ++r) {
    if (batch[r] < 0 || batch[r] >= n) {
      return invalid_argument("RoiAlign: input 'batch_indices' holds " + std::to_string(batch[r]) + " at " +
                              std::to_string(r) + "; X has " + std::to_string(n) + " images");
    }
    const float* roi = rois + r * 4;
    for (int k = 0; k < 4; ++k) {
      if (!std::isfinite(roi[k])) {
        return invalid_argument("RoiAlign: input 'rois' holds a value that is not finite in roi " + std::to_string(r));
      }
    }
    const double x1 = roi[0] * p.scale - offset, y1 = roi[1] * p.scale - offset;
    double rw = roi[2] * p.scale - offset - x1, rh = roi[3] * p.scale - offset - y1;
    if (!p.half_pixel) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    const double bin_h = rh / static_cast<double>(p.out_h), bin_w = rw / static_cast<double>(p.out_w);
    const int64_t gh = p.sampling > 0 ? p.sampling : std::clamp<int64_t>(static_cast<int64_t>(std::ceil(bin_h)), 1, 1024);
    const int64_t gw = p.sampling > 0 ? p.sampling : std::clamp<int64_t>(static_cast<int64_t>(std::ceil(bin_w)), 1, 1024);
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* plane = x + (batch[r] * c + ch) * h * w;
      for (int64_t ph = 0; ph < p.out_h; ++ph) {
        for (int64_t pw = 0; pw < p.out_w; ++pw) {
          double acc = p.max ? -std::numeric_limits<double>::infinity() : 0.0;
          for (int64_t iy = 0; iy < gh; ++iy) {
            const double sy = y1 + ph * bin_h + (iy + 0.5) * bin_h / static_cast<double>(gh);
            for (int64_t ix = 0; ix < gw; ++ix) {
              const double sx = x1 + pw * bin_w + (ix + 0.5) * bin_w / static_cast<double>(gw);
              const double v = h > 0 && w > 0 ? roi_sample(plane, h, w, sy, sx, p.max) : 0.0;
              acc = p.max ? std::max(acc, v) : acc + v;
            }
          }
          y[((r * c + ch) * p.out_h + ph) * p.out_w + pw] =
              static_cast<float>(p.max ? acc : acc / static_cast<double>(gh * gw));
        }
      }
    }
  }
  return Status();
}

Result<std::vector<TensorType>> max_unpool_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kMaxUnpool, in.size(), 2, 3, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(kMaxUnpool, "X", in[0].dtype, {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_dtype(kMaxUnpool, "I", in[1].dtype, {DType::kI64}));
  const bool has_out = in.size() > 2 && in[2].dtype != DType::kInvalid;
  LOOM_ASSIGN_OR_RETURN(Shape out, unpool_shape(in[0].shape, in[1].shape, has_out ? in[2].value : nullptr, has_out, a));
  LOOM_RETURN_IF_ERROR(checked_count(kMaxUnpool, "Y", out).status());
  return std::vector<TensorType>{{DType::kF32, out}};
}

Status max_unpool_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kMaxUnpool, in.size(), 2, 3, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand(kMaxUnpool, "X", in[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(kMaxUnpool, "I", in[1], {DType::kI64}));
  LOOM_RETURN_IF_ERROR(check_operand(kMaxUnpool, "Y", out[0], {DType::kF32}));
  const bool has_out = in.size() > 2 && in[2].present();
  LOOM_ASSIGN_OR_RETURN(Shape shape, unpool_shape(in[0].shape, in[1].shape, has_out ? &in[2] : nullptr, has_out, a));
  LOOM_RETURN_IF_ERROR(check_output_shape(kMaxUnpool, "Y", out[0].shape, shape));
  LOOM_ASSIGN_OR_RETURN(int64_t count, checked_count(kMaxUnpool, "X", in[0].shape));
  LOOM_ASSIGN_OR_RETURN(int64_t total, checked_count(kMaxUnpool, "Y", shape));
  LOOM_ASSIGN_OR_RETURN(Shape def, unpool_default_shape(in[0].shape, a));
  LOOM_ASSIGN_OR_RETURN(int64_t def_total, checked_count(kMaxUnpool, "Y", def));
  const float* x = in_data(in[0]);
  const auto* ind = static_cast<const int64_t*>(in[1].data);
  float* y = out_data(out[0]);
  std::fill(y, y + total, 0.0f);
  for (int64_t i = 0; i < count; ++i) {
    if (ind[i] < 0 || ind[i] >= def_total) {
      return invalid_argument("MaxUnpool: input 'I' holds " + std::to_string(ind[i]) + " at flat position " +
                              std::to_string(i) + "; the default output " + shape_to_string(def) + " has " +
                              std::to_string(def_total) + " elements");
    }
    // The index's coordinates in the default shape, placed at the same
    // coordinates of Y (equal to them unless output_shape enlarges Y).
    int64_t rest = ind[i], flat = 0, stride = 1;
    for (size_t k = def.size(); k-- > 0;) {
      flat += (rest % def[k]) * stride;
      rest /= def[k];
      stride *= shape[k];
    }
    y[flat] = x[i];
  }
  return Status();
}

}  // namespace loom::kernels::nn
