// QLinearConvTranspose (blob format 12): the int8 ConvTranspose that
// compile fuses from a DequantizeLinear -> ConvTranspose -> QuantizeLinear
// group, on oneDNN's int8 deconvolution. x and y are channels-last u8 / s8;
// the result is round(float(acc + bias) * mult) + y_zero, clamped, with acc
// the exact sum of (x - x_zero) * w (the QDQ form of QLinearConv, format
// 10's trans_a 1). See DeconvPack in schedule_int8_step.hpp for when oneDNN
// requantizes itself and when the plugin's loop does.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "schedule_int8_step.hpp"
#include "schedule_plan.hpp"

namespace loom::cpu_simd {

namespace {

using plan::cpu_engine;
using plan::dims_of;

// What the fused call's f32 arithmetic keeps exact: float(acc) and
// float(bias) each exact and so their sum (see DeconvPack).
constexpr int64_t kExactF32 = int64_t{1} << 24;

sdk::Status deconv_error(const Int8Step& s, const std::string& what) {
  return sdk::invalid_argument("cpu-simd: " + s.where + ": " + what);
}

// The weights at `w`, in the node's layout, reordered from the node's layout into `md`.
memory reorder_weights(const DeconvInt8& d, const memory::desc& md, const int8_t* w) {
  dnnl::engine& eng = cpu_engine();
  dnnl::stream st(eng);
  memory user(d.user_wei_md, eng, const_cast<int8_t*>(w));
  memory packed(md, eng);
  dnnl::reorder(user, packed).execute(st, user, packed);
  st.wait();
  return packed;
}

void deconv_pd(const DeconvInt8& d, const memory::dims& strides, const memory::dims& dilates,
               const memory::dims& pad_l, const memory::dims& pad_r, bool fused, const dnnl::primitive_attr& attr,
               dnnl::primitive* out, memory::desc* wei_md) {
  const memory::dims wdims = d.user_wei_md.dims();
  const memory::desc any_wei(wdims, memory::data_type::s8, memory::format_tag::any);
  const memory::desc& dst = fused ? d.y_md : d.acc_md;
  const dnnl::deconvolution_forward::desc desc =
      fused && d.has_bias
          ? dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                              dnnl::algorithm::deconvolution_direct, d.src_md, any_wei, d.bias_md,
                                              dst, strides, dilates, pad_l, pad_r)
          : dnnl::deconvolution_forward::desc(dnnl::prop_kind::forward_inference,
                                              dnnl::algorithm::deconvolution_direct, d.src_md, any_wei, dst,
                                              strides, dilates, pad_l, pad_r);
  dnnl::deconvolution_forward::primitive_desc pd(desc, attr, cpu_engine());
  *wei_md = pd.weights_desc();
  *out = dnnl::deconvolution_forward(pd);
}

}  // namespace

sdk::Status plan_deconv(const BlobGraph& g, const BlobNode& node, const std::vector<bool>& fixed, Int8Step* s) {
  const quant::QuantOperands& q = s->q;
  auto tensor = [&](int i) -> const BlobTensor& { return g.tensors[node.inputs[static_cast<size_t>(i)]]; };
  // Scales, zero points and the bias are read here, once: compile writes
  // them as constants.
  for (const auto& [i, what] : {std::pair<int, const char*>{q.x_scale, "x_scale"}, {q.x_zp, "x_zero_point"},
                                {q.w_scale, "w_scale"}, {q.w_zp, "w_zero_point"}, {q.y_scale, "y_scale"},
                                {q.y_zp, "y_zero_point"}, {q.bias, "the bias"}}) {
    if (i >= 0 && !tensor(i).constant) {
      return deconv_error(*s, std::string(what) + " must be a constant of the blob (cpu-simd reads it when it "
                                                  "loads the step)");
    }
  }
  const uint32_t wt = node.inputs[static_cast<size_t>(q.weight)];
  if (!g.tensors[wt].constant && !fixed[wt]) {
    return deconv_error(*s, "the weight must be a constant or a parameter, not an input of each run");
  }
  auto floats = [&](int i) { return tensor(i).data; };
  auto ints = [&](int i) {
    std::vector<int64_t> v;
    if (i < 0) return std::vector<int64_t>{0};
    const BlobTensor& t = tensor(i);
    const size_t width = dtype_size(t.dtype);
    for (size_t e = 0; width > 0 && e < t.bytes.size() / width; ++e) {
      v.push_back(int8_zp_at(t.bytes.data(), t.dtype, static_cast<int64_t>(e)));
    }
    return v;
  };
  const std::vector<float> xs = floats(q.x_scale), ws = floats(q.w_scale), ys = floats(q.y_scale);
  const std::vector<int64_t> xz = ints(q.x_zp), wz = ints(q.w_zp), yz = ints(q.y_zp);
  for (const auto& [v, what] : {std::pair<const std::vector<float>*, const char*>{&xs, "x_scale"},
                                {&ws, "w_scale"}, {&ys, "y_scale"}}) {
    if (v->empty()) return deconv_error(*s, std::string(what) + " has no values");
    for (size_t i = 0; i < v->size(); ++i) {
      const float f = (*v)[i];
      if (!(f > 0.0f) || !std::isfinite(f)) {
        return deconv_error(*s, std::string(what) + (v->size() > 1 ? " entry " + std::to_string(i) : "") + " is " +
                                    std::to_string(f) + "; a scale must be positive and finite");
      }
    }
  }
  for (size_t i = 0; i < wz.size(); ++i) {
    if (wz[i] != 0) {
      return deconv_error(*s, "w_zero_point" + (wz.size() > 1 ? " entry " + std::to_string(i) : std::string()) +
                                  " is " + std::to_string(wz[i]) + "; QLinearConvTranspose takes weights of zero "
                                  "point 0");
    }
  }
  if (xz.empty() || yz.empty()) return deconv_error(*s, "a zero point has no values");

  BlobNode geometry = node;
  geometry.op = Op::kConvTranspose;
  Window win;
  std::string why;
  if (!unpack_window(geometry, &win, &why) || win.k != 2) {
    return deconv_error(*s, why.empty() ? "the window must be 2-D" : why);
  }
  const std::vector<int64_t>& x = s->in_shapes[0];
  const std::vector<int64_t>& w = s->in_shapes[static_cast<size_t>(q.weight)];
  const std::vector<int64_t>& y = s->out_shape;
  auto d = std::make_shared<DeconvInt8>();
  d->n = x[0];
  d->c = x[1];
  d->m = y[1];
  d->group = win.group;
  d->positions = y[0] * y[2] * y[3];
  const int64_t mg = w[1];
  using DType = memory::data_type;
  using Tag = memory::format_tag;
  d->src_md = memory::desc(dims_of(x), DType::u8, Tag::nhwc);
  d->y_md = memory::desc(dims_of(y), s->out_dtype == LOOM_DTYPE_U8 ? DType::u8 : DType::s8, Tag::nhwc);
  d->acc_md = memory::desc(dims_of(y), DType::s32, Tag::nhwc);
  const memory::dims wdims = d->group == 1 ? memory::dims{mg, w[0], w[2], w[3]}
                                           : memory::dims{d->group, mg, w[0] / d->group, w[2], w[3]};
  d->user_wei_md = memory::desc(wdims, DType::s8, d->group == 1 ? Tag::iohw : Tag::giohw);
  d->bias_md = memory::desc({d->m}, DType::s32, Tag::a);
  d->mult.resize(static_cast<size_t>(d->m));
  for (int64_t ch = 0; ch < d->m; ++ch) {
    d->mult[static_cast<size_t>(ch)] = xs[0] * ws[ws.size() > 1 ? static_cast<size_t>(ch % mg) : 0] / ys[0];
  }
  d->bias.assign(static_cast<size_t>(d->m), 0);
  d->has_bias = q.bias >= 0;
  if (d->has_bias) {
    const std::vector<int64_t> b = ints(q.bias);
    for (size_t ch = 0; ch < b.size() && ch < d->bias.size(); ++ch) d->bias[ch] = static_cast<int32_t>(b[ch]);
  }
  d->zeros.assign(static_cast<size_t>(d->m), 0);
  d->y_zero = static_cast<int32_t>(yz[0]);
  const bool y_unsigned = s->out_dtype == LOOM_DTYPE_U8;
  d->lo = y_unsigned ? 0.0 : -128.0;
  d->hi = y_unsigned ? 255.0 : 127.0;
  if (s->clamp) {
    d->lo = std::max(d->lo, static_cast<double>(s->clamp_lo));
    d->hi = std::min(d->hi, static_cast<double>(s->clamp_hi));
  }

  const memory::dims strides = {win.stride[0], win.stride[1]};
  const memory::dims dilates = {win.dilation[0] - 1, win.dilation[1] - 1};
  const memory::dims pad_l = {win.pad_begin[0], win.pad_begin[1]};
  // output_padding extends the output at the end, as a smaller end pad.
  const memory::dims pad_r = {win.pad_end[0] - win.output_padding[0], win.pad_end[1] - win.output_padding[1]};
  // The requantizing call: output scales, x's zero point, round half to
  // even, the clamp in units before the zero point, y's zero point.
  dnnl::primitive_attr fused_attr;
  fused_attr.set_output_scales(d->m > 1 && ws.size() > 1 ? 1 << 1 : 0,
                               ws.size() > 1 ? d->mult : std::vector<float>{d->mult[0]});
  if (xz[0] != 0) fused_attr.set_zero_points(DNNL_ARG_SRC, 0, {static_cast<int32_t>(xz[0])});
  if (yz[0] != 0) fused_attr.set_zero_points(DNNL_ARG_DST, 0, {static_cast<int32_t>(yz[0])});
  dnnl::post_ops po;
  po.append_eltwise(1.0f, dnnl::algorithm::eltwise_round, 0.0f, 0.0f);
  if (s->clamp) {
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, static_cast<float>(d->lo - yz[0]),
                      static_cast<float>(d->hi - yz[0]));
  }
  fused_attr.set_post_ops(po);
  try {
    deconv_pd(*d, strides, dilates, pad_l, pad_r, true, fused_attr, &d->fused_prim, &d->fused_wei_md);
  } catch (const dnnl::error&) {
    d->fused_prim = dnnl::primitive();  // the s32 call and the loop below
  }
  // The s32 call: x's zero point only.
  dnnl::primitive_attr acc_attr;
  if (xz[0] != 0) acc_attr.set_zero_points(DNNL_ARG_SRC, 0, {static_cast<int32_t>(xz[0])});
  deconv_pd(*d, strides, dilates, pad_l, pad_r, false, acc_attr, &d->acc_prim, &d->acc_wei_md);
  s->bias_fixed = true;  // keep_wide_bias keeps d.bias's wide forms
  s->deconv = std::move(d);
  return sdk::Status();
}

namespace {

// Packs the weights at `w` (see DeconvPack).
std::shared_ptr<const DeconvPack> pack_deconv(const Int8Step& s, const int8_t* w) {
  const DeconvInt8& d = *s.deconv;
  auto p = std::make_shared<DeconvPack>();
  p->from = w;
  // The weight is [C, Mg, kH, kW]: output channel m = gi * Mg + j reads
  // rows gi * Cg .. (gi + 1) * Cg - 1 of column j.
  const std::vector<int64_t>& ws = s.in_shapes[static_cast<size_t>(s.q.weight)];
  const int64_t mg = ws[1], taps = ws[2] * ws[3], cg = d.c / d.group;
  bool pairs_fit = true, sums_fit = true;
  for (int64_t m = 0; m < d.m; ++m) {
    const int64_t gi = m / mg, j = m % mg;
    int64_t sum = 0, top1 = 0, top2 = 0;
    for (int64_t ci = 0; ci < cg; ++ci) {
      const int8_t* row = w + ((gi * cg + ci) * mg + j) * taps;
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t a = std::abs(static_cast<int64_t>(row[t]));
        sum += a;
        if (a > top1) {
          top2 = top1;
          top1 = a;
        } else if (a > top2) {
          top2 = a;
        }
      }
    }
    pairs_fit = pairs_fit && top1 + top2 <= 128;
    sums_fit = sums_fit && 255 * sum + std::llabs(int64_t{d.bias[static_cast<size_t>(m)]}) < kExactF32;
  }
  const bool one_pass = !lacks_vnni() || pairs_fit;
  p->fused = one_pass && sums_fit && d.fused_prim;
  if (p->fused) {
    p->wei = reorder_weights(d, d.fused_wei_md, w);
    return p;
  }
  p->two_pass = !one_pass;
  if (!p->two_pass) {
    p->wei = reorder_weights(d, d.acc_wei_md, w);
    return p;
  }
  // ws = 2 * hi + lo: hi in [-64, 63], lo in {0, 1}.
  const size_t count = static_cast<size_t>(d.c * mg * taps);
  std::vector<int8_t> hi(count), lo(count);
  for (size_t i = 0; i < count; ++i) {
    hi[i] = static_cast<int8_t>(w[i] >> 1);
    lo[i] = static_cast<int8_t>(w[i] & 1);
  }
  p->wei = reorder_weights(d, d.acc_wei_md, hi.data());
  p->low = reorder_weights(d, d.acc_wei_md, lo.data());
  return p;
}

}  // namespace

sdk::Status run_deconv(Int8Step& s, const std::vector<const void*>& ins, void* out, ThreadPool& pool) {
  DeconvInt8& d = *s.deconv;
  const auto* w = static_cast<const int8_t*>(ins[static_cast<size_t>(s.q.weight)]);
  std::shared_ptr<const DeconvPack> p;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (d.pack == nullptr || d.pack->from != w) d.pack = pack_deconv(s, w);
    p = d.pack;
  }
  HeldScratch buffers(s);

  if (p->fused) {
    run_kept_call(*buffers, Int8Scratch::kFused, d.fused_prim, d.src_md, ins[0], d.y_md, out, p->wei,
                  d.has_bias ? &d.bias_md : nullptr, d.bias.data());
    return sdk::Status();
  }
  const size_t count = static_cast<size_t>(d.positions * d.m);
  std::vector<int32_t>& acc = buffers->acc;
  acc.resize(count);
  run_kept_call(*buffers, Int8Scratch::kProduct, d.acc_prim, d.src_md, ins[0], d.acc_md, acc.data(), p->wei, nullptr,
                nullptr);
  const int32_t* low = nullptr;
  if (p->two_pass) {
    buffers->low.resize(count);
    run_kept_call(*buffers, Int8Scratch::kProduct, d.acc_prim, d.src_md, ins[0], d.acc_md, buffers->low.data(),
                  p->low, nullptr, nullptr);
    low = buffers->low.data();
  }
  // round(float(acc + bias) * mult) + y_zero, bounded: requantize_row_avx2
  // for the first m rounded down to 4 channels of each output position
  // (with the AVX2 kernels), the same arithmetic one at a time after.
  const int64_t wide = s.avx2 ? d.m / 4 * 4 : 0;
  keep_wide_bias(s, d.bias.data(), wide, buffers.get());
  const double y_zero = d.y_zero;
  const RequantRow rq{d.mult.data(), buffers->bias_wide.data(), buffers->bias_wide32.data(), 0, 1, y_zero, d.lo,
                      d.hi, wide, d.y_zero, true};
  const bool y_unsigned = s.out_dtype == LOOM_DTYPE_U8;
  auto rows = [&](size_t begin, size_t end) {
    for (size_t pi = begin; pi < end; ++pi) {
      const int32_t* a = acc.data() + pi * static_cast<size_t>(d.m);
      const int32_t* l = low == nullptr ? nullptr : low + pi * static_cast<size_t>(d.m);
      uint8_t* y = static_cast<uint8_t*>(out) + pi * static_cast<size_t>(d.m);
      if (wide > 0) requantize_row_avx2(rq, a, l, d.zeros.data(), y_unsigned, y);
      for (int64_t ch = wide; ch < d.m; ++ch) {
        uint32_t total = static_cast<uint32_t>(a[ch]);
        if (l != nullptr) total = (total << 1) + static_cast<uint32_t>(l[ch]);
        const int32_t wrapped = static_cast<int32_t>(total);
        const float scaled = static_cast<float>(int64_t{wrapped} + d.bias[static_cast<size_t>(ch)]) *
                             d.mult[static_cast<size_t>(ch)];
        // Bounded first (NaN to the low bound), rounded half to even, then
        // the zero point added.
        double v = static_cast<double>(scaled);
        v = std::min(v >= d.lo - 1.0 - y_zero ? v : d.lo - 1.0 - y_zero, d.hi + 1.0 - y_zero);
        v = ((v + 6755399441055744.0) - 6755399441055744.0) + y_zero;
        y[ch] = static_cast<uint8_t>(static_cast<int32_t>(std::min(std::max(v, d.lo), d.hi)));
      }
    }
  };
  pool.parallel_for(static_cast<size_t>(d.positions), 64, rows);
  return sdk::Status();
}

}  // namespace loom::cpu_simd
