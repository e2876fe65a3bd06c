// Conv, ConvTranspose, ConvInteger and QLinearConv: hand-computed cases, the
// attribute forms, and every error path.
#include "nn_test_util.hpp"

namespace loom::kernels::nntest {
namespace {

// ------------------------------------------------------------------ Conv

TEST(Conv, TwoDWithBias) {
  TBuf x = f32({1, 1, 3, 3}, iota(9));
  TBuf w = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  TBuf b = f32({1}, {1});
  TBuf y = infer_and_run("Conv", {&x, &w, &b}, {1, 1, 2, 2});
  expect_near(y.values<float>(), {13, 17, 25, 29});
  TBuf y2 = infer_and_run("Conv", {&x, &w, nullptr}, {1, 1, 2, 2});
  expect_near(y2.values<float>(), {12, 16, 24, 28});
}

TEST(Conv, PadsAndStrides) {
  TBuf x = f32({1, 1, 3, 3}, iota(9));
  TBuf w = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  TBuf y = infer_and_run("Conv", {&x, &w}, {1, 1, 2, 2},
                         {ints("pads", {1, 1, 1, 1}), ints("strides", {2, 2})});
  expect_near(y.values<float>(), {1, 5, 11, 28});
}

TEST(Conv, DepthwiseGroups) {
  TBuf x = f32({1, 2, 1, 2}, {1, 2, 3, 4});
  TBuf w = f32({2, 1, 1, 1}, {2, 3});
  TBuf y = infer_and_run("Conv", {&x, &w}, {1, 2, 1, 2}, {iattr("group", 2)});
  expect_near(y.values<float>(), {2, 4, 9, 12});
}

TEST(Conv, DilationsAndOneD) {
  TBuf x = f32({1, 1, 1, 5}, iota(5));
  TBuf w = f32({1, 1, 1, 2}, {1, 1});
  TBuf y = infer_and_run("Conv", {&x, &w}, {1, 1, 1, 3}, {ints("dilations", {1, 2})});
  expect_near(y.values<float>(), {4, 6, 8});
  TBuf x1 = f32({1, 1, 4}, iota(4));
  TBuf w1 = f32({1, 1, 2}, {1, -1});
  TBuf y1 = infer_and_run("Conv", {&x1, &w1}, {1, 1, 3}, {ints("kernel_shape", {2})});
  expect_near(y1.values<float>(), {-1, -1, -1});
}

TEST(Conv, AutoPadSameUpperAndLowerPutTheOddPixelOnOppositeSides) {
  TBuf x = f32({1, 1, 4}, iota(4));
  TBuf w = f32({1, 1, 3}, {1, 1, 1});
  TBuf up = infer_and_run("Conv", {&x, &w}, {1, 1, 2},
                          {sattr("auto_pad", "SAME_UPPER"), ints("strides", {2})});
  expect_near(up.values<float>(), {6, 7});
  TBuf lo = infer_and_run("Conv", {&x, &w}, {1, 1, 2},
                          {sattr("auto_pad", "SAME_LOWER"), ints("strides", {2})});
  expect_near(lo.values<float>(), {3, 9});
  TBuf valid = infer_and_run("Conv", {&x, &w}, {1, 1, 2},
                             {sattr("auto_pad", "VALID"), ints("pads", {5, 5})});
  expect_near(valid.values<float>(), {6, 9});
}

TEST(Conv, ThreeDShape) {
  auto t = infer("Conv", {{DType::kF32, {1, 2, 4, 4, 4}}, {DType::kF32, {3, 2, 3, 3, 3}}},
                 {ints("pads", {1, 1, 1, 1, 1, 1})});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)[0].shape, (Shape{1, 3, 4, 4, 4}));
  // All-ones 3-D: each output sums its window of ones (corner: 2*2*2*2).
  TBuf x = f32({1, 2, 2, 2, 2}, std::vector<float>(16, 1));
  TBuf w = f32({1, 2, 3, 3, 3}, std::vector<float>(54, 1));
  TBuf y = infer_and_run("Conv", {&x, &w}, {1, 1, 2, 2, 2}, {ints("pads", {1, 1, 1, 1, 1, 1})});
  expect_near(y.values<float>(), std::vector<float>(8, 16));
}

TEST(Conv, Errors) {
  const TensorType x{DType::kF32, {1, 2, 5, 5}};
  EXPECT_TRUE(contains(infer("Conv", {x, {DType::kF32, {1, 2, 3}}}).status(), "W has shape [1, 2, 3]"));
  EXPECT_TRUE(contains(infer("Conv", {x, {DType::kF32, {4, 1, 3, 3}}}).status(), "group 1 does not fit"));
  EXPECT_TRUE(contains(infer("Conv", {x, {DType::kF32, {3, 1, 3, 3}}}, {iattr("group", 2)}).status(),
                       "group 2 does not fit"));
  EXPECT_TRUE(contains(infer("Conv", {x, {DType::kF32, {4, 1, 3, 3}}}, {iattr("group", 0)}).status(),
                       "group 0"));
  EXPECT_TRUE(contains(infer("Conv", {x, {DType::kF32, {4, 1, 3, 3}}}, {iattr("group", int64_t{1} << 62)}).status(),
                       "does not fit"));
  EXPECT_TRUE(contains(infer("Conv", {x, {DType::kF32, {-4, 2, 3, 3}}}).status(), "W has a negative dimension"));
  EXPECT_TRUE(contains(infer("ConvTranspose", {x, {DType::kF32, {2, -1, 3, 3}}}).status(),
                       "W has a negative dimension"));
  const TensorType w{DType::kF32, {4, 2, 3, 3}};
  EXPECT_TRUE(contains(infer("Conv", {x, w}, {ints("strides", {1})}).status(),
                       "attribute 'strides' has 1 values, expected 2"));
  EXPECT_TRUE(contains(infer("Conv", {x, w}, {ints("strides", {0, 1})}).status(), "'strides' value 0"));
  EXPECT_TRUE(contains(infer("Conv", {x, w}, {ints("pads", {1, 1, -1, 1})}).status(), "'pads' value -1"));
  EXPECT_TRUE(contains(infer("Conv", {x, w}, {ints("dilations", {3, 3})}).status(), "exceeds the padded input"));
  EXPECT_TRUE(contains(infer("Conv", {x, w}, {sattr("auto_pad", "SAME")}).status(), "'auto_pad' is 'SAME'"));
  EXPECT_TRUE(contains(infer("Conv", {x, w}, {ints("kernel_shape", {2, 2})}).status(),
                       "'kernel_shape' [2, 2] disagrees with W"));
  EXPECT_TRUE(contains(infer("Conv", {x, w, {DType::kF32, {3}}}).status(), "B has shape [3], expected [4]"));
  Status s = infer("Conv", {{DType::kF64, {1, 2, 5, 5}}, w}).status();
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(message(s), "Conv: X has dtype f64, supported: f32");
  EXPECT_TRUE(contains(infer("Conv", {{DType::kF32, {1, 2}}, w}).status(), "must have rank 3-5"));
  EXPECT_TRUE(contains(infer("Conv", {x}).status(), "takes 2 to 3 inputs, got 1"));
  // run: wrong output shape, short buffers, wrong output count.
  TBuf xb = f32({1, 1, 3, 3}, iota(9));
  TBuf wb = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  TBuf y = out({1, 1, 3, 3});
  EXPECT_EQ(message(run("Conv", {&xb, &wb}, {&y})), "Conv: output Y is [1, 1, 3, 3], expected [1, 1, 2, 2]");
  TBuf shortx = xb;
  shortx.bytes.resize(8);
  TBuf y2 = out({1, 1, 2, 2});
  EXPECT_TRUE(contains(run("Conv", {&shortx, &wb}, {&y2}), "X of shape [1, 1, 3, 3] needs 36 bytes, has 8"));
  EXPECT_TRUE(contains(run("Conv", {&xb, &wb}, {&y2, &y2}), "produces 1 outputs, got 2"));
}

// ------------------------------------------------------------ ConvTranspose

TEST(ConvTranspose, StridesPadsOutputPaddingOutputShape) {
  TBuf x = f32({1, 1, 3}, {1, 2, 3});
  TBuf w = f32({1, 1, 2}, {1, 1});
  expect_near(infer_and_run("ConvTranspose", {&x, &w}, {1, 1, 4}).values<float>(), {1, 3, 5, 3});
  expect_near(infer_and_run("ConvTranspose", {&x, &w}, {1, 1, 6}, {ints("strides", {2})}).values<float>(),
              {1, 1, 2, 2, 3, 3});
  expect_near(infer_and_run("ConvTranspose", {&x, &w}, {1, 1, 4},
                            {ints("strides", {2}), ints("pads", {1, 1})})
                  .values<float>(),
              {1, 2, 2, 3});
  expect_near(infer_and_run("ConvTranspose", {&x, &w}, {1, 1, 7},
                            {ints("strides", {2}), ints("output_padding", {1})})
                  .values<float>(),
              {1, 1, 2, 2, 3, 3, 0});
  // SAME_UPPER: output = input * stride, the odd padding at the end.
  TBuf w3 = f32({1, 1, 3}, {1, 1, 1});
  expect_near(infer_and_run("ConvTranspose", {&x, &w3}, {1, 1, 6},
                            {ints("strides", {2}), sattr("auto_pad", "SAME_UPPER")})
                  .values<float>(),
              {1, 1, 3, 2, 5, 3});
  auto t = infer("ConvTranspose", {{DType::kF32, {1, 1, 3, 3}}, {DType::kF32, {1, 2, 3, 3}}},
                 {ints("strides", {3, 2}), ints("output_shape", {10, 8})});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)[0].shape, (Shape{1, 2, 10, 8}));
}

TEST(ConvTranspose, GroupsAndBias) {
  TBuf x = f32({1, 2, 1}, {1, 2});
  TBuf w = f32({2, 1, 1}, {2, 3});
  TBuf b = f32({2}, {10, 20});
  expect_near(infer_and_run("ConvTranspose", {&x, &w, &b}, {1, 2, 1}, {iattr("group", 2)}).values<float>(),
              {12, 26});
  // Without groups each input channel reaches every output channel.
  TBuf w2 = f32({2, 2, 1}, {1, 2, 3, 4});
  expect_near(infer_and_run("ConvTranspose", {&x, &w2}, {1, 2, 1}).values<float>(), {7, 10});
}

TEST(ConvTranspose, Errors) {
  const TensorType x{DType::kF32, {1, 2, 3}};
  EXPECT_TRUE(contains(infer("ConvTranspose", {x, {DType::kF32, {3, 1, 2}}}).status(), "need W[0] == C"));
  EXPECT_TRUE(contains(infer("ConvTranspose", {x, {DType::kF32, {2, 1, 2}}}, {iattr("group", 3)}).status(),
                       "group 3"));
  const TensorType w{DType::kF32, {2, 1, 2}};
  EXPECT_TRUE(contains(infer("ConvTranspose", {x, w}, {ints("output_shape", {4, 4})}).status(),
                       "'output_shape' [4, 4]"));
  EXPECT_TRUE(contains(infer("ConvTranspose", {x, w}, {ints("pads", {3, 3})}).status(), "negative output size"));
  EXPECT_TRUE(contains(infer("ConvTranspose", {x, w}, {ints("output_padding", {1, 1})}).status(),
                       "'output_padding' has 2 values"));
  EXPECT_TRUE(contains(infer("ConvTranspose", {x, w, {DType::kF32, {2}}}).status(), "B has shape [2], expected [1]"));
  EXPECT_EQ(infer("ConvTranspose", {{DType::kF16, {1, 2, 3}}, w}).status().code(), StatusCode::kUnimplemented);
  TBuf xb = f32({1, 2, 3}, iota(6));
  TBuf wb = f32({2, 1, 2}, {1, 1, 1, 1});
  TBuf y = out({1, 1, 3});
  EXPECT_EQ(message(run("ConvTranspose", {&xb, &wb}, {&y})),
            "ConvTranspose: output Y is [1, 1, 3], expected [1, 1, 4]");
}

// ------------------------------------------------------------ ConvInteger

TEST(ConvInteger, ZeroPointsAndDtypes) {
  TBuf x = typed<uint8_t>(DType::kU8, {1, 1, 2, 2}, {2, 3, 4, 5});
  TBuf zp = typed<uint8_t>(DType::kU8, {}, {1});
  TBuf w = typed<uint8_t>(DType::kU8, {1, 1, 1, 1}, {2});
  TBuf y = infer_and_run("ConvInteger", {&x, &w, &zp}, {1, 1, 2, 2});
  EXPECT_EQ(y.dtype, DType::kI32);
  EXPECT_EQ(y.values<int32_t>(), (std::vector<int32_t>{2, 4, 6, 8}));
  TBuf wi = typed<int8_t>(DType::kI8, {1, 1, 1, 1}, {-3});
  TBuf wzp = typed<int8_t>(DType::kI8, {1}, {-1});
  TBuf y2 = infer_and_run("ConvInteger", {&x, &wi, nullptr, &wzp}, {1, 1, 2, 2});
  EXPECT_EQ(y2.values<int32_t>(), (std::vector<int32_t>{-4, -6, -8, -10}));
  TBuf bad = typed<int8_t>(DType::kI8, {3}, {1, 2, 3});
  TBuf y3 = out(DType::kI32, {1, 1, 2, 2});
  EXPECT_TRUE(contains(run("ConvInteger", {&x, &wi, nullptr, &bad}, {&y3}),
                       "w_zero_point must be a scalar or have 1 elements"));
  Status s = infer("ConvInteger", {{DType::kI32, {1, 1, 2, 2}}, {DType::kU8, {1, 1, 1, 1}}}).status();
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(message(s), "ConvInteger: x has dtype i32, supported: u8, i8");
}

// ------------------------------------------------------------ QLinearConv

TEST(QLinearConv, PerChannelWeightsBiasAndRounding) {
  TBuf x = typed<uint8_t>(DType::kU8, {1, 1, 1, 2}, {10, 20});
  TBuf xs = f32({}, {0.5f});
  TBuf xz = typed<uint8_t>(DType::kU8, {}, {10});
  TBuf w = typed<int8_t>(DType::kI8, {2, 1, 1, 1}, {2, -1});
  TBuf ws = f32({2}, {1.0f, 0.5f});
  TBuf wz = typed<int8_t>(DType::kI8, {2}, {0, 0});
  TBuf ys = f32({}, {1.0f});
  TBuf yz = typed<uint8_t>(DType::kU8, {}, {128});
  TBuf b = typed<int32_t>(DType::kI32, {2}, {2, 0});
  TBuf y = infer_and_run("QLinearConv", {&x, &xs, &xz, &w, &ws, &wz, &ys, &yz, &b}, {1, 2, 1, 2});
  EXPECT_EQ(y.dtype, DType::kU8);
  // ch0: ((0, 10) * 2 + 2) * 0.5 = (1, 11); ch1: (0, -10) * 0.25 = (0, -2.5 -> -2).
  EXPECT_EQ(y.values<uint8_t>(), (std::vector<uint8_t>{129, 139, 128, 126}));
  TBuf bad_scale = f32({3}, {1, 1, 1});
  TBuf y2 = out(DType::kU8, {1, 2, 1, 2});
  EXPECT_TRUE(contains(run("QLinearConv", {&x, &xs, &xz, &w, &bad_scale, &wz, &ys, &yz}, {&y2}),
                       "w_scale must be a scalar or have 2 elements"));
  TBuf zero = f32({}, {0.0f});
  EXPECT_TRUE(contains(run("QLinearConv", {&x, &xs, &xz, &w, &ws, &wz, &zero, &yz}, {&y2}),
                       "y_scale is 0; a quantization scale must be positive and finite"));
  TBuf y_wrong = out(DType::kI8, {1, 2, 1, 2});
  EXPECT_EQ(run("QLinearConv", {&x, &xs, &xz, &w, &ws, &wz, &ys, &yz}, {&y_wrong}).code(),
            StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(run("QLinearConv", {&x, &xs, &xz, &w}, {&y2}), "takes 8 to 9 inputs"));
}

}  // namespace
}  // namespace loom::kernels::nntest
