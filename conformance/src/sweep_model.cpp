// One-node ONNX models from the operator sweep's cases (the notation is in
// sweep_table.cpp), with seeded input values.
#include <charconv>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "onnx/onnx_pb.h"
#include "sweep_table.hpp"

namespace loom::conformance::sweep {

namespace {

// xorshift64: the same values on every machine and build.
struct SweepRandom {
  uint64_t state;
  explicit SweepRandom(uint64_t seed) : state(seed == 0 ? 0x9E3779B97F4A7C15ull : seed) {}
  uint64_t next() {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  }
  double unit() { return static_cast<double>(next() >> 11) / static_cast<double>(uint64_t{1} << 53); }
};

int32_t onnx_type_of(DType d) {
  switch (d) {
    case DType::kF32: return ::onnx::TensorProto::FLOAT;
    case DType::kF16: return ::onnx::TensorProto::FLOAT16;
    case DType::kF64: return ::onnx::TensorProto::DOUBLE;
    case DType::kI8: return ::onnx::TensorProto::INT8;
    case DType::kU8: return ::onnx::TensorProto::UINT8;
    case DType::kI32: return ::onnx::TensorProto::INT32;
    case DType::kI64: return ::onnx::TensorProto::INT64;
    case DType::kBool: return ::onnx::TensorProto::BOOL;
    default: return 0;
  }
}

// Exact for the values the sweep makes (multiples of 1/64 below 2^15).
uint16_t sweep_half_bits(double v) {
  if (v == 0) return 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  int e = 0;
  const double f = std::frexp(std::fabs(v), &e);  // |v| = f * 2^e, f in [0.5, 1)
  const int biased = e - 1 + 15;
  if (biased <= 0) return sign;
  const auto mantissa = static_cast<uint16_t>(std::lround((2 * f - 1) * 1024));
  return static_cast<uint16_t>(sign | (biased << 10) | mantissa);
}

// Stores `v` as element `i` of `t` (integers rounded, bools v != 0).
void store(Tensor& t, uint64_t i, double v) {
  switch (t.dtype()) {
    case DType::kF32: t.data_as<float>()[i] = static_cast<float>(v); break;
    case DType::kF64: t.data_as<double>()[i] = v; break;
    case DType::kF16: t.data_as<uint16_t>()[i] = sweep_half_bits(v); break;
    case DType::kI8: t.data_as<int8_t>()[i] = static_cast<int8_t>(std::lround(v)); break;
    case DType::kU8: t.data_as<uint8_t>()[i] = static_cast<uint8_t>(std::lround(v)); break;
    case DType::kI32: t.data_as<int32_t>()[i] = static_cast<int32_t>(std::lround(v)); break;
    case DType::kI64: t.data_as<int64_t>()[i] = std::lround(v); break;
    case DType::kBool: t.data_as<uint8_t>()[i] = v != 0 ? 1 : 0; break;
    default: break;
  }
}

bool is_float(DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kF64; }

// "2x3x5" -> {2, 3, 5}; "[]" -> {} (a scalar).
Result<Shape> parse_dims(std::string_view text, std::string_view token) {
  Shape shape;
  if (text == "[]") return shape;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find('x', at);
    if (end == std::string_view::npos) end = text.size();
    int64_t d = -1;
    auto [p, ec] = std::from_chars(text.data() + at, text.data() + end, d);
    if (ec != std::errc() || p != text.data() + end || d < 0) {
      return invalid_argument("sweep table: '" + std::string(token) + "' is not a shape such as 2x3x5");
    }
    shape.push_back(d);
    at = end + 1;
  }
  return shape;
}

Result<std::vector<double>> parse_numbers(std::string_view text, std::string_view token) {
  std::vector<double> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string part(text.substr(at, end - at));
    char* stop = nullptr;
    const double v = std::strtod(part.c_str(), &stop);
    if (part.empty() || stop != part.c_str() + part.size()) {
      return invalid_argument("sweep table: '" + std::string(token) + "' holds '" + part +
                              "', not a number");
    }
    out.push_back(v);
    at = end + 1;
  }
  return out;
}

std::vector<std::string_view> split_on(std::string_view text, std::string_view separator) {
  std::vector<std::string_view> parts;
  size_t at = 0;
  while (true) {
    const size_t end = text.find(separator, at);
    parts.push_back(text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
    if (end == std::string_view::npos) break;
    at = end + separator.size();
  }
  return parts;
}

void set_value_info(::onnx::ValueInfoProto& v, const std::string& name, DType dtype, const Shape& shape) {
  v.set_name(name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_type_of(dtype));
  auto* s = tt->mutable_shape();
  for (int64_t d : shape) s->add_dim()->set_dim_value(d);
}

Status add_attribute(::onnx::NodeProto& node, std::string_view item) {
  const size_t eq = item.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size()) {
    return invalid_argument("sweep table: attribute '" + std::string(item) + "' is not name=value");
  }
  auto* a = node.add_attribute();
  a->set_name(std::string(item.substr(0, eq)));
  std::string_view value = item.substr(eq + 1);
  if (value.front() == '\'') {
    if (value.size() < 2 || value.back() != '\'') {
      return invalid_argument("sweep table: attribute '" + std::string(item) + "' has an unclosed string");
    }
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(std::string(value.substr(1, value.size() - 2)));
    return Status();
  }
  const bool list = value.front() == '[';
  if (list) {
    if (value.back() != ']') return invalid_argument("sweep table: attribute '" + std::string(item) + "' has an unclosed list");
    value = value.substr(1, value.size() - 2);
  }
  const bool floating = value.find('.') != std::string_view::npos;
  auto numbers = parse_numbers(value, item);
  if (!numbers.ok()) return numbers.status();
  if (!list && numbers->size() != 1) return invalid_argument("sweep table: attribute '" + std::string(item) + "' has no value");
  if (floating) {
    a->set_type(list ? ::onnx::AttributeProto::FLOATS : ::onnx::AttributeProto::FLOAT);
    for (double v : *numbers) list ? a->add_floats(static_cast<float>(v)) : a->set_f(static_cast<float>(v));
  } else {
    a->set_type(list ? ::onnx::AttributeProto::INTS : ::onnx::AttributeProto::INT);
    for (double v : *numbers) list ? a->add_ints(std::llround(v)) : a->set_i(std::llround(v));
  }
  return Status();
}

}  // namespace

Result<BuiltCase> build_case(const SweepRow& row, const SweepCase& c, uint64_t seed) {
  const DType case_dtype = dtype_from_name(c.dtype);
  if (onnx_type_of(case_dtype) == 0) {
    return invalid_argument("sweep table: " + c.op + " names dtype '" + c.dtype + "', which the sweep does not make");
  }
  SweepRandom random(seed);
  ::onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("loom-conformance-sweep");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(c.opset);
  auto* graph = model.mutable_graph();
  graph->set_name("sweep_" + c.op);
  auto* node = graph->add_node();
  node->set_op_type(c.op);
  node->set_name(c.op);
  BuiltCase built;
  built.outputs = row.outputs;

  int k = 0;
  for (std::string_view token : split_on(c.inputs, "; ")) {
    const std::string name = "in" + std::to_string(k++);
    if (token == "_") {
      node->add_input("");
      continue;
    }
    node->add_input(name);
    const size_t colon = token.find(':'), equals = token.find('='), at = token.find('@');
    if (colon != std::string_view::npos || equals != std::string_view::npos) {
      // An initializer: DTYPE:v,v (1-D) or DTYPE=v (a scalar).
      const bool scalar = equals != std::string_view::npos && (colon == std::string_view::npos || equals < colon);
      const size_t cut = scalar ? equals : colon;
      const std::string_view type_name = token.substr(0, cut);
      const DType dtype = type_name == "T" ? case_dtype : dtype_from_name(type_name);
      if (onnx_type_of(dtype) == 0) {
        return invalid_argument("sweep table: '" + std::string(token) + "' names an unknown dtype");
      }
      auto values = parse_numbers(token.substr(cut + 1), token);
      if (!values.ok()) return values.status();
      if (scalar && values->size() != 1) return invalid_argument("sweep table: '" + std::string(token) + "' is not one value");
      Shape shape;
      if (!scalar) shape.push_back(static_cast<int64_t>(values->size()));
      auto t = Tensor::zeros(dtype, shape);
      if (!t.ok()) return t.status();
      for (size_t i = 0; i < values->size(); ++i) store(*t, i, (*values)[i]);
      auto* init = graph->add_initializer();
      init->set_name(name);
      init->set_data_type(onnx_type_of(dtype));
      for (int64_t d : shape) init->add_dims(d);
      init->set_raw_data(t->data(), t->byte_size());
      continue;
    }
    DType dtype = case_dtype;
    std::string_view dims = token;
    int64_t index_bound = -1;
    if (at != std::string_view::npos) {
      const std::string_view kind = token.substr(0, at);
      dims = token.substr(at + 1);
      if (kind == "bool") {
        dtype = DType::kBool;
      } else if (kind == "idx") {
        const size_t lt = dims.find('<');
        if (lt == std::string_view::npos) return invalid_argument("sweep table: '" + std::string(token) + "' lacks <bound");
        auto bound = parse_numbers(dims.substr(lt + 1), token);
        if (!bound.ok() || bound->size() != 1) return invalid_argument("sweep table: '" + std::string(token) + "' has a bad bound");
        index_bound = static_cast<int64_t>((*bound)[0]);
        dims = dims.substr(0, lt);
        dtype = DType::kI64;
      } else {
        return invalid_argument("sweep table: '" + std::string(token) + "': unknown kind '" + std::string(kind) + "'");
      }
    }
    auto shape = parse_dims(dims, token);
    if (!shape.ok()) return shape.status();
    auto t = Tensor::zeros(dtype, *shape);
    if (!t.ok()) return t.status();
    for (uint64_t i = 0; i < t->element_count(); ++i) {
      double v;
      if (index_bound >= 0) {
        v = static_cast<double>(random.next() % static_cast<uint64_t>(index_bound));
      } else if (dtype == DType::kBool) {
        v = static_cast<double>(random.next() & 1);
      } else if (is_float(dtype)) {
        // Multiples of 1/64: exact in every float type, so that each
        // backend sees the same values.
        v = std::floor((row.low + (row.high - row.low) * random.unit()) * 64) / 64;
      } else {
        v = std::floor(row.low + (row.high - row.low + 1) * random.unit());
        v = std::min(v, row.high);
      }
      store(*t, i, v);
    }
    if (index_bound >= 0) {
      auto* init = graph->add_initializer();
      init->set_name(name);
      init->set_data_type(onnx_type_of(dtype));
      for (int64_t d : *shape) init->add_dims(d);
      init->set_raw_data(t->data(), t->byte_size());
      continue;
    }
    set_value_info(*graph->add_input(), name, dtype, *shape);
    built.inputs.push_back({name, std::move(*t)});
  }
  if (built.inputs.empty()) {
    return invalid_argument("sweep table: " + c.op + " inputs '" + c.inputs +
                            "' have no data input (the compiler would fold the node away)");
  }
  for (int o = 0; o < row.outputs; ++o) {
    node->add_output("out" + std::to_string(o));
    graph->add_output()->set_name("out" + std::to_string(o));
  }
  if (!c.attributes.empty()) {
    for (std::string_view item : split_on(c.attributes, " ")) {
      if (item.empty()) continue;
      if (Status st = add_attribute(*node, item); !st.ok()) return st;
    }
  }
  if (!model.SerializeToString(&built.model)) return internal_error("sweep: the model of " + c.label() + " does not serialize");
  return built;
}

}  // namespace loom::conformance::sweep
