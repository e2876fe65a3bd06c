// Identity bypassing, dead-node removal and tensor compaction.
#include <algorithm>
#include <cstring>
#include <vector>

#include "lowering/graph_passes.hpp"

namespace loom::lowering::passes {

namespace {

// Dropout is the identity at inference unless opset 12+ sets training_mode
// to a true (or unknown) value; only its first output may be in use.
bool is_inference_dropout(const graph::Graph& g, const graph::Node& node) {
  if (node.outputs.size() != 1) return false;
  if (node.inputs.size() < 3 || node.inputs[2] == graph::kNoTensor) return true;
  const graph::Tensor& mode = g.tensors[node.inputs[2]];
  if (!mode.is_constant() || mode.dtype != DType::kBool || mode.data->size() != 1) return false;
  return (*mode.data)[0] == std::byte{0};
}

}  // namespace

size_t bypass_identities(graph::Graph& g) {
  std::vector<bool> removed(g.nodes.size(), false);
  std::vector<int32_t> replace(g.tensors.size(), graph::kNoTensor);
  size_t count = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    graph::Node& node = g.nodes[n];
    for (int32_t& t : node.inputs) {
      if (t != graph::kNoTensor && replace[t] != graph::kNoTensor) t = replace[t];
    }
    if (!node.domain.empty() || node.inputs.empty() || node.inputs[0] == graph::kNoTensor ||
        node.outputs.size() != 1) {
      continue;
    }
    const bool identity = node.op_type == "Identity" ||
                          (node.op_type == "Dropout" && is_inference_dropout(g, node));
    const int32_t out = node.outputs[0];
    // A graph output keeps its name, so the node producing it stays.
    if (!identity || std::find(g.outputs.begin(), g.outputs.end(), out) != g.outputs.end()) {
      continue;
    }
    replace[out] = node.inputs[0];
    removed[n] = true;
    ++count;
  }
  size_t w = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (!removed[n]) {
      if (w != n) g.nodes[w] = std::move(g.nodes[n]);
      ++w;
    }
  }
  g.nodes.resize(w);
  return count;
}

size_t remove_dead_nodes(graph::Graph& g) {
  std::vector<bool> live(g.tensors.size(), false);
  for (int32_t t : g.outputs) live[t] = true;
  std::vector<bool> keep(g.nodes.size(), false);
  // Reverse topological order: every consumer is decided before its producer.
  for (size_t n = g.nodes.size(); n-- > 0;) {
    const graph::Node& node = g.nodes[n];
    for (int32_t t : node.outputs) keep[n] = keep[n] || live[t];
    if (!keep[n]) continue;
    for (int32_t t : node.inputs) {
      if (t != graph::kNoTensor) live[t] = true;
    }
  }
  size_t w = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (keep[n]) {
      if (w != n) g.nodes[w] = std::move(g.nodes[n]);
      ++w;
    }
  }
  const size_t removed = g.nodes.size() - w;
  g.nodes.resize(w);
  return removed;
}

void compact_tensors(graph::Graph& g) {
  std::vector<bool> used(g.tensors.size(), false);
  auto mark = [&](int32_t t) {
    if (t != graph::kNoTensor) used[t] = true;
  };
  for (int32_t t : g.inputs) mark(t);
  for (int32_t t : g.outputs) mark(t);
  for (const graph::Node& node : g.nodes) {
    for (int32_t t : node.inputs) mark(t);
    for (int32_t t : node.outputs) mark(t);
  }
  std::vector<int32_t> remap(g.tensors.size(), graph::kNoTensor);
  std::vector<graph::Tensor> kept;
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (!used[t]) continue;
    remap[t] = static_cast<int32_t>(kept.size());
    kept.push_back(std::move(g.tensors[t]));
  }
  g.tensors = std::move(kept);
  auto fix = [&](std::vector<int32_t>& v) {
    for (int32_t& t : v) {
      if (t != graph::kNoTensor) t = remap[t];
    }
  };
  fix(g.inputs);
  fix(g.outputs);
  for (graph::Node& node : g.nodes) {
    fix(node.inputs);
    fix(node.outputs);
  }
}

}  // namespace loom::lowering::passes
