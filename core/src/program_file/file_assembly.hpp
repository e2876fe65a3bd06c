// Lays out and emits a .loom file: the shared core of ProgramWriter, also
// used by tests to emit files that skip validation (to exercise the reader's
// own checks on hand-crafted files).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "loom/program.hpp"

namespace loom::container {

// One segment to write: either `bytes`, or `zero_size` zero bytes (a hole).
struct SegmentSource {
  std::span<const std::byte> bytes;
  uint64_t zero_size = 0;
  bool zero = false;
  uint32_t alignment = 0;  // 0: kDefaultSegmentAlignment

  uint64_t size() const { return zero ? zero_size : bytes.size(); }
};

struct FileContents {
  const ProgramDef* program = nullptr;
  std::span<const SegmentSource> segments;
  uint64_t required_features = 0;
  uint64_t optional_features = 0;
  // Off only in tests that need a file violating the program's rules.
  bool validate = true;
};

// Where everything goes, and the bytes before the first segment (head,
// flatbuffer, padding, segment table).
struct FilePlan {
  ProgramHead head;
  std::vector<SegmentInfo> segments;
  std::vector<std::byte> front;
};

// Validates (when asked), encodes the flatbuffer, places every segment and
// computes all checksums (zero segments are hashed in chunks).
Result<FilePlan> plan_file(const FileContents& contents);

// Writes the file at `path`, streaming: segment bytes are written straight
// from their sources and zero segments are left as holes. A partial file is
// removed on failure.
Status write_file(const FileContents& contents, const std::filesystem::path& path);

// The whole file in memory (zero segments materialized).
Result<std::vector<std::byte>> write_buffer(const FileContents& contents);

}  // namespace loom::container
