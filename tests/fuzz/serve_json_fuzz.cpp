// The REST request parser of `loom serve` (serve/kserve_json.cpp): the
// protocol's JSON with the binary-data extension. The first byte chooses
// whether an Inference-Header-Content-Length is given (odd) and the next two
// its value; the rest is the body. Whatever the parser accepts must hold
// tensors within the byte limit whose sizes agree with their shapes, and
// must encode back into a response whose JSON part parses.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "kserve_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  if (size < 3) return 0;
  std::optional<uint64_t> header_length;
  if ((data[0] & 1) != 0) header_length = static_cast<uint64_t>(data[1]) | (static_cast<uint64_t>(data[2]) << 8);
  const std::string_view body(reinterpret_cast<const char*>(data + 3), size - 3);
  constexpr uint64_t kLimit = 1 << 20;
  auto request = serve::parse_infer_request(body, header_length, kLimit);
  if (!request.ok()) {
    fuzz::check_refusal(request.status());
    return 0;
  }
  uint64_t total = 0;
  serve::InferResponse response;
  for (const serve::InferTensor& t : request->inputs) {
    uint64_t elements = 1;
    for (int64_t d : t.tensor.shape()) {
      if (d < 0) fuzz::fail("an accepted input with a negative dimension");
      elements *= static_cast<uint64_t>(d);
    }
    if (elements != t.tensor.element_count() || t.tensor.byte_size() != elements * dtype_size(t.tensor.dtype())) {
      fuzz::fail("an accepted input whose size disagrees with its shape");
    }
    total += t.tensor.byte_size();
    response.outputs.push_back({t.name, t.tensor, (data[0] & 2) != 0});
  }
  if (total > kLimit) fuzz::fail("accepted inputs beyond the byte limit");
  const serve::EncodedResponse encoded = serve::encode_infer_response(response);
  const size_t json_size = encoded.json_length.value_or(encoded.body.size());
  if (json_size > encoded.body.size()) fuzz::fail("a response header length past its body");
  if (nlohmann::json::accept(encoded.body.substr(0, json_size)) == false) {
    fuzz::fail("an encoded response whose JSON does not parse");
  }
  return 0;
}
