// Reshape, Flatten, Squeeze, Unsqueeze, Shape, Size, ConstantOfShape, Range.
#include <gtest/gtest.h>

#include <limits>

#include "shape_test_util.hpp"

namespace loom::kernels {
namespace {

using namespace shape_testing;

Shape out_shape(const Result<std::vector<TensorType>>& r) { return (*r)[0].shape; }

TEST(ShapeReshape, CopiesDimsInfersMinusOneAndKeepsBytes) {
  Tensor x = f32({2, 3, 4}, iota(24));
  auto r = call("Reshape", {x, ints({0, -1, 2})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, (Shape{2, 6, 2}));
  EXPECT_EQ((*r)[0].values<float>(), iota(24));
  // Any dtype: the bytes move unchanged.
  Tensor b = make<uint8_t>(DType::kU8, {4}, {1, 2, 3, 4});
  auto rb = call("Reshape", {b, ints({2, 2})});
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ((*rb)[0].values<uint8_t>(), (std::vector<uint8_t>{1, 2, 3, 4}));
}

TEST(ShapeReshape, AllowZeroKeepsZeroDimensions) {
  Tensor x = f32({0, 3}, {});
  auto keep = infer_all("Reshape", {x, ints({3, 0})}, {attr_int("allowzero", 1)}, 14);
  ASSERT_TRUE(keep.ok()) << keep.status().to_string();
  EXPECT_EQ(out_shape(keep), (Shape{3, 0}));
  // Before opset 14 the attribute does not exist: 0 copies the input dim.
  auto copy = infer_all("Reshape", {f32({2, 3}, iota(6)), ints({0, 3})},
                        {attr_int("allowzero", 1)}, 13);
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(out_shape(copy), (Shape{2, 3}));
}

TEST(ShapeReshape, RejectsBadShapes) {
  Tensor x = f32({2, 3}, iota(6));
  EXPECT_FALSE(infer_all("Reshape", {x, ints({-1, -1})}, {}).ok());
  EXPECT_FALSE(infer_all("Reshape", {x, ints({4, 2})}, {}).ok());
  EXPECT_FALSE(infer_all("Reshape", {x, ints({-2, 3})}, {}).ok());
  EXPECT_FALSE(infer_all("Reshape", {x, ints({1, 2, 0})}, {}).ok());  // copies dim 2 of rank 2
  EXPECT_FALSE(infer_all("Reshape", {x, ints({-1, 4})}, {}).ok());
  EXPECT_FALSE(infer_all("Reshape", {x, f32({2}, {2, 3})}, {}).ok());  // shape must be ints
  EXPECT_FALSE(infer_all("Reshape", {x}, {}).ok());
  auto msg = infer_all("Reshape", {x, ints({4, 2})}, {}).status().message();
  EXPECT_NE(msg.find("Reshape"), std::string::npos) << msg;
}

TEST(ShapeReshape, NeedsConstantShape) {
  std::vector<TensorType> in = {{DType::kF32, {2, 3}}, {DType::kI64, {2}}};
  auto r = kernel("Reshape").infer(in, Attributes());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("'shape'"), std::string::npos);
}

TEST(ShapeReshape, RunRejectsMismatchedOutputs) {
  Tensor x = f32({2, 3}, iota(6));
  auto wrong_shape = run_with("Reshape", {x, ints({3, 2})}, {{DType::kF32, {2, 3}}}, {});
  EXPECT_FALSE(wrong_shape.ok());
  auto wrong_dtype = run_with("Reshape", {x, ints({3, 2})}, {{DType::kI32, {3, 2}}}, {});
  EXPECT_FALSE(wrong_dtype.ok());
  auto two = run_with("Reshape", {x, ints({3, 2})}, {{DType::kF32, {3, 2}}, {DType::kF32, {3, 2}}}, {});
  EXPECT_FALSE(two.ok());
  // An input whose byte size disagrees with its shape.
  Tensor short_x = x;
  short_x.bytes.resize(8);
  EXPECT_FALSE(run_with("Reshape", {short_x, ints({3, 2})}, {{DType::kF32, {3, 2}}}, {}).ok());
}

TEST(ShapeFlatten, AxisDefaultsNegativeAndRange) {
  Tensor x = f32({2, 3, 4}, iota(24));
  EXPECT_EQ(out_shape(infer_all("Flatten", {x}, {})), (Shape{2, 12}));
  EXPECT_EQ(out_shape(infer_all("Flatten", {x}, {attr_int("axis", 0)})), (Shape{1, 24}));
  EXPECT_EQ(out_shape(infer_all("Flatten", {x}, {attr_int("axis", 3)})), (Shape{24, 1}));
  EXPECT_EQ(out_shape(infer_all("Flatten", {x}, {attr_int("axis", -1)}, 13)), (Shape{6, 4}));
  EXPECT_FALSE(infer_all("Flatten", {x}, {attr_int("axis", -1)}, 9).ok());
  EXPECT_FALSE(infer_all("Flatten", {x}, {attr_int("axis", 4)}).ok());
  EXPECT_FALSE(infer_all("Flatten", {x}, {attr_int("axis", -4)}).ok());
  auto r = call("Flatten", {x}, {attr_int("axis", 2)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].values<float>(), iota(24));
}

TEST(ShapeSqueeze, AxesFromAttributeOrInputOrAllOnes) {
  Tensor x = f32({1, 3, 1, 2}, iota(6));
  EXPECT_EQ(out_shape(infer_all("Squeeze", {x}, {})), (Shape{3, 2}));
  EXPECT_EQ(out_shape(infer_all("Squeeze", {x}, {attr_ints("axes", {-2})}, 11)), (Shape{1, 3, 2}));
  EXPECT_EQ(out_shape(infer_all("Squeeze", {x, ints({0})}, {}, 13)), (Shape{3, 1, 2}));
  EXPECT_FALSE(infer_all("Squeeze", {x, ints({1})}, {}, 13).ok());     // dim is 3
  EXPECT_FALSE(infer_all("Squeeze", {x, ints({4})}, {}, 13).ok());     // out of range
  EXPECT_FALSE(infer_all("Squeeze", {x, ints({0, 0})}, {}, 13).ok());  // repeated
  EXPECT_FALSE(infer_all("Squeeze", {x, ints({0})}, {}, 11).ok());     // input before 13
  auto r = call("Squeeze", {x}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].values<float>(), iota(6));
}

TEST(ShapeUnsqueeze, InsertsAxesInOutputPositions) {
  Tensor x = f32({3, 4}, iota(12));
  EXPECT_EQ(out_shape(infer_all("Unsqueeze", {x}, {attr_ints("axes", {0, 3})}, 11)),
            (Shape{1, 3, 4, 1}));
  EXPECT_EQ(out_shape(infer_all("Unsqueeze", {x, ints({-1, 1})}, {}, 13)), (Shape{3, 1, 4, 1}));
  EXPECT_FALSE(infer_all("Unsqueeze", {x}, {attr_ints("axes", {-1})}, 9).ok());
  EXPECT_FALSE(infer_all("Unsqueeze", {x}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Unsqueeze", {x, ints({3})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Unsqueeze", {x, ints({1, -3})}, {}, 13).ok());  // same axis twice
  auto r = call("Unsqueeze", {x, ints({0})}, {}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].values<float>(), iota(12));
}

TEST(ShapeShapeAndSize, WriteI64) {
  Tensor x = f32({2, 3, 5}, iota(30));
  auto s = call("Shape", {x});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0].dtype, DType::kI64);
  EXPECT_EQ((*s)[0].values<int64_t>(), (std::vector<int64_t>{2, 3, 5}));
  auto window = call("Shape", {x}, {attr_int("start", -2), attr_int("end", 10)}, 15);
  ASSERT_TRUE(window.ok());
  EXPECT_EQ((*window)[0].values<int64_t>(), (std::vector<int64_t>{3, 5}));
  auto empty = call("Shape", {x}, {attr_int("start", 2), attr_int("end", 1)}, 15);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE((*empty)[0].values<int64_t>().empty());
  // Before opset 15 start/end do not exist.
  auto old = call("Shape", {x}, {attr_int("start", 1)}, 13);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ((*old)[0].values<int64_t>().size(), 3u);
  auto n = call("Size", {x});
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE((*n)[0].shape.empty());
  EXPECT_EQ((*n)[0].values<int64_t>(), (std::vector<int64_t>{30}));
  EXPECT_FALSE(infer_all("Size", {x, x}, {}).ok());
}

TEST(ShapeConstantOfShape, DefaultZeroAndTensorValue) {
  auto zero = call("ConstantOfShape", {ints({2, 3})});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ((*zero)[0].dtype, DType::kF32);
  EXPECT_EQ((*zero)[0].values<float>(), std::vector<float>(6, 0.0f));
  auto sevens = call("ConstantOfShape", {ints({2})}, {attr_tensor("value", i64({1}, {7}))});
  ASSERT_TRUE(sevens.ok());
  EXPECT_EQ((*sevens)[0].dtype, DType::kI64);
  EXPECT_EQ((*sevens)[0].values<int64_t>(), (std::vector<int64_t>{7, 7}));
  auto scalar = call("ConstantOfShape", {ints({})});
  ASSERT_TRUE(scalar.ok());
  EXPECT_TRUE((*scalar)[0].shape.empty());
  EXPECT_FALSE(infer_all("ConstantOfShape", {ints({2})}, {attr_tensor("value", i64({2}, {1, 2}))}).ok());
  EXPECT_FALSE(infer_all("ConstantOfShape", {ints({-1})}, {}).ok());
  EXPECT_FALSE(infer_all("ConstantOfShape", {ints({1ll << 40, 1ll << 40})}, {}).ok());
  EXPECT_FALSE(infer_all("ConstantOfShape", {ints({2})}, {attr_int("value", 3)}).ok());
}

TEST(ShapeRange, FloatAndIntegerTypes) {
  auto f = call("Range", {f32({}, {1}), f32({}, {2.5f}), f32({}, {0.5f})});
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ((*f)[0].values<float>(), (std::vector<float>{1, 1.5f, 2}));
  auto i = call("Range", {i32({}, {10}), i32({}, {4}), i32({}, {-3})});
  ASSERT_TRUE(i.ok());
  EXPECT_EQ((*i)[0].values<int32_t>(), (std::vector<int32_t>{10, 7}));
  auto s = call("Range", {make<int16_t>(DType::kI16, {}, {0}), make<int16_t>(DType::kI16, {}, {3}),
                          make<int16_t>(DType::kI16, {}, {1})});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0].values<int16_t>(), (std::vector<int16_t>{0, 1, 2}));
  auto none = call("Range", {i64({}, {5}), i64({}, {1}), i64({}, {1})});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)[0].shape, (Shape{0}));
}

TEST(ShapeRange, Errors) {
  EXPECT_FALSE(infer_all("Range", {i64({}, {0}), i64({}, {5}), i64({}, {0})}, {}).ok());
  EXPECT_FALSE(infer_all("Range", {i64({}, {0}), i32({}, {5}), i64({}, {1})}, {}).ok());
  EXPECT_FALSE(infer_all("Range", {i64({2}, {0, 1}), i64({}, {5}), i64({}, {1})}, {}).ok());
  EXPECT_FALSE(infer_all("Range", {i64({}, {0}), i64({}, {std::numeric_limits<int64_t>::max()}),
                                   i64({}, {1})}, {}).ok());
  auto u8 = infer_all("Range", {make<uint8_t>(DType::kU8, {}, {0}), make<uint8_t>(DType::kU8, {}, {1}),
                                make<uint8_t>(DType::kU8, {}, {1})}, {});
  ASSERT_FALSE(u8.ok());
  EXPECT_EQ(u8.status().code(), StatusCode::kUnimplemented);
  std::vector<TensorType> unknown = {{DType::kI64, {}}, {DType::kI64, {}}, {DType::kI64, {}}};
  EXPECT_EQ(kernel("Range").infer(unknown, Attributes()).status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace loom::kernels
