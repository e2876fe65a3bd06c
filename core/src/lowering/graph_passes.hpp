// The graph passes that make an imported graph ready to partition (private
// to loom_lowering): the compiler's importer runs them once shapes are bound,
// and the runtime runs them again for each binding of an open-shape program.
// Each works on a graph::Graph in place:
//   infer_and_fold   dtype/shape of every node output (reference kernels'
//                    infer), folding nodes whose operands are all constant;
//   fold_batch_norm  Conv followed by an inference BatchNormalization;
//   remove_dead_nodes / compact_tensors  what no graph output needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include <functional>
#include <string_view>

#include "graph/graph.hpp"
#include "kernels/kernel.hpp"
#include "loom/status.hpp"

namespace loom::lowering::passes {

// What the model states about a tensor (value_info, graph inputs/outputs).
// A dimension of -1 is unknown (dim_param or left out).
struct DeclaredType {
  DType dtype = DType::kInvalid;  // kInvalid: not stated
  bool has_shape = false;
  Shape dims;
  // Per dimension, the model's name for an unknown one (dim_param); "" for
  // a known or anonymous one. Empty when no dimension is named.
  std::vector<std::string> symbols;

  // dtype stated and every dimension known.
  bool is_static() const;
};

// "node 'conv1' (Conv, opset 13)"; a domain other than the default one is
// named too ("node 'n' (com.acme.Foo, opset 1)").
std::string describe(const graph::Node& node);

// Set by infer_and_fold when a node's output shape depends on the values of
// `tensor`, which is not constant: the importer then asks for the values of
// the model inputs it is computed from and runs the pass again.
struct NeedsValue {
  size_t node = 0;
  int32_t tensor = graph::kNoTensor;
  Status cause;  // the infer function's needs_constant() error
};

// What infer_and_fold needs beyond the graph.
struct InferOptions {
  // Ops without a reference kernel that a target plugin claims it can run:
  // such a node is kept when `declared` states its output types, instead of
  // failing. Empty: every op needs a reference kernel.
  std::function<bool(std::string_view domain, std::string_view op_type, int64_t opset)>
      plugin_takes;
  // Leaves the DequantizeLinear of a constant weight or bias unfolded when it
  // feeds a QDQ group (DequantizeLinear of the activation -> Conv,
  // ConvTranspose, MatMul or Gemm -> optionally Relu or Clip ->
  // QuantizeLinear), so that a plugin
  // that runs such groups in int8 sees the quantized weight (cpu-simd's QDQ
  // fusion). The driver sets it when the most preferred target plugin takes
  // DequantizeLinear.
  bool keep_qdq_weights = false;
};

struct InferStats {
  size_t folded_nodes = 0;
};

// Fills dtype and shape of every node output in topological order. `declared`
// is indexed by tensor (may be shorter than g.tensors). With `fold`, a node
// whose present operands are all constant is run through its reference
// kernel (Shape and Size whenever their operand's shape is known) and
// removed, its outputs becoming constants; random operators and outputs over
// kMaxFoldBytes are left for run time. Returns OK with `needs` set when a
// shape depends on a non-constant value (the graph is then half done and
// must be discarded).
inline constexpr uint64_t kMaxFoldBytes = uint64_t{64} << 20;
Status infer_and_fold(graph::Graph& g, std::span<const DeclaredType> declared,
                      const kernels::KernelRegistry& kernels, const InferOptions& options,
                      bool fold, InferStats& stats, std::optional<NeedsValue>& needs);

// Whether a graph input may have its values bound per run of an open-shape
// program (frozen into the specialization) when they decide a shape: one of
// at most kMaxValueInputElements elements, whatever its rank (Reshape's
// shape, Slice's starts, Range's limits, TopK's k, and the small tensors whose
// values size the outputs of NonZero, Compress, Unique, NonMaxSuppression).
// A larger input is data, and a shape that depends on it is refused.
inline constexpr uint64_t kMaxValueInputElements = 4096;
bool binds_values_per_run(const graph::Tensor& input);

// The graph inputs (not constants) that tensor `t` is computed from, in
// index order: what must be known to fold it.
std::vector<int32_t> source_inputs(const graph::Graph& g, int32_t t);

// Folds BatchNormalization (inference form, constant f32 parameters) into the
// Conv that alone feeds it (constant f32 weights and bias). Returns the
// number of BatchNormalization nodes removed.
Result<size_t> fold_batch_norm(graph::Graph& g);

// Removes Identity and inference-mode Dropout nodes whose output is not a
// graph output, pointing their readers at their input (before shape
// inference, so that neither needs a kernel). Returns how many.
size_t bypass_identities(graph::Graph& g);

// Removes nodes none of whose outputs reach a graph output; returns how many.
size_t remove_dead_nodes(graph::Graph& g);

// Drops tensors nothing refers to (unused constants, outputs of removed
// nodes) and renumbers the rest, keeping their order.
void compact_tensors(graph::Graph& g);

}  // namespace loom::lowering::passes
