// ArchiveReader: maps an archive, walks its chain of headers and verifies
// every entry before handing anything out (see irpa.hpp for the contract).
#include <algorithm>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "common/mapped_file.hpp"
#include "loom/irpa.hpp"
#include "tensor_files/irpa_format.hpp"

namespace loom::io::irpa {
namespace {

using format::checked_add;
using format::load;
using format::num;
using format::quote;

std::string range_text(uint64_t begin, uint64_t length) {
  auto end = checked_add(begin, length);
  return "[" + num(begin) + ", " + (end ? num(*end) : num(begin) + "+" + num(length)) + ")";
}

// A chain of a few headers is normal; this many means a hostile file.
constexpr uint32_t kMaxHeaders = 1u << 16;

}  // namespace

struct ArchiveReader::State {
  MappedFile file;  // empty for caller buffers
  std::span<const std::byte> bytes;
  std::filesystem::path base_dir;  // empty: external entries are refused
  std::filesystem::path canonical_base_dir;
  std::vector<HeaderInfo> headers;
  std::vector<Entry> entries;
  std::vector<uint32_t> by_name;  // indices into entries, sorted by name
  std::map<std::string, MappedFile> external_files;  // by canonical path
  std::map<std::string, std::span<const std::byte>, std::less<>> external_bytes;  // by stored path
};

// Parses the chain into a State; the one friend of ArchiveReader's privates.
class ArchiveReaderBuilder {
 public:
  static Result<std::unique_ptr<ArchiveReader>> build(std::unique_ptr<ArchiveReader::State> state) {
    ArchiveReaderBuilder parser(*state);
    LOOM_RETURN_IF_ERROR(parser.parse_chain());
    std::unique_ptr<ArchiveReader> reader(new (std::nothrow) ArchiveReader());
    if (!reader) return resource_exhausted("irpa: cannot allocate an ArchiveReader");
    reader->state_ = std::move(state);
    return reader;
  }

 private:
  explicit ArchiveReaderBuilder(ArchiveReader::State& state)
      : s_(state), size_(state.bytes.size()) {
    // Entries may share metadata ranges, so copying names and metadata could
    // cost more than the file; this bounds it well above any real archive.
    copy_budget_ = size_ * 4 + (16u << 20);
  }

  Status parse_chain() {
    if (size_ == 0) return invalid_argument("irpa: the file is empty (an archive starts with a " +
                                            num(kHeaderPrefixSize) + "-byte header)");
    uint64_t offset = 0;
    std::vector<bool> replaced;
    std::unordered_map<std::string, size_t> live;  // name -> index into s_.entries
    for (uint32_t index = 0;; ++index) {
      if (index >= kMaxHeaders) {
        return invalid_argument("irpa: more than " + num(kMaxHeaders) + " linked headers");
      }
      LOOM_ASSIGN_OR_RETURN(HeaderInfo header, parse_header(offset, index));
      s_.headers.push_back(header);
      size_t first_new = s_.entries.size();
      LOOM_RETURN_IF_ERROR(parse_entries(s_.headers.back()));
      replaced.resize(s_.entries.size(), false);
      for (size_t i = first_new; i < s_.entries.size(); ++i) {
        auto [it, inserted] = live.try_emplace(s_.entries[i].name, i);
        if (!inserted) {
          replaced[it->second] = true;
          it->second = i;
        }
      }
      if (header.next_header_offset == 0) break;
      LOOM_ASSIGN_OR_RETURN(offset, next_header(header, index));
    }
    if (std::find(replaced.begin(), replaced.end(), true) != replaced.end()) {
      std::vector<Entry> kept;
      kept.reserve(live.size());
      for (size_t i = 0; i < s_.entries.size(); ++i) {
        if (!replaced[i]) kept.push_back(std::move(s_.entries[i]));
      }
      s_.entries = std::move(kept);
    }
    s_.by_name.resize(s_.entries.size());
    for (size_t i = 0; i < s_.by_name.size(); ++i) s_.by_name[i] = static_cast<uint32_t>(i);
    std::sort(s_.by_name.begin(), s_.by_name.end(), [this](uint32_t a, uint32_t b) {
      return s_.entries[a].name < s_.entries[b].name;
    });
    return Status();
  }

  std::string header_context(uint32_t index, uint64_t offset) const {
    return "irpa: header " + num(index) + " at offset " + num(offset) + ": ";
  }

  // Where the header after `header` starts. Links are relative and unsigned;
  // IREE adds them modulo 2^64, so a wrapping link points backward — which is
  // how a cycle would be written. Every link must point forward, which bounds
  // the walk by the file's size.
  Result<uint64_t> next_header(const HeaderInfo& header, uint32_t index) const {
    std::string ctx = header_context(index, header.offset);
    uint64_t target = header.offset + header.next_header_offset;  // modulo 2^64 on purpose
    if (target < header.offset) {
      // Headers so far lie at increasing offsets: search them for the target.
      auto it = std::lower_bound(s_.headers.begin(), s_.headers.end(), target,
                                 [](const HeaderInfo& h, uint64_t at) { return h.offset < at; });
      if (it != s_.headers.end() && it->offset == target) {
        return invalid_argument(ctx + "next_header_offset " + num(header.next_header_offset) +
                                " links back to header " + num(it - s_.headers.begin()) +
                                " at offset " + num(target) + ": the chain of headers has a cycle");
      }
      return invalid_argument(ctx + "next_header_offset " + num(header.next_header_offset) +
                              " wraps past 2^64 (to offset " + num(target) +
                              "); linked headers must follow the one linking them");
    }
    if (target % kHeaderAlignment != 0) {
      return invalid_argument(ctx + "next_header_offset " + num(header.next_header_offset) +
                              " puts the next header at offset " + num(target) +
                              ", not a multiple of " + num(kHeaderAlignment));
    }
    if (target >= size_) {
      return invalid_argument(ctx + "next_header_offset " + num(header.next_header_offset) +
                              " puts the next header at offset " + num(target) +
                              ", past the end of the file (size " + num(size_) + ")");
    }
    return target;
  }

  Result<HeaderInfo> parse_header(uint64_t offset, uint32_t index) const {
    std::string ctx = header_context(index, offset);
    auto bytes = s_.bytes.subspan(offset);
    if (bytes.size() < kHeaderPrefixSize) {
      return invalid_argument(ctx + "truncated: " + num(bytes.size()) +
                              " bytes left, the header prefix needs " + num(kHeaderPrefixSize));
    }
    uint32_t magic = load<uint32_t>(bytes, format::kMagicAt);
    if (magic != kMagic) {
      // The bytes found are not echoed: the path may lead to any file the
      // user can read, and its first bytes are none of the message's business.
      return invalid_argument(ctx + "bad magic (expected \"IRPA\"); not a parameter archive");
    }
    HeaderInfo h;
    h.offset = offset;
    h.version_major = load<uint16_t>(bytes, format::kVersionMajorAt);
    h.version_minor = load<uint16_t>(bytes, format::kVersionMinorAt);
    h.header_size = load<uint64_t>(bytes, format::kHeaderSizeAt);
    h.next_header_offset = load<uint64_t>(bytes, format::kNextHeaderOffsetAt);
    h.flags = load<uint64_t>(bytes, format::kHeaderFlagsAt);
    if (h.version_major != kVersionMajor) {
      return incompatible(ctx + "unsupported version " + num(h.version_major) + "." +
                          num(h.version_minor) + " (this reader knows major version " +
                          num(kVersionMajor) + ")");
    }
    // A newer minor version may have a longer header; its extra fields are
    // ignored (the format promises minor versions stay readable).
    if (h.header_size < kHeaderV0Size) {
      return invalid_argument(ctx + "header_size " + num(h.header_size) +
                              " is smaller than a version 0 header (" + num(kHeaderV0Size) + ")");
    }
    if (h.header_size > bytes.size()) {
      return invalid_argument(ctx + "truncated: header_size is " + num(h.header_size) +
                              " but only " + num(bytes.size()) + " bytes are left in the file");
    }
    h.entry_count = load<uint64_t>(bytes, format::kEntryCountAt);
    h.entry_segment_offset = load<uint64_t>(bytes, format::kEntrySegmentAt);
    h.entry_segment_length = load<uint64_t>(bytes, format::kEntrySegmentAt + 8);
    h.metadata_segment_offset = load<uint64_t>(bytes, format::kMetadataSegmentAt);
    h.metadata_segment_length = load<uint64_t>(bytes, format::kMetadataSegmentAt + 8);
    h.storage_segment_offset = load<uint64_t>(bytes, format::kStorageSegmentAt);
    h.storage_segment_length = load<uint64_t>(bytes, format::kStorageSegmentAt + 8);
    LOOM_RETURN_IF_ERROR(check_segment(ctx, "entry", offset, h.entry_segment_offset,
                                       h.entry_segment_length));
    LOOM_RETURN_IF_ERROR(check_segment(ctx, "metadata", offset, h.metadata_segment_offset,
                                       h.metadata_segment_length));
    LOOM_RETURN_IF_ERROR(check_segment(ctx, "storage", offset, h.storage_segment_offset,
                                       h.storage_segment_length));
    return h;
  }

  // A segment is {offset, length} relative to its header; an empty one may
  // have any offset (nothing is read from it).
  Status check_segment(const std::string& ctx, const char* what, uint64_t header_offset,
                       uint64_t offset, uint64_t length) const {
    if (length == 0) return Status();
    auto begin = checked_add(header_offset, offset);
    auto end = begin ? checked_add(*begin, length) : std::nullopt;
    if (!end) {
      return invalid_argument(ctx + what + " segment (offset " + num(offset) + ", length " +
                              num(length) + ") wraps past 2^64");
    }
    if (*end > size_) {
      return invalid_argument(ctx + what + " segment " + range_text(*begin, length) +
                              " runs past the end of the file (size " + num(size_) + ")");
    }
    return Status();
  }

  // Resolves a {offset, length} reference into the metadata segment.
  Result<std::string_view> metadata_ref(const HeaderInfo& h, std::span<const std::byte> entry,
                                        uint64_t at, const std::string& ctx,
                                        const char* field) const {
    uint64_t offset = load<uint64_t>(entry, at);
    uint64_t length = load<uint64_t>(entry, at + 8);
    if (length == 0) return std::string_view();
    auto end = checked_add(offset, length);
    if (!end) {
      return invalid_argument(ctx + field + " (offset " + num(offset) + ", length " +
                              num(length) + ") wraps past 2^64");
    }
    if (*end > h.metadata_segment_length) {
      return invalid_argument(ctx + field + " " + range_text(offset, length) +
                              " runs past the metadata segment (size " +
                              num(h.metadata_segment_length) + ")");
    }
    uint64_t absolute = h.offset + h.metadata_segment_offset + offset;  // checked per segment
    return std::string_view(reinterpret_cast<const char*>(s_.bytes.data() + absolute),
                            static_cast<size_t>(length));
  }

  Status charge_copy(const std::string& ctx, uint64_t bytes) {
    if (bytes > copy_budget_) {
      return resource_exhausted(ctx + "names and metadata would take more than " +
                                num(size_ * 4 + (16u << 20)) +
                                " bytes in memory (entries share metadata ranges); refused");
    }
    copy_budget_ -= bytes;
    return Status();
  }

  Status parse_entries(const HeaderInfo& h) {
    uint32_t header_index = static_cast<uint32_t>(s_.headers.size() - 1);
    std::string header_ctx = header_context(header_index, h.offset);
    uint64_t table = h.offset + h.entry_segment_offset;  // valid when length > 0
    uint64_t remaining = h.entry_segment_length;
    uint64_t position = 0;
    std::unordered_map<std::string_view, uint64_t> names;  // name -> entry index in this header
    for (uint64_t i = 0; i < h.entry_count; ++i) {
      std::string ctx = header_ctx + "entry " + num(i) + ": ";
      // Tables of linked headers may overlap, so walking each could cost
      // (headers x table); real archives hold at most one entry per 60 bytes.
      if (++entries_walked_ > size_ / kEntryHeaderSize + 1) {
        return invalid_argument(ctx + "the chain's entry tables hold more entries than a file of " +
                                num(size_) + " bytes can (do linked headers share a table?)");
      }
      if (remaining < kEntryHeaderSize) {
        return invalid_argument(ctx + "the entry table (length " + num(h.entry_segment_length) +
                                ", entry_count " + num(h.entry_count) + ") ends after " +
                                num(i) + " entries; " + num(remaining) +
                                " bytes left, an entry header needs " + num(kEntryHeaderSize));
      }
      uint64_t entry_offset = table + position;
      auto entry = s_.bytes.subspan(entry_offset, remaining);
      uint64_t entry_size = load<uint64_t>(entry, format::kEntrySizeAt);
      if (entry_size < kEntryHeaderSize) {
        return invalid_argument(ctx + "entry_size " + num(entry_size) +
                                " is smaller than the entry header (" + num(kEntryHeaderSize) + ")");
      }
      if (entry_size > remaining) {
        return invalid_argument(ctx + "entry_size " + num(entry_size) +
                                " runs past the entry table (" + num(remaining) + " bytes left)");
      }
      // The last entry's padding may lie outside the table (IREE's writer
      // ends the table at the last entry's end).
      uint64_t step = std::min(*format::align_up(entry_size, kEntryAlignment), remaining);
      position += step;
      remaining -= step;

      uint32_t raw_type = load<uint32_t>(entry, format::kEntryTypeAt);
      if (raw_type == static_cast<uint32_t>(EntryType::kSkip) ||
          raw_type > static_cast<uint32_t>(EntryType::kExternal)) {
        continue;  // erased, or a type from a newer writer: skipped by entry_size
      }
      Entry e;
      e.type = static_cast<EntryType>(raw_type);
      e.flags = load<uint64_t>(entry, format::kEntryFlagsAt);
      e.minimum_alignment = load<uint64_t>(entry, format::kEntryAlignmentAt);
      e.header_index = header_index;
      e.entry_offset = entry_offset;
      LOOM_ASSIGN_OR_RETURN(std::string_view name,
                            metadata_ref(h, entry, format::kEntryNameAt, ctx, "name"));
      ctx = header_ctx + "entry " + num(i) + " (" + quote(name) + "): ";
      LOOM_ASSIGN_OR_RETURN(std::string_view metadata,
                            metadata_ref(h, entry, format::kEntryMetadataAt, ctx, "metadata"));
      if (e.minimum_alignment != 0 && !format::is_power_of_two(e.minimum_alignment)) {
        return invalid_argument(ctx + "minimum_alignment " + num(e.minimum_alignment) +
                                " is not a power of two");
      }
      auto [previous, inserted] = names.try_emplace(name, i);
      if (!inserted) {
        return invalid_argument(ctx + "duplicate name: entry " + num(previous->second) +
                                " of the same header has it too");
      }
      switch (e.type) {
        case EntryType::kSplat: LOOM_RETURN_IF_ERROR(parse_splat(entry, entry_size, ctx, e)); break;
        case EntryType::kData: LOOM_RETURN_IF_ERROR(parse_data(h, entry, entry_size, ctx, e)); break;
        case EntryType::kExternal:
          LOOM_RETURN_IF_ERROR(parse_external(h, entry, entry_size, ctx, e));
          break;
        case EntryType::kSkip: break;
      }
      LOOM_RETURN_IF_ERROR(charge_copy(ctx, name.size() + metadata.size()));
      e.name.assign(name);
      e.metadata.assign(metadata);
      s_.entries.push_back(std::move(e));
    }
    return Status();
  }

  static Status check_entry_size(const std::string& ctx, const char* type, uint64_t entry_size,
                                 uint64_t needed) {
    if (entry_size >= needed) return Status();
    return invalid_argument(ctx + "entry_size " + num(entry_size) + " is smaller than a " + type +
                            " entry (" + num(needed) + " bytes)");
  }

  static Status parse_splat(std::span<const std::byte> entry, uint64_t entry_size,
                            const std::string& ctx, Entry& e) {
    LOOM_RETURN_IF_ERROR(check_entry_size(ctx, "splat", entry_size, kSplatEntrySize));
    e.length = load<uint64_t>(entry, format::kSplatLengthAt);
    std::memcpy(e.pattern.data(), entry.data() + format::kSplatPatternAt, e.pattern.size());
    e.pattern_length = load<uint8_t>(entry, format::kSplatPatternLengthAt);
    if (!format::valid_pattern_length(e.pattern_length)) {
      return invalid_argument(ctx + "pattern_length " + num(e.pattern_length) +
                              " is not 1, 2, 4, 8 or 16");
    }
    if (e.length % e.pattern_length != 0) {
      return invalid_argument(ctx + "pattern_length " + num(e.pattern_length) +
                              " does not divide length " + num(e.length));
    }
    return Status();
  }

  static Status parse_data(const HeaderInfo& h, std::span<const std::byte> entry,
                           uint64_t entry_size, const std::string& ctx, Entry& e) {
    LOOM_RETURN_IF_ERROR(check_entry_size(ctx, "data", entry_size, kDataEntrySize));
    uint64_t offset = load<uint64_t>(entry, format::kDataStorageAt);
    e.length = load<uint64_t>(entry, format::kDataStorageAt + 8);
    if (e.length == 0) return Status();
    auto end = checked_add(offset, e.length);
    if (!end) {
      return invalid_argument(ctx + "storage range (offset " + num(offset) + ", length " +
                              num(e.length) + ") wraps past 2^64");
    }
    if (*end > h.storage_segment_length) {
      return invalid_argument(ctx + "storage range " + range_text(offset, e.length) +
                              " runs past the storage segment (size " +
                              num(h.storage_segment_length) + ")");
    }
    e.data_offset = h.offset + h.storage_segment_offset + offset;  // inside the checked segment
    return Status();
  }

  Status parse_external(const HeaderInfo& h, std::span<const std::byte> entry,
                        uint64_t entry_size, const std::string& ctx, Entry& e) {
    LOOM_RETURN_IF_ERROR(check_entry_size(ctx, "external", entry_size, kExternalEntrySize));
    LOOM_ASSIGN_OR_RETURN(std::string_view path,
                          metadata_ref(h, entry, format::kExternalPathAt, ctx, "path"));
    e.external_offset = load<uint64_t>(entry, format::kExternalRangeAt);
    e.length = load<uint64_t>(entry, format::kExternalRangeAt + 8);
    auto end = checked_add(e.external_offset, e.length);
    if (!end) {
      return invalid_argument(ctx + "external range (offset " + num(e.external_offset) +
                              ", length " + num(e.length) + ") wraps past 2^64");
    }
    auto resolved = resolve_external(path);
    if (!resolved.ok()) return resolved.status().with_context(ctx.substr(0, ctx.size() - 2));
    if (*end > resolved->size()) {
      return invalid_argument(ctx + "external range " + range_text(e.external_offset, e.length) +
                              " runs past the end of " + quote(path) + " (size " +
                              num(resolved->size()) + ")");
    }
    LOOM_RETURN_IF_ERROR(charge_copy(ctx, path.size()));
    e.external_path.assign(path);
    return Status();
  }

  // Maps the file an external entry names, once per distinct file. Only files
  // inside the archive's folder are allowed, after resolving symlinks.
  Result<std::span<const std::byte>> resolve_external(std::string_view stored) {
    if (auto it = s_.external_bytes.find(stored); it != s_.external_bytes.end()) return it->second;
    LOOM_RETURN_IF_ERROR(format::check_external_path(stored));
    if (s_.base_dir.empty()) {
      return failed_precondition("external path " + quote(stored) +
                                 ": an archive read from a buffer without base_dir cannot "
                                 "reference other files");
    }
    std::error_code ec;
    if (s_.canonical_base_dir.empty()) {
      s_.canonical_base_dir = std::filesystem::canonical(s_.base_dir, ec);
      if (ec) {
        return not_found("archive folder " + s_.base_dir.string() + ": " + ec.message());
      }
    }
    std::filesystem::path candidate = s_.base_dir / std::filesystem::path(std::string(stored));
    std::filesystem::path canonical = std::filesystem::canonical(candidate, ec);
    if (ec) {
      return not_found("external file " + quote(stored) + " (" + candidate.string() +
                       "): " + ec.message());
    }
    auto [base_end, path_it] = std::mismatch(s_.canonical_base_dir.begin(),
                                             s_.canonical_base_dir.end(), canonical.begin(),
                                             canonical.end());
    if (base_end != s_.canonical_base_dir.end() || path_it == canonical.end()) {
      return invalid_argument("external path " + quote(stored) + " resolves to " +
                              canonical.string() + ", outside the archive's folder " +
                              s_.canonical_base_dir.string());
    }
    auto found = s_.external_files.find(canonical.string());
    if (found == s_.external_files.end()) {
      LOOM_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(canonical));
      file.close_descriptor();
      found = s_.external_files.emplace(canonical.string(), std::move(file)).first;
    }
    std::span<const std::byte> bytes = found->second.bytes();
    s_.external_bytes.emplace(std::string(stored), bytes);
    return bytes;
  }

  ArchiveReader::State& s_;
  uint64_t size_;
  uint64_t copy_budget_;
  uint64_t entries_walked_ = 0;
};

ArchiveReader::ArchiveReader() = default;
ArchiveReader::~ArchiveReader() = default;

Result<std::unique_ptr<ArchiveReader>> ArchiveReader::open_file(const std::filesystem::path& path) {
  auto state = std::make_unique<State>();
  auto file = MappedFile::open(path);
  if (!file.ok()) return file.status();
  state->file = std::move(file).value();
  state->file.close_descriptor();
  state->bytes = state->file.bytes();
  state->base_dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  auto reader = ArchiveReaderBuilder::build(std::move(state));
  if (!reader.ok()) return reader.status().with_context(path.string());
  return reader;
}

Result<std::unique_ptr<ArchiveReader>> ArchiveReader::open_buffer(
    std::span<const std::byte> bytes, std::filesystem::path base_dir) {
  auto state = std::make_unique<State>();
  state->bytes = bytes;
  state->base_dir = std::move(base_dir);
  return ArchiveReaderBuilder::build(std::move(state));
}

const std::vector<HeaderInfo>& ArchiveReader::headers() const { return state_->headers; }
const std::vector<Entry>& ArchiveReader::entries() const { return state_->entries; }
std::span<const std::byte> ArchiveReader::file_bytes() const { return state_->bytes; }

const Entry* ArchiveReader::find(std::string_view name) const {
  const auto& entries = state_->entries;
  auto it = std::lower_bound(state_->by_name.begin(), state_->by_name.end(), name,
                             [&](uint32_t index, std::string_view key) {
                               return entries[index].name < key;
                             });
  if (it == state_->by_name.end() || entries[*it].name != name) return nullptr;
  return &entries[*it];
}

Result<std::span<const std::byte>> ArchiveReader::view(const Entry& entry) const {
  std::string what = "irpa: entry " + quote(entry.name) + ": ";
  std::span<const std::byte> source;
  uint64_t offset = 0;
  switch (entry.type) {
    case EntryType::kData:
      if (entry.length == 0) return std::span<const std::byte>();
      source = state_->bytes;
      offset = entry.data_offset;
      break;
    case EntryType::kExternal: {
      auto it = state_->external_bytes.find(entry.external_path);
      if (it == state_->external_bytes.end()) {
        return not_found(what + "external file " + quote(entry.external_path) +
                         " is not one this reader opened");
      }
      source = it->second;
      offset = entry.external_offset;
      break;
    }
    case EntryType::kSplat:
      return failed_precondition(what + "a splat has no stored bytes; use read()");
    default:
      return invalid_argument(what + "type " + std::string(entry_type_name(entry.type)) +
                              " has no bytes");
  }
  auto end = checked_add(offset, entry.length);
  if (!end || *end > source.size()) {
    return out_of_range(what + "range " + range_text(offset, entry.length) +
                        " is outside its file (size " + num(source.size()) + ")");
  }
  return source.subspan(static_cast<size_t>(offset), static_cast<size_t>(entry.length));
}

Status ArchiveReader::read(const Entry& entry, uint64_t offset, std::span<std::byte> out) const {
  auto end = checked_add(offset, out.size());
  if (!end || *end > entry.length) {
    return out_of_range("irpa: entry " + quote(entry.name) + ": read of " +
                        range_text(offset, out.size()) + " is outside its " + num(entry.length) +
                        " bytes");
  }
  if (out.empty()) return Status();
  if (entry.type == EntryType::kSplat) {
    if (!format::valid_pattern_length(entry.pattern_length)) {
      return invalid_argument("irpa: entry " + quote(entry.name) + ": pattern_length " +
                              num(entry.pattern_length) + " is not 1, 2, 4, 8 or 16");
    }
    uint64_t mask = entry.pattern_length - 1;
    size_t seeded = std::min<size_t>(out.size(), entry.pattern_length);
    for (size_t i = 0; i < seeded; ++i) out[i] = entry.pattern[(offset + i) & mask];
    // The first pattern_length bytes repeat with that period: double them.
    for (size_t filled = seeded; filled < out.size();) {
      size_t chunk = std::min(filled, out.size() - filled);
      std::memcpy(out.data() + filled, out.data(), chunk);
      filled += chunk;
    }
    return Status();
  }
  LOOM_ASSIGN_OR_RETURN(auto bytes, view(entry));
  std::memcpy(out.data(), bytes.data() + offset, out.size());
  return Status();
}

}  // namespace loom::io::irpa
