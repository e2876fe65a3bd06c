// Small graph builders shared by the codec, partition and driver tests.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.hpp"

namespace loom::test {

inline int32_t add_value(graph::Graph& g, std::string name, Shape shape, DType dtype = DType::kF32) {
  graph::Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  return g.add_tensor(std::move(t));
}

inline int32_t add_input(graph::Graph& g, std::string name, Shape shape, DType dtype = DType::kF32) {
  int32_t t = add_value(g, std::move(name), std::move(shape), dtype);
  g.inputs.push_back(t);
  return t;
}

template <typename T>
int32_t add_constant(graph::Graph& g, std::string name, Shape shape, DType dtype, const std::vector<T>& values) {
  int32_t t = add_value(g, std::move(name), std::move(shape), dtype);
  auto bytes = std::make_shared<std::vector<std::byte>>(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes->data(), values.data(), bytes->size());
  g.tensors[t].data = std::move(bytes);
  return t;
}

inline size_t add_node(graph::Graph& g, std::string op, std::vector<int32_t> inputs,
                       std::vector<int32_t> outputs, std::string name = {}) {
  graph::Node n;
  n.name = std::move(name);
  n.op_type = std::move(op);
  n.opset = 17;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  g.nodes.push_back(std::move(n));
  return g.nodes.size() - 1;
}

// y = op(x) with y a new tensor shaped like x.
inline int32_t unary(graph::Graph& g, std::string op, int32_t x, std::string out) {
  int32_t y = add_value(g, std::move(out), g.tensors[x].shape, g.tensors[x].dtype);
  add_node(g, std::move(op), {x}, {y});
  return y;
}

inline int32_t binary(graph::Graph& g, std::string op, int32_t a, int32_t b, std::string out) {
  int32_t y = add_value(g, std::move(out), g.tensors[a].shape, g.tensors[a].dtype);
  add_node(g, std::move(op), {a, b}, {y});
  return y;
}

}  // namespace loom::test
