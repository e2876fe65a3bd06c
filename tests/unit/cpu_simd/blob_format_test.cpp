#include "loom/cpu_simd/blob_format.hpp"

#include <gtest/gtest.h>

#include "blob_fuzz_support.hpp"

namespace loom::cpu_simd {
namespace {

using testing::decode_error;
using testing::validate_error;

// x[2,3] -> MatMul w[3,4] -> Add b[4] -> Relu -> Softmax -> y[2,4]
BlobGraph small_graph() {
  BlobGraph g;
  auto t = [&](std::vector<int64_t> shape) {
    g.tensors.push_back({LOOM_DTYPE_F32, std::move(shape)});
    return static_cast<uint32_t>(g.tensors.size() - 1);
  };
  uint32_t x = t({2, 3}), w = t({3, 4}), b = t({4});
  uint32_t h = t({2, 4}), h1 = t({2, 4}), r = t({2, 4}), y = t({2, 4});
  g.inputs = {x, w, b};
  g.outputs = {y};
  auto node = [&](Op op, std::vector<uint32_t> in, uint32_t out) {
    BlobNode n;
    n.op = op;
    n.inputs = std::move(in);
    n.outputs = {out};
    g.nodes.push_back(n);
  };
  node(Op::kMatMul, {x, w}, h);
  node(Op::kAdd, {h, b}, h1);
  node(Op::kRelu, {h1}, r);
  node(Op::kSoftmax, {r}, y);
  g.nodes.back().axis = 1;
  return g;
}

void set_u32(std::vector<std::byte>& b, size_t offset, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[offset + i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

TEST(BlobFormat, RoundTripKeepsEveryField) {
  BlobGraph g = small_graph();
  BlobNode gemm;
  gemm.op = Op::kGemm;
  g.tensors.push_back({LOOM_DTYPE_F32, {4, 2}});
  g.tensors.push_back({LOOM_DTYPE_F32, {3, 2}});
  gemm.inputs = {1, 0};
  gemm.outputs = {static_cast<uint32_t>(g.tensors.size() - 2)};
  gemm.trans_a = 1;
  gemm.trans_b = 1;
  gemm.alpha = 0.25f;
  gemm.beta = -2.0f;
  g.nodes.push_back(gemm);
  std::vector<std::byte> bytes = encode(g);
  BlobGraph d;
  std::string error;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
  ASSERT_EQ(d.tensors.size(), g.tensors.size());
  for (size_t i = 0; i < g.tensors.size(); ++i) EXPECT_EQ(d.tensors[i].shape, g.tensors[i].shape);
  EXPECT_EQ(d.inputs, g.inputs);
  EXPECT_EQ(d.outputs, g.outputs);
  ASSERT_EQ(d.nodes.size(), g.nodes.size());
  EXPECT_EQ(d.nodes[3].axis, 1);
  EXPECT_EQ(d.nodes[4].op, Op::kGemm);
  EXPECT_EQ(d.nodes[4].trans_a, 1);
  EXPECT_FLOAT_EQ(d.nodes[4].alpha, 0.25f);
  EXPECT_FLOAT_EQ(d.nodes[4].beta, -2.0f);
  EXPECT_EQ(encode(d), bytes);
}

TEST(BlobFormat, HeaderIsLittleEndianWithMagic) {
  std::vector<std::byte> bytes = encode(small_graph());
  ASSERT_GE(bytes.size(), kHeaderSize);
  EXPECT_EQ(static_cast<char>(bytes[0]), 'L');
  EXPECT_EQ(static_cast<char>(bytes[3]), 'U');
  EXPECT_EQ(static_cast<uint8_t>(bytes[4]), 4u);  // static: the oldest format that holds it
  EXPECT_EQ(static_cast<uint8_t>(bytes[8]), 7u);  // tensor count
}

TEST(BlobFormat, GarbageIsRejectedForItsMagic) {
  std::vector<std::byte> junk(64, std::byte{0x5a});
  EXPECT_EQ(decode_error(junk), "byte 0: bad magic, expected \"LCPU\"");
}

TEST(BlobFormat, ShortBlobIsRejectedForItsHeader) {
  std::vector<std::byte> bytes = encode(small_graph());
  bytes.resize(10);
  EXPECT_EQ(decode_error(bytes), "byte 0: blob of 10 bytes is shorter than the 24-byte header");
  EXPECT_FALSE(decode(nullptr, 0, nullptr, nullptr));
}

TEST(BlobFormat, EveryTruncationIsRefusedByName) {
  for (uint32_t version : {1u, 2u}) {
    std::vector<std::byte> bytes = encode(small_graph(), version);
    for (size_t n = 0; n < bytes.size(); ++n) {
      std::vector<std::byte> cut(bytes.begin(), bytes.begin() + n);
      std::string error = decode_error(cut);
      EXPECT_TRUE(testing::names_its_place(error, n))
          << "format " << version << ", prefix " << n << ": " << error;
    }
  }
}

TEST(BlobFormat, TruncatedRecordNamesOffsetAndField) {
  std::vector<std::byte> bytes = encode(small_graph());
  bytes.resize(kHeaderSize + 8 + 8);  // tensor 0 header and its first dim
  // The count check catches it before any record is read.
  EXPECT_NE(decode_error(bytes).find("byte 24: tensor count 7 needs at least 12 bytes each"),
            std::string::npos);
  bytes = encode(small_graph());
  // The last node is 44 fixed bytes and two operands; cut into its
  // float_count.
  bytes.resize(bytes.size() - 10);
  EXPECT_EQ(decode_error(bytes), "byte " + std::to_string(bytes.size() - 2) +
                                     ": blob truncated reading node float_count (4 bytes needed, "
                                     "2 remain)");
}

TEST(BlobFormat, HugeCountsAreRejectedBeforeAllocating) {
  std::vector<std::byte> bytes = encode(small_graph());
  set_u32(bytes, 8, 0xffffffffu);
  EXPECT_NE(decode_error(bytes).find("tensor count 4294967295"), std::string::npos);
  bytes = encode(small_graph());
  set_u32(bytes, 20, 0x10000000u);
  EXPECT_NE(decode_error(bytes).find("node count 268435456"), std::string::npos);
}

TEST(BlobFormat, UnsupportedVersionIsNamed) {
  std::vector<std::byte> bytes = encode(small_graph());
  set_u32(bytes, 4, 13);
  EXPECT_EQ(decode_error(bytes),
            "byte 4: format version 13 is not supported (this reader handles 1 to 12)");
  set_u32(bytes, 4, 0);
  EXPECT_NE(decode_error(bytes).find("format version 0 is not supported"), std::string::npos);
}

TEST(BlobFormat, TrailingBytesAreRejected) {
  std::vector<std::byte> bytes = encode(small_graph());
  size_t end = bytes.size();
  bytes.push_back(std::byte{0});
  EXPECT_EQ(decode_error(bytes),
            "byte " + std::to_string(end) + ": 1 unexpected bytes after the last node");
}

TEST(BlobFormat, UnknownOperatorIsRejected) {
  BlobGraph g = small_graph();
  g.nodes[2].op = static_cast<Op>(kLastOp + 1);
  const std::string unknown = "node 2: unknown operator " + std::to_string(kLastOp + 1);
  EXPECT_NE(validate_error(g).find(unknown), std::string::npos) << validate_error(g);
}

TEST(BlobFormat, NonFloatDtypeIsRejected) {
  BlobGraph g = small_graph();
  g.tensors[1].dtype = LOOM_DTYPE_F16;
  EXPECT_NE(validate_error(g).find("tensor 1: dtype 2 is not supported in format 4"), std::string::npos);
  // i32 is a format-4 dtype only.
  g.tensors[1].dtype = LOOM_DTYPE_I32;
  EXPECT_NE(decode_error(encode(g, 3)).find("tensor 1: dtype 7 is not supported in format 3"), std::string::npos);
}

TEST(BlobFormat, RankAboveEightIsRejected) {
  BlobGraph g = small_graph();
  g.tensors[2].shape.assign(9, 1);
  EXPECT_NE(validate_error(g).find("tensor 2: rank 9 exceeds 8"), std::string::npos);
}

TEST(BlobFormat, NegativeAndOverflowingDimensionsAreRejected) {
  BlobGraph g = small_graph();
  g.tensors[0].shape = {2, -3};
  EXPECT_EQ(validate_error(g), "tensor 0: dimension 1 is -3");
  g.tensors[0].shape = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(validate_error(g), "tensor 0: shape [1099511627776, 1099511627776] is too large (2^60 elements or "
            "more)");
}

TEST(BlobFormat, OutOfRangeIndicesAreNamed) {
  BlobGraph g = small_graph();
  g.inputs[1] = 99;
  EXPECT_EQ(validate_error(g), "graph input 1: tensor index 99 out of range (7 tensors)");
  g = small_graph();
  g.outputs[0] = 7;
  EXPECT_EQ(validate_error(g), "graph output 0: tensor index 7 out of range (7 tensors)");
  g = small_graph();
  g.nodes[1].inputs[1] = 1000;
  EXPECT_EQ(validate_error(g), "node 1 (Add): input 1 tensor index 1000 out of range (7 tensors)");
  g = small_graph();
  g.nodes[3].outputs[0] = 12;
  EXPECT_EQ(validate_error(g), "node 3 (Softmax): output tensor index 12 out of range (7 tensors)");
}

TEST(BlobFormat, NodesOutOfTopologicalOrderAreRejected) {
  BlobGraph g = small_graph();
  std::swap(g.nodes[1], g.nodes[2]);
  EXPECT_EQ(validate_error(g),
            "node 1 (Relu): input 0 reads tensor 4, which is neither a graph input nor written "
            "by an earlier node");
}

TEST(BlobFormat, TensorsAreWrittenOnce) {
  BlobGraph g = small_graph();
  g.nodes[2].outputs[0] = 3;
  EXPECT_EQ(validate_error(g), "node 2 (Relu): output tensor 3 is already written by an earlier node");
  g = small_graph();
  g.nodes[0].outputs[0] = 0;
  EXPECT_EQ(validate_error(g), "node 0 (MatMul): output tensor 0 is already a graph input");
  g = small_graph();
  g.inputs.push_back(0);
  EXPECT_EQ(validate_error(g), "graph input 3: tensor 0 is listed twice");
}

TEST(BlobFormat, GraphOutputMustBeProduced) {
  BlobGraph g = small_graph();
  g.outputs = {1};
  EXPECT_EQ(validate_error(g), "graph output 0: tensor 1 is not written by any node");
}

TEST(BlobFormat, WrongArityIsRejected) {
  BlobGraph g = small_graph();
  g.nodes[1].inputs.pop_back();
  EXPECT_EQ(validate_error(g), "node 1 (Add): has 1 inputs, needs 2");
  g = small_graph();
  g.nodes[2].outputs.push_back(6);
  EXPECT_EQ(validate_error(g), "node 2 (Relu): has 2 outputs, needs 1");
}

TEST(BlobFormat, DeclaredShapeMustMatchTheOperator) {
  BlobGraph g = small_graph();
  g.tensors[3].shape = {4, 2};
  EXPECT_EQ(validate_error(g),
            "node 0 (MatMul): output tensor 3 is declared [4, 2] but the operator produces [2, 4]");
}

TEST(BlobFormat, OperatorShapeErrorsAreNamed) {
  BlobGraph g = small_graph();
  g.tensors[1].shape = {5, 4};
  EXPECT_EQ(validate_error(g),
            "node 0 (MatMul): MatMul: inner dimensions differ: A is [2, 3], B is [5, 4]");
  g = small_graph();
  g.tensors[2].shape = {3};
  EXPECT_EQ(validate_error(g),
            "node 1 (Add): Add: shapes do not broadcast: A is [2, 4], B is [3]");
  g = small_graph();
  g.nodes[3].axis = 2;
  EXPECT_EQ(validate_error(g),
            "node 3 (Softmax): Softmax: axis 2 is out of range for input [2, 4]");
}

TEST(BlobFormat, GemmAttributesAndCAreChecked) {
  BlobGraph g;
  g.tensors = {{LOOM_DTYPE_F32, {3, 2}}, {LOOM_DTYPE_F32, {4, 3}}, {LOOM_DTYPE_F32, {4}},
               {LOOM_DTYPE_F32, {2, 4}}};
  g.inputs = {0, 1, 2};
  g.outputs = {3};
  BlobNode n;
  n.op = Op::kGemm;
  n.inputs = {0, 1, 2};
  n.outputs = {3};
  n.trans_a = 1;
  n.trans_b = 1;
  g.nodes = {n};
  std::vector<std::byte> bytes = encode(g);
  BlobGraph d;
  std::string error;
  EXPECT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
  g.nodes[0].trans_b = 2;
  EXPECT_EQ(validate_error(g), "node 0 (Gemm): trans_a and trans_b must be 0 or 1, got 1 and 2");
  g.nodes[0].trans_b = 1;
  g.tensors[2].shape = {3};
  EXPECT_EQ(validate_error(g), "node 0 (Gemm): Gemm: C is [3], does not broadcast to [2, 4]");
}

// Square operands, so that a Gemm transpose flag the validator let through
// would still give consistent shapes: only the flag check refuses it.
BlobGraph fuzz_graph() {
  BlobGraph g;
  for (int i = 0; i < 7; ++i) g.tensors.push_back({LOOM_DTYPE_F32, {3, 3}});
  g.tensors[2].shape = {3};
  g.inputs = {0, 1, 2};
  g.outputs = {6, 4};
  auto node = [&](Op op, std::vector<uint32_t> in, uint32_t out) {
    BlobNode n;
    n.op = op;
    n.inputs = std::move(in);
    n.outputs = {out};
    g.nodes.push_back(n);
  };
  node(Op::kGemm, {0, 1, 2}, 3);
  node(Op::kMatMul, {3, 1}, 4);
  node(Op::kAdd, {4, 2}, 5);
  node(Op::kRelu, {5}, 6);
  g.nodes[0].alpha = 0.5f;
  return g;
}

TEST(BlobFormat, EveryMutatedByteIsRefusedByNameOrDecodesSound) {
  // Not every corruption is detectable without a checksum (alpha, beta, a
  // dimension that stays consistent), but what decodes must be sound.
  const BlobGraph g = fuzz_graph();
  for (uint32_t version : {1u, 2u}) {
    SCOPED_TRACE("format " + std::to_string(version));
    const std::vector<std::byte> bytes = encode(g, version);
    BlobGraph d;
    std::string error;
    ASSERT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
    EXPECT_GT(testing::expect_every_mutation_refused_by_name_or_sound(bytes), 0u);
  }
}

}  // namespace
}  // namespace loom::cpu_simd
