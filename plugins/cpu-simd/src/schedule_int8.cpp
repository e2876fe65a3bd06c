// The quantized steps: see schedule_int8.hpp for the arithmetic and why it
// equals the reference kernels exactly.
#include "schedule_int8.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "schedule_int8_step.hpp"
#include "schedule_plan.hpp"

namespace loom::cpu_simd {

namespace {

using plan::cpu_engine;
using plan::dims_of;
using plan::plain_tag;

bool is_u8(loom_dtype_t d) { return d == LOOM_DTYPE_U8; }

}  // namespace

int64_t int8_elements(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Reads a one-element or per-channel parameter as integers / floats.
int64_t int8_zp_at(const void* p, loom_dtype_t d, int64_t i) {
  if (p == nullptr) return 0;
  switch (d) {
    case LOOM_DTYPE_U8: return static_cast<const uint8_t*>(p)[i];
    case LOOM_DTYPE_I8: return static_cast<const int8_t*>(p)[i];
    case LOOM_DTYPE_I32: return static_cast<const int32_t*>(p)[i];
    default: return 0;
  }
}

namespace {

sdk::Status check_scales(const Int8Step& s, const float* v, int64_t count, const char* what) {
  for (int64_t i = 0; i < count; ++i) {
    if (!(v[i] > 0.0f) || !std::isfinite(v[i])) {
      return sdk::invalid_argument("cpu-simd: " + s.where + ": " + what +
                                   (count > 1 ? " entry " + std::to_string(i) : std::string()) + " is " +
                                   std::to_string(v[i]) + "; a scale must be positive and finite");
    }
  }
  return sdk::Status();
}

int64_t param_count(const Int8Step& s, int i) {
  return i < 0 ? 0 : int8_elements(s.in_shapes[static_cast<size_t>(i)]);
}

// Round half to even as nearbyint does in the default rounding mode, without
// the library call: adding and subtracting 1.5 * 2^52 leaves the nearest
// integer (ties to even) for |v| < 2^51; larger values, infinities included,
// stay beyond the output range and saturate below.
inline double round_half_even(double v) {
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  if (!(std::fabs(v) < 2251799813685248.0)) return v;  // 2^51
  return (v + kMagic) - kMagic;  // not reassociated without -ffast-math
}

// ONNX's requantization as the reference kernels compute it, or with
// `round_first` (format 10's trans_a 1) as a QuantizeLinear does: rounded,
// then the zero point added.
int32_t requantize(float scaled, double zero, bool is_unsigned, bool round_first) {
  double r = round_first ? round_half_even(static_cast<double>(scaled)) + zero
                         : round_half_even(static_cast<double>(scaled) + zero);
  const double lo = is_unsigned ? 0.0 : -128.0;
  const double hi = is_unsigned ? 255.0 : 127.0;
  if (!(r >= lo)) r = lo;
  if (r > hi) r = hi;
  return static_cast<int32_t>(r);
}

template <typename Q>
void quantize_loop(const Int8Step& s, const float* x, const float* scale, const void* zp, Q* y, int64_t begin,
                   int64_t end) {
  const float lo = static_cast<float>(std::numeric_limits<Q>::min());
  const float hi = static_cast<float>(std::numeric_limits<Q>::max());
  const loom_dtype_t zd = s.in_dtypes.size() > 2 ? s.in_dtypes[2] : LOOM_DTYPE_U8;
  int64_t start = begin;
  if (s.avx2 && s.channels == 1) {
    // Per tensor on AVX2: all but the last count % 8 elements eight at a time.
    start = begin + (end - begin) / 8 * 8;
    const float zero = static_cast<float>(int8_zp_at(zp, zd, 0));
    quantize_rows_avx2(x + begin, start - begin, scale[0], zero, std::is_same_v<Q, uint8_t>,
                       reinterpret_cast<uint8_t*>(y + begin));
  }
  for (int64_t i = start; i < end; ++i) {
    const int64_t ch = s.channels == 1 ? 0 : (i / s.inner) % s.channels;
    // Round half to even (nearbyint, default rounding mode), then saturate;
    // NaN becomes 0, as in the reference kernels.
    float v = std::nearbyint(x[i] / scale[ch]) + static_cast<float>(int8_zp_at(zp, zd, ch));
    v = std::clamp(v, lo, hi);
    y[i] = std::isnan(v) ? Q{0} : static_cast<Q>(v);
  }
}

// Calls body(begin, end) over [0, count): on this thread when small, else in
// blocks of 4096 elements (a multiple of the 8-wide loops) across the pool.
template <typename Body>
void over_blocks(int64_t count, ThreadPool& pool, Body body) {
  constexpr int64_t kBlock = 4096;
  if (count < (int64_t{1} << 15)) {
    body(int64_t{0}, count);
    return;
  }
  auto blocks = [&](size_t b, size_t e) {
    body(static_cast<int64_t>(b) * kBlock, std::min(count, static_cast<int64_t>(e) * kBlock));
  };
  pool.parallel_for(static_cast<size_t>((count + kBlock - 1) / kBlock), 1, blocks);
}

}  // namespace

sdk::Status make_int8_step(const BlobGraph& g, size_t index, const std::vector<bool>& fixed, bool avx2,
                           bool nhwc, std::shared_ptr<Int8Step>* out) {
  const BlobNode& node = g.nodes[index];
  auto s = std::make_shared<Int8Step>();
  s->op = node.op;
  s->io_nhwc = nhwc;  // plan_conv keeps it where it can
  s->where = "node " + std::to_string(index) + " (" + op_name(node.op) + ")";
  std::string why;
  if (!quant::operands_of(node, &s->q, &why)) return sdk::invalid_argument("cpu-simd: " + s->where + ": " + why);
  for (uint32_t t : node.inputs) {
    s->in_shapes.push_back(g.tensors[t].shape);
    s->in_dtypes.push_back(g.tensors[t].dtype);
  }
  s->out_shape = g.tensors[node.outputs[0]].shape;
  s->out_dtype = g.tensors[node.outputs[0]].dtype;
  s->out_count = int8_elements(s->out_shape);
  s->trans_b = node.op == Op::kQLinearMatMul && node.trans_b == 1;
  s->round_first = (node.op == Op::kQLinearConv || node.op == Op::kQLinearMatMul) && node.trans_a == 1;
  if (node.floats.size() == 2) {
    s->clamp = true;
    s->clamp_lo = static_cast<int32_t>(node.floats[0]);
    s->clamp_hi = static_cast<int32_t>(node.floats[1]);
  }
  try {
    switch (node.op) {
      case Op::kQuantizeLinear:
      case Op::kDequantizeLinear: {
        s->io_nhwc = false;  // element by element: the layout is the schedule's
        const std::vector<int64_t>& scale = s->in_shapes[1];
        if (!quant::one_element(scale)) {
          s->channels = scale[0];
          for (size_t d = static_cast<size_t>(node.axis) + 1; d < s->out_shape.size(); ++d) {
            s->inner *= s->out_shape[d];
          }
        }
        break;
      }
      case Op::kQLinearConv:
      case Op::kConvInteger:
        LOOM_SDK_RETURN_IF_ERROR(plan_conv(g, node, s.get()));
        break;
      case Op::kQLinearConvTranspose:
        LOOM_SDK_RETURN_IF_ERROR(plan_deconv(g, node, fixed, s.get()));
        break;
      default:
        s->io_nhwc = false;
        LOOM_SDK_RETURN_IF_ERROR(plan_matmul(g, node, s.get()));
        break;
    }
  } catch (const dnnl::error& e) {
    return sdk::unimplemented("cpu-simd: " + s->where + ": oneDNN has no int8 primitive for these shapes (" +
                              e.what() + ")");
  }
  s->avx2 = avx2;
  if (s->q.weight >= 0 && s->deconv == nullptr) {
    const uint32_t wt = node.inputs[static_cast<size_t>(s->q.weight)];
    s->weight_fixed = fixed[wt];
    s->bias_fixed = s->q.bias >= 0 && fixed[node.inputs[static_cast<size_t>(s->q.bias)]];
    auto fixed_at = [&](int i) { return i < 0 || fixed[node.inputs[static_cast<size_t>(i)]]; };
    s->params_fixed = fixed_at(s->q.x_scale) && fixed_at(s->q.w_scale) && fixed_at(s->q.y_scale) && fixed_at(s->q.w_zp);
    s->shift = is_u8(g.tensors[wt].dtype) ? 128 : 0;
    s->split = lacks_vnni();
  }
  *out = std::move(s);
  return sdk::Status();
}

uint64_t int8_packed_bytes(const Int8Step& step) {
  auto& s = const_cast<Int8Step&>(step);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.deconv != nullptr) {
    const std::shared_ptr<const DeconvPack>& p = s.deconv->pack;
    return p == nullptr ? 0 : p->wei.get_desc().get_size() + (p->two_pass ? p->low.get_desc().get_size() : 0);
  }
  return s.packed != nullptr ? s.packed->mem.get_desc().get_size() : 0;
}

HeldScratch::HeldScratch(Int8Step& s) : step_(s) {
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.scratch.empty()) {
      held_ = std::move(s.scratch.back());
      s.scratch.pop_back();
    }
  }
  if (held_ == nullptr) held_ = std::make_unique<Int8Scratch>();
}

HeldScratch::~HeldScratch() {
  std::lock_guard<std::mutex> lock(step_.mutex);
  step_.scratch.push_back(std::move(held_));
}

// Runs `prim` (src, weights, dst[, bias]) with the oneDNN stream and memory
// objects `b` keeps for calls of `kind`, made at its first such call and
// pointed at this run's tensors (a step's weights may repack into the other
// kind, which makes them again).
void run_kept_call(Int8Scratch& b, int kind, const dnnl::primitive& prim, const memory::desc& src_md, const void* src,
                   const memory::desc& dst_md, void* dst, const memory& weights, const memory::desc* bias_md,
                   const void* bias) {
  if (b.kept != kind) {
    dnnl::engine& eng = cpu_engine();
    b.stream = dnnl::stream(eng);
    b.src = memory(src_md, eng, const_cast<void*>(src));
    b.dst = memory(dst_md, eng, dst);
    b.args = {{DNNL_ARG_SRC, b.src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, b.dst}};
    if (bias_md != nullptr) {
      b.bias = memory(*bias_md, eng, const_cast<void*>(bias));
      b.args[DNNL_ARG_BIAS] = b.bias;
    }
    b.kept = kind;
  }
  b.src.set_data_handle(const_cast<void*>(src));
  b.dst.set_data_handle(dst);
  if (bias_md != nullptr) b.bias.set_data_handle(const_cast<void*>(bias));
  b.args[DNNL_ARG_WEIGHTS] = weights;
  prim.execute(b.stream, b.args);
  b.stream.wait();
}

// The first `wide` biases in requantize_row_avx2's two forms (0 without a
// bias), in `b`: kept while a fixed bias stays at one address.
void keep_wide_bias(const Int8Step& s, const int32_t* bias, int64_t wide, Int8Scratch* b) {
  if ((s.bias_fixed || bias == nullptr) && b->bias_from == bias && b->bias_wide.size() == static_cast<size_t>(wide)) {
    return;
  }
  b->bias_wide.assign(static_cast<size_t>(wide), 0.0);
  b->bias_wide32.assign(static_cast<size_t>(wide), 0);
  for (int64_t j = 0; bias != nullptr && j < wide; ++j) {
    b->bias_wide[static_cast<size_t>(j)] = static_cast<double>(bias[j]);
    b->bias_wide32[static_cast<size_t>(j)] = bias[j];
  }
  b->bias_from = bias;
}

sdk::Status run_int8_step(Int8Step& s, const std::vector<const void*>& ins, void* out, ThreadPool& pool) {
  if (s.deconv != nullptr) return run_deconv(s, ins, out, pool);
  const quant::QuantOperands& q = s.q;
  auto ptr = [&](int i) { return i < 0 ? nullptr : ins[static_cast<size_t>(i)]; };
  auto dt = [&](int i) { return i < 0 ? LOOM_DTYPE_U8 : s.in_dtypes[static_cast<size_t>(i)]; };
  if (s.op == Op::kQuantizeLinear || s.op == Op::kDequantizeLinear) {
    const float* scale = static_cast<const float*>(ins[1]);
    LOOM_SDK_RETURN_IF_ERROR(check_scales(s, scale, param_count(s, 1), "the scale"));
    const void* zp = ptr(q.x_zp);
    if (s.op == Op::kQuantizeLinear) {
      const float* x = static_cast<const float*>(ins[0]);
      over_blocks(s.out_count, pool, [&](int64_t begin, int64_t end) {
        if (s.out_dtype == LOOM_DTYPE_U8) {
          quantize_loop(s, x, scale, zp, static_cast<uint8_t*>(out), begin, end);
        } else {
          quantize_loop(s, x, scale, zp, static_cast<int8_t*>(out), begin, end);
        }
      });
      return sdk::Status();
    }
    float* y = static_cast<float*>(out);
    const loom_dtype_t xd = s.in_dtypes[0];
    if (s.channels == 1 && xd != LOOM_DTYPE_I32) {
      // Per tensor, 8 bits: the same arithmetic in a loop the compiler
      // vectorizes (the difference is exact in i32).
      const int32_t z = static_cast<int32_t>(int8_zp_at(zp, xd, 0));
      const float sc = scale[0];
      over_blocks(s.out_count, pool, [&](int64_t begin, int64_t end) {
        int64_t start = begin;
        if (s.avx2) {
          start = begin + (end - begin) / 8 * 8;
          dequantize_rows_avx2(static_cast<const uint8_t*>(ins[0]) + begin, start - begin, sc, z,
                               xd == LOOM_DTYPE_U8, y + begin);
        }
        if (xd == LOOM_DTYPE_U8) {
          const uint8_t* x = static_cast<const uint8_t*>(ins[0]);
          for (int64_t i = start; i < end; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - z) * sc;
        } else {
          const int8_t* x = static_cast<const int8_t*>(ins[0]);
          for (int64_t i = start; i < end; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - z) * sc;
        }
      });
      return sdk::Status();
    }
    for (int64_t i = 0; i < s.out_count; ++i) {
      const int64_t ch = s.channels == 1 ? 0 : (i / s.inner) % s.channels;
      const int64_t diff = int8_zp_at(ins[0], xd, i) - int8_zp_at(zp, xd, ch);
      y[i] = static_cast<float>(diff) * scale[ch];
    }
    return sdk::Status();
  }

  // Parameters, checked before anything runs.
  const bool qlinear = s.op == Op::kQLinearConv || s.op == Op::kQLinearMatMul;
  const int64_t channels = s.conv ? s.m : s.cols;
  const int64_t xz = int8_zp_at(ptr(q.x_zp), dt(q.x_zp), 0);
  const bool wz_per_channel = param_count(s, q.w_zp) > 1;
  auto wz = [&](int64_t ch) { return int8_zp_at(ptr(q.w_zp), dt(q.w_zp), wz_per_channel ? ch : 0); };
  // The scales' check, the multipliers and the R term's need: kept by the
  // step while its fixed parameters stay at the same addresses.
  std::shared_ptr<const RequantParams> params;
  const std::array<const void*, 4> from = {ptr(q.x_scale), ptr(q.w_scale), ptr(q.y_scale), ptr(q.w_zp)};
  if (s.params_fixed) {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.params != nullptr && s.params->from == from) params = s.params;
  }
  if (params == nullptr) {
    auto made = std::make_shared<RequantParams>();
    made->from = from;
    if (qlinear) {
      const auto* xs = static_cast<const float*>(ptr(q.x_scale));
      const auto* ws = static_cast<const float*>(ptr(q.w_scale));
      const auto* ys = static_cast<const float*>(ptr(q.y_scale));
      LOOM_SDK_RETURN_IF_ERROR(check_scales(s, xs, 1, "x_scale"));
      LOOM_SDK_RETURN_IF_ERROR(check_scales(s, ws, param_count(s, q.w_scale), "w_scale"));
      LOOM_SDK_RETURN_IF_ERROR(check_scales(s, ys, 1, "y_scale"));
      made->mult.resize(static_cast<size_t>(channels));
      const bool ws_per_channel = param_count(s, q.w_scale) > 1;
      for (int64_t ch = 0; ch < channels; ++ch) {
        made->mult[static_cast<size_t>(ch)] = xs[0] * ws[ws_per_channel ? ch : 0] / ys[0];
      }
    }
    for (int64_t ch = 0; ch < channels && !made->need_r; ++ch) made->need_r = s.shift - wz(ch) != 0;
    params = made;
    if (s.params_fixed) {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.params = params;
    }
  }
  const bool need_r = params->need_r;
  const std::vector<float>& mult = params->mult;

  // Weights: packed once when fixed, else for this run.
  const void* w = ins[static_cast<size_t>(q.weight)];
  std::shared_ptr<const PackedInt8> packed;
  if (s.weight_fixed) {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.packed == nullptr || s.packed->from != w) {
      s.packed = s.store != nullptr ? shared_int8_pack(*s.store, s, w) : pack_int8_weights(s, w);
    }
    packed = s.packed;
  } else {
    packed = pack_int8_weights(s, w);
  }

  // The run's buffers: a free set of the step's, or new ones (kept after).
  HeldScratch buffers(s);

  if (packed->fused && (s.io_nhwc || !s.conv)) {
    // oneDNN requantizes (Int8Step::fused_prim) from x to y, both
    // channels-last (or a matmul's, plain).
    run_kept_call(*buffers, Int8Scratch::kFused, s.fused_prim, s.src_md, ins[0], s.fused_y_md, out, packed->mem,
                  q.bias >= 0 ? &s.bias_md : nullptr, q.bias >= 0 ? ins[static_cast<size_t>(q.bias)] : nullptr);
    return sdk::Status();
  }
  if (packed->fused) {
    // oneDNN requantizes (Int8Step::fused_prim): y's bytes, channels-last.
    dnnl::engine& eng = cpu_engine();
    dnnl::stream st(eng);
    memory src(s.io_nhwc ? s.src_md : s.user_src_md, eng, const_cast<void*>(ins[0]));
    if (!s.io_nhwc) {
      buffers->x.resize(s.src_md.get_size());
      memory reordered(s.src_md, eng, buffers->x.data());
      s.src_reorder.execute(st, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, reordered}});
      src = reordered;
    }
    if (!s.io_nhwc) buffers->y.resize(static_cast<size_t>(s.n * s.o * s.m));
    memory dst(s.y_nhwc_md, eng, s.io_nhwc ? out : buffers->y.data());
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, packed->mem}, {DNNL_ARG_DST, dst}};
    if (q.bias >= 0) args[DNNL_ARG_BIAS] = memory(s.bias_md, eng, const_cast<void*>(ins[static_cast<size_t>(q.bias)]));
    s.fused_prim.execute(st, args);
    if (!s.io_nhwc) {
      memory plain(s.y_plain_md, eng, out);
      s.y_reorder.execute(st, {{DNNL_ARG_FROM, dst}, {DNNL_ARG_TO, plain}});
    }
    st.wait();
    return sdk::Status();
  }

  // P = x * ws in s32.
  std::vector<int32_t>& acc = buffers->acc;
  acc.resize(static_cast<size_t>(s.out_count));
  dnnl::engine& eng = cpu_engine();
  if (!(s.nhwc && !s.io_nhwc) && !packed->two_pass) {
    // The common call: x as the primitive reads it, one pass.
    run_kept_call(*buffers, Int8Scratch::kProduct, s.prim, s.src_md, ins[0], s.dst_md, acc.data(), packed->mem,
                  nullptr, nullptr);
  } else {
    dnnl::stream st(eng);
    memory src(s.nhwc && !s.io_nhwc ? s.user_src_md : s.src_md, eng, const_cast<void*>(ins[0]));
    if (s.nhwc && !s.io_nhwc) {
      buffers->x.resize(s.src_md.get_size());
      memory reordered(s.src_md, eng, buffers->x.data());
      s.src_reorder.execute(st, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, reordered}});
      src = reordered;
    }
    memory dst(s.dst_md, eng, acc.data());
    s.prim.execute(st, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, packed->mem}, {DNNL_ARG_DST, dst}});
    st.wait();
    if (packed->two_pass) {
      std::vector<int32_t>& low = buffers->low;
      low.resize(acc.size());
      memory low_dst(s.dst_md, eng, low.data());
      if (packed->half) {
        buffers->x_half.resize(s.half_src_md.get_size());
        memory view(s.half_view_md, eng, const_cast<void*>(ins[0]));
        memory evens(s.half_src_md, eng, buffers->x_half.data());
        s.half_reorder.execute(st, {{DNNL_ARG_FROM, view}, {DNNL_ARG_TO, evens}});
        s.half_prim.execute(st, {{DNNL_ARG_SRC, evens}, {DNNL_ARG_WEIGHTS, packed->low}, {DNNL_ARG_DST, low_dst}});
      } else {
        s.prim.execute(st, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, packed->low}, {DNNL_ARG_DST, low_dst}});
      }
      st.wait();
    }
  }
  // The two passes' sum (acc << low_shift) + low: in requantize_row_avx2
  // where it takes every channel, else here.
  const bool all_wide = s.avx2 && s.conv && s.nhwc && qlinear && !need_r && s.m % 4 == 0;
  const int32_t* low = packed->two_pass && all_wide ? buffers->low.data() : nullptr;
  if (packed->two_pass && !all_wide) {
    uint32_t* a = reinterpret_cast<uint32_t*>(acc.data());
    const uint32_t* l = reinterpret_cast<const uint32_t*>(buffers->low.data());
    const size_t count = acc.size();
    const int shift = packed->low_shift;
    for (size_t i = 0; i < count; ++i) a[i] = (a[i] << shift) + l[i];
  }

  const bool x_unsigned = is_u8(s.in_dtypes[0]);
  auto x_at = [&](int64_t i) -> int64_t {
    return x_unsigned ? static_cast<const uint8_t*>(ins[0])[i] : static_cast<const int8_t*>(ins[0])[i];
  };
  // Conv: the element of image b, channel ch at offset `off` within a channel.
  auto x_conv_at = [&](int64_t b, int64_t ch, int64_t off) -> int64_t {
    return x_at(s.io_nhwc ? (b * s.in_sp + off) * s.c + ch : (b * s.c + ch) * s.in_sp + off);
  };
  const int32_t* bias = static_cast<const int32_t*>(ptr(q.bias));
  const bool y_unsigned = s.out_dtype == LOOM_DTYPE_U8;
  const double y_zero = qlinear ? static_cast<double>(int8_zp_at(ptr(q.y_zp), dt(q.y_zp), 0)) : 0.0;
  auto emit = [&](int64_t i, int64_t ch, int64_t total) {
    const int32_t wrapped = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(total)));
    if (!qlinear) {
      static_cast<int32_t*>(out)[i] = wrapped;
      return;
    }
    const int64_t with_bias = int64_t{wrapped} + (bias != nullptr ? bias[ch] : 0);
    int32_t v = requantize(static_cast<float>(with_bias) * mult[static_cast<size_t>(ch)], y_zero, y_unsigned,
                           s.round_first);
    if (s.clamp) v = std::min(std::max(v, s.clamp_lo), s.clamp_hi);
    if (y_unsigned) {
      static_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(v);
    } else {
      static_cast<int8_t*>(out)[i] = static_cast<int8_t>(v);
    }
  };

  if (s.conv) {
    // R: per image, group and output position, the sum of x over the taps.
    std::vector<int64_t>& r = buffers->sums;
    if (need_r) r.assign(static_cast<size_t>(s.n * s.group * s.o), 0);
    for (int64_t b = 0; need_r && b < s.n; ++b) {
      for (int64_t gi = 0; gi < s.group; ++gi) {
        for (int64_t op = 0; op < s.o; ++op) {
          int64_t sum = 0;
          for (int64_t ci = 0; ci < s.cg; ++ci) {
            for (int64_t t = 0; t < s.k; ++t) {
              const int64_t off = s.taps[static_cast<size_t>(op * s.k + t)];
              if (off >= 0) sum += x_conv_at(b, gi * s.cg + ci, off);
            }
          }
          r[static_cast<size_t>((b * s.group + gi) * s.o + op)] = sum;
        }
      }
    }
    const std::vector<int64_t>& cnt = s.cnt;
    std::vector<int64_t>& corr = buffers->corr;
    corr.resize(static_cast<size_t>(s.m));
    for (int64_t mm = 0; mm < s.m; ++mm) corr[static_cast<size_t>(mm)] = s.shift - wz(mm);
    // Channels-last accumulators are walked in their own order, one output
    // position's channels at a time, in a loop without calls: the same
    // arithmetic as emit(), saturation and the clamp as one range (the value
    // is bounded first, so 1.5 * 2^52 rounds it half to even exactly).
    std::vector<int64_t>& bias_row = buffers->bias_row;
    bias_row.assign(static_cast<size_t>(s.m), 0);
    for (int64_t mm = 0; bias != nullptr && mm < s.m; ++mm) bias_row[static_cast<size_t>(mm)] = bias[mm];
    double lo = y_unsigned ? 0.0 : -128.0, hi = y_unsigned ? 255.0 : 127.0;
    if (s.clamp) {
      lo = std::max(lo, static_cast<double>(s.clamp_lo));
      hi = std::min(hi, static_cast<double>(s.clamp_hi));
    }
    if (s.nhwc && qlinear && !s.io_nhwc) buffers->y.resize(static_cast<size_t>(s.n * s.o * s.m));
    uint8_t* const y_rows = s.io_nhwc ? static_cast<uint8_t*>(out) : buffers->y.data();
    // Without the R term (s8 weights with zero point 0, as quantizers
    // write them) the first s.m rounded down to 4 channels of a row take
    // requantize_row_avx2, the same arithmetic four at a time.
    const int64_t wide = s.avx2 && qlinear && !need_r ? s.m / 4 * 4 : 0;
    keep_wide_bias(s, bias, wide, buffers.get());
    const RequantRow rq{mult.data(), buffers->bias_wide.data(), buffers->bias_wide32.data(), static_cast<int32_t>(xz),
                        packed->low_shift, y_zero, lo, hi, wide, static_cast<int32_t>(y_zero), s.round_first};
    // One output position at a time, positions split among the threads
    // (each writes its own row of y, or its own outputs of ConvInteger).
    auto positions = [&](size_t begin, size_t end) {
      for (size_t pi = begin; pi < end; ++pi) {
        const int64_t b = static_cast<int64_t>(pi) / s.o, op = static_cast<int64_t>(pi) % s.o;
        const int32_t* a = acc.data() + (b * s.o + op) * s.m;
        const int32_t* tw = packed->tw_t.data() + op * s.m;
        // The row's bytes, channels-last (u8 and s8 alike: the low byte).
        uint8_t* y = qlinear ? y_rows + (b * s.o + op) * s.m : nullptr;
        if (wide > 0) {
          requantize_row_avx2(rq, a, low == nullptr ? nullptr : low + (b * s.o + op) * s.m, tw, y_unsigned, y);
        }
        for (int64_t mm = wide; mm < s.m; ++mm) {
          int64_t total = a[mm] - xz * tw[mm];
          const int64_t c = corr[static_cast<size_t>(mm)];
          if (c != 0) {
            total += c * (r[static_cast<size_t>((b * s.group + mm / s.mg) * s.o + op)] - xz * cnt[static_cast<size_t>(op)]);
          }
          const int32_t wrapped = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(total)));
          if (!qlinear) {
            static_cast<int32_t*>(out)[(b * s.m + mm) * s.o + op] = wrapped;
            continue;
          }
          const float scaled = static_cast<float>(int64_t{wrapped} + bias_row[static_cast<size_t>(mm)]) *
                               mult[static_cast<size_t>(mm)];
          // Bounded (NaN to lo, as requantize()) and rounded half to even:
          // with the zero point added before, or (round_first) after.
          const double before = s.round_first ? 0.0 : y_zero;
          double v = static_cast<double>(scaled) + before;
          v = std::min(v >= lo - 1.0 - (y_zero - before) ? v : lo - 1.0 - (y_zero - before), hi + 1.0 - (y_zero - before));
          v = ((v + 6755399441055744.0) - 6755399441055744.0) + (y_zero - before);
          y[mm] = static_cast<uint8_t>(static_cast<int32_t>(std::min(std::max(v, lo), hi)));
        }
      }
    };
    if (s.nhwc) pool.parallel_for(static_cast<size_t>(s.n * s.o), 64, positions);
    if (s.nhwc && qlinear && !s.io_nhwc) {
      dnnl::engine& eng = cpu_engine();
      dnnl::stream st(eng);
      memory from(s.y_nhwc_md, eng, buffers->y.data());
      memory to(s.y_plain_md, eng, out);
      s.y_reorder.execute(st, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
      st.wait();
    }
    for (int64_t b = 0; !s.nhwc && b < s.n; ++b) {
      for (int64_t mm = 0; mm < s.m; ++mm) {
        const int64_t gi = mm / s.mg;
        const int64_t c = corr[static_cast<size_t>(mm)];
        for (int64_t op = 0; op < s.o; ++op) {
          const int64_t i = (b * s.m + mm) * s.o + op;
          int64_t total = acc[static_cast<size_t>(i)] - xz * packed->tw[static_cast<size_t>(mm * s.o + op)];
          if (c != 0) {
            total += c * (r[static_cast<size_t>((b * s.group + gi) * s.o + op)] - xz * cnt[static_cast<size_t>(op)]);
          }
          emit(i, mm, total);
        }
      }
    }
    return sdk::Status();
  }

  // MatMul: rowsum of A per row.
  const int64_t total_rows = s.rows * s.batches;
  std::vector<int64_t>& rowsum = buffers->sums;
  rowsum.assign(need_r ? static_cast<size_t>(total_rows) : 0, 0);
  for (int64_t row = 0; need_r && row < total_rows; ++row) {
    int64_t sum = 0;
    for (int64_t kk = 0; kk < s.inner_k; ++kk) sum += x_at(row * s.inner_k + kk);
    rowsum[static_cast<size_t>(row)] = sum;
  }
  // Without the rowsum term (s8 weights with zero point 0, as quantizers
  // write them) the first s.cols rounded down to 4 columns of a row take
  // requantize_row_avx2, the same arithmetic as emit() four at a time (as a
  // channels-last convolution's output positions do); rows split among the
  // threads, each writing its own.
  const int64_t wide = s.avx2 && qlinear && !need_r ? s.cols / 4 * 4 : 0;
  keep_wide_bias(s, bias, wide, buffers.get());
  const std::vector<double>& bias_wide = buffers->bias_wide;
  const std::vector<int32_t>& bias_wide32 = buffers->bias_wide32;
  double lo = y_unsigned ? 0.0 : -128.0, hi = y_unsigned ? 255.0 : 127.0;
  if (s.clamp) {
    lo = std::max(lo, static_cast<double>(s.clamp_lo));
    hi = std::min(hi, static_cast<double>(s.clamp_hi));
  }
  const RequantRow rq{mult.data(), bias_wide.data(), bias_wide32.data(), static_cast<int32_t>(xz), 0, y_zero, lo, hi,
                      wide, static_cast<int32_t>(y_zero), s.round_first};
  auto rows = [&](size_t begin, size_t end) {
    for (int64_t row = static_cast<int64_t>(begin); row < static_cast<int64_t>(end); ++row) {
      const int64_t b = s.b_batches > 1 ? row / s.rows : 0;
      if (wide > 0) {
        requantize_row_avx2(rq, acc.data() + row * s.cols, nullptr, packed->tw_t.data() + b * s.cols, y_unsigned,
                            static_cast<uint8_t*>(out) + row * s.cols);
      }
      for (int64_t j = wide; j < s.cols; ++j) {
        const int64_t i = row * s.cols + j;
        int64_t total = acc[static_cast<size_t>(i)] - xz * packed->tw[static_cast<size_t>(b * s.cols + j)];
        const int64_t corr = s.shift - wz(j);
        if (corr != 0) total += corr * (rowsum[static_cast<size_t>(row)] - xz * s.inner_k);
        emit(i, j, total);
      }
    }
  };
  if (total_rows * s.cols < (int64_t{1} << 15)) {
    rows(0, static_cast<size_t>(total_rows));
  } else {
    pool.parallel_for(static_cast<size_t>(total_rows), 1, rows);
  }
  return sdk::Status();
}

}  // namespace loom::cpu_simd
