// IREE parameter archives (.irpa): reading and writing, byte-compatible with
// IREE's format (version 0.x).
//
// An archive is one or more headers linked through next_header_offset; each
// header owns an entry table, a metadata segment (names, metadata, external
// paths) and a storage segment (data). Entries are named blobs of `length`
// bytes: DATA (stored in the archive), SPLAT (a repeated 1-16 byte pattern),
// or EXTERNAL (a byte range of another file beside the archive).
//
// Reading is bounded and verified when the archive is opened: every header
// of the chain, every entry, range and alignment, with overflow-safe
// arithmetic. A malformed archive gets an error naming the header, the entry
// and the field ("irpa: header 1 at offset 4096: entry 3 ('w1'): storage
// range [0, 9) runs past the storage segment (size 8)"). Once open, a reader
// is immutable and thread-safe; the views it returns live as long as the
// reader.
//
// Reading rules beyond IREE's own parser (which refuses any minor version
// but 0 and any unknown entry type):
//   - a newer minor version of major 0 is read; its header may be longer
//     than 88 bytes (header_size), the extra fields are ignored;
//   - an unknown major version is refused (code incompatible);
//   - entries of unknown type are skipped using entry_size, as are SKIP ones;
//   - links must point forward: next_header_offset is added modulo 2^64 (as
//     IREE does), and a result at or before the linking header is refused,
//     naming the cycle when it targets a header already read; linked headers
//     are 16-aligned; at most 65536 headers;
//   - names are unique within one header; the last 'entry_size' padding of
//     the table may lie outside the entry segment (IREE ends the table at the
//     last entry's end);
//   - minimum_alignment must be 0 or a power of two; where a DATA entry
//     actually lies is not checked against it (IREE's tools do not either);
//   - names, metadata and paths are copied; the copies are bounded by four
//     times the file size plus 16 MiB, so entries sharing one large metadata
//     range cannot exhaust memory.
//
// Status codes: invalid_argument (malformed), incompatible (major version),
// not_found (external file missing), failed_precondition (external entry in a
// buffer without base_dir), unavailable / resource_exhausted (I/O, mmap).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/status.hpp"

namespace loom::io::irpa {

// Facts of the format (all structs packed, little-endian).
inline constexpr uint32_t kMagic = 0x41505249;  // "IRPA"
inline constexpr uint16_t kVersionMajor = 0;
inline constexpr uint16_t kVersionMinor = 0;
inline constexpr uint64_t kHeaderPrefixSize = 32;
inline constexpr uint64_t kHeaderV0Size = 88;
inline constexpr uint64_t kEntryHeaderSize = 60;
inline constexpr uint64_t kSplatEntrySize = 85;
inline constexpr uint64_t kDataEntrySize = 76;
inline constexpr uint64_t kExternalEntrySize = 92;
inline constexpr uint64_t kHeaderAlignment = 16;
inline constexpr uint64_t kEntryAlignment = 16;
inline constexpr uint64_t kDefaultDataAlignment = 64;
inline constexpr uint64_t kFileAlignment = 4096;
// Not a format limit: the largest data alignment the builder accepts.
inline constexpr uint64_t kMaxDataAlignment = uint64_t{1} << 30;

enum class EntryType : uint32_t { kSkip = 0, kSplat = 1, kData = 2, kExternal = 3 };
std::string_view entry_type_name(EntryType type);  // "skip", "splat", "data", "external", "unknown"

// One entry as read (or as to be written).
struct Entry {
  std::string name;
  std::string metadata;  // opaque bytes; Loom writes JSON {"dtype":..,"shape":[..]} here
  EntryType type = EntryType::kData;
  uint64_t flags = 0;
  uint64_t minimum_alignment = 0;
  uint64_t length = 0;  // the parameter's size in bytes (for DATA, the storage length)

  // kSplat
  std::array<std::byte, 16> pattern{};
  uint8_t pattern_length = 0;

  // kData: where the bytes lie, as an absolute offset in the archive file
  // (0 when length is 0).
  uint64_t data_offset = 0;

  // kExternal: path as stored (relative to the archive's folder) and the
  // byte range in that file.
  std::string external_path;
  uint64_t external_offset = 0;

  // Where the entry was found (for dump and error messages).
  uint32_t header_index = 0;    // 0: first header of the chain
  uint64_t entry_offset = 0;    // absolute offset of the entry header
};

// One header of the chain.
struct HeaderInfo {
  uint64_t offset = 0;  // absolute
  uint16_t version_major = 0;
  uint16_t version_minor = 0;
  uint64_t header_size = 0;
  uint64_t next_header_offset = 0;  // relative to this header; 0: last
  uint64_t flags = 0;
  uint64_t entry_count = 0;
  uint64_t entry_segment_offset = 0, entry_segment_length = 0;        // relative to header
  uint64_t metadata_segment_offset = 0, metadata_segment_length = 0;  // relative to header
  uint64_t storage_segment_offset = 0, storage_segment_length = 0;    // relative to header
};

class ArchiveReader {
 public:
  // Maps the file read-only; EXTERNAL entries are resolved relative to the
  // file's folder and mapped at open (absolute paths, '..' and symlinks
  // leaving that folder are refused).
  static Result<std::unique_ptr<ArchiveReader>> open_file(const std::filesystem::path& path);
  // Reads a caller buffer that must outlive the reader. EXTERNAL entries are
  // refused unless `base_dir` is given.
  static Result<std::unique_ptr<ArchiveReader>> open_buffer(std::span<const std::byte> bytes,
                                                            std::filesystem::path base_dir = {});
  ~ArchiveReader();

  const std::vector<HeaderInfo>& headers() const;
  // The live entries (never kSkip or unknown types), in chain order. Names
  // are unique inside one header; across linked headers a later entry
  // replaces an earlier one of the same name (appending an archive updates
  // parameters): the earlier one is dropped from this list, so every name
  // appears once. Entry::header_index tells where each came from.
  const std::vector<Entry>& entries() const;
  // The entry named `name`, or null; O(log n). The pointer lives as long as
  // the reader.
  const Entry* find(std::string_view name) const;
  std::span<const std::byte> file_bytes() const;

  // Zero-copy bytes of a DATA or EXTERNAL entry of this reader; an error
  // for SPLAT entries (use read(), or hand pattern/pattern_length to a
  // device as a fill). Entries not from this reader are range-checked.
  Result<std::span<const std::byte>> view(const Entry& entry) const;
  // Copies bytes [offset, offset + out.size()) of any entry into `out`,
  // expanding splat patterns.
  Status read(const Entry& entry, uint64_t offset, std::span<std::byte> out) const;

 private:
  ArchiveReader();
  struct State;
  std::unique_ptr<State> state_;
  friend class ArchiveReaderBuilder;
};

// Builds one archive (one header), laid out as IREE's builder does: the
// header; the entry table at offset 96, entries in the order added, each
// 16-aligned with zero padding; the metadata segment right after (per entry:
// name, metadata, external path); the storage segment aligned to the largest
// data alignment, each DATA entry at its own alignment (64 by default); the
// file padded with zeros to a multiple of 4096. With default alignments the
// bytes equal IREE's.
//
// Data spans are not copied: they must stay valid until the write call
// returns. Not thread-safe; const calls may run concurrently.
class ArchiveBuilder {
 public:
  explicit ArchiveBuilder(uint64_t data_alignment = kDefaultDataAlignment);
  ~ArchiveBuilder();
  ArchiveBuilder(ArchiveBuilder&&) noexcept;
  ArchiveBuilder& operator=(ArchiveBuilder&&) noexcept;

  // Names must be non-empty and unique in the builder. alignment 0 means the
  // builder's data alignment; otherwise a power of two.
  Status add_data(std::string name, std::span<const std::byte> bytes, std::string metadata = {},
                  uint64_t alignment = 0);
  // A DATA entry of `length` zero bytes that needs no buffer: write_file
  // leaves it as a hole (a sparse file), write_buffer zero-fills it. For
  // placeholder weights, and for making huge archives in tests cheaply.
  Status add_zero_data(std::string name, uint64_t length, std::string metadata = {},
                       uint64_t alignment = 0);
  // pattern.size() is 1, 2, 4, 8 or 16 and divides length.
  Status add_splat(std::string name, uint64_t length, std::span<const std::byte> pattern,
                   std::string metadata = {});
  // path is relative (no '..'); the range is not checked until read.
  Status add_external(std::string name, std::string path, uint64_t offset, uint64_t length,
                      std::string metadata = {});

  // A complete archive file (padded to kFileAlignment).
  Result<std::vector<std::byte>> write_buffer() const;
  // Writes a new file, replacing `path` atomically (a temporary file beside
  // it, renamed over it; mode 0644). All-zero 64 KiB blocks of data are left
  // as holes, so zero-filled parameters cost no disk.
  Status write_file(const std::filesystem::path& path) const;
  // Appends this archive to the valid archive at `path`: writes it after the
  // end of the file (aligned to 4096 or the largest data alignment), syncs
  // it, then sets the last header's next_header_offset to point at it; no
  // other byte of the old file changes, and a crash before the link leaves
  // the old archive as it was. Readers then see both (later entries win).
  // The caller must keep other writers away from `path` meanwhile.
  Status append_to_file(const std::filesystem::path& path) const;

 private:
  struct Pending;
  Status check_new_name(const std::string& name) const;

  uint64_t data_alignment_;
  std::vector<Pending> entries_;
  std::set<std::string, std::less<>> names_;
};

}  // namespace loom::io::irpa
