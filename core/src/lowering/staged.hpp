// Staged programs: models with control flow (If, Loop, Scan), format 1.5,
// docs/control-flow.md.
//
// A graph with control-flow nodes becomes a staged function: its straight-
// line runs of nodes are cut into parts, each an open-shape function of the
// program (a "loom.graph" artifact whose inputs take any dtype and rank),
// and each control-flow node becomes a control instruction whose bodies are
// functions of the program too: open-shape functions, or staged ones when a
// body has control flow of its own. The runtime runs a staged function on
// the host, step by step, binding each part and each body at the shapes and
// dtypes its inputs have when it runs; a part or a body is then partitioned
// and compiled for the target plugins like any open-shape program, so a
// Loop whose body runs on cpu-simd makes a delegate call per iteration.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.hpp"
#include "lowering/emit.hpp"
#include "lowering/graph_passes.hpp"
#include "lowering/open_shapes.hpp"
#include "loom/status.hpp"

namespace loom::lowering {

// Writes the program of `graph` (an open graph with control-flow nodes, as
// compiler::import_onnx leaves it) with `signature` as the arguments of its
// staged function "main"; `targets` and `all_variants` are how the runtime
// compiles each part and body (as for emit_open_program).
Result<EmittedProgram> emit_staged_program(const graph::Graph& graph, const OpenSignature& signature,
                                           std::span<const passes::DeclaredType> declared,
                                           const std::vector<std::string>& targets, bool all_variants,
                                           const EmitOptions& options);

// The sequence operators, which a staged function runs on the host
// (SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt,
// SequenceErase, SequenceLength, SplitToSequence, ConcatFromSequence).
bool is_sequence_op(std::string_view op_type);
// The optional operators (Optional, OptionalHasElement, OptionalGetElement),
// which a staged function runs on the host.
bool is_optional_op(std::string_view op_type);
// What a staged function's run_value_op runs: the optional operators, and
// an Identity of a value that may be a sequence or an optional (one whose
// input is the function's own untyped or non-tensor input, or made by a
// host step).
bool is_value_op(std::string_view op_type);
// The operators whose output shapes follow their operands' values
// (NonZero, Compress, Unique, NonMaxSuppression): a staged function runs
// them on the host with the reference kernels, so that what they compute
// from data flows on at whatever size it has (a detector's boxes after NMS).
bool is_value_shaped_op(std::string_view op_type);
// Whether a staged function runs `node` as a step of its own: control flow
// (a node with bodies), a sequence or optional operator, or a value-shaped
// one.
bool runs_on_host(const graph::Node& node);
// Whether some node of `graph` runs on the host (runs_on_host): the graph
// needs a staged program.
bool has_control_flow(const graph::Graph& graph);

}  // namespace loom::lowering
