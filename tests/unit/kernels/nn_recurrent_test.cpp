// RNN, GRU and LSTM: values and error paths.
//
// The expected values were computed by an independent numpy evaluation of
// the ONNX spec's equations (a loop over directions, batch elements and
// time steps written for these tests, in float64, not onnx's reference
// implementation); the inputs are random values rounded to two decimals.
#include <gtest/gtest.h>

#include <limits>

#include "nn_test_util.hpp"

namespace loom::kernels::nntest {
namespace {

const TBuf lstm_bidi_X = f32({3, 2, 2}, {-0.85f, 0.56f, -0.12f, 0.45f, 0.96f, 0.08f, 0.0f, -0.86f, -0.46f, -0.0f, 0.36f, 0.61f});
const TBuf lstm_bidi_W = f32({2, 8, 2}, {-0.24f, -0.87f, -0.42f, 0.82f, -0.57f, -0.1f, 0.86f, -0.95f, 0.2f, 0.9f, -0.54f, 0.1f, 0.82f, -0.73f, 0.05f, 0.5f, 0.34f, -0.06f, -0.59f, -0.02f, -0.26f, -0.05f, -0.27f, 0.68f, 0.54f, -0.37f, 0.15f, -0.45f, -0.09f, -0.29f, 0.31f, -0.26f});
const TBuf lstm_bidi_R = f32({2, 8, 2}, {-0.08f, 0.44f, -0.17f, 0.81f, -0.64f, 0.48f, -0.16f, -0.15f, 0.27f, 0.05f, -0.17f, -1.0f, -0.82f, 0.42f, 0.05f, 0.39f, 0.91f, 0.37f, -0.89f, -0.38f, 0.19f, -0.53f, 0.93f, 0.89f, 0.7f, -0.06f, 0.68f, -0.74f, -0.38f, -0.07f, 0.48f, -0.03f});
const TBuf lstm_bidi_B = f32({2, 16}, {-0.73f, -0.31f, -0.35f, -0.4f, -0.67f, -0.17f, -0.1f, 0.55f, 0.59f, 0.04f, -0.08f, 0.56f, 0.77f, 0.35f, 0.6f, 0.88f, -0.92f, 0.75f, -0.45f, -0.05f, 0.59f, 0.43f, -0.71f, 0.32f, -0.86f, -0.29f, 0.63f, -0.14f, 0.2f, 0.46f, 0.64f, 0.52f});
const TBuf lstm_bidi_h0 = f32({2, 2, 2}, {-0.99f, -0.16f, -0.07f, -0.89f, 0.08f, 0.22f, 0.66f, 0.88f});
const TBuf lstm_bidi_c0 = f32({2, 2, 2}, {-0.74f, -0.54f, 0.32f, -0.74f, -0.55f, 0.15f, -0.66f, 0.56f});
const TBuf lstm_bidi_P = f32({2, 6}, {0.71f, -0.93f, 0.07f, 0.59f, 0.95f, -0.45f, -0.66f, 0.75f, 0.82f, -0.6f, -0.12f, 0.44f});
const TBuf lstm_bidi_Y = f32({3, 2, 2, 2}, {-0.1438696f, 0.03742296f, 0.04191782f, -0.06085363f, -0.1010386f, 0.3273678f, -0.146526f, 0.310163f, 0.03989887f, 0.2024592f, 0.1971256f, 0.09005301f, -0.1147272f, 0.1999316f, -0.1760365f, 0.3452794f, 0.07894798f, 0.2227884f, 0.0f, 0.0f, -0.1720426f, 0.2252162f, 0.0f, 0.0f});
const TBuf lstm_bidi_Yh = f32({2, 2, 2}, {0.07894798f, 0.2227884f, 0.1971256f, 0.09005301f, -0.1010386f, 0.3273678f, -0.146526f, 0.310163f});
const TBuf lstm_bidi_Yc = f32({2, 2, 2}, {0.1663761f, 0.4767062f, 0.5237975f, 0.1273499f, -0.1964067f, 0.7656102f, -0.3651788f, 0.8669688f});
const TBuf lstm_if_X = f32({2, 2, 3}, {0.69f, -0.66f, 0.33f, 0.62f, 0.1f, -0.67f, -0.93f, -0.44f, 0.62f, -0.91f, -0.98f, -0.28f});
const TBuf lstm_if_W = f32({1, 8, 3}, {-0.87f, -0.7f, -0.95f, 0.05f, 0.39f, -0.15f, -0.73f, -0.34f, 0.18f, 0.88f, 0.99f, -0.52f, -0.98f, 0.66f, 0.85f, -0.08f, 0.54f, 0.73f, 0.22f, 0.75f, -0.95f, -0.46f, -0.45f, -0.76f});
const TBuf lstm_if_R = f32({1, 8, 2}, {0.82f, -0.94f, 0.35f, -0.86f, -0.28f, -0.16f, -0.64f, 0.04f, 0.07f, -0.37f, 0.47f, -0.68f, -0.61f, -0.29f, -0.24f, -0.59f});
const TBuf lstm_if_Y = f32({2, 2, 1, 2}, {-0.0981373f, -0.05079715f, 0.08843657f, 0.05356032f, -0.3372621f, 0.01109469f, -0.3113134f, 0.06542113f});
const TBuf lstm_if_Yh = f32({2, 1, 2}, {0.08843657f, 0.05356032f, -0.3113134f, 0.06542113f});
const TBuf lstm_if_Yc = f32({2, 1, 2}, {0.2501562f, 0.07235847f, -0.4493629f, 0.346361f});
const TBuf gru_rev_X = f32({3, 1, 2}, {0.84f, 0.66f, -0.79f, -0.26f, -0.53f, -0.1f});
const TBuf gru_rev_W = f32({1, 9, 2}, {-0.45f, 0.0f, 0.85f, -0.23f, 0.3f, 0.19f, 0.5f, -0.88f, 0.49f, 0.89f, 0.21f, -0.42f, 0.34f, 0.42f, 0.31f, -0.71f, 0.95f, 0.91f});
const TBuf gru_rev_R = f32({1, 9, 3}, {-0.15f, 0.19f, -0.92f, 0.98f, 0.64f, 0.27f, 0.52f, -0.62f, -0.38f, -0.51f, 0.19f, -0.82f, 0.79f, -0.08f, -0.11f, -0.79f, 0.37f, 0.63f, 0.26f, -0.52f, 0.57f, -0.71f, 0.65f, 0.16f, -0.42f, 0.03f, 0.26f});
const TBuf gru_rev_B = f32({1, 18}, {-0.48f, 0.69f, -0.16f, 0.78f, 0.67f, -0.8f, 0.29f, -0.38f, 0.51f, 0.09f, -0.08f, 0.79f, -0.89f, 0.11f, -0.34f, -0.93f, 0.51f, 0.12f});
const TBuf gru_rev_h0 = f32({1, 1, 3}, {0.79f, 0.2f, -0.33f});
const TBuf gru_rev_Y = f32({3, 1, 1, 3}, {0.4116314f, 0.01412502f, 0.3943853f, 0.088406f, 0.02835038f, -0.1664736f, 0.3072158f, 0.1123585f, -0.2233143f});
const TBuf gru_rev_Yh = f32({1, 1, 3}, {0.4116314f, 0.01412502f, 0.3943853f});
const TBuf gru_bidi_X = f32({3, 2, 2}, {0.97f, -0.77f, -0.89f, 0.47f, -0.26f, -0.28f, 0.75f, -0.35f, 0.78f, 0.29f, -0.34f, -0.88f});
const TBuf gru_bidi_W = f32({2, 6, 2}, {-0.51f, 0.94f, -0.19f, -0.68f, -0.4f, 0.8f, -0.67f, 0.56f, -0.73f, 0.92f, 0.06f, -0.91f, 0.86f, -0.28f, 0.46f, 0.05f, -0.81f, -0.79f, -0.7f, -0.68f, -0.89f, -0.91f, 0.9f, -0.82f});
const TBuf gru_bidi_R = f32({2, 6, 2}, {0.02f, -0.76f, -0.57f, 0.53f, 0.88f, -0.06f, -0.99f, 1.0f, -0.9f, -0.22f, 0.08f, 0.78f, 0.65f, 0.22f, -0.2f, 0.67f, 0.74f, 0.74f, 0.44f, -0.8f, -0.4f, -0.03f, 0.01f, 0.67f});
const TBuf gru_bidi_B = f32({2, 12}, {-0.52f, 0.33f, -0.25f, 0.55f, -0.61f, -0.05f, -0.79f, -0.58f, 0.87f, -0.37f, 0.79f, 0.05f, -0.92f, 0.59f, -0.9f, 0.65f, -0.98f, 0.35f, -0.67f, -0.31f, 0.91f, -0.03f, 0.31f, 0.48f});
const TBuf gru_bidi_Y = f32({3, 2, 2, 2}, {-0.7820626f, 0.3059262f, 0.5127894f, -0.2677414f, -0.4308454f, 0.3283249f, -0.228495f, 0.2830271f, 0.0f, 0.0f, -0.5690116f, 0.1174111f, 0.0f, 0.0f, -0.3791924f, 0.5767227f, 0.0f, 0.0f, -0.2386767f, 0.2906513f, 0.0f, 0.0f, 0.3416248f, 0.4066753f});
const TBuf gru_bidi_Yh = f32({2, 2, 2}, {-0.7820626f, 0.3059262f, -0.2386767f, 0.2906513f, -0.4308454f, 0.3283249f, -0.228495f, 0.2830271f});
const TBuf rnn_bidi_X = f32({2, 2, 2}, {-0.78f, 0.68f, 0.83f, -0.69f, 0.09f, -0.43f, 0.48f, -0.94f});
const TBuf rnn_bidi_W = f32({2, 3, 2}, {0.03f, 0.59f, 0.47f, -0.78f, 0.67f, -0.52f, 0.62f, -0.01f, -0.68f, 0.47f, 0.62f, 0.4f});
const TBuf rnn_bidi_R = f32({2, 3, 3}, {0.93f, -0.49f, -0.53f, -0.71f, 0.08f, -0.2f, -0.29f, -0.08f, -0.45f, -0.99f, -0.06f, -0.45f, -0.1f, 0.86f, -0.64f, 0.27f, 0.29f, -0.44f});
const TBuf rnn_bidi_B = f32({2, 6}, {-0.06f, 0.94f, -0.32f, 0.42f, 0.68f, -0.28f, 0.98f, 0.25f, 0.0f, 0.43f, -0.15f, 0.42f});
const TBuf rnn_bidi_Y = f32({2, 2, 2, 3}, {0.4689f, 0.4615f, -0.6381f, 0.0889f, 1.37415f, 0.25745f, -0.4388075f, 0.4820216f, 0.3625613f, 0.4338588f, -1.381357f, 0.6713549f, 0.4285675f, 1.01466f, -0.000928f, -0.3536525f, 1.387061f, 0.07941725f, 1.25229f, -0.1629381f, 0.3014848f, 1.390968f, -0.6443999f, 0.3383165f});
const TBuf rnn_bidi_Yh = f32({2, 2, 3}, {0.4285675f, 1.01466f, -0.000928f, -0.3536525f, 1.387061f, 0.07941725f, -0.4388075f, 0.4820216f, 0.3625613f, 0.4338588f, -1.381357f, 0.6713549f});

TBuf i32(Shape shape, const std::vector<int32_t>& v) { return typed(DType::kI32, std::move(shape), v); }

AttributeDef strings(std::string name, std::vector<std::string> v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kStrings;
  a.strings = std::move(v);
  return a;
}
AttributeDef floats(std::string name, std::vector<float> v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kFloats;
  a.floats = std::move(v);
  return a;
}

// Infers the outputs, checks their shapes, runs into them.
std::vector<TBuf> infer_run(std::string_view op, const std::vector<const TBuf*>& in,
                            const std::vector<Shape>& want, const std::vector<AttributeDef>& attrs) {
  std::vector<TensorType> types;
  for (const TBuf* b : in) types.push_back(b ? TensorType{b->dtype, b->shape} : TensorType{});
  auto t = infer(op, types, attrs);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  if (!t.ok()) return {};
  std::vector<TBuf> outs;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*t)[i].shape, want[i]) << "output " << i;
    outs.push_back(out((*t)[i].shape));
  }
  std::vector<TBuf*> ptrs;
  for (TBuf& b : outs) ptrs.push_back(&b);
  Status s = run(op, in, ptrs, attrs);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return outs;
}

TEST(Lstm, BidirectionalPeepholesSequenceLensInitialStatesClip) {
  const TBuf lens = i32({2}, {3, 2});
  auto o = infer_run("LSTM",
                     {&lstm_bidi_X, &lstm_bidi_W, &lstm_bidi_R, &lstm_bidi_B, &lens, &lstm_bidi_h0, &lstm_bidi_c0,
                      &lstm_bidi_P},
                     {{3, 2, 2, 2}, {2, 2, 2}, {2, 2, 2}},
                     {iattr("hidden_size", 2), sattr("direction", "bidirectional"), fattr("clip", 0.9f)});
  ASSERT_EQ(o.size(), 3u);
  expect_near(o[0].values<float>(), lstm_bidi_Y.values<float>());
  expect_near(o[1].values<float>(), lstm_bidi_Yh.values<float>());
  expect_near(o[2].values<float>(), lstm_bidi_Yc.values<float>());
}

TEST(Lstm, InputForgetBatchFirstWithoutHiddenSizeAttribute) {
  auto o = infer_run("LSTM", {&lstm_if_X, &lstm_if_W, &lstm_if_R}, {{2, 2, 1, 2}, {2, 1, 2}, {2, 1, 2}},
                     {iattr("input_forget", 1), iattr("layout", 1)});
  ASSERT_EQ(o.size(), 3u);
  expect_near(o[0].values<float>(), lstm_if_Y.values<float>());
  expect_near(o[1].values<float>(), lstm_if_Yh.values<float>());
  expect_near(o[2].values<float>(), lstm_if_Yc.values<float>());
}

TEST(Gru, ReverseLinearBeforeResetWithActivationParameters) {
  // alpha/beta go, in order, to the activations that take them: HardSigmoid
  // (0.3, 0.4), then LeakyRelu (0.2).
  auto o = infer_run("GRU", {&gru_rev_X, &gru_rev_W, &gru_rev_R, &gru_rev_B, nullptr, &gru_rev_h0},
                     {{3, 1, 1, 3}, {1, 1, 3}},
                     {iattr("hidden_size", 3), sattr("direction", "reverse"), iattr("linear_before_reset", 1),
                      strings("activations", {"HardSigmoid", "LeakyRelu"}), floats("activation_alpha", {0.3f, 0.2f}),
                      floats("activation_beta", {0.4f})});
  ASSERT_EQ(o.size(), 2u);
  expect_near(o[0].values<float>(), gru_rev_Y.values<float>());
  expect_near(o[1].values<float>(), gru_rev_Yh.values<float>());
}

TEST(Gru, BidirectionalSequenceLensLeaveZerosPastTheEnd) {
  const TBuf lens = i32({2}, {1, 3});
  auto o = infer_run("GRU", {&gru_bidi_X, &gru_bidi_W, &gru_bidi_R, &gru_bidi_B, &lens}, {{3, 2, 2, 2}, {2, 2, 2}},
                     {iattr("hidden_size", 2), sattr("direction", "bidirectional")});
  ASSERT_EQ(o.size(), 2u);
  expect_near(o[0].values<float>(), gru_bidi_Y.values<float>());
  expect_near(o[1].values<float>(), gru_bidi_Yh.values<float>());
}

TEST(Rnn, BidirectionalOneActivationPerDirection) {
  auto o = infer_run("RNN", {&rnn_bidi_X, &rnn_bidi_W, &rnn_bidi_R, &rnn_bidi_B}, {{2, 2, 2, 3}, {2, 2, 3}},
                     {iattr("hidden_size", 3), sattr("direction", "bidirectional"),
                      strings("activations", {"Affine", "ScaledTanh"}), floats("activation_alpha", {0.5f, 2.0f}),
                      floats("activation_beta", {0.1f, 0.5f})});
  ASSERT_EQ(o.size(), 2u);
  expect_near(o[0].values<float>(), rnn_bidi_Y.values<float>());
  expect_near(o[1].values<float>(), rnn_bidi_Yh.values<float>());
}

TEST(Rnn, OnlyYHRequested) {
  TBuf y_h = out({2, 2, 3});
  std::vector<TensorRef> ins{rnn_bidi_X.ref(), rnn_bidi_W.ref(), rnn_bidi_R.ref(), rnn_bidi_B.ref()};
  std::vector<TensorRef> outs{TensorRef{}, y_h.ref()};
  const std::vector<AttributeDef> attrs{iattr("hidden_size", 3), sattr("direction", "bidirectional"),
                                        strings("activations", {"Affine", "ScaledTanh"}),
                                        floats("activation_alpha", {0.5f, 2.0f}),
                                        floats("activation_beta", {0.1f, 0.5f})};
  ASSERT_TRUE(kernel("RNN").run(ins, outs, Attributes(attrs)).ok());
  expect_near(y_h.values<float>(), rnn_bidi_Yh.values<float>());
}

// Bad operands give one-line errors naming the operator and the operand.
TEST(Recurrent, BadOperandsAreErrorsNamingTheOperand) {
  TBuf y = out({3, 2, 2, 2}), y_h = out({2, 2, 2});
  const std::vector<AttributeDef> bidi{iattr("hidden_size", 2), sattr("direction", "bidirectional")};
  auto lstm = [&](const std::vector<const TBuf*>& in, const std::vector<AttributeDef>& attrs) {
    return run("LSTM", in, {&y, &y_h}, attrs);
  };
  // Wrong rank of X.
  const TBuf x2 = f32({3, 4}, iota(12));
  Status s = lstm({&x2, &lstm_bidi_W, &lstm_bidi_R}, bidi);
  EXPECT_EQ(message(s), "LSTM: input 'X' must have rank 3, got shape [3, 4]");
  // hidden_size that does not match W and R.
  s = lstm({&lstm_bidi_X, &lstm_bidi_W, &lstm_bidi_R}, {iattr("hidden_size", 3), sattr("direction", "bidirectional")});
  EXPECT_TRUE(contains(s, "LSTM: input 'W' has shape [2, 8, 2]; expected [2, 12, 2]")) << s.to_string();
  // W for one direction when the node is bidirectional.
  const TBuf w1 = f32({1, 8, 2}, iota(16));
  s = lstm({&lstm_bidi_X, &w1, &lstm_bidi_R}, bidi);
  EXPECT_TRUE(contains(s, "input 'W' has shape [1, 8, 2]; expected [2, 8, 2]")) << s.to_string();
  // Unknown activation.
  s = lstm({&lstm_bidi_X, &lstm_bidi_W, &lstm_bidi_R},
           {iattr("hidden_size", 2), strings("activations", {"Sigmoid", "Tanh", "Swish"})});
  EXPECT_TRUE(contains(s, "LSTM: attribute 'activations' names 'Swish'")) << s.to_string();
  // Wrong number of activations for two directions.
  s = lstm({&lstm_bidi_X, &lstm_bidi_W, &lstm_bidi_R},
           {iattr("hidden_size", 2), sattr("direction", "bidirectional"), strings("activations", {"Tanh", "Tanh"})});
  EXPECT_TRUE(contains(s, "attribute 'activations' has 2 names; 2 direction(s) need 6")) << s.to_string();
  // sequence_lens out of range, negative, and of the wrong dtype or shape.
  const TBuf too_long = i32({2}, {3, 4}), negative = i32({2}, {-1, 2}), wrong = i32({3}, {1, 1, 1});
  const TBuf as_float = f32({2}, {1, 1});
  s = lstm({&lstm_bidi_X, &lstm_bidi_W, &lstm_bidi_R, nullptr, &too_long}, bidi);
  EXPECT_EQ(message(s), "LSTM: input 'sequence_lens' holds 4 at batch 1; each length must lie in [0, 3] (the "
                        "sequence length of X)");
  EXPECT_TRUE(contains(lstm({&lstm_bidi_X, &lstm_bidi_W, &lstm_bidi_R, nullptr, &negative}, bidi),
                       "'sequence_lens' holds -1 at batch 0"));
  EXPECT_TRUE(contains(lstm({&lstm_bidi_X, &lstm_bidi_W, &lstm_bidi_R, nullptr, &wrong}, bidi),
                       "input 'sequence_lens' has shape [3]; expected [2]"));
  EXPECT_TRUE(contains(lstm({&lstm_bidi_X, &lstm_bidi_W, &lstm_bidi_R, nullptr, &as_float}, bidi), "sequence_lens"));
  // Missing R, bad direction, bad peephole shape, an output of the wrong shape.
  EXPECT_EQ(message(lstm({&lstm_bidi_X, &lstm_bidi_W, nullptr}, bidi)), "LSTM: input 'R' is required");
  EXPECT_TRUE(contains(lstm({&lstm_bidi_X, &lstm_bidi_W, &lstm_bidi_R}, {sattr("direction", "sideways")}),
                       "attribute 'direction' is 'sideways'"));
  const TBuf p_bad = f32({2, 4}, iota(8));
  EXPECT_TRUE(contains(lstm({&lstm_bidi_X, &lstm_bidi_W, &lstm_bidi_R, nullptr, nullptr, nullptr, nullptr, &p_bad},
                            bidi),
                       "input 'P' has shape [2, 4]; expected [2, 6]"));
  TBuf y_bad = out({3, 1, 2, 2});
  EXPECT_TRUE(contains(run("LSTM", {&lstm_bidi_X, &lstm_bidi_W, &lstm_bidi_R}, {&y_bad}, bidi), "Y"));
  // GRU with R for a different hidden size, RNN with too many outputs.
  const TBuf gru_r = f32({1, 9, 2}, iota(18));
  TBuf g_y = out({3, 1, 1, 3});
  EXPECT_TRUE(contains(run("GRU", {&gru_rev_X, &gru_rev_W, &gru_r}, {&g_y}, {iattr("hidden_size", 3)}),
                       "GRU: input 'R' has shape [1, 9, 2]; expected [1, 9, 3]"));
  TBuf r_y = out({2, 2, 2, 3}), r_h = out({2, 2, 3}), r_c = out({2, 2, 3});
  EXPECT_TRUE(contains(run("RNN", {&rnn_bidi_X, &rnn_bidi_W, &rnn_bidi_R}, {&r_y, &r_h, &r_c}, bidi), "outputs"));
  // Infer names the operand too.
  auto t = infer("GRU", {{DType::kF32, {3, 1, 2}}, {DType::kF32, {1, 9, 2}}, {DType::kF32, {1, 9}}});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "GRU: input 'R' must have rank 3, got shape [1, 9]");
}

}  // namespace
}  // namespace loom::kernels::nntest
