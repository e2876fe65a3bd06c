// Open-shape functions: a program compiled once for every size of the
// dimensions its model leaves open, and specialized per binding at run time.
//
//   compile side   emit_open_program: the imported graph, before any shape is
//                  bound, becomes the function's "loom.graph" artifact
//                  (graph.fbs, an open graph: its values carry no types
//                  yet); its weights become program parameters (inline or
//                  in the .irpa archive) that the artifact names; the
//                  function's signature keeps each open dimension as -1 with
//                  its symbol and bounds (ValueDef::dim_symbols/dim_min/
//                  dim_max) and has no instructions of its own.
//   run side       decode_open_graph reads the artifact back, binding the
//                  parameters; bind_open_graph binds the input shapes and
//                  runs the graph passes (shape inference with constant
//                  folding, BatchNormalization into Conv, dead nodes);
//                  specialize_open_graph then partitions and compiles the
//                  bound graph through the target plugins' compile entries
//                  (the same compile_graph as the compiler) into an ordinary
//                  fixed-shape program, which the runtime loads and caches
//                  per binding (docs/dynamic-shapes.md).
//
// check_binding validates a binding against the signature; its errors name
// the input, the dimension (and symbol) and both values.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "host/plugin_host.hpp"
#include "kernels/kernel.hpp"
#include "lowering/emit.hpp"
#include "lowering/graph_passes.hpp"
#include "loom/program.hpp"
#include "loom/status.hpp"

namespace loom::lowering {

// The artifact metadata keys of a "loom.graph" artifact.
inline constexpr std::string_view kOpenTargetsKey = "targets";    // "cpu-simd,vulkan-compute"
inline constexpr std::string_view kOpenVariantsKey = "variants";  // "first" or "all"
// "kept": every binding leaves the DequantizeLinear of a QDQ group's constant
// weight unfolded (absent, in programs before it: "folded").
inline constexpr std::string_view kOpenQdqWeightsKey = "qdq_weights";
inline constexpr uint32_t kOpenGraphFormatVersion = 1;

struct OpenSignature {
  // Name, dtype, shape (-1 = open) and, per dimension, symbol and bounds.
  std::vector<ValueDef> inputs;   // the graph's inputs, in order
  std::vector<ValueDef> outputs;  // the graph's outputs; dtype kInvalid when unknown
};

// Whether a value of the signature has an open dimension.
bool has_open_dims(const ValueDef& value);

// Writes a program whose one function "main" is the open-shape function of
// `graph` (an open graph: inputs may have open dimensions, node outputs need
// no type; `declared` gives, by tensor, the model's static statement of a
// tensor's type, kept for the outputs of ops that no reference kernel
// implements). `targets` and `all_variants` are how the runtime compiles each
// binding (CompileOptions::targets and ::variants).
Result<EmittedProgram> emit_open_program(const graph::Graph& graph, const OpenSignature& signature,
                                         std::span<const passes::DeclaredType> declared,
                                         const std::vector<std::string>& targets,
                                         bool all_variants, const EmitOptions& options);

// The graph of an open-shape function, read back from its artifact.
struct OpenGraph {
  graph::Graph graph;   // inputs: the function's; weights bound as constants
  std::vector<passes::DeclaredType> declared;  // by tensor
  std::vector<std::string> targets;
  bool all_variants = false;
  // Bindings keep the DequantizeLinear of a QDQ group's constant weight
  // (passes::InferOptions::keep_qdq_weights): the target's int8 kernels read
  // the 8-bit weight instead of a folded f32 copy.
  bool keep_qdq_weights = false;
};

// Reads the artifact `bytes` of a function with `function_inputs` inputs.
// `parameter(name)` gives the bytes of the program parameter the artifact
// names, checked against the artifact's dtype and shape. Errors name what is
// wrong ("graph IR: ...", "parameter 'w': ...").
Result<OpenGraph> decode_open_graph(
    std::span<const std::byte> bytes, const std::vector<KeyValue>& metadata,
    size_t function_inputs,
    const std::function<Result<graph::ConstantBytes>(const std::string& name)>& parameter);

// Checks that `shapes` (one per input of `signature`) fit it: rank, fixed
// dimensions, bounds, and inputs that share a symbol agreeing on it.
// INVALID_ARGUMENT naming the input, the dimension and symbol, and both
// values.
Status check_binding(const OpenSignature& signature, std::span<const Shape> shapes);
// The part of check_binding that concerns one input alone.
Status check_input_shape(const ValueDef& input, std::span<const int64_t> shape);

// The bytes of each input of a run (dtype and shape as bound), for inputs
// whose values decide shapes; empty when there are none to give.
using InputValues = std::span<const std::span<const std::byte>>;

struct BoundGraph {
  graph::Graph graph;
  // Inputs (indices into the function's) whose values decide a shape
  // (Reshape's `shape`, Slice's `starts`, TopK's `k`, Range, ...): made
  // constants with the run's values, so they are no longer inputs of
  // `graph`. A binding is then these values as well as the shapes.
  std::vector<size_t> frozen_inputs;
};

// The graph with its inputs bound to `shapes`, every shape inferred, constants
// folded (including the Shape/Gather/Concat chains that depend on the bound
// sizes), BatchNormalization folded into Conv, dead nodes removed. A shape
// that depends on an input's values takes them from `values` (that input is
// frozen) or, without values, is UNIMPLEMENTED naming the node. A tensor over
// `max_tensor_bytes` at this binding is RESOURCE_EXHAUSTED naming it and its
// node, before anything is compiled or allocated.
Result<BoundGraph> bind_open_graph(const OpenGraph& open, std::span<const Shape> shapes,
                                   const kernels::KernelRegistry& kernels, uint64_t max_tensor_bytes,
                                   InputValues values = {});

struct Specialization {
  std::vector<std::byte> program;  // an ordinary program file in memory
  std::vector<size_t> frozen_inputs;  // see BoundGraph
  // Targets of the artifact that this host cannot compile for ("vulkan-
  // compute: not found ..."); their nodes went to the next target or to the
  // reference kernels.
  std::vector<std::string> skipped_targets;
};

// bind_open_graph, then partition and compile across the artifact's targets
// that `host` has (compile_graph), with weights inline.
Result<Specialization> specialize_open_graph(const OpenGraph& open, std::span<const Shape> shapes,
                                             host::PluginHost& host,
                                             const kernels::KernelRegistry& kernels,
                                             uint64_t max_tensor_bytes, InputValues values = {});

// ---------------------------------------------------------------------------
// Native open-shape programs (ABI 1.2, docs/dynamic-shapes.md). When every
// target serves open shapes (LOOM_PLUGIN_CAP_OPEN_SHAPES) and the graph's
// structure does not depend on the binding, the function is compiled once:
// its instructions (kernel calls and delegate calls on open-shape blobs)
// have values with open dimensions, and the runtime binds their shapes per
// run by shape inference over the "loom.graph" artifact instead of
// compiling again.

// The two bindings at which the compile side (and the runtime, to check a
// binding against what was compiled) binds the graph to learn which
// dimensions of each tensor follow the open ones: each open dimension (the
// same value for dimensions that share a symbol) at 96 and then 160, kept
// inside declared bounds.
std::vector<std::vector<Shape>> probe_bindings(const OpenSignature& signature);

// Reshape targets that follow the binding only where ONNX's own spelling
// says so: a Reshape whose target is a constant used by it alone (a folded
// Shape/Gather/Concat chain such as [N, -1]) with allowzero 0, differing
// between `a` and `b` (two bindings of one open graph), gets at both the
// one target that gives each binding the shape its own gave: entries equal
// at both kept, an entry equal to the data's dimension at the same index at
// both made 0 (copy), at most one other made -1 (inferred). Targets that
// have no such spelling are left, and compare_bindings reports them.
void unify_reshape_targets(graph::Graph& a, graph::Graph& b);

// The same at run time: `reference` (a binding after
// unify_reshape_targets) lends `bound` its spelled targets where they give
// `bound`'s data exactly the shape `bound`'s own target gives, so that
// compare_bindings sees one structure; a target that would give another
// shape stays, and the binding is compiled on its own.
void adopt_reshape_targets(const graph::Graph& reference, graph::Graph& bound);

// Every spelling above and the Resize one, in that order: what the
// compiler and the runtime call. A Resize (opset 11+) to a constant 'sizes'
// used by it alone (F.interpolate(x, size=y.shape[-2:]) as exporters write
// it), differing between `a` and `b`, reads instead, at both, the 'scales'
// sizes/X of every axis when they are the same at both bindings, exactly
// representable as floats, and give back the sizes (floor(X * scale)): the
// same sampling, as the scale of a Resize to sizes is sizes/X.
void unify_shape_targets(graph::Graph& a, graph::Graph& b);

// The run-time side of unify_shape_targets: adopt_reshape_targets, and a
// Resize that `reference` reads by scales reads them at `bound` too when
// they give `bound`'s X exactly `bound`'s own sizes with the same sampling;
// otherwise it keeps its sizes, and the binding is compiled on its own.
void adopt_shape_targets(const graph::Graph& reference, graph::Graph& bound);

// "" when `a` and `b`, two bindings of one open graph, have the same
// structure: the same nodes (op, attributes, operands), the same tensors
// (names, dtypes, ranks) and the same constant values, differing in
// dimensions only; otherwise what differs first ("node 3 (Reshape): its
// constant operand 'shape' differs").
std::string compare_bindings(const graph::Graph& a, const graph::Graph& b);

// The graph as every binding sees it: bound at the probe bindings, which
// must agree on structure (compare_bindings), with each dimension that
// differs between them open (-1). UNIMPLEMENTED saying why when the
// structure follows the binding (shapes computed into constants, values
// that decide shapes) or a probe does not bind.
Result<graph::Graph> typed_open_graph(const OpenGraph& open, const OpenSignature& signature,
                                      const kernels::KernelRegistry& kernels);

// What the "loom.graph" artifact keeps of the model's type statements, by
// tensor: those about outputs of ops without a reference kernel (the rest is
// inferred at each binding). The runtime reads the graph back with exactly
// these, so the compiler probes with them too.
std::vector<passes::DeclaredType> kept_declared(const graph::Graph& graph,
                                                std::span<const passes::DeclaredType> declared);

// Adds to `program` the "loom.graph" artifact of `graph` (see
// emit_open_program) and its parameters (one per name: shared with those the
// program has already); returns the artifact's index.
Result<uint32_t> add_open_graph_artifact(EmittedProgram& program, const graph::Graph& graph,
                                         std::span<const passes::DeclaredType> declared,
                                         const std::vector<std::string>& targets, bool all_variants,
                                         const EmitOptions& options);

// Makes `compiled`'s function "main" (from compile_graph on a
// typed_open_graph) a native open-shape function: the graph artifact of
// `graph` (the open graph before any binding) and the signature's symbols
// and bounds on its inputs and outputs.
Status finish_native_open_program(EmittedProgram& compiled, const graph::Graph& graph,
                                  const OpenSignature& signature,
                                  std::span<const passes::DeclaredType> declared,
                                  const std::vector<std::string>& targets, bool all_variants,
                                  const EmitOptions& options);

}  // namespace loom::lowering
