// The initializers (the weights) of an ONNX model file, decoded into Loom's
// dtypes and little-endian row-major bytes, for tools that store them
// elsewhere: `loom params create --from-onnx` writes them into an IREE
// parameter archive.
//
//   LOOM_ASSIGN_OR_RETURN(OnnxInitializers inits, OnnxInitializers::read_file("m.onnx"));
//   for (const OnnxInitializer& init : inits.entries()) use(init.name, init.bytes);
//
// Compile side: the library is loom_onnx, which links protobuf and libonnx.
// libloom (the runtime) does not contain it, and this header is not
// installed with libloom's headers (cmake/LoomInstall.cmake), like
// loom/compiler.hpp. Immutable once read; safe to read from several
// threads. Nothing here throws.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom {

// One initializer of the model's graph.
struct OnnxInitializer {
  std::string name;
  DType dtype = DType::kInvalid;
  Shape shape;
  // Its value, little-endian, row-major. Views memory owned by the
  // OnnxInitializers it came from: valid as long as that object lives
  // (moving the object keeps it valid).
  std::span<const std::byte> bytes;
};

// Every graph initializer of one ONNX model, read at once. Owns the parsed
// model and every decoded value; move-only.
class OnnxInitializers {
 public:
  // Parses the model at `model_path` (at most 2 GiB - 1, protobuf's ceiling)
  // and decodes each graph initializer, in model order, however it is
  // stored: raw_data (viewed in place, not copied), the typed fields
  // (converted), or external data (read from a file relative to the model's
  // folder; absolute paths, '..' and symlinks leaving the folder are
  // refused). Errors start with the path and name the tensor and the field:
  // a file that is not an ONNX model, empty or duplicate initializer names,
  // sparse initializers (not supported), data types Loom lacks (strings,
  // complex, float8), data that does not match the shape.
  static Result<OnnxInitializers> read_file(const std::filesystem::path& model_path);

  OnnxInitializers(OnnxInitializers&&) noexcept;
  OnnxInitializers& operator=(OnnxInitializers&&) noexcept;
  OnnxInitializers(const OnnxInitializers&) = delete;
  OnnxInitializers& operator=(const OnnxInitializers&) = delete;
  ~OnnxInitializers();

  // In model order; empty when the model has no initializer.
  std::span<const OnnxInitializer> entries() const { return entries_; }

 private:
  struct Storage;  // the parsed model and the decoded values (core/src/onnx)
  explicit OnnxInitializers(std::unique_ptr<Storage> storage);

  std::unique_ptr<Storage> storage_;
  std::vector<OnnxInitializer> entries_;
};

}  // namespace loom
