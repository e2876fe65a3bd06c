// The compile pipeline behind compile_onnx_file (loom/compiler.hpp), split
// so that tests can run it on hand-built graphs: compile_graph takes an
// imported graph, asks the target plugins, partitions, compiles the
// subgraphs and emits the program.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "lowering/emit.hpp"
#include "graph/graph.hpp"
#include "host/plugin_host.hpp"
#include "loom/compiler.hpp"
#include "loom/status.hpp"

namespace loom::lowering {

// The target plugins of CompileOptions::targets, loaded, in order. An
// unknown name is an error listing the plugins found; so is a plugin
// without compile entries.
Result<std::vector<std::shared_ptr<host::LoadedPlugin>>> load_targets(
    host::PluginHost& host, const std::vector<std::string>& targets);

using compiler::TargetReport;  // a plain struct of the compiler's public header

struct GraphCompileResult {
  EmittedProgram program;
  Partition partition;
  // Per group of `partition`: its delegate's name ("cpu-simd_0"); empty for
  // a reference group.
  std::vector<std::string> group_names;
  // Per target (same order as the plugins given): what went there.
  std::vector<TargetReport> targets;
  size_t reference_nodes = 0;
  std::vector<std::string> reference_op_types;
  size_t reference_variants = 0;
};

// `archive_path`: as EmitOptions::archive_path. `progress` may be empty; it
// gets fractions in [from, to].
Result<GraphCompileResult> compile_graph(
    const graph::Graph& graph, const std::vector<std::shared_ptr<host::LoadedPlugin>>& targets,
    const EmitOptions& emit,
    const std::function<void(std::string_view, double)>& progress = {}, double from = 0,
    double to = 1);

}  // namespace loom::lowering
