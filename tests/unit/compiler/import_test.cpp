// import_onnx: reading, shape inference, constant folding, input binding.
#include <gtest/gtest.h>

#include "import_test_util.hpp"

namespace loom::compiler::testing {
namespace {

namespace fx = loom::testing::onnx_fixtures;

// x[?,4] -> MatMul(w[4,3]) -> Add(b[3]) -> Relu -> Softmax -> y
::onnx::ModelProto mlp_model() {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {-1, 4});
  init_f32(m, "w", {4, 3}, std::vector<float>(12, 0.5f));
  init_f32(m, "b", {3}, {1, 2, 3});
  add_node(m, "MatMul", {"x", "w"}, {"h"}, "mm");
  add_node(m, "Add", {"h", "b"}, {"h2"});
  add_node(m, "Relu", {"h2"}, {"h3"}, "relu");
  add_node(m, "Softmax", {"h3"}, {"y"}, "sm");
  add_output(m, "y", TP::FLOAT, {-1, 3});
  return m;
}

TEST(ImportTest, InfersShapesThroughSeveralOps) {
  ImportOptions opts;
  opts.input_shapes = {{"x", {2, 4}}};
  auto r = import(mlp_model(), opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const graph::Graph& g = r->graph;
  EXPECT_TRUE(graph::validate(g).ok());
  ASSERT_EQ(g.nodes.size(), 4u);
  EXPECT_EQ(g.nodes[1].name, "Add_1");  // generated from op type and model index
  EXPECT_EQ(g.nodes[0].opset, 17);
  EXPECT_EQ(r->stats.opset, 17);
  EXPECT_EQ(r->stats.model_nodes, 4u);
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.tensors[g.inputs[0]].name, "x");
  EXPECT_EQ(g.tensors[g.inputs[0]].shape, (Shape{2, 4}));
  ASSERT_EQ(g.outputs.size(), 1u);
  const graph::Tensor& y = g.tensors[g.outputs[0]];
  EXPECT_EQ(y.name, "y");
  EXPECT_EQ(y.dtype, DType::kF32);
  EXPECT_EQ(y.shape, (Shape{2, 3}));
  EXPECT_EQ(g.tensors[find_tensor(g, "h")].shape, (Shape{2, 3}));
  EXPECT_TRUE(g.tensors[find_tensor(g, "w")].is_constant());
}

TEST(ImportTest, UnboundDynamicDimensionStaysOpen) {
  auto r = import(mlp_model());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_TRUE(r->open);
  EXPECT_TRUE(graph::validate(r->graph, {.open = true}).ok());
  // Nothing was inferred or folded: a binding decides that.
  EXPECT_EQ(r->graph.nodes.size(), 4u);
  const graph::Tensor& h = r->graph.tensors[find_tensor(r->graph, "h")];
  EXPECT_EQ(h.dtype, DType::kInvalid);
  ASSERT_EQ(r->signature.inputs.size(), 1u);
  const ValueDef& x = r->signature.inputs[0];
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.dtype, DType::kF32);
  EXPECT_EQ(x.shape, (Shape{-1, 4}));
  EXPECT_EQ(x.dim_symbols, (std::vector<std::string>{"d0", ""}));
  EXPECT_TRUE(x.dim_min.empty());
  ASSERT_EQ(r->signature.outputs.size(), 1u);
  EXPECT_EQ(r->signature.outputs[0].name, "y");
  EXPECT_EQ(r->signature.outputs[0].shape, (Shape{-1, 3}));
  EXPECT_EQ(r->signature.outputs[0].dim_symbols, (std::vector<std::string>{"d0", ""}));
}

TEST(ImportTest, QuestionMarkOpensAFixedDimensionAndRangesBoundIt) {
  ImportOptions opts;
  opts.input_shapes = {{"x", {-1, -1}}};  // the model fixes dimension 1 at 4; '?' opens it
  auto r = import(mlp_model(), opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->signature.inputs[0].shape, (Shape{-1, -1}));
  // Both ends of the bounds are checked: [1, 4] and [8, 4] fit.
  opts.input_shapes = {{"x", {-1, 4}}};
  opts.input_ranges = {{"x", {{1, 8}, {}}}};
  r = import(mlp_model(), opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->signature.inputs[0].dim_min, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(r->signature.inputs[0].dim_max, (std::vector<int64_t>{8, 0}));
}

TEST(ImportTest, RangeTheGraphContradictsIsRefusedNamingTheNode) {
  // Opening dimension 1 with a range makes MatMul's inner sizes differ.
  ImportOptions opts;
  opts.input_shapes = {{"x", {2, -1}}};
  opts.input_ranges = {{"x", {{}, {3, 5}}}};
  auto r = import(mlp_model(), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the declared ranges do not fit the graph at their minimum "
                                      "(x=[2, 3])"),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("node 'mm' (MatMul"), std::string::npos) << r.status().message();
}

TEST(ImportTest, RangeOnAFixedDimensionOrUpsideDownIsRefused) {
  ImportOptions opts;
  opts.input_ranges = {{"x", {{}, {1, 4}}}};
  auto r = import(mlp_model(), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 'x' dimension 1 is fixed at 4; only an open dimension "
                                      "takes a range"),
            std::string::npos)
      << r.status().message();
  opts.input_ranges = {{"x", {{9, 2}, {}}}};
  r = import(mlp_model(), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("9..2 is not a range"), std::string::npos) << r.status().message();
  opts.input_ranges = {{"x", {{1, 2}}}};
  r = import(mlp_model(), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("has 1 dimensions; the input has rank 2"), std::string::npos)
      << r.status().message();
  opts.input_ranges = {{"q", {{1, 2}}}};
  r = import(mlp_model(), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("a range is given for input 'q'"), std::string::npos)
      << r.status().message();
}

TEST(ImportTest, BoundShapeMustMatchStaticDimsAndRank) {
  ImportOptions opts;
  opts.input_shapes = {{"x", {2, 5}}};
  auto r = import(mlp_model(), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("differs in dimension 1"), std::string::npos)
      << r.status().message();
  opts.input_shapes = {{"x", {2, 4, 1}}};
  r = import(mlp_model(), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rank 3"), std::string::npos) << r.status().message();
  opts.input_shapes = {{"z", {2, 4}}};
  r = import(mlp_model(), opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 'z', which the model does not have; its inputs are 'x'"),
            std::string::npos)
      << r.status().message();
}

// onnx 1.12's CastLike bfloat16 test models declare 'like' [3, 4] while
// their data sets give it [1]: with input_shapes_replace_declared the given
// shape stands, and the import says which input it replaced.
TEST(ImportTest, GivenShapeReplacesAContradictingDeclarationOnlyWhenAsked) {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {3, 4});
  add_input(m, "like", TP::DOUBLE, {3, 4});
  add_node(m, "CastLike", {"x", "like"}, {"y"});
  add_output(m, "y", TP::DOUBLE, {3, 4});
  ImportOptions opts;
  opts.input_shapes = {{"x", {3, 4}}, {"like", {1}}};
  auto r = import(m, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the shape given for input 'like', [1], has rank 1; the model's "
                                      "input has rank 2"),
            std::string::npos)
      << r.status().message();
  opts.input_shapes_replace_declared = true;
  r = import(m, opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->stats.replaced_input_shapes, (std::vector<std::string>{"like: [1] for the declared [3, 4]"}));
  const graph::Graph& g = r->graph;
  EXPECT_EQ(g.tensors[find_tensor(g, "like")].shape, (Shape{1}));
  EXPECT_EQ(g.tensors[g.outputs[0]].shape, (Shape{3, 4}));
  EXPECT_EQ(g.tensors[g.outputs[0]].dtype, DType::kF64);
  // Another size in a dimension the model fixes is replaced too; a shape
  // that agrees (or leaves the dimension open) is no replacement.
  opts.input_shapes = {{"x", {3, 4}}, {"like", {3, 5}}};
  r = import(m, opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->stats.replaced_input_shapes, (std::vector<std::string>{"like: [3, 5] for the declared [3, 4]"}));
  opts.input_shapes = {{"x", {3, 4}}, {"like", {3, 4}}};
  r = import(m, opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->stats.replaced_input_shapes.empty());
}

TEST(ImportTest, InputWithoutShapeNeedsOne) {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {}, /*no_shape=*/true);
  add_node(m, "Relu", {"x"}, {"y"});
  add_output(m, "y", TP::FLOAT, {});
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  auto r = import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 'x' has no shape"), std::string::npos);
  ImportOptions opts;
  opts.input_shapes = {{"x", {3, 2}}};
  r = import(m, opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->graph.tensors[r->graph.outputs[0]].shape, (Shape{3, 2}));
}

// The chain exporters emit for x.view(x.size(0), -1):
// Shape(x) -> Gather(0) -> Unsqueeze -> Concat([-1]) -> Reshape(x, .)
::onnx::ModelProto reshape_chain_model() {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {-1, 3, 4});
  init_i64(m, "zero", {}, {0});
  init_i64(m, "axes", {1}, {0});
  add_node(m, "Shape", {"x"}, {"s"}, "shape");
  attr_int(add_node(m, "Gather", {"s", "zero"}, {"n"}, "gather"), "axis", 0);
  add_node(m, "Unsqueeze", {"n", "axes"}, {"n1"}, "unsq");
  auto& c = add_node(m, "Constant", {}, {"minus1"}, "c");
  attr_ints(c, "value_ints", {-1});
  attr_int(add_node(m, "Concat", {"n1", "minus1"}, {"shape2"}, "concat"), "axis", 0);
  add_node(m, "Reshape", {"x", "shape2"}, {"y"}, "reshape");
  add_output(m, "y", TP::FLOAT, {-1, 12});
  return m;
}

TEST(ImportTest, FoldsShapeChainIntoConstantReshape) {
  ImportOptions opts;
  opts.input_shapes = {{"x", {5, 3, 4}}};
  auto r = import(reshape_chain_model(), opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const graph::Graph& g = r->graph;
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Reshape");
  const graph::Tensor& shape = g.tensors[g.nodes[0].inputs[1]];
  ASSERT_TRUE(shape.is_constant());
  EXPECT_EQ(ints_of(shape), (std::vector<int64_t>{5, -1}));
  EXPECT_EQ(g.tensors[g.outputs[0]].shape, (Shape{5, 12}));
  EXPECT_EQ(r->stats.folded_nodes, 5u);  // Shape, Gather, Unsqueeze, Constant, Concat
  // Constants nothing reads any more are gone.
  EXPECT_EQ(find_tensor(g, "zero"), -1);
  EXPECT_EQ(find_tensor(g, "s"), -1);
  EXPECT_EQ(g.tensors.size(), 3u);
  EXPECT_TRUE(graph::validate(g).ok());
}

TEST(ImportTest, WithoutFoldingReshapeShapeIsNotKnown) {
  ImportOptions opts;
  opts.input_shapes = {{"x", {5, 3, 4}}};
  opts.fold_constants = false;
  auto registry = test_registry();
  // Without folding, the Reshape's shape traces back to the values of x. A
  // small x (60 elements) is bound per run: an open-shape program.
  auto r = import(reshape_chain_model(), opts, registry);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->open);
  ASSERT_EQ(r->value_inputs.size(), 1u);
  EXPECT_EQ(r->value_inputs[0].rfind("x (", 0), 0u) << r->value_inputs[0];
  // A larger x is data: refused, naming it.
  opts.input_shapes = {{"x", {500, 3, 4}}};
  auto big = import(reshape_chain_model(), opts, registry);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("input 'x' (f32 [500, 3, 4]) of the model decides the output shape"),
            std::string::npos)
      << big.status().message();
}

TEST(ImportTest, UnsortedNodesAreSorted) {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {2});
  add_node(m, "Relu", {"a"}, {"y"}, "second");
  add_node(m, "Relu", {"x"}, {"a"}, "first");
  add_output(m, "y", TP::FLOAT, {2});
  auto r = import(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->graph.nodes.size(), 2u);
  EXPECT_EQ(r->graph.nodes[0].name, "first");
  EXPECT_EQ(r->graph.nodes[1].name, "second");
}

TEST(ImportTest, InitializerListedAsInputIsConstant) {
  auto m = fx::empty_model();
  m.set_ir_version(3);
  add_input(m, "x", TP::FLOAT, {3});
  add_input(m, "b", TP::FLOAT, {3});
  init_f32(m, "b", {3}, {1, 2, 3});
  add_node(m, "Add", {"x", "b"}, {"y"});
  add_output(m, "y", TP::FLOAT, {3});
  auto r = import(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->graph.inputs.size(), 1u);
  EXPECT_EQ(r->graph.tensors[r->graph.inputs[0]].name, "x");
  EXPECT_TRUE(r->graph.tensors[find_tensor(r->graph, "b")].is_constant());
}

TEST(ImportTest, AllConstantGraphFoldsToConstantOutput) {
  auto m = fx::empty_model();
  init_f32(m, "a", {2}, {1, -2});
  auto& c = add_node(m, "Constant", {}, {"b"});
  auto* v = c.add_attribute();
  v->set_name("value_float");
  v->set_type(::onnx::AttributeProto::FLOAT);
  v->set_f(3.0f);
  add_node(m, "Add", {"a", "b"}, {"s"});
  add_node(m, "Relu", {"s"}, {"y"});
  add_output(m, "y", TP::FLOAT, {2});
  auto r = import(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->graph.nodes.empty());
  EXPECT_EQ(floats_of(r->graph.tensors[r->graph.outputs[0]]), (std::vector<float>{4, 1}));
}

TEST(ImportTest, DeclaredTypeMismatchIsAnError) {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {2, 3});
  add_node(m, "Relu", {"x"}, {"y"}, "r");
  add_output(m, "y", TP::FLOAT, {3, 2});
  auto r = import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor 'y'"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace loom::compiler::testing
