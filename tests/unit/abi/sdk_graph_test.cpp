// loom::sdk::GraphView (loom/sdk/graph.hpp): a graph.fbs buffer opens only
// when it is sound, each problem is named with where it is, and the
// accessors read nodes, attributes, shapes and inline constants.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "loom/sdk/graph.hpp"
#include "graph_builder.hpp"

namespace {

using loom::sdk::GraphView;
using loom::testing::attr_i;
using loom::testing::attr_ints;
using loom::testing::GraphBuilder;
using loom::testing::gfb::DType;

// x[2,3] + c[3] -> y; Relu(y) -> z (named "act", axis=2 attribute).
GraphBuilder sample_graph() {
  GraphBuilder g;
  const int32_t x = g.input({2, 3});
  const int32_t c = g.constant_f32({3}, {1.f, 2.f, 3.f});
  const int32_t y = g.tensor({2, 3});
  const int32_t z = g.tensor({2, 3});
  g.node("Add", {x, c}, {y}).name.clear();
  g.node("Relu", {y}, {z}, {attr_i("axis", 2)}).name = "act";
  g.output(z);
  return g;
}

std::string open_error(const std::vector<uint8_t>& bytes) {
  GraphView v;
  loom::sdk::Status s = GraphView::open(bytes.data(), bytes.size(), &v);
  return s.ok() ? "ok" : s.message();
}

TEST(SdkGraphView, ReadsNodesTensorsAttributesAndConstants) {
  const std::vector<uint8_t> bytes = sample_graph().finish();
  GraphView g;
  ASSERT_TRUE(GraphView::open(bytes.data(), bytes.size(), &g).ok());
  EXPECT_EQ(g.name(), "g");
  EXPECT_EQ(g.buffer(), bytes.data());
  EXPECT_EQ(g.buffer_size(), bytes.size());
  ASSERT_EQ(g.node_count(), 2u);
  ASSERT_EQ(g.tensor_count(), 4u);
  EXPECT_EQ(g.node(0).op_type(), "Add");
  EXPECT_EQ(g.node(0).label(), "node #0 (Add)");
  EXPECT_EQ(g.node(1).label(), "node act (Relu)");
  EXPECT_EQ(g.node(0).opset(), 13);
  EXPECT_TRUE(g.node(0).domain().empty());
  ASSERT_EQ(g.node(0).input_count(), 2u);
  EXPECT_TRUE(g.node(0).input(0).is_graph_input());
  EXPECT_FALSE(g.node(0).input(1).is_graph_input());
  EXPECT_TRUE(g.node(0).input(1).has_data());
  EXPECT_FALSE(g.node(0).input(1).is_parameter());
  EXPECT_TRUE(g.node(1).output(0).is_graph_output());
  EXPECT_EQ(g.node(0).output(0).shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g.node(0).output(0).element_count(), 6u);
  EXPECT_EQ(g.node(0).output(0).byte_size(), 24u);
  EXPECT_EQ(g.node(0).output(0).dtype(), LOOM_DTYPE_F32);
  std::vector<float> c;
  ASSERT_TRUE(g.node(0).input(1).read_floats(&c).ok());
  EXPECT_EQ(c, (std::vector<float>{1.f, 2.f, 3.f}));
  std::vector<int64_t> ints;
  EXPECT_EQ(g.node(0).input(1).read_ints(&ints).message(),
            "tensor t1 (f32, inline data) is not an integer inline constant");
  EXPECT_EQ(g.node(0).input(0).read_floats(&c).message(),
            "tensor t0 (f32, not a constant) is not an f32 inline constant");
  int64_t axis = 0;
  ASSERT_TRUE(g.node(1).get_int("axis", -1, &axis).ok());
  EXPECT_EQ(axis, 2);
  ASSERT_TRUE(g.node(0).get_int("axis", -1, &axis).ok());
  EXPECT_EQ(axis, -1);
  float f = 0;
  EXPECT_EQ(g.node(1).get_float("axis", 0.f, &f).message(),
            "attribute 'axis' is int, expected float");
  EXPECT_EQ(g.node(1).attribute(0).name(), "axis");
  EXPECT_EQ(g.input_count(), 1u);
  EXPECT_EQ(g.output(0).index(), 3);
}

TEST(SdkGraphView, ReadIntsWidensAndSignExtends) {
  GraphBuilder t;
  const int32_t a = t.constant_i32({3}, {-1, 0, 7});
  const uint8_t flags[] = {1, 0};
  const int32_t b = t.constant({2}, DType::bool_, flags, sizeof flags);
  const std::vector<uint8_t> bytes = t.finish();
  GraphView g;
  ASSERT_TRUE(GraphView::open(bytes.data(), bytes.size(), &g).ok());
  std::vector<int64_t> v;
  ASSERT_TRUE(g.tensor(a).read_ints(&v).ok());
  EXPECT_EQ(v, (std::vector<int64_t>{-1, 0, 7}));
  ASSERT_TRUE(g.tensor(b).read_ints(&v).ok());
  EXPECT_EQ(v, (std::vector<int64_t>{1, 0}));
}

TEST(SdkNodeView, AttributeAllowListNamesWhatItRefuses) {
  GraphBuilder t;
  const int32_t x = t.input({2});
  const int32_t y = t.tensor({2});
  t.node("Cast", {x}, {y}, {attr_i("to", 1), attr_i("saturate", 1)});
  t.node("Relu", {y}, {y}, {attr_i("k", 1), attr_i("k", 2)});
  t.output(y);
  const std::vector<uint8_t> bytes = t.finish();
  GraphView g;
  ASSERT_TRUE(GraphView::open(bytes.data(), bytes.size(), &g).ok());
  const loom::sdk::NodeView cast = g.node(0);
  EXPECT_TRUE(cast.check_attributes({"to", "saturate"}).ok());
  EXPECT_TRUE(cast.check_attributes({"saturate", {"to", 6}}).ok());
  EXPECT_EQ(cast.check_attributes({"to"}).message(), "attribute 'saturate' is not supported");
  EXPECT_EQ(cast.check_attributes({"to", {"saturate", 19}}).message(),
            "attribute 'saturate' is not supported at opset 13");
  EXPECT_EQ(cast.check_attributes({}).message(), "attribute 'to' is not supported");
  EXPECT_TRUE(cast.has_attribute("to"));
  EXPECT_FALSE(cast.has_attribute("axis"));
  EXPECT_EQ(g.node(1).check_attributes({"k"}).message(), "attribute 'k' appears twice");
}

TEST(SdkNodeView, ConstantOperandsAreReadOrRefusedWithTheReason) {
  GraphBuilder t;
  const int32_t x = t.input({2, 3});
  const int32_t shape = t.constant_i64({2}, {3, -1});
  const int32_t narrow = t.constant_i32({2}, {3, 2});
  const int32_t grid = t.constant_i64({1, 2}, {3, 2});
  const int32_t bound = t.constant_f32({}, {6.f});
  const int32_t scales = t.constant_f32({2}, {1.f, 2.f});
  const int32_t y = t.tensor({3, 2});
  t.node("Reshape", {x, shape, narrow, grid, bound, scales, -1}, {y});
  t.output(y);
  const std::vector<uint8_t> bytes = t.finish();
  GraphView g;
  ASSERT_TRUE(GraphView::open(bytes.data(), bytes.size(), &g).ok());
  const loom::sdk::NodeView n = g.node(0);
  std::vector<int64_t> ints;
  ASSERT_TRUE(n.constant_int64s(1, &ints).ok());
  EXPECT_EQ(ints, (std::vector<int64_t>{3, -1}));
  EXPECT_EQ(n.constant_int64s(0, &ints).message(), "input 0 must be an inline constant");
  EXPECT_EQ(n.constant_int64s(2, &ints).message(),
            "input 2 is i32 of rank 1, expected an inline i64 constant of rank 1");
  EXPECT_EQ(n.constant_int64s(3, &ints).message(),
            "input 3 is i64 of rank 2, expected an inline i64 constant of rank 1");
  EXPECT_EQ(n.constant_int64s(6, &ints).message(), "input 6 is missing");
  EXPECT_EQ(n.constant_int64s(9, &ints).message(), "input 9 is missing");
  float f = 0;
  ASSERT_TRUE(n.constant_float(4, &f).ok());
  EXPECT_EQ(f, 6.f);
  EXPECT_EQ(n.constant_float(5, &f).message(),
            "input 5 is f32 of 2 elements, expected an inline f32 scalar constant");
  std::vector<float> floats;
  ASSERT_TRUE(n.constant_floats(5, &floats).ok());
  EXPECT_EQ(floats, (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(n.constant_floats(4, &floats).message(),
            "input 4 is f32 of rank 0, expected an inline f32 constant of rank 1");
  loom::sdk::TensorView c(nullptr, -1);
  ASSERT_TRUE(n.constant_input(2, &c).ok());
  EXPECT_EQ(c.index(), narrow);
}

TEST(SdkGraphView, BrokenBuffersAreNamed) {
  EXPECT_EQ(open_error({}), "graph.fbs: empty buffer");
  std::vector<uint8_t> good = sample_graph().finish();
  std::vector<uint8_t> wrong_id = good;
  wrong_id[4] = 'X';
  EXPECT_EQ(open_error(wrong_id), "graph.fbs: missing file identifier \"LMGR\"");
  for (size_t n = 1; n < good.size(); n += 5) {
    const std::string e = open_error(std::vector<uint8_t>(good.begin(), good.begin() + n));
    EXPECT_EQ(e.rfind("graph.fbs: ", 0), 0u) << n << ": " << e;
  }
  for (size_t i = 0; i < good.size(); ++i) {  // flips never crash
    std::vector<uint8_t> b = good;
    b[i] ^= 0x5a;
    open_error(b);
  }
}

TEST(SdkGraphView, IndicesOutOfRangeAreNamed) {
  GraphBuilder g = sample_graph();
  g.nodes[1].inputs = {99};
  EXPECT_EQ(open_error(g.finish()), "graph.fbs: node 1 input 0: tensor index 99 out of range (4 tensors)");
  g = sample_graph();
  g.outputs = {-1};
  EXPECT_EQ(open_error(g.finish()), "graph.fbs: graph output 0: tensor index -1 out of range (4 tensors)");
  g = sample_graph();
  g.nodes[0].inputs = {0, -1};  // an optional operand left out is fine
  EXPECT_EQ(open_error(g.finish()), "ok");
}

TEST(SdkGraphView, TensorsAreChecked) {
  GraphBuilder g = sample_graph();
  g.tensors[2].shape = {2, -1};
  EXPECT_EQ(open_error(g.finish()), "graph.fbs: tensor 2 (t2): dimension 1 is -1; shapes are static");
  g = sample_graph();
  g.tensors[1].data.pop_back();
  EXPECT_EQ(open_error(g.finish()), "graph.fbs: tensor 1 (t1): data of 11 bytes, expected 3 x 4");
  g = sample_graph();
  g.tensors[1].parameter = "w";
  EXPECT_EQ(open_error(g.finish()), "graph.fbs: tensor 1 (t1): has both data and parameter");
  g = sample_graph();
  g.tensors[1].has_data = false;
  g.tensors[1].parameter = "w";
  EXPECT_EQ(open_error(g.finish()), "graph.fbs: tensor 1 (t1) is parameter w but not listed in Graph.inputs");
  g.inputs.push_back(1);
  EXPECT_EQ(open_error(g.finish()), "ok");
  g = sample_graph();
  g.tensors[0].dtype = static_cast<DType>(77);
  EXPECT_EQ(open_error(g.finish()), "graph.fbs: tensor 0 (t0): unknown dtype 77");
  g = sample_graph();
  g.tensors[0].shape = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(open_error(g.finish()), "graph.fbs: tensor 0 (t0): the shape's element count overflows");
}

// Moves the uoffset of `field` in `table` 4 bytes on: a [long] vector then
// starts 4 bytes into its first element, which the flatbuffers verifier
// (it checks a vector's 4-byte length field only) lets through.
// (The generated tables derive from flatbuffers::Table privately.)
template <typename T>
void shift_vector(std::vector<uint8_t>* buf, const T* generated, flatbuffers::voffset_t field) {
  const auto* table = reinterpret_cast<const flatbuffers::Table*>(generated);
  const auto* at = reinterpret_cast<const uint8_t*>(table) + table->GetOptionalFieldOffset(field);
  const size_t pos = static_cast<size_t>(at - buf->data());
  uint32_t off = 0;
  std::memcpy(&off, buf->data() + pos, 4);
  off += 4;
  std::memcpy(buf->data() + pos, &off, 4);
}

// 64-bit values are read in place, so an int64 vector (or the buffer) off
// an 8-byte boundary is refused by name: reading it would be undefined
// behaviour (the vulkan_blob fuzzer found one).
TEST(SdkGraphView, MisalignedInt64VectorsAreRefused) {
  namespace fb = loom::graph::fb;
  GraphBuilder g = sample_graph();
  std::vector<uint8_t> good = g.finish();
  std::vector<uint8_t> shifted(good.size() + 8);
  std::memcpy(shifted.data() + 4, good.data(), good.size());
  GraphView v;
  EXPECT_EQ(GraphView::open(shifted.data() + 4, good.size(), &v).message(),
            "graph.fbs: the buffer does not start on an 8-byte boundary");

  std::vector<uint8_t> b = good;
  shift_vector(&b, fb::GetGraph(b.data())->tensors()->Get(0), fb::Tensor::VT_SHAPE);
  std::string e = open_error(b);
  EXPECT_EQ(e.rfind("graph.fbs: tensor 0 (t0): the shape's int64 elements at byte ", 0), 0u) << e;
  EXPECT_NE(e.find("are not 8-byte aligned"), std::string::npos) << e;

  g = sample_graph();
  g.nodes[1].attrs.push_back(attr_ints("perm", {5, 6}));
  b = g.finish();
  ASSERT_EQ(open_error(b), "ok");
  shift_vector(&b, fb::GetGraph(b.data())->nodes()->Get(1)->attributes()->Get(1), fb::Attribute::VT_INTS);
  e = open_error(b);
  EXPECT_EQ(e.rfind("graph.fbs: node 1 (Relu): attribute perm: int64 elements at byte ", 0), 0u) << e;
  EXPECT_NE(e.find("are not 8-byte aligned"), std::string::npos) << e;
}

// ABI 1.2 open graphs: -1 dimensions open only when asked for, never in a
// constant; the view says which tensors are open.
TEST(SdkGraphView, OpenDimensionsOnlyWhenAllowed) {
  GraphBuilder g = sample_graph();
  g.tensors[0].shape = {-1, 3};
  g.tensors[2].shape = {-1, 3};
  g.tensors[3].shape = {-1, 3};
  const std::vector<uint8_t> bytes = g.finish();
  EXPECT_EQ(open_error(bytes), "graph.fbs: tensor 0 (t0): dimension 0 is -1; shapes are static");
  GraphView v;
  ASSERT_TRUE(GraphView::open(bytes.data(), bytes.size(), &v, /*allow_open_dims=*/true).ok());
  EXPECT_TRUE(v.has_open_dims());
  EXPECT_TRUE(v.tensor(0).is_open());
  EXPECT_FALSE(v.tensor(1).is_open());
  EXPECT_EQ(v.tensor(0).dim(0), -1);
  EXPECT_EQ(v.tensor(0).element_count(), 0u);
  EXPECT_EQ(v.tensor(0).byte_size(), 0u);
  GraphView s;
  const std::vector<uint8_t> fixed = sample_graph().finish();
  ASSERT_TRUE(GraphView::open(fixed.data(), fixed.size(), &s, true).ok());
  EXPECT_FALSE(s.has_open_dims());
  // Only -1 means open; a constant is never open.
  g.tensors[0].shape = {-2, 3};
  std::vector<uint8_t> b = g.finish();
  EXPECT_EQ(GraphView::open(b.data(), b.size(), &v, true).message(),
            "graph.fbs: tensor 0 (t0): dimension 0 is -2; shapes are static");
  g = sample_graph();
  g.tensors[1].shape = {-1};
  b = g.finish();
  EXPECT_EQ(GraphView::open(b.data(), b.size(), &v, true).message(),
            "graph.fbs: tensor 1 (t1): dimension 0 is open (-1), but a constant's shape is static");
}

}  // namespace
