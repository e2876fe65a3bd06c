// Session::run allocates nothing on the heap: the session prepared it all.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "common/demo_program.hpp"
#include "loom/runtime.hpp"

namespace {
std::atomic<long> g_allocations{0};  // test-only counter for operator new
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

TEST(RunAllocation, DelegateRunAllocatesNothingInTheRuntime) {
  auto runtime = Runtime::create().value();
  auto bytes = tools::build_mlp_program({}).value().write_buffer().value();
  auto program = runtime->load_program(bytes, {"cpu-simd://0"});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto session = (*program)->create_session("main").value();
  ASSERT_TRUE(session->run().ok());
  long before = g_allocations.load();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(session->run().ok());
  EXPECT_EQ(g_allocations.load() - before, 0);
}

}  // namespace
}  // namespace loom
