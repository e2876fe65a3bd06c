// Format-4 operators: Pad (f32), and Where, Equal and Cast, whose tensors may
// be bool (one byte, 0 or 1), i32 or i64; format 11's moves of 1- and 8-byte
// elements (run_moved_node). Slots are handed over as float pointers; these
// kernels read and write them as the blob's dtype says. Like ops_data.cpp
// this file is compiled once per instruction set.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops.hpp"

#ifndef LOOM_CPU_SIMD_ISA
#define LOOM_CPU_SIMD_ISA isa_baseline
#endif

namespace loom::cpu_simd {
namespace LOOM_CPU_SIMD_ISA {
namespace {

// Element strides of `s` over the broadcast output of rank `rank` (0 along
// broadcast and missing leading dims).
std::array<int64_t, kMaxRank> broadcast_strides(const std::vector<int64_t>& s, size_t rank) {
  std::array<int64_t, kMaxRank> st{};
  const size_t pad = rank - s.size();
  int64_t stride = 1;
  for (size_t d = rank; d-- > pad;) {
    const int64_t extent = s[d - pad];
    st[d] = extent == 1 ? 0 : stride;
    stride *= extent;
  }
  return st;
}

// Calls body(out_offset, width, offsets of each of `n` operands) for every
// row of the output's last dim, walking the operands with their strides.
template <size_t N, typename Body>
void for_each_row(const NodePlan& p, Body body) {
  const BroadcastGeometry& g = p.transpose;
  if (p.count == 0) return;
  if (g.rank == 0) {
    std::array<int64_t, N> at{};
    body(int64_t{0}, int64_t{1}, at);
    return;
  }
  const size_t last = g.rank - 1;
  const int64_t width = g.dims[last];
  std::array<int64_t, kMaxRank> index{};
  std::array<int64_t, N> at{};
  for (int64_t o = 0; o < p.count; o += width) {
    body(o, width, at);
    for (size_t d = last; d-- > 0;) {
      ++index[d];
      for (size_t k = 0; k < N; ++k) at[k] += p.strides[k][d];
      if (index[d] < g.dims[d]) break;
      for (size_t k = 0; k < N; ++k) at[k] -= p.strides[k][d] * index[d];
      index[d] = 0;
    }
  }
}

// --------------------------------------------------------------------- Pad

void run_pad(const NodePlan& p, float* const* t) {
  const float* x = t[p.inputs[0]];
  float* y = t[p.output];
  const float value = p.inputs.size() == 2 ? t[p.inputs[1]][0] : p.alpha;
  const BroadcastGeometry& g = p.transpose;
  if (p.count == 0) return;
  if (g.rank == 0) {
    y[0] = x[0];
    return;
  }
  const size_t last = g.rank - 1;
  const int64_t* row_map = p.a_offsets.data() + p.b_offsets[last];
  const int64_t width = g.dims[last];
  std::array<int64_t, kMaxRank> index{};
  for (int64_t o = 0; o < p.count; o += width) {
    int64_t xo = 0;
    bool inside = true;
    for (size_t d = 0; d < last && inside; ++d) {
      const int64_t i = p.a_offsets[static_cast<size_t>(p.b_offsets[d] + index[d])];
      inside = i >= 0;
      xo += i * p.strides[0][d];
    }
    float* yr = y + o;
    if (!inside) {
      for (int64_t j = 0; j < width; ++j) yr[j] = value;
    } else {
      const float* xr = x + xo;
      for (int64_t j = 0; j < width; ++j) yr[j] = row_map[j] < 0 ? value : xr[row_map[j]];
    }
    for (size_t d = last; d-- > 0;) {
      if (++index[d] < g.dims[d]) break;
      index[d] = 0;
    }
  }
}

// The input index that output position `o` of an axis of extent `dim`
// padded by `begin` reads, or -1 for the constant.
int64_t pad_source(PadMode mode, int64_t o, int64_t begin, int64_t dim) {
  const int64_t c = o - begin;
  if (c >= 0 && c < dim) return c;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return c < 0 ? 0 : dim - 1;
    case PadMode::kReflect: {
      if (dim == 1) return 0;
      const int64_t period = 2 * (dim - 1);
      int64_t m = c % period;
      if (m < 0) m += period;
      return m < dim ? m : period - m;
    }
    case PadMode::kWrap: {
      int64_t m = c % dim;
      return m < 0 ? m + dim : m;
    }
  }
  return -1;
}

// ------------------------------------------------------------ Where, Equal

void run_where(const NodePlan& p, float* const* t) {
  const auto* c = reinterpret_cast<const uint8_t*>(t[p.inputs[0]]);
  const float* a = t[p.inputs[1]];
  const float* b = t[p.inputs[2]];
  float* y = t[p.output];
  const int64_t sc = p.strides[0][p.transpose.rank == 0 ? 0 : p.transpose.rank - 1];
  const int64_t sa = p.strides[1][p.transpose.rank == 0 ? 0 : p.transpose.rank - 1];
  const int64_t sb = p.strides[2][p.transpose.rank == 0 ? 0 : p.transpose.rank - 1];
  for_each_row<3>(p, [&](int64_t o, int64_t width, const std::array<int64_t, 3>& at) {
    const uint8_t* cr = c + at[0];
    const float* ar = a + at[1];
    const float* br = b + at[2];
    float* yr = y + o;
    for (int64_t j = 0; j < width; ++j) yr[j] = cr[j * sc] != 0 ? ar[j * sa] : br[j * sb];
  });
}

template <typename T>
void equal_rows(const NodePlan& p, const void* a_data, const void* b_data, uint8_t* y) {
  const auto* a = static_cast<const T*>(a_data);
  const auto* b = static_cast<const T*>(b_data);
  const size_t inner = p.transpose.rank == 0 ? 0 : p.transpose.rank - 1;
  const int64_t sa = p.strides[0][inner], sb = p.strides[1][inner];
  for_each_row<2>(p, [&](int64_t o, int64_t width, const std::array<int64_t, 2>& at) {
    const T* ar = a + at[0];
    const T* br = b + at[1];
    uint8_t* yr = y + o;
    for (int64_t j = 0; j < width; ++j) {
      if constexpr (std::is_same_v<T, uint8_t>) {
        yr[j] = (ar[j * sa] != 0) == (br[j * sb] != 0);
      } else {
        yr[j] = ar[j * sa] == br[j * sb];
      }
    }
  });
}

void run_equal(const NodePlan& p, float* const* t) {
  const void* a = t[p.inputs[0]];
  const void* b = t[p.inputs[1]];
  auto* y = reinterpret_cast<uint8_t*>(t[p.output]);
  switch (p.in_dtype) {
    case LOOM_DTYPE_F32: return equal_rows<float>(p, a, b, y);
    case LOOM_DTYPE_I32: return equal_rows<int32_t>(p, a, b, y);
    case LOOM_DTYPE_I64: return equal_rows<int64_t>(p, a, b, y);
    default: return equal_rows<uint8_t>(p, a, b, y);
  }
}

// -------------------------------------------------------------------- Cast

// A bool element (0 or 1), told apart from a u8 one.
struct BoolByte {
  uint8_t v;
};

// As the reference kernels convert: floats to integers truncate toward
// zero, NaN becomes 0 and out-of-range values saturate; integers wrap;
// anything becomes bool as != 0; bools are read as 0 or 1.
template <typename To, typename From>
To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, BoolByte>) {
    return v.v != 0 ? To{1} : To{0};
  } else if constexpr (std::is_same_v<To, BoolByte>) {
    return BoolByte{static_cast<uint8_t>(v != From{0} ? 1 : 0)};
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    const double d = static_cast<double>(v);
    if (std::isnan(d)) return To{0};
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::lowest());
    constexpr double hi = static_cast<double>(std::numeric_limits<To>::max());
    if (d <= lo) return std::numeric_limits<To>::lowest();
    if (d >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(d);
  } else {
    return static_cast<To>(v);
  }
}

template <typename From>
void cast_from(const NodePlan& p, const void* in, void* out) {
  const auto* x = static_cast<const From*>(in);
  const int64_t n = p.count;
  auto loop = [&](auto* y) {
    using To = std::remove_pointer_t<decltype(y)>;
    for (int64_t i = 0; i < n; ++i) y[i] = convert<To>(x[i]);
  };
  switch (p.out_dtype) {
    case LOOM_DTYPE_F32: return loop(static_cast<float*>(out));
    case LOOM_DTYPE_I32: return loop(static_cast<int32_t*>(out));
    case LOOM_DTYPE_I64: return loop(static_cast<int64_t*>(out));
    case LOOM_DTYPE_U8: return loop(static_cast<uint8_t*>(out));
    case LOOM_DTYPE_I8: return loop(static_cast<int8_t*>(out));
    default: return loop(static_cast<BoolByte*>(out));
  }
}

void run_cast(const NodePlan& p, float* const* t) {
  const void* x = t[p.inputs[0]];
  void* y = t[p.output];
  if (p.count == 0) return;
  switch (p.in_dtype) {
    case LOOM_DTYPE_F32: return cast_from<float>(p, x, y);
    case LOOM_DTYPE_I32: return cast_from<int32_t>(p, x, y);
    case LOOM_DTYPE_I64: return cast_from<int64_t>(p, x, y);
    case LOOM_DTYPE_U8: return cast_from<uint8_t>(p, x, y);
    case LOOM_DTYPE_I8: return cast_from<int8_t>(p, x, y);
    default: return cast_from<BoolByte>(p, x, y);
  }
}


// ---------------------------------------------------- DynamicQuantizeLinear

// The reference kernel's arithmetic, step for step, so that the bytes agree:
// the range [lo, hi] starts at [0, 0] and widens with each element (NaN
// never compares below or above, so it is skipped); scale = (hi - lo) / 255;
// zp = nearbyint(clamp(0 - lo / scale, 0, 255)), 0 when the scale is 0;
// y = clamp(nearbyint(x / scale) + zp, 0, 255), 0 when the scale is 0, then
// converted as Cast converts (NaN to 0).
void dynamic_quant_range(const float* x, int64_t n, float* lo, float* hi) {
  float l = 0.0f, h = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    l = std::min(l, x[i]);
    h = std::max(h, x[i]);
  }
  *lo = l;
  *hi = h;
}

float dynamic_quant_zero_point(float lo, float scale) {
  return scale == 0.0f ? 0.0f : std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
}

uint8_t dynamic_quant_u8(float v) {
  if (std::isnan(v)) return 0;
  return static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
}

void run_dynamic_quant(const NodePlan& p, float* const* t) {
  const float* x = t[p.inputs[0]];
  const int64_t n = p.n;  // x's elements
  if (p.op == Op::kDynamicQuantize) {
    const float scale = *t[p.inputs[1]];
    const float zp = static_cast<float>(*reinterpret_cast<const uint8_t*>(t[p.inputs[2]]));
    auto* y = reinterpret_cast<uint8_t*>(t[p.output]);
    if (scale == 0.0f) {
      if (n != 0) std::memset(y, 0, static_cast<size_t>(n));
      return;
    }
    for (int64_t i = 0; i < n; ++i) y[i] = dynamic_quant_u8(std::nearbyint(x[i] / scale) + zp);
    return;
  }
  float lo = 0.0f, hi = 0.0f;
  dynamic_quant_range(x, n, &lo, &hi);
  const float scale = (hi - lo) / 255.0f;
  if (p.op == Op::kDynamicQuantizeScale) {
    *t[p.output] = scale;
  } else {
    // The reference casts the (integral, 0 to 255) float straight to u8.
    *reinterpret_cast<uint8_t*>(t[p.output]) = dynamic_quant_u8(dynamic_quant_zero_point(lo, scale));
  }
}

// MaxPool of integers: the largest element each window covers inside the
// input; a window wholly in the padding gives the type's lowest value (as
// the reference kernels do).
template <typename T>
void max_pool_integers(const NodePlan& p, const T* x, T* y) {
  const Window& win = p.window;
  const int64_t od = p.out_sp[0], oh = p.out_sp[1], ow = p.out_sp[2];
  const int64_t id = p.in_sp[0], ih = p.in_sp[1], iw = p.in_sp[2];
  const int64_t in_plane = id * ih * iw, out_plane = od * oh * ow;
  for (int64_t plane = 0; plane < p.batch * p.in_channels; ++plane) {
    const T* xp = x + plane * in_plane;
    T* yp = y + plane * out_plane;
    for (int64_t z = 0; z < od; ++z) {
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t c = 0; c < ow; ++c) {
          T best = std::numeric_limits<T>::lowest();
          for (int64_t a = 0; a < win.kernel[0]; ++a) {
            const int64_t zi = z * win.stride[0] - win.pad_begin[0] + a * win.dilation[0];
            if (zi < 0 || zi >= id) continue;
            for (int64_t b = 0; b < win.kernel[1]; ++b) {
              const int64_t ri = r * win.stride[1] - win.pad_begin[1] + b * win.dilation[1];
              if (ri < 0 || ri >= ih) continue;
              for (int64_t e = 0; e < win.kernel[2]; ++e) {
                const int64_t ci = c * win.stride[2] - win.pad_begin[2] + e * win.dilation[2];
                if (ci >= 0 && ci < iw) best = std::max(best, xp[(zi * ih + ri) * iw + ci]);
              }
            }
          }
          yp[(z * oh + r) * ow + c] = best;
        }
      }
    }
  }
}

}  // namespace

// A nearest Resize of bytes (the schedule's DequantizeLinear -> Resize ->
// QuantizeLinear of one scale and zero point): run_resize's walk without
// the interpolation.
void resize_nearest_bytes(const NodePlan& p, const unsigned char* x, unsigned char* y) {
  const BroadcastGeometry& g = p.transpose;  // dims: output; a_strides: input strides
  const size_t rank = g.rank;
  const int64_t width = g.dims[rank - 1];
  const int64_t* taps_last = p.a_offsets.data() + p.b_offsets[rank - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d) rows *= g.dims[d];
  std::array<int64_t, kMaxRank> idx{};
  int64_t last_base = -1;
  for (int64_t r = 0; r < rows; ++r, y += width) {
    int64_t base = 0;
    for (size_t d = 0; d + 1 < rank; ++d) base += p.a_offsets[p.b_offsets[d] + 2 * idx[d]] * g.a_strides[d];
    const unsigned char* xr = x + base;
    if (base == last_base) {
      // The row above read the same input row (an upsampled height): copy it.
      std::memcpy(y, y - width, static_cast<size_t>(width));
    } else {
      for (int64_t c = 0; c < width; ++c) y[c] = xr[taps_last[2 * c]];
    }
    last_base = base;
    for (size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < g.dims[d]) break;
      idx[d] = 0;
    }
  }
}

// The operators that only move elements, for 1- and 8-byte elements (u8,
// i8, bool, i64): the same geometry as their f32 kernels, in bytes.
void run_moved_node(const NodePlan& p, float* const* t) {
  const size_t e = p.elem;
  const auto* x = reinterpret_cast<const unsigned char*>(t[p.inputs[0]]);
  auto* y = reinterpret_cast<unsigned char*>(t[p.output]);
  const size_t count = static_cast<size_t>(p.count);
  switch (p.op) {
    case Op::kCopy:
      if (count != 0) std::memmove(y, x, e * count);
      return;
    case Op::kConcat:
      for (int64_t o = 0; o < p.outer; ++o) {
        for (size_t i = 0; i < p.inputs.size(); ++i) {
          const size_t chunk = static_cast<size_t>(p.chunks[i]) * e;
          const auto* src = reinterpret_cast<const unsigned char*>(t[p.inputs[i]]);
          if (chunk != 0) std::memcpy(y, src + static_cast<size_t>(o) * chunk, chunk);
          y += chunk;
        }
      }
      return;
    case Op::kGather: {
      const size_t inner = static_cast<size_t>(p.inner) * e, extent = static_cast<size_t>(p.n);
      for (int64_t o = 0; o < p.outer; ++o) {
        const unsigned char* xo = x + static_cast<size_t>(o) * extent * inner;
        for (int64_t index : p.chunks) {
          if (inner != 0) std::memcpy(y, xo + static_cast<size_t>(index) * inner, inner);
          y += inner;
        }
      }
      return;
    }
    case Op::kTranspose:
    case Op::kSlice: {
      // Slice starts at element p.outer; Transpose at 0.
      const int64_t start = p.op == Op::kSlice ? p.outer : 0;
      if (p.count == 0) return;
      if (p.transpose.rank == 0) {
        std::memcpy(y, x + static_cast<size_t>(start) * e, e);
      } else if (e == 1) {
        walk_elements(p.transpose, x + start, y, p.count);
      } else {
        walk_elements(p.transpose, reinterpret_cast<const uint64_t*>(x) + start, reinterpret_cast<uint64_t*>(y),
                      p.count);
      }
      return;
    }
    case Op::kResize:
      if (e == 1 && !p.linear && p.count != 0) resize_nearest_bytes(p, x, y);
      return;
    case Op::kMaxPool:
      if (p.out_dtype == LOOM_DTYPE_I8) {
        max_pool_integers(p, reinterpret_cast<const int8_t*>(x), reinterpret_cast<int8_t*>(y));
      } else {
        max_pool_integers(p, x, y);
      }
      return;
    default:
      return;
  }
}

void plan_typed_node(const BlobGraph& graph, const BlobNode& node, NodePlan* p) {
  const std::vector<int64_t>& out = graph.tensors[node.outputs[0]].shape;
  BroadcastGeometry& g = p->transpose;
  g.rank = out.size();
  for (size_t d = 0; d < out.size(); ++d) g.dims[d] = out[d];
  p->in_dtype = graph.tensors[node.inputs[0]].dtype;
  p->out_dtype = graph.tensors[node.outputs[0]].dtype;
  switch (node.op) {
    case Op::kPad: {
      const std::vector<int64_t>& x = graph.tensors[node.inputs[0]].shape;
      const size_t rank = x.size();
      const auto mode = static_cast<PadMode>(node.ints[0]);
      p->strides[0] = broadcast_strides(x, rank);
      // broadcast_strides zeroes extent-1 dims, where Pad reads index 0 only.
      // An empty output runs nothing: no maps (their length could be far
      // beyond the blob's size).
      if (p->count == 0) return;
      for (size_t a = 0; a < rank; ++a) {
        p->b_offsets.push_back(static_cast<int64_t>(p->a_offsets.size()));
        for (int64_t o = 0; o < out[a]; ++o) {
          p->a_offsets.push_back(pad_source(mode, o, node.ints[1 + a], x[a]));
        }
      }
      return;
    }
    case Op::kDynamicQuantizeScale:
    case Op::kDynamicQuantizeZeroPoint:
    case Op::kDynamicQuantize: {
      uint64_t n = 1;
      for (int64_t d : graph.tensors[node.inputs[0]].shape) n *= static_cast<uint64_t>(d);
      p->n = static_cast<int64_t>(n);
      return;
    }
    case Op::kWhere:
    case Op::kEqual:
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        p->strides[i] = broadcast_strides(graph.tensors[node.inputs[i]].shape, out.size());
      }
      return;
    default:
      return;
  }
}

void run_typed_node(const NodePlan& p, float* const* t, ThreadPool&) {
  switch (p.op) {
    case Op::kPad: return run_pad(p, t);
    case Op::kWhere: return run_where(p, t);
    case Op::kEqual: return run_equal(p, t);
    case Op::kCast: return run_cast(p, t);
    case Op::kDynamicQuantizeScale:
    case Op::kDynamicQuantizeZeroPoint:
    case Op::kDynamicQuantize: return run_dynamic_quant(p, t);
    default: return;
  }
}

}  // namespace LOOM_CPU_SIMD_ISA
}  // namespace loom::cpu_simd
