// Verification of a whole .loom file held in memory (mapped or a caller's
// buffer). Everything a reader relies on is checked here, with work bounded
// by the file's size.
#pragma once

#include <cstddef>
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
Result<VerifiedFile> verify_file(std::span<const std::byte> bytes);

}  // namespace loom::container
