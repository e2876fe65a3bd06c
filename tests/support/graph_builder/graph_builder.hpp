// The one graph.fbs builder of the tests: tensors, constants, parameters and
// nodes with attributes, written with the generated flatbuffers API into the
// bytes a plugin's compile entries take.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/graph/graph_generated.h"

namespace loom::testing {

namespace gfb = ::loom::graph::fb;
using Dims = std::vector<int64_t>;

// One node attribute; `kind` says which of the values is written.
struct Attr {
  std::string name;
  gfb::AttributeKind kind = gfb::AttributeKind::int_;
  int64_t i = 0;
  float f = 0;
  std::vector<int64_t> ints;
  std::string s;
  std::vector<std::string> strings;
};
Attr attr_i(std::string name, int64_t value);
Attr attr_f(std::string name, float value);
Attr attr_ints(std::string name, std::vector<int64_t> values);
Attr attr_s(std::string name, std::string value);
Attr attr_strings(std::string name, std::vector<std::string> values);

// Builds one graph. Tensors are named t0, t1, ... and nodes n0, n1, ... in
// the order they are added; indices returned are tensor indices. The entries
// are public so that a test of the verifier can break a graph on purpose
// (a negative dimension, data of the wrong size, an index out of range).
class GraphBuilder {
 public:
  struct TensorEntry {
    std::string name;
    gfb::DType dtype = gfb::DType::f32;
    Dims shape;
    bool has_data = false;
    std::vector<uint8_t> data;
    std::string parameter;
  };
  struct NodeEntry {
    std::string op;
    std::vector<int32_t> inputs, outputs;
    std::vector<Attr> attrs;
    int64_t opset = 13;
    std::string domain;
    std::string name;  // empty: the node is written without a name
  };

  // A graph input.
  int input(Dims shape, gfb::DType dtype = gfb::DType::f32);
  // A weight bound at execute time: a parameter that is also a graph input.
  int parameter(Dims shape, std::string name);
  // A tensor without data, neither input nor output until marked.
  int tensor(Dims shape, gfb::DType dtype = gfb::DType::f32);
  int constant_f32(Dims shape, const std::vector<float>& values);
  int constant_i64(Dims shape, const std::vector<int64_t>& values);
  int constant_i32(Dims shape, const std::vector<int32_t>& values);
  // A scalar bool constant.
  int constant_bool(bool value);
  // A constant of any dtype from its little-endian bytes.
  int constant(Dims shape, gfb::DType dtype, const void* data, size_t bytes);
  // Adds a node named n<index>; the entry may be edited until finish().
  NodeEntry& node(std::string op, std::vector<int32_t> inputs, std::vector<int32_t> outputs,
                  std::vector<Attr> attrs = {}, int64_t opset = 13, std::string domain = "");
  void output(int tensor_index);
  size_t node_count() const { return nodes.size(); }

  // The graph.fbs bytes (graph "g").
  std::vector<uint8_t> finish() const;

  std::vector<TensorEntry> tensors;
  std::vector<NodeEntry> nodes;
  std::vector<int32_t> inputs, outputs;
};

}  // namespace loom::testing
