// Fixtures and helpers shared by the container tests: programs built in C++,
// byte patching of files, and status assertions.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "program_file/file_assembly.hpp"
#include "program_file/format.hpp"
#include "loom/program.hpp"

namespace loom::testing {

std::vector<std::byte> bytes_of(std::string_view text);
// `size` bytes of a pattern that differs per `seed`.
std::vector<std::byte> pattern(size_t size, uint8_t seed);

// A program that sets every field of ProgramDef (artifacts with metadata,
// delegates with specs, values and attributes of every kind, a memory plan,
// inline, zero-segment and external parameters) with its segments.
ProgramWriter make_full_program();

// A small valid program with three 100-byte segments (default alignment), one
// artifact per segment, a delegate, a function with a memory plan and one
// parameter in segment 0.
ProgramWriter make_small_program();

// Emits a file from `program` and `segments` without validating the program,
// as a hand-crafted file could be.
std::vector<std::byte> craft_unvalidated(const ProgramDef& program,
                                         const std::vector<std::vector<std::byte>>& segments);

// A file's bytes with patching helpers.
struct FileBytes {
  std::vector<std::byte> bytes;

  ProgramHead head() const;
  size_t entry_at(size_t segment) const;
  SegmentInfo segment(size_t index) const;
  void put_u16(size_t at, uint16_t v);
  void put_u32(size_t at, uint32_t v);
  void put_u64(size_t at, uint64_t v);
  // Recomputes the head checksum, so that a patched head passes that check.
  void reseal();
};

// Success when `result` failed with `code` and a message containing `part`.
template <typename T>
::testing::AssertionResult fails_with(const Result<T>& result, StatusCode code,
                                      std::string_view part) {
  if (result.ok()) return ::testing::AssertionFailure() << "unexpectedly succeeded";
  const Status status = result.status();
  if (status.code() != code || status.message().find(part) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "got '" << status.to_string() << "', expected code "
           << status_code_name(code) << " and a message containing '" << part << "'";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult fails_with(const Status& status, StatusCode code,
                                      std::string_view part);

// Opens `bytes` as a buffer and checks the failure.
::testing::AssertionResult open_fails_with(std::span<const std::byte> bytes, StatusCode code,
                                           std::string_view part);

// A fresh path under the test temp dir, removed by the destructor.
class TempPath {
 public:
  explicit TempPath(std::string_view name);
  ~TempPath();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

void write_bytes(const std::filesystem::path& path, std::span<const std::byte> bytes);
std::vector<std::byte> read_bytes(const std::filesystem::path& path);

// Whether files under `dir` can hold holes cheaply (probed in the test temp dir).
bool supports_sparse_files();

// The code of a rejected argument, which most checks here expect.
inline constexpr StatusCode kInvalid = StatusCode::kInvalidArgument;

}  // namespace loom::testing
