#include "program_file/checksum.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <array>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace loom::container {
namespace {

constexpr size_t kZeroChunk = size_t{64} << 10;
constexpr std::array<std::byte, kZeroChunk> kZeros{};

}  // namespace

struct Xxh3Stream::State {
  XXH3_state_t xxh;
};

Xxh3Stream::Xxh3Stream() : state_(std::make_unique<State>()) {
  XXH3_64bits_reset(&state_->xxh);
}

Xxh3Stream::~Xxh3Stream() = default;

void Xxh3Stream::update(std::span<const std::byte> bytes) {
  XXH3_64bits_update(&state_->xxh, bytes.data(), bytes.size());
}

void Xxh3Stream::update_zeros(uint64_t count) {
  while (count > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(count, kZeroChunk));
    XXH3_64bits_update(&state_->xxh, kZeros.data(), n);
    count -= n;
  }
}

uint64_t Xxh3Stream::digest() const { return XXH3_64bits_digest(&state_->xxh); }

uint64_t zero_bytes_checksum(uint64_t count) {
  if (count <= kZeroChunk) return XXH3_64bits(kZeros.data(), static_cast<size_t>(count));
  Xxh3Stream stream;
  stream.update_zeros(count);
  return stream.digest();
}

uint64_t checksum_skipping_holes(int fd, std::span<const std::byte> mapped,
                                 uint64_t file_offset) {
  Xxh3Stream stream;
  const uint64_t end = file_offset + mapped.size();
  uint64_t pos = file_offset;
  auto take_mapped = [&](uint64_t until) {
    stream.update(mapped.subspan(static_cast<size_t>(pos - file_offset),
                                 static_cast<size_t>(until - pos)));
    pos = until;
  };
  while (pos < end) {
    off_t data = ::lseek(fd, static_cast<off_t>(pos), SEEK_DATA);
    if (data < 0) {
      // ENXIO: nothing but a hole up to the end of the file. Anything else:
      // holes cannot be queried here, so read what is mapped.
      if (errno == ENXIO) {
        stream.update_zeros(end - pos);
        pos = end;
      } else {
        take_mapped(end);
      }
      break;
    }
    uint64_t data_at = std::min<uint64_t>(static_cast<uint64_t>(data), end);
    if (data_at > pos) {
      stream.update_zeros(data_at - pos);
      pos = data_at;
      if (pos == end) break;
    }
    off_t hole = ::lseek(fd, static_cast<off_t>(pos), SEEK_HOLE);
    uint64_t hole_at = hole < 0 ? end : std::min<uint64_t>(static_cast<uint64_t>(hole), end);
    take_mapped(hole_at > pos ? hole_at : end);
  }
  return stream.digest();
}

}  // namespace loom::container
