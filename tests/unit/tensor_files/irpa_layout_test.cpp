// Golden layout of .irpa archives: the format's struct sizes, and a small
// archive compared byte for byte with a layout computed by hand from IREE's
// format (runtime/src/iree/schemas/parameter_archive.h) and its builder.
#include <array>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "loom/irpa.hpp"
#include "tensor_files/irpa_format.hpp"

namespace loom::io::irpa {
namespace {

TEST(IrpaLayout, StructSizesMatchIree) {
  EXPECT_EQ(kHeaderPrefixSize, 32u);
  EXPECT_EQ(kHeaderV0Size, 88u);
  EXPECT_EQ(kEntryHeaderSize, 60u);
  EXPECT_EQ(kSplatEntrySize, 85u);
  EXPECT_EQ(kDataEntrySize, 76u);
  EXPECT_EQ(kExternalEntrySize, 92u);
  EXPECT_EQ(kMagic, 0x41505249u);
  EXPECT_EQ(kHeaderAlignment, 16u);
  EXPECT_EQ(kEntryAlignment, 16u);
  EXPECT_EQ(kDefaultDataAlignment, 64u);
  EXPECT_EQ(kFileAlignment, 4096u);
}

TEST(IrpaLayout, FieldOffsetsAreThoseOfThePackedStructs) {
  EXPECT_EQ(format::kNextHeaderOffsetAt, 16u);
  EXPECT_EQ(format::kEntryCountAt, 32u);
  EXPECT_EQ(format::kStorageSegmentAt, 72u);
  EXPECT_EQ(format::kEntryTypeAt, 8u);
  EXPECT_EQ(format::kEntryFlagsAt, 12u);  // packed: no padding after the u32 type
  EXPECT_EQ(format::kEntryAlignmentAt, 52u);
  EXPECT_EQ(format::kSplatPatternLengthAt, 84u);
  EXPECT_EQ(format::kExternalRangeAt, 76u);
}

// One 8-byte data entry "a" (metadata "x") and one 16-byte splat "b" of the
// 2-byte pattern AA BB. Computed by hand:
//   header                    [0, 88)      padding to 96
//   entry table  (96, 165)    data entry [96, 172), pad to 176,
//                             splat entry [176, 261) (the table ends there)
//   metadata     (261, 3)     "a" "x" "b"
//   storage      (320, 8)     align(264, 64) = 320
//   file size                 align(328, 4096) = 4096
const std::vector<uint8_t> kExpectedHead = {
    // header prefix
    0x49, 0x52, 0x50, 0x41,  0x00, 0x00,  0x00, 0x00,   // magic "IRPA", version 0.0
    0x58, 0, 0, 0, 0, 0, 0, 0,                          // header_size 88
    0x00, 0, 0, 0, 0, 0, 0, 0,                          // next_header_offset 0
    0x00, 0, 0, 0, 0, 0, 0, 0,                          // flags
    // header v0
    0x02, 0, 0, 0, 0, 0, 0, 0,                          // entry_count 2
    0x60, 0, 0, 0, 0, 0, 0, 0,  0xa5, 0, 0, 0, 0, 0, 0, 0,  // entry segment {96, 165}
    0x05, 1, 0, 0, 0, 0, 0, 0,  0x03, 0, 0, 0, 0, 0, 0, 0,  // metadata segment {261, 3}
    0x40, 1, 0, 0, 0, 0, 0, 0,  0x08, 0, 0, 0, 0, 0, 0, 0,  // storage segment {320, 8}
    0, 0, 0, 0, 0, 0, 0, 0,                             // padding to 96
    // entry 0 at 96: data "a"
    0x4c, 0, 0, 0, 0, 0, 0, 0,                          // entry_size 76
    0x02, 0, 0, 0,                                      // type data
    0x00, 0, 0, 0, 0, 0, 0, 0,                          // flags
    0x00, 0, 0, 0, 0, 0, 0, 0,  0x01, 0, 0, 0, 0, 0, 0, 0,  // name {0, 1}
    0x01, 0, 0, 0, 0, 0, 0, 0,  0x01, 0, 0, 0, 0, 0, 0, 0,  // metadata {1, 1}
    0x40, 0, 0, 0, 0, 0, 0, 0,                          // minimum_alignment 64
    0x00, 0, 0, 0, 0, 0, 0, 0,  0x08, 0, 0, 0, 0, 0, 0, 0,  // storage {0, 8}
    0, 0, 0, 0,                                         // padding to 176
    // entry 1 at 176: splat "b"
    0x55, 0, 0, 0, 0, 0, 0, 0,                          // entry_size 85
    0x01, 0, 0, 0,                                      // type splat
    0x00, 0, 0, 0, 0, 0, 0, 0,                          // flags
    0x02, 0, 0, 0, 0, 0, 0, 0,  0x01, 0, 0, 0, 0, 0, 0, 0,  // name {2, 1}
    0x00, 0, 0, 0, 0, 0, 0, 0,  0x00, 0, 0, 0, 0, 0, 0, 0,  // metadata {0, 0}
    0x00, 0, 0, 0, 0, 0, 0, 0,                          // minimum_alignment 0
    0x10, 0, 0, 0, 0, 0, 0, 0,                          // length 16
    0xaa, 0xbb, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // pattern
    0x02,                                               // pattern_length
    // metadata at 261
    'a', 'x', 'b',
};

TEST(IrpaLayout, SmallArchiveMatchesTheHandComputedBytes) {
  ASSERT_EQ(kExpectedHead.size(), 264u);
  std::vector<uint8_t> expected(4096, 0);
  std::copy(kExpectedHead.begin(), kExpectedHead.end(), expected.begin());
  for (int i = 0; i < 8; ++i) expected[320 + i] = static_cast<uint8_t>(i + 1);

  ArchiveBuilder builder;
  std::array<std::byte, 8> data{};
  for (int i = 0; i < 8; ++i) data[i] = static_cast<std::byte>(i + 1);
  ASSERT_TRUE(builder.add_data("a", data, "x").ok());
  std::array<std::byte, 2> pattern = {std::byte{0xaa}, std::byte{0xbb}};
  ASSERT_TRUE(builder.add_splat("b", 16, pattern).ok());
  auto bytes = builder.write_buffer();
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  ASSERT_EQ(bytes->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(static_cast<uint8_t>((*bytes)[i]), expected[i]) << "byte " << i;
  }
}

TEST(IrpaLayout, EmptyArchiveIsOneHeaderPaddedToAPage) {
  ArchiveBuilder builder;
  auto bytes = builder.write_buffer();
  ASSERT_TRUE(bytes.ok());
  ASSERT_EQ(bytes->size(), 4096u);
  // entry segment {96, 0}, metadata {96, 0}, storage {96, 0}: IREE's layout
  // with no entries (storage alignment 1 when nothing is stored).
  EXPECT_EQ(format::load<uint64_t>(*bytes, format::kEntrySegmentAt), 96u);
  EXPECT_EQ(format::load<uint64_t>(*bytes, format::kMetadataSegmentAt), 96u);
  EXPECT_EQ(format::load<uint64_t>(*bytes, format::kStorageSegmentAt), 96u);
  auto reader = ArchiveReader::open_buffer(*bytes);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_TRUE((*reader)->entries().empty());
}

TEST(IrpaLayout, DataEntriesLandOnTheirAlignment) {
  ArchiveBuilder builder;
  std::vector<std::byte> one(3, std::byte{1}), two(5, std::byte{2}), three(7, std::byte{3});
  ASSERT_TRUE(builder.add_data("one", one).ok());
  ASSERT_TRUE(builder.add_data("two", two, {}, 4096).ok());
  ASSERT_TRUE(builder.add_data("three", three, {}, 16).ok());
  auto bytes = builder.write_buffer();
  ASSERT_TRUE(bytes.ok());
  auto reader = ArchiveReader::open_buffer(*bytes);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ((*reader)->find("one")->data_offset % 64, 0u);
  EXPECT_EQ((*reader)->find("two")->data_offset % 4096, 0u);
  EXPECT_EQ((*reader)->find("two")->minimum_alignment, 4096u);
  EXPECT_EQ((*reader)->find("three")->data_offset % 16, 0u);
  EXPECT_EQ(bytes->size() % 4096, 0u);
}

}  // namespace
}  // namespace loom::io::irpa
