#include "program_file/file_assembly.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <new>

#include "common/hash.hpp"
#include "program_file/checksum.hpp"
#include "program_file/fb_codec.hpp"
#include "program_file/format.hpp"
#include "program_file/validate.hpp"

namespace loom::container {
namespace {

bool align_up(uint64_t value, uint64_t alignment, uint64_t* out) {
  uint64_t bumped = 0;
  if (!checked_add(value, alignment - 1, &bumped)) return false;
  *out = bumped & ~(alignment - 1);
  return true;
}

uint32_t effective_alignment(const SegmentSource& s) {
  return s.alignment == 0 ? kDefaultSegmentAlignment : s.alignment;
}

// Recorded parameter checksums must describe the bytes being written.
Status check_parameter_checksums(const ProgramDef& program,
                                 std::span<const SegmentSource> segments) {
  for (size_t i = 0; i < program.parameters.size(); ++i) {
    const ParameterDef& p = program.parameters[i];
    if (p.checksum == 0 || p.segment < 0) continue;
    const SegmentSource& s = segments[static_cast<size_t>(p.segment)];
    uint64_t actual = s.zero ? zero_bytes_checksum(p.size)
                             : xxh3_64(s.bytes.subspan(static_cast<size_t>(p.offset),
                                                       static_cast<size_t>(p.size)));
    if (actual != p.checksum) {
      return invalid_argument("parameters[" + std::to_string(i) + "] ('" + p.name +
                              "').checksum: recorded " + hex(p.checksum) +
                              " but its bytes hash to " + hex(actual));
    }
  }
  return Status();
}

Status write_all(int fd, const std::byte* data, uint64_t size, uint64_t offset,
                 const std::filesystem::path& path) {
  while (size > 0) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(size, uint64_t{1} << 30));
    ssize_t n = ::pwrite(fd, data, chunk, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return data_loss("cannot write " + path.string() + " at offset " +
                       std::to_string(offset) + ": " + std::strerror(errno));
    }
    data += n;
    size -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status();
}

Status write_to_fd(int fd, const FilePlan& plan, std::span<const SegmentSource> segments,
                   const std::filesystem::path& path) {
  LOOM_RETURN_IF_ERROR(write_all(fd, plan.front.data(), plan.front.size(), 0, path));
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].zero) continue;  // a hole: ftruncate below covers it
    LOOM_RETURN_IF_ERROR(write_all(fd, segments[i].bytes.data(), segments[i].bytes.size(),
                                   plan.segments[i].offset, path));
  }
  if (plan.head.file_size > static_cast<uint64_t>(std::numeric_limits<off_t>::max()) ||
      ::ftruncate(fd, static_cast<off_t>(plan.head.file_size)) != 0) {
    return data_loss("cannot extend " + path.string() + " to " +
                     std::to_string(plan.head.file_size) + " bytes: " + std::strerror(errno));
  }
  return Status();
}

}  // namespace

Result<FilePlan> plan_file(const FileContents& contents) {
  const ProgramDef& program = *contents.program;
  std::span<const SegmentSource> sources = contents.segments;
  std::vector<uint64_t> sizes;
  sizes.reserve(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    uint32_t alignment = effective_alignment(sources[i]);
    if (!is_power_of_two(alignment)) {
      return invalid_argument("segment " + std::to_string(i) + ": alignment " +
                              std::to_string(alignment) + " is not a power of two");
    }
    sizes.push_back(sources[i].size());
  }
  if (contents.validate) {
    LOOM_RETURN_IF_ERROR(validate_program(program, sizes));
    LOOM_RETURN_IF_ERROR(check_parameter_checksums(program, sources));
  }

  FilePlan plan;
  std::vector<std::byte> flatbuffer;
  try {
    flatbuffer = encode_program(program);
  } catch (const std::bad_alloc&) {
    return resource_exhausted("out of memory while encoding the program's flatbuffer");
  }

  ProgramHead& head = plan.head;
  head.major = kProgramMajorVersion;
  head.minor = kProgramMinorVersion;
  head.head_size = kProgramHeadSize;
  head.required_features = contents.required_features;
  head.optional_features = contents.optional_features;
  head.flatbuffer_offset = kProgramHeadSize;
  head.flatbuffer_size = flatbuffer.size();
  head.segment_count = sources.size();
  uint64_t cursor = head.flatbuffer_offset + head.flatbuffer_size;
  if (!align_up(cursor, kSegmentTableAlignment, &head.segment_table_offset) ||
      sources.size() > (std::numeric_limits<uint64_t>::max() - head.segment_table_offset) /
                           kSegmentTableEntrySize) {
    return invalid_argument("segment table of " + std::to_string(sources.size()) +
                            " entries does not fit in 64-bit offsets");
  }
  cursor = head.segment_table_offset + sources.size() * kSegmentTableEntrySize;
  uint64_t front_size = cursor;

  plan.segments.resize(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    SegmentInfo& info = plan.segments[i];
    info.alignment = effective_alignment(sources[i]);
    info.size = sources[i].size();
    if (!align_up(cursor, info.alignment, &info.offset) ||
        !checked_add(info.offset, info.size, &cursor)) {
      return invalid_argument("segment " + std::to_string(i) + " (" +
                              std::to_string(info.size) +
                              " bytes) does not fit in 64-bit file offsets");
    }
    info.checksum = sources[i].zero ? zero_bytes_checksum(info.size) : xxh3_64(sources[i].bytes);
  }
  head.file_size = cursor;

  try {
    plan.front.resize(static_cast<size_t>(front_size));
  } catch (const std::bad_alloc&) {
    return resource_exhausted("out of memory for a segment table of " +
                              std::to_string(sources.size()) + " entries");
  }
  std::memcpy(plan.front.data() + head.flatbuffer_offset, flatbuffer.data(), flatbuffer.size());
  for (size_t i = 0; i < plan.segments.size(); ++i) {
    encode_segment_entry(
        plan.segments[i],
        std::span<std::byte, kSegmentTableEntrySize>(
            plan.front.data() + head.segment_table_offset + i * kSegmentTableEntrySize,
            kSegmentTableEntrySize));
  }
  encode_head(head, std::span<std::byte, kProgramHeadSize>(plan.front.data(), kProgramHeadSize));
  return plan;
}

Status write_file(const FileContents& contents, const std::filesystem::path& path) {
  LOOM_ASSIGN_OR_RETURN(FilePlan plan, plan_file(contents));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return not_found("cannot create " + path.string() + ": " + std::strerror(errno));
  }
  Status status = write_to_fd(fd, plan, contents.segments, path);
  if (::close(fd) != 0 && status.ok()) {
    status = data_loss("cannot close " + path.string() + ": " + std::strerror(errno));
  }
  if (!status.ok()) ::unlink(path.c_str());
  return status;
}

Result<std::vector<std::byte>> write_buffer(const FileContents& contents) {
  LOOM_ASSIGN_OR_RETURN(FilePlan plan, plan_file(contents));
  if (plan.head.file_size > std::numeric_limits<size_t>::max()) {
    return resource_exhausted("file of " + std::to_string(plan.head.file_size) +
                              " bytes cannot be held in memory");
  }
  std::vector<std::byte> out;
  try {
    out.resize(static_cast<size_t>(plan.head.file_size));
  } catch (const std::exception&) {
    return resource_exhausted("cannot allocate " + std::to_string(plan.head.file_size) +
                              " bytes for the program file; write it to a file instead");
  }
  std::memcpy(out.data(), plan.front.data(), plan.front.size());
  for (size_t i = 0; i < contents.segments.size(); ++i) {
    const SegmentSource& s = contents.segments[i];
    if (!s.zero && !s.bytes.empty()) {
      std::memcpy(out.data() + plan.segments[i].offset, s.bytes.data(), s.bytes.size());
    }
  }
  return out;
}

}  // namespace loom::container
