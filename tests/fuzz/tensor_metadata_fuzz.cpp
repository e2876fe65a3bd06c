// The tensor metadata Loom records in .irpa entries (JSON {"dtype","shape"}):
// decode_tensor_metadata, check_tensor_metadata, and a round trip of what
// decodes through encode_tensor_metadata.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.hpp"
#include "loom/tensor_metadata.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto decoded = io::decode_tensor_metadata(text);
  Status checked = io::check_tensor_metadata(text, DType::kF32, Shape{2, 3});
  if (!checked.ok()) fuzz::check_refusal(checked);
  if (!decoded.ok()) {
    fuzz::check_refusal(decoded.status());
    return 0;
  }
  if (!decoded->has_value()) return 0;
  const io::TensorMetadata& m = **decoded;
  const std::string again = io::encode_tensor_metadata(m.dtype, m.shape);
  auto redecoded = io::decode_tensor_metadata(again);
  if (!redecoded.ok() || !redecoded->has_value() || (*redecoded)->dtype != m.dtype ||
      (*redecoded)->shape != m.shape) {
    fuzz::fail("decoded metadata does not survive encode + decode");
  }
  return 0;
}
