// The work executable_estimate counts in a cpu-simd blob (blob_work.hpp):
// known MatMul, Gemm and Conv graphs give the FLOPs and bytes worked out by
// hand, data movement counts bytes only, and an open-shape graph has no
// work (its estimate is 0, "none").
#include <gtest/gtest.h>

#include "blob_fuzz_support.hpp"
#include "loom/cpu_simd/blob_work.hpp"

namespace loom::cpu_simd {
namespace {

using Builder = testing::BlobBuilder;

// Decodes `g` once encoded, so the counts are those of what the plugin reads.
BlobGraph round_trip(const BlobGraph& g) {
  const std::vector<std::byte> bytes = encode(g);
  BlobGraph d;
  std::string error;
  EXPECT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
  return d;
}

TEST(BlobWork, MatMulIsTwiceMnkFlopsAndEveryOperandsBytes) {
  Builder b;
  const uint32_t a = b.t({2, 3}), w = b.t({3, 4}), y = b.t({2, 4});
  b.g.inputs = {a, w};
  b.g.outputs = {y};
  b.node(Op::kMatMul, {a, w}, y);
  std::vector<NodeWork> work;
  ASSERT_TRUE(graph_work(round_trip(b.g), &work));
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].kind, WorkKind::kMatMul);
  EXPECT_DOUBLE_EQ(work[0].flops, 2.0 * 2 * 4 * 3);       // 48
  EXPECT_DOUBLE_EQ(work[0].bytes, (6 + 12 + 8) * 4.0);     // 104
  EXPECT_DOUBLE_EQ(work[0].elements, 8.0);
}

TEST(BlobWork, BatchedMatMulCountsEveryBatch) {
  Builder b;
  const uint32_t a = b.t({5, 2, 3}), w = b.t({5, 3, 4}), y = b.t({5, 2, 4});
  b.g.inputs = {a, w};
  b.g.outputs = {y};
  b.node(Op::kMatMul, {a, w}, y);
  std::vector<NodeWork> work;
  ASSERT_TRUE(graph_work(round_trip(b.g), &work));
  EXPECT_DOUBLE_EQ(work[0].flops, 5 * 2.0 * 2 * 4 * 3);
}

TEST(BlobWork, GemmWithTransposedAAndBiasAddsOneFlopPerOutput) {
  Builder b;
  // A is stored K x M (trans_a): K = 3, M = 2; B is 3 x 4; C broadcasts.
  const uint32_t a = b.t({3, 2}), w = b.t({3, 4}), c = b.t({4}), y = b.t({2, 4});
  b.g.inputs = {a, w, c};
  b.g.outputs = {y};
  b.node(Op::kGemm, {a, w, c}, y).trans_a = 1;
  std::vector<NodeWork> work;
  ASSERT_TRUE(graph_work(round_trip(b.g), &work));
  EXPECT_EQ(work[0].kind, WorkKind::kMatMul);
  EXPECT_DOUBLE_EQ(work[0].flops, 2.0 * 2 * 4 * 3 + 8);
  EXPECT_DOUBLE_EQ(work[0].bytes, (6 + 12 + 4 + 8) * 4.0);
}

TEST(BlobWork, ConvIsTwiceOutputsTimesWeightsPerOutputChannel) {
  Builder b;
  // x [1,2,5,5], w [4,2,3,3], no padding: y [1,4,3,3].
  const uint32_t x = b.t({1, 2, 5, 5});
  const uint32_t w = b.constant({4, 2, 3, 3}, std::vector<float>(72, 0.25f));
  const uint32_t y = b.t({1, 4, 3, 3});
  b.g.inputs = {x};
  b.g.outputs = {y};
  b.node(Op::kConv, {x, w}, y).ints = {2, 1, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0};
  std::vector<NodeWork> work;
  ASSERT_TRUE(graph_work(round_trip(b.g), &work));
  EXPECT_EQ(work[0].kind, WorkKind::kConv);
  EXPECT_DOUBLE_EQ(work[0].flops, 2.0 * 36 * 18);           // 1296
  EXPECT_DOUBLE_EQ(work[0].bytes, (50 + 72 + 36) * 4.0);     // 632
}

TEST(BlobWork, GroupedConvCountsOnlyItsGroupsChannels) {
  Builder b;
  // Depthwise: 4 groups of one channel, w [4,1,3,3], pad 1: y [1,4,5,5].
  const uint32_t x = b.t({1, 4, 5, 5});
  const uint32_t w = b.constant({4, 1, 3, 3}, std::vector<float>(36, 0.25f));
  const uint32_t y = b.t({1, 4, 5, 5});
  b.g.inputs = {x};
  b.g.outputs = {y};
  b.node(Op::kConv, {x, w}, y).ints = {2, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  std::vector<NodeWork> work;
  ASSERT_TRUE(graph_work(round_trip(b.g), &work));
  EXPECT_DOUBLE_EQ(work[0].flops, 2.0 * 100 * 9);
}

TEST(BlobWork, ElementwiseIsOneFlopPerOutputAndDataMovementNone) {
  Builder b;
  const uint32_t x = b.t({2, 3}), r = b.t({2, 3}), t = b.t({3, 2});
  b.g.inputs = {x};
  b.g.outputs = {t};
  b.node(Op::kRelu, {x}, r);
  b.node(Op::kTranspose, {r}, t).ints = {1, 0};
  std::vector<NodeWork> work;
  ASSERT_TRUE(graph_work(round_trip(b.g), &work));
  ASSERT_EQ(work.size(), 2u);
  EXPECT_EQ(work[0].kind, WorkKind::kOther);
  EXPECT_DOUBLE_EQ(work[0].flops, 6.0);
  EXPECT_DOUBLE_EQ(work[0].bytes, 48.0);
  EXPECT_EQ(work[1].kind, WorkKind::kData);
  EXPECT_DOUBLE_EQ(work[1].flops, 0.0);
  EXPECT_DOUBLE_EQ(work[1].bytes, 48.0);
}

TEST(BlobWork, OpenShapesHaveNoWork) {
  Builder b;
  const uint32_t x = b.t({-1, 3}), y = b.t({-1, 3});
  b.g.inputs = {x};
  b.g.outputs = {y};
  b.node(Op::kRelu, {x}, y);
  std::vector<NodeWork> work = {NodeWork{}};
  EXPECT_FALSE(graph_work(round_trip(b.g), &work));
  EXPECT_TRUE(work.empty());
}

}  // namespace
}  // namespace loom::cpu_simd
