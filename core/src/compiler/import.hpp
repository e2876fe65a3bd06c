// ONNX import: an onnx_io::Model in, a static-shape loom::graph::Graph out,
// ready to partition; or, when an input dimension stays open, an open graph
// for an open-shape program (ImportedModel::open).
//
// Steps, in order: read the graph (opsets 1-21 of the default domain, nodes
// of opsets 1-6 in their opset-7 form, import_opsets.hpp; initializers and
// Constant nodes become constant tensors); bind dynamic
// input dimensions from ImportOptions::input_shapes; infer every tensor's
// dtype and shape with the reference kernels' infer functions (asking
// ImportOptions::input_value for a model input whose values decide a shape);
// fold every node whose inputs are all constant by running its reference
// kernel (which removes the Constant/Shape/Gather/Concat/Reshape chains
// exporters emit); fold BatchNormalization into a preceding Conv where that
// is exact; remove nodes whose outputs nobody uses (and, before inference,
// bypass Identity and inference-mode Dropout).
//
// Errors name the model, and the node (name, op type, opset) or input. An
// operator, opset, attribute or input type Loom cannot handle is
// kUnimplemented ("unsupported"); a malformed model is kInvalidArgument.
//
// The passes live in import_passes.hpp (shape_inference.cpp,
// batchnorm_fold.cpp, dead_nodes.cpp); attribute conversion in
// import_attributes.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graph/graph.hpp"
#include "kernels/kernel.hpp"
#include "loom/compiler.hpp"
#include "lowering/graph_passes.hpp"
#include "lowering/open_shapes.hpp"
#include "loom/status.hpp"
#include "loom/tensor.hpp"
#include "onnx/onnx_model.hpp"

namespace loom::compiler {

struct ImportOptions {
  // As CompileOptions::input_shapes / input_ranges / input_value /
  // input_shapes_replace_declared (loom/compiler.hpp).
  std::vector<std::pair<std::string, Shape>> input_shapes;
  std::vector<std::pair<std::string, std::vector<DimRange>>> input_ranges;
  std::function<const Tensor*(std::string_view input_name)> input_value;
  bool input_shapes_replace_declared = false;
  // Ops without a reference kernel that a target plugin claims it can run
  // (the partitioner asks before importing): import keeps such a node when
  // the model states its output types (value_info / graph outputs) instead
  // of failing. Empty: every op needs a reference kernel.
  std::function<bool(std::string_view domain, std::string_view op_type, int64_t opset)>
      plugin_takes;
  // See passes::InferOptions::keep_qdq_weights.
  bool keep_qdq_weights = false;
  // Turn passes off (tests, debugging).
  bool fold_constants = true;
  bool fold_batch_norm = true;
  bool remove_dead_nodes = true;  // also bypasses Identity and inference-mode Dropout
};

struct ImportStats {
  int64_t opset = 0;           // default-domain opset of the model
  size_t model_nodes = 0;      // nodes in the ONNX graph
  size_t folded_nodes = 0;     // removed by constant folding
  size_t fused_nodes = 0;      // removed by BatchNormalization folding
  size_t dead_nodes = 0;       // removed as unused
  size_t identity_nodes = 0;   // Identity / inference Dropout bypassed (with remove_dead_nodes)
  std::vector<std::string> frozen_inputs;  // inputs made constant via input_value
  // As CompileReport::replaced_input_shapes.
  std::vector<std::string> replaced_input_shapes;
};

struct ImportedModel {
  // Graph inputs: the model's inputs that are not initializers and were not
  // frozen, in model order, with their ONNX names. Graph outputs: the
  // model's outputs, in order, with their ONNX names. Constants carry their
  // initializer name (or the producing node's output name when folded).
  graph::Graph graph;
  ImportStats stats;
  // Some input dimension is left open (neither the model nor input_shapes
  // fixes it): `graph` is then an open graph (graph::ValidateOptions::open)
  // that only the reading passes ran on (Identity bypass, dead nodes), for an
  // open-shape program (lowering/open_shapes.hpp); `signature` gives its
  // inputs and outputs with their open dimensions, symbols and bounds, and
  // `declared` the model's statements about tensors, by tensor index.
  bool open = false;
  // Open because the values of these inputs decide shapes and input_value
  // did not give them: "shape (decides the output shape of node 'r',
  // Reshape)". The runtime binds them per run, with the shapes.
  std::vector<std::string> value_inputs;
  lowering::OpenSignature signature;
  std::vector<lowering::passes::DeclaredType> declared;
  // Some node has bodies (If, Loop, Scan): `graph` is kept open as above,
  // for a staged program (lowering/staged.hpp), whatever its inputs' shapes.
  bool control_flow = false;
};

Result<ImportedModel> import_onnx(const onnx_io::Model& model, const ImportOptions& options,
                                  const kernels::KernelRegistry& kernels);

}  // namespace loom::compiler
