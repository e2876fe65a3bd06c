#include "compiler/import_attributes.hpp"

#include <cstring>
#include <memory>
#include <vector>

namespace loom::compiler {

namespace {

using AP = ::onnx::AttributeProto;

// Old exporters leave `type` unset; the field that is filled says it.
AP::AttributeType type_of(const AP& a) {
  if (a.type() != AP::UNDEFINED) return a.type();
  if (a.has_g() || a.graphs_size() > 0) return AP::GRAPH;
  if (a.has_t()) return AP::TENSOR;
  if (a.has_s()) return AP::STRING;
  if (a.has_f()) return AP::FLOAT;
  if (a.has_i()) return AP::INT;
  if (a.floats_size() > 0) return AP::FLOATS;
  if (a.ints_size() > 0) return AP::INTS;
  if (a.strings_size() > 0) return AP::STRINGS;
  return AP::UNDEFINED;
}

template <typename T>
graph::ConstantBytes bytes_of(const std::vector<T>& v) {
  auto out = std::make_shared<std::vector<std::byte>>(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out->data(), v.data(), out->size());
  return out;
}

}  // namespace

Result<AttributeDef> convert_attribute(const onnx_io::Model& model, const AP& a,
                                       const std::string& where) {
  AttributeDef d;
  d.name = a.name();
  const std::string what = where + ", attribute '" + a.name() + "'";
  switch (type_of(a)) {
    case AP::INT: d.kind = AttributeKind::kInt; d.i = a.i(); break;
    case AP::FLOAT: d.kind = AttributeKind::kFloat; d.f = a.f(); break;
    case AP::STRING: d.kind = AttributeKind::kString; d.s = a.s(); break;
    case AP::INTS:
      d.kind = AttributeKind::kInts;
      d.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case AP::FLOATS:
      d.kind = AttributeKind::kFloats;
      d.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case AP::STRINGS:
      d.kind = AttributeKind::kStrings;
      d.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case AP::TENSOR: {
      auto t = onnx_io::read_tensor(model, a.t());
      if (!t.ok()) return t.status().with_context(what);
      d.kind = AttributeKind::kTensor;
      d.t_dtype = t->info().dtype;
      d.t_shape = t->info().shape;
      d.t_data.assign(t->bytes().begin(), t->bytes().end());
      break;
    }
    case AP::GRAPH:
    case AP::GRAPHS:
      return unimplemented(what + " is a subgraph: control flow (If, Loop, Scan) is not supported");
    default:
      return unimplemented(what + " has type " + AP::AttributeType_Name(type_of(a)) +
                           ", which Loom does not support");
  }
  return d;
}

Result<graph::Tensor> constant_node_value(const onnx_io::Model& model,
                                          const ::onnx::NodeProto& node, const std::string& name,
                                          const std::string& where) {
  if (node.attribute_size() != 1) {
    return invalid_argument(where + " must have exactly one attribute (its value), has " +
                            std::to_string(node.attribute_size()));
  }
  const AP& a = node.attribute(0);
  graph::Tensor t;
  t.name = name;
  const std::string& key = a.name();
  if (key == "value") {
    auto data = onnx_io::read_tensor(model, a.t());
    if (!data.ok()) return data.status().with_context(where + ", attribute 'value'");
    t.dtype = data->info().dtype;
    t.shape = data->info().shape;
    t.data = std::make_shared<const std::vector<std::byte>>(data->bytes().begin(),
                                                            data->bytes().end());
  } else if (key == "value_float") {
    t.dtype = DType::kF32;
    t.data = bytes_of(std::vector<float>{a.f()});
  } else if (key == "value_floats") {
    t.dtype = DType::kF32;
    t.shape = {a.floats_size()};
    t.data = bytes_of(std::vector<float>(a.floats().begin(), a.floats().end()));
  } else if (key == "value_int") {
    t.dtype = DType::kI64;
    t.data = bytes_of(std::vector<int64_t>{a.i()});
  } else if (key == "value_ints") {
    t.dtype = DType::kI64;
    t.shape = {a.ints_size()};
    t.data = bytes_of(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
  } else if (key == "sparse_value") {
    return unimplemented(where + ": sparse constants are not supported");
  } else if (key == "value_string" || key == "value_strings") {
    return unimplemented(where + ": string constants are not supported");
  } else {
    return invalid_argument(where + " has an unknown attribute '" + key + "'");
  }
  return t;
}

// The model's statement about a value (dtype from elem_type, dims), or an
// error when the type is not a tensor Loom knows.
Result<lowering::passes::DeclaredType> declared_of(const ::onnx::ValueInfoProto& v) {
  lowering::passes::DeclaredType d;
  if (!v.has_type()) return invalid_argument("'" + v.name() + "' has no type");
  if (!v.type().has_tensor_type()) {
    // Sequences, maps and optionals (non_tensor_type reads those).
    return unimplemented("'" + v.name() + "' is not a tensor; Loom supports tensors only");
  }
  const auto& tt = v.type().tensor_type();
  if (tt.elem_type() != 0) {
    auto dtype = onnx_io::dtype_from_onnx(tt.elem_type());
    if (!dtype.ok()) return dtype.status().with_context("'" + v.name() + "'");
    d.dtype = *dtype;
  }
  if (tt.has_shape()) {
    d.has_shape = true;
    bool named = false;
    for (const auto& dim : tt.shape().dim()) {
      const bool known = dim.has_dim_value() && dim.dim_value() >= 0;
      d.dims.push_back(known ? dim.dim_value() : -1);
      d.symbols.push_back(known || !dim.has_dim_param() ? std::string() : dim.dim_param());
      named = named || !d.symbols.back().empty();
    }
    if (!named) d.symbols.clear();
  }
  return d;
}

}  // namespace loom::compiler
