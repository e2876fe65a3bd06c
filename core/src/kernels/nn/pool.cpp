// MaxPool, AveragePool, LpPool and their Global forms. One window walk
// (pool_loop) feeds an accumulator per output element; the accumulators
// differ (max with its index, sum and count, sum of |x|^p).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/checks.hpp"
#include "kernels/nn/nn.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::nn {
namespace {

// The window positions k in [0, kernel) whose coordinate start + k * dil
// lies in [lo, hi), as [*first, *last): computed, not searched, so that a
// huge kernel_shape over huge pads costs nothing for the positions outside.
void window_range(int64_t start, int64_t kernel, int64_t dil, int64_t lo, int64_t hi,
                  int64_t* first, int64_t* last) {
  int64_t f = start >= lo ? 0 : (lo - start + dil - 1) / dil;
  int64_t l = hi <= start ? 0 : (hi - start + dil - 1) / dil;
  if (l > kernel) l = kernel;
  if (f > l) f = l;
  *first = f;
  *last = l;
}

// For each plane (N*C of them) and output position: acc.reset(), then
// acc.add(plane, i0, i1, i2) for every window element inside the input,
// then acc.finish(out_index, valid, padded), where `padded` counts the
// window elements inside the padded input.
template <typename Acc>
void pool_loop(const Window& w, int64_t planes, Acc& acc) {
  int64_t out_index = 0;
  std::array<int64_t, kMaxSpatial> first{}, last{};
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t o0 = 0; o0 < w.out[0]; ++o0) {
      for (int64_t o1 = 0; o1 < w.out[1]; ++o1) {
        for (int64_t o2 = 0; o2 < w.out[2]; ++o2, ++out_index) {
          const int64_t o[kMaxSpatial] = {o0, o1, o2};
          int64_t start[kMaxSpatial];
          int64_t padded = 1;
          for (size_t d = 0; d < kMaxSpatial; ++d) {
            start[d] = o[d] * w.stride[d] - w.pad_begin[d];
            int64_t pf, pl;
            window_range(start[d], w.kernel[d], w.dilation[d], -w.pad_begin[d],
                         w.in[d] + w.pad_end[d], &pf, &pl);
            padded *= pl - pf;
            window_range(start[d], w.kernel[d], w.dilation[d], 0, w.in[d], &first[d], &last[d]);
          }
          acc.reset();
          int64_t valid = 0;
          for (int64_t k0 = first[0]; k0 < last[0]; ++k0) {
            const int64_t i0 = start[0] + k0 * w.dilation[0];
            for (int64_t k1 = first[1]; k1 < last[1]; ++k1) {
              const int64_t i1 = start[1] + k1 * w.dilation[1];
              for (int64_t k2 = first[2]; k2 < last[2]; ++k2) {
                acc.add(p, i0, i1, start[2] + k2 * w.dilation[2]);
                ++valid;
              }
            }
          }
          acc.finish(out_index, valid, padded);
        }
      }
    }
  }
}

struct PoolGeom {
  Window w;
  int64_t planes = 0;
  Shape out;
};

// X [N, C, spatial...] with kernel_shape (required) and the window
// attributes; `global` uses the whole spatial extent and ignores them.
Status pool_geometry(std::string_view op, std::span<const int64_t> x, const Attributes& a,
                     bool global, bool allow_ceil, PoolGeom* g) {
  LOOM_RETURN_IF_ERROR(check_spatial_input(op, "X", x));
  auto spatial = x.subspan(2);
  if (global) {
    g->w = Window{};
    g->w.rank = spatial.size();
    for (size_t i = 0; i < spatial.size(); ++i) {
      g->w.in[i] = g->w.kernel[i] = spatial[i];
      if (spatial[i] == 0) {
        return invalid_argument(std::string(op) + ": X " + shape_to_string(x) +
                                " has an empty spatial dimension");
      }
    }
  } else {
    if (a.find("kernel_shape") == nullptr) {
      return invalid_argument(std::string(op) + ": attribute 'kernel_shape' is required");
    }
    std::vector<int64_t> ks = a.get_ints("kernel_shape");
    if (ks.size() != spatial.size()) {
      return invalid_argument(std::string(op) + ": attribute 'kernel_shape' " +
                              shape_to_string(ks) + " does not match X " + shape_to_string(x));
    }
    LOOM_RETURN_IF_ERROR(forward_window(op, spatial, ks, a, allow_ceil, &g->w));
  }
  g->planes = x[0] * x[1];
  g->out = {x[0], x[1]};
  for (size_t i = 0; i < spatial.size(); ++i) g->out.push_back(g->w.out[i]);
  return Status();
}

// ------------------------------------------------------------------ MaxPool

template <typename T>
struct MaxAcc {
  const T* x;
  T* y;
  int64_t* indices;  // null when the Indices output is not asked for
  const Window* w;
  bool column_major;
  T best{};
  int64_t best_index = 0;
  bool any = false;
  void reset() { any = false; }
  void add(int64_t p, int64_t i0, int64_t i1, int64_t i2) {
    const int64_t plane = w->in_size();
    const int64_t idx = p * plane + (i0 * w->in[1] + i1) * w->in[2] + i2;
    const T v = x[idx];
    if (!any || v > best) {
      best = v;
      any = true;
      if (column_major) {
        // The spatial coordinates reversed: the first varies fastest.
        const int64_t* in = w->in.data();
        int64_t c = 0;
        const int64_t coord[3] = {i0, i1, i2};
        int64_t stride = 1;
        for (size_t d = 0; d < w->rank; ++d) {
          c += coord[d] * stride;
          stride *= in[d];
        }
        best_index = p * plane + c;
      } else {
        best_index = idx;
      }
    }
  }
  void finish(int64_t o, int64_t, int64_t) {
    // A window wholly in the padding (possible only with odd pads) reads
    // as the lowest value.
    y[o] = any ? best : std::numeric_limits<T>::lowest();
    if (indices != nullptr) indices[o] = any ? best_index : -1;
  }
};

constexpr std::initializer_list<DType> kMaxPoolTypes = {DType::kF32, DType::kF64, DType::kI8,
                                                        DType::kU8};

template <typename Fn>
Status visit_pool_dtype(std::string_view op, DType d, Fn&& fn) {
  switch (d) {
    case DType::kF32: return fn.template operator()<float>();
    case DType::kF64: return fn.template operator()<double>();
    case DType::kI8: return fn.template operator()<int8_t>();
    case DType::kU8: return fn.template operator()<uint8_t>();
    default: return check_dtype(op, "X", d, kMaxPoolTypes);
  }
}

Status max_pool_common(std::string_view op, bool global, std::span<const TensorRef> in,
                       std::span<const TensorRef> out, const Attributes& a) {
  if (in.size() != 1 || out.empty() || out.size() > (global ? 1u : 2u)) {
    return invalid_argument(std::string(op) + ": takes 1 input and " +
                            (global ? "1 output" : "1 or 2 outputs") + ", got " +
                            std::to_string(in.size()) + " and " + std::to_string(out.size()));
  }
  LOOM_RETURN_IF_ERROR(check_operand(op, "X", in[0], kMaxPoolTypes));
  LOOM_RETURN_IF_ERROR(check_operand(op, "Y", out[0], {in[0].dtype}));
  PoolGeom g;
  LOOM_RETURN_IF_ERROR(pool_geometry(op, in[0].shape, a, global, true, &g));
  LOOM_RETURN_IF_ERROR(check_output_shape(op, "Y", out[0].shape, g.out));
  const int64_t order = a.get_int("storage_order", 0);
  if (order != 0 && order != 1) {
    return invalid_argument(std::string(op) + ": attribute 'storage_order' must be 0 or 1, got " +
                            std::to_string(order));
  }
  int64_t* indices = nullptr;
  if (out.size() == 2 && out[1].present()) {
    LOOM_RETURN_IF_ERROR(check_operand(op, "Indices", out[1], {DType::kI64}));
    LOOM_RETURN_IF_ERROR(check_output_shape(op, "Indices", out[1].shape, g.out));
    indices = static_cast<int64_t*>(out[1].data);
  }
  return visit_pool_dtype(op, in[0].dtype, [&]<typename T>() {
    MaxAcc<T> acc{static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), indices,
                  &g.w, order == 1};
    pool_loop(g.w, g.planes, acc);
    return Status();
  });
}

Result<std::vector<TensorType>> max_pool_infer_common(std::string_view op, bool global,
                                                      std::span<const TensorType> in,
                                                      const Attributes& a) {
  if (in.size() != 1) {
    return invalid_argument(std::string(op) + ": takes 1 input, got " + std::to_string(in.size()));
  }
  LOOM_RETURN_IF_ERROR(check_dtype(op, "X", in[0].dtype, kMaxPoolTypes));
  PoolGeom g;
  LOOM_RETURN_IF_ERROR(pool_geometry(op, in[0].shape, a, global, true, &g));
  std::vector<TensorType> out{{in[0].dtype, g.out}};
  if (!global) out.push_back({DType::kI64, g.out});
  return out;
}

// --------------------------------------------------------- Average / Lp

struct AverageAcc {
  const float* x;
  float* y;
  const Window* w;
  bool include_pad;
  float sum = 0;
  void reset() { sum = 0; }
  void add(int64_t p, int64_t i0, int64_t i1, int64_t i2) {
    sum += x[p * w->in_size() + (i0 * w->in[1] + i1) * w->in[2] + i2];
  }
  void finish(int64_t o, int64_t valid, int64_t padded) {
    const int64_t count = include_pad ? padded : valid;
    y[o] = count > 0 ? sum / static_cast<float>(count) : 0.0f;
  }
};

struct LpAcc {
  const float* x;
  float* y;
  const Window* w;
  float p_norm;
  float sum = 0;
  void reset() { sum = 0; }
  void add(int64_t p, int64_t i0, int64_t i1, int64_t i2) {
    sum += std::pow(std::fabs(x[p * w->in_size() + (i0 * w->in[1] + i1) * w->in[2] + i2]),
                    p_norm);
  }
  void finish(int64_t o, int64_t, int64_t) { y[o] = std::pow(sum, 1.0f / p_norm); }
};

enum class PoolKind { kAverage, kLp };

Status float_pool_run(std::string_view op, PoolKind kind, bool global,
                      std::span<const TensorRef> in, std::span<const TensorRef> out,
                      const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 1, 1, out.size(), 1));
  LOOM_RETURN_IF_ERROR(check_operand(op, "X", in[0], {DType::kF32}));
  LOOM_RETURN_IF_ERROR(check_operand(op, "Y", out[0], {DType::kF32}));
  PoolGeom g;
  LOOM_RETURN_IF_ERROR(pool_geometry(op, in[0].shape, a, global, kind == PoolKind::kAverage, &g));
  LOOM_RETURN_IF_ERROR(check_output_shape(op, "Y", out[0].shape, g.out));
  if (kind == PoolKind::kAverage) {
    const int64_t include = a.get_int("count_include_pad", 0);
    if (include != 0 && include != 1) {
      return invalid_argument(std::string(op) +
                              ": attribute 'count_include_pad' must be 0 or 1, got " +
                              std::to_string(include));
    }
    AverageAcc acc{in_data(in[0]), out_data(out[0]), &g.w, include == 1};
    pool_loop(g.w, g.planes, acc);
  } else {
    const int64_t p = a.get_int("p", 2);
    if (p < 1 || p > 64) {
      return invalid_argument(std::string(op) + ": attribute 'p' must be in [1, 64], got " +
                              std::to_string(p));
    }
    LpAcc acc{in_data(in[0]), out_data(out[0]), &g.w, static_cast<float>(p)};
    pool_loop(g.w, g.planes, acc);
  }
  return Status();
}

Result<std::vector<TensorType>> float_pool_infer(std::string_view op, PoolKind kind, bool global,
                                                 std::span<const TensorType> in,
                                                 const Attributes& a) {
  LOOM_RETURN_IF_ERROR(check_arity(op, in.size(), 1, 1, 1, 1));
  LOOM_RETURN_IF_ERROR(check_dtype(op, "X", in[0].dtype, {DType::kF32}));
  PoolGeom g;
  LOOM_RETURN_IF_ERROR(pool_geometry(op, in[0].shape, a, global, kind == PoolKind::kAverage, &g));
  return std::vector<TensorType>{{DType::kF32, g.out}};
}

}  // namespace

Status max_pool_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                    const Attributes& a) {
  return max_pool_common("MaxPool", false, in, out, a);
}
Result<std::vector<TensorType>> max_pool_infer(std::span<const TensorType> in,
                                               const Attributes& a) {
  return max_pool_infer_common("MaxPool", false, in, a);
}
Status global_max_pool_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                           const Attributes& a) {
  return max_pool_common("GlobalMaxPool", true, in, out, a);
}
Result<std::vector<TensorType>> global_max_pool_infer(std::span<const TensorType> in,
                                                      const Attributes& a) {
  return max_pool_infer_common("GlobalMaxPool", true, in, a);
}
Status average_pool_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                        const Attributes& a) {
  return float_pool_run("AveragePool", PoolKind::kAverage, false, in, out, a);
}
Result<std::vector<TensorType>> average_pool_infer(std::span<const TensorType> in,
                                                   const Attributes& a) {
  return float_pool_infer("AveragePool", PoolKind::kAverage, false, in, a);
}
Status global_average_pool_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                               const Attributes& a) {
  return float_pool_run("GlobalAveragePool", PoolKind::kAverage, true, in, out, a);
}
Result<std::vector<TensorType>> global_average_pool_infer(std::span<const TensorType> in,
                                                          const Attributes& a) {
  return float_pool_infer("GlobalAveragePool", PoolKind::kAverage, true, in, a);
}
Status lp_pool_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                   const Attributes& a) {
  return float_pool_run("LpPool", PoolKind::kLp, false, in, out, a);
}
Result<std::vector<TensorType>> lp_pool_infer(std::span<const TensorType> in,
                                              const Attributes& a) {
  return float_pool_infer("LpPool", PoolKind::kLp, false, in, a);
}
Status global_lp_pool_run(std::span<const TensorRef> in, std::span<const TensorRef> out,
                          const Attributes& a) {
  return float_pool_run("GlobalLpPool", PoolKind::kLp, true, in, out, a);
}
Result<std::vector<TensorType>> global_lp_pool_infer(std::span<const TensorType> in,
                                                     const Attributes& a) {
  return float_pool_infer("GlobalLpPool", PoolKind::kLp, true, in, a);
}

}  // namespace loom::kernels::nn
