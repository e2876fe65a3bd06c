#include "kernels/broadcast.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace loom::kernels {
namespace {

using Dims = std::vector<int64_t>;

TEST(Broadcast, TrailingAlignedShapesBroadcast) {
  auto s = broadcast_shape("Op", "A", Dims{2, 1, 4}, "B", Dims{3, 1});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(*s, (Shape{2, 3, 4}));
}

TEST(Broadcast, ScalarBroadcastsToAnything) {
  auto s = broadcast_shape("Op", "A", Dims{}, "B", Dims{5, 2});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (Shape{5, 2}));
  auto t = broadcast_shape("Op", "A", Dims{}, "B", Dims{});
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->empty());
}

TEST(Broadcast, ZeroExtentWinsOverOne) {
  auto s = broadcast_shape("Op", "A", Dims{0, 3}, "B", Dims{1, 3});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (Shape{0, 3}));
}

TEST(Broadcast, IncompatibleShapesNameOpOperandsAndAxis) {
  auto s = broadcast_shape("Add", "A", Dims{2, 3}, "B", Dims{4});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "Add: shapes do not broadcast (axis 1: 3 vs 4): A is [2, 3], B is [4]");
}

TEST(Broadcast, NegativeDimensionIsRejected) {
  auto s = broadcast_shape("Add", "A", Dims{-1}, "B", Dims{1});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("negative dimension"), std::string::npos);
}

TEST(Broadcast, RankAboveLimitIsRejected) {
  Dims big(kMaxKernelRank + 1, 1);
  auto s = broadcast_shape("Add", "A", big, "B", Dims{1});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("rank above"), std::string::npos);
}

TEST(Broadcast, IterationVisitsMatchingOffsets) {
  BroadcastPlan plan;
  ASSERT_TRUE(plan_broadcast("Op", "A", Dims{2, 1}, "B", Dims{1, 3}, &plan).ok());
  std::vector<std::array<int64_t, 3>> seen;
  for_each_broadcast(plan, [&](int64_t o, int64_t a, int64_t b) { seen.push_back({o, a, b}); });
  std::vector<std::array<int64_t, 3>> want = {{0, 0, 0}, {1, 0, 1}, {2, 0, 2},
                                              {3, 1, 0}, {4, 1, 1}, {5, 1, 2}};
  EXPECT_EQ(seen, want);
}

TEST(Broadcast, IterationOverThreeDimensionsWithMiddleBroadcast) {
  BroadcastPlan plan;
  ASSERT_TRUE(plan_broadcast("Op", "A", Dims{2, 3, 2}, "B", Dims{2, 1, 2}, &plan).ok());
  std::vector<int64_t> b_offsets;
  for_each_broadcast(plan, [&](int64_t, int64_t, int64_t b) { b_offsets.push_back(b); });
  EXPECT_EQ(b_offsets, (std::vector<int64_t>{0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3}));
}

TEST(Broadcast, EmptyShapeVisitsNothing) {
  BroadcastPlan plan;
  ASSERT_TRUE(plan_broadcast("Op", "A", Dims{0, 2}, "B", Dims{2}, &plan).ok());
  int calls = 0;
  for_each_broadcast(plan, [&](int64_t, int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace loom::kernels
