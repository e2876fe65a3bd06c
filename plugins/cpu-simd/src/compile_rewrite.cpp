// Rewrites of a lowered blob graph that make it cheaper to run and compute
// the same function (see compile.hpp).
#include <cmath>

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

}  // namespace

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
