// RoiAlign and MaxUnpool: values and error paths.
//
// The expected values were computed by an independent numpy evaluation
// written for these tests (bilinear samples per bin, averaged or the largest
// weighted corner; a scatter into zeros), not onnx's reference implementation.
#include <gtest/gtest.h>

#include "nn_test_util.hpp"

namespace loom::kernels::nntest {
namespace {

const TBuf kX = f32({2, 2, 4, 5}, {-3.0f, -2.5f, -2.0f, -1.5f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 4.5f, 5.0f, 5.5f, 6.0f, 6.5f, 7.0f, 7.5f, 8.0f, 8.5f, 9.0f, 9.5f, 10.0f, 10.5f, 11.0f, 11.5f, 12.0f, 12.5f, 13.0f, 13.5f, 14.0f, 14.5f, 15.0f, 15.5f, 16.0f, 16.5f, 17.0f, 17.5f, 18.0f, 18.5f, 19.0f, 19.5f, 20.0f, 20.5f, 21.0f, 21.5f, 22.0f, 22.5f, 23.0f, 23.5f, 24.0f, 24.5f, 25.0f, 25.5f, 26.0f, 26.5f, 27.0f, 27.5f, 28.0f, 28.5f, 29.0f, 29.5f, 30.0f, 30.5f, 31.0f, 31.5f, 32.0f, 32.5f, 33.0f, 33.5f, 34.0f, 34.5f, 35.0f, 35.5f, 36.0f, 36.5f});
const TBuf kRois = f32({3, 4}, {0.5f, 0.5f, 3.2f, 2.9f, 1.0f, 0.0f, 4.0f, 3.0f, -0.5f, 1.0f, 1.5f, 5.0f});
const TBuf kBatch = typed<int64_t>(DType::kI64, {3}, {1, 0, 1});

TEST(RoiAlign, AverageHalfPixel) {
  TBuf y = infer_and_run("RoiAlign", {&kX, &kRois, &kBatch}, {3, 2, 2, 3},
                         {iattr("output_height", 2), iattr("output_width", 3), iattr("sampling_ratio", 2)});
  expect_near(y.values<float>(), {18.725f, 19.175f, 19.625f, 21.725f, 22.175f, 22.625f, 28.725f, 29.175f, 29.625f, 31.725f, 32.175f, 32.625f, -1.71875f, -1.21875f, -0.71875f, 1.875f, 2.375f, 2.875f, 8.28125f, 8.78125f, 9.28125f, 11.875f, 12.375f, 12.875f, 20.75f, 20.79167f, 21.08333f, 24.5f, 24.54167f, 24.83333f, 30.75f, 30.79167f, 31.08333f, 34.5f, 34.54167f, 34.83333f});
}

TEST(RoiAlign, AverageOutputHalfPixelAdaptiveSamplingAndScale) {
  const std::vector<AttributeDef> attrs{iattr("output_height", 2), iattr("output_width", 2),
                                        fattr("spatial_scale", 0.5f),
                                        sattr("coordinate_transformation_mode", "output_half_pixel")};
  const std::vector<float> want = {18.66875f, 19.00625f, 20.16875f, 20.50625f, 28.66875f, 29.00625f, 30.16875f, 30.50625f, -1.625f, -1.25f, 0.25f, 0.625f, 8.375f, 8.75f, 10.25f, 10.625f, 19.5f, 19.75f, 22.0f, 22.25f, 29.5f, 29.75f, 32.0f, 32.25f};
  expect_near(infer_and_run("RoiAlign", {&kX, &kRois, &kBatch}, {3, 2, 2, 2}, attrs).values<float>(), want);
  // Opset 10 has no attribute: it always behaves as output_half_pixel.
  const std::vector<AttributeDef> v10{iattr("output_height", 2), iattr("output_width", 2),
                                      fattr("spatial_scale", 0.5f)};
  expect_near(infer_and_run("RoiAlign", {&kX, &kRois, &kBatch}, {3, 2, 2, 2}, v10, 10).values<float>(), want);
}

TEST(RoiAlign, MaxTakesTheLargestWeightedCorner) {
  TBuf y = infer_and_run("RoiAlign", {&kX, &kRois, &kBatch}, {3, 2, 2, 2},
                         {iattr("output_height", 2), iattr("output_width", 2), iattr("sampling_ratio", 2),
                          sattr("mode", "max")});
  expect_near(y.values<float>(), {17.775f, 12.68437f, 19.99688f, 14.23125f, 26.6625f, 18.87188f, 28.88437f, 20.41875f, 0.1953125f, 0.546875f, 1.914062f, 2.679688f, 6.5625f, 7.4375f, 9.570312f, 10.33594f, 22.0f, 16.875f, 24.5f, 18.75f, 32.0f, 24.375f, 34.5f, 26.25f});
}

TEST(RoiAlign, BadOperandsAreErrorsNamingTheOperand) {
  TBuf y = out({3, 2, 1, 1});
  const TBuf bad_batch = typed<int64_t>(DType::kI64, {3}, {0, 2, 0});
  EXPECT_EQ(message(run("RoiAlign", {&kX, &kRois, &bad_batch}, {&y})),
            "RoiAlign: input 'batch_indices' holds 2 at 1; X has 2 images");
  const TBuf rois3 = f32({3, 3}, iota(9));
  EXPECT_TRUE(contains(run("RoiAlign", {&kX, &rois3, &kBatch}, {&y}), "input 'rois' must be [num_rois, 4]"));
  const TBuf x3 = f32({2, 4, 5}, iota(40));
  EXPECT_TRUE(contains(run("RoiAlign", {&x3, &kRois, &kBatch}, {&y}), "input 'X' must be 4-D"));
  const TBuf batch2 = typed<int64_t>(DType::kI64, {2}, {0, 0});
  EXPECT_TRUE(contains(run("RoiAlign", {&kX, &kRois, &batch2}, {&y}), "'batch_indices' must be [3]"));
  EXPECT_TRUE(contains(run("RoiAlign", {&kX, &kRois, &kBatch}, {&y}, {sattr("mode", "median")}),
                       "attribute 'mode' is 'median'"));
  EXPECT_TRUE(contains(run("RoiAlign", {&kX, &kRois, &kBatch}, {&y}, {iattr("output_height", 0)}),
                       "'output_height'"));
}

const TBuf kUx = f32({1, 2, 2, 2}, {1.5f, -2.0f, 3.0f, 4.0f, 5.0f, 6.0f, -7.0f, 8.0f});
const TBuf kUi = typed<int64_t>(DType::kI64, {1, 2, 2, 2}, {0, 6, 12, 15, 16, 21, 27, 31});

// I indexes the default shape [1, 2, 4, 4]; a larger output_shape keeps each
// element's coordinates.
TEST(MaxUnpool, OutputShapeGivenKeepsCoordinatesOfTheDefaultShape) {
  const TBuf shape = typed<int64_t>(DType::kI64, {4}, {1, 2, 4, 5});
  const std::vector<AttributeDef> attrs{ints("kernel_shape", {2, 2}), ints("strides", {2, 2})};
  // The infer function needs output_shape's values.
  auto t = infer("MaxUnpool", {{DType::kF32, {1, 2, 2, 2}}, {DType::kI64, {1, 2, 2, 2}}, {DType::kI64, {4}}}, attrs);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kFailedPrecondition);
  const TensorRef shape_ref = shape.ref();
  t = infer("MaxUnpool", {{DType::kF32, {1, 2, 2, 2}}, {DType::kI64, {1, 2, 2, 2}}, {DType::kI64, {4}, &shape_ref}},
            attrs);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)[0].shape, (Shape{1, 2, 4, 5}));
  TBuf y = out({1, 2, 4, 5});
  ASSERT_TRUE(run("MaxUnpool", {&kUx, &kUi, &shape}, {&y}, attrs).ok());
  expect_near(y.values<float>(), {1.5f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, -2.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 3.0f, 0.0f, 0.0f, 4.0f, 0.0f, 5.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 6.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, -7.0f, 0.0f, 0.0f, 0.0f, 0.0f, 8.0f, 0.0f});
}

TEST(MaxUnpool, DefaultShapeAndErrors) {
  const TBuf i = typed<int64_t>(DType::kI64, {1, 2, 2, 2}, {0, 5, 10, 15, 16, 21, 26, 31});
  TBuf y = infer_and_run("MaxUnpool", {&kUx, &i}, {1, 2, 4, 4}, {ints("kernel_shape", {2, 2}), ints("strides", {2, 2})});
  const std::vector<float> got = y.values<float>();
  EXPECT_EQ(got[0], 1.5f);
  EXPECT_EQ(got[5], -2.0f);
  EXPECT_EQ(got[31], 8.0f);
  EXPECT_EQ(got[1], 0.0f);
  // Pads shrink the default shape: (2 - 1) * 2 - 1 - 0 + 3 = 4.
  infer_and_run("MaxUnpool", {&kUx, &i}, {1, 2, 4, 4},
                {ints("kernel_shape", {3, 3}), ints("strides", {2, 2}), ints("pads", {1, 1, 0, 0})});
  const std::vector<AttributeDef> attrs{ints("kernel_shape", {2, 2}), ints("strides", {2, 2})};
  const TBuf far = typed<int64_t>(DType::kI64, {1, 2, 2, 2}, {0, 5, 10, 15, 16, 21, 26, 32});
  TBuf y2 = out({1, 2, 4, 4});
  EXPECT_EQ(message(run("MaxUnpool", {&kUx, &far}, {&y2}, attrs)),
            "MaxUnpool: input 'I' holds 32 at flat position 7; the default output [1, 2, 4, 4] has 32 "
            "elements");
  const TBuf i_shape = typed<int64_t>(DType::kI64, {1, 2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_TRUE(contains(run("MaxUnpool", {&kUx, &i_shape}, {&y2}, attrs), "input 'I' has shape [1, 2, 4]"));
  const TBuf small = typed<int64_t>(DType::kI64, {4}, {1, 2, 3, 3});
  EXPECT_TRUE(contains(run("MaxUnpool", {&kUx, &i, &small}, {&y2}, attrs), "at least the default [1, 2, 4, 4]"));
  EXPECT_TRUE(contains(run("MaxUnpool", {&kUx, &i}, {&y2}, {ints("kernel_shape", {2})}), "'kernel_shape' has 1"));
}

}  // namespace
}  // namespace loom::kernels::nntest
