// graph_codec: round trips, and every way a buffer can be wrong.
#include "graph/graph_codec.hpp"

#include <gtest/gtest.h>

#include "graph_test_util.hpp"
#include "loom/graph/graph_generated.h"

namespace loom::graph {
namespace {

using test::add_constant;
using test::add_input;
using test::add_node;
using test::add_value;

Graph sample() {
  Graph g;
  g.name = "sample";
  int32_t x = add_input(g, "x", {2, 3});
  int32_t shape = add_constant<int64_t>(g, "shape", {2}, DType::kI64, {3, 2});
  int32_t big = add_constant<float>(g, "W", {32, 64}, DType::kF32, std::vector<float>(32 * 64, 0.5f));
  int32_t small = add_constant<float>(g, "b", {3}, DType::kF32, {1, 2, 3});
  int32_t r = add_value(g, "r", {3, 2});
  int32_t y = add_value(g, "y", {3, 2});
  int32_t z = add_value(g, "z", {2, 3});
  size_t n = add_node(g, "Reshape", {x, shape}, {r}, "reshape");
  AttributeDef a;
  a.name = "allowzero";
  a.kind = AttributeKind::kInt;
  a.i = 0;
  g.nodes[n].attributes.push_back(a);
  AttributeDef t;
  t.name = "value";
  t.kind = AttributeKind::kTensor;
  t.t_dtype = DType::kI32;
  t.t_shape = {2};
  t.t_data.resize(8, std::byte{7});
  AttributeDef fl;
  fl.name = "scales";
  fl.kind = AttributeKind::kFloats;
  fl.floats = {1.5f, 2.5f};
  AttributeDef ss;
  ss.name = "names";
  ss.kind = AttributeKind::kStrings;
  ss.strings = {"a", "bc"};
  size_t m = add_node(g, "Custom", {r, kNoTensor, big}, {y});
  g.nodes[m].domain = "com.example";
  g.nodes[m].attributes = {t, fl, ss};
  add_node(g, "Add", {x, small}, {z});
  g.outputs = {y, z};
  return g;
}

TEST(GraphCodec, RoundTripKeepsEverythingAndTurnsLargeFloatsIntoParameters) {
  Graph g = sample();
  auto bytes = encode_graph(g);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  // W (8 KiB of f32) is referred to by name, not copied.
  EXPECT_LT(bytes->size(), 4096u);
  auto back = decode_graph(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(validate(*back).ok());
  EXPECT_EQ(back->name, "sample");
  ASSERT_EQ(back->tensors.size(), g.tensors.size());
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    EXPECT_EQ(back->tensors[i].name, g.tensors[i].name);
    EXPECT_EQ(back->tensors[i].dtype, g.tensors[i].dtype);
    EXPECT_EQ(back->tensors[i].shape, g.tensors[i].shape);
  }
  // x, then the parameter W appended.
  EXPECT_EQ(back->inputs, (std::vector<int32_t>{0, 2}));
  EXPECT_FALSE(back->tensors[2].is_constant());
  ASSERT_TRUE(back->tensors[1].is_constant());  // integer: inline whatever its size
  EXPECT_EQ(*back->tensors[1].data, *g.tensors[1].data);
  ASSERT_TRUE(back->tensors[3].is_constant());  // small float: inline
  EXPECT_EQ(*back->tensors[3].data, *g.tensors[3].data);
  EXPECT_EQ(back->outputs, g.outputs);
  ASSERT_EQ(back->nodes.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back->nodes[i].name, g.nodes[i].name);
    EXPECT_EQ(back->nodes[i].op_type, g.nodes[i].op_type);
    EXPECT_EQ(back->nodes[i].domain, g.nodes[i].domain);
    EXPECT_EQ(back->nodes[i].opset, 17);
    EXPECT_EQ(back->nodes[i].inputs, g.nodes[i].inputs);
    EXPECT_EQ(back->nodes[i].outputs, g.nodes[i].outputs);
    EXPECT_EQ(back->nodes[i].attributes, g.nodes[i].attributes);
  }
}

TEST(GraphCodec, InlineLimitDecides) {
  Graph g = sample();
  EncodeOptions all_inline;
  all_inline.inline_limit = 1 << 20;
  auto bytes = encode_graph(g, all_inline);
  ASSERT_TRUE(bytes.ok());
  auto back = decode_graph(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->inputs, (std::vector<int32_t>{0}));
  ASSERT_TRUE(back->tensors[2].is_constant());
  EXPECT_EQ(*back->tensors[2].data, *g.tensors[2].data);
  EXPECT_TRUE(encodes_as_parameter(g.tensors[2], EncodeOptions{}));
  EXPECT_FALSE(encodes_as_parameter(g.tensors[1], EncodeOptions{0}));  // integers never
  EXPECT_FALSE(encodes_as_parameter(g.tensors[0], EncodeOptions{0}));  // not a constant
}

TEST(GraphCodec, ConstantDataIsAligned) {
  auto bytes = encode_graph(sample(), EncodeOptions{1 << 20});
  ASSERT_TRUE(bytes.ok());
  const fb::Graph* g = fb::GetGraph(bytes->data());
  for (const fb::Tensor* t : *g->tensors()) {
    if (t->data() != nullptr && t->data()->size() > 0) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data()->data()) % 16,
                reinterpret_cast<uintptr_t>(bytes->data()) % 16)
          << t->name()->str();
    }
  }
}

TEST(GraphCodec, EncodeRefusesAnInvalidGraph) {
  Graph g = sample();
  g.nodes[0].inputs[0] = 42;
  auto bytes = encode_graph(g);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("sample"), std::string::npos) << bytes.status().message();
}

TEST(GraphCodec, TruncationsAreErrors) {
  auto bytes = encode_graph(sample());
  ASSERT_TRUE(bytes.ok());
  // The builder may leave a few bytes of padding at the end, which a
  // reader does not need; anything shorter than that must be refused.
  for (size_t n = 0; n < bytes->size(); ++n) {
    auto back = decode_graph(std::span<const std::byte>(bytes->data(), n));
    if (n + 8 < bytes->size()) {
      EXPECT_FALSE(back.ok()) << n;
    } else if (back.ok()) {
      EXPECT_TRUE(validate(*back).ok());
    }
  }
}

TEST(GraphCodec, FlippedBytesNeverCrashAndDecodedGraphsAreValid) {
  auto bytes = encode_graph(sample());
  ASSERT_TRUE(bytes.ok());
  size_t accepted = 0;
  for (size_t i = 0; i < bytes->size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<std::byte> bad = *bytes;
      bad[i] ^= std::byte{mask};
      auto back = decode_graph(bad);
      if (back.ok()) {
        ++accepted;
        EXPECT_TRUE(validate(*back).ok()) << i;
      } else {
        EXPECT_FALSE(back.status().message().empty());
      }
    }
  }
  EXPECT_LT(accepted, bytes->size() * 3);
}

// Builds an IR buffer directly, to state what the encoder never writes.
std::vector<std::byte> raw(const std::function<void(flatbuffers::FlatBufferBuilder&,
                                                    std::vector<flatbuffers::Offset<fb::Tensor>>&,
                                                    std::vector<flatbuffers::Offset<fb::Node>>&,
                                                    std::vector<int32_t>&)>& fill) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  std::vector<flatbuffers::Offset<fb::Node>> nodes;
  std::vector<int32_t> inputs;
  fill(b, tensors, nodes, inputs);
  auto root = fb::CreateGraph(b, 0, b.CreateVector(tensors), b.CreateVector(nodes), b.CreateVector(inputs),
                              b.CreateVector(std::vector<int32_t>{}));
  fb::FinishGraphBuffer(b, root);
  auto* p = reinterpret_cast<const std::byte*>(b.GetBufferPointer());
  return {p, p + b.GetSize()};
}

std::string decode_error(const std::vector<std::byte>& bytes) {
  auto g = decode_graph(bytes);
  return g.ok() ? std::string("(decoded)") : std::string(g.status().message());
}

TEST(GraphCodec, BadIndexDtypeShapeAndSizeAreNamed) {
  auto x = [](flatbuffers::FlatBufferBuilder& b, fb::DType d = fb::DType::f32,
              std::vector<int64_t> shape = {2}) {
    return fb::CreateTensorDirect(b, "x", d, &shape);
  };
  EXPECT_NE(decode_error(raw([&](auto& b, auto& t, auto& n, auto& in) {
              t.push_back(x(b));
              in.push_back(0);
              std::vector<int32_t> ins{0}, outs{99};
              n.push_back(fb::CreateNodeDirect(b, nullptr, "Relu", nullptr, 17, nullptr, &ins, &outs));
            })).find("tensor 99"),
            std::string::npos);
  EXPECT_NE(decode_error(raw([&](auto& b, auto& t, auto&, auto& in) {
              t.push_back(x(b, static_cast<fb::DType>(77)));
              in.push_back(0);
            })).find("unknown dtype 77"),
            std::string::npos);
  EXPECT_NE(decode_error(raw([&](auto& b, auto& t, auto&, auto& in) {
              t.push_back(x(b, fb::DType::f32, {2, -3}));
              in.push_back(0);
            })).find("'x'"),
            std::string::npos);
  EXPECT_NE(decode_error(raw([&](auto& b, auto& t, auto&, auto&) {
              std::vector<int64_t> shape{4};
              std::vector<uint8_t> data(12);
              t.push_back(fb::CreateTensorDirect(b, "c", fb::DType::f32, &shape, &data));
            })).find("data of 12 bytes"),
            std::string::npos);
  EXPECT_NE(decode_error(raw([&](auto& b, auto& t, auto&, auto&) {
              std::vector<int64_t> shape{4};
              t.push_back(fb::CreateTensorDirect(b, "w", fb::DType::f32, &shape, nullptr, "w"));
            })).find("not a graph input"),
            std::string::npos);
  EXPECT_NE(decode_error(raw([&](auto& b, auto& t, auto&, auto& in) {
              t.push_back(x(b));
              in.push_back(-1);
            })).find("input 0"),
            std::string::npos);
  // Two producers: an input that a node writes as well.
  EXPECT_NE(decode_error(raw([&](auto& b, auto& t, auto& n, auto& in) {
              t.push_back(x(b));
              in.push_back(0);
              std::vector<int32_t> ins{0}, outs{0};
              n.push_back(fb::CreateNodeDirect(b, nullptr, "Relu", nullptr, 17, nullptr, &ins, &outs));
            })),
            "(decoded)");
  std::vector<std::byte> junk(64, std::byte{0x5a});
  EXPECT_NE(decode_error(junk).find("graph.fbs"), std::string::npos);
}

TEST(GraphCodec, HugeElementCountsAreRefusedWithoutAllocating) {
  auto bytes = raw([&](auto& b, auto& t, auto&, auto& in) {
    std::vector<int64_t> shape{int64_t{1} << 40, int64_t{1} << 40};
    t.push_back(fb::CreateTensorDirect(b, "x", fb::DType::f32, &shape));
    in.push_back(0);
  });
  EXPECT_FALSE(decode_graph(bytes).ok());
}

}  // namespace
}  // namespace loom::graph
