// Format 2 of the cpu-simd blob: constants, attribute lists and the new
// operators' shape rules; format 1 still decodes.
#include <gtest/gtest.h>

#include "blob_fuzz_support.hpp"
#include "fixtures/format1_blob.hpp"
#include "loom/cpu_simd/blob_format.hpp"

namespace loom::cpu_simd {
namespace {

using Builder = testing::BlobBuilder;
using testing::decode_error;
using testing::validate_error;

// x[1,2,4,4] -> Conv(w const, 3x3, pad 1) -> MaxPool 2x2/2 -> Transpose ->
// Copy (reshape) -> Concat with a constant -> y
BlobGraph conv_graph() {
  Builder b;
  const uint32_t x = b.t({1, 2, 4, 4});
  const uint32_t w = b.constant({3, 2, 3, 3}, std::vector<float>(54, 0.5f));
  const uint32_t c = b.t({1, 3, 4, 4}), p = b.t({1, 3, 2, 2}), tr = b.t({1, 2, 2, 3});
  const uint32_t r = b.t({4, 3}), k = b.constant({1, 3}, {1, 2, 3}), y = b.t({5, 3});
  b.g.inputs = {x};
  b.g.outputs = {y};
  b.node(Op::kConv, {x, w}, c).ints = {2, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  b.node(Op::kMaxPool, {c}, p).ints = {2, 0, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0};
  b.node(Op::kTranspose, {p}, tr).ints = {0, 2, 3, 1};
  b.node(Op::kCopy, {tr}, r);
  b.node(Op::kConcat, {r, k}, y).axis = 0;
  return b.g;
}

TEST(BlobFormatV2, RoundTripsConstantsAndAttributeLists) {
  const BlobGraph g = conv_graph();
  const std::vector<std::byte> bytes = encode(g);
  BlobGraph d;
  std::string error;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
  ASSERT_EQ(d.tensors.size(), g.tensors.size());
  EXPECT_TRUE(d.tensors[1].constant);
  EXPECT_EQ(d.tensors[1].data.size(), 54u);
  EXPECT_FALSE(d.tensors[0].constant);
  EXPECT_EQ(d.nodes[0].ints, g.nodes[0].ints);
  EXPECT_EQ(d.nodes[2].ints, (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_EQ(encode(d), bytes);
}

std::vector<std::byte> frozen_format1_blob() {
  const auto* p = reinterpret_cast<const std::byte*>(fixtures::kFormat1Blob);
  return std::vector<std::byte>(p, p + sizeof fixtures::kFormat1Blob);
}

TEST(BlobFormatV2, FrozenFormatOneBlobStillDecodes) {
  const std::vector<std::byte> v1 = frozen_format1_blob();
  ASSERT_EQ(v1.size(), 464u);
  EXPECT_EQ(static_cast<uint8_t>(v1[4]), 1u);
  BlobGraph d;
  std::string error;
  ASSERT_TRUE(decode(v1.data(), v1.size(), &d, &error)) << error;
  ASSERT_EQ(d.tensors.size(), 8u);
  for (size_t t = 0; t < d.tensors.size(); ++t) {
    EXPECT_EQ(d.tensors[t].dtype, LOOM_DTYPE_F32);
    EXPECT_FALSE(d.tensors[t].constant);
    const std::vector<int64_t> want = t == 2 ? std::vector<int64_t>{2} : std::vector<int64_t>{2, 2};
    EXPECT_EQ(d.tensors[t].shape, want) << t;
  }
  EXPECT_EQ(d.inputs, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(d.outputs, (std::vector<uint32_t>{7, 6}));
  ASSERT_EQ(d.nodes.size(), 5u);
  const Op ops[] = {Op::kMatMul, Op::kGemm, Op::kAdd, Op::kRelu, Op::kSoftmax};
  const std::vector<std::vector<uint32_t>> ins = {{0, 1}, {3, 1, 2}, {4, 0}, {5}, {6}};
  for (uint32_t n = 0; n < 5; ++n) {
    EXPECT_EQ(d.nodes[n].op, ops[n]) << n;
    EXPECT_EQ(d.nodes[n].inputs, ins[n]) << n;
    EXPECT_EQ(d.nodes[n].outputs, (std::vector<uint32_t>{n + 3})) << n;
    EXPECT_TRUE(d.nodes[n].ints.empty() && d.nodes[n].floats.empty()) << n;
  }
  EXPECT_EQ(d.nodes[1].trans_a, 0);
  EXPECT_EQ(d.nodes[1].trans_b, 1);
  EXPECT_EQ(d.nodes[1].alpha, 0.5f);
  EXPECT_EQ(d.nodes[1].beta, 2.0f);
  EXPECT_EQ(d.nodes[4].axis, 1);
  // Today's encoder still writes format 1 byte for byte.
  EXPECT_EQ(encode(d, 1), v1);
}

TEST(BlobFormatV2, FormatOneKnowsOnlyItsOwnOperators) {
  std::vector<std::byte> v1 = frozen_format1_blob();
  // Node 3 (Relu) starts after the header, 8 tensors, 3 inputs, 2 outputs and
  // nodes 0-2 (36 fixed bytes plus 4 per operand each).
  const size_t relu_at = kHeaderSize + 7 * 24 + 16 + 12 + 8 + (36 + 12) + (36 + 16) + (36 + 12);
  ASSERT_EQ(static_cast<uint8_t>(v1[relu_at]), static_cast<uint8_t>(Op::kRelu));
  v1[relu_at] = std::byte{static_cast<uint8_t>(Op::kSigmoid)};
  EXPECT_EQ(decode_error(v1),
            "byte " + std::to_string(relu_at) + ": node 3: unknown operator 16 for format 1");
}

TEST(BlobFormatV2, EveryTruncationIsRefusedByName) {
  const std::vector<std::byte> bytes = encode(conv_graph());
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string error = decode_error(std::vector<std::byte>(bytes.begin(), bytes.begin() + n));
    EXPECT_TRUE(testing::names_its_place(error, n)) << "prefix " << n << ": " << error;
  }
}

TEST(BlobFormatV2, EveryMutatedByteIsRefusedByNameOrDecodesSound) {
  EXPECT_GT(testing::expect_every_mutation_refused_by_name_or_sound(encode(conv_graph())), 0u);
}

TEST(BlobFormatV2, ConstantsAreChecked) {
  BlobGraph g = conv_graph();
  g.tensors[1].data.pop_back();
  std::string error;
  EXPECT_FALSE(validate(g, &error));
  EXPECT_EQ(error, "tensor 1: holds 53 values, its shape needs 54");
  g = conv_graph();
  g.inputs.push_back(1);
  EXPECT_EQ(validate_error(g), "graph input 1: tensor 1 is a constant");
  g = conv_graph();
  g.nodes[0].outputs[0] = 6;
  EXPECT_NE(validate_error(g).find("output tensor 6 is already a constant"), std::string::npos);
  std::vector<std::byte> bytes = encode(conv_graph());
  // Tensor 0: dtype, rank, 4 dims, then its flags.
  const size_t flags_at = kHeaderSize + 8 + 4 * 8;
  bytes[flags_at] = std::byte{7};
  EXPECT_EQ(decode_error(bytes), "byte " + std::to_string(flags_at) + ": tensor 0: unknown flags 7 in format 4");
  // Tensor 0 claimed constant: its "values" swallow the following records.
  bytes = encode(conv_graph());
  bytes[flags_at] = std::byte{1};
  EXPECT_TRUE(testing::names_its_place(decode_error(bytes), bytes.size())) << decode_error(bytes);
  // A constant's dimensions are checked before its values are sized.
  g = conv_graph();
  g.tensors[1].shape[0] = -3;
  const size_t tensor1_at = flags_at + 4;
  EXPECT_EQ(validate_error(g),
            "byte " + std::to_string(tensor1_at) + ": tensor 1: constant with dimension 0 of -3");
  g.tensors[1].shape = {int64_t{1} << 31, int64_t{1} << 31, 1, 1};
  EXPECT_EQ(validate_error(g), "byte " + std::to_string(tensor1_at) +
                                   ": tensor 1: constant of shape [2147483648, 2147483648, 1, 1] "
                                   "has 2^60 elements or more");
}

TEST(BlobFormatV2, WindowAttributesAreChecked) {
  BlobGraph g = conv_graph();
  g.nodes[0].ints.pop_back();
  EXPECT_EQ(validate_error(g), "node 0 (Conv): Conv: has 11 ints, expected 12");
  g = conv_graph();
  g.nodes[0].ints[1] = 2;  // group 2 does not divide 3 output channels
  EXPECT_NE(validate_error(g).find("does not fit input"), std::string::npos);
  g = conv_graph();
  g.nodes[0].ints[4] = 0;  // stride 0
  EXPECT_EQ(validate_error(g),
            "node 0 (Conv): Conv: spatial dimension 0: kernel 3, stride 0, dilation 1, pads 1 and 1: "
            "kernel, stride and dilation must be >= 1 and pads >= 0 (all <= 2^31)");
  g = conv_graph();
  g.nodes[0].ints[0] = 4;
  EXPECT_EQ(validate_error(g),
            "node 0 (Conv): Conv: the spatial rank (ints[0]) must be 1 to 3, got 4");
  g = conv_graph();
  g.nodes[0].ints[1] = int64_t{1} << 40;
  EXPECT_EQ(validate_error(g),
            "node 0 (Conv): Conv: group (ints[1]) must be 1 to 2^31, got 1099511627776");
  g = conv_graph();
  g.nodes[1].ints[1] = 2;  // ceil_mode 2
  EXPECT_EQ(validate_error(g), "node 1 (MaxPool): MaxPool: ceil_mode (ints[1]) and "
                               "count_include_pad (ints[2]) must be 0 or 1, got 2 and 0");
  g = conv_graph();
  g.nodes[1].ints[3] = 9;  // a 9-wide window on 4 columns
  EXPECT_NE(validate_error(g).find("the window does not fit spatial dimension 0"), std::string::npos);
  g = conv_graph();
  g.tensors[2].shape = {1, 3, 3, 4};
  EXPECT_NE(validate_error(g).find("is declared [1, 3, 3, 4] but the operator produces [1, 3, 4, 4]"),
            std::string::npos);
}

TEST(BlobFormatV2, OtherShapeRulesAreChecked) {
  BlobGraph g = conv_graph();
  g.nodes[2].ints = {0, 2, 2, 1};
  EXPECT_EQ(validate_error(g),
            "node 2 (Transpose): Transpose: perm [0, 2, 2, 1] is not a permutation of the "
            "input's axes (entry 2 is 2)");
  g = conv_graph();
  g.tensors[5].shape = {4, 4};
  EXPECT_NE(validate_error(g).find("does not hold the 12 elements"), std::string::npos);
  g = conv_graph();
  g.nodes[4].axis = 2;
  EXPECT_NE(validate_error(g).find("Concat: axis 2 is out of range"), std::string::npos);
  g = conv_graph();
  g.nodes[4].axis = 1;
  EXPECT_NE(validate_error(g).find("does not match input 0"), std::string::npos);
  g = conv_graph();
  g.nodes[3].ints = {1};
  // Format 5 reads a Copy's ints as its shape spec; format 4 has none.
  EXPECT_NE(decode_error(encode(g, 4)).find("a shape spec (ints) needs format 5"), std::string::npos);
  g = conv_graph();
  g.nodes[4].inputs.clear();
  EXPECT_EQ(validate_error(g), "node 4 (Concat): has 0 inputs, needs 1 or more");
  Builder b;
  const uint32_t x = b.t({2, 3}), s = b.t({2}), y = b.t({2, 3});
  b.g.inputs = {x, s};
  b.g.outputs = {y};
  b.node(Op::kPRelu, {x, s}, y);
  EXPECT_NE(validate_error(b.g).find("shapes do not broadcast"), std::string::npos);
  b.g.tensors[s].shape = {1, 2, 1};
  EXPECT_NE(validate_error(b.g).find("does not broadcast to X"), std::string::npos);
}

}  // namespace
}  // namespace loom::cpu_simd
