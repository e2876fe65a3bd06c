// Opsets 1-6 forms brought to opset 7's, and the opset 18-21 attributes the
// importer refuses by name (compiler/import_opsets.cpp).
#include <gtest/gtest.h>

#include "import_test_util.hpp"

namespace loom::compiler::testing {
namespace {

namespace fx = loom::testing::onnx_fixtures;

void attr_string(::onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s(v);
}

Result<ImportedModel> import_reference(const ::onnx::ModelProto& m) {
  return import(m, {}, kernels::KernelRegistry::reference());
}

void expect_refused(const ::onnx::ModelProto& m, const std::string& fragment) {
  auto r = import_reference(m);
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << fragment;
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
}

const graph::Node& only_node(const graph::Graph& g, const std::string& op) {
  for (const graph::Node& n : g.nodes) {
    if (n.op_type == op) return n;
  }
  ADD_FAILURE() << "no " << op << " node";
  return g.nodes.front();
}

// Add-6 with broadcast 1 and axis 1: B [3] lined up with A [2, 3, 4] from
// axis 1 (not numpy's trailing alignment) becomes B [3, 1] at opset 7.
TEST(ImportOpsetsTest, Opset6LegacyBroadcastFromAnInnerAxis) {
  auto m = fx::empty_model();
  set_opset(m, 6);
  add_input(m, "a", TP::FLOAT, {2, 3, 4});
  init_f32(m, "b", {3}, {10, 20, 30});
  auto& n = add_node(m, "Add", {"a", "b"}, {"y"}, "legacy_add");
  attr_int(n, "broadcast", 1);
  attr_int(n, "axis", 1);
  add_output(m, "y", TP::FLOAT, {2, 3, 4});
  const auto registry = kernels::KernelRegistry::reference();
  auto r = import(m, {}, registry);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const graph::Node& add = only_node(r->graph, "Add");
  EXPECT_EQ(add.opset, 7);
  EXPECT_TRUE(add.attributes.empty());
  std::vector<float> a(24, 1.0f);
  auto out = run_graph(r->graph, registry, {{"a", a}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ((*out)[0].size(), 24u);
  EXPECT_FLOAT_EQ((*out)[0][0], 11.0f);   // [0, 0, 0]
  EXPECT_FLOAT_EQ((*out)[0][5], 21.0f);   // [0, 1, 1]
  EXPECT_FLOAT_EQ((*out)[0][23], 31.0f);  // [1, 2, 3]
}

TEST(ImportOpsetsTest, Opset6LegacyBroadcastOfAComputedOperandIsRefusedByName) {
  auto m = fx::empty_model();
  set_opset(m, 6);
  add_input(m, "a", TP::FLOAT, {2, 3, 4});
  add_input(m, "b", TP::FLOAT, {3});
  add_node(m, "Relu", {"b"}, {"rb"}, "r");
  auto& n = add_node(m, "Mul", {"a", "rb"}, {"y"}, "legacy_mul");
  attr_int(n, "broadcast", 1);
  attr_int(n, "axis", 1);
  add_output(m, "y", TP::FLOAT, {2, 3, 4});
  expect_refused(m, "node 'legacy_mul' (Mul, opset 6): legacy broadcasting");
}

TEST(ImportOpsetsTest, Opset6TrainingModeBatchNormalizationIsRefused) {
  auto m = fx::empty_model();
  set_opset(m, 6);
  add_input(m, "x", TP::FLOAT, {1, 2, 2});
  for (const char* p : {"s", "b", "mean", "var"}) init_f32(m, p, {2}, {1, 1});
  auto& n = add_node(m, "BatchNormalization", {"x", "s", "b", "mean", "var"}, {"y"}, "bn");
  attr_int(n, "is_test", 0);
  add_output(m, "y", TP::FLOAT, {1, 2, 2});
  expect_refused(m, "node 'bn' (BatchNormalization, opset 6): attribute 'is_test' is 0");
}

TEST(ImportOpsetsTest, Opset1ReshapeCastAndConcatTakeTheirOldSpellings) {
  auto m = fx::empty_model();
  set_opset(m, 1);
  add_input(m, "x", TP::FLOAT, {2, 3});
  auto& reshape = add_node(m, "Reshape", {"x"}, {"r"}, "reshape1");
  attr_ints(reshape, "shape", {3, 2});
  attr_ints(reshape, "consumed_inputs", {0});
  auto& cast = add_node(m, "Cast", {"r"}, {"c"}, "cast1");
  attr_string(cast, "to", "DOUBLE");
  add_node(m, "Concat", {"c", "c"}, {"y"}, "concat1");  // axis 1 by default
  add_output(m, "y", TP::DOUBLE, {3, 4});
  auto r = import_reference(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const graph::Tensor& y = r->graph.tensors[r->graph.outputs[0]];
  EXPECT_EQ(y.dtype, DType::kF64);
  EXPECT_EQ(y.shape, (Shape{3, 4}));

  m.mutable_graph()->mutable_node(1)->mutable_attribute(0)->set_s("DOUBLY");
  expect_refused(m, "node 'cast1' (Cast, opset 1): attribute 'to' names no ONNX type: 'DOUBLY'");
}

TEST(ImportOpsetsTest, Opset5TileIsRefusedByName) {
  auto m = fx::empty_model();
  set_opset(m, 5);
  add_input(m, "x", TP::FLOAT, {2});
  init_i64(m, "tiles", {1}, {2});
  init_i64(m, "axis", {1}, {0});
  add_node(m, "Tile", {"x", "tiles", "axis"}, {"y"}, "tile1");
  add_output(m, "y", TP::FLOAT, {4});
  expect_refused(m, "node 'tile1' (Tile, opset 5): Tile-1");
}

// Opset 18's Resize attributes import and shape the output (their values
// are checked against numpy by tests/onnx/opset18_21's Resize cases); the
// misuses are one-line errors naming the node.
TEST(ImportOpsetsTest, Opset18ResizeAntialiasAxesAndAspectPolicy) {
  auto m = fx::empty_model();
  set_opset(m, 18);
  add_input(m, "x", TP::FLOAT, {1, 1, 4, 6});
  init_f32(m, "scales", {4}, {1, 1, 0.5f, 0.5f});
  auto& n = add_node(m, "Resize", {"x", "", "scales"}, {"y"}, "down");
  attr_string(n, "mode", "linear");
  attr_int(n, "antialias", 1);
  add_output(m, "y", TP::FLOAT, {1, 1, 2, 3});
  auto r = import_reference(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->graph.tensors[r->graph.outputs[0]].shape, (Shape{1, 1, 2, 3}));
  m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->set_s("nearest");
  expect_refused(m, "node 'down' (Resize, opset 18): Resize: 'antialias' applies to the linear and cubic "
                    "modes, not to nearest");

  // sizes [3, 3] on axes [2, 3] of a 4 x 6 input: not_larger keeps the
  // smaller ratio, 0.5, for both (output 2 x 3); not_smaller the larger.
  auto sized = [](const std::string& policy, std::vector<int64_t> axes, Shape out = {1, 1, 3, 3}) {
    auto m2 = fx::empty_model();
    set_opset(m2, 18);
    add_input(m2, "x", TP::FLOAT, {1, 1, 4, 6});
    init_i64(m2, "sizes", {2}, {3, 3});
    auto& r2 = add_node(m2, "Resize", {"x", "", "", "sizes"}, {"y"}, "fit");
    attr_string(r2, "keep_aspect_ratio_policy", policy);
    attr_ints(r2, "axes", axes);
    add_output(m2, "y", TP::FLOAT, out);
    return m2;
  };
  for (auto [policy, want] : {std::pair<std::string, Shape>{"not_larger", {1, 1, 2, 3}},
                              std::pair<std::string, Shape>{"not_smaller", {1, 1, 3, 5}},
                              std::pair<std::string, Shape>{"stretch", {1, 1, 3, 3}}}) {
    auto fit = import_reference(sized(policy, {2, -1}, want));
    ASSERT_TRUE(fit.ok()) << policy << ": " << fit.status().to_string();
    EXPECT_EQ(fit->graph.tensors[fit->graph.outputs[0]].shape, want) << policy;
  }
  expect_refused(sized("fit", {2, 3}), "node 'fit' (Resize, opset 18): Resize: unknown 'keep_aspect_ratio_policy' 'fit'");
  expect_refused(sized("stretch", {3, -1}), "Resize: 'axes' [3, -1] names axis 3 twice");
  expect_refused(sized("stretch", {2, 4}), "Resize: 'axes' [2, 4]: axis 4 is out of range for rank 4");
  expect_refused(sized("stretch", {2}), "Resize: 'sizes' has 2 entries, 'axes' names 1");
}

// GroupNormalization and Col2Im (opset 18; their values are checked against
// numpy by tests/onnx/opset18_21): shapes that do not fit are one-line
// errors naming the node.
TEST(ImportOpsetsTest, Opset18GroupNormalizationAndCol2ImRefuseShapesThatDoNotFit) {
  auto gn = [](int64_t groups, int64_t affine, int64_t opset) {
    auto m = fx::empty_model();
    set_opset(m, opset);
    add_input(m, "x", TP::FLOAT, {1, 6, 2, 2});
    init_f32(m, "s", {affine}, std::vector<float>(static_cast<size_t>(affine), 1.0f));
    init_f32(m, "b", {affine}, std::vector<float>(static_cast<size_t>(affine), 0.0f));
    attr_int(add_node(m, "GroupNormalization", {"x", "s", "b"}, {"y"}, "gn"), "num_groups", groups);
    add_output(m, "y", TP::FLOAT, {1, 6, 2, 2});
    return m;
  };
  EXPECT_TRUE(import_reference(gn(3, 3, 18)).ok());
  EXPECT_TRUE(import_reference(gn(3, 6, 21)).ok());
  expect_refused(gn(4, 4, 18), "node 'gn' (GroupNormalization, opset 18): GroupNormalization: num_groups 4 must "
                               "be positive and divide the 6 channels of X [1, 6, 2, 2]");
  expect_refused(gn(3, 6, 18), "GroupNormalization: scale must be 1-D of num_groups (3) at opset 18, got [6]");
  expect_refused(gn(3, 3, 21), "GroupNormalization: scale must be 1-D of the channel count (6) at opset 21, got [3]");

  auto col = [](int64_t columns) {
    auto m = fx::empty_model();
    set_opset(m, 18);
    add_input(m, "cols", TP::FLOAT, {1, 4, columns});
    init_i64(m, "image", {2}, {3, 3});
    init_i64(m, "block", {2}, {2, 2});
    add_node(m, "Col2Im", {"cols", "image", "block"}, {"y"}, "c2i");
    add_output(m, "y", TP::FLOAT, {1, 1, 3, 3});
    return m;
  };
  EXPECT_TRUE(import_reference(col(4)).ok());
  expect_refused(col(5), "node 'c2i' (Col2Im, opset 18): Col2Im: input has 5 columns, the image, block, pads, "
                         "dilations and strides give 4 blocks");
}

TEST(ImportOpsetsTest, Opset21BlockedQuantizationIsRefusedByName) {
  auto m = fx::empty_model();
  set_opset(m, 21);
  add_input(m, "x", TP::FLOAT, {2, 4});
  init_f32(m, "scale", {2, 2}, {1, 1, 1, 1});
  auto& n = add_node(m, "QuantizeLinear", {"x", "scale"}, {"y"}, "q");
  attr_int(n, "block_size", 2);
  add_output(m, "y", TP::UINT8, {2, 4});
  expect_refused(m, "node 'q' (QuantizeLinear, opset 21): attribute 'block_size'");
}

}  // namespace
}  // namespace loom::compiler::testing
