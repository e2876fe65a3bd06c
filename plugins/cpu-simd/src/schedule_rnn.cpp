#include "schedule_rnn.hpp"

// 32-byte vectors in always-inlined helpers (see RnnV8): no ABI crossing.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "oneapi/dnnl/dnnl.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "schedule_plan.hpp"
#include "vec_math.hpp"

namespace loom::cpu_simd {

struct RnnOnednn {
  dnnl::lstm_forward::primitive_desc pd;
  dnnl::lstm_forward prim;
  std::mutex mutex;  // guards the packed weights
  const void* from_w = nullptr;
  const void* from_r = nullptr;
  dnnl::memory wl, wi;  // W and R in the primitive's layout
};

namespace {

// oneDNN's LSTM gate k (i, f, c, o) is ONNX's gate kRnnOnnxGate[k] (i, o, f, c).
constexpr int kRnnOnnxGate[4] = {0, 2, 3, 1};

// ONNX's [4H, k] weights of one direction as oneDNN's ldigo [1, 1, k, 4, H].
std::vector<float> rnn_ldigo(const float* w, int64_t hn, int64_t k) {
  std::vector<float> out(static_cast<size_t>(4 * hn * k));
  for (int g = 0; g < 4; ++g) {
    for (int64_t j = 0; j < hn; ++j) {
      const float* row = w + (kRnnOnnxGate[g] * hn + j) * k;
      for (int64_t i = 0; i < k; ++i) out[static_cast<size_t>((i * 4 + g) * hn + j)] = row[i];
    }
  }
  return out;
}

std::shared_ptr<RnnOnednn> rnn_onednn_plan(const RnnForm& f) {
  using dnnl::memory;
  const int64_t h = f.hidden;
  auto md = [](const memory::dims& d, memory::format_tag t) { return memory::desc(d, memory::data_type::f32, t); };
  const memory::dims iter = {1, 1, f.batch, h};
  dnnl::lstm_forward::desc desc(
      dnnl::prop_kind::forward_inference,
      f.direction == 1 ? dnnl::rnn_direction::unidirectional_right2left : dnnl::rnn_direction::unidirectional_left2right,
      md({f.seq, f.batch, f.input}, memory::format_tag::tnc), md(iter, memory::format_tag::ldnc),
      md(iter, memory::format_tag::ldnc), md({1, 1, f.input, 4, h}, memory::format_tag::any),
      md({1, 1, h, 4, h}, memory::format_tag::any), md({1, 1, 4, h}, memory::format_tag::ldgo),
      md({f.seq, f.batch, h}, memory::format_tag::tnc), md(iter, memory::format_tag::ldnc),
      md(iter, memory::format_tag::ldnc));
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto o = std::make_shared<RnnOnednn>();
  o->pd = dnnl::lstm_forward::primitive_desc(desc, attr, plan::cpu_engine());
  o->prim = dnnl::lstm_forward(o->pd);
  return o;
}

// Runs the oneDNN path of one node: writes Y, Y_h and Y_c into `out` (for
// one direction and layout 0 the packed tensor's rows are oneDNN's tnc and
// ldnc layouts).
sdk::Status rnn_onednn_run(const RnnStep& s, const float* x, const float* w, const float* r, const float* b,
                           const float* h0, const float* c0, float* out) {
  using dnnl::memory;
  RnnOnednn& o = *s.onednn;
  const RnnForm& f = s.form;
  const int64_t hn = f.hidden, gn = 4 * hn;
  dnnl::engine& eng = plan::cpu_engine();
  dnnl::stream st(eng);
  memory wl, wi;
  {
    std::lock_guard<std::mutex> lock(o.mutex);
    if (o.from_w != w || o.from_r != r) {
      std::vector<float> wl_user = rnn_ldigo(w, hn, f.input), wi_user = rnn_ldigo(r, hn, hn);
      memory wl_src(memory::desc({1, 1, f.input, 4, hn}, memory::data_type::f32, memory::format_tag::ldigo), eng,
                    wl_user.data());
      memory wi_src(memory::desc({1, 1, hn, 4, hn}, memory::data_type::f32, memory::format_tag::ldigo), eng,
                    wi_user.data());
      o.wl = memory(o.pd.weights_layer_desc(), eng);
      o.wi = memory(o.pd.weights_iter_desc(), eng);
      dnnl::reorder(wl_src, o.wl).execute(st, wl_src, o.wl);
      dnnl::reorder(wi_src, o.wi).execute(st, wi_src, o.wi);
      st.wait();
      o.from_w = w;
      o.from_r = r;
    }
    wl = o.wl;
    wi = o.wi;
  }
  std::vector<float> bias(static_cast<size_t>(gn), 0.0f);
  if (b != nullptr) {
    for (int g = 0; g < 4; ++g) {
      for (int64_t j = 0; j < hn; ++j) {
        const int64_t row = kRnnOnnxGate[g] * hn + j;
        bias[static_cast<size_t>(g * hn + j)] = b[row] + b[gn + row];
      }
    }
  }
  std::vector<float> zeros(h0 == nullptr || c0 == nullptr ? static_cast<size_t>(f.batch * hn) : 0, 0.0f);
  std::vector<uint8_t> scratch_bytes(o.pd.scratchpad_desc().get_size() + 64);
  uint8_t* scratch = scratch_bytes.data() + (64 - reinterpret_cast<uintptr_t>(scratch_bytes.data()) % 64) % 64;
  const int64_t state = f.batch * hn;
  auto mem = [&](const memory::desc& d, const void* p) { return memory(d, eng, const_cast<void*>(p)); };
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC_LAYER, mem(o.pd.src_layer_desc(), x)},
      {DNNL_ARG_SRC_ITER, mem(o.pd.src_iter_desc(), h0 != nullptr ? h0 : zeros.data())},
      {DNNL_ARG_SRC_ITER_C, mem(o.pd.src_iter_c_desc(), c0 != nullptr ? c0 : zeros.data())},
      {DNNL_ARG_WEIGHTS_LAYER, wl},
      {DNNL_ARG_WEIGHTS_ITER, wi},
      {DNNL_ARG_BIAS, mem(o.pd.bias_desc(), bias.data())},
      {DNNL_ARG_DST_LAYER, mem(o.pd.dst_layer_desc(), out)},
      {DNNL_ARG_DST_ITER, mem(o.pd.dst_iter_desc(), out + f.seq * state)},
      {DNNL_ARG_DST_ITER_C, mem(o.pd.dst_iter_c_desc(), out + (f.seq + 1) * state)},
      {DNNL_ARG_SCRATCHPAD, mem(o.pd.scratchpad_desc(), scratch)}};
  o.prim.execute(st, args);
  st.wait();
  return sdk::Status();
}

// Eight floats; loads through memcpy (unaligned). The helpers are always
// inlined, so no vector crosses a call (-Wpsabi is off for this file).
typedef float RnnV8 __attribute__((vector_size(32)));

inline __attribute__((always_inline)) RnnV8 rnn_load8(const float* p) {
  RnnV8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline __attribute__((always_inline)) float rnn_sum8(const RnnV8& v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

// Row-major C[m x n] = A[m x k] * B[n x k]^T for a few rows of A (the
// streaming case, batch 1 to 4): per four rows of B (ONNX's W or R as they
// are: one row per gate unit), their dot products with each row of A, so B
// is read once, front to back.
inline __attribute__((always_inline)) void rnn_small_gemm_body(int64_t m, int64_t n, int64_t k, const float* a,
                                                               const float* b, float* c) {
  int64_t r = 0;
  for (; r + 4 <= n; r += 4) {
    const float* b0 = b + r * k;
    const float* b1 = b0 + k;
    const float* b2 = b1 + k;
    const float* b3 = b2 + k;
    for (int64_t i = 0; i < m; ++i) {
      const float* x = a + i * k;
      RnnV8 s0 = {}, s1 = {}, s2 = {}, s3 = {};
      int64_t j = 0;
      for (; j + 8 <= k; j += 8) {
        const RnnV8 xv = rnn_load8(x + j);
        s0 += rnn_load8(b0 + j) * xv;
        s1 += rnn_load8(b1 + j) * xv;
        s2 += rnn_load8(b2 + j) * xv;
        s3 += rnn_load8(b3 + j) * xv;
      }
      float t0 = rnn_sum8(s0), t1 = rnn_sum8(s1), t2 = rnn_sum8(s2), t3 = rnn_sum8(s3);
      for (; j < k; ++j) {
        t0 += b0[j] * x[j];
        t1 += b1[j] * x[j];
        t2 += b2[j] * x[j];
        t3 += b3[j] * x[j];
      }
      float* out = c + i * n + r;
      out[0] = t0;
      out[1] = t1;
      out[2] = t2;
      out[3] = t3;
    }
  }
  for (; r < n; ++r) {
    for (int64_t i = 0; i < m; ++i) {
      float t = 0;
      for (int64_t j = 0; j < k; ++j) t += b[r * k + j] * a[i * k + j];
      c[i * n + r] = t;
    }
  }
}
__attribute__((target("avx2,fma"))) void rnn_small_gemm_avx2(int64_t m, int64_t n, int64_t k, const float* a,
                                                             const float* b, float* c) {
  rnn_small_gemm_body(m, n, k, a, b, c);
}
void rnn_small_gemm_base(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  rnn_small_gemm_body(m, n, k, a, b, c);
}

// Row-major C[m x n] = A[m x k] * B[n x k]^T: a few rows as above, more on
// oneDNN's sgemm.
sdk::Status rnn_gemm(bool avx2, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  if (m == 0 || n == 0) return sdk::Status();
  if (m <= 4 || k == 0) {
    (avx2 ? rnn_small_gemm_avx2 : rnn_small_gemm_base)(m, n, k, a, b, c);
    return sdk::Status();
  }
  const dnnl_status_t st = dnnl_sgemm('N', 'T', m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
  if (st != dnnl_success) {
    return sdk::internal_error("cpu-simd: oneDNN sgemm failed (status " + std::to_string(static_cast<int>(st)) + ")");
  }
  return sdk::Status();
}

inline float rnn_sigmoid(float x) { return 1.0f / (1.0f + vexp(-x)); }
inline float rnn_tanh(float x) { return 1.0f - 2.0f / (vexp(2.0f * x) + 1.0f); }

// One LSTM step for one batch row: gx (the input projection) and gr (the
// recurrent product) hold the gates in ONNX's order i, o, f, c; bias is
// Wb + Rb; p_i / p_o / p_f the peepholes (zeros when absent); h and c are
// updated in place. Branch-free over j so that it vectorizes; compiled for
// AVX2+FMA and for baseline x86-64 (make_rnn_step picks one by CPUID).
template <bool kInputForget>
inline __attribute__((always_inline)) void lstm_gates_body(
    const float* __restrict gx, const float* __restrict gr, const float* __restrict bias,
    const float* __restrict p_i, const float* __restrict p_o, const float* __restrict p_f, float clip, int64_t hn,
    float* __restrict h, float* __restrict c) {
  for (int64_t j = 0; j < hn; ++j) {
    const float c_prev = c[j];
    float gi = gx[j] + gr[j] + bias[j] + p_i[j] * c_prev;
    float go = gx[hn + j] + gr[hn + j] + bias[hn + j];
    float gf = gx[2 * hn + j] + gr[2 * hn + j] + bias[2 * hn + j] + p_f[j] * c_prev;
    float gc = gx[3 * hn + j] + gr[3 * hn + j] + bias[3 * hn + j];
    gi = std::min(std::max(gi, -clip), clip);
    gf = std::min(std::max(gf, -clip), clip);
    gc = std::min(std::max(gc, -clip), clip);
    const float i = rnn_sigmoid(gi);
    const float f = kInputForget ? 1.0f - i : rnn_sigmoid(gf);
    const float cn = f * c_prev + i * rnn_tanh(gc);
    go = go + p_o[j] * cn;
    go = std::min(std::max(go, -clip), clip);
    h[j] = rnn_sigmoid(go) * rnn_tanh(cn);
    c[j] = cn;
  }
}

#define LOOM_RNN_GATES_ARGS                                                                            \
  const float *__restrict gx, const float *__restrict gr, const float *__restrict bias,              \
      const float *__restrict p_i, const float *__restrict p_o, const float *__restrict p_f, float clip, \
      int64_t hn, float *__restrict h, float *__restrict c
__attribute__((target("avx2,fma"))) void lstm_gates_avx2(bool input_forget, LOOM_RNN_GATES_ARGS) {
  if (input_forget) {
    lstm_gates_body<true>(gx, gr, bias, p_i, p_o, p_f, clip, hn, h, c);
  } else {
    lstm_gates_body<false>(gx, gr, bias, p_i, p_o, p_f, clip, hn, h, c);
  }
}
void lstm_gates_base(bool input_forget, LOOM_RNN_GATES_ARGS) {
  if (input_forget) {
    lstm_gates_body<true>(gx, gr, bias, p_i, p_o, p_f, clip, hn, h, c);
  } else {
    lstm_gates_body<false>(gx, gr, bias, p_i, p_o, p_f, clip, hn, h, c);
  }
}
#undef LOOM_RNN_GATES_ARGS

// GRU (gates z, r, h in ONNX's order), one batch row. First z and r from
// gx (input projection), gr (h R^T for z and r), bw / br (input and
// recurrent biases, 3H each).
inline __attribute__((always_inline)) void gru_zr_body(const float* __restrict gx, const float* __restrict gr,
                                                       const float* __restrict bw, const float* __restrict br,
                                                       float clip, int64_t hn, float* __restrict z,
                                                       float* __restrict r) {
  for (int64_t j = 0; j < hn; ++j) {
    const float gz = std::min(std::max(gx[j] + gr[j] + bw[j] + br[j], -clip), clip);
    const float g_r = std::min(std::max(gx[hn + j] + gr[hn + j] + bw[hn + j] + br[hn + j], -clip), clip);
    z[j] = rnn_sigmoid(gz);
    r[j] = rnn_sigmoid(g_r);
  }
}
// Then the candidate and the new h: grh is the h gate's recurrent product
// ((r * h) R_h^T when linear_before_reset is 0, h R_h^T when 1); rmul is r
// (linear_before_reset 1: r * (h R_h^T + Rb_h)) or ones.
inline __attribute__((always_inline)) void gru_h_body(const float* __restrict gxh, const float* __restrict grh,
                                                      const float* __restrict bwh, const float* __restrict brh,
                                                      const float* __restrict z, const float* __restrict rmul,
                                                      float clip, int64_t hn, float* __restrict h) {
  for (int64_t j = 0; j < hn; ++j) {
    const float g = std::min(std::max(gxh[j] + rmul[j] * (grh[j] + brh[j]) + bwh[j], -clip), clip);
    const float cand = rnn_tanh(g);
    h[j] = (1.0f - z[j]) * cand + z[j] * h[j];
  }
}
// RNN: h = tanh(x W^T + h R^T + Wb + Rb), one batch row.
inline __attribute__((always_inline)) void rnn_h_body(const float* __restrict gx, const float* __restrict gr,
                                                      const float* __restrict bias, float clip, int64_t hn,
                                                      float* __restrict h) {
  for (int64_t j = 0; j < hn; ++j) h[j] = rnn_tanh(std::min(std::max(gx[j] + gr[j] + bias[j], -clip), clip));
}

#define LOOM_RNN_ISA_PAIR(name, params, args)                             \
  __attribute__((target("avx2,fma"))) void name##_avx2 params { name##_body args; } \
  void name##_base params { name##_body args; }
LOOM_RNN_ISA_PAIR(gru_zr,
                  (const float* gx, const float* gr, const float* bw, const float* br, float clip, int64_t hn,
                   float* z, float* r),
                  (gx, gr, bw, br, clip, hn, z, r))
LOOM_RNN_ISA_PAIR(gru_h,
                  (const float* gxh, const float* grh, const float* bwh, const float* brh, const float* z,
                   const float* rmul, float clip, int64_t hn, float* h),
                  (gxh, grh, bwh, brh, z, rmul, clip, hn, h))
LOOM_RNN_ISA_PAIR(rnn_h, (const float* gx, const float* gr, const float* bias, float clip, int64_t hn, float* h),
                  (gx, gr, bias, clip, hn, h))
#undef LOOM_RNN_ISA_PAIR

}  // namespace

sdk::Status make_rnn_step(const BlobGraph& g, size_t index, bool onednn, bool wide,
                          const std::vector<bool>& fixed, std::shared_ptr<RnnStep>* out) {
  const BlobNode& node = g.nodes[index];
  auto s = std::make_shared<RnnStep>();
  s->where = "node " + std::to_string(index) + " (" + op_name(node.op) + ")";
  std::vector<const std::vector<int64_t>*> in;
  for (uint32_t t : node.inputs) in.push_back(&g.tensors[t].shape);
  std::vector<int64_t> packed;
  std::string why;
  if (!rnn_form(node, in, &s->form, &packed, &why)) return sdk::invalid_argument("cpu-simd: " + s->where + ": " + why);
  s->avx2 = wide && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const RnnForm& f = s->form;
  const bool onednn_form = f.op == Op::kLstm && f.direction != 2 && f.layout == 0 && !f.has_clip && f.input_forget == 0 &&
                           f.at[1] < 0 && f.at[4] < 0 && f.seq > 0 && f.batch > 0 && f.input > 0;
  if (onednn && onednn_form && fixed[node.inputs[1]] && fixed[node.inputs[2]]) {
    try {
      s->onednn = rnn_onednn_plan(f);
    } catch (const dnnl::error&) {
      s->onednn = nullptr;  // the plugin's own loops
    }
  }
  *out = std::move(s);
  return sdk::Status();
}

sdk::Status run_rnn_step(const RnnStep& s, const std::vector<const void*>& ins, float* out) {
  const RnnForm& f = s.form;
  const int64_t tn = f.seq, bn = f.batch, in_n = f.input, hn = f.hidden, dn = f.dirs, gn = f.gates * hn;
  const bool lstm = f.op == Op::kLstm, gru = f.op == Op::kGru;
  const int64_t rows = tn + (lstm ? 2 : 1);  // of the packed output
  auto opt = [&](int k) { return f.at[k] >= 0 ? ins[static_cast<size_t>(f.at[k])] : nullptr; };
  const auto* x = static_cast<const float*>(ins[0]);
  const auto* w = static_cast<const float*>(ins[1]);
  const auto* r = static_cast<const float*>(ins[2]);
  const auto* b = static_cast<const float*>(opt(0));
  const auto* lens = static_cast<const int32_t*>(opt(1));
  const auto* h0 = static_cast<const float*>(opt(2));
  const auto* c0 = static_cast<const float*>(opt(3));
  const auto* p = static_cast<const float*>(opt(4));
  if (s.onednn != nullptr) return rnn_onednn_run(s, x, w, r, b, h0, c0, out);
  int64_t max_len = tn;
  if (lens != nullptr) {
    max_len = 0;
    for (int64_t i = 0; i < bn; ++i) {
      if (lens[i] < 0 || lens[i] > tn) {
        return sdk::invalid_argument("cpu-simd: " + s.where + ": sequence_lens holds " + std::to_string(lens[i]) +
                                     " at batch " + std::to_string(i) + "; each length must lie in [0, " +
                                     std::to_string(tn) + "]");
      }
      max_len = std::max<int64_t>(max_len, lens[i]);
    }
  }
  const bool l0 = f.layout == 0;
  // Packed output: layout 0 [rows, D, B, H], layout 1 [B, rows, D, H].
  auto at = [&](int64_t t, int64_t d, int64_t bi) {
    return l0 ? ((t * dn + d) * bn + bi) * hn : ((bi * rows + t) * dn + d) * hn;
  };
  auto state_at = [&](int64_t d, int64_t bi) { return l0 ? (d * bn + bi) * hn : (bi * dn + d) * hn; };
  if (lens != nullptr) {
    // Steps past a batch row's length are zeros in Y.
    for (int64_t bi = 0; bi < bn; ++bi) {
      for (int64_t t = lens[bi]; t < tn; ++t) {
        for (int64_t d = 0; d < dn; ++d) std::fill(out + at(t, d, bi), out + at(t, d, bi) + hn, 0.0f);
      }
    }
  }
  std::vector<float> gx(static_cast<size_t>(tn * bn * gn)), gr(static_cast<size_t>(bn * gn));
  std::vector<float> h(static_cast<size_t>(bn * hn)), c(static_cast<size_t>(bn * hn));
  // bias: Wb + Rb (GRU: Wb in bw, Rb in br, as its h gate needs them apart).
  std::vector<float> bias(static_cast<size_t>(gn)), bw(static_cast<size_t>(gn)), br(static_cast<size_t>(gn));
  std::vector<float> zeros(static_cast<size_t>(hn), 0.0f), ones(static_cast<size_t>(hn), 1.0f);
  // GRU: z, r, r * h and the h gate's recurrent product, per batch row.
  std::vector<float> z(gru ? static_cast<size_t>(bn * hn) : 0), rg(z.size()), rh(z.size()), grh(z.size());
  const float clip = f.has_clip ? f.clip : FLT_MAX;
  for (int64_t d = 0; d < dn; ++d) {
    const bool backwards = f.direction == 1 || d == 1;
    const float* wd = w + d * gn * in_n;
    const float* rd = r + d * gn * hn;
    for (int64_t k = 0; k < gn; ++k) {
      bw[k] = b != nullptr ? b[d * 2 * gn + k] : 0.0f;
      br[k] = b != nullptr ? b[d * 2 * gn + gn + k] : 0.0f;
      bias[k] = bw[k] + br[k];
    }
    const float* p_i = p != nullptr ? p + d * 3 * hn : zeros.data();
    const float* p_o = p != nullptr ? p + d * 3 * hn + hn : zeros.data();
    const float* p_f = p != nullptr ? p + d * 3 * hn + 2 * hn : zeros.data();
    // X's rows are (t, b) in layout 0 and (b, t) in layout 1; gx follows.
    LOOM_SDK_RETURN_IF_ERROR(rnn_gemm(s.avx2, tn * bn, gn, in_n, x, wd, gx.data()));
    for (int64_t bi = 0; bi < bn; ++bi) {
      for (int64_t j = 0; j < hn; ++j) {
        h[bi * hn + j] = h0 != nullptr ? h0[state_at(d, bi) + j] : 0.0f;
        c[bi * hn + j] = c0 != nullptr ? c0[state_at(d, bi) + j] : 0.0f;
      }
    }
    auto active = [&](int64_t step, int64_t bi, int64_t* t) {
      const int64_t len = lens != nullptr ? lens[bi] : tn;
      *t = backwards ? len - 1 - step : step;
      return step < len;
    };
    auto gx_at = [&](int64_t t, int64_t bi) { return gx.data() + (l0 ? t * bn + bi : bi * tn + t) * gn; };
    for (int64_t step = 0; step < max_len; ++step) {
      int64_t t = 0;
      if (gru) {
        // z and r, then the h gate's product, then h.
        LOOM_SDK_RETURN_IF_ERROR(rnn_gemm(s.avx2, bn, 2 * hn, hn, h.data(), rd, gr.data()));
        for (int64_t bi = 0; bi < bn; ++bi) {
          if (!active(step, bi, &t)) continue;
          (s.avx2 ? gru_zr_avx2 : gru_zr_base)(gx_at(t, bi), gr.data() + bi * 2 * hn, bw.data(), br.data(), clip, hn,
                                              z.data() + bi * hn, rg.data() + bi * hn);
        }
        const float* hr_in = h.data();
        if (f.input_forget == 0) {  // linear_before_reset 0: (r * h) R_h^T
          for (int64_t k = 0; k < bn * hn; ++k) rh[k] = rg[k] * h[k];
          hr_in = rh.data();
        }
        LOOM_SDK_RETURN_IF_ERROR(rnn_gemm(s.avx2, bn, hn, hn, hr_in, rd + 2 * hn * hn, grh.data()));
        for (int64_t bi = 0; bi < bn; ++bi) {
          if (!active(step, bi, &t)) continue;
          (s.avx2 ? gru_h_avx2 : gru_h_base)(gx_at(t, bi) + 2 * hn, grh.data() + bi * hn, bw.data() + 2 * hn,
                                            br.data() + 2 * hn, z.data() + bi * hn,
                                            f.input_forget != 0 ? rg.data() + bi * hn : ones.data(), clip, hn,
                                            h.data() + bi * hn);
          std::memcpy(out + at(t, d, bi), h.data() + bi * hn, static_cast<size_t>(hn) * sizeof(float));
        }
        continue;
      }
      LOOM_SDK_RETURN_IF_ERROR(rnn_gemm(s.avx2, bn, gn, hn, h.data(), rd, gr.data()));
      for (int64_t bi = 0; bi < bn; ++bi) {
        if (!active(step, bi, &t)) continue;
        float* hb = h.data() + bi * hn;
        if (lstm) {
          (s.avx2 ? lstm_gates_avx2 : lstm_gates_base)(f.input_forget != 0, gx_at(t, bi), gr.data() + bi * gn,
                                                        bias.data(), p_i, p_o, p_f, clip, hn, hb, c.data() + bi * hn);
        } else {
          (s.avx2 ? rnn_h_avx2 : rnn_h_base)(gx_at(t, bi), gr.data() + bi * gn, bias.data(), clip, hn, hb);
        }
        std::memcpy(out + at(t, d, bi), hb, static_cast<size_t>(hn) * sizeof(float));
      }
    }
    for (int64_t bi = 0; bi < bn; ++bi) {
      std::memcpy(out + at(tn, d, bi), h.data() + bi * hn, static_cast<size_t>(hn) * sizeof(float));
      if (lstm) std::memcpy(out + at(tn + 1, d, bi), c.data() + bi * hn, static_cast<size_t>(hn) * sizeof(float));
    }
  }
  return sdk::Status();
}

}  // namespace loom::cpu_simd

#pragma GCC diagnostic pop
