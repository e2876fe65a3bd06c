// NonZero, Compress, Unique and NonMaxSuppression: output shapes decided by
// operand values (needs_constant when those are unknown), values worked by
// hand, and the error paths.
#include <gtest/gtest.h>

#include <limits>

#include "reduce_test_util.hpp"

namespace loom::kernels::reduce_testing {
namespace {

TEST(NonZero, CoordinatesInRowMajorOrder) {
  Call r = call("NonZero", {f32({2, 2}, {1, 0, 0, 3})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.out[0].shape, (Shape{2, 2}));
  EXPECT_EQ(r.out[0].values<int64_t>(), (std::vector<int64_t>{0, 1, 0, 1}));
  auto open = infer_types("NonZero", {TensorType{DType::kF32, {2, 2}, nullptr}});
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().code(), StatusCode::kFailedPrecondition);
}

TEST(Compress, AlongAnAxisFlatAndErrors) {
  Tens x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  Call rows = call("Compress", {x, bools({3}, {0, 1, 1})}, {iattr("axis", 0)});
  ASSERT_TRUE(rows.status.ok()) << rows.status.message();
  EXPECT_EQ(rows.out[0].shape, (Shape{2, 2}));
  EXPECT_EQ(rows.out[0].values<float>(), (std::vector<float>{3, 4, 5, 6}));
  Call flat = call("Compress", {x, bools({2}, {0, 1})});
  ASSERT_TRUE(flat.status.ok());
  EXPECT_EQ(flat.out[0].values<float>(), (std::vector<float>{2}));
  EXPECT_TRUE(contains(call("Compress", {x, bools({4}, {1, 1, 1, 1})}, {iattr("axis", 0)}).status,
                       "Compress: operand 'condition' has 4 entries, more than the 3 slices along the axis"));
  EXPECT_TRUE(contains(call("Compress", {x, i64({3}, {1, 1, 1})}, {iattr("axis", 0)}).status,
                       "operand 'condition' must be bool"));
  EXPECT_TRUE(contains(call("Compress", {x, bools({1}, {1})}, {iattr("axis", 2)}).status,
                       "Compress: axis 2 out of range for rank 2"));
}

TEST(Unique, SortedUnsortedAndAlongAnAxis) {
  Tens x = f32({6}, {2, 1, 1, 3, 4, 3});
  Call s = call("Unique", {x});
  ASSERT_TRUE(s.status.ok()) << s.status.message();
  EXPECT_EQ(s.out[0].values<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(s.out[1].values<int64_t>(), (std::vector<int64_t>{1, 0, 3, 4}));
  EXPECT_EQ(s.out[2].values<int64_t>(), (std::vector<int64_t>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(s.out[3].values<int64_t>(), (std::vector<int64_t>{2, 1, 2, 1}));
  Call u = call("Unique", {x}, {iattr("sorted", 0)});
  ASSERT_TRUE(u.status.ok());
  EXPECT_EQ(u.out[0].values<float>(), (std::vector<float>{2, 1, 3, 4}));
  Call rows = call("Unique", {f32({3, 2}, {1, 2, 0, 1, 1, 2})}, {iattr("axis", 0)});
  ASSERT_TRUE(rows.status.ok());
  EXPECT_EQ(rows.out[0].shape, (Shape{2, 2}));
  EXPECT_EQ(rows.out[0].values<float>(), (std::vector<float>{0, 1, 1, 2}));
  EXPECT_EQ(rows.out[2].values<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_TRUE(contains(call("Unique", {x}, {iattr("sorted", 2)}).status, "attribute 'sorted' must be 0 or 1"));
  EXPECT_TRUE(contains(call("Unique", {x}, {iattr("axis", 1)}).status, "Unique: axis 1 out of range"));
}

TEST(NonMaxSuppression, SuppressesByIouPerClassAndChecksOperands) {
  // Box 1 overlaps box 0 (IoU 0.81); box 2 is apart.
  Tens boxes = f32({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 10, 1, 11});
  Tens scores = f32({1, 1, 3}, {0.9f, 0.8f, 0.7f});
  Tens max_out = i64({1}, {3});
  Tens iou = f32({1}, {0.5f});
  Call r = call("NonMaxSuppression", {boxes, scores, max_out, iou});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.out[0].shape, (Shape{2, 3}));
  EXPECT_EQ(r.out[0].values<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0, 0, 2}));
  // Without max_output_boxes_per_class nothing is selected.
  Call none = call("NonMaxSuppression", {boxes, scores});
  ASSERT_TRUE(none.status.ok());
  EXPECT_EQ(none.out[0].shape, (Shape{0, 3}));
  EXPECT_TRUE(contains(call("NonMaxSuppression", {boxes, f32({1, 1, 2}, {1, 1})}).status,
                       "'boxes' must be [B, N, 4] and 'scores' [B, C, N]"));
  EXPECT_TRUE(contains(call("NonMaxSuppression", {boxes, scores, i64({2}, {1, 1})}).status,
                       "operand 'max_output_boxes_per_class' must hold one value"));
  EXPECT_TRUE(contains(call("NonMaxSuppression", {boxes, scores, max_out}, {iattr("center_point_box", 3)}).status,
                       "attribute 'center_point_box' must be 0 or 1"));
}

TEST(GridSampleAndDet, ValuesAndErrors) {
  // The grid's corners with align_corners read the image's corners.
  Tens x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tens grid = f32({1, 1, 2, 2}, {-1, -1, 1, 1});
  Call gs = call("GridSample", {x, grid}, {iattr("align_corners", 1)});
  ASSERT_TRUE(gs.status.ok()) << gs.status.message();
  expect_near_all(gs.out[0].values<float>(), {1, 4});
  // The centre, bilinear: the mean.
  Call mid = call("GridSample", {x, f32({1, 1, 1, 2}, {0, 0})});
  ASSERT_TRUE(mid.status.ok());
  expect_near_all(mid.out[0].values<float>(), {2.5f});
  EXPECT_TRUE(contains(call("GridSample", {x, grid}, {str_attr("mode", "area")}).status, "unknown 'mode' 'area'"));
  EXPECT_TRUE(contains(call("GridSample", {x, f32({1, 1, 1, 3}, {0, 0, 0})}).status,
                       "'grid' must be [N, H_out, W_out, 2]"));
  EXPECT_TRUE(contains(call("GridSample", {f32({1, 1, 2}, {1, 2}), grid}).status, "must be 4-D"));
  Tens inf_grid = f32({1, 1, 1, 2}, {std::numeric_limits<float>::infinity(), 0});
  EXPECT_TRUE(contains(call("GridSample", {x, inf_grid}).status, "not finite"));

  Call det = call("Det", {f32({2, 2, 2}, {1, 2, 3, 4, 0, 1, 1, 0})});
  ASSERT_TRUE(det.status.ok()) << det.status.message();
  expect_near_all(det.out[0].values<float>(), {-2, -1});
  EXPECT_TRUE(contains(call("Det", {f32({2, 3}, {1, 2, 3, 4, 5, 6})}).status, "Det: input 'X' must be [*, M, M]"));
}

}  // namespace
}  // namespace loom::kernels::reduce_testing
