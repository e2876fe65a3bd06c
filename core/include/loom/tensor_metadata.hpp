// The type of a tensor as Loom records it in the metadata of a parameter
// archive entry: the JSON object {"dtype":"f32","shape":[2,3]}.
//
// Archives made by other tools carry other metadata (or none); it is not an
// error, it just records nothing a loader can check. Thread-safe, no throw.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom::io {

// {"dtype":"<dtype_name>","shape":[..]}, compact.
std::string encode_tensor_metadata(DType dtype, std::span<const int64_t> shape);

// The dtype and shape `metadata` records, when it is Loom's JSON (an object
// with a "dtype" key, at most 64 KiB); nullopt for anything else (empty, or
// another tool's metadata). invalid_argument when it is Loom's JSON but the
// dtype is unknown or the shape is not an array of dimensions.
struct TensorMetadata {
  DType dtype = DType::kInvalid;
  Shape shape;
};
Result<std::optional<TensorMetadata>> decode_tensor_metadata(std::string_view metadata);

// Checks what `metadata` records against the expected type. OK when it
// records nothing (not a JSON object, or no "dtype"/"shape" key); otherwise
// invalid_argument for each recorded field that disagrees, e.g. "archive
// records dtype 'f16', expected f32" or "archive records shape [4, 2],
// expected [2, 4]". Metadata past 64 KiB is not parsed (not Loom's).
Status check_tensor_metadata(std::string_view metadata, DType dtype,
                             std::span<const int64_t> shape);

}  // namespace loom::io
