// Reading ONNX models and their tensors: the compile side's entry point.
//
// Model::load_file parses a ModelProto with a size bound (protobuf's own
// ceiling, 2 GiB - 1, unless the caller asks for less) and keeps the file's
// folder for external data. read_tensor() turns any TensorProto of the model
// (an initializer, a Constant node's value) into dtype, shape and
// little-endian row-major bytes, whichever way it was stored:
//   - raw_data (viewed in place, no copy);
//   - the typed fields float_data, double_data, int32_data (also for 8/16-bit
//     integers, bool, f16 and bf16 bit patterns), int64_data, uint64_data;
//   - external data: a byte range of a file named relative to the model's
//     folder; absolute paths, '..' and symlinks leaving the folder are refused.
// Every malformed case is a Status naming the tensor and the field; nothing
// is allocated beyond what the model or the external file really holds.
//
// Lifetime: TensorData may view bytes inside its Model and must not outlive
// it. Model and TensorData are immutable once made and safe to read from
// several threads. Nothing here throws: protobuf's exceptions are caught.
//
// This is the only Loom library that links protobuf and libonnx; the runtime
// never links it. The header itself needs no ONNX include.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace onnx {  // ONNX_NAMESPACE of Debian's libonnx
class ModelProto;
class TensorProto;
}  // namespace onnx

namespace loom::onnx_io {

struct LoadOptions {
  // Largest model file accepted; protobuf cannot parse more than 2 GiB - 1.
  uint64_t max_model_bytes = (uint64_t{1} << 31) - 1;
};

// A parsed ONNX model, owning its ModelProto.
class Model {
 public:
  // Reads and parses `path`. The file's folder becomes base_dir() for
  // external data. Errors start with the path.
  static Result<std::unique_ptr<Model>> load_file(const std::filesystem::path& path,
                                                  const LoadOptions& options = {});
  // Parses model bytes (copied). External data is resolved against
  // `base_dir`; with an empty base_dir any external tensor is refused.
  // `what` names the source in error messages.
  static Result<std::unique_ptr<Model>> parse(std::span<const std::byte> bytes,
                                              std::filesystem::path base_dir = {},
                                              std::string_view what = "buffer",
                                              const LoadOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // The whole model, for the importer (include "onnx/onnx_pb.h" to use it).
  const ::onnx::ModelProto& proto() const;
  const std::filesystem::path& base_dir() const { return base_dir_; }
  // The path or `what` it was read from, for messages.
  const std::string& source() const { return source_; }

 private:
  Model();
  std::unique_ptr<::onnx::ModelProto> proto_;
  std::filesystem::path base_dir_;
  std::string source_;
};

// How a tensor's bytes were stored in the model.
enum class Storage { kRaw, kTyped, kExternal, kEmpty };
std::string_view storage_name(Storage storage);  // "raw_data", "typed", "external", "empty"

struct TensorInfo {
  std::string name;
  DType dtype = DType::kInvalid;
  Shape shape;
  uint64_t byte_size = 0;
  Storage storage = Storage::kEmpty;
};

// One tensor's bytes: a view into the Model (raw_data) or owned (converted
// typed fields, external data). Movable; copying is not offered because a
// view would silently alias.
class TensorData {
 public:
  TensorData() = default;
  TensorData(TensorData&&) noexcept = default;
  TensorData& operator=(TensorData&&) noexcept = default;
  TensorData(const TensorData&) = delete;
  TensorData& operator=(const TensorData&) = delete;

  const TensorInfo& info() const { return info_; }
  // info().byte_size bytes, little-endian, row-major.
  std::span<const std::byte> bytes() const { return owned_ ? std::span(storage_) : view_; }

 private:
  friend Result<TensorData> read_tensor(const Model&, const ::onnx::TensorProto&);
  TensorInfo info_;
  bool owned_ = false;
  std::span<const std::byte> view_;
  std::vector<std::byte> storage_;
};

// Loom's dtype for an ONNX TensorProto.DataType value; an error naming the
// type for those Loom lacks (string, complex, float8) and unknown values.
Result<DType> dtype_from_onnx(int32_t data_type);

// Name, dtype, shape, size and storage of `tensor` without reading its data;
// checks the shape (no negative dimension, no overflow) and the data type.
Result<TensorInfo> describe_tensor(const ::onnx::TensorProto& tensor);

// Decodes `tensor`, which belongs to `model` (external data is resolved
// against model.base_dir()). Errors name the tensor and the field.
Result<TensorData> read_tensor(const Model& model, const ::onnx::TensorProto& tensor);

// describe_tensor() of every graph initializer, in model order. Refuses
// duplicate or empty names and sparse initializers (not supported).
Result<std::vector<TensorInfo>> list_initializers(const Model& model);

// read_tensor() of every graph initializer, in model order; the same checks
// as list_initializers().
Result<std::vector<TensorData>> read_initializers(const Model& model);

}  // namespace loom::onnx_io
