// The program container reader and validator (ProgramReader::open_buffer:
// head, flatbuffer verifier, segment table, checksums, validate_program),
// then every accessor over what it accepted.
//
// Each input is read twice: as it is, and with its head's file size, head
// checksum and segment checksums recomputed, so that mutations past the head
// reach the flatbuffer verifier and the validator instead of stopping at a
// checksum mismatch.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/hash.hpp"
#include "program_file/format.hpp"
#include "fuzz_support.hpp"
#include "loom/program.hpp"

namespace {

using namespace loom;

std::vector<std::byte> with_checksums_fixed(std::span<const std::byte> bytes) {
  using namespace loom::container;
  std::vector<std::byte> out(bytes.begin(), bytes.end());
  if (out.size() < kProgramHeadSize) return out;
  std::byte* p = out.data();
  const uint64_t size = out.size();
  store_u64(p + kHeadFileSizeAt, size);
  const uint64_t table = load_u64(p + kHeadSegmentTableOffsetAt);
  const uint64_t count = load_u64(p + kHeadSegmentCountAt);
  for (uint64_t i = 0; i < count && table <= size && i < (size - table) / kSegmentTableEntrySize; ++i) {
    std::byte* entry = p + table + i * kSegmentTableEntrySize;
    const uint64_t offset = load_u64(entry + kEntryOffsetAt);
    const uint64_t length = load_u64(entry + kEntrySizeAt);
    if (offset <= size && length <= size - offset) {
      store_u64(entry + kEntryChecksumAt, xxh3_64(std::span<const std::byte>(p + offset, length)));
    }
  }
  store_u64(p + kHeadChecksumAt,
            compute_head_checksum(std::span<const std::byte, kProgramHeadSize>(p, kProgramHeadSize)));
  return out;
}

void read_program(std::span<const std::byte> bytes) {
  auto reader = ProgramReader::open_buffer(bytes);
  if (!reader.ok()) {
    fuzz::check_refusal(reader.status());
    return;
  }
  const ProgramReader& r = **reader;
  for (uint32_t i = 0; i < r.segments().size(); ++i) {
    auto segment = r.segment_bytes(i);
    if (!segment.ok()) fuzz::fail("a segment of an accepted program cannot be read");
  }
  for (uint32_t i = 0; i < r.program().artifacts.size(); ++i) {
    auto content = r.artifact_content(i);
    if (!content.ok()) fuzz::check_refusal(content.status());
  }
  for (uint32_t i = 0; i < r.program().parameters.size(); ++i) {
    auto parameter = r.parameter_bytes(i);
    if (!parameter.ok()) fuzz::check_refusal(parameter.status());
  }
  if (r.segment_bytes(static_cast<uint32_t>(r.segments().size())).ok() ||
      r.artifact_content(static_cast<uint32_t>(r.program().artifacts.size())).ok()) {
    fuzz::fail("an index past the end was accepted");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = fuzz::bytes_of(data, size);
  read_program(bytes);
  const std::vector<std::byte> fixed = with_checksums_fixed(bytes);
  if (fixed.size() >= kProgramHeadSize && std::memcmp(fixed.data(), data, size) != 0) read_program(fixed);
  return 0;
}
