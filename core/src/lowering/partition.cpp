#include "lowering/partition.hpp"

#include <algorithm>
#include <queue>
#include <unordered_map>

namespace loom::lowering {

namespace {

// A growable set of group indices.
class Bits {
 public:
  bool test(size_t i) const { return i / 64 < words_.size() && (words_[i / 64] >> (i % 64)) & 1; }
  void set(size_t i) {
    if (i / 64 >= words_.size()) words_.resize(i / 64 + 1, 0);
    words_[i / 64] |= uint64_t{1} << (i % 64);
  }
  void merge(const Bits& o) {
    if (o.words_.size() > words_.size()) words_.resize(o.words_.size(), 0);
    for (size_t w = 0; w < o.words_.size(); ++w) words_[w] |= o.words_[w];
  }

 private:
  std::vector<uint64_t> words_;
};

}  // namespace

Result<Partition> partition_graph(const graph::Graph& graph,
                                  const std::vector<std::vector<bool>>& supported,
                                  bool one_node_per_group) {
  const size_t n_nodes = graph.nodes.size();
  for (size_t t = 0; t < supported.size(); ++t) {
    if (supported[t].size() != n_nodes) {
      return invalid_argument("partition: target " + std::to_string(t) + " answered for " +
                              std::to_string(supported[t].size()) + " nodes of " +
                              std::to_string(n_nodes));
    }
  }
  Partition out;
  out.node_target.assign(n_nodes, kReferenceTarget);
  for (size_t n = 0; n < n_nodes; ++n) {
    for (size_t t = 0; t < supported.size(); ++t) {
      if (supported[t][n]) {
        out.node_target[n] = static_cast<int>(t);
        break;
      }
    }
  }

  std::vector<int32_t> producer(graph.tensors.size(), -1);  // node index
  for (size_t n = 0; n < n_nodes; ++n) {
    for (int32_t t : graph.nodes[n].outputs) {
      if (t >= 0 && static_cast<size_t>(t) < producer.size()) producer[t] = static_cast<int32_t>(n);
    }
  }

  std::vector<Group> groups;
  std::vector<Bits> ancestors;  // groups each group transitively depends on
  std::vector<size_t> group_of(n_nodes, 0);
  for (size_t n = 0; n < n_nodes; ++n) {
    std::vector<size_t> preds;
    for (int32_t t : graph.nodes[n].inputs) {
      if (t < 0 || producer[t] < 0) continue;
      size_t g = group_of[producer[t]];
      if (std::find(preds.begin(), preds.end(), g) == preds.end()) preds.push_back(g);
    }
    const int target = out.node_target[n];
    auto creates_cycle = [&](size_t g) {
      for (size_t h : preds) {
        if (h != g && ancestors[h].test(g)) return true;
      }
      return false;
    };
    size_t chosen = groups.size();
    if (target != kReferenceTarget && !one_node_per_group) {
      for (size_t g : preds) {
        if (groups[g].target == target && !creates_cycle(g)) {
          chosen = g;
          break;
        }
      }
      for (size_t g = groups.size(); chosen == groups.size() && g-- > 0;) {
        if (groups[g].target == target && !creates_cycle(g)) chosen = g;
      }
    }
    if (chosen == groups.size()) {
      groups.push_back(Group{target, {}});
      ancestors.emplace_back();
    }
    groups[chosen].nodes.push_back(n);
    group_of[n] = chosen;
    Bits added;
    for (size_t h : preds) {
      if (h == chosen) continue;
      added.set(h);
      added.merge(ancestors[h]);
    }
    ancestors[chosen].merge(added);
    // Groups that depend on `chosen` now depend on what it depends on.
    for (size_t g = 0; g < groups.size(); ++g) {
      if (g != chosen && ancestors[g].test(chosen)) ancestors[g].merge(ancestors[chosen]);
    }
  }

  // Order the groups (Kahn; the smallest first node first among the ready).
  const size_t n_groups = groups.size();
  std::vector<std::vector<size_t>> succ(n_groups);
  std::vector<size_t> indegree(n_groups, 0);
  for (size_t g = 0; g < n_groups; ++g) {
    std::vector<size_t> preds;
    for (size_t n : groups[g].nodes) {
      for (int32_t t : graph.nodes[n].inputs) {
        if (t < 0 || producer[t] < 0) continue;
        size_t h = group_of[producer[t]];
        if (h != g && std::find(preds.begin(), preds.end(), h) == preds.end()) preds.push_back(h);
      }
    }
    for (size_t h : preds) {
      succ[h].push_back(g);
      ++indegree[g];
    }
  }
  using Ready = std::pair<size_t, size_t>;  // (first node, group)
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  for (size_t g = 0; g < n_groups; ++g) {
    if (indegree[g] == 0) ready.push({groups[g].nodes.front(), g});
  }
  while (!ready.empty()) {
    size_t g = ready.top().second;
    ready.pop();
    out.groups.push_back(std::move(groups[g]));
    for (size_t s : succ[g]) {
      if (--indegree[s] == 0) ready.push({groups[s].nodes.front(), s});
    }
  }
  if (out.groups.size() != n_groups) {
    return Status(StatusCode::kInternal, "partition: the groups form a cycle");
  }
  return out;
}

Result<Subgraph> make_subgraph(const graph::Graph& graph, const Group& group,
                               const graph::EncodeOptions& encode, const std::string& name) {
  Subgraph out;
  out.graph.name = name;
  std::vector<bool> inside(graph.nodes.size(), false);
  for (size_t n : group.nodes) inside[n] = true;
  std::vector<bool> produced_inside(graph.tensors.size(), false);
  for (size_t n : group.nodes) {
    for (int32_t t : graph.nodes[n].outputs) produced_inside[t] = true;
  }
  std::unordered_map<int32_t, int32_t> local;  // whole-graph tensor -> subgraph tensor
  auto map_tensor = [&](int32_t t) {
    auto [it, added] = local.try_emplace(t, static_cast<int32_t>(out.graph.tensors.size()));
    if (added) {
      out.graph.tensors.push_back(graph.tensors[t]);
      out.tensor_origin.push_back(t);
      if (!graph.tensors[t].is_constant() && !produced_inside[t]) {
        out.graph.inputs.push_back(it->second);
        out.call_inputs.push_back(t);
      }
    }
    return it->second;
  };
  for (size_t n : group.nodes) {
    graph::Node node = graph.nodes[n];
    for (int32_t& t : node.inputs) {
      if (t != graph::kNoTensor) t = map_tensor(t);
    }
    for (int32_t& t : node.outputs) t = map_tensor(t);
    out.graph.nodes.push_back(std::move(node));
  }
  // Outputs: read outside the group, or results of the whole graph.
  std::vector<bool> used_outside(graph.tensors.size(), false);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (inside[n]) continue;
    for (int32_t t : graph.nodes[n].inputs) {
      if (t >= 0) used_outside[t] = true;
    }
  }
  for (int32_t t : graph.outputs) used_outside[t] = true;
  for (size_t n : group.nodes) {
    for (int32_t t : graph.nodes[n].outputs) {
      if (used_outside[t]) {
        out.graph.outputs.push_back(local.at(t));
        out.call_outputs.push_back(t);
      }
    }
  }
  for (size_t i = 0; i < out.graph.tensors.size(); ++i) {
    if (graph::encodes_as_parameter(out.graph.tensors[i], encode)) {
      out.call_inputs.push_back(out.tensor_origin[i]);
    }
  }
  // A typed open graph (compiled once for every binding) keeps its open
  // dimensions in its subgraphs.
  graph::ValidateOptions validate;
  validate.open = encode.open;
  LOOM_RETURN_IF_ERROR(graph::validate(out.graph, validate).with_context("subgraph '" + name + "'"));
  return out;
}

}  // namespace loom::lowering
