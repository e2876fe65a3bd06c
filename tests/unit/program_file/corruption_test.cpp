// The reader survives damaged and hand-crafted files: each test names one
// corruption and checks the error code and where the message says it is.
#include <gtest/gtest.h>

#include <random>

#include "container_test_support.hpp"

namespace loom {
namespace {

using testing::kInvalid;
using container::kEntryAlignmentAt;
using container::kEntryChecksumAt;
using container::kEntryOffsetAt;
using container::kEntrySizeAt;
using testing::FileBytes;
using testing::open_fails_with;

constexpr StatusCode kDataLoss = StatusCode::kDataLoss;
constexpr StatusCode kIncompatible = StatusCode::kIncompatible;

class ProgramCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    auto bytes = testing::make_small_program().write_buffer();
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    file_.bytes = std::move(bytes).value();
    ASSERT_TRUE(ProgramReader::open_buffer(file_.bytes).ok());
  }

  std::string size_text() const { return std::to_string(file_.bytes.size()); }

  FileBytes file_;
};

TEST_F(ProgramCorruption, EmptyBufferIsRejected) {
  EXPECT_TRUE(open_fails_with({}, kDataLoss, "file is 0 bytes, smaller than the 128-byte head"));
}

TEST_F(ProgramCorruption, EmptyFileIsRejected) {
  testing::TempPath path("empty.loom");
  testing::write_bytes(path.path(), {});
  EXPECT_TRUE(testing::fails_with(ProgramReader::open_file(path.path()), kDataLoss,
                                  "file is 0 bytes"));
}

TEST_F(ProgramCorruption, TruncationAtEveryByteOfTheHeadIsRejected) {
  for (size_t size = 0; size < kProgramHeadSize; ++size) {
    EXPECT_TRUE(open_fails_with(std::span(file_.bytes).first(size), kDataLoss,
                                "file is " + std::to_string(size) + " bytes, smaller than"))
        << "truncated to " << size;
  }
}

TEST_F(ProgramCorruption, TruncatedMappedFileIsRejected) {
  testing::TempPath path("short.loom");
  testing::write_bytes(path.path(), std::span(file_.bytes).first(kProgramHeadSize - 1));
  EXPECT_TRUE(testing::fails_with(ProgramReader::open_file(path.path()), kDataLoss,
                                  "file is 127 bytes, smaller than the 128-byte head"));
}

TEST_F(ProgramCorruption, BadMagicIsRejected) {
  file_.bytes[3] = std::byte{'X'};
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "not a Loom program: bad magic"));
}

TEST_F(ProgramCorruption, NewerMajorIsIncompatible) {
  file_.put_u16(container::kHeadMajorAt, 2);
  EXPECT_TRUE(open_fails_with(file_.bytes, kIncompatible, "written by a newer Loom (major 2)"));
}

TEST_F(ProgramCorruption, MajorZeroIsIncompatible) {
  file_.put_u16(container::kHeadMajorAt, 0);
  file_.reseal();
  EXPECT_TRUE(open_fails_with(file_.bytes, kIncompatible, "unsupported format major version 0"));
}

TEST_F(ProgramCorruption, NewerMinorIsAccepted) {
  file_.put_u16(container::kHeadMinorAt, kProgramMinorVersion + 5);
  file_.reseal();
  auto reader = ProgramReader::open_buffer(file_.bytes);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ((*reader)->head().minor, kProgramMinorVersion + 5);
}

TEST_F(ProgramCorruption, AVersion10FileStillOpens) {
  // Files of format 1.0 have no opsets and minor 0; 1.1 readers open them.
  file_.put_u16(container::kHeadMinorAt, 0);
  file_.reseal();
  auto reader = ProgramReader::open_buffer(file_.bytes);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ((*reader)->head().minor, 0);
  EXPECT_EQ((*reader)->head().required_features, 0u);
}

TEST_F(ProgramCorruption, KernelOpsetsSetTheRequiredFeatureBit) {
  ProgramWriter writer = testing::make_small_program();
  auto plain = writer.write_buffer().value();
  EXPECT_EQ(ProgramReader::open_buffer(plain).value()->head().required_features, 0u);
  for (auto& ins : writer.program().functions[0].instructions) {
    if (ins.op == OpCode::kKernelCall) ins.opset = 12;
  }
  auto file = writer.write_buffer().value();
  auto reader = ProgramReader::open_buffer(file);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ((*reader)->head().required_features, kRequiredFeatureKernelOpsets);
}

TEST_F(ProgramCorruption, UnknownRequiredFeatureBitsAreRejectedByName) {
  ProgramWriter writer = testing::make_small_program();
  writer.set_features((uint64_t{1} << 4) | (uint64_t{1} << 5), 0);
  auto file = writer.write_buffer().value();
  EXPECT_TRUE(open_fails_with(file, kIncompatible,
                              "requires features this reader does not know: bits 4, 5 (0x30)"));
}

TEST_F(ProgramCorruption, UnknownOptionalFeatureBitsAreIgnored) {
  ProgramWriter writer = testing::make_small_program();
  writer.set_features(0, uint64_t{1} << 63 | 1);
  auto file = writer.write_buffer().value();
  auto reader = ProgramReader::open_buffer(file);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ((*reader)->head().optional_features, uint64_t{1} << 63 | 1);
}

TEST_F(ProgramCorruption, HeadChecksumMismatchIsDataLoss) {
  file_.bytes[container::kHeadReservedAt + 7] = std::byte{1};
  EXPECT_TRUE(open_fails_with(file_.bytes, kDataLoss, "head checksum mismatch"));
  file_.reseal();
  EXPECT_TRUE(ProgramReader::open_buffer(file_.bytes).ok()) << "reserved bytes are ignored";
}

TEST_F(ProgramCorruption, WrongHeadSizeIsRejected) {
  file_.put_u32(container::kHeadSizeAt, 256);
  file_.reseal();
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "head_size is 256, expected 128"));
}

TEST_F(ProgramCorruption, FileSizeMismatchIsDataLoss) {
  file_.put_u64(container::kHeadFileSizeAt, file_.bytes.size() + 1);
  file_.reseal();
  EXPECT_TRUE(open_fails_with(file_.bytes, kDataLoss,
                              "head records a file of " + std::to_string(file_.bytes.size() + 1) +
                                  " bytes but it has " + size_text()));
}

TEST_F(ProgramCorruption, ExtendedFileIsDataLoss) {
  file_.bytes.push_back(std::byte{0});
  EXPECT_TRUE(open_fails_with(file_.bytes, kDataLoss, "(truncated or extended)"));
}

TEST_F(ProgramCorruption, TruncatedFileIsDataLoss) {
  file_.bytes.pop_back();
  EXPECT_TRUE(open_fails_with(file_.bytes, kDataLoss,
                              "head records a file of " + std::to_string(file_.bytes.size() + 1) +
                                  " bytes but it has " + size_text()));
  testing::TempPath path("truncated.loom");
  testing::write_bytes(path.path(), file_.bytes);
  EXPECT_TRUE(testing::fails_with(ProgramReader::open_file(path.path()), kDataLoss,
                                  "but it has " + size_text()));
}

TEST_F(ProgramCorruption, FlatbufferOffsetPastTheEndIsRejected) {
  file_.put_u64(container::kHeadFlatbufferOffsetAt, file_.bytes.size() + 8);
  file_.reseal();
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "flatbuffer: offset"));
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid,
                              "runs past the end of the file (" + size_text() + " bytes)"));
}

TEST_F(ProgramCorruption, FlatbufferSizeWrappingIsRejected) {
  file_.put_u64(container::kHeadFlatbufferSizeAt, UINT64_MAX - 64);
  file_.reseal();
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid,
                              "flatbuffer: offset 128 + size 18446744073709551551 overflows "
                              "64 bits"));
}

TEST_F(ProgramCorruption, FlatbufferInsideTheHeadIsRejected) {
  file_.put_u64(container::kHeadFlatbufferOffsetAt, 64);
  file_.reseal();
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "flatbuffer: offset 64 lies inside"));
}

TEST_F(ProgramCorruption, GarbageFlatbufferFailsVerification) {
  ProgramHead h = file_.head();
  std::mt19937 rng(17);
  for (uint64_t i = 0; i < h.flatbuffer_size; ++i) {
    if (i >= 4 && i < 8) continue;  // keep the identifier: reach the verifier
    file_.bytes[h.flatbuffer_offset + i] = static_cast<std::byte>(rng());
  }
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "flatbuffer: verification failed"));
}

TEST_F(ProgramCorruption, WrongFlatbufferIdentifierIsRejected) {
  file_.bytes[file_.head().flatbuffer_offset + 4] = std::byte{'X'};
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "flatbuffer: missing file identifier"));
}

TEST_F(ProgramCorruption, FlatbufferVtableOffsetOutOfBoundsFailsVerification) {
  size_t fb = file_.head().flatbuffer_offset;
  size_t root = fb + container::load_u32(file_.bytes.data() + fb);
  // A table starts with a signed offset back to its vtable; point it far
  // past the buffer.
  container::store_u32(file_.bytes.data() + root, static_cast<uint32_t>(-0x10000000));
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "flatbuffer: verification failed"));
}

TEST_F(ProgramCorruption, SegmentTablePastTheEndIsRejected) {
  file_.put_u64(container::kHeadSegmentTableOffsetAt, (file_.bytes.size() - 64) & ~size_t{7});
  file_.reseal();
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "segment table: offset"));
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "+ size 96 runs past the end of the file"));
}

TEST_F(ProgramCorruption, MisalignedSegmentTableIsRejected) {
  file_.put_u64(container::kHeadSegmentTableOffsetAt, file_.head().segment_table_offset + 4);
  file_.reseal();
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "is not a multiple of 8"));
}

TEST_F(ProgramCorruption, HugeSegmentCountOverflowIsRejected) {
  file_.put_u64(container::kHeadSegmentCountAt, uint64_t{1} << 60);
  file_.reseal();
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid,
                              "segment table: 1152921504606846976 entries of 32 bytes overflow "
                              "64 bits"));
}

TEST_F(ProgramCorruption, LargeSegmentCountRunsPastTheEnd) {
  file_.put_u64(container::kHeadSegmentCountAt, uint64_t{1} << 40);
  file_.reseal();
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "segment table: offset"));
}

TEST_F(ProgramCorruption, SegmentOffsetPastTheEndIsRejected) {
  file_.put_u64(file_.entry_at(1) + kEntryOffsetAt, 1 << 20);
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid,
                              "segment 1: offset 1048576 + size 100 runs past the end of the "
                              "file (" + size_text() + " bytes)"));
}

TEST_F(ProgramCorruption, SegmentOffsetPlusSizeWrappingIsRejected) {
  file_.put_u64(file_.entry_at(2) + kEntrySizeAt, UINT64_MAX - 4000);
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "segment 2: offset"));
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "overflows 64 bits"));
}

TEST_F(ProgramCorruption, MisalignedSegmentIsRejected) {
  uint64_t offset = file_.segment(1).offset;
  file_.put_u64(file_.entry_at(1) + kEntryOffsetAt, offset + 8);
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid,
                              "segment 1: offset " + std::to_string(offset + 8) +
                                  " is not a multiple of its alignment 4096"));
}

TEST_F(ProgramCorruption, AlignmentNotAPowerOfTwoIsRejected) {
  file_.put_u32(file_.entry_at(0) + kEntryAlignmentAt, 3000);
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "segment 0: alignment 3000 is not a power of two"));
  file_.put_u32(file_.entry_at(0) + kEntryAlignmentAt, 0);
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "segment 0: alignment 0 is not a power of two"));
}

TEST_F(ProgramCorruption, OverlappingSegmentsAreRejected) {
  uint64_t offset0 = file_.segment(0).offset;
  file_.put_u64(file_.entry_at(1) + kEntryOffsetAt, offset0);
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "overlaps segment"));
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid,
                              "[" + std::to_string(offset0) + ", " +
                                  std::to_string(offset0 + 100) + ")"));
}

TEST_F(ProgramCorruption, SegmentOverlappingTheTableIsRejected) {
  uint64_t table = file_.head().segment_table_offset;
  file_.put_u32(file_.entry_at(0) + kEntryAlignmentAt, 8);
  file_.put_u64(file_.entry_at(0) + kEntryOffsetAt, table + 8);
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "overlaps the segment table"));
}

TEST_F(ProgramCorruption, SegmentOverlappingTheHeadIsRejected) {
  file_.put_u64(file_.entry_at(2) + kEntryOffsetAt, 0);
  EXPECT_TRUE(open_fails_with(file_.bytes, kInvalid, "segment 2 [0, 100) overlaps the head"));
}

TEST_F(ProgramCorruption, SegmentChecksumMismatchIsDataLoss) {
  file_.bytes[file_.segment(2).offset + 99] ^= std::byte{0x40};
  EXPECT_TRUE(open_fails_with(file_.bytes, kDataLoss, "segment 2: checksum mismatch"));
}

TEST_F(ProgramCorruption, StoredChecksumMismatchIsDataLoss) {
  file_.put_u64(file_.entry_at(0) + kEntryChecksumAt, 42);
  EXPECT_TRUE(open_fails_with(file_.bytes, kDataLoss, "segment 0: checksum mismatch (stored 0x2a"));
}

// Files that break the program's own rules cannot come from ProgramWriter,
// so these are emitted with validation off.
class HandCraftedProgram : public ::testing::Test {
 protected:
  void SetUp() override { program_ = testing::make_small_program().program(); }

  std::vector<std::byte> craft() {
    return testing::craft_unvalidated(
        program_, {testing::pattern(100, 0), testing::pattern(100, 50), testing::pattern(100, 100)});
  }

  ProgramDef program_;
};

TEST_F(HandCraftedProgram, UntouchedProgramIsAccepted) {
  auto file = craft();
  EXPECT_TRUE(ProgramReader::open_buffer(file).ok());
}

TEST_F(HandCraftedProgram, DuplicateFunctionNameIsRejected) {
  program_.functions.push_back(program_.functions[0]);
  EXPECT_TRUE(open_fails_with(craft(), kInvalid,
                              "functions[1].name: 'main' is already the name of functions[0]"));
}

TEST_F(HandCraftedProgram, ArenaTheSlotsDoNotJustifyIsRejectedBeforeAnyAllocation) {
  program_.functions[0].memory_plan.arena_size = uint64_t{8} << 30;
  EXPECT_TRUE(open_fails_with(craft(), kInvalid,
                              "functions[0].memory_plan.arena_size: 8589934592 bytes, but its "
                              "slots end at 84"));
}

TEST_F(HandCraftedProgram, ArtifactContentSegmentOutOfRangeIsRejected) {
  program_.artifacts[2].content_segment = 7;
  EXPECT_TRUE(open_fails_with(craft(), kInvalid,
                              "artifacts[2].content_segment: segment 7 out of range (file has 3 "
                              "segments)"));
}

TEST_F(HandCraftedProgram, DelegateVariantOutOfRangeIsRejected) {
  program_.delegates[0].variants = {9};
  EXPECT_TRUE(open_fails_with(craft(), kInvalid,
                              "delegates[0].variants[0]: artifact 9 out of range (program has 3 "
                              "artifacts)"));
}

TEST_F(HandCraftedProgram, InstructionValueIndexOutOfRangeIsRejected) {
  program_.functions[0].instructions[0].inputs = {0, 42};
  EXPECT_TRUE(open_fails_with(craft(), kInvalid,
                              "functions[0].instructions[0].inputs[1]: value 42 out of range "
                              "(function 'main' has 3 values)"));
}

TEST_F(HandCraftedProgram, ParameterOutsideItsSegmentIsRejected) {
  program_.parameters[0].offset = 90;
  EXPECT_TRUE(open_fails_with(craft(), kInvalid,
                              "parameters[0] ('w'): offset 90 + size 20 runs past segment 0 (100 "
                              "bytes)"));
}

TEST_F(HandCraftedProgram, MemorySlotOutsideTheArenaIsRejected) {
  program_.functions[0].memory_plan.slots[0] = {1, 200, 64};
  EXPECT_TRUE(open_fails_with(craft(), kInvalid,
                              "functions[0].memory_plan.slots[0]: offset 200 + size 64 runs past "
                              "the arena (256 bytes)"));
}

TEST_F(HandCraftedProgram, UnknownOpcodeIsRejected) {
  program_.functions[0].instructions[0].op = static_cast<OpCode>(200);
  EXPECT_TRUE(open_fails_with(craft(), kInvalid, "functions[0].instructions[0].op: unknown opcode 200"));
}

TEST_F(HandCraftedProgram, ParameterChecksumMismatchIsDataLoss) {
  program_.parameters[0].checksum = 0xdead;
  EXPECT_TRUE(open_fails_with(craft(), kDataLoss,
                              "parameters[0] ('w'): checksum mismatch (stored 0xdead"));
}

// Random damage must end in OK or an error, never in a crash or a sanitizer
// report. Half of the runs reseal the head so the damage reaches the checks
// behind the head checksum.
TEST(ProgramFuzz, RandomByteFlipsNeverCrash) {
  auto base = testing::make_full_program().write_buffer().value();
  FileBytes probe{base};
  const size_t front = static_cast<size_t>(probe.head().segment_table_offset +
                                           probe.head().segment_count * kSegmentTableEntrySize);
  std::mt19937_64 rng(20240611);
  int accepted = 0;
  int rejected = 0;
  for (int iteration = 0; iteration < 2000; ++iteration) {
    FileBytes file{base};
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly the head, flatbuffer and table, where the structure lives.
      size_t limit = rng() % 8 == 0 ? file.bytes.size() : front;
      size_t at = static_cast<size_t>(rng() % limit);
      file.bytes[at] ^= static_cast<std::byte>(1 + rng() % 255);
    }
    if (iteration % 2 == 1) file.reseal();
    auto reader = ProgramReader::open_buffer(file.bytes);
    if (!reader.ok()) {
      EXPECT_FALSE(reader.status().message().empty());
      ++rejected;
      continue;
    }
    ++accepted;
    const ProgramReader& r = **reader;
    for (uint32_t i = 0; i < r.program().artifacts.size(); ++i) {
      auto content = r.artifact_content(i);
      if (content.ok()) {
        EXPECT_TRUE(content->empty() || content->data() >= file.bytes.data());
      }
    }
    for (uint32_t i = 0; i < r.program().parameters.size(); ++i) (void)r.parameter_bytes(i);
  }
  EXPECT_GT(rejected, 1000);
  RecordProperty("accepted", accepted);
  RecordProperty("rejected", rejected);
}

}  // namespace
}  // namespace loom
