// The compile notes on quantized graphs (compile.hpp, quantized_notes): for
// each int8 step, what it came from; for each node that still reads a
// DequantizeLinear's output, that it runs in f32, and why the QDQ fusion
// (compile_rewrite.cpp) left it so, unless the schedule runs it on the 8-bit
// values (a MaxPool or one-input operators between a DequantizeLinear and a
// QuantizeLinear, an Add of two DequantizeLinear outputs before one:
// plan_quant_pool, plan_quant_table, plan_quant_add, the matchers the
// schedule itself uses).
#include <string>
#include <vector>

#include "compile.hpp"
#include "schedule_plan.hpp"

namespace loom::cpu_simd {
namespace {

bool is_int8_step(Op op) {
  return op == Op::kQLinearConv || op == Op::kQLinearMatMul || op == Op::kConvInteger ||
         op == Op::kMatMulInteger || op == Op::kQLinearConvTranspose;
}

std::string label_of(const sdk::GraphView& g, const BlobNode& n) {
  return n.origin >= 0 ? g.node(static_cast<size_t>(n.origin)).label()
                       : std::string("a step a rewrite added (") + op_name(n.op) + ")";
}

// Why a Conv, MatMul or Gemm reading dequantized values was not fused.
std::string why_unfused(const sdk::GraphView& g, const BlobGraph& blob, const TensorUses& u,
                        const BlobNode& core) {
  uint32_t out = core.outputs[0];
  const auto sole_reader = [&](uint32_t t) -> const BlobNode* {
    return u.readers[t] == 1 && !u.output[t] ? &blob.nodes[static_cast<size_t>(u.reader[t])] : nullptr;
  };
  const BlobNode* next = sole_reader(out);
  if (next != nullptr && (next->op == Op::kRelu || next->op == Op::kClip)) {
    out = next->outputs[0];
    next = sole_reader(out);
  }
  if (next == nullptr) {
    return "its output is read by " + std::to_string(u.readers[out]) +
           (u.readers[out] == 1 ? " node" : " nodes") +
           (u.output[out] ? " and is a graph output" : "") +
           "; the fusion needs one QuantizeLinear as its only reader (after an optional Relu or Clip)";
  }
  if (next->op != Op::kQuantizeLinear) {
    return std::string("no QuantizeLinear reads its output (") + label_of(g, *next) + " does)";
  }
  const BlobNode* dx = producer_if(blob, u, core.inputs[0], Op::kDequantizeLinear);
  const BlobNode* dw =
      core.inputs.size() > 1 ? producer_if(blob, u, core.inputs[1], Op::kDequantizeLinear) : nullptr;
  if (dx == nullptr) return "its input is not a DequantizeLinear's output";
  if (dw == nullptr) return "its weight is not a DequantizeLinear of an 8-bit tensor";
  const std::vector<int64_t>& xs = blob.tensors[dx->inputs[1]].shape;
  if (!(xs.empty() || (xs.size() == 1 && xs[0] == 1))) {
    return "its input has a scale per channel; int8 steps take activations quantized per tensor";
  }
  const std::vector<int64_t>& qs = blob.tensors[next->inputs[1]].shape;
  if (!(qs.empty() || (qs.size() == 1 && qs[0] == 1))) {
    return "the QuantizeLinear after it has a scale per channel; int8 steps write one scale";
  }
  if (core.op == Op::kConvTranspose) {
    return "the int8 ConvTranspose takes a 2-D one with u8 input, i8 weights of zero point 0 that the program "
           "holds, a weight scale per tensor or (one group) per output channel, and constant scales, zero "
           "points and bias (plugins/cpu-simd/README.md, QDQ fusion)";
  }
  return "its scales, zero points or bias are not constants the fusion can read, or a Gemm "
         "with alpha, beta or transA other than 1, 1, 0 (plugins/cpu-simd/README.md, QDQ fusion)";
}

}  // namespace

std::vector<std::string> quantized_notes(const sdk::GraphView& g, const BlobGraph& blob) {
  std::vector<std::string> notes;
  const TensorUses u = tensor_uses(blob);
  // What the schedule will run on the bytes: per node, the note.
  std::vector<std::string> on_bytes(blob.nodes.size());
  {
    std::vector<Slot> slots;
    std::vector<Step> steps;
    const plan::Planner p(blob, slots, steps);
    for (size_t i = 0; i < blob.nodes.size(); ++i) {
      plan::QuantPool pool;
      plan::QuantTable table;
      plan::QuantAdd add;
      plan::QuantConcat concat;
      if (plan::plan_quant_concat(p, i, &concat)) {
        on_bytes[concat.concat] = "concatenated on the 8-bit values in one pass with its DequantizeLinear inputs and "
                                  "QuantizeLinear (each input copied, or through its table of 256 where its scale "
                                  "or zero point differs)";
      } else if (plan::plan_quant_add(p, i, &add)) {
        on_bytes[add.add] = std::string(add.params.multiply ? "multiplied" : "added") +
                            " on the 8-bit values in one pass with its two DequantizeLinear and its "
                            "QuantizeLinear (ONNX Runtime's QLinear" + (add.params.multiply ? "Mul" : "Add") +
                            " arithmetic: within 1 unit of the unfused steps)";
      } else if (plan::plan_quant_pool(p, i, &pool)) {
        on_bytes[pool.pool] = std::string(pool.resize ? "resized" : "pooled") +
                              " on the 8-bit values (its DequantizeLinear and QuantizeLinear share one "
                              "scale and zero point)";
      } else if (plan::plan_quant_table(p, i, &table)) {
        for (size_t n : table.middle) {
          on_bytes[n] = "one lookup per value in a table of the 256 8-bit values, with its DequantizeLinear "
                        "and QuantizeLinear";
        }
      }
    }
  }
  for (const BlobNode& n : blob.nodes) {
    if (is_int8_step(n.op)) {
      const std::string from =
          n.origin >= 0 ? g.node(static_cast<size_t>(n.origin)).op_type() : std::string();
      if (from == op_name(n.op)) {
        notes.push_back("int8: " + label_of(g, n) + ": one " + op_name(n.op) + " step");
      } else {
        notes.push_back("int8: " + label_of(g, n) + ": one " + op_name(n.op) +
                        " step with its DequantizeLinear inputs and QuantizeLinear output");
      }
      continue;
    }
    if (n.op == Op::kDequantizeLinear || n.op == Op::kQuantizeLinear) continue;
    int64_t dequantized = -1;
    for (uint32_t t : n.inputs) {
      if (producer_if(blob, u, t, Op::kDequantizeLinear) != nullptr) {
        dequantized = t;
        break;
      }
    }
    if (dequantized < 0) continue;
    if (!on_bytes[static_cast<size_t>(&n - blob.nodes.data())].empty()) {
      notes.push_back("int8: " + label_of(g, n) + ": " + on_bytes[static_cast<size_t>(&n - blob.nodes.data())]);
      continue;
    }
    const std::string& name = blob.tensors[static_cast<size_t>(dequantized)].name;
    const std::string what = name.empty() ? std::string() : " '" + name + "'";
    std::string why;
    if (n.op == Op::kConv || n.op == Op::kMatMul || n.op == Op::kGemm || n.op == Op::kConvTranspose) {
      why = why_unfused(g, blob, u, n);
    } else {
      const std::string op =
          n.origin >= 0 ? g.node(static_cast<size_t>(n.origin)).op_type() : std::string(op_name(n.op));
      if (n.op == Op::kConcat) {
        why = "the int8 Concat takes DequantizeLinear inputs that it alone reads and one QuantizeLinear reading it, "
              "each with a constant per-tensor scale and zero point; it runs on the dequantized values";
      } else if (n.op == Op::kAdd || n.op == Op::kMul) {
        why = "the int8 " + op + " takes two 8-bit DequantizeLinear inputs and one QuantizeLinear reading it, "
              "each with a constant per-tensor scale and zero point; it runs on the dequantized values";
      } else {
        why = "cpu-simd has no int8 " + op + "; it runs on the dequantized values";
      }
    }
    notes.push_back("f32: " + label_of(g, n) + " reads dequantized" + what + ": " + why);
  }
  return notes;
}

}  // namespace loom::cpu_simd
