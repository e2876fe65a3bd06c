// The fake plugin's compile side, on loom/sdk/graph.hpp's GraphView (which
// plugin.hpp has verified before the members are called).
#include "fake_compile.hpp"

#include "loom/sdk/graph.hpp"

namespace fake_compile {

bool parse_ops(const char* value, std::set<std::string>* ops) {
  ops->clear();
  std::string text = value;
  if (text.empty()) return true;
  size_t start = 0;
  for (;;) {
    size_t comma = text.find(',', start);
    std::string name = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty()) return false;
    ops->insert(name);
    if (comma == std::string::npos) return true;
    start = comma + 1;
  }
}

namespace {

bool plain_add(const loom::sdk::NodeView& n) {
  if (n.input_count() != 2 || n.output_count() != 1 || !n.has_input(0) || !n.has_input(1)) return false;
  const loom::sdk::TensorView out = n.output(0);
  for (size_t i = 0; i < 2; ++i) {
    const loom::sdk::TensorView in = n.input(i);
    if (in.dtype() != LOOM_DTYPE_F32 || in.shape() != out.shape()) return false;
  }
  return out.dtype() == LOOM_DTYPE_F32;
}

}  // namespace

loom::sdk::Status supported(const std::set<std::string>& ops, const loom::sdk::GraphView& graph,
                            loom::sdk::Claims* claims) {
  for (size_t i = 0; i < graph.node_count(); ++i) {
    const loom::sdk::NodeView n = graph.node(i);
    if (!n.domain().empty() || ops.count(n.op_type()) == 0) continue;
    // The fake runs Add only as "fake:add": two f32 operands of the
    // result's shape, no broadcasting. It does not claim the Adds it would
    // get wrong (the conformance suite's ONNX node tests hold it to that).
    if (n.op_type() == "Add" && !plain_add(n)) continue;
    LOOM_SDK_RETURN_IF_ERROR(claims->claim(i));
  }
  return loom::sdk::Status();
}

std::string compile(const std::set<std::string>& ops, const loom::sdk::GraphView& graph,
                    std::string* blob) {
  const size_t nodes = graph.node_count();
  if (nodes == 0) return "graph has no nodes";
  std::string names;
  for (size_t i = 0; i < nodes; ++i) {
    const std::string op = graph.node(i).op_type();
    if (ops.count(op) == 0) return "cannot compile op " + op;
    names += (names.empty() ? "" : ",") + op;
  }
  *blob = nodes == 1 && names == "Add" && graph.input_count() == 2 && graph.output_count() == 1
              ? "fake:add"
              : "fake:graph:" + names;
  return {};
}

}  // namespace fake_compile
