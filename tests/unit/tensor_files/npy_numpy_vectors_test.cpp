// Files exactly as numpy writes them (bytes transcribed from numpy 1.24's
// np.save and np.lib.format.write_array), and header styles of older
// writers. The reader must take them all; the writer must reproduce the
// modern ones byte for byte.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "loom/npy.hpp"
#include "npy_test_util.hpp"

namespace loom::io {
namespace {

using testing::raw;
using testing::to_bytes;
using testing::to_string;

std::string spaces(size_t n) { return std::string(n, ' '); }

// np.save(f, np.arange(6, dtype='<f4').reshape(2, 3))
const std::string kF32x2x3 =
    raw("\x93NUMPY\x01\x00\x76\x00", 10) +
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" +
    spaces(58) + "\n" +
    raw("\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40"
        "\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\xa0\x40", 24);

// np.save(f, np.float64(1.5))
const std::string kF64Scalar =
    raw("\x93NUMPY\x01\x00\x76\x00", 10) +
    "{'descr': '<f8', 'fortran_order': False, 'shape': (), }" + spaces(62) +
    "\n" + raw("\x00\x00\x00\x00\x00\x00\xf8\x3f", 8);

// np.save(f, np.array([1, 2, 3], np.int16))
const std::string kI16x3 =
    raw("\x93NUMPY\x01\x00\x76\x00", 10) +
    "{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }" +
    spaces(60) + "\n" + raw("\x01\x00\x02\x00\x03\x00", 6);

// np.save(f, np.array([True, False]))
const std::string kBoolx2 =
    raw("\x93NUMPY\x01\x00\x76\x00", 10) +
    "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }" +
    spaces(60) + "\n" + raw("\x01\x00", 2);

// np.save(f, np.zeros((0,), np.uint8))
const std::string kU8Empty =
    raw("\x93NUMPY\x01\x00\x76\x00", 10) +
    "{'descr': '|u1', 'fortran_order': False, 'shape': (0,), }" +
    spaces(60) + "\n";

// write_array(f, np.array([[1, -2], [3, -4]], np.int64), version=(2, 0))
const std::string kI64V2 =
    raw("\x93NUMPY\x02\x00\x74\x00\x00\x00", 12) +
    "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }" +
    spaces(56) + "\n" +
    raw("\x01\x00\x00\x00\x00\x00\x00\x00\xfe\xff\xff\xff\xff\xff\xff\xff"
        "\x03\x00\x00\x00\x00\x00\x00\x00\xfc\xff\xff\xff\xff\xff\xff\xff",
        32);

// write_array(f, np.array([7, 8], np.uint16), version=(3, 0))
const std::string kU16V3 =
    raw("\x93NUMPY\x03\x00\x74\x00\x00\x00", 12) +
    "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }" +
    spaces(58) + "\n" + raw("\x07\x00\x08\x00", 4);

TEST(NpyNumpyVectors, Float32MatrixReads) {
  auto t = parse_npy(to_bytes(kF32x2x3));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->dtype(), DType::kF32);
  EXPECT_EQ(t->shape(), (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t->data_as<float>()[i], float(i));
}

TEST(NpyNumpyVectors, ScalarReadsAsRankZero) {
  auto t = parse_npy(to_bytes(kF64Scalar));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->rank(), 0u);
  EXPECT_EQ(t->element_count(), 1u);
  EXPECT_EQ(t->data_as<double>()[0], 1.5);
}

TEST(NpyNumpyVectors, OneTupleShapeReads) {
  auto t = parse_npy(to_bytes(kI16x3));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->shape(), (Shape{3}));
  EXPECT_EQ(t->data_as<int16_t>()[2], 3);
}

TEST(NpyNumpyVectors, BoolAndEmptyRead) {
  auto b = parse_npy(to_bytes(kBoolx2));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->dtype(), DType::kBool);
  EXPECT_EQ(b->data_as<uint8_t>()[0], 1);
  auto e = parse_npy(to_bytes(kU8Empty));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->shape(), (Shape{0}));
  EXPECT_EQ(e->byte_size(), 0u);
}

TEST(NpyNumpyVectors, Version2And3Read) {
  auto v2 = parse_npy(to_bytes(kI64V2));
  ASSERT_TRUE(v2.ok()) << v2.status().to_string();
  EXPECT_EQ(v2->shape(), (Shape{2, 2}));
  EXPECT_EQ(v2->data_as<int64_t>()[3], -4);
  auto v3 = parse_npy(to_bytes(kU16V3));
  ASSERT_TRUE(v3.ok()) << v3.status().to_string();
  EXPECT_EQ(v3->data_as<uint16_t>()[1], 8);
}

TEST(NpyNumpyVectors, EncodeReproducesNumpyBytesExactly) {
  for (const std::string* file :
       {&kF32x2x3, &kF64Scalar, &kI16x3, &kBoolx2, &kU8Empty}) {
    auto t = parse_npy(to_bytes(*file));
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(to_string(encode_npy(*t)), *file);
  }
}

TEST(NpyNumpyVectors, OldNumpySixteenByteAlignedHeaderReads) {
  // numpy before 1.9 aligned the data to 16 bytes and wrote no growth room.
  std::string file =
      raw("\x93NUMPY\x01\x00\x46\x00", 10) +
      "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }" +
      spaces(12) + "\n" + raw("\x00\x00\x00\x00\x00\x00\xf0\x3f", 8);
  ASSERT_EQ((file.size() - 8) % 16, 0u);
  auto t = parse_npy(to_bytes(file));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->data_as<double>()[0], 1.0);
}

TEST(NpyNumpyVectors, Python2LongShapeReads) {
  auto t = parse_npy(to_bytes(testing::npy_file(
      "{'descr': '<i8', 'fortran_order': False, 'shape': (2L, 1L), }",
      std::string(16, '\0'))));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->shape(), (Shape{2, 1}));
}

TEST(NpyNumpyVectors, HandWrittenHeaderVariantsRead) {
  // Any key order, double quotes, no trailing comma, odd whitespace.
  for (const char* dict :
       {"{'shape': (2,), 'fortran_order': False, 'descr': '<u4'}",
        "{\"descr\": \"<u4\", \"fortran_order\": False, \"shape\": (2,)}",
        "{ 'descr' :'<u4','fortran_order':False,'shape':( 2 , ) , }",
        "\t{'descr': '<u4',\n 'fortran_order': False,\n 'shape': (2,)}  "}) {
    SCOPED_TRACE(dict);
    auto t = parse_npy(to_bytes(testing::npy_file(dict, std::string(8, 'x'))));
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ(t->dtype(), DType::kU32);
    EXPECT_EQ(t->shape(), (Shape{2}));
  }
}

}  // namespace
}  // namespace loom::io
