// Format 10 of the cpu-simd blob: Round and DynamicQuantizeLinear's three
// nodes (scale, zero point, y), their arity, shape and dtype rules, and that
// format 9 refuses them by name. Format 11: the moving operators of any
// dtype and MaxPool of u8 / i8, refused by name in format 10. Format 12:
// QLinearConvTranspose and its rules.
#include <gtest/gtest.h>

#include "blob_fuzz_support.hpp"
#include "loom/cpu_simd/blob_format.hpp"

namespace loom::cpu_simd {
namespace {

using testing::decode_error;
using testing::validate_error;

// x [2, 3] f32 -> r = Round(x); s = scale(r); z = zero point(r); y = quantize(r, s, z)
BlobGraph dql_graph() {
  testing::BlobBuilder b;
  const uint32_t x = b.t({2, 3}), r = b.t({2, 3}), s = b.t({}), z = b.t({}, LOOM_DTYPE_U8);
  const uint32_t y = b.t({2, 3}, LOOM_DTYPE_U8);
  b.g.inputs = {x};
  b.g.outputs = {y, s, z};
  b.node(Op::kRound, {x}, r);
  b.node(Op::kDynamicQuantizeScale, {r}, s);
  b.node(Op::kDynamicQuantizeZeroPoint, {r}, z);
  b.node(Op::kDynamicQuantize, {r, s, z}, y);
  return b.g;
}

TEST(BlobFormatV10, RoundTripsRoundAndDynamicQuantizeLinear) {
  const BlobGraph g = dql_graph();
  std::string error;
  ASSERT_TRUE(validate(g, &error)) << error;
  EXPECT_EQ(format_version_for(g), 10u);
  const std::vector<std::byte> bytes = encode(g);
  EXPECT_EQ(static_cast<uint8_t>(bytes[4]), 10u);
  BlobGraph d;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
  ASSERT_EQ(d.nodes.size(), 4u);
  EXPECT_EQ(d.nodes[0].op, Op::kRound);
  EXPECT_EQ(d.nodes[3].op, Op::kDynamicQuantize);
  EXPECT_EQ(d.nodes[3].inputs, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(encode(d), bytes);
  // A graph without them keeps its older format.
  BlobGraph old = g;
  old.nodes[0].op = Op::kFloor;
  old.nodes.resize(1);
  old.outputs = {1};
  EXPECT_LT(format_version_for(old), 10u);
}

TEST(BlobFormatV10, FormatNineRefusesTheNewOperatorsByName) {
  EXPECT_NE(decode_error(encode(dql_graph(), 9)).find("node 0 (Round): needs format 10, the blob is format 9"),
            std::string::npos);
  BlobGraph g = dql_graph();
  g.nodes[0].op = Op::kCopy;
  EXPECT_NE(decode_error(encode(g, 9)).find("node 1 (DynamicQuantizeLinear (scale)): needs format 10"),
            std::string::npos);
  EXPECT_NE(decode_error(encode(g, 6)).find("needs format 10, the blob is format 6"), std::string::npos);
}

TEST(BlobFormatV10, MalformedNodesAreRefusedByName) {
  BlobGraph g = dql_graph();
  g.tensors[2].shape = {1};  // the scale
  EXPECT_NE(validate_error(g).find("node 1 (DynamicQuantizeLinear (scale)): output tensor 2 is declared [1] but "
                                   "the operator produces []"),
            std::string::npos)
      << validate_error(g);
  g = dql_graph();
  g.tensors[3].dtype = LOOM_DTYPE_I8;  // the zero point
  EXPECT_NE(validate_error(g).find("node 2 (DynamicQuantizeLinear (zero point)): DynamicQuantizeLinear (zero point): the output is i8, expected u8"),
            std::string::npos)
      << validate_error(g);
  g = dql_graph();
  g.tensors[4].dtype = LOOM_DTYPE_F32;  // y
  EXPECT_NE(validate_error(g).find("node 3 (DynamicQuantizeLinear (y)): DynamicQuantizeLinear (y): the output is f32, expected u8"),
            std::string::npos)
      << validate_error(g);
  g = dql_graph();
  g.nodes[3].inputs = {1, 2};
  EXPECT_NE(validate_error(g).find("node 3 (DynamicQuantizeLinear (y)): has 2 inputs, needs 3"), std::string::npos)
      << validate_error(g);
  g = dql_graph();
  g.nodes[3].inputs = {1, 3, 2};  // scale and zero point swapped
  EXPECT_NE(validate_error(g).find("node 3 (DynamicQuantizeLinear (y)): DynamicQuantizeLinear (y): y_scale is u8, expected f32"),
            std::string::npos)
      << validate_error(g);
  g = dql_graph();
  g.nodes[1].ints = {1};
  EXPECT_NE(validate_error(g).find("node 1 (DynamicQuantizeLinear (scale)): DynamicQuantizeLinear (scale): unexpected attribute lists (1 ints"),
            std::string::npos)
      << validate_error(g);
  // A scale that is not a scalar, fed to the quantize node.
  testing::BlobBuilder b;
  const uint32_t x = b.t({4}), s = b.t({1}), z = b.t({}, LOOM_DTYPE_U8), y = b.t({4}, LOOM_DTYPE_U8);
  b.g.inputs = {x, s, z};
  b.g.outputs = {y};
  b.node(Op::kDynamicQuantize, {x, s, z}, y);
  EXPECT_NE(validate_error(b.g).find("node 0 (DynamicQuantizeLinear (y)): DynamicQuantizeLinear (y): y_scale [1] must be a scalar []"),
            std::string::npos)
      << validate_error(b.g);
  g = dql_graph();
  g.tensors[0].dtype = LOOM_DTYPE_I32;
  g.tensors[1].dtype = LOOM_DTYPE_I32;
  EXPECT_NE(validate_error(g).find("node 0 (Round): Round: input 0 is i32 (7), expected f32"), std::string::npos)
      << validate_error(g);
}

// x u8 [1, 2, 4, 4] -> MaxPool 2x2 -> p [1, 2, 2, 2] -> Copy -> y [8]; z i64
// [3] -> Transpose -> w.
BlobGraph moved_graph() {
  testing::BlobBuilder b;
  const uint32_t x = b.t({1, 2, 4, 4}, LOOM_DTYPE_U8), p = b.t({1, 2, 2, 2}, LOOM_DTYPE_U8);
  const uint32_t y = b.t({8}, LOOM_DTYPE_U8), z = b.t({3}, LOOM_DTYPE_I64), w = b.t({3}, LOOM_DTYPE_I64);
  b.g.inputs = {x, z};
  b.g.outputs = {y, w};
  b.node(Op::kMaxPool, {x}, p);
  b.g.nodes.back().ints = {2, 0, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0};
  b.node(Op::kCopy, {p}, y);
  b.node(Op::kTranspose, {z}, w);
  b.g.nodes.back().ints = {0};
  return b.g;
}

TEST(BlobFormatV11, MovingOperatorsOfAnyDtypeRoundTripAndFormatTenRefusesThemByName) {
  const BlobGraph g = moved_graph();
  std::string error;
  ASSERT_TRUE(validate(g, &error)) << error;
  EXPECT_EQ(format_version_for(g), 11u);
  const std::vector<std::byte> bytes = encode(g);
  EXPECT_EQ(static_cast<uint8_t>(bytes[4]), 11u);
  BlobGraph d;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
  EXPECT_EQ(encode(d), bytes);
  EXPECT_NE(decode_error(encode(g, 10)).find("node 0 (MaxPool): moving u8 elements needs format 11, the blob is format 10"),
            std::string::npos)
      << decode_error(encode(g, 10));
  testing::BlobBuilder t;
  const uint32_t z = t.t({3}, LOOM_DTYPE_I64), w = t.t({3}, LOOM_DTYPE_I64);
  t.g.inputs = {z};
  t.g.outputs = {w};
  t.node(Op::kTranspose, {z}, w);
  t.g.nodes.back().ints = {0};
  EXPECT_NE(decode_error(encode(t.g, 10)).find("node 0 (Transpose): moving i64 elements needs format 11"),
            std::string::npos)
      << decode_error(encode(t.g, 10));
  // The dtype rules: one dtype in and out; MaxPool of f32, u8 and i8 only.
  BlobGraph bad = g;
  bad.tensors[2].dtype = LOOM_DTYPE_I8;  // Copy u8 -> i8
  EXPECT_NE(validate_error(bad).find("node 1 (Copy): Copy: input 0 is u8 (9), expected i8"), std::string::npos)
      << validate_error(bad);
  bad = g;
  bad.tensors[0].dtype = bad.tensors[1].dtype = bad.tensors[2].dtype = LOOM_DTYPE_I32;
  EXPECT_NE(validate_error(bad).find("node 0 (MaxPool): MaxPool: the output is i32 (7), expected f32, u8 or i8"),
            std::string::npos)
      << validate_error(bad);
}


// Format 12: QLinearConvTranspose. x u8 [1, 4, 3, 3], w i8 [4, 2, 3, 3]
// (stride 2, pads 1, output_padding 1: y [1, 2, 6, 6]), scales and zero
// points as inputs here (the rules read shapes and dtypes only).
BlobGraph qdeconv_graph() {
  testing::BlobBuilder b;
  const uint32_t x = b.t({1, 4, 3, 3}, LOOM_DTYPE_U8), xs = b.t({}), xz = b.t({}, LOOM_DTYPE_U8);
  const uint32_t w = b.t({4, 2, 3, 3}, LOOM_DTYPE_I8), ws = b.t({2}), wz = b.t({2}, LOOM_DTYPE_I8);
  const uint32_t ys = b.t({}), yz = b.t({}, LOOM_DTYPE_U8), bias = b.t({2}, LOOM_DTYPE_I32);
  const uint32_t y = b.t({1, 2, 6, 6}, LOOM_DTYPE_U8);
  b.g.inputs = {x, xs, xz, w, ws, wz, ys, yz, bias};
  b.g.outputs = {y};
  BlobNode& n = b.node(Op::kQLinearConvTranspose, {x, xs, xz, w, ws, wz, ys, yz, bias}, y);
  n.ints = {2, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1};
  n.trans_a = 1;
  n.floats = {0, 200};
  return b.g;
}

TEST(BlobFormatV12, QLinearConvTransposeRoundTripsAndOlderFormatsRefuseItByName) {
  const BlobGraph g = qdeconv_graph();
  std::string error;
  ASSERT_TRUE(validate(g, &error)) << error;
  EXPECT_EQ(format_version_for(g), 12u);
  const std::vector<std::byte> bytes = encode(g);
  EXPECT_EQ(static_cast<uint8_t>(bytes[4]), 12u);
  BlobGraph d;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
  ASSERT_EQ(d.nodes.size(), 1u);
  EXPECT_EQ(d.nodes[0].op, Op::kQLinearConvTranspose);
  EXPECT_EQ(d.nodes[0].ints, g.nodes[0].ints);
  EXPECT_EQ(encode(d), bytes);
  EXPECT_NE(decode_error(encode(g, 11)).find("node 0 (QLinearConvTranspose): needs format 12, the blob is format 11"),
            std::string::npos);
  EXPECT_NE(decode_error(encode(g, 9)).find("needs format 12, the blob is format 9"), std::string::npos);
}

TEST(BlobFormatV12, MalformedQLinearConvTransposeIsRefusedByName) {
  auto error_of = [](void (*edit)(BlobGraph&)) {
    BlobGraph g = qdeconv_graph();
    edit(g);
    return validate_error(g);
  };
  const std::string rounding = error_of([](BlobGraph& g) { g.nodes[0].trans_a = 0; });
  EXPECT_NE(rounding.find("QLinearConvTranspose: trans_a must be 1 (round, then add the zero point), got 0"),
            std::string::npos) << rounding;
  const std::string signed_x = error_of([](BlobGraph& g) {
    g.tensors[0].dtype = LOOM_DTYPE_I8;
    g.tensors[2].dtype = LOOM_DTYPE_I8;
  });
  EXPECT_NE(signed_x.find("QLinearConvTranspose: x is i8 (5), expected u8"), std::string::npos) << signed_x;
  const std::string u8_w = error_of([](BlobGraph& g) {
    g.tensors[3].dtype = LOOM_DTYPE_U8;
    g.tensors[5].dtype = LOOM_DTYPE_U8;
  });
  EXPECT_NE(u8_w.find("QLinearConvTranspose: the weight is u8 (9), expected i8"), std::string::npos) << u8_w;
  const std::string rank = error_of([](BlobGraph& g) {
    g.tensors[0].shape = {1, 4, 9};
    g.tensors[3].shape = {4, 2, 3};
    g.tensors[9].shape = {1, 2, 18};
    g.nodes[0].ints = {1, 1, 3, 2, 1, 1, 1, 1};
  });
  EXPECT_NE(rank.find("QLinearConvTranspose: x [1, 4, 9] must be 4-D ([N, C, H, W])"), std::string::npos) << rank;
  const std::string scale = error_of([](BlobGraph& g) { g.tensors[4].shape = {3}; });
  EXPECT_NE(scale.find("QLinearConvTranspose: w scale [3] must have one element or 2"), std::string::npos) << scale;
  const std::string out = error_of([](BlobGraph& g) { g.tensors[9].shape = {1, 2, 5, 6}; });
  EXPECT_NE(out.find("is declared [1, 2, 5, 6] but the operator produces [1, 2, 6, 6]"), std::string::npos) << out;
  const std::string arity = error_of([](BlobGraph& g) { g.nodes[0].inputs.resize(7); });
  EXPECT_NE(arity.find("QLinearConvTranspose"), std::string::npos) << arity;
}

}  // namespace
}  // namespace loom::cpu_simd
