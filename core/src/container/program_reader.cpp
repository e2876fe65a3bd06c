#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "container/checksum.hpp"
#include "container/file_verifier.hpp"
#include "loom/program.hpp"

namespace loom {

// A read-only private mapping of a whole file, unmapped on destruction.
struct ProgramReader::Mapping {
  void* address = nullptr;
  size_t size = 0;

  Mapping(void* a, size_t s) : address(a), size(s) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (address != nullptr) ::munmap(address, size);
  }
};

// Builds readers; the one friend of ProgramReader's private parts.
class ProgramReaderBuilder {
 public:
  static Result<std::unique_ptr<ProgramReader>> build(
      std::span<const std::byte> bytes, std::unique_ptr<ProgramReader::Mapping> mapping,
      const container::SegmentChecksum& segment_checksum = {}) {
    LOOM_ASSIGN_OR_RETURN(container::VerifiedFile file,
                          container::verify_file(bytes, segment_checksum));
    std::unique_ptr<ProgramReader> reader(new (std::nothrow) ProgramReader());
    if (!reader) return resource_exhausted("cannot allocate a ProgramReader");
    reader->mapping_ = std::move(mapping);
    reader->bytes_ = bytes;
    reader->head_ = file.head;
    reader->program_ = std::move(file.program);
    reader->segments_ = std::move(file.segments);
    return reader;
  }

  static Result<std::unique_ptr<ProgramReader>> map(const std::filesystem::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      std::string message = "cannot open " + path.string() + ": " + std::strerror(err);
      return err == ENOENT ? not_found(message) : unavailable(message);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return invalid_argument(path.string() + " is not a regular file");
    }
    size_t size = static_cast<size_t>(st.st_size);
    if (size == 0) {
      ::close(fd);
      return build({}, nullptr);  // mmap refuses empty files; verify reports it
    }
    void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return resource_exhausted("cannot map " + path.string() + " (" + std::to_string(size) +
                                " bytes): " + std::strerror(err));
    }
    auto mapping = std::make_unique<ProgramReader::Mapping>(address, size);
    std::span<const std::byte> bytes(static_cast<const std::byte*>(address), size);
    // The descriptor stays open while verifying, to find holes; afterwards
    // the mapping alone keeps the file's bytes.
    auto result = build(bytes, std::move(mapping),
                        [fd](std::span<const std::byte> range, uint64_t offset) {
                          return container::checksum_skipping_holes(fd, range, offset);
                        });
    ::close(fd);
    return result;
  }
};

Result<std::unique_ptr<ProgramReader>> ProgramReader::open_file(
    const std::filesystem::path& path) {
  auto reader = ProgramReaderBuilder::map(path);
  if (!reader.ok()) return reader.status().with_context(path.string());
  return reader;
}

Result<std::unique_ptr<ProgramReader>> ProgramReader::open_buffer(
    std::span<const std::byte> bytes) {
  return ProgramReaderBuilder::build(bytes, nullptr);
}

ProgramReader::~ProgramReader() = default;

Result<std::span<const std::byte>> ProgramReader::segment_bytes(uint32_t index) const {
  if (index >= segments_.size()) {
    return out_of_range("segment " + std::to_string(index) + " out of range (file has " +
                        std::to_string(segments_.size()) + " segments)");
  }
  const SegmentInfo& s = segments_[index];
  return bytes_.subspan(static_cast<size_t>(s.offset), static_cast<size_t>(s.size));
}

Result<std::span<const std::byte>> ProgramReader::artifact_content(uint32_t index) const {
  if (index >= program_.artifacts.size()) {
    return out_of_range("artifact " + std::to_string(index) + " out of range (program has " +
                        std::to_string(program_.artifacts.size()) + " artifacts)");
  }
  int32_t segment = program_.artifacts[index].content_segment;
  if (segment < 0) return std::span<const std::byte>();
  return segment_bytes(static_cast<uint32_t>(segment));
}

Result<std::span<const std::byte>> ProgramReader::parameter_bytes(uint32_t index) const {
  if (index >= program_.parameters.size()) {
    return out_of_range("parameter " + std::to_string(index) + " out of range (program has " +
                        std::to_string(program_.parameters.size()) + " parameters)");
  }
  const ParameterDef& p = program_.parameters[index];
  if (p.segment < 0) {
    return failed_precondition("parameter '" + p.name + "' lives in external archive '" +
                               p.archive + "', not in this file");
  }
  LOOM_ASSIGN_OR_RETURN(auto segment, segment_bytes(static_cast<uint32_t>(p.segment)));
  return segment.subspan(static_cast<size_t>(p.offset), static_cast<size_t>(p.size));
}

}  // namespace loom
