#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "loom/npy.hpp"
#include "npy_test_util.hpp"

namespace loom::io {
namespace {

using testing::TempDir;
using testing::to_bytes;
using testing::to_string;

constexpr DType kNpyDtypes[] = {
    DType::kF16, DType::kF32, DType::kF64, DType::kI8,  DType::kI16,
    DType::kI32, DType::kI64, DType::kU8,  DType::kU16, DType::kU32,
    DType::kU64, DType::kBool};

const Shape kShapes[] = {{}, {5}, {0}, {2, 3}, {3, 1, 4}, {2, 0, 3},
                         {2, 3, 1, 2}, {1, 1, 1, 1}};

// A tensor whose bytes differ element to element (0/1 for bool), so a
// swapped, shifted or truncated read shows.
Tensor patterned(DType dtype, const Shape& shape) {
  Tensor t = *Tensor::zeros(dtype, shape);
  auto* p = static_cast<unsigned char*>(t.data());
  for (size_t i = 0; i < t.byte_size(); ++i) {
    p[i] = dtype == DType::kBool ? static_cast<unsigned char>(i % 2)
                                 : static_cast<unsigned char>(i * 37 + 11);
  }
  return t;
}

void expect_same(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.byte_size(), b.byte_size());
  EXPECT_TRUE(a.byte_size() == 0 ||
              std::memcmp(a.data(), b.data(), a.byte_size()) == 0);
}

size_t header_size(const std::vector<std::byte>& file) {
  size_t len = static_cast<size_t>(file[8]) | static_cast<size_t>(file[9]) << 8;
  return 10 + len;
}

TEST(NpyRoundTrip, EveryDtypeAndRankSurvivesEncodeAndParse) {
  for (DType dtype : kNpyDtypes) {
    for (const Shape& shape : kShapes) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " +
                   shape_to_string(shape));
      Tensor t = patterned(dtype, shape);
      std::vector<std::byte> file = encode_npy(t);
      ASSERT_FALSE(file.empty());
      size_t data_start = header_size(file);
      EXPECT_EQ(data_start % 64, 0u);
      EXPECT_EQ(file[data_start - 1], std::byte{'\n'});
      EXPECT_EQ(file.size(), data_start + t.byte_size());
      auto back = parse_npy(file);
      ASSERT_TRUE(back.ok()) << back.status().to_string();
      expect_same(t, *back);
      EXPECT_TRUE(back->owns_data());
    }
  }
}

TEST(NpyRoundTrip, EveryDtypeAndRankSurvivesWriteAndRead) {
  TempDir dir;
  for (DType dtype : kNpyDtypes) {
    for (const Shape& shape : kShapes) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " +
                   shape_to_string(shape));
      Tensor t = patterned(dtype, shape);
      auto path = dir.path() / "t.npy";
      ASSERT_TRUE(write_npy(path, t).ok());
      auto back = read_npy(path);
      ASSERT_TRUE(back.ok()) << back.status().to_string();
      expect_same(t, *back);
    }
  }
}

TEST(NpyRoundTrip, WriteProducesTheSameBytesAsEncode) {
  TempDir dir;
  Tensor t = patterned(DType::kI32, {4, 5});
  auto path = dir.path() / "t.npy";
  ASSERT_TRUE(write_npy(path, t).ok());
  std::ifstream in(path, std::ios::binary);
  std::string on_disk((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(on_disk, to_string(encode_npy(t)));
}

TEST(NpyRoundTrip, ViewTensorIsWrittenFromTheCallersMemory) {
  float values[] = {1.5f, -2.0f, 3.25f};
  Tensor view = *Tensor::view(DType::kF32, {3}, values, sizeof values);
  auto back = parse_npy(encode_npy(view));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->data_as<float>()[2], 3.25f);
}

TEST(NpyRoundTrip, HugeRankHeaderSwitchesToVersion2) {
  Shape shape(30000, 1);  // "1, " per dim: past 1.0's 64 KiB header limit
  Tensor t = patterned(DType::kU8, shape);
  std::vector<std::byte> file = encode_npy(t);
  ASSERT_GT(file.size(), 65536u);
  EXPECT_EQ(file[6], std::byte{2});
  size_t len = 0;
  for (int i = 3; i >= 0; --i) len = len << 8 | static_cast<size_t>(file[8 + i]);
  EXPECT_EQ((12 + len) % 64, 0u);
  auto back = parse_npy(file);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->rank(), 30000u);
}

TEST(NpyRoundTrip, Bf16HasNoNpyDtype) {
  Tensor t = *Tensor::zeros(DType::kBF16, {2});
  EXPECT_TRUE(encode_npy(t).empty());
  TempDir dir;
  Status st = write_npy(dir.path() / "bf16.npy", t);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bf16 has no .npy equivalent"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("bf16.npy"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "bf16.npy"));
}

TEST(NpyRoundTrip, DefaultTensorCannotBeWritten) {
  TempDir dir;
  Status st = write_npy(dir.path() / "empty.npy", Tensor());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("invalid has no .npy equivalent"),
            std::string::npos)
      << st.message();
}

TEST(NpyRoundTrip, WriteIntoMissingFolderFailsNamingThePath) {
  TempDir dir;
  auto path = dir.path() / "no" / "such" / "dir" / "t.npy";
  Status st = write_npy(path, patterned(DType::kF32, {2}));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot open"), std::string::npos);
  EXPECT_NE(st.message().find(path.string()), std::string::npos);
}

TEST(NpyRoundTrip, BigEndianDataIsByteSwappedOnRead) {
  std::string file = testing::npy_file(
      "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }",
      std::string("\x00\x00\x01\x02\xff\xff\xff\xfe", 8));
  auto t = parse_npy(to_bytes(file));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->dtype(), DType::kI32);
  EXPECT_EQ(t->data_as<int32_t>()[0], 0x0102);
  EXPECT_EQ(t->data_as<int32_t>()[1], -2);

  TempDir dir;
  auto from_file = read_npy(dir.write("be.npy", file));
  ASSERT_TRUE(from_file.ok()) << from_file.status().to_string();
  EXPECT_EQ(from_file->data_as<int32_t>()[0], 0x0102);
}

TEST(NpyRoundTrip, BigEndianFloat64AndF16AreSwapped) {
  std::string f8("\x3f\xf8\x00\x00\x00\x00\x00\x00", 8);  // 1.5
  auto t = parse_npy(to_bytes(testing::npy_file(
      "{'descr': '>f8', 'fortran_order': False, 'shape': ()}", f8)));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->data_as<double>()[0], 1.5);
  auto h = parse_npy(to_bytes(testing::npy_file(
      "{'descr': '>f2', 'fortran_order': False, 'shape': (1,)}",
      std::string("\x3c\x00", 2))));  // 1.0 in binary16
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->data_as<uint16_t>()[0], 0x3c00);
}

TEST(NpyRoundTrip, NativeAndNotApplicableByteOrdersRead) {
  struct Case {
    const char* descr;
    DType dtype;
  };
  for (Case c : {Case{"=i2", DType::kI16}, Case{"|u1", DType::kU8},
                 Case{"<b1", DType::kBool}, Case{"|i1", DType::kI8},
                 Case{">u1", DType::kU8}, Case{"=f8", DType::kF64},
                 Case{"u8", DType::kU64}, Case{"|f4", DType::kF32}}) {
    SCOPED_TRACE(c.descr);
    std::string dict = std::string("{'descr': '") + c.descr +
                       "', 'fortran_order': False, 'shape': (2,)}";
    std::string data(2 * dtype_size(c.dtype), '\x01');
    auto t = parse_npy(to_bytes(testing::npy_file(dict, data)));
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ(t->dtype(), c.dtype);
    EXPECT_EQ(t->byte_size(), data.size());
  }
}

}  // namespace
}  // namespace loom::io
