// Byte-level layout of the .loom head and segment table (schemas/README.md
// documents it). Private to the container; tests use it to craft files.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "loom/program.hpp"

namespace loom::container {

inline constexpr std::array<char, 8> kMagic = {'L', 'O', 'O', 'M', 'P', 'R', 'G', '\0'};
inline constexpr char kFlatbufferIdentifier[] = "LOOM";

// Byte offsets of the head's fields.
inline constexpr size_t kHeadMagicAt = 0;
inline constexpr size_t kHeadMajorAt = 8;
inline constexpr size_t kHeadMinorAt = 10;
inline constexpr size_t kHeadSizeAt = 12;
inline constexpr size_t kHeadRequiredFeaturesAt = 16;
inline constexpr size_t kHeadOptionalFeaturesAt = 24;
inline constexpr size_t kHeadFlatbufferOffsetAt = 32;
inline constexpr size_t kHeadFlatbufferSizeAt = 40;
inline constexpr size_t kHeadSegmentTableOffsetAt = 48;
inline constexpr size_t kHeadSegmentCountAt = 56;
inline constexpr size_t kHeadFileSizeAt = 64;
inline constexpr size_t kHeadChecksumAt = 72;
inline constexpr size_t kHeadReservedAt = 80;  // up to kProgramHeadSize, zero

// Byte offsets inside one segment table entry.
inline constexpr size_t kEntryOffsetAt = 0;
inline constexpr size_t kEntrySizeAt = 8;
inline constexpr size_t kEntryChecksumAt = 16;
inline constexpr size_t kEntryAlignmentAt = 24;
inline constexpr size_t kEntryFlagsAt = 28;

// The segment table starts at a multiple of this.
inline constexpr uint64_t kSegmentTableAlignment = 8;

// Little-endian loads and stores at any alignment.
uint16_t load_u16(const std::byte* p);
uint32_t load_u32(const std::byte* p);
uint64_t load_u64(const std::byte* p);
void store_u16(std::byte* p, uint16_t v);
void store_u32(std::byte* p, uint32_t v);
void store_u64(std::byte* p, uint64_t v);

// Writes `head` (magic, fields, reserved zeros and the checksum) into `out`.
void encode_head(const ProgramHead& head, std::span<std::byte, kProgramHeadSize> out);
// Reads the fields of a head; checks nothing.
ProgramHead decode_head(std::span<const std::byte, kProgramHeadSize> in);
// xxh3-64 of the head with its checksum field taken as zero.
uint64_t compute_head_checksum(std::span<const std::byte, kProgramHeadSize> head);

void encode_segment_entry(const SegmentInfo& info,
                          std::span<std::byte, kSegmentTableEntrySize> out);
SegmentInfo decode_segment_entry(std::span<const std::byte, kSegmentTableEntrySize> in);

// a + b, or false when it wraps 2^64.
inline bool checked_add(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}
inline bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Hexadecimal "0x..." for feature bits in messages.
std::string hex(uint64_t v);

}  // namespace loom::container
