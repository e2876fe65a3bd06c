// The normalizations: BatchNormalization (inference form, and opset 14's
// training form), Instance-, Layer-, Lp- and MeanVarianceNormalization.
// Statistics are accumulated in double so the reference stays close to the
// exact value.
#include <cmath>
#include <string>

#include "kernels/broadcast.hpp"
#include "kernels/checks.hpp"
#include "kernels/nn/nn.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::nn {
namespace {

Status check_shape_is(std::string_view op, std::string_view name, std::span<const int64_t> got,
                      std::span<const int64_t> want) {
  if (!std::equal(got.begin(), got.end(), want.begin(), want.end())) {
    return invalid_argument(std::string(op) + ": " + std::string(name) + " has shape " +
                            shape_to_string(got) + ", expected " + shape_to_string(want));
  }
  return Status();
}

Status check_rank_at_least(std::string_view op, std::span<const int64_t> x, size_t rank) {
  if (x.size() < rank) {
    return invalid_argument(std::string(op) + ": input 'X' must have rank >= " +
                            std::to_string(rank) + ", got " + shape_to_string(x));
  }
  return Status();
}

// ------------------------------------------------------------ BatchNorm

constexpr std::string_view kBatchNorm = "BatchNormalization";

// The shape of scale, B, mean and var: [C], or X.shape[1:] when an opset
// 7-8 node sets spatial=0. `outputs` counts the node's outputs that are
// present (Y included). Sets *training for the training form (opset 14 on,
// training_mode=1), which may ask for running_mean and running_var; the
// training outputs of opsets 7-13 (mean, var, saved_mean, saved_var) are
// refused as unsupported.
Status batch_norm_params(std::span<const int64_t> x, size_t outputs, const Attributes& a,
                         Shape* param_shape, bool* training) {
  LOOM_RETURN_IF_ERROR(check_rank_at_least(kBatchNorm, x, 2));
  *training = false;
  if (a.opset_before(14)) {
    if (a.find("training_mode") != nullptr) {
      return invalid_argument("BatchNormalization: attribute 'training_mode' exists from opset 14 on; "
                              "the node is of opset " + std::to_string(a.opset()));
    }
    if (outputs != 1) {
      return unimplemented("BatchNormalization: the training outputs of opsets 7-13 (mean, var, "
                           "saved_mean, saved_var) are not supported; node has " +
                           std::to_string(outputs) + " outputs");
    }
  } else {
    const int64_t mode = a.get_int("training_mode", 0);
    if (mode != 0 && mode != 1) {
      return invalid_argument("BatchNormalization: attribute 'training_mode' must be 0 or 1, got " +
                              std::to_string(mode));
    }
    *training = mode == 1;
    if (outputs > 3) {
      return invalid_argument("BatchNormalization: has " + std::to_string(outputs) +
                              " outputs; at most 3 (Y, running_mean, running_var)");
    }
    if (!*training && outputs != 1) {
      return invalid_argument("BatchNormalization: training_mode is 0 but the node has " +
                              std::to_string(outputs) +
                              " outputs; running_mean and running_var exist in training mode only");
    }
  }
  int64_t spatial = 1;
  if (a.opset_before(9)) spatial = a.get_int("spatial", 1);
  if (spatial != 0 && spatial != 1) {
    return invalid_argument("BatchNormalization: attribute 'spatial' must be 0 or 1, got " +
                            std::to_string(spatial));
  }
  if (spatial == 1) {
    *param_shape = {x[1]};
  } else {
    param_shape->assign(x.begin() + 1, x.end());
  }
  return Status();
}

// ------------------------------------------------------------ LayerNorm

constexpr std::string_view kLayerNorm = "LayerNormalization";

struct LayerGeom {
  int64_t axis = 0, outer = 1, inner = 1;
  Shape stat_shape;
};

Status layer_geometry(std::span<const int64_t> x, std::span<const int64_t> scale,
                      const std::span<const int64_t>* bias, const Attributes& a,
                      LayerGeom* g) {
  auto axis = normalize_axis(kLayerNorm, a.get_int("axis", -1), static_cast<int64_t>(x.size()));
  LOOM_RETURN_IF_ERROR(axis.status());
  const int64_t stash = a.get_int("stash_type", 1);
  if (stash != 1) {
    return unimplemented("LayerNormalization: stash_type " + std::to_string(stash) +
                         " is not supported (only 1, float)");
  }
  g->axis = *axis;
  g->outer = g->inner = 1;
  g->stat_shape.assign(x.begin(), x.end());
  for (size_t i = 0; i < x.size(); ++i) {
    if (static_cast<int64_t>(i) < g->axis) {
      g->outer *= x[i];
    } else {
      g->inner *= x[i];
      g->stat_shape[i] = 1;
    }
  }
  auto norm = x.subspan(static_cast<size_t>(g->axis));
  BroadcastPlan plan;
  for (auto [name, s] : {std::pair{"Scale", scale}, std::pair{"B", bias ? *bias : norm}}) {
    Status st = plan_broadcast(kLayerNorm, name, s, "X[axis:]", norm, &plan);
    if (!st.ok() || !std::equal(plan.shape().begin(), plan.shape().end(), norm.begin(),
                                norm.end())) {
      return invalid_argument(std::string("LayerNormalization: ") + name + " " +
                              shape_to_string(s) + " does not broadcast to " +
                              shape_to_string(norm));
    }
  }
  return Status();
}

}  // namespace

Result<std::vector<TensorType>> batch_norm_infer(std::span<const TensorType> in,
                                                 const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kBatchNorm, in.size(), 5, 5, 1, 1));
  static constexpr const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 0; i < 5; ++i) {
    LOOM_RETURN_IF_ERROR(check_dtype(kBatchNorm, kNames[i], in[i].dtype, {DType::kF32}));
  }
  Shape ps;
  bool training = false;
  LOOM_RETURN_IF_ERROR(batch_norm_params(in[0].shape, 1, a, &ps, &training));
  for (size_t i = 1; i < 5; ++i) {
    LOOM_RETURN_IF_ERROR(check_shape_is(kBatchNorm, kNames[i], in[i].shape, ps));
  }
  // Every output the opset allows is typed (4 optional ones before opset
  // 14, running_mean and running_var from it), so that a node asking for
  // them reaches run(), which computes opset 14's and refuses the others
  // with a clear kUnimplemented rather than an output-count mismatch.
  std::vector<TensorType> out{{DType::kF32, in[0].shape}};
  out.resize(a.opset_before(14) ? 5 : 3, TensorType{DType::kF32, ps});
  return out;
}

namespace {

// Training form: the statistics of X over every axis but the channel axis
// (population variance, as ONNX states), Y normalized with them, and the
// running statistics input * momentum + batch * (1 - momentum) into the
// optional outputs. Sums are taken in double.
Status batch_norm_training(std::span<const TensorRef> in, std::span<const TensorRef> out,
                           const Attributes& a, int64_t channels, int64_t inner) {
  const auto& x = in[0].shape;
  const int64_t count = x[0] * inner;
  if (count == 0) {
    return invalid_argument("BatchNormalization: training_mode needs X to hold at least one element "
                            "per channel; X has shape " + shape_to_string(x));
  }
  const double eps = a.get_float("epsilon", 1e-5f);
  const double momentum = a.get_float("momentum", 0.9f);
  const float *xs = in_data(in[0]), *scale = in_data(in[1]), *bias = in_data(in[2]),
              *mean_in = in_data(in[3]), *var_in = in_data(in[4]);
  float* y = out_data(out[0]);
  float* running_mean = out.size() > 1 && out[1].present() ? out_data(out[1]) : nullptr;
  float* running_var = out.size() > 2 && out[2].present() ? out_data(out[2]) : nullptr;
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0;
    for (int64_t n = 0; n < x[0]; ++n) {
      const float* p = xs + (n * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) sum += p[i];
    }
    const double mean = sum / static_cast<double>(count);
    double squares = 0;
    for (int64_t n = 0; n < x[0]; ++n) {
      const float* p = xs + (n * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) squares += (p[i] - mean) * (p[i] - mean);
    }
    const double var = squares / static_cast<double>(count);
    const double k = scale[c] / std::sqrt(var + eps);
    for (int64_t n = 0; n < x[0]; ++n) {
      const int64_t base = (n * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) {
        y[base + i] = static_cast<float>((xs[base + i] - mean) * k + bias[c]);
      }
    }
    if (running_mean) running_mean[c] = static_cast<float>(mean_in[c] * momentum + mean * (1 - momentum));
    if (running_var) running_var[c] = static_cast<float>(var_in[c] * momentum + var * (1 - momentum));
  }
  return Status();
}

}  // namespace

Status batch_norm_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                      const Attributes& a) {
  if (in.size() != 5 || out.empty()) {
    return invalid_argument("BatchNormalization: takes 5 inputs and at least 1 output, got " +
                            std::to_string(in.size()) + " and " + std::to_string(out.size()));
  }
  static constexpr const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 0; i < 5; ++i) {
    LOOM_RETURN_IF_ERROR(check_operand(kBatchNorm, kNames[i], in[i], {DType::kF32}));
  }
  LOOM_RETURN_IF_ERROR(check_operand(kBatchNorm, "Y", out[0], {DType::kF32}));
  // Outputs left out at the end do not count; one left out in the middle
  // (running_mean of Y, "", running_var) does.
  size_t outputs = 1;
  for (size_t i = 1; i < out.size(); ++i) {
    if (out[i].present()) outputs = i + 1;
  }
  Shape ps;
  bool training = false;
  LOOM_RETURN_IF_ERROR(batch_norm_params(in[0].shape, outputs, a, &ps, &training));
  for (size_t i = 1; i < 5; ++i) {
    LOOM_RETURN_IF_ERROR(check_shape_is(kBatchNorm, kNames[i], in[i].shape, ps));
  }
  LOOM_RETURN_IF_ERROR(check_output_shape(kBatchNorm, "Y", out[0].shape, in[0].shape));
  static constexpr const char* kRunning[] = {"running_mean", "running_var"};
  for (size_t i = 1; i < outputs; ++i) {
    if (!out[i].present()) continue;
    LOOM_RETURN_IF_ERROR(check_operand(kBatchNorm, kRunning[i - 1], out[i], {DType::kF32}));
    LOOM_RETURN_IF_ERROR(check_output_shape(kBatchNorm, kRunning[i - 1], out[i].shape, ps));
  }
  const auto& x = in[0].shape;
  int64_t params = 1, inner = 1;
  for (int64_t d : ps) params *= d;
  for (size_t i = 1 + ps.size(); i < x.size(); ++i) inner *= x[i];
  if (training) return batch_norm_training(in, out, a, params, inner);
  const float eps = a.get_float("epsilon", 1e-5f);
  const float *xs = in_data(in[0]), *scale = in_data(in[1]), *bias = in_data(in[2]),
              *mean = in_data(in[3]), *var = in_data(in[4]);
  float* y = out_data(out[0]);
  for (int64_t n = 0; n < x[0]; ++n) {
    for (int64_t p = 0; p < params; ++p) {
      const float k = scale[p] / std::sqrt(var[p] + eps);
      const int64_t base = (n * params + p) * inner;
      for (int64_t i = 0; i < inner; ++i) y[base + i] = (xs[base + i] - mean[p]) * k + bias[p];
    }
  }
  return Status();
}

// -------------------------------------------------------- InstanceNorm

Result<std::vector<TensorType>> instance_norm_infer(std::span<const TensorType> in,
                                                    const Attributes&) {
  constexpr std::string_view op = "InstanceNormalization";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 3, 3, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "input", in[0].dtype, {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "scale", in[1].dtype, {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "B", in[2].dtype, {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_rank_at_least(op, in[0].shape, 3));
  const Shape c{in[0].shape[1]};
  LOOM_RETURN_IF_ERROR(check_shape_is(op, "scale", in[1].shape, c));
  LOOM_RETURN_IF_ERROR(check_shape_is(op, "B", in[2].shape, c));
  return std::vector<TensorType>{{DType::kF32, in[0].shape}};
}

Status instance_norm_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                         const Attributes& a) {
  constexpr std::string_view op = "InstanceNormalization";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 3, 3, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand(op, "input", in[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(op, "scale", in[1], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(op, "B", in[2], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(op, "output", out[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_rank_at_least(op, in[0].shape, 3));
  const Shape c{in[0].shape[1]};
  LOOM_RETURN_IF_ERROR(check_shape_is(op, "scale", in[1].shape, c));
  LOOM_RETURN_IF_ERROR(check_shape_is(op, "B", in[2].shape, c));
  LOOM_RETURN_IF_ERROR(check_output_shape(op, "output", out[0].shape, in[0].shape));
  const double eps = a.get_float("epsilon", 1e-5f);
  int64_t inner = 1;
  for (size_t i = 2; i < in[0].shape.size(); ++i) inner *= in[0].shape[i];
  const float *x = in_data(in[0]), *scale = in_data(in[1]), *bias = in_data(in[2]);
  float* y = out_data(out[0]);
  const int64_t planes = in[0].shape[0] * c[0];
  for (int64_t p = 0; p < planes && inner > 0; ++p) {
    const float* xp = x + p * inner;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < inner; ++i) sum += xp[i];
    const double mean = sum / static_cast<double>(inner);
    for (int64_t i = 0; i < inner; ++i) sq += (xp[i] - mean) * (xp[i] - mean);
    const double k = 1.0 / std::sqrt(sq / static_cast<double>(inner) + eps);
    const int64_t ch = p % c[0];
    for (int64_t i = 0; i < inner; ++i) {
      y[p * inner + i] = static_cast<float>((xp[i] - mean) * k * scale[ch] + bias[ch]);
    }
  }
  return Status();
}

// ------------------------------------------------------------ LayerNorm

Result<std::vector<TensorType>> layer_norm_infer(std::span<const TensorType> in,
                                                 const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(kLayerNorm, in.size(), 2, 3, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(kLayerNorm, "X", in[0].dtype, {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_dtype(kLayerNorm, "Scale", in[1].dtype, {DType::kF32}));
  const bool has_b = in.size() == 3 && in[2].dtype != DType::kInvalid;
  std::span<const int64_t> b_shape;
  if (has_b) {
    LOOM_RETURN_IF_ERROR(check_dtype(kLayerNorm, "B", in[2].dtype, {DType::kF32}));
    b_shape = in[2].shape;
  }
  LayerGeom g;
  LOOM_RETURN_IF_ERROR(layer_geometry(in[0].shape, in[1].shape, has_b ? &b_shape : nullptr, a, &g));
  return std::vector<TensorType>{{DType::kF32, in[0].shape},
                                 {DType::kF32, g.stat_shape},
                                 {DType::kF32, g.stat_shape}};
}

Status layer_norm_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                      const Attributes& a) {
  if (in.size() < 2 || in.size() > 3 || out.empty() || out.size() > 3) {
    return invalid_argument("LayerNormalization: takes 2 to 3 inputs and 1 to 3 outputs, got " +
                            std::to_string(in.size()) + " and " + std::to_string(out.size()));
  }
  LOOM_RETURN_IF_ERROR(check_operand(kLayerNorm, "X", in[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(kLayerNorm, "Scale", in[1], {DType::kF32}));
  const bool has_b = in.size() == 3 && in[2].present();
  std::span<const int64_t> b_shape;
  if (has_b) {
    LOOM_RETURN_IF_ERROR(check_operand(kLayerNorm, "B", in[2], {DType::kF32}));
    b_shape = in[2].shape;
  }
  LayerGeom g;
  LOOM_RETURN_IF_ERROR(layer_geometry(in[0].shape, in[1].shape, has_b ? &b_shape : nullptr, a, &g));
  LOOM_RETURN_IF_ERROR(check_operand(kLayerNorm, "Y", out[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_output_shape(kLayerNorm, "Y", out[0].shape, in[0].shape));
  float* stats[2] = {nullptr, nullptr};
  static constexpr const char* kStatNames[] = {"Mean", "InvStdDev"};
  for (size_t i = 1; i < out.size(); ++i) {
    if (!out[i].present()) continue;
    LOOM_RETURN_IF_ERROR(check_operand(kLayerNorm, kStatNames[i - 1], out[i], {DType::kF32}));
    LOOM_RETURN_IF_ERROR(
        check_output_shape(kLayerNorm, kStatNames[i - 1], out[i].shape, g.stat_shape));
    stats[i - 1] = out_data(out[i]);
  }
  auto norm = in[0].shape.subspan(static_cast<size_t>(g.axis));
  BroadcastPlan sp, bp;
  LOOM_RETURN_IF_ERROR(plan_broadcast(kLayerNorm, "X[axis:]", norm, "Scale", in[1].shape, &sp));
  if (has_b) LOOM_RETURN_IF_ERROR(plan_broadcast(kLayerNorm, "X[axis:]", norm, "B", b_shape, &bp));
  const double eps = a.get_float("epsilon", 1e-5f);
  const float *x = in_data(in[0]), *scale = in_data(in[1]);
  const float* bias = has_b ? in_data(in[2]) : nullptr;
  float* y = out_data(out[0]);
  for (int64_t o = 0; o < g.outer; ++o) {
    const float* xo = x + o * g.inner;
    float* yo = y + o * g.inner;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < g.inner; ++i) sum += xo[i];
    const double mean = g.inner > 0 ? sum / static_cast<double>(g.inner) : 0.0;
    for (int64_t i = 0; i < g.inner; ++i) sq += (xo[i] - mean) * (xo[i] - mean);
    const double inv = 1.0 / std::sqrt((g.inner > 0 ? sq / static_cast<double>(g.inner) : 0.0) + eps);
    for_each_broadcast(sp, [&](int64_t i, int64_t, int64_t is) {
      yo[i] = static_cast<float>((xo[i] - mean) * inv * scale[is]);
    });
    if (bias != nullptr) {
      for_each_broadcast(bp, [&](int64_t i, int64_t, int64_t ib) { yo[i] += bias[ib]; });
    }
    if (stats[0] != nullptr) stats[0][o] = static_cast<float>(mean);
    if (stats[1] != nullptr) stats[1][o] = static_cast<float>(inv);
  }
  return Status();
}

// --------------------------------------------------------- LpNormalization

namespace {

Result<int64_t> lp_axis(std::span<const int64_t> x, const Attributes& a, int64_t* p) {
  *p = a.get_int("p", 2);
  if (*p != 1 && *p != 2) {
    return invalid_argument("LpNormalization: attribute 'p' must be 1 or 2, got " +
                            std::to_string(*p));
  }
  return normalize_axis("LpNormalization", a.get_int("axis", -1), static_cast<int64_t>(x.size()));
}

}  // namespace

Result<std::vector<TensorType>> lp_norm_infer(std::span<const TensorType> in,
                                              const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity("LpNormalization", in.size(), 1, 1, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype("LpNormalization", "input", in[0].dtype, {DType::kF32}));
  int64_t p;
  LOOM_RETURN_IF_ERROR(lp_axis(in[0].shape, a, &p).status());
  return std::vector<TensorType>{{DType::kF32, in[0].shape}};
}

Status lp_norm_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                   const Attributes& a) {
  constexpr std::string_view op = "LpNormalization";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 1, 1, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand(op, "input", in[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(op, "output", out[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_output_shape(op, "output", out[0].shape, in[0].shape));
  int64_t p;
  auto axis = lp_axis(in[0].shape, a, &p);
  LOOM_RETURN_IF_ERROR(axis.status());
  int64_t outer = 1, len = in[0].shape[static_cast<size_t>(*axis)], inner = 1;
  for (int64_t i = 0; i < *axis; ++i) outer *= in[0].shape[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(*axis) + 1; i < in[0].shape.size(); ++i) {
    inner *= in[0].shape[i];
  }
  const float* x = in_data(in[0]);
  float* y = out_data(out[0]);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * len * inner + i;
      double norm = 0;
      for (int64_t k = 0; k < len; ++k) {
        const double v = x[base + k * inner];
        norm += p == 1 ? std::fabs(v) : v * v;
      }
      if (p == 2) norm = std::sqrt(norm);
      for (int64_t k = 0; k < len; ++k) {
        y[base + k * inner] = norm == 0 ? 0.0f : static_cast<float>(x[base + k * inner] / norm);
      }
    }
  }
  return Status();
}

// ------------------------------------------------ MeanVarianceNormalization

namespace {

// A bit per dimension: set when the statistics reduce over it.
Result<uint32_t> mvn_axes(std::span<const int64_t> x, const Attributes& a) {
  std::vector<int64_t> axes = a.find("axes") ? a.get_ints("axes") : std::vector<int64_t>{0, 2, 3};
  uint32_t mask = 0;
  for (int64_t ax : axes) {
    auto n = normalize_axis("MeanVarianceNormalization", ax, static_cast<int64_t>(x.size()));
    LOOM_RETURN_IF_ERROR(n.status());
    mask |= 1u << *n;
  }
  return mask;
}

}  // namespace

Result<std::vector<TensorType>> mean_variance_norm_infer(std::span<const TensorType> in,
                                                         const Attributes& a) {
  constexpr std::string_view op = "MeanVarianceNormalization";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 1, 1, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "X", in[0].dtype, {DType::kF32}));
  if (in[0].shape.size() > kMaxKernelRank) {
    return invalid_argument("MeanVarianceNormalization: rank above 16");
  }
  LOOM_RETURN_IF_ERROR(mvn_axes(in[0].shape, a).status());
  return std::vector<TensorType>{{DType::kF32, in[0].shape}};
}

Status mean_variance_norm_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                              const Attributes& a) {
  constexpr std::string_view op = "MeanVarianceNormalization";
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 1, 1, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand(op, "X", in[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(op, "Y", out[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_output_shape(op, "Y", out[0].shape, in[0].shape));
  const auto& shape = in[0].shape;
  if (shape.size() > kMaxKernelRank) return invalid_argument("MeanVarianceNormalization: rank above 16");
  auto mask = mvn_axes(shape, a);
  LOOM_RETURN_IF_ERROR(mask.status());
  // Each element's statistics group is its index over the kept dimensions.
  int64_t groups = 1, total = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    total *= shape[d];
    if (!(*mask & (1u << d))) groups *= shape[d];
  }
  if (total == 0) return Status();
  std::vector<double> sum(static_cast<size_t>(groups), 0.0), sq(static_cast<size_t>(groups), 0.0);
  std::vector<int64_t> group_of(static_cast<size_t>(total));
  std::array<int64_t, kMaxKernelRank> idx{};
  for (int64_t e = 0; e < total; ++e) {
    int64_t gi = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (!(*mask & (1u << d))) gi = gi * shape[d] + idx[d];
    }
    group_of[static_cast<size_t>(e)] = gi;
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  const float* x = in_data(in[0]);
  float* y = out_data(out[0]);
  for (int64_t e = 0; e < total; ++e) {
    sum[static_cast<size_t>(group_of[static_cast<size_t>(e)])] += x[e];
    sq[static_cast<size_t>(group_of[static_cast<size_t>(e)])] += double{x[e]} * x[e];
  }
  const double count = static_cast<double>(total / groups);
  for (int64_t e = 0; e < total; ++e) {
    const size_t gi = static_cast<size_t>(group_of[static_cast<size_t>(e)]);
    const double mean = sum[gi] / count;
    const double var = std::max(0.0, sq[gi] / count - mean * mean);
    y[e] = static_cast<float>((x[e] - mean) / (std::sqrt(var) + 1e-9));
  }
  return Status();
}

}  // namespace loom::kernels::nn
