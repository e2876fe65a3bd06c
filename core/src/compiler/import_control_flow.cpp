#include "compiler/import_control_flow.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "lowering/staged.hpp"
#include "onnx/onnx_model.hpp"
#include "onnx/onnx_pb.h"

namespace loom::compiler {

namespace passes = lowering::passes;

Result<NonTensorType> non_tensor_type(const ::onnx::TypeProto& type, const std::string& what) {
  NonTensorType out;
  auto element_dtype = [&](const ::onnx::TypeProto& element) -> Status {
    if (!element.has_tensor_type()) {
      return unimplemented(what + " is a sequence or optional of something other than tensors; Loom supports "
                           "sequences of tensors and optional tensors or sequences of tensors");
    }
    if (element.tensor_type().elem_type() != 0) {
      auto d = onnx_io::dtype_from_onnx(element.tensor_type().elem_type());
      if (!d.ok()) return d.status().with_context(what);
      out.dtype = *d;
    }
    return Status();
  };
  if (type.has_tensor_type()) return out;
  if (type.has_sequence_type()) {
    out.kind = ValueKind::kSequence;
    LOOM_RETURN_IF_ERROR(element_dtype(type.sequence_type().elem_type()));
    return out;
  }
  if (type.has_optional_type()) {
    const ::onnx::TypeProto& inner = type.optional_type().elem_type();
    if (inner.has_sequence_type()) {
      out.kind = ValueKind::kOptionalSequence;
      LOOM_RETURN_IF_ERROR(element_dtype(inner.sequence_type().elem_type()));
    } else {
      out.kind = ValueKind::kOptionalTensor;
      LOOM_RETURN_IF_ERROR(element_dtype(inner));
    }
    return out;
  }
  return unimplemented(what + " is " + (type.has_map_type() ? "a map" : "not a tensor") +
                       "; Loom supports tensors, sequences of tensors and optionals");
}

// The names a subgraph reads that it does not define itself (inputs,
// initializers, node outputs), its own subgraphs included: what it captures
// from enclosing scopes.
void free_names(const ::onnx::GraphProto& g, std::vector<std::string>& out) {
  std::unordered_set<std::string> defined;
  for (const auto& i : g.input()) defined.insert(i.name());
  for (const auto& i : g.initializer()) defined.insert(i.name());
  for (const auto& n : g.node()) {
    for (const std::string& o : n.output()) defined.insert(o);
  }
  auto use = [&](const std::string& name) {
    if (name.empty() || defined.count(name)) return;
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  for (const auto& n : g.node()) {
    for (const std::string& i : n.input()) use(i);
    for (const auto& a : n.attribute()) {
      if (!a.has_g()) continue;
      std::vector<std::string> inner;
      free_names(a.g(), inner);
      for (const std::string& name : inner) use(name);
    }
  }
  for (const auto& o : g.output()) use(o.name());
}

// The operand and body counts of If, Loop and Scan, checked against
// each other (ONNX's rules), so that the runtime can rely on them.
Status check_control_node(const graph::Node& node, size_t outputs, const std::string& desc) {
  const size_t own = node.inputs.size() - static_cast<size_t>(node.captures);
  auto body = [&](std::string_view name) -> const graph::Graph* {
    for (const graph::Body& b : node.bodies) {
      if (b.attribute == name) return b.graph.get();
    }
    return nullptr;
  };
  auto formal = [&](const graph::Graph& g) { return g.inputs.size() - static_cast<size_t>(node.captures); };
  auto count = [&](size_t n) { return std::to_string(n); };
  if (node.op_type == "If") {
    const graph::Graph* then_branch = body("then_branch");
    const graph::Graph* else_branch = body("else_branch");
    if (then_branch == nullptr || else_branch == nullptr) {
      return invalid_argument(desc + " needs both a 'then_branch' and an 'else_branch' graph");
    }
    if (own != 1) return invalid_argument(desc + " takes 1 input (the condition), has " + count(own));
    for (const graph::Graph* g : {then_branch, else_branch}) {
      if (formal(*g) != 0) {
        return invalid_argument(desc + ": a branch takes no inputs of its own, '" +
                                (g == then_branch ? std::string("then_branch") : std::string("else_branch")) +
                                "' has " + count(formal(*g)));
      }
      if (g->outputs.size() != outputs) {
        return invalid_argument(desc + " has " + count(outputs) + " outputs, but its '" +
                                (g == then_branch ? std::string("then_branch") : std::string("else_branch")) +
                                "' returns " + count(g->outputs.size()));
      }
    }
    return Status();
  }
  const graph::Graph* b = body("body");
  if (b == nullptr || node.bodies.size() != 1) return invalid_argument(desc + " needs exactly one graph, 'body'");
  if (node.op_type == "Loop") {
    if (own < 2) return invalid_argument(desc + " takes at least 2 inputs (M, cond), has " + count(own));
    if (node.inputs[0] == graph::kNoTensor && node.inputs[1] == graph::kNoTensor) {
      return invalid_argument(desc + " has neither a trip count (input 'M') nor a condition (input 'cond'): "
                              "it would never end");
    }
    const size_t carried = own - 2;
    if (formal(*b) != own) {
      return invalid_argument(desc + ": its body must take " + count(own) + " inputs (iteration, condition and " +
                              count(carried) + " loop-carried values), it takes " + count(formal(*b)));
    }
    if (b->outputs.size() < 1 + carried || b->outputs.size() - 1 != outputs) {
      return invalid_argument(desc + ": its body returns " + count(b->outputs.size()) +
                              " values; it must return the condition, the " + count(carried) +
                              " loop-carried values and one value per scan output, " + count(outputs + 1) +
                              " for the node's " + count(outputs) + " outputs");
    }
    return Status();
  }
  // Scan
  int64_t scan_inputs = -1;
  for (const AttributeDef& a : node.attributes) {
    if (a.name == "num_scan_inputs") scan_inputs = a.i;
  }
  if (scan_inputs < 1) return invalid_argument(desc + " needs a 'num_scan_inputs' attribute of at least 1");
  const size_t lengths = node.opset < 9 ? 1 : 0;  // opset 8's sequence_lens
  if (own < lengths + static_cast<size_t>(scan_inputs)) {
    return invalid_argument(desc + " has " + count(own) + " inputs, fewer than its " + std::to_string(scan_inputs) +
                            " scan inputs");
  }
  const size_t state = own - lengths - static_cast<size_t>(scan_inputs);
  if (formal(*b) != own - lengths) {
    return invalid_argument(desc + ": its body must take " + count(own - lengths) + " inputs (" + count(state) +
                            " state values and " + std::to_string(scan_inputs) + " scan slices), it takes " +
                            count(formal(*b)));
  }
  if (b->outputs.size() != outputs || outputs < state) {
    return invalid_argument(desc + " has " + count(outputs) + " outputs, but its body returns " +
                            count(b->outputs.size()) + " (the " + count(state) + " state values, then scan outputs)");
  }
  return Status();
}


// An If whose condition is a constant is replaced by the nodes of the
// branch it takes (renamed where a name is taken), whose results reach the
// If's outputs through Identity nodes: a body known at compile time is
// inlined (docs/control-flow.md). In bodies too. Returns how many.
size_t inline_constant_ifs(graph::Graph& g) {
  size_t inlined = 0;
  std::unordered_set<std::string> names;
  for (const graph::Tensor& t : g.tensors) names.insert(t.name);
  std::vector<graph::Node> nodes;
  nodes.reserve(g.nodes.size());
  for (graph::Node& node : g.nodes) {
    for (graph::Body& body : node.bodies) {
      graph::Graph inner = *body.graph;
      if (inline_constant_ifs(inner) != 0) body.graph = std::make_shared<const graph::Graph>(std::move(inner));
    }
    const bool constant_if = node.domain.empty() && node.op_type == "If" && node.bodies.size() == 2 &&
                             !node.inputs.empty() && node.inputs[0] != graph::kNoTensor &&
                             g.tensors[static_cast<size_t>(node.inputs[0])].is_constant() &&
                             g.tensors[static_cast<size_t>(node.inputs[0])].data->size() == 1;
    if (!constant_if) {
      nodes.push_back(std::move(node));
      continue;
    }
    const bool cond = (*g.tensors[static_cast<size_t>(node.inputs[0])].data)[0] != std::byte{0};
    const graph::Graph* branch = nullptr;
    for (const graph::Body& b : node.bodies) {
      if (b.attribute == (cond ? "then_branch" : "else_branch")) branch = b.graph.get();
    }
    if (branch == nullptr || branch->outputs.size() != node.outputs.size() ||
        branch->inputs.size() + 1 != node.inputs.size()) {
      nodes.push_back(std::move(node));
      continue;
    }
    std::vector<int32_t> map(branch->tensors.size(), -1);
    for (size_t k = 0; k < branch->inputs.size(); ++k) map[static_cast<size_t>(branch->inputs[k])] = node.inputs[1 + k];
    // A result a branch node computes is written straight into the If's
    // output; any other (an input, a constant, a result given twice) is
    // copied by an Identity node below.
    std::vector<bool> direct(node.outputs.size(), false);
    for (const graph::Node& inner : branch->nodes) {
      for (int32_t t : inner.outputs) {
        for (size_t k = 0; k < node.outputs.size(); ++k) {
          if (branch->outputs[k] == t && map[static_cast<size_t>(t)] < 0) {
            map[static_cast<size_t>(t)] = node.outputs[k];
            direct[k] = true;
          }
        }
      }
    }
    for (size_t t = 0; t < branch->tensors.size(); ++t) {
      if (map[t] >= 0) continue;
      graph::Tensor copy = branch->tensors[t];
      while (!names.insert(copy.name).second) copy.name += "@" + node.name;
      map[t] = g.add_tensor(std::move(copy));
    }
    for (const graph::Node& inner : branch->nodes) {
      graph::Node moved = inner;
      for (int32_t& t : moved.inputs) {
        if (t != graph::kNoTensor) t = map[static_cast<size_t>(t)];
      }
      for (int32_t& t : moved.outputs) t = map[static_cast<size_t>(t)];
      moved.name = node.name + "/" + moved.name;
      nodes.push_back(std::move(moved));
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      if (direct[k]) continue;
      graph::Node copy;
      copy.name = node.name + "/result" + std::to_string(k);
      copy.op_type = "Identity";
      copy.opset = node.opset;
      copy.inputs = {map[static_cast<size_t>(branch->outputs[k])]};
      copy.outputs = {node.outputs[k]};
      nodes.push_back(std::move(copy));
    }
    ++inlined;
  }
  g.nodes = std::move(nodes);
  return inlined;
}

// Every op of `g` and of its bodies has a reference kernel or a target
// plugin that takes it, or is control flow (run by the runtime itself).
Status check_open_ops(const graph::Graph& g, const std::vector<lowering::passes::DeclaredType>* declared, const ImportOptions& options,
                      const kernels::KernelRegistry& kernels) {
  for (const graph::Node& node : g.nodes) {
    if (lowering::runs_on_host(node)) {  // control flow, sequence operators
      for (const graph::Body& body : node.bodies) {
        Status inner = check_open_ops(*body.graph, nullptr, options, kernels);
        if (!inner.ok()) return inner.with_context(passes::describe(node) + ", body '" + body.attribute + "'");
      }
      continue;
    }
    const bool has_kernel = node.domain.empty() && kernels.find(node.op_type) != nullptr;
    if (has_kernel) continue;
    const std::string op = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
    if (!options.plugin_takes || !options.plugin_takes(node.domain, node.op_type, node.opset)) {
      return unimplemented("unsupported operator '" + op + "' (node '" + node.name + "', opset " +
                           std::to_string(node.opset) + "): no reference kernel, and no target plugin takes it");
    }
    for (int32_t t : node.outputs) {
      if (declared == nullptr || static_cast<size_t>(t) >= declared->size() || !(*declared)[t].is_static()) {
        return unimplemented("operator '" + op + "' (node '" + node.name +
                             "') has no reference kernel; a target plugin takes it, but the model does "
                             "not state the static type of its output '" + g.tensors[t].name +
                             "', which an open-shape program needs");
      }
    }
  }
  return Status();
}

}  // namespace loom::compiler
