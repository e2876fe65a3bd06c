// Format 4 of the cpu-simd blob: tensors of dtype bool, i32 and i64 beside
// f32, the operators that use them (Where, Equal, Cast) and Pad, their
// attribute checks, shape rules and dtype rules, and that format 3 knows
// neither.
#include <cstring>

#include <gtest/gtest.h>

#include "blob_fuzz_support.hpp"
#include "loom/cpu_simd/blob_format.hpp"

namespace loom::cpu_simd {
namespace {

using Builder = testing::BlobBuilder;
using testing::decode_error;
using testing::validate_error;

// k [3] i32, m [2, 1] i32, x [2, 3] f32 ->
//   e = Equal(k, m)            [2, 3] bool
//   c = Cast(e, to f32)        [2, 3] f32
//   w = Where(e, x, c)         [2, 3] f32
//   p = Pad(w, reflect, (0, 1) before, (1, 2) after)  [3, 6] f32
//   q = Cast(x, to i64)        [2, 3] i64
BlobGraph typed_graph() {
  Builder b;
  const uint32_t k = b.t({3}, LOOM_DTYPE_I32), m = b.t({2, 1}, LOOM_DTYPE_I32), x = b.t({2, 3});
  const uint32_t e = b.t({2, 3}, LOOM_DTYPE_BOOL), c = b.t({2, 3}), w = b.t({2, 3});
  const uint32_t p = b.t({3, 6}), q = b.t({2, 3}, LOOM_DTYPE_I64);
  b.g.inputs = {k, m, x};
  b.g.outputs = {p, q};
  b.node(Op::kEqual, {k, m}, e);
  b.node(Op::kCast, {e}, c).ints = {LOOM_DTYPE_F32};
  b.node(Op::kWhere, {e, x, c}, w);
  BlobNode& pad = b.node(Op::kPad, {w}, p);
  pad.ints = {static_cast<int64_t>(PadMode::kReflect), 0, 1, 1, 2};
  pad.alpha = 0.0f;
  b.node(Op::kCast, {x}, q).ints = {LOOM_DTYPE_I64};
  return b.g;
}

TEST(BlobFormatV4, RoundTripsDtypesAndTheNewOperators) {
  const BlobGraph g = typed_graph();
  std::string error;
  ASSERT_TRUE(validate(g, &error)) << error;
  const std::vector<std::byte> bytes = encode(g);
  EXPECT_EQ(static_cast<uint8_t>(bytes[4]), 4u);
  BlobGraph d;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
  ASSERT_EQ(d.tensors.size(), g.tensors.size());
  for (size_t t = 0; t < g.tensors.size(); ++t) EXPECT_EQ(d.tensors[t].dtype, g.tensors[t].dtype) << t;
  ASSERT_EQ(d.nodes.size(), 5u);
  EXPECT_EQ(d.nodes[0].op, Op::kEqual);
  EXPECT_EQ(d.nodes[3].op, Op::kPad);
  EXPECT_EQ(d.nodes[3].ints, g.nodes[3].ints);
  EXPECT_EQ(encode(d), bytes);
}

TEST(BlobFormatV4, FormatThreeKnowsNeitherTheDtypesNorTheOperators) {
  const std::string error = decode_error(encode(typed_graph(), 3));
  // Tensor 0 (i32) starts right after the 24-byte header.
  EXPECT_EQ(error, "byte 24: tensor 0: dtype 7 is not supported in format 3 (f32 only before format 4)");
  Builder b;
  const uint32_t x = b.t({2}), y = b.t({4});
  b.g.inputs = {x};
  b.g.outputs = {y};
  b.node(Op::kPad, {x}, y).ints = {0, 1, 1};
  std::string ok;
  ASSERT_TRUE(validate(b.g, &ok)) << ok;
  EXPECT_NE(decode_error(encode(b.g, 3)).find("node 0: unknown operator 49 for format 3"), std::string::npos);
}

TEST(BlobFormatV4, OtherDtypesAndTypedConstantsAreRefused) {
  BlobGraph g = typed_graph();
  g.tensors[0].dtype = LOOM_DTYPE_F16;
  EXPECT_EQ(validate_error(g), "byte 24: tensor 0: dtype 2 is not supported in format 4 (f32, bool, i32 and i64 are)");
  std::string error;
  EXPECT_FALSE(validate(g, &error));
  EXPECT_EQ(error, "tensor 0: dtype 2 is not supported (cpu-simd blobs hold f32, bool, i32, i64, u8 and i8)");
  // A bool constant: validate refuses it, and so does decode, before reading
  // its values.
  Builder b;
  const uint32_t c = b.constant({2}, {1.0f, 0.0f});
  b.g.tensors[c].dtype = LOOM_DTYPE_BOOL;
  const uint32_t x = b.t({2}), y = b.t({2});
  b.g.inputs = {x};
  b.g.outputs = {y};
  b.node(Op::kWhere, {c, x, x}, y);
  EXPECT_FALSE(validate(b.g, &error));
  EXPECT_EQ(error, "tensor 0: a constant of dtype bool (cpu-simd blobs embed f32, u8, i8 and i32 constants only)");
  // Tensor 0: dtype, rank, one dim, then its flags at byte 24 + 16.
  EXPECT_EQ(validate_error(b.g), "byte 40: tensor 0: a constant of dtype bool (constants hold f32 values only)");
}

// Found by tests/fuzz (cpu_simd_blob): a dtype code past loom_dtype_t's
// range was converted to the enum before it was checked (UBSan: "load of
// value 96, which is not a valid value for type 'loom_dtype_t'").
TEST(BlobFormatV4, DtypeCodesOutsideTheEnumAreRefusedByName) {
  for (uint32_t code : {14u, 96u, 255u, 256u, 0xffffffffu}) {
    std::vector<std::byte> bytes = encode(typed_graph());
    std::memcpy(bytes.data() + 24, &code, 4);  // tensor 0's dtype
    EXPECT_EQ(decode_error(bytes), "byte 24: tensor 0: dtype " + std::to_string(code) +
                                       " is not supported in format 4 (f32, bool, i32 and i64 are)");
  }
  for (int64_t to : {int64_t{14}, int64_t{96}, int64_t{-1}, int64_t{1} << 40}) {
    BlobGraph g = typed_graph();
    g.nodes[1].ints = {to};  // Cast's `to`
    EXPECT_NE(validate_error(g).find("ints must be [to] with to a dtype of f32 (1), i32 (7), i64 (8), "
                                     "bool (13), u8 (9) or i8 (5), got [" + std::to_string(to) + "]"),
              std::string::npos) << to;
  }
}

TEST(BlobFormatV4, DtypeRulesArePerOperator) {
  BlobGraph g = typed_graph();
  g.tensors[1].dtype = LOOM_DTYPE_I64;  // Equal(i32, i64)
  EXPECT_EQ(validate_error(g), "node 0 (Equal): Equal: input 1 is i64 (8), expected i32");
  g = typed_graph();
  g.tensors[3].dtype = LOOM_DTYPE_I32;  // Equal writing i32
  EXPECT_EQ(validate_error(g), "node 0 (Equal): Equal: the output is i32 (7), expected bool");
  g = typed_graph();
  g.nodes[2].inputs = {4, 2, 4};  // Where with an f32 condition
  EXPECT_EQ(validate_error(g), "node 2 (Where): Where: the condition is f32 (1), expected bool");
  g = typed_graph();
  g.nodes[2].inputs = {3, 0, 4};  // Where with an i32 X (shape [3] broadcasts)
  EXPECT_EQ(validate_error(g), "node 2 (Where): Where: input 1 is i32 (7), expected f32");
  g = typed_graph();
  g.nodes[1].ints = {LOOM_DTYPE_BOOL};  // Cast to bool writing an f32 tensor
  EXPECT_EQ(validate_error(g), "node 1 (Cast): Cast: the output is f32 (1), expected bool");
  g.nodes[1].ints = {LOOM_DTYPE_F16};
  EXPECT_EQ(validate_error(g), "node 1 (Cast): Cast: ints must be [to] with to a dtype of f32 (1), i32 (7), "
                               "i64 (8), bool (13), u8 (9) or i8 (5), got [2]");
  g.nodes[1].ints = {};
  EXPECT_NE(validate_error(g).find("Cast: ints must be [to]"), std::string::npos);
  g = typed_graph();
  g.nodes[3].inputs = {3};  // Pad reading bool: every other operator is f32 only
  g.tensors[6].shape = {3, 6};
  EXPECT_EQ(validate_error(g), "node 3 (Pad): Pad: input 0 is bool (13), expected f32");
  Builder b;
  const uint32_t x = b.t({2}, LOOM_DTYPE_I64), y = b.t({2}, LOOM_DTYPE_I64);
  b.g.inputs = {x};
  b.g.outputs = {y};
  b.node(Op::kRelu, {x}, y);
  EXPECT_EQ(validate_error(b.g), "node 0 (Relu): Relu: input 0 is i64 (8), expected f32");
}

TEST(BlobFormatV4, ShapeRulesBroadcastAndPad) {
  BlobGraph g = typed_graph();
  g.tensors[1].shape = {2, 2};  // [3] against [2, 2]
  EXPECT_EQ(validate_error(g), "node 0 (Equal): Equal: shapes do not broadcast: A is [3], B is [2, 2]");
  g = typed_graph();
  g.tensors[2].shape = {2, 2};  // Where's X [2, 2] against [2, 3]
  g.nodes.pop_back();           // (Cast of x)
  g.outputs = {6};
  EXPECT_EQ(validate_error(g), "node 2 (Where): Where: shapes do not broadcast: condition is [2, 3], X is [2, 2], "
                               "Y is [2, 3]");
  g = typed_graph();
  g.tensors[5].shape = {1, 3};  // Where writing [1, 3]
  EXPECT_NE(validate_error(g).find("node 2 (Where): output tensor 5 is declared [1, 3] but the operator produces [2, 3]"),
            std::string::npos);
  g = typed_graph();
  g.nodes[3].ints[0] = 4;
  EXPECT_EQ(validate_error(g), "node 3 (Pad): Pad: ints must be [mode (0 to 3), pads_begin, pads_end] with 2 pads "
                               "each for input [2, 3], got 5 ints starting 4");
  g.nodes[3].ints = {0, 0, 1, 1};
  EXPECT_NE(validate_error(g).find("got 4 ints"), std::string::npos);
  g.nodes[3].ints = {0, 0, -1, 1, 2};
  EXPECT_EQ(validate_error(g), "node 3 (Pad): Pad: axis 1: pads -1 and 2 must be 0 to 2^31");
  g.nodes[3].ints = {0, 0, 1, 1, 3};
  EXPECT_NE(validate_error(g).find("is declared [3, 6] but the operator produces [3, 7]"), std::string::npos);
  g.nodes[3].alpha = 2.5f;
  g.nodes[3].ints = {0, 0, 1, 1, 2};
  std::string error;
  EXPECT_TRUE(validate(g, &error)) << error;
  g.nodes[3].inputs.push_back(0);  // the constant value from k [3]: one element needed
  EXPECT_EQ(validate_error(g), "node 3 (Pad): Pad: the constant value [3] must hold one element");
  // Edge, reflect and wrap have nothing to copy from an empty axis.
  Builder b;
  const uint32_t x = b.t({0, 2}), y = b.t({2, 2});
  b.g.inputs = {x};
  b.g.outputs = {y};
  b.node(Op::kPad, {x}, y).ints = {static_cast<int64_t>(PadMode::kEdge), 1, 0, 1, 0};
  EXPECT_EQ(validate_error(b.g), "node 0 (Pad): Pad: axis 0 of input [0, 2] is empty, only constant mode pads it");
  b.g.nodes[0].ints[0] = static_cast<int64_t>(PadMode::kConstant);
  EXPECT_TRUE(validate(b.g, &error)) << error;
}

TEST(BlobFormatV4, NodesStillHaveOneOutput) {
  BlobGraph g = typed_graph();
  g.nodes[4].outputs = {7, 6};
  EXPECT_EQ(validate_error(g), "node 4 (Cast): has 2 outputs, needs 1");
}

TEST(BlobFormatV4, EveryTruncationIsRefusedByName) {
  const std::vector<std::byte> bytes = encode(typed_graph());
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string error = decode_error(std::vector<std::byte>(bytes.begin(), bytes.begin() + n));
    EXPECT_TRUE(testing::names_its_place(error, n)) << "prefix " << n << ": " << error;
  }
}

TEST(BlobFormatV4, EveryMutatedByteIsRefusedByNameOrDecodesSound) {
  EXPECT_GT(testing::expect_every_mutation_refused_by_name_or_sound(encode(typed_graph())), 0u);
  // A graph whose mutations can turn a dtype into another accepted one.
  Builder b;
  const uint32_t x = b.t({2}, LOOM_DTYPE_BOOL), y = b.t({2}, LOOM_DTYPE_I64);
  b.g.inputs = {x};
  b.g.outputs = {y};
  b.node(Op::kCast, {x}, y).ints = {LOOM_DTYPE_I64};
  EXPECT_GT(testing::expect_every_mutation_refused_by_name_or_sound(encode(b.g)), 0u);
}

}  // namespace
}  // namespace loom::cpu_simd
