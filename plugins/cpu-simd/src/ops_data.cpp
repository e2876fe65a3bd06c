// Format-3 operators: reductions, Gather with constant indices, Resize from a
// tap table, and ConvTranspose. Like ops_nn.cpp this file is compiled once
// per instruction set; the loops are written so that the compiler vectorizes
// their innermost runs (contiguous, no aliasing of input and output).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ops.hpp"

#ifndef LOOM_CPU_SIMD_ISA
#define LOOM_CPU_SIMD_ISA isa_baseline
#endif

// The 64-byte vector type below is passed between inline functions of this
// file only; GCC's note that its ABI differs without AVX-512 does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace loom::cpu_simd {
namespace LOOM_CPU_SIMD_ISA {
namespace {

int64_t dims_product(const std::vector<int64_t>& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d) n *= s[d];
  return n;
}

// ---------------------------------------------------------------- reductions

float reduce_init(Op op) {
  switch (op) {
    case Op::kReduceMax: return -std::numeric_limits<float>::infinity();
    case Op::kReduceMin: return std::numeric_limits<float>::infinity();
    default: return 0.0f;
  }
}

// acc = op(acc, v); Max and Min let a NaN through, as numpy does.
inline float reduce_step(Op op, float acc, float v) {
  switch (op) {
    case Op::kReduceMax: return (v > acc || v != v) ? v : acc;
    case Op::kReduceMin: return (v < acc || v != v) ? v : acc;
    default: return acc + v;
  }
}

// 16 floats as one GCC vector: a zmm register in the AVX-512 build, two ymm
// or four xmm in the others. Loops over plain float arrays of partial
// results stayed scalar; these compile to vector instructions everywhere.
typedef float Lanes __attribute__((vector_size(16 * sizeof(float))));
constexpr int64_t kLanes = 16;

inline Lanes load_lanes(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline Lanes splat(float f) { return Lanes{} + f; }

// Folds x[0, n) with `step(partials, values)` into 16 partial results, the
// tail into one more, then merges them with `merge(a, b)` (scalar).
template <typename Step, typename Merge>
float fold_run(const float* x, int64_t n, float init, Step step, Merge merge) {
  Lanes part = splat(init);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) part = step(part, load_lanes(x + i));
  Lanes tail = splat(init);
  for (; i < n; ++i) {
    Lanes v = splat(init);
    v[0] = x[i];
    tail[0] = step(tail, v)[0];
  }
  float acc = tail[0];
  for (int64_t l = 0; l < kLanes; ++l) acc = merge(acc, part[l]);
  return acc;
}

// A contiguous run of n values folded into one, with 16 independent partial
// results, so that the loop vectorizes and sums keep their accuracy. Max and
// Min let a NaN through, as numpy does.
float reduce_run(Op op, const float* x, int64_t n) {
  switch (op) {
    case Op::kReduceMax:
      return fold_run(
          x, n, reduce_init(op), [](Lanes a, Lanes v) { return (v > a) | (v != v) ? v : a; },
          [op](float a, float b) { return reduce_step(op, a, b); });
    case Op::kReduceMin:
      return fold_run(
          x, n, reduce_init(op), [](Lanes a, Lanes v) { return (v < a) | (v != v) ? v : a; },
          [op](float a, float b) { return reduce_step(op, a, b); });
    default:
      return fold_run(
          x, n, 0.0f, [](Lanes a, Lanes v) { return a + v; }, [](float a, float b) { return a + b; });
  }
}

// The plan's geometry (plan_data_node): the input walked as `blocks`
// alternating dims, `reduced[d]` telling which are folded; the output has
// the kept dims in order. Each output element accumulates over the reduced
// dims; the innermost dim is either a run folded into one value (reduced)
// or a run of outputs updated elementwise (kept).
void run_reduce(const NodePlan& p, float* const* t) {
  const float* x = t[p.inputs[0]];
  float* y = t[p.output];
  const BroadcastGeometry& g = p.transpose;  // dims of x; a_strides: x, b_strides: y
  const size_t rank = g.rank;
  const Op op = p.op;
  for (int64_t i = 0; i < p.count; ++i) y[i] = reduce_init(op);
  const bool inner_reduced = g.b_strides[rank - 1] == 0;
  const int64_t inner = g.dims[rank - 1];
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < rank; ++d) outer *= g.dims[d];
  std::array<int64_t, kMaxRank> idx{};
  for (int64_t o = 0; o < outer; ++o) {
    int64_t xo = 0, yo = 0;
    for (size_t d = 0; d + 1 < rank; ++d) {
      xo += idx[d] * g.a_strides[d];
      yo += idx[d] * g.b_strides[d];
    }
    const float* xr = x + xo;
    if (inner_reduced) {
      y[yo] = reduce_step(op, y[yo], reduce_run(op, xr, inner));
    } else {
      float* yr = y + yo;
      for (int64_t i = 0; i < inner; ++i) yr[i] = reduce_step(op, yr[i], xr[i]);
    }
    for (size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < g.dims[d]) break;
      idx[d] = 0;
    }
  }
  if (op == Op::kReduceMean) {
    const float scale = 1.0f / static_cast<float>(p.n);
    for (int64_t i = 0; i < p.count; ++i) y[i] *= scale;
  }
}

// Gather: outer blocks of the data, for each index a run of `inner` values.
void run_gather(const NodePlan& p, float* const* t) {
  const float* x = t[p.inputs[0]];
  float* y = t[p.output];
  const int64_t extent = p.n, inner = p.inner;
  const size_t count = p.chunks.size();
  for (int64_t o = 0; o < p.outer; ++o) {
    const float* xo = x + o * extent * inner;
    for (size_t i = 0; i < count; ++i, y += inner) {
      std::memcpy(y, xo + p.chunks[i] * inner, sizeof(float) * static_cast<size_t>(inner));
    }
  }
}

// ------------------------------------------------------------------ Resize

// One output row (the last axis) for each combination of the outer axes'
// taps: nearest copies x[row][tap], linear blends the two taps of every
// resized axis. p.a_offsets holds, per axis a, the output positions' taps
// (i0, i1) starting at p.b_offsets[a]; p.weights (linear) the weight of i1,
// per axis starting at p.w_offsets[a].
void run_resize(const NodePlan& p, float* const* t) {
  const float* x = t[p.inputs[0]];
  float* y = t[p.output];
  const BroadcastGeometry& g = p.transpose;  // dims: output; a_strides: input strides
  const size_t rank = g.rank;
  const int64_t width = g.dims[rank - 1];
  const int64_t* taps_last = p.a_offsets.data() + p.b_offsets[rank - 1];
  const float* w_last = p.weights.data() + p.w_offsets[rank - 1];
  const bool linear = p.linear;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= g.dims[d];
  // Outer axes resized by linear interpolation contribute two taps each.
  size_t blended[kMaxRank];
  size_t n_blended = 0;
  for (size_t d = 0; d + 1 < rank; ++d) {
    if (linear && p.resized[d]) blended[n_blended++] = d;
  }
  std::array<int64_t, kMaxRank> idx{};
  for (int64_t r = 0; r < rows; ++r, y += width) {
    // The input offset of the nearest (or lower) tap of every outer axis.
    int64_t base = 0;
    for (size_t d = 0; d + 1 < rank; ++d) {
      base += p.a_offsets[p.b_offsets[d] + 2 * idx[d]] * g.a_strides[d];
    }
    if (n_blended == 0) {
      const float* xr = x + base;
      if (!linear) {
        for (int64_t c = 0; c < width; ++c) y[c] = xr[taps_last[2 * c]];
      } else {
        for (int64_t c = 0; c < width; ++c) {
          const float a = xr[taps_last[2 * c]], b = xr[taps_last[2 * c + 1]];
          y[c] = a + (b - a) * w_last[c];
        }
      }
    } else {
      for (int64_t c = 0; c < width; ++c) y[c] = 0.0f;
      // Every corner of the outer axes' taps, weighted by the product of
      // its per-axis weights.
      for (size_t corner = 0; corner < (size_t{1} << n_blended); ++corner) {
        int64_t off = base;
        float weight = 1.0f;
        for (size_t b = 0; b < n_blended; ++b) {
          const size_t d = blended[b];
          const int64_t* tap = p.a_offsets.data() + p.b_offsets[d] + 2 * idx[d];
          const float wd = p.weights[static_cast<size_t>(p.w_offsets[d] + idx[d])];
          if (corner >> b & 1) {
            off += (tap[1] - tap[0]) * g.a_strides[d];
            weight *= wd;
          } else {
            weight *= 1.0f - wd;
          }
        }
        const float* xr = x + off;
        for (int64_t c = 0; c < width; ++c) {
          const float a = xr[taps_last[2 * c]], b = xr[taps_last[2 * c + 1]];
          y[c] += weight * (a + (b - a) * w_last[c]);
        }
      }
    }
    for (size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < g.dims[d]) break;
      idx[d] = 0;
    }
  }
}

// ------------------------------------------------------------------- Slice

// Rows of the output's last dim: contiguous input runs (step 1) are copied
// with memcpy, others gathered with their stride.
void run_slice(const NodePlan& p, float* const* t) {
  if (p.count != 0) walk_elements(p.transpose, t[p.inputs[0]] + p.outer, t[p.output], p.count);
}

// ----------------------------------------------------------- ConvTranspose

// Output channels are independent: flat = batch * out_channels + channel.
// Each output element gathers the input positions whose stride-spread
// kernel window covers it (the transpose of Conv's gather), so no two
// workers write the same element.
void conv_transpose_range(const NodePlan& p, const float* x, const float* w, const float* bias,
                          float* y, int64_t begin, int64_t end) {
  const Window& win = p.window;
  const int64_t od = p.out_sp[0], oh = p.out_sp[1], ow = p.out_sp[2];
  const int64_t id = p.in_sp[0], ih = p.in_sp[1], iw = p.in_sp[2];
  const int64_t kd = win.kernel[0], kh = win.kernel[1], kw = win.kernel[2];
  const int64_t cin_g = p.in_channels / win.group, cout_g = p.out_channels / win.group;
  const int64_t in_plane = id * ih * iw, out_plane = od * oh * ow, k_plane = kd * kh * kw;
  for (int64_t flat = begin; flat < end; ++flat) {
    const int64_t nb = flat / p.out_channels, oc = flat % p.out_channels;
    const int64_t g = oc / cout_g, ocg = oc % cout_g;
    const float* xg = x + (nb * p.in_channels + g * cin_g) * in_plane;
    float* yc = y + flat * out_plane;
    const float b0 = bias != nullptr ? bias[oc] : 0.0f;
    for (int64_t z = 0; z < od; ++z) {
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t c = 0; c < ow; ++c) {
          float sum = b0;
          for (int64_t a = 0; a < kd; ++a) {
            const int64_t zs = z + win.pad_begin[0] - a * win.dilation[0];
            if (zs < 0 || zs % win.stride[0] != 0 || zs / win.stride[0] >= id) continue;
            const int64_t zi = zs / win.stride[0];
            for (int64_t b = 0; b < kh; ++b) {
              const int64_t rs = r + win.pad_begin[1] - b * win.dilation[1];
              if (rs < 0 || rs % win.stride[1] != 0 || rs / win.stride[1] >= ih) continue;
              const int64_t ri = rs / win.stride[1];
              for (int64_t e = 0; e < kw; ++e) {
                const int64_t cs = c + win.pad_begin[2] - e * win.dilation[2];
                if (cs < 0 || cs % win.stride[2] != 0 || cs / win.stride[2] >= iw) continue;
                const int64_t ci = cs / win.stride[2];
                const int64_t tap = (a * kh + b) * kw + e;
                const float* xp = xg + (zi * ih + ri) * iw + ci;
                // weight [C_in, C_out / group, k...]
                const float* wp = w + (g * cin_g * cout_g + ocg) * k_plane + tap;
                for (int64_t ic = 0; ic < cin_g; ++ic) {
                  sum += xp[ic * in_plane] * wp[ic * cout_g * k_plane];
                }
              }
            }
          }
          yc[(z * oh + r) * ow + c] = sum;
        }
      }
    }
  }
}

void run_conv_transpose(const NodePlan& p, float* const* t, ThreadPool& pool) {
  const float* x = t[p.inputs[0]];
  const float* w = t[p.inputs[1]];
  const float* bias = p.inputs.size() == 3 ? t[p.inputs[2]] : nullptr;
  float* y = t[p.output];
  const int64_t channels = p.batch * p.out_channels;
  if (channels == 0 || p.count == 0) return;
  auto body = [&](size_t begin, size_t end) {
    conv_transpose_range(p, x, w, bias, y, static_cast<int64_t>(begin), static_cast<int64_t>(end));
  };
  const int64_t k_elems = p.window.kernel[0] * p.window.kernel[1] * p.window.kernel[2] *
                          (p.in_channels / p.window.group);
  if (p.count * k_elems < kParallelThreshold) {
    body(0, static_cast<size_t>(channels));
  } else {
    pool.parallel_for(static_cast<size_t>(channels), 1, body);
  }
}

}  // namespace

void layer_norm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows,
                int64_t n, float epsilon, ThreadPool& pool) {
  auto body = [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) {
      const float* xr = x + static_cast<int64_t>(r) * n;
      float* yr = y + static_cast<int64_t>(r) * n;
      const float mean = reduce_run(Op::kReduceSum, xr, n) / static_cast<float>(n);
      // The variance from the deviations (two passes over a row in cache),
      // as the exporters' pattern computes it, not E[x^2] - mean^2.
      const Lanes m = splat(mean);
      const float var = fold_run(
          xr, n, 0.0f,
          [m](Lanes a, Lanes v) {
            const Lanes d = v - m;
            return a + d * d;
          },
          [](float a, float b) { return a + b; });
      const float inv = 1.0f / std::sqrt(var / static_cast<float>(n) + epsilon);
      if (gamma != nullptr && beta != nullptr) {
        for (int64_t k = 0; k < n; ++k) yr[k] = (xr[k] - mean) * inv * gamma[k] + beta[k];
      } else if (gamma != nullptr) {
        for (int64_t k = 0; k < n; ++k) yr[k] = (xr[k] - mean) * inv * gamma[k];
      } else {
        for (int64_t k = 0; k < n; ++k) yr[k] = (xr[k] - mean) * inv;
      }
    }
  };
  const size_t grain = std::max<size_t>(1, (size_t{1} << 14) / static_cast<size_t>(n == 0 ? 1 : n));
  if (rows * n < (int64_t{1} << 15)) {
    body(0, static_cast<size_t>(rows));
  } else {
    pool.parallel_for(static_cast<size_t>(rows), grain, body);
  }
}

void plan_data_node(const BlobGraph& graph, const BlobNode& node, NodePlan* p) {
  const std::vector<int64_t>& x = graph.tensors[node.inputs[0]].shape;
  const std::vector<int64_t>& out = graph.tensors[node.outputs[0]].shape;
  if (is_reduce(node.op)) {
    // Merge neighbouring dims that are both reduced or both kept; the input
    // walks them with its strides, the output with 0 on reduced dims.
    std::vector<bool> reduced(x.size(), false);
    for (size_t i = 1; i < node.ints.size(); ++i) reduced[static_cast<size_t>(node.ints[i])] = true;
    BroadcastGeometry& g = p->transpose;
    std::vector<int64_t> dims;
    std::vector<bool> kinds;
    for (size_t d = 0; d < x.size(); ++d) {
      if (x[d] == 1) continue;  // walks nowhere either way
      if (!dims.empty() && kinds.back() == reduced[d]) {
        dims.back() *= x[d];
      } else {
        dims.push_back(x[d]);
        kinds.push_back(reduced[d]);
      }
    }
    if (dims.empty()) {
      dims.push_back(1);
      kinds.push_back(false);
    }
    g.rank = dims.size();
    int64_t xs = 1, ys = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      g.dims[d] = dims[d];
      g.a_strides[d] = xs;
      g.b_strides[d] = kinds[d] ? 0 : ys;
      xs *= dims[d];
      if (!kinds[d]) ys *= dims[d];
    }
    p->n = 1;  // elements folded into each output
    for (size_t i = 1; i < node.ints.size(); ++i) p->n *= x[static_cast<size_t>(node.ints[i])];
    return;
  }
  switch (node.op) {
    case Op::kGather: {
      const size_t axis = static_cast<size_t>(node.axis);
      p->outer = dims_product(x, 0, axis);
      p->n = x[axis];
      p->inner = dims_product(x, axis + 1, x.size());
      const size_t r = static_cast<size_t>(node.ints[0]);
      p->chunks.assign(node.ints.begin() + 1 + static_cast<int64_t>(r), node.ints.end());
      return;
    }
    case Op::kResize: {
      BroadcastGeometry& g = p->transpose;
      g.rank = x.size();
      int64_t stride = 1;
      for (size_t d = x.size(); d-- > 0;) {
        g.dims[d] = out[d];
        g.a_strides[d] = stride;
        stride *= x[d];
      }
      p->linear = node.ints[0] == 1;
      const size_t rank = x.size();
      p->a_offsets.assign(node.ints.begin() + 1 + static_cast<int64_t>(rank), node.ints.end());
      p->weights = node.floats;
      int64_t at = 0, wat = 0;
      for (size_t a = 0; a < rank; ++a) {
        p->b_offsets.push_back(at);
        p->w_offsets.push_back(wat);
        bool identity = out[a] == x[a];
        for (int64_t o = 0; o < out[a]; ++o) {
          const int64_t* tap = p->a_offsets.data() + at + 2 * o;
          const float wv = p->linear ? p->weights[static_cast<size_t>(wat + o)] : 0.0f;
          identity = identity && tap[0] == o && (wv == 0.0f || tap[1] == o);
        }
        p->resized[a] = !identity;
        at += 2 * out[a];
        wat += p->linear ? out[a] : 0;
      }
      return;
    }
    case Op::kSlice: {
      // Output dims, and per output dim the input stride times the step;
      // the start offset in p->outer.
      BroadcastGeometry& g = p->transpose;
      const size_t rank = x.size();
      g.rank = rank;
      int64_t stride = 1, offset = 0;
      for (size_t d = rank; d-- > 0;) {
        g.dims[d] = out[d];
        g.a_strides[d] = stride * node.ints[rank + d];
        offset += stride * node.ints[d];
        stride *= x[d];
      }
      p->outer = offset;
      return;
    }
    case Op::kLayerNormalization: {
      const size_t axis = static_cast<size_t>(node.axis);
      p->outer = dims_product(x, 0, axis);
      p->n = dims_product(x, axis, x.size());
      return;
    }
    case Op::kConvTranspose:
      plan_window(node, x, out, p);
      return;
    default:
      plan_typed_node(graph, node, p);
      return;
  }
}

void run_data_node(const NodePlan& p, float* const* t, ThreadPool& pool) {
  if (is_reduce(p.op)) return run_reduce(p, t);
  switch (p.op) {
    case Op::kGather: return run_gather(p, t);
    case Op::kResize: return run_resize(p, t);
    case Op::kConvTranspose: return run_conv_transpose(p, t, pool);
    case Op::kSlice: return run_slice(p, t);
    case Op::kLayerNormalization:
      return layer_norm(t[p.inputs[0]], t[p.inputs[1]], p.inputs.size() == 3 ? t[p.inputs[2]] : nullptr,
                        t[p.output], p.outer, p.n, p.alpha, pool);
    default: return run_typed_node(p, t, pool);
  }
}

}  // namespace LOOM_CPU_SIMD_ISA
}  // namespace loom::cpu_simd
