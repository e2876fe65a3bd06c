#include "graph_builder.hpp"

#include <utility>

namespace loom::testing {

Attr attr_i(std::string name, int64_t value) {
  Attr a;
  a.name = std::move(name);
  a.i = value;
  return a;
}

Attr attr_f(std::string name, float value) {
  Attr a;
  a.name = std::move(name);
  a.kind = gfb::AttributeKind::float_;
  a.f = value;
  return a;
}

Attr attr_ints(std::string name, std::vector<int64_t> values) {
  Attr a;
  a.name = std::move(name);
  a.kind = gfb::AttributeKind::ints;
  a.ints = std::move(values);
  return a;
}

Attr attr_strings(std::string name, std::vector<std::string> values) {
  Attr a;
  a.name = std::move(name);
  a.kind = gfb::AttributeKind::strings;
  a.strings = std::move(values);
  return a;
}

Attr attr_s(std::string name, std::string value) {
  Attr a;
  a.name = std::move(name);
  a.kind = gfb::AttributeKind::string;
  a.s = std::move(value);
  return a;
}

int GraphBuilder::input(Dims shape, gfb::DType dtype) {
  const int t = tensor(std::move(shape), dtype);
  inputs.push_back(t);
  return t;
}

int GraphBuilder::parameter(Dims shape, std::string name) {
  const int t = input(std::move(shape));
  tensors[t].parameter = std::move(name);
  return t;
}

int GraphBuilder::tensor(Dims shape, gfb::DType dtype) {
  TensorEntry t;
  t.name = "t" + std::to_string(tensors.size());
  t.dtype = dtype;
  t.shape = std::move(shape);
  tensors.push_back(std::move(t));
  return static_cast<int>(tensors.size() - 1);
}

int GraphBuilder::constant_f32(Dims shape, const std::vector<float>& values) {
  return constant(std::move(shape), gfb::DType::f32, values.data(), values.size() * sizeof(float));
}

int GraphBuilder::constant_i64(Dims shape, const std::vector<int64_t>& values) {
  return constant(std::move(shape), gfb::DType::i64, values.data(), values.size() * sizeof(int64_t));
}

int GraphBuilder::constant_i32(Dims shape, const std::vector<int32_t>& values) {
  return constant(std::move(shape), gfb::DType::i32, values.data(), values.size() * sizeof(int32_t));
}

int GraphBuilder::constant_bool(bool value) {
  const uint8_t v = value ? 1 : 0;
  return constant({}, gfb::DType::bool_, &v, 1);
}

GraphBuilder::NodeEntry& GraphBuilder::node(std::string op, std::vector<int32_t> operands,
                                            std::vector<int32_t> results, std::vector<Attr> attrs,
                                            int64_t opset, std::string domain) {
  NodeEntry n;
  n.op = std::move(op);
  n.inputs = std::move(operands);
  n.outputs = std::move(results);
  n.attrs = std::move(attrs);
  n.opset = opset;
  n.domain = std::move(domain);
  n.name = "n" + std::to_string(nodes.size());
  nodes.push_back(std::move(n));
  return nodes.back();
}

void GraphBuilder::output(int tensor_index) { outputs.push_back(tensor_index); }

int GraphBuilder::constant(Dims shape, gfb::DType dtype, const void* data, size_t bytes) {
  const int t = tensor(std::move(shape), dtype);
  tensors[t].has_data = true;
  const auto* p = static_cast<const uint8_t*>(data);
  tensors[t].data.assign(p, p + bytes);
  return t;
}

std::vector<uint8_t> GraphBuilder::finish() const {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<gfb::Tensor>> tensors_out;
  for (const TensorEntry& t : tensors) {
    tensors_out.push_back(gfb::CreateTensorDirect(fbb, t.name.c_str(), t.dtype, &t.shape,
                                                  t.has_data ? &t.data : nullptr,
                                                  t.parameter.empty() ? nullptr : t.parameter.c_str()));
  }
  std::vector<flatbuffers::Offset<gfb::Node>> nodes_out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeEntry& n = nodes[i];
    std::vector<flatbuffers::Offset<gfb::Attribute>> attrs;
    for (const Attr& a : n.attrs) {
      std::vector<flatbuffers::Offset<flatbuffers::String>> strings;
      for (const std::string& v : a.strings) strings.push_back(fbb.CreateString(v));
      attrs.push_back(gfb::CreateAttributeDirect(fbb, a.name.c_str(), a.kind, a.i, a.f, &a.ints, nullptr,
                                                 a.s.c_str(), a.strings.empty() ? nullptr : &strings));
    }
    nodes_out.push_back(gfb::CreateNodeDirect(fbb, n.name.empty() ? nullptr : n.name.c_str(), n.op.c_str(),
                                              n.domain.c_str(), n.opset, &attrs, &n.inputs, &n.outputs));
  }
  auto g = gfb::CreateGraphDirect(fbb, "g", &tensors_out, &nodes_out, &inputs, &outputs);
  gfb::FinishGraphBuffer(fbb, g);
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

}  // namespace loom::testing
