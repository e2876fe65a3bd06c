// The format-2 operators: elementwise, softmax family, data movement,
// convolution, pooling and batch normalization. Plain loops, written for
// ONNX-exact results first (speed is a later issue); Conv spreads output
// channels over the pool when the work is large.
#if defined(__AVX__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ops.hpp"
#include "vec_math.hpp"

#ifndef LOOM_CPU_SIMD_ISA
#define LOOM_CPU_SIMD_ISA isa_baseline
#endif

namespace loom::cpu_simd {
namespace LOOM_CPU_SIMD_ISA {
namespace {

int64_t product(const std::vector<int64_t>& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d) n *= s[d];
  return n;
}

// Rows of at least this many elements in all go to one worker.
constexpr size_t kElementGrain = size_t{1} << 16;

// y = f(a, b) over the broadcast geometry for output rows [row_begin,
// row_end), a row being the innermost dimension, a contiguous run of y.
template <typename F>
void binary_rows(const BroadcastGeometry& g, const float* a, const float* b, float* y, F f,
                 int64_t row_begin, int64_t row_end, int64_t col_begin = 0, int64_t col_end = -1) {
  std::array<int64_t, kMaxRank> index{};
  const size_t last = g.rank - 1;
  const int64_t inner = g.dims[last], as = g.a_strides[last], bs = g.b_strides[last];
  int64_t ao = 0, bo = 0;
  for (int64_t r = row_begin, d = static_cast<int64_t>(last); d-- > 0;) {
    index[d] = r % g.dims[d];
    r /= g.dims[d];
    ao += index[d] * g.a_strides[d];
    bo += index[d] * g.b_strides[d];
  }
  // A column range [col_begin, col_end) of each row (all of it by default).
  const int64_t c0 = col_begin, n = (col_end < 0 ? inner : col_end) - col_begin;
  for (int64_t row = row_begin; row < row_end; ++row) {
    float* out = y + row * inner + c0;
    const float* ar = a + ao + c0 * as;
    const float* br = b + bo + c0 * bs;
    if (as == 1 && bs == 1) {
      for (int64_t j = 0; j < n; ++j) out[j] = f(ar[j], br[j]);
    } else if (as == 1 && bs == 0) {
      const float v = br[0];
      for (int64_t j = 0; j < n; ++j) out[j] = f(ar[j], v);
    } else if (as == 0 && bs == 1) {
      const float u = ar[0];
      for (int64_t j = 0; j < n; ++j) out[j] = f(u, br[j]);
    } else {
      for (int64_t j = 0; j < n; ++j) out[j] = f(ar[j * as], br[j * bs]);
    }
    for (size_t d = last; d-- > 0;) {
      ++index[d];
      ao += g.a_strides[d];
      bo += g.b_strides[d];
      if (index[d] < g.dims[d]) break;
      ao -= g.a_strides[d] * index[d];
      bo -= g.b_strides[d] * index[d];
      index[d] = 0;
    }
  }
}

template <typename F>
void binary_loop(const NodePlan& p, const float* a, const float* b, float* y, F f, ThreadPool& pool) {
  const BroadcastGeometry& g = p.add;
  if (p.count == 0) return;
  if (g.rank == 0) {
    y[0] = f(a[0], b[0]);
    return;
  }
  const int64_t inner = g.dims[g.rank - 1];
  const int64_t rows = p.count / inner;
  if (static_cast<size_t>(p.count) < 2 * kElementGrain) {
    binary_rows(g, a, b, y, f, 0, rows);
    return;
  }
  if (rows < static_cast<int64_t>(2 * pool.parallelism())) {
    // Few long rows: split each row instead.
    for (int64_t r = 0; r < rows; ++r) {
      auto cols = [&](size_t begin, size_t end) {
        binary_rows(g, a, b, y, f, r, r + 1, static_cast<int64_t>(begin), static_cast<int64_t>(end));
      };
      pool.parallel_for(static_cast<size_t>(inner), kElementGrain, cols);
    }
    return;
  }
  const size_t grain = std::max<size_t>(1, kElementGrain / static_cast<size_t>(inner));
  auto body = [&](size_t begin, size_t end) {
    binary_rows(g, a, b, y, f, static_cast<int64_t>(begin), static_cast<int64_t>(end));
  };
  pool.parallel_for(static_cast<size_t>(rows), grain, body);
}

void run_binary(const NodePlan& p, float* const* t, ThreadPool& pool) {
  const float* a = t[p.inputs[0]];
  const float* b = t[p.inputs[1]];
  float* y = t[p.output];
  switch (p.op) {
    case Op::kAdd: return binary_loop(p, a, b, y, [](float u, float v) { return u + v; }, pool);
    case Op::kSub: return binary_loop(p, a, b, y, [](float u, float v) { return u - v; }, pool);
    case Op::kMul: return binary_loop(p, a, b, y, [](float u, float v) { return u * v; }, pool);
    case Op::kDiv: return binary_loop(p, a, b, y, [](float u, float v) { return u / v; }, pool);
    // NaN propagates, as numpy's maximum / minimum do.
    case Op::kMax:
      return binary_loop(p, a, b, y, [](float u, float v) { return u != u || u > v ? u : v; }, pool);
    case Op::kMin:
      return binary_loop(p, a, b, y, [](float u, float v) { return u != u || u < v ? u : v; }, pool);
    case Op::kPow:  // x^2 (an exporter's variance) without a libm call
      return binary_loop(p, a, b, y, [](float u, float v) { return v == 2.0f ? u * u : std::pow(u, v); }, pool);
    case Op::kPRelu:
      return binary_loop(p, a, b, y, [](float u, float v) { return u < 0.0f ? u * v : u; }, pool);
    default: return;
  }
}

template <typename F>
void unary_range(const float* x, float* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

// y = f(x) elementwise, large tensors split over the pool.
struct UnaryLoop {
  ThreadPool& pool;
  template <typename F>
  void operator()(const float* x, float* y, int64_t n, F f) const {
    if (static_cast<size_t>(n) < 2 * kElementGrain) return unary_range(x, y, n, f);
    auto body = [&](size_t begin, size_t end) {
      unary_range(x + begin, y + begin, static_cast<int64_t>(end - begin), f);
    };
    pool.parallel_for(static_cast<size_t>(n), kElementGrain, body);
  }
};

void run_unary(const NodePlan& p, float* const* t, ThreadPool& pool) {
  const float* x = t[p.inputs[0]];
  float* y = t[p.output];
  const int64_t n = p.count;
  const UnaryLoop unary_loop{pool};
  const float alpha = p.alpha, beta = p.beta;
  switch (p.op) {
    case Op::kRelu: return unary_loop(x, y, n, [](float v) { return v < 0.0f ? 0.0f : v; });
    case Op::kLeakyRelu:
      return unary_loop(x, y, n, [alpha](float v) { return v < 0.0f ? alpha * v : v; });
    case Op::kElu:
      return unary_loop(x, y, n, [alpha](float v) { return v < 0.0f ? alpha * std::expm1(v) : v; });
    case Op::kSelu:  // beta carries gamma
      return unary_loop(x, y, n, [alpha, beta](float v) {
        return v > 0.0f ? beta * v : beta * (alpha * std::exp(v) - alpha);
      });
    case Op::kSigmoid:  // e = exp(-|v|) never overflows
      return unary_loop(x, y, n, [](float v) {
        const float e = vexp_nonpositive(v < 0.0f ? v : -v);
        const float r = 1.0f / (1.0f + e);
        return v >= 0.0f ? r : e * r;
      });
    // fmax(0, fmin(1, t)) as comparisons the compiler vectorizes (fminf and
    // fmaxf are library calls): t < 1 ? t : 1 gives 1 for NaN as fmin(1, t)
    // does, and then t > 0 ? t : 0 sees no NaN; the same values throughout.
    case Op::kHardSigmoid:
      return unary_loop(x, y, n, [alpha, beta](float v) {
        float t = alpha * v + beta;
        t = t < 1.0f ? t : 1.0f;
        return t > 0.0f ? t : 0.0f;
      });
    case Op::kHardSwish:
      return unary_loop(x, y, n, [](float v) {
        float t = v / 6.0f + 0.5f;
        t = t < 1.0f ? t : 1.0f;
        return v * (t > 0.0f ? t : 0.0f);
      });
    case Op::kTanh: return unary_loop(x, y, n, [](float v) { return std::tanh(v); });
    case Op::kSoftplus:
      return unary_loop(x, y, n, [](float v) {
        return v > 0.0f ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
      });
    case Op::kClip:  // alpha = min, beta = max; min > max yields max, as numpy's clip
      return unary_loop(x, y, n, [alpha, beta](float v) {
        const float lo = v < alpha ? alpha : v;
        return lo > beta ? beta : lo;
      });
    case Op::kErf: return unary_loop(x, y, n, [](float v) { return verf(v); });
    case Op::kExp: return unary_loop(x, y, n, [](float v) { return vexp(v); });
    case Op::kLog: return unary_loop(x, y, n, [](float v) { return std::log(v); });
    case Op::kSqrt: return unary_loop(x, y, n, [](float v) { return std::sqrt(v); });
    case Op::kNeg: return unary_loop(x, y, n, [](float v) { return -v; });
    case Op::kAbs: return unary_loop(x, y, n, [](float v) { return std::fabs(v); });
    case Op::kReciprocal: return unary_loop(x, y, n, [](float v) { return 1.0f / v; });
    case Op::kFloor: return unary_loop(x, y, n, [](float v) { return std::floor(v); });
    case Op::kCeil: return unary_loop(x, y, n, [](float v) { return std::ceil(v); });
    // The default rounding mode: half to even, as ONNX's Round.
    case Op::kRound: return unary_loop(x, y, n, [](float v) { return std::nearbyint(v); });
    default: return;
  }
}

void run_softmax(const NodePlan& p, float* const* t, ThreadPool& pool) {
  const float* x = t[p.inputs[0]];
  float* y = t[p.output];
  const int64_t n = p.n, inner = p.inner;
  const bool log = p.op == Op::kLogSoftmax;
  if (n == 0) return;
  if (inner == 1) {
    // Along contiguous rows: reductions in 16 lanes, so that they vectorize.
    constexpr int64_t kLanes = 16;
    const int64_t body = n / kLanes * kLanes;
    auto rows = [&](size_t row_begin, size_t row_end) {
    for (int64_t o = static_cast<int64_t>(row_begin); o < static_cast<int64_t>(row_end); ++o) {
      const float* xr = x + o * n;
      float* yr = y + o * n;
      // A GCC vector of 16 floats: one zmm register in the AVX-512 build,
      // so the running maxima compile to vector compares and blends (the
      // same loop over a float array stayed scalar).
      typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));
      Lanes lanes;
      for (int64_t l = 0; l < kLanes; ++l) lanes[l] = xr[0];
      for (int64_t j = 0; j < body; j += kLanes) {
        Lanes v;
        std::memcpy(&v, xr + j, sizeof v);
        lanes = v > lanes ? v : lanes;
      }
      float max = xr[0];
      for (int64_t l = 0; l < kLanes; ++l) max = std::fmax(max, lanes[l]);
      for (int64_t j = body; j < n; ++j) max = std::fmax(max, xr[j]);
      // e = exp(x - max) into y (a plain loop, which vectorizes whole),
      // then its sum from y while the row is in L1. (Storing and summing in
      // one loop ran 30% slower: the sum's float array kept it partly
      // scalar.) LogSoftmax needs only the sum.
      Lanes acc = {};
      float sum = 0.0f;
      if (!log) {
        for (int64_t j = 0; j < n; ++j) yr[j] = vexp_nonpositive(xr[j] - max);
        for (int64_t j = 0; j < body; j += kLanes) {
          Lanes v;
          std::memcpy(&v, yr + j, sizeof v);
          acc += v;
        }
        for (int64_t j = body; j < n; ++j) sum += yr[j];
      } else {
        for (int64_t j = 0; j < body; j += kLanes) {
          Lanes v;
          for (int64_t l = 0; l < kLanes; ++l) v[l] = vexp_nonpositive(xr[j + l] - max);
          acc += v;
        }
        for (int64_t j = body; j < n; ++j) sum += vexp_nonpositive(xr[j] - max);
      }
      for (int64_t l = 0; l < kLanes; ++l) sum += acc[l];
      if (log) {
        const float shift = max + std::log(sum);
        for (int64_t j = 0; j < n; ++j) yr[j] = xr[j] - shift;
      } else {
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < n; ++j) yr[j] *= inv;
      }
    }
    };
    // An exp per element makes Softmax worth splitting at an eighth of the
    // elementwise grain (a transformer's [heads, 197, 197] attention rows).
    constexpr size_t kSoftmaxGrain = kElementGrain / 8;
    const size_t outer = static_cast<size_t>(p.outer);
    if (outer * static_cast<size_t>(n) < 2 * kSoftmaxGrain || outer < 2) return rows(0, outer);
    pool.parallel_for(outer, std::max<size_t>(1, kSoftmaxGrain / static_cast<size_t>(n)), rows);
    return;
  }
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      float max = x[base];
      for (int64_t j = 1; j < n; ++j) max = std::fmax(max, x[base + j * inner]);
      float sum = 0.0f;
      for (int64_t j = 0; j < n; ++j) {
        const float e = vexp(x[base + j * inner] - max);
        if (!log) y[base + j * inner] = e;
        sum += e;
      }
      if (log) {
        const float shift = max + std::log(sum);
        for (int64_t j = 0; j < n; ++j) y[base + j * inner] = x[base + j * inner] - shift;
      } else {
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < n; ++j) y[base + j * inner] *= inv;
      }
    }
  }
}

void run_concat(const NodePlan& p, float* const* t, ThreadPool& pool) {
  int64_t row = 0;  // output elements per outer step
  for (int64_t c : p.chunks) row += c;
  auto outer_range = [&](size_t begin, size_t end) {
    float* y = t[p.output] + static_cast<int64_t>(begin) * row;
    for (int64_t o = static_cast<int64_t>(begin); o < static_cast<int64_t>(end); ++o) {
      for (size_t i = 0; i < p.inputs.size(); ++i) {
        const int64_t chunk = p.chunks[i];
        if (chunk != 0) std::memcpy(y, t[p.inputs[i]] + o * chunk, sizeof(float) * chunk);
        y += chunk;
      }
    }
  };
  const size_t outer = static_cast<size_t>(p.outer);
  if (static_cast<size_t>(row) * outer < 2 * kElementGrain) return outer_range(0, outer);
  if (outer >= 2 * pool.parallelism()) {
    return pool.parallel_for(outer, std::max<size_t>(1, kElementGrain / std::max<size_t>(1, row)),
                             outer_range);
  }
  // Few, long chunks: split each copy.
  float* y = t[p.output];
  for (int64_t o = 0; o < p.outer; ++o) {
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const int64_t chunk = p.chunks[i];
      const float* src = t[p.inputs[i]] + o * chunk;
      auto part = [&](size_t begin, size_t end) {
        std::memcpy(y + begin, src + begin, sizeof(float) * (end - begin));
      };
      if (chunk != 0) pool.parallel_for(static_cast<size_t>(chunk), kElementGrain, part);
      y += chunk;
    }
  }
}

// Transposes an 8 x 8 tile: row r of `src` (rows `ss` apart) becomes
// column r of `dst` (rows `ds` apart). AVX builds shuffle in registers.
inline void transpose_tile8(const float* src, int64_t ss, float* dst, int64_t ds) {
#if defined(__AVX__)
  __m256 r[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ss);
  for (int i = 0; i < 8; i += 2) {
    u[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    u[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ds, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ds, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
#else
  for (int64_t i = 0; i < 8; ++i) {
    for (int64_t j = 0; j < 8; ++j) dst[j * ds + i] = src[i * ss + j];
  }
#endif
}

void run_transpose(const NodePlan& p, float* const* t, ThreadPool& pool) {
  const float* x = t[p.inputs[0]];
  float* y = t[p.output];
  if (p.count == 0) return;
  if (p.transpose.rank == 0) {
    y[0] = x[0];
    return;
  }
  // Coalesce: drop axes of 1 and merge neighbours that stay neighbours.
  BroadcastGeometry g;
  for (size_t d = 0; d < p.transpose.rank; ++d) {
    const int64_t n = p.transpose.dims[d], s = p.transpose.a_strides[d];
    if (n == 1) continue;
    if (g.rank > 0 && g.a_strides[g.rank - 1] == s * n) {
      g.dims[g.rank - 1] *= n;
      g.a_strides[g.rank - 1] = s;
    } else {
      g.dims[g.rank] = n;
      g.a_strides[g.rank] = s;
      ++g.rank;
    }
  }
  if (g.rank == 0) {
    y[0] = x[0];
    return;
  }
  // The output axis k that is contiguous in x. When it is not the innermost
  // one, the copy is a 2-D transpose between k and the innermost axis for
  // each index of the other axes, done in 8 x 8 tiles.
  size_t k = g.rank;
  for (size_t d = 0; d < g.rank; ++d) k = g.a_strides[d] == 1 ? d : k;
  const size_t last = g.rank - 1;
  if (k == g.rank || k == last) {
    if (p.count < static_cast<int64_t>(2 * kElementGrain) || g.rank < 2) return walk_elements(g, x, y, p.count);
    // Split over the outermost axis.
    auto body = [&](size_t begin, size_t end) {
      BroadcastGeometry sub = g;
      sub.dims[0] = static_cast<int64_t>(end - begin);
      const int64_t per = p.count / g.dims[0];
      walk_elements(sub, x + static_cast<int64_t>(begin) * g.a_strides[0],
                     y + static_cast<int64_t>(begin) * per, sub.dims[0] * per);
    };
    pool.parallel_for(static_cast<size_t>(g.dims[0]), 1, body);
    return;
  }
  const int64_t rows = g.dims[k], cols = g.dims[last];  // y: rows of `cols`; x: columns
  const int64_t xs = g.a_strides[last];                 // x: one y column to the next
  int64_t ys = 1;                                       // y: one row (k) to the next
  for (size_t d = k + 1; d < g.rank; ++d) ys *= g.dims[d];
  // The other axes: output dims and x strides, outermost first.
  int64_t outer = 1;
  std::array<int64_t, kMaxRank> odims{}, ostr{}, ystr{};
  size_t orank = 0;
  for (size_t d = 0; d < last; ++d) {
    if (d == k) continue;
    int64_t yst = 1;
    for (size_t e = d + 1; e < g.rank; ++e) yst *= g.dims[e];
    odims[orank] = g.dims[d];
    ostr[orank] = g.a_strides[d];
    ystr[orank] = yst;
    ++orank;
    outer *= g.dims[d];
  }
  // Work unit: kRows rows of y by all its columns, walked in strips of
  // kCols columns: a strip reads kCols rows of x (sequential runs of kRows
  // floats) and writes one whole kCols-float run into each of the unit's y
  // rows. The unit's y rows stay few enough for the TLB, and each y cache
  // line is written whole at once.
  // (Measured on 4096 x 4096 with BM_Transpose: 256 x 16 and 512 x 16 best,
  // 64 x 16 and 128 x 32 about 10% slower, 32 x 64 half as fast; streaming
  // stores gained nothing.)
  constexpr int64_t kRows = 256, kCols = 16;
  const int64_t row_blocks = (rows + kRows - 1) / kRows;
  auto blocks = [&](size_t begin, size_t end) {
    for (size_t w = begin; w < end; ++w) {
      int64_t o = static_cast<int64_t>(w) / row_blocks, xo = 0, yo = 0;
      const int64_t r0 = static_cast<int64_t>(w) % row_blocks * kRows;
      for (size_t d = orank; d-- > 0;) {
        const int64_t i = o % odims[d];
        o /= odims[d];
        xo += i * ostr[d];
        yo += i * ystr[d];
      }
      const int64_t r1 = std::min(rows, r0 + kRows);
      for (int64_t c0 = 0; c0 < cols; c0 += kCols) {
        const int64_t c1 = std::min(cols, c0 + kCols);
        int64_t r = r0;
        for (; r + 8 <= r1; r += 8) {
          int64_t c = c0;
          for (; c + 8 <= c1; c += 8) transpose_tile8(x + xo + c * xs + r, xs, y + yo + r * ys + c, ys);
          for (; c < c1; ++c) {
            for (int64_t i = r; i < r + 8; ++i) y[yo + i * ys + c] = x[xo + c * xs + i];
          }
        }
        for (; r < r1; ++r) {
          for (int64_t c = c0; c < c1; ++c) y[yo + r * ys + c] = x[xo + c * xs + r];
        }
      }
    }
  };
  const size_t work = static_cast<size_t>(outer * row_blocks);
  if (p.count < static_cast<int64_t>(2 * kElementGrain)) return blocks(0, work);
  pool.parallel_for(work, std::max<size_t>(1, kElementGrain / static_cast<size_t>(kRows * cols)), blocks);
}

// Output channels [begin, end) over all batches: the flat index is
// batch * out_channels + channel.
void conv_range(const NodePlan& p, const float* x, const float* w, const float* bias, float* y,
                int64_t begin, int64_t end) {
  const Window& win = p.window;
  const int64_t od = p.out_sp[0], oh = p.out_sp[1], ow = p.out_sp[2];
  const int64_t id = p.in_sp[0], ih = p.in_sp[1], iw = p.in_sp[2];
  const int64_t kd = win.kernel[0], kh = win.kernel[1], kw = win.kernel[2];
  const int64_t cin_g = p.in_channels / win.group, cout_g = p.out_channels / win.group;
  const int64_t in_plane = id * ih * iw, out_plane = od * oh * ow, k_plane = kd * kh * kw;
  for (int64_t flat = begin; flat < end; ++flat) {
    const int64_t nb = flat / p.out_channels, oc = flat % p.out_channels;
    const int64_t g = oc / cout_g;
    const float* xg = x + (nb * p.in_channels + g * cin_g) * in_plane;
    const float* wc = w + oc * cin_g * k_plane;
    float* yc = y + flat * out_plane;
    const float b0 = bias != nullptr ? bias[oc] : 0.0f;
    for (int64_t z = 0; z < od; ++z) {
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t c = 0; c < ow; ++c) {
          float sum = b0;
          for (int64_t ic = 0; ic < cin_g; ++ic) {
            const float* xi = xg + ic * in_plane;
            const float* wi = wc + ic * k_plane;
            for (int64_t a = 0; a < kd; ++a) {
              const int64_t zi = z * win.stride[0] - win.pad_begin[0] + a * win.dilation[0];
              if (zi < 0 || zi >= id) continue;
              for (int64_t b = 0; b < kh; ++b) {
                const int64_t ri = r * win.stride[1] - win.pad_begin[1] + b * win.dilation[1];
                if (ri < 0 || ri >= ih) continue;
                const float* xrow = xi + (zi * ih + ri) * iw;
                const float* wrow = wi + (a * kh + b) * kw;
                for (int64_t e = 0; e < kw; ++e) {
                  const int64_t ci = c * win.stride[2] - win.pad_begin[2] + e * win.dilation[2];
                  if (ci < 0 || ci >= iw) continue;
                  sum += xrow[ci] * wrow[e];
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

void run_conv(const NodePlan& p, float* const* t, ThreadPool& pool) {
  const float* x = t[p.inputs[0]];
  const float* w = t[p.inputs[1]];
  const float* bias = p.inputs.size() == 3 ? t[p.inputs[2]] : nullptr;
  float* y = t[p.output];
  const int64_t channels = p.batch * p.out_channels;
  const int64_t per_channel = p.count / (channels == 0 ? 1 : channels);
  const int64_t k_elems = p.window.kernel[0] * p.window.kernel[1] * p.window.kernel[2] *
                          (p.in_channels / p.window.group);
  auto body = [&](size_t begin, size_t end) {
    conv_range(p, x, w, bias, y, static_cast<int64_t>(begin), static_cast<int64_t>(end));
  };
  if (channels == 0 || p.count == 0) return;
  if (p.count * k_elems < kParallelThreshold) {
    body(0, static_cast<size_t>(channels));
  } else {
    (void)per_channel;
    pool.parallel_for(static_cast<size_t>(channels), 1, body);
  }
}

// MaxPool 2 x 2, stride 2 on NCHW planes (is_plain_max_pool_2x2): two
// input rows give one output row. NaN wins, as in the general loop.
void max_pool_2x2_rows(const NodePlan& p, const float* x, float* y, int64_t begin, int64_t end) {
  const int64_t ih = p.in_sp[1], iw = p.in_sp[2], oh = p.out_sp[1], ow = p.out_sp[2];
  auto pick = [](float a, float b) { return b > a || b != b ? b : a; };
  for (int64_t row = begin; row < end; ++row) {  // row = plane * oh + r
    const int64_t plane = row / oh, r = row % oh;
    const float* a = x + (plane * ih + 2 * r) * iw;
    const float* b = a + iw;
    float* out = y + row * ow;
    for (int64_t c = 0; c < ow; ++c) {
      out[c] = pick(pick(pick(a[2 * c], a[2 * c + 1]), b[2 * c]), b[2 * c + 1]);
    }
  }
}

void run_pool(const NodePlan& p, float* const* t, ThreadPool& pool) {
  const float* x = t[p.inputs[0]];
  float* y = t[p.output];
  const Window& win = p.window;
  const bool max = p.op == Op::kMaxPool;
  if (is_plain_max_pool_2x2(p)) {
    const int64_t rows = p.batch * p.in_channels * p.out_sp[1];
    auto body = [&](size_t begin, size_t end) {
      max_pool_2x2_rows(p, x, y, static_cast<int64_t>(begin), static_cast<int64_t>(end));
    };
    const size_t per_row = static_cast<size_t>(std::max<int64_t>(1, 4 * p.out_sp[2]));
    if (static_cast<size_t>(rows) * per_row < 2 * kElementGrain) return body(0, static_cast<size_t>(rows));
    pool.parallel_for(static_cast<size_t>(rows), std::max<size_t>(1, kElementGrain / per_row), body);
    return;
  }
  const int64_t od = p.out_sp[0], oh = p.out_sp[1], ow = p.out_sp[2];
  const int64_t id = p.in_sp[0], ih = p.in_sp[1], iw = p.in_sp[2];
  const int64_t in_plane = id * ih * iw, out_plane = od * oh * ow;
  const int64_t in_ext[3] = {id, ih, iw};
  // The window positions counted by AveragePool along one dimension: inside
  // the input, or (count_include_pad) inside input plus pads.
  auto counted = [&](int dim, int64_t pos) {
    const int64_t lo = win.count_include_pad ? -win.pad_begin[dim] : 0;
    const int64_t hi = win.count_include_pad ? in_ext[dim] + win.pad_end[dim] : in_ext[dim];
    return pos >= lo && pos < hi;
  };
  for (int64_t plane = 0; plane < p.batch * p.in_channels; ++plane) {
    const float* xp = x + plane * in_plane;
    float* yp = y + plane * out_plane;
    for (int64_t z = 0; z < od; ++z) {
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t c = 0; c < ow; ++c) {
          float acc = max ? -std::numeric_limits<float>::infinity() : 0.0f;
          int64_t n = 0;
          for (int64_t a = 0; a < win.kernel[0]; ++a) {
            const int64_t zi = z * win.stride[0] - win.pad_begin[0] + a * win.dilation[0];
            if (!max && !counted(0, zi)) continue;
            for (int64_t b = 0; b < win.kernel[1]; ++b) {
              const int64_t ri = r * win.stride[1] - win.pad_begin[1] + b * win.dilation[1];
              if (!max && !counted(1, ri)) continue;
              for (int64_t e = 0; e < win.kernel[2]; ++e) {
                const int64_t ci = c * win.stride[2] - win.pad_begin[2] + e * win.dilation[2];
                if (!max && !counted(2, ci)) continue;
                const bool inside = zi >= 0 && zi < id && ri >= 0 && ri < ih && ci >= 0 && ci < iw;
                if (max) {
                  if (inside) {
                    const float v = xp[(zi * ih + ri) * iw + ci];
                    if (v > acc || v != v) acc = v;
                  }
                } else {
                  ++n;
                  if (inside) acc += xp[(zi * ih + ri) * iw + ci];
                }
              }
            }
          }
          yp[(z * oh + r) * ow + c] = max ? acc : (n == 0 ? 0.0f : acc / static_cast<float>(n));
        }
      }
    }
  }
}

void run_global_average(const NodePlan& p, float* const* t) {
  const float* x = t[p.inputs[0]];
  float* y = t[p.output];
  const int64_t planes = p.outer * p.n;
  for (int64_t i = 0; i < planes; ++i) {
    double sum = 0.0;
    for (int64_t j = 0; j < p.inner; ++j) sum += x[i * p.inner + j];
    y[i] = p.inner == 0 ? 0.0f : static_cast<float>(sum / static_cast<double>(p.inner));
  }
}

void run_batch_norm(const NodePlan& p, float* const* t) {
  const float* x = t[p.inputs[0]];
  const float* scale = t[p.inputs[1]];
  const float* bias = t[p.inputs[2]];
  const float* mean = t[p.inputs[3]];
  const float* var = t[p.inputs[4]];
  float* y = t[p.output];
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t c = 0; c < p.n; ++c) {
      const float k = scale[c] / std::sqrt(var[c] + p.alpha);
      const float m = mean[c], b = bias[c];
      const int64_t base = (o * p.n + c) * p.inner;
      for (int64_t j = 0; j < p.inner; ++j) y[base + j] = (x[base + j] - m) * k + b;
    }
  }
}

}  // namespace

void plan_nn_node(const BlobGraph& graph, const BlobNode& node, NodePlan* p) {
  auto shape = [&](size_t i) -> const std::vector<int64_t>& {
    return graph.tensors[node.inputs[i]].shape;
  };
  const std::vector<int64_t>& out = graph.tensors[node.outputs[0]].shape;
  p->alpha = node.alpha;
  p->beta = node.beta;
  if (is_binary(node.op)) {
    p->add = broadcast_geometry(shape(0), shape(1));
    return;
  }
  switch (node.op) {
    case Op::kSoftmax:
    case Op::kLogSoftmax: {
      const std::vector<int64_t>& x = shape(0);
      const int64_t rank = static_cast<int64_t>(x.size());
      const size_t axis = static_cast<size_t>(node.axis < 0 ? node.axis + rank : node.axis);
      const bool coerce_2d = !node.ints.empty() && node.ints[0] == 1;
      p->outer = product(x, 0, axis);
      p->n = coerce_2d ? product(x, axis, x.size()) : x[axis];
      p->inner = coerce_2d ? 1 : product(x, axis + 1, x.size());
      return;
    }
    case Op::kConcat: {
      const int64_t rank = static_cast<int64_t>(out.size());
      const size_t axis = static_cast<size_t>(node.axis < 0 ? node.axis + rank : node.axis);
      p->outer = product(out, 0, axis);
      const int64_t inner = product(out, axis + 1, out.size());
      for (size_t i = 0; i < node.inputs.size(); ++i) p->chunks.push_back(shape(i)[axis] * inner);
      return;
    }
    case Op::kTranspose: {
      const std::vector<int64_t>& x = shape(0);
      BroadcastGeometry& g = p->transpose;
      g.rank = x.size();
      std::array<int64_t, kMaxRank> in_strides{};
      int64_t stride = 1;
      for (size_t d = x.size(); d-- > 0;) {
        in_strides[d] = stride;
        stride *= x[d];
      }
      for (size_t d = 0; d < x.size(); ++d) {
        g.dims[d] = out[d];
        g.a_strides[d] = in_strides[static_cast<size_t>(node.ints[d])];
      }
      return;
    }
    case Op::kConv:
    case Op::kMaxPool:
    case Op::kAveragePool:
      plan_window(node, shape(0), out, p);
      return;
    case Op::kGlobalAveragePool:
    case Op::kBatchNorm: {
      const std::vector<int64_t>& x = shape(0);
      p->outer = x[0];
      p->n = x[1];
      p->inner = product(x, 2, x.size());
      return;
    }
    default:
      plan_data_node(graph, node, p);
      return;
  }
}

void run_nn_node(const NodePlan& p, float* const* t, ThreadPool& pool) {
  if (is_binary(p.op)) return run_binary(p, t, pool);
  if (is_unary(p.op)) return run_unary(p, t, pool);
  switch (p.op) {
    case Op::kCopy:
      if (p.count != 0) std::memmove(t[p.output], t[p.inputs[0]], sizeof(float) * p.count);
      return;
    case Op::kSoftmax:
    case Op::kLogSoftmax: return run_softmax(p, t, pool);
    case Op::kConcat: return run_concat(p, t, pool);
    case Op::kTranspose: return run_transpose(p, t, pool);
    case Op::kConv: return run_conv(p, t, pool);
    case Op::kMaxPool:
    case Op::kAveragePool: return run_pool(p, t, pool);
    case Op::kGlobalAveragePool: return run_global_average(p, t);
    case Op::kBatchNorm: return run_batch_norm(p, t);
    default: return run_data_node(p, t, pool);
  }
}

}  // namespace LOOM_CPU_SIMD_ISA
}  // namespace loom::cpu_simd
