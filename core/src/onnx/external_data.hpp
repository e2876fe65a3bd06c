// External data of ONNX tensors (private to loom_onnx): the key/value
// record a TensorProto carries when data_location is EXTERNAL, and reading
// the bytes it names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "loom/status.hpp"

namespace onnx {
class TensorProto;
}

namespace loom::onnx_io::detail {

struct ExternalRef {
  std::string location;           // as written in the model
  uint64_t offset = 0;
  std::optional<uint64_t> length;  // absent: to the end of the file
};

// Parses the external_data entries: "location" is required, "offset" and
// "length" are decimal; "checksum" and unknown keys are ignored (the ONNX
// spec lets writers add keys). Errors name the key.
Result<ExternalRef> parse_external_ref(const ::onnx::TensorProto& tensor);

// Resolves `location` under `base_dir`: refuses empty, absolute and rooted
// paths, '..' components, and (after resolving symlinks) anything outside
// base_dir. Returns the path to open.
Result<std::filesystem::path> resolve_external_path(const std::filesystem::path& base_dir,
                                                    const std::string& location);

// Reads exactly `byte_size` bytes that `ref` names. The range is checked
// against the file's size before anything is allocated.
Result<std::vector<std::byte>> read_external(const std::filesystem::path& base_dir,
                                             const ExternalRef& ref, uint64_t byte_size);

}  // namespace loom::onnx_io::detail
