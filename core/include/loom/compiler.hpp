// The compile side's public API: ONNX model in, Loom program out.
//
//   model.onnx ─ import (bind dynamic dims, shape inference, constant folding,
//                BatchNormalization into Conv, dead-node removal)
//              ─ partition (ask each target plugin which nodes it takes;
//                maximal subgraphs per plugin in order of preference; the
//                rest runs on the core's reference kernels)
//              ─ plugin compile (one delegate blob per subgraph)
//              ─ program (.loom), weights inline or in an .irpa archive
//
// Library: loom_compiler. It links protobuf and libonnx; the runtime never
// links it. Not thread-safe per call; separate calls may run concurrently on
// separate Runtimes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom {

namespace host {
class PluginHost;  // the plugins a Runtime found: Runtime::plugin_host()
}

namespace compiler {

// The bounds of an open input dimension (CompileOptions::input_ranges):
// 0 = no bound on that side.
struct DimRange {
  int64_t min = 0;
  int64_t max = 0;
};

struct CompileOptions {
  // Plugin names in order of preference ("cpu-simd"). A node goes to the
  // first listed plugin that supports it; nodes none of them takes run on
  // the core's reference kernels. Empty: everything on reference kernels
  // (default_targets() gives what the CLI compiles for when none is named).
  std::vector<std::string> targets;

  // Binds the dimensions of a model input: ("x", {1, 3, 224, 224}). A
  // listed shape must agree with the model's static dimensions, except that
  // -1 leaves a dimension open (even one the model fixes). A dimension the
  // model leaves open (dim_param, or unknown) that is not bound here stays
  // open: the program is then an open-shape program, compiled once for
  // every size (its subgraphs are compiled per binding at run time, through
  // the same target plugins; docs/dynamic-shapes.md). Fixed shapes give a
  // program that runs without that step.
  std::vector<std::pair<std::string, Shape>> input_shapes;
  // A shape in input_shapes that contradicts the model's (another rank, or
  // another size where the model fixes one) is an error naming the input,
  // unless this is set: the given shape then replaces the model's
  // declaration, and CompileReport::replaced_input_shapes says so. For
  // inputs that are known to be right where the model is wrong, such as
  // test data run the way ONNX's backend test runner runs it (it feeds the
  // data set's tensors and never reads the declared input shapes).
  bool input_shapes_replace_declared = false;
  // Bounds of open dimensions, one entry per dimension of the input (a
  // DimRange of {0, 0} for a dimension without bounds): ("x", {{}, {}, {32,
  // 2048}, {32, 2048}}). A bounded dimension must be open. Runs outside the
  // bounds are refused; the compiler checks the graph at both ends (shape
  // inference with every bounded dimension at its minimum, then at its
  // maximum) and refuses a contradiction naming the node.
  std::vector<std::pair<std::string, std::vector<DimRange>>> input_ranges;

  // Values of model inputs that decide shapes (for example an input fed
  // straight into Reshape's `shape`). The importer asks for one when shape
  // inference needs it. Given, the compiled program takes the value as a
  // constant, and the input is no longer an argument of the function
  // (CompileReport::frozen_inputs lists it). Null (or no callback): the
  // program is an open-shape program that binds that input's values, with
  // the shapes, per run (CompileReport::value_inputs lists it).
  std::function<const Tensor*(std::string_view input_name)> input_value;

  // Where weights go. Empty: inline in the program. Otherwise the path of an
  // IREE parameter archive (.irpa) written beside the program; the program
  // records its path relative to the program's folder, under `params_scope`.
  std::filesystem::path params_out;
  std::string params_scope = "model";

  // Variants per subgraph. kFirst: one, for the plugin that took its nodes.
  // kAll: also one for every other target that supports every node of the
  // subgraph (in the order of `targets`; a target that supports only some of
  // them gets none: the first target's partition sets the boundaries), and
  // one for the core's reference kernels (loader key "loom.reference"), so
  // that the program runs wherever any of them is present, and on any CPU.
  enum class Variants : uint8_t { kFirst, kAll };
  Variants variants = Variants::kFirst;

  // Every node a plugin takes becomes a subgraph of its own: no delegate
  // holds two nodes, so every value a plugin computes is a delegate output
  // that a run can observe, and plugins fuse nothing across nodes
  // (`loom compare --split-delegates`). Off: maximal subgraphs.
  bool one_node_per_subgraph = false;

  // Called as the work proceeds: a stage ("import", "partition", "compile",
  // "write") and the fraction done overall, in [0, 1].
  std::function<void(std::string_view stage, double fraction)> progress;
};

// What went where.
struct TargetReport {
  std::string plugin;
  std::string loader_key;
  size_t subgraphs = 0;
  size_t nodes = 0;
  std::vector<std::string> op_types;  // sorted, unique
  uint64_t blob_bytes = 0;
  // Variants::kAll: subgraphs another target took that this one also
  // compiled as a variant, and those it supports wholly but failed to compile.
  size_t extra_variants = 0;
  std::vector<std::string> variant_failures;  // "<subgraph>: <error>"
};

// One step of a fixed-shape program, in execution order: a delegate (the
// nodes one plugin took together) or one node on the reference kernels.
struct SubgraphReport {
  std::string delegate;  // the program's delegate name ("cpu-simd_0"); empty: reference kernels
  std::string plugin;    // the target plugin; empty: reference kernels
  std::vector<std::string> nodes;     // node names (ONNX names; "<Op>_<index>" when unnamed)
  std::vector<std::string> op_types;  // per node
  // The values (ONNX names) it reads that something else produces (model
  // inputs, other steps' outputs); constants are left out.
  std::vector<std::string> inputs;
  // The values it produces that another step reads or the model outputs.
  std::vector<std::string> outputs;
};

struct CompileReport {
  int64_t opset = 0;                    // default-domain opset of the model
  size_t model_nodes = 0;               // nodes in the ONNX graph
  size_t folded_nodes = 0;              // removed by constant folding
  size_t fused_nodes = 0;               // removed by fusions (BN into Conv)
  size_t dead_nodes = 0;                // removed as unused
  std::vector<TargetReport> targets;    // in the order of CompileOptions::targets
  size_t reference_nodes = 0;           // nodes left to reference kernels
  size_t reference_variants = 0;        // Variants::kAll: subgraphs with a reference variant
  std::vector<std::string> reference_op_types;  // sorted, unique
  std::vector<std::string> frozen_inputs;       // see CompileOptions::input_value
  // Inputs whose given shape replaced the model's declaration (see
  // CompileOptions::input_shapes_replace_declared): "like: [1] for the
  // declared [3, 4]".
  std::vector<std::string> replaced_input_shapes;
  // An open-shape program: the inputs with an open dimension, as
  // "x: f32 [1, 3, ?(height), ?(width)]". Then `targets` list no subgraphs:
  // they are compiled per binding at run time.
  std::vector<std::string> open_inputs;
  // An open-shape program because these inputs' values decide shapes (see
  // CompileOptions::input_value): "shape (decides the output shape of node
  // 'r', Reshape)".
  std::vector<std::string> value_inputs;
  // An open-shape program compiled once for every binding (ABI 1.2: every
  // target serves open shapes and the graph's structure does not follow the
  // binding): `targets` then list its subgraphs. False: compiled per
  // binding at run time, for the reason in `open_per_binding_why`.
  bool open_native = false;
  std::string open_per_binding_why;
  uint64_t program_bytes = 0;
  uint64_t params_bytes = 0;            // bytes written to params_out, 0 when inline
  // The steps of a fixed-shape program in execution order (empty for an
  // open-shape program): which values cross from one step to the next.
  std::vector<SubgraphReport> subgraphs;
};

// Compiles the ONNX model at `model` into the program file `out`, using
// `plugins` for the targets: the plugins a Runtime found
// (`runtime.plugin_host()`), so that compiling and running share one probe
// and one load of each plugin; the compiler needs nothing else of the
// Runtime. Errors name the model, and the node (name, op type, opset) or
// input where the problem is.
Result<CompileReport> compile_onnx_file(host::PluginHost& plugins, const std::filesystem::path& model,
                                        const std::filesystem::path& out,
                                        const CompileOptions& options = {});

// The targets to compile for when none is named: every plugin of `plugins`
// that loads and has compile entries, ordered as policy:prefer-accelerator
// orders their devices (accelerators, then GPUs, CPUs and virtual devices;
// found order within a kind), each plugin at the place of its best device.
// `loom compile` without --target, and loom.compile() without targets, use
// them with Variants::kAll, so that the program runs on any of them, and on
// the reference kernels. Empty when no plugin compiles.
std::vector<std::string> default_targets(host::PluginHost& plugins);

}  // namespace compiler
}  // namespace loom
