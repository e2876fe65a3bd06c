// The runtime against the fake plugin of tests/support: the device kinds the
// shipped plugins do not cover (separate device memory, asynchronous
// completion, failing execution) and placement over several variants.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "program_builder/program_builder.hpp"
#include "fake_sum_program.hpp"
#include "loom/conformance/time_scale.hpp"
#include "loom/plugin.h"
#include "loom/runtime.hpp"

namespace loom {
namespace {

using testing::sum_program;

Tensor filled(float start) {
  Tensor t = Tensor::zeros(DType::kF32, {2, 3}).value();
  for (int i = 0; i < 6; ++i) t.data_as<float>()[i] = start + static_cast<float>(i);
  return t;
}

// The fake plugins' blob for a + b.
std::span<const std::byte> add_blob() {
  static constexpr char kAdd[] = "fake:add";
  return {reinterpret_cast<const std::byte*>(kAdd), sizeof kAdd - 1};
}

std::unique_ptr<Runtime> fake_runtime(
    std::vector<std::pair<std::string, std::string>> options = {}) {
  return testing::fake_plugins_runtime(std::move(options));
}

// Runs main(a, b) and checks y == a + b.
void expect_sum_runs(Runtime& runtime, const LoadOptions& load = {}) {
  auto bytes = sum_program({{"fake", "fake:add"}});
  auto program = runtime.load_program(bytes, load);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto session = (*program)->create_session("main");
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  for (int round = 0; round < 3; ++round) {
    Tensor a = filled(static_cast<float>(round)), b = filled(10);
    ASSERT_TRUE((*session)->set_input("a", a).ok());
    ASSERT_TRUE((*session)->set_input("b", b).ok());
    Status st = (*session)->run();
    ASSERT_TRUE(st.ok()) << st.to_string();
    const Tensor& y = (*session)->output(0);
    for (int i = 0; i < 6; ++i) {
      EXPECT_FLOAT_EQ(y.data_as<float>()[i], a.data_as<float>()[i] + b.data_as<float>()[i])
          << "round " << round << " element " << i;
    }
  }
}

TEST(RuntimeFake, HostPointerDeviceRunsDelegate) {
  auto runtime = fake_runtime();
  expect_sum_runs(*runtime, {"fake://0"});
}

TEST(RuntimeFake, SeparateMemoryDeviceIsStagedInAndOut) {
  auto runtime = fake_runtime({{"fake.separate_memory", "1"}});
  auto devices = runtime->devices();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].capabilities & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE, 0u);
  expect_sum_runs(*runtime);
}

TEST(RuntimeFake, AsyncDeviceIsWaitedFor) {
  auto runtime = fake_runtime({{"fake.async", "1"}, {"fake.async_delay_ms", "20"}});
  auto devices = runtime->devices();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_NE(devices[0].capabilities & LOOM_DEVICE_CAP_ASYNC, 0u);
  expect_sum_runs(*runtime);
}

TEST(RuntimeFake, AsyncSeparateMemoryFromFourThreads) {
  auto runtime = fake_runtime({{"fake.async", "1"},
                               {"fake.async_delay_ms", "1"},
                               {"fake.separate_memory", "1"}});
  auto bytes = sum_program({{"fake", "fake:add"}});
  auto program = runtime->load_program(bytes);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  std::vector<int> wrong(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto session = (*program)->create_session("main").value();
      Tensor a = filled(100.0f * t), b = filled(1);
      for (int i = 0; i < 25; ++i) {
        if (!session->set_input(0, a).ok() || !session->set_input(1, b).ok() ||
            !session->run().ok()) {
          ++wrong[t];
          continue;
        }
        const float* y = session->output(0).data_as<float>();
        for (int k = 0; k < 6; ++k) {
          if (y[k] != a.data_as<float>()[k] + b.data_as<float>()[k]) ++wrong[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
}

TEST(RuntimeFake, FailingExecutionNamesDelegateAndDevice) {
  for (bool async : {false, true}) {
    auto runtime = fake_runtime({{"fake.fail_execute", "1"}, {"fake.async", async ? "1" : "0"}});
    auto bytes = sum_program({{"fake", "fake:add"}});
    auto program = runtime->load_program(bytes);
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    auto session = (*program)->create_session().value();
    Status st = session->run();
    ASSERT_FALSE(st.ok()) << "async=" << async;
    EXPECT_NE(st.message().find("delegate 'sum'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("fake://0"), std::string::npos) << st.message();
  }
}

TEST(RuntimeFake, FirstLoadableVariantIsChosen) {
  auto runtime = fake_runtime();
  // No plugin serves "vulkan-compute", and the fake refuses the first fake
  // blob: the third variant is the one that runs.
  auto bytes = sum_program({{"vulkan-compute", "spirv"}, {"fake", "fake:bogus"},
                            {"fake", "fake:add"}});
  auto program = runtime->load_program(bytes);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  ASSERT_EQ((*program)->placements().size(), 1u);
  EXPECT_EQ((*program)->placements()[0].loader_key, "fake");
  EXPECT_EQ((*program)->placements()[0].device, "fake://0");
  Tensor a = filled(1), b = filled(2);
  NamedTensor in[] = {{"a", a}, {"b", b}};
  auto out = (*program)->run("main", in);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_FLOAT_EQ((*out)[0].tensor.data_as<float>()[5], 6.0f + 7.0f);
}

TEST(RuntimeFake, NoLoadableVariantGivesEveryReason) {
  auto runtime = fake_runtime();
  auto bytes = sum_program({{"vulkan-compute", "spirv"}, {"fake", "fake:bogus"}});
  auto program = runtime->load_program(bytes);
  ASSERT_FALSE(program.ok());
  const std::string m = program.status().message();
  EXPECT_NE(m.find("delegate 'sum'"), std::string::npos) << m;
  EXPECT_NE(m.find("vulkan-compute"), std::string::npos) << m;
  EXPECT_NE(m.find("fake (plugin fake)"), std::string::npos) << m;  // what is available
  EXPECT_NE(m.find("unknown fake blob"), std::string::npos) << m;
}

TEST(RuntimeFake, SeveralDevicesAreListedAndSelectable) {
  auto runtime = fake_runtime({{"fake.devices", "3"}});
  auto devices = runtime->devices();
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_EQ(devices[2].uri, "fake://2");
  expect_sum_runs(*runtime, {"fake://2"});
  auto bytes = sum_program({{"fake", "fake:add"}});
  auto program = runtime->load_program(bytes, {"fake://2"}).value();
  EXPECT_EQ(program->placements()[0].device, "fake://2");
  auto missing = runtime->load_program(bytes, {"fake://3"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("fake://2"), std::string::npos)
      << missing.status().message();
}

TEST(RuntimeFake, TraceHasRunsDelegatesAndCopiesNestedInTheirRun) {
  auto runtime = fake_runtime({{"fake.separate_memory", "1"}});
  auto bytes = sum_program({{"fake", "fake:add"}});
  auto program = runtime->load_program(bytes).value();
  auto session = program->create_session("main").value();
  ASSERT_TRUE(session->run().ok());  // before tracing: not recorded
  auto trace = runtime->start_trace();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(session->run().ok());
  runtime->stop_trace();
  ASSERT_TRUE(session->run().ok());  // after: not recorded either
  std::vector<Trace::Event> runs, inner;
  for (const Trace::Event& e : trace->events()) {
    (e.category == "run" ? runs : inner).push_back(e);
  }
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].track, "host");
  EXPECT_EQ(runs[0].name, "main");
  // Per run: inputs staged in, the delegate, the output read back, all on the
  // device's track and inside their run's span.
  ASSERT_EQ(inner.size(), 9u);
  for (size_t i = 0; i < inner.size(); ++i) {
    const Trace::Event& e = inner[i];
    const Trace::Event& run = runs[i / 3];
    EXPECT_EQ(e.track, "fake://0");
    EXPECT_GE(e.timestamp_ns, run.timestamp_ns) << i;
    EXPECT_LE(e.timestamp_ns + e.duration_ns, run.timestamp_ns + run.duration_ns) << i;
  }
  EXPECT_EQ(inner[0].name, "to device: sum");
  EXPECT_EQ(inner[1].category, "delegate");
  EXPECT_EQ(inner[1].name, "sum");
  EXPECT_EQ(inner[2].name, "from device: sum");
  const auto profile = trace->profile();
  ASSERT_EQ(profile.size(), 3u);
  for (const auto& row : profile) {
    EXPECT_EQ(row.calls, 3u);
    EXPECT_GT(row.share, 0.0);
    EXPECT_LE(row.share, 1.0);
  }
}

// main(a, b) = (s1(a, b), s2(a, b)): two delegates that do not depend on each
// other, s1 for plugin "fake", s2 for plugin "fake_large" (each with its own
// worker thread), both asynchronous with a delay of D (500 ms, stretched by
// $LOOM_TIME_SCALE on a sanitized build).
TEST(RuntimeFake, IndependentDelegatesOnTwoDevicesOverlap) {
  const double delay_ms = static_cast<double>(conformance::scaled(std::chrono::milliseconds(500)).count());
  RuntimeOptions o;
  o.plugin_paths = {std::filesystem::path(LOOM_TEST_PLUGIN_DIR) / "fake",
                    std::filesystem::path(LOOM_TEST_PLUGIN_DIR) / "fake_large"};
  o.use_environment = false;
  o.use_default_folder = false;
  o.use_user_folder = false;
  o.plugin_options = {{"fake.async", "1"},
                      {"fake.async_delay_ms", std::to_string(static_cast<int>(delay_ms))}};
  auto runtime = Runtime::create(o).value();
  tools::ProgramBuilder b("overlap");
  const std::span<const std::byte> bytes = add_blob();
  uint32_t d1 = b.add_delegate("s1", {b.add_artifact("fake", 1, "s1", bytes)});
  uint32_t d2 = b.add_delegate("s2", {b.add_artifact("fake_large", 1, "s2", bytes)});
  tools::FunctionBuilder f = b.add_function("main");
  uint32_t a = f.input("a", DType::kF32, {2, 3});
  uint32_t x = f.input("b", DType::kF32, {2, 3});
  uint32_t y1 = f.value("y1", DType::kF32, {2, 3});
  uint32_t y2 = f.value("y2", DType::kF32, {2, 3});
  f.delegate_call(d1, {a, x}, {y1});
  f.delegate_call(d2, {a, x}, {y2});
  f.output(y1);
  f.output(y2);
  auto file = b.finish().value().write_buffer().value();
  auto program = runtime->load_program(file).value();
  ASSERT_EQ(program->placements()[0].device, "fake://0");
  ASSERT_EQ(program->placements()[1].device, "fake_large://0");
  auto session = program->create_session().value();
  ASSERT_TRUE(session->set_input(0, filled(1)).ok());
  ASSERT_TRUE(session->set_input(1, filled(10)).ok());
  auto trace = runtime->start_trace();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(session->run().ok());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                              start).count();
  runtime->stop_trace();
  for (size_t k = 0; k < 2; ++k) {
    for (int i = 0; i < 6; ++i) {
      EXPECT_FLOAT_EQ(session->output(k).data_as<float>()[i], 11.0f + 2.0f * i) << k << " " << i;
    }
  }
  // One after the other would take at least 2 D: anything less overlapped,
  // however slow the machine (the run's own work then has D to spare).
  EXPECT_GE(ms, delay_ms);
  EXPECT_LT(ms, 2 * delay_ms) << "the two delegates did not overlap";
  std::vector<Trace::Event> spans;
  for (const auto& e : trace->events()) {
    if (e.category == "delegate") spans.push_back(e);
  }
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_LT(spans[0].timestamp_ns, spans[1].timestamp_ns + spans[1].duration_ns);
  EXPECT_LT(spans[1].timestamp_ns, spans[0].timestamp_ns + spans[0].duration_ns);
}

// A step that reads an asynchronous delegate's result waits for it.
TEST(RuntimeFake, AStepReadingAnAsyncResultWaitsForIt) {
  auto runtime = fake_runtime({{"fake.async", "1"}, {"fake.async_delay_ms", "30"}});
  tools::ProgramBuilder b("chain");
  const std::span<const std::byte> bytes = add_blob();
  uint32_t d = b.add_delegate("s", {b.add_artifact("fake", 1, "s", bytes)});
  tools::FunctionBuilder f = b.add_function("main");
  uint32_t a = f.input("a", DType::kF32, {2, 3});
  uint32_t x = f.input("b", DType::kF32, {2, 3});
  uint32_t y = f.value("y", DType::kF32, {2, 3});
  uint32_t z = f.value("z", DType::kF32, {2, 3});
  f.delegate_call(d, {a, x}, {y});
  f.kernel_call("Relu", {y}, {z});
  f.output(z);
  auto file = b.finish().value().write_buffer().value();
  auto program = runtime->load_program(file).value();
  Tensor in_a = filled(-3), in_b = filled(0);
  NamedTensor in[] = {{"a", in_a}, {"b", in_b}};
  auto out = program->run("main", in);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  for (int i = 0; i < 6; ++i) {
    EXPECT_FLOAT_EQ((*out)[0].tensor.data_as<float>()[i], std::max(0.0f, -3.0f + 2.0f * i)) << i;
  }
}

// main(a, b) = Relu(s2(s1(a, b), s1(a, b))) with s1, s2 "fake:add" delegates
// on the fake device, so y = s1(..) and z = s2(..) live in the arena.
std::vector<std::byte> two_delegate_chain() {
  tools::ProgramBuilder b("chain2");
  const std::span<const std::byte> bytes = add_blob();
  uint32_t d1 = b.add_delegate("s1", {b.add_artifact("fake", 1, "s1", bytes)});
  uint32_t d2 = b.add_delegate("s2", {b.add_artifact("fake", 1, "s2", bytes)});
  tools::FunctionBuilder f = b.add_function("main");
  uint32_t a = f.input("a", DType::kF32, {2, 3});
  uint32_t x = f.input("b", DType::kF32, {2, 3});
  uint32_t y = f.value("y", DType::kF32, {2, 3});
  uint32_t z = f.value("z", DType::kF32, {2, 3});
  uint32_t w = f.value("w", DType::kF32, {2, 3});
  f.delegate_call(d1, {a, x}, {y});
  f.delegate_call(d2, {y, y}, {z});
  f.kernel_call("Relu", {z}, {w});
  f.output(w);
  return b.finish().value().write_buffer().value();
}

void expect_chain_runs(Session& session) {
  for (float start : {-4.0f, 1.0f}) {
    ASSERT_TRUE(session.set_input(0, filled(start)).ok());
    ASSERT_TRUE(session.set_input(1, filled(0)).ok());
    Status st = session.run();
    ASSERT_TRUE(st.ok()) << st.to_string();
    for (int i = 0; i < 6; ++i) {
      const float sum = start + i + static_cast<float>(i);
      EXPECT_FLOAT_EQ(session.output(0).data_as<float>()[i], std::max(0.0f, 2 * sum)) << i;
    }
  }
}

// A device with its own memory that imports host memory gets the session's
// arena once, as one buffer: values between delegates are not copied; only
// the function's inputs are staged.
TEST(RuntimeFake, ValuesBetweenDelegatesUseTheImportedArena) {
  auto runtime = fake_runtime(
      {{"fake.separate_memory", "1"}, {"fake.import", "1"}, {"fake.kinds", "cpu"}});
  auto program = runtime->load_program(two_delegate_chain()).value();
  auto session = program->create_session().value();
  expect_chain_runs(*session);
  auto t = session->transfers();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].delegate, "s1");
  EXPECT_EQ(t[0].device, "fake://0");
  EXPECT_EQ(t[0].staged_in, 2u);  // a and b, the function's inputs
  EXPECT_EQ(t[0].imported, 1u);   // y
  EXPECT_EQ(t[0].staged_out, 0u);
  EXPECT_EQ(t[1].imported, 3u);   // y twice, z
  EXPECT_EQ(t[1].staged_in + t[1].staged_out + t[1].host_pointers, 0u);
}

// A device whose memory is not the host's (the fake's "virtual" device with
// memory of its own, as a discrete GPU) is not handed the arena, though it
// can import: its kernels would read it over the bus.
TEST(RuntimeFake, ADeviceWithMemoryOfItsOwnStagesThoughItCanImport) {
  auto runtime = fake_runtime({{"fake.separate_memory", "1"}, {"fake.import", "1"}});
  auto program = runtime->load_program(two_delegate_chain()).value();
  auto session = program->create_session().value();
  expect_chain_runs(*session);
  auto t = session->transfers();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].imported + t[1].imported, 0u);
  EXPECT_EQ(t[1].staged_in, 2u);
}

TEST(RuntimeFake, WithoutImportEveryOperandIsStaged) {
  auto runtime = fake_runtime({{"fake.separate_memory", "1"}});
  auto program = runtime->load_program(two_delegate_chain()).value();
  auto session = program->create_session().value();
  expect_chain_runs(*session);
  auto t = session->transfers();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].staged_in, 2u);
  EXPECT_EQ(t[0].staged_out, 1u);
  EXPECT_EQ(t[1].staged_in, 2u);
  EXPECT_EQ(t[1].staged_out, 1u);
  EXPECT_EQ(t[0].imported + t[1].imported, 0u);
  // A device executing on host pointers needs neither.
  auto host = fake_runtime({{"fake.import", "1"}});
  auto on_host = host->load_program(two_delegate_chain()).value()->create_session().value();
  expect_chain_runs(*on_host);
  EXPECT_EQ(on_host->transfers()[1].host_pointers, 3u);
  EXPECT_EQ(on_host->transfers()[1].imported, 0u);
}

// A session makes its fence once and the plugin (speaking ABI 1.1) re-arms
// it on every run: with room for only two fences, many runs still work.
TEST(RuntimeFake, AsyncRunsReuseTheSessionsFence) {
  auto runtime = fake_runtime({{"fake.async", "1"}, {"fake.max_fences", "2"}});
  auto bytes = sum_program({{"fake", "fake:add"}});
  auto program = runtime->load_program(bytes).value();
  auto session = program->create_session().value();
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(session->set_input(0, filled(static_cast<float>(round))).ok());
    ASSERT_TRUE(session->set_input(1, filled(1)).ok());
    Status st = session->run();
    ASSERT_TRUE(st.ok()) << "run " << round << ": " << st.to_string();
    EXPECT_FLOAT_EQ(session->output(0).data_as<float>()[5], round + 5.0f + 6.0f);
  }
  // A failed execution leaves the fence reusable: the next run re-arms it.
  auto failing = fake_runtime({{"fake.async", "1"}, {"fake.max_fences", "1"}, {"fake.lose", "0"}});
  auto lost = failing->load_program(bytes).value()->create_session().value();
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(lost->run().code(), StatusCode::kDeviceLost) << round;
  }
}

// A plugin speaking only ABI 1.0 (fake_large) gets a new fence per run, so a
// cap of two fences stops the third run.
TEST(RuntimeFake, AOneZeroPluginGetsAFencePerRun) {
  auto runtime = testing::fake_plugins_runtime(
      {{"fake.async", "1"}, {"fake.max_fences", "2"}}, {"fake_large"});
  auto bytes = sum_program({{"fake_large", "fake:add"}});
  auto program = runtime->load_program(bytes).value();
  auto session = program->create_session().value();
  EXPECT_TRUE(session->run().ok());
  EXPECT_TRUE(session->run().ok());
  Status third = session->run();
  EXPECT_EQ(third.code(), StatusCode::kResourceExhausted) << third.to_string();
  EXPECT_NE(third.message().find("fake.max_fences=2"), std::string::npos) << third.message();
}

TEST(RuntimeFake, RunAsyncReturnsAtOnceAndItsHandleWaits) {
  // The worker holds executions until two are queued: in the first round a
  // second session's run is the latch this test releases, so "not yet
  // done" is certain however slow the machine.
  auto runtime = fake_runtime({{"fake.async", "1"}, {"fake.async_hold", "2"}});
  auto bytes = sum_program({{"fake", "fake:add"}});
  auto program = runtime->load_program(bytes).value();
  auto session = program->create_session().value();
  auto latch = program->create_session().value();
  EXPECT_FALSE(RunHandle().wait().ok());
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(session->set_input(0, filled(static_cast<float>(round))).ok());
    ASSERT_TRUE(session->set_input(1, filled(10)).ok());
    auto handle = session->run_async();
    ASSERT_TRUE(handle.ok()) << handle.status().to_string();
    if (round == 0) {
      // Held, so in flight: a second run is refused, a short wait times
      // out, and the handle is not done. (The second round reuses the
      // session and is no longer held.)
      EXPECT_EQ(session->run().code(), StatusCode::kFailedPrecondition);
      EXPECT_EQ(session->run_async().status().code(), StatusCode::kFailedPrecondition);
      EXPECT_EQ(handle->wait(std::chrono::milliseconds(1)).code(), StatusCode::kDeadlineExceeded);
      EXPECT_FALSE(handle->done());
      ASSERT_TRUE(latch->set_input(0, filled(0)).ok());
      ASSERT_TRUE(latch->set_input(1, filled(0)).ok());
      auto released = latch->run_async();
      ASSERT_TRUE(released.ok()) << released.status().to_string();
      ASSERT_TRUE(released->wait().ok());
    }
    Status st = handle->wait();
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_TRUE(handle->done());
    EXPECT_FLOAT_EQ(session->output(0).data_as<float>()[5], round + 5.0f + 15.0f);
  }
  // A plain run works again once the handle is waited for.
  EXPECT_TRUE(session->run().ok());
}

TEST(RuntimeFake, RunAsyncReportsTheRunsError) {
  auto runtime = fake_runtime({{"fake.async", "1"}, {"fake.fail_execute", "1"}});
  auto bytes = sum_program({{"fake", "fake:add"}});
  auto program = runtime->load_program(bytes).value();
  auto session = program->create_session().value();
  auto handle = session->run_async().value();
  Status st = handle.wait();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("delegate 'sum' on fake://0"), std::string::npos) << st.message();
}

TEST(RuntimeFake, SessionsRunAsyncConcurrentlyAndAreDestroyedInFlight) {
  auto runtime = fake_runtime({{"fake.async", "1"}, {"fake.async_delay_ms", "20"}});
  auto bytes = sum_program({{"fake", "fake:add"}});
  auto program = runtime->load_program(bytes).value();
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<RunHandle> handles;
  for (int i = 0; i < 4; ++i) {
    sessions.push_back(program->create_session().value());
    ASSERT_TRUE(sessions.back()->set_input(0, filled(100.0f * i)).ok());
    handles.push_back(sessions.back()->run_async().value());
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(handles[i].wait().ok());
    EXPECT_FLOAT_EQ(sessions[i]->output(0).data_as<float>()[1], 100.0f * i + 1.0f);
  }
  sessions.back().reset();  // its run may still be going: the destructor waits for it
  EXPECT_TRUE(handles.back().done());
}

TEST(RuntimeFake, ReferenceKernelsAreTracedOnTheHost) {
  auto runtime = fake_runtime();
  tools::ProgramBuilder b("trace_kernels");
  tools::FunctionBuilder f = b.add_function("main");
  uint32_t a = f.input("a", DType::kF32, {2, 3});
  uint32_t y = f.value("y", DType::kF32, {2, 3});
  f.kernel_call("Relu", {a}, {y});
  f.output(y);
  auto bytes = b.finish().value().write_buffer().value();
  auto program = runtime->load_program(bytes).value();
  auto trace = runtime->start_trace();
  Tensor x = filled(-2);
  NamedTensor in[] = {{"a", x}};
  ASSERT_TRUE(program->run("main", in).ok());
  runtime->stop_trace();
  const auto events = trace->events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].category, "kernel");
  EXPECT_EQ(events[0].name, "Relu");
  EXPECT_EQ(events[0].track, "host");
  EXPECT_EQ(events[1].category, "run");
}

// RuntimeOptions::use_user_folder reaches the host: the per-user folder
// ($XDG_DATA_HOME/loom/plugins) is searched, last, and reported.
TEST(RuntimeFake, UserFolderIsSearchedAndReported) {
  namespace fs = std::filesystem;
  const fs::path data = fs::temp_directory_path() / ("loom-user-folder-" + std::to_string(::getpid()));
  const fs::path user = data / "loom" / "plugins";
  fs::remove_all(data);
  fs::create_directories(user);
  for (const auto& file : fs::directory_iterator(fs::path(LOOM_TEST_PLUGIN_DIR) / "fake")) {
    fs::copy_file(file.path(), user / file.path().filename());
  }
  const char* old = std::getenv("XDG_DATA_HOME");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("XDG_DATA_HOME", data.c_str(), 1);
  for (bool on : {true, false}) {
    RuntimeOptions o;
    o.use_environment = false;
    o.use_default_folder = false;
    o.use_user_folder = on;
    auto runtime = Runtime::create(o);
    ASSERT_TRUE(runtime.ok()) << runtime.status().to_string();
    const auto folders = (*runtime)->plugin_folders();
    const auto devices = (*runtime)->devices();
    if (on) {
      ASSERT_EQ(folders.size(), 1u);
      EXPECT_EQ(folders[0].path, user);
      EXPECT_EQ(folders[0].origin, "user");
      EXPECT_TRUE(folders[0].exists);
      ASSERT_EQ(devices.size(), 1u);
      EXPECT_EQ(devices[0].plugin, "fake");
    } else {
      EXPECT_TRUE(folders.empty());
      EXPECT_TRUE(devices.empty());
    }
  }
  if (old != nullptr) {
    ::setenv("XDG_DATA_HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("XDG_DATA_HOME");
  }
  fs::remove_all(data);
}

}  // namespace
}  // namespace loom
