#include "schedule.hpp"

#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

namespace loom::cpu_simd {

using dnnl::memory;
using Tag = memory::format_tag;
using DType = memory::data_type;

namespace {

constexpr uint32_t kNone = UINT32_MAX;
constexpr uint64_t kArenaAlignment = 64;

// A rank-4 tensor whose NCHW and NHWC layouts differ in memory. Any other
// tensor is the same bytes in both, so it has one slot.
bool layout_sensitive(const std::vector<int64_t>& s) {
  return s.size() == 4 && s[1] > 1 && s[2] * s[3] > 1;
}

uint64_t byte_size(const std::vector<int64_t>& shape) {
  uint64_t n = sizeof(float);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

memory::dims dims_of(const std::vector<int64_t>& s) { return memory::dims(s.begin(), s.end()); }

// Row-major format tag for a rank.
Tag plain_tag(size_t rank) {
  static const Tag kTags[] = {Tag::undef, Tag::a, Tag::ab, Tag::abc, Tag::abcd, Tag::abcde,
                              Tag::abcdef};
  return rank < 7 ? kTags[rank] : Tag::undef;
}

struct Eltwise {
  dnnl::algorithm alg = dnnl::algorithm::undef;
  float alpha = 0, beta = 0;
};

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

}  // namespace

// ------------------------------------------------------------------ oneDNN steps

struct DnnlStep {
  dnnl::primitive prim;
  dnnl::memory::desc src_md, dst_md, wei_md, bias_md, scratch_md;
  // Arguments bound per execute to a slot: (oneDNN argument, slot, desc).
  struct Arg {
    int arg;
    uint32_t slot;
    memory::desc md;
  };
  std::vector<Arg> args;

  // Weights packed once (Conv; MatMul with constant weights).
  bool packs = false;
  memory::desc user_wei_md;
  memory packed;              // weights in wei_md
  memory bias;                // folded bias, bias_md
  uint32_t wei_slot = kNone, bias_slot = kNone;
  uint32_t bn[4] = {kNone, kNone, kNone, kNone};  // scale, B, mean, var
  float bn_epsilon = 0;
  float bias_scale = 1;       // Gemm beta
  int64_t out_channels = 0;   // rows of the weights that BN scales (Conv)
  // Slot pointers the packed data came from: weights, bias, BN's four.
  std::array<const float*, 6> packed_from{};
  bool packed_once = false;
  uint32_t residual_slot = kNone;  // copied into dst before a sum post-op
};

class ScheduleArena {
 public:
  dnnl::stream stream;
  std::vector<std::unordered_map<int, memory>> args;  // per step
  // The same arguments as the C API takes them: dnnl::primitive::execute
  // would build this array (a heap allocation) on every call.
  std::vector<std::vector<dnnl_exec_arg_t>> c_args;  // per step
  std::vector<std::vector<std::pair<memory, uint32_t>>> bound;  // per step: memory, slot
  std::unique_ptr<std::byte[]> scratchpad;
};

namespace {

dnnl::engine& cpu_engine() {
  // One engine per process is what oneDNN expects; it holds no state a
  // caller can change.
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Builder state while the schedule is planned.
struct Planner {
  const BlobGraph& g;
  std::vector<Slot>& slots;
  std::vector<Step>& steps;
  std::vector<uint32_t> nhwc_of;     // per tensor: its NHWC slot or kNone
  std::vector<bool> plain_ready;     // per tensor: its plain slot holds it
  std::vector<bool> is_output;
  std::vector<std::vector<size_t>> readers;  // per tensor: nodes reading it (with repeats)
  std::vector<bool> fixed;           // per tensor: a constant or a parameter
  std::vector<bool> claimed;         // per node: part of a fused step

  Planner(const BlobGraph& graph, std::vector<Slot>& s, std::vector<Step>& st)
      : g(graph), slots(s), steps(st) {
    const size_t n = g.tensors.size();
    nhwc_of.assign(n, kNone);
    plain_ready.assign(n, false);
    is_output.assign(n, false);
    readers.resize(n);
    fixed.assign(n, false);
    claimed.assign(g.nodes.size(), false);
    for (size_t t = 0; t < n; ++t) {
      Slot slot;
      slot.shape = g.tensors[t].shape;
      uint64_t elements = 0;
      element_count(slot.shape, &elements);
      slot.bytes = elements * dtype_size(g.tensors[t].dtype);  // format 4: bool, i32, i64 too
      slot.external = g.tensors[t].constant;
      slots.push_back(std::move(slot));
      fixed[t] = g.tensors[t].constant || g.tensors[t].parameter;
      if (g.tensors[t].constant) plain_ready[t] = true;
    }
    for (uint32_t t : g.inputs) {
      slots[t].external = true;
      plain_ready[t] = true;
    }
    for (uint32_t t : g.outputs) {
      slots[t].external = true;
      is_output[t] = true;
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (uint32_t t : g.nodes[i].inputs) readers[t].push_back(i);
    }
  }

  // The single node reading `t` when nothing else does (nor the caller),
  // and no other fused step has taken it.
  int64_t sole_reader(uint32_t t) const {
    if (is_output[t] || readers[t].size() != 1 || claimed[readers[t][0]]) return -1;
    return static_cast<int64_t>(readers[t][0]);
  }

  uint32_t new_slot(const std::vector<int64_t>& shape, Layout layout) {
    Slot s;
    s.shape = shape;
    s.layout = layout;
    s.bytes = byte_size(shape);
    slots.push_back(std::move(s));
    return static_cast<uint32_t>(slots.size() - 1);
  }

  void reorder(uint32_t from, uint32_t to) {
    Step step;
    step.kind = StepKind::kReorder;
    step.ins = {from};
    step.out = to;
    auto d = std::make_shared<DnnlStep>();
    const memory::dims dims = dims_of(slots[from].shape);
    d->src_md = memory::desc(dims, DType::f32, slots[from].layout == Layout::kNhwc ? Tag::nhwc : Tag::nchw);
    d->dst_md = memory::desc(dims, DType::f32, slots[to].layout == Layout::kNhwc ? Tag::nhwc : Tag::nchw);
    dnnl::reorder::primitive_desc pd(cpu_engine(), d->src_md, cpu_engine(), d->dst_md);
    d->prim = dnnl::reorder(pd);
    d->args = {{DNNL_ARG_SRC, from, d->src_md}, {DNNL_ARG_DST, to, d->dst_md}};
    step.dnnl = std::move(d);
    steps.push_back(std::move(step));
  }

  Layout preferred(uint32_t t) const {
    return layout_sensitive(g.tensors[t].shape) && nhwc_of[t] != kNone ? Layout::kNhwc
                                                                       : Layout::kPlain;
  }

  // The slot holding tensor `t` in `layout`, planning a reorder if needed.
  uint32_t ensure(uint32_t t, Layout layout) {
    if (!layout_sensitive(g.tensors[t].shape)) return t;
    if (layout == Layout::kPlain) {
      if (!plain_ready[t]) {
        reorder(nhwc_of[t], t);
        plain_ready[t] = true;
      }
      return t;
    }
    if (nhwc_of[t] == kNone) {
      nhwc_of[t] = new_slot(g.tensors[t].shape, Layout::kNhwc);
      reorder(t, nhwc_of[t]);
    }
    return nhwc_of[t];
  }

  // The slot a step writes tensor `t` into, in `layout`.
  uint32_t define(uint32_t t, Layout layout) {
    if (!layout_sensitive(g.tensors[t].shape) || layout == Layout::kPlain) {
      plain_ready[t] = true;
      return t;
    }
    nhwc_of[t] = new_slot(g.tensors[t].shape, Layout::kNhwc);
    return nhwc_of[t];
  }

  // After the producer of `t`: graph outputs are plain.
  void finish(uint32_t t) {
    if (is_output[t]) ensure(t, Layout::kPlain);
  }
};

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

// A Conv (2-D) and what follows it that one oneDNN convolution can compute.
struct ConvChain {
  size_t conv = 0;
  int64_t bn = -1;
  std::vector<Eltwise> before_sum, after_sum;
  int64_t add = -1;
  uint32_t residual = kNone;  // tensor
  std::vector<size_t> nodes;  // every node, conv first
  uint32_t output = kNone;    // tensor the chain finally writes
};

bool fixed_or_absent(const Planner& p, const BlobNode& n, size_t i) {
  return i >= n.inputs.size() || p.fixed[n.inputs[i]];
}

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
  if (next >= 0 && p.g.nodes[next].op == Op::kAdd) {
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

struct MatMulChain {
  size_t node = 0;
  int64_t add = -1;           // fused bias Add
  uint32_t bias = kNone;      // tensor holding the bias (Add operand or Gemm C)
  std::vector<Eltwise> post;
  std::vector<size_t> nodes;
  uint32_t output = kNone;
  bool packed = false;        // B constant: packed once
};

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
      c->output = t;
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

// The exporters' LayerNorm over the last axis of x:
//   m = ReduceMean(x, [-1]); d = Sub(x, m); q = Pow(d, 2) or Mul(d, d);
//   v = ReduceMean(q, [-1]); s = Sqrt(Add(v, epsilon)); y = Div(d, s);
//   then optionally Mul(y, gamma) and Add(., beta) with row vectors of n.
struct LayerNormChain {
  uint32_t x = kNone, gamma = kNone, beta = kNone, output = kNone;
  float epsilon = 0;
  std::vector<size_t> nodes;
};

bool is_last_axis_mean(const Planner& p, const BlobNode& n) {
  const auto& x = p.g.tensors[n.inputs[0]].shape;
  return n.op == Op::kReduceMean && n.ints.size() == 2 && n.ints[0] == 1 &&
         n.ints[1] == static_cast<int64_t>(x.size()) - 1;
}

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
    d->src_md = memory::desc(dims_of(pa), DType::f32, plain_tag(rank));
    d->wei_md = memory::desc(dims_of(pb), DType::f32, plain_tag(rank));
    d->dst_md = memory::desc(dims_of(padded(py)), DType::f32, plain_tag(rank));
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
                                    uint32_t dst_slot, Tag layout) {
  const BlobNode& node = p.g.nodes[i];
  const NodePlan plan = plan_node(p.g, i);
  const Window& w = plan.window;
  if (w.ceil_mode != 0) return nullptr;
  const auto& xs = p.g.tensors[node.inputs[0]].shape;
  const auto& ys = p.g.tensors[node.outputs[0]].shape;
  auto d = std::make_shared<DnnlStep>();
  d->src_md = memory::desc(dims_of(xs), DType::f32, layout);
  d->dst_md = memory::desc(dims_of(ys), DType::f32, layout);
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

// Sets the calling thread's OpenMP thread count (what oneDNN uses) for a
// scope, and gives the caller's back after it.
class ThreadCount {
 public:
  explicit ThreadCount(size_t threads) : saved_(omp_get_max_threads()) {
    omp_set_num_threads(static_cast<int>(threads));
  }
  ~ThreadCount() { omp_set_num_threads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
};

// Transpose as a oneDNN reorder from a strided view of the input, when the
// innermost axis moves (the plain kernel copies contiguous runs otherwise).
std::shared_ptr<DnnlStep> make_transpose(const Planner& p, size_t i, uint32_t src_slot,
                                         uint32_t dst_slot) {
  const BlobNode& node = p.g.nodes[i];
  const auto& xs = p.g.tensors[node.inputs[0]].shape;
  const auto& ys = p.g.tensors[node.outputs[0]].shape;
  const size_t rank = xs.size();
  if (rank < 2 || rank > 6 || node.ints.size() != rank ||
      node.ints[rank - 1] == static_cast<int64_t>(rank - 1)) {
    return nullptr;
  }
  std::vector<int64_t> in_strides(rank);
  int64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    in_strides[d] = stride;
    stride *= xs[d];
  }
  memory::dims strides(rank);
  for (size_t d = 0; d < rank; ++d) strides[d] = in_strides[static_cast<size_t>(node.ints[d])];
  auto d = std::make_shared<DnnlStep>();
  d->src_md = memory::desc(dims_of(ys), DType::f32, strides);
  d->dst_md = memory::desc(dims_of(ys), DType::f32, plain_tag(rank));
  dnnl::reorder::primitive_desc pd(cpu_engine(), d->src_md, cpu_engine(), d->dst_md);
  d->prim = dnnl::reorder(pd);
  d->args = {{DNNL_ARG_SRC, src_slot, d->src_md}, {DNNL_ARG_DST, dst_slot, d->dst_md}};
  return d;
}

const char* layout_name(Layout l) { return l == Layout::kNhwc ? "nhwc" : "plain"; }

}  // namespace

// ------------------------------------------------------------------ planning

void coalesce(BroadcastGeometry* g) {
  if (g->rank < 2) return;
  BroadcastGeometry out;
  out.rank = 1;
  out.dims[0] = g->dims[0];
  out.a_strides[0] = g->a_strides[0];
  out.b_strides[0] = g->b_strides[0];
  for (size_t d = 1; d < g->rank; ++d) {
    const size_t k = out.rank - 1;
    const int64_t n = g->dims[d];
    // Dimension k then d is one walk when each operand's stride along k is
    // its stride along d times d's extent (both 0 for a broadcast operand).
    const bool joins = out.a_strides[k] == g->a_strides[d] * n && out.b_strides[k] == g->b_strides[d] * n;
    if (joins || out.dims[k] == 1) {
      out.dims[k] *= n;
      out.a_strides[k] = g->a_strides[d];
      out.b_strides[k] = g->b_strides[d];
    } else if (n == 1) {
      continue;
    } else {
      out.dims[out.rank] = n;
      out.a_strides[out.rank] = g->a_strides[d];
      out.b_strides[out.rank] = g->b_strides[d];
      ++out.rank;
    }
  }
  *g = out;
}

Schedule::~Schedule() = default;

sdk::Status Schedule::build(const BlobGraph& graph, size_t threads, bool onednn, Kernels kernels,
                            std::unique_ptr<Schedule>* out) {
  std::unique_ptr<Schedule> s(new Schedule());
  s->kernels_ = kernels;
  s->threads_ = threads == 0 ? 1 : threads;
  // oneDNN sizes a primitive's work split by the OpenMP thread count when
  // the primitive is made, so make them with the count they will run with.
  ThreadCount scoped(s->threads_);
  Planner p(graph, s->slots_, s->steps_);
  const size_t node_count = graph.nodes.size();

  // Chains: every member but the last is skipped where it stands; the step
  // runs where the last member stands, when all its inputs exist.
  std::vector<bool>& in_chain = p.claimed;
  std::vector<int64_t> conv_chain_at(node_count, -1), mm_chain_at(node_count, -1);
  std::vector<int64_t> ln_chain_at(node_count, -1);
  std::vector<ConvChain> conv_chains;
  std::vector<MatMulChain> mm_chains;
  std::vector<LayerNormChain> ln_chains;
  for (size_t i = 0; onednn && i < node_count; ++i) {
    if (in_chain[i]) continue;
    ConvChain cc;
    MatMulChain mc;
    LayerNormChain lc;
    if (plan_layer_norm(p, i, &lc)) {
      for (size_t n : lc.nodes) in_chain[n] = true;
      ln_chain_at[*std::max_element(lc.nodes.begin(), lc.nodes.end())] =
          static_cast<int64_t>(ln_chains.size());
      ln_chains.push_back(std::move(lc));
    } else if (plan_conv_chain(p, i, &cc)) {
      for (size_t n : cc.nodes) in_chain[n] = true;
      conv_chain_at[cc.nodes.back()] = static_cast<int64_t>(conv_chains.size());
      conv_chains.push_back(std::move(cc));
    } else if ((graph.nodes[i].op == Op::kMatMul || graph.nodes[i].op == Op::kGemm) &&
               plan_matmul_chain(p, i, &mc)) {
      for (size_t n : mc.nodes) in_chain[n] = true;
      // The step stands where its last node (in graph order) stands.
      mm_chain_at[*std::max_element(mc.nodes.begin(), mc.nodes.end())] =
          static_cast<int64_t>(mm_chains.size());
      mm_chains.push_back(std::move(mc));
    }
  }

  auto emit_plain = [&](size_t i) {
    const BlobNode& node = graph.nodes[i];
    Step step;
    step.plan = plan_node(graph, i);
    step.nodes = {i};
    for (uint32_t t : node.inputs) step.ins.push_back(p.ensure(t, Layout::kPlain));
    step.plan.inputs = step.ins;
    step.out = p.define(node.outputs[0], Layout::kPlain);
    step.plan.output = step.out;
    s->steps_.push_back(std::move(step));
    p.finish(node.outputs[0]);
  };

  auto emit_node = [&](size_t i) {
    if (!onednn) return emit_plain(i);
    const BlobNode& node = graph.nodes[i];
    const uint32_t y = node.outputs[0];
    const bool y_sensitive = layout_sensitive(graph.tensors[y].shape);
    Step step;
    step.nodes = {i};
    if (is_unary(node.op) && p.preferred(node.inputs[0]) == Layout::kNhwc) {
      step.plan = plan_node(graph, i);
      step.ins = {p.ensure(node.inputs[0], Layout::kNhwc)};
      step.out = p.define(y, Layout::kNhwc);
    } else if (is_binary(node.op) && y_sensitive &&
               (p.preferred(node.inputs[0]) == Layout::kNhwc ||
                p.preferred(node.inputs[1]) == Layout::kNhwc)) {
      step.plan = plan_node(graph, i);
      step.ins = {p.ensure(node.inputs[0], p.preferred(node.inputs[0])),
                  p.ensure(node.inputs[1], p.preferred(node.inputs[1]))};
      step.out = p.define(y, Layout::kNhwc);
      step.plan.add = binary_geometry(s->slots_[step.ins[0]], s->slots_[step.ins[1]],
                                      s->slots_[step.out]);
    } else if (node.op == Op::kConcat && y_sensitive &&
               (node.axis == 1 || node.axis == -3) &&
               std::any_of(node.inputs.begin(), node.inputs.end(),
                           [&](uint32_t t) { return p.preferred(t) == Layout::kNhwc; })) {
      step.plan = plan_node(graph, i);
      const auto& ys = graph.tensors[y].shape;
      step.plan.outer = ys[0] * ys[2] * ys[3];
      step.plan.chunks.clear();
      for (uint32_t t : node.inputs) {
        step.ins.push_back(p.ensure(t, Layout::kNhwc));
        step.plan.chunks.push_back(graph.tensors[t].shape[1]);
      }
      step.out = p.define(y, Layout::kNhwc);
    } else if (node.op == Op::kGlobalAveragePool && graph.tensors[node.inputs[0]].shape.size() == 4 &&
               p.preferred(node.inputs[0]) == Layout::kNhwc) {
      step.kind = StepKind::kGlobalAverageNhwc;
      step.plan = plan_node(graph, i);
      step.ins = {p.ensure(node.inputs[0], Layout::kNhwc)};
      step.out = p.define(y, Layout::kPlain);  // [N, C, 1, 1]: one layout
    } else if ((node.op == Op::kMaxPool || node.op == Op::kAveragePool) &&
               graph.tensors[node.inputs[0]].shape.size() == 4) {
      std::shared_ptr<DnnlStep> d;
      // oneDNN pools NHWC with its vector kernels and NCHW with a scalar
      // loop: a plain input is reordered first.
      const Layout layout = Layout::kNhwc;
      const uint32_t x = p.ensure(node.inputs[0], layout);
      const size_t slots_before = s->slots_.size();
      const uint32_t out_slot = p.define(y, layout);
      try {
        d = make_pool(p, i, x, out_slot, layout == Layout::kNhwc ? Tag::nhwc : Tag::nchw);
      } catch (const dnnl::error&) {
        d = nullptr;
      }
      if (d == nullptr) {
        // Undo the output and run the plain kernel.
        if (s->slots_.size() > slots_before) {
          s->slots_.pop_back();
          p.nhwc_of[y] = kNone;
        }
        p.plain_ready[y] = false;
        return emit_plain(i);
      }
      step.kind = StepKind::kPool;
      step.ins = {x};
      step.out = out_slot;
      step.dnnl = std::move(d);
    } else if (node.op == Op::kTranspose) {
      const uint32_t x = p.ensure(node.inputs[0], Layout::kPlain);
      const uint32_t out_slot = p.define(y, Layout::kPlain);
      std::shared_ptr<DnnlStep> d;
      try {
        d = make_transpose(p, i, x, out_slot);
      } catch (const dnnl::error&) {
        d = nullptr;
      }
      if (d == nullptr) {
        p.plain_ready[y] = false;
        return emit_plain(i);
      }
      step.kind = StepKind::kReorder;
      step.ins = {x};
      step.out = out_slot;
      step.dnnl = std::move(d);
    } else {
      return emit_plain(i);
    }
    step.plan.inputs = step.ins;
    step.plan.output = step.out;
    s->steps_.push_back(std::move(step));
    p.finish(y);
  };

  for (size_t i = 0; i < node_count; ++i) {
    if (conv_chain_at[i] >= 0) {
      const ConvChain& c = conv_chains[static_cast<size_t>(conv_chain_at[i])];
      const BlobNode& conv = graph.nodes[c.conv];
      const size_t steps_before = s->steps_.size(), slots_before = s->slots_.size();
      const std::vector<uint32_t> nhwc_before = p.nhwc_of;
      const std::vector<bool> plain_before = p.plain_ready;
      Step step;
      step.kind = StepKind::kConv;
      step.nodes = c.nodes;
      const uint32_t x = p.ensure(conv.inputs[0], Layout::kNhwc);
      const uint32_t r = c.residual == kNone ? kNone : p.ensure(c.residual, Layout::kNhwc);
      const uint32_t y = p.define(c.output, Layout::kNhwc);
      try {
        step.dnnl = make_conv(p, c, x, y, r);
      } catch (const dnnl::error&) {
        step.dnnl = nullptr;
      }
      if (step.dnnl == nullptr) {
        // Roll back and run the chain's nodes one by one.
        s->steps_.resize(steps_before);
        s->slots_.resize(slots_before);
        p.nhwc_of = nhwc_before;
        p.plain_ready = plain_before;
        for (size_t n : c.nodes) emit_node(n);
        continue;
      }
      step.ins = {x};
      for (uint32_t t : conv.inputs) {
        if (t != conv.inputs[0]) step.ins.push_back(t);
      }
      if (c.bn >= 0) {
        for (size_t k = 1; k < 5; ++k) step.ins.push_back(graph.nodes[static_cast<size_t>(c.bn)].inputs[k]);
      }
      if (r != kNone) step.ins.push_back(r);
      step.out = y;
      s->steps_.push_back(std::move(step));
      p.finish(c.output);
      continue;
    }
    if (ln_chain_at[i] >= 0) {
      const LayerNormChain& c = ln_chains[static_cast<size_t>(ln_chain_at[i])];
      Step step;
      step.kind = StepKind::kLayerNorm;
      step.nodes = c.nodes;
      const auto& shape = graph.tensors[c.x].shape;
      step.n = shape.back();
      step.rows = 1;
      for (size_t d = 0; d + 1 < shape.size(); ++d) step.rows *= shape[d];
      step.epsilon = c.epsilon;
      step.ins = {p.ensure(c.x, Layout::kPlain)};
      step.has_gamma = c.gamma != kNone;
      step.has_beta = c.beta != kNone;
      if (step.has_gamma) step.ins.push_back(p.ensure(c.gamma, Layout::kPlain));
      if (step.has_beta) step.ins.push_back(p.ensure(c.beta, Layout::kPlain));
      step.out = p.define(c.output, Layout::kPlain);
      s->steps_.push_back(std::move(step));
      p.finish(c.output);
      continue;
    }
    if (mm_chain_at[i] >= 0) {
      const MatMulChain& c = mm_chains[static_cast<size_t>(mm_chain_at[i])];
      const BlobNode& mm = graph.nodes[c.node];
      Step step;
      step.kind = StepKind::kMatMul;
      step.nodes = c.nodes;
      const uint32_t a = p.ensure(mm.inputs[0], Layout::kPlain);
      const uint32_t b = p.ensure(mm.inputs[1], Layout::kPlain);
      const uint32_t y = p.define(c.output, Layout::kPlain);
      try {
        step.dnnl = make_matmul(p, c, a, b, y);
      } catch (const dnnl::error&) {
        step.dnnl = nullptr;
      }
      if (step.dnnl == nullptr) {
        for (size_t n : c.nodes) emit_node(n);
        continue;
      }
      step.ins = {a, b};
      if (c.bias != kNone) step.ins.push_back(c.bias);
      step.out = y;
      s->steps_.push_back(std::move(step));
      p.finish(c.output);
      continue;
    }
    if (in_chain[i]) continue;
    emit_node(i);
  }
  // Graph outputs a step never wrote in plain form (an input passed
  // straight through is already plain).
  for (uint32_t t : graph.outputs) p.finish(t);

  // Lifetimes: an internal slot lives from the step that writes it to the
  // last step that reads it; first fit in one arena.
  const size_t slot_count = s->slots_.size();
  std::vector<int64_t> first(slot_count, -1), last(slot_count, -1);
  for (size_t k = 0; k < s->steps_.size(); ++k) {
    const Step& st = s->steps_[k];
    if (first[st.out] < 0) first[st.out] = static_cast<int64_t>(k);
    last[st.out] = std::max(last[st.out], static_cast<int64_t>(k));
    for (uint32_t in : st.ins) last[in] = std::max(last[in], static_cast<int64_t>(k));
  }
  struct Live {
    uint64_t begin, end;
    uint32_t slot;
  };
  std::vector<Live> live;
  for (size_t k = 0; k < s->steps_.size(); ++k) {
    const uint32_t o = s->steps_[k].out;
    Slot& slot = s->slots_[o];
    if (!slot.external && slot.offset < 0 && first[o] == static_cast<int64_t>(k)) {
      const uint64_t size = (slot.bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
      std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) { return a.begin < b.begin; });
      uint64_t at = 0;
      for (const Live& l : live) {
        if (at + size <= l.begin) break;
        at = std::max(at, l.end);
      }
      slot.offset = static_cast<int64_t>(at);
      live.push_back({at, at + size, o});
      s->scratch_bytes_ = std::max(s->scratch_bytes_, at + size);
    }
    live.erase(std::remove_if(live.begin(), live.end(),
                              [&](const Live& l) { return last[l.slot] <= static_cast<int64_t>(k); }),
               live.end());
  }
  *out = std::move(s);
  return sdk::Status();
}

uint64_t Schedule::packed_bytes() const {
  uint64_t n = 0;
  for (const Step& st : steps_) {
    if (st.dnnl != nullptr && st.dnnl->packs) n += st.dnnl->wei_md.get_size();
  }
  return n;
}

std::string Schedule::describe() const {
  std::string out;
  for (const Step& st : steps_) {
    switch (st.kind) {
      case StepKind::kNode: out += "node"; break;
      case StepKind::kConv: out += "conv"; break;
      case StepKind::kMatMul: out += "matmul"; break;
      case StepKind::kPool: out += "pool"; break;
      case StepKind::kReorder: out += "reorder"; break;
      case StepKind::kGlobalAverageNhwc: out += "gap"; break;
      case StepKind::kLayerNorm: out += "layernorm"; break;
    }
    if (!st.nodes.empty()) {
      out += " nodes";
      for (size_t i = 0; i < st.nodes.size(); ++i) out += (i ? "," : " ") + std::to_string(st.nodes[i]);
    }
    out += std::string(" -> ") + layout_name(slots_[st.out].layout) + "\n";
  }
  return out;
}

// ------------------------------------------------------------------ ISA

namespace {

struct IsaName {
  dnnl::cpu_isa isa;
  const char* name;
};
constexpr IsaName kIsaNames[] = {
    {dnnl::cpu_isa::avx512_core_amx, "avx512_core_amx"},
    {dnnl::cpu_isa::avx512_core_bf16, "avx512_core_bf16"},
    {dnnl::cpu_isa::avx512_core_vnni, "avx512_core_vnni"},
    {dnnl::cpu_isa::avx512_core, "avx512_core"},
    {dnnl::cpu_isa::avx2_vnni, "avx2_vnni"},
    {dnnl::cpu_isa::avx2, "avx2"},
    {dnnl::cpu_isa::avx, "avx"},
    {dnnl::cpu_isa::sse41, "sse41"},
    {dnnl::cpu_isa::all, "all"},
};

}  // namespace

Kernels select_kernels(KernelIsa cap) {
  Kernels k;
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx512 && cap >= KernelIsa::kAvx512) {
    k.isa = KernelIsa::kAvx512;
    k.name = "avx512";
    k.run_node = isa_avx512::run_node;
    k.layer_norm = isa_avx512::layer_norm;
  } else if (avx2 && cap >= KernelIsa::kAvx2) {
    k.isa = KernelIsa::kAvx2;
    k.name = "avx2";
    k.run_node = isa_avx2::run_node;
    k.layer_norm = isa_avx2::layer_norm;
  }
  return k;
}

namespace {

// Marks the already loaded library that defines `symbol` NODELETE.
void pin_library_of(const void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return;
  if (void* h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) dlclose(h);
}

}  // namespace

void keep_runtime_resident() {
  pin_library_of(reinterpret_cast<const void*>(&dnnl_engine_create));
  pin_library_of(reinterpret_cast<const void*>(&omp_get_max_threads));
}

std::string onednn_isa() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  for (const IsaName& n : kIsaNames) {
    if (n.isa == isa) return n.name;
  }
  return "isa " + std::to_string(static_cast<int>(isa));
}

sdk::Status limit_isa(const std::string& name, KernelIsa* kernels) {
  const std::string want = name == "baseline" ? "sse41" : name;
  for (const IsaName& n : kIsaNames) {
    if (want != n.name) continue;
    *kernels = want == "all" || want.rfind("avx512", 0) == 0 ? KernelIsa::kAvx512
               : want.rfind("avx2", 0) == 0                  ? KernelIsa::kAvx2
                                                             : KernelIsa::kBaseline;
    if (dnnl::set_max_cpu_isa(n.isa) == dnnl::status::success) return sdk::Status();
    if (dnnl::get_effective_cpu_isa() == n.isa) return sdk::Status();
    return sdk::failed_precondition(
        "option cpu.isa=" + name + ": oneDNN in this process already runs at " + onednn_isa() +
        "; the instruction set can be chosen only before the first cpu-simd kernel is made "
        "(set cpu.isa on the first cpu-simd plugin of the process, or ONEDNN_MAX_CPU_ISA in "
        "its environment)");
  }
  return sdk::invalid_argument("option cpu.isa=\"" + name +
                               "\" is not one of avx512_core, avx2, avx, sse41, baseline, all");
}

// ------------------------------------------------------------------ running

void ScheduleArenaDeleter::operator()(ScheduleArena* a) const { delete a; }

ScheduleArenaPtr Schedule::make_arena() const {
  ScheduleArenaPtr a(new ScheduleArena());
  a->stream = dnnl::stream(cpu_engine());
  a->args.resize(steps_.size());
  a->c_args.resize(steps_.size());
  a->bound.resize(steps_.size());
  size_t scratch = 0;
  for (const Step& st : steps_) {
    if (st.dnnl != nullptr) scratch = std::max(scratch, st.dnnl->scratch_md.get_size());
  }
  if (scratch != 0) a->scratchpad.reset(new std::byte[scratch + 64]);
  std::byte* pad = a->scratchpad.get();
  if (pad != nullptr) pad += (64 - reinterpret_cast<uintptr_t>(pad) % 64) % 64;
  for (size_t k = 0; k < steps_.size(); ++k) {
    const Step& st = steps_[k];
    if (st.dnnl == nullptr) continue;
    const DnnlStep& d = *st.dnnl;
    auto& args = a->args[k];
    for (const DnnlStep::Arg& arg : d.args) {
      memory m(arg.md, cpu_engine(), nullptr);
      args.emplace(arg.arg, m);
      a->bound[k].emplace_back(m, arg.slot);
    }
    if (d.packs) {
      args.emplace(DNNL_ARG_WEIGHTS, d.packed);
      args.emplace(DNNL_ARG_BIAS, d.bias);
    }
    if (d.scratch_md.get_size() != 0) {
      args.emplace(DNNL_ARG_SCRATCHPAD, memory(d.scratch_md, cpu_engine(), pad));
    }
    for (const auto& [arg, mem] : args) a->c_args[k].push_back({arg, mem.get()});
  }
  return a;
}

sdk::Status Schedule::pack_weights(Step& step, float* const* slots) {
  DnnlStep& d = *step.dnnl;
  std::array<const float*, 6> from = {slots[d.wei_slot],
                                      d.bias_slot == kNone ? nullptr : slots[d.bias_slot]};
  for (size_t k = 0; k < 4; ++k) from[2 + k] = d.bn[k] == kNone ? nullptr : slots[d.bn[k]];
  std::lock_guard<std::mutex> lock(pack_mutex_);
  if (d.packed_once && from == d.packed_from) return sdk::Status();
  const int64_t rows = d.out_channels;
  std::vector<float> scale;
  std::vector<float> bias(static_cast<size_t>(rows), 0.0f);
  const float* b = from[1];
  if (b != nullptr) {
    const uint64_t count = slots_[d.bias_slot].bytes / sizeof(float);
    for (int64_t o = 0; o < rows; ++o) bias[o] = d.bias_scale * b[count == 1 ? 0 : o];
  }
  if (d.bn[0] != kNone) {
    const float *g = from[2], *beta = from[3], *mean = from[4], *var = from[5];
    scale.resize(static_cast<size_t>(rows));
    for (int64_t o = 0; o < rows; ++o) {
      scale[o] = g[o] / std::sqrt(var[o] + d.bn_epsilon);
      bias[o] = (bias[o] - mean[o]) * scale[o] + beta[o];
    }
  }
  std::memcpy(d.bias.get_data_handle(), bias.data(), bias.size() * sizeof(float));
  const float* w = from[0];
  std::vector<float> scaled;
  if (!scale.empty()) {
    const size_t count = slots_[d.wei_slot].bytes / sizeof(float);
    const size_t per_row = count / static_cast<size_t>(rows);
    scaled.assign(w, w + count);
    for (size_t o = 0; o < static_cast<size_t>(rows); ++o) {
      for (size_t j = 0; j < per_row; ++j) scaled[o * per_row + j] *= scale[o];
    }
    w = scaled.data();
  }
  memory user(d.user_wei_md, cpu_engine(), const_cast<float*>(w));
  dnnl::stream stream(cpu_engine());
  dnnl::reorder(user, d.packed).execute(stream, user, d.packed);
  stream.wait();
  d.packed_from = from;
  d.packed_once = true;
  return sdk::Status();
}

sdk::Status Schedule::run(ScheduleArena& arena, float* const* slots, ThreadPool& pool) {
  ThreadCount scoped(threads_);
  try {
    for (size_t k = 0; k < steps_.size(); ++k) {
      Step& st = steps_[k];
      switch (st.kind) {
        case StepKind::kNode:
          kernels_.run_node(st.plan, slots, pool);
          continue;
        case StepKind::kLayerNorm:
          kernels_.layer_norm(slots[st.ins[0]], st.has_gamma ? slots[st.ins[1]] : nullptr,
                              st.has_beta ? slots[st.ins[2]] : nullptr, slots[st.out], st.rows, st.n,
                              st.epsilon, pool);
          continue;
        case StepKind::kGlobalAverageNhwc: {
          const auto& x = slots_[st.ins[0]].shape;
          const int64_t n = x[0], c = x[1], hw = x[2] * x[3];
          const float* in = slots[st.ins[0]];
          float* y = slots[st.out];
          const float inv = 1.0f / static_cast<float>(hw);
          for (int64_t b = 0; b < n; ++b) {
            float* row = y + b * c;
            for (int64_t j = 0; j < c; ++j) row[j] = 0.0f;
            for (int64_t s = 0; s < hw; ++s) {
              const float* px = in + (b * hw + s) * c;
              for (int64_t j = 0; j < c; ++j) row[j] += px[j];
            }
            for (int64_t j = 0; j < c; ++j) row[j] *= inv;
          }
          continue;
        }
        default:
          break;
      }
      DnnlStep& d = *st.dnnl;
      if (d.packs) LOOM_SDK_RETURN_IF_ERROR(pack_weights(st, slots));
      for (auto& [mem, slot] : arena.bound[k]) {
        if (mem.get_data_handle() != slots[slot]) mem.set_data_handle(slots[slot]);
      }
      if (d.residual_slot != kNone && slots[d.residual_slot] != slots[st.out]) {
        std::memcpy(slots[st.out], slots[d.residual_slot], slots_[st.out].bytes);
      }
      const std::vector<dnnl_exec_arg_t>& c_args = arena.c_args[k];
      const dnnl_status_t status = dnnl_primitive_execute(
          d.prim.get(), arena.stream.get(), static_cast<int>(c_args.size()), c_args.data());
      if (status != dnnl_success) {
        return sdk::internal_error("cpu-simd: oneDNN failed while executing step " +
                                   std::to_string(k) + " (status " +
                                   std::to_string(static_cast<int>(status)) + ")");
      }
    }
    arena.stream.wait();
  } catch (const dnnl::error& e) {
    return sdk::internal_error(std::string("cpu-simd: oneDNN failed while executing: ") + e.what());
  }
  return sdk::Status();
}

}  // namespace loom::cpu_simd
