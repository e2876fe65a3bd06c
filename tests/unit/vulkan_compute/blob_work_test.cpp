// The work executable_estimate counts in a vulkan-compute blob
// (blob_work.hpp), from each dispatch's push constants and bindings: known
// matmul and conv dispatches give the FLOPs and bytes worked out by hand,
// and the FLOPs the tiled shaders execute; a copy moves its box only.
#include "loom/vulkan_compute/blob_work.hpp"

#include <gtest/gtest.h>

#include "blob_test_util.hpp"

#include "loom/vulkan_compute/kernels.hpp"

namespace loom::vulkan {
namespace {

using test_util::add_tensor;

TEST(VulkanBlobWork, MatMulIsTwiceMnkFlopsAndWholeTilesExecuted) {
  BlobProgram p;
  const uint32_t a = add_tensor(&p, TensorKind::kInput, {2, 3});
  const uint32_t b = add_tensor(&p, TensorKind::kInput, {3, 4});
  const uint32_t y = add_tensor(&p, TensorKind::kOutput, {2, 4});
  MatMulParams mp;
  mp.m = 2;
  mp.n = 4;
  mp.k = 3;
  mp.a_stride = 6;
  mp.b_stride = 12;
  p.dispatches.push_back(make_matmul(mp, a, b, a, y));
  std::string error;
  ASSERT_TRUE(validate_dispatch(p, 0, &error)) << error;
  const DispatchWork w = dispatch_work(p, 0);
  EXPECT_EQ(w.kind, WorkKind::kMatMul);
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 2 * 4 * 3);
  // a is bound twice (as C without bias) and counted once.
  EXPECT_DOUBLE_EQ(w.bytes, (6 + 12 + 8) * 4.0);
  // One 128 x 128 tile, K padded to one slice of 16.
  EXPECT_DOUBLE_EQ(w.executed_flops, 2.0 * 128 * 128 * 16);
}

TEST(VulkanBlobWork, ConvCountsItsGroupsChannelsAndTiles) {
  BlobProgram p;
  const uint32_t x = add_tensor(&p, TensorKind::kInput, {1, 2, 5, 5});
  const uint32_t w = add_tensor(&p, TensorKind::kInput, {4, 2, 3, 3});
  const uint32_t y = add_tensor(&p, TensorKind::kOutput, {1, 4, 3, 3});
  ConvParams cp;
  cp.c = 2;
  cp.h = cp.w = 5;
  cp.m = 4;
  cp.oh = cp.ow = 3;
  cp.kh = cp.kw = 3;
  p.dispatches.push_back(make_conv(cp, x, w, x, y));
  std::string error;
  ASSERT_TRUE(validate_dispatch(p, 0, &error)) << error;
  const DispatchWork d = dispatch_work(p, 0);
  EXPECT_EQ(d.kind, WorkKind::kConv);
  EXPECT_DOUBLE_EQ(d.flops, 2.0 * 36 * 18);
  EXPECT_DOUBLE_EQ(d.bytes, (50 + 72 + 36) * 4.0);
  // One 64 x 64 tile, K = 18 padded to 32.
  EXPECT_DOUBLE_EQ(d.executed_flops, 2.0 * 64 * 64 * 32);
}

TEST(VulkanBlobWork, CopyMovesItsBoxAndComputesNothing) {
  BlobProgram p;
  const uint32_t x = add_tensor(&p, TensorKind::kInput, {4, 6});
  const uint32_t y = add_tensor(&p, TensorKind::kOutput, {2, 6});
  p.dispatches.push_back(make_copy(x, y, {2, 6}, {6, 1}, {6, 1}, 0, 0));
  const DispatchWork d = dispatch_work(p, 0);
  EXPECT_EQ(d.kind, WorkKind::kData);
  EXPECT_DOUBLE_EQ(d.flops, 0.0);
  EXPECT_DOUBLE_EQ(d.bytes, 2 * 12 * 4.0);
}

TEST(VulkanBlobWork, UnaryIsOneFlopPerElement) {
  BlobProgram p;
  const uint32_t x = add_tensor(&p, TensorKind::kInput, {3, 5});
  const uint32_t y = add_tensor(&p, TensorKind::kOutput, {3, 5});
  p.dispatches.push_back(make_unary(UnaryOp::kRelu, x, y, 15));
  const std::vector<DispatchWork> work = program_work(p);
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0].kind, WorkKind::kOther);
  EXPECT_DOUBLE_EQ(work[0].flops, 15.0);
  EXPECT_DOUBLE_EQ(work[0].executed_flops, 15.0);
  EXPECT_DOUBLE_EQ(work[0].bytes, 120.0);
}

}  // namespace
}  // namespace loom::vulkan
