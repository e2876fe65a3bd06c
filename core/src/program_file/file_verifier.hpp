// Verification of a whole .loom file held in memory (mapped or a caller's
// buffer). Everything a reader relies on is checked here, with work bounded
// by the file's size.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "loom/program.hpp"

namespace loom::container {

struct VerifiedFile {
  ProgramHead head;
  std::vector<SegmentInfo> segments;
  ProgramDef program;
};

// Checks, in order: size, magic, major version, required feature bits, head
// checksum, head_size, file_size, the flatbuffer (range, verifier, decode),
// the segment table (alignment, range), every segment (range, alignment,
// overlaps, checksum), the program's indices and the parameters' checksums.
// Error codes: incompatible (version, features), data_loss (short or long
// file, checksums), invalid_argument (everything malformed).
// `segment_checksum`, when given, computes a segment's xxh3-64 from its bytes
// and file offset (a mapped file uses it to skip holes); by default the bytes
// are hashed.
using SegmentChecksum = std::function<uint64_t(std::span<const std::byte>, uint64_t)>;
Result<VerifiedFile> verify_file(std::span<const std::byte> bytes,
                                 const SegmentChecksum& segment_checksum = {});

}  // namespace loom::container
