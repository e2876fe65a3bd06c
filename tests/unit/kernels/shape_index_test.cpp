// GatherElements, ScatterElements, Scatter, GatherND, ScatterND, OneHot,
// ReverseSequence, Trilu.
#include <gtest/gtest.h>

#include <limits>

#include "shape_test_util.hpp"

namespace loom::kernels {
namespace {

using namespace shape_testing;

TEST(ShapeGatherElements, PicksAlongAxis) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  auto r = call("GatherElements", {x, i64({2, 2}, {0, 0, 1, 0})}, {attr_int("axis", 1)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].values<float>(), (std::vector<float>{1, 1, 4, 3}));
  auto neg = call("GatherElements", {x, i32({1, 2}, {-1, 0})}, {});
  ASSERT_TRUE(neg.ok());
  EXPECT_EQ((*neg)[0].values<float>(), (std::vector<float>{3, 2}));
  EXPECT_EQ(call("GatherElements", {x, i64({1, 1}, {2})}, {}).status().code(),
            StatusCode::kOutOfRange);
  EXPECT_FALSE(infer_all("GatherElements", {x, i64({2}, {0, 0})}, {}).ok());        // rank
  EXPECT_FALSE(infer_all("GatherElements", {x, i64({1, 3}, {0, 0, 0})}, {}).ok());  // too wide
  EXPECT_FALSE(infer_all("GatherElements", {x, f32({1, 1}, {0})}, {}).ok());
}

TEST(ShapeScatterElements, WritesAndReduces) {
  Tensor x = f32({1, 4}, {1, 2, 3, 4});
  Tensor idx = i64({1, 2}, {1, 1});
  Tensor upd = f32({1, 2}, {10, 20});
  auto add = call("ScatterElements", {x, idx, upd}, {attr_int("axis", 1), attr_str("reduction", "add")}, 16);
  ASSERT_TRUE(add.ok()) << add.status().to_string();
  EXPECT_EQ((*add)[0].values<float>(), (std::vector<float>{1, 32, 3, 4}));
  auto mul = call("ScatterElements", {x, idx, upd}, {attr_int("axis", 1), attr_str("reduction", "mul")}, 16);
  ASSERT_TRUE(mul.ok());
  EXPECT_EQ((*mul)[0].values<float>(), (std::vector<float>{1, 400, 3, 4}));
  auto plain = call("Scatter", {x, i64({1, 1}, {-1}), f32({1, 1}, {9})}, {attr_int("axis", 1)}, 9);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)[0].values<float>(), (std::vector<float>{1, 2, 3, 9}));
  EXPECT_FALSE(infer_all("ScatterElements", {x, idx, f32({1, 3}, {1, 2, 3})}, {}).ok());
  EXPECT_FALSE(infer_all("ScatterElements", {x, idx, upd}, {attr_str("reduction", "maximum")}).ok());
  EXPECT_EQ(call("ScatterElements", {x, i64({1, 1}, {4}), f32({1, 1}, {0})}, {attr_int("axis", 1)})
                .status().code(),
            StatusCode::kOutOfRange);
}

TEST(ShapeGatherNd, TuplesAndBatchDims) {
  Tensor x = i32({2, 2}, {0, 1, 2, 3});
  auto r = call("GatherND", {x, i64({2, 2}, {0, 0, 1, 1})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, (Shape{2}));
  EXPECT_EQ((*r)[0].values<int32_t>(), (std::vector<int32_t>{0, 3}));
  auto rows = call("GatherND", {x, i64({2, 1}, {1, 0})});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0].values<int32_t>(), (std::vector<int32_t>{2, 3, 0, 1}));
  auto batch = call("GatherND", {x, i64({2, 1}, {1, 0})}, {attr_int("batch_dims", 1)}, 12);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ((*batch)[0].values<int32_t>(), (std::vector<int32_t>{1, 2}));
  EXPECT_FALSE(infer_all("GatherND", {x, i64({1, 3}, {0, 0, 0})}, {}).ok());
  EXPECT_FALSE(infer_all("GatherND", {x, i64({1, 1}, {0})}, {attr_int("batch_dims", 2)}, 12).ok());
  EXPECT_EQ(call("GatherND", {x, i64({1, 2}, {0, 2})}).status().code(), StatusCode::kOutOfRange);
}

TEST(ShapeScatterNd, WritesSlices) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  auto r = call("ScatterND", {x, i64({1, 1}, {1}), f32({1, 2}, {7, 8})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].values<float>(), (std::vector<float>{1, 2, 7, 8}));
  auto add = call("ScatterND", {x, i64({2, 2}, {0, 0, 0, 0}), f32({2}, {5, 6})},
                  {attr_str("reduction", "add")}, 16);
  ASSERT_TRUE(add.ok());
  EXPECT_EQ((*add)[0].values<float>(), (std::vector<float>{12, 2, 3, 4}));
  EXPECT_FALSE(infer_all("ScatterND", {x, i64({1, 1}, {1}), f32({2}, {7, 8})}, {}).ok());
  EXPECT_FALSE(infer_all("ScatterND", {x, i64({1, 3}, {0, 0, 0}), f32({1}, {7})}, {}).ok());
  EXPECT_EQ(call("ScatterND", {x, i64({1, 1}, {-3}), f32({1, 2}, {7, 8})}).status().code(),
            StatusCode::kOutOfRange);
}

TEST(ShapeOneHot, AxisDepthAndNegativeIndices) {
  Tensor idx = i64({2}, {1, -1});
  auto r = call("OneHot", {idx, f32({}, {3}), f32({2}, {0, 5})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape, (Shape{2, 3}));
  EXPECT_EQ((*r)[0].values<float>(), (std::vector<float>{0, 5, 0, 0, 0, 5}));
  auto ax0 = call("OneHot", {idx, i64({1}, {3}), i32({2}, {0, 1})}, {attr_int("axis", 0)});
  ASSERT_TRUE(ax0.ok());
  EXPECT_EQ((*ax0)[0].shape, (Shape{3, 2}));
  EXPECT_EQ((*ax0)[0].values<int32_t>(), (std::vector<int32_t>{0, 0, 1, 0, 0, 1}));
  auto far = call("OneHot", {i64({1}, {7}), f32({}, {3}), f32({2}, {0, 1})});
  ASSERT_TRUE(far.ok());
  EXPECT_EQ((*far)[0].values<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_FALSE(infer_all("OneHot", {idx, f32({}, {0}), f32({2}, {0, 1})}, {}).ok());
  EXPECT_FALSE(infer_all("OneHot", {idx, f32({}, {3}), f32({3}, {0, 1, 2})}, {}).ok());
  EXPECT_FALSE(infer_all("OneHot", {idx, f32({}, {3}), f32({2}, {0, 1})}, {attr_int("axis", 2)}).ok());
}

TEST(ShapeReverseSequence, ReversesEachBatchPrefix) {
  // time_axis 0, batch_axis 1: x[t][b].
  Tensor x = f32({3, 2}, {0, 10, 1, 11, 2, 12});
  auto r = call("ReverseSequence", {x, i64({2}, {3, 2})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].values<float>(), (std::vector<float>{2, 11, 1, 10, 0, 12}));
  EXPECT_FALSE(infer_all("ReverseSequence", {x, i64({3}, {1, 1, 1})}, {}).ok());
  EXPECT_FALSE(infer_all("ReverseSequence", {x, i64({2}, {1, 1})}, {attr_int("batch_axis", 0)}).ok());
  EXPECT_EQ(call("ReverseSequence", {x, i64({2}, {4, 1})}).status().code(), StatusCode::kOutOfRange);
}

TEST(ShapeTrilu, UpperLowerWithK) {
  Tensor x = i64({2, 3}, {1, 2, 3, 4, 5, 6});
  auto up = call("Trilu", {x});
  ASSERT_TRUE(up.ok()) << up.status().to_string();
  EXPECT_EQ((*up)[0].values<int64_t>(), (std::vector<int64_t>{1, 2, 3, 0, 5, 6}));
  auto low = call("Trilu", {x, i64({}, {-1})}, {attr_int("upper", 0)});
  ASSERT_TRUE(low.ok());
  EXPECT_EQ((*low)[0].values<int64_t>(), (std::vector<int64_t>{0, 0, 0, 4, 0, 0}));
  auto huge = call("Trilu", {x, i64({}, {std::numeric_limits<int64_t>::min()})});
  ASSERT_TRUE(huge.ok());
  EXPECT_EQ((*huge)[0].values<int64_t>(), x.values<int64_t>());
  EXPECT_FALSE(infer_all("Trilu", {i64({3}, {1, 2, 3})}, {}).ok());
  EXPECT_FALSE(infer_all("Trilu", {x, i32({}, {1})}, {}).ok());
}

}  // namespace
}  // namespace loom::kernels

namespace loom::kernels {
namespace {

using namespace shape_testing;

// Every op of the family rejects missing, absent and mistyped operands with
// an error naming it, never a crash.
TEST(ShapeFamily, MissingOrAbsentOperandsAreErrors) {
  const char* ops[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Shape", "Size",
                       "ConstantOfShape", "Range", "Transpose", "Concat", "Split", "Slice",
                       "Gather", "Expand", "Tile", "DepthToSpace", "SpaceToDepth", "Pad",
                       "Resize", "Upsample", "GatherElements", "ScatterElements", "Scatter",
                       "GatherND", "ScatterND", "OneHot", "ReverseSequence", "Trilu"};
  const Tensor x = f32({2, 2}, {1, 2, 3, 4});
  for (const char* op : ops) {
    const KernelInfo& k = kernel(op);
    auto none = k.infer({}, Attributes());
    EXPECT_FALSE(none.ok()) << op;
    if (!none.ok()) EXPECT_NE(none.status().message().find(op), std::string::npos) << op;
    EXPECT_FALSE(k.run({}, {}, Attributes()).ok()) << op;
    for (size_t n = 1; n <= 4; ++n) {
      std::vector<TensorType> absent(n);
      EXPECT_FALSE(k.infer(absent, Attributes()).ok()) << op << " with " << n << " absent";
      std::vector<TensorRef> refs(n);
      const TensorRef out = x.ref();
      EXPECT_FALSE(k.run(refs, {&out, 1}, Attributes()).ok()) << op;
    }
    // An output the kernel cannot have written: no outputs at all.
    std::vector<TensorRef> ins = {x.ref()};
    EXPECT_FALSE(k.run(ins, {}, Attributes()).ok()) << op;
  }
}

}  // namespace
}  // namespace loom::kernels
