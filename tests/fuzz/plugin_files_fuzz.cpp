// What `loom doctor` and the host read of a plugin's files without running
// it: the ELF reader (identity, then the dynamic section and symbols), the
// ld.so cache parser, and the conformance stamp parser. The first byte picks
// the reader; the rest is the file.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "host/conformance_stamp.hpp"
#include "host/elf_file.hpp"
#include "host/library_search.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  if (size == 0) return 0;
  const auto bytes = fuzz::bytes_of(data + 1, size - 1);
  switch (data[0] % 3) {
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
