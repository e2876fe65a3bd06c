// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: hand-computed
// values, weights and ignore_index, and the error paths (a bad target is an
// error naming the element, never a read out of bounds).
#include <gtest/gtest.h>

#include <cmath>

#include "reduce_test_util.hpp"

namespace loom::kernels {
namespace {

using namespace reduce_testing;

TEST(NegativeLogLikelihoodLoss, ReductionsWeightsAndIgnoreIndex) {
  // input [N=2, C=3], target [2].
  Tens x = f32({2, 3}, {-1, -2, -3, -4, -5, -6});
  Tens t = i64({2}, {2, 0});
  Call none = call("NegativeLogLikelihoodLoss", {x, t}, {str_attr("reduction", "none")});
  ASSERT_TRUE(none.status.ok()) << none.status.message();
  EXPECT_EQ(none.out[0].shape, (Shape{2}));
  expect_near_all(none.out[0].values<float>(), {3, 4});
  Call mean = call("NegativeLogLikelihoodLoss", {x, t});
  ASSERT_TRUE(mean.status.ok());
  EXPECT_EQ(mean.out[0].shape, (Shape{}));
  expect_near_all(mean.out[0].values<float>(), {3.5f});
  // Weighted mean divides by the weights of the targets: (3*2 + 4*0.5) / 2.5.
  Tens w = f32({3}, {0.5f, 1, 2});
  Call wmean = call("NegativeLogLikelihoodLoss", {x, t, w});
  ASSERT_TRUE(wmean.status.ok());
  expect_near_all(wmean.out[0].values<float>(), {8.0f / 2.5f});
  // An ignored element counts neither its loss nor its weight.
  Call ignored = call("NegativeLogLikelihoodLoss", {x, t, w},
                      {iattr("ignore_index", 0), str_attr("reduction", "sum")});
  ASSERT_TRUE(ignored.status.ok());
  expect_near_all(ignored.out[0].values<float>(), {6});
}

TEST(NegativeLogLikelihoodLoss, BadTargetsAndShapesAreErrors) {
  Tens x = f32({2, 3}, {-1, -2, -3, -4, -5, -6});
  EXPECT_EQ(call("NegativeLogLikelihoodLoss", {x, i64({2}, {3, 0})}).status.message(),
            "NegativeLogLikelihoodLoss: target 3 at element 0 is outside [0, 3) and is not "
            "'ignore_index'");
  EXPECT_TRUE(contains(call("NegativeLogLikelihoodLoss", {x, i64({2}, {-1, 0})}).status,
                       "target -1 at element 0"));
  EXPECT_TRUE(contains(call("NegativeLogLikelihoodLoss", {x, i64({3}, {0, 0, 0})}).status,
                       "'target' has shape [3]; 'input' [2, 3] needs [2]"));
  EXPECT_TRUE(contains(call("NegativeLogLikelihoodLoss", {x, f32({2}, {0, 0})}).status,
                       "'target' must be int32 or int64"));
  EXPECT_TRUE(contains(call("NegativeLogLikelihoodLoss", {x, i64({2}, {0, 0}), f32({2}, {1, 1})}).status,
                       "'weight' has shape [2]; expected [3]"));
  EXPECT_TRUE(contains(call("NegativeLogLikelihoodLoss", {x, i64({2}, {0, 0})},
                            {str_attr("reduction", "avg")}).status,
                       "unknown 'reduction' 'avg'"));
  EXPECT_TRUE(contains(call("NegativeLogLikelihoodLoss", {f32({3}, {1, 2, 3}), i64({}, {0})}).status,
                       "must have rank 2 or more"));
}

TEST(SoftmaxCrossEntropyLoss, MatchesLogSoftmaxThenNllAndReturnsLogProb) {
  // scores [N=1, C=2, d=2]; log-softmax over C.
  Tens x = f32({1, 2, 2}, {0, 1, 0, 3});
  Tens t = i64({1, 2}, {1, 0});
  Call r = call("SoftmaxCrossEntropyLoss", {x, t}, {str_attr("reduction", "none")});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.out.size(), 2u);
  const float l0 = std::log(2.0f);                  // d=0: scores (0, 0)
  const float l1 = std::log(std::exp(1.0f) + std::exp(3.0f)) - 1.0f;  // d=1, label 0
  expect_near_all(r.out[0].values<float>(), {l0, l1});
  EXPECT_EQ(r.out[1].shape, (Shape{1, 2, 2}));
  EXPECT_NEAR(r.out[1].values<float>()[0], -l0, 1e-6);
  // Only the loss output, as most models use it.
  std::vector<Tens> one_out{empty_like(DType::kF32, {})};
  EXPECT_TRUE(run_with("SoftmaxCrossEntropyLoss", {x, t}, one_out).ok());
  EXPECT_TRUE(contains(call("SoftmaxCrossEntropyLoss", {x, i64({1, 2}, {2, 0})}).status,
                       "SoftmaxCrossEntropyLoss: target 2 at element 0 is outside [0, 2)"));
}

}  // namespace
}  // namespace loom::kernels
