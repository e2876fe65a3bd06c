// Malformed models: clear errors, never a crash (run under ASan/UBSan).
#include <gtest/gtest.h>

#include "import_test_util.hpp"

namespace loom::compiler::testing {
namespace {

namespace fx = loom::testing::onnx_fixtures;

::onnx::ModelProto relu_model() {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {2});
  add_node(m, "Relu", {"x"}, {"y"}, "r");
  add_output(m, "y", TP::FLOAT, {2});
  return m;
}

void expect_error(const ::onnx::ModelProto& m, const std::string& fragment,
                  StatusCode code = StatusCode::kInvalidArgument) {
  auto r = import(m);
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << fragment;
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
}

TEST(ImportErrorsTest, TruncatedBytesNeverCrash) {
  auto bytes = fx::serialize(relu_model());
  ASSERT_GT(bytes.size(), 10u);
  const auto registry = test_registry();
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto model = onnx_io::Model::parse(std::span(bytes.data(), n), {}, "cut.onnx");
    if (!model.ok()) continue;
    auto r = import_onnx(**model, {}, registry);
    if (r.ok()) {
      EXPECT_TRUE(graph::validate(r->graph).ok());
    }
  }
}

TEST(ImportErrorsTest, OpsetOutOfRange) {
  auto m = relu_model();
  set_opset(m, 0);
  expect_error(m, "opset 0 of the default ONNX domain; Loom supports opsets 1 to 21",
               StatusCode::kUnimplemented);
  set_opset(m, 22);
  expect_error(m, "opset 22", StatusCode::kUnimplemented);
  for (int64_t opset : {1, 6, 18, 21}) {
    set_opset(m, opset);
    EXPECT_TRUE(import(m).ok()) << "opset " << opset;
  }
  m.clear_opset_import();
  expect_error(m, "imports no opset of the default ONNX domain, but node 'r' (Relu) is in it");
}

TEST(ImportErrorsTest, MissingNodeInput) {
  auto m = relu_model();
  add_node(m, "Add", {"y", "nowhere"}, {"z"}, "adder");
  expect_error(m, "node 'adder' (Add) reads 'nowhere'");
}

TEST(ImportErrorsTest, DuplicateOutputs) {
  auto m = relu_model();
  add_node(m, "Relu", {"x"}, {"y"}, "again");
  expect_error(m, "writes 'y', which node 'r' (Relu) writes too");
  auto m2 = relu_model();
  add_node(m2, "Relu", {"y"}, {"x"}, "overwrite");
  expect_error(m2, "writes 'x', which is a graph input");
}

TEST(ImportErrorsTest, Cycle) {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {2});
  add_node(m, "Add", {"x", "b"}, {"a"}, "n1");
  add_node(m, "Relu", {"a"}, {"b"}, "n2");
  add_output(m, "b", TP::FLOAT, {2});
  expect_error(m, "cycle");
}

TEST(ImportErrorsTest, IfWithoutElseBranch) {
  auto m = fx::empty_model();
  add_input(m, "c", TP::BOOL, {});
  auto& n = add_node(m, "If", {"c"}, {"y"}, "branch");
  auto* a = n.add_attribute();
  a->set_name("then_branch");
  a->set_type(::onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name("then");
  add_output(m, "y", TP::FLOAT, {2});
  expect_error(m, "node 'branch' (If, opset 17) needs both a 'then_branch' and an 'else_branch' graph");
}

TEST(ImportErrorsTest, BadTensors) {
  auto m = relu_model();
  auto& t = fx::add_initializer(m, "w", TP::FLOAT, {4});
  t.set_raw_data(std::string(3, '\0'));  // 3 bytes for 4 floats
  add_node(m, "Add", {"y", "w"}, {"z"});
  expect_error(m, "w");

  auto m2 = relu_model();
  auto& c = add_node(m2, "Constant", {}, {"k"}, "konst");
  auto* a = c.add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(TP::FLOAT);
  a->mutable_t()->add_dims(-3);
  EXPECT_FALSE(import(m2).ok());

  auto m3 = relu_model();
  auto& s = add_node(m3, "Constant", {}, {"k"}, "sparse");
  auto* sa = s.add_attribute();
  sa->set_name("sparse_value");
  sa->set_type(::onnx::AttributeProto::SPARSE_TENSOR);
  expect_error(m3, "sparse", StatusCode::kUnimplemented);
}

TEST(ImportErrorsTest, GraphOutputNotProduced) {
  auto m = relu_model();
  add_output(m, "ghost", TP::FLOAT, {2});
  expect_error(m, "graph output 'ghost'");
}

TEST(ImportErrorsTest, InputWithoutTensorType) {
  auto m = relu_model();
  m.mutable_graph()->mutable_input(0)->clear_type();
  expect_error(m, "'x' has no type");
  auto m2 = relu_model();
  m2.mutable_graph()->mutable_input(0)->mutable_type()->mutable_sequence_type();
  expect_error(m2, "graph input 'x' is a sequence or optional of something other than tensors",
               StatusCode::kUnimplemented);
  auto m3 = relu_model();
  m3.mutable_graph()->mutable_input(0)->mutable_type()->mutable_map_type();
  expect_error(m3, "graph input 'x' is a map; Loom supports tensors, sequences of tensors and optionals",
               StatusCode::kUnimplemented);
}

TEST(ImportErrorsTest, HugeInputShapeRefused) {
  auto m = relu_model();
  auto* shape = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->mutable_dim(0)->set_dim_value(int64_t{1} << 40);
  shape->add_dim()->set_dim_value(int64_t{1} << 40);
  expect_error(m, "impossible shape");
}

TEST(ImportErrorsTest, KernelInferErrorNamesNode) {
  auto m = fx::empty_model();
  add_input(m, "a", TP::FLOAT, {2, 3});
  add_input(m, "b", TP::FLOAT, {4, 5});
  add_node(m, "MatMul", {"a", "b"}, {"y"}, "mm");
  add_output(m, "y", TP::FLOAT, {});
  auto r = import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 'mm' (MatMul, opset 17)"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace loom::compiler::testing
