// ArchiveBuilder: lays out one archive exactly as IREE's builder does, so
// the bytes match: header; entry table at 96 (each entry 16-aligned, the
// table ending with the last entry); metadata right after (per entry: name,
// metadata, external path); storage aligned to the largest data alignment,
// each entry at its own alignment; the whole padded to 4096 with zeros.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "loom/irpa.hpp"
#include "tensor_files/irpa_format.hpp"

namespace loom::io::irpa {
namespace {

using format::align_up;
using format::checked_add;
using format::num;
using format::quote;
using format::store;

// Where each piece of one archive goes, relative to its header.
struct Plan {
  std::vector<std::byte> head;  // header, entry table and metadata
  struct Piece {
    uint64_t offset;
    std::span<const std::byte> bytes;
  };
  std::vector<Piece> data;
  uint64_t storage_alignment = 1;
  uint64_t total_size = 0;  // a multiple of kFileAlignment
};

Status io_error(const std::string& what, const std::filesystem::path& path) {
  return unavailable("irpa: " + what + " " + path.string() + ": " + std::strerror(errno));
}

Status write_all(int fd, std::span<const std::byte> bytes, uint64_t offset,
                 const std::filesystem::path& path) {
  while (!bytes.empty()) {
    ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return io_error("cannot write", path);
    bytes = bytes.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return Status();
}

// The block is zero when its first byte is and every byte equals the next
// one (an overlapping memcmp, which runs at memory speed).
bool all_zero(std::span<const std::byte> block) {
  return block.empty() ||
         (block[0] == std::byte{0} && std::memcmp(block.data(), block.data() + 1, block.size() - 1) == 0);
}

// Writes a planned archive at `base` of a file already sized to hold it (so
// its region reads as zeros). All-zero blocks are not written, leaving holes.
Status write_plan(int fd, const Plan& plan, uint64_t base, const std::filesystem::path& path) {
  LOOM_RETURN_IF_ERROR(write_all(fd, plan.head, base, path));
  constexpr size_t kBlock = 64 << 10;
  for (const Plan::Piece& piece : plan.data) {
    for (size_t at = 0; at < piece.bytes.size(); at += kBlock) {
      auto block = piece.bytes.subspan(at, std::min(kBlock, piece.bytes.size() - at));
      if (!all_zero(block)) LOOM_RETURN_IF_ERROR(write_all(fd, block, base + piece.offset + at, path));
    }
  }
  return Status();
}

class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace

struct ArchiveBuilder::Pending {
  std::string name;
  std::string metadata;
  EntryType type = EntryType::kData;
  uint64_t length = 0;
  std::span<const std::byte> bytes;  // kData; empty for add_zero_data (length zero bytes)
  uint64_t alignment = 0;            // kData, resolved when added
  std::array<std::byte, 16> pattern{};
  uint8_t pattern_length = 0;
  std::string path;  // kExternal
  uint64_t external_offset = 0;
};

ArchiveBuilder::ArchiveBuilder(uint64_t data_alignment) : data_alignment_(data_alignment) {}
ArchiveBuilder::~ArchiveBuilder() = default;
ArchiveBuilder::ArchiveBuilder(ArchiveBuilder&&) noexcept = default;
ArchiveBuilder& ArchiveBuilder::operator=(ArchiveBuilder&&) noexcept = default;

Status ArchiveBuilder::check_new_name(const std::string& name) const {
  if (name.empty()) return invalid_argument("irpa: entry names must not be empty");
  if (names_.count(name) != 0) {
    return Status(StatusCode::kAlreadyExists, "irpa: entry " + quote(name) + " was already added");
  }
  return Status();
}

Status ArchiveBuilder::add_data(std::string name, std::span<const std::byte> bytes,
                                std::string metadata, uint64_t alignment) {
  LOOM_RETURN_IF_ERROR(add_zero_data(std::move(name), bytes.size(), std::move(metadata), alignment));
  entries_.back().bytes = bytes;
  return Status();
}

Status ArchiveBuilder::add_zero_data(std::string name, uint64_t length, std::string metadata,
                                     uint64_t alignment) {
  LOOM_RETURN_IF_ERROR(check_new_name(name));
  uint64_t effective = alignment == 0 ? data_alignment_ : alignment;
  if (!format::is_power_of_two(effective) || effective > kMaxDataAlignment) {
    return invalid_argument("irpa: entry " + quote(name) + ": alignment " + num(effective) +
                            " is not a power of two up to " + num(kMaxDataAlignment));
  }
  Pending p;
  p.name = name;
  p.metadata = std::move(metadata);
  p.type = EntryType::kData;
  p.length = length;
  p.alignment = effective;
  entries_.push_back(std::move(p));
  names_.insert(std::move(name));
  return Status();
}

Status ArchiveBuilder::add_splat(std::string name, uint64_t length,
                                 std::span<const std::byte> pattern, std::string metadata) {
  LOOM_RETURN_IF_ERROR(check_new_name(name));
  if (!format::valid_pattern_length(pattern.size())) {
    return invalid_argument("irpa: entry " + quote(name) + ": pattern of " + num(pattern.size()) +
                            " bytes; it must have 1, 2, 4, 8 or 16");
  }
  if (length % pattern.size() != 0) {
    return invalid_argument("irpa: entry " + quote(name) + ": pattern of " + num(pattern.size()) +
                            " bytes does not divide length " + num(length));
  }
  Pending p;
  p.name = name;
  p.metadata = std::move(metadata);
  p.type = EntryType::kSplat;
  p.length = length;
  std::memcpy(p.pattern.data(), pattern.data(), pattern.size());
  p.pattern_length = static_cast<uint8_t>(pattern.size());
  entries_.push_back(std::move(p));
  names_.insert(std::move(name));
  return Status();
}

Status ArchiveBuilder::add_external(std::string name, std::string path, uint64_t offset,
                                    uint64_t length, std::string metadata) {
  LOOM_RETURN_IF_ERROR(check_new_name(name));
  Status path_ok = format::check_external_path(path);
  if (!path_ok.ok()) return path_ok.with_context("irpa: entry " + quote(name));
  if (!checked_add(offset, length)) {
    return invalid_argument("irpa: entry " + quote(name) + ": external range (offset " +
                            num(offset) + ", length " + num(length) + ") wraps past 2^64");
  }
  Pending p;
  p.name = name;
  p.metadata = std::move(metadata);
  p.type = EntryType::kExternal;
  p.length = length;
  p.path = std::move(path);
  p.external_offset = offset;
  entries_.push_back(std::move(p));
  names_.insert(std::move(name));
  return Status();
}

namespace {

// The layout, computed with checked arithmetic: names, metadata and data are
// real buffers, so only absurd inputs can overflow, but the check is cheap.
template <typename PendingT>
Result<Plan> make_plan(const std::vector<PendingT>& entries) {
  const Status too_big = resource_exhausted("irpa: the archive would be larger than 2^64 bytes");
  auto entry_size = [](EntryType type) {
    switch (type) {
      case EntryType::kSplat: return kSplatEntrySize;
      case EntryType::kExternal: return kExternalEntrySize;
      default: return kDataEntrySize;
    }
  };
  const uint64_t entry_segment_offset = *align_up(kHeaderV0Size, kEntryAlignment);
  std::vector<uint64_t> entry_at(entries.size());
  uint64_t table = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    entry_at[i] = *align_up(table, kEntryAlignment);
    table = entry_at[i] + entry_size(entries[i].type);
  }
  const uint64_t metadata_segment_offset = entry_segment_offset + table;
  uint64_t metadata = 0;
  Plan plan;
  for (const auto& e : entries) {
    auto sum = checked_add(metadata, e.name.size());
    sum = sum ? checked_add(*sum, e.metadata.size()) : sum;
    sum = sum ? checked_add(*sum, e.path.size()) : sum;
    if (!sum) return too_big;
    metadata = *sum;
    if (e.type == EntryType::kData) plan.storage_alignment = std::max(plan.storage_alignment, e.alignment);
  }
  auto storage_segment_offset = checked_add(metadata_segment_offset, metadata);
  storage_segment_offset = storage_segment_offset ? align_up(*storage_segment_offset, plan.storage_alignment)
                                                  : storage_segment_offset;
  if (!storage_segment_offset) return too_big;
  uint64_t storage = 0;
  std::vector<uint64_t> data_at(entries.size(), 0);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].type != EntryType::kData) continue;
    auto at = align_up(storage, entries[i].alignment);
    auto end = at ? checked_add(*at, entries[i].length) : at;
    if (!end) return too_big;
    data_at[i] = *at;
    storage = *end;
    if (!entries[i].bytes.empty()) plan.data.push_back({*storage_segment_offset + *at, entries[i].bytes});
  }
  auto total = checked_add(*storage_segment_offset, storage);
  total = total ? align_up(*total, kFileAlignment) : total;
  if (!total) return too_big;
  plan.total_size = *total;

  uint64_t head_size = metadata_segment_offset + metadata;
  if (head_size > SIZE_MAX) return too_big;
  try {
    plan.head.assign(static_cast<size_t>(head_size), std::byte{0});
  } catch (const std::bad_alloc&) {
    return resource_exhausted("irpa: cannot allocate " + num(head_size) +
                              " bytes for the header, entry table and metadata");
  }
  std::span<std::byte> head = plan.head;
  store<uint32_t>(head, format::kMagicAt, kMagic);
  store<uint16_t>(head, format::kVersionMajorAt, kVersionMajor);
  store<uint16_t>(head, format::kVersionMinorAt, kVersionMinor);
  store<uint64_t>(head, format::kHeaderSizeAt, kHeaderV0Size);
  store<uint64_t>(head, format::kNextHeaderOffsetAt, 0);
  store<uint64_t>(head, format::kHeaderFlagsAt, 0);
  store<uint64_t>(head, format::kEntryCountAt, entries.size());
  store<uint64_t>(head, format::kEntrySegmentAt, entry_segment_offset);
  store<uint64_t>(head, format::kEntrySegmentAt + 8, table);
  store<uint64_t>(head, format::kMetadataSegmentAt, metadata_segment_offset);
  store<uint64_t>(head, format::kMetadataSegmentAt + 8, metadata);
  store<uint64_t>(head, format::kStorageSegmentAt, *storage_segment_offset);
  store<uint64_t>(head, format::kStorageSegmentAt + 8, storage);

  uint64_t text_at = 0;  // within the metadata segment
  auto put_text = [&](const std::string& text, uint64_t ref_at) {
    // IREE writes offset 0 for an empty reference; so do we, byte for byte.
    store<uint64_t>(head, ref_at, text.empty() ? 0 : text_at);
    store<uint64_t>(head, ref_at + 8, text.size());
    std::memcpy(head.data() + metadata_segment_offset + text_at, text.data(), text.size());
    text_at += text.size();
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    uint64_t at = entry_segment_offset + entry_at[i];
    store<uint64_t>(head, at + format::kEntrySizeAt, entry_size(e.type));
    store<uint32_t>(head, at + format::kEntryTypeAt, static_cast<uint32_t>(e.type));
    store<uint64_t>(head, at + format::kEntryFlagsAt, 0);
    put_text(e.name, at + format::kEntryNameAt);
    put_text(e.metadata, at + format::kEntryMetadataAt);
    switch (e.type) {
      case EntryType::kData:
        store<uint64_t>(head, at + format::kEntryAlignmentAt, e.alignment);
        store<uint64_t>(head, at + format::kDataStorageAt, data_at[i]);
        store<uint64_t>(head, at + format::kDataStorageAt + 8, e.length);
        break;
      case EntryType::kSplat:
        store<uint64_t>(head, at + format::kSplatLengthAt, e.length);
        std::memcpy(head.data() + at + format::kSplatPatternAt, e.pattern.data(), e.pattern.size());
        store<uint8_t>(head, at + format::kSplatPatternLengthAt, e.pattern_length);
        break;
      case EntryType::kExternal:
        put_text(e.path, at + format::kExternalPathAt);
        store<uint64_t>(head, at + format::kExternalRangeAt, e.external_offset);
        store<uint64_t>(head, at + format::kExternalRangeAt + 8, e.length);
        break;
      case EntryType::kSkip: break;
    }
  }
  return plan;
}

}  // namespace

Result<std::vector<std::byte>> ArchiveBuilder::write_buffer() const {
  LOOM_ASSIGN_OR_RETURN(Plan plan, make_plan(entries_));
  if (plan.total_size > SIZE_MAX) return resource_exhausted("irpa: archive too large for memory");
  std::vector<std::byte> out;
  try {
    out.assign(static_cast<size_t>(plan.total_size), std::byte{0});
  } catch (const std::bad_alloc&) {
    return resource_exhausted("irpa: cannot allocate " + num(plan.total_size) +
                              " bytes for the archive; use write_file");
  }
  std::memcpy(out.data(), plan.head.data(), plan.head.size());
  for (const Plan::Piece& piece : plan.data) {
    if (!piece.bytes.empty()) std::memcpy(out.data() + piece.offset, piece.bytes.data(), piece.bytes.size());
  }
  return out;
}

Status ArchiveBuilder::write_file(const std::filesystem::path& path) const {
  LOOM_ASSIGN_OR_RETURN(Plan plan, make_plan(entries_));
  if (plan.total_size > static_cast<uint64_t>(INT64_MAX)) {
    return resource_exhausted("irpa: " + path.string() + " would be " + num(plan.total_size) +
                              " bytes, more than a file can hold");
  }
  // Written beside the target and renamed over it, so readers never see a
  // half-written archive.
  std::string temp = path.string() + ".tmp.XXXXXX";
  Descriptor fd(::mkstemp(temp.data()));
  if (fd.get() < 0) return io_error("cannot create a temporary file for", path);
  Status status;
  if (::ftruncate(fd.get(), static_cast<off_t>(plan.total_size)) != 0) {
    status = io_error("cannot size", temp);
  }
  if (status.ok()) status = write_plan(fd.get(), plan, 0, temp);
  if (status.ok() && ::fchmod(fd.get(), 0644) != 0) status = io_error("cannot chmod", temp);
  if (status.ok() && ::close(fd.release()) != 0) status = io_error("cannot close", temp);
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) status = io_error("cannot rename onto", path);
  if (!status.ok()) ::unlink(temp.c_str());
  return status;
}

Status ArchiveBuilder::append_to_file(const std::filesystem::path& path) const {
  LOOM_ASSIGN_OR_RETURN(Plan plan, make_plan(entries_));
  uint64_t last_header = 0;
  uint64_t file_size = 0;
  {
    // The existing chain must be valid; its reader (a private mapping) is
    // gone before the file changes.
    auto existing = ArchiveReader::open_file(path);
    if (!existing.ok()) return existing.status().with_context("irpa: cannot append");
    last_header = (*existing)->headers().back().offset;
    file_size = (*existing)->file_bytes().size();
  }
  auto base = align_up(file_size, std::max(kFileAlignment, plan.storage_alignment));
  auto end = base ? checked_add(*base, plan.total_size) : base;
  if (!end || *end > static_cast<uint64_t>(INT64_MAX)) {
    return resource_exhausted("irpa: appending to " + path.string() + " would pass 2^63 bytes");
  }
  Descriptor fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (fd.get() < 0) return io_error("cannot open", path);
  if (::ftruncate(fd.get(), static_cast<off_t>(*end)) != 0) return io_error("cannot extend", path);
  LOOM_RETURN_IF_ERROR(write_plan(fd.get(), plan, *base, path));
  // The new archive is on disk before the old chain points at it, so a crash
  // in between leaves the old archive intact.
  if (::fdatasync(fd.get()) != 0) return io_error("cannot sync", path);
  std::array<std::byte, 8> link{};
  store<uint64_t>(link, 0, *base - last_header);
  LOOM_RETURN_IF_ERROR(write_all(fd.get(), link, last_header + format::kNextHeaderOffsetAt, path));
  if (::close(fd.release()) != 0) return io_error("cannot close", path);
  return Status();
}

}  // namespace loom::io::irpa
