// Transpose, Concat, Split, Slice, Gather, Expand, Tile, DepthToSpace,
// SpaceToDepth, Pad.
#include <gtest/gtest.h>

#include <limits>

#include "shape_test_util.hpp"

namespace loom::kernels {
namespace {

using namespace shape_testing;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(ShapeTranspose, DefaultReversesAndPermMoves) {
  Tensor x = f32({2, 3}, iota(6));
  auto r = call("Transpose", {x});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].shape, (Shape{3, 2}));
  EXPECT_EQ((*r)[0].values<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor y = i32({2, 1, 3}, {0, 1, 2, 3, 4, 5});
  auto p = call("Transpose", {y}, {attr_ints("perm", {2, 0, 1})});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)[0].shape, (Shape{3, 2, 1}));
  EXPECT_EQ((*p)[0].values<int32_t>(), (std::vector<int32_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_FALSE(infer_all("Transpose", {y}, {attr_ints("perm", {0, 1})}).ok());
  EXPECT_FALSE(infer_all("Transpose", {y}, {attr_ints("perm", {0, 1, 1})}).ok());
  EXPECT_FALSE(infer_all("Transpose", {y}, {attr_ints("perm", {0, 1, 3})}).ok());
}

TEST(ShapeConcat, JoinsAlongAxis) {
  Tensor a = f32({2, 1}, {1, 2});
  Tensor b = f32({2, 2}, {3, 4, 5, 6});
  auto r = call("Concat", {a, b}, {attr_int("axis", -1)}, 13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, (Shape{2, 3}));
  EXPECT_EQ((*r)[0].values<float>(), (std::vector<float>{1, 3, 4, 2, 5, 6}));
  auto r0 = call("Concat", {a, a}, {attr_int("axis", 0)});
  ASSERT_TRUE(r0.ok());
  EXPECT_EQ((*r0)[0].values<float>(), (std::vector<float>{1, 2, 1, 2}));
  EXPECT_FALSE(infer_all("Concat", {a, b}, {attr_int("axis", 0)}).ok());   // shapes differ
  EXPECT_FALSE(infer_all("Concat", {a, b}, {attr_int("axis", -1)}, 7).ok());  // negative before 11
  EXPECT_FALSE(infer_all("Concat", {a, b}, {}).ok());                       // axis required
  EXPECT_FALSE(infer_all("Concat", {a, i64({2, 1}, {1, 2})}, {attr_int("axis", 1)}).ok());
  EXPECT_FALSE(infer_all("Concat", {a, b}, {attr_int("axis", 2)}).ok());
  EXPECT_FALSE(infer_all("Concat", {}, {attr_int("axis", 0)}).ok());
}

TEST(ShapeSplit, SizesFromAttributeOrInput) {
  Tensor x = f32({2, 5}, iota(10));
  auto a = call("Split", {x}, {attr_int("axis", 1), attr_ints("split", {2, 3})}, 11);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[0].values<float>(), (std::vector<float>{0, 1, 5, 6}));
  EXPECT_EQ((*a)[1].values<float>(), (std::vector<float>{2, 3, 4, 7, 8, 9}));
  auto b = call("Split", {x, ints({4, 1})}, {attr_int("axis", -1)}, 13);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)[1].values<float>(), (std::vector<float>{4, 9}));
  EXPECT_FALSE(infer_all("Split", {x, ints({2, 2})}, {attr_int("axis", 1)}, 13).ok());  // sum
  EXPECT_FALSE(infer_all("Split", {x, ints({2, 3})}, {attr_int("axis", 1)}, 11).ok());  // input < 13
  EXPECT_FALSE(infer_all("Split", {x}, {attr_int("axis", 2)}, 13).ok());
}

TEST(ShapeSplit, EqualPartsUseTheOutputCount) {
  Tensor x = f32({6}, iota(6));
  auto r = run_with("Split", {x}, {{DType::kF32, {2}}, {DType::kF32, {2}}, {DType::kF32, {2}}}, {});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[2].values<float>(), (std::vector<float>{4, 5}));
  // infer cannot see the node's outputs: it needs 'num_outputs'.
  EXPECT_FALSE(infer_all("Split", {x}, {}).ok());
  auto t = infer_all("Split", {x}, {attr_int("num_outputs", 2)});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->size(), 2u);
  EXPECT_FALSE(infer_all("Split", {x}, {attr_int("num_outputs", 4)}, 13).ok());  // 6 % 4
  EXPECT_FALSE(run_with("Split", {x}, {{DType::kF32, {3}}, {DType::kF32, {2}}}, {}).ok());
}

TEST(ShapeSlice, AttributesBeforeOpset10) {
  Tensor x = f32({3, 4}, iota(12));
  auto r = call("Slice", {x}, {attr_ints("starts", {1, 0}), attr_ints("ends", {kMax, -1})}, 9);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, (Shape{2, 3}));
  EXPECT_EQ((*r)[0].values<float>(), (std::vector<float>{4, 5, 6, 8, 9, 10}));
  auto ax = call("Slice", {x}, {attr_ints("starts", {2}), attr_ints("ends", {3}),
                                attr_ints("axes", {1})}, 1);
  ASSERT_TRUE(ax.ok());
  EXPECT_EQ((*ax)[0].values<float>(), (std::vector<float>{2, 6, 10}));
}

TEST(ShapeSlice, InputsWithNegativeStepsAndClamping) {
  Tensor x = f32({3, 4}, iota(12));
  auto r = call("Slice", {x, ints({-1, 10}), ints({-kMax, -10}), ints({0, 1}), ints({-2, -3})}, {}, 13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, (Shape{2, 2}));
  EXPECT_EQ((*r)[0].values<float>(), (std::vector<float>{11, 8, 3, 0}));
  auto empty = call("Slice", {x, ints({3}), ints({1}), ints({1})}, {}, 13);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)[0].shape, (Shape{3, 0}));
  EXPECT_FALSE(infer_all("Slice", {x, ints({0}), ints({1}), ints({0}), ints({0})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Slice", {x, ints({0, 0}), ints({1, 1}), ints({1, 1})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Slice", {x, ints({0}), ints({1, 1})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Slice", {x, ints({0}), ints({1}), ints({2})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Slice", {x}, {}, 13).ok());
  std::vector<TensorType> unknown = {{DType::kF32, {3, 4}}, {DType::kI64, {1}}, {DType::kI64, {1}}};
  EXPECT_EQ(kernel("Slice").infer(unknown, Attributes({}, 13)).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(ShapeGather, AxisNegativeIndicesAndRangeErrors) {
  Tensor x = f32({2, 3}, iota(6));
  auto r = call("Gather", {x, i64({2}, {-1, 0})}, {attr_int("axis", 1)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, (Shape{2, 2}));
  EXPECT_EQ((*r)[0].values<float>(), (std::vector<float>{2, 0, 5, 3}));
  auto rows = call("Gather", {x, i32({1, 1}, {1})});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0].shape, (Shape{1, 1, 3}));
  EXPECT_EQ((*rows)[0].values<float>(), (std::vector<float>{3, 4, 5}));
  auto scalar = call("Gather", {x, i64({}, {1})});
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ((*scalar)[0].shape, (Shape{3}));
  auto bad = call("Gather", {x, i64({2}, {0, 3})}, {attr_int("axis", 1)});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("indices[1] = 3"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(call("Gather", {x, i64({1}, {-3})}).ok());
  EXPECT_FALSE(infer_all("Gather", {x, f32({1}, {0})}, {}).ok());
  EXPECT_FALSE(infer_all("Gather", {x, i64({1}, {0})}, {attr_int("axis", 2)}).ok());
}

TEST(ShapeExpandAndTile, Broadcast) {
  Tensor x = f32({3, 1}, {1, 2, 3});
  auto e = call("Expand", {x, ints({2, 1, 2})});
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ((*e)[0].shape, (Shape{2, 3, 2}));
  EXPECT_EQ((*e)[0].values<float>(), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  EXPECT_FALSE(infer_all("Expand", {x, ints({2, 2})}, {}).ok());
  EXPECT_FALSE(infer_all("Expand", {x, ints({-1})}, {}).ok());
  Tensor y = i64({2, 2}, {1, 2, 3, 4});
  auto t = call("Tile", {y, ints({2, 3})});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)[0].shape, (Shape{4, 6}));
  EXPECT_EQ((*t)[0].values<int64_t>(),
            (std::vector<int64_t>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4,
                                  1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  auto zero = call("Tile", {y, ints({0, 1})});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ((*zero)[0].shape, (Shape{0, 2}));
  EXPECT_FALSE(infer_all("Tile", {y, ints({2})}, {}).ok());
  EXPECT_FALSE(infer_all("Tile", {y, ints({-1, 1})}, {}).ok());
  EXPECT_FALSE(infer_all("Tile", {y, ints({kMax, 2})}, {}).ok());
}

TEST(ShapeDepthToSpace, DcrCrdAndSpaceToDepthRoundTrip) {
  Tensor x = f32({1, 4, 1, 1}, {0, 1, 2, 3});
  auto dcr = call("DepthToSpace", {x}, {attr_int("blocksize", 2)});
  ASSERT_TRUE(dcr.ok()) << dcr.status().to_string();
  EXPECT_EQ((*dcr)[0].shape, (Shape{1, 1, 2, 2}));
  EXPECT_EQ((*dcr)[0].values<float>(), (std::vector<float>{0, 1, 2, 3}));
  // 8 channels, block 2: DCR takes depth blocks first, CRD channels first.
  Tensor y = f32({1, 8, 1, 1}, iota(8));
  auto d = call("DepthToSpace", {y}, {attr_int("blocksize", 2)}, 13);
  auto c = call("DepthToSpace", {y}, {attr_int("blocksize", 2), attr_str("mode", "CRD")}, 13);
  ASSERT_TRUE(d.ok() && c.ok());
  EXPECT_EQ((*d)[0].values<float>(), (std::vector<float>{0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_EQ((*c)[0].values<float>(), iota(8));
  Tensor img = f32({1, 2, 4, 4}, iota(32));
  auto s = call("SpaceToDepth", {img}, {attr_int("blocksize", 2)});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0].shape, (Shape{1, 8, 2, 2}));
  auto back = call("DepthToSpace", {(*s)[0]}, {attr_int("blocksize", 2)});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)[0].values<float>(), iota(32));
  EXPECT_FALSE(infer_all("DepthToSpace", {y}, {attr_int("blocksize", 3)}).ok());
  EXPECT_FALSE(infer_all("DepthToSpace", {y}, {}).ok());
  EXPECT_FALSE(infer_all("DepthToSpace", {y}, {attr_int("blocksize", 2), attr_str("mode", "X")}).ok());
  EXPECT_FALSE(infer_all("SpaceToDepth", {f32({1, 1, 3, 4}, iota(12))}, {attr_int("blocksize", 2)}).ok());
  EXPECT_FALSE(infer_all("SpaceToDepth", {f32({4}, iota(4))}, {attr_int("blocksize", 2)}).ok());
}

TEST(ShapePad, ConstantReflectEdgeAndCrop) {
  Tensor x = f32({1, 3}, {1, 2, 3});
  auto c = call("Pad", {x, ints({0, 2, 0, 1}), f32({}, {9})}, {}, 13);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ((*c)[0].values<float>(), (std::vector<float>{9, 9, 1, 2, 3, 9}));
  auto r = call("Pad", {x, ints({0, 2, 0, 3})}, {attr_str("mode", "reflect")}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].values<float>(), (std::vector<float>{3, 2, 1, 2, 3, 2, 1, 2}));
  auto e = call("Pad", {x, ints({1, 1, 0, 0})}, {attr_str("mode", "edge")}, 13);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)[0].shape, (Shape{2, 4}));
  EXPECT_EQ((*e)[0].values<float>(), (std::vector<float>{1, 1, 2, 3, 1, 1, 2, 3}));
  auto crop = call("Pad", {x, ints({0, -1, 0, 1})}, {}, 13);
  ASSERT_TRUE(crop.ok());
  EXPECT_EQ((*crop)[0].values<float>(), (std::vector<float>{2, 3, 0}));
  // Opset 2 form: attributes, a float fill converted to the data's dtype.
  auto old = call("Pad", {i32({2}, {5, 6})}, {attr_ints("pads", {1, 0}), attr_float("value", 7)}, 2);
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  EXPECT_EQ((*old)[0].values<int32_t>(), (std::vector<int32_t>{7, 5, 6}));
}

TEST(ShapePad, Errors) {
  Tensor x = f32({1, 3}, {1, 2, 3});
  EXPECT_FALSE(infer_all("Pad", {x, ints({0, 1})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Pad", {x, ints({0, -2, 0, -2})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Pad", {x, ints({0, 1, 0, 1})}, {attr_str("mode", "wrap")}, 13).ok());
  EXPECT_FALSE(infer_all("Pad", {x, ints({0, 1, 0, 1}), i64({}, {1})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Pad", {x, ints({0, 1, 0, 1}), f32({2}, {1, 2})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Pad", {x}, {}, 2).ok());
  EXPECT_FALSE(infer_all("Pad", {x, ints({0, kMax, 0, 1})}, {}, 13).ok());
  EXPECT_FALSE(infer_all("Pad", {f32({0}, {}), ints({1, 1})}, {attr_str("mode", "edge")}, 13).ok());
}

}  // namespace
}  // namespace loom::kernels
