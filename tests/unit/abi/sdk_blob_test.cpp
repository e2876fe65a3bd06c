// loom::sdk's blob container (loom/sdk/blob.hpp): what BlobWriter writes,
// read_blob_header reads back, and every kind of damage is refused with a
// message naming it: bad magic, unsupported version (both versions named),
// truncation, trailing bytes, checksum mismatch; BlobReader stops at the end.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "loom/plugin.hpp"

namespace {

using loom::sdk::BlobHeader;
using loom::sdk::BlobReader;
using loom::sdk::BlobWriter;
using loom::sdk::read_blob_header;

std::vector<uint8_t> sample() {
  BlobWriter w("TESTBLOB", 2);
  w.u32(7);
  w.f32(1.5f);
  w.str("hello");
  w.i64(-3);
  return w.finish();
}

std::string refusal(const std::vector<uint8_t>& b, uint32_t min = 1, uint32_t max = 2) {
  BlobHeader h;
  loom::sdk::Status s = read_blob_header(b.data(), b.size(), "TESTBLOB", min, max, &h);
  EXPECT_EQ(h.payload, nullptr);
  return s.ok() ? "ok" : s.message();
}

TEST(SdkBlob, RoundTripsThroughTheReader) {
  const std::vector<uint8_t> b = sample();
  ASSERT_EQ(b.size(), loom::sdk::kBlobHeaderSize + 4 + 4 + 9 + 8);
  BlobHeader h;
  ASSERT_TRUE(read_blob_header(b.data(), b.size(), "TESTBLOB", 1, 2, &h).ok());
  EXPECT_EQ(h.format_version, 2u);
  EXPECT_EQ(h.payload_size, 25u);
  EXPECT_EQ(h.checksum, loom::sdk::fnv1a64(b.data() + 32, 25));
  BlobReader r(h);
  uint32_t u = 0;
  float f = 0;
  std::string s;
  int64_t i = 0;
  EXPECT_TRUE(r.u32(&u) && r.f32(&f) && r.str(&s) && r.i64(&i));
  EXPECT_EQ(u, 7u);
  EXPECT_EQ(f, 1.5f);
  EXPECT_EQ(s, "hello");
  EXPECT_EQ(i, -3);
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_FALSE(r.u8(reinterpret_cast<uint8_t*>(&u)));
  EXPECT_EQ(r.status().code(), LOOM_STATUS_INCOMPATIBLE);
  EXPECT_EQ(r.status().message(), "blob: payload truncated: reading 1 bytes at offset 25 of 25");
  EXPECT_FALSE(r.u32(&u)) << "a reader stays failed";
}

TEST(SdkBlob, Fnv1aMatchesTheReferenceValues) {
  EXPECT_EQ(loom::sdk::fnv1a64("", 0), UINT64_C(0xcbf29ce484222325));
  EXPECT_EQ(loom::sdk::fnv1a64("a", 1), UINT64_C(0xaf63dc4c8601ec8c));
  EXPECT_EQ(loom::sdk::fnv1a64("foobar", 6), UINT64_C(0x85944171f73967e8));
}

TEST(SdkBlob, BadMagicIsNamed) {
  std::vector<uint8_t> b = sample();
  b[7] = 0;
  EXPECT_EQ(refusal(b), "blob: bad magic: expected \"TESTBLOB\", found \"TESTBLO\\x00\" "
                        "(not a blob of this plugin)");
}

TEST(SdkBlob, UnsupportedVersionNamesBothVersions) {
  EXPECT_EQ(refusal(sample(), 3, 5),
            "blob: format version 2 is not supported: this plugin reads versions 3 to 5");
  EXPECT_EQ(refusal(sample(), 1, 1),
            "blob: format version 2 is not supported: this plugin reads versions 1 to 1");
}

TEST(SdkBlob, EveryTruncationIsRefused) {
  const std::vector<uint8_t> b = sample();
  for (size_t n = 0; n < b.size(); ++n) {
    const std::string why = refusal(std::vector<uint8_t>(b.begin(), b.begin() + n));
    EXPECT_EQ(why.rfind("blob: truncated: ", 0), 0u) << n << ": " << why;
  }
  EXPECT_EQ(refusal(std::vector<uint8_t>(b.begin(), b.begin() + 10)),
            "blob: truncated: 10 bytes, the header alone needs 32");
  EXPECT_EQ(refusal(std::vector<uint8_t>(b.begin(), b.begin() + 40)),
            "blob: truncated: the header promises 25 payload bytes, 8 follow it");
  BlobHeader h;
  EXPECT_FALSE(read_blob_header(nullptr, 100, "TESTBLOB", 1, 2, &h).ok());
}

TEST(SdkBlob, TrailingBytesAreRefused) {
  std::vector<uint8_t> b = sample();
  b.push_back(0);
  EXPECT_EQ(refusal(b), "blob: 1 bytes follow the payload of 25 bytes the header announces");
}

TEST(SdkBlob, EveryPayloadBitFlipFailsTheChecksum) {
  const std::vector<uint8_t> good = sample();
  for (size_t i = loom::sdk::kBlobHeaderSize; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> b = good;
      b[i] ^= static_cast<uint8_t>(1u << bit);
      const std::string why = refusal(b);
      EXPECT_EQ(why.rfind("blob: checksum mismatch: the header says 0x", 0), 0u) << i << ": " << why;
    }
  }
}

TEST(SdkBlob, TheProgramsRecordedVersionMustMatchTheHeader) {
  const std::vector<uint8_t> b = sample();
  loom::sdk::Blob blob{"test", 1, b.data(), b.size()};
  BlobHeader h;
  loom::sdk::Status s = read_blob_header(blob, "TESTBLOB", 1, 2, &h);
  EXPECT_EQ(s.message(), "blob: the program records format version 1, the blob's header says 2");
  blob.format_version = 0;  // not recorded: the header decides
  EXPECT_TRUE(read_blob_header(blob, "TESTBLOB", 1, 2, &h).ok());
  blob.format_version = 2;
  EXPECT_TRUE(read_blob_header(blob, "TESTBLOB", 1, 2, &h).ok());
}

TEST(SdkBlob, ReaderAlignSkipsWriterPadding) {
  BlobWriter w("TESTBLOB", 1);
  w.u8(1);
  w.align(8);
  w.u64(99);
  const std::vector<uint8_t> b = w.finish();
  BlobHeader h;
  ASSERT_TRUE(read_blob_header(b.data(), b.size(), "TESTBLOB", 1, 1, &h).ok());
  BlobReader r(h);
  uint8_t one = 0;
  uint64_t v = 0;
  EXPECT_TRUE(r.u8(&one) && r.align(8) && r.u64(&v));
  EXPECT_EQ(v, 99u);
  // A string whose length runs past the end.
  BlobWriter bad("TESTBLOB", 1);
  bad.u32(1000);
  const std::vector<uint8_t> bb = bad.finish();
  ASSERT_TRUE(read_blob_header(bb.data(), bb.size(), "TESTBLOB", 1, 1, &h).ok());
  BlobReader rr(h);
  std::string s;
  EXPECT_FALSE(rr.str(&s));
  EXPECT_EQ(rr.status().message(), "blob: payload truncated: reading 1000 bytes at offset 4 of 4");
}

}  // namespace
