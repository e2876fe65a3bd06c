// Rewrites of a lowered blob graph that make it cheaper to run and compute
// the same function (see compile.hpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "compile.hpp"

namespace loom::cpu_simd {

namespace {

// HardSigmoid with ONNX HardSwish's parameters: alpha 1/6 (as an exporter
// writes it in float, 0.16666667) and beta 0.5.
bool is_hard_swish_gate(const BlobNode& n) {
  return n.op == Op::kHardSigmoid && std::fabs(n.alpha - 1.0f / 6.0f) <= 1e-7f && n.beta == 0.5f;
}

// Drops tensor `dead` (read and written by nothing) and renumbers the rest.
void drop_tensor(BlobGraph* g, uint32_t dead) {
  g->tensors.erase(g->tensors.begin() + dead);
  auto fix = [dead](uint32_t& t) {
    if (t > dead) --t;
  };
  for (uint32_t& t : g->inputs) fix(t);
  for (uint32_t& t : g->outputs) fix(t);
  for (BlobNode& n : g->nodes) {
    for (uint32_t& t : n.inputs) fix(t);
    for (uint32_t& t : n.outputs) fix(t);
  }
}

// --- QDQ fusion (fuse_qdq) ---

bool qdq_is8(loom_dtype_t d) { return d == LOOM_DTYPE_U8 || d == LOOM_DTYPE_I8; }

int64_t qdq_count(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

bool qdq_one(const std::vector<int64_t>& s) { return qdq_count(s) == 1 && s.size() <= 1; }


// A tensor read by one node only and not a graph output: an intermediate the
// fusion may drop.
bool qdq_private(const TensorUses& u, uint32_t t) { return u.readers[t] == 1 && !u.output[t]; }

// The values of a constant f32 tensor, or of a constant u8 / i8 / i32 one as
// integers; false when `t` is not a constant.
bool qdq_floats(const BlobGraph& g, uint32_t t, std::vector<float>* out) {
  const BlobTensor& bt = g.tensors[t];
  if (!bt.constant || bt.dtype != LOOM_DTYPE_F32) return false;
  *out = bt.data;
  return static_cast<int64_t>(out->size()) == qdq_count(bt.shape);
}

bool qdq_ints(const BlobGraph& g, uint32_t t, std::vector<int64_t>* out) {
  const BlobTensor& bt = g.tensors[t];
  if (!bt.constant) return false;
  const int64_t n = qdq_count(bt.shape);
  out->assign(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    switch (bt.dtype) {
      case LOOM_DTYPE_U8: (*out)[static_cast<size_t>(i)] = bt.bytes.at(static_cast<size_t>(i)); break;
      case LOOM_DTYPE_I8: (*out)[static_cast<size_t>(i)] = static_cast<int8_t>(bt.bytes.at(static_cast<size_t>(i))); break;
      case LOOM_DTYPE_I32: {
        int32_t v = 0;
        if (bt.bytes.size() < static_cast<size_t>(4 * (i + 1))) return false;
        std::memcpy(&v, bt.bytes.data() + 4 * i, 4);
        (*out)[static_cast<size_t>(i)] = v;
        break;
      }
      default: return false;
    }
  }
  return true;
}

// A zero point: a DequantizeLinear's or QuantizeLinear's input 2, or zeros.
bool qdq_zero_points(const BlobGraph& g, const BlobNode& q, std::vector<int64_t>* out) {
  if (q.inputs.size() < 3) {
    out->assign(1, 0);
    return true;
  }
  return qdq_ints(g, q.inputs[2], out);
}

uint32_t qdq_add_constant(BlobGraph* g, loom_dtype_t dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  BlobTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.constant = true;
  t.bytes = std::move(bytes);
  g->tensors.push_back(std::move(t));
  return static_cast<uint32_t>(g->tensors.size() - 1);
}

// The zero point operand of a QDQ node, or a new constant 0 of `dtype` in
// the shape of its scale (a DequantizeLinear without one has zero point 0).
uint32_t qdq_zero_operand(BlobGraph* g, const BlobNode& q, loom_dtype_t dtype) {
  if (q.inputs.size() > 2) return q.inputs[2];
  const std::vector<int64_t> shape = g->tensors[q.inputs[1]].shape;
  return qdq_add_constant(g, dtype, shape, std::vector<uint8_t>(static_cast<size_t>(qdq_count(shape)), 0));
}

// QuantizeLinear's value of `v` in f32 as the QuantizeLinear step computes it.
int32_t qdq_quantize(float v, float scale, int64_t zero, bool is_unsigned) {
  const float lo = is_unsigned ? 0.0f : -128.0f, hi = is_unsigned ? 255.0f : 127.0f;
  const float r = std::clamp(std::nearbyint(v / scale) + static_cast<float>(zero), lo, hi);
  return static_cast<int32_t>(r);
}

// One fused group, found from its QuantizeLinear.
struct QdqGroup {
  size_t q = 0;                 // the QuantizeLinear
  int64_t act = -1;             // Relu or Clip between the core and q
  size_t core = 0;              // Conv, MatMul or Gemm
  size_t dq_x = 0, dq_w = 0;    // DequantizeLinear of the activation and the weight
  int64_t dq_bias = -1;         // DequantizeLinear of the bias, if it has one
};

// Whether the weight's scale runs per output channel along `axis` of a
// weight with `channels` outputs, or per tensor.
bool qdq_weight_scale_ok(const BlobGraph& g, const BlobNode& dq, int64_t axis, int64_t channels) {
  const std::vector<int64_t>& s = g.tensors[dq.inputs[1]].shape;
  if (qdq_one(s)) return true;
  return s.size() == 1 && s[0] == channels && dq.axis == axis;
}

// Tries to fuse the group ending in QuantizeLinear node `qi`; true when done.
bool fuse_qdq_at(BlobGraph* g, const TensorUses& u, size_t qi) {
  const BlobNode& q = g->nodes[qi];
  if (q.op != Op::kQuantizeLinear || q.outputs.size() != 1 || !qdq_one(g->tensors[q.inputs[1]].shape)) return false;
  const loom_dtype_t yd = g->tensors[q.outputs[0]].dtype;
  if (!qdq_is8(yd)) return false;
  QdqGroup grp;
  grp.q = qi;
  uint32_t core_out = q.inputs[0];
  if (!qdq_private(u, core_out) || u.producer[core_out] < 0) return false;
  const BlobNode* act = &g->nodes[static_cast<size_t>(u.producer[core_out])];
  if (act->op == Op::kRelu || act->op == Op::kClip) {
    if (act->op == Op::kClip && (std::isnan(act->alpha) || std::isnan(act->beta))) return false;
    grp.act = u.producer[core_out];
    core_out = act->inputs[0];
    if (!qdq_private(u, core_out) || u.producer[core_out] < 0) return false;
  } else {
    act = nullptr;
  }
  grp.core = static_cast<size_t>(u.producer[core_out]);
  const BlobNode& core = g->nodes[grp.core];
  const bool conv = core.op == Op::kConv, gemm = core.op == Op::kGemm, deconv = core.op == Op::kConvTranspose;
  if (!conv && !gemm && !deconv && core.op != Op::kMatMul) return false;
  if (core.inputs.size() < 2) return false;
  const BlobNode* dx = producer_if(*g, u, core.inputs[0], Op::kDequantizeLinear);
  const BlobNode* dw = producer_if(*g, u, core.inputs[1], Op::kDequantizeLinear);
  if (dx == nullptr || dw == nullptr || core.inputs[0] == core.inputs[1]) return false;
  grp.dq_x = static_cast<size_t>(u.producer[core.inputs[0]]);
  grp.dq_w = static_cast<size_t>(u.producer[core.inputs[1]]);
  const uint32_t xq = dx->inputs[0], wq = dw->inputs[0];
  if (!qdq_is8(g->tensors[xq].dtype) || !qdq_is8(g->tensors[wq].dtype)) return false;
  if (!qdq_one(g->tensors[dx->inputs[1]].shape)) return false;  // per-tensor activations only
  const std::vector<int64_t>& ws_shape = g->tensors[wq].shape;
  const std::vector<int64_t>& x_shape = g->tensors[xq].shape;
  bool trans_b = false;
  int64_t channels = 0;
  if (conv) {
    channels = ws_shape.at(0);
    if (!qdq_weight_scale_ok(*g, *dw, 0, channels)) return false;
  } else if (deconv) {
    // QLinearConvTranspose (format 12): 2-D, u8 x, i8 weights of zero point
    // 0 held by the program (a constant or a parameter), the weight's scale
    // per tensor or, with one group, per output channel (its axis 1).
    std::vector<int64_t> wz;
    if (g->tensors[xq].dtype != LOOM_DTYPE_U8 || g->tensors[wq].dtype != LOOM_DTYPE_I8 || x_shape.size() != 4 ||
        ws_shape.size() != 4 || core.ints.size() < 2 || core.ints[0] != 2 ||
        !(g->tensors[wq].constant || g->tensors[wq].parameter) || !qdq_zero_points(*g, *dw, &wz)) {
      return false;
    }
    for (int64_t z : wz) {
      if (z != 0) return false;
    }
    const int64_t group = core.ints[1];
    channels = ws_shape[1] * group;
    if (!qdq_one(g->tensors[dw->inputs[1]].shape) && !(group == 1 && qdq_weight_scale_ok(*g, *dw, 1, channels))) {
      return false;
    }
  } else {
    // The int8 matmul: A of rank >= 2 and a 2-D B (a weight).
    if (x_shape.size() < 2 || ws_shape.size() != 2) return false;
    if (gemm) {
      if (core.trans_a != 0 || core.alpha != 1.0f || (core.inputs.size() > 2 && core.beta != 1.0f)) return false;
      trans_b = core.trans_b != 0;
    }
    channels = trans_b ? ws_shape[0] : ws_shape[1];
    if (!qdq_weight_scale_ok(*g, *dw, trans_b ? 0 : 1, channels)) return false;
  }
  // Scales as constants, where the bias or the clamp needs them.
  std::vector<float> xs, wsc, ys;
  const bool scales_known = qdq_floats(*g, dx->inputs[1], &xs) && qdq_floats(*g, dw->inputs[1], &wsc);
  std::vector<int64_t> yz;
  const bool y_known = qdq_floats(*g, q.inputs[1], &ys) && qdq_zero_points(*g, q, &yz);
  // QLinearConvTranspose reads every scale and zero point when it loads.
  std::vector<int64_t> xz_values;
  if (deconv && (!scales_known || !y_known || !qdq_zero_points(*g, *dx, &xz_values))) return false;

  // The bias as i32 in accumulator units (x_scale * w_scale[m]).
  int64_t bias_tensor = -1;          // an existing i32 tensor used as it is
  std::vector<uint8_t> bias_bytes;   // or new constant bytes
  if (core.inputs.size() > 2) {
    const uint32_t b = core.inputs[2];
    const std::vector<int64_t>& bshape = g->tensors[b].shape;
    const bool per_channel_shape = bshape == std::vector<int64_t>{channels} ||
                                   (gemm && bshape == std::vector<int64_t>{1, channels});
    if (!per_channel_shape && !(gemm && qdq_one(bshape))) return false;
    const BlobNode* db = producer_if(*g, u, b, Op::kDequantizeLinear);
    if (!scales_known) return false;
    auto acc_scale = [&](int64_t m) { return xs[0] * wsc[wsc.size() == 1 ? 0 : static_cast<size_t>(m)]; };
    std::vector<float> bias_f;
    if (db != nullptr) {
      grp.dq_bias = u.producer[b];
      std::vector<float> sb;
      std::vector<int64_t> zb, bi;
      if (g->tensors[db->inputs[0]].dtype != LOOM_DTYPE_I32 || !qdq_floats(*g, db->inputs[1], &sb) ||
          !qdq_zero_points(*g, *db, &zb)) {
        return false;
      }
      // The quantizer's form: i32 bias, zero point 0, scale x_scale * w_scale[m].
      bool as_is = per_channel_shape && bshape.size() == 1 && g->tensors[db->inputs[0]].shape == bshape;
      for (int64_t m = 0; as_is && m < channels; ++m) {
        as_is = zb[zb.size() == 1 ? 0 : static_cast<size_t>(m)] == 0 &&
                sb[sb.size() == 1 ? 0 : static_cast<size_t>(m)] == acc_scale(m);
      }
      if (as_is) {
        bias_tensor = db->inputs[0];
      } else if (qdq_ints(*g, db->inputs[0], &bi)) {
        // Any other constant: its f32 value as DequantizeLinear computes it.
        const int64_t n = static_cast<int64_t>(bi.size());
        const int64_t per = sb.size() == 1 ? 1 : n / static_cast<int64_t>(sb.size());
        for (int64_t i = 0; i < n; ++i) {
          const size_t ch = sb.size() == 1 ? 0 : static_cast<size_t>((i / per) % static_cast<int64_t>(sb.size()));
          const int64_t diff = bi[static_cast<size_t>(i)] - zb[zb.size() == 1 ? 0 : ch];
          bias_f.push_back(static_cast<float>(diff) * sb[ch]);
        }
      } else {
        return false;
      }
    } else if (!qdq_floats(*g, b, &bias_f)) {
      return false;
    }
    if (bias_tensor < 0) {
      // nearbyint(bias / (x_scale * w_scale[m])), the product in f32 and the
      // quotient in double; refused (left unfused) outside i32.
      bias_bytes.resize(static_cast<size_t>(4 * channels));
      for (int64_t m = 0; m < channels; ++m) {
        const float bf = bias_f[bias_f.size() == 1 ? 0 : static_cast<size_t>(m)];
        const double r = std::nearbyint(static_cast<double>(bf) / static_cast<double>(acc_scale(m)));
        if (!(std::fabs(r) <= 2147483647.0)) return false;
        const int32_t v = static_cast<int32_t>(r);
        std::memcpy(bias_bytes.data() + 4 * m, &v, 4);
      }
    }
  }
  // QLinearConvTranspose reads its bias when it loads: an i32 bias held
  // outside the blob (a parameter) keeps the group in f32.
  if (deconv && bias_tensor >= 0 && !g->tensors[static_cast<size_t>(bias_tensor)].constant) return false;
  // The activation as a clamp in output units.
  std::vector<float> clamp;
  if (act != nullptr) {
    if (!y_known) return false;
    const bool is_unsigned = yd == LOOM_DTYPE_U8;
    const float lo = act->op == Op::kRelu ? 0.0f : act->alpha;
    const float hi = act->op == Op::kRelu ? std::numeric_limits<float>::infinity() : act->beta;
    int32_t qlo = qdq_quantize(lo, ys[0], yz[0], is_unsigned), qhi = qdq_quantize(hi, ys[0], yz[0], is_unsigned);
    if (qlo > qhi) qlo = qhi;  // min > max gives max, as the Clip step
    clamp = {static_cast<float>(qlo), static_cast<float>(qhi)};
  }

  // The fused node, where the QuantizeLinear stood.
  BlobNode fused;
  fused.op = conv ? Op::kQLinearConv : deconv ? Op::kQLinearConvTranspose : Op::kQLinearMatMul;
  fused.ints = conv || deconv ? core.ints : std::vector<int64_t>{};
  fused.trans_b = trans_b ? 1 : 0;
  fused.trans_a = 1;  // format 10: requantize as the QuantizeLinear does (round, then add the zero point)
  fused.floats = clamp;
  fused.origin = core.origin;
  const uint32_t xz = qdq_zero_operand(g, g->nodes[grp.dq_x], g->tensors[xq].dtype);
  const uint32_t wz = qdq_zero_operand(g, g->nodes[grp.dq_w], g->tensors[wq].dtype);
  const uint32_t yzt = qdq_zero_operand(g, g->nodes[grp.q], yd);
  const BlobNode& dx2 = g->nodes[grp.dq_x];
  const BlobNode& dw2 = g->nodes[grp.dq_w];
  fused.inputs = {xq, dx2.inputs[1], xz, wq, dw2.inputs[1], wz, g->nodes[grp.q].inputs[1], yzt};
  if (bias_tensor >= 0) {
    fused.inputs.push_back(static_cast<uint32_t>(bias_tensor));
  } else if (!bias_bytes.empty()) {
    fused.inputs.push_back(qdq_add_constant(g, LOOM_DTYPE_I32, {channels}, std::move(bias_bytes)));
  }
  fused.outputs = g->nodes[grp.q].outputs;
  g->nodes[grp.q] = std::move(fused);
  // The core and the activation go; DequantizeLinear nodes whose outputs
  // nobody reads any more go too.
  std::vector<size_t> gone = {grp.core};
  if (grp.act >= 0) gone.push_back(static_cast<size_t>(grp.act));
  auto erased = [&](size_t n) { return std::find(gone.begin(), gone.end(), n) != gone.end(); };
  for (int64_t d : {static_cast<int64_t>(grp.dq_x), static_cast<int64_t>(grp.dq_w), grp.dq_bias}) {
    if (d < 0 || erased(static_cast<size_t>(d))) continue;
    const uint32_t t = g->nodes[static_cast<size_t>(d)].outputs[0];
    size_t readers = 0;
    for (size_t n = 0; n < g->nodes.size(); ++n) {
      if (erased(n)) continue;
      for (uint32_t in : g->nodes[n].inputs) readers += in == t;
    }
    if (readers == 0 && !u.output[t]) gone.push_back(static_cast<size_t>(d));
  }
  std::sort(gone.rbegin(), gone.rend());
  for (size_t n : gone) g->nodes.erase(g->nodes.begin() + static_cast<std::ptrdiff_t>(n));
  return true;
}

// Drops the tensors that nothing reads or writes and that are not graph
// inputs or outputs (constants and intermediates a rewrite left behind).
void drop_unused_tensors(BlobGraph* g) {
  std::vector<bool> used(g->tensors.size(), false);
  for (uint32_t t : g->inputs) used[t] = true;
  for (uint32_t t : g->outputs) used[t] = true;
  for (const BlobNode& n : g->nodes) {
    for (uint32_t t : n.inputs) used[t] = true;
    for (uint32_t t : n.outputs) used[t] = true;
  }
  for (size_t t = g->tensors.size(); t-- > 0;) {
    if (!used[t]) drop_tensor(g, static_cast<uint32_t>(t));
  }
}

}  // namespace

TensorUses tensor_uses(const BlobGraph& g) {
  TensorUses u;
  u.readers.assign(g.tensors.size(), 0);
  u.reader.assign(g.tensors.size(), -1);
  u.producer.assign(g.tensors.size(), -1);
  u.output.assign(g.tensors.size(), false);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (uint32_t t : g.nodes[n].inputs) {
      ++u.readers[t];
      u.reader[t] = static_cast<int64_t>(n);
    }
    for (uint32_t t : g.nodes[n].outputs) u.producer[t] = static_cast<int64_t>(n);
  }
  for (uint32_t t : g.outputs) u.output[t] = true;
  return u;
}

const BlobNode* producer_if(const BlobGraph& g, const TensorUses& u, uint32_t t, Op op) {
  const int64_t p = u.producer[t];
  return p >= 0 && g.nodes[static_cast<size_t>(p)].op == op ? &g.nodes[static_cast<size_t>(p)] : nullptr;
}

size_t fuse_qdq(BlobGraph* g) {
  size_t fused = 0;
  // One group per pass: a fusion erases nodes and adds tensors.
  for (bool again = true; again;) {
    again = false;
    const TensorUses u = tensor_uses(*g);
    for (size_t i = 0; i < g->nodes.size() && !again; ++i) {
      again = g->nodes[i].op == Op::kQuantizeLinear && fuse_qdq_at(g, u, i);
    }
    fused += again ? 1 : 0;
  }
  if (fused > 0) drop_unused_tensors(g);
  return fused;
}

size_t fold_constant_dequantize(BlobGraph* g) {
  size_t folded = 0;
  std::vector<bool> is_output(g->tensors.size(), false);
  for (uint32_t t : g->outputs) is_output[t] = true;
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    const BlobNode& n = g->nodes[i];
    if (n.op != Op::kDequantizeLinear || is_output[n.outputs[0]]) continue;
    std::vector<int64_t> x, zero;
    std::vector<float> scale;
    if (!qdq_ints(*g, n.inputs[0], &x) || !qdq_floats(*g, n.inputs[1], &scale) || !qdq_zero_points(*g, n, &zero)) {
      continue;
    }
    // As the DequantizeLinear step computes it: float(x - zero) * scale.
    BlobTensor& out = g->tensors[n.outputs[0]];
    const std::vector<int64_t>& shape = out.shape;
    int64_t inner = 1;
    if (scale.size() > 1) {
      for (size_t d = static_cast<size_t>(n.axis) + 1; d < shape.size(); ++d) inner *= shape[d];
    }
    out.data.resize(x.size());
    for (size_t e = 0; e < x.size(); ++e) {
      const size_t ch = scale.size() == 1 ? 0 : static_cast<size_t>((static_cast<int64_t>(e) / inner) %
                                                                     static_cast<int64_t>(scale.size()));
      out.data[e] = static_cast<float>(x[e] - zero[zero.size() == 1 ? 0 : ch]) * scale[ch];
    }
    out.constant = true;
    g->nodes.erase(g->nodes.begin() + static_cast<std::ptrdiff_t>(i));
    --i;
    ++folded;
  }
  if (folded > 0) drop_unused_tensors(g);
  return folded;
}

size_t fold_hard_swish(BlobGraph* g) {
  size_t folded = 0;
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    if (!is_hard_swish_gate(g->nodes[i]) || g->nodes[i].outputs.size() != 1) continue;
    const uint32_t x = g->nodes[i].inputs[0], h = g->nodes[i].outputs[0];
    // h must be read by exactly one node, a Mul(x, h) or Mul(h, x), and not
    // be a graph output.
    bool is_output = false;
    for (uint32_t t : g->outputs) is_output = is_output || t == h;
    if (is_output) continue;
    size_t readers = 0, mul = 0;
    for (size_t k = 0; k < g->nodes.size(); ++k) {
      for (uint32_t t : g->nodes[k].inputs) {
        if (t == h) {
          ++readers;
          mul = k;
        }
      }
    }
    if (readers != 1) continue;
    BlobNode& m = g->nodes[mul];
    const bool pair = m.op == Op::kMul && m.inputs.size() == 2 &&
                      ((m.inputs[0] == x && m.inputs[1] == h) || (m.inputs[0] == h && m.inputs[1] == x));
    if (!pair || g->tensors[m.outputs[0]].shape != g->tensors[x].shape) continue;
    // HardSwish(x) where the Mul stood; the HardSigmoid and h go.
    BlobNode swish;
    swish.op = Op::kHardSwish;
    swish.inputs = {x};
    swish.outputs = m.outputs;
    m = std::move(swish);
    g->nodes.erase(g->nodes.begin() + static_cast<std::ptrdiff_t>(i));
    drop_tensor(g, h);
    ++folded;
    --i;
  }
  return folded;
}

}  // namespace loom::cpu_simd
