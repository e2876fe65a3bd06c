// Session::run allocates nothing on the heap: the session prepared it all.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "common/demo_program.hpp"
#include "loom/runtime.hpp"

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
  auto bytes = tools::build_mlp_program({}).value().write_buffer().value();
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
  auto bytes = tools::build_mlp_program({}).value().write_buffer().value();
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

}  // namespace
}  // namespace loom
