#include <utility>

#include "program_file/file_assembly.hpp"
#include "loom/program.hpp"

namespace loom {

struct ProgramWriter::Segment {
  std::vector<std::byte> bytes;  // empty for zero segments
  uint64_t zero_size = 0;
  bool zero = false;
  uint32_t alignment = 0;
};

ProgramWriter::ProgramWriter() = default;
ProgramWriter::~ProgramWriter() = default;
ProgramWriter::ProgramWriter(ProgramWriter&&) noexcept = default;
ProgramWriter& ProgramWriter::operator=(ProgramWriter&&) noexcept = default;

uint32_t ProgramWriter::add_segment(std::span<const std::byte> bytes, uint32_t alignment) {
  Segment s;
  s.bytes.assign(bytes.begin(), bytes.end());
  s.alignment = alignment;
  segments_.push_back(std::move(s));
  return static_cast<uint32_t>(segments_.size() - 1);
}

uint32_t ProgramWriter::add_zero_segment(uint64_t size, uint32_t alignment) {
  Segment s;
  s.zero_size = size;
  s.zero = true;
  s.alignment = alignment;
  segments_.push_back(std::move(s));
  return static_cast<uint32_t>(segments_.size() - 1);
}

void ProgramWriter::set_features(uint64_t required, uint64_t optional) {
  required_features_ = required;
  optional_features_ = optional;
}

namespace {

// The writer's segments as assembly sources; they borrow from `segments`.
template <typename Segments>
std::vector<container::SegmentSource> sources_of(const Segments& segments) {
  std::vector<container::SegmentSource> out;
  out.reserve(segments.size());
  for (const auto& s : segments) {
    container::SegmentSource src;
    src.bytes = s.bytes;
    src.zero_size = s.zero_size;
    src.zero = s.zero;
    src.alignment = s.alignment;
    out.push_back(src);
  }
  return out;
}

// The required features the program's content needs, on top of those set.
uint64_t content_features(const ProgramDef& program) {
  uint64_t features = 0;
  for (const FunctionDef& f : program.functions) {
    if (f.graph_artifact >= 0) features |= kRequiredFeatureOpenShapes;
    if (f.staged) features |= kRequiredFeatureStaged;
    if (f.graph_artifact >= 0 && !f.instructions.empty()) features |= kRequiredFeatureOpenExecutables;
    for (const InstructionDef& ins : f.instructions) {
      if (ins.opset != 0) features |= kRequiredFeatureKernelOpsets;
      if (ins.op == OpCode::kCall || ins.op == OpCode::kControl) features |= kRequiredFeatureStaged;
    }
  }
  return features;
}

}  // namespace

Status ProgramWriter::write_file(const std::filesystem::path& path) const {
  auto sources = sources_of(segments_);
  container::FileContents contents{&program_, sources,
                                   required_features_ | content_features(program_),
                                   optional_features_};
  return container::write_file(contents, path);
}

Result<std::vector<std::byte>> ProgramWriter::write_buffer() const {
  auto sources = sources_of(segments_);
  container::FileContents contents{&program_, sources,
                                   required_features_ | content_features(program_),
                                   optional_features_};
  return container::write_buffer(contents);
}

}  // namespace loom
