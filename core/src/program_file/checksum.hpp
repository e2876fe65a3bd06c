// Streaming xxh3-64 for segment checksums: huge runs of zeros are hashed from
// a small buffer, and a mapped file's holes are never paged in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace loom::container {

// xxh3-64 (seed 0) fed in pieces; the digest equals the one-shot hash of the
// concatenated pieces. Not thread-safe.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;

  void update(std::span<const std::byte> bytes);
  // Feeds `count` zero bytes in fixed-size chunks.
  void update_zeros(uint64_t count);
  uint64_t digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// xxh3-64 of `count` zero bytes, without `count` bytes of memory.
uint64_t zero_bytes_checksum(uint64_t count);

// xxh3-64 of `mapped`, the bytes at `file_offset` of the file open as `fd`
// and mapped. Ranges the file system reports as holes (SEEK_HOLE) are hashed
// as zeros without touching the mapping, so verifying a sparse file costs no
// page cache; where holes cannot be queried the mapping is read.
uint64_t checksum_skipping_holes(int fd, std::span<const std::byte> mapped, uint64_t file_offset);

}  // namespace loom::container
