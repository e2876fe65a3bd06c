// Format 6 of the cpu-simd blob: u8 and i8 tensors, u8 / i8 / i32
// constants, the quantized operators and their shape and dtype rules, and
// that format 5 knows none of them.
#include <cstring>

#include <gtest/gtest.h>

#include "blob_fuzz_support.hpp"
#include "loom/cpu_simd/blob_format.hpp"

namespace loom::cpu_simd {
namespace {

using Builder = testing::BlobBuilder;
using testing::decode_error;
using testing::validate_error;

uint32_t int_constant(Builder& b, std::vector<int64_t> shape, loom_dtype_t dtype, std::vector<uint8_t> bytes) {
  const uint32_t i = b.t(std::move(shape), dtype);
  b.g.tensors[i].constant = true;
  b.g.tensors[i].bytes = std::move(bytes);
  return i;
}

// x [1, 2, 4, 4] f32 -> q = QuantizeLinear(x, 0.1, 128 u8)
//   c = QLinearConv(q, 0.1, 128, w [3, 2, 3, 3] i8, ws [3], wz [3] i8, 0.2, 5 u8, bias [3] i32), pads 1
//   d = DequantizeLinear(c, 0.2, 5)
//   m = MatMulInteger(a [2, 3] i8, b [3, 4] u8, b_zp [4] u8)
BlobGraph quant_graph() {
  Builder b;
  const uint32_t x = b.t({1, 2, 4, 4}), w = b.t({3, 2, 3, 3}, LOOM_DTYPE_I8);
  const uint32_t a = b.t({2, 3}, LOOM_DTYPE_I8), bb = b.t({3, 4}, LOOM_DTYPE_U8);
  const uint32_t s1 = b.constant({}, {0.1f}), z1 = int_constant(b, {}, LOOM_DTYPE_U8, {128});
  const uint32_t ws = b.constant({3}, {0.01f, 0.02f, 0.03f});
  const uint32_t wz = int_constant(b, {3}, LOOM_DTYPE_I8, {0, 1, 0xff});
  const uint32_t s2 = b.constant({1}, {0.2f}), z2 = int_constant(b, {1}, LOOM_DTYPE_U8, {5});
  const uint32_t bias = int_constant(b, {3}, LOOM_DTYPE_I32, {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 7, 0, 0, 0});
  const uint32_t bz = int_constant(b, {4}, LOOM_DTYPE_U8, {1, 2, 3, 4});
  const uint32_t q = b.t({1, 2, 4, 4}, LOOM_DTYPE_U8), c = b.t({1, 3, 4, 4}, LOOM_DTYPE_U8);
  const uint32_t d = b.t({1, 3, 4, 4}), m = b.t({2, 4}, LOOM_DTYPE_I32);
  b.g.inputs = {x, w, a, bb};
  b.g.tensors[w].parameter = true;
  b.g.outputs = {d, m};
  b.node(Op::kQuantizeLinear, {x, s1, z1}, q);
  b.node(Op::kQLinearConv, {q, s1, z1, w, ws, wz, s2, z2, bias}, c).ints = {2, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  b.node(Op::kDequantizeLinear, {c, s2, z2}, d);
  b.node(Op::kMatMulInteger, {a, bb, bz}, m).trans_a = 2;
  return b.g;
}

TEST(BlobFormatV6, RoundTripsQuantizedDtypesConstantsAndOperators) {
  const BlobGraph g = quant_graph();
  std::string error;
  ASSERT_TRUE(validate(g, &error)) << error;
  const std::vector<std::byte> bytes = encode(g);
  EXPECT_EQ(static_cast<uint8_t>(bytes[4]), 6u);
  BlobGraph d;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
  ASSERT_EQ(d.tensors.size(), g.tensors.size());
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    EXPECT_EQ(d.tensors[t].dtype, g.tensors[t].dtype) << t;
    EXPECT_EQ(d.tensors[t].bytes, g.tensors[t].bytes) << t;
    EXPECT_EQ(d.tensors[t].data, g.tensors[t].data) << t;
  }
  ASSERT_EQ(d.nodes.size(), 4u);
  EXPECT_EQ(d.nodes[1].op, Op::kQLinearConv);
  EXPECT_EQ(d.nodes[3].trans_a, 2);
  EXPECT_EQ(encode(d), bytes);
}

TEST(BlobFormatV6, FormatFiveKnowsNeitherTheDtypesNorTheOperators) {
  // Tensor 0 is f32; tensor 1 (w, i8) starts after tensor 0's 4 + 4 + 4 x 8 + 4 bytes.
  EXPECT_EQ(decode_error(encode(quant_graph(), 5)),
            "byte 68: tensor 1: dtype 5 is not supported in format 5 (f32, bool, i32 and i64 are)");
  Builder b;
  const uint32_t x = b.t({2}), s = b.t({}), y = b.t({2}, LOOM_DTYPE_I32);
  b.g.inputs = {x, s};
  b.g.outputs = {y};
  b.node(Op::kCast, {x}, y).ints = {LOOM_DTYPE_I32};
  // Turn the Cast into operator 53 (QuantizeLinear) in a format-5 blob.
  BlobGraph q = b.g;
  q.nodes[0].op = Op::kQuantizeLinear;
  EXPECT_NE(decode_error(encode(q, 5)).find("unknown operator 53 for format 5"), std::string::npos);
}

TEST(BlobFormatV6, IntegerConstantsAreCheckedForSize) {
  BlobGraph g = quant_graph();
  g.tensors[5].bytes.push_back(0);  // z1: 2 bytes for one u8
  std::string error;
  EXPECT_FALSE(validate(g, &error));
  EXPECT_EQ(error, "tensor 5: a u8 constant holds 2 bytes and 0 f32 values, its shape needs 1 bytes");
  g = quant_graph();
  g.tensors[0].bytes = {1, 2};
  EXPECT_FALSE(validate(g, &error));
  EXPECT_EQ(error, "tensor 0: holds 2 raw bytes, which only a u8, i8 or i32 constant has");
  // A u8 constant in a format-5 blob.
  Builder b;
  const uint32_t c = int_constant(b, {1}, LOOM_DTYPE_I32, {1, 0, 0, 0});
  const uint32_t x = b.t({1}, LOOM_DTYPE_I32), y = b.t({1}, LOOM_DTYPE_BOOL);
  b.g.inputs = {x};
  b.g.outputs = {y};
  b.node(Op::kEqual, {c, x}, y);
  EXPECT_EQ(format_version_for(b.g), 6u);
  EXPECT_EQ(decode_error(encode(b.g, 5)), "byte 40: tensor 0: a constant of dtype i32 (constants hold f32 values only)");
}

TEST(BlobFormatV6, MalformedQuantizedNodesAreRefusedByName) {
  auto refused = [](BlobGraph g, const std::string& want) {
    std::string error;
    EXPECT_FALSE(validate(g, &error)) << want;
    EXPECT_NE(error.find(want), std::string::npos) << error;
  };
  BlobGraph g = quant_graph();
  g.tensors[7].dtype = LOOM_DTYPE_U8;  // w zero point u8, w i8
  g.tensors[7].bytes = {0, 1, 2};
  refused(g, "node 1 (QLinearConv): QLinearConv: the w zero point is u8 (9), expected i8");
  g = quant_graph();
  g.tensors[6].shape = {2};  // w scale of 2 entries for 3 channels
  g.tensors[6].data = {0.1f, 0.2f};
  refused(g, "node 1 (QLinearConv): QLinearConv: w scale [2] must have one element or 3");
  g = quant_graph();
  g.tensors[10].dtype = LOOM_DTYPE_U8;  // bias u8
  g.tensors[10].shape = {12};
  refused(g, "node 1 (QLinearConv)");
  g = quant_graph();
  g.nodes[3].trans_a = 3;  // says both zero points, has one
  refused(g, "node 3 (MatMulInteger): MatMulInteger: present mask 3 needs 4 inputs, the node has 3");
  g = quant_graph();
  g.nodes[3].trans_a = 7;
  refused(g, "present mask (trans_a) must be 0 to 3, got 7");
  g = quant_graph();
  g.nodes[0].axis = 9;
  g.tensors[4] = g.tensors[6];  // s1 per channel [3] for x [1, 2, 4, 4]
  refused(g, "node 0 (QuantizeLinear): QuantizeLinear: axis 9 is not an axis of input [1, 2, 4, 4]");
  g = quant_graph();
  g.tensors[13].dtype = LOOM_DTYPE_F32;  // QLinearConv writing f32
  refused(g, "node 1 (QLinearConv): QLinearConv: the output is f32 (1), expected u8");
  g = quant_graph();
  g.nodes[1].ints[1] = 2;  // group 2 for 2 input channels, weight [3, 2, ...]
  refused(g, "node 1 (QLinearConv): QLinearConv: Conv: weight [3, 2, 3, 3] does not fit input [1, 2, 4, 4] with group 2");
}

TEST(BlobFormatV6, EveryTruncationIsRefusedByName) {
  const std::vector<std::byte> bytes = encode(quant_graph());
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string error = decode_error(std::vector<std::byte>(bytes.begin(), bytes.begin() + n));
    EXPECT_TRUE(testing::names_its_place(error, n)) << "prefix " << n << ": " << error;
  }
}

TEST(BlobFormatV6, EveryMutatedByteIsRefusedByNameOrDecodesSound) {
  EXPECT_GT(testing::expect_every_mutation_refused_by_name_or_sound(encode(quant_graph())), 0u);
}


// Format 7: the fused steps' output clamp, QLinearMatMul's bias and trans_b;
// format 6 readers' bytes refuse them by name, and bad clamps are refused.
TEST(BlobFormatV7, FusedQuantizedStepsNeedFormatSevenAndAreChecked) {
  BlobGraph g = quant_graph();
  EXPECT_EQ(format_version_for(g), 6u);
  g.nodes[1].floats = {5, 200};  // QLinearConv clamped to [5, 200]
  std::string error;
  ASSERT_TRUE(validate(g, &error)) << error;
  EXPECT_EQ(format_version_for(g), 7u);
  BlobGraph d;
  const std::vector<std::byte> bytes = encode(g);
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
  EXPECT_EQ(d.nodes[1].floats, (std::vector<float>{5, 200}));
  EXPECT_NE(decode_error(encode(g, 6)).find("node 1 (QLinearConv): a fused quantized step (an output clamp, a "
                                            "QLinearMatMul bias or trans_b) needs format 7, the blob is format 6"),
            std::string::npos);
  auto refused = [](BlobGraph bad, const std::string& want) {
    std::string e;
    EXPECT_FALSE(validate(bad, &e)) << want;
    EXPECT_NE(e.find(want), std::string::npos) << e;
  };
  BlobGraph bad = g;
  bad.nodes[1].floats = {5, 256};
  refused(bad, "node 1 (QLinearConv): QLinearConv: the output clamp [5.000000, 256.000000] must be whole numbers");
  bad.nodes[1].floats = {9, 3};
  refused(bad, "the output clamp [9.000000, 3.000000]");
  bad.nodes[1].floats = {1.5f, 3};
  refused(bad, "the output clamp [1.500000, 3.000000]");
  bad.nodes[1].floats = {1};
  refused(bad, "QLinearConv: unexpected floats (1), expected none or an output clamp [lo, hi]");

  // QLinearMatMul(a [2, 3] u8, b [4, 3] i8 given as [N, K], bias [4] i32) -> [2, 4].
  Builder b;
  const uint32_t a = b.t({2, 3}, LOOM_DTYPE_U8), w = b.t({4, 3}, LOOM_DTYPE_I8);
  const uint32_t s = b.constant({}, {0.1f}), za = int_constant(b, {}, LOOM_DTYPE_U8, {3});
  const uint32_t zw = int_constant(b, {}, LOOM_DTYPE_I8, {0});
  const uint32_t bias = int_constant(b, {4}, LOOM_DTYPE_I32, std::vector<uint8_t>(16, 1));
  const uint32_t y = b.t({2, 4}, LOOM_DTYPE_U8);
  b.g.inputs = {a, w};
  b.g.outputs = {y};
  b.node(Op::kQLinearMatMul, {a, s, za, w, s, zw, s, za, bias}, y).trans_b = 1;
  ASSERT_TRUE(validate(b.g, &error)) << error;
  EXPECT_EQ(format_version_for(b.g), 7u);
  EXPECT_NE(decode_error(encode(b.g, 6)).find("needs format 7"), std::string::npos);
  bad = b.g;
  bad.nodes[0].trans_b = 0;  // B [4, 3] as [K, N] does not fit A [2, 3]
  refused(bad, "node 0 (QLinearMatMul)");
  bad = b.g;
  bad.tensors[bias].shape = {3};
  bad.tensors[bias].bytes.resize(12);
  refused(bad, "QLinearMatMul: the bias [3] must have shape [4]");
  bad = b.g;
  bad.nodes[0].trans_b = 2;
  refused(bad, "QLinearMatMul: trans_b must be 0 or 1, got 2");
}

// Format 10: trans_a 1 on QLinearConv / QLinearMatMul (round, then add the
// zero point): written as 10, refused by a format-9 reader by name; any
// other trans_a is refused; ConvInteger keeps its present mask.
TEST(BlobFormatV10, RoundingBeforeTheZeroPointNeedsFormatTen) {
  BlobGraph g = quant_graph();
  g.nodes[1].trans_a = 1;
  std::string error;
  ASSERT_TRUE(validate(g, &error)) << error;
  EXPECT_EQ(format_version_for(g), 10u);
  BlobGraph d;
  const std::vector<std::byte> bytes = encode(g);
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
  EXPECT_EQ(d.nodes[1].trans_a, 1);
  EXPECT_NE(decode_error(encode(g, 9)).find("node 1 (QLinearConv): trans_a 1 (requantize as a QuantizeLinear: "
                                            "round, then add the zero point) needs format 10, the blob is format 9"),
            std::string::npos);
  g.nodes[1].trans_a = 2;
  EXPECT_FALSE(validate(g, &error));
  EXPECT_NE(error.find("QLinearConv: trans_a must be 0 or 1 (round, then add the zero point), got 2"),
            std::string::npos)
      << error;
}

// Format 8: a Resize of an open input in the open form (ints [2 + linear,
// coordinate mode, rounding], floats the scales); bind_shapes makes the
// static form's taps per binding.
BlobGraph open_resize_graph() {
  Builder b;
  const uint32_t x = b.t({-1, 2, -1, -1}), y = b.t({-1, 2, -1, -1});
  b.g.inputs = {x};
  b.g.outputs = {y};
  BlobNode& n = b.node(Op::kResize, {x}, y);
  n.ints = {2, static_cast<int64_t>(ResizeCoordMode::kAsymmetric), static_cast<int64_t>(ResizeRounding::kFloor)};
  n.floats = {1, 1, 2, 2};
  return b.g;
}

TEST(BlobFormatV8, AnOpenResizeNeedsFormatEightAndBindsItsTapsPerBinding) {
  const BlobGraph g = open_resize_graph();
  std::string error;
  ASSERT_TRUE(validate(g, &error)) << error;
  EXPECT_EQ(format_version_for(g), 8u);
  BlobGraph d;
  const std::vector<std::byte> bytes = encode(g);
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
  EXPECT_EQ(d.nodes[0].ints, g.nodes[0].ints);
  EXPECT_EQ(d.nodes[0].floats, g.nodes[0].floats);
  EXPECT_NE(decode_error(encode(g, 7)).find("node 0 (Resize): the open form (taps made per binding) needs format 8, "
                                            "the blob is format 7"),
            std::string::npos);
  // Bound at [1, 2, 3, 4]: the static form, nearest, [1, 2, 6, 8], each
  // output position reading input position floor(o / 2).
  BlobGraph bound;
  ASSERT_TRUE(bind_shapes(d, {{1, 2, 3, 4}}, &bound, &error)) << error;
  EXPECT_EQ(bound.tensors[1].shape, (std::vector<int64_t>{1, 2, 6, 8}));
  const std::vector<int64_t>& v = bound.nodes[0].ints;
  ASSERT_EQ(v.size(), 1u + 4u + 2u * (1 + 2 + 6 + 8));
  EXPECT_EQ(std::vector<int64_t>(v.begin(), v.begin() + 5), (std::vector<int64_t>{0, 1, 2, 6, 8}));
  // Axis 2's taps start after axes 0 and 1 (1 + 2 positions, 2 ints each).
  EXPECT_EQ(std::vector<int64_t>(v.begin() + 11, v.begin() + 23),
            (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}));
  // Malformed open forms and bindings the scales give nothing are refused
  // at bind time, naming the node.
  auto bind_refused = [&](const BlobGraph& bad, std::vector<int64_t> x, const std::string& want) {
    BlobGraph out;
    std::string e;
    EXPECT_FALSE(bind_shapes(bad, {std::move(x)}, &out, &e)) << want;
    EXPECT_NE(e.find(want), std::string::npos) << e;
  };
  BlobGraph bad = g;
  bad.nodes[0].ints[1] = 5;
  bind_refused(bad, {1, 2, 3, 4}, "node 0 (Resize): Resize: the open form needs ints [2 or 3, coordinate mode 0-4");
  bad = g;
  bad.nodes[0].floats = {1, 1, 2};
  bind_refused(bad, {1, 2, 3, 4}, "one scale per axis of input [1, 2, 3, 4], got 3 ints and 3 scales");
  bad = g;
  bad.nodes[0].floats[3] = 0.25f;
  bind_refused(bad, {1, 2, 3, 3}, "Resize: scale 0.250000 on axis 3 of input [1, 2, 3, 3] gives no output length");
  bad = g;
  bad.nodes[0].floats[2] = -1.0f;
  bind_refused(bad, {1, 2, 3, 3}, "Resize: scale -1.000000 on axis 2 is not a positive finite factor");
  EXPECT_NE(validate_error(bad).find("node 0 (Resize): Resize: scale -1.000000 on axis 2"), std::string::npos);
  // The open form of a static input (the kernels would read it as taps).
  bad = g;
  bad.tensors[0].shape = {1, 2, 3, 4};
  bad.tensors[1].shape = {1, 2, 6, 8};
  EXPECT_NE(validate_error(bad).find("node 0 (Resize): the open form (scales, taps made per binding) needs an input with open dimensions"), std::string::npos);
}

TEST(BlobFormatV8, EveryMutatedByteIsRefusedByNameOrDecodesSound) {
  EXPECT_GT(testing::expect_every_mutation_refused_by_name_or_sound(encode(open_resize_graph())), 0u);
}
}  // namespace
}  // namespace loom::cpu_simd
