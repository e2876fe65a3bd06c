// The schedule's fusion matchers (a Conv, MatMul or LayerNorm chain that
// one oneDNN primitive or one kernel computes) and the oneDNN steps made
// for them; Schedule::build (schedule.cpp) calls these.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "schedule_plan.hpp"

namespace loom::cpu_simd::plan {

// The oneDNN post-op for an activation node, when it computes the same
// function as the ONNX operator.
bool eltwise_of(const BlobNode& n, Eltwise* e) {
  using A = dnnl::algorithm;
  switch (n.op) {
    case Op::kRelu: *e = {A::eltwise_relu, 0, 0}; return true;
    case Op::kLeakyRelu: *e = {A::eltwise_relu, n.alpha, 0}; return true;
    case Op::kClip:  // min > max yields max in ONNX; leave that to the plain kernel
      if (!(n.alpha <= n.beta)) return false;
      *e = {A::eltwise_clip_v2, n.alpha, n.beta};
      return true;
    case Op::kSigmoid: *e = {A::eltwise_logistic, 0, 0}; return true;
    case Op::kHardSwish: *e = {A::eltwise_hardswish, 0, 0}; return true;
    case Op::kTanh: *e = {A::eltwise_tanh, 0, 0}; return true;
    case Op::kElu: *e = {A::eltwise_elu, n.alpha, 0}; return true;
    default: return false;
  }
}

dnnl::engine& cpu_engine() {
  // One engine per process is what oneDNN expects; it holds no state a
  // caller can change.
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Element strides of each logical dimension of a slot.
std::array<int64_t, kMaxRank> logical_strides(const Slot& s) {
  std::array<int64_t, kMaxRank> st{};
  const auto& d = s.shape;
  if (s.layout == Layout::kNhwc) {
    st[1] = 1;
    st[3] = d[1];
    st[2] = d[1] * d[3];
    st[0] = d[1] * d[2] * d[3];
    return st;
  }
  int64_t stride = 1;
  for (size_t i = d.size(); i-- > 0;) {
    st[i] = stride;
    stride *= d[i];
  }
  return st;
}

// Broadcast geometry of a binary node whose operands and output live in
// `a`, `b` and `y`, looping in y's memory order.
BroadcastGeometry binary_geometry(const Slot& a, const Slot& b, const Slot& y) {
  BroadcastGeometry g;
  const size_t rank = y.shape.size();
  g.rank = rank;
  std::array<size_t, kMaxRank> order{};
  for (size_t i = 0; i < rank; ++i) order[i] = i;
  if (y.layout == Layout::kNhwc) order = {0, 2, 3, 1};
  auto strides = [&](const Slot& s, std::array<int64_t, kMaxRank>& out) {
    const std::array<int64_t, kMaxRank> ls = logical_strides(s);
    const size_t pad = rank - s.shape.size();
    std::array<int64_t, kMaxRank> full{};
    for (size_t d = 0; d < rank; ++d) {
      full[d] = d < pad || s.shape[d - pad] == 1 ? 0 : ls[d - pad];
    }
    for (size_t i = 0; i < rank; ++i) out[i] = full[order[i]];
  };
  for (size_t i = 0; i < rank; ++i) g.dims[i] = y.shape[order[i]];
  strides(a, g.a_strides);
  strides(b, g.b_strides);
  coalesce(&g);
  return g;
}

dnnl::primitive_attr make_attr(const std::vector<Eltwise>& before_sum, bool sum,
                               const std::vector<Eltwise>& after_sum) {
  dnnl::post_ops po;
  for (const Eltwise& e : before_sum) po.append_eltwise(1.0f, e.alg, e.alpha, e.beta);
  if (sum) po.append_sum(1.0f);
  for (const Eltwise& e : after_sum) po.append_eltwise(1.0f, e.alg, e.alpha, e.beta);
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}


namespace {

bool fixed_or_absent(const Planner& p, const BlobNode& n, size_t i) {
  return i >= n.inputs.size() || p.fixed[n.inputs[i]];
}

}  // namespace

bool plan_conv_chain(const Planner& p, size_t i, ConvChain* c) {
  const BlobNode& conv = p.g.nodes[i];
  if ((conv.op != Op::kConv && conv.op != Op::kConvTranspose) ||
      p.g.tensors[conv.inputs[0]].shape.size() != 4) {
    return false;
  }
  if (!fixed_or_absent(p, conv, 1) || !fixed_or_absent(p, conv, 2)) return false;
  c->conv = i;
  c->nodes = {i};
  uint32_t t = conv.outputs[0];
  int64_t next = p.sole_reader(t);
  // BatchNormalization folds into a Conv's output rows; a ConvTranspose's
  // weights hold output channels in their second dimension, so its BN stays
  // a node of its own.
  if (next >= 0 && conv.op == Op::kConv && p.g.nodes[next].op == Op::kBatchNorm &&
      p.g.nodes[next].inputs[0] == t) {
    const BlobNode& bn = p.g.nodes[next];
    bool ok = true;
    for (size_t k = 1; k < 5; ++k) ok = ok && p.fixed[bn.inputs[k]];
    if (ok) {
      c->bn = next;
      c->nodes.push_back(static_cast<size_t>(next));
      t = bn.outputs[0];
      next = p.sole_reader(t);
    }
  }
  Eltwise e;
  if (next >= 0 && eltwise_of(p.g.nodes[next], &e)) {
    c->before_sum.push_back(e);
    c->nodes.push_back(static_cast<size_t>(next));
    t = p.g.nodes[next].outputs[0];
    next = p.sole_reader(t);
  }
  // A residual Add becomes a sum post-op of a Conv only: oneDNN's
  // deconvolution with a sum post-op ran 4-5x slower than without it (the
  // zoo detector's FPN, 96 -> 96 channels, 32x32 -> 64x64 on AVX2: 35 ms
  // against 7.5 ms), far more than the separate Add costs.
  if (next >= 0 && conv.op == Op::kConv && p.g.nodes[next].op == Op::kAdd) {
    const BlobNode& add = p.g.nodes[next];
    const uint32_t other = add.inputs[0] == t ? add.inputs[1] : add.inputs[0];
    if (add.inputs[0] != add.inputs[1] && p.g.tensors[other].shape == p.g.tensors[t].shape) {
      c->add = next;
      c->residual = other;
      c->nodes.push_back(static_cast<size_t>(next));
      t = add.outputs[0];
      next = p.sole_reader(t);
      if (next >= 0 && eltwise_of(p.g.nodes[next], &e)) {
        c->after_sum.push_back(e);
        c->nodes.push_back(static_cast<size_t>(next));
        t = p.g.nodes[next].outputs[0];
      }
    }
  }
  c->output = t;
  return true;
}

// The oneDNN convolution (deconvolution for ConvTranspose) of a chain;
// throws dnnl::error when oneDNN has no implementation for it.
std::shared_ptr<DnnlStep> make_conv(const Planner& p, const ConvChain& c, uint32_t src_slot,
                                    uint32_t dst_slot, uint32_t residual_slot) {
  const BlobNode& node = p.g.nodes[c.conv];
  const NodePlan plan = plan_node(p.g, c.conv);
  const Window& w = plan.window;  // spatial dims padded to 3: [1], [2] are H, W
  const auto& xs = p.g.tensors[node.inputs[0]].shape;
  const auto& ws = p.g.tensors[node.inputs[1]].shape;
  const auto& ys = p.g.tensors[node.outputs[0]].shape;
  const int64_t groups = w.group;
  const bool transposed = node.op == Op::kConvTranspose;
  auto d = std::make_shared<DnnlStep>();
  // oneDNN names weight dims (g, o, i, h, w) for both primitives; ONNX's
  // ConvTranspose weight is [C_in, C_out / group, kH, kW], i.e. iohw.
  const int64_t wo = transposed ? ws[1] : ws[0] / groups;
  const int64_t wi = transposed ? ws[0] / groups : ws[1];
  const memory::dims wdims = groups == 1 ? memory::dims{wo, wi, ws[2], ws[3]}
                                         : memory::dims{groups, wo, wi, ws[2], ws[3]};
  d->user_wei_md = memory::desc(wdims, DType::f32,
                                transposed ? (groups == 1 ? Tag::iohw : Tag::giohw)
                                           : (groups == 1 ? Tag::oihw : Tag::goihw));
  const memory::desc wany(wdims, DType::f32, Tag::any);
  d->src_md = memory::desc(dims_of(xs), DType::f32, Tag::nhwc);
  d->dst_md = memory::desc(dims_of(ys), DType::f32, Tag::nhwc);
  d->bias_md = memory::desc({ys[1]}, DType::f32, Tag::x);
  const dnnl::primitive_attr attr = make_attr(c.before_sum, c.add >= 0, c.after_sum);
  const memory::dims strides = {w.stride[1], w.stride[2]};
  const memory::dims dilates = {w.dilation[1] - 1, w.dilation[2] - 1};
  const memory::dims pad_l = {w.pad_begin[1], w.pad_begin[2]};
  if (transposed) {
    // output_padding extends the output at the end, as a smaller end pad.
    const memory::dims pad_r = {w.pad_end[1] - w.output_padding[1],
                                w.pad_end[2] - w.output_padding[2]};
    dnnl::deconvolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                           dnnl::algorithm::deconvolution_direct, d->src_md,
                                           wany, d->bias_md, d->dst_md, strides, dilates, pad_l,
                                           pad_r);
    dnnl::deconvolution_forward::primitive_desc pd(desc, attr, cpu_engine());
    d->wei_md = pd.weights_desc();
    d->scratch_md = pd.scratchpad_desc();
    d->prim = dnnl::deconvolution_forward(pd);
  } else {
    const memory::dims pad_r = {w.pad_end[1], w.pad_end[2]};
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                         dnnl::algorithm::convolution_direct, d->src_md, wany,
                                         d->bias_md, d->dst_md, strides, dilates, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc pd(desc, attr, cpu_engine());
    d->wei_md = pd.weights_desc();
    d->scratch_md = pd.scratchpad_desc();
    d->prim = dnnl::convolution_forward(pd);
  }
  d->packs = true;
  d->packed = memory(d->wei_md, cpu_engine());
  d->bias = memory(d->bias_md, cpu_engine());
  d->wei_slot = node.inputs[1];
  d->bias_slot = node.inputs.size() > 2 ? node.inputs[2] : kNone;
  d->out_channels = ys[1];
  if (c.bn >= 0) {
    const BlobNode& bn = p.g.nodes[static_cast<size_t>(c.bn)];
    for (size_t k = 0; k < 4; ++k) d->bn[k] = bn.inputs[k + 1];
    d->bn_epsilon = bn.alpha;
  }
  d->residual_slot = residual_slot;
  d->args = {{DNNL_ARG_SRC, src_slot, d->src_md}, {DNNL_ARG_DST, dst_slot, d->dst_md}};
  return d;
}


namespace {

// Elements of `s` when every dimension but the last is 1.
bool is_row_vector(const std::vector<int64_t>& s, int64_t n) {
  if (s.empty()) return false;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] != 1) return false;
  }
  return s.back() == n;
}


// The value of a blob constant with one element, or NaN.
float scalar_constant(const Planner& p, uint32_t t) {
  const BlobTensor& bt = p.g.tensors[t];
  return bt.constant && bt.data.size() == 1 ? bt.data[0] : std::numeric_limits<float>::quiet_NaN();
}


// The other operand of binary node `n` when one of them is `t`.
uint32_t other_operand(const BlobNode& n, uint32_t t) {
  if (n.inputs[0] == t && n.inputs[1] != t) return n.inputs[1];
  if (n.inputs[1] == t && n.inputs[0] != t) return n.inputs[0];
  return kNone;
}


// The exporters' GELU on `t`, y = x * 0.5 * (1 + erf(x / sqrt 2)):
//   d = Div(x, sqrt 2) or Mul(x, 1 / sqrt 2); e = Erf(d); a = Add(e, 1);
//   then Mul(Mul(x, a), 0.5) or Mul(Mul(x, 0.5), a)
// (either operand order), every intermediate read once and of x's shape.
// On a match `nodes` gets the six nodes and `out` the result tensor.
bool match_gelu(const Planner& p, uint32_t t, std::vector<size_t>* nodes, uint32_t* out) {
  const auto& rd = p.readers[t];
  if (p.is_output[t] || rd.size() != 2 || rd[0] == rd[1] || p.claimed[rd[0]] || p.claimed[rd[1]]) {
    return false;
  }
  const auto near = [](float v, double want) { return std::fabs(v - want) <= 1e-6 * want; };
  const auto& shape = p.g.tensors[t].shape;
  const auto same_shape = [&](size_t node) { return p.g.tensors[p.g.nodes[node].outputs[0]].shape == shape; };
  for (int k = 0; k < 2; ++k) {
    const size_t div = rd[k], mul1 = rd[1 - k];
    const BlobNode& d = p.g.nodes[div];
    const BlobNode& m1 = p.g.nodes[mul1];
    if (m1.op != Op::kMul || other_operand(m1, t) == kNone) continue;
    if (d.op == Op::kDiv) {
      if (d.inputs[0] != t || !near(scalar_constant(p, d.inputs[1]), std::sqrt(2.0))) continue;
    } else if (d.op == Op::kMul) {
      const uint32_t c = other_operand(d, t);
      if (c == kNone || !near(scalar_constant(p, c), std::sqrt(0.5))) continue;
    } else {
      continue;
    }
    const int64_t erf = p.sole_reader(d.outputs[0]);
    if (erf < 0 || p.g.nodes[erf].op != Op::kErf) continue;
    const uint32_t e = p.g.nodes[erf].outputs[0];
    const int64_t add = p.sole_reader(e);
    if (add < 0 || p.g.nodes[add].op != Op::kAdd) continue;
    const uint32_t one = other_operand(p.g.nodes[add], e);
    if (one == kNone || scalar_constant(p, one) != 1.0f) continue;
    const uint32_t a = p.g.nodes[add].outputs[0];
    const int64_t mul2 = p.sole_reader(m1.outputs[0]);
    if (mul2 < 0 || p.g.nodes[mul2].op != Op::kMul) continue;
    const BlobNode& m2 = p.g.nodes[mul2];
    const uint32_t m1_other = other_operand(m1, t);
    const uint32_t m2_other = other_operand(m2, m1.outputs[0]);
    const bool a_first = m1_other == a && scalar_constant(p, m2_other) == 0.5f;
    const bool half_first = scalar_constant(p, m1_other) == 0.5f && m2_other == a &&
                            p.sole_reader(a) == mul2;
    if (!a_first && !half_first) continue;
    if (a_first && p.sole_reader(a) != static_cast<int64_t>(mul1)) continue;
    *nodes = {div, static_cast<size_t>(erf), static_cast<size_t>(add), mul1, static_cast<size_t>(mul2)};
    for (size_t n : *nodes) {
      if (!same_shape(n)) return false;
    }
    *out = m2.outputs[0];
    return true;
  }
  return false;
}

}  // namespace

namespace {

// The node that writes tensor t, or -1.
int64_t producer_of(const Planner& p, uint32_t t) {
  for (size_t k = 0; k < p.g.nodes.size(); ++k) {
    for (uint32_t o : p.g.nodes[k].outputs) {
      if (o == t) return static_cast<int64_t>(k);
    }
  }
  return -1;
}

// A Transpose node (with its permutation in ints) of a tensor of the same
// rank, not taken by another step.
bool is_foldable_transpose(const Planner& p, int64_t k) {
  if (k < 0 || p.claimed[static_cast<size_t>(k)]) return false;
  const BlobNode& t = p.g.nodes[static_cast<size_t>(k)];
  return t.op == Op::kTranspose && t.ints.size() == p.g.tensors[t.inputs[0]].shape.size() &&
         t.ints.size() >= 2;
}

}  // namespace

void fold_transposes(const Planner& p, MatMulChain* c) {
  const BlobNode& n = p.g.nodes[c->node];
  c->output = n.outputs[0];
  c->operand[0] = n.inputs[0];
  c->operand[1] = n.inputs[1];
  // Same rank on both sides, so that no operand is padded with batch 1s.
  if (p.g.tensors[n.inputs[0]].shape.size() != p.g.tensors[n.inputs[1]].shape.size()) return;
  std::vector<size_t> before;
  for (size_t j = 0; j < 2; ++j) {
    const uint32_t t = n.inputs[j];
    // Read by this MatMul alone (once), and not a graph output.
    if (n.inputs[0] == n.inputs[1] || p.sole_reader(t) != static_cast<int64_t>(c->node)) continue;
    const int64_t k = producer_of(p, t);
    if (!is_foldable_transpose(p, k)) continue;
    const BlobNode& tr = p.g.nodes[static_cast<size_t>(k)];
    c->operand[j] = tr.inputs[0];
    c->perm[j] = tr.ints;
    before.push_back(static_cast<size_t>(k));
  }
  c->nodes.insert(c->nodes.begin(), before.begin(), before.end());
  uint32_t t = n.outputs[0];
  const int64_t next = p.sole_reader(t);
  if (next >= 0 && is_foldable_transpose(p, next) &&
      p.g.tensors[t].shape.size() == p.g.tensors[n.inputs[0]].shape.size()) {
    c->out_perm = p.g.nodes[static_cast<size_t>(next)].ints;
    c->nodes.push_back(static_cast<size_t>(next));
    t = p.g.nodes[static_cast<size_t>(next)].outputs[0];
  }
  c->output = t;
}

bool plan_matmul_chain(const Planner& p, size_t i, MatMulChain* c) {
  const BlobNode& n = p.g.nodes[i];
  const auto& a = p.g.tensors[n.inputs[0]].shape;
  const auto& b = p.g.tensors[n.inputs[1]].shape;
  const auto& y = p.g.tensors[n.outputs[0]].shape;
  uint64_t elements = 1;
  for (int64_t d : y) elements *= static_cast<uint64_t>(d);
  for (int64_t d : a) elements *= d == 0 ? 0 : 1;
  if (elements == 0) return false;
  c->node = i;
  c->nodes = {i};
  uint32_t t = n.outputs[0];
  if (n.op == Op::kGemm) {
    if (n.alpha != 1.0f || !p.fixed[n.inputs[1]]) return false;
    if (n.inputs.size() == 3) {
      const auto& cs = p.g.tensors[n.inputs[2]].shape;
      uint64_t ce = 1;
      for (int64_t d : cs) ce *= static_cast<uint64_t>(d);
      if (!p.fixed[n.inputs[2]] || !(ce == 1 || is_row_vector(cs, y[1]))) return false;
      c->bias = n.inputs[2];
    }
    c->packed = true;
  } else {
    if (a.size() < 2 || b.size() < 2) return false;
    c->packed = p.fixed[n.inputs[1]] && b.size() == 2;
    if (!c->packed) {
      // Batched, both operands computed: oneDNN broadcasts batch dims of 1.
      if (std::max(a.size(), b.size()) > 6) return false;
      fold_transposes(p, c);
      return true;
    }
  }
  int64_t next = p.sole_reader(t);
  if (c->bias == kNone && next >= 0 && p.g.nodes[next].op == Op::kAdd) {
    const BlobNode& add = p.g.nodes[next];
    const uint32_t other = add.inputs[0] == t ? add.inputs[1] : add.inputs[0];
    if (add.inputs[0] != add.inputs[1] && p.fixed[other] &&
        is_row_vector(p.g.tensors[other].shape, y.back()) &&
        p.g.tensors[other].shape.size() <= y.size()) {
      c->add = next;
      c->bias = other;
      c->nodes.push_back(static_cast<size_t>(next));
      t = add.outputs[0];
      next = p.sole_reader(t);
    }
  }
  Eltwise e;
  std::vector<size_t> gelu;
  uint32_t gelu_out = kNone;
  if (next >= 0 && eltwise_of(p.g.nodes[next], &e)) {
    c->post.push_back(e);
    c->nodes.push_back(static_cast<size_t>(next));
    t = p.g.nodes[next].outputs[0];
  } else if (match_gelu(p, t, &gelu, &gelu_out)) {
    c->post.push_back({dnnl::algorithm::eltwise_gelu_erf, 0, 0});
    c->nodes.insert(c->nodes.end(), gelu.begin(), gelu.end());
    t = gelu_out;
  }
  c->output = t;
  return true;
}


namespace {

bool is_last_axis_mean(const Planner& p, const BlobNode& n) {
  const auto& x = p.g.tensors[n.inputs[0]].shape;
  return n.op == Op::kReduceMean && n.ints.size() == 2 && n.ints[0] == 1 &&
         n.ints[1] == static_cast<int64_t>(x.size()) - 1;
}

}  // namespace

bool plan_layer_norm(const Planner& p, size_t i, LayerNormChain* c) {
  const BlobNode& mean = p.g.nodes[i];
  if (!is_last_axis_mean(p, mean)) return false;
  const uint32_t x = mean.inputs[0];
  const auto& shape = p.g.tensors[x].shape;
  const int64_t n = shape.back();
  if (n < 1) return false;
  const auto node_of = [&](int64_t k, Op op) -> const BlobNode* {
    return k >= 0 && p.g.nodes[static_cast<size_t>(k)].op == op ? &p.g.nodes[static_cast<size_t>(k)]
                                                                  : nullptr;
  };
  const int64_t sub_i = p.sole_reader(mean.outputs[0]);
  const BlobNode* sub = node_of(sub_i, Op::kSub);
  if (sub == nullptr || sub->inputs[0] != x || sub->inputs[1] != mean.outputs[0]) return false;
  const uint32_t d = sub->outputs[0];
  const auto& rd = p.readers[d];
  if (p.is_output[d] || p.g.tensors[d].shape != shape) return false;
  // d is read by the square (once, or twice by Mul(d, d)) and by the Div.
  int64_t sq_i = -1, div_i = -1;
  for (size_t r : rd) {
    const BlobNode& rn = p.g.nodes[r];
    if (p.claimed[r]) return false;
    if (rn.op == Op::kDiv && rn.inputs[0] == d && rn.inputs[1] != d && div_i < 0) {
      div_i = static_cast<int64_t>(r);
    } else if ((rn.op == Op::kPow && rn.inputs[0] == d && scalar_constant(p, rn.inputs[1]) == 2.0f) ||
               (rn.op == Op::kMul && rn.inputs[0] == d && rn.inputs[1] == d)) {
      if (sq_i >= 0 && sq_i != static_cast<int64_t>(r)) return false;
      sq_i = static_cast<int64_t>(r);
    } else {
      return false;
    }
  }
  if (sq_i < 0 || div_i < 0) return false;
  const int64_t var_i = p.sole_reader(p.g.nodes[sq_i].outputs[0]);
  if (var_i < 0 || !is_last_axis_mean(p, p.g.nodes[var_i])) return false;
  const int64_t add_i = p.sole_reader(p.g.nodes[var_i].outputs[0]);
  const BlobNode* add = node_of(add_i, Op::kAdd);
  if (add == nullptr) return false;
  const uint32_t eps_t = other_operand(*add, p.g.nodes[var_i].outputs[0]);
  const float eps = eps_t == kNone ? -1.0f : scalar_constant(p, eps_t);
  if (!(eps >= 0.0f)) return false;
  const int64_t sqrt_i = p.sole_reader(add->outputs[0]);
  const BlobNode* sq = node_of(sqrt_i, Op::kSqrt);
  if (sq == nullptr || p.sole_reader(sq->outputs[0]) != div_i) return false;
  const BlobNode& div = p.g.nodes[static_cast<size_t>(div_i)];
  if (div.inputs[1] != sq->outputs[0] || p.g.tensors[div.outputs[0]].shape != shape) return false;
  c->x = x;
  c->epsilon = eps;
  c->nodes = {i, static_cast<size_t>(sub_i), static_cast<size_t>(sq_i), static_cast<size_t>(var_i),
              static_cast<size_t>(add_i), static_cast<size_t>(sqrt_i), static_cast<size_t>(div_i)};
  uint32_t t = div.outputs[0];
  int64_t next = p.sole_reader(t);
  const auto affine = [&](Op op, uint32_t* operand) {
    const BlobNode* nn = node_of(next, op);
    if (nn == nullptr) return false;
    const uint32_t other = other_operand(*nn, t);
    if (other == kNone || !is_row_vector(p.g.tensors[other].shape, n) ||
        p.g.tensors[other].shape.size() > shape.size() || p.g.tensors[nn->outputs[0]].shape != shape) {
      return false;
    }
    *operand = other;
    c->nodes.push_back(static_cast<size_t>(next));
    t = nn->outputs[0];
    next = p.sole_reader(t);
    return true;
  };
  if (affine(Op::kMul, &c->gamma)) affine(Op::kAdd, &c->beta);
  c->output = t;
  return true;
}

std::shared_ptr<DnnlStep> make_matmul(const Planner& p, const MatMulChain& c, uint32_t a_slot,
                                      uint32_t b_slot, uint32_t dst_slot) {
  const BlobNode& n = p.g.nodes[c.node];
  const auto& as = p.g.tensors[n.inputs[0]].shape;
  const auto& bs = p.g.tensors[n.inputs[1]].shape;
  auto d = std::make_shared<DnnlStep>();
  dnnl::primitive_attr attr = make_attr({}, false, c.post);
  if (!c.packed) {
    const size_t rank = std::max(as.size(), bs.size());
    auto padded = [&](const std::vector<int64_t>& s) {
      std::vector<int64_t> r(rank - s.size(), 1);
      r.insert(r.end(), s.begin(), s.end());
      return r;
    };
    const std::vector<int64_t> pa = padded(as), pb = padded(bs);
    std::vector<int64_t> py = p.g.tensors[n.outputs[0]].shape;
    // A folded Transpose: the logical operand is x permuted, so its
    // dimension i has x's stride along perm[i] (same rank, no padding).
    auto strided = [&](const std::vector<int64_t>& dims, const std::vector<int64_t>& x_shape,
                       const std::vector<int64_t>& perm) {
      if (perm.empty()) return memory::desc(dims_of(dims), DType::f32, plain_tag(rank));
      std::vector<int64_t> x_strides(x_shape.size(), 1);
      for (size_t q = x_shape.size() - 1; q-- > 0;) x_strides[q] = x_strides[q + 1] * x_shape[q + 1];
      memory::dims st(rank);
      for (size_t q = 0; q < rank; ++q) st[q] = x_strides[static_cast<size_t>(perm[q])];
      return memory::desc(dims_of(dims), DType::f32, st);
    };
    d->src_md = strided(pa, c.perm[0].empty() ? pa : p.g.tensors[c.operand[0]].shape, c.perm[0]);
    d->wei_md = strided(pb, c.perm[1].empty() ? pb : p.g.tensors[c.operand[1]].shape, c.perm[1]);
    if (c.out_perm.empty()) {
      d->dst_md = memory::desc(dims_of(padded(py)), DType::f32, plain_tag(rank));
    } else {
      // The result z = Transpose(y, out_perm) is what the step writes: y's
      // dimension out_perm[q] is z's dimension q, so y's dimension i has
      // z's stride at the position q where out_perm[q] == i.
      const std::vector<int64_t>& zs = p.g.tensors[c.output].shape;
      std::vector<int64_t> z_strides(zs.size(), 1);
      for (size_t q = zs.size() - 1; q-- > 0;) z_strides[q] = z_strides[q + 1] * zs[q + 1];
      memory::dims st(rank);
      for (size_t q = 0; q < rank; ++q) st[static_cast<size_t>(c.out_perm[q])] = z_strides[q];
      d->dst_md = memory::desc(dims_of(py), DType::f32, st);
    }
    dnnl::matmul::desc desc(d->src_md, d->wei_md, d->dst_md);
    dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
    d->scratch_md = pd.scratchpad_desc();
    d->prim = dnnl::matmul(pd);
    d->args = {{DNNL_ARG_SRC, a_slot, d->src_md},
               {DNNL_ARG_WEIGHTS, b_slot, d->wei_md},
               {DNNL_ARG_DST, dst_slot, d->dst_md}};
    return d;
  }
  int64_t m = 1, k = 0, nn = 0;
  bool trans_a = false, trans_b = false;
  if (n.op == Op::kGemm) {
    trans_a = n.trans_a != 0;
    trans_b = n.trans_b != 0;
    m = trans_a ? as[1] : as[0];
    k = trans_a ? as[0] : as[1];
    nn = trans_b ? bs[0] : bs[1];
    d->bias_scale = n.beta;
  } else {
    for (size_t i = 0; i + 1 < as.size(); ++i) m *= as[i];
    k = as.back();
    nn = bs[1];
  }
  d->src_md = trans_a ? memory::desc({m, k}, DType::f32, memory::dims{1, m})
                      : memory::desc({m, k}, DType::f32, Tag::ab);
  d->user_wei_md = trans_b ? memory::desc({k, nn}, DType::f32, memory::dims{1, k})
                           : memory::desc({k, nn}, DType::f32, Tag::ab);
  d->dst_md = memory::desc({m, nn}, DType::f32, Tag::ab);
  d->bias_md = memory::desc({1, nn}, DType::f32, Tag::ab);
  const memory::desc wany({k, nn}, DType::f32, Tag::any);
  dnnl::matmul::desc desc(d->src_md, wany, d->bias_md, d->dst_md);
  dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
  d->wei_md = pd.weights_desc();
  d->scratch_md = pd.scratchpad_desc();
  d->prim = dnnl::matmul(pd);
  d->packs = true;
  d->packed = memory(d->wei_md, cpu_engine());
  d->bias = memory(d->bias_md, cpu_engine());
  d->wei_slot = n.inputs[1];
  d->bias_slot = c.bias;
  d->out_channels = nn;
  d->args = {{DNNL_ARG_SRC, a_slot, d->src_md}, {DNNL_ARG_DST, dst_slot, d->dst_md}};
  return d;
}

// oneDNN pooling on NHWC data, or nullptr when the node needs the plain
// kernel (ceil_mode, which oneDNN has no notion of).
std::shared_ptr<DnnlStep> make_pool(const Planner& p, size_t i, uint32_t src_slot,
                                    uint32_t dst_slot, Tag layout, DType type) {
  const BlobNode& node = p.g.nodes[i];
  const NodePlan plan = plan_node(p.g, i);
  const Window& w = plan.window;
  if (w.ceil_mode != 0) return nullptr;
  const auto& xs = p.g.tensors[node.inputs[0]].shape;
  const auto& ys = p.g.tensors[node.outputs[0]].shape;
  auto d = std::make_shared<DnnlStep>();
  d->src_md = memory::desc(dims_of(xs), type, layout);
  d->dst_md = memory::desc(dims_of(ys), type, layout);
  const dnnl::algorithm alg = node.op == Op::kMaxPool
                                  ? dnnl::algorithm::pooling_max
                                  : (w.count_include_pad != 0
                                         ? dnnl::algorithm::pooling_avg_include_padding
                                         : dnnl::algorithm::pooling_avg_exclude_padding);
  dnnl::pooling_v2_forward::desc desc(
      dnnl::prop_kind::forward_inference, alg, d->src_md, d->dst_md, {w.stride[1], w.stride[2]},
      {w.kernel[1], w.kernel[2]}, {w.dilation[1] - 1, w.dilation[2] - 1},
      {w.pad_begin[1], w.pad_begin[2]}, {w.pad_end[1], w.pad_end[2]});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::pooling_v2_forward::primitive_desc pd(desc, attr, cpu_engine());
  d->scratch_md = pd.scratchpad_desc();
  d->prim = dnnl::pooling_v2_forward(pd);
  d->args = {{DNNL_ARG_SRC, src_slot, d->src_md}, {DNNL_ARG_DST, dst_slot, d->dst_md}};
  return d;
}

const char* layout_name(Layout l) { return l == Layout::kNhwc ? "nhwc" : "plain"; }

}  // namespace loom::cpu_simd::plan
