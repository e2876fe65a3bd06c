// MappedFile: a whole regular file mapped read-only into memory.
//
// Used by every reader that wants zero-copy access to a file (programs,
// parameter archives). The mapping is private and read-only; it stays valid,
// and the spans from bytes() with it, until the MappedFile is destroyed or
// moved from. An empty file is allowed: it maps nothing and bytes() is empty
// (mmap refuses length 0, so callers need no special case).
//
// The file descriptor is kept open until close_descriptor() or destruction,
// for callers that want to ask the file system about holes while verifying;
// the mapping alone keeps the bytes readable after that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

#include "loom/status.hpp"

namespace loom {

class MappedFile {
 public:
  // Maps `path`. Errors: not_found (missing), unavailable (cannot open),
  // invalid_argument (not a regular file), resource_exhausted (mmap failed);
  // every message names the path.
  static Result<MappedFile> open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {address_, size_}; }
  uint64_t size() const { return size_; }
  // The open descriptor, or -1 once closed (or for a default-constructed one).
  int descriptor() const { return fd_; }
  // Closes the descriptor early; the mapping stays.
  void close_descriptor();

 private:
  void reset();

  const std::byte* address_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
};

}  // namespace loom
