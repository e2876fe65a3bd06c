#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/hash.hpp"
#include "program_file/checksum.hpp"
#include "container_test_support.hpp"

namespace loom {
namespace {

TEST(SegmentChecksum, StreamedZerosMatchTheOneShotHash) {
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{65536}, uint64_t{65537}, uint64_t{300000}}) {
    std::vector<std::byte> zeros(static_cast<size_t>(n));
    EXPECT_EQ(container::zero_bytes_checksum(n), xxh3_64(zeros)) << n << " zeros";
  }
}

TEST(SegmentChecksum, StreamedPiecesMatchTheOneShotHash) {
  auto bytes = testing::pattern(100000, 5);
  container::Xxh3Stream stream;
  stream.update(std::span(bytes).first(333));
  stream.update(std::span(bytes).subspan(333));
  EXPECT_EQ(stream.digest(), xxh3_64(bytes));
}

// A file of data, a hole, data and a trailing hole: hashing any range while
// skipping holes gives the hash of the mapped bytes.
TEST(SegmentChecksum, SkippingHolesMatchesHashingTheMapping) {
  testing::TempPath path("holes.bin");
  int fd = ::open(path.path().c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  constexpr size_t kSize = size_t{3} << 20;
  auto a = testing::pattern(5000, 1);
  auto b = testing::pattern(70000, 2);
  ASSERT_EQ(::pwrite(fd, a.data(), a.size(), 0), static_cast<ssize_t>(a.size()));
  ASSERT_EQ(::pwrite(fd, b.data(), b.size(), (1 << 20) + 5), static_cast<ssize_t>(b.size()));
  ASSERT_EQ(::ftruncate(fd, kSize), 0);
  void* address = ::mmap(nullptr, kSize, PROT_READ, MAP_PRIVATE, fd, 0);
  ASSERT_NE(address, MAP_FAILED);
  std::span<const std::byte> all(static_cast<const std::byte*>(address), kSize);
  struct Range {
    size_t offset, size;
  };
  for (Range r : {Range{0, kSize}, Range{0, 4999}, Range{4999, 2}, Range{4096, 1 << 20},
                  Range{(1 << 20) + 7, 70000}, Range{(2 << 20) + 1, (1 << 20) - 1},
                  Range{100, 0}}) {
    auto range = all.subspan(r.offset, r.size);
    EXPECT_EQ(container::checksum_skipping_holes(fd, range, r.offset), xxh3_64(range))
        << "range at " << r.offset << ", " << r.size << " bytes";
  }
  ::munmap(address, kSize);
  ::close(fd);
}

}  // namespace
}  // namespace loom
