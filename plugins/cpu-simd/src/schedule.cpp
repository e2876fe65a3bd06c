#include "schedule.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "schedule_int8.hpp"
#include "schedule_int8_step.hpp"
#include "schedule_rnn.hpp"
#include "schedule_plan.hpp"

namespace loom::cpu_simd {

using namespace plan;

namespace {

constexpr uint64_t kArenaAlignment = 64;

}  // namespace

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

// ------------------------------------------------------------------ shared packs

class PackedWeights {
 public:
  // What a packed weight depends on: its source tensors, both layouts and
  // the folding constants.
  struct Key {
    std::array<const float*, 6> from{};
    memory::desc user_md, packed_md, bias_md;
    float bias_scale = 1, epsilon = 0;
    bool operator==(const Key& o) const {
      return from == o.from && user_md == o.user_md && packed_md == o.packed_md &&
             bias_md == o.bias_md && bias_scale == o.bias_scale && epsilon == o.epsilon;
    }
  };
  struct Entry {
    Key key;
    memory packed, bias;  // owned here; schedules point their own memory objects at them
  };

  std::mutex mutex;
  std::vector<Entry> entries;  // few (one per weight and layout): searched linearly
  size_t packs = 0, reuses = 0;
  Int8PackStore int8;  // the quantized steps' packs (shared_int8_pack)
};

std::shared_ptr<PackedWeights> make_packed_weights() { return std::make_shared<PackedWeights>(); }

void packed_weights_counts(const PackedWeights& store, size_t* out_packed, size_t* out_reused) {
  auto& s = const_cast<PackedWeights&>(store);
  std::scoped_lock lock(s.mutex, s.int8.mutex);
  *out_packed = s.packs + s.int8.packs;
  *out_reused = s.reuses + s.int8.reuses;
}

Schedule::~Schedule() = default;

sdk::Status Schedule::build(const BlobGraph& graph, size_t threads, bool onednn, Kernels kernels,
                            std::unique_ptr<Schedule>* out, std::shared_ptr<PackedWeights> shared) {
  std::unique_ptr<Schedule> s(new Schedule());
  s->shared_ = std::move(shared);
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

  // DequantizeLinear -> MaxPool or nearest Resize -> QuantizeLinear of one
  // scale and zero point: plan_quant_pool, where the QuantizeLinear stands.
  std::vector<int64_t> quant_pool_at(node_count, -1);
  std::vector<QuantPool> quant_pools;
  for (size_t i = 0; i < node_count; ++i) {
    QuantPool qp;
    if (!plan_quant_pool(p, i, &qp)) continue;
    in_chain[qp.dq] = in_chain[qp.pool] = in_chain[qp.q] = true;
    quant_pool_at[qp.q] = static_cast<int64_t>(quant_pools.size());
    quant_pools.push_back(qp);
  }

  // DequantizeLinear -> unary f32 operators -> QuantizeLinear: one table.
  std::vector<int64_t> quant_table_at(node_count, -1);
  std::vector<QuantTable> quant_tables;
  for (size_t i = 0; i < node_count; ++i) {
    QuantTable qt;
    if (!plan_quant_table(p, i, &qt)) continue;
    in_chain[qt.q] = true;
    if (!qt.dq_kept) in_chain[qt.dq] = true;
    for (size_t n : qt.middle) in_chain[n] = true;
    quant_table_at[qt.q] = static_cast<int64_t>(quant_tables.size());
    quant_tables.push_back(std::move(qt));
  }

  // Dequantized a, b -> Add / Mul -> QuantizeLinear: plan_quant_add, compose_quant_add.
  std::vector<int64_t> quant_add_at(node_count, -1);
  std::vector<QuantAdd> quant_adds;
  for (size_t i = 0; i < node_count; ++i) {
    QuantAdd qa;
    if (!plan_quant_add(p, i, &qa)) continue;
    if (compose_quant_add(p, quant_tables, &qa)) quant_table_at[quant_tables[static_cast<size_t>(qa.table)].q] = -1;
    in_chain[qa.add] = in_chain[qa.q] = true;
    if (!qa.dq_a_kept) in_chain[qa.dq_a] = true;
    if (!qa.dq_b_kept) in_chain[qa.dq_b] = true;
    quant_add_at[qa.q] = static_cast<int64_t>(quant_adds.size());
    quant_adds.push_back(qa);
  }

  skip_unread_dequantize(quant_tables, quant_adds, &p);

  // DequantizeLinear per input -> Concat -> QuantizeLinear: plan_quant_concat.
  std::vector<int64_t> quant_concat_at(node_count, -1);
  std::vector<QuantConcat> quant_concats;
  for (size_t i = 0; i < node_count; ++i) {
    QuantConcat qc;
    if (!plan_quant_concat(p, i, &qc)) continue;
    in_chain[qc.concat] = in_chain[qc.q] = true;
    for (const QuantTable& in : qc.inputs) in_chain[in.dq] = true;
    quant_concat_at[qc.q] = static_cast<int64_t>(quant_concats.size());
    quant_concats.push_back(std::move(qc));
  }

  // Quantized operators (format 6) and recurrent ones (format 9): one step
  // each of their own (schedule_int8.cpp, schedule_rnn.cpp), on plain
  // tensors, with or without `onednn` (int8 products are oneDNN's; an RNN
  // step uses it where it may). The first planning error is returned once
  // the plan is built.
  sdk::Status own_step_error;
  auto emit_own_step = [&](size_t i) {
    const BlobNode& node = graph.nodes[i];
    Step step;
    step.kind = is_quant(node.op) ? StepKind::kInt8 : StepKind::kRnn;
    step.nodes = {i};
    // Layouts: a QLinearConv of u8 x reads and writes channels-last (what
    // oneDNN's int8 convolutions take), so that a chain of them, and the
    // per-tensor QuantizeLinear / DequantizeLinear between them (element by
    // element, any layout), pass no tensor through a reorder; the f32 steps
    // after a DequantizeLinear then take the channels-last copy too.
    const uint32_t x = node.inputs[0], y = node.outputs[0];
    Layout x_layout = Layout::kPlain, y_layout = Layout::kPlain;
    if ((node.op == Op::kQLinearConv && graph.tensors[x].dtype == LOOM_DTYPE_U8 &&
         graph.tensors[x].shape.size() == 4) ||
        node.op == Op::kQLinearConvTranspose) {  // always u8 and 4-D, channels-last
      x_layout = y_layout = Layout::kNhwc;
    } else if ((node.op == Op::kQuantizeLinear || node.op == Op::kDequantizeLinear) &&
               quant::one_element(graph.tensors[node.inputs[1]].shape) && layout_sensitive(graph.tensors[x].shape) &&
               p.nhwc_of[x] != kNone) {
      x_layout = y_layout = Layout::kNhwc;
    }
    sdk::Status made =
        step.kind == StepKind::kInt8
            ? make_int8_step(graph, i, p.fixed, kernels.isa >= KernelIsa::kAvx2, x_layout == Layout::kNhwc,
                             &step.int8)
            : make_rnn_step(graph, i, onednn, kernels.isa != KernelIsa::kBaseline, p.fixed, &step.rnn);
    if (made.ok() && step.kind == StepKind::kInt8 && node.op == Op::kQLinearConv && !step.int8->io_nhwc) {
      x_layout = y_layout = Layout::kPlain;  // the step's own reorders
    }
    for (uint32_t t : node.inputs) step.ins.push_back(p.ensure(t, t == x ? x_layout : Layout::kPlain));
    step.out = p.define(y, y_layout);
    if (!made.ok() && own_step_error.ok()) own_step_error = std::move(made);
    s->steps_.push_back(std::move(step));
    p.finish(node.outputs[0]);
  };

  auto emit_plain = [&](size_t i) {
    const BlobNode& node = graph.nodes[i];
    if (is_quant(node.op) || is_recurrent(node.op)) return emit_own_step(i);
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
    if (!onednn || is_quant(graph.nodes[i].op) || is_recurrent(graph.nodes[i].op)) return emit_plain(i);
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
    } else if (node.op == Op::kMaxPool && p.preferred(node.inputs[0]) == Layout::kPlain &&
               is_plain_max_pool_2x2(plan_node(graph, i))) {
      // A plain input: the plain kernel's 2 x 2 loop beats reordering to
      // channels-last and back around oneDNN (BM_MaxPool).
      return emit_plain(i);
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
        const loom_dtype_t type = graph.tensors[node.inputs[0]].dtype;
        d = make_pool(p, i, x, out_slot, layout == Layout::kNhwc ? Tag::nhwc : Tag::nchw,
                      type == LOOM_DTYPE_U8 ? DType::u8 : type == LOOM_DTYPE_I8 ? DType::s8 : DType::f32);
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
      const Planner::Mark before = p.mark();
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
        p.rollback(before);
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
    if (quant_table_at[i] >= 0) {
      // Element by element: in the layout x has (channels-last when a
      // convolution wrote it).
      const QuantTable& qt = quant_tables[static_cast<size_t>(quant_table_at[i])];
      const uint32_t x = graph.nodes[qt.dq].inputs[0], y = graph.nodes[qt.q].outputs[0];
      const Layout layout =
          layout_sensitive(graph.tensors[x].shape) && p.nhwc_of[x] != kNone ? Layout::kNhwc : Layout::kPlain;
      Step step;
      step.kind = StepKind::kTable;
      if (!qt.dq_kept) step.nodes = {qt.dq};
      step.nodes.insert(step.nodes.end(), qt.middle.begin(), qt.middle.end());
      step.nodes.push_back(qt.q);
      step.ins = {p.ensure(x, layout)};
      step.out = p.define(y, layout);
      step.table = build_quant_table(p, qt, kernels);
      s->steps_.push_back(std::move(step));
      p.finish(y);
      continue;
    }
    if (quant_add_at[i] >= 0) {
      const QuantAdd& qa = quant_adds[static_cast<size_t>(quant_add_at[i])];
      s->steps_.push_back(quant_add_step(qa, &p, quant_tables, kernels));
      p.finish(graph.nodes[qa.q].outputs[0]);
      continue;
    }
    if (quant_concat_at[i] >= 0) {
      const QuantConcat& qc = quant_concats[static_cast<size_t>(quant_concat_at[i])];
      s->steps_.push_back(byte_concat_step(qc, &p, kernels));
      p.finish(graph.nodes[qc.q].outputs[0]);
      continue;
    }
    if (quant_pool_at[i] >= 0) {
      const QuantPool& qp = quant_pools[static_cast<size_t>(quant_pool_at[i])];
      const uint32_t x = graph.nodes[qp.dq].inputs[0], y = graph.nodes[qp.q].outputs[0];
      if (qp.resize) {
        s->steps_.push_back(byte_resize_step(qp, &p));
        p.finish(y);
        continue;
      }
      const Planner::Mark before = p.mark();
      Step step;
      step.kind = StepKind::kPool;
      step.nodes = {qp.dq, qp.pool, qp.q};
      const uint32_t xs = p.ensure(x, Layout::kNhwc);
      const uint32_t ys = p.define(y, Layout::kNhwc);
      try {
        step.dnnl = make_pool(p, qp.pool, xs, ys, Tag::nhwc,
                              graph.tensors[x].dtype == LOOM_DTYPE_U8 ? DType::u8 : DType::s8);
      } catch (const dnnl::error&) {
        step.dnnl = nullptr;
      }
      if (step.dnnl == nullptr) {
        // ceil_mode, or no oneDNN pooling: the three nodes one by one.
        p.rollback(before);
        for (size_t n : step.nodes) emit_node(n);
        continue;
      }
      step.ins = {xs};
      step.out = ys;
      s->steps_.push_back(std::move(step));
      p.finish(y);
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
      const uint32_t a = p.ensure(c.operand[0] != kNone ? c.operand[0] : mm.inputs[0], Layout::kPlain);
      const uint32_t b = p.ensure(c.operand[1] != kNone ? c.operand[1] : mm.inputs[1], Layout::kPlain);
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
  LOOM_SDK_RETURN_IF_ERROR(own_step_error);

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
  if (s->shared_ != nullptr) {
    // The packed bytes come from the store: no memory of the schedule's own.
    for (Step& st : s->steps_) {
      if (st.int8 != nullptr) st.int8->store = &s->shared_->int8;
      if (st.dnnl == nullptr || !st.dnnl->packs) continue;
      st.dnnl->packed = memory(st.dnnl->wei_md, cpu_engine(), nullptr);
      st.dnnl->bias = memory(st.dnnl->bias_md, cpu_engine(), nullptr);
    }
  }
  *out = std::move(s);
  return sdk::Status();
}

size_t Schedule::packed_count() const {
  size_t n = 0;
  for (const Step& st : steps_) n += st.dnnl != nullptr && st.dnnl->packs ? 1 : 0;
  return n;
}

uint64_t Schedule::packed_source_bytes() const {
  uint64_t n = 0;
  for (const Step& st : steps_) {
    if (st.dnnl == nullptr || !st.dnnl->packs) continue;
    const DnnlStep& d = *st.dnnl;
    n += slots_[d.wei_slot].bytes;
    if (d.bias_slot != kNone) n += slots_[d.bias_slot].bytes;
    for (uint32_t b : d.bn) n += b == kNone ? 0 : slots_[b].bytes;
  }
  return n;
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
      case StepKind::kInt8: out += "int8"; break;
      case StepKind::kTable: out += "table"; break;
      case StepKind::kQuantAdd: out += "qadd"; break;
      case StepKind::kRnn: out += st.rnn != nullptr && st.rnn->onednn != nullptr ? "rnn-onednn" : "rnn"; break;
    }
    if (!st.nodes.empty()) {
      out += " nodes";
      for (size_t i = 0; i < st.nodes.size(); ++i) out += (i ? "," : " ") + std::to_string(st.nodes[i]);
    }
    out += std::string(" -> ") + layout_name(slots_[st.out].layout) + "\n";
  }
  return out;
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
  std::unique_lock<std::mutex> shared_lock;
  PackedWeights::Key key;
  std::vector<PackedWeights::Entry> fresh;  // recorded once packed
  if (shared_ != nullptr) {
    key.from = from;
    key.user_md = d.user_wei_md;
    key.packed_md = d.wei_md;
    key.bias_md = d.bias_md;
    key.bias_scale = d.bias_scale;
    key.epsilon = d.bn_epsilon;
    shared_lock = std::unique_lock<std::mutex>(shared_->mutex);
    for (const PackedWeights::Entry& e : shared_->entries) {
      if (!(e.key == key)) continue;
      d.packed.set_data_handle(e.packed.get_data_handle());
      d.bias.set_data_handle(e.bias.get_data_handle());
      d.packed_from = from;
      d.packed_once = true;
      ++shared_->reuses;
      return sdk::Status();
    }
    // Packed under the store's lock, so that schedules of other bindings
    // wait for these bytes instead of packing them again.
    PackedWeights::Entry e{key, memory(d.wei_md, cpu_engine()), memory(d.bias_md, cpu_engine())};
    d.packed.set_data_handle(e.packed.get_data_handle());
    d.bias.set_data_handle(e.bias.get_data_handle());
    fresh.push_back(std::move(e));
  }
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
  if (!fresh.empty()) {
    shared_->entries.push_back(std::move(fresh.front()));
    ++shared_->packs;
  }
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
        case StepKind::kInt8: {
          std::vector<const void*> ins(st.ins.size());
          for (size_t j = 0; j < ins.size(); ++j) ins[j] = slots[st.ins[j]];
          LOOM_SDK_RETURN_IF_ERROR(run_int8_step(*st.int8, ins, slots[st.out], pool));
          continue;
        }
        case StepKind::kTable: {
          if (st.plan.op == Op::kConcat) {
            run_byte_concat(st, slots, kernels_.lookup_bytes, pool);
            continue;
          }
          // One lookup per element, split among the threads.
          struct Lookup {
            const uint8_t* x;
            uint8_t* y;
            const uint8_t* table;
            void (*look)(const uint8_t*, uint8_t*, size_t, const uint8_t*);
          } lookup{reinterpret_cast<const uint8_t*>(slots[st.ins[0]]), reinterpret_cast<uint8_t*>(slots[st.out]),
                   st.table.data(), kernels_.lookup_bytes};
          pool.parallel_for(
              static_cast<size_t>(slots_[st.out].bytes), size_t{1} << 15,
              [](void* c, size_t begin, size_t end) {
                const Lookup& l = *static_cast<const Lookup*>(c);
                l.look(l.x + begin, l.y + begin, end - begin, l.table);
              },
              &lookup);
          continue;
        }
        case StepKind::kQuantAdd: {
          struct Add {
            const void *a, *b;
            void* y;
            const Step* st;
            decltype(kernels_.quant_add) run;
          } add{slots[st.ins[0]], slots[st.ins[1]], slots[st.out], &st, kernels_.quant_add};
          pool.parallel_for(
              static_cast<size_t>(slots_[st.out].bytes), size_t{1} << 14,
              [](void* c, size_t begin, size_t end) {
                const Add& l = *static_cast<const Add*>(c);
                l.run(l.a, l.b, l.y, l.st->plan.add, static_cast<int64_t>(begin), static_cast<int64_t>(end),
                      l.st->quant_add);
              },
              &add);
          continue;
        }
        case StepKind::kRnn: {
          std::vector<const void*> ins(st.ins.size());
          for (size_t j = 0; j < ins.size(); ++j) ins[j] = slots[st.ins[j]];
          LOOM_SDK_RETURN_IF_ERROR(run_rnn_step(*st.rnn, ins, slots[st.out]));
          continue;
        }
        case StepKind::kLayerNorm:
          kernels_.layer_norm(slots[st.ins[0]], st.has_gamma ? slots[st.ins[1]] : nullptr,
                              st.has_beta ? slots[st.ins[2]] : nullptr, slots[st.out], st.rows, st.n,
                              st.epsilon, pool);
          continue;
        case StepKind::kGlobalAverageNhwc: {
          const auto& x = slots_[st.ins[0]].shape;
          kernels_.global_average_nhwc(slots[st.ins[0]], slots[st.out], x[0], x[1], x[2] * x[3]);
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

