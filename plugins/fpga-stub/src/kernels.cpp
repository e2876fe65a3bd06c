#include "kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace loom::fpga_stub {
namespace {

using Shape = std::vector<int64_t>;

float f32_of(int64_t bits) {
  const auto b = static_cast<uint32_t>(bits);
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// Element i of a scalar or per-channel operand, as int64 (zero points) or
// float (scales).
struct Chan {
  const std::byte* p = nullptr;
  loom_dtype_t dtype = LOOM_DTYPE_INVALID;
  uint64_t count = 0;
  int64_t zp(uint64_t i) const {
    if (p == nullptr) return 0;
    const uint64_t k = count == 1 ? 0 : i;
    switch (dtype) {
      case LOOM_DTYPE_U8: return reinterpret_cast<const uint8_t*>(p)[k];
      case LOOM_DTYPE_I8: return reinterpret_cast<const int8_t*>(p)[k];
      case LOOM_DTYPE_I32: return reinterpret_cast<const int32_t*>(p)[k];
      default: return 0;
    }
  }
  float scale(uint64_t i) const { return reinterpret_cast<const float*>(p)[count == 1 ? 0 : i]; }
};

class Node {
 public:
  Node(const Bitstream& bs, const BsNode& n, std::byte* const* data) : bs_(bs), n_(n), data_(data) {}
  bool present(size_t i) const { return i < n_.inputs.size() && n_.inputs[i] >= 0; }
  const BsTensor& t(size_t i) const { return bs_.tensors[n_.inputs[i]]; }
  const Shape& shape(size_t i) const { return t(i).shape; }
  const std::byte* in(size_t i) const { return present(i) ? data_[n_.inputs[i]] : nullptr; }
  const float* f(size_t i) const { return reinterpret_cast<const float*>(in(i)); }
  std::byte* out() const { return data_[n_.output]; }
  const BsTensor& out_t() const { return bs_.tensors[n_.output]; }
  Chan chan(size_t i) const {
    if (!present(i)) return {};
    return {in(i), t(i).dtype, element_count(t(i).shape)};
  }
  int64_t param(size_t i) const { return n_.params[i]; }
  int64_t load(size_t i, uint64_t k) const {
    return t(i).dtype == LOOM_DTYPE_U8 ? int64_t{reinterpret_cast<const uint8_t*>(in(i))[k]}
                                       : int64_t{reinterpret_cast<const int8_t*>(in(i))[k]};
  }

 private:
  const Bitstream& bs_;
  const BsNode& n_;
  std::byte* const* data_;
};

void store_q(std::byte* out, loom_dtype_t dtype, uint64_t i, int32_t q) {
  if (dtype == LOOM_DTYPE_U8) {
    reinterpret_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(q);
  } else {
    reinterpret_cast<int8_t*>(out)[i] = static_cast<int8_t>(q);
  }
}

// Direct convolution over NCHW; `load_x(index)` and `load_w(index, m)` give
// accumulator values, `emit(index, m, acc)` writes one output.
template <typename Acc, typename LX, typename LW, typename Emit>
void conv_loop(const Node& n, size_t x_i, size_t w_i, LX load_x, LW load_w, Emit emit) {
  const Shape& x = n.shape(x_i);
  const Shape& w = n.shape(w_i);
  const Shape& y = n.out_t().shape;
  const int64_t g = n.param(kGroup), cg = x[1] / g, mg = w[0] / g;
  const int64_t sh = n.param(kSh), sw = n.param(kSw), dh = n.param(kDh), dw = n.param(kDw);
  const int64_t pt = n.param(kPadT), pl = n.param(kPadL);
  for (int64_t b = 0; b < y[0]; ++b) {
    for (int64_t m = 0; m < y[1]; ++m) {
      const int64_t grp = m / mg;
      for (int64_t oh = 0; oh < y[2]; ++oh) {
        for (int64_t ow = 0; ow < y[3]; ++ow) {
          Acc acc = 0;
          for (int64_t c = 0; c < cg; ++c) {
            const int64_t xc = grp * cg + c;
            for (int64_t kh = 0; kh < w[2]; ++kh) {
              const int64_t ih = oh * sh - pt + kh * dh;
              if (ih < 0 || ih >= x[2]) continue;
              for (int64_t kw = 0; kw < w[3]; ++kw) {
                const int64_t iw = ow * sw - pl + kw * dw;
                if (iw < 0 || iw >= x[3]) continue;
                acc += load_x(((b * x[1] + xc) * x[2] + ih) * x[3] + iw) *
                       load_w(((m * cg + c) * w[2] + kh) * w[3] + kw, m);
              }
            }
          }
          emit(((b * y[1] + m) * y[2] + oh) * y[3] + ow, m, acc);
        }
      }
    }
  }
}

// Batched matrix product with numpy broadcasting of the batch dimensions.
template <typename Emit, typename LA, typename LB>
void matmul_loop(const Shape& a, const Shape& b, const Shape& y, LA load_a, LB load_b, Emit emit) {
  const int64_t m = a[a.size() - 2], k = a.back(), nn = b.back();
  const size_t batch_rank = y.size() - 2;
  const uint64_t batches = element_count(Shape(y.begin(), y.end() - 2));
  for (uint64_t o = 0; o < batches; ++o) {
    // Offsets of this batch in A and B, broadcasting size-1 dimensions.
    uint64_t rem = o, ia = 0, ib = 0, sa = 1, sb = 1;
    for (size_t d = batch_rank; d-- > 0;) {
      const int64_t idx = static_cast<int64_t>(rem % static_cast<uint64_t>(y[d]));
      rem /= static_cast<uint64_t>(y[d]);
      const int64_t ad = d + a.size() >= y.size() ? a[d + a.size() - y.size()] : 1;
      const int64_t bd = d + b.size() >= y.size() ? b[d + b.size() - y.size()] : 1;
      if (d + a.size() >= y.size()) {
        ia += (ad == 1 ? 0 : idx) * sa;
        sa *= ad;
      }
      if (d + b.size() >= y.size()) {
        ib += (bd == 1 ? 0 : idx) * sb;
        sb *= bd;
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < nn; ++j) {
        emit(o * m * nn + i * nn + j, i, j, ia * m * k, ib * k * nn, load_a, load_b, k, nn);
      }
    }
  }
}

void binary(const Node& n, bool add) {
  const Shape& y = n.out_t().shape;
  const Shape& a = n.shape(0);
  const Shape& b = n.shape(1);
  const float* pa = n.f(0);
  const float* pb = n.f(1);
  float* py = reinterpret_cast<float*>(n.out());
  const uint64_t total = element_count(y);
  const size_t r = y.size();
  for (uint64_t o = 0; o < total; ++o) {
    uint64_t rem = o, ia = 0, ib = 0, sa = 1, sb = 1;
    for (size_t d = r; d-- > 0;) {
      const uint64_t idx = rem % static_cast<uint64_t>(y[d]);
      rem /= static_cast<uint64_t>(y[d]);
      if (d + a.size() >= r) {
        const auto ad = static_cast<uint64_t>(a[d + a.size() - r]);
        ia += (ad == 1 ? 0 : idx) * sa;
        sa *= ad;
      }
      if (d + b.size() >= r) {
        const auto bd = static_cast<uint64_t>(b[d + b.size() - r]);
        ib += (bd == 1 ? 0 : idx) * sb;
        sb *= bd;
      }
    }
    py[o] = add ? pa[ia] + pb[ib] : pa[ia] * pb[ib];
  }
}

void pool(const Node& n, bool max) {
  const Shape& x = n.shape(0);
  const Shape& y = n.out_t().shape;
  const float* px = n.f(0);
  float* py = reinterpret_cast<float*>(n.out());
  const int64_t kh = n.param(kKh), kw = n.param(kKw), sh = n.param(kSh), sw = n.param(kSw);
  const int64_t dh = n.param(kDh), dw = n.param(kDw), pt = n.param(kPadT), pl = n.param(kPadL);
  const int64_t ph_end = x[2] + n.param(kPadB), pw_end = x[3] + n.param(kPadR);
  const bool include = n.param(kCountIncludePad) != 0;
  for (int64_t p = 0; p < x[0] * x[1]; ++p) {
    const float* plane = px + p * x[2] * x[3];
    for (int64_t oh = 0; oh < y[2]; ++oh) {
      for (int64_t ow = 0; ow < y[3]; ++ow) {
        float best = 0.0f, sum = 0.0f;
        bool any = false;
        int64_t valid = 0, padded_h = 0, padded_w = 0;
        for (int64_t i = 0; i < kh; ++i) {
          const int64_t ih = oh * sh - pt + i * dh;
          if (ih >= -pt && ih < ph_end) ++padded_h;
        }
        for (int64_t j = 0; j < kw; ++j) {
          const int64_t iw = ow * sw - pl + j * dw;
          if (iw >= -pl && iw < pw_end) ++padded_w;
        }
        for (int64_t i = 0; i < kh; ++i) {
          const int64_t ih = oh * sh - pt + i * dh;
          if (ih < 0 || ih >= x[2]) continue;
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t iw = ow * sw - pl + j * dw;
            if (iw < 0 || iw >= x[3]) continue;
            const float v = plane[ih * x[3] + iw];
            if (!any || v > best) best = v;
            any = true;
            sum += v;
            ++valid;
          }
        }
        const int64_t count = include ? padded_h * padded_w : valid;
        float& out = py[(p * y[2] + oh) * y[3] + ow];
        if (max) {
          out = any ? best : std::numeric_limits<float>::lowest();
        } else {
          out = count > 0 ? sum / static_cast<float>(count) : 0.0f;
        }
      }
    }
  }
}

// Channel of element i for per-axis quantization of `shape` at `axis`.
uint64_t channel_of(const Shape& shape, int64_t axis, uint64_t count, uint64_t i) {
  if (count == 1) return 0;
  uint64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= static_cast<uint64_t>(shape[d]);
  return (i / inner) % count;
}

}  // namespace

int32_t requantize(double value, bool is_unsigned) {
  double r = std::nearbyint(value);
  const double lo = is_unsigned ? 0.0 : -128.0;
  const double hi = is_unsigned ? 255.0 : 127.0;
  if (!(r >= lo)) r = lo;
  if (r > hi) r = hi;
  return static_cast<int32_t>(r);
}

void run_node(const Bitstream& bs, const BsNode& node, std::byte* const* data) {
  const Node n(bs, node, data);
  const uint64_t count = element_count(n.out_t().shape);
  switch (node.op) {
    case Op::kConv: {
      const float* x = n.f(0);
      const float* w = n.f(1);
      const float* b = n.f(2);
      float* y = reinterpret_cast<float*>(n.out());
      conv_loop<float>(
          n, 0, 1, [&](int64_t i) { return x[i]; }, [&](int64_t i, int64_t) { return w[i]; },
          [&](int64_t i, int64_t m, float acc) { y[i] = acc + (b ? b[m] : 0.0f); });
      return;
    }
    case Op::kConvInteger: {
      const int64_t xz = n.chan(2).zp(0);
      const Chan wz = n.chan(3);
      int32_t* y = reinterpret_cast<int32_t*>(n.out());
      conv_loop<int64_t>(
          n, 0, 1, [&](int64_t i) { return n.load(0, static_cast<uint64_t>(i)) - xz; },
          [&](int64_t i, int64_t m) { return n.load(1, static_cast<uint64_t>(i)) - wz.zp(static_cast<uint64_t>(m)); },
          [&](int64_t i, int64_t, int64_t acc) { y[i] = static_cast<int32_t>(acc); });
      return;
    }
    case Op::kQLinearConv: {
      const float xs = n.chan(1).scale(0), ys = n.chan(6).scale(0);
      const int64_t xz = n.chan(2).zp(0);
      const double yz = static_cast<double>(n.chan(7).zp(0));
      const Chan ws = n.chan(4), wz = n.chan(5);
      const int32_t* bias = reinterpret_cast<const int32_t*>(n.in(8));
      const loom_dtype_t yt = n.out_t().dtype;
      conv_loop<int64_t>(
          n, 0, 3, [&](int64_t i) { return n.load(0, static_cast<uint64_t>(i)) - xz; },
          [&](int64_t i, int64_t m) { return n.load(3, static_cast<uint64_t>(i)) - wz.zp(static_cast<uint64_t>(m)); },
          [&](int64_t i, int64_t m, int64_t acc) {
            const int64_t total = int64_t{static_cast<int32_t>(acc)} + (bias ? bias[m] : 0);
            const float scaled = static_cast<float>(total) * (xs * ws.scale(static_cast<uint64_t>(m)) / ys);
            store_q(n.out(), yt, static_cast<uint64_t>(i), requantize(static_cast<double>(scaled) + yz, yt == LOOM_DTYPE_U8));
          });
      return;
    }
    case Op::kMatMul: {
      const float* a = n.f(0);
      const float* b = n.f(1);
      float* y = reinterpret_cast<float*>(n.out());
      matmul_loop(n.shape(0), n.shape(1), n.out_t().shape, a, b,
                  [&](uint64_t o, int64_t i, int64_t j, uint64_t oa, uint64_t ob, const float* pa,
                      const float* pb, int64_t k, int64_t nn) {
                    float acc = 0.0f;
                    for (int64_t p = 0; p < k; ++p) acc += pa[oa + i * k + p] * pb[ob + p * nn + j];
                    y[o] = acc;
                  });
      return;
    }
    case Op::kMatMulInteger:
    case Op::kQLinearMatMul: {
      const bool q = node.op == Op::kQLinearMatMul;
      const size_t b_i = q ? 3 : 1;
      const Chan az = n.chan(q ? 2 : 2), bz = n.chan(q ? 5 : 3);
      const float as = q ? n.chan(1).scale(0) : 0.0f, ys = q ? n.chan(6).scale(0) : 1.0f;
      const Chan bs_ = q ? n.chan(4) : Chan{};
      const double yz = q ? static_cast<double>(n.chan(7).zp(0)) : 0.0;
      const loom_dtype_t yt = n.out_t().dtype;
      const int64_t a_zero = az.zp(0);
      matmul_loop(n.shape(0), n.shape(b_i), n.out_t().shape, 0, 0,
                  [&](uint64_t o, int64_t i, int64_t j, uint64_t oa, uint64_t ob, int, int, int64_t k,
                      int64_t nn) {
                    int64_t acc = 0;
                    const int64_t b_zero = bz.zp(static_cast<uint64_t>(j));
                    for (int64_t p = 0; p < k; ++p) {
                      acc += (n.load(0, oa + static_cast<uint64_t>(i * k + p)) - a_zero) *
                             (n.load(b_i, ob + static_cast<uint64_t>(p * nn + j)) - b_zero);
                    }
                    const auto acc32 = static_cast<int32_t>(acc);
                    if (!q) {
                      reinterpret_cast<int32_t*>(n.out())[o] = acc32;
                      return;
                    }
                    const float scale = as * bs_.scale(static_cast<uint64_t>(j)) / ys;
                    store_q(n.out(), yt, o,
                            requantize(static_cast<double>(static_cast<float>(acc32) * scale) + yz,
                                       yt == LOOM_DTYPE_U8));
                  });
      return;
    }
    case Op::kGemm: {
      const bool ta = node.params[0] != 0, tb = node.params[1] != 0;
      const float alpha = f32_of(node.params[2]), beta = f32_of(node.params[3]);
      const Shape& a = n.shape(0);
      const Shape& y = n.out_t().shape;
      const int64_t m = y[0], nn = y[1], k = ta ? a[0] : a[1];
      const float* pa = n.f(0);
      const float* pb = n.f(1);
      const float* pc = n.f(2);
      Shape cs = n.present(2) ? n.shape(2) : Shape{};
      while (cs.size() < 2) cs.insert(cs.begin(), 1);
      float* py = reinterpret_cast<float*>(n.out());
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < nn; ++j) {
          float acc = 0.0f;
          for (int64_t p = 0; p < k; ++p) {
            acc += (ta ? pa[p * m + i] : pa[i * k + p]) * (tb ? pb[j * k + p] : pb[p * nn + j]);
          }
          float v = alpha * acc;
          if (pc != nullptr) v += beta * pc[(cs[0] == 1 ? 0 : i) * cs[1] + (cs[1] == 1 ? 0 : j)];
          py[i * nn + j] = v;
        }
      }
      return;
    }
    case Op::kAdd: binary(n, true); return;
    case Op::kMul: binary(n, false); return;
    case Op::kRelu:
    case Op::kClip: {
      const float* x = n.f(0);
      float* y = reinterpret_cast<float*>(n.out());
      if (node.op == Op::kRelu) {
        for (uint64_t i = 0; i < count; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
      } else {
        const float lo = f32_of(node.params[0]), hi = f32_of(node.params[1]);
        for (uint64_t i = 0; i < count; ++i) y[i] = std::min(std::max(x[i], lo), hi);
      }
      return;
    }
    case Op::kMaxPool: pool(n, true); return;
    case Op::kAveragePool: pool(n, false); return;
    case Op::kGlobalAveragePool: {
      const Shape& x = n.shape(0);
      const uint64_t planes = static_cast<uint64_t>(x[0] * x[1]);
      const uint64_t size = planes == 0 ? 0 : element_count(x) / planes;
      const float* px = n.f(0);
      float* py = reinterpret_cast<float*>(n.out());
      for (uint64_t p = 0; p < planes; ++p) {
        float sum = 0.0f;
        for (uint64_t i = 0; i < size; ++i) sum += px[p * size + i];
        py[p] = size > 0 ? sum / static_cast<float>(size) : 0.0f;
      }
      return;
    }
    case Op::kConcat: {
      const Shape& y = n.out_t().shape;
      const auto axis = static_cast<size_t>(node.params[0]);
      const size_t es = dtype_size(n.out_t().dtype);
      uint64_t outer = 1, inner = es;
      for (size_t d = 0; d < axis; ++d) outer *= static_cast<uint64_t>(y[d]);
      for (size_t d = axis + 1; d < y.size(); ++d) inner *= static_cast<uint64_t>(y[d]);
      const uint64_t row = static_cast<uint64_t>(y[axis]) * inner;
      uint64_t at = 0;
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        const uint64_t chunk = static_cast<uint64_t>(n.shape(k)[axis]) * inner;
        for (uint64_t o = 0; o < outer && chunk > 0; ++o) {
          std::memcpy(n.out() + o * row + at, n.in(k) + o * chunk, chunk);
        }
        at += chunk;
      }
      return;
    }
    case Op::kReshape:
    case Op::kFlatten:
      if (n.out_t().bytes != 0) std::memmove(n.out(), n.in(0), n.out_t().bytes);
      return;
    case Op::kQuantizeLinear: {
      const Chan s = n.chan(1), z = n.chan(2);
      const float* x = n.f(0);
      const loom_dtype_t yt = n.out_t().dtype;
      const float lo = yt == LOOM_DTYPE_U8 ? 0.0f : -128.0f, hi = yt == LOOM_DTYPE_U8 ? 255.0f : 127.0f;
      for (uint64_t i = 0; i < count; ++i) {
        const uint64_t c = channel_of(n.shape(0), node.params[0], s.count, i);
        const float v = std::nearbyint(x[i] / s.scale(c)) + static_cast<float>(z.zp(c));
        // NaN becomes 0, like the reference kernel's conversion.
        const float clamped = std::isnan(v) ? 0.0f : std::clamp(v, lo, hi);
        store_q(n.out(), yt, i, static_cast<int32_t>(clamped));
      }
      return;
    }
    case Op::kDequantizeLinear: {
      const Chan s = n.chan(1), z = n.chan(2);
      const Chan x = n.chan(0);
      float* y = reinterpret_cast<float*>(n.out());
      for (uint64_t i = 0; i < count; ++i) {
        const uint64_t c = channel_of(n.shape(0), node.params[0], s.count, i);
        Chan xi = x;
        xi.count = 0;  // index directly
        y[i] = static_cast<float>(xi.zp(i) - z.zp(c)) * s.scale(c);
      }
      return;
    }
  }
}

}  // namespace loom::fpga_stub
