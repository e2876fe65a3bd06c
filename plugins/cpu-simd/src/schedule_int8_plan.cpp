// The quantized steps' oneDNN primitives: which int8 convolution or matmul a
// QLinearConv, ConvInteger, QLinearMatMul or MatMulInteger step runs, with
// which weight layouts (schedule_int8.cpp runs them; schedule_int8.hpp has
// the arithmetic).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "schedule_int8.hpp"
#include "schedule_int8_step.hpp"
#include "schedule_plan.hpp"

namespace loom::cpu_simd {

using plan::cpu_engine;
using plan::dims_of;
using plan::plain_tag;

// Whether oneDNN's int8 kernels run without VNNI (pairs of u8 x s8
// products added in 16 bits).
bool lacks_vnni() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return !(isa == dnnl::cpu_isa::avx512_core_vnni || isa == dnnl::cpu_isa::avx512_core_bf16 ||
           isa == dnnl::cpu_isa::avx512_core_amx || isa == dnnl::cpu_isa::avx2_vnni);
}

namespace {

bool int8_is_u8(loom_dtype_t d) { return d == LOOM_DTYPE_U8; }

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
  for (size_t i = 0; i < out->size(); ++i) (*out)[i] = int8_zp_at(bt.bytes.data(), bt.dtype, static_cast<int64_t>(i));
  return true;
}

// The attributes of Int8Step::fused_prim for `channels` output channels
// (columns): output scales, zero points, the round and clip post-ops; the
// bias's values into `bias`. False where the step does not allow it (see
// Int8Step::fused_possible): a parameter scale or zero point, an s8 weight
// zero point other than 0, a scale no check would pass, or the QOperator
// form (the zero point added before rounding) with an odd y zero point:
// round(v + z) is round(v) + z for an even z (the sum is exact in double
// and a tie keeps its parity), but rounds a tie the other way for an odd z.
bool fused_attr(const BlobGraph& g, const BlobNode& node, const Int8Step& st, int64_t channels,
                dnnl::primitive_attr* out, std::vector<int64_t>* bias_out) {
  const Int8Step* s = &st;
  const quant::QuantOperands& q = s->q;
  auto input = [&](int i) { return node.inputs[static_cast<size_t>(i)]; };
  std::vector<float> xs, ws, ys;
  std::vector<int64_t> xz = {0}, wz = {0}, yz = {0}, bias;
  if (!int8_const_floats(g, input(q.x_scale), &xs) || !int8_const_floats(g, input(q.w_scale), &ws) ||
      !int8_const_floats(g, input(q.y_scale), &ys) || (q.x_zp >= 0 && !int8_const_ints(g, input(q.x_zp), &xz)) ||
      (q.w_zp >= 0 && !int8_const_ints(g, input(q.w_zp), &wz)) ||
      (q.y_zp >= 0 && !int8_const_ints(g, input(q.y_zp), &yz)) || (q.bias >= 0 && !int8_const_ints(g, input(q.bias), &bias))) {
    return false;
  }
  for (int64_t z : wz) {
    if (z != 0) return false;
  }
  if (!s->round_first && yz[0] % 2 != 0) return false;
  for (const std::vector<float>* v : {&xs, &ws, &ys}) {
    for (float f : *v) {
      if (!(f > 0.0f) || !std::isfinite(f)) return false;  // the loop below reports it
    }
  }
  std::vector<float> mult(static_cast<size_t>(channels));
  for (int64_t ch = 0; ch < channels; ++ch) {
    mult[static_cast<size_t>(ch)] = xs[0] * ws[ws.size() > 1 ? static_cast<size_t>(ch) : 0] / ys[0];
  }
  dnnl::primitive_attr& attr = *out;
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
  *bias_out = std::move(bias);
  return true;
}

// The bias's magnitudes, which fused_sums_exact adds to each channel's bound.
void set_bias_abs(const std::vector<int64_t>& bias, int64_t channels, Int8Step* s) {
  s->bias_abs.assign(static_cast<size_t>(channels), 0);
  for (size_t ch = 0; ch < bias.size() && ch < s->bias_abs.size(); ++ch) s->bias_abs[ch] = std::llabs(bias[ch]);
}

// Int8Step::fused_prim of a convolution, where the step allows it (see
// there): leaves fused_possible false otherwise, and when oneDNN has no such
// primitive.
void plan_fused(const BlobGraph& g, const BlobNode& node, const memory::dims& wdims, const memory::dims& strides,
                const memory::dims& dilates, const memory::dims& pad_l, const memory::dims& pad_r, Int8Step* s) {
  const uint32_t wt = node.inputs[static_cast<size_t>(s->q.weight)];
  if (s->op != Op::kQLinearConv || !s->nhwc || g.tensors[wt].dtype != LOOM_DTYPE_I8 ||
      s->out_shape.size() != 4) {
    return;
  }
  dnnl::primitive_attr attr;
  std::vector<int64_t> bias;
  if (!fused_attr(g, node, *s, s->m, &attr, &bias)) return;
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
  s->fused_y_md = y_md;
  set_bias_abs(bias, s->m, s);
  s->fused_possible = true;
}

}  // namespace

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
  const DType src_dt = int8_is_u8(s->in_dtypes[0]) ? DType::u8 : DType::s8;
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
    const DType y_dt = int8_is_u8(s->out_dtype) ? DType::u8 : DType::s8;
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

sdk::Status plan_matmul(const BlobGraph& g, const BlobNode& node, Int8Step* s) {
  const Int8Step& ro = *s;
  const std::vector<int64_t>& a = ro.in_shapes[0];
  std::vector<int64_t> b = ro.in_shapes[static_cast<size_t>(ro.q.weight)];
  if (ro.trans_b) std::swap(b[0], b[1]);  // validate() made B 2-D
  s->inner_k = a.back();
  s->cols = b.back();
  memory::dims ad, bd, yd;
  if (b.size() == 2) {
    s->rows = int8_elements(a) / std::max<int64_t>(1, s->inner_k);
    if (s->inner_k == 0) s->rows = int8_elements(std::vector<int64_t>(a.begin(), a.end() - 1));
    ad = {s->rows, s->inner_k};
    bd = {s->inner_k, s->cols};
    yd = {s->rows, s->cols};
  } else {
    s->rows = a[a.size() - 2];
    s->batches = int8_elements(std::vector<int64_t>(a.begin(), a.end() - 2));
    s->b_batches = s->batches;
    ad = dims_of(a);
    bd = dims_of(b);
    yd = dims_of(s->out_shape);
  }
  const DType src_dt = int8_is_u8(s->in_dtypes[0]) ? DType::u8 : DType::s8;
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
  // A matmul with constant scales and zero points and s8 weights of zero
  // point 0 (a QDQ group's, or the QOperator form with an even y zero
  // point): oneDNN may requantize, as a convolution's fused step does
  // (Int8Step::fused_possible).
  const uint32_t wt = node.inputs[static_cast<size_t>(s->q.weight)];
  dnnl::primitive_attr attr;
  std::vector<int64_t> bias;
  if (b.size() == 2 && s->op == Op::kQLinearMatMul && g.tensors[wt].dtype == LOOM_DTYPE_I8 &&
      fused_attr(g, node, *s, s->cols, &attr, &bias)) {
    const memory::desc y_md(yd, s->out_dtype == LOOM_DTYPE_U8 ? DType::u8 : DType::s8, plain_tag(yd.size()));
    s->bias_md = bias.empty() ? memory::desc() : memory::desc({1, s->cols}, DType::s32, Tag::ab);
    try {
      const dnnl::matmul::desc fdesc = bias.empty() ? dnnl::matmul::desc(s->src_md, any_wei, y_md)
                                                    : dnnl::matmul::desc(s->src_md, any_wei, s->bias_md, y_md);
      dnnl::matmul::primitive_desc fpd(fdesc, attr, cpu_engine());
      s->fused_wei_md = fpd.weights_desc();
      s->fused_prim = dnnl::matmul(fpd);
      s->fused_y_md = y_md;
      set_bias_abs(bias, s->cols, s);
      s->fused_possible = true;
    } catch (const dnnl::error&) {
      s->fused_possible = false;
    }
  }
  return sdk::Status();
}

}  // namespace loom::cpu_simd
