#include "program_file/format.hpp"

#include <cstdio>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace loom::container {

uint16_t load_u16(const std::byte* p) {
  return static_cast<uint16_t>(std::to_integer<uint16_t>(p[0]) |
                               (std::to_integer<uint16_t>(p[1]) << 8));
}

uint32_t load_u32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | std::to_integer<uint32_t>(p[i]);
  return v;
}

uint64_t load_u64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<uint64_t>(p[i]);
  return v;
}

void store_u16(std::byte* p, uint16_t v) {
  for (int i = 0; i < 2; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}

void store_u32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}

void store_u64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}

uint64_t compute_head_checksum(std::span<const std::byte, kProgramHeadSize> head) {
  std::array<std::byte, kProgramHeadSize> copy;
  std::memcpy(copy.data(), head.data(), copy.size());
  store_u64(copy.data() + kHeadChecksumAt, 0);
  return XXH3_64bits(copy.data(), copy.size());
}

void encode_head(const ProgramHead& head, std::span<std::byte, kProgramHeadSize> out) {
  std::memset(out.data(), 0, out.size());
  std::memcpy(out.data() + kHeadMagicAt, kMagic.data(), kMagic.size());
  store_u16(out.data() + kHeadMajorAt, head.major);
  store_u16(out.data() + kHeadMinorAt, head.minor);
  store_u32(out.data() + kHeadSizeAt, head.head_size);
  store_u64(out.data() + kHeadRequiredFeaturesAt, head.required_features);
  store_u64(out.data() + kHeadOptionalFeaturesAt, head.optional_features);
  store_u64(out.data() + kHeadFlatbufferOffsetAt, head.flatbuffer_offset);
  store_u64(out.data() + kHeadFlatbufferSizeAt, head.flatbuffer_size);
  store_u64(out.data() + kHeadSegmentTableOffsetAt, head.segment_table_offset);
  store_u64(out.data() + kHeadSegmentCountAt, head.segment_count);
  store_u64(out.data() + kHeadFileSizeAt, head.file_size);
  store_u64(out.data() + kHeadChecksumAt, compute_head_checksum(out));
}

ProgramHead decode_head(std::span<const std::byte, kProgramHeadSize> in) {
  ProgramHead h;
  h.major = load_u16(in.data() + kHeadMajorAt);
  h.minor = load_u16(in.data() + kHeadMinorAt);
  h.head_size = load_u32(in.data() + kHeadSizeAt);
  h.required_features = load_u64(in.data() + kHeadRequiredFeaturesAt);
  h.optional_features = load_u64(in.data() + kHeadOptionalFeaturesAt);
  h.flatbuffer_offset = load_u64(in.data() + kHeadFlatbufferOffsetAt);
  h.flatbuffer_size = load_u64(in.data() + kHeadFlatbufferSizeAt);
  h.segment_table_offset = load_u64(in.data() + kHeadSegmentTableOffsetAt);
  h.segment_count = load_u64(in.data() + kHeadSegmentCountAt);
  h.file_size = load_u64(in.data() + kHeadFileSizeAt);
  return h;
}

void encode_segment_entry(const SegmentInfo& info,
                          std::span<std::byte, kSegmentTableEntrySize> out) {
  store_u64(out.data() + kEntryOffsetAt, info.offset);
  store_u64(out.data() + kEntrySizeAt, info.size);
  store_u64(out.data() + kEntryChecksumAt, info.checksum);
  store_u32(out.data() + kEntryAlignmentAt, info.alignment);
  store_u32(out.data() + kEntryFlagsAt, info.flags);
}

SegmentInfo decode_segment_entry(std::span<const std::byte, kSegmentTableEntrySize> in) {
  SegmentInfo info;
  info.offset = load_u64(in.data() + kEntryOffsetAt);
  info.size = load_u64(in.data() + kEntrySizeAt);
  info.checksum = load_u64(in.data() + kEntryChecksumAt);
  info.alignment = load_u32(in.data() + kEntryAlignmentAt);
  info.flags = load_u32(in.data() + kEntryFlagsAt);
  return info;
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace loom::container
