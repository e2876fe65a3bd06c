#include "common/hash.hpp"

#include <fcntl.h>
#include <unistd.h>

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

namespace {

std::string hex_of(XXH128_hash_t h) {
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return hex;
}

}  // namespace

std::string xxh3_128_hex(std::span<const std::byte> bytes) {
  return hex_of(XXH3_128bits(bytes.data(), bytes.size()));
}

Result<std::string> hash_fd_xxh3_128(int fd, const std::string& name) {
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state(
      XXH3_createState(), &XXH3_freeState);
  if (!state || XXH3_128bits_reset(state.get()) != XXH_OK) {
    return internal_error("cannot initialize xxh3 state");
  }
  std::vector<char> buffer(1 << 20);
  off_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buffer.data(), buffer.size(), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return data_loss("error reading " + name + ": " + std::strerror(errno));
    if (n == 0) break;
    XXH3_128bits_update(state.get(), buffer.data(), static_cast<size_t>(n));
    offset += n;
  }
  return "xxh3-128:" + hex_of(XXH3_128bits_digest(state.get()));
}

Result<std::string> hash_file_xxh3_128(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return not_found("cannot open " + path.string() + ": " + std::strerror(errno));
  auto hash = hash_fd_xxh3_128(fd, path.string());
  ::close(fd);
  return hash;
}

}  // namespace loom
