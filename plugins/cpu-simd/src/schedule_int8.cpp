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

int64_t count_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Reads a one-element or per-channel parameter as integers / floats.
int64_t zp_at(const void* p, loom_dtype_t d, int64_t i) {
  if (p == nullptr) return 0;
  switch (d) {
    case LOOM_DTYPE_U8: return static_cast<const uint8_t*>(p)[i];
    case LOOM_DTYPE_I8: return static_cast<const int8_t*>(p)[i];
    case LOOM_DTYPE_I32: return static_cast<const int32_t*>(p)[i];
    default: return 0;
  }
}

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
  return i < 0 ? 0 : count_of(s.in_shapes[static_cast<size_t>(i)]);
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

// Whether oneDNN's int8 kernels run without VNNI (pairs of u8 x s8
// products added in 16 bits).
bool lacks_vnni() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return !(isa == dnnl::cpu_isa::avx512_core_vnni || isa == dnnl::cpu_isa::avx512_core_bf16 ||
           isa == dnnl::cpu_isa::avx512_core_amx || isa == dnnl::cpu_isa::avx2_vnni);
}

// Whether a conv weight layout ([O, I, taps], or grouped [G, O, I, taps])
// has its innermost block along I (dimension `c_index`), of even size: then
// the bytes vpmaddubsw pairs are input channels 2j and 2j + 1 of one output
// channel and tap.
bool pairs_along_c(const memory::desc& md, int c_index) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked) return false;
  const auto& b = d.format_desc.blocking;
  return b.inner_nblks > 0 && b.inner_idxs[b.inner_nblks - 1] == c_index && b.inner_blks[b.inner_nblks - 1] % 2 == 0;
}

// A blob constant's values (f32, or u8 / i8 / i32 as integers); false when
// `t` is not a constant.
bool int8_const_floats(const BlobGraph& g, uint32_t t, std::vector<float>* out) {
  const BlobTensor& bt = g.tensors[t];
  if (!bt.constant || bt.dtype != LOOM_DTYPE_F32) return false;
  *out = bt.data;
  return !out->empty();
}

bool int8_const_ints(const BlobGraph& g, uint32_t t, std::vector<int64_t>* out) {
  const BlobTensor& bt = g.tensors[t];
  if (!bt.constant) return false;
  const size_t width = dtype_size(bt.dtype);
  if (width == 0 || bt.bytes.empty() || bt.bytes.size() % width != 0) return false;
  out->resize(bt.bytes.size() / width);
  for (size_t i = 0; i < out->size(); ++i) (*out)[i] = zp_at(bt.bytes.data(), bt.dtype, static_cast<int64_t>(i));
  return true;
}

// Int8Step::fused_prim, where the step allows it (see there): leaves
// fused_possible false otherwise, and when oneDNN has no such primitive.
void plan_fused(const BlobGraph& g, const BlobNode& node, const memory::dims& wdims, const memory::dims& strides,
                const memory::dims& dilates, const memory::dims& pad_l, const memory::dims& pad_r, Int8Step* s) {
  const quant::QuantOperands& q = s->q;
  const uint32_t wt = node.inputs[static_cast<size_t>(q.weight)];
  if (s->op != Op::kQLinearConv || !s->round_first || !s->nhwc || g.tensors[wt].dtype != LOOM_DTYPE_I8 ||
      s->out_shape.size() != 4) {
    return;
  }
  auto input = [&](int i) { return node.inputs[static_cast<size_t>(i)]; };
  std::vector<float> xs, ws, ys;
  std::vector<int64_t> xz = {0}, wz = {0}, yz = {0}, bias;
  if (!int8_const_floats(g, input(q.x_scale), &xs) || !int8_const_floats(g, input(q.w_scale), &ws) ||
      !int8_const_floats(g, input(q.y_scale), &ys) || (q.x_zp >= 0 && !int8_const_ints(g, input(q.x_zp), &xz)) ||
      (q.w_zp >= 0 && !int8_const_ints(g, input(q.w_zp), &wz)) ||
      (q.y_zp >= 0 && !int8_const_ints(g, input(q.y_zp), &yz)) || (q.bias >= 0 && !int8_const_ints(g, input(q.bias), &bias))) {
    return;
  }
  for (int64_t z : wz) {
    if (z != 0) return;
  }
  for (const std::vector<float>* v : {&xs, &ws, &ys}) {
    for (float f : *v) {
      if (!(f > 0.0f) || !std::isfinite(f)) return;  // the loop below reports it
    }
  }
  std::vector<float> mult(static_cast<size_t>(s->m));
  for (int64_t ch = 0; ch < s->m; ++ch) {
    mult[static_cast<size_t>(ch)] = xs[0] * ws[ws.size() > 1 ? static_cast<size_t>(ch) : 0] / ys[0];
  }
  dnnl::primitive_attr attr;
  attr.set_output_scales(ws.size() > 1 ? 1 << 1 : 0, ws.size() > 1 ? mult : std::vector<float>{mult[0]});
  if (xz[0] != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {static_cast<int32_t>(xz[0])});
  if (yz[0] != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {static_cast<int32_t>(yz[0])});
  dnnl::post_ops po;
  po.append_eltwise(1.0f, dnnl::algorithm::eltwise_round, 0.0f, 0.0f);
  if (s->clamp) {
    // After rounding, in units before the zero point: whole numbers, so the
    // clip and the zero point's addition are exact.
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, static_cast<float>(s->clamp_lo - yz[0]),
                      static_cast<float>(s->clamp_hi - yz[0]));
  }
  attr.set_post_ops(po);
  const memory::desc& y_md = s->y_nhwc_md;
  const memory::desc any_wei(wdims, DType::s8, Tag::any);
  s->bias_md = bias.empty() ? memory::desc() : memory::desc({s->m}, DType::s32, Tag::a);
  try {
    const dnnl::convolution_forward::desc desc =
        bias.empty() ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                       dnnl::algorithm::convolution_direct, s->src_md, any_wei, y_md,
                                                       strides, dilates, pad_l, pad_r)
                     : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                       dnnl::algorithm::convolution_direct, s->src_md, any_wei,
                                                       s->bias_md, y_md, strides, dilates, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc pd(desc, attr, cpu_engine());
    s->fused_wei_md = pd.weights_desc();
    s->fused_prim = dnnl::convolution_forward(pd);
  } catch (const dnnl::error&) {
    return;
  }
  s->bias_abs.assign(static_cast<size_t>(s->m), 0);
  for (size_t ch = 0; ch < bias.size() && ch < s->bias_abs.size(); ++ch) s->bias_abs[ch] = std::llabs(bias[ch]);
  s->fused_possible = true;
}

sdk::Status plan_conv(const BlobGraph& g, const BlobNode& node, Int8Step* s) {
  Window w;
  std::string why;
  if (!unpack_window(node, &w, &why)) return sdk::invalid_argument("cpu-simd: " + s->where + ": " + why);
  const std::vector<int64_t>& x = s->in_shapes[0];
  const std::vector<int64_t>& wt = s->in_shapes[static_cast<size_t>(s->q.weight)];
  const std::vector<int64_t>& y = s->out_shape;
  s->conv = true;
  s->n = x[0];
  s->c = x[1];
  s->m = wt[0];
  s->group = w.group;
  s->cg = wt[1];
  s->mg = s->m / s->group;
  s->o = 1;
  s->k = 1;
  s->in_sp = 1;
  const size_t k = static_cast<size_t>(w.k);
  for (size_t d = 0; d < k; ++d) {
    s->o *= y[2 + d];
    s->k *= w.kernel[d];
    s->in_sp *= x[2 + d];
  }
  // Per output position and tap: the input offset within one channel, or -1.
  s->taps.assign(static_cast<size_t>(s->o * s->k), -1);
  std::vector<int64_t> oi(k, 0), ki(k, 0);
  for (int64_t op = 0; op < s->o; ++op) {
    int64_t rem = op;
    for (size_t d = k; d-- > 0;) {
      oi[d] = rem % y[2 + d];
      rem /= y[2 + d];
    }
    for (int64_t t = 0; t < s->k; ++t) {
      int64_t r = t, offset = 0;
      bool inside = true;
      for (size_t d = k; d-- > 0;) {
        ki[d] = r % w.kernel[d];
        r /= w.kernel[d];
      }
      for (size_t d = 0; d < k; ++d) {
        const int64_t pos = oi[d] * w.stride[d] - w.pad_begin[d] + ki[d] * w.dilation[d];
        if (pos < 0 || pos >= x[2 + d]) inside = false;
        offset = offset * x[2 + d] + pos;
      }
      s->taps[static_cast<size_t>(op * s->k + t)] = inside ? offset : -1;
    }
  }
  s->cnt.assign(static_cast<size_t>(s->o), 0);
  for (int64_t op = 0; op < s->o; ++op) {
    int64_t inside = 0;
    for (int64_t t = 0; t < s->k; ++t) inside += s->taps[static_cast<size_t>(op * s->k + t)] >= 0;
    s->cnt[static_cast<size_t>(op)] = inside * s->cg;
  }
  // Weights [O, I, taps]; grouped [G, O / G, I / G, taps]. (oneDNN 2.6 runs a
  // one-group convolution given grouped weights on another, slower kernel:
  // 0.32 against 0.25 ms on the 3-channel stem, BM_QLinearConv_CpuSimdQdq/4.)
  const bool grouped = s->group != 1;
  const int c_index = grouped ? 2 : 1;
  memory::dims strides, dilates, pad_l, pad_r, wdims = {s->mg, s->cg};
  if (grouped) wdims.insert(wdims.begin(), s->group);
  for (size_t d = 0; d < k; ++d) {
    strides.push_back(w.stride[d]);
    dilates.push_back(w.dilation[d] - 1);
    pad_l.push_back(w.pad_begin[d]);
    pad_r.push_back(w.pad_end[d]);
    wdims.push_back(w.kernel[d]);
  }
  const DType src_dt = is_u8(s->in_dtypes[0]) ? DType::u8 : DType::s8;
  // Channels-last for u8 sources only: with s8 sources oneDNN 2.6's AVX2
  // primitive returned zeros in the tests (cause not investigated), so those
  // keep the plain layout and oneDNN's reference convolution.
  s->nhwc = src_dt == DType::u8;
  s->io_nhwc = s->io_nhwc && s->nhwc && x.size() == 4 && s->op == Op::kQLinearConv;
  const Tag nhwc = !s->nhwc ? plain_tag(x.size()) : x.size() == 3 ? Tag::acb : x.size() == 4 ? Tag::acdb : Tag::acdeb;
  s->user_src_md = memory::desc(dims_of(x), src_dt, plain_tag(x.size()));
  s->src_md = memory::desc(dims_of(x), src_dt, nhwc);
  s->dst_md = memory::desc(dims_of(y), DType::s32, nhwc);
  if (s->nhwc && !s->io_nhwc) s->src_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), s->user_src_md, cpu_engine(), s->src_md));
  if (s->nhwc && s->op == Op::kQLinearConv) {
    const DType y_dt = is_u8(s->out_dtype) ? DType::u8 : DType::s8;
    s->y_nhwc_md = memory::desc(dims_of(y), y_dt, nhwc);
    s->y_plain_md = memory::desc(dims_of(y), y_dt, plain_tag(y.size()));
    if (!s->io_nhwc) {
      s->y_reorder =
          dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), s->y_nhwc_md, cpu_engine(), s->y_plain_md));
    }
  }
  s->user_wei_md = memory::desc(wdims, DType::s8, plain_tag(wdims.size()));
  const memory::desc any_wei(wdims, DType::s8, Tag::any);
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                       s->src_md, any_wei, s->dst_md, strides, dilates, pad_l, pad_r);
  dnnl::convolution_forward::primitive_desc pd(desc, cpu_engine());
  s->wei_md = pd.weights_desc();
  s->prim = dnnl::convolution_forward(pd);
  if (s->nhwc && s->group == 1 && s->c % 2 == 0 && lacks_vnni() && pairs_along_c(s->wei_md, c_index)) {
    // x's even channels: a strided view of x (plain, or channels-last with
    // io_nhwc: then C is the innermost dimension), reordered dense.
    memory::dims hd = dims_of(x), view_strides(x.size());
    hd[1] = s->c / 2;
    std::vector<size_t> order(x.size());  // dimensions, outermost first
    for (size_t d = 0; d < x.size(); ++d) order[d] = d;
    if (s->io_nhwc) {
      order.erase(order.begin() + 1);
      order.push_back(1);
    }
    int64_t stride = 1;
    for (size_t j = order.size(); j-- > 0;) {
      view_strides[order[j]] = stride;
      stride *= x[order[j]];
    }
    view_strides[1] *= 2;
    s->half_view_md = memory::desc(hd, src_dt, view_strides);
    s->half_src_md = memory::desc(hd, src_dt, nhwc);
    s->half_reorder =
        dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), s->half_view_md, cpu_engine(), s->half_src_md));
    memory::dims hw = wdims;
    hw[static_cast<size_t>(c_index)] = s->c / 2;
    s->half_user_wei_md = memory::desc(hw, DType::s8, plain_tag(hw.size()));
    dnnl::convolution_forward::desc hdesc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                          s->half_src_md, memory::desc(hw, DType::s8, Tag::any), s->dst_md, strides,
                                          dilates, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc hpd(hdesc, cpu_engine());
    if (pairs_along_c(hpd.weights_desc(), c_index)) {
      s->half_wei_md = hpd.weights_desc();
      s->half_prim = dnnl::convolution_forward(hpd);
      s->half_possible = true;
    }
  }
  plan_fused(g, node, wdims, strides, dilates, pad_l, pad_r, s);
  return sdk::Status();
}

sdk::Status plan_matmul(const Int8Step& ro, Int8Step* s) {
  const std::vector<int64_t>& a = ro.in_shapes[0];
  std::vector<int64_t> b = ro.in_shapes[static_cast<size_t>(ro.q.weight)];
  if (ro.trans_b) std::swap(b[0], b[1]);  // validate() made B 2-D
  s->inner_k = a.back();
  s->cols = b.back();
  memory::dims ad, bd, yd;
  if (b.size() == 2) {
    s->rows = count_of(a) / std::max<int64_t>(1, s->inner_k);
    if (s->inner_k == 0) s->rows = count_of(std::vector<int64_t>(a.begin(), a.end() - 1));
    ad = {s->rows, s->inner_k};
    bd = {s->inner_k, s->cols};
    yd = {s->rows, s->cols};
  } else {
    s->rows = a[a.size() - 2];
    s->batches = count_of(std::vector<int64_t>(a.begin(), a.end() - 2));
    s->b_batches = s->batches;
    ad = dims_of(a);
    bd = dims_of(b);
    yd = dims_of(s->out_shape);
  }
  const DType src_dt = is_u8(s->in_dtypes[0]) ? DType::u8 : DType::s8;
  if (b.size() == 2 && src_dt == DType::u8 && s->rows <= 4 && lacks_vnni()) {
    // A 2-D B and a few rows (a classifier's one), without VNNI: a 1 x 1
    // convolution of the rows ([rows, K, 1, 1] channels-last is A's bytes, [rows, N, 1, 1]
    // the result's), whose weights oneDNN packs into its blocked layout
    // once; its matmul (gemm:jit) takes about five times as long on one row
    // (cpu_simd_bench BM_QLinearMatMul), and less time from 8 rows on. B's
    // [K, N] bytes are given as [N, K, 1, 1] through strides, so the packing
    // transposes them. With VNNI oneDNN's matmul (brg) packs B itself and
    // takes about a third of the convolution's time on one row.
    s->src_md = memory::desc({s->rows, s->inner_k, 1, 1}, src_dt, Tag::nhwc);
    s->dst_md = memory::desc({s->rows, s->cols, 1, 1}, DType::s32, Tag::nhwc);
    s->user_wei_md = memory::desc({s->cols, s->inner_k, 1, 1}, DType::s8,
                                  memory::dims{1, s->cols, s->cols * s->inner_k, s->cols * s->inner_k});
    const memory::desc any_wei({s->cols, s->inner_k, 1, 1}, DType::s8, Tag::any);
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                         s->src_md, any_wei, s->dst_md, {1, 1}, {0, 0}, {0, 0});
    dnnl::convolution_forward::primitive_desc pd(desc, cpu_engine());
    s->wei_md = pd.weights_desc();
    s->prim = dnnl::convolution_forward(pd);
    return sdk::Status();
  }
  s->src_md = memory::desc(ad, src_dt, plain_tag(ad.size()));
  s->dst_md = memory::desc(yd, DType::s32, plain_tag(yd.size()));
  s->user_wei_md = memory::desc(bd, DType::s8, plain_tag(bd.size()));
  const memory::desc any_wei(bd, DType::s8, Tag::any);
  dnnl::matmul::desc desc(s->src_md, any_wei, s->dst_md);
  dnnl::matmul::primitive_desc pd(desc, cpu_engine());
  s->wei_md = pd.weights_desc();
  s->prim = dnnl::matmul(pd);
  return sdk::Status();
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
    const float zero = static_cast<float>(zp_at(zp, zd, 0));
    quantize_rows_avx2(x + begin, start - begin, scale[0], zero, std::is_same_v<Q, uint8_t>,
                       reinterpret_cast<uint8_t*>(y + begin));
  }
  for (int64_t i = start; i < end; ++i) {
    const int64_t ch = s.channels == 1 ? 0 : (i / s.inner) % s.channels;
    // Round half to even (nearbyint, default rounding mode), then saturate;
    // NaN becomes 0, as in the reference kernels.
    float v = std::nearbyint(x[i] / scale[ch]) + static_cast<float>(zp_at(zp, zd, ch));
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
  s->out_count = count_of(s->out_shape);
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
      default:
        s->io_nhwc = false;
        LOOM_SDK_RETURN_IF_ERROR(plan_matmul(*s, s.get()));
        break;
    }
  } catch (const dnnl::error& e) {
    return sdk::unimplemented("cpu-simd: " + s->where + ": oneDNN has no int8 primitive for these shapes (" +
                              e.what() + ")");
  }
  s->avx2 = avx2;
  if (s->q.weight >= 0) {
    const uint32_t wt = node.inputs[static_cast<size_t>(s->q.weight)];
    s->weight_fixed = fixed[wt];
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
  return s.packed != nullptr ? s.packed->mem.get_desc().get_size() : 0;
}

sdk::Status run_int8_step(Int8Step& s, const std::vector<const void*>& ins, void* out, ThreadPool& pool) {
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
      const int32_t z = static_cast<int32_t>(zp_at(zp, xd, 0));
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
      const int64_t diff = zp_at(ins[0], xd, i) - zp_at(zp, xd, ch);
      y[i] = static_cast<float>(diff) * scale[ch];
    }
    return sdk::Status();
  }

  // Parameters, checked before anything runs.
  const bool qlinear = s.op == Op::kQLinearConv || s.op == Op::kQLinearMatMul;
  const int64_t channels = s.conv ? s.m : s.cols;
  const int64_t xz = zp_at(ptr(q.x_zp), dt(q.x_zp), 0);
  const bool wz_per_channel = param_count(s, q.w_zp) > 1;
  auto wz = [&](int64_t ch) { return zp_at(ptr(q.w_zp), dt(q.w_zp), wz_per_channel ? ch : 0); };
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
    if (s.packed == nullptr || s.packed->from != w) s.packed = pack_int8_weights(s, w);
    packed = s.packed;
  } else {
    packed = pack_int8_weights(s, w);
  }

  // The run's buffers: a free set of the step's, or new ones (kept after).
  std::unique_ptr<Int8Scratch> buffers;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.scratch.empty()) {
      buffers = std::move(s.scratch.back());
      s.scratch.pop_back();
    }
  }
  if (buffers == nullptr) buffers = std::make_unique<Int8Scratch>();
  struct GiveBack {
    Int8Step& step;
    std::unique_ptr<Int8Scratch>& held;
    ~GiveBack() {
      std::lock_guard<std::mutex> lock(step.mutex);
      step.scratch.push_back(std::move(held));
    }
  } give_back{s, buffers};

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
  {
    dnnl::engine& eng = cpu_engine();
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
  const double y_zero = qlinear ? static_cast<double>(zp_at(ptr(q.y_zp), dt(q.y_zp), 0)) : 0.0;
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
    std::vector<int64_t> r;
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
    std::vector<int64_t> corr(static_cast<size_t>(s.m));
    for (int64_t mm = 0; mm < s.m; ++mm) corr[static_cast<size_t>(mm)] = s.shift - wz(mm);
    // Channels-last accumulators are walked in their own order, one output
    // position's channels at a time, in a loop without calls: the same
    // arithmetic as emit(), saturation and the clamp as one range (the value
    // is bounded first, so 1.5 * 2^52 rounds it half to even exactly).
    std::vector<int64_t> bias_row(static_cast<size_t>(s.m), 0);
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
    std::vector<double> bias_wide(static_cast<size_t>(wide));
    std::vector<int32_t> bias_wide32(static_cast<size_t>(wide));
    for (int64_t mm = 0; mm < wide; ++mm) {
      bias_wide[static_cast<size_t>(mm)] = static_cast<double>(bias_row[static_cast<size_t>(mm)]);
      bias_wide32[static_cast<size_t>(mm)] = static_cast<int32_t>(bias_row[static_cast<size_t>(mm)]);
    }
    const RequantRow rq{mult.data(), bias_wide.data(), bias_wide32.data(), static_cast<int32_t>(xz),
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
  std::vector<int64_t> rowsum(static_cast<size_t>(total_rows), 0);
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
  std::vector<double> bias_wide(static_cast<size_t>(wide), 0.0);
  std::vector<int32_t> bias_wide32(static_cast<size_t>(wide), 0);
  for (int64_t j = 0; bias != nullptr && j < wide; ++j) {
    bias_wide[static_cast<size_t>(j)] = static_cast<double>(bias[j]);
    bias_wide32[static_cast<size_t>(j)] = bias[j];
  }
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
