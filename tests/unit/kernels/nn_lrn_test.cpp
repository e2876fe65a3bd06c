// LRN: values worked by hand and the error paths.
#include <gtest/gtest.h>

#include <cmath>

#include "reduce_test_util.hpp"

namespace loom::kernels::reduce_testing {
namespace {

TEST(Lrn, AcrossChannelsAndErrors) {
  // size 3 over C=3: channel 1 sees all three.
  Tens x = f32({1, 3, 1}, {1, 2, 3});
  Call r = call("LRN", {x}, {iattr("size", 3)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  const double k = 1e-4 / 3;
  expect_near_all(r.out[0].values<float>(),
                  {static_cast<float>(1 / std::pow(1 + k * 5, 0.75)), static_cast<float>(2 / std::pow(1 + k * 14, 0.75)),
                   static_cast<float>(3 / std::pow(1 + k * 13, 0.75))});
  EXPECT_EQ(call("LRN", {x}).status.message(), "LRN: attribute 'size' is required");
  EXPECT_TRUE(contains(call("LRN", {x}, {iattr("size", 0)}).status, "'size' must be positive"));
  EXPECT_TRUE(contains(call("LRN", {f32({3}, {1, 2, 3})}, {iattr("size", 1)}).status, "rank >= 3"));
}

}  // namespace
}  // namespace loom::kernels::reduce_testing
