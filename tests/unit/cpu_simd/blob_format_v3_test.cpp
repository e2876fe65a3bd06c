// Format 3 of the cpu-simd blob: the operators it adds (reductions, Gather
// with constant indices, Resize from a tap table, ConvTranspose), their
// attribute checks and shape rules, and that format 2 does not know them.
#include <gtest/gtest.h>

#include "blob_fuzz_support.hpp"
#include "loom/cpu_simd/blob_format.hpp"

namespace loom::cpu_simd {
namespace {

using Builder = testing::BlobBuilder;
using testing::decode_error;
using testing::validate_error;

// Nearest 2x taps for an axis of `in` elements: i0 = i1 = o / 2.
std::vector<int64_t> doubling_taps(int64_t in) {
  std::vector<int64_t> v;
  for (int64_t o = 0; o < 2 * in; ++o) {
    v.push_back(o / 2);
    v.push_back(o / 2);
  }
  return v;
}

// x[1,4,3,3] -> ConvTranspose(w [4,2,2,2], stride 2) [1,2,6,6] -> Resize
// nearest 2x on H, W [1,2,12,12] -> ReduceMean(H, W, keepdims) [1,2,1,1]
// -> Gather(axis 1, indices [1, 0, 1]) [1,3,1,1]
BlobGraph data_graph() {
  Builder b;
  const uint32_t x = b.t({1, 4, 3, 3});
  const uint32_t w = b.constant({4, 2, 2, 2}, std::vector<float>(32, 0.25f));
  const uint32_t ct = b.t({1, 2, 6, 6}), rs = b.t({1, 2, 12, 12}), rm = b.t({1, 2, 1, 1});
  const uint32_t y = b.t({1, 3, 1, 1});
  b.g.inputs = {x};
  b.g.outputs = {y};
  b.node(Op::kConvTranspose, {x, w}, ct).ints = {2, 1, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0};
  BlobNode& r = b.node(Op::kResize, {ct}, rs);
  r.ints = {0, 1, 2, 12, 12, 0, 0, 0, 0, 1, 1};
  for (int k = 0; k < 2; ++k) {
    const std::vector<int64_t> taps = doubling_taps(6);
    r.ints.insert(r.ints.end(), taps.begin(), taps.end());
  }
  b.node(Op::kReduceMean, {rs}, rm).ints = {1, 2, 3};
  BlobNode& gather = b.node(Op::kGather, {rm}, y);
  gather.axis = 1;
  gather.ints = {1, 3, 1, 0, 1};
  return b.g;
}

TEST(BlobFormatV3, RoundTripsTheNewOperators) {
  const BlobGraph g = data_graph();
  const std::vector<std::byte> bytes = encode(g);
  BlobGraph d;
  std::string error;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), &d, &error)) << error;
  ASSERT_EQ(d.nodes.size(), 4u);
  EXPECT_EQ(d.nodes[0].op, Op::kConvTranspose);
  EXPECT_EQ(d.nodes[1].ints, g.nodes[1].ints);
  EXPECT_EQ(d.nodes[3].axis, 1);
  EXPECT_EQ(encode(d), bytes);
}

TEST(BlobFormatV3, FormatTwoDoesNotKnowTheNewOperators) {
  const std::vector<std::byte> bytes = encode(data_graph(), 2);
  const std::string error = decode_error(bytes);
  EXPECT_NE(error.find("node 0: unknown operator 46 for format 2"), std::string::npos) << error;
}

TEST(BlobFormatV3, EveryTruncationIsRefusedByName) {
  const std::vector<std::byte> bytes = encode(data_graph());
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string error = decode_error(std::vector<std::byte>(bytes.begin(), bytes.begin() + n));
    EXPECT_TRUE(testing::names_its_place(error, n)) << "prefix " << n << ": " << error;
  }
}

TEST(BlobFormatV3, EveryMutatedByteIsRefusedByNameOrDecodesSound) {
  EXPECT_GT(testing::expect_every_mutation_refused_by_name_or_sound(encode(data_graph())), 0u);
}

TEST(BlobFormatV3, ReductionAttributesAreChecked) {
  BlobGraph g = data_graph();
  g.nodes[2].ints = {1};
  EXPECT_EQ(validate_error(g), "node 2 (ReduceMean): ReduceMean: ints must be [keepdims (0 or 1), "
                               "axes...] with at least one axis, got [1]");
  g.nodes[2].ints = {1, 3, 2};
  EXPECT_EQ(validate_error(g), "node 2 (ReduceMean): ReduceMean: axes [3, 2] must be ascending "
                               "axes of input [1, 2, 12, 12]");
  g.nodes[2].ints = {1, 2, 4};
  EXPECT_NE(validate_error(g).find("must be ascending axes"), std::string::npos);
  g.nodes[2].ints = {0, 2, 3};  // keepdims 0 gives [1, 2]
  EXPECT_NE(validate_error(g).find("is declared [1, 2, 1, 1] but the operator produces [1, 2]"),
            std::string::npos);
}

TEST(BlobFormatV3, GatherIndicesAreChecked) {
  BlobGraph g = data_graph();
  g.nodes[3].ints = {1, 3, 1, 2, 1};
  EXPECT_EQ(validate_error(g), "node 3 (Gather): Gather: index value 2 is outside [0, 2), axis 1 "
                               "of input [1, 2, 1, 1]");
  g.nodes[3].ints = {1, 3, 1, 0};
  EXPECT_EQ(validate_error(g), "node 3 (Gather): Gather: has 2 index values, index shape [3] needs 3");
  g.nodes[3].ints = {1, -3, 1, 0, 1};
  EXPECT_NE(validate_error(g).find("is negative or too large"), std::string::npos);
  g.nodes[3].ints = {9};
  EXPECT_NE(validate_error(g).find("ints must be [r, index shape"), std::string::npos);
  g = data_graph();
  g.nodes[3].axis = 4;
  EXPECT_EQ(validate_error(g), "node 3 (Gather): Gather: axis 4 is not an axis of input [1, 2, 1, 1]");
}

TEST(BlobFormatV3, ResizeTapsAreChecked) {
  BlobGraph g = data_graph();
  g.nodes[1].ints[11 + 2 * 4] = 6;  // H tap of output row 4 past the input's 6 rows
  EXPECT_NE(validate_error(g).find("axis 2, output position 4: taps 6 and 2 do not fit input "
                                   "[1, 2, 6, 6] in nearest mode"),
            std::string::npos)
      << validate_error(g);
  g = data_graph();
  g.nodes[1].ints.pop_back();
  EXPECT_NE(validate_error(g).find("tap ints and 0 weights, output dims [1, 2, 12, 12] need 54 and 0"),
            std::string::npos)
      << validate_error(g);
  g = data_graph();
  g.nodes[1].floats = {0.5f};  // nearest mode has no weights
  EXPECT_NE(validate_error(g).find("need 54 and 0"), std::string::npos) << validate_error(g);
  g = data_graph();
  g.nodes[1].ints[0] = 1;  // linear without weights
  EXPECT_NE(validate_error(g).find("need 54 and 27"), std::string::npos) << validate_error(g);
  g.nodes[1].floats.assign(27, 0.5f);
  g.nodes[1].floats[3] = 1.5f;
  EXPECT_NE(validate_error(g).find("with weight 1.5"), std::string::npos) << validate_error(g);
  g.nodes[1].floats[3] = 0.25f;
  std::string error;
  EXPECT_TRUE(validate(g, &error)) << error;
  g = data_graph();
  g.nodes[2].floats = {1.0f};  // only Resize carries floats
  EXPECT_NE(validate_error(g).find("unexpected attribute lists"), std::string::npos);
}

TEST(BlobFormatV3, ConvTransposeAttributesAreChecked) {
  BlobGraph g = data_graph();
  g.nodes[0].ints[12] = 2;  // output_padding 2 with stride 2
  EXPECT_EQ(validate_error(g), "node 0 (ConvTranspose): ConvTranspose: spatial dimension 0: "
                               "output_padding 2 must be >= 0 and below the stride 2");
  g = data_graph();
  g.nodes[0].ints.pop_back();
  EXPECT_EQ(validate_error(g), "node 0 (ConvTranspose): ConvTranspose: has 13 ints, expected 14");
  g = data_graph();
  g.nodes[0].ints[12] = 1;  // output_padding 1: [1, 2, 7, 6]
  EXPECT_NE(validate_error(g).find("is declared [1, 2, 6, 6] but the operator produces [1, 2, 7, 6]"),
            std::string::npos);
  g = data_graph();
  g.tensors[1].shape = {2, 4, 2, 2};  // C_in 2 against an input of 4 channels
  EXPECT_NE(validate_error(g).find("weight [2, 4, 2, 2] does not fit input [1, 4, 3, 3]"),
            std::string::npos);
  g = data_graph();
  g.nodes[0].ints[8] = 9;  // pads eat the whole output
  EXPECT_NE(validate_error(g).find("gives an empty output"), std::string::npos) << validate_error(g);
}

TEST(BlobFormatV3, SliceRangesAreChecked) {
  Builder b;
  const uint32_t x = b.t({4, 6}), y = b.t({2, 3});
  b.g.inputs = {x};
  b.g.outputs = {y};
  // rows 3, 1 (step -2); columns 0, 2, 4 (step 2)
  b.node(Op::kSlice, {x}, y).ints = {3, 0, -2, 2, 2, 3};
  std::string error;
  EXPECT_TRUE(validate(b.g, &error)) << error;
  EXPECT_GT(testing::expect_every_mutation_refused_by_name_or_sound(encode(b.g)), 0u);
  BlobGraph g = b.g;
  g.nodes[0].ints[1] = 1;  // columns 1, 3, 5: fine
  EXPECT_TRUE(validate(g, &error)) << error;
  g.nodes[0].ints[1] = 2;  // columns 2, 4, 6: past the end
  EXPECT_EQ(validate_error(g), "node 0 (Slice): Slice: axis 1: start 2, step 2 and 3 outputs do not stay "
                               "inside input [4, 6]");
  g = b.g;
  g.nodes[0].ints[2] = 0;  // step 0
  EXPECT_NE(validate_error(g).find("axis 0: start 3, step 0"), std::string::npos);
  g = b.g;
  g.nodes[0].ints[0] = 1;  // rows 1, -1
  EXPECT_NE(validate_error(g).find("do not stay inside"), std::string::npos);
  g = b.g;
  g.nodes[0].ints.pop_back();
  EXPECT_NE(validate_error(g).find("ints must be [starts, steps, output dims] with 2 entries each"),
            std::string::npos);
  g = b.g;
  g.nodes[0].ints[4] = 1;  // one row: the output tensor says 2
  EXPECT_NE(validate_error(g).find("is declared [2, 3] but the operator produces [1, 3]"), std::string::npos);
}

}  // namespace
}  // namespace loom::cpu_simd
