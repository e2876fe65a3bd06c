#include "common/hash.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace loom {

uint64_t xxh3_64(std::span<const std::byte> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

Result<std::string> hash_file_xxh3_128(const std::filesystem::path& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"),
                                             &std::fclose);
  if (!file) {
    return not_found("cannot open " + path.string() + ": " +
                     std::strerror(errno));
  }
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state(
      XXH3_createState(), &XXH3_freeState);
  if (!state || XXH3_128bits_reset(state.get()) != XXH_OK) {
    return internal_error("cannot initialize xxh3 state");
  }
  std::vector<char> buffer(1 << 20);
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), file.get())) > 0) {
    XXH3_128bits_update(state.get(), buffer.data(), n);
  }
  if (std::ferror(file.get())) {
    return data_loss("error reading " + path.string());
  }
  XXH128_hash_t h = XXH3_128bits_digest(state.get());
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx",
                static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return std::string("xxh3-128:") + hex;
}

}  // namespace loom
