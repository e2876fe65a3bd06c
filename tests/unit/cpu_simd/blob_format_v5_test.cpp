// Format 5 of the cpu-simd blob: open dimensions (-1) outside constants and
// parameters, Copy's shape spec, what older formats refuse, and bind_shapes,
// which makes one concrete graph per binding.
#include <gtest/gtest.h>

#include "blob_fuzz_support.hpp"
#include "loom/cpu_simd/blob_format.hpp"

namespace loom::cpu_simd {
namespace {

using Builder = testing::BlobBuilder;
using testing::decode_error;
using testing::validate_error;

// x [-1, 4], w [4, 6] (parameter), s [6] constant ->
//   m = MatMul(x, w)              [-1, 6]
//   a = Add(m, s)                 [-1, 6]
//   r = Relu(a)                   [-1, 6]
//   y = Copy(r, spec [-2, 3, -1]) [-1, 3, 2]
BlobGraph open_graph() {
  Builder b;
  const uint32_t x = b.t({-1, 4}), w = b.t({4, 6});
  const uint32_t s = b.constant({6}, {1, -1, 2, -2, 3, -3});
  const uint32_t m = b.t({-1, 6}), a = b.t({-1, 6}), r = b.t({-1, 6}), y = b.t({-1, 3, 2});
  b.g.tensors[w].parameter = true;
  b.g.inputs = {x, w};
  b.g.outputs = {y};
  b.node(Op::kMatMul, {x, w}, m);
  b.node(Op::kAdd, {m, s}, a);
  b.node(Op::kRelu, {a}, r);
  b.node(Op::kCopy, {r}, y).ints = {-2, 3, -1};
  return b.g;
}

TEST(BlobFormatV5, OpenGraphRoundTripsInFormatFive) {
  const BlobGraph g = open_graph();
  std::string error;
  ASSERT_TRUE(validate(g, &error)) << error;
  EXPECT_TRUE(has_open_dims(g));
  EXPECT_EQ(format_version_for(g), 5u);
  const std::vector<std::byte> bytes = encode(g);
  EXPECT_EQ(static_cast<uint8_t>(bytes[4]), 5u);
  BlobGraph d;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
  for (size_t t = 0; t < g.tensors.size(); ++t) EXPECT_EQ(d.tensors[t].shape, g.tensors[t].shape) << t;
  EXPECT_EQ(d.nodes[3].ints, (std::vector<int64_t>{-2, 3, -1}));
  EXPECT_EQ(encode(d), bytes);
}

TEST(BlobFormatV5, StaticGraphsStayInFormatFour) {
  Builder b;
  const uint32_t x = b.t({2, 3}), y = b.t({2, 3});
  b.g.inputs = {x};
  b.g.outputs = {y};
  b.node(Op::kRelu, {x}, y);
  EXPECT_EQ(format_version_for(b.g), 4u);
  EXPECT_EQ(static_cast<uint8_t>(encode(b.g)[4]), 4u);
  // A shape spec alone needs format 5 too.
  b.g.nodes[0].op = Op::kCopy;
  b.g.nodes[0].ints = {-2, -3};
  EXPECT_EQ(format_version_for(b.g), 5u);
  std::string error;
  EXPECT_TRUE(validate(b.g, &error)) << error;
  EXPECT_NE(decode_error(encode(b.g, 4)).find("node 0 (Copy): a shape spec (ints) needs format 5"),
            std::string::npos)
      << decode_error(encode(b.g, 4));
}

TEST(BlobFormatV5, OpenDimensionsNeedFormatFive) {
  const std::string error = decode_error(encode(open_graph(), 4));
  EXPECT_EQ(error, "byte 24: tensor 0: dimension 0 is -1 (open dimensions need format 5)");
}

TEST(BlobFormatV5, ConstantsAndParametersAreStatic) {
  BlobGraph g = open_graph();
  g.tensors[1].shape = {-1, 6};
  EXPECT_EQ(validate_error(g), "tensor 1: dimension 0 is -1 (open), but a parameter is static");
  g = open_graph();
  g.tensors[2].shape = {-1};
  g.tensors[2].data.clear();
  EXPECT_NE(validate_error(g).find("constant with dimension 0 of -1"), std::string::npos) << validate_error(g);
}

TEST(BlobFormatV5, OtherNegativeDimensionsAreRefused) {
  BlobGraph g = open_graph();
  g.tensors[0].shape = {-2, 4};
  EXPECT_EQ(validate_error(g), "tensor 0: dimension 0 is -2");
}

TEST(BlobFormatV5, OpenCopyNeedsAWellFormedSpec) {
  BlobGraph g = open_graph();
  g.nodes[3].ints.clear();
  EXPECT_EQ(validate_error(g),
            "node 3 (Copy): output tensor 6 [-1, 3, 2] or its input is open, which needs a shape spec (ints)");
  g.nodes[3].ints = {-2, 3};
  EXPECT_EQ(validate_error(g), "node 3 (Copy): shape spec of 2 entries for output tensor 6 of rank 3");
  // Two inferred dimensions, or a copied dimension the input lacks, fail
  // when a binding applies the spec.
  std::string error;
  BlobGraph bound;
  g.nodes[3].ints = {-1, 3, -1};
  ASSERT_TRUE(validate(g, &error)) << error;
  EXPECT_FALSE(bind_shapes(g, {{2, 4}, {4, 6}}, &bound, &error));
  EXPECT_EQ(error, "node 3 (Copy): Copy: shape spec [-1, 3, -1] infers more than one dimension");
  g.nodes[3].ints = {-5, 3, 2};
  EXPECT_FALSE(bind_shapes(g, {{2, 4}, {4, 6}}, &bound, &error));
  EXPECT_EQ(error, "node 3 (Copy): Copy: shape spec [-5, 3, 2] entry 0 copies input dimension 3, input is [2, 6]");
}

// An open Cast meets the dtype rule before any shape rule runs; its `to`
// is checked there (a fuzzer found `to` 33619966 converted to loom_dtype_t).
TEST(BlobFormatV5, OpenCastWithABadTargetDtypeIsRefused) {
  Builder b;
  const uint32_t x = b.t({-1, 4}), y = b.t({-1, 4});
  b.g.inputs = {x};
  b.g.outputs = {y};
  BlobNode& cast = b.node(Op::kCast, {x}, y);
  cast.ints = {33619966};
  const std::string want =
      "node 0 (Cast): Cast: ints must be [to] with to a dtype of f32 (1), i32 (7), i64 (8), "
      "bool (13), u8 (9) or i8 (5), got ";
  EXPECT_EQ(validate_error(b.g), want + "[33619966]");
  b.g.nodes[0].ints.clear();
  EXPECT_EQ(validate_error(b.g), want + "[]");
  b.g.nodes[0].ints = {LOOM_DTYPE_F32};
  std::string error;
  EXPECT_TRUE(validate(b.g, &error)) << error;
}

TEST(BlobFormatV5, BindShapesGivesTheConcreteGraphPerBinding) {
  const BlobGraph g = open_graph();
  for (int64_t n : {1, 2, 7}) {
    BlobGraph bound;
    std::string error;
    ASSERT_TRUE(bind_shapes(g, {{n, 4}, {4, 6}}, &bound, &error)) << error;
    EXPECT_FALSE(has_open_dims(bound));
    EXPECT_EQ(bound.tensors[3].shape, (std::vector<int64_t>{n, 6}));
    EXPECT_EQ(bound.tensors[6].shape, (std::vector<int64_t>{n, 3, 2}));
    EXPECT_EQ(bound.tensors[2].data, g.tensors[2].data);
  }
}

TEST(BlobFormatV5, BindShapesRefusesShapesThatDoNotFit) {
  const BlobGraph g = open_graph();
  BlobGraph bound;
  std::string error;
  EXPECT_FALSE(bind_shapes(g, {{2, 5}, {4, 6}}, &bound, &error));
  EXPECT_EQ(error, "input 0 has shape [2, 5], which does not fit the declared [-1, 4]");
  EXPECT_FALSE(bind_shapes(g, {{2, 4, 1}, {4, 6}}, &bound, &error));
  EXPECT_EQ(error, "input 0 has shape [2, 4, 1], which does not fit the declared [-1, 4]");
  EXPECT_FALSE(bind_shapes(g, {{2, 4}}, &bound, &error));
  EXPECT_EQ(error, "the graph takes 2 inputs, got 1 shapes");
  // A declared static dimension that the binding contradicts.
  BlobGraph h = open_graph();
  h.tensors[6].shape = {-1, 3, 3};
  h.nodes[3].ints = {-2, 3, 3};
  ASSERT_TRUE(validate(h, &error)) << error;
  EXPECT_FALSE(bind_shapes(h, {{2, 4}, {4, 6}}, &bound, &error));
  EXPECT_EQ(error, "node 3 (Copy): Copy: output [2, 3, 3] does not hold the 12 elements of input [2, 6]");
}

TEST(BlobFormatV5, StaticNodesOfAnOpenGraphAreCheckedAtDecode) {
  BlobGraph g = open_graph();
  // w [4, 6] -> Relu declared [4, 5]: static operands, wrong declared shape.
  Builder b;
  b.g = g;
  const uint32_t bad = b.t({4, 5});
  b.node(Op::kRelu, {1}, bad);
  EXPECT_EQ(validate_error(b.g), "node 4 (Relu): output tensor 7 is declared [4, 5] but the operator produces [4, 6]");
}

}  // namespace
}  // namespace loom::cpu_simd
