// Session::run allocates nothing on the heap: the session prepared it all.
// Counted: every heap allocation in the process during the runs, the
// plugin's included.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <new>

#include "program_builder/demo_program.hpp"
#include "loom/runtime.hpp"
#if LOOM_TEST_HAVE_COMPILER
#include "loom/compiler.hpp"
#include "onnx_fixtures.hpp"
#endif

namespace {
std::atomic<long> g_allocations{0};  // test-only counter for operator new
std::atomic<size_t> g_largest{0};    // largest size asked for since the last reset
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  size_t seen = g_largest.load(std::memory_order_relaxed);
  while (size > seen && !g_largest.compare_exchange_weak(seen, size)) {
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace loom {
namespace {

// With cpu-simd's plain kernels (cpu.onednn=0), nothing at all is allocated:
// neither the runtime nor the plugin.
TEST(RunAllocation, DelegateRunAllocatesNothingInTheRuntime) {
  RuntimeOptions options;
  options.plugin_options = {{"cpu.onednn", "0"}};
  auto runtime = Runtime::create(options).value();
  auto bytes = tools::build_mlp_program(*runtime, {}).value().write_buffer().value();
  auto program = runtime->load_program(bytes, {"cpu-simd://0"});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto session = (*program)->create_session("main").value();
  ASSERT_TRUE(session->run().ok());
  long before = g_allocations.load();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(session->run().ok());
  EXPECT_EQ(g_allocations.load() - before, 0);
}

// With oneDNN (the default), each oneDNN primitive call builds a small
// argument map inside oneDNN (a handful of nodes of a few dozen bytes); the
// runtime and cpu-simd still allocate no buffers. The demo MLP runs two
// fused MatMul+Add+Relu steps.
TEST(RunAllocation, OneDnnStepsAllocateOnlyTheirSmallArgumentMaps) {
  auto runtime = Runtime::create().value();
  auto bytes = tools::build_mlp_program(*runtime, {}).value().write_buffer().value();
  auto program = runtime->load_program(bytes, {"cpu-simd://0"});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto session = (*program)->create_session("main").value();
  ASSERT_TRUE(session->run().ok());
  long before = g_allocations.load();
  g_largest = 0;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(session->run().ok());
  const long per_run = (g_allocations.load() - before) / 100;
  EXPECT_LE(per_run, 2 * 10) << "allocations per run";
  EXPECT_LE(g_largest.load(), 256u) << "largest allocation during the runs";
}

#if LOOM_TEST_HAVE_COMPILER
// On an asynchronous device with memory of its own (vulkan-compute: staged
// inputs and outputs, a fence per call) a run allocates nothing either: the
// session made every buffer, staging plan and fence (ABI 1.1 re-arms it), and
// a run without a trace builds no strings. (fpga-stub is left out: its
// simulated command queue builds its commands per execution.)
namespace fs = std::filesystem;

// Allocations per run of ONNX node test `model` compiled for `plugin` and
// placed on `device`, after a warm-up; -1 (and a skip) without the device.
long allocations_per_run(const std::string& model, const std::string& plugin,
                         const std::string& device) {
  const fs::path path = fs::path("/usr/share/libonnx-testdata/data/node") / model / "model.onnx";
  auto runtime = Runtime::create().value();
  bool present = false;
  for (const DeviceInfo& d : runtime->devices()) present |= d.uri == device;
  if (!present) return -1;
  const fs::path out = fs::path(::testing::TempDir()) / (model + "-" + plugin + ".loom");
  compiler::CompileOptions options;
  options.targets = {plugin};
  auto report = compiler::compile_onnx_file(runtime->plugin_host(), path, out, options);
  EXPECT_TRUE(report.ok()) << report.status().to_string();
  if (!report.ok()) return -2;
  LoadOptions load;
  load.device = device;
  auto program = runtime->load_program(out, load);
  EXPECT_TRUE(program.ok()) << program.status().to_string();
  if (!program.ok()) return -2;
  EXPECT_EQ((*program)->placements().at(0).device, device);
  auto session = (*program)->create_session().value();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(session->run().ok());
  const long before = g_allocations.load();
  constexpr int kRuns = 100;
  for (int i = 0; i < kRuns; ++i) EXPECT_TRUE(session->run().ok());
  return (g_allocations.load() - before) / kRuns;
}

// A quantized convolution on cpu-simd's channels-last loop (u8 weights with
// a zero point, so the zero-point sums over x are needed, and x a graph
// input in plain layout): after a warm-up a run allocates only oneDNN's
// small per-call objects, none of the step's per-position sums, per-channel
// corrections or bias copies (1 KB and 512 B here, made every run before).
TEST(RunAllocation, QuantizedConvolutionRunsKeepTheirBuffers) {
  namespace fx = testing::onnx_fixtures;
  using TP = ::onnx::TensorProto;
  constexpr int64_t kC = 16, kM = 64, kHw = 12;
  auto m = fx::empty_model();
  auto* graph = m.mutable_graph();
  auto value = [](::onnx::ValueInfoProto* v, const char* name, int32_t type, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  value(graph->add_input(), "x", TP::UINT8, {1, kC, kHw, kHw});
  value(graph->add_output(), "y", TP::UINT8, {1, kM, kHw, kHw});
  std::vector<uint8_t> w(static_cast<size_t>(kM * kC * 9)), zeros = {128}, w_zero = {120}, y_zero = {100};
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>((i * 37) % 256);
  std::vector<int32_t> bias(static_cast<size_t>(kM));
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<int32_t>(i * 101 % 2000) - 1000;
  const std::vector<float> x_scale = {0.02f}, w_scale = {0.003f}, y_scale = {0.4f};
  fx::set_raw(fx::add_initializer(m, "x_scale", TP::FLOAT, {}), fx::bytes_of(x_scale));
  fx::set_raw(fx::add_initializer(m, "x_zero", TP::UINT8, {}), fx::bytes_of(zeros));
  fx::set_raw(fx::add_initializer(m, "w", TP::UINT8, {kM, kC, 3, 3}), fx::bytes_of(w));
  fx::set_raw(fx::add_initializer(m, "w_scale", TP::FLOAT, {}), fx::bytes_of(w_scale));
  fx::set_raw(fx::add_initializer(m, "w_zero", TP::UINT8, {}), fx::bytes_of(w_zero));
  fx::set_raw(fx::add_initializer(m, "y_scale", TP::FLOAT, {}), fx::bytes_of(y_scale));
  fx::set_raw(fx::add_initializer(m, "y_zero", TP::UINT8, {}), fx::bytes_of(y_zero));
  fx::set_raw(fx::add_initializer(m, "bias", TP::INT32, {kM}), fx::bytes_of(bias));
  auto* node = graph->add_node();
  node->set_op_type("QLinearConv");
  node->set_name("qconv");
  for (const char* in : {"x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero", "bias"}) {
    node->add_input(in);
  }
  node->add_output("y");
  auto* pads = node->add_attribute();
  pads->set_name("pads");
  pads->set_type(::onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  const fs::path model = fs::path(::testing::TempDir()) / "qconv_alloc.onnx";
  ASSERT_TRUE(fx::write_model(m, model).ok());

  auto runtime = Runtime::create().value();
  const fs::path out = fs::path(::testing::TempDir()) / "qconv_alloc.loom";
  compiler::CompileOptions options;
  options.targets = {"cpu-simd"};
  auto report = compiler::compile_onnx_file(runtime->plugin_host(), model, out, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->reference_nodes, 0u);
  auto program = runtime->load_program(out, {"cpu-simd://0"});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto session = (*program)->create_session().value();
  Tensor x = Tensor::zeros(DType::kU8, {1, kC, kHw, kHw}).value();
  for (uint64_t i = 0; i < x.element_count(); ++i) x.data_as<uint8_t>()[i] = static_cast<uint8_t>(i * 13 % 256);
  ASSERT_TRUE(session->set_input(0, x).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(session->run().ok());
  const long before = g_allocations.load();
  g_largest = 0;
  constexpr int kRuns = 100;
  for (int i = 0; i < kRuns; ++i) ASSERT_TRUE(session->run().ok());
  const long per_run = (g_allocations.load() - before) / kRuns;
  std::cout << per_run << " allocations per run, the largest " << g_largest.load() << " bytes\n";
  EXPECT_LE(g_largest.load(), 400u) << "largest allocation during the runs";
}

// An open-shape program alternating between two bindings: after each has
// run once (specialized, its session made), switching costs no allocation:
// set_input copies into buffers that only grow, the binding is found among
// the session's, and its own session runs. cpu-simd's plain kernels, as in
// the first test, so that the plugin allocates nothing either.
TEST(RunAllocation, AlternatingOpenShapesAllocateNothing) {
  RuntimeOptions options;
  options.plugin_options = {{"cpu.onednn", "0"}};
  auto runtime = Runtime::create(options).value();
  const fs::path model = fs::path("/usr/share/libonnx-testdata/data/node/test_relu/model.onnx");
  const fs::path out = fs::path(::testing::TempDir()) / "open_relu.loom";
  compiler::CompileOptions compile;
  compile.targets = {"cpu-simd"};
  compile.input_shapes = {{"x", {-1, -1, -1}}};
  auto report = compiler::compile_onnx_file(runtime->plugin_host(), model, out, compile);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  auto program = runtime->load_program(out, {"cpu-simd://0"});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  ASSERT_TRUE((*program)->function("main").value().open);
  auto session = (*program)->create_session().value();
  const Tensor a = Tensor::zeros(DType::kF32, {3, 4, 5}).value();
  const Tensor b = Tensor::zeros(DType::kF32, {2, 7, 5}).value();
  for (const Tensor* t : {&a, &b, &a, &b}) {
    ASSERT_TRUE(session->set_input(0, *t).ok());
    ASSERT_TRUE(session->run().ok());
    ASSERT_EQ(session->output(0).shape(), t->shape());
  }
  const long before = g_allocations.load();
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(session->set_input(0, i % 2 ? a : b).ok());
    ASSERT_TRUE(session->run().ok());
  }
  EXPECT_EQ(g_allocations.load() - before, 0);
}

TEST(AsyncAllocation, VulkanComputeRunsAllocateNothing) {
  const long n = allocations_per_run("test_relu", "vulkan-compute", "vulkan-compute://0");
  if (n == -1) GTEST_SKIP() << "no vulkan-compute://0 device (no Vulkan driver?)";
  EXPECT_EQ(n, 0) << "allocations per run (runtime and plugin)";
}

#endif

}  // namespace
}  // namespace loom
