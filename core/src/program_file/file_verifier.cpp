#include "program_file/file_verifier.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/hash.hpp"
#include "program_file/fb_codec.hpp"
#include "program_file/format.hpp"
#include "program_file/validate.hpp"

namespace loom::container {
namespace {

std::string num(uint64_t v) { return std::to_string(v); }

// "2, 5 (0x24)".
std::string bit_list(uint64_t bits) {
  std::string out;
  for (int b = 0; b < 64; ++b) {
    if (bits & (uint64_t{1} << b)) out += (out.empty() ? "" : ", ") + std::to_string(b);
  }
  return out + " (" + hex(bits) + ")";
}

Status verify_head(std::span<const std::byte> bytes, ProgramHead* out_head) {
  if (bytes.size() < kProgramHeadSize) {
    return data_loss("file is " + num(bytes.size()) + " bytes, smaller than the " +
                     num(kProgramHeadSize) + "-byte head (truncated or not a Loom program)");
  }
  if (std::memcmp(bytes.data() + kHeadMagicAt, kMagic.data(), kMagic.size()) != 0) {
    return invalid_argument("not a Loom program: bad magic (expected \"LOOMPRG\\0\")");
  }
  std::span<const std::byte, kProgramHeadSize> raw(bytes.data(), kProgramHeadSize);
  ProgramHead head = decode_head(raw);
  // The version comes before the checksum: a newer major may lay out (and
  // checksum) its head differently.
  if (head.major > kProgramMajorVersion) {
    return incompatible("written by a newer Loom (major " + num(head.major) +
                        "); this reader understands major " + num(kProgramMajorVersion));
  }
  if (head.major < kProgramMajorVersion) {
    return incompatible("unsupported format major version " + num(head.major) +
                        "; this reader understands major " + num(kProgramMajorVersion));
  }
  uint64_t unknown = head.required_features & ~kKnownRequiredFeatures;
  if (unknown != 0) {
    return incompatible("requires features this reader does not know: bits " +
                        bit_list(unknown));
  }
  uint64_t stored = load_u64(bytes.data() + kHeadChecksumAt);
  uint64_t computed = compute_head_checksum(raw);
  if (stored != computed) {
    return data_loss("head checksum mismatch (stored " + hex(stored) + ", computed " +
                     hex(computed) + ")");
  }
  if (head.head_size != kProgramHeadSize) {
    return invalid_argument("head_size is " + num(head.head_size) + ", expected " +
                            num(kProgramHeadSize));
  }
  if (head.file_size != bytes.size()) {
    return data_loss("head records a file of " + num(head.file_size) + " bytes but it has " +
                     num(bytes.size()) + " (truncated or extended)");
  }
  *out_head = head;
  return Status();
}

// [begin, end) of a region, for the overlap check.
struct Region {
  uint64_t begin;
  uint64_t end;
  std::string name;
};

std::string describe(const Region& r) {
  return r.name + " [" + num(r.begin) + ", " + num(r.end) + ")";
}

// Checks that [offset, offset + size) lies inside the file without wrapping.
Status check_range(const std::string& what, uint64_t offset, uint64_t size,
                   uint64_t file_size) {
  uint64_t end = 0;
  if (!checked_add(offset, size, &end)) {
    return invalid_argument(what + ": offset " + num(offset) + " + size " + num(size) +
                            " overflows 64 bits");
  }
  if (end > file_size) {
    return invalid_argument(what + ": offset " + num(offset) + " + size " + num(size) +
                            " runs past the end of the file (" + num(file_size) + " bytes)");
  }
  return Status();
}

Result<std::vector<SegmentInfo>> read_segment_table(std::span<const std::byte> bytes,
                                                    const ProgramHead& head) {
  if (head.segment_table_offset % kSegmentTableAlignment != 0) {
    return invalid_argument("segment table: offset " + num(head.segment_table_offset) +
                            " is not a multiple of " + num(kSegmentTableAlignment));
  }
  if (head.segment_count > UINT64_MAX / kSegmentTableEntrySize) {
    return invalid_argument("segment table: " + num(head.segment_count) + " entries of " +
                            num(kSegmentTableEntrySize) + " bytes overflow 64 bits");
  }
  uint64_t table_size = head.segment_count * kSegmentTableEntrySize;
  LOOM_RETURN_IF_ERROR(
      check_range("segment table", head.segment_table_offset, table_size, bytes.size()));

  // The table fits in the file, so this allocation is bounded by its size.
  std::vector<SegmentInfo> segments(static_cast<size_t>(head.segment_count));
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::byte* entry =
        bytes.data() + head.segment_table_offset + i * kSegmentTableEntrySize;
    SegmentInfo s = decode_segment_entry(
        std::span<const std::byte, kSegmentTableEntrySize>(entry, kSegmentTableEntrySize));
    std::string what = "segment " + num(i);
    if (!is_power_of_two(s.alignment)) {
      return invalid_argument(what + ": alignment " + num(s.alignment) +
                              " is not a power of two");
    }
    LOOM_RETURN_IF_ERROR(check_range(what, s.offset, s.size, bytes.size()));
    if (s.offset % s.alignment != 0) {
      return invalid_argument(what + ": offset " + num(s.offset) +
                              " is not a multiple of its alignment " + num(s.alignment));
    }
    segments[i] = s;
  }
  return segments;
}

Status check_overlaps(const ProgramHead& head, const std::vector<SegmentInfo>& segments) {
  std::vector<Region> regions;
  regions.reserve(segments.size() + 3);
  regions.push_back({0, head.head_size, "the head"});
  regions.push_back({head.flatbuffer_offset, head.flatbuffer_offset + head.flatbuffer_size,
                     "the flatbuffer"});
  regions.push_back(
      {head.segment_table_offset,
       head.segment_table_offset + head.segment_count * kSegmentTableEntrySize,
       "the segment table"});
  for (size_t i = 0; i < segments.size(); ++i) {
    regions.push_back(
        {segments[i].offset, segments[i].offset + segments[i].size, "segment " + num(i)});
  }
  // Empty regions occupy no bytes and cannot overlap anything.
  std::erase_if(regions, [](const Region& r) { return r.begin == r.end; });
  std::stable_sort(regions.begin(), regions.end(),
                   [](const Region& a, const Region& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < regions.size(); ++i) {
    if (regions[i].begin < regions[i - 1].end) {
      return invalid_argument(describe(regions[i]) + " overlaps " + describe(regions[i - 1]));
    }
  }
  return Status();
}

Status check_segment_checksums(std::span<const std::byte> bytes,
                               const std::vector<SegmentInfo>& segments,
                               const SegmentChecksum& segment_checksum) {
  for (size_t i = 0; i < segments.size(); ++i) {
    const SegmentInfo& s = segments[i];
    auto range = bytes.subspan(static_cast<size_t>(s.offset), static_cast<size_t>(s.size));
    uint64_t computed = segment_checksum ? segment_checksum(range, s.offset) : xxh3_64(range);
    if (computed != s.checksum) {
      return data_loss("segment " + num(i) + ": checksum mismatch (stored " + hex(s.checksum) +
                       ", computed " + hex(computed) + " over " + num(s.size) + " bytes at " +
                       num(s.offset) + ")");
    }
  }
  return Status();
}

Status check_parameter_checksums(std::span<const std::byte> bytes, const ProgramDef& program,
                                 const std::vector<SegmentInfo>& segments) {
  for (size_t i = 0; i < program.parameters.size(); ++i) {
    const ParameterDef& p = program.parameters[i];
    if (p.checksum == 0 || p.segment < 0) continue;
    const SegmentInfo& s = segments[static_cast<size_t>(p.segment)];
    uint64_t computed = xxh3_64(bytes.subspan(static_cast<size_t>(s.offset + p.offset),
                                              static_cast<size_t>(p.size)));
    if (computed != p.checksum) {
      return data_loss("parameters[" + num(i) + "] ('" + p.name +
                       "'): checksum mismatch (stored " + hex(p.checksum) + ", computed " +
                       hex(computed) + ")");
    }
  }
  return Status();
}

}  // namespace

Result<VerifiedFile> verify_file(std::span<const std::byte> bytes,
                                 const SegmentChecksum& segment_checksum) {
  VerifiedFile out;
  LOOM_RETURN_IF_ERROR(verify_head(bytes, &out.head));
  const ProgramHead& head = out.head;

  LOOM_RETURN_IF_ERROR(
      check_range("flatbuffer", head.flatbuffer_offset, head.flatbuffer_size, bytes.size()));
  if (head.flatbuffer_offset < head.head_size) {
    return invalid_argument("flatbuffer: offset " + num(head.flatbuffer_offset) +
                            " lies inside the " + num(head.head_size) + "-byte head");
  }
  LOOM_ASSIGN_OR_RETURN(
      out.program, decode_program(bytes.subspan(static_cast<size_t>(head.flatbuffer_offset),
                                                static_cast<size_t>(head.flatbuffer_size))));

  LOOM_ASSIGN_OR_RETURN(out.segments, read_segment_table(bytes, head));
  LOOM_RETURN_IF_ERROR(check_overlaps(head, out.segments));
  LOOM_RETURN_IF_ERROR(check_segment_checksums(bytes, out.segments, segment_checksum));

  std::vector<uint64_t> sizes;
  sizes.reserve(out.segments.size());
  for (const SegmentInfo& s : out.segments) sizes.push_back(s.size);
  LOOM_RETURN_IF_ERROR(validate_program(out.program, sizes));
  LOOM_RETURN_IF_ERROR(check_parameter_checksums(bytes, out.program, out.segments));
  return out;
}

}  // namespace loom::container
