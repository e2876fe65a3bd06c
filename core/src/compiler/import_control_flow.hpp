// The importer's control flow (docs/control-flow.md): what a subgraph reads
// from enclosing scopes, the operand counts of If, Loop and Scan, and an If
// on a constant inlined at compile time.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "compiler/import.hpp"
#include "graph/graph.hpp"
#include "kernels/kernel.hpp"
#include "loom/status.hpp"

namespace onnx {
class GraphProto;
class TypeProto;
}  // namespace onnx

namespace loom::compiler {

// The kind of a value whose ONNX type is a sequence or an optional (of
// tensors, or an optional sequence of tensors), and its elements' dtype
// (kInvalid when unstated); an error naming `what` for any other type that
// is not a tensor (maps, sequences of sequences, ...). A tensor type gives
// kTensor.
struct NonTensorType {
  ValueKind kind = ValueKind::kTensor;
  DType dtype = DType::kInvalid;
};
Result<NonTensorType> non_tensor_type(const ::onnx::TypeProto& type, const std::string& what);

// Appends to `out` (once each) the names `g` reads that it does not define
// itself (inputs, initializers, node outputs), its own subgraphs included:
// what it captures from enclosing scopes.
void free_names(const ::onnx::GraphProto& g, std::vector<std::string>& out);

// The operand and body counts of an If, Loop or Scan node (with its bodies
// read and its captures appended), checked against ONNX's rules; `outputs`
// is the node's output count in the model, `desc` names it for messages.
Status check_control_node(const graph::Node& node, size_t outputs, const std::string& desc);

// Replaces every If whose condition is a constant (in `g` and its bodies)
// by the nodes of the branch it takes; returns how many.
size_t inline_constant_ifs(graph::Graph& g);

// Every op of `g` and of its bodies has a reference kernel, or a target
// plugin that takes it (then `declared`, by tensor, must state its outputs'
// static types; null inside bodies), or runs on the host in a staged
// program (control flow, sequence operators): what an open or staged import
// checks before it keeps the graph as read.
Status check_open_ops(const graph::Graph& g, const std::vector<lowering::passes::DeclaredType>* declared,
                      const ImportOptions& options, const kernels::KernelRegistry& kernels);

}  // namespace loom::compiler
