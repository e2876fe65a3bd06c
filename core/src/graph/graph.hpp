// The compiler's in-memory operator graph: what the ONNX importer produces,
// what the passes (shape inference, constant folding, BN folding, dead-node
// removal) rewrite, what the partitioner cuts into subgraphs, and what
// graph_codec turns into schemas/graph.fbs bytes for a plugin.
//
// ONNX semantics throughout: a node keeps its op type, domain, the opset it
// was written for and its attributes as ONNX names them. Shapes are static
// once the importer has bound the dynamic dimensions.
//
// Compile side only (the runtime does not link it), but it needs nothing
// beyond loom_common: no protobuf.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loom/program.hpp"
#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom::graph {

// A node input that marks an optional operand left out.
inline constexpr int32_t kNoTensor = -1;

// The bytes of a constant, shared between graphs (a subgraph refers to the
// same weights as the whole model) and never changed once made.
using ConstantBytes = std::shared_ptr<const std::vector<std::byte>>;

struct Tensor {
  std::string name;  // unique within the graph
  DType dtype = DType::kInvalid;
  // Static, except in an open graph (ValidateOptions::open): there a tensor
  // that is not a constant may have dtype kInvalid (not inferred yet) and
  // open dimensions (-1).
  Shape shape;
  // A constant (initializer, Constant node, folded value): its bytes,
  // dtype_size(dtype) * elements long. Null for every other tensor.
  ConstantBytes data;

  bool is_constant() const { return data != nullptr; }
};

struct Graph;

// A subgraph attribute of a control-flow node (If's then_branch and
// else_branch, Loop's and Scan's body). Its graph's inputs are the
// operator's own body inputs followed by one input per capture of the node
// (Node::captures), in the same order: outer-scope values are passed
// explicitly, never looked up by name.
struct Body {
  std::string attribute;  // "then_branch", "else_branch", "body"
  std::shared_ptr<const Graph> graph;
};

struct Node {
  std::string name;     // may be empty in ONNX; error messages then use the index
  std::string op_type;  // "Conv"
  std::string domain;   // empty = default ONNX domain ("ai.onnx")
  int64_t opset = 0;    // the opset of `domain` the model imports
  std::vector<AttributeDef> attributes;
  std::vector<int32_t> inputs;   // tensor indices; kNoTensor = left out
  std::vector<int32_t> outputs;  // tensor indices
  // Control flow (If, Loop, Scan): the bodies, and how many of the last
  // `inputs` are outer-scope tensors the bodies capture (docs/control-flow.md).
  std::vector<Body> bodies;
  int32_t captures = 0;
};

// Whether a node is control flow with bodies (If, Loop, Scan).
inline bool has_bodies(const Node& node) { return !node.bodies.empty(); }

struct Graph {
  std::string name;
  std::vector<Tensor> tensors;
  std::vector<Node> nodes;       // topological order
  std::vector<int32_t> inputs;   // tensor indices of the graph's inputs
  std::vector<int32_t> outputs;  // tensor indices of the graph's outputs

  // Appends a tensor and returns its index.
  int32_t add_tensor(Tensor tensor);
};

// "node 7 ('conv1', Conv)": how messages name a node.
std::string describe_node(const Graph& graph, size_t node);

// Checks the invariants every pass keeps and graph.fbs promises:
// indices in range, unique tensor names, each tensor produced once (by one
// node, or being an input or a constant, not two of these), nodes in
// topological order, outputs produced, constants sized to their dtype and
// shape, shapes without negative dimensions. Errors name node and tensor.
struct ValidateOptions {
  // An open graph: the one an open-shape program keeps (lowering/
  // open_shapes.hpp), before its inputs are bound. Tensors other than
  // constants need no dtype and may have open dimensions (-1).
  bool open = false;
};
Status validate(const Graph& graph, const ValidateOptions& options = {});

}  // namespace loom::graph
