#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/util.hpp"

namespace loom::kernels {
namespace {

TEST(KernelUtil, HalfConversionKnownValues) {
  EXPECT_EQ(to_half(1.0f).bits, 0x3c00);
  EXPECT_EQ(to_half(-2.0f).bits, 0xc000);
  EXPECT_EQ(to_half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(to_half(65520.0f).bits, 0x7c00);  // rounds to infinity
  EXPECT_EQ(to_half(5.960464477539063e-08f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(to_half(0.0f).bits, 0x0000);
  EXPECT_EQ(to_half(1.0f + 1.0f / 2048).bits, 0x3c00);   // tie to even
  EXPECT_EQ(to_half(1.0f + 3.0f / 2048).bits, 0x3c02);   // tie to even, upward
  EXPECT_EQ(to_float(Half{0x3555}), 0.333251953125f);
  EXPECT_EQ(to_float(Half{0x0001}), 5.960464477539063e-08f);
  EXPECT_TRUE(std::isnan(to_float(to_half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(to_float(Half{0xfc00})));
}

TEST(KernelUtil, HalfRoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const Half h{static_cast<uint16_t>(bits)};
    const float f = to_float(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(to_half(f).bits, h.bits) << std::hex << bits;
  }
}

TEST(KernelUtil, BFloat16Conversion) {
  EXPECT_EQ(to_bfloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(to_float(BFloat16{0xc040}), -3.0f);
  EXPECT_TRUE(std::isnan(to_float(to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(KernelUtil, ReadIntsAcceptsI32AndI64Only) {
  int64_t v64[3] = {1, -2, 3};
  Shape shape{3};
  TensorRef t{DType::kI64, shape, v64, sizeof v64};
  EXPECT_EQ(read_ints("Reshape", "shape", t).value(), (std::vector<int64_t>{1, -2, 3}));
  int32_t v32[3] = {4, 5, -6};
  TensorRef t32{DType::kI32, shape, v32, sizeof v32};
  EXPECT_EQ(read_ints("Reshape", "shape", t32).value(), (std::vector<int64_t>{4, 5, -6}));
  TensorRef f{DType::kF32, shape, v32, sizeof v32};
  auto bad = read_ints("Reshape", "shape", f);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "Reshape: operand 'shape' must be i32 or i64, got f32");
  TensorRef short_data{DType::kI64, shape, v64, 16};
  EXPECT_FALSE(read_ints("Reshape", "shape", short_data).ok());
}

TEST(KernelUtil, ConstantIntsWithoutValueNeedsAConstant) {
  TensorType t{DType::kI64, {2}};
  auto r = constant_ints("Reshape", 1, "shape", t);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(),
            "Reshape: operand 1 ('shape') must be a constant: its values decide the output shape");
}

TEST(KernelUtil, NormalizeAxis) {
  EXPECT_EQ(normalize_axis("Concat", -1, 3).value(), 2);
  EXPECT_EQ(normalize_axis("Concat", 0, 3).value(), 0);
  auto bad = normalize_axis("Concat", 3, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "Concat: axis 3 out of range for rank 3");
}

TEST(KernelUtil, VisitDtypeReachesTheElementType) {
  size_t size = 0;
  auto fn = [&]<typename T>() {
    size = sizeof(T);
    return Status();
  };
  EXPECT_TRUE(visit_dtype("Op", DType::kI16, fn).ok());
  EXPECT_EQ(size, 2u);
  EXPECT_TRUE(visit_dtype("Op", DType::kF64, fn).ok());
  EXPECT_EQ(size, 8u);
  EXPECT_FALSE(visit_dtype("Op", DType::kInvalid, fn).ok());
}

TEST(KernelUtil, AttributesKnowTheOpset) {
  Attributes old_node({}, 11);
  EXPECT_TRUE(old_node.opset_before(13));
  EXPECT_FALSE(old_node.opset_before(11));
  Attributes newest;
  EXPECT_FALSE(newest.opset_before(13));
}

}  // namespace
}  // namespace loom::kernels
