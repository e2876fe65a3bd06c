// compile_onnx_file: load, import, then the pipeline of driver.cpp, then
// write the program (and its parameter archive).
#include <algorithm>
#include <cstring>
#include <optional>
#include <system_error>
#include <unordered_map>

#include "compiler/compile_graph_file.hpp"
#include "compiler/import.hpp"
#include "lowering/driver.hpp"
#include "lowering/open_shapes.hpp"
#include "lowering/staged.hpp"
#include "graph/graph_codec.hpp"
#include "host/compile_entries.hpp"
#include "host/plugin_host.hpp"
#include "kernels/kernel.hpp"
#include "onnx/onnx_model.hpp"

namespace loom::compiler {

using lowering::EmitOptions;
using lowering::Group;
using lowering::kReferenceTarget;

namespace {

// Where the program records the archive: relative to the program's folder,
// inside it (the loader refuses '..').
Result<std::string> archive_path_for(const std::filesystem::path& program,
                                     const std::filesystem::path& archive) {
  std::error_code ec;
  auto folder = std::filesystem::weakly_canonical(std::filesystem::absolute(program, ec).parent_path(), ec);
  auto target = std::filesystem::weakly_canonical(std::filesystem::absolute(archive, ec), ec);
  if (ec) return invalid_argument("params-out '" + archive.string() + "': " + ec.message());
  std::filesystem::path rel = target.lexically_relative(folder);
  const std::string s = rel.generic_string();
  if (rel.empty() || rel.is_absolute() || s == ".." || s.rfind("../", 0) == 0) {
    return invalid_argument("params-out '" + archive.string() +
                            "' must lie in the program's folder or below it ('" + folder.string() + "')");
  }
  return s;
}

// Whether one of `targets` claims op (domain, op_type, opset), asked with a
// one-node graph. The importer asks only about ops without a reference
// kernel; the answer for the real node, with its shapes, comes later from
// the partitioner's compile_supported call.
bool any_target_takes(const std::vector<std::shared_ptr<host::LoadedPlugin>>& targets,
                      std::string_view domain, std::string_view op_type, int64_t opset) {
  if (targets.empty()) return false;
  graph::Graph probe;
  probe.name = "probe";
  graph::Tensor out;
  out.name = "probe_out";
  out.dtype = DType::kF32;
  out.shape = {1};
  probe.tensors.push_back(out);
  graph::Node node;
  node.op_type = std::string(op_type);
  node.domain = std::string(domain);
  node.opset = opset;
  node.outputs = {0};
  probe.nodes.push_back(node);
  probe.outputs = {0};
  auto bytes = graph::encode_graph(probe);
  if (!bytes.ok()) return false;
  for (const auto& plugin : targets) {
    auto answer = host::compile_supported(*plugin, *bytes, 1);
    if (answer.ok() && (*answer)[0]) return true;
  }
  return false;
}

// Whether the most preferred target plugin claims DequantizeLinear of an i8
// weight (opset 13, per tensor): then the weights of QDQ groups are left
// unfolded for it (a group's Conv goes to the first target that takes it; when
// that one does not take DequantizeLinear, an unfolded weight would only be
// dequantized on every run elsewhere).
bool first_target_takes_dequantize(const std::vector<std::shared_ptr<host::LoadedPlugin>>& targets) {
  if (targets.empty()) return false;
  graph::Graph probe;
  probe.name = "probe";
  graph::Tensor w, scale, out;
  w.name = "w";
  w.dtype = DType::kI8;
  w.shape = {2};
  scale.name = "scale";
  scale.dtype = DType::kF32;
  scale.shape = {};
  const float half = 0.5f;
  std::vector<std::byte> bytes(sizeof half);
  std::memcpy(bytes.data(), &half, sizeof half);
  scale.data = std::make_shared<const std::vector<std::byte>>(std::move(bytes));
  out.name = "out";
  out.dtype = DType::kF32;
  out.shape = {2};
  probe.tensors = {w, scale, out};
  probe.inputs = {0};
  graph::Node node;
  node.op_type = "DequantizeLinear";
  node.opset = 13;
  node.inputs = {0, 1};
  node.outputs = {2};
  probe.nodes.push_back(node);
  probe.outputs = {2};
  auto encoded = graph::encode_graph(probe);
  if (!encoded.ok()) return false;
  auto answer = host::compile_supported(*targets.front(), *encoded, 1);
  return answer.ok() && (*answer)[0];
}

Status write_archive(const lowering::EmittedProgram& program, const CompileOptions& options) {
  if (program.archive == nullptr) return Status();
  // The archive may go to a subfolder of the program's (checked above).
  std::error_code mkdir_error;
  std::filesystem::create_directories(std::filesystem::absolute(options.params_out).parent_path(), mkdir_error);
  return program.archive->write_file(options.params_out)
      .with_context("writing parameters to '" + options.params_out.string() + "'");
}

// An open-shape program: the graph and its signature, compiled per binding
// at run time for the same targets.
Result<CompileReport> write_open_program(const ImportedModel& imported,
                                         const std::vector<std::shared_ptr<host::LoadedPlugin>>& targets,
                                         const EmitOptions& emit, const CompileOptions& options,
                                         const std::filesystem::path& out,
                                         const std::filesystem::path& model) {
  std::vector<std::string> names;
  for (const auto& plugin : targets) names.push_back(plugin->name());
  CompileReport report;
  // Compiled once for every binding when each target serves open shapes
  // and the graph's structure does not follow the binding; otherwise the
  // graph alone, compiled per binding at run time.
  std::optional<lowering::GraphCompileResult> native_result;
  for (const auto& plugin : targets) {
    if (!plugin->serves_open_shapes() && report.open_per_binding_why.empty()) {
      report.open_per_binding_why = plugin->name() + " compiles fixed shapes only (no open-shape executables, ABI 1.2)";
    }
  }
  if (!imported.value_inputs.empty()) {
    report.open_per_binding_why = "input values decide shapes";
  }
  if (imported.control_flow) {
    report.open_per_binding_why =
        "control flow (If, Loop, Scan): a staged program, whose parts and bodies are compiled per binding";
  }
  // BatchNormalization into Conv does not depend on the binding: folded in
  // the stored graph itself, so that the function's weights and the
  // graph's are the same parameters.
  graph::Graph stored = imported.graph;
  std::vector<lowering::passes::DeclaredType> stored_declared = imported.declared;
  if (report.open_per_binding_why.empty()) {
    LOOM_RETURN_IF_ERROR(lowering::passes::fold_batch_norm(stored).status().with_context(model.string()));
    // The filters before folding are no longer read: dropped, and the
    // model's type statements follow their tensors by name.
    std::unordered_map<std::string, lowering::passes::DeclaredType> by_name;
    for (size_t t = 0; t < stored.tensors.size() && t < stored_declared.size(); ++t) {
      by_name.emplace(stored.tensors[t].name, stored_declared[t]);
    }
    lowering::passes::compact_tensors(stored);
    stored_declared.assign(stored.tensors.size(), {});
    for (size_t t = 0; t < stored.tensors.size(); ++t) {
      auto it = by_name.find(stored.tensors[t].name);
      if (it != by_name.end()) stored_declared[t] = it->second;
    }
    const kernels::KernelRegistry kernels = kernels::KernelRegistry::reference();
    lowering::OpenGraph open;
    open.graph = stored;
    open.declared = lowering::kept_declared(stored, stored_declared);
    open.targets = names;
    open.all_variants = emit.all_variants;
    open.keep_qdq_weights = emit.keep_qdq_weights;
    auto typed = lowering::typed_open_graph(open, imported.signature, kernels);
    if (!typed.ok()) {
      report.open_per_binding_why = typed.status().message();
    } else {
      auto compiled = lowering::compile_graph(*typed, targets, emit, options.progress, 0.3, 0.9);
      if (!compiled.ok()) return compiled.status().with_context(model.string());
      LOOM_RETURN_IF_ERROR(lowering::finish_native_open_program(compiled->program, stored,
                                                                imported.signature, stored_declared, names,
                                                                emit.all_variants, emit)
                               .with_context(model.string()));
      native_result = std::move(*compiled);
    }
  }
  Result<lowering::EmittedProgram> program =
      native_result.has_value()
          ? Result<lowering::EmittedProgram>(std::move(native_result->program))
      : imported.control_flow
          ? lowering::emit_staged_program(imported.graph, imported.signature, imported.declared, names,
                                          emit.all_variants, emit)
          : lowering::emit_open_program(imported.graph, imported.signature, imported.declared, names,
                                        emit.all_variants, emit);
  if (!program.ok()) return program.status().with_context(model.string());
  const ImportStats& stats = imported.stats;
  report.opset = stats.opset;
  report.model_nodes = stats.model_nodes;
  report.dead_nodes = stats.dead_nodes;
  report.frozen_inputs = stats.frozen_inputs;
  report.replaced_input_shapes = stats.replaced_input_shapes;
  report.value_inputs = imported.value_inputs;
  if (native_result.has_value()) {
    report.open_native = true;
    report.targets = native_result->targets;
    report.reference_nodes = native_result->reference_nodes;
    report.reference_op_types = native_result->reference_op_types;
    report.reference_variants = native_result->reference_variants;
  } else {
    for (const auto& plugin : targets) {
      TargetReport t;
      t.plugin = plugin->name();
      t.loader_key = plugin->manifest().loader_keys.empty() ? std::string() : plugin->manifest().loader_keys.front();
      report.targets.push_back(std::move(t));
    }
  }
  for (const ValueDef& v : imported.signature.inputs) {
    if (!lowering::has_open_dims(v)) continue;
    std::string dims;
    for (size_t d = 0; d < v.shape.size(); ++d) {
      dims += d ? ", " : "";
      if (v.shape[d] >= 0) {
        dims += std::to_string(v.shape[d]);
        continue;
      }
      dims += "?";
      const bool named = d < v.dim_symbols.size() && !v.dim_symbols[d].empty();
      const int64_t lo = d < v.dim_min.size() ? v.dim_min[d] : 0;
      const int64_t hi = d < v.dim_max.size() ? v.dim_max[d] : 0;
      if (named || lo != 0 || hi != 0) {
        dims += "(" + (named ? v.dim_symbols[d] : std::string()) + (named && (lo || hi) ? " " : "") +
                (lo || hi ? std::to_string(lo) + ".." + (hi ? std::to_string(hi) : "") : "") + ")";
      }
    }
    report.open_inputs.push_back(v.name + ": " + std::string(dtype_name(v.dtype)) + " [" + dims + "]");
  }
  LOOM_RETURN_IF_ERROR(write_archive(*program, options));
  report.params_bytes = program->params_bytes;
  LOOM_RETURN_IF_ERROR(program->writer.write_file(out).with_context("writing '" + out.string() + "'"));
  std::error_code ec;
  report.program_bytes = std::filesystem::file_size(out, ec);
  if (ec) report.program_bytes = 0;
  if (options.progress) options.progress("write", 1);
  return report;
}

// The steps of a compiled graph and the values crossing between them, by
// name, for CompileReport::subgraphs.
std::vector<SubgraphReport> describe_steps(const graph::Graph& graph,
                                           const lowering::GraphCompileResult& result,
                                           const std::vector<std::shared_ptr<host::LoadedPlugin>>& targets) {
  const lowering::Partition& partition = result.partition;
  std::vector<int32_t> step_of_node(graph.nodes.size(), -1);
  for (size_t g = 0; g < partition.groups.size(); ++g) {
    for (size_t n : partition.groups[g].nodes) step_of_node[n] = static_cast<int32_t>(g);
  }
  std::vector<int32_t> producer_step(graph.tensors.size(), -1);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (int32_t t : graph.nodes[n].outputs) {
      if (t >= 0) producer_step[static_cast<size_t>(t)] = step_of_node[n];
    }
  }
  // Whether a value is read outside step g (by another step or as a graph output).
  std::vector<std::vector<int32_t>> readers(graph.tensors.size());
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (int32_t t : graph.nodes[n].inputs) {
      if (t >= 0) readers[static_cast<size_t>(t)].push_back(step_of_node[n]);
    }
  }
  for (int32_t t : graph.outputs) {
    if (t >= 0) readers[static_cast<size_t>(t)].push_back(-2);
  }
  std::vector<SubgraphReport> steps;
  for (size_t g = 0; g < partition.groups.size(); ++g) {
    const Group& group = partition.groups[g];
    SubgraphReport step;
    if (group.target != kReferenceTarget) {
      step.plugin = targets[static_cast<size_t>(group.target)]->name();
      step.delegate = g < result.group_names.size() ? result.group_names[g] : std::string();
    }
    auto add_unique = [](std::vector<std::string>& list, const std::string& name) {
      if (std::find(list.begin(), list.end(), name) == list.end()) list.push_back(name);
    };
    for (size_t n : group.nodes) {
      const graph::Node& node = graph.nodes[n];
      step.nodes.push_back(node.name);
      step.op_types.push_back(node.op_type);
      for (int32_t t : node.inputs) {
        if (t < 0 || graph.tensors[static_cast<size_t>(t)].is_constant()) continue;
        if (producer_step[static_cast<size_t>(t)] == static_cast<int32_t>(g)) continue;
        add_unique(step.inputs, graph.tensors[static_cast<size_t>(t)].name);
      }
      for (int32_t t : node.outputs) {
        if (t < 0) continue;
        const auto& r = readers[static_cast<size_t>(t)];
        if (std::any_of(r.begin(), r.end(), [&](int32_t s) { return s != static_cast<int32_t>(g); })) {
          add_unique(step.outputs, graph.tensors[static_cast<size_t>(t)].name);
        }
      }
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

// The fixed-shape half of compiling: partition and compile `graph` for
// `targets`, write the program (and its archive) to `out`, report. `what`
// names the source in errors ("model.onnx", "graph 'main'").
Result<CompileReport> compile_fixed_graph(const graph::Graph& graph,
                                          const std::vector<std::shared_ptr<host::LoadedPlugin>>& targets,
                                          const EmitOptions& emit, const CompileOptions& options,
                                          const std::filesystem::path& out, const std::string& what,
                                          const kernels::KernelRegistry& kernels) {
  auto fail = [&](const Status& st) { return st.with_context(what); };
  auto result = lowering::compile_graph(graph, targets, emit, options.progress, 0.3, 0.9);
  if (!result.ok()) return fail(result.status());
  // A node kept because a plugin claimed its op, that no plugin then took.
  for (const Group& group : result->partition.groups) {
    if (group.target != kReferenceTarget) continue;
    for (size_t n : group.nodes) {
      const graph::Node& node = graph.nodes[n];
      if (kernels.find(node.op_type) == nullptr) {
        return fail(Status(StatusCode::kUnimplemented,
                           graph::describe_node(graph, n) + " (opset " + std::to_string(node.opset) +
                               "): no target plugin takes it and there is no reference kernel for it"));
      }
    }
  }

  if (options.progress) options.progress("write", 0.9);
  CompileReport report;
  report.targets = result->targets;
  report.reference_nodes = result->reference_nodes;
  report.reference_op_types = result->reference_op_types;
  report.reference_variants = result->reference_variants;
  report.subgraphs = describe_steps(graph, *result, targets);
  if (result->program.archive != nullptr) {
    LOOM_RETURN_IF_ERROR(write_archive(result->program, options));
    report.params_bytes = result->program.params_bytes;
  }
  LOOM_RETURN_IF_ERROR(result->program.writer.write_file(out).with_context("writing '" + out.string() + "'"));
  std::error_code ec;
  report.program_bytes = std::filesystem::file_size(out, ec);
  if (ec) report.program_bytes = 0;
  if (options.progress) options.progress("write", 1);
  return report;
}

// How a program for `options` is written to `out`.
Result<EmitOptions> emit_options_for(const CompileOptions& options, const std::filesystem::path& out) {
  EmitOptions emit;
  emit.params_scope = options.params_scope;
  emit.all_variants = options.variants == CompileOptions::Variants::kAll;
  emit.one_node_per_subgraph = options.one_node_per_subgraph;
  if (!options.params_out.empty()) {
    auto rel = archive_path_for(out, options.params_out);
    if (!rel.ok()) return rel.status();
    emit.archive_path = *rel;
  }
  return emit;
}

}  // namespace

Result<CompileReport> compile_onnx_file(host::PluginHost& plugins, const std::filesystem::path& model,
                                        const std::filesystem::path& out,
                                        const CompileOptions& options) {
  auto progress = [&](std::string_view stage, double f) {
    if (options.progress) options.progress(stage, f);
  };
  progress("import", 0);
  auto targets = lowering::load_targets(plugins, options.targets);
  if (!targets.ok()) return targets.status();
  LOOM_ASSIGN_OR_RETURN(EmitOptions emit, emit_options_for(options, out));

  auto loaded = onnx_io::Model::load_file(model);
  if (!loaded.ok()) return loaded.status();
  ImportOptions import_options;
  import_options.input_shapes = options.input_shapes;
  import_options.input_ranges = options.input_ranges;
  import_options.input_value = options.input_value;
  import_options.input_shapes_replace_declared = options.input_shapes_replace_declared;
  import_options.plugin_takes = [&](std::string_view domain, std::string_view op_type, int64_t opset) {
    return any_target_takes(*targets, domain, op_type, opset);
  };
  import_options.keep_qdq_weights = first_target_takes_dequantize(*targets);
  emit.keep_qdq_weights = import_options.keep_qdq_weights;  // open programs bind as the import did
  const kernels::KernelRegistry kernels = kernels::KernelRegistry::reference();
  auto imported = import_onnx(**loaded, import_options, kernels);
  if (!imported.ok()) return imported.status();
  progress("import", 0.3);

  if (imported->open) {
    return write_open_program(*imported, *targets, emit, options, out, model);
  }
  auto report = compile_fixed_graph(imported->graph, *targets, emit, options, out, model.string(), kernels);
  if (!report.ok()) return report.status();
  const ImportStats& stats = imported->stats;
  report->opset = stats.opset;
  report->model_nodes = stats.model_nodes;
  report->folded_nodes = stats.folded_nodes;
  report->fused_nodes = stats.fused_nodes;
  report->dead_nodes = stats.dead_nodes;
  report->frozen_inputs = stats.frozen_inputs;
  report->replaced_input_shapes = stats.replaced_input_shapes;
  return report;
}

Result<CompileReport> compile_graph_file(host::PluginHost& plugins, const graph::Graph& graph,
                                         const std::filesystem::path& out, const CompileOptions& options) {
  auto targets = lowering::load_targets(plugins, options.targets);
  if (!targets.ok()) return targets.status();
  LOOM_RETURN_IF_ERROR(graph::validate(graph).with_context("graph '" + graph.name + "'"));
  LOOM_ASSIGN_OR_RETURN(EmitOptions emit, emit_options_for(options, out));
  const kernels::KernelRegistry kernels = kernels::KernelRegistry::reference();
  auto report = compile_fixed_graph(graph, *targets, emit, options, out, "graph '" + graph.name + "'", kernels);
  if (!report.ok()) return report.status();
  report->model_nodes = graph.nodes.size();
  return report;
}

}  // namespace loom::compiler
