// What `loom doctor` and the host read of a plugin's files without running
// it: the ELF reader (identity, then the dynamic section and symbols), the
// ld.so cache parser, the conformance stamp parser and the parser of
// remembered probe verdicts (host/discovery/probe_cache.hpp). The first byte picks the
// reader; the rest is the file.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "host/discovery/conformance_stamp.hpp"
#include "host/discovery/elf_file.hpp"
#include "host/discovery/library_search.hpp"
#include "host/discovery/probe_cache.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  if (size == 0) return 0;
  const auto bytes = fuzz::bytes_of(data + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto id = host::read_elf_identity(bytes, "fuzz.so");
      if (!id.ok()) {
        fuzz::check_refusal(id.status());
        return 0;
      }
      auto dynamic = host::read_elf_dynamic(bytes, "fuzz.so");
      if (!dynamic.ok()) fuzz::check_refusal(dynamic.status());
      return 0;
    }
    case 1: {
      auto cache = host::parse_ld_cache(bytes, "ld.so.cache");
      if (!cache.ok()) fuzz::check_refusal(cache.status());
      return 0;
    }
    case 3: {
      const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
      auto verdict = host::parse_probe_verdict(text, "fuzz.json");
      if (!verdict.ok()) {
        fuzz::check_refusal(verdict.status());
        return 0;
      }
      // An accepted verdict is one the host may act on: a key that names
      // its file, a plugin, and a reason for any rejection; and it writes
      // back to text that parses to the same verdict.
      if (verdict->key.size() != 32 || verdict->plugin.empty() ||
          (verdict->code != StatusCode::kOk && verdict->message.empty())) {
        fuzz::fail("a probe verdict that breaks its contract was accepted");
      }
      auto again = host::parse_probe_verdict(host::format_probe_verdict(*verdict), "again.json");
      if (!again.ok() || again->message != verdict->message || again->code != verdict->code) {
        fuzz::fail("a probe verdict does not survive being written and read back");
      }
      return 0;
    }
    default: {
      const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
      auto stamp = host::parse_stamp(text, "fuzz.loom-conformance.json");
      if (!stamp.ok()) {
        fuzz::check_refusal(stamp.status());
        return 0;
      }
      // What parse_stamp accepts, write_stamp's validation accepts too.
      if (stamp->plugin.empty() || stamp->suite_version.empty()) {
        fuzz::fail("a stamp without plugin or suite version was accepted");
      }
      return 0;
    }
  }
}
