// A tiny graph.fbs builder for the SDK tests (the generated flatbuffers API).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "loom/graph/graph_generated.h"

namespace loom::sdk::testing {

namespace gfb = ::loom::graph::fb;

struct TestTensor {
  std::string name;
  gfb::DType dtype = gfb::DType::f32;
  std::vector<int64_t> shape;
  bool has_data = false;
  std::vector<uint8_t> data;
  std::string parameter;
};

struct TestNode {
  std::string op;
  std::vector<int32_t> in, out;
  int64_t int_attr = 0;  // written as attribute "axis" when nonzero
  std::string name;
};

struct TestGraph {
  std::vector<TestTensor> tensors;
  std::vector<TestNode> nodes;
  std::vector<int32_t> inputs, outputs;
  std::map<size_t, std::vector<std::pair<std::string, int64_t>>> more_ints;  // node -> further int attributes

  int32_t tensor(std::vector<int64_t> shape, gfb::DType dtype = gfb::DType::f32) {
    TestTensor t;
    t.name = "t" + std::to_string(tensors.size());
    t.dtype = dtype;
    t.shape = std::move(shape);
    tensors.push_back(std::move(t));
    return static_cast<int32_t>(tensors.size() - 1);
  }
  template <typename T>
  int32_t constant(std::vector<int64_t> shape, gfb::DType dtype, const std::vector<T>& v) {
    const int32_t t = tensor(std::move(shape), dtype);
    tensors[t].has_data = true;
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    tensors[t].data.assign(p, p + v.size() * sizeof(T));
    return t;
  }

  std::vector<uint8_t> finish() const {
    flatbuffers::FlatBufferBuilder b;
    std::vector<flatbuffers::Offset<gfb::Tensor>> ts;
    for (const TestTensor& t : tensors) {
      ts.push_back(gfb::CreateTensorDirect(b, t.name.c_str(), t.dtype, &t.shape,
                                           t.has_data ? &t.data : nullptr,
                                           t.parameter.empty() ? nullptr : t.parameter.c_str()));
    }
    std::vector<flatbuffers::Offset<gfb::Node>> ns;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const TestNode& n = nodes[i];
      std::vector<flatbuffers::Offset<gfb::Attribute>> as;
      if (n.int_attr != 0) {
        as.push_back(gfb::CreateAttributeDirect(b, "axis", gfb::AttributeKind::int_, n.int_attr));
      }
      for (const auto& [name, value] : more_ints.count(i) ? more_ints.at(i) : decltype(more_ints)::mapped_type{}) {
        as.push_back(gfb::CreateAttributeDirect(b, name.c_str(), gfb::AttributeKind::int_, value));
      }
      ns.push_back(gfb::CreateNodeDirect(b, n.name.empty() ? nullptr : n.name.c_str(),
                                         n.op.c_str(), "", 13, &as, &n.in, &n.out));
    }
    gfb::FinishGraphBuffer(b, gfb::CreateGraphDirect(b, "g", &ts, &ns, &inputs, &outputs));
    return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  }
};

}  // namespace loom::sdk::testing
