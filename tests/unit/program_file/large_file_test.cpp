// Files past 4 GiB: 64-bit offsets end to end. The 5 GiB zero segment is a
// hole, so the file costs no disk space, only the time to hash its zeros.
#include <gtest/gtest.h>

#include <sys/statvfs.h>

#include "container_test_support.hpp"

namespace loom {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(ProgramLargeFile, SegmentPastFourGiBIsReadBack) {
  if (!testing::supports_sparse_files()) {
    GTEST_SKIP() << "the temp filesystem does not keep holes; a 5 GiB file would be written out";
  }
  struct statvfs fs {};
  if (::statvfs(::testing::TempDir().c_str(), &fs) != 0 ||
      uint64_t{fs.f_bavail} * fs.f_frsize < 64 * (uint64_t{1} << 20)) {
    GTEST_SKIP() << "less than 64 MiB free in " << ::testing::TempDir();
  }

  ProgramWriter writer;
  uint32_t zeros = writer.add_zero_segment(5 * kGiB);
  std::vector<std::byte> tail = testing::pattern(1000, 3);
  uint32_t last = writer.add_segment(tail);
  ArtifactDef a;
  a.loader_key = "cpu-simd";
  a.content_segment = static_cast<int32_t>(last);
  ArtifactDef big;
  big.loader_key = "zeros";
  big.content_segment = static_cast<int32_t>(zeros);
  writer.program().artifacts = {a, big};

  testing::TempPath path("large.loom");
  Status written = writer.write_file(path.path());
  ASSERT_TRUE(written.ok()) << written.to_string();
  EXPECT_GT(std::filesystem::file_size(path.path()), 5 * kGiB);

  auto reader = ProgramReader::open_file(path.path());
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  const ProgramReader& r = **reader;
  EXPECT_EQ(r.segments()[zeros].size, 5 * kGiB);
  EXPECT_GT(r.segments()[last].offset, 4 * kGiB);
  auto content = r.artifact_content(0).value();
  ASSERT_EQ(content.size(), tail.size());
  EXPECT_EQ(content.back(), tail.back());
  EXPECT_TRUE(std::ranges::equal(content, tail));
  auto zero_bytes = r.artifact_content(1).value();
  ASSERT_EQ(zero_bytes.size(), 5 * kGiB);
  EXPECT_EQ(zero_bytes.back(), std::byte{0});
  EXPECT_EQ(r.file_bytes().size(), r.head().file_size);
}

}  // namespace
}  // namespace loom
