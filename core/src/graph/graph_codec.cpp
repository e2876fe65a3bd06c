#include "graph/graph_codec.hpp"

#include <cstring>
#include <string>
#include <unordered_set>

#include "loom/graph/graph_generated.h"

namespace loom::graph {

using flatbuffers::Offset;

namespace {

// Bounds for the verifier, so that a hostile buffer cannot make it recurse
// or walk without limit (the IR is three tables deep).
constexpr uint32_t kMaxDepth = 16;
constexpr uint32_t kMaxTables = 10'000'000;
// A flatbuffer must stay below 2 GiB; leave room for the tables.
constexpr uint64_t kMaxInlineBytes = (uint64_t{1} << 31) - (uint64_t{64} << 20);

bool is_float(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kF64;
}

bool valid_dtype(uint8_t d) { return d >= 1 && d <= static_cast<uint8_t>(DType::kBool); }

template <typename T>
Offset<flatbuffers::Vector<T>> opt_vector(flatbuffers::FlatBufferBuilder& b, const std::vector<T>& v) {
  return v.empty() ? 0 : b.CreateVector(v);
}

Offset<fb::Attribute> encode_attribute(flatbuffers::FlatBufferBuilder& b, const AttributeDef& a) {
  auto name = b.CreateString(a.name);
  auto ints = opt_vector(b, a.ints);
  auto floats = opt_vector(b, a.floats);
  Offset<flatbuffers::String> s = a.s.empty() ? 0 : b.CreateString(a.s);
  Offset<flatbuffers::Vector<Offset<flatbuffers::String>>> strings =
      a.strings.empty() ? 0 : b.CreateVectorOfStrings(a.strings);
  std::vector<int64_t> shape(a.t_shape.begin(), a.t_shape.end());
  auto t_shape = opt_vector(b, shape);
  Offset<flatbuffers::Vector<uint8_t>> t_data = 0;
  if (!a.t_data.empty()) {
    t_data = b.CreateVector(reinterpret_cast<const uint8_t*>(a.t_data.data()), a.t_data.size());
  }
  return fb::CreateAttribute(b, name, static_cast<fb::AttributeKind>(a.kind), a.i, a.f, ints,
                             floats, s, strings, static_cast<fb::DType>(a.t_dtype), t_shape,
                             t_data);
}

}  // namespace

bool encodes_as_parameter(const Tensor& tensor, const EncodeOptions& options) {
  return tensor.is_constant() && is_float(tensor.dtype) && tensor.data->size() > options.inline_limit;
}

Result<std::vector<std::byte>> encode_graph(const Graph& graph, const EncodeOptions& options) {
  LOOM_RETURN_IF_ERROR(validate(graph, {.open = options.open})
                           .with_context("encoding graph '" + graph.name + "'"));
  uint64_t inline_bytes = 0;
  for (const Tensor& t : graph.tensors) {
    if (t.is_constant() && !encodes_as_parameter(t, options)) inline_bytes += t.data->size();
  }
  if (inline_bytes > kMaxInlineBytes) {
    return invalid_argument("graph '" + graph.name + "': " + std::to_string(inline_bytes) +
                            " bytes of inline constants do not fit a flatbuffer (limit 2 GiB)");
  }

  flatbuffers::FlatBufferBuilder b(1024 + inline_bytes + inline_bytes / 8);
  std::vector<int32_t> inputs = graph.inputs;
  std::vector<Offset<fb::Tensor>> tensors;
  tensors.reserve(graph.tensors.size());
  for (size_t i = 0; i < graph.tensors.size(); ++i) {
    const Tensor& t = graph.tensors[i];
    auto name = b.CreateString(t.name);
    std::vector<int64_t> dims(t.shape.begin(), t.shape.end());
    auto shape = b.CreateVector(dims);
    Offset<flatbuffers::Vector<uint8_t>> data = 0;
    Offset<flatbuffers::String> parameter = 0;
    if (encodes_as_parameter(t, options)) {
      parameter = b.CreateString(t.name);
      inputs.push_back(static_cast<int32_t>(i));
    } else if (t.is_constant()) {
      b.ForceVectorAlignment(t.data->size(), 1, 16);
      data = b.CreateVector(reinterpret_cast<const uint8_t*>(t.data->data()), t.data->size());
    }
    tensors.push_back(fb::CreateTensor(b, name, static_cast<fb::DType>(t.dtype), shape, data, parameter));
  }
  std::vector<Offset<fb::Node>> nodes;
  nodes.reserve(graph.nodes.size());
  for (const Node& n : graph.nodes) {
    if (has_bodies(n)) {
      // Control flow never reaches graph.fbs: staged programs run it on the
      // host and hand plugins the straight-line parts (lowering/staged.hpp).
      return unimplemented("node '" + n.name + "' (" + n.op_type +
                           ") has subgraphs, which the graph IR does not carry");
    }
    std::vector<Offset<fb::Attribute>> attrs;
    for (const AttributeDef& a : n.attributes) attrs.push_back(encode_attribute(b, a));
    auto name = n.name.empty() ? 0 : b.CreateString(n.name);
    auto op = b.CreateString(n.op_type);
    auto domain = n.domain.empty() ? 0 : b.CreateString(n.domain);
    auto attributes = attrs.empty() ? 0 : b.CreateVector(attrs);
    nodes.push_back(fb::CreateNode(b, name, op, domain, n.opset, attributes, b.CreateVector(n.inputs),
                                   b.CreateVector(n.outputs)));
  }
  auto root = fb::CreateGraph(b, graph.name.empty() ? 0 : b.CreateString(graph.name),
                              b.CreateVector(tensors), b.CreateVector(nodes), b.CreateVector(inputs),
                              b.CreateVector(graph.outputs));
  fb::FinishGraphBuffer(b, root);
  const auto* p = reinterpret_cast<const std::byte*>(b.GetBufferPointer());
  return std::vector<std::byte>(p, p + b.GetSize());
}

namespace {

// The verifier of flatbuffers 2.0.8 checks a vector's start for 4-byte
// alignment only, so the elements of an int64 vector in a crafted buffer may
// be misaligned: copy them out instead of reading in place.
template <typename T>
std::vector<T> copy_scalars(const flatbuffers::Vector<T>* v) {
  std::vector<T> out;
  if (v == nullptr) return out;
  out.resize(v->size());
  if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(T));
  for (T& x : out) x = flatbuffers::EndianScalar(x);
  return out;
}

Result<AttributeDef> decode_attribute(const fb::Attribute& a, const std::string& where) {
  AttributeDef out;
  out.name = a.name()->str();
  const std::string label = where + " attribute '" + out.name + "'";
  if (static_cast<uint8_t>(a.kind()) > static_cast<uint8_t>(AttributeKind::kStrings)) {
    return invalid_argument(label + ": unknown kind " + std::to_string(static_cast<int>(a.kind())));
  }
  out.kind = static_cast<AttributeKind>(a.kind());
  out.i = a.i();
  out.f = a.f();
  out.ints = copy_scalars(a.ints());
  out.floats = copy_scalars(a.floats());
  if (a.s() != nullptr) out.s = a.s()->str();
  if (a.strings() != nullptr) {
    for (const flatbuffers::String* s : *a.strings()) out.strings.push_back(s == nullptr ? "" : s->str());
  }
  if (out.kind == AttributeKind::kTensor) {
    const auto d = static_cast<uint8_t>(a.t_dtype());
    if (!valid_dtype(d)) return invalid_argument(label + ": tensor has unknown dtype " + std::to_string(d));
    out.t_dtype = static_cast<DType>(d);
    out.t_shape = copy_scalars(a.t_shape());
    auto count = element_count(out.t_shape);
    if (!count.ok()) return count.status().with_context(label);
    const size_t size = a.t_data() == nullptr ? 0 : a.t_data()->size();
    if (*count > size || *count * dtype_size(out.t_dtype) != size) {
      return invalid_argument(label + ": tensor " + shape_to_string(out.t_shape) + " holds " +
                              std::to_string(size) + " bytes");
    }
    if (size > 0) {
      out.t_data.resize(size);
      std::memcpy(out.t_data.data(), a.t_data()->data(), size);
    }
  }
  return out;
}

}  // namespace

Result<Graph> decode_graph(std::span<const std::byte> bytes, bool open) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  flatbuffers::Verifier::Options vopts;
  vopts.max_depth = kMaxDepth;
  vopts.max_tables = kMaxTables;
  flatbuffers::Verifier verifier(data, bytes.size(), vopts);
  if (bytes.size() < 8 || !fb::GraphBufferHasIdentifier(data) || !fb::VerifyGraphBuffer(verifier)) {
    return invalid_argument("graph IR: " + std::to_string(bytes.size()) +
                            " bytes are not a valid graph.fbs buffer (identifier LMGR)");
  }
  const fb::Graph* g = fb::GetGraph(data);
  Graph out;
  if (g->name() != nullptr) out.name = g->name()->str();
  const size_t n_tensors = g->tensors() == nullptr ? 0 : g->tensors()->size();
  std::vector<bool> is_parameter(n_tensors, false);
  for (size_t i = 0; i < n_tensors; ++i) {
    const fb::Tensor* t = g->tensors()->Get(static_cast<flatbuffers::uoffset_t>(i));
    const std::string label = "graph IR: tensor " + std::to_string(i) + " ('" + t->name()->str() + "')";
    Tensor tensor;
    tensor.name = t->name()->str();
    const auto d = static_cast<uint8_t>(t->dtype());
    const bool untyped_value = open && d == 0 && t->data() == nullptr && t->parameter() == nullptr;
    if (!valid_dtype(d) && !untyped_value) return invalid_argument(label + ": unknown dtype " + std::to_string(d));
    tensor.dtype = static_cast<DType>(d);
    tensor.shape = copy_scalars(t->shape());
    if (open && t->data() == nullptr && t->parameter() == nullptr) {
      // A value of an open graph: validate() below checks what it may be.
      out.tensors.push_back(std::move(tensor));
      continue;
    }
    auto count = element_count(tensor.shape);
    if (!count.ok()) return count.status().with_context(label);
    if (t->data() != nullptr && t->parameter() != nullptr) {
      return invalid_argument(label + ": has both data and parameter");
    }
    if (t->data() != nullptr) {
      const size_t size = t->data()->size();
      const size_t es = dtype_size(tensor.dtype);
      if (*count > size || *count * es != size) {
        return invalid_argument(label + ": data of " + std::to_string(size) + " bytes, expected " +
                                std::to_string(*count) + " x " + std::to_string(es));
      }
      const auto* p = reinterpret_cast<const std::byte*>(t->data()->data());
      tensor.data = std::make_shared<const std::vector<std::byte>>(p, p + size);
    }
    is_parameter[i] = t->parameter() != nullptr;
    out.tensors.push_back(std::move(tensor));
  }
  auto check_index = [&](int32_t t, const std::string& where) -> Status {
    if (t < 0 || static_cast<size_t>(t) >= n_tensors) {
      return invalid_argument("graph IR: " + where + " refers to tensor " + std::to_string(t) +
                              " of " + std::to_string(n_tensors));
    }
    return Status();
  };
  if (g->inputs() != nullptr) {
    std::unordered_set<int32_t> parameters_listed;
    for (flatbuffers::uoffset_t i = 0; i < g->inputs()->size(); ++i) {
      const int32_t t = g->inputs()->Get(i);
      LOOM_RETURN_IF_ERROR(check_index(t, "input " + std::to_string(i)));
      out.inputs.push_back(t);
      if (is_parameter[t]) parameters_listed.insert(t);
    }
    for (size_t t = 0; t < n_tensors; ++t) {
      if (is_parameter[t] && parameters_listed.count(static_cast<int32_t>(t)) == 0) {
        return invalid_argument("graph IR: parameter tensor " + std::to_string(t) + " ('" +
                                out.tensors[t].name + "') is not a graph input");
      }
    }
  } else {
    for (size_t t = 0; t < n_tensors; ++t) {
      if (is_parameter[t]) {
        return invalid_argument("graph IR: parameter tensor " + std::to_string(t) + " ('" +
                                out.tensors[t].name + "') is not a graph input");
      }
    }
  }
  if (g->outputs() != nullptr) {
    for (flatbuffers::uoffset_t i = 0; i < g->outputs()->size(); ++i) {
      const int32_t t = g->outputs()->Get(i);
      LOOM_RETURN_IF_ERROR(check_index(t, "output " + std::to_string(i)));
      out.outputs.push_back(t);
    }
  }
  const size_t n_nodes = g->nodes() == nullptr ? 0 : g->nodes()->size();
  for (size_t i = 0; i < n_nodes; ++i) {
    const fb::Node* n = g->nodes()->Get(static_cast<flatbuffers::uoffset_t>(i));
    Node node;
    if (n->name() != nullptr) node.name = n->name()->str();
    node.op_type = n->op_type()->str();
    if (n->domain() != nullptr) node.domain = n->domain()->str();
    node.opset = n->opset();
    const std::string where = "node " + std::to_string(i) + " (" + node.op_type + ")";
    if (n->attributes() != nullptr) {
      for (const fb::Attribute* a : *n->attributes()) {
        auto attr = decode_attribute(*a, "graph IR: " + where);
        if (!attr.ok()) return attr.status();
        node.attributes.push_back(std::move(*attr));
      }
    }
    if (n->inputs() != nullptr) {
      for (flatbuffers::uoffset_t k = 0; k < n->inputs()->size(); ++k) {
        const int32_t t = n->inputs()->Get(k);
        if (t != kNoTensor) LOOM_RETURN_IF_ERROR(check_index(t, where + " input " + std::to_string(k)));
        node.inputs.push_back(t);
      }
    }
    if (n->outputs() != nullptr) {
      for (flatbuffers::uoffset_t k = 0; k < n->outputs()->size(); ++k) {
        const int32_t t = n->outputs()->Get(k);
        LOOM_RETURN_IF_ERROR(check_index(t, where + " output " + std::to_string(k)));
        node.outputs.push_back(t);
      }
    }
    out.nodes.push_back(std::move(node));
  }
  LOOM_RETURN_IF_ERROR(validate(out, {.open = open}).with_context("graph IR"));
  return out;
}

}  // namespace loom::graph
