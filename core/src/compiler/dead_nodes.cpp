// Dead-node removal and tensor compaction: the last passes of the import.
#include <vector>

#include "compiler/import_passes.hpp"

namespace loom::compiler::passes {

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

}  // namespace loom::compiler::passes
