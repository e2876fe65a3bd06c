// The compile pipeline on hand-built graphs against the fake plugin: target
// lookup, the compile entries' checks, emission, and programs that load and
// run with loom::Runtime.
#include "lowering/driver.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "graph_test_util.hpp"
#include "host/compile_entries.hpp"
#include "host/plugin_host.hpp"
#include "loom/runtime.hpp"

namespace loom::lowering {
namespace {

using test::add_constant;
using test::add_input;
using test::binary;
using test::unary;

std::unique_ptr<Runtime> make_runtime(std::vector<std::pair<std::string, std::string>> options = {}) {
  RuntimeOptions o;
  o.plugin_paths = {std::filesystem::path(LOOM_TEST_PLUGIN_DIR) / "fake",
                    std::filesystem::path(LOOM_TEST_PLUGIN_DIR) / "fake_large"};
  o.use_environment = false;
  o.use_default_folder = false;
  o.use_user_folder = false;
  o.plugin_options = std::move(options);
  auto runtime = Runtime::create(o);
  EXPECT_TRUE(runtime.ok()) << runtime.status().message();
  return runtime.ok() ? std::move(*runtime) : nullptr;
}

Tensor f32(Shape shape, std::vector<float> values) {
  auto t = Tensor::copy_of(DType::kF32, std::move(shape),
                           std::as_bytes(std::span<const float>(values.data(), values.size())));
  EXPECT_TRUE(t.ok());
  return std::move(*t);
}

std::vector<float> values_of(const Tensor& t) {
  const float* p = t.data_as<float>();
  return std::vector<float>(p, p + t.byte_size() / sizeof(float));
}

// s = Add(x, y); r = Relu(s); out: r
graph::Graph add_relu() {
  graph::Graph g;
  g.name = "add_relu";
  int32_t x = add_input(g, "x", {4});
  int32_t y = add_input(g, "y", {4});
  int32_t s = binary(g, "Add", x, y, "s");
  int32_t r = unary(g, "Relu", s, "r");
  g.outputs = {r};
  return g;
}

Result<std::vector<NamedTensor>> run_buffer(Runtime& runtime, std::span<const std::byte> program,
                                            std::vector<NamedTensor> inputs) {
  LOOM_ASSIGN_OR_RETURN(auto loaded, runtime.load_program(program));
  return loaded->run("main", inputs);
}

TEST(Targets, UnknownNameListsThePluginsFound) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto t = load_targets(runtime->plugin_host(), {"nope"});
  ASSERT_FALSE(t.ok());
  const std::string m(t.status().message());
  EXPECT_NE(m.find("'nope'"), std::string::npos) << m;
  EXPECT_NE(m.find("fake"), std::string::npos) << m;
  EXPECT_NE(m.find("fake_large"), std::string::npos) << m;
}

TEST(Targets, PluginWithoutCompileEntriesIsAnError) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto t = load_targets(runtime->plugin_host(), {"fake_large"});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no compile entries"), std::string::npos) << t.status().message();
  auto twice = load_targets(runtime->plugin_host(), {"fake", "fake"});
  EXPECT_FALSE(twice.ok());
  auto ok = load_targets(runtime->plugin_host(), {"fake"});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->size(), 1u);
}

TEST(Driver, ReferenceOnlyProgramRuns) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto result = compile_graph(add_relu(), {}, EmitOptions{});
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->reference_nodes, 2u);
  EXPECT_EQ(result->reference_op_types, (std::vector<std::string>{"Add", "Relu"}));
  auto bytes = result->program.writer.write_buffer();
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  auto out = run_buffer(*runtime, *bytes, {{"x", f32({4}, {1, -2, 3, -4})}, {"y", f32({4}, {1, 1, -5, 1})}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name, "r");
  EXPECT_EQ(values_of((*out)[0].tensor), (std::vector<float>{2, 0, 0, 0}));
}

TEST(Driver, AddGoesToThePluginAndTheProgramRuns) {
  auto runtime = make_runtime({{"fake.compile_ops", "Add"}});
  ASSERT_NE(runtime, nullptr);
  auto targets = load_targets(runtime->plugin_host(), {"fake"});
  ASSERT_TRUE(targets.ok()) << targets.status().message();
  std::vector<std::string> stages;
  auto result = compile_graph(add_relu(), *targets, EmitOptions{},
                              [&](std::string_view s, double f) {
                                EXPECT_GE(f, 0.0);
                                EXPECT_LE(f, 1.0);
                                stages.emplace_back(s);
                              });
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_FALSE(stages.empty());
  ASSERT_EQ(result->targets.size(), 1u);
  const TargetReport& t = result->targets[0];
  EXPECT_EQ(t.plugin, "fake");
  EXPECT_EQ(t.loader_key, "fake");
  EXPECT_EQ(t.subgraphs, 1u);
  EXPECT_EQ(t.nodes, 1u);
  EXPECT_EQ(t.op_types, (std::vector<std::string>{"Add"}));
  EXPECT_EQ(t.blob_bytes, 8u);  // "fake:add"
  EXPECT_EQ(result->reference_nodes, 1u);
  const ProgramDef& program = result->program.writer.program();
  ASSERT_EQ(program.artifacts.size(), 1u);
  EXPECT_EQ(program.artifacts[0].loader_key, "fake");
  ASSERT_EQ(program.functions.size(), 1u);
  EXPECT_EQ(program.functions[0].instructions[0].op, OpCode::kDelegateCall);
  EXPECT_EQ(program.functions[0].instructions[1].op, OpCode::kKernelCall);
  auto bytes = result->program.writer.write_buffer();
  ASSERT_TRUE(bytes.ok());
  auto out = run_buffer(*runtime, *bytes, {{"x", f32({4}, {1, -2, 3, -4})}, {"y", f32({4}, {1, 1, -5, 1})}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(values_of((*out)[0].tensor), (std::vector<float>{2, 0, 0, 0}));
}

TEST(Driver, PluginClaimingNothingLeavesAllToTheReference) {
  auto runtime = make_runtime({{"fake.compile_ops", "Softmax"}});
  ASSERT_NE(runtime, nullptr);
  auto targets = load_targets(runtime->plugin_host(), {"fake"});
  ASSERT_TRUE(targets.ok());
  auto result = compile_graph(add_relu(), *targets, EmitOptions{});
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->targets[0].subgraphs, 0u);
  EXPECT_EQ(result->reference_nodes, 2u);
  EXPECT_TRUE(result->program.writer.program().artifacts.empty());
}

TEST(Driver, PluginTakingAllMakesOneDelegate) {
  auto runtime = make_runtime({{"fake.compile_ops", "Add,Relu"}});
  ASSERT_NE(runtime, nullptr);
  auto targets = load_targets(runtime->plugin_host(), {"fake"});
  ASSERT_TRUE(targets.ok());
  auto result = compile_graph(add_relu(), *targets, EmitOptions{});
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->targets[0].subgraphs, 1u);
  EXPECT_EQ(result->targets[0].nodes, 2u);
  EXPECT_EQ(result->reference_nodes, 0u);
  const FunctionDef& f = result->program.writer.program().functions[0];
  ASSERT_EQ(f.instructions.size(), 1u);
  // The intermediate s never reaches the program.
  EXPECT_EQ(f.instructions[0].inputs.size(), 2u);
  EXPECT_EQ(f.instructions[0].outputs.size(), 1u);
}

TEST(Driver, CompileFaultsAreCaughtAndNameThePlugin) {
  for (const char* fault : {"fail", "null_blob", "bad_key", "bad_version", "new_blob"}) {
    auto runtime = make_runtime({{"fake.compile_ops", "Add"}, {"fake.compile_fault", fault}});
    ASSERT_NE(runtime, nullptr);
    auto targets = load_targets(runtime->plugin_host(), {"fake"});
    ASSERT_TRUE(targets.ok());
    auto result = compile_graph(add_relu(), *targets, EmitOptions{});
    ASSERT_FALSE(result.ok()) << fault;
    const std::string m(result.status().message());
    EXPECT_NE(m.find("plugin 'fake'"), std::string::npos) << m;
    EXPECT_NE(m.find("fake_0"), std::string::npos) << m;  // the subgraph
    if (std::string(fault) == "new_blob") {
      EXPECT_NE(m.find("not allocated with the host's allocate service"), std::string::npos) << m;
    }
  }
}

TEST(CompileEntries, SupportedRejectsAWrongNodeCount) {
  auto runtime = make_runtime({{"fake.compile_ops", "Add"}});
  ASSERT_NE(runtime, nullptr);
  auto plugin = runtime->plugin_host().load("fake");
  ASSERT_TRUE(plugin.ok());
  auto bytes = graph::encode_graph(add_relu());
  ASSERT_TRUE(bytes.ok());
  auto ok = host::compile_supported(**plugin, *bytes, 2);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, (std::vector<bool>{true, false}));
  auto bad = host::compile_supported(**plugin, *bytes, 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("plugin 'fake'"), std::string::npos);
  std::vector<std::byte> junk(40, std::byte{1});
  EXPECT_FALSE(host::compile_supported(**plugin, junk, 2).ok());
  EXPECT_FALSE(host::compile(**plugin, junk).ok());
  auto large = runtime->plugin_host().load("fake_large");
  ASSERT_TRUE(large.ok());
  EXPECT_FALSE(host::has_compile_entries(**large));
  auto none = host::compile(**large, *bytes);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
}

// Constants (inline and large), an input that is also a result, a constant
// result and a result listed twice: each result gets its own value.
graph::Graph with_constants() {
  graph::Graph g;
  int32_t x = add_input(g, "x", {32, 64});
  int32_t w = add_constant<float>(g, "W", {32, 64}, DType::kF32, std::vector<float>(32 * 64, 1.5f));
  int32_t b = add_constant<float>(g, "b", {1}, DType::kF32, {-2.f});
  int32_t a = binary(g, "Add", x, w, "a");
  int32_t c = binary(g, "Add", a, b, "c");
  int32_t r = unary(g, "Relu", c, "r");
  g.outputs = {r, x, b, r};
  return g;
}

void expect_with_constants_results(const std::vector<NamedTensor>& out) {
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].name, "r");
  EXPECT_EQ(out[1].name, "x");
  EXPECT_EQ(out[2].name, "b");
  std::vector<float> r = values_of(out[0].tensor);
  ASSERT_EQ(r.size(), 32u * 64u);
  EXPECT_FLOAT_EQ(r[0], 0.5f);  // 1 + 1.5 - 2
  EXPECT_FLOAT_EQ(r[1], 0.0f);  // -1 + 1.5 - 2 < 0
  EXPECT_FLOAT_EQ(values_of(out[1].tensor)[1], -1.f);
  EXPECT_EQ(values_of(out[2].tensor), (std::vector<float>{-2.f}));
  EXPECT_EQ(values_of(out[3].tensor), r);
}

std::vector<float> x_values() {
  std::vector<float> x(32 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 2 == 0 ? 1.f : -1.f;
  return x;
}

TEST(Driver, ConstantsAndCopiedResults) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto result = compile_graph(with_constants(), {}, EmitOptions{});
  ASSERT_TRUE(result.ok()) << result.status().message();
  const ProgramDef& program = result->program.writer.program();
  EXPECT_EQ(program.parameters.size(), 2u);
  const FunctionDef& f = program.functions[0];
  EXPECT_EQ(f.outputs.size(), 4u);
  EXPECT_NE(f.outputs[0], f.outputs[3]);
  EXPECT_NE(f.reflection.find("\"names\""), std::string::npos);
  auto bytes = result->program.writer.write_buffer();
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  auto out = run_buffer(*runtime, *bytes, {{"x", f32({32, 64}, x_values())}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  expect_with_constants_results(*out);
}

TEST(Driver, WeightsInAnArchiveBesideTheProgram) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  const auto dir = std::filesystem::temp_directory_path() / ("loom_driver_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "w");
  EmitOptions emit;
  emit.archive_path = "w/weights.irpa";
  emit.params_scope = "net";
  auto result = compile_graph(with_constants(), {}, emit);
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_NE(result->program.archive, nullptr);
  EXPECT_EQ(result->program.params_bytes, 32u * 64u * 4u + 4u);
  for (const ParameterDef& p : result->program.writer.program().parameters) {
    EXPECT_EQ(p.archive, "w/weights.irpa");
    EXPECT_EQ(p.scope, "net");
    EXPECT_EQ(p.segment, -1);
  }
  Status st = result->program.archive->write_file(dir / "w" / "weights.irpa");
  ASSERT_TRUE(st.ok()) << st.message();
  st = result->program.writer.write_file(dir / "p.loom");
  ASSERT_TRUE(st.ok()) << st.message();
  auto loaded = runtime->load_program(dir / "p.loom");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  std::vector<NamedTensor> inputs{{"x", f32({32, 64}, x_values())}};
  auto out = (*loaded)->run("main", inputs);
  ASSERT_TRUE(out.ok()) << out.status().message();
  expect_with_constants_results(*out);
  std::filesystem::remove_all(dir);
}

TEST(Driver, LargeWeightsReachTheDelegateAsParameterInputs) {
  auto runtime = make_runtime({{"fake.compile_ops", "Add"}});
  ASSERT_NE(runtime, nullptr);
  auto targets = load_targets(runtime->plugin_host(), {"fake"});
  ASSERT_TRUE(targets.ok());
  graph::Graph g;
  int32_t x = add_input(g, "x", {32, 64});
  int32_t w = add_constant<float>(g, "W", {32, 64}, DType::kF32, std::vector<float>(32 * 64, 1.5f));
  int32_t a = binary(g, "Add", x, w, "a");
  g.outputs = {a};
  auto result = compile_graph(g, *targets, EmitOptions{});
  ASSERT_TRUE(result.ok()) << result.status().message();
  const ProgramDef& program = result->program.writer.program();
  ASSERT_EQ(program.parameters.size(), 1u);
  EXPECT_EQ(program.parameters[0].name, "W");
  const InstructionDef& call = program.functions[0].instructions.at(0);
  ASSERT_EQ(call.op, OpCode::kDelegateCall);
  ASSERT_EQ(call.inputs.size(), 2u);
  EXPECT_EQ(program.functions[0].values[call.inputs[1]].parameter, 0);
  auto bytes = result->program.writer.write_buffer();
  ASSERT_TRUE(bytes.ok());
  auto out = run_buffer(*runtime, *bytes, {{"x", f32({32, 64}, x_values())}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  std::vector<float> r = values_of((*out)[0].tensor);
  EXPECT_FLOAT_EQ(r[0], 2.5f);
  EXPECT_FLOAT_EQ(r[1], 0.5f);
}

TEST(Emit, MemoryPlanReusesSlotsOfDeadValues) {
  graph::Graph g;
  int32_t x = add_input(g, "x", {16});
  int32_t a = unary(g, "Relu", x, "a");
  int32_t b = unary(g, "Relu", a, "b");
  int32_t c = unary(g, "Relu", b, "c");
  int32_t d = unary(g, "Relu", c, "d");
  int32_t e = unary(g, "Relu", d, "e");
  g.outputs = {e};
  auto result = compile_graph(g, {}, EmitOptions{});
  ASSERT_TRUE(result.ok());
  const MemoryPlanDef& plan = result->program.writer.program().functions[0].memory_plan;
  EXPECT_EQ(plan.slots.size(), 4u);    // a-d; x and e have their own storage
  EXPECT_EQ(plan.alignment, 256u);    // slots fit an imported arena (see function_layout.cpp)
  EXPECT_EQ(plan.arena_size, 512u);   // two 256-byte slots, alternating
  for (const MemorySlotDef& s : plan.slots) EXPECT_EQ(s.offset % plan.alignment, 0u);
}

}  // namespace
}  // namespace loom::lowering
