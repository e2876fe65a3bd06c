// Program emission: a partitioned graph and its compiled blobs in, a Loom
// program (ProgramWriter) out, with one function "main".
//
//   - values are named by the ONNX tensor names; main's inputs and outputs
//     are the graph's, in order, with the same reflection JSON the other
//     program writers produce ({"v":1,"a":..,"r":..,"names":..});
//   - a reference node becomes a kernel_call (op type, attributes, opset,
//     kAbsentValue for an operand left out);
//   - a plugin group becomes a delegate_call of a delegate whose one variant
//     is the blob, stored as an artifact under the plugin's loader key;
//   - constants become program parameters when something in the program
//     reads them (a kernel, a delegate's parameter inputs, a result):
//     inline segments, or entries of an .irpa archive (EmitOptions);
//   - a result that is a constant, a function input or another result gets
//     its own value, filled by a move;
//   - memory plan: intermediates get arena slots, first-fit over slots whose
//     last reader ran before the writer (liveness by instruction index).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lowering/partition.hpp"
#include "graph/graph.hpp"
#include "host/compile_entries.hpp"
#include "loom/irpa.hpp"
#include "loom/artifacts.hpp"
#include "loom/program.hpp"
#include "loom/status.hpp"

namespace loom::lowering {

// What the plugin made of one group.
struct CompiledGroup {
  std::string plugin;
  Subgraph subgraph;
  host::CompiledBlob blob;
  // Further variants of the same subgraph, in order of preference:
  // (plugin, blob).
  std::vector<std::pair<std::string, host::CompiledBlob>> alternatives;
};


struct EmitOptions {
  std::string producer = "loom-compiler";
  // Empty: weights inline. Otherwise the .irpa archive's path as the
  // program records it (relative to the program's folder, no '..').
  std::string archive_path;
  std::string params_scope = "model";
  // CompileOptions::Variants::kAll: compile_graph also compiles each
  // subgraph for every other target that supports all of its nodes, and the
  // emitter gives every delegate a last variant for the reference kernels
  // (a function "<delegate>.reference" with the subgraph's nodes) when they
  // have each of its ops.
  bool all_variants = false;
  // CompileOptions::one_node_per_subgraph, read by compile_graph when it
  // partitions.
  bool one_node_per_subgraph = false;
  // Open-shape programs: the graph artifact records that a binding leaves
  // the DequantizeLinear of a QDQ group's constant weight unfolded
  // (InferOptions::keep_qdq_weights), as the compiler decided for the
  // targets it had (metadata kOpenQdqWeightsKey).
  bool keep_qdq_weights = false;
};

struct EmittedProgram {
  ProgramWriter writer;
  // The archive to write beside the program when EmitOptions::archive_path
  // is set; null otherwise.
  std::unique_ptr<io::irpa::ArchiveBuilder> archive;
  // The constants the archive builder refers to (it keeps views, not
  // copies), kept alive until the archive is written.
  std::vector<graph::ConstantBytes> archive_bytes;
  uint64_t params_bytes = 0;  // bytes of the archive's parameters
  size_t reference_variants = 0;  // delegates given a reference variant
};

// An empty program with `options.producer`, and an archive builder when
// `options.archive_path` is set.
EmittedProgram start_program(const EmitOptions& options);

// The kernel call of `node`: its operator, attributes, opset and operands,
// `value` giving the program value of each of its tensors (a left-out
// operand becomes kAbsentValue). Staged functions reuse it for their host
// and control steps.
Result<InstructionDef> kernel_instruction(const graph::Node& node,
                                          const std::function<Result<uint32_t>(int32_t)>& value);

// Adds constant `t` as a parameter of `out`'s program under its tensor name:
// inline in a segment, or in `out.archive` when there is one. Returns its
// index in ProgramDef::parameters.
Result<uint32_t> add_parameter(EmittedProgram& out, const graph::Tensor& t, const EmitOptions& options);

// `compiled[g]` holds group g's blob for plugin groups (empty optional for
// reference groups).
Result<EmittedProgram> emit_program(const graph::Graph& graph, const Partition& partition,
                                    const std::vector<std::optional<CompiledGroup>>& compiled,
                                    const EmitOptions& options);

}  // namespace loom::lowering
