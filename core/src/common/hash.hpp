// Content hashes used by the container and by plugin manifests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "loom/status.hpp"

namespace loom {

// xxh3-64 of `bytes` (seed 0): the segment and parameter checksum.
uint64_t xxh3_64(std::span<const std::byte> bytes);

// 32 lower-case hex digits of xxh3-128 of `bytes` (seed 0): a digest of
// short key material (the probe cache names its files with it).
std::string xxh3_128_hex(std::span<const std::byte> bytes);

// "xxh3-128:<32 lower-case hex digits>" of a file's whole content, read in
// chunks. Not a security measure: it detects a library that does not match
// its manifest (stale build, wrong file), not a forgery.
Result<std::string> hash_file_xxh3_128(const std::filesystem::path& path);

// The same of what an open descriptor reads from offset 0 to its end (read
// with pread; the descriptor's offset is left alone). `name` names the file
// in errors.
Result<std::string> hash_fd_xxh3_128(int fd, const std::string& name);

}  // namespace loom
