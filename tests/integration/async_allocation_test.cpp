// Steady-state runs on an asynchronous device with memory of its own
// (vulkan-compute: staged inputs and outputs, a fence per call) allocate
// nothing: the session made every buffer, staging plan and fence (ABI 1.1
// re-arms it) when it was created, and a run without a trace builds no
// strings. A program of its own because it replaces the global operator new.
// Counted: every heap allocation in the process during the runs, the
// plugin's included. (fpga-stub is left out: its simulated command queue
// builds its commands per execution.)
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>

#include "loom/compiler.hpp"
#include "loom/runtime.hpp"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace loom {
namespace {

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
  auto report = compiler::compile_onnx_file(*runtime, path, out, options);
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

TEST(AsyncAllocation, VulkanComputeRunsAllocateNothing) {
  const long n = allocations_per_run("test_relu", "vulkan-compute", "vulkan-compute://0");
  if (n == -1) GTEST_SKIP() << "no vulkan-compute://0 device (no Vulkan driver?)";
  EXPECT_EQ(n, 0) << "allocations per run (runtime and plugin)";
}

}  // namespace
}  // namespace loom
