#include "lowering/driver.hpp"

#include <algorithm>
#include <set>

#include "graph/graph_codec.hpp"
#include "host/compile_entries.hpp"

namespace loom::lowering {

namespace {

std::vector<std::string> sorted_unique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::string first_loader_key(const host::LoadedPlugin& plugin) {
  return plugin.manifest().loader_keys.empty() ? std::string() : plugin.manifest().loader_keys.front();
}

}  // namespace

Result<std::vector<std::shared_ptr<host::LoadedPlugin>>> load_targets(
    host::PluginHost& host, const std::vector<std::string>& targets) {
  std::vector<std::shared_ptr<host::LoadedPlugin>> out;
  for (const std::string& name : targets) {
    LOOM_ASSIGN_OR_RETURN(std::shared_ptr<host::LoadedPlugin> plugin, host::load_compile_target(host, name));
    if (std::any_of(out.begin(), out.end(), [&](const auto& p) { return p->name() == name; })) {
      return invalid_argument("target '" + name + "' is listed twice");
    }
    out.push_back(std::move(plugin));
  }
  return out;
}

Result<GraphCompileResult> compile_graph(
    const graph::Graph& graph, const std::vector<std::shared_ptr<host::LoadedPlugin>>& targets,
    const EmitOptions& emit, const std::function<void(std::string_view, double)>& progress,
    double from, double to) {
  auto report = [&](std::string_view stage, double f) {
    if (progress) progress(stage, from + (to - from) * f);
  };
  GraphCompileResult out;
  // A typed open graph (native open-shape programs) reaches only plugins
  // that serve open shapes; its dimensions may be -1.
  graph::EncodeOptions encode;
  encode.open = std::any_of(graph.tensors.begin(), graph.tensors.end(), [](const graph::Tensor& t) {
    return std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 0; });
  });
  if (encode.open) {
    for (const auto& plugin : targets) {
      if (!plugin->serves_open_shapes()) {
        return internal_error("compile_graph: an open graph for '" + plugin->name() +
                              "', which compiles fixed shapes only");
      }
    }
  }
  std::vector<std::vector<bool>> supported;
  if (!targets.empty()) {
    report("partition", 0);
    LOOM_ASSIGN_OR_RETURN(std::vector<std::byte> whole, graph::encode_graph(graph, encode));
    for (const auto& plugin : targets) {
      LOOM_ASSIGN_OR_RETURN(std::vector<bool> flags,
                            host::compile_supported(*plugin, whole, graph.nodes.size()));
      supported.push_back(std::move(flags));
    }
  }
  LOOM_ASSIGN_OR_RETURN(out.partition, partition_graph(graph, supported, emit.one_node_per_subgraph));
  out.group_names.assign(out.partition.groups.size(), std::string());
  report("partition", 0.2);

  for (const auto& plugin : targets) {
    TargetReport t;
    t.plugin = plugin->name();
    t.loader_key = first_loader_key(*plugin);
    out.targets.push_back(std::move(t));
  }
  std::vector<std::optional<CompiledGroup>> compiled(out.partition.groups.size());
  std::vector<std::vector<std::string>> target_ops(targets.size());
  std::vector<std::string> reference_ops;
  size_t plugin_groups = 0, done = 0;
  for (const Group& g : out.partition.groups) plugin_groups += g.target != kReferenceTarget;
  for (size_t i = 0; i < out.partition.groups.size(); ++i) {
    const Group& group = out.partition.groups[i];
    if (group.target == kReferenceTarget) {
      for (size_t n : group.nodes) reference_ops.push_back(graph.nodes[n].op_type);
      out.reference_nodes += group.nodes.size();
      continue;
    }
    const auto& plugin = targets[static_cast<size_t>(group.target)];
    TargetReport& t = out.targets[static_cast<size_t>(group.target)];
    const std::string name = plugin->name() + "_" + std::to_string(t.subgraphs);
    LOOM_ASSIGN_OR_RETURN(Subgraph sub, make_subgraph(graph, group, encode, name));
    LOOM_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, graph::encode_graph(sub.graph, encode));
    auto blob = host::compile(*plugin, bytes);
    if (!blob.ok()) {
      return blob.status().with_context("subgraph '" + name + "' (" + std::to_string(group.nodes.size()) +
                                        " nodes, first " + graph::describe_node(graph, group.nodes.front()) + ")");
    }
    t.subgraphs += 1;
    out.group_names[i] = name;
    t.nodes += group.nodes.size();
    t.blob_bytes += blob->bytes.size();
    t.loader_key = blob->loader_key;
    for (size_t n : group.nodes) target_ops[static_cast<size_t>(group.target)].push_back(graph.nodes[n].op_type);
    CompiledGroup c{plugin->name(), std::move(sub), std::move(*blob), {}};
    if (emit.all_variants) {
      // Other targets get a variant of exactly these nodes when they support
      // every one of them: the first target's partition sets the boundaries.
      for (size_t u = 0; u < targets.size(); ++u) {
        if (static_cast<int>(u) == group.target) continue;
        const bool whole = std::all_of(group.nodes.begin(), group.nodes.end(),
                                       [&](size_t n) { return supported[u][n]; });
        if (!whole) continue;
        auto extra = host::compile(*targets[u], bytes);
        if (!extra.ok()) {
          out.targets[u].variant_failures.push_back(name + ": " + extra.status().message());
          continue;
        }
        out.targets[u].extra_variants += 1;
        out.targets[u].blob_bytes += extra->bytes.size();
        c.alternatives.emplace_back(targets[u]->name(), std::move(*extra));
      }
    }
    compiled[i] = std::move(c);
    report("compile", 0.2 + 0.6 * static_cast<double>(++done) / static_cast<double>(plugin_groups));
  }
  for (size_t t = 0; t < targets.size(); ++t) out.targets[t].op_types = sorted_unique(std::move(target_ops[t]));
  out.reference_op_types = sorted_unique(std::move(reference_ops));
  LOOM_ASSIGN_OR_RETURN(out.program, emit_program(graph, out.partition, compiled, emit));
  out.reference_variants = out.program.reference_variants;
  report("compile", 1);
  return out;
}

}  // namespace loom::lowering
