// The capture reader (decode_capture: identifier, Verifier, schema version,
// every index and tensor size, payload hashes). Whatever it accepts must be
// self-consistent (indexes in range, tensor sizes matching their payloads)
// and encode back to bytes that decode to the same counts. The calls mode of
// replay checks an accepted capture's calls (check_all_calls): it refuses
// with one line or accepts, never crashes.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.hpp"
#include "host/recording/capture_model.hpp"
#include "runtime/capture_replay.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  namespace hc = host::capture;
  auto capture = hc::decode_capture(fuzz::bytes_of(data, size), "fuzz");
  if (!capture.ok()) {
    fuzz::check_refusal(capture.status());
    return 0;
  }
  const hc::Capture& c = *capture;
  for (const hc::CallRecord& r : c.calls) {
    if (r.plugin >= c.plugins.size()) fuzz::fail("a call's plugin out of range");
    if (r.device >= static_cast<int64_t>(c.devices.size())) fuzz::fail("a call's device out of range");
    if (r.payload >= static_cast<int64_t>(c.payloads.size())) fuzz::fail("a call's payload out of range");
    for (const auto* list : {&r.inputs, &r.outputs}) {
      for (const hc::TensorRecord& t : *list) {
        if (t.payload >= 0 && c.payloads[t.payload].bytes.size() != t.byte_size) {
          fuzz::fail("a tensor whose payload differs from its size");
        }
      }
    }
  }
  for (uint32_t p = 0; p < c.plugins.size() && p < 4; ++p) {
    if (Status st = runtime::check_all_calls(c, p, "fuzz"); !st.ok()) {
      fuzz::check_refusal(st);
      if (st.message().find('\n') != std::string::npos) fuzz::fail("a refusal of more than one line");
    }
  }
  const std::vector<uint8_t> again = hc::encode_capture(c);
  auto back = hc::decode_capture(std::as_bytes(std::span<const uint8_t>(again)), "re-encoded");
  if (!back.ok() || back->calls.size() != c.calls.size() ||
      back->payloads.size() != c.payloads.size() || back->devices.size() != c.devices.size()) {
    fuzz::fail("an accepted capture does not survive encode + decode");
  }
  return 0;
}
