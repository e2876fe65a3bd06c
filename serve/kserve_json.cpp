#include "kserve_json.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

namespace loom::serve {

namespace {

using nlohmann::json;

// Deeper shapes than any model takes; bounds the walk of nested `data`.
constexpr size_t kMaxRank = 32;

std::string input_where(const std::string& name) { return "input '" + name + "': "; }

// Writes JSON scalar `v` as element `index` of `t`.
Status store_element(const json& v, Tensor& t, uint64_t index, const std::string& where) {
  auto bad = [&](const char* want) {
    std::string text = v.dump();
    if (text.size() > 40) text = text.substr(0, 40) + "...";
    return invalid_argument(where + "element " + std::to_string(index) + " is " + text + ", not " + want +
                            " as datatype " + std::string(kserve_datatype(t.dtype())) + " needs");
  };
  auto store_int = [&](auto* data) -> Status {
    using T = std::remove_pointer_t<decltype(data)>;
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return bad("an integer in range");
      data[index] = static_cast<T>(u);
      return Status();
    }
    if (v.is_number_integer()) {
      const int64_t i = v.get<int64_t>();
      if constexpr (std::is_unsigned_v<T>) {
        if (i < 0) return bad("a non-negative integer");
        if (static_cast<uint64_t>(i) > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
          return bad("an integer in range");
        }
      } else {
        if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
            i > static_cast<int64_t>(std::numeric_limits<T>::max())) {
          return bad("an integer in range");
        }
      }
      data[index] = static_cast<T>(i);
      return Status();
    }
    return bad("an integer");
  };
  switch (t.dtype()) {
    case DType::kBool:
      if (!v.is_boolean()) return bad("true or false");
      t.data_as<uint8_t>()[index] = v.get<bool>() ? 1 : 0;
      return Status();
    case DType::kU8: return store_int(t.data_as<uint8_t>());
    case DType::kU16: return store_int(t.data_as<uint16_t>());
    case DType::kU32: return store_int(t.data_as<uint32_t>());
    case DType::kU64: return store_int(t.data_as<uint64_t>());
    case DType::kI8: return store_int(t.data_as<int8_t>());
    case DType::kI16: return store_int(t.data_as<int16_t>());
    case DType::kI32: return store_int(t.data_as<int32_t>());
    case DType::kI64: return store_int(t.data_as<int64_t>());
    case DType::kF32: {
      if (!v.is_number()) return bad("a number");
      const double d = v.get<double>();
      if (std::isfinite(d) && std::fabs(d) > std::numeric_limits<float>::max()) return bad("a number in FP32's range");
      t.data_as<float>()[index] = static_cast<float>(d);
      return Status();
    }
    case DType::kF64:
      if (!v.is_number()) return bad("a number");
      t.data_as<double>()[index] = v.get<double>();
      return Status();
    default:
      return invalid_argument(where + "datatype " + std::string(kserve_datatype(t.dtype())) +
                              " has no JSON form; send it as binary data (parameters.binary_data_size)");
  }
}

// Stores the scalars of `data` (flat, or nested no deeper than the rank) in
// row-major order; `count` is how many were stored so far.
Status store_data(const json& data, Tensor& t, size_t depth, uint64_t& count, const std::string& where) {
  if (!data.is_array()) {
    if (depth == 0) return invalid_argument(where + "'data' is not an array");
    if (count >= t.element_count()) {
      return invalid_argument(where + "'data' holds more than the " + std::to_string(t.element_count()) +
                              " elements of shape " + shape_to_string(t.shape()));
    }
    LOOM_RETURN_IF_ERROR(store_element(data, t, count, where));
    ++count;
    return Status();
  }
  if (depth > std::max<size_t>(t.rank(), 1)) {
    return invalid_argument(where + "'data' nests arrays deeper than the shape's rank " + std::to_string(t.rank()));
  }
  for (const json& item : data) LOOM_RETURN_IF_ERROR(store_data(item, t, depth + 1, count, where));
  return Status();
}

Result<Shape> parse_shape(const json& input, const std::string& where, DType dtype, uint64_t max_bytes) {
  auto it = input.find("shape");
  if (it == input.end() || !it->is_array()) return invalid_argument(where + "'shape' is missing or not an array");
  if (it->size() > kMaxRank) {
    return invalid_argument(where + "'shape' has " + std::to_string(it->size()) + " dimensions; at most " +
                            std::to_string(kMaxRank));
  }
  Shape shape;
  uint64_t bytes = dtype_size(dtype);
  for (const json& d : *it) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return invalid_argument(where + "'shape' holds " + d.dump() + ", not a non-negative integer");
    }
    const uint64_t n = static_cast<uint64_t>(d.get<int64_t>());
    shape.push_back(static_cast<int64_t>(n));
    if (n != 0 && bytes > max_bytes / n) {
      return resource_exhausted(where + "shape " + shape_to_string(shape) + "... holds more than the " +
                                std::to_string(max_bytes) + " bytes this server takes (--max-request-bytes)");
    }
    bytes *= n;
  }
  return shape;
}

const json* find_parameter(const json& object, const char* name) {
  auto params = object.find("parameters");
  if (params == object.end() || !params->is_object()) return nullptr;
  auto it = params->find(name);
  return it == params->end() ? nullptr : &*it;
}

Result<InferRequest> parse_document(const json& doc, std::string_view binary, uint64_t max_request_bytes) {
  if (!doc.is_object()) return invalid_argument("the request is not a JSON object");
  InferRequest request;
  if (auto id = doc.find("id"); id != doc.end()) {
    if (!id->is_string()) return invalid_argument("'id' is not a string");
    request.id = id->get<std::string>();
  }
  if (const json* b = find_parameter(doc, "binary_data_output")) {
    if (!b->is_boolean()) return invalid_argument("parameters.binary_data_output is not true or false");
    request.all_binary = b->get<bool>();
  }
  auto inputs = doc.find("inputs");
  if (inputs == doc.end() || !inputs->is_array()) return invalid_argument("'inputs' is missing or not an array");
  uint64_t binary_used = 0;
  uint64_t total_bytes = 0;
  for (const json& input : *inputs) {
    if (!input.is_object()) return invalid_argument("an element of 'inputs' is not an object");
    auto name = input.find("name");
    if (name == input.end() || !name->is_string()) return invalid_argument("an input has no 'name' string");
    const std::string where = input_where(name->get<std::string>());
    auto datatype = input.find("datatype");
    if (datatype == input.end() || !datatype->is_string()) return invalid_argument(where + "'datatype' is missing");
    const DType dtype = dtype_from_kserve(datatype->get<std::string>());
    if (dtype == DType::kInvalid) {
      return invalid_argument(where + "datatype '" + datatype->get<std::string>() +
                              "' is not one Loom runs (BOOL, UINT8..UINT64, INT8..INT64, FP16, BF16, FP32, FP64)");
    }
    LOOM_ASSIGN_OR_RETURN(Shape shape, parse_shape(input, where, dtype, max_request_bytes));
    LOOM_ASSIGN_OR_RETURN(Tensor tensor, Tensor::zeros(dtype, shape));
    total_bytes += tensor.byte_size();
    if (total_bytes > max_request_bytes) {
      return resource_exhausted(where + "the inputs so far hold " + std::to_string(total_bytes) +
                                " bytes; this server takes at most " + std::to_string(max_request_bytes) +
                                " (--max-request-bytes)");
    }
    const json* binary_size = find_parameter(input, "binary_data_size");
    auto data = input.find("data");
    if (binary_size != nullptr) {
      if (data != input.end()) return invalid_argument(where + "has both 'data' and parameters.binary_data_size");
      if (!binary_size->is_number_unsigned()) {
        return invalid_argument(where + "parameters.binary_data_size is not a non-negative integer");
      }
      const uint64_t size = binary_size->get<uint64_t>();
      if (size != tensor.byte_size()) {
        return invalid_argument(where + "parameters.binary_data_size is " + std::to_string(size) + "; shape " +
                                shape_to_string(shape) + " of " + std::string(kserve_datatype(dtype)) + " needs " +
                                std::to_string(tensor.byte_size()) + " bytes");
      }
      if (size > binary.size() - binary_used) {
        return invalid_argument(where + "its " + std::to_string(size) + " bytes of binary data go past the body's end (" +
                                std::to_string(binary.size() - binary_used) + " bytes left after the JSON)");
      }
      if (size != 0) std::memcpy(tensor.data(), binary.data() + binary_used, size);
      binary_used += size;
    } else {
      if (data == input.end()) return invalid_argument(where + "has neither 'data' nor parameters.binary_data_size");
      uint64_t count = 0;
      LOOM_RETURN_IF_ERROR(store_data(*data, tensor, 0, count, where));
      if (count != tensor.element_count()) {
        return invalid_argument(where + "'data' holds " + std::to_string(count) + " elements; shape " +
                                shape_to_string(shape) + " has " + std::to_string(tensor.element_count()));
      }
    }
    request.inputs.push_back({name->get<std::string>(), std::move(tensor), false});
  }
  if (binary_used != binary.size()) {
    return invalid_argument("the body has " + std::to_string(binary.size() - binary_used) +
                            " bytes of binary data after the JSON that no input claims");
  }
  if (auto outputs = doc.find("outputs"); outputs != doc.end()) {
    if (!outputs->is_array()) return invalid_argument("'outputs' is not an array");
    for (const json& output : *outputs) {
      if (!output.is_object()) return invalid_argument("an element of 'outputs' is not an object");
      auto name = output.find("name");
      if (name == output.end() || !name->is_string()) return invalid_argument("an output has no 'name' string");
      RequestedOutput want{name->get<std::string>(), false};
      if (const json* b = find_parameter(output, "binary_data")) {
        if (!b->is_boolean()) return invalid_argument("output '" + want.name + "': parameters.binary_data is not true or false");
        want.binary = b->get<bool>();
      }
      request.outputs.push_back(std::move(want));
    }
  }
  return request;
}

// The elements of `t` as a flat JSON array.
json tensor_data(const Tensor& t) {
  json out = json::array();
  const uint64_t n = t.element_count();
  auto add = [&](const auto* p) {
    for (uint64_t i = 0; i < n; ++i) out.push_back(p[i]);
  };
  switch (t.dtype()) {
    case DType::kBool:
      for (uint64_t i = 0; i < n; ++i) out.push_back(t.data_as<uint8_t>()[i] != 0);
      break;
    case DType::kU8: add(t.data_as<uint8_t>()); break;
    case DType::kU16: add(t.data_as<uint16_t>()); break;
    case DType::kU32: add(t.data_as<uint32_t>()); break;
    case DType::kU64: add(t.data_as<uint64_t>()); break;
    case DType::kI8: add(t.data_as<int8_t>()); break;
    case DType::kI16: add(t.data_as<int16_t>()); break;
    case DType::kI32: add(t.data_as<int32_t>()); break;
    case DType::kI64: add(t.data_as<int64_t>()); break;
    case DType::kF32: add(t.data_as<float>()); break;
    case DType::kF64: add(t.data_as<double>()); break;
    default: break;
  }
  return out;
}

}  // namespace

Result<InferRequest> parse_infer_request(std::string_view body, std::optional<uint64_t> header_length,
                                         uint64_t max_request_bytes) {
  std::string_view text = body;
  std::string_view binary;
  if (header_length.has_value()) {
    if (*header_length > body.size()) {
      return invalid_argument("Inference-Header-Content-Length is " + std::to_string(*header_length) +
                              " but the body has " + std::to_string(body.size()) + " bytes");
    }
    text = body.substr(0, *header_length);
    binary = body.substr(*header_length);
  }
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return invalid_argument(std::string("the request is not valid JSON: ") + e.what());
  }
  try {
    return parse_document(doc, binary, max_request_bytes);
  } catch (const json::exception& e) {
    return invalid_argument(std::string("the request does not follow the protocol: ") + e.what());
  }
}

EncodedResponse encode_infer_response(const InferResponse& response) {
  json doc;
  doc["model_name"] = response.model;
  doc["model_version"] = response.version;
  if (!response.id.empty()) doc["id"] = response.id;
  json outputs = json::array();
  std::string binary;
  for (const InferTensor& t : response.outputs) {
    json out;
    out["name"] = t.name;
    out["datatype"] = std::string(kserve_datatype(t.tensor.dtype()));
    out["shape"] = t.tensor.shape();
    const bool as_binary = t.binary || t.tensor.dtype() == DType::kF16 || t.tensor.dtype() == DType::kBF16;
    if (as_binary) {
      out["parameters"]["binary_data_size"] = t.tensor.byte_size();
      binary.append(reinterpret_cast<const char*>(t.tensor.data()), t.tensor.byte_size());
    } else {
      out["data"] = tensor_data(t.tensor);
    }
    outputs.push_back(std::move(out));
  }
  doc["outputs"] = std::move(outputs);
  EncodedResponse encoded;
  encoded.body = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!binary.empty() || std::any_of(response.outputs.begin(), response.outputs.end(),
                                     [](const InferTensor& t) { return t.binary; })) {
    encoded.json_length = encoded.body.size();
    encoded.body += binary;
  }
  return encoded;
}

std::string server_metadata_json(const ServerMetadata& metadata) {
  json doc;
  doc["name"] = metadata.name;
  doc["version"] = metadata.version;
  doc["extensions"] = metadata.extensions;
  return doc.dump();
}

std::string model_metadata_json(const ModelMetadata& metadata) {
  auto tensors = [](const std::vector<TensorMetadata>& list) {
    json out = json::array();
    for (const TensorMetadata& t : list) {
      out.push_back({{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}});
    }
    return out;
  };
  json doc;
  doc["name"] = metadata.name;
  doc["versions"] = metadata.versions;
  doc["platform"] = metadata.platform;
  doc["inputs"] = tensors(metadata.inputs);
  doc["outputs"] = tensors(metadata.outputs);
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string error_json(std::string_view message) {
  json doc;
  doc["error"] = std::string(message);
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace loom::serve
