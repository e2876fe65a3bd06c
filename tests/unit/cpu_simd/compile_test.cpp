// The cpu-simd compile entries through the plugin's C function table:
// graph.fbs built here -> compile_supported / compile -> load -> execute,
// compared with hand-computed values; refusals and malformed input.
#include <cmath>
#include <limits>

#include "compile_support.hpp"

namespace loom::cpu_simd::testing {
namespace {

using F = std::vector<float>;
using Compile = CompileFixture;

// ------------------------------------------------------------------ Conv

TEST_F(Compile, Conv2dWithBiasPadsAndStrides) {
  GraphBuilder b;
  const int x = b.input({1, 1, 3, 3});
  const int w = b.constant_f32({1, 1, 2, 2}, {1, 1, 1, 1});
  const int bias = b.constant_f32({1}, {0.5f});
  const int y = b.tensor({1, 1, 2, 2});
  b.node("Conv", {x, w, bias}, {y}, {attr_ints("pads", {1, 1, 1, 1}), attr_ints("strides", {2, 2})}, 11);
  b.output(y);
  EXPECT_EQ(supported(b), std::vector<bool>{true});
  auto out = run(b, {{{1, 1, 3, 3}, iota(9)}}, {{1, 1, 2, 2}});
  ASSERT_EQ(out.size(), 1u);
  // Windows start at (-1,-1), (-1,1), (1,-1), (1,1).
  expect_near(out[0], {1.5f, 5.5f, 11.5f, 28.5f});
}

TEST_F(Compile, Conv1dDilatedAndSameUpper) {
  GraphBuilder b;
  const int x = b.input({1, 1, 5});
  const int w = b.constant_f32({1, 1, 2}, {1, 10});
  const int y = b.tensor({1, 1, 5});
  // Span 3 with dilation 2: SAME_UPPER pads 1 before and 1 after.
  b.node("Conv", {x, w}, {y}, {attr_s("auto_pad", "SAME_UPPER"), attr_ints("dilations", {2})}, 11);
  b.output(y);
  auto out = run(b, {{{1, 1, 5}, iota(5)}}, {{1, 1, 5}});
  ASSERT_EQ(out.size(), 1u);
  // y[i] = x[i-1] + 10 x[i+1]
  expect_near(out[0], {20, 31, 42, 53, 4});
}

TEST_F(Compile, DepthwiseConvWithWeightsAsParameter) {
  GraphBuilder b;
  const int x = b.input({1, 2, 2, 2});
  const int w = b.parameter({2, 1, 1, 1}, "conv.weight");
  const int y = b.tensor({1, 2, 2, 2});
  b.node("Conv", {x, w}, {y}, {attr_i("group", 2)}, 11);
  b.output(y);
  auto out = run(b, {{{1, 2, 2, 2}, iota(8)}, {{2, 1, 1, 1}, {2, -1}}}, {{1, 2, 2, 2}});
  ASSERT_EQ(out.size(), 1u);
  expect_near(out[0], {2, 4, 6, 8, -5, -6, -7, -8});
}

TEST_F(Compile, GroupedConvMixesOnlyItsGroup) {
  GraphBuilder b;
  const int x = b.input({1, 4, 1, 1});
  // group 2: out channel 0 reads in 0,1; out channel 1 reads in 2,3.
  const int w = b.constant_f32({2, 2, 1, 1}, {1, 10, 100, 1000});
  const int y = b.tensor({1, 2, 1, 1});
  b.node("Conv", {x, w}, {y}, {attr_i("group", 2)}, 11);
  b.output(y);
  auto out = run(b, {{{1, 4, 1, 1}, {1, 2, 3, 4}}}, {{1, 2, 1, 1}});
  ASSERT_EQ(out.size(), 1u);
  expect_near(out[0], {21, 4300});
}

TEST_F(Compile, LargeConvSplitOverThePoolMatchesADirectSum) {
  // 16 x 14 x 14 outputs x 72 taps: above the threshold that spreads output
  // channels over the pool.
  const int64_t c = 8, m = 16, h = 16;
  std::vector<float> xv(c * h * h), wv(m * c * 9);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 7) % 13) - 6;
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>((i * 5) % 11) * 0.1f - 0.5f;
  GraphBuilder b;
  const int x = b.input({1, c, h, h});
  const int w = b.constant_f32({m, c, 3, 3}, wv);
  const int y = b.tensor({1, m, h - 2, h - 2});
  b.node("Conv", {x, w}, {y}, {}, 11);
  b.output(y);
  auto out = run(b, {{{1, c, h, h}, xv}}, {{1, m, h - 2, h - 2}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> want;
  for (int64_t o = 0; o < m; ++o) {
    for (int64_t r = 0; r < h - 2; ++r) {
      for (int64_t q = 0; q < h - 2; ++q) {
        double sum = 0;
        for (int64_t i = 0; i < c; ++i) {
          for (int64_t a = 0; a < 3; ++a) {
            for (int64_t e = 0; e < 3; ++e) {
              sum += double(xv[(i * h + r + a) * h + q + e]) * wv[((o * c + i) * 3 + a) * 3 + e];
            }
          }
        }
        want.push_back(static_cast<float>(sum));
      }
    }
  }
  expect_near(out[0], want, 1e-4f);
}

// ------------------------------------------------------------------ pooling

TEST_F(Compile, AveragePoolCeilMode) {
  GraphBuilder b;
  const int x = b.input({1, 1, 4, 4});
  const int y = b.tensor({1, 1, 2, 2});
  b.node("AveragePool", {x}, {y},
         {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 2}), attr_i("ceil_mode", 1)},
         10);
  b.output(y);
  auto out = run(b, {{{1, 1, 4, 4}, iota(16)}}, {{1, 1, 2, 2}});
  ASSERT_EQ(out.size(), 1u);
  // The ONNX averagepool_2d_ceil values: windows clipped to the input.
  expect_near(out[0], {6, 7.5f, 12, 13.5f});
}

TEST_F(Compile, MaxPoolPlainAndCeilMode) {
  GraphBuilder b;
  const int x = b.input({1, 1, 4, 4});
  const int y = b.tensor({1, 1, 2, 2});
  b.node("MaxPool", {x}, {y, -1}, {attr_ints("kernel_shape", {2, 2}), attr_ints("strides", {2, 2})}, 12);
  b.output(y);
  auto out = run(b, {{{1, 1, 4, 4}, iota(16)}}, {{1, 1, 2, 2}});
  ASSERT_EQ(out.size(), 1u);
  expect_near(out[0], {6, 8, 14, 16});

  GraphBuilder c;
  const int cx = c.input({1, 1, 3, 3});
  const int cy = c.tensor({1, 1, 2, 2});
  c.node("MaxPool", {cx}, {cy},
         {attr_ints("kernel_shape", {2, 2}), attr_ints("strides", {2, 2}), attr_i("ceil_mode", 1)}, 12);
  c.output(cy);
  out = run(c, {{{1, 1, 3, 3}, iota(9)}}, {{1, 1, 2, 2}});
  ASSERT_EQ(out.size(), 1u);
  expect_near(out[0], {5, 6, 8, 9});
}

TEST_F(Compile, AveragePoolCountIncludePad) {
  for (int include : {0, 1}) {
    GraphBuilder b;
    const int x = b.input({1, 1, 2, 2});
    const int y = b.tensor({1, 1, 2, 2});
    b.node("AveragePool", {x}, {y},
           {attr_ints("kernel_shape", {3, 3}), attr_ints("pads", {1, 1, 1, 1}),
            attr_i("count_include_pad", include)},
           11);
    b.output(y);
    auto out = run(b, {{{1, 1, 2, 2}, {1, 2, 3, 4}}}, {{1, 1, 2, 2}});
    ASSERT_EQ(out.size(), 1u);
    const float v = include ? 10.0f / 9.0f : 2.5f;
    expect_near(out[0], {v, v, v, v});
  }
}

TEST_F(Compile, GlobalAveragePoolAndBatchNorm) {
  GraphBuilder b;
  const int x = b.input({1, 2, 2, 1});
  const int scale = b.constant_f32({2}, {2, 1});
  const int bias = b.constant_f32({2}, {1, 0});
  const int mean = b.constant_f32({2}, {1, 0});
  const int var = b.constant_f32({2}, {4, 1});
  const int bn = b.tensor({1, 2, 2, 1});
  const int y = b.tensor({1, 2, 1, 1});
  b.node("BatchNormalization", {x, scale, bias, mean, var}, {bn}, {attr_f("epsilon", 0.0f)}, 15);
  b.node("GlobalAveragePool", {bn}, {y}, {}, 1);
  b.output(bn);
  b.output(y);
  auto out = run(b, {{{1, 2, 2, 1}, {1, 3, 5, 7}}}, {{1, 2, 2, 1}, {1, 2, 1, 1}});
  ASSERT_EQ(out.size(), 2u);
  // Channel 0: 2 (x - 1) / 2 + 1 = x; channel 1: x.
  expect_near(out[0], {1, 3, 5, 7});
  expect_near(out[1], {2, 6});
}

TEST_F(Compile, BatchNormTrainingOutputsMustBeLeftOut) {
  GraphBuilder b;
  const int x = b.input({1, 2, 1, 1});
  std::vector<int32_t> p;
  for (int i = 0; i < 4; ++i) p.push_back(b.constant_f32({2}, {1, 1}));
  const std::vector<int32_t> in = {x, p[0], p[1], p[2], p[3]};
  b.node("BatchNormalization", in, {b.tensor({1, 2, 1, 1}), -1, -1, -1, -1}, {}, 9);
  b.node("BatchNormalization", in, {b.tensor({1, 2, 1, 1}), b.tensor({2})}, {}, 9);
  b.node("BatchNormalization", in, {b.tensor({1, 2, 1, 1})}, {attr_i("training_mode", 1)}, 15);
  b.node("BatchNormalization", in, {b.tensor({1, 2, 1, 1})}, {attr_i("spatial", 1)}, 9);
  b.node("BatchNormalization", in, {b.tensor({1, 2, 1, 1})}, {attr_i("spatial", 1)}, 7);
  // The training form with its running statistics stays on the reference kernels.
  b.node("BatchNormalization", in, {b.tensor({1, 2, 1, 1}), b.tensor({2}), b.tensor({2})},
         {attr_i("training_mode", 1)}, 15);
  b.node("BatchNormalization", in, {b.tensor({1, 2, 1, 1}), b.tensor({2}), b.tensor({2})},
         {attr_i("training_mode", 0)}, 15);
  EXPECT_EQ(supported(b), (std::vector<bool>{true, false, false, false, true, false, false}));
}

// ------------------------------------------------------------------ elementwise

TEST_F(Compile, BinaryOpsBroadcast) {
  struct Case {
    const char* op;
    F want;
  };
  // A = [[1, 2, 3], [4, 5, 6]], B = [2, -1, 0.5]
  const Case cases[] = {
      {"Add", {3, 1, 3.5f, 6, 4, 6.5f}},     {"Sub", {-1, 3, 2.5f, 2, 6, 5.5f}},
      {"Mul", {2, -2, 1.5f, 8, -5, 3}},      {"Div", {0.5f, -2, 6, 2, -5, 12}},
      {"Max", {2, 2, 3, 4, 5, 6}},           {"Min", {1, -1, 0.5f, 2, -1, 0.5f}},
      {"Pow", {1, 0.5f, std::sqrt(3.0f), 16, 0.2f, std::sqrt(6.0f)}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    GraphBuilder b;
    const int a = b.input({2, 3});
    const int bb = b.input({3});
    const int y = b.tensor({2, 3});
    b.node(c.op, {a, bb}, {y}, {}, 13);
    b.output(y);
    auto out = run(b, {{{2, 3}, iota(6)}, {{3}, {2, -1, 0.5f}}}, {{2, 3}});
    ASSERT_EQ(out.size(), 1u);
    expect_near(out[0], c.want);
  }
}

TEST_F(Compile, PReluSlopeBroadcastsToX) {
  GraphBuilder b;
  const int x = b.input({2, 2, 1});
  const int slope = b.constant_f32({2, 1}, {0.5f, 2});
  const int y = b.tensor({2, 2, 1});
  b.node("PRelu", {x, slope}, {y}, {}, 9);
  b.output(y);
  auto out = run(b, {{{2, 2, 1}, {-2, -2, 3, -1}}}, {{2, 2, 1}});
  ASSERT_EQ(out.size(), 1u);
  expect_near(out[0], {-1, -4, 3, -2});
}

TEST_F(Compile, UnaryOps) {
  struct Case {
    const char* op;
    std::vector<Attr> attrs;
    int64_t opset;
    F want;
  };
  const F x = {-2, -0.5f, 0, 1.5f};
  const Case cases[] = {
      {"Relu", {}, 14, {0, 0, 0, 1.5f}},
      {"LeakyRelu", {attr_f("alpha", 0.1f)}, 16, {-0.2f, -0.05f, 0, 1.5f}},
      {"LeakyRelu", {}, 6, {-0.02f, -0.005f, 0, 1.5f}},
      {"Elu", {attr_f("alpha", 2.0f)}, 6, {2 * std::expm1(-2.0f), 2 * std::expm1(-0.5f), 0, 1.5f}},
      {"Selu", {attr_f("alpha", 2.0f), attr_f("gamma", 3.0f)}, 6,
       {3 * (2 * std::exp(-2.0f) - 2), 3 * (2 * std::exp(-0.5f) - 2), 0, 4.5f}},
      {"Sigmoid", {}, 13, {1 / (1 + std::exp(2.0f)), 1 / (1 + std::exp(0.5f)), 0.5f, 1 / (1 + std::exp(-1.5f))}},
      {"HardSigmoid", {}, 6, {0.1f, 0.4f, 0.5f, 0.8f}},
      {"HardSwish", {}, 14, {-2 * (1.0f / 6), -0.5f * (0.5f - 0.5f / 6), 0, 1.5f * 0.75f}},
      {"Tanh", {}, 13, {std::tanh(-2.0f), std::tanh(-0.5f), 0, std::tanh(1.5f)}},
      {"Softplus", {}, 1, {std::log1p(std::exp(-2.0f)), std::log1p(std::exp(-0.5f)), std::log(2.0f), std::log1p(std::exp(1.5f))}},
      {"Erf", {}, 13, {std::erf(-2.0f), std::erf(-0.5f), 0, std::erf(1.5f)}},
      {"Exp", {}, 13, {std::exp(-2.0f), std::exp(-0.5f), 1, std::exp(1.5f)}},
      {"Neg", {}, 13, {2, 0.5f, 0, -1.5f}},
      {"Abs", {}, 13, {2, 0.5f, 0, 1.5f}},
      {"Reciprocal", {}, 13, {-0.5f, -2, std::numeric_limits<float>::infinity(), 1 / 1.5f}},
      {"Floor", {}, 13, {-2, -1, 0, 1}},
      {"Ceil", {}, 13, {-2, 0, 0, 2}},
      {"Identity", {}, 16, x},
      {"Clip", {attr_f("min", -1.0f), attr_f("max", 1.0f)}, 6, {-1, -0.5f, 0, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.op) + " opset " + std::to_string(c.opset));
    GraphBuilder b;
    const int in = b.input({4});
    const int y = b.tensor({4});
    b.node(c.op, {in}, {y}, c.attrs, c.opset);
    b.output(y);
    auto out = run(b, {{{4}, x}}, {{4}});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      if (std::isinf(c.want[i])) {
        EXPECT_EQ(out[0][i], c.want[i]);
      } else {
        EXPECT_NEAR(out[0][i], c.want[i], 1e-6f * std::max(1.0f, std::fabs(c.want[i])));
      }
    }
  }
}

TEST_F(Compile, LogSqrtAndClipWithConstantInputs) {
  GraphBuilder b;
  const int x = b.input({3});
  const int lo = b.constant_f32({}, {1.5f});
  const int ylog = b.tensor({3}), ysqrt = b.tensor({3}), yclip = b.tensor({3});
  b.node("Log", {x}, {ylog}, {}, 13);
  b.node("Sqrt", {x}, {ysqrt}, {}, 13);
  b.node("Clip", {x, lo, -1}, {yclip}, {}, 13);  // max left out
  b.output(ylog);
  b.output(ysqrt);
  b.output(yclip);
  auto out = run(b, {{{3}, {1, 4, 9}}}, {{3}, {3}, {3}});
  ASSERT_EQ(out.size(), 3u);
  expect_near(out[0], {0, std::log(4.0f), std::log(9.0f)});
  expect_near(out[1], {1, 2, 3});
  expect_near(out[2], {1.5f, 4, 9});
}

// ------------------------------------------------------------------ softmax

TEST_F(Compile, SoftmaxOpset11CoercesTo2dOpset13UsesTheAxis) {
  const F x = {0, 1, 2, 3};
  for (int64_t opset : {11, 13}) {
    SCOPED_TRACE(opset);
    GraphBuilder b;
    const int in = b.input({1, 2, 2});
    const int y = b.tensor({1, 2, 2});
    const int ly = b.tensor({1, 2, 2});
    b.node("Softmax", {in}, {y}, {attr_i("axis", 1)}, opset);
    b.node("LogSoftmax", {in}, {ly}, {attr_i("axis", 1)}, opset);
    b.output(y);
    b.output(ly);
    auto out = run(b, {{{1, 2, 2}, x}}, {{1, 2, 2}, {1, 2, 2}});
    ASSERT_EQ(out.size(), 2u);
    F want(4);
    if (opset == 11) {  // one row of 4
      float sum = 0;
      for (float v : x) sum += std::exp(v);
      for (size_t i = 0; i < 4; ++i) want[i] = std::exp(x[i]) / sum;
    } else {  // along dim 1: pairs (0, 2) and (1, 3)
      for (size_t i = 0; i < 2; ++i) {
        const float sum = std::exp(x[i]) + std::exp(x[i + 2]);
        want[i] = std::exp(x[i]) / sum;
        want[i + 2] = std::exp(x[i + 2]) / sum;
      }
    }
    expect_near(out[0], want);
    F log_want(4);
    for (size_t i = 0; i < 4; ++i) log_want[i] = std::log(want[i]);
    expect_near(out[1], log_want);
  }
}

// ------------------------------------------------------------------ data movement

TEST_F(Compile, ReshapeFlattenTransposeConcatDropout) {
  GraphBuilder b;
  const int x = b.input({2, 3});
  const int shape = b.constant_i64({2}, {3, -1});
  const int r = b.tensor({3, 2});
  const int f = b.tensor({3, 2});
  const int t = b.tensor({2, 3});
  const int k = b.constant_f32({1, 3}, {7, 8, 9});
  const int c = b.tensor({3, 3});
  const int d = b.tensor({3, 3});
  b.node("Reshape", {x, shape}, {r}, {}, 14);
  b.node("Flatten", {r}, {f}, {attr_i("axis", 1)}, 13);
  b.node("Transpose", {f}, {t}, {}, 13);  // default perm reverses
  b.node("Concat", {t, k}, {c}, {attr_i("axis", 0)}, 13);
  b.node("Dropout", {c, -1, b.constant_bool(false)}, {d, -1}, {}, 13);
  b.output(t);
  b.output(d);
  EXPECT_EQ(supported(b), std::vector<bool>(5, true));
  auto out = run(b, {{{2, 3}, iota(6)}}, {{2, 3}, {3, 3}});
  ASSERT_EQ(out.size(), 2u);
  // r = [[1,2],[3,4],[5,6]]; transposed: [[1,3,5],[2,4,6]].
  expect_near(out[0], {1, 3, 5, 2, 4, 6});
  expect_near(out[1], {1, 3, 5, 2, 4, 6, 7, 8, 9});
}

// Squeeze and Unsqueeze are claimed with axes as an attribute (opset 11)
// or an inline input (13), and refused, with the reason, for a squeezed
// axis that is not 1 or a declared shape that is not the operator's.
TEST_F(Compile, SqueezeAndUnsqueeze) {
  GraphBuilder b;
  const int x = b.input({1, 3, 1, 2});
  const int s1 = b.tensor({3, 1, 2}), s2 = b.tensor({3, 2}), u1 = b.tensor({3, 1, 2, 1});
  const int u2 = b.tensor({1, 3, 2, 1, 1});
  b.node("Squeeze", {x}, {s1}, {attr_ints("axes", {0})}, 11);
  b.node("Squeeze", {s1}, {s2}, {}, 13);  // no axes: every 1
  b.node("Unsqueeze", {s2, b.constant_i64({2}, {1, -1})}, {u1}, {}, 13);
  b.node("Unsqueeze", {s2, b.constant_i64({3}, {0, 3, 4})}, {u2}, {}, 13);
  b.output(u1);
  b.output(u2);
  EXPECT_EQ(supported(b), std::vector<bool>(4, true));
  auto out = run(b, {{{1, 3, 1, 2}, iota(6)}}, {{3, 1, 2, 1}, {1, 3, 2, 1, 1}});
  ASSERT_EQ(out.size(), 2u);
  expect_near(out[0], iota(6));
  expect_near(out[1], iota(6));
  const auto refusal = [&](const std::vector<int64_t>& axes, const Dims& declared) {
    GraphBuilder r;
    const int in = r.input({1, 3, 1, 2});
    const int y = r.tensor(declared);
    r.node("Squeeze", {in, r.constant_i64({static_cast<int64_t>(axes.size())}, axes)}, {y}, {}, 13);
    r.output(y);
    std::vector<std::byte> blob;
    return compile(r.finish(), &blob);
  };
  EXPECT_NE(refusal({1}, {1, 1, 2}).find("axis 1 has extent 3, not 1"), std::string::npos)
      << refusal({1}, {1, 1, 2});
  EXPECT_NE(refusal({0}, {3, 2, 1}).find("the operator gives [3, 1, 2]"), std::string::npos)
      << refusal({0}, {3, 2, 1});
}

// Slice with constant starts, ends, axes and steps: ends past the end,
// negative starts and axes, a negative step, and the opset 1 attributes;
// values by hand on x[r][c] = 4r + c.
TEST_F(Compile, SliceWithClampingAndNegativeSteps) {
  GraphBuilder b;
  const int x = b.input({3, 4});
  const int64_t big = INT64_MAX;
  const int a = b.tensor({2, 2}), r = b.tensor({3, 2}), c = b.tensor({1, 4}), e = b.tensor({3, 0});
  // rows 1..end, columns -3..-1 step 1: [[5, 6], [9, 10]]
  b.node("Slice", {x, b.constant_i64({2}, {1, -3}), b.constant_i64({2}, {big, -1})}, {a}, {}, 13);
  // columns from 3 down to 0 (exclusive) step -2 on axis -1: [[3, 1], [7, 5], [11, 9]]
  b.node("Slice", {x, b.constant_i32({1}, {3}), b.constant_i32({1}, {0}), b.constant_i32({1}, {-1}),
                   b.constant_i32({1}, {-2})}, {r}, {}, 13);
  // opset 1 attributes: row 2
  b.node("Slice", {x}, {c}, {attr_ints("starts", {2}), attr_ints("ends", {3}), attr_ints("axes", {0})}, 1);
  // an empty slice: columns 2..2
  b.node("Slice", {x, b.constant_i64({1}, {2}), b.constant_i64({1}, {2}), b.constant_i64({1}, {1})}, {e}, {}, 13);
  b.output(a);
  b.output(r);
  b.output(c);
  b.output(e);
  EXPECT_EQ(supported(b), std::vector<bool>(4, true));
  auto out = run(b, {{{3, 4}, iota(12)}}, {{2, 2}, {3, 2}, {1, 4}, {3, 0}});
  ASSERT_EQ(out.size(), 4u);
  // iota starts at 1: x[r][c] = 4r + c + 1.
  expect_near(out[0], {6, 7, 10, 11});
  expect_near(out[1], {4, 2, 8, 6, 12, 10});
  expect_near(out[2], {9, 10, 11, 12});
  EXPECT_TRUE(out[3].empty());
  GraphBuilder bad;
  const int in = bad.input({3, 4});
  const int y = bad.tensor({2, 2});
  bad.node("Slice", {in, bad.constant_i64({1}, {0}), bad.constant_i64({1}, {3}), bad.constant_i64({1}, {0}),
                     bad.constant_i64({1}, {0})}, {y}, {}, 13);
  bad.output(y);
  std::vector<std::byte> blob;
  const std::string why = compile(bad.finish(), &blob);
  EXPECT_NE(why.find("step 0 is 0 or too large"), std::string::npos) << why;
}

TEST_F(Compile, MatMulAndGemm) {
  GraphBuilder b;
  const int a = b.input({2, 2});
  const int w = b.constant_f32({2, 2}, {1, 2, 3, 4});
  const int c = b.constant_f32({2}, {10, 20});
  const int m = b.tensor({2, 2});
  const int g = b.tensor({2, 2});
  b.node("MatMul", {a, w}, {m}, {}, 13);
  b.node("Gemm", {m, w, c}, {g}, {attr_i("transB", 1), attr_f("alpha", 0.5f)}, 13);
  b.output(g);
  auto out = run(b, {{{2, 2}, {1, 0, 0, 1}}}, {{2, 2}});
  ASSERT_EQ(out.size(), 1u);
  // m = w; g = 0.5 * w w^T + c = 0.5 [[5, 11], [11, 25]] + [10, 20]
  expect_near(out[0], {12.5f, 25.5f, 15.5f, 32.5f});
}

// ------------------------------------------------------------------ refusals

TEST_F(Compile, UnsupportedNodesAreMarkedFalse) {
  GraphBuilder b;
  const int xf = b.input({2});
  const int xi = b.input({2}, gfb::DType::i64);
  const int shape_in = b.input({1}, gfb::DType::i64);
  const int lo_in = b.input({});
  std::vector<int> outs;
  for (int i = 0; i < 11; ++i) outs.push_back(b.tensor({2}));
  const int yi = b.tensor({2}, gfb::DType::i64);
  b.node("Relu", {xf}, {outs[0]}, {}, 14);                                   // 0: fine
  b.node("Add", {xi, xi}, {yi}, {}, 14);                                     // 1: i64
  b.node("Reshape", {xf, shape_in}, {outs[1]}, {}, 14);                      // 2: shape not constant
  b.node("Clip", {xf, lo_in}, {outs[2]}, {}, 13);                            // 3: min not constant
  b.node("LeakyRelu", {xf}, {outs[3]}, {attr_f("beta", 1.0f)}, 16);          // 4: unknown attribute
  b.node("Relu", {xf}, {outs[4]}, {}, 14, "com.microsoft");                  // 5: domain
  b.node("Frobnicate", {xf}, {outs[5]}, {}, 14);                             // 6: unknown op
  b.node("Softmax", {xf}, {b.tensor({3})}, {}, 13);                          // 7: wrong out shape
  b.node("LeakyRelu", {xf}, {outs[6]}, {attr_i("alpha", 1)}, 16);           // 8: wrong kind
  b.node("Dropout", {xf, -1, b.constant_bool(true)}, {outs[7]}, {}, 13);     // 9: training
  b.node("Add", {xf, xf}, {outs[8]}, {}, 6);                                 // 10: legacy opset
  b.node("Dropout", {xf}, {outs[9], outs[10]}, {}, 13);                      // 11: mask output
  const int img = b.input({1, 1, 4, 4});
  b.node("MaxPool", {img}, {b.tensor({1, 1, 2, 2})},
         {attr_ints("kernel_shape", {2, 2}), attr_s("auto_pad", "FOO")}, 12);  // 12: bad auto_pad
  b.node("AveragePool", {img}, {b.tensor({1, 1, 3, 3})},
         {attr_ints("kernel_shape", {2, 2}), attr_ints("dilations", {1, 1})}, 11);  // 13: too new
  b.node("Concat", {xf, xf}, {b.tensor({4})}, {}, 13);                        // 14: axis required
  std::vector<bool> s = supported(b);
  std::vector<bool> want(15, false);
  want[0] = true;
  EXPECT_EQ(s, want);
}

TEST_F(Compile, CompileNamesTheUnsupportedNode) {
  GraphBuilder b;
  const int x = b.input({2});
  const int y = b.tensor({2});
  const int z = b.tensor({2});
  b.node("Relu", {x}, {y}, {}, 14);
  b.node("Frobnicate", {y}, {z}, {}, 14);
  b.output(z);
  std::vector<std::byte> blob;
  const std::string s = compile(b.finish(), &blob);
  EXPECT_EQ(s.rfind(std::to_string(LOOM_STATUS_INVALID_ARGUMENT) + ": ", 0), 0u) << s;
  EXPECT_NE(s.find("node n1 (Frobnicate)"), std::string::npos) << s;
}

// ------------------------------------------------------------------ malformed graph.fbs

TEST_F(Compile, MalformedGraphsAreErrors) {
  GraphBuilder b;
  const int x = b.input({2});
  const int y = b.tensor({2});
  b.node("Relu", {x}, {y}, {}, 14);
  b.output(y);
  const std::vector<uint8_t> good = b.finish();
  std::vector<bool> flags;
  std::vector<std::byte> blob;
  const std::string invalid = std::to_string(LOOM_STATUS_INVALID_ARGUMENT) + ": ";
  // Every truncation fails cleanly.
  for (size_t n = 0; n < good.size(); n += 3) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + n);
    EXPECT_EQ(supported(cut, 1, &flags).rfind(invalid, 0), 0u) << n;
    EXPECT_EQ(compile(cut, &blob).rfind(invalid, 0), 0u) << n;
  }
  std::vector<uint8_t> wrong_id = good;
  wrong_id[4] = 'X';
  EXPECT_NE(supported(wrong_id, 1, &flags).find("file identifier"), std::string::npos);
  // A node reading tensor 99.
  GraphBuilder bad;
  const int bx = bad.input({2});
  const int by = bad.tensor({2});
  bad.node("Relu", {99}, {by}, {}, 14);
  bad.output(by);
  (void)bx;
  const std::string e = supported(bad.finish(), 1, &flags);
  EXPECT_NE(e.find("node 0 input 0: tensor index 99 out of range (2 tensors)"), std::string::npos) << e;
  EXPECT_NE(supported(good, 2, &flags).find("node_count is 2, the graph has 1 nodes"),
            std::string::npos);
  // Random byte flips never crash.
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<uint8_t> flipped = good;
    flipped[i] ^= 0xa5;
    supported(flipped, 1, &flags);
    compile(flipped, &blob);
  }
}

// x * HardSigmoid(x) with HardSwish's parameters is compiled into one
// HardSwish node (and computes x * clamp(x / 6 + 0.5, 0, 1)); other gates,
// and a gate whose output is read elsewhere, stay as written.
TEST_F(Compile, HardSigmoidTimesInputBecomesHardSwish) {
  auto build = [](float beta, bool gate_is_output, bool swap) {
    GraphBuilder b;
    const int x = b.input({2, 3});
    const int h = b.tensor({2, 3}), y = b.tensor({2, 3});
    b.node("HardSigmoid", {x}, {h}, {attr_f("alpha", 0.16666667f), attr_f("beta", beta)}, 6);
    b.node("Mul", swap ? std::vector<int>{h, x} : std::vector<int>{x, h}, {y}, {}, 14);
    b.output(y);
    if (gate_is_output) b.output(h);
    return b;
  };
  auto ops_of = [&](const GraphBuilder& b) {
    std::vector<std::byte> blob;
    EXPECT_EQ(compile(b.finish(), &blob), "ok");
    BlobGraph g;
    std::string error;
    EXPECT_TRUE(decode(blob.data(), blob.size(), &g, &error)) << error;
    std::string ops;
    for (const BlobNode& n : g.nodes) ops += std::string(op_name(n.op)) + " ";
    return ops + std::to_string(g.tensors.size()) + " tensors";
  };
  EXPECT_EQ(ops_of(build(0.5f, false, false)), "HardSwish 2 tensors");
  EXPECT_EQ(ops_of(build(0.5f, false, true)), "HardSwish 2 tensors");
  EXPECT_EQ(ops_of(build(0.4f, false, false)), "HardSigmoid Mul 3 tensors");
  EXPECT_EQ(ops_of(build(0.5f, true, false)), "HardSigmoid Mul 3 tensors");

  const std::vector<float> x = {-4, -3, -1, 0, 2, 3.5f};
  auto out = run(build(0.5f, false, true), {{{2, 3}, x}}, {{2, 3}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> want;
  for (float v : x) want.push_back(v * std::fmax(0.0f, std::fmin(1.0f, v / 6 + 0.5f)));
  expect_near(out[0], want, 1e-6f);
}

}  // namespace
}  // namespace loom::cpu_simd::testing
