// The capture reader and the tensor comparison (issue 29): the reader
// refuses bad input with one line naming what and where, a well-formed
// capture round-trips, and compare_tensor / parse_tolerance apply the
// per-dtype bounds replay uses.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "host/recording/capture_model.hpp"
#include "loom/capture.hpp"

namespace loom {
namespace {

namespace fs = std::filesystem;
namespace hc = host::capture;

// A path in a folder of this process's own that nothing creates.
fs::path reader_absent_path() {
  return fs::temp_directory_path() / ("loom_capture_reader_test_" + std::to_string(::getpid())) /
         "absent.loomcap";
}

// ---- the reader refuses bad input with one line naming what and where ----

hc::Capture small_capture() {
  hc::Capture c;
  c.loom_version = "test";
  c.plugins.push_back({"p", "1", "", 0x10000, "", {"k"}, false});
  c.devices.push_back({0, "p://0", "dev", 0, 0, 0, 0});
  std::vector<std::byte> four(4, std::byte{1});
  c.payloads.push_back({hc::payload_hash(four), four});
  hc::CallRecord r;
  r.kind = hc::CallKind::kExecute;
  r.device = 0;
  hc::TensorRecord t;
  t.dtype = 1;
  t.shape = {1};
  t.byte_size = 4;
  t.payload = 0;
  r.inputs.push_back(t);
  c.calls.push_back(r);
  return c;
}

Status decode_status(const hc::Capture& c) {
  std::vector<uint8_t> bytes = hc::encode_capture(c);
  return hc::decode_capture(std::as_bytes(std::span<const uint8_t>(bytes)), "t").status();
}

TEST(CaptureReader, WellFormedCaptureRoundTrips) {
  hc::Capture c = small_capture();
  std::vector<uint8_t> bytes = hc::encode_capture(c);
  auto back = hc::decode_capture(std::as_bytes(std::span<const uint8_t>(bytes)), "t");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->calls[0].inputs[0].payload, 0);
  EXPECT_EQ(back->devices[0].uri, "p://0");
}

TEST(CaptureReader, TruncatedFileFailsVerification) {
  std::vector<uint8_t> bytes = hc::encode_capture(small_capture());
  bytes.resize(bytes.size() / 2);
  Status st = hc::decode_capture(std::as_bytes(std::span<const uint8_t>(bytes)), "t").status();
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("fails verification"), std::string::npos) << st.message();
}

TEST(CaptureReader, ForeignFileIsNotACapture) {
  const std::string text = "not a capture at all";
  Status st = hc::decode_capture(std::as_bytes(std::span<const char>(text)), "t").status();
  EXPECT_NE(st.message().find("not a Loom capture"), std::string::npos) << st.message();
}

TEST(CaptureReader, IndexOutOfRangeNamesTheCall) {
  hc::Capture c = small_capture();
  c.calls[0].device = 3;
  Status st = decode_status(c);
  EXPECT_EQ(st.message(), "t: call 0: device 3 out of range (1 devices)");
  c = small_capture();
  c.calls[0].inputs[0].payload = 9;
  EXPECT_NE(decode_status(c).message().find("call 0 input 0: payload 9 out of range"),
            std::string::npos);
  c = small_capture();
  c.devices[0].plugin = 2;
  EXPECT_NE(decode_status(c).message().find("device 0 names plugin 2"), std::string::npos);
}

TEST(CaptureReader, TensorSizeMustMatchShapeAndPayload) {
  hc::Capture c = small_capture();
  c.calls[0].inputs[0].shape = {2};
  EXPECT_NE(decode_status(c).message().find("does not match its shape"), std::string::npos);
  c = small_capture();
  c.calls[0].inputs[0].dtype = 99;
  EXPECT_NE(decode_status(c).message().find("unknown dtype 99"), std::string::npos);
  c = small_capture();
  c.calls[0].inputs[0].shape = {-1};
  EXPECT_NE(decode_status(c).message().find("negative dimension"), std::string::npos);
}

TEST(CaptureReader, PayloadWhoseHashDiffersIsDataLoss) {
  hc::Capture c = small_capture();
  c.payloads[0].bytes[0] = std::byte{7};
  Status st = decode_status(c);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("payload 0 has hash"), std::string::npos) << st.message();
}

TEST(CaptureReader, NewerSchemaVersionIsRefused) {
  hc::Capture c = small_capture();
  c.schema_version = hc::kCaptureSchemaVersion + 1;
  Status st = decode_status(c);
  EXPECT_EQ(st.code(), StatusCode::kIncompatible);
  EXPECT_NE(st.message().find("schema version 2"), std::string::npos) << st.message();
}

TEST(CaptureReader, MissingFileAndDirectoryAreOneLineErrors) {
  Status missing = hc::read_capture_file(reader_absent_path()).status();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  Status dir = hc::read_capture_file(fs::temp_directory_path()).status();
  EXPECT_NE(dir.message().find("not a regular file"), std::string::npos);
  ReplayOptions options;
  EXPECT_FALSE(replay_capture(reader_absent_path(), options).ok());
}

// ---- comparison and tolerances ----

TEST(CaptureCompare, IntegersAreExactAndTheWorstElementIsNamed) {
  const int32_t a[] = {1, 2, 3, 4};
  const int32_t b[] = {1, 3, 3, -6};
  auto d = compare_tensor(DType::kI32, a, b, sizeof a, FloatTolerance{100, 1, 1});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->index, 3u);
  EXPECT_EQ(d->elements_differing, 2u);
  EXPECT_EQ(d->recorded, 4);
  EXPECT_EQ(d->replayed, -6);
  EXPECT_FALSE(compare_tensor(DType::kI32, a, a, sizeof a, {}).has_value());
}

TEST(CaptureCompare, FloatBoundsUlpsRelativeAndAbsolute) {
  const float a[] = {1.0f, 100.0f};
  const float b[] = {std::nextafter(std::nextafter(1.0f, 2.0f), 2.0f), 100.01f};
  EXPECT_TRUE(compare_tensor(DType::kF32, a, b, sizeof a, {}).has_value());  // exact by default
  auto ulps = compare_tensor(DType::kF32, a, b, 4, FloatTolerance{1, 0, 0});
  ASSERT_TRUE(ulps.has_value());
  EXPECT_EQ(ulps->ulps, 2u);
  EXPECT_FALSE(compare_tensor(DType::kF32, a, b, 4, FloatTolerance{2, 0, 0}).has_value());
  EXPECT_FALSE(compare_tensor(DType::kF32, a, b, sizeof a, FloatTolerance{2, 2e-4, 0}).has_value());
  EXPECT_TRUE(compare_tensor(DType::kF32, a, b, sizeof a, FloatTolerance{2, 1e-5, 0}).has_value());
  EXPECT_FALSE(compare_tensor(DType::kF32, a, b, sizeof a, FloatTolerance{0, 0, 0.011}).has_value());
  const float nan[] = {std::numeric_limits<float>::quiet_NaN()};
  EXPECT_FALSE(compare_tensor(DType::kF32, nan, nan, 4, {}).has_value());
  EXPECT_TRUE(compare_tensor(DType::kF32, nan, a, 4, FloatTolerance{0, 1, 1}).has_value());
}

TEST(CaptureCompare, ToleranceOptionsParseOrSayWhatIsWrong) {
  std::map<DType, FloatTolerance> t;
  ASSERT_TRUE(parse_tolerance("f32=ulps:4,abs:1e-6", &t).ok());
  EXPECT_EQ(t[DType::kF32].ulps, 4u);
  EXPECT_EQ(t[DType::kF32].abs, 1e-6);
  EXPECT_EQ(t.count(DType::kF16), 0u);
  ASSERT_TRUE(parse_tolerance("rel:0.01", &t).ok());
  EXPECT_EQ(t[DType::kBF16].rel, 0.01);
  EXPECT_NE(parse_tolerance("i32=exact", &t).message().find("unknown dtype 'i32'"), std::string::npos);
  EXPECT_NE(parse_tolerance("f32=ulps:-1", &t).message().find("non-negative"), std::string::npos);
  EXPECT_NE(parse_tolerance("f32=wide:3", &t).message().find("unknown bound 'wide'"), std::string::npos);
}

}  // namespace
}  // namespace loom
