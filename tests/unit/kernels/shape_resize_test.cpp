// Resize and Upsample.
#include <gtest/gtest.h>

#include "shape_test_util.hpp"

namespace loom::kernels {
namespace {

using namespace shape_testing;

Tensor floats(const std::vector<float>& v) { return f32({static_cast<int64_t>(v.size())}, v); }

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << "element " << i;
}

TEST(ShapeResize, NearestHalfPixelRepeats) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  auto r = call("Resize", {x, absent(), floats({1, 1, 2, 2})}, {}, 13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, (Shape{1, 1, 4, 4}));
  EXPECT_EQ((*r)[0].values<float>(),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(ShapeResize, NearestModesPickDifferentNeighbours) {
  // Downsampling 4 -> 3 with asymmetric: x = o * 4/3 = 0, 1.33, 2.67.
  Tensor x = f32({4}, {0, 10, 20, 30});
  auto with = [&](const char* mode) {
    return call("Resize", {x, absent(), absent(), ints({3})},
                {attr_str("coordinate_transformation_mode", "asymmetric"),
                 attr_str("nearest_mode", mode)}, 13);
  };
  auto floor = with("floor"), ceil = with("ceil"), rpf = with("round_prefer_floor");
  ASSERT_TRUE(floor.ok() && ceil.ok() && rpf.ok()) << floor.status().to_string();
  EXPECT_EQ((*floor)[0].values<float>(), (std::vector<float>{0, 10, 20}));
  EXPECT_EQ((*ceil)[0].values<float>(), (std::vector<float>{0, 20, 30}));
  EXPECT_EQ((*rpf)[0].values<float>(), (std::vector<float>{0, 10, 30}));
}

TEST(ShapeResize, LinearAlignCornersAndConstantCubic) {
  Tensor x = f32({1, 2}, {0, 3});
  auto r = call("Resize", {x, absent(), absent(), ints({1, 4})},
                {attr_str("mode", "linear"), attr_str("coordinate_transformation_mode", "align_corners")},
                13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_near((*r)[0].values<float>(), {0, 1, 2, 3});
  // Cubic weights sum to one: a constant stays constant, with or without
  // exclude_outside.
  Tensor c = f32({3, 3}, std::vector<float>(9, 2.5f));
  for (int exclude : {0, 1}) {
    auto cub = call("Resize", {c, absent(), floats({1.7f, 0.6f})},
                    {attr_str("mode", "cubic"), attr_int("exclude_outside", exclude)}, 13);
    ASSERT_TRUE(cub.ok()) << cub.status().to_string();
    EXPECT_EQ((*cub)[0].shape, (Shape{5, 1}));
    expect_near((*cub)[0].values<float>(), std::vector<float>(5, 2.5f));
  }
}

TEST(ShapeResize, TfCropAndResizeExtrapolates) {
  Tensor x = f32({1, 3}, {0, 10, 20});
  Tensor roi = floats({0, 0.5f, 1, 1.5f});
  auto r = call("Resize", {x, roi, floats({}), ints({1, 3})},
                {attr_str("mode", "linear"),
                 attr_str("coordinate_transformation_mode", "tf_crop_and_resize"),
                 attr_float("extrapolation_value", 5)}, 11);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_near((*r)[0].values<float>(), {10, 20, 5});
  // Without a roi the mode is an error.
  EXPECT_FALSE(call("Resize", {x, absent(), absent(), ints({1, 3})},
                    {attr_str("coordinate_transformation_mode", "tf_crop_and_resize")}, 13).ok());
}

TEST(ShapeResize, Opset10AndUpsampleAreAsymmetricFloor) {
  Tensor x = f32({1, 2}, {0, 4});
  auto r10 = call("Resize", {x, floats({1, 2})}, {}, 10);
  ASSERT_TRUE(r10.ok()) << r10.status().to_string();
  EXPECT_EQ((*r10)[0].values<float>(), (std::vector<float>{0, 0, 4, 4}));
  auto u7 = call("Upsample", {x}, {attr_floats("scales", {1, 2}), attr_str("mode", "linear")}, 7);
  ASSERT_TRUE(u7.ok()) << u7.status().to_string();
  expect_near((*u7)[0].values<float>(), {0, 2, 4, 4});
  auto u9 = call("Upsample", {x, floats({1, 2})}, {}, 9);
  ASSERT_TRUE(u9.ok());
  EXPECT_EQ((*u9)[0].values<float>(), (std::vector<float>{0, 0, 4, 4}));
  EXPECT_FALSE(infer_all("Upsample", {x}, {}, 7).ok());
  EXPECT_FALSE(infer_all("Upsample", {x, floats({1, 2})}, {}, 7).ok());
  EXPECT_FALSE(infer_all("Upsample", {x, floats({1, 2})}, {attr_str("mode", "cubic")}, 9).ok());
}

TEST(ShapeResize, Errors) {
  Tensor x = f32({1, 2}, {0, 4});
  auto both = infer_all("Resize", {x, absent(), floats({1, 2}), ints({1, 4})}, {}, 13);
  EXPECT_FALSE(both.ok());
  EXPECT_FALSE(infer_all("Resize", {x, absent(), floats({2})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Resize", {x, absent(), floats({1, 0})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Resize", {x, absent(), floats({1, -1})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Resize", {x, absent(), absent(), ints({1, -4})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Resize", {x, absent(), absent(), ints({1})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Resize", {x, absent(), floats({1, 2})}, {attr_str("mode", "area")}, 13).ok());
  EXPECT_FALSE(infer_all("Resize", {x, absent(), floats({1, 2})},
                         {attr_str("coordinate_transformation_mode", "x")}, 13).ok());
  EXPECT_FALSE(infer_all("Resize", {x, absent(), floats({1, 2})},
                         {attr_str("nearest_mode", "x")}, 13).ok());
  EXPECT_FALSE(infer_all("Resize", {x}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Resize", {x, absent(), absent(), absent()}, {}, 13).ok());
  auto dtype = infer_all("Resize", {i64({1, 2}, {0, 4}), absent(), floats({1, 2})}, {}, 13);
  ASSERT_FALSE(dtype.ok());
  EXPECT_EQ(dtype.status().code(), StatusCode::kUnimplemented);
  std::vector<TensorType> unknown = {{DType::kF32, {1, 2}}, {}, {DType::kF32, {2}}};
  EXPECT_EQ(kernel("Resize").infer(unknown, Attributes({}, 13)).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_FALSE(run_with("Resize", {x, absent(), floats({1, 2})}, {{DType::kF32, {1, 3}}}, {}, 13).ok());
}

}  // namespace
}  // namespace loom::kernels
