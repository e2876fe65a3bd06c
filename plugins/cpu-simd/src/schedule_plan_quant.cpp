// The schedule's matchers for chains of quantized values that run on the
// 8-bit values themselves (QuantPool, QuantTable, QuantAdd in
// schedule_plan.hpp), and the table a QuantTable looks its bytes up in;
// Schedule::build (schedule.cpp) and the compile notes call these.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "schedule_plan.hpp"

namespace loom::cpu_simd::plan {

namespace {

// A per-tensor quantization parameter that is a blob constant: its f32
// value or its integer (8-bit) value; absent zero point: 0.
bool constant_scale(const BlobGraph& g, uint32_t t, float* out) {
  const BlobTensor& bt = g.tensors[t];
  if (!bt.constant || bt.dtype != LOOM_DTYPE_F32 || bt.data.size() != 1) return false;
  *out = bt.data[0];
  return true;
}

bool constant_zero(const BlobGraph& g, const BlobNode& n, loom_dtype_t type, int64_t* out) {
  if (n.inputs.size() < 3) {
    *out = 0;
    return true;
  }
  const BlobTensor& bt = g.tensors[n.inputs[2]];
  if (!bt.constant || bt.dtype != type || bt.bytes.size() != 1) return false;
  *out = type == LOOM_DTYPE_U8 ? int64_t{bt.bytes[0]} : int64_t{static_cast<int8_t>(bt.bytes[0])};
  return true;
}

}  // namespace

bool plan_quant_pool(const Planner& p, size_t i, QuantPool* out) {
  const BlobGraph& g = p.g;
  const BlobNode& dq = g.nodes[i];
  if (dq.op != Op::kDequantizeLinear || p.claimed[i]) return false;
  const uint32_t x = dq.inputs[0];
  const loom_dtype_t type = g.tensors[x].dtype;
  if (type != LOOM_DTYPE_U8 && type != LOOM_DTYPE_I8) return false;
  const int64_t pool = p.sole_reader(dq.outputs[0]);
  if (pool < 0) return false;
  const BlobNode& mp = g.nodes[static_cast<size_t>(pool)];
  const bool nearest = mp.op == Op::kResize && !mp.ints.empty() && mp.ints[0] == 0 && mp.inputs.size() == 1;
  if ((mp.op != Op::kMaxPool || g.tensors[x].shape.size() != 4) && !nearest) return false;
  if (mp.outputs.size() != 1 || mp.inputs[0] != dq.outputs[0]) return false;
  const int64_t q = p.sole_reader(mp.outputs[0]);
  if (q < 0) return false;
  const BlobNode& qn = g.nodes[static_cast<size_t>(q)];
  if (qn.op != Op::kQuantizeLinear || qn.inputs[0] != mp.outputs[0] || g.tensors[qn.outputs[0]].dtype != type) {
    return false;
  }
  float s_dq = 0, s_q = 0;
  int64_t z_dq = 0, z_q = 0;
  if (!constant_scale(g, dq.inputs[1], &s_dq) || !constant_scale(g, qn.inputs[1], &s_q) ||
      !constant_zero(g, dq, type, &z_dq) || !constant_zero(g, qn, type, &z_q)) {
    return false;
  }
  // A scale that is not positive and finite stays with the steps that
  // report it.
  if (std::memcmp(&s_dq, &s_q, sizeof s_dq) != 0 || z_dq != z_q || !(s_dq > 0.0f) || !std::isfinite(s_dq)) {
    return false;
  }
  *out = {i, static_cast<size_t>(pool), static_cast<size_t>(q), nearest};
  return true;
}

namespace {

bool usable_scale(float s) { return s > 0.0f && std::isfinite(s); }

}  // namespace

bool plan_quant_table(const Planner& p, size_t i, QuantTable* out) {
  const BlobGraph& g = p.g;
  const BlobNode& dq = g.nodes[i];
  if (dq.op != Op::kDequantizeLinear || p.claimed[i]) return false;
  const loom_dtype_t x_type = g.tensors[dq.inputs[0]].dtype;
  if (x_type != LOOM_DTYPE_U8 && x_type != LOOM_DTYPE_I8) return false;
  QuantTable t;
  t.dq = i;
  int64_t z = 0;
  if (!constant_scale(g, dq.inputs[1], &t.dq_scale) || !constant_zero(g, dq, x_type, &z) ||
      !usable_scale(t.dq_scale)) {
    return false;
  }
  t.dq_zero = static_cast<int32_t>(z);
  const uint32_t dq_out = dq.outputs[0];
  // Each unclaimed reader of the DequantizeLinear's output may start the
  // chain (the first that completes one does); with other readers the
  // DequantizeLinear stays.
  if (p.is_output[dq_out] || p.readers[dq_out].empty()) return false;
  for (size_t first : p.readers[dq_out]) {
    if (p.claimed[first]) continue;
    QuantTable c = t;
    c.dq_kept = p.readers[dq_out].size() > 1;
    if (table_chain(p, dq_out, first, &c)) {
      *out = std::move(c);
      return true;
    }
  }
  return false;
}

namespace {

// A one-element f32 constant: its value.
bool scalar_constant(const BlobGraph& g, uint32_t t, float* out) {
  const BlobTensor& bt = g.tensors[t];
  if (!bt.constant || bt.dtype != LOOM_DTYPE_F32 || bt.data.size() != 1) return false;
  *out = bt.data[0];
  return true;
}

}  // namespace

// The table operator `n` reading `cur` (see QuantTable): the operand
// position of `cur` (0 or 1), or -1 when `n` cannot be one.
int table_operand(const BlobGraph& g, const BlobNode& n, uint32_t cur) {
  if (n.outputs.size() != 1 || g.tensors[n.outputs[0]].dtype != LOOM_DTYPE_F32) return -1;
  if (is_unary(n.op)) return n.inputs.size() == 1 && n.inputs[0] == cur ? 0 : -1;
  const bool scalar_op = n.op == Op::kAdd || n.op == Op::kSub || n.op == Op::kMul || n.op == Op::kDiv ||
                         n.op == Op::kMax || n.op == Op::kMin;
  if (!scalar_op || n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return -1;
  const int at = n.inputs[0] == cur ? 0 : n.inputs[1] == cur ? 1 : -1;
  float c = 0;
  if (at < 0 || !scalar_constant(g, n.inputs[static_cast<size_t>(1 - at)], &c)) return -1;
  // The constant broadcasts without changing the shape.
  return g.tensors[n.outputs[0]].shape == g.tensors[cur].shape ? at : -1;
}

bool table_chain(const Planner& p, uint32_t cur, size_t first, QuantTable* out) {
  const BlobGraph& g = p.g;
  QuantTable& t = *out;
  int64_t z = 0;
  for (int64_t r = static_cast<int64_t>(first);; r = p.sole_reader(cur)) {
    if (r < 0) return false;
    const BlobNode& n = g.nodes[static_cast<size_t>(r)];
    if (n.op == Op::kQuantizeLinear) {
      if (n.inputs.empty() || n.inputs[0] != cur || n.outputs.size() != 1) return false;
      const loom_dtype_t y_type = g.tensors[n.outputs[0]].dtype;
      if ((y_type != LOOM_DTYPE_U8 && y_type != LOOM_DTYPE_I8) || !constant_scale(g, n.inputs[1], &t.q_scale) ||
          !constant_zero(g, n, y_type, &z) || !usable_scale(t.q_scale)) {
        return false;
      }
      t.q_zero = static_cast<int32_t>(z);
      t.q = static_cast<size_t>(r);
      return true;
    }
    if (table_operand(g, n, cur) < 0 || t.middle.size() == 4) return false;
    t.middle.push_back(static_cast<size_t>(r));
    cur = n.outputs[0];
  }
}

std::vector<uint8_t> build_quant_table(const Planner& p, const QuantTable& t, const Kernels& kernels) {
  const bool x_unsigned = p.g.tensors[p.g.nodes[t.dq].inputs[0]].dtype == LOOM_DTYPE_U8;
  const bool y_unsigned = p.g.tensors[p.g.nodes[t.q].outputs[0]].dtype == LOOM_DTYPE_U8;
  std::vector<float> a(256), b(256);
  for (int v = 0; v < 256; ++v) {
    const int32_t x = x_unsigned ? v : static_cast<int8_t>(static_cast<uint8_t>(v));
    a[static_cast<size_t>(v)] = static_cast<float>(x - t.dq_zero) * t.dq_scale;
  }
  ThreadPool one(1);
  uint32_t cur = p.g.nodes[t.dq].outputs[0];
  for (size_t n : t.middle) {
    const BlobNode& node = p.g.nodes[n];
    NodePlan plan = plan_node(p.g, n);
    plan.count = 256;
    float c = 0;
    const int at = table_operand(p.g, node, cur);
    if (node.inputs.size() == 2) {
      // The binary kernel over the 256 values and the constant, in the
      // node's operand order (tensors: values, constant, result).
      c = p.g.tensors[node.inputs[static_cast<size_t>(1 - at)]].data[0];
      plan.inputs = at == 0 ? std::vector<uint32_t>{0, 1} : std::vector<uint32_t>{1, 0};
      plan.input_count = 2;
      plan.output = 2;
      plan.add = BroadcastGeometry{};
      plan.add.rank = 1;
      plan.add.dims[0] = 256;
      plan.add.a_strides[0] = at == 0 ? 1 : 0;
      plan.add.b_strides[0] = at == 0 ? 0 : 1;
      float* const tensors[3] = {a.data(), &c, b.data()};
      kernels.run_node(plan, tensors, one);
    } else {
      plan.inputs = {0};
      plan.input_count = 1;
      plan.output = 1;
      float* const tensors[2] = {a.data(), b.data()};
      kernels.run_node(plan, tensors, one);
    }
    a.swap(b);
    cur = node.outputs[0];
  }
  const float lo = y_unsigned ? 0.0f : -128.0f, hi = y_unsigned ? 255.0f : 127.0f;
  std::vector<uint8_t> table(256);
  for (size_t v = 0; v < 256; ++v) {
    // QuantizeLinear as quantize_loop: the quotient rounded half to even,
    // plus the zero point, saturated; NaN to 0.
    float q = std::nearbyint(a[v] / t.q_scale) + static_cast<float>(t.q_zero);
    q = std::min(std::max(q, lo), hi);
    const int32_t y = std::isnan(q) ? 0 : static_cast<int32_t>(q);
    table[v] = static_cast<uint8_t>(y);
  }
  return table;
}

namespace {

// The node writing tensor `t`, or -1 (a graph input or constant).
int64_t producer_of(const BlobGraph& g, uint32_t t) {
  for (size_t j = 0; j < g.nodes.size(); ++j) {
    for (uint32_t o : g.nodes[j].outputs) {
      if (o == t) return static_cast<int64_t>(j);
    }
  }
  return -1;
}

bool is_8bit(loom_dtype_t t) { return t == LOOM_DTYPE_U8 || t == LOOM_DTYPE_I8; }

}  // namespace

bool plan_quant_add(const Planner& p, size_t i, QuantAdd* out) {
  const BlobGraph& g = p.g;
  const BlobNode& add = g.nodes[i];
  if ((add.op != Op::kAdd && add.op != Op::kMul) || p.claimed[i] || add.inputs.size() != 2 ||
      add.outputs.size() != 1 || add.inputs[0] == add.inputs[1]) {
    return false;
  }
  const BlobTensor& sum = g.tensors[add.outputs[0]];
  if (sum.dtype != LOOM_DTYPE_F32) return false;
  QuantAdd qa;
  qa.add = i;
  qa.params.multiply = add.op == Op::kMul;
  // Either operand may broadcast (the gate of a squeeze-and-excitation
  // block); the output is the operator's.
  const std::vector<int64_t>& as = g.tensors[add.inputs[0]].shape;
  const std::vector<int64_t>& bs = g.tensors[add.inputs[1]].shape;
  std::vector<int64_t> out_shape;
  if (!broadcast_shapes(as, bs, &out_shape) || out_shape != sum.shape || sum.shape.size() > kMaxRank) return false;
  // The operand constant along the output's last dimension of extent
  // above 1 is ONNX Runtime's scalar of each run (finish_quant_add).
  for (size_t d = sum.shape.size(); d-- > 0;) {
    if (sum.shape[d] == 1) continue;
    auto extent = [&](const std::vector<int64_t>& s) {
      const size_t pad = sum.shape.size() - s.size();
      return d < pad ? int64_t{1} : s[d - pad];
    };
    qa.params.swap = extent(as) == 1 && extent(bs) != 1;
    break;
  }
  for (size_t k = 0; k < 2; ++k) {
    const uint32_t t = add.inputs[k];
    (k == 0 ? qa.dq_a_kept : qa.dq_b_kept) = p.sole_reader(t) != static_cast<int64_t>(i);
    const int64_t d = producer_of(g, t);
    if (d < 0 || p.claimed[static_cast<size_t>(d)]) return false;
    const BlobNode& dq = g.nodes[static_cast<size_t>(d)];
    const loom_dtype_t type = g.tensors[dq.inputs[0]].dtype;
    float scale = 0;
    int64_t zero = 0;
    if (dq.op != Op::kDequantizeLinear || !is_8bit(type) || !constant_scale(g, dq.inputs[1], &scale) ||
        !usable_scale(scale) || !constant_zero(g, dq, type, &zero)) {
      return false;
    }
    (k == 0 ? qa.dq_a : qa.dq_b) = static_cast<size_t>(d);
    (k == 0 ? qa.params.a_scale : qa.params.b_scale) = scale;
    (k == 0 ? qa.params.a_zero : qa.params.b_zero) = static_cast<int32_t>(zero);
    (k == 0 ? qa.params.a_unsigned : qa.params.b_unsigned) = type == LOOM_DTYPE_U8;
  }
  const int64_t q = p.sole_reader(add.outputs[0]);
  if (q < 0) return false;
  const BlobNode& qn = g.nodes[static_cast<size_t>(q)];
  if (qn.op != Op::kQuantizeLinear || qn.inputs[0] != add.outputs[0] || qn.outputs.size() != 1) return false;
  const loom_dtype_t y_type = g.tensors[qn.outputs[0]].dtype;
  int64_t zero = 0;
  if (!is_8bit(y_type) || !constant_scale(g, qn.inputs[1], &qa.params.y_scale) ||
      !usable_scale(qa.params.y_scale) || !constant_zero(g, qn, y_type, &zero)) {
    return false;
  }
  qa.params.y_zero = static_cast<int32_t>(zero);
  qa.params.y_unsigned = y_type == LOOM_DTYPE_U8;
  qa.q = static_cast<size_t>(q);
  finish_quant_add(&qa.params);
  *out = qa;
  return true;
}

void skip_unread_dequantize(const std::vector<QuantTable>& tables, const std::vector<QuantAdd>& adds, Planner* p) {
  std::vector<size_t> byte_readers(p->g.nodes.size(), 0);
  for (const QuantTable& qt : tables) byte_readers[qt.dq] += qt.dq_kept ? 1 : 0;
  for (const QuantAdd& qa : adds) {
    byte_readers[qa.dq_a] += qa.dq_a_kept ? 1 : 0;
    byte_readers[qa.dq_b] += qa.dq_b_kept ? 1 : 0;
  }
  for (size_t d = 0; d < byte_readers.size(); ++d) {
    if (p->claimed[d] || byte_readers[d] == 0) continue;
    const uint32_t t = p->g.nodes[d].outputs[0];
    if (!p->is_output[t] && p->readers[t].size() == byte_readers[d]) p->claimed[d] = true;
  }
}

Step byte_resize_step(const QuantPool& qp, Planner* p) {
  const BlobGraph& g = p->g;
  Step step;
  step.plan = plan_node(g, qp.pool);
  step.plan.elem = 1;
  step.nodes = {qp.dq, qp.pool, qp.q};
  step.ins = {p->ensure(g.nodes[qp.dq].inputs[0], Layout::kPlain)};
  step.plan.inputs = step.ins;
  step.out = p->define(g.nodes[qp.q].outputs[0], Layout::kPlain);
  step.plan.output = step.out;
  return step;
}

bool compose_quant_add(const Planner& p, const std::vector<QuantTable>& tables, QuantAdd* qa) {
  const BlobGraph& g = p.g;
  const uint32_t a = g.nodes[qa->dq_a].inputs[0], b = g.nodes[qa->dq_b].inputs[0];
  const auto& ys = g.tensors[g.nodes[qa->q].outputs[0]].shape;
  if (g.tensors[a].shape != ys || g.tensors[b].shape != ys) return false;
  for (size_t k = 0; k < tables.size(); ++k) {
    const QuantTable& t = tables[k];
    const uint32_t from = g.nodes[t.dq].inputs[0], to = g.nodes[t.q].outputs[0];
    for (const bool gives_b : {true, false}) {
      const uint32_t x = gives_b ? a : b, made = gives_b ? b : a;
      const size_t dq = gives_b ? qa->dq_b : qa->dq_a;
      const bool kept = gives_b ? qa->dq_b_kept : qa->dq_a_kept;
      // The table's output read by the qadd's DequantizeLinear alone, which
      // the qadd alone reads.
      if (from != x || to != made || kept || p.sole_reader(made) != static_cast<int64_t>(dq)) continue;
      qa->table = static_cast<int64_t>(k);
      qa->table_gives_b = gives_b;
      return true;
    }
  }
  return false;
}

Step quant_add_step(const QuantAdd& qa, Planner* p, const std::vector<QuantTable>& tables, const Kernels& kernels) {
  // Element by element: channels-last when a convolution wrote a or b so
  // (the other reordered to it unless it broadcasts over the pixels).
  const BlobGraph& g = p->g;
  const uint32_t a = g.nodes[qa.dq_a].inputs[0], b = g.nodes[qa.dq_b].inputs[0];
  const uint32_t y = g.nodes[qa.q].outputs[0];
  if (qa.table >= 0) {
    const QuantTable& t = tables[static_cast<size_t>(qa.table)];
    const uint32_t x = qa.table_gives_b ? a : b;
    const Layout layout =
        layout_sensitive(g.tensors[x].shape) && p->nhwc_of[x] != kNone ? Layout::kNhwc : Layout::kPlain;
    Step step;
    step.kind = StepKind::kTable;
    step.nodes = {qa.add, qa.q, qa.table_gives_b ? qa.dq_b : qa.dq_a, t.q};
    step.nodes.insert(step.nodes.end(), t.middle.begin(), t.middle.end());
    if (!t.dq_kept) step.nodes.push_back(t.dq);
    if (!(qa.table_gives_b ? qa.dq_a_kept : qa.dq_b_kept)) step.nodes.push_back(qa.table_gives_b ? qa.dq_a : qa.dq_b);
    std::sort(step.nodes.begin(), step.nodes.end());
    step.nodes.erase(std::unique(step.nodes.begin(), step.nodes.end()), step.nodes.end());
    // Byte v of x and the table's byte for v, through the qadd's own kernel.
    std::vector<uint8_t> values(256), made = build_quant_table(*p, t, kernels), out(256);
    for (size_t v = 0; v < 256; ++v) values[v] = static_cast<uint8_t>(v);
    BroadcastGeometry line;
    line.rank = 1;
    line.dims[0] = 256;
    line.a_strides[0] = line.b_strides[0] = 1;
    const uint8_t* ops[2] = {values.data(), made.data()};
    if (!qa.table_gives_b) std::swap(ops[0], ops[1]);
    kernels.quant_add(ops[0], ops[1], out.data(), line, 0, 256, qa.params);
    step.table = std::move(out);
    step.ins = {p->ensure(x, layout)};
    step.out = p->define(y, layout);
    return step;
  }
  const Layout layout = layout_sensitive(g.tensors[y].shape) && (p->nhwc_of[a] != kNone || p->nhwc_of[b] != kNone)
                            ? Layout::kNhwc
                            : Layout::kPlain;
  auto in_layout = [&](uint32_t t) { return layout_sensitive(g.tensors[t].shape) ? layout : Layout::kPlain; };
  Step step;
  step.kind = StepKind::kQuantAdd;
  step.nodes = {qa.add, qa.q};
  if (!qa.dq_a_kept) step.nodes.push_back(qa.dq_a);
  if (!qa.dq_b_kept) step.nodes.push_back(qa.dq_b);
  std::sort(step.nodes.begin(), step.nodes.end());
  step.ins = {p->ensure(a, in_layout(a)), p->ensure(b, in_layout(b))};
  step.out = p->define(y, layout);
  step.quant_add = qa.params;
  step.plan.add = binary_geometry(p->slots[step.ins[0]], p->slots[step.ins[1]], p->slots[step.out]);
  return step;
}

bool plan_quant_concat(const Planner& p, size_t i, QuantConcat* out) {
  const BlobGraph& g = p.g;
  const BlobNode& c = g.nodes[i];
  if (c.op != Op::kConcat || p.claimed[i] || c.inputs.empty() || c.outputs.size() != 1) return false;
  const uint32_t f = c.outputs[0];
  const int64_t q = p.sole_reader(f);
  if (q < 0 || g.tensors[f].dtype != LOOM_DTYPE_F32) return false;
  const BlobNode& qn = g.nodes[static_cast<size_t>(q)];
  const loom_dtype_t y_type = qn.outputs.empty() ? LOOM_DTYPE_F32 : g.tensors[qn.outputs[0]].dtype;
  QuantTable out_part;
  int64_t zero = 0;
  if (qn.op != Op::kQuantizeLinear || qn.inputs[0] != f || qn.outputs.size() != 1 || !is_8bit(y_type) ||
      !constant_scale(g, qn.inputs[1], &out_part.q_scale) || !usable_scale(out_part.q_scale) ||
      !constant_zero(g, qn, y_type, &zero)) {
    return false;
  }
  QuantConcat qc;
  qc.concat = i;
  qc.q = static_cast<size_t>(q);
  for (uint32_t t : c.inputs) {
    // Each input a DequantizeLinear's output that the Concat alone reads.
    const int64_t d = producer_of(g, t);
    if (d < 0 || p.claimed[static_cast<size_t>(d)] || p.sole_reader(t) != static_cast<int64_t>(i) ||
        std::count(c.inputs.begin(), c.inputs.end(), t) != 1) {
      return false;
    }
    const BlobNode& dq = g.nodes[static_cast<size_t>(d)];
    QuantTable in = out_part;
    in.q = qc.q;
    in.q_zero = static_cast<int32_t>(zero);
    in.dq = static_cast<size_t>(d);
    const loom_dtype_t x_type = g.tensors[dq.inputs[0]].dtype;
    int64_t x_zero = 0;
    if (dq.op != Op::kDequantizeLinear || !is_8bit(x_type) || !constant_scale(g, dq.inputs[1], &in.dq_scale) ||
        !usable_scale(in.dq_scale) || !constant_zero(g, dq, x_type, &x_zero)) {
      return false;
    }
    in.dq_zero = static_cast<int32_t>(x_zero);
    qc.inputs.push_back(in);
  }
  *out = std::move(qc);
  return true;
}

Step byte_concat_step(const QuantConcat& qc, Planner* p, const Kernels& kernels) {
  const BlobGraph& g = p->g;
  const uint32_t y = g.nodes[qc.q].outputs[0];
  const BlobNode& c = g.nodes[qc.concat];
  const auto& ys = g.tensors[y].shape;
  const int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(ys.size()) : c.axis;
  // Channels-last when an input is and the output's channels are the axis
  // (as the f32 Concat step does); plain otherwise.
  const bool nhwc = layout_sensitive(ys) && axis == 1 &&
                    std::any_of(qc.inputs.begin(), qc.inputs.end(), [&](const QuantTable& in) {
                      const uint32_t x = g.nodes[in.dq].inputs[0];
                      return layout_sensitive(g.tensors[x].shape) && p->nhwc_of[x] != kNone;
                    });
  const Layout layout = nhwc ? Layout::kNhwc : Layout::kPlain;
  Step step;
  step.kind = StepKind::kTable;
  step.plan = plan_node(g, qc.concat);
  step.plan.elem = 1;
  if (nhwc) {
    step.plan.outer = ys[0] * ys[2] * ys[3];
    step.plan.chunks.clear();
    for (uint32_t t : c.inputs) step.plan.chunks.push_back(g.tensors[t].shape[1]);
  }
  step.nodes = {qc.concat, qc.q};
  for (const QuantTable& in : qc.inputs) {
    step.nodes.push_back(in.dq);
    step.ins.push_back(p->ensure(g.nodes[in.dq].inputs[0], layout));
    // An input of the output's type, scale and zero point is copied (an
    // empty table); the others go through theirs.
    const bool same = g.tensors[g.nodes[in.dq].inputs[0]].dtype == g.tensors[y].dtype &&
                      std::memcmp(&in.dq_scale, &in.q_scale, sizeof(float)) == 0 && in.dq_zero == in.q_zero;
    std::vector<uint8_t> table = same ? std::vector<uint8_t>() : build_quant_table(*p, in, kernels);
    step.concat_tables.push_back(std::move(table));
  }
  std::sort(step.nodes.begin(), step.nodes.end());
  step.plan.inputs = step.ins;
  step.out = p->define(y, layout);
  step.plan.output = step.out;
  return step;
}

void run_byte_concat(const Step& st, float* const* slots,
                     void (*look)(const uint8_t*, uint8_t*, size_t, const uint8_t*), ThreadPool& pool) {
  size_t total = 0;
  for (int64_t chunk : st.plan.chunks) total += static_cast<size_t>(chunk);
  auto run = [&](size_t begin, size_t end) {
    for (size_t o = begin; o < end; ++o) {
      uint8_t* y = reinterpret_cast<uint8_t*>(slots[st.out]) + o * total;
      for (size_t k = 0; k < st.ins.size(); ++k) {
        const size_t chunk = static_cast<size_t>(st.plan.chunks[k]);
        const uint8_t* x = reinterpret_cast<const uint8_t*>(slots[st.ins[k]]) + o * chunk;
        const std::vector<uint8_t>& table = st.concat_tables[k];
        if (chunk == 0) continue;
        if (table.empty()) {
          std::memcpy(y, x, chunk);
        } else {
          look(x, y, chunk, table.data());
        }
        y += chunk;
      }
    }
  };
  // Rows of at least 16 KiB per thread.
  pool.parallel_for(static_cast<size_t>(st.plan.outer), std::max<size_t>(1, (size_t{1} << 14) / std::max<size_t>(total, 1)),
                    run);
}

}  // namespace loom::cpu_simd::plan

namespace loom::cpu_simd {

// The constants of ONNX Runtime's QLinearAdd and QLinearMul kernels, each
// rounded to f32 where theirs is, with one fused multiply-add where theirs
// has one (the scalar zero-point term); std::fma rounds once on every
// machine.
void finish_quant_add(QuantAddParams* q) {
  q->ratio = q->a_scale * q->b_scale / q->y_scale;
  const float ra = q->a_scale / q->y_scale, rb = q->b_scale / q->y_scale;
  const float za = static_cast<float>(q->a_zero), zb = static_cast<float>(q->b_zero);
  q->u_ratio = q->swap ? rb : ra;
  q->w_ratio = q->swap ? ra : rb;
  const float w_term = q->w_ratio * (q->swap ? za : zb);
  q->fixed = static_cast<float>(q->y_zero) - std::fma(q->u_ratio, q->swap ? zb : za, w_term);
}

}  // namespace loom::cpu_simd
