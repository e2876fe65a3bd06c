#include <utility>

#include "common/mapped_file.hpp"
#include "program_file/checksum.hpp"
#include "program_file/file_verifier.hpp"
#include "loom/program.hpp"

namespace loom {

// The file behind a reader opened with open_file (the public header only
// forward-declares it, keeping <sys/mman.h> details out of it).
struct ProgramReader::Mapping {
  MappedFile file;
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
    LOOM_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
    int fd = file.descriptor();
    std::span<const std::byte> bytes = file.bytes();
    auto mapping = std::make_unique<ProgramReader::Mapping>(ProgramReader::Mapping{std::move(file)});
    // The descriptor stays open while verifying, to find holes; afterwards
    // the mapping alone keeps the file's bytes.
    auto result = build(bytes, std::move(mapping),
                        [fd](std::span<const std::byte> range, uint64_t offset) {
                          return container::checksum_skipping_holes(fd, range, offset);
                        });
    if (result.ok()) (*result)->mapping_->file.close_descriptor();
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
