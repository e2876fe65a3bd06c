// loom/onnx_initializers.hpp: the public view of read_initializers().
#include "loom/onnx_initializers.hpp"

#include <utility>

#include "onnx/onnx_model.hpp"

namespace loom {

struct OnnxInitializers::Storage {
  std::unique_ptr<onnx_io::Model> model;   // raw_data values view into it
  std::vector<onnx_io::TensorData> values;  // in model order
};

OnnxInitializers::OnnxInitializers(std::unique_ptr<Storage> storage)
    : storage_(std::move(storage)) {
  entries_.reserve(storage_->values.size());
  for (const onnx_io::TensorData& value : storage_->values) {
    const onnx_io::TensorInfo& info = value.info();
    entries_.push_back(OnnxInitializer{info.name, info.dtype, info.shape, value.bytes()});
  }
}

OnnxInitializers::OnnxInitializers(OnnxInitializers&&) noexcept = default;
OnnxInitializers& OnnxInitializers::operator=(OnnxInitializers&&) noexcept = default;
OnnxInitializers::~OnnxInitializers() = default;

Result<OnnxInitializers> OnnxInitializers::read_file(const std::filesystem::path& model_path) {
  auto storage = std::make_unique<Storage>();
  LOOM_ASSIGN_OR_RETURN(storage->model, onnx_io::Model::load_file(model_path));
  LOOM_ASSIGN_OR_RETURN(storage->values, onnx_io::read_initializers(*storage->model));
  return OnnxInitializers(std::move(storage));
}

}  // namespace loom
