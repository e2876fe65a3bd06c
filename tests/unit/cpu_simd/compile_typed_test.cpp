// Split, Pad and the format-4 operators (Where, Equal, Cast, with bool, i32
// and i64 tensors) through the plugin's compile entries: what is claimed
// runs and gives hand-computed values; what is refused names its reason.
#include <cmath>
#include <cstdint>
#include <limits>

#include "compile_support.hpp"

namespace loom::cpu_simd::testing {
namespace {

using F = std::vector<float>;
using TT = TypedTensor;

class CompileTyped : public CompileFixture {
 protected:
  // The reason compile gives for refusing the nodes of `b`, or "ok";
  // compile_supported must agree.
  std::string refusal(const GraphBuilder& b) {
    std::vector<std::byte> blob;
    std::vector<bool> flags;
    const std::string s = compile(b.finish(), &blob);
    EXPECT_EQ(supported(b.finish(), b.node_count(), &flags), "ok");
    EXPECT_EQ(flags, std::vector<bool>(b.node_count(), s == "ok")) << s;
    return s;
  }
};

// One node `op` reading `in` and writing f32 tensors of `out_shapes`.
GraphBuilder one_node(const std::string& op, const std::vector<Dims>& in_shapes, const std::vector<Dims>& out_shapes,
                      std::vector<Attr> attrs, int64_t opset, std::vector<int32_t> extra_inputs = {}) {
  GraphBuilder b;
  std::vector<int32_t> in, out;
  for (const Dims& s : in_shapes) in.push_back(b.input(s));
  in.insert(in.end(), extra_inputs.begin(), extra_inputs.end());
  for (const Dims& s : out_shapes) out.push_back(b.tensor(s));
  b.node(op, in, out, std::move(attrs), opset);
  for (int t : out) b.output(t);
  return b;
}

// ------------------------------------------------------------------ Split

TEST_F(CompileTyped, SplitIntoEqualPartsByAttributeOpset11) {
  GraphBuilder b;
  const int x = b.input({2, 6});
  const int y0 = b.tensor({2, 2}), y1 = b.tensor({2, 2}), y2 = b.tensor({2, 2});
  // num_outputs as the importer records it for every Split.
  b.node("Split", {x}, {y0, y1, y2}, {attr_i("axis", 1), attr_i("num_outputs", 3)}, 11);
  for (int y : {y0, y1, y2}) b.output(y);
  EXPECT_EQ(supported(b), std::vector<bool>{true});
  auto out = run(b, {{{2, 6}, iota(12)}}, {{2, 2}, {2, 2}, {2, 2}});
  ASSERT_EQ(out.size(), 3u);
  expect_near(out[0], {1, 2, 7, 8});
  expect_near(out[1], {3, 4, 9, 10});
  expect_near(out[2], {5, 6, 11, 12});
}

TEST_F(CompileTyped, SplitByInlineInputOpset13NegativeAxisAndZeroParts) {
  GraphBuilder b;
  const int x = b.input({5, 2});
  const int y0 = b.tensor({2, 2}), y1 = b.tensor({0, 2}), y2 = b.tensor({3, 2});
  b.node("Split", {x, b.constant_i64({3}, {2, 0, 3})}, {y0, y1, y2}, {attr_i("axis", -2)}, 13);
  for (int y : {y0, y1, y2}) b.output(y);
  EXPECT_EQ(supported(b), std::vector<bool>{true});
  auto out = run(b, {{{5, 2}, iota(10)}}, {{2, 2}, {0, 2}, {3, 2}});
  ASSERT_EQ(out.size(), 3u);
  expect_near(out[0], {1, 2, 3, 4});
  EXPECT_TRUE(out[1].empty());
  expect_near(out[2], {5, 6, 7, 8, 9, 10});
}

TEST_F(CompileTyped, SplitAttributeListOpset2AndNumOutputsOpset18) {
  GraphBuilder b;
  const int x = b.input({7});
  const int a0 = b.tensor({1}), a1 = b.tensor({6});
  b.node("Split", {x}, {a0, a1}, {attr_ints("split", {1, 6})}, 2);
  // num_outputs 3 over 7: parts of ceil(7 / 3) = 3, the last one 1.
  const int n0 = b.tensor({3}), n1 = b.tensor({3}), n2 = b.tensor({1});
  b.node("Split", {x}, {n0, n1, n2}, {attr_i("num_outputs", 3)}, 18);
  for (int y : {a0, a1, n0, n1, n2}) b.output(y);
  EXPECT_EQ(supported(b), std::vector<bool>(2, true));
  auto out = run(b, {{{7}, iota(7)}}, {{1}, {6}, {3}, {3}, {1}});
  ASSERT_EQ(out.size(), 5u);
  expect_near(out[0], {1});
  expect_near(out[1], {2, 3, 4, 5, 6, 7});
  expect_near(out[2], {1, 2, 3});
  expect_near(out[3], {4, 5, 6});
  expect_near(out[4], {7});
}

TEST_F(CompileTyped, SplitRefusalsNameTheReason) {
  auto refused = [&](const GraphBuilder& b, const std::string& why) {
    const std::string s = refusal(b);
    EXPECT_NE(s.find("node n0 (Split) is not supported by cpu-simd: " + why), std::string::npos) << s;
  };
  refused(one_node("Split", {{7}}, {{3}, {3}}, {}, 13), "axis 0 of extent 7 does not split into 2 equal parts");
  refused(one_node("Split", {{7}}, {{3}, {3}}, {attr_ints("split", {3, 3})}, 11), "split sums to 6, axis 0 has 7");
  refused(one_node("Split", {{6}}, {{3}, {3}}, {attr_ints("split", {3, 3})}, 13),
          "attribute 'split' is an input from opset 13");
  refused(one_node("Split", {{6}, {2}}, {{3}, {3}}, {}, 13), "input 1 must be an inline constant");
  refused(one_node("Split", {{6}}, {{3}, {3}}, {}, 18), "neither 'split' nor 'num_outputs' is given");
  refused(one_node("Split", {{6}}, {{3}, {3}}, {attr_i("num_outputs", 3)}, 18),
          "num_outputs is 3, the node has 2 outputs");
  refused(one_node("Split", {{4}}, {{2}, {2}, {0}}, {attr_i("num_outputs", 3)}, 18),
          "axis 0 of extent 4 leaves no last part for 3 outputs");
  refused(one_node("Split", {{6}}, {{3}, {3}}, {attr_i("axis", 1)}, 13), "axis 1 is out of range");
  refused(one_node("Split", {{6}}, {{3}, {3}}, {}, 1), "Split-1 is not supported");
  refused(one_node("Split", {{6}}, {{3}, {3}}, {attr_i("axis", -1)}, 10), "negative axis before opset 11");
  refused(one_node("Split", {{7}}, {{4}, {3}}, {attr_i("num_outputs", 2)}, 13),
          "axis 0 of extent 7 does not split into 2 equal parts");
  refused(one_node("Split", {{6}}, {{2}, {4}}, {}, 13), "the output is declared [2] but the operator gives [3]");
}

// -------------------------------------------------------------------- Pad

TEST_F(CompileTyped, PadModesAndForms) {
  GraphBuilder b;
  const int x = b.input({2, 3});
  const int r = b.input({1, 4});
  // constant, opset 11: 1 column before, 1 row after, value 9.5
  const int c = b.tensor({3, 4});
  b.node("Pad", {x, b.constant_i64({4}, {0, 1, 1, 0}), b.constant_f32({}, {9.5f})}, {c}, {}, 11);
  // reflect: 2 before and 1 after on the columns of [1, 2, 3, 4]
  const int rf = b.tensor({1, 7});
  b.node("Pad", {r, b.constant_i64({4}, {0, 2, 0, 1})}, {rf}, {attr_s("mode", "reflect")}, 13);
  // edge: 1 row before, 2 columns after
  const int e = b.tensor({3, 5});
  b.node("Pad", {x, b.constant_i64({4}, {1, 0, 0, 2})}, {e}, {attr_s("mode", "edge")}, 13);
  // opset 2: attributes, constant mode by default
  const int a = b.tensor({2, 5});
  b.node("Pad", {x}, {a}, {attr_ints("pads", {0, 2, 0, 0}), attr_f("value", -1.0f)}, 2);
  // opset 18: axes [-1], constant 0
  const int ax = b.tensor({2, 5});
  b.node("Pad", {x, b.constant_i64({2}, {1, 1}), -1, b.constant_i64({1}, {-1})}, {ax}, {}, 18);
  // wrap (opset 19): 2 before, 1 after
  const int w = b.tensor({1, 7});
  b.node("Pad", {r, b.constant_i64({4}, {0, 2, 0, 1})}, {w}, {attr_s("mode", "wrap")}, 19);
  for (int y : {c, rf, e, a, ax, w}) b.output(y);
  EXPECT_EQ(supported(b), std::vector<bool>(6, true));
  auto out = run(b, {{{2, 3}, iota(6)}, {{1, 4}, iota(4)}}, {{3, 4}, {1, 7}, {3, 5}, {2, 5}, {2, 5}, {1, 7}});
  ASSERT_EQ(out.size(), 6u);
  expect_near(out[0], {9.5f, 1, 2, 3, 9.5f, 4, 5, 6, 9.5f, 9.5f, 9.5f, 9.5f});
  expect_near(out[1], {3, 2, 1, 2, 3, 4, 3});
  expect_near(out[2], {1, 2, 3, 3, 3, 1, 2, 3, 3, 3, 4, 5, 6, 6, 6});
  expect_near(out[3], {-1, -1, 1, 2, 3, -1, -1, 4, 5, 6});
  expect_near(out[4], {0, 1, 2, 3, 0, 0, 4, 5, 6, 0});
  expect_near(out[5], {3, 4, 1, 2, 3, 4, 1});
}

TEST_F(CompileTyped, PadConstantValueReadAtRunTime) {
  GraphBuilder b;
  const int x = b.input({2});
  const int v = b.input({});
  const int y = b.tensor({4});
  b.node("Pad", {x, b.constant_i64({2}, {1, 1}), v}, {y}, {}, 13);
  b.output(y);
  EXPECT_EQ(supported(b), std::vector<bool>{true});
  auto out = run(b, {{{2}, {1, 2}}, {{}, {-4.5f}}}, {{4}});
  ASSERT_EQ(out.size(), 1u);
  expect_near(out[0], {-4.5f, 1, 2, -4.5f});
  GraphBuilder bad;
  const int yb = bad.tensor({4});
  bad.node("Pad", {bad.input({2}), bad.constant_i64({2}, {1, 1}), bad.input({2})}, {yb}, {}, 13);
  bad.output(yb);
  const std::string s = refusal(bad);
  EXPECT_NE(s.find("node n0 (Pad) is not supported by cpu-simd: constant_value must be a scalar"), std::string::npos)
      << s;
}

TEST_F(CompileTyped, PadOfThreeAxesMatchesAnIndexFormula) {
  // x [2, 3, 4] padded (1, 0, 2) before and (0, 2, 1) after in edge mode:
  // y[i][j][k] = x[clamp(i - 1)][clamp(j)][clamp(k - 2)].
  GraphBuilder b;
  const int x = b.input({2, 3, 4});
  const int y = b.tensor({3, 5, 7});
  b.node("Pad", {x, b.constant_i64({6}, {1, 0, 2, 0, 2, 1})}, {y}, {attr_s("mode", "edge")}, 13);
  b.output(y);
  auto out = run(b, {{{2, 3, 4}, iota(24)}}, {{3, 5, 7}});
  ASSERT_EQ(out.size(), 1u);
  F want;
  auto clamp = [](int64_t v, int64_t n) { return v < 0 ? 0 : v >= n ? n - 1 : v; };
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      for (int64_t k = 0; k < 7; ++k) {
        want.push_back(static_cast<float>(1 + clamp(i - 1, 2) * 12 + clamp(j, 3) * 4 + clamp(k - 2, 4)));
      }
    }
  }
  expect_near(out[0], want);
}

TEST_F(CompileTyped, PadRefusalsNameTheReason) {
  auto refused = [&](const GraphBuilder& b, const std::string& why) {
    const std::string s = refusal(b);
    EXPECT_NE(s.find("node n0 (Pad) is not supported by cpu-simd: " + why), std::string::npos) << s;
  };
  {
    GraphBuilder b;
    const int y = b.tensor({2, 2});
    b.node("Pad", {b.input({2, 3}), b.constant_i64({4}, {0, 0, 0, -1})}, {y}, {}, 13);
    b.output(y);
    refused(b, "negative pads (cropping) are not supported");
  }
  {
    GraphBuilder b;
    const int y = b.tensor({2, 6});
    b.node("Pad", {b.input({2, 3}), b.constant_i64({4}, {0, 3, 0, 0})}, {y}, {attr_s("mode", "reflect")}, 13);
    b.output(y);
    refused(b, "reflect pads 3 and 0 reach axis 1's extent 3");
  }
  {
    GraphBuilder b;
    const int y = b.tensor({2, 4});
    b.node("Pad", {b.input({2, 3}), b.constant_i64({4}, {0, 1, 0, 0})}, {y}, {attr_s("mode", "wrap")}, 18);
    b.output(y);
    refused(b, "mode 'wrap' is not supported at opset 18");
  }
  {
    GraphBuilder b;
    const int y = b.tensor({2, 4});
    b.node("Pad", {b.input({2, 3}), b.input({4}, gfb::DType::i64)}, {y}, {}, 13);
    b.output(y);
    refused(b, "input 1 must be an inline constant");
  }
  {
    GraphBuilder b;
    const int y = b.tensor({2, 5});
    b.node("Pad", {b.input({2, 3}), b.constant_i64({4}, {0, 1, 0, 0})}, {y}, {}, 13);
    b.output(y);
    refused(b, "the output is declared [2, 5] but the operator gives [2, 4]");
  }
  {
    GraphBuilder b;
    const int y = b.tensor({2, 4});
    b.node("Pad", {b.input({2, 3}), b.constant_i64({2}, {0, 1})}, {y}, {}, 13);
    b.output(y);
    refused(b, "pads has 2 entries, expected 4");
  }
}

// ------------------------------------------------------------ Where, Equal

TEST_F(CompileTyped, WhereBroadcastsConditionXAndY) {
  GraphBuilder b;
  const int c = b.input({2, 1}, gfb::DType::bool_);
  const int x = b.input({2, 3});
  const int y = b.input({3});
  const int z = b.tensor({2, 3});
  b.node("Where", {c, x, y}, {z}, {}, 16);
  b.output(z);
  EXPECT_EQ(supported(b), std::vector<bool>{true});
  std::vector<TT> outs = {TT::out({2, 3}, LOOM_DTYPE_F32)};
  ASSERT_EQ(run_typed(b, {TT::boolean({2, 1}, {1, 0}), TT::f32({2, 3}, iota(6)), TT::f32({3}, {-1, -2, -3})}, &outs),
            "ok");
  expect_near(outs[0].as<float>(), {1, 2, 3, -1, -2, -3});
}

TEST_F(CompileTyped, EqualOnEachDtypeWithBroadcasting) {
  GraphBuilder b;
  const int a32 = b.input({2, 3}, gfb::DType::i32), b32 = b.input({3}, gfb::DType::i32);
  const int af = b.input({3}), bf = b.input({3});
  const int a64 = b.input({2}, gfb::DType::i64), b64 = b.input({}, gfb::DType::i64);
  const int ab = b.input({3}, gfb::DType::bool_), bb = b.input({3}, gfb::DType::bool_);
  const int y32 = b.tensor({2, 3}, gfb::DType::bool_), yf = b.tensor({3}, gfb::DType::bool_);
  const int y64 = b.tensor({2}, gfb::DType::bool_), yb = b.tensor({3}, gfb::DType::bool_);
  b.node("Equal", {a32, b32}, {y32}, {}, 11);
  b.node("Equal", {af, bf}, {yf}, {}, 13);
  b.node("Equal", {a64, b64}, {y64}, {}, 7);
  b.node("Equal", {ab, bb}, {yb}, {}, 11);
  for (int y : {y32, yf, y64, yb}) b.output(y);
  EXPECT_EQ(supported(b), std::vector<bool>(4, true));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<TT> outs = {TT::out({2, 3}, LOOM_DTYPE_BOOL), TT::out({3}, LOOM_DTYPE_BOOL),
                          TT::out({2}, LOOM_DTYPE_BOOL), TT::out({3}, LOOM_DTYPE_BOOL)};
  ASSERT_EQ(run_typed(b,
                      {TT::i32({2, 3}, {1, 2, 3, 4, 5, 6}), TT::i32({3}, {1, 5, 3}), TT::f32({3}, {nan, 1, 2}),
                       TT::f32({3}, {nan, 1, 3}), TT::i64({2}, {INT64_MAX, 7}), TT::i64({}, {INT64_MAX}),
                       TT::boolean({3}, {1, 0, 1}), TT::boolean({3}, {1, 1, 0})},
                      &outs),
            "ok");
  EXPECT_EQ(outs[0].as<uint8_t>(), (std::vector<uint8_t>{1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(outs[1].as<uint8_t>(), (std::vector<uint8_t>{0, 1, 0}));  // NaN is not equal to NaN
  EXPECT_EQ(outs[2].as<uint8_t>(), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(outs[3].as<uint8_t>(), (std::vector<uint8_t>{1, 0, 0}));
}

TEST_F(CompileTyped, WhereAndEqualRefusalsNameTheReason) {
  auto refused = [&](const GraphBuilder& b, const std::string& op, const std::string& why) {
    const std::string s = refusal(b);
    EXPECT_NE(s.find("node n0 (" + op + ") is not supported by cpu-simd: " + why), std::string::npos) << s;
  };
  {
    GraphBuilder b;
    const int z = b.tensor({2}, gfb::DType::i64);
    b.node("Where", {b.input({2}, gfb::DType::bool_), b.input({2}, gfb::DType::i64), b.input({2}, gfb::DType::i64)},
           {z}, {}, 16);
    b.output(z);
    refused(b, "Where", "input 1 is i64; cpu-simd runs f32 only here");
  }
  {
    GraphBuilder b;
    const int z = b.tensor({2});
    b.node("Where", {b.input({2}), b.input({2}), b.input({2})}, {z}, {}, 16);
    b.output(z);
    refused(b, "Where", "the condition is not bool");
  }
  {
    GraphBuilder b;
    const int z = b.tensor({2}, gfb::DType::bool_);
    b.node("Equal", {b.input({2}), b.input({2})}, {z}, {}, 7);
    b.output(z);
    refused(b, "Equal", "f32 operands before opset 11");
  }
  {
    GraphBuilder b;
    const int z = b.tensor({2}, gfb::DType::bool_);
    b.node("Equal", {b.input({2}, gfb::DType::i32), b.input({2}, gfb::DType::i64)}, {z}, {}, 13);
    b.output(z);
    refused(b, "Equal", "the operands' dtypes differ");
  }
  {
    GraphBuilder b;
    const int z = b.tensor({2});
    b.node("Equal", {b.input({2}), b.input({2})}, {z}, {}, 13);
    b.output(z);
    refused(b, "Equal", "output is f32, expected bool_");
  }
  {
    GraphBuilder b;
    const int z = b.tensor({3}, gfb::DType::bool_);
    b.node("Equal", {b.input({2}), b.input({3})}, {z}, {}, 13);
    b.output(z);
    refused(b, "Equal", "Equal: shapes do not broadcast: A is [2], B is [3]");
  }
  {
    GraphBuilder b;
    const int z = b.tensor({2}, gfb::DType::bool_);
    b.node("Equal", {b.input({2}, gfb::DType::f64), b.input({2}, gfb::DType::f64)}, {z}, {}, 13);
    b.output(z);
    // compile stops at the graph's f64 input; compile_supported says why the
    // node is refused only through its flag.
    const std::string s = refusal(b);
    EXPECT_NE(s.find("graph input 0 (t1) is f64; cpu-simd takes f32, bool, i32, i64, u8 and i8 inputs only"),
              std::string::npos) << s;
  }
}

// ------------------------------------------------------------------- Cast

TEST_F(CompileTyped, CastBetweenF32BoolI32AndI64) {
  GraphBuilder b;
  const int f = b.input({6});
  const int bl = b.input({2}, gfb::DType::bool_);
  const int i64 = b.input({2}, gfb::DType::i64);
  const int i32 = b.input({2}, gfb::DType::i32);
  const int f_i32 = b.tensor({6}, gfb::DType::i32), f_bool = b.tensor({6}, gfb::DType::bool_);
  const int f_i64 = b.tensor({6}, gfb::DType::i64), bool_f = b.tensor({2});
  const int i64_i32 = b.tensor({2}, gfb::DType::i32), i32_i64 = b.tensor({2}, gfb::DType::i64);
  const int i32_f = b.tensor({2});
  b.node("Cast", {f}, {f_i32}, {attr_i("to", 6)}, 13);
  b.node("Cast", {f}, {f_bool}, {attr_i("to", 9)}, 13);
  b.node("Cast", {f}, {f_i64}, {attr_i("to", 7)}, 6);
  b.node("Cast", {bl}, {bool_f}, {attr_i("to", 1)}, 19);
  b.node("Cast", {i64}, {i64_i32}, {attr_i("to", 6)}, 13);
  b.node("Cast", {i32}, {i32_i64}, {attr_i("to", 7)}, 13);
  b.node("Cast", {i32}, {i32_f}, {attr_i("to", 1), attr_i("saturate", 1)}, 19);
  for (int y : {f_i32, f_bool, f_i64, bool_f, i64_i32, i32_i64, i32_f}) b.output(y);
  EXPECT_EQ(supported(b), std::vector<bool>(7, true));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<TT> outs = {TT::out({6}, LOOM_DTYPE_I32), TT::out({6}, LOOM_DTYPE_BOOL), TT::out({6}, LOOM_DTYPE_I64),
                          TT::out({2}, LOOM_DTYPE_F32), TT::out({2}, LOOM_DTYPE_I32), TT::out({2}, LOOM_DTYPE_I64),
                          TT::out({2}, LOOM_DTYPE_F32)};
  ASSERT_EQ(run_typed(b,
                      {TT::f32({6}, {1.7f, -1.7f, nan, 3e9f, -3e9f, -0.0f}), TT::boolean({2}, {1, 0}),
                       TT::i64({2}, {(int64_t{1} << 32) + 5, -1}), TT::i32({2}, {-7, 16777217})},
                      &outs),
            "ok");
  // Truncation toward zero; NaN to 0 and saturation where ONNX leaves them
  // undefined (as the reference kernels do).
  EXPECT_EQ(outs[0].as<int32_t>(), (std::vector<int32_t>{1, -1, 0, INT32_MAX, INT32_MIN, 0}));
  EXPECT_EQ(outs[1].as<uint8_t>(), (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(outs[2].as<int64_t>(), (std::vector<int64_t>{1, -1, 0, 3000000000LL, -3000000000LL, 0}));
  expect_near(outs[3].as<float>(), {1, 0});
  EXPECT_EQ(outs[4].as<int32_t>(), (std::vector<int32_t>{5, -1}));  // wraps
  EXPECT_EQ(outs[5].as<int64_t>(), (std::vector<int64_t>{-7, 16777217}));
  expect_near(outs[6].as<float>(), {-7, 16777216});  // rounds to the nearest f32
}

TEST_F(CompileTyped, CastRefusalsNameTheReason) {
  auto refused = [&](const GraphBuilder& b, const std::string& why) {
    const std::string s = refusal(b);
    EXPECT_NE(s.find("node n0 (Cast) is not supported by cpu-simd: " + why), std::string::npos) << s;
  };
  refused(one_node("Cast", {{2}}, {{2}}, {attr_i("to", 10)}, 13), "to = 10 is not f32, i32, i64, bool, u8 or i8");
  refused(one_node("Cast", {{2}}, {{2}}, {}, 13), "attribute 'to' is required");
  refused(one_node("Cast", {{2}}, {{2}}, {attr_i("to", 6)}, 13), "output is f32, expected i32");
  refused(one_node("Cast", {{2}}, {{2}}, {attr_i("to", 1)}, 5), "Cast before opset 6 names `to` by string");
  refused(one_node("Cast", {{2}}, {{2}}, {attr_i("to", 1), attr_i("saturate", 0)}, 13),
          "attribute 'saturate' is not supported at opset 13");
}

// ------------------------------------------------- typed tensors in the arena

// Equal's bool result is an intermediate (in the scratch arena, one byte an
// element) that Cast and Where read; with oneDNN on and off.
TEST_F(CompileTyped, BoolIntermediatesLiveInTheArena) {
  GraphBuilder b;
  const int x = b.input({5});
  const int y = b.input({5});
  const int e = b.tensor({5}, gfb::DType::bool_);
  const int c = b.tensor({5}), w = b.tensor({5}), r = b.tensor({5});
  b.node("Equal", {x, y}, {e}, {}, 13);
  b.node("Cast", {e}, {c}, {attr_i("to", 1)}, 13);
  b.node("Where", {e, x, b.constant_f32({1}, {-1})}, {w}, {}, 16);
  b.node("Relu", {w}, {r}, {}, 14);
  b.output(c);
  b.output(r);
  EXPECT_EQ(supported(b), std::vector<bool>(4, true));
  std::vector<TT> outs = {TT::out({5}, LOOM_DTYPE_F32), TT::out({5}, LOOM_DTYPE_F32)};
  ASSERT_EQ(run_typed(b, {TT::f32({5}, {1, 2, 3, 4, 5}), TT::f32({5}, {1, 0, 3, 0, 5})}, &outs), "ok");
  expect_near(outs[0].as<float>(), {1, 0, 1, 0, 1});
  expect_near(outs[1].as<float>(), {1, 0, 3, 0, 5});
  // execute checks each tensor against its blob dtype and byte size.
  std::vector<TT> wrong = {TT::out({5}, LOOM_DTYPE_F32), TT::out({5}, LOOM_DTYPE_F32)};
  const std::string s = run_typed(b, {TT::f32({5}, {1, 2, 3, 4, 5}), TT::i32({5}, {1, 0, 3, 0, 5})}, &wrong);
  EXPECT_NE(s.find("execute: input 1 has dtype 7, expected f32 (1)"), std::string::npos) << s;
}

class CompileTypedPlain : public CompileFixture {
 protected:
  void SetUp() override {
    options_ = {{"cpu.onednn", "0"}};
    CompileFixture::SetUp();
  }
};

TEST_F(CompileTypedPlain, WhereAfterEqualOnPlainKernels) {
  GraphBuilder b;
  const int x = b.input({2, 2});
  const int k = b.input({2}, gfb::DType::i64);
  const int m = b.input({2, 1}, gfb::DType::i64);
  const int e = b.tensor({2, 2}, gfb::DType::bool_);
  const int w = b.tensor({2, 2});
  b.node("Equal", {k, m}, {e}, {}, 13);
  b.node("Where", {e, x, b.constant_f32({}, {0.5f})}, {w}, {}, 16);
  b.output(w);
  std::vector<TT> outs = {TT::out({2, 2}, LOOM_DTYPE_F32)};
  ASSERT_EQ(run_typed(b, {TT::f32({2, 2}, {1, 2, 3, 4}), TT::i64({2}, {3, 4}), TT::i64({2, 1}, {3, 4})}, &outs), "ok");
  // e = [[3 == 3, 4 == 3], [3 == 4, 4 == 4]]
  expect_near(outs[0].as<float>(), {1, 0.5f, 0.5f, 4});
}

}  // namespace
}  // namespace loom::cpu_simd::testing
