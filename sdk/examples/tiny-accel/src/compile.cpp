// tiny-accel's compiler: graph.fbs (as a verified loom::sdk::GraphView) in,
// a Program out. supported() is the one place that decides which nodes the
// plugin takes; compile_supported claims exactly those, and compile refuses
// a graph with any other.
#include "compile.hpp"

#include <string>

namespace tiny_accel {
namespace {

using loom::sdk::GraphView;
using loom::sdk::NodeView;
using loom::sdk::TensorView;

// Whether tiny-accel runs `node` exactly as ONNX specifies; `*why` if not.
bool supported(const NodeView& node, std::string* why) {
  const std::string op = node.op_type();
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    *why = "domain " + node.domain();
    return false;
  }
  const bool unary = op == "Relu";
  if (op != "Add" && op != "Mul" && op != "Relu" && op != "MatMul") {
    *why = "op " + op + " is not one of Add, Mul, Relu, MatMul";
    return false;
  }
  // None of the four operators has attributes from opset 7 on (Add and Mul
  // had `broadcast` and `axis` before): refuse a node that carries one
  // rather than ignore it, and the old broadcasting rules with it.
  if ((op == "Add" || op == "Mul") && node.opset() < 7) {
    *why = op + " before opset 7 broadcasts by other rules";
    return false;
  }
  const loom::sdk::Status attributes = node.check_attributes({});
  if (!attributes.ok()) {
    *why = attributes.message();
    return false;
  }
  const size_t arity = unary ? 1 : 2;
  if (node.input_count() != arity || node.output_count() != 1 || !node.has_output(0)) {
    *why = "expects " + std::to_string(arity) + " inputs and 1 output";
    return false;
  }
  for (size_t i = 0; i < arity; ++i) {
    if (!node.has_input(i)) {
      *why = "operand " + std::to_string(i) + " is missing";
      return false;
    }
  }
  std::vector<TensorView> tensors;
  for (size_t i = 0; i < arity; ++i) tensors.push_back(node.input(i));
  tensors.push_back(node.output(0));
  for (const TensorView& t : tensors) {
    if (t.dtype() != LOOM_DTYPE_F32 || t.rank() > kMaxRank || t.element_count() > kMaxElements) {
      *why = "tensor " + t.name() + " is not float32 of rank <= 8";
      return false;
    }
  }
  const std::vector<int64_t> out = node.output(0).shape();
  std::vector<int64_t> expected;
  if (op == "Relu") {
    expected = node.input(0).shape();
  } else if (op == "MatMul") {
    const std::vector<int64_t> a = node.input(0).shape(), b = node.input(1).shape();
    if (a.size() != 2 || b.size() != 2 || a[1] != b[0]) {
      *why = "MatMul is taken for 2-D operands only";
      return false;
    }
    expected = {a[0], b[1]};
  } else if (!broadcast_shape(node.input(0).shape(), node.input(1).shape(), &expected)) {
    *why = "the operands do not broadcast";
    return false;
  }
  if (expected != out) {
    *why = "the output's shape is not the one the operands give";
    return false;
  }
  return true;
}

}  // namespace

Status compile_supported(const GraphView& graph, loom::sdk::Claims* claims) {
  for (size_t n = 0; n < graph.node_count(); ++n) {
    std::string why;
    if (supported(graph.node(n), &why)) LOOM_SDK_RETURN_IF_ERROR(claims->claim(n));
  }
  return Status();
}

Status compile_graph(const GraphView& graph, Program* out) {
  using loom::sdk::invalid_argument;
  Program p;
  std::vector<uint32_t> id(graph.tensor_count(), kNoTensor);  // graph tensor -> program tensor
  auto add = [&](const TensorView& t, Kind kind) {
    Tensor pt;
    pt.kind = kind;
    pt.dims = t.shape();
    p.tensors.push_back(std::move(pt));
    id[static_cast<size_t>(t.index())] = static_cast<uint32_t>(p.tensors.size() - 1);
    return id[static_cast<size_t>(t.index())];
  };
  // Execute inputs, in Graph.inputs order: activations and parameters
  // (large weights the host binds at execute time).
  for (size_t i = 0; i < graph.input_count(); ++i) {
    const TensorView t = graph.input(i);
    if (t.dtype() != LOOM_DTYPE_F32 || t.rank() > kMaxRank) {
      return invalid_argument("graph input " + t.name() + " is not float32 of rank <= 8");
    }
    if (id[static_cast<size_t>(t.index())] != kNoTensor) {
      return invalid_argument("graph input " + t.name() + " is listed twice");
    }
    p.inputs.push_back(add(t, Kind::kInput));
  }
  for (size_t n = 0; n < graph.node_count(); ++n) {
    const NodeView node = graph.node(n);
    std::string why;
    if (!supported(node, &why)) {
      return invalid_argument(node.label() + " is not supported by tiny-accel: " + why);
    }
    Op op;
    op.code = node.op_type() == "Add"    ? OpCode::kAdd
              : node.op_type() == "Mul"  ? OpCode::kMul
              : node.op_type() == "Relu" ? OpCode::kRelu
                                         : OpCode::kMatMul;
    uint32_t operands[2] = {kNoTensor, kNoTensor};
    for (size_t i = 0; i < node.input_count(); ++i) {
      const TensorView t = node.input(i);
      uint32_t& pid = id[static_cast<size_t>(t.index())];
      if (pid == kNoTensor) {
        // Not an input and not written yet: an inline constant (every float
        // constant up to 4096 bytes arrives so; see loom/sdk/graph.hpp).
        if (!t.has_data()) {
          return invalid_argument(node.label() + " reads tensor " + t.name() +
                                  ", which is neither a graph input, an inline constant, nor "
                                  "written by an earlier node");
        }
        const uint32_t c = add(t, Kind::kConstant);
        LOOM_SDK_RETURN_IF_ERROR(t.read_floats(&p.tensors[c].data));
      }
      operands[i] = pid;
    }
    const TensorView o = node.output(0);
    if (id[static_cast<size_t>(o.index())] != kNoTensor) {
      return invalid_argument(node.label() + " writes tensor " + o.name() +
                              ", which already has a producer");
    }
    op.a = operands[0];
    op.b = operands[1];
    op.out = add(o, Kind::kValue);
    p.ops.push_back(op);
  }
  for (size_t i = 0; i < graph.output_count(); ++i) {
    const TensorView t = graph.output(i);
    const uint32_t pid = id[static_cast<size_t>(t.index())];
    if (pid == kNoTensor || p.tensors[pid].kind != Kind::kValue) {
      return invalid_argument("graph output " + t.name() + " is not written by any node");
    }
    p.outputs.push_back(pid);
  }
  // The same checks the loader makes: what compile writes, load accepts.
  Status s = validate(p);
  if (!s.ok()) return loom::sdk::internal_error("tiny-accel made an invalid program: " + s.message());
  *out = std::move(p);
  return Status();
}

}  // namespace tiny_accel
