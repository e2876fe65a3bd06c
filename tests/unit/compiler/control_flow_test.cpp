// Control flow (If, Loop, Scan) end to end: ONNX models built in code,
// compiled into staged programs (lowering/staged.hpp), run on cpu-simd and
// the reference kernels; expected values worked out by hand in each test.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "import_test_util.hpp"
#include "loom/compiler.hpp"
#include "loom/runtime.hpp"
#include "loom/trace.hpp"
#include "open_shapes_util.hpp"

namespace loom::compiler::testing {
namespace {

namespace fx = loom::testing::onnx_fixtures;
using open_shapes_util::make_runtime;
using open_shapes_util::scratch;
namespace fs = std::filesystem;

// A value of a subgraph: its name and, unless `typed` is false, a type.
void body_value(::google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto>* list, const std::string& name,
                int32_t elem_type, std::vector<int64_t> dims, bool typed = true) {
  auto* v = list->Add();
  v->set_name(name);
  if (!typed) return;
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

::onnx::NodeProto& body_node(::onnx::GraphProto& g, const std::string& op, std::vector<std::string> inputs,
                             std::vector<std::string> outputs, const std::string& name) {
  auto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return *n;
}

::onnx::GraphProto& graph_attribute(::onnx::NodeProto& n, const std::string& name) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return *a->mutable_g();
}

// y_final, ys = Loop(M, cond, y) with a body that adds the outer `step`
// (a capture) to y and stops once y passes `stop` (a condition computed in
// the body): cond_out = y_out < stop.
::onnx::ModelProto accumulate_loop(bool with_trip_count = true) {
  auto m = fx::empty_model();
  add_input(m, "M", TP::INT64, {});
  add_input(m, "y", TP::FLOAT, {2});
  add_input(m, "step", TP::FLOAT, {2});
  init_f32(m, "stop", {1}, {10.0f});
  auto& keep = add_node(m, "Constant", {}, {"go"}, "go");
  {
    auto* a = keep.add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(TP::BOOL);
    a->mutable_t()->add_int32_data(1);
  }
  auto& loop = add_node(m, "Loop", {with_trip_count ? "M" : "", "go", "y"}, {"y_final", "ys"}, "acc");
  auto& body = graph_attribute(loop, "body");
  body_value(body.mutable_input(), "i", TP::INT64, {});
  body_value(body.mutable_input(), "c", TP::BOOL, {});
  body_value(body.mutable_input(), "y_in", TP::FLOAT, {2}, false);
  body_node(body, "Add", {"y_in", "step"}, {"y_out"}, "add");
  body_node(body, "ReduceMax", {"y_out"}, {"top"}, "top");
  body_node(body, "Less", {"top", "stop"}, {"c_out"}, "less");
  body_node(body, "Identity", {"y_out"}, {"scan"}, "scan");
  body_value(body.mutable_output(), "c_out", TP::BOOL, {});
  body_value(body.mutable_output(), "y_out", TP::FLOAT, {2});
  body_value(body.mutable_output(), "scan", TP::FLOAT, {2});
  add_output(m, "y_final", TP::FLOAT, {2});
  add_output(m, "ys", TP::FLOAT, {-1, 2});
  set_opset(m, 13);
  return m;
}

Tensor f32(Shape shape, std::vector<float> v) { return Tensor::copy_of(DType::kF32, std::move(shape), fx::bytes_of(v)).value(); }
Tensor i64(int64_t v) { return Tensor::copy_of(DType::kI64, {}, fx::bytes_of(std::vector<int64_t>{v})).value(); }

std::vector<float> floats(const Tensor& t) {
  return std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.element_count());
}

Result<std::shared_ptr<Program>> compile_and_load(Runtime& runtime, const ::onnx::ModelProto& model,
                                                  const std::string& name, const std::string& target,
                                                  LoadOptions load = {}) {
  const fs::path onnx = scratch() / (name + ".onnx");
  const fs::path out = scratch() / (name + ".loom");
  LOOM_RETURN_IF_ERROR(fx::write_model(model, onnx));
  CompileOptions options;
  if (!target.empty()) options.targets = {target};
  LOOM_RETURN_IF_ERROR(compile_onnx_file(runtime.plugin_host(), onnx, out, options).status());
  return runtime.load_program(out, load);
}

TEST(ControlFlow, LoopWithACaptureAndAnEarlyExitRunsItsBodyOnCpuSimd) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  for (const std::string target : {"cpu-simd", ""}) {
    SCOPED_TRACE("target '" + target + "'");
    auto program = compile_and_load(*runtime, accumulate_loop(), "acc_" + target, target,
                                    {.device = target.empty() ? "" : "cpu-simd://0"});
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    auto session = (*program)->create_session().value();
    // y = [1, 2], step = [3, 1]: y goes [4, 3], [7, 4], [10, 5]; 10 is not
    // below 10, so the third iteration is the last although M is 100.
    ASSERT_TRUE(session->set_input("M", i64(100)).ok());
    ASSERT_TRUE(session->set_input("y", f32({2}, {1, 2})).ok());
    ASSERT_TRUE(session->set_input("step", f32({2}, {3, 1})).ok());
    auto trace = runtime->start_trace();
    Status st = session->run();
    runtime->stop_trace();
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(floats(session->output(0)), (std::vector<float>{10, 5}));
    EXPECT_EQ(session->output(1).shape(), (Shape{3, 2}));
    EXPECT_EQ(floats(session->output(1)), (std::vector<float>{4, 3, 7, 4, 10, 5}));
    // Each iteration is one delegate call on cpu-simd, under its own span.
    size_t delegate_calls = 0, iterations = 0;
    for (const Trace::Event& e : trace->events()) {
      delegate_calls += e.category == "delegate" && e.name.find("cpu-simd") != std::string::npos;
      iterations += e.category == "control";
    }
    EXPECT_EQ(iterations, 3u);
    EXPECT_EQ(delegate_calls, target.empty() ? 0u : 3u);
    // M bounds it too: 2 iterations.
    ASSERT_TRUE(session->set_input("M", i64(2)).ok());
    ASSERT_TRUE(session->run().ok());
    EXPECT_EQ(floats(session->output(0)), (std::vector<float>{7, 4}));
    EXPECT_EQ(session->output(1).shape(), (Shape{2, 2}));
  }
}

LoadOptions iterations(uint64_t limit) {
  LoadOptions o;
  o.max_loop_iterations = limit;
  return o;
}

TEST(ControlFlow, IterationLimitsAreReportedNotRunForever) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto program = compile_and_load(*runtime, accumulate_loop(), "limit", "", iterations(2));
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto session = (*program)->create_session().value();
  ASSERT_TRUE(session->set_input("y", f32({2}, {1, 2})).ok());
  ASSERT_TRUE(session->set_input("M", i64(1'000'000'000'000)).ok());
  ASSERT_TRUE(session->set_input("step", f32({2}, {3, 1})).ok());
  Status st = session->run();
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.to_string();
  EXPECT_NE(st.message().find("trip count M is 1000000000000, over the limit of 2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("Loop"), std::string::npos) << st.message();
  // Without a trip count, the condition (never false: step 0) hits the limit.
  auto endless = compile_and_load(*runtime, accumulate_loop(false), "endless", "", iterations(50));
  ASSERT_TRUE(endless.ok()) << endless.status().to_string();
  auto s2 = (*endless)->create_session().value();
  ASSERT_TRUE(s2->set_input("y", f32({2}, {1, 2})).ok());
  ASSERT_TRUE(s2->set_input("M", i64(0)).ok());
  ASSERT_TRUE(s2->set_input("step", f32({2}, {0, 0})).ok());
  st = s2->run();
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.to_string();
  EXPECT_NE(st.message().find("still running after 50 iterations"), std::string::npos) << st.message();
}

TEST(ControlFlow, ALoopCarriedValueThatChangesTypeIsAnError) {
  auto m = accumulate_loop();
  // The body hands back y as int64: a loop-carried value must keep its type.
  auto* body = m.mutable_graph()->mutable_node(1)->mutable_attribute(0)->mutable_g();
  auto& cast = body_node(*body, "Cast", {"y_out"}, {"y_int"}, "to_int");
  attr_int(cast, "to", TP::INT64);
  body->mutable_output(1)->set_name("y_int");
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto program = compile_and_load(*runtime, m, "retype", "");
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto session = (*program)->create_session().value();
  ASSERT_TRUE(session->set_input("M", i64(3)).ok());
  ASSERT_TRUE(session->set_input("y", f32({2}, {1, 2})).ok());
  ASSERT_TRUE(session->set_input("step", f32({2}, {3, 1})).ok());
  Status st = session->run();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("loop-carried value 'y_final' is f32 going into iteration 0 and i64 out of it"),
            std::string::npos)
      << st.message();
}

// An If inside a Loop body whose branches capture a tensor of the main
// graph (two scopes up) and the body's own value.
TEST(ControlFlow, NestedIfCapturesThroughTwoScopes) {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {2});
  add_input(m, "bias", TP::FLOAT, {2});
  init_i64(m, "M", {}, {4});
  auto& loop = add_node(m, "Loop", {"M", "", "x"}, {"x_final"}, "outer");
  auto& body = graph_attribute(loop, "body");
  body_value(body.mutable_input(), "i", TP::INT64, {});
  body_value(body.mutable_input(), "c", TP::BOOL, {});
  body_value(body.mutable_input(), "x_in", TP::FLOAT, {2});
  // even iterations add bias, odd ones double x_in
  auto& two = body_node(body, "Constant", {}, {"two"}, "two");
  {
    auto* a = two.add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(TP::INT64);
    a->mutable_t()->add_int64_data(2);
  }
  body_node(body, "Mod", {"i", "two"}, {"odd_i"}, "mod");
  auto& cast = body_node(body, "Cast", {"odd_i"}, {"odd"}, "cast");
  attr_int(cast, "to", TP::BOOL);
  auto& branch = body_node(body, "If", {"odd"}, {"x_out"}, "pick");
  auto& then_g = graph_attribute(branch, "then_branch");
  body_node(then_g, "Add", {"x_in", "x_in"}, {"doubled"}, "dbl");
  body_value(then_g.mutable_output(), "doubled", TP::FLOAT, {2});
  auto& else_g = graph_attribute(branch, "else_branch");
  body_node(else_g, "Add", {"x_in", "bias"}, {"biased"}, "bias_add");
  body_value(else_g.mutable_output(), "biased", TP::FLOAT, {2});
  body_node(body, "Identity", {"c"}, {"c_out"}, "keep");
  body_value(body.mutable_output(), "c_out", TP::BOOL, {});
  body_value(body.mutable_output(), "x_out", TP::FLOAT, {2});
  add_output(m, "x_final", TP::FLOAT, {2});
  set_opset(m, 13);

  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto program = compile_and_load(*runtime, m, "nested", "cpu-simd", {.device = "cpu-simd://0"});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto session = (*program)->create_session().value();
  ASSERT_TRUE(session->set_input("x", f32({2}, {1, -1})).ok());
  ASSERT_TRUE(session->set_input("bias", f32({2}, {0.5f, 2})).ok());
  ASSERT_TRUE(session->run().ok());
  // [1,-1] +b [1.5,1] x2 [3,2] +b [3.5,4] x2 [7,8]
  EXPECT_EQ(floats(session->output(0)), (std::vector<float>{7, 8}));
}

// Scan over axis 1, the scan input read in reverse and the output written in
// reverse: a running sum from the right.
TEST(ControlFlow, ScanAlongAnAxisInReverse) {
  auto m = fx::empty_model();
  add_input(m, "init", TP::FLOAT, {2});
  add_input(m, "xs", TP::FLOAT, {2, 3});
  auto& scan = add_node(m, "Scan", {"init", "xs"}, {"total", "partial"}, "scan");
  attr_int(scan, "num_scan_inputs", 1);
  attr_ints(scan, "scan_input_axes", {1});
  attr_ints(scan, "scan_input_directions", {1});
  attr_ints(scan, "scan_output_directions", {1});
  auto& body = graph_attribute(scan, "body");
  body_value(body.mutable_input(), "acc", TP::FLOAT, {2});
  body_value(body.mutable_input(), "col", TP::FLOAT, {2});
  body_node(body, "Add", {"acc", "col"}, {"acc_out"}, "add");
  body_node(body, "Identity", {"acc_out"}, {"part"}, "copy");
  body_value(body.mutable_output(), "acc_out", TP::FLOAT, {2});
  body_value(body.mutable_output(), "part", TP::FLOAT, {2});
  add_output(m, "total", TP::FLOAT, {2});
  add_output(m, "partial", TP::FLOAT, {3, 2});
  set_opset(m, 16);
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto program = compile_and_load(*runtime, m, "scan_rev", "");
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto session = (*program)->create_session().value();
  ASSERT_TRUE(session->set_input("init", f32({2}, {0, 100})).ok());
  ASSERT_TRUE(session->set_input("xs", f32({2, 3}, {1, 2, 3, 4, 5, 6})).ok());
  ASSERT_TRUE(session->run().ok());
  // columns read right to left: [3,6], [2,5], [1,4]; sums [3,106], [5,111],
  // [6,115]; written in reverse, so row 0 is the last sum.
  EXPECT_EQ(floats(session->output(0)), (std::vector<float>{6, 115}));
  EXPECT_EQ(floats(session->output(1)), (std::vector<float>{6, 115, 5, 111, 3, 106}));
}

// An If on a constant is inlined at compile time: the program has no
// control flow left, and is an ordinary fixed-shape one.
TEST(ControlFlow, AnIfOnAConstantIsInlined) {
  for (const bool cond : {true, false}) {
    auto m = fx::empty_model();
    add_input(m, "x", TP::FLOAT, {3});
    auto& k = add_node(m, "Constant", {}, {"flag"}, "flag");
    auto* a = k.add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(TP::BOOL);
    a->mutable_t()->add_int32_data(cond ? 1 : 0);
    auto& n = add_node(m, "If", {"flag"}, {"y"}, "pick");
    auto& then_g = graph_attribute(n, "then_branch");
    body_node(then_g, "Neg", {"x"}, {"t"}, "neg");
    body_value(then_g.mutable_output(), "t", TP::FLOAT, {3});
    auto& else_g = graph_attribute(n, "else_branch");
    body_node(else_g, "Abs", {"x"}, {"e"}, "abs");
    body_value(else_g.mutable_output(), "e", TP::FLOAT, {3});
    add_output(m, "y", TP::FLOAT, {3});
    auto imported = import(m);
    ASSERT_TRUE(imported.ok()) << imported.status().to_string();
    EXPECT_FALSE(imported->control_flow);
    EXPECT_FALSE(imported->open);
    std::vector<std::string> ops;
    for (const graph::Node& node : imported->graph.nodes) ops.push_back(node.op_type);
    EXPECT_EQ(ops, (std::vector<std::string>{cond ? "Neg" : "Abs"}));
    auto runtime = make_runtime();
    ASSERT_NE(runtime, nullptr);
    auto program = compile_and_load(*runtime, m, cond ? "inline_t" : "inline_f", "");
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    EXPECT_EQ((*program)->functions().size(), 1u);
    auto session = (*program)->create_session().value();
    ASSERT_TRUE(session->set_input("x", f32({3}, {-1, 2, -3})).ok());
    ASSERT_TRUE(session->run().ok());
    EXPECT_EQ(floats(session->output(0)), cond ? (std::vector<float>{1, -2, 3}) : (std::vector<float>{1, 2, 3}));
  }
}

// Sequences inside a staged program: split a tensor into a sequence, take
// an element at a run-time position, and concatenate the sequence again.
TEST(ControlFlow, SequenceOperatorsRunOnTheHost) {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {3, 2});
  add_input(m, "pos", TP::INT64, {});
  add_node(m, "SplitToSequence", {"x"}, {"rows"}, "split");
  add_node(m, "SequenceAt", {"rows", "pos"}, {"row"}, "at");
  add_node(m, "SequenceLength", {"rows"}, {"n"}, "len");
  add_node(m, "Neg", {"row"}, {"neg"}, "neg");
  add_node(m, "SequenceInsert", {"rows", "neg"}, {"more"}, "insert");
  auto& concat = add_node(m, "ConcatFromSequence", {"more"}, {"joined"}, "concat");
  attr_int(concat, "axis", 0);
  add_output(m, "joined", TP::FLOAT, {4, 2});
  add_output(m, "n", TP::INT64, {});
  set_opset(m, 13);
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto program = compile_and_load(*runtime, m, "sequences", "cpu-simd", {.device = "cpu-simd://0"});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto session = (*program)->create_session().value();
  ASSERT_TRUE(session->set_input("x", f32({3, 2}, {1, 2, 3, 4, 5, 6})).ok());
  ASSERT_TRUE(session->set_input("pos", i64(-2)).ok());
  Status st = session->run();
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(session->output(0).shape(), (Shape{4, 2}));
  EXPECT_EQ(floats(session->output(0)), (std::vector<float>{1, 2, 3, 4, 5, 6, -3, -4}));
  EXPECT_EQ(*session->output(1).data_as<int64_t>(), 3);
  // A position outside the sequence is an error naming the instruction.
  ASSERT_TRUE(session->set_input("pos", i64(3)).ok());
  st = session->run();
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.to_string();
  EXPECT_NE(st.message().find("(SequenceAt of rows, pos): sequence index 3 is out of range for a sequence of 3 tensors"),
            std::string::npos)
      << st.message();
}

// NonMaxSuppression on boxes computed inside the program (too many to be
// bound per run as a value input): a staged program runs it on the host, and
// the boxes it keeps flow on into the next part at the size they have.
TEST(ControlFlow, NmsOnComputedBoxesRunsInOneProgram) {
  constexpr int64_t kBoxes = 1100;  // 4400 values: past what is bound per run
  auto m = fx::empty_model();
  add_input(m, "boxes_in", TP::FLOAT, {1, kBoxes, 4});
  add_input(m, "scores", TP::FLOAT, {1, 1, kBoxes});
  init_f32(m, "offset", {1}, {0.5f});
  init_i64(m, "max_out", {1}, {10});
  init_f32(m, "iou", {1}, {0.5f});
  init_f32(m, "min_score", {1}, {0.1f});
  init_i64(m, "flat", {2}, {kBoxes, 4});
  init_i64(m, "column", {}, {2});
  add_node(m, "Add", {"boxes_in", "offset"}, {"boxes"}, "shift");
  add_node(m, "NonMaxSuppression", {"boxes", "scores", "max_out", "iou", "min_score"}, {"selected"}, "nms");
  auto& g1 = add_node(m, "Gather", {"selected", "column"}, {"keep"}, "which");
  attr_int(g1, "axis", 1);
  add_node(m, "Reshape", {"boxes", "flat"}, {"boxes2d"}, "flat");
  auto& g2 = add_node(m, "Gather", {"boxes2d", "keep"}, {"kept"}, "kept");
  attr_int(g2, "axis", 0);
  add_output(m, "kept", TP::FLOAT, {-1, 4});
  set_opset(m, 13);
  std::vector<float> boxes(kBoxes * 4), scores(kBoxes, 0.0f);
  for (int64_t i = 0; i < kBoxes; ++i) {  // far apart unit boxes
    const float x = static_cast<float>(i) * 10.0f;
    boxes[static_cast<size_t>(i * 4)] = 0;
    boxes[static_cast<size_t>(i * 4 + 1)] = x;
    boxes[static_cast<size_t>(i * 4 + 2)] = 1;
    boxes[static_cast<size_t>(i * 4 + 3)] = x + 1;
  }
  // Box 7 (0.9) wins; box 8, moved onto box 7 (IoU 0.9), is suppressed;
  // box 500 (0.7) is kept; box 900 (0.05) is under the score threshold.
  boxes[8 * 4 + 1] = 70.05f;
  boxes[8 * 4 + 3] = 71.05f;
  scores[7] = 0.9f;
  scores[8] = 0.8f;
  scores[500] = 0.7f;
  scores[900] = 0.05f;
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  for (const std::string target : {"cpu-simd", ""}) {
    SCOPED_TRACE("target '" + target + "'");
    auto program = compile_and_load(*runtime, m, "nms_" + target, target,
                                    {.device = target.empty() ? "" : "cpu-simd://0"});
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    auto session = (*program)->create_session().value();
    ASSERT_TRUE(session->set_input("boxes_in", f32({1, kBoxes, 4}, boxes)).ok());
    ASSERT_TRUE(session->set_input("scores", f32({1, 1, kBoxes}, scores)).ok());
    Status st = session->run();
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(session->output(0).shape(), (Shape{2, 4}));
    EXPECT_EQ(floats(session->output(0)), (std::vector<float>{0.5f, 70.5f, 1.5f, 71.5f, 0.5f, 5000.5f, 1.5f, 5001.5f}));
  }
}

// A graph input or output that is a sequence of f32 tensors, or an optional
// f32 tensor.
void value_io(::google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto>* list, const std::string& name,
              bool optional) {
  auto* v = list->Add();
  v->set_name(name);
  ::onnx::TypeProto* t = v->mutable_type();
  if (optional) t = t->mutable_optional_type()->mutable_elem_type();
  if (!optional) t = t->mutable_sequence_type()->mutable_elem_type();
  t->mutable_tensor_type()->set_elem_type(TP::FLOAT);
}

// Sequences across the API, through an Identity and a Loop that carries a
// sequence: out = Loop(M) { seq_out = SequenceInsert(seq_in, t) }, same =
// Identity(seq), n = SequenceLength(out).
TEST(ControlFlow, SequencesAreInputsOutputsAndLoopCarried) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto m = fx::empty_model();
  value_io(m.mutable_graph()->mutable_input(), "seq", false);
  add_input(m, "M", TP::INT64, {});
  add_input(m, "t", TP::FLOAT, {2});
  add_node(m, "Identity", {"seq"}, {"same"}, "same");
  auto& loop = add_node(m, "Loop", {"M", "", "seq"}, {"out"}, "grow");
  auto& body = graph_attribute(loop, "body");
  body_value(body.mutable_input(), "i", TP::INT64, {});
  body_value(body.mutable_input(), "c", TP::BOOL, {});
  value_io(body.mutable_input(), "seq_in", false);
  body_node(body, "Identity", {"c"}, {"c_out"}, "keep");
  body_node(body, "SequenceInsert", {"seq_in", "t"}, {"seq_out"}, "insert");
  body_value(body.mutable_output(), "c_out", TP::BOOL, {});
  value_io(body.mutable_output(), "seq_out", false);
  add_node(m, "SequenceLength", {"out"}, {"n"}, "len");
  value_io(m.mutable_graph()->mutable_output(), "same", false);
  value_io(m.mutable_graph()->mutable_output(), "out", false);
  add_output(m, "n", TP::INT64, {});
  set_opset(m, 13);
  for (const std::string target : {"cpu-simd", ""}) {
    SCOPED_TRACE("target '" + target + "'");
    auto program = compile_and_load(*runtime, m, "seq_" + target, target,
                                    {.device = target.empty() ? "" : "cpu-simd://0"});
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    auto session = (*program)->create_session().value();
    EXPECT_EQ(session->function().inputs[0].kind, ValueKind::kSequence);
    EXPECT_EQ(session->function().outputs[1].kind, ValueKind::kSequence);
    ASSERT_TRUE(session->set_input_value("seq", Value::sequence({f32({2}, {1, 2})})).ok());
    ASSERT_TRUE(session->set_input("M", i64(2)).ok());
    ASSERT_TRUE(session->set_input("t", f32({2}, {5, 6})).ok());
    Status st = session->run();
    ASSERT_TRUE(st.ok()) << st.to_string();
    Value same = session->output_value("same").value();
    ASSERT_TRUE(same.is_sequence());
    ASSERT_EQ(same.elements.size(), 1u);
    EXPECT_EQ(floats(same.elements[0]), (std::vector<float>{1, 2}));
    Value out = session->output_value("out").value();
    ASSERT_TRUE(out.is_sequence());
    ASSERT_EQ(out.elements.size(), 3u);
    EXPECT_EQ(floats(out.elements[2]), (std::vector<float>{5, 6}));
    EXPECT_EQ(*session->output(2).data_as<int64_t>(), 3);
    // An empty sequence in, no iteration: an empty sequence out.
    ASSERT_TRUE(session->set_input_value("seq", Value::sequence({})).ok());
    ASSERT_TRUE(session->set_input("M", i64(0)).ok());
    ASSERT_TRUE(session->run().ok());
    EXPECT_TRUE(session->output_value("out")->is_sequence());
    EXPECT_TRUE(session->output_value("out")->elements.empty());
    // A tensor for the sequence input, and the reverse; a sequence read as a tensor.
    EXPECT_EQ(session->set_input("seq", f32({2}, {1, 2})).message(),
              "input 'seq' of function 'main' takes a sequence of f32 tensors, got a tensor (f32 [2])");
    EXPECT_EQ(session->set_input_value("t", Value::sequence({})).message(),
              "input 't' of function 'main' takes a tensor, got a sequence of 0 tensors");
    EXPECT_EQ(session->output("out").status().message(),
              "result 'out' of function 'main' is a sequence of 0 tensors; read it with output_value");
  }
}

// Optional inputs: has = OptionalHasElement(opt), got = OptionalGetElement(opt);
// an empty optional read by OptionalGetElement is a one-line error.
TEST(ControlFlow, OptionalInputsAreTestedAndRead) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto m = fx::empty_model();
  value_io(m.mutable_graph()->mutable_input(), "opt", true);
  add_node(m, "OptionalHasElement", {"opt"}, {"has"}, "has");
  add_node(m, "OptionalGetElement", {"opt"}, {"got"}, "get");
  add_node(m, "Optional", {"got"}, {"again"}, "wrap");
  add_output(m, "has", TP::BOOL, {});
  add_output(m, "got", TP::FLOAT, {2});
  value_io(m.mutable_graph()->mutable_output(), "again", true);
  set_opset(m, 15);
  auto program = compile_and_load(*runtime, m, "opt", "");
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto session = (*program)->create_session().value();
  EXPECT_EQ(session->function().inputs[0].kind, ValueKind::kOptionalTensor);
  ASSERT_TRUE(session->set_input_value("opt", Value::of(f32({2}, {3, 4}))).ok());
  Status st = session->run();
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(*session->output(0).data_as<uint8_t>(), 1);
  EXPECT_EQ(floats(session->output(1)), (std::vector<float>{3, 4}));
  EXPECT_TRUE(session->output_value("again")->is_tensor());
  ASSERT_TRUE(session->set_input_value("opt", Value::none()).ok());
  st = session->run();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("(OptionalGetElement of opt): OptionalGetElement of 'opt': the optional is empty"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(session->set_input_value("opt", Value::sequence({})).message(),
            "input 'opt' of function 'main' takes an optional tensor (f32) or none, got a sequence of 0 tensors");
}

void expect_import_error(const ::onnx::ModelProto& m, const std::string& fragment) {
  auto r = import(m);
  ASSERT_FALSE(r.ok()) << "expected: " << fragment;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
}

TEST(ControlFlow, MalformedControlFlowIsAOneLineErrorNamingTheNode) {
  {  // a body reads a name nothing defines
    auto m = accumulate_loop();
    auto* body = m.mutable_graph()->mutable_node(1)->mutable_attribute(0)->mutable_g();
    body->mutable_node(0)->set_input(1, "nowhere");
    expect_import_error(m, "node 'acc' (Loop) has a body that reads 'nowhere', which no node, graph input or "
                           "initializer produces");
  }
  {  // neither a trip count nor a condition
    auto m = accumulate_loop(false);
    m.mutable_graph()->mutable_node(1)->set_input(1, "");
    expect_import_error(m, "node 'acc' (Loop, opset 13) has neither a trip count (input 'M') nor a condition");
  }
  {  // the body takes the wrong number of inputs
    auto m = accumulate_loop();
    auto* body = m.mutable_graph()->mutable_node(1)->mutable_attribute(0)->mutable_g();
    body_value(body->mutable_input(), "extra", TP::FLOAT, {2});
    expect_import_error(m, "its body must take 3 inputs");
  }
  {  // an If without an else branch
    auto m = fx::empty_model();
    add_input(m, "c", TP::BOOL, {});
    add_input(m, "x", TP::FLOAT, {2});
    auto& n = add_node(m, "If", {"c"}, {"y"}, "branch");
    auto& g = graph_attribute(n, "then_branch");
    body_node(g, "Neg", {"x"}, {"nx"}, "neg");
    body_value(g.mutable_output(), "nx", TP::FLOAT, {2});
    add_output(m, "y", TP::FLOAT, {2});
    expect_import_error(m, "node 'branch' (If, opset 17) needs both a 'then_branch' and an 'else_branch' graph");
  }
}

}  // namespace
}  // namespace loom::compiler::testing
