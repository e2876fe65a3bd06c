// Compiling a graph that did not come from an ONNX file: what
// compile_onnx_file does after its import, for a fixed-shape graph built
// elsewhere (loom compare rebuilds one from a program's reference
// functions, to compile every node of a delegate on its own).
#pragma once

#include <filesystem>

#include "graph/graph.hpp"
#include "loom/compiler.hpp"
#include "loom/status.hpp"

namespace loom::compiler {

// Compiles `graph` (fixed shapes, valid per graph::validate) for
// options.targets into the program file `out`, as compile_onnx_file would
// compile the same graph imported from a model. Of `options`, the import
// settings (input_shapes, input_ranges, input_value) are not used. The
// report's import counts are zero except model_nodes (the graph's nodes).
// Errors name the graph ("graph 'main': ...") and the node.
Result<CompileReport> compile_graph_file(host::PluginHost& plugins, const graph::Graph& graph,
                                         const std::filesystem::path& out, const CompileOptions& options);

}  // namespace loom::compiler
