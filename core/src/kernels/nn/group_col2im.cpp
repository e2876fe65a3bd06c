// Two operators of opset 18 that current exporters write:
//  - GroupNormalization: X [N, C, D...] normalized over each group of
//    C / num_groups channels and all of D (population variance, statistics
//    in double), then scaled and shifted; `scale` and `bias` hold one value
//    per group at opsets 18-20 and one per channel from 21 (whose
//    `stash_type` 1, f32 statistics, is the only one taken; Loom's double
//    statistics round to the same f32 result or closer).
//  - Col2Im: the columns [N, C * prod(block_shape), L] of sliding blocks
//    summed back into an image [N, C, image_shape...] (the inverse
//    arrangement of im2col, overlapping taps added), with dilations, pads
//    and strides over any number of spatial axes.
#include <cmath>
#include <string>
#include <tuple>

#include "kernels/checks.hpp"
#include "kernels/nn/nn.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::nn {
namespace {

constexpr std::string_view kGroupNorm = "GroupNormalization";
constexpr std::string_view kCol2Im = "Col2Im";

// Channels per group and the length of each affine operand.
struct GroupGeom {
  int64_t n = 0, c = 0, groups = 0, spatial = 1;
  int64_t affine = 0;  // elements in scale and bias
};

Status group_geometry(std::span<const int64_t> x, std::span<const int64_t> scale,
                      std::span<const int64_t> bias, const Attributes& a, GroupGeom* g) {
  if (x.size() < 2) {
    return invalid_argument(std::string(kGroupNorm) + ": X must have rank 2 or more (N, C, ...), got " +
                            shape_to_string(x));
  }
  if (a.find("num_groups") == nullptr) return invalid_argument(std::string(kGroupNorm) + ": attribute 'num_groups' is required");
  g->n = x[0];
  g->c = x[1];
  g->groups = a.get_int("num_groups", 0);
  for (size_t d = 2; d < x.size(); ++d) g->spatial *= x[d];
  if (g->groups < 1 || g->c % g->groups != 0) {
    return invalid_argument(std::string(kGroupNorm) + ": num_groups " + std::to_string(g->groups) +
                            " must be positive and divide the " + std::to_string(g->c) + " channels of X " +
                            shape_to_string(x));
  }
  g->affine = a.opset_before(21) ? g->groups : g->c;
  const std::string want = a.opset_before(21) ? "num_groups" : "the channel count";
  for (auto [name, shape] : {std::pair<std::string_view, std::span<const int64_t>>{"scale", scale},
                             std::pair<std::string_view, std::span<const int64_t>>{"bias", bias}}) {
    if (shape.size() != 1 || shape[0] != g->affine) {
      return invalid_argument(std::string(kGroupNorm) + ": " + std::string(name) + " must be 1-D of " + want + " (" +
                              std::to_string(g->affine) + ") at opset " + std::to_string(a.opset()) + ", got " +
                              shape_to_string(shape));
    }
  }
  if (!a.opset_before(21) && a.get_int("stash_type", 1) != 1) {
    return unimplemented(std::string(kGroupNorm) + ": stash_type " + std::to_string(a.get_int("stash_type", 1)) +
                         " (only 1, f32 statistics, is supported)");
  }
  return Status();
}

// Col2Im's geometry: spatial rank, image and block sizes, the block grid.
struct Col2ImGeom {
  std::vector<int64_t> image, block, dilation, stride, pad_begin, grid;
  int64_t n = 0, c = 0, block_size = 1, blocks = 1, image_size = 1;
};

Status col2im_geometry(std::span<const int64_t> in, std::vector<int64_t> image, std::vector<int64_t> block,
                       const Attributes& a, Col2ImGeom* g) {
  const std::string op(kCol2Im);
  const size_t r = image.size();
  if (r == 0 || block.size() != r) {
    return invalid_argument(op + ": image_shape " + shape_to_string(image) + " and block_shape " +
                            shape_to_string(block) + " must have the same length, at least 1");
  }
  if (in.size() != 3) return invalid_argument(op + ": input must be [N, C * prod(block_shape), L], got " + shape_to_string(in));
  auto list = [&](std::string_view name, int64_t fill, size_t len) -> Result<std::vector<int64_t>> {
    std::vector<int64_t> v = a.find(name) ? a.get_ints(name) : std::vector<int64_t>(len, fill);
    if (v.size() != len) {
      return invalid_argument(op + ": '" + std::string(name) + "' has " + std::to_string(v.size()) +
                              " values, expected " + std::to_string(len));
    }
    return v;
  };
  LOOM_ASSIGN_OR_RETURN(g->dilation, list("dilations", 1, r));
  LOOM_ASSIGN_OR_RETURN(g->stride, list("strides", 1, r));
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> pads, list("pads", 0, 2 * r));
  g->image = std::move(image);
  g->block = std::move(block);
  g->pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r));
  g->grid.resize(r);
  for (size_t d = 0; d < r; ++d) {
    if (g->image[d] < 1 || g->block[d] < 1 || g->dilation[d] < 1 || g->stride[d] < 1 || pads[d] < 0 ||
        pads[r + d] < 0) {
      return invalid_argument(op + ": axis " + std::to_string(d) + ": image " + std::to_string(g->image[d]) +
                              ", block " + std::to_string(g->block[d]) + ", dilation, stride must be positive and " +
                              "pads not negative");
    }
    const int64_t span = g->dilation[d] * (g->block[d] - 1) + 1;
    const int64_t room = g->image[d] + pads[d] + pads[r + d] - span;
    if (room < 0) {
      return invalid_argument(op + ": axis " + std::to_string(d) + ": a block spanning " + std::to_string(span) +
                              " does not fit the padded image of " + std::to_string(g->image[d] + pads[d] + pads[r + d]));
    }
    g->grid[d] = room / g->stride[d] + 1;
  }
  // Products checked for overflow (element_count refuses one).
  for (auto [count, dims, name] : {std::tuple<int64_t*, const std::vector<int64_t>*, const char*>{&g->block_size, &g->block, "block_shape"},
                                   {&g->blocks, &g->grid, "the block grid"},
                                   {&g->image_size, &g->image, "image_shape"}}) {
    auto n = element_count(*dims);
    if (!n.ok()) return n.status().with_context(op + ": " + name);
    *count = static_cast<int64_t>(*n);
  }
  g->n = in[0];
  if (in[1] % g->block_size != 0) {
    return invalid_argument(op + ": input's second axis " + std::to_string(in[1]) +
                            " is not a multiple of prod(block_shape) = " + std::to_string(g->block_size));
  }
  g->c = in[1] / g->block_size;
  if (in[2] != g->blocks) {
    return invalid_argument(op + ": input has " + std::to_string(in[2]) + " columns, the image, block, pads, " +
                            "dilations and strides give " + std::to_string(g->blocks) + " blocks");
  }
  return Status();
}

std::vector<int64_t> col2im_out_shape(const Col2ImGeom& g) {
  std::vector<int64_t> out = {g.n, g.c};
  out.insert(out.end(), g.image.begin(), g.image.end());
  return out;
}

}  // namespace

Result<std::vector<TensorType>> group_norm_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kGroupNorm, in.size(), 3, 3, 1, 1));
  for (size_t i = 0; i < 3; ++i) {
    static constexpr const char* kNames[] = {"X", "scale", "bias"};
    LOOM_RETURN_IF_ERROR(check_dtype(kGroupNorm, kNames[i], in[i].dtype, {DType::kF32}));
  }
  GroupGeom g;
  LOOM_RETURN_IF_ERROR(group_geometry(in[0].shape, in[1].shape, in[2].shape, a, &g));
  return std::vector<TensorType>{{DType::kF32, in[0].shape}};
}

Status group_norm_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kGroupNorm, in.size(), 3, 3, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand(kGroupNorm, "X", in[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(kGroupNorm, "scale", in[1], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(kGroupNorm, "bias", in[2], {DType::kF32}));
  GroupGeom g;
  LOOM_RETURN_IF_ERROR(group_geometry(in[0].shape, in[1].shape, in[2].shape, a, &g));
  LOOM_RETURN_IF_ERROR(check_operand(kGroupNorm, "Y", out[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_output_shape(kGroupNorm, "Y", out[0].shape, in[0].shape));
  const double eps = a.get_float("epsilon", 1e-5f);
  const float *x = in_data(in[0]), *scale = in_data(in[1]), *bias = in_data(in[2]);
  float* y = out_data(out[0]);
  const int64_t per_group = g.c / g.groups;
  const int64_t len = per_group * g.spatial;  // elements of one group
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const int64_t start = (n * g.c + grp * per_group) * g.spatial;
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < len; ++i) sum += x[start + i];
      const double mean = len > 0 ? sum / static_cast<double>(len) : 0.0;
      for (int64_t i = 0; i < len; ++i) {
        const double d = x[start + i] - mean;
        sq += d * d;
      }
      const double inv = 1.0 / std::sqrt((len > 0 ? sq / static_cast<double>(len) : 0.0) + eps);
      for (int64_t ch = 0; ch < per_group; ++ch) {
        const int64_t k = g.affine == g.groups ? grp : grp * per_group + ch;
        const double s = scale[k], b = bias[k];
        const int64_t at = start + ch * g.spatial;
        for (int64_t i = 0; i < g.spatial; ++i) {
          y[at + i] = static_cast<float>((x[at + i] - mean) * inv * s + b);
        }
      }
    }
  }
  return Status();
}

// Inputs: input, image_shape (i64), block_shape (i64), both constant.
Result<std::vector<TensorType>> col2im_infer(std::span<const TensorType> in, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kCol2Im, in.size(), 3, 3, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(kCol2Im, "input", in[0].dtype, {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_dtype(kCol2Im, "image_shape", in[1].dtype, {DType::kI64}));
  LOOM_RETURN_IF_ERROR(check_dtype(kCol2Im, "block_shape", in[2].dtype, {DType::kI64}));
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> image, constant_ints(kCol2Im, 1, "image_shape", in[1]));
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> block, constant_ints(kCol2Im, 2, "block_shape", in[2]));
  Col2ImGeom g;
  LOOM_RETURN_IF_ERROR(col2im_geometry(in[0].shape, std::move(image), std::move(block), a, &g));
  const std::vector<int64_t> out = col2im_out_shape(g);
  return std::vector<TensorType>{{DType::kF32, Shape(out.begin(), out.end())}};
}

Status col2im_run(std::span<const TensorRef> in, std::span<const TensorRef> out, const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kCol2Im, in.size(), 3, 3, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand(kCol2Im, "input", in[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(kCol2Im, "image_shape", in[1], {DType::kI64}));
  LOOM_RETURN_IF_ERROR(check_operand(kCol2Im, "block_shape", in[2], {DType::kI64}));
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> image, read_ints(kCol2Im, "image_shape", in[1]));
  LOOM_ASSIGN_OR_RETURN(std::vector<int64_t> block, read_ints(kCol2Im, "block_shape", in[2]));
  Col2ImGeom g;
  LOOM_RETURN_IF_ERROR(col2im_geometry(in[0].shape, std::move(image), std::move(block), a, &g));
  LOOM_RETURN_IF_ERROR(check_operand(kCol2Im, "output", out[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_output_shape(kCol2Im, "output", out[0].shape, col2im_out_shape(g)));
  const float* x = in_data(in[0]);
  float* y = out_data(out[0]);
  const size_t r = g.image.size();
  for (int64_t i = 0; i < g.n * g.c * g.image_size; ++i) y[i] = 0.0f;
  std::vector<int64_t> k(r), b(r);
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t c = 0; c < g.c; ++c) {
      float* image = y + (n * g.c + c) * g.image_size;
      for (int64_t kl = 0; kl < g.block_size; ++kl) {
        // Kernel offset kl and block bl as multi-indices, last axis fastest.
        for (size_t d = r, rest = static_cast<size_t>(kl); d-- > 0;) {
          k[d] = static_cast<int64_t>(rest) % g.block[d];
          rest /= static_cast<size_t>(g.block[d]);
        }
        const float* column = x + ((n * g.c + c) * g.block_size + kl) * g.blocks;
        for (int64_t bl = 0; bl < g.blocks; ++bl) {
          int64_t rest = bl, at = 0;
          bool inside = true;
          for (size_t d = r; d-- > 0;) {
            b[d] = rest % g.grid[d];
            rest /= g.grid[d];
          }
          for (size_t d = 0; d < r && inside; ++d) {
            const int64_t p = b[d] * g.stride[d] - g.pad_begin[d] + k[d] * g.dilation[d];
            inside = p >= 0 && p < g.image[d];
            at = at * g.image[d] + p;
          }
          if (inside) image[at] += column[bl];
        }
      }
    }
  }
  return Status();
}

}  // namespace loom::kernels::nn
