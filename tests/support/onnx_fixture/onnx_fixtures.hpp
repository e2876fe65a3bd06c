// Hand-built ONNX models for the tests (protobuf API, nothing downloaded).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "loom/status.hpp"
#include "loom/tensor.hpp"
#include "onnx/onnx_pb.h"

namespace loom::testing::onnx_fixtures {

// A model with ir_version 8, opset 17 and an empty graph.
::onnx::ModelProto empty_model();

// Appends an initializer with no data yet.
::onnx::TensorProto& add_initializer(::onnx::ModelProto& model, const std::string& name,
                                     int32_t data_type, std::vector<int64_t> dims);

template <typename T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span(v));
}

void set_raw(::onnx::TensorProto& t, std::span<const std::byte> bytes);
// data_location EXTERNAL with location, offset and (when given) length.
void set_external(::onnx::TensorProto& t, const std::string& location,
                  std::optional<std::string> offset, std::optional<std::string> length);

Status write_model(const ::onnx::ModelProto& model, const std::filesystem::path& path);
std::vector<std::byte> serialize(const ::onnx::ModelProto& model);
Status write_bytes(const std::filesystem::path& path, std::span<const std::byte> bytes);

// The sample model: one initializer per storage kind and several dtypes
// (raw f32, float_data, int64_data, f16 bits and bools in int32_data,
// a double scalar, a name with '/' and '.', external data at an offset in
// `<dir>/<stem>.weights`). Writes `<dir>/<stem>.onnx` and the weights
// file; returns each initializer's name and expected tensor, in order.
Result<std::vector<std::pair<std::string, Tensor>>> write_sample_model(
    const std::filesystem::path& dir, const std::string& stem = "model");

}  // namespace loom::testing::onnx_fixtures
