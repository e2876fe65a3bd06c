#include "graph/graph.hpp"

#include <unordered_set>

namespace loom::graph {

int32_t Graph::add_tensor(Tensor tensor) {
  tensors.push_back(std::move(tensor));
  return static_cast<int32_t>(tensors.size() - 1);
}

std::string describe_node(const Graph& graph, size_t node) {
  std::string s = "node " + std::to_string(node);
  if (node >= graph.nodes.size()) return s;
  const Node& n = graph.nodes[node];
  s += " (";
  if (!n.name.empty()) s += "'" + n.name + "', ";
  s += n.op_type + ")";
  return s;
}

namespace {

std::string tensor_label(const Graph& g, int32_t t) {
  std::string s = "tensor " + std::to_string(t);
  if (t >= 0 && static_cast<size_t>(t) < g.tensors.size()) s += " ('" + g.tensors[t].name + "')";
  return s;
}

}  // namespace

Status validate(const Graph& g, const ValidateOptions& options) {
  const size_t n_tensors = g.tensors.size();
  std::unordered_set<std::string_view> names;
  for (size_t t = 0; t < n_tensors; ++t) {
    const Tensor& tensor = g.tensors[t];
    const std::string label = tensor_label(g, static_cast<int32_t>(t));
    if (tensor.name.empty()) return invalid_argument(label + " has no name");
    if (!names.insert(tensor.name).second) {
      return invalid_argument("two tensors are named '" + tensor.name + "'");
    }
    if (options.open && !tensor.is_constant()) {
      if (dtype_size(tensor.dtype) == 0 && tensor.dtype != DType::kInvalid) {
        return invalid_argument(label + " has no valid dtype");
      }
      for (int64_t d : tensor.shape) {
        if (d < -1) return invalid_argument(label + " has dimension " + std::to_string(d));
      }
      continue;
    }
    const size_t es = dtype_size(tensor.dtype);
    if (es == 0) return invalid_argument(label + " has no valid dtype");
    auto count = element_count(tensor.shape);
    if (!count.ok()) return count.status().with_context(label);
    if (tensor.data != nullptr && tensor.data->size() != *count * es) {
      return invalid_argument(label + ": constant of " + std::string(dtype_name(tensor.dtype)) +
                              " " + shape_to_string(tensor.shape) + " holds " +
                              std::to_string(tensor.data->size()) + " bytes, expected " +
                              std::to_string(*count * es));
    }
  }

  // 0 = not produced, 1 = graph input, 2 = constant, 3 = node output.
  std::vector<uint8_t> producer(n_tensors, 0);
  for (size_t t = 0; t < n_tensors; ++t) {
    if (g.tensors[t].is_constant()) producer[t] = 2;
  }
  auto in_range = [&](int32_t t) { return t >= 0 && static_cast<size_t>(t) < n_tensors; };
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const int32_t t = g.inputs[i];
    if (!in_range(t)) {
      return invalid_argument("graph input " + std::to_string(i) + ": tensor index " +
                              std::to_string(t) + " out of range");
    }
    if (producer[t] == 1) return invalid_argument(tensor_label(g, t) + " is listed twice as a graph input");
    producer[t] = 1;  // a constant may be an input too: its value bound at execute time
  }
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    if (node.op_type.empty()) return invalid_argument(describe_node(g, n) + " has no op type");
    if (node.captures < 0 || static_cast<size_t>(node.captures) > node.inputs.size()) {
      return invalid_argument(describe_node(g, n) + " captures " + std::to_string(node.captures) +
                              " tensors but has " + std::to_string(node.inputs.size()) + " inputs");
    }
    for (const Body& body : node.bodies) {
      if (body.graph == nullptr) {
        return invalid_argument(describe_node(g, n) + " body '" + body.attribute + "' has no graph");
      }
      Status inner = validate(*body.graph, {.open = true});
      if (!inner.ok()) return inner.with_context(describe_node(g, n) + " body '" + body.attribute + "'");
    }
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int32_t t = node.inputs[k];
      if (t == kNoTensor) continue;
      if (!in_range(t)) {
        return invalid_argument(describe_node(g, n) + " input " + std::to_string(k) +
                                ": tensor index " + std::to_string(t) + " out of range");
      }
      if (producer[t] == 0) {
        return invalid_argument(describe_node(g, n) + " reads " + tensor_label(g, t) +
                                " before anything produces it");
      }
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int32_t t = node.outputs[k];
      if (!in_range(t)) {
        return invalid_argument(describe_node(g, n) + " output " + std::to_string(k) +
                                ": tensor index " + std::to_string(t) + " out of range");
      }
      if (producer[t] != 0) {
        return invalid_argument(describe_node(g, n) + " writes " + tensor_label(g, t) +
                                ", which already has a producer");
      }
      producer[t] = 3;
    }
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const int32_t t = g.outputs[i];
    if (!in_range(t)) {
      return invalid_argument("graph output " + std::to_string(i) + ": tensor index " +
                              std::to_string(t) + " out of range");
    }
    if (producer[t] == 0) {
      return invalid_argument("graph output " + std::to_string(i) + " " + tensor_label(g, t) +
                              " is never produced");
    }
  }
  return Status();
}

}  // namespace loom::graph
