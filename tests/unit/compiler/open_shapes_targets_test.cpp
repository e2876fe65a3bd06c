// Open-shape programs whose shape operands are computed from the binding:
// a Reshape target or a Resize's sizes that ONNX can spell for every
// binding (0 and -1 in a target; scales instead of sizes) is rewritten so,
// and the program is compiled once (lowering::unify_shape_targets /
// adopt_shape_targets); what cannot be spelled so is compiled per binding.
// Also the probe bindings those rewrites compare.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "graph/graph_codec.hpp"
#include "import_test_util.hpp"
#include "loom/compiler.hpp"
#include "loom/runtime.hpp"
#include "lowering/open_shapes.hpp"
#include "open_shapes_util.hpp"

namespace loom::compiler::testing {
namespace {

namespace fs = std::filesystem;
namespace fx = loom::testing::onnx_fixtures;
using open_shapes_util::make_runtime;
using open_shapes_util::max_diff;
using open_shapes_util::open_value;
using open_shapes_util::pattern;
using open_shapes_util::scratch;

std::shared_ptr<const std::vector<std::byte>> i64s(std::vector<int64_t> v) {
  auto b = std::make_shared<std::vector<std::byte>>(v.size() * 8);
  std::memcpy(b->data(), v.data(), b->size());
  return b;
}

std::vector<int64_t> i64s_of(const graph::Tensor& t) {
  std::vector<int64_t> v(t.data->size() / 8);
  std::memcpy(v.data(), t.data->data(), t.data->size());
  return v;
}

// x -> Reshape(x, k) -> y, k a constant of the binding.
graph::Graph reshape_graph(Shape x, std::vector<int64_t> k, Shape y) {
  graph::Graph g;
  g.tensors.push_back({"x", DType::kF32, std::move(x), nullptr});
  g.tensors.push_back({"k", DType::kI64, {static_cast<int64_t>(k.size())}, i64s(k)});
  g.tensors.push_back({"y", DType::kF32, std::move(y), nullptr});
  g.nodes.push_back({"r", "Reshape", "", 14, {}, {0, 1}, {2}, {}, 0});
  g.inputs = {0};
  g.outputs = {2};
  return g;
}

TEST(NativeOpenShapes, ReshapeTargetsAreSpelledForEveryBindingWhereOnnxCan) {
  // [n, 12]: the batch copied (0), the rest kept.
  graph::Graph a = reshape_graph({96, 4, 3}, {96, 12}, {96, 12});
  graph::Graph b = reshape_graph({160, 4, 3}, {160, 12}, {160, 12});
  lowering::unify_reshape_targets(a, b);
  EXPECT_EQ(i64s_of(a.tensors[1]), (std::vector<int64_t>{0, 12}));
  EXPECT_EQ(a.tensors[1].data, b.tensors[1].data);
  EXPECT_EQ(lowering::compare_bindings(a, b), "");
  // At run time a binding whose own target gives the same shape adopts the
  // spelling; one whose target gives another shape keeps its own.
  graph::Graph c = reshape_graph({7, 4, 3}, {7, 12}, {7, 12});
  lowering::adopt_reshape_targets(a, c);
  EXPECT_EQ(lowering::compare_bindings(a, c), "");
  graph::Graph d = reshape_graph({7, 4, 3}, {12, 7}, {12, 7});
  lowering::adopt_reshape_targets(a, d);
  EXPECT_EQ(i64s_of(d.tensors[1]), (std::vector<int64_t>{12, 7}));
  EXPECT_NE(lowering::compare_bindings(a, d), "");
  // [n * 4, 3]: one entry that differs and is not a copy becomes -1.
  a = reshape_graph({96, 4, 3}, {384, 3}, {384, 3});
  b = reshape_graph({160, 4, 3}, {640, 3}, {640, 3});
  lowering::unify_reshape_targets(a, b);
  EXPECT_EQ(i64s_of(b.tensors[1]), (std::vector<int64_t>{-1, 3}));
  // [12, n] with the target's own -1: two entries would be inferred, so
  // there is no spelling and both keep their targets.
  a = reshape_graph({96, 4, 3}, {-1, 96}, {12, 96});
  b = reshape_graph({160, 4, 3}, {-1, 160}, {12, 160});
  lowering::unify_reshape_targets(a, b);
  EXPECT_EQ(i64s_of(a.tensors[1]), (std::vector<int64_t>{-1, 96}));
  EXPECT_NE(lowering::compare_bindings(a, b), "");
  // A target that something else reads too is left alone.
  a = reshape_graph({96, 4, 3}, {96, 12}, {96, 12});
  b = reshape_graph({160, 4, 3}, {160, 12}, {160, 12});
  a.outputs.push_back(1);
  b.outputs.push_back(1);
  lowering::unify_reshape_targets(a, b);
  EXPECT_EQ(i64s_of(a.tensors[1]), (std::vector<int64_t>{96, 12}));
}

// x -> Resize(x, roi, scales (empty), sizes k) -> y, k a constant of the
// binding.
graph::Graph resize_graph(Shape x, std::vector<int64_t> k) {
  graph::Graph g;
  const int64_t rank = static_cast<int64_t>(x.size());
  g.tensors.push_back({"x", DType::kF32, std::move(x), nullptr});
  g.tensors.push_back({"roi", DType::kF32, {0}, std::make_shared<const std::vector<std::byte>>()});
  g.tensors.push_back({"scales", DType::kF32, {0}, std::make_shared<const std::vector<std::byte>>()});
  g.tensors.push_back({"sizes", DType::kI64, {rank}, i64s(k)});
  g.tensors.push_back({"y", DType::kF32, Shape(k.begin(), k.end()), nullptr});
  g.nodes.push_back({"up", "Resize", "", 13, {}, {0, 1, 2, 3}, {4}, {}, 0});
  g.inputs = {0};
  g.outputs = {4};
  return g;
}

std::vector<float> f32s_of(const graph::Tensor& t) {
  std::vector<float> v(t.data->size() / 4);
  std::memcpy(v.data(), t.data->data(), t.data->size());
  return v;
}

TEST(NativeOpenShapes, AResizeToTwiceItsInputReadsScalesForEveryBinding) {
  // F.interpolate(p4, size=l3.shape[-2:]) folded: [n, c, 2h, 2w] at both
  // probes, so scales [1, 1, 2, 2] give every binding the same sampling.
  graph::Graph a = resize_graph({1, 8, 6, 6}, {1, 8, 12, 12});
  graph::Graph b = resize_graph({1, 8, 10, 10}, {1, 8, 20, 20});
  EXPECT_NE(lowering::compare_bindings(a, b), "");
  lowering::unify_shape_targets(a, b);
  EXPECT_EQ(lowering::compare_bindings(a, b), "");
  ASSERT_EQ(a.nodes[0].inputs, (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(a.tensors[3].dtype, DType::kF32);
  EXPECT_EQ(f32s_of(a.tensors[3]), (std::vector<float>{1, 1, 2, 2}));
  EXPECT_EQ(a.tensors[3].data, b.tensors[3].data);
  // At run time: a binding whose sizes are twice its input adopts the
  // scales; 7 from 4 (an odd map under a stride-2 level) keeps its sizes.
  graph::Graph c = resize_graph({2, 8, 3, 5}, {2, 8, 6, 10});
  lowering::adopt_shape_targets(a, c);
  EXPECT_EQ(lowering::compare_bindings(a, c), "");
  graph::Graph d = resize_graph({1, 8, 4, 4}, {1, 8, 7, 8});
  lowering::adopt_shape_targets(a, d);
  EXPECT_EQ(d.nodes[0].inputs.size(), 4u);
  EXPECT_NE(lowering::compare_bindings(a, d), "");
  // Different multiples at the two probes (sizes fixed while the input
  // grows): no scale serves both, and both keep their sizes.
  a = resize_graph({1, 8, 6, 6}, {1, 8, 24, 24});
  b = resize_graph({1, 8, 12, 12}, {1, 8, 24, 24});
  lowering::unify_shape_targets(a, b);
  EXPECT_EQ(a.nodes[0].inputs.size(), 4u);
  EXPECT_EQ(i64s_of(a.tensors[3]), (std::vector<int64_t>{1, 8, 24, 24}));
  // A ratio a float does not hold exactly (1/3) keeps the sizes too.
  a = resize_graph({1, 8, 6, 6}, {1, 8, 2, 2});
  b = resize_graph({1, 8, 9, 9}, {1, 8, 3, 3});
  lowering::unify_shape_targets(a, b);
  EXPECT_EQ(a.nodes[0].inputs.size(), 4u);
  // Sizes something else reads too are left alone.
  a = resize_graph({1, 8, 6, 6}, {1, 8, 12, 12});
  b = resize_graph({1, 8, 10, 10}, {1, 8, 20, 20});
  a.outputs.push_back(3);
  b.outputs.push_back(3);
  lowering::unify_shape_targets(a, b);
  EXPECT_EQ(a.tensors[3].dtype, DType::kI64);
}

// x[n, 3, h, w] -> Conv(stride 2) -> p; Resize(p) to x's own height and
// width (sizes from Shape/Slice/Concat, nearest), plus a 1x1 Conv of x ->
// y: an FPN's top-down step as exporters write F.interpolate(size=...).
::onnx::ModelProto fpn_step() {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {-1, 3, -1, -1});
  std::vector<float> w(4 * 3 * 3 * 3), l(4 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i % 5) - 2) / 8.0f;
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(static_cast<int>(i % 3) - 1) / 2.0f;
  init_f32(m, "w", {4, 3, 3, 3}, w);
  init_f32(m, "l", {4, 3, 1, 1}, l);
  init_f32(m, "roi", {0}, {});
  init_f32(m, "no_scales", {0}, {});
  init_i64(m, "s0", {1}, {0});
  init_i64(m, "s2", {1}, {2});
  init_i64(m, "s4", {1}, {4});
  auto& conv = add_node(m, "Conv", {"x", "w"}, {"p"}, "down");
  attr_ints(conv, "pads", {1, 1, 1, 1});
  attr_ints(conv, "strides", {2, 2});
  attr_ints(conv, "kernel_shape", {3, 3});
  add_node(m, "Shape", {"p"}, {"p_shape"}, "p_shape");
  add_node(m, "Slice", {"p_shape", "s0", "s2"}, {"nc"}, "nc");
  add_node(m, "Shape", {"x"}, {"x_shape"}, "x_shape");
  add_node(m, "Slice", {"x_shape", "s2", "s4"}, {"hw"}, "hw");
  attr_int(add_node(m, "Concat", {"nc", "hw"}, {"sizes"}, "sizes"), "axis", 0);
  auto& up = add_node(m, "Resize", {"p", "roi", "no_scales", "sizes"}, {"up"}, "up");
  for (auto [name, value] : {std::pair{"mode", "nearest"}, {"coordinate_transformation_mode", "asymmetric"},
                             {"nearest_mode", "floor"}}) {
    auto* a = up.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(value);
  }
  add_node(m, "Conv", {"x", "l"}, {"lateral"}, "lateral");
  add_node(m, "Add", {"lateral", "up"}, {"y"}, "add");
  add_output(m, "y", TP::FLOAT, {-1, 4, -1, -1});
  return m;
}

// The FPN step compiles once, on the reference kernels and on cpu-simd:
// every binding with even sizes runs the program's own instructions,
// matching a program compiled for it alone; an odd size (7 from 4: not
// twice) is compiled on its own, and right too.
TEST(NativeOpenShapes, AnFpnResizeToTheNextLevelsSizeIsCompiledOnce) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  const fs::path model = scratch() / "fpn_step.onnx";
  ASSERT_TRUE(fx::write_model(fpn_step(), model).ok());
  for (const std::string target : {"", "cpu-simd"}) {
    SCOPED_TRACE("target '" + target + "'");
    CompileOptions options;
    if (!target.empty()) options.targets = {target};
    const fs::path out = scratch() / "fpn_step.loom";
    auto report = compile_onnx_file(runtime->plugin_host(), model, out, options);
    ASSERT_TRUE(report.ok()) << report.status().to_string();
    EXPECT_TRUE(report->open_native) << report->open_per_binding_why;
    auto session = runtime->load_program(out).value()->create_session().value();
    for (auto [n, h, w] : {std::tuple{1, 8, 8}, {2, 6, 10}, {1, 16, 4}, {1, 7, 9}, {2, 6, 10}}) {
      CompileOptions fixed = options;
      fixed.input_shapes = {{"x", {n, 3, h, w}}};
      const fs::path oracle_file = scratch() / "fpn_step_oracle.loom";
      ASSERT_TRUE(compile_onnx_file(runtime->plugin_host(), model, oracle_file, fixed).ok());
      auto oracle = runtime->load_program(oracle_file).value()->create_session().value();
      const Tensor x = pattern({n, 3, h, w}, n + w);
      ASSERT_TRUE(oracle->set_input("x", x).ok());
      ASSERT_TRUE(oracle->run().ok());
      ASSERT_TRUE(session->set_input("x", x).ok());
      const Status ran = session->run();
      ASSERT_TRUE(ran.ok()) << ran.to_string();
      EXPECT_EQ(session->output(0).shape(), (Shape{n, 4, h, w}));
      EXPECT_LE(max_diff(session->output(0), oracle->output(0)), 1e-5f) << n << "x3x" << h << "x" << w;
      const bool even = h % 2 == 0 && w % 2 == 0;
      EXPECT_EQ(session->bound_program() == nullptr, even) << n << "x3x" << h << "x" << w;
      if (!target.empty() && even) {
        bool on_target = false;
        for (const DelegateTransfers& t : session->transfers()) on_target |= t.device == target + "://0";
        EXPECT_TRUE(on_target) << n << "x3x" << h << "x" << w;
      }
    }
  }
  // The batch bound (--input-shape x=1,3,?,?): the output's 'd0' is now a
  // size, written without its symbol (a symbol on a fixed dimension is an
  // invalid program).
  CompileOptions batch_one;
  batch_one.input_shapes = {{"x", {1, 3, -1, -1}}};
  auto report = compile_onnx_file(runtime->plugin_host(), model, scratch() / "fpn_step_n1.loom", batch_one);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_TRUE(report->open_native) << report->open_per_binding_why;
  const FunctionInfo info =
      runtime->load_program(scratch() / "fpn_step_n1.loom").value()->function("main").value();
  EXPECT_EQ(info.outputs[0].shape, (Shape{1, 4, -1, -1}));
  ASSERT_EQ(info.outputs[0].symbols.size(), 4u);
  EXPECT_EQ(info.outputs[0].symbols[0], "");
  EXPECT_EQ(info.outputs[0].symbols[2], "d2");
}

TEST(NativeOpenShapes, ProbeBindingsShareSymbolsAndKeepInsideBounds) {
  lowering::OpenSignature sig;
  sig.inputs = {open_value("x", {-1, 3, -1}, {"n", "", ""}), open_value("m", {-1}, {"n"})};
  sig.inputs[0].dim_min = {0, 0, 1};
  sig.inputs[0].dim_max = {0, 0, 100};
  const auto probes = lowering::probe_bindings(sig);
  ASSERT_EQ(probes.size(), 2u);
  EXPECT_EQ(probes[0], (std::vector<Shape>{{96, 3, 96}, {96}}));
  EXPECT_EQ(probes[1], (std::vector<Shape>{{160, 3, 100}, {160}}));
  // A range that holds one probe value only: its ends.
  sig.inputs[0].dim_min = {0, 0, 2};
  sig.inputs[0].dim_max = {0, 0, 8};
  const auto narrow = lowering::probe_bindings(sig);
  EXPECT_EQ(narrow[0][0], (Shape{96, 3, 2}));
  EXPECT_EQ(narrow[1][0], (Shape{160, 3, 8}));
}
}  // namespace
}  // namespace loom::compiler::testing
