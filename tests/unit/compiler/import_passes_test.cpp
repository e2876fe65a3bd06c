// The passes: BatchNormalization folding, dead nodes, frozen inputs, nodes
// kept for plugins.
#include <gtest/gtest.h>

#include <cmath>

#include "import_test_util.hpp"

namespace loom::compiler::testing {
namespace {

namespace fx = loom::testing::onnx_fixtures;

std::vector<float> ramp(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>((i * 7) % 11);
  return v;
}

// x[1,4,5,5] -> Conv(w[4,4/group,3,3], b) -> BN -> Relu -> y
::onnx::ModelProto conv_bn_model(int64_t group, bool with_bias) {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {1, 4, 5, 5});
  const int64_t cin = 4 / group;
  init_f32(m, "w", {4, cin, 3, 3}, ramp(static_cast<size_t>(4 * cin * 9), 0.1f, -0.4f));
  std::vector<std::string> conv_in{"x", "w"};
  if (with_bias) {
    init_f32(m, "cb", {4}, {0.5f, -0.25f, 1.0f, 0.0f});
    conv_in.push_back("cb");
  }
  init_f32(m, "scale", {4}, {1.5f, 0.5f, -1.0f, 2.0f});
  init_f32(m, "shift", {4}, {0.1f, 0.2f, 0.3f, -0.4f});
  init_f32(m, "mean", {4}, {0.3f, -0.2f, 0.0f, 1.0f});
  init_f32(m, "var", {4}, {0.5f, 2.0f, 1.0f, 0.25f});
  attr_int(add_node(m, "Conv", conv_in, {"c"}, "conv"), "group", group);
  attr_float(add_node(m, "BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"bn"}, "bn"),
             "epsilon", 1e-3f);
  add_node(m, "Relu", {"bn"}, {"y"}, "relu");
  add_output(m, "y", TP::FLOAT, {1, 4, 3, 3});
  return m;
}

void check_bn_fold(int64_t group, bool with_bias) {
  auto registry = test_registry();
  ImportOptions plain;
  plain.fold_batch_norm = false;
  auto reference = import(conv_bn_model(group, with_bias), plain, registry);
  ASSERT_TRUE(reference.ok()) << reference.status().to_string();
  ASSERT_EQ(reference->graph.nodes.size(), 3u);
  auto fused = import(conv_bn_model(group, with_bias), {}, registry);
  ASSERT_TRUE(fused.ok()) << fused.status().to_string();
  const graph::Graph& g = fused->graph;
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op_type, "Conv");
  EXPECT_EQ(g.nodes[1].op_type, "Relu");
  EXPECT_EQ(fused->stats.fused_nodes, 1u);
  EXPECT_EQ(g.tensors[g.nodes[0].outputs[0]].name, "bn");
  EXPECT_EQ(find_tensor(g, "scale"), -1);  // BN parameters dropped
  EXPECT_TRUE(graph::validate(g).ok());

  const std::map<std::string, std::vector<float>> in{{"x", ramp(100, 0.3f, -1.2f)}};
  auto want = run_graph(reference->graph, registry, in);
  auto got = run_graph(g, registry, in);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ((*want)[0].size(), 36u);
  ASSERT_EQ((*got)[0].size(), 36u);
  float max_abs = 0;
  for (size_t i = 0; i < 36; ++i) {
    EXPECT_NEAR((*got)[0][i], (*want)[0][i], 1e-4f) << i;
    max_abs = std::max(max_abs, std::fabs((*want)[0][i]));
  }
  EXPECT_GT(max_abs, 0.1f);  // the comparison is not between zeros
}

TEST(ImportPassesTest, BatchNormFoldsIntoConv) { check_bn_fold(1, true); }
TEST(ImportPassesTest, BatchNormFoldsIntoGroupedConvWithoutBias) { check_bn_fold(2, false); }

TEST(ImportPassesTest, BatchNormNotFoldedWhenConvOutputIsUsedElsewhere) {
  auto m = conv_bn_model(1, true);
  add_output(m, "c", TP::FLOAT, {1, 4, 3, 3});
  auto r = import(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->graph.nodes.size(), 3u);
  EXPECT_EQ(r->stats.fused_nodes, 0u);
}

TEST(ImportPassesTest, DeadNodesAndUnusedConstantsRemoved) {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {2});
  init_f32(m, "unused", {2}, {1, 2});
  add_node(m, "Relu", {"x"}, {"y"}, "live");
  add_node(m, "Relu", {"x"}, {"d1"}, "dead1");
  add_node(m, "Add", {"d1", "unused"}, {"d2"}, "dead2");
  add_output(m, "y", TP::FLOAT, {2});
  auto r = import(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->graph.nodes.size(), 1u);
  EXPECT_EQ(r->graph.nodes[0].name, "live");
  EXPECT_EQ(r->stats.dead_nodes, 2u);
  EXPECT_EQ(find_tensor(r->graph, "unused"), -1);
  EXPECT_EQ(r->graph.tensors.size(), 2u);

  ImportOptions keep;
  keep.remove_dead_nodes = false;
  r = import(m, keep);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->graph.nodes.size(), 3u);
}

TEST(ImportPassesTest, IdentityAndInferenceDropoutBypassed) {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {2});
  add_node(m, "Identity", {"x"}, {"a"}, "id1");
  add_node(m, "Dropout", {"a"}, {"b"}, "drop");
  add_node(m, "Relu", {"b"}, {"c"}, "relu");
  add_node(m, "Identity", {"c"}, {"y"}, "id_out");  // produces a graph output: stays
  add_output(m, "y", TP::FLOAT, {2});
  auto r = import(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const graph::Graph& g = r->graph;
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].name, "relu");
  EXPECT_EQ(g.tensors[g.nodes[0].inputs[0]].name, "x");
  EXPECT_EQ(g.nodes[1].name, "id_out");
  EXPECT_EQ(r->stats.identity_nodes, 2u);
  EXPECT_EQ(find_tensor(g, "a"), -1);
  EXPECT_TRUE(graph::validate(g).ok());

  // Dropout whose mask is used stays: it then needs a Dropout kernel, which
  // the reference set may or may not have yet.
  auto m2 = fx::empty_model();
  add_input(m2, "x", TP::FLOAT, {2});
  add_node(m2, "Dropout", {"x"}, {"z", "mask"}, "drop");
  add_node(m2, "Relu", {"z"}, {"y"}, "relu");
  add_output(m2, "y", TP::FLOAT, {2});
  add_output(m2, "mask", TP::BOOL, {2});
  auto r2 = import(m2);
  if (r2.ok()) {
    ASSERT_EQ(r2->graph.nodes.size(), 2u);
    EXPECT_EQ(r2->graph.nodes[0].op_type, "Dropout");
    EXPECT_EQ(r2->stats.identity_nodes, 0u);
  } else {
    EXPECT_EQ(r2.status().code(), StatusCode::kUnimplemented) << r2.status().to_string();
    EXPECT_NE(r2.status().message().find("'Dropout'"), std::string::npos);
  }
}

// Reshape(x, shape) with `shape` a model input.
::onnx::ModelProto reshape_input_model() {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {2, 6});
  add_input(m, "shape", TP::INT64, {2});
  add_node(m, "Reshape", {"x", "shape"}, {"y"}, "r");
  add_output(m, "y", TP::FLOAT, {});
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  return m;
}

TEST(ImportPassesTest, ShapeInputNotGivenMakesAnOpenProgram) {
  auto r = import(reshape_input_model());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->open);
  EXPECT_EQ(r->value_inputs,
            (std::vector<std::string>{"shape (decides the output shape of node 'r', Reshape)"}));
  ASSERT_EQ(r->signature.inputs.size(), 2u);
  EXPECT_EQ(r->signature.inputs[1].name, "shape");
  EXPECT_EQ(r->signature.inputs[0].shape, (Shape{2, 6}));
}

TEST(ImportPassesTest, ShapeInputFrozenFromInputValue) {
  auto value = Tensor::copy_of(DType::kI64, {2}, fx::bytes_of(std::vector<int64_t>{3, 4}));
  ASSERT_TRUE(value.ok());
  ImportOptions opts;
  std::vector<std::string> asked;
  opts.input_value = [&](std::string_view name) -> const Tensor* {
    asked.emplace_back(name);
    return name == "shape" ? &*value : nullptr;
  };
  auto r = import(reshape_input_model(), opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(asked, (std::vector<std::string>{"shape"}));
  EXPECT_EQ(r->stats.frozen_inputs, (std::vector<std::string>{"shape"}));
  ASSERT_EQ(r->graph.inputs.size(), 1u);
  EXPECT_EQ(r->graph.tensors[r->graph.inputs[0]].name, "x");
  EXPECT_EQ(r->graph.tensors[r->graph.outputs[0]].shape, (Shape{3, 4}));
  EXPECT_TRUE(graph::validate(r->graph).ok());

  auto wrong = Tensor::copy_of(DType::kI64, {3}, fx::bytes_of(std::vector<int64_t>{3, 4, 1}));
  ASSERT_TRUE(wrong.ok());
  opts.input_value = [&](std::string_view) -> const Tensor* { return &*wrong; };
  r = import(reshape_input_model(), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the value given for input 'shape'"), std::string::npos)
      << r.status().message();
}

::onnx::ModelProto custom_op_model(bool declare) {
  auto m = fx::empty_model();
  auto* o = m.add_opset_import();
  o->set_domain("com.acme");
  o->set_version(1);
  add_input(m, "x", TP::FLOAT, {2, 2});
  auto& n = add_node(m, "Fancy", {"x"}, {"f"}, "fancy");
  n.set_domain("com.acme");
  add_node(m, "Relu", {"f"}, {"y"}, "relu");
  add_output(m, "y", TP::FLOAT, {2, 2});
  if (declare) add_value_info(m, "f", TP::FLOAT, {2, 2});
  return m;
}

TEST(ImportPassesTest, PluginOpKeptWithDeclaredTypes) {
  ImportOptions opts;
  opts.plugin_takes = [](std::string_view domain, std::string_view op, int64_t opset) {
    return domain == "com.acme" && op == "Fancy" && opset == 1;
  };
  auto r = import(custom_op_model(true), opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->graph.nodes.size(), 2u);
  EXPECT_EQ(r->graph.nodes[0].domain, "com.acme");
  EXPECT_EQ(r->graph.nodes[0].opset, 1);
  EXPECT_EQ(r->graph.tensors[r->graph.nodes[0].outputs[0]].shape, (Shape{2, 2}));

  r = import(custom_op_model(false), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("output 'f'"), std::string::npos) << r.status().message();
}

TEST(ImportPassesTest, UnsupportedOperator) {
  auto m = fx::empty_model();
  set_opset(m, 13);
  add_input(m, "x", TP::FLOAT, {2});
  add_node(m, "Foo", {"x"}, {"y"}, "n");
  add_output(m, "y", TP::FLOAT, {2});
  auto r = import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("unsupported operator 'Foo' (node 'n', opset 13): no reference "
                                      "kernel, and no target plugin takes it"),
            std::string::npos)
      << r.status().message();
  // A custom domain without a plugin is unsupported too.
  r = import(custom_op_model(true));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("'com.acme.Fancy'"), std::string::npos);
}


// x (u8) -> DequantizeLinear -> Conv (DequantizeLinear of an i8 weight) ->
// Relu -> [QuantizeLinear] -> y: a QDQ group when `quantized_output`.
::onnx::ModelProto qdq_conv_model(bool quantized_output) {
  auto m = fx::empty_model();
  set_opset(m, 13);
  add_input(m, "x", TP::UINT8, {1, 2, 3, 3});
  init_f32(m, "s", {}, {0.5f});
  const std::vector<int8_t> w = {1, -2, 3, -4};
  const std::vector<uint8_t> zero = {7};
  fx::set_raw(fx::add_initializer(m, "w", TP::INT8, {2, 2, 1, 1}), fx::bytes_of(w));
  fx::set_raw(fx::add_initializer(m, "z", TP::UINT8, {}), fx::bytes_of(zero));
  add_node(m, "DequantizeLinear", {"x", "s", "z"}, {"xf"}, "dq_x");
  add_node(m, "DequantizeLinear", {"w", "s"}, {"wf"}, "dq_w");
  add_node(m, "Conv", {"xf", "wf"}, {"c"}, "conv");
  add_node(m, "Relu", {"c"}, {quantized_output ? "r" : "y"}, "relu");
  if (quantized_output) {
    add_node(m, "QuantizeLinear", {"r", "s", "z"}, {"y"}, "q");
    add_output(m, "y", TP::UINT8, {1, 2, 3, 3});
  } else {
    add_output(m, "y", TP::FLOAT, {1, 2, 3, 3});
  }
  return m;
}

size_t dequantize_nodes(const graph::Graph& g) {
  size_t n = 0;
  for (const graph::Node& node : g.nodes) n += node.op_type == "DequantizeLinear";
  return n;
}

TEST(ImportPassesTest, QdqWeightsStayUnfoldedOnlyInAQdqGroupAndWhenAsked) {
  ImportOptions keep;
  keep.keep_qdq_weights = true;
  auto r = import(qdq_conv_model(true), keep);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(dequantize_nodes(r->graph), 2u) << "the weight's DequantizeLinear stays for the plugin";
  r = import(qdq_conv_model(true));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(dequantize_nodes(r->graph), 1u) << "folded when no target asks";
  r = import(qdq_conv_model(false), keep);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(dequantize_nodes(r->graph), 1u) << "no QuantizeLinear after the Conv: not a group, folded";
}

// Issue 27's bad quantization parameters: each is a one-line compile-time
// error naming the node (the reference kernels' infer functions see constant
// scales and zero points), never a model that runs and answers wrongly.
std::string import_error(const ::onnx::ModelProto& m) {
  auto r = import(m, {}, test_registry());
  if (r.ok()) return "(imported)";
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
  return r.status().message();
}

TEST(ImportPassesTest, BadQuantizationParametersAreCompileErrorsNamingTheNode) {
  for (float bad : {0.0f, -0.5f, INFINITY, NAN}) {
    auto m = qdq_conv_model(true);
    init_f32(m, "bad_s", {}, {bad});
    m.mutable_graph()->mutable_node(0)->set_input(1, "bad_s");
    const std::string e = import_error(m);
    EXPECT_NE(e.find("node 'dq_x' (DequantizeLinear, opset 13): DequantizeLinear: x_scale is "),
              std::string::npos) << e;
    EXPECT_NE(e.find("a quantization scale must be positive and finite"), std::string::npos) << e;
  }
  // A per-channel weight scale with one value too many.
  auto m = qdq_conv_model(true);
  init_f32(m, "ws3", {3}, {0.5f, 0.5f, 0.5f});
  m.mutable_graph()->mutable_node(1)->set_input(1, "ws3");
  attr_int(*m.mutable_graph()->mutable_node(1), "axis", 0);
  EXPECT_NE(import_error(m).find("node 'dq_w' (DequantizeLinear, opset 13): DequantizeLinear: "
                                 "scale has 3 elements, but axis 0 of input [2, 2, 1, 1] has 2"),
            std::string::npos) << import_error(m);
  // A zero point of another type than its operand.
  m = qdq_conv_model(true);
  const std::vector<int8_t> z8 = {3};
  fx::set_raw(fx::add_initializer(m, "z8", TP::INT8, {}), fx::bytes_of(z8));
  m.mutable_graph()->mutable_node(0)->set_input(2, "z8");
  EXPECT_NE(import_error(m).find("node 'dq_x' (DequantizeLinear, opset 13): DequantizeLinear: "
                                 "x_zero_point has dtype i8, expected u8"),
            std::string::npos) << import_error(m);
  // A per-channel zero point whose length is not its scale's (ONNX: the
  // zero point has the scale's shape).
  m = qdq_conv_model(true);
  init_f32(m, "ws2", {2}, {0.5f, 0.25f});
  const std::vector<int8_t> z3 = {0, 0, 0};
  fx::set_raw(fx::add_initializer(m, "wz3", TP::INT8, {3}), fx::bytes_of(z3));
  m.mutable_graph()->mutable_node(1)->set_input(1, "ws2");
  m.mutable_graph()->mutable_node(1)->add_input("wz3");
  attr_int(*m.mutable_graph()->mutable_node(1), "axis", 0);
  EXPECT_NE(import_error(m).find("node 'dq_w' (DequantizeLinear, opset 13): DequantizeLinear: "
                                 "zero_point [3] must have the shape of scale [2]"),
            std::string::npos) << import_error(m);
  // One zero point for a scale per channel, on the output's QuantizeLinear.
  m = qdq_conv_model(true);
  init_f32(m, "ys2", {2}, {0.5f, 0.25f});
  m.mutable_graph()->mutable_node(4)->set_input(1, "ys2");
  EXPECT_NE(import_error(m).find("node 'q' (QuantizeLinear, opset 13): QuantizeLinear: "
                                 "zero_point [] must have the shape of scale [2]"),
            std::string::npos) << import_error(m);
  // A zero point outside its type (300 for u8): the model's tensor is
  // refused as it is read, by name.
  m = qdq_conv_model(true);
  {
    auto& z = fx::add_initializer(m, "z300", TP::UINT8, {});
    z.add_int32_data(300);
    m.mutable_graph()->mutable_node(0)->set_input(2, "z300");
  }
  EXPECT_NE(import_error(m).find("tensor 'z300': int32_data[0] = 300 does not fit dtype u8"), std::string::npos)
      << import_error(m);
  // An i32 bias whose zero point is not 0.
  m = qdq_conv_model(true);
  const std::vector<int32_t> bias = {1, 2}, bz = {5};
  fx::set_raw(fx::add_initializer(m, "b", TP::INT32, {2}), fx::bytes_of(bias));
  fx::set_raw(fx::add_initializer(m, "bz", TP::INT32, {}), fx::bytes_of(bz));
  add_node(m, "DequantizeLinear", {"b", "s", "bz"}, {"bf"}, "dq_b");
  m.mutable_graph()->mutable_node(2)->add_input("bf");
  EXPECT_NE(import_error(m).find("node 'dq_b' (DequantizeLinear, opset 13): DequantizeLinear: "
                                 "x_zero_point is 5; an i32 x takes zero point 0 only"),
            std::string::npos) << import_error(m);
}

TEST(ImportPassesTest, BadQLinearConvParametersAreCompileErrorsNamingTheNode) {
  // x (u8) -> QLinearConv (i8 weight [2, 2, 1, 1]) -> y (u8)
  auto make = [](std::vector<float> w_scale, int32_t w_zero_type, float y_scale) {
    auto m = fx::empty_model();
    set_opset(m, 13);
    add_input(m, "x", TP::UINT8, {1, 2, 3, 3});
    init_f32(m, "xs", {}, {0.5f});
    init_f32(m, "ws", {static_cast<int64_t>(w_scale.size())}, w_scale);
    init_f32(m, "ys", {}, {y_scale});
    const std::vector<int8_t> w = {1, -2, 3, -4};
    const std::vector<uint8_t> zu = {7, 0}, xz = {7};
    fx::set_raw(fx::add_initializer(m, "w", TP::INT8, {2, 2, 1, 1}), fx::bytes_of(w));
    fx::set_raw(fx::add_initializer(m, "xz", TP::UINT8, {}), fx::bytes_of(xz));
    fx::set_raw(fx::add_initializer(m, "wz", w_zero_type, {2}), fx::bytes_of(zu));
    add_node(m, "QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "xz"}, {"y"}, "qconv");
    add_output(m, "y", TP::UINT8, {1, 2, 3, 3});
    return m;
  };
  EXPECT_EQ(import_error(make({0.5f, 0.25f}, TP::INT8, 1.0f)), "(imported)");
  EXPECT_NE(import_error(make({0.5f, 0.25f}, TP::INT8, 0.0f))
                .find("node 'qconv' (QLinearConv, opset 13): QLinearConv: y_scale is 0; a "
                      "quantization scale must be positive and finite"),
            std::string::npos);
  EXPECT_NE(import_error(make({0.5f, -0.25f}, TP::INT8, 1.0f))
                .find("QLinearConv: w_scale[1] is -0.25; a quantization scale"),
            std::string::npos) << import_error(make({0.5f, -0.25f}, TP::INT8, 1.0f));
  EXPECT_NE(import_error(make({0.5f, 0.5f, 0.5f}, TP::INT8, 1.0f))
                .find("QLinearConv: w_scale must be a scalar or have 2 elements, got shape [3]"),
            std::string::npos);
  EXPECT_NE(import_error(make({0.5f, 0.25f}, TP::UINT8, 1.0f))
                .find("QLinearConv: w_zero_point has dtype u8, expected i8"),
            std::string::npos) << import_error(make({0.5f, 0.25f}, TP::UINT8, 1.0f));
}
}  // namespace
}  // namespace loom::compiler::testing
