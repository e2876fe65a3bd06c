// Private helpers shared by the .irpa reader and writer: the byte offsets of
// every field (the structs are packed and little-endian, so they are read and
// written field by field rather than through C structs), overflow-checked
// arithmetic, and the rules for external paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "loom/irpa.hpp"

namespace loom::io::irpa::format {

// Header prefix.
inline constexpr uint64_t kMagicAt = 0;              // u32
inline constexpr uint64_t kVersionMajorAt = 4;       // u16
inline constexpr uint64_t kVersionMinorAt = 6;       // u16
inline constexpr uint64_t kHeaderSizeAt = 8;         // u64
inline constexpr uint64_t kNextHeaderOffsetAt = 16;  // u64
inline constexpr uint64_t kHeaderFlagsAt = 24;       // u64
// Header v0 (after the prefix).
inline constexpr uint64_t kEntryCountAt = 32;
inline constexpr uint64_t kEntrySegmentAt = 40;     // {u64 offset, u64 length}
inline constexpr uint64_t kMetadataSegmentAt = 56;  // {u64 offset, u64 length}
inline constexpr uint64_t kStorageSegmentAt = 72;   // {u64 offset, u64 length}
// Entry header.
inline constexpr uint64_t kEntrySizeAt = 0;          // u64
inline constexpr uint64_t kEntryTypeAt = 8;          // u32
inline constexpr uint64_t kEntryFlagsAt = 12;        // u64
inline constexpr uint64_t kEntryNameAt = 20;         // {u64 offset, u64 length}
inline constexpr uint64_t kEntryMetadataAt = 36;     // {u64 offset, u64 length}
inline constexpr uint64_t kEntryAlignmentAt = 52;    // u64
// Splat entry.
inline constexpr uint64_t kSplatLengthAt = 60;         // u64
inline constexpr uint64_t kSplatPatternAt = 68;        // u8[16]
inline constexpr uint64_t kSplatPatternLengthAt = 84;  // u8
// Data entry.
inline constexpr uint64_t kDataStorageAt = 60;  // {u64 offset, u64 length}
// External entry.
inline constexpr uint64_t kExternalPathAt = 60;   // {u64 offset, u64 length}
inline constexpr uint64_t kExternalRangeAt = 76;  // {u64 offset, u64 length}

static_assert(kStorageSegmentAt + 16 == kHeaderV0Size);
static_assert(kEntryAlignmentAt + 8 == kEntryHeaderSize);
static_assert(kSplatPatternLengthAt + 1 == kSplatEntrySize);
static_assert(kDataStorageAt + 16 == kDataEntrySize);
static_assert(kExternalRangeAt + 16 == kExternalEntrySize);

// Little-endian loads and stores at `at`; the caller has checked the bounds.
template <typename T>
T load(std::span<const std::byte> bytes, uint64_t at) {
  uint64_t value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<uint64_t>(bytes[at + i]) << (8 * i);
  }
  return static_cast<T>(value);
}

template <typename T>
void store(std::span<std::byte> bytes, uint64_t at, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    bytes[at + i] = static_cast<std::byte>((static_cast<uint64_t>(value) >> (8 * i)) & 0xff);
  }
}

// a + b, or nothing when it wraps past 2^64.
inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

// `value` rounded up to `alignment` (a power of two), or nothing on wrap.
inline std::optional<uint64_t> align_up(uint64_t value, uint64_t alignment) {
  auto bumped = checked_add(value, alignment - 1);
  if (!bumped) return std::nullopt;
  return *bumped & ~(alignment - 1);
}

inline bool is_power_of_two(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

inline bool valid_pattern_length(uint64_t length) {
  return length == 1 || length == 2 || length == 4 || length == 8 || length == 16;
}

// A number for an error message.
inline std::string num(uint64_t value) { return std::to_string(value); }

// A name or path quoted for an error message: at most 64 characters, with
// control and non-ASCII bytes written as \xNN, so garbage stays readable.
std::string quote(std::string_view text);

// Checks a path as stored in an external entry: non-empty, relative, no NUL
// byte, no '..' component. The message says which rule was broken.
Status check_external_path(std::string_view path);

}  // namespace loom::io::irpa::format
