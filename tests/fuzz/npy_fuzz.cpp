// The .npy reader (parse_npy: magic, version, header literal, descr,
// shape, data length). Whatever it accepts must be self-consistent and
// encode back to bytes that parse to the same tensor.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz_support.hpp"
#include "loom/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  auto tensor = io::parse_npy(fuzz::bytes_of(data, size), "fuzz");
  if (!tensor.ok()) {
    fuzz::check_refusal(tensor.status());
    return 0;
  }
  if (tensor->byte_size() > size) fuzz::fail("a tensor larger than its file");
  const std::vector<std::byte> again = io::encode_npy(*tensor);
  if (again.empty()) return 0;  // a dtype .npy cannot write back
  auto reparsed = io::parse_npy(again, "re-encoded");
  if (!reparsed.ok() || reparsed->dtype() != tensor->dtype() ||
      reparsed->shape() != tensor->shape() || reparsed->byte_size() != tensor->byte_size() ||
      (tensor->byte_size() != 0 &&
       std::memcmp(reparsed->data(), tensor->data(), tensor->byte_size()) != 0)) {
    fuzz::fail("a parsed .npy does not survive encode + parse");
  }
  return 0;
}
