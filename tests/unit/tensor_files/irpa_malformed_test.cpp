// Malformed archives: every case must be refused with a message naming the
// header, the entry and the field, and never read outside the buffer (these
// tests run under ASan+UBSan in CI).
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "loom/irpa.hpp"
#include "irpa_test_util.hpp"

namespace loom::io::irpa {
namespace {

using namespace loom::io::irpa::testing;
namespace f = loom::io::irpa::format;

TEST(IrpaMalformed, TheBaseArchiveOpens) {
  auto bytes = small_archive();
  auto reader = ArchiveReader::open_buffer(bytes);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ((*reader)->entries().size(), 2u);
}

TEST(IrpaMalformed, TruncationAtEveryByteBeforeTheLastStoredByteFails) {
  auto bytes = small_archive();
  const size_t last_needed = kStorage + 8;  // the data of "a" ends here
  for (size_t n = 0; n < last_needed; ++n) {
    std::vector<std::byte> cut(bytes.begin(), bytes.begin() + n);
    auto reader = ArchiveReader::open_buffer(cut);
    ASSERT_FALSE(reader.ok()) << "truncated to " << n << " bytes";
    EXPECT_FALSE(reader.status().message().empty());
  }
  std::vector<std::byte> empty;
  expect_open_error(empty, {"empty"});
  expect_open_error(std::span(bytes).first(20), {"header 0 at offset 0", "truncated", "20 bytes"});
  expect_open_error(std::span(bytes).first(60), {"truncated", "header_size is 88"});
  expect_open_error(std::span(bytes).first(200), {"entry segment [96, 261)", "end of the file"});
  expect_open_error(std::span(bytes).first(300), {"storage segment [320, 328)", "size 300"});
  // The page padding after the data is not needed.
  std::vector<std::byte> tight(bytes.begin(), bytes.begin() + last_needed);
  EXPECT_TRUE(ArchiveReader::open_buffer(tight).ok());
}

TEST(IrpaMalformed, TruncationInsideALinkedHeaderFails) {
  auto bytes = small_archive();
  auto second = small_archive();
  put<uint64_t>(bytes, f::kNextHeaderOffsetAt, bytes.size());
  bytes.insert(bytes.end(), second.begin(), second.end());
  ASSERT_TRUE(ArchiveReader::open_buffer(bytes).ok());
  for (size_t n = 4096; n < 4096 + kStorage + 8; ++n) {
    std::vector<std::byte> cut(bytes.begin(), bytes.begin() + n);
    auto reader = ArchiveReader::open_buffer(cut);
    ASSERT_FALSE(reader.ok()) << "truncated to " << n << " bytes";
  }
  expect_open_error(std::span(bytes).first(4096 + 10), {"header 1 at offset 4096", "truncated"});
}

TEST(IrpaMalformed, BadMagic) {
  auto bytes = small_archive();
  bytes[0] = std::byte{'X'};
  expect_open_error(bytes, {"bad magic (expected \"IRPA\")", "not a parameter archive"});
}

TEST(IrpaMalformed, UnknownMajorVersionIsIncompatible) {
  auto bytes = small_archive();
  put<uint16_t>(bytes, f::kVersionMajorAt, 1);
  put<uint16_t>(bytes, f::kVersionMinorAt, 2);
  expect_open_error(bytes, {"unsupported version 1.2", "major version 0"});
  auto reader = ArchiveReader::open_buffer(bytes);
  EXPECT_EQ(reader.status().code(), StatusCode::kIncompatible);
}

TEST(IrpaMalformed, NewerMinorVersionIsRead) {
  auto bytes = small_archive();
  put<uint16_t>(bytes, f::kVersionMinorAt, 7);
  put<uint64_t>(bytes, f::kHeaderSizeAt, 96);  // a newer header may be longer
  auto reader = ArchiveReader::open_buffer(bytes);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ((*reader)->headers()[0].version_minor, 7);
  EXPECT_NE((*reader)->find("a"), nullptr);
}

TEST(IrpaMalformed, HeaderSizeTooSmallOrPastTheFile) {
  auto bytes = small_archive();
  put<uint64_t>(bytes, f::kHeaderSizeAt, 87);
  expect_open_error(bytes, {"header_size 87", "smaller than a version 0 header (88)"});
  put<uint64_t>(bytes, f::kHeaderSizeAt, UINT64_MAX);
  expect_open_error(bytes, {"truncated", "header_size is 18446744073709551615"});
}

TEST(IrpaMalformed, SegmentsWrappingPast2To64) {
  for (uint64_t at : {f::kEntrySegmentAt, f::kMetadataSegmentAt, f::kStorageSegmentAt}) {
    auto bytes = small_archive();
    put<uint64_t>(bytes, at, UINT64_MAX - 1);
    expect_open_error(bytes, {"segment", "wraps past 2^64"});
  }
  auto bytes = small_archive();
  put<uint64_t>(bytes, f::kStorageSegmentAt + 8, UINT64_MAX);
  expect_open_error(bytes, {"storage segment (offset 320, length 18446744073709551615) wraps"});
}

TEST(IrpaMalformed, StorageSegmentPastTheEndOfTheFile) {
  auto bytes = small_archive();
  put<uint64_t>(bytes, f::kStorageSegmentAt + 8, 5000);
  expect_open_error(bytes, {"storage segment [320, 5320)", "end of the file (size 4096)"});
}

TEST(IrpaMalformed, StorageRangePastTheSegment) {
  auto bytes = small_archive();
  put<uint64_t>(bytes, kEntry0 + f::kDataStorageAt + 8, 9);
  expect_open_error(bytes, {"irpa: header 0 at offset 0: entry 0 ('a'): storage range [0, 9) "
                            "runs past the storage segment (size 8)"});
}

TEST(IrpaMalformed, StorageRangeWrapping) {
  auto bytes = small_archive();
  put<uint64_t>(bytes, kEntry0 + f::kDataStorageAt, UINT64_MAX - 2);
  expect_open_error(bytes, {"entry 0 ('a')", "storage range", "wraps past 2^64"});
}

TEST(IrpaMalformed, NameAndMetadataRangesChecked) {
  auto bytes = small_archive();
  put<uint64_t>(bytes, kEntry1 + f::kEntryNameAt, 2);
  put<uint64_t>(bytes, kEntry1 + f::kEntryNameAt + 8, 2);
  expect_open_error(bytes, {"entry 1: name [2, 4) runs past the metadata segment (size 3)"});
  bytes = small_archive();
  put<uint64_t>(bytes, kEntry1 + f::kEntryNameAt, UINT64_MAX);
  expect_open_error(bytes, {"entry 1: name", "wraps past 2^64"});
  bytes = small_archive();
  put<uint64_t>(bytes, kEntry0 + f::kEntryMetadataAt + 8, 100);
  expect_open_error(bytes, {"entry 0 ('a'): metadata [1, 101) runs past the metadata segment"});
}

TEST(IrpaMalformed, EntrySizeSmallerThanItsHeader) {
  auto bytes = small_archive();
  put<uint64_t>(bytes, kEntry0 + f::kEntrySizeAt, 59);
  expect_open_error(bytes, {"entry 0: entry_size 59 is smaller than the entry header (60)"});
  bytes = small_archive();
  put<uint64_t>(bytes, kEntry0 + f::kEntrySizeAt, 70);
  expect_open_error(bytes, {"entry 0 ('a'): entry_size 70 is smaller than a data entry (76"});
  bytes = small_archive();
  put<uint64_t>(bytes, kEntry1 + f::kEntrySizeAt, 80);
  expect_open_error(bytes, {"entry 1 ('b'): entry_size 80 is smaller than a splat entry (85"});
}

TEST(IrpaMalformed, EntrySizeRunningPastTheTable) {
  auto bytes = small_archive();
  put<uint64_t>(bytes, kEntry1 + f::kEntrySizeAt, 86);
  expect_open_error(bytes, {"entry 1: entry_size 86 runs past the entry table (85 bytes left)"});
  bytes = small_archive();
  put<uint64_t>(bytes, kEntry0 + f::kEntrySizeAt, UINT64_MAX);
  expect_open_error(bytes, {"entry 0: entry_size 18446744073709551615 runs past the entry table"});
}

TEST(IrpaMalformed, MoreEntriesThanTheTableHolds) {
  auto bytes = small_archive();
  put<uint64_t>(bytes, f::kEntryCountAt, 3);
  expect_open_error(bytes, {"entry 2: the entry table (length 165, entry_count 3) ends after 2"});
  put<uint64_t>(bytes, f::kEntryCountAt, UINT64_MAX);
  expect_open_error(bytes, {"entry 2: the entry table"});
}

TEST(IrpaMalformed, SplatPatternLengths) {
  for (uint8_t bad : {0, 3, 17, 255}) {
    auto bytes = small_archive();
    put<uint8_t>(bytes, kEntry1 + f::kSplatPatternLengthAt, bad);
    expect_open_error(bytes, {"entry 1 ('b'): pattern_length " + std::to_string(bad) +
                              " is not 1, 2, 4, 8 or 16"});
  }
  auto bytes = small_archive();
  put<uint64_t>(bytes, kEntry1 + f::kSplatLengthAt, 18);
  put<uint8_t>(bytes, kEntry1 + f::kSplatPatternLengthAt, 4);
  expect_open_error(bytes, {"entry 1 ('b'): pattern_length 4 does not divide length 18"});
}

TEST(IrpaMalformed, MinimumAlignmentMustBeAPowerOfTwo) {
  auto bytes = small_archive();
  put<uint64_t>(bytes, kEntry0 + f::kEntryAlignmentAt, 48);
  expect_open_error(bytes, {"entry 0 ('a'): minimum_alignment 48 is not a power of two"});
}

TEST(IrpaMalformed, DuplicateNamesInOneHeader) {
  auto bytes = small_archive();
  put<uint64_t>(bytes, kEntry1 + f::kEntryNameAt, 0);  // "b" -> "a"
  expect_open_error(bytes, {"entry 1 ('a'): duplicate name: entry 0 of the same header"});
}

TEST(IrpaMalformed, SkipAndUnknownEntryTypesAreSkipped) {
  auto bytes = small_archive();
  put<uint32_t>(bytes, kEntry0 + f::kEntryTypeAt, 0);
  put<uint32_t>(bytes, kEntry1 + f::kEntryTypeAt, 99);
  put<uint64_t>(bytes, kEntry1 + f::kEntrySizeAt, 70);  // a future type, shorter than a splat
  auto reader = ArchiveReader::open_buffer(bytes);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_TRUE((*reader)->entries().empty());
}

// Links: header 1 follows header 0 at 4096; header 2 at 8192.
std::vector<std::byte> chain_of(int count) {
  std::vector<std::byte> bytes;
  for (int i = 0; i < count; ++i) {
    auto one = small_archive();
    if (i + 1 < count) put<uint64_t>(one, f::kNextHeaderOffsetAt, one.size());
    bytes.insert(bytes.end(), one.begin(), one.end());
  }
  return bytes;
}

TEST(IrpaMalformed, TwoCycleIsRefused) {
  auto bytes = chain_of(2);
  ASSERT_TRUE(ArchiveReader::open_buffer(bytes).ok());
  put<uint64_t>(bytes, 4096 + f::kNextHeaderOffsetAt, 0 - uint64_t{4096});  // back to 0
  expect_open_error(bytes, {"header 1 at offset 4096", "links back to header 0 at offset 0",
                            "cycle"});
}

TEST(IrpaMalformed, LongerCycleIsRefused) {
  auto bytes = chain_of(3);
  ASSERT_TRUE(ArchiveReader::open_buffer(bytes).ok());
  put<uint64_t>(bytes, 8192 + f::kNextHeaderOffsetAt, 0 - uint64_t{4096});  // 2 -> 1
  expect_open_error(bytes, {"header 2 at offset 8192", "links back to header 1", "cycle"});
}

TEST(IrpaMalformed, SelfLinkCannotBeWrittenSoZeroEndsTheChain) {
  // A link is relative to its own header, so pointing at itself would take
  // next_header_offset 0, which means "no next header": the smallest cycle
  // a file can hold is two headers long (above). Check the other near-self
  // links instead: into the header's own bytes, and wrapping to offset 0 - 16.
  auto bytes = chain_of(2);
  put<uint64_t>(bytes, 4096 + f::kNextHeaderOffsetAt, 16);
  expect_open_error(bytes, {"header 2 at offset 4112", "bad magic"});
  put<uint64_t>(bytes, 4096 + f::kNextHeaderOffsetAt, 0 - uint64_t{16});
  expect_open_error(bytes, {"header 1 at offset 4096", "wraps past 2^64",
                            "must follow the one linking them"});
}

TEST(IrpaMalformed, LinkPastTheEndOrMisaligned) {
  auto bytes = small_archive();
  put<uint64_t>(bytes, f::kNextHeaderOffsetAt, 4096);
  expect_open_error(bytes, {"puts the next header at offset 4096, past the end of the file"});
  put<uint64_t>(bytes, f::kNextHeaderOffsetAt, 1000);
  expect_open_error(bytes, {"offset 1000, not a multiple of 16"});
  put<uint64_t>(bytes, f::kNextHeaderOffsetAt, 0 - uint64_t{16});
  expect_open_error(bytes, {"offset 18446744073709551600, past the end of the file"});
}

TEST(IrpaMalformed, ErrorsInALaterHeaderNameIt) {
  auto bytes = chain_of(2);
  put<uint64_t>(bytes, 4096 + kEntry0 + f::kDataStorageAt + 8, 9);
  expect_open_error(bytes, {"irpa: header 1 at offset 4096: entry 0 ('a'): storage range [0, 9)"});
}

TEST(IrpaMalformed, SharedMetadataCannotBlowUpMemory) {
  // Many entries naming one large metadata range would copy it each time;
  // the copies are bounded by a multiple of the file size.
  ArchiveBuilder builder;
  std::string big(1 << 20, 'm');
  std::array<std::byte, 1> zero{};
  ASSERT_TRUE(builder.add_splat("s0", 1, zero, big).ok());
  for (int i = 1; i < 40; ++i) ASSERT_TRUE(builder.add_splat("s" + std::to_string(i), 1, zero).ok());
  auto bytes = builder.write_buffer();
  ASSERT_TRUE(bytes.ok());
  for (int i = 1; i < 40; ++i) {
    uint64_t entry = kEntry0 + 96 * static_cast<uint64_t>(i);  // splats are 85 bytes, padded to 96
    put<uint64_t>(*bytes, entry + f::kEntryMetadataAt, get<uint64_t>(*bytes, kEntry0 + f::kEntryMetadataAt));
    put<uint64_t>(*bytes, entry + f::kEntryMetadataAt + 8, big.size());
  }
  expect_open_error(*bytes, {"names and metadata would take more than"});
}

TEST(IrpaMalformed, HeadersSharingOneEntryTableAreBounded) {
  // Headers at 0 and 4096 both point at one table of 1000 skip entries at
  // 8192: walking it once per header would make the work grow with
  // headers x table, so the total walked is bounded by the file size.
  const uint64_t entries = 1000, table = 8192;
  std::vector<std::byte> bytes(table + 64 * entries);
  for (uint64_t header : {uint64_t{0}, uint64_t{4096}}) {
    put<uint32_t>(bytes, header + f::kMagicAt, kMagic);
    put<uint64_t>(bytes, header + f::kHeaderSizeAt, kHeaderV0Size);
    put<uint64_t>(bytes, header + f::kNextHeaderOffsetAt, header == 0 ? 4096 : 0);
    put<uint64_t>(bytes, header + f::kEntryCountAt, entries);
    put<uint64_t>(bytes, header + f::kEntrySegmentAt, table - header);
    put<uint64_t>(bytes, header + f::kEntrySegmentAt + 8, 64 * entries);
  }
  for (uint64_t i = 0; i < entries; ++i) put<uint64_t>(bytes, table + 64 * i, kEntryHeaderSize);
  std::vector<std::byte> one_header = bytes;
  put<uint64_t>(one_header, f::kNextHeaderOffsetAt, 0);
  auto reader = ArchiveReader::open_buffer(one_header);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_TRUE((*reader)->entries().empty());
  expect_open_error(bytes, {"header 1 at offset 4096", "hold more entries than a file of 72192"});
}

TEST(IrpaMalformed, ReaderRefusesEntriesFromElsewhere) {
  auto bytes = small_archive();
  auto reader = ArchiveReader::open_buffer(bytes);
  ASSERT_TRUE(reader.ok());
  Entry forged = *(*reader)->find("a");
  forged.data_offset = 4090;
  EXPECT_EQ((*reader)->view(forged).status().code(), StatusCode::kOutOfRange);
  forged.data_offset = UINT64_MAX;
  EXPECT_FALSE((*reader)->view(forged).ok());
  Entry splat = *(*reader)->find("b");
  splat.pattern_length = 3;
  std::vector<std::byte> out(4);
  EXPECT_FALSE((*reader)->read(splat, 0, out).ok());
  Entry external = *(*reader)->find("a");
  external.type = EntryType::kExternal;
  external.external_path = "nowhere.bin";
  EXPECT_EQ((*reader)->view(external).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace loom::io::irpa
