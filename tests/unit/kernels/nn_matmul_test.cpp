// MatMul and Gemm beyond f32, MatMulInteger and QLinearMatMul.
#include "nn_test_util.hpp"

namespace loom::kernels::nntest {
namespace {

TEST(MatMulTypes, IntegerAndDoubleOperands) {
  TBuf a = typed<int32_t>(DType::kI32, {2, 2}, {1, 2, 3, 4});
  TBuf b = typed<int32_t>(DType::kI32, {2}, {1, -1});
  TBuf y = infer_and_run("MatMul", {&a, &b}, {2});
  EXPECT_EQ(y.dtype, DType::kI32);
  EXPECT_EQ(y.values<int32_t>(), (std::vector<int32_t>{-1, -1}));
  TBuf a64 = typed<int64_t>(DType::kI64, {2, 1, 2}, {1, 2, 3, 4});
  TBuf b64 = typed<int64_t>(DType::kI64, {2, 1}, {10, 100});
  EXPECT_EQ(infer_and_run("MatMul", {&a64, &b64}, {2, 1, 1}).values<int64_t>(),
            (std::vector<int64_t>{210, 430}));
  TBuf ad = typed<double>(DType::kF64, {1, 2}, {0.5, 0.25});
  TBuf bd = typed<double>(DType::kF64, {2, 1}, {2, 4});
  EXPECT_EQ(infer_and_run("MatMul", {&ad, &bd}, {1, 1}).values<double>(), (std::vector<double>{2.0}));
  // Overflow wraps instead of being undefined.
  TBuf big = typed<int32_t>(DType::kI32, {1, 1}, {0x7fffffff});
  TBuf two = typed<int32_t>(DType::kI32, {1, 1}, {2});
  EXPECT_EQ(infer_and_run("MatMul", {&big, &two}, {1, 1}).values<int32_t>(), (std::vector<int32_t>{-2}));
  // Mixed dtypes are refused.
  EXPECT_EQ(message(infer("MatMul", {{DType::kI32, {2}}, {DType::kI64, {2}}}).status()),
            "MatMul: B has dtype i64, supported: i32");
}

TEST(GemmTypes, DoubleIntegerAndOptionalC) {
  TBuf a = typed<double>(DType::kF64, {1, 2}, {1, 2});
  TBuf b = typed<double>(DType::kF64, {2, 1}, {3, 4});
  TBuf c = typed<double>(DType::kF64, {}, {1});
  EXPECT_EQ(infer_and_run("Gemm", {&a, &b, &c}, {1, 1}, {fattr("alpha", 2), fattr("beta", 3)}).values<double>(),
            (std::vector<double>{25.0}));
  TBuf ai = typed<int32_t>(DType::kI32, {1, 2}, {1, 2});
  TBuf bi = typed<int32_t>(DType::kI32, {1, 2}, {3, 4});
  EXPECT_EQ(infer_and_run("Gemm", {&ai, &bi}, {1, 1}, {iattr("transB", 1)}).values<int32_t>(),
            (std::vector<int32_t>{11}));
  // C became optional at opset 11; a left-out C is fine there.
  EXPECT_EQ(message(infer("Gemm", {{DType::kF32, {2, 2}}, {DType::kF32, {2, 2}}}, {}, 9).status()),
            "Gemm: input 'C' is required before opset 11");
  TBuf af = f32({1, 1}, {2}), bf = f32({1, 1}, {3});
  expect_near(infer_and_run("Gemm", {&af, &bf, nullptr}, {1, 1}, {}, 11).values<float>(), {6});
}

TEST(MatMulInteger, ZeroPointsPerTensorAndPerRow) {
  TBuf a = typed<uint8_t>(DType::kU8, {2, 2}, {1, 2, 3, 4});
  TBuf b = typed<int8_t>(DType::kI8, {2, 1}, {1, -1});
  TBuf az = typed<uint8_t>(DType::kU8, {}, {1});
  TBuf y = infer_and_run("MatMulInteger", {&a, &b, &az}, {2, 1});
  EXPECT_EQ(y.dtype, DType::kI32);
  EXPECT_EQ(y.values<int32_t>(), (std::vector<int32_t>{-1, -1}));
  TBuf az_rows = typed<uint8_t>(DType::kU8, {2}, {0, 3});
  TBuf bz = typed<int8_t>(DType::kI8, {1}, {1});
  // b - 1 = (0, -2): rows (1, 2) -> -4, (0, 1) -> -2.
  EXPECT_EQ(infer_and_run("MatMulInteger", {&a, &b, &az_rows, &bz}, {2, 1}).values<int32_t>(),
            (std::vector<int32_t>{-4, -2}));
  TBuf y2 = out(DType::kI32, {2, 1});
  TBuf az_bad = typed<uint8_t>(DType::kU8, {3}, {0, 0, 0});
  EXPECT_TRUE(contains(run("MatMulInteger", {&a, &b, &az_bad}, {&y2}),
                       "a_zero_point must be a scalar or have 2 elements, got shape [3]"));
  EXPECT_EQ(message(infer("MatMulInteger", {{DType::kU8, {2, 3}}, {DType::kU8, {2, 3}}}).status()),
            "MatMulInteger: inner dimensions differ: A is [2, 3], B is [2, 3]");
  EXPECT_EQ(infer("MatMulInteger", {{DType::kF32, {2, 3}}, {DType::kU8, {3, 3}}}).status().code(),
            StatusCode::kUnimplemented);
  TBuf y_f = out({2, 1});
  EXPECT_TRUE(contains(run("MatMulInteger", {&a, &b}, {&y_f}), "Y has dtype f32, supported: i32"));
}

TEST(QLinearMatMul, RequantizesWithRoundingAndSaturation) {
  TBuf a = typed<uint8_t>(DType::kU8, {1, 2}, {2, 4});
  TBuf as = f32({}, {0.5f});
  TBuf az = typed<uint8_t>(DType::kU8, {}, {0});
  TBuf b = typed<uint8_t>(DType::kU8, {2, 1}, {1, 3});
  TBuf bs = f32({}, {1.0f});
  TBuf bz = typed<uint8_t>(DType::kU8, {}, {1});
  TBuf ys = f32({}, {0.5f});
  TBuf yz = typed<uint8_t>(DType::kU8, {}, {10});
  TBuf y = infer_and_run("QLinearMatMul", {&a, &as, &az, &b, &bs, &bz, &ys, &yz}, {1, 1});
  EXPECT_EQ(y.values<uint8_t>(), (std::vector<uint8_t>{18}));
  TBuf tiny = f32({}, {0.001f});
  ASSERT_TRUE(run("QLinearMatMul", {&a, &as, &az, &b, &bs, &bz, &tiny, &yz}, {&y}).ok());
  EXPECT_EQ(y.values<uint8_t>(), (std::vector<uint8_t>{255}));
  TBuf yz8 = typed<int8_t>(DType::kI8, {}, {0});
  TBuf y8 = out(DType::kI8, {1, 1});
  TBuf neg = f32({}, {-0.001f});
  EXPECT_TRUE(contains(run("QLinearMatMul", {&a, &as, &az, &b, &bs, &bz, &neg, &yz8}, {&y8}),
                       "y_scale is -0.001; a quantization scale must be positive and finite"));
  TBuf neg_bs = f32({}, {-1.0f});
  EXPECT_TRUE(contains(run("QLinearMatMul", {&a, &as, &az, &b, &neg_bs, &bz, &tiny, &yz8}, {&y8}),
                       "b_scale is -1; a quantization scale must be positive and finite"));
  EXPECT_TRUE(contains(run("QLinearMatMul", {&a, &as, &az, &b}, {&y}), "takes 8 inputs, got 4"));
  // Scales are f32 and zero points u8/i8, whatever the other operands are.
  EXPECT_EQ(message(run("QLinearMatMul", {&a, &az, &az, &b, &bs, &bz, &ys, &yz}, {&y})),
            "QLinearMatMul: a_scale has dtype u8, supported: f32");
  EXPECT_EQ(message(run("QLinearMatMul", {&a, &as, &as, &b, &bs, &bz, &ys, &yz}, {&y})),
            "QLinearMatMul: a_zero_point has dtype f32, supported: u8, i8");
  EXPECT_EQ(infer("QLinearMatMul", {{DType::kU8, {1, 2}}, {}, {}, {DType::kU8, {2, 1}}, {}, {}, {},
                                    {DType::kI32, {}}})
                .status()
                .code(),
            StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace loom::kernels::nntest
