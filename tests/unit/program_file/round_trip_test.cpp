#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "common/hash.hpp"
#include "container_test_support.hpp"

namespace loom {
namespace {

using testing::FileBytes;
using testing::TempPath;

void expect_same_program(const ProgramDef& actual, const ProgramDef& expected) {
  EXPECT_EQ(actual.producer, expected.producer);
  EXPECT_TRUE(actual.artifacts == expected.artifacts);
  EXPECT_TRUE(actual.delegates == expected.delegates);
  ASSERT_EQ(actual.functions.size(), expected.functions.size());
  for (size_t f = 0; f < actual.functions.size(); ++f) {
    const FunctionDef& a = actual.functions[f];
    const FunctionDef& e = expected.functions[f];
    EXPECT_EQ(a.name, e.name);
    EXPECT_EQ(a.inputs, e.inputs);
    EXPECT_EQ(a.outputs, e.outputs);
    EXPECT_EQ(a.reflection, e.reflection);
    EXPECT_TRUE(a.values == e.values) << "function " << f;
    EXPECT_TRUE(a.instructions == e.instructions) << "function " << f;
    EXPECT_TRUE(a.memory_plan == e.memory_plan) << "function " << f;
  }
  EXPECT_TRUE(actual.parameters == expected.parameters);
  EXPECT_TRUE(actual.metadata == expected.metadata);
  EXPECT_TRUE(actual == expected);
}

std::string text_of(std::span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

bool points_inside(std::span<const std::byte> part, std::span<const std::byte> whole) {
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

TEST(ProgramRoundTrip, EveryFieldSurvivesTheBufferPath) {
  ProgramWriter writer = testing::make_full_program();
  auto file = writer.write_buffer();
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto reader = ProgramReader::open_buffer(*file);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  expect_same_program((*reader)->program(), writer.program());
}

TEST(ProgramRoundTrip, EveryFieldSurvivesTheFilePath) {
  ProgramWriter writer = testing::make_full_program();
  TempPath path("full.loom");
  ASSERT_TRUE(writer.write_file(path.path()).ok());
  auto reader = ProgramReader::open_file(path.path());
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  expect_same_program((*reader)->program(), writer.program());
}

TEST(ProgramRoundTrip, FileAndBufferHoldTheSameBytes) {
  ProgramWriter writer = testing::make_full_program();
  TempPath path("same.loom");
  ASSERT_TRUE(writer.write_file(path.path()).ok());
  auto buffer = writer.write_buffer();
  ASSERT_TRUE(buffer.ok());
  EXPECT_TRUE(testing::read_bytes(path.path()) == *buffer);
}

TEST(ProgramRoundTrip, HeadIsFilledAsDocumented) {
  ProgramWriter writer = testing::make_full_program();
  writer.set_features(0, 0x30);
  auto file = writer.write_buffer().value();
  EXPECT_EQ(std::memcmp(file.data(), "LOOMPRG\0", 8), 0);
  auto reader = ProgramReader::open_buffer(file).value();
  const ProgramHead& h = reader->head();
  EXPECT_EQ(h.major, kProgramMajorVersion);
  EXPECT_EQ(h.minor, kProgramMinorVersion);
  EXPECT_EQ(h.head_size, kProgramHeadSize);
  EXPECT_EQ(h.required_features, kRequiredFeatureKernelOpsets);  // its Gemm records opset 11
  EXPECT_EQ(h.optional_features, 0x30u);
  EXPECT_EQ(h.flatbuffer_offset, kProgramHeadSize);
  EXPECT_GT(h.flatbuffer_size, 0u);
  EXPECT_EQ(h.segment_table_offset % 8, 0u);
  EXPECT_GE(h.segment_table_offset, h.flatbuffer_offset + h.flatbuffer_size);
  EXPECT_EQ(h.segment_count, 4u);
  EXPECT_EQ(h.file_size, file.size());
  EXPECT_EQ(std::memcmp(file.data() + h.flatbuffer_offset + 4, "LOOM", 4), 0);
  FileBytes bytes{file};
  EXPECT_TRUE(h == bytes.head());
  for (size_t at = container::kHeadReservedAt; at < kProgramHeadSize; ++at) {
    EXPECT_EQ(file[at], std::byte{0}) << "reserved byte " << at;
  }
}

TEST(ProgramRoundTrip, SegmentsAreAlignedAndChecksummed) {
  ProgramWriter writer = testing::make_full_program();
  auto file = writer.write_buffer().value();
  auto reader = ProgramReader::open_buffer(file).value();
  const auto& segments = reader->segments();
  ASSERT_EQ(segments.size(), 4u);
  EXPECT_EQ(segments[0].alignment, kDefaultSegmentAlignment);
  EXPECT_EQ(segments[1].alignment, 64u);
  EXPECT_EQ(segments[2].alignment, 256u);
  EXPECT_EQ(segments[3].size, 10000u);
  for (size_t i = 0; i < segments.size(); ++i) {
    EXPECT_EQ(segments[i].offset % segments[i].alignment, 0u) << "segment " << i;
    auto bytes = reader->segment_bytes(static_cast<uint32_t>(i)).value();
    EXPECT_EQ(segments[i].checksum, xxh3_64(bytes)) << "segment " << i;
  }
  auto zeros = reader->segment_bytes(3).value();
  EXPECT_TRUE(std::all_of(zeros.begin(), zeros.end(), [](std::byte b) { return b == std::byte{0}; }));
}

TEST(ProgramRoundTrip, ContentAndParameterAccessorsReturnTheWrittenBytes) {
  ProgramWriter writer = testing::make_full_program();
  auto file = writer.write_buffer().value();
  auto reader = ProgramReader::open_buffer(file).value();
  EXPECT_EQ(text_of(reader->artifact_content(0).value()), "cpu-simd blob v3");
  EXPECT_TRUE(std::ranges::equal(reader->artifact_content(1).value(), testing::pattern(300, 9)));
  EXPECT_TRUE(reader->artifact_content(2).value().empty());
  EXPECT_TRUE(testing::fails_with(reader->artifact_content(3), StatusCode::kOutOfRange,
                                  "artifact 3 out of range (program has 3 artifacts)"));

  auto bias = reader->parameter_bytes(1).value();
  ASSERT_EQ(bias.size(), 12u);
  float values[3];
  std::memcpy(values, bias.data(), sizeof values);
  EXPECT_EQ(values[0], 0.5f);
  EXPECT_EQ(values[1], -0.25f);
  EXPECT_EQ(values[2], 8.0f);
  EXPECT_EQ(reader->parameter_bytes(2).value().size(), 80u);
  EXPECT_TRUE(testing::fails_with(reader->parameter_bytes(3), StatusCode::kFailedPrecondition,
                                  "external archive 'weights.irpa'"));
  EXPECT_TRUE(testing::fails_with(reader->parameter_bytes(4), StatusCode::kOutOfRange,
                                  "parameter 4 out of range"));
  EXPECT_TRUE(testing::fails_with(reader->segment_bytes(4), StatusCode::kOutOfRange,
                                  "segment 4 out of range (file has 4 segments)"));
}

TEST(ProgramRoundTrip, MappedFileIsReadWithoutCopies) {
  ProgramWriter writer = testing::make_full_program();
  TempPath path("mapped.loom");
  ASSERT_TRUE(writer.write_file(path.path()).ok());
  auto reader = ProgramReader::open_file(path.path()).value();
  auto whole = reader->file_bytes();
  EXPECT_EQ(whole.size(), std::filesystem::file_size(path.path()));
  for (uint32_t i = 0; i < reader->segments().size(); ++i) {
    auto segment = reader->segment_bytes(i).value();
    EXPECT_TRUE(points_inside(segment, whole)) << "segment " << i;
    EXPECT_EQ(segment.data(), whole.data() + reader->segments()[i].offset);
  }
  EXPECT_EQ(reinterpret_cast<uintptr_t>(reader->segment_bytes(0).value().data()) % 4096, 0u)
      << "page-aligned segments of a mapped file start on a page";
}

TEST(ProgramRoundTrip, BufferReaderViewsTheCallersBytes) {
  auto file = testing::make_full_program().write_buffer().value();
  auto reader = ProgramReader::open_buffer(file).value();
  EXPECT_EQ(reader->file_bytes().data(), file.data());
  EXPECT_TRUE(points_inside(reader->artifact_content(1).value(), file));
}

TEST(ProgramRoundTrip, MisalignedCallerBufferIsAccepted) {
  auto file = testing::make_full_program().write_buffer().value();
  std::vector<std::byte> shifted(file.size() + 1);
  std::memcpy(shifted.data() + 1, file.data(), file.size());
  auto reader = ProgramReader::open_buffer(std::span(shifted).subspan(1));
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ((*reader)->program().functions[0].name, "main");
}

TEST(ProgramRoundTrip, EmptyProgramRoundTrips) {
  ProgramWriter writer;
  auto file = writer.write_buffer();
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto reader = ProgramReader::open_buffer(*file);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_TRUE((*reader)->program() == ProgramDef());
  EXPECT_TRUE((*reader)->segments().empty());
}

TEST(ProgramRoundTrip, ZeroSegmentIsWrittenAsAHole) {
  if (!testing::supports_sparse_files()) GTEST_SKIP() << "the temp filesystem has no holes";
  ProgramWriter writer;
  uint32_t big = writer.add_zero_segment(uint64_t{64} << 20);
  ArtifactDef a;
  a.loader_key = "zeros";
  a.content_segment = static_cast<int32_t>(big);
  writer.program().artifacts.push_back(a);
  TempPath path("hole.loom");
  ASSERT_TRUE(writer.write_file(path.path()).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.path().c_str(), &st), 0);
  EXPECT_GE(static_cast<uint64_t>(st.st_size), uint64_t{64} << 20);
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{8} << 20);
  auto reader = ProgramReader::open_file(path.path());
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ((*reader)->artifact_content(0).value().size(), uint64_t{64} << 20);
}

TEST(ProgramRoundTrip, MissingFileIsNotFound) {
  EXPECT_TRUE(testing::fails_with(ProgramReader::open_file("/nonexistent/dir/x.loom"),
                                  StatusCode::kNotFound, "/nonexistent/dir/x.loom"));
}

TEST(ProgramRoundTrip, DirectoryIsNotAProgram) {
  EXPECT_TRUE(testing::fails_with(ProgramReader::open_file(::testing::TempDir()),
                                  StatusCode::kInvalidArgument, "not a regular file"));
}

TEST(ProgramRoundTrip, WriterIsMovable) {
  ProgramWriter writer = testing::make_small_program();
  ProgramWriter moved = std::move(writer);
  auto file = moved.write_buffer();
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto reader = ProgramReader::open_buffer(*file);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ((*reader)->program().producer, "small");
}

}  // namespace
}  // namespace loom
