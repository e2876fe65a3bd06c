// Run-time fallback (LoadOptions::fallback), against the fake plugin's lost
// and hung devices: the failing run names the delegate and device, or, with
// fallback on, the delegate moves to its next candidate, the run is retried
// once, every session follows, and the app sees the move.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "fake_sum_program.hpp"
#include "loom/conformance/time_scale.hpp"
#include "loom/runtime.hpp"

namespace loom {
namespace {

std::unique_ptr<Runtime> fake_runtime(std::vector<std::pair<std::string, std::string>> options) {
  return testing::fake_plugins_runtime(std::move(options));
}

std::shared_ptr<Program> load(Runtime& runtime, LoadOptions options = {}) {
  static const std::vector<std::byte> bytes = testing::sum_program({{"fake", "fake:add"}});
  auto program = runtime.load_program(bytes, options);
  EXPECT_TRUE(program.ok()) << program.status().to_string();
  return program.ok() ? *program : nullptr;
}

// Sets a = i + start, b = 10 and checks y = a + b after a successful run.
Status run_and_check(Session& session, float start) {
  Tensor a = Tensor::zeros(DType::kF32, {2, 3}).value(), b = a;
  for (int i = 0; i < 6; ++i) {
    a.data_as<float>()[i] = start + static_cast<float>(i);
    b.data_as<float>()[i] = 10.0f;
  }
  LOOM_RETURN_IF_ERROR(session.set_input(0, a));
  LOOM_RETURN_IF_ERROR(session.set_input(1, b));
  LOOM_RETURN_IF_ERROR(session.run());
  for (int i = 0; i < 6; ++i) {
    const float y = session.output(0).data_as<float>()[i];
    if (y != start + static_cast<float>(i) + 10.0f) {
      return internal_error("y[" + std::to_string(i) + "] = " + std::to_string(y));
    }
  }
  return Status();
}

TEST(Fallback, WithoutItALostDeviceFailsTheRunNamingDelegateAndDevice) {
  auto runtime = fake_runtime({{"fake.devices", "2"}, {"fake.lose", "0"}});
  auto program = load(*runtime);
  auto session = program->create_session().value();
  Status st = run_and_check(*session, 1);
  EXPECT_EQ(st.code(), StatusCode::kDeviceLost) << st.to_string();
  EXPECT_NE(st.message().find("delegate 'sum' on fake://0"), std::string::npos) << st.message();
  EXPECT_EQ(program->placements()[0].device, "fake://0");
  EXPECT_TRUE(program->fallbacks().empty());
}

TEST(Fallback, ALostDeviceMovesTheDelegateAndTheRunIsRetried) {
  auto runtime = fake_runtime({{"fake.devices", "2"}, {"fake.lose", "0"}});
  std::vector<FallbackEvent> seen;
  LoadOptions options;
  options.fallback = true;
  options.on_fallback = [&seen](const FallbackEvent& e) { seen.push_back(e); };
  auto program = load(*runtime, options);
  auto first = program->create_session().value();
  auto second = program->create_session().value();  // prepared for fake://0 too
  ASSERT_TRUE(run_and_check(*first, 1).ok());
  EXPECT_EQ(program->placements()[0].device, "fake://1");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].delegate, "sum");
  EXPECT_EQ(seen[0].from_device, "fake://0");
  EXPECT_EQ(seen[0].to_device, "fake://1");
  EXPECT_EQ(seen[0].reason.code(), StatusCode::kDeviceLost);
  ASSERT_EQ(program->fallbacks().size(), 1u);
  // Later runs, and the other session, use fake://1 without another move.
  ASSERT_TRUE(run_and_check(*first, 2).ok());
  ASSERT_TRUE(run_and_check(*second, 3).ok());
  auto third = program->create_session().value();
  ASSERT_TRUE(run_and_check(*third, 4).ok());
  EXPECT_EQ(seen.size(), 1u);
}

TEST(Fallback, AHungDeviceTimesOutAndMoves) {
  auto runtime = fake_runtime({{"fake.devices", "2"}, {"fake.async", "1"}, {"fake.hang", "0"}});
  LoadOptions options;
  options.fallback = true;
  auto program = load(*runtime, options);
  auto session = program->create_session().value();
  // The limit also bounds the retry on the healthy fake://1, real work: 1 s
  // (stretched on a sanitized build), which the hung device costs once.
  ASSERT_TRUE(session->set_run_timeout(conformance::scaled(std::chrono::milliseconds(1000))).ok());
  EXPECT_FALSE(session->set_run_timeout(std::chrono::milliseconds(-1)).ok());
  ASSERT_TRUE(run_and_check(*session, 1).ok());
  ASSERT_EQ(program->fallbacks().size(), 1u);
  EXPECT_EQ(program->fallbacks()[0].reason.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(program->placements()[0].device, "fake://1");
}

// A session on the fake plugin's async device 0 that never signals its
// fence (fake.hang), loaded with a run timeout of 100 ms.
struct HungDevice {
  std::unique_ptr<Runtime> runtime = fake_runtime({{"fake.async", "1"}, {"fake.hang", "0"}});
  std::shared_ptr<Program> program = load(*runtime, [] {
    LoadOptions options;
    options.run_timeout = std::chrono::milliseconds(100);
    return options;
  }());
  std::unique_ptr<Session> session = program->create_session().value();
};

// A plugin that advertises async and never signals its fence: run() gives
// up after the run timeout (finite by default) with DEADLINE_EXCEEDED naming
// the delegate, the device and the timeout, instead of waiting forever.
TEST(RunTimeout, ANeverSignalledFenceIsADeadlineNamingDeviceAndTimeout) {
  EXPECT_EQ(LoadOptions{}.run_timeout, std::chrono::seconds(60));
  HungDevice hung;
  const auto start = std::chrono::steady_clock::now();
  Status st = run_and_check(*hung.session, 1);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.to_string();
  EXPECT_NE(st.message().find("instruction 0: delegate 'sum' on fake://0: did not finish within the run timeout "
                              "of 100 ms"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("loom run --timeout"), std::string::npos) << st.message();
  EXPECT_LT(waited, std::chrono::seconds(10));
}

// A slow device, not a hung one: its execution goes on after the run timed
// out, reading the session's inputs and writing its output. The next run
// waits for it (within the run timeout) before using the operands and the
// fence again, and the session is destroyed only once the device is done
// with them (before the fix it freed them at once: a crash on lavapipe, a
// heap-use-after-free in the fake plugin's worker under ASan).
TEST(RunTimeout, ATimedOutExecutionIsWaitedForBeforeItsOperandsAreReusedOrFreed) {
  auto runtime = fake_runtime({{"fake.async", "1"}, {"fake.async_delay_ms", "800"}});
  LoadOptions options;
  options.run_timeout = std::chrono::milliseconds(300);
  auto program = load(*runtime, options);
  auto session = program->create_session().value();
  const auto start = std::chrono::steady_clock::now();
  Status first = run_and_check(*session, 1);
  EXPECT_EQ(first.code(), StatusCode::kDeadlineExceeded) << first.to_string();
  // At ~300 ms: the first execution runs until ~800 ms, past this run's wait.
  Status second = session->run();
  EXPECT_EQ(second.code(), StatusCode::kDeadlineExceeded) << second.to_string();
  EXPECT_NE(second.message().find("its execution of an earlier run (which timed out) is still "
                                  "running after another run timeout of 300 ms"),
            std::string::npos)
      << second.message();
  session.reset();  // at ~600 ms: waits for the execution (up to 300 ms)
  const auto destroyed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(destroyed, std::chrono::milliseconds(800));
  EXPECT_LT(destroyed, std::chrono::seconds(10));
}

// A hung device never finishes: destroying the session gives up after one
// more run timeout and keeps what the device may still use.
TEST(RunTimeout, DestroyingASessionOfAHungDeviceDoesNotHang) {
  HungDevice hung;
  EXPECT_EQ(run_and_check(*hung.session, 1).code(), StatusCode::kDeadlineExceeded);
  const auto start = std::chrono::steady_clock::now();
  hung.session.reset();
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(100));
  EXPECT_LT(waited, std::chrono::seconds(10));
}

TEST(Fallback, TheSelectorsOrderDecidesWhereTheDelegateGoes) {
  auto runtime = fake_runtime({{"fake.devices", "3"}, {"fake.lose", "2"}});
  LoadOptions options;
  options.fallback = true;
  options.device = "fake://2,fake://0";
  auto program = load(*runtime, options);
  ASSERT_TRUE(run_and_check(*program->create_session().value(), 1).ok());
  EXPECT_EQ(program->placements()[0].device, "fake://0");
}

TEST(Fallback, WithNoCandidateLeftTheRunFailsWithTheDevicesCode) {
  auto runtime = fake_runtime({{"fake.devices", "2"}, {"fake.lose", "0,1"}});
  LoadOptions options;
  options.fallback = true;
  auto program = load(*runtime, options);
  auto session = program->create_session().value();
  Status st = run_and_check(*session, 1);
  EXPECT_EQ(st.code(), StatusCode::kDeviceLost) << st.to_string();
  // Moved once to fake://1, which is lost too; the retry's error says so.
  EXPECT_NE(st.message().find("fake://1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("retried after"), std::string::npos) << st.message();
  st = run_and_check(*session, 2);
  EXPECT_NE(st.message().find("fallback: no other device can take delegate 'sum'"),
            std::string::npos) << st.message();
}

TEST(Fallback, SeparateMemoryDevicesKeepBoundInputs) {
  auto runtime = fake_runtime(
      {{"fake.devices", "2"}, {"fake.lose", "0"}, {"fake.separate_memory", "1"}});
  LoadOptions options;
  options.fallback = true;
  auto program = load(*runtime, options);
  auto session = program->create_session().value();
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b(6, 100);
  ASSERT_TRUE(session->bind_input(0, a.data(), a.size() * sizeof(float)).ok());
  ASSERT_TRUE(session->bind_input(1, b.data(), b.size() * sizeof(float)).ok());
  ASSERT_TRUE(session->run().ok());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(session->output(0).data_as<float>()[i], a[i] + 100);
  EXPECT_EQ(program->placements()[0].device, "fake://1");
}

TEST(Fallback, SessionsOnFourThreadsMoveOnce) {
  auto runtime = fake_runtime({{"fake.devices", "2"}, {"fake.lose", "0"}, {"fake.async", "1"}});
  std::atomic<int> events{0};
  LoadOptions options;
  options.fallback = true;
  options.on_fallback = [&events](const FallbackEvent&) { ++events; };
  auto program = load(*runtime, options);
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto session = program->create_session().value();
      for (int i = 0; i < 20; ++i) failures[t] += !run_and_check(*session, 10.0f * t + i).ok();
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
  EXPECT_EQ(events.load(), 1);
  EXPECT_EQ(program->placements()[0].device, "fake://1");
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// main(a, b) = delegate "sum"(a, b) with variants [fake "fake:add",
// loom.reference -> `reference_function`]; the program also has the function
// "sum.reference"(a, b) = Add(a, b), and "bad.shape"(a) = Relu(a).
std::vector<std::byte> program_with_reference(const std::string& reference_function) {
  tools::ProgramBuilder b("reference_variant");
  const std::string blob = "fake:add";
  uint32_t fake = b.add_artifact(
      "fake", 1, "sum.fake",
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(blob.data()), blob.size()));
  uint32_t reference = b.add_artifact(
      std::string(kReferenceLoaderKey), 1, "sum.reference",
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(reference_function.data()),
                                 reference_function.size()));
  uint32_t d = b.add_delegate("sum", {fake, reference});
  {
    tools::FunctionBuilder f = b.add_function("main");
    uint32_t a = f.input("a", DType::kF32, {2, 3});
    uint32_t x = f.input("b", DType::kF32, {2, 3});
    uint32_t y = f.value("y", DType::kF32, {2, 3});
    f.delegate_call(d, {a, x}, {y});
    f.output(y);
  }
  {
    tools::FunctionBuilder f = b.add_function("sum.reference");
    uint32_t a = f.input("a", DType::kF32, {2, 3});
    uint32_t x = f.input("b", DType::kF32, {2, 3});
    uint32_t y = f.value("y", DType::kF32, {2, 3});
    f.kernel_call("Add", {a, x}, {y});
    f.output(y);
  }
  {
    tools::FunctionBuilder f = b.add_function("bad.type");
    uint32_t a = f.input("a", DType::kF32, {2, 3});
    f.input("b", DType::kF32, {3, 2});
    uint32_t y = f.value("y", DType::kF32, {2, 3});
    f.kernel_call("Relu", {a}, {y});
    f.output(y);
  }
  {
    tools::FunctionBuilder f = b.add_function("bad.shape");
    uint32_t a = f.input("a", DType::kF32, {3, 2});
    uint32_t y = f.value("y", DType::kF32, {3, 2});
    f.kernel_call("Relu", {a}, {y});
    f.output(y);
  }
  return b.finish().value().write_buffer().value();
}

TEST(ReferenceVariant, RunsWhenNoDeviceCanLoadTheDelegate) {
  auto runtime = fake_runtime({{"fake.fail_load", "0"}});
  auto bytes = program_with_reference("sum.reference");
  auto program = runtime->load_program(bytes).value();
  EXPECT_EQ(program->placements()[0].device, "reference");
  EXPECT_EQ(program->placements()[0].loader_key, kReferenceLoaderKey);
  const auto& c = program->explain().delegates[0].candidates;
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].outcome, PlacementCandidate::Outcome::kRefused);
  EXPECT_EQ(c[1].outcome, PlacementCandidate::Outcome::kChosen);
  auto session = program->create_session("main").value();
  ASSERT_TRUE(run_and_check(*session, 3).ok());
  // bind_input reaches the reference function's operands too.
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b(6, 0.5f);
  ASSERT_TRUE(session->bind_input(0, a.data(), 24).ok());
  ASSERT_TRUE(session->bind_input(1, b.data(), 24).ok());
  ASSERT_TRUE(session->run().ok());
  EXPECT_FLOAT_EQ(session->output(0).data_as<float>()[5], 6.5f);
}

TEST(ReferenceVariant, IsWhereALostDeviceFallsBackTo) {
  auto runtime = fake_runtime({{"fake.lose", "0"}});
  LoadOptions options;
  options.fallback = true;
  auto bytes = program_with_reference("sum.reference");
  auto program = runtime->load_program(bytes, options).value();
  EXPECT_EQ(program->placements()[0].device, "fake://0");
  auto session = program->create_session("main").value();
  ASSERT_TRUE(run_and_check(*session, 1).ok());
  EXPECT_EQ(program->placements()[0].device, "reference");
  ASSERT_EQ(program->fallbacks().size(), 1u);
  EXPECT_EQ(program->fallbacks()[0].to_device, "reference");
  ASSERT_TRUE(run_and_check(*session, 2).ok());
}

// A runtime over the fake plugin run in a process of its own.
std::unique_ptr<Runtime> isolated_fake_runtime(std::vector<std::pair<std::string, std::string>> options) {
  RuntimeOptions o;
  o.plugin_paths = {std::filesystem::path(LOOM_TEST_PLUGIN_DIR) / "fake"};
  o.use_environment = false;
  o.use_default_folder = false;
  o.use_user_folder = false;
  o.plugin_options = std::move(options);
  o.isolated_plugins = {"fake"};
  auto runtime = Runtime::create(o);
  EXPECT_TRUE(runtime.ok()) << runtime.status().to_string();
  return runtime.ok() ? std::move(*runtime) : nullptr;
}

TEST(IsolatedPluginRun, ASessionRunsThroughTheIsolatedPlugin) {
  auto runtime = isolated_fake_runtime({{"fake.separate_memory", "1"}});
  const auto bytes = program_with_reference("sum.reference");  // the program borrows it
  auto program = runtime->load_program(bytes).value();
  EXPECT_EQ(program->placements()[0].device, "fake://0");
  auto session = program->create_session("main").value();
  ASSERT_TRUE(run_and_check(*session, 1).ok());
  ASSERT_TRUE(run_and_check(*session, 7).ok());
  EXPECT_TRUE(runtime->plugins()[0].isolated);
}

TEST(IsolatedPluginRun, ACrashInThePluginIsALostDeviceAndTheAppLivesOn) {
  auto runtime = isolated_fake_runtime({{"fake.misbehave", "execute_segv"}});
  const auto bytes = program_with_reference("sum.reference");  // the program borrows it
  auto program = runtime->load_program(bytes).value();
  auto session = program->create_session("main").value();
  Status st = run_and_check(*session, 1);
  EXPECT_EQ(st.code(), StatusCode::kDeviceLost) << st.to_string();
  EXPECT_NE(st.message().find("delegate 'sum' on fake://0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("SIGSEGV"), std::string::npos) << st.message();
}

TEST(IsolatedPluginRun, WithFallbackTheProgramMovesOffTheCrashedPlugin) {
  auto runtime = isolated_fake_runtime({{"fake.misbehave", "execute_segv"}});
  LoadOptions options;
  options.fallback = true;
  const auto bytes = program_with_reference("sum.reference");
  auto program = runtime->load_program(bytes, options).value();
  EXPECT_EQ(program->placements()[0].device, "fake://0");
  auto session = program->create_session("main").value();
  ASSERT_TRUE(run_and_check(*session, 1).ok());
  EXPECT_EQ(program->placements()[0].device, "reference");
  ASSERT_EQ(program->fallbacks().size(), 1u);
  EXPECT_NE(program->fallbacks()[0].reason.message().find("SIGSEGV"), std::string::npos);
  ASSERT_TRUE(run_and_check(*session, 2).ok());
}

TEST(ReferenceVariant, BadReferenceVariantsAreRefusedWithTheReason) {
  auto runtime = fake_runtime({{"fake.fail_load", "0"}});
  struct Case {
    std::string function;
    std::string expected;
  };
  for (const Case& bad :
       {Case{"nope", "names function 'nope', which the program does not have"},
        Case{"main", "calls delegates"},
        // A signature that does not fit the call is refused at load, not
        // when a session is made.
        Case{"bad.shape", "the reference function 'bad.shape' does not match the call in function "
                          "'main' (it takes 1 inputs, the call passes 2)"},
        Case{"bad.type", "does not match the call in function 'main' (input 'b' is f32[3, 2], "
                         "the call's is f32[2, 3])"}}) {
    auto bytes = program_with_reference(bad.function);
    auto program = runtime->load_program(bytes);
    ASSERT_FALSE(program.ok()) << bad.function;
    EXPECT_NE(program.status().message().find(bad.expected), std::string::npos)
        << program.status().message();
    EXPECT_NE(program.status().message().find("out of memory"), std::string::npos)
        << program.status().message();
  }
}

}  // namespace
}  // namespace loom
