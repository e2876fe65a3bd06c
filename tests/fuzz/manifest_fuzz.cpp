// The plugin manifest parser (parse_manifest). It reads a path, so each
// input is written to a file of this process's own first; the parser's
// checks (JSON, field types, lengths, printable text, library file name)
// are what is fuzzed.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "fuzz_support.hpp"
#include "host/plugin_host.hpp"

namespace {

const std::filesystem::path& manifest_path() {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("loom-fuzz-" + std::to_string(::getpid()) + ".loom-plugin.json");
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom;
  const std::filesystem::path& path = manifest_path();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) fuzz::fail("cannot write the manifest file");
  if (size != 0 && std::fwrite(data, 1, size, f) != size) fuzz::fail("cannot write the manifest file");
  std::fclose(f);
  auto manifest = host::parse_manifest(path);
  std::remove(path.c_str());
  if (!manifest.ok()) {
    fuzz::check_refusal(manifest.status());
    return 0;
  }
  if (manifest->name.empty() || manifest->library.parent_path() != path.parent_path() ||
      manifest->abi_min > manifest->abi_max) {
    fuzz::fail("an accepted manifest breaks its contract");
  }
  return 0;
}
