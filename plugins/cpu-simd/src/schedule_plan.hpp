// Private to cpu-simd's schedule: the planner's state, the record of a
// oneDNN step, and the fusion matchers and oneDNN step makers that
// schedule_plan.cpp defines for Schedule::build (schedule.cpp).
#pragma once

#include <omp.h>

#include <array>
#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "schedule.hpp"

namespace loom::cpu_simd {

using dnnl::memory;
using Tag = memory::format_tag;
using DType = memory::data_type;

inline constexpr uint32_t kNone = UINT32_MAX;

// The oneDNN primitive of a step, its memory descriptors, the slots bound
// to its arguments and, for weights packed once, where they came from.
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

namespace plan {

// A rank-4 tensor whose NCHW and NHWC layouts differ in memory. Any other
// tensor is the same bytes in both, so it has one slot.
inline bool layout_sensitive(const std::vector<int64_t>& s) {
  return s.size() == 4 && s[1] > 1 && s[2] * s[3] > 1;
}

inline uint64_t byte_size(const std::vector<int64_t>& shape) {
  uint64_t n = sizeof(float);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

inline memory::dims dims_of(const std::vector<int64_t>& s) { return memory::dims(s.begin(), s.end()); }

// Row-major format tag for a rank.
inline Tag plain_tag(size_t rank) {
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
bool eltwise_of(const BlobNode& n, Eltwise* e);

// The process's oneDNN CPU engine.
dnnl::engine& cpu_engine();

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

  // A second slot of tensor `t` (its channels-last copy), sized for its dtype.
  uint32_t new_slot(uint32_t t, Layout layout) {
    Slot s;
    s.shape = g.tensors[t].shape;
    s.layout = layout;
    uint64_t elements = 0;
    element_count(s.shape, &elements);
    s.bytes = elements * dtype_size(g.tensors[t].dtype);
    slots.push_back(std::move(s));
    return static_cast<uint32_t>(slots.size() - 1);
  }

  // The oneDNN type a reorder of tensor `t` moves: a reorder between two
  // layouts of one type copies bits, so what matters is the element's size
  // (u8 for the 8-bit types and bool, f32 for the 4-byte ones).
  DType bits_type(uint32_t t) const { return dtype_size(g.tensors[t].dtype) == 1 ? DType::u8 : DType::f32; }

  void reorder(uint32_t t, uint32_t from, uint32_t to) {
    Step step;
    step.kind = StepKind::kReorder;
    step.ins = {from};
    step.out = to;
    auto d = std::make_shared<DnnlStep>();
    const memory::dims dims = dims_of(slots[from].shape);
    const DType type = bits_type(t);
    d->src_md = memory::desc(dims, type, slots[from].layout == Layout::kNhwc ? Tag::nhwc : Tag::nchw);
    d->dst_md = memory::desc(dims, type, slots[to].layout == Layout::kNhwc ? Tag::nhwc : Tag::nchw);
    dnnl::reorder::primitive_desc pd(cpu_engine(), d->src_md, cpu_engine(), d->dst_md);
    d->prim = dnnl::reorder(pd);
    d->args = {{DNNL_ARG_SRC, from, d->src_md}, {DNNL_ARG_DST, to, d->dst_md}};
    step.dnnl = std::move(d);
    steps.push_back(std::move(step));
  }

  // The layout an f32 step reading `t` takes: channels-last where the
  // tensor has that copy. Other dtypes read plain, except in the quantized
  // steps that choose for themselves (Schedule::build).
  Layout preferred(uint32_t t) const {
    return layout_sensitive(g.tensors[t].shape) && nhwc_of[t] != kNone && g.tensors[t].dtype == LOOM_DTYPE_F32
               ? Layout::kNhwc
               : Layout::kPlain;
  }

  // The slot holding tensor `t` in `layout`, planning a reorder if needed.
  uint32_t ensure(uint32_t t, Layout layout) {
    if (!layout_sensitive(g.tensors[t].shape)) return t;
    if (layout == Layout::kPlain) {
      if (!plain_ready[t]) {
        reorder(t, nhwc_of[t], t);
        plain_ready[t] = true;
      }
      return t;
    }
    if (nhwc_of[t] == kNone) {
      nhwc_of[t] = new_slot(t, Layout::kNhwc);
      reorder(t, t, nhwc_of[t]);
    }
    return nhwc_of[t];
  }

  // The slot a step writes tensor `t` into, in `layout`.
  uint32_t define(uint32_t t, Layout layout) {
    if (!layout_sensitive(g.tensors[t].shape) || layout == Layout::kPlain) {
      plain_ready[t] = true;
      return t;
    }
    nhwc_of[t] = new_slot(t, Layout::kNhwc);
    return nhwc_of[t];
  }

  // The plan so far, to go back to when a step oneDNN cannot make after all
  // had already planned its reorders and slots.
  struct Mark {
    size_t steps = 0, slots = 0;
    std::vector<uint32_t> nhwc_of;
    std::vector<bool> plain_ready;
  };
  Mark mark() const { return {steps.size(), slots.size(), nhwc_of, plain_ready}; }
  void rollback(const Mark& m) {
    steps.resize(m.steps);
    slots.resize(m.slots);
    nhwc_of = m.nhwc_of;
    plain_ready = m.plain_ready;
  }

  // After the producer of `t`: graph outputs are plain.
  void finish(uint32_t t) {
    if (is_output[t]) ensure(t, Layout::kPlain);
  }
};

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

struct MatMulChain {
  size_t node = 0;
  int64_t add = -1;           // fused bias Add
  uint32_t bias = kNone;      // tensor holding the bias (Add operand or Gemm C)
  std::vector<Eltwise> post;
  std::vector<size_t> nodes;
  uint32_t output = kNone;
  bool packed = false;        // B constant: packed once
  // Batched MatMul: Transposes folded into the operands and the result, read
  // and written through strided views instead of being copied. operand[j]
  // is the tensor the step reads for input j (a folded Transpose's input);
  // perm[j] its permutation (empty: none); out_perm the permutation of a
  // Transpose of the result that the step writes directly.
  uint32_t operand[2] = {kNone, kNone};
  std::vector<int64_t> perm[2], out_perm;
};

// The exporters' LayerNorm over the last axis of x:
//   m = ReduceMean(x, [-1]); d = Sub(x, m); q = Pow(d, 2) or Mul(d, d);
//   v = ReduceMean(q, [-1]); s = Sqrt(Add(v, epsilon)); y = Div(d, s);
//   then optionally Mul(y, gamma) and Add(., beta) with row vectors of n.
struct LayerNormChain {
  uint32_t x = kNone, gamma = kNone, beta = kNone, output = kNone;
  float epsilon = 0;
  std::vector<size_t> nodes;
};

// Element strides of each logical dimension of a slot.
std::array<int64_t, kMaxRank> logical_strides(const Slot& s);

// Broadcast geometry of a binary node whose operands and output live in
// `a`, `b` and `y`, looping in y's memory order.
BroadcastGeometry binary_geometry(const Slot& a, const Slot& b, const Slot& y);

// oneDNN attributes: these activations, then the residual sum, then these;
// a scratchpad the caller provides.
dnnl::primitive_attr make_attr(const std::vector<Eltwise>& before_sum, bool sum,
                               const std::vector<Eltwise>& after_sum);

// Whether node i starts a Conv chain (filled into `c`).
bool plan_conv_chain(const Planner& p, size_t i, ConvChain* c);

// The oneDNN convolution (deconvolution for ConvTranspose) of a chain;
// throws dnnl::error when oneDNN has no implementation for it.
std::shared_ptr<DnnlStep> make_conv(const Planner& p, const ConvChain& c, uint32_t src_slot,
                                    uint32_t dst_slot, uint32_t residual_slot);

// Whether MatMul / Gemm node i starts a MatMul chain: bias, activations
// or the exporters' Erf GELU after it.
bool plan_matmul_chain(const Planner& p, size_t i, MatMulChain* c);

// For a batched MatMul chain: folds a Transpose that feeds an operand (read
// by the MatMul alone) and one that reads the result (its only reader) into
// strided oneDNN views; sets operand, perm, out_perm, nodes and output.
void fold_transposes(const Planner& p, MatMulChain* c);

// Whether node i, a ReduceMean, starts the exporters' LayerNorm pattern.
bool plan_layer_norm(const Planner& p, size_t i, LayerNormChain* c);

// The oneDNN matmul of a chain; throws dnnl::error when it has none.
std::shared_ptr<DnnlStep> make_matmul(const Planner& p, const MatMulChain& c, uint32_t a_slot,
                                      uint32_t b_slot, uint32_t dst_slot);

// oneDNN pooling on NHWC data, or nullptr when the node needs the plain
// kernel (ceil_mode, which oneDNN has no notion of). `type`: the elements'
// (u8 / s8 for a MaxPool of quantized values, QuantPool).
std::shared_ptr<DnnlStep> make_pool(const Planner& p, size_t i, uint32_t src_slot,
                                    uint32_t dst_slot, Tag layout, DType type = DType::f32);

// DequantizeLinear -> MaxPool -> QuantizeLinear where the QuantizeLinear's
// scale and zero point are the DequantizeLinear's (constants, per tensor,
// equal bit for bit) and each node's output has the next as its only
// reader: the MaxPool of the 8-bit x itself, exactly. DequantizeLinear is
// increasing, so the maximum commutes with it, and quantizing a
// dequantized v with the same parameters gives v back (|v - z| <= 255, the
// float product's and quotient's relative errors of 2^-24 each move it by
// far less than 0.5); a window's padding (the type's lowest value in
// oneDNN, -inf in ONNX) never wins, as ONNX's pads leave every window an
// element.
// A nearest Resize (of any rank) passes values through the same way, as a
// Resize of the bytes (`resize`; the step runs it in plain layout).
struct QuantPool {
  size_t dq = 0, pool = 0, q = 0;
  bool resize = false;
};
bool plan_quant_pool(const Planner& p, size_t i, QuantPool* out);
// The step of a QuantPool with `resize`: the plain Resize kernel on the
// bytes (run_moved_node), in plain layout.
Step byte_resize_step(const QuantPool& qp, Planner* p);

// DequantizeLinear -> f32 operators of one input each (none, up to four:
// is_unary ones, HardSwish, HardSigmoid, Sigmoid, Relu, Clip, ...; and Add,
// Sub, Mul, Div, Max and Min whose other operand is a one-element f32
// constant, as exporters write x + 3, x / 6 or a learned scale) ->
// QuantizeLinear, each with per-tensor constant parameters, each node's
// output read by the next alone: every output byte depends on one input
// byte, so the chain is a table of the 256 (build_quant_table) and one
// lookup per element. The DequantizeLinear's output may have other readers
// (x * HardSigmoid-like gates read x twice): it then stays a step of its
// own (`dq_kept`) and the table reads its 8-bit input.
struct QuantTable {
  size_t dq = 0, q = 0;
  std::vector<size_t> middle;  // the f32 operators, in order
  float dq_scale = 1, q_scale = 1;
  int32_t dq_zero = 0, q_zero = 0;
  bool dq_kept = false;
};
bool plan_quant_table(const Planner& p, size_t i, QuantTable* out);
// plan_quant_table's parts: the chain from reader `first` of `cur` on; the
// operand position of `cur` in table operator `n` (-1: not one).
bool table_chain(const Planner& p, uint32_t cur, size_t first, QuantTable* out);
int table_operand(const BlobGraph& g, const BlobNode& n, uint32_t cur);

// The chain's output byte for each input byte, computed as the unfused
// steps compute it: the DequantizeLinear's and QuantizeLinear's arithmetic
// of schedule_int8.cpp, and between them `kernels`' own kernels run on the
// 256 dequantized values.
std::vector<uint8_t> build_quant_table(const Planner& p, const QuantTable& t, const Kernels& kernels);

// DequantizeLinear(a), DequantizeLinear(b) -> Add or Mul -> QuantizeLinear,
// every scale and zero point a per-tensor constant (scales finite and
// positive), a and b 8-bit, broadcasting to the operator's output shape,
// the operator's output read by the QuantizeLinear alone: one pass over the
// bytes (a kQuantAdd step) with ONNX Runtime's QLinearAdd / QLinearMul
// arithmetic (QuantAddParams, ops.hpp), within 1 unit of the unfused
// steps. A DequantizeLinear whose output has other readers stays a step
// (`dq_a_kept`, `dq_b_kept`) while this one reads its bytes.
struct QuantAdd {
  size_t dq_a = 0, dq_b = 0, add = 0, q = 0;
  bool dq_a_kept = false, dq_b_kept = false;
  QuantAddParams params;
  // When one operand is a table of the other (x * HardSigmoid(x) written as
  // a QuantTable of x and this Mul): that table's index in the schedule's
  // QuantTable list, and whether it gives b (else a). The two steps are
  // then one table of x (compose_quant_add).
  int64_t table = -1;
  bool table_gives_b = true;
};
bool plan_quant_add(const Planner& p, size_t i, QuantAdd* out);
// Whether qa's operands are a tensor x and the output of QuantTable
// tables[k] of x, the same shape, that output read by qa alone: sets
// qa->table and table_gives_b.
bool compose_quant_add(const Planner& p, const std::vector<QuantTable>& tables, QuantAdd* qa);
// Its step: kQuantAdd, channels-last when a convolution wrote a or b so;
// with a table, a kTable of x whose byte v gives what the two steps give
// (kernels' quant_add on v and the table's byte for v).
Step quant_add_step(const QuantAdd& qa, Planner* p, const std::vector<QuantTable>& tables, const Kernels& kernels);

// DequantizeLinear of each input -> Concat -> QuantizeLinear, every scale
// and zero point a per-tensor constant, each DequantizeLinear read by the
// Concat alone and the Concat by the QuantizeLinear alone: the Concat of
// the bytes (a kTable step with `concat_tables`), each input copied when
// its type, scale and zero point are the output's, else looked up in its
// table of 256 (DequantizeLinear then QuantizeLinear, build_quant_table:
// the unfused steps' bytes, which ONNX Runtime's QLinearConcat also gives).
// `inputs` holds one QuantTable per input (no middle operators).
struct QuantConcat {
  size_t concat = 0, q = 0;
  std::vector<QuantTable> inputs;
};
bool plan_quant_concat(const Planner& p, size_t i, QuantConcat* out);
Step byte_concat_step(const QuantConcat& qc, Planner* p, const Kernels& kernels);
void run_byte_concat(const Step& st, float* const* slots,
                     void (*look)(const uint8_t*, uint8_t*, size_t, const uint8_t*), ThreadPool& pool);

// Marks claimed (not run) each DequantizeLinear that the tables and
// quantized Adds / Muls kept for other readers when every reader of its
// output reads its bytes instead (and it is no graph output).
void skip_unread_dequantize(const std::vector<QuantTable>& tables, const std::vector<QuantAdd>& adds, Planner* p);

// "nhwc" or "plain", for describe().
const char* layout_name(Layout l);

}  // namespace plan
}  // namespace loom::cpu_simd
