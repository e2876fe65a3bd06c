#include "loom/tensor_metadata.hpp"

#include <nlohmann/json.hpp>

namespace loom::io {
namespace {

constexpr size_t kMaxParsedMetadata = 64 * 1024;

// The recorded shape as text, without dump(): a hostile value may be nested
// deeply enough for recursive printing to run out of stack.
std::string describe_shape(const nlohmann::json& value, bool* is_shape, Shape* out) {
  *is_shape = value.is_array();
  if (*is_shape) {
    for (const auto& d : value) {
      if (!d.is_number_integer() || (d.is_number_unsigned() && d.get<uint64_t>() > INT64_MAX)) {
        *is_shape = false;
        break;
      }
      out->push_back(d.get<int64_t>());
    }
  }
  return *is_shape ? shape_to_string(*out) : std::string("a value that is not a shape");
}

}  // namespace

std::string encode_tensor_metadata(DType dtype, std::span<const int64_t> shape) {
  nlohmann::json j = {{"dtype", std::string(dtype_name(dtype))},
                      {"shape", std::vector<int64_t>(shape.begin(), shape.end())}};
  return j.dump();
}

Result<std::optional<TensorMetadata>> decode_tensor_metadata(std::string_view metadata) {
  if (metadata.empty() || metadata.size() > kMaxParsedMetadata || metadata.front() != '{') {
    return std::optional<TensorMetadata>();
  }
  nlohmann::json j = nlohmann::json::parse(metadata, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("dtype")) {
    return std::optional<TensorMetadata>();
  }
  TensorMetadata out;
  const nlohmann::json& dtype = j["dtype"];
  if (!dtype.is_string()) return invalid_argument("tensor metadata: \"dtype\" is not a string");
  out.dtype = dtype_from_name(dtype.get_ref<const std::string&>());
  if (out.dtype == DType::kInvalid) {
    return invalid_argument("tensor metadata: dtype '" +
                            dtype.get_ref<const std::string&>().substr(0, 32) +
                            "' is not one Loom knows");
  }
  auto shape = j.find("shape");
  if (shape == j.end()) return invalid_argument("tensor metadata: no \"shape\"");
  bool is_shape = false;
  std::string text = describe_shape(*shape, &is_shape, &out.shape);
  if (!is_shape) return invalid_argument("tensor metadata: \"shape\" is " + text);
  for (int64_t d : out.shape) {
    if (d < 0) return invalid_argument("tensor metadata: shape " + text + " has a negative dimension");
  }
  return std::optional<TensorMetadata>(std::move(out));
}

Status check_tensor_metadata(std::string_view metadata, DType dtype,
                             std::span<const int64_t> shape) {
  if (metadata.empty() || metadata.size() > kMaxParsedMetadata || metadata.front() != '{') {
    return Status();
  }
  nlohmann::json j = nlohmann::json::parse(metadata, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status();
  if (auto it = j.find("dtype"); it != j.end()) {
    if (!it->is_string()) {
      return invalid_argument("archive records a dtype that is not a string, expected " +
                              std::string(dtype_name(dtype)));
    }
    const std::string& name = it->get_ref<const std::string&>();
    if (dtype_from_name(name) != dtype) {
      return invalid_argument("archive records dtype '" + name.substr(0, 32) + "', expected " +
                              std::string(dtype_name(dtype)));
    }
  }
  if (auto it = j.find("shape"); it != j.end()) {
    bool is_shape = false;
    Shape recorded;
    std::string text = describe_shape(*it, &is_shape, &recorded);
    if (!is_shape || !std::equal(recorded.begin(), recorded.end(), shape.begin(), shape.end())) {
      return invalid_argument("archive records shape " + text + ", expected " +
                              shape_to_string(shape));
    }
  }
  return Status();
}

}  // namespace loom::io
