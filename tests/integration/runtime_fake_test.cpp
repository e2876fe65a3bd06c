// The runtime against the fake plugin of tests/support: the device kinds the
// shipped plugins do not cover (separate device memory, asynchronous
// completion, failing execution) and placement over several variants.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

#include "common/program_builder.hpp"
#include "loom/plugin.h"
#include "loom/runtime.hpp"

namespace loom {
namespace {

std::span<const std::byte> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// main(a, b) = delegate "sum"(a, b); the delegate's variants are given as
// (loader key, blob) pairs, preferred first.
std::vector<std::byte> sum_program(
    const std::vector<std::pair<std::string, std::string>>& variants) {
  tools::ProgramBuilder b("runtime_fake_test");
  std::vector<uint32_t> arts;
  for (const auto& [key, blob] : variants) {
    arts.push_back(b.add_artifact(key, 1, "sum." + key, as_bytes(blob)));
  }
  uint32_t d = b.add_delegate("sum", arts);
  tools::FunctionBuilder f = b.add_function("main");
  uint32_t a = f.input("a", DType::kF32, {2, 3});
  uint32_t x = f.input("b", DType::kF32, {2, 3});
  uint32_t y = f.value("y", DType::kF32, {2, 3});
  f.delegate_call(d, {a, x}, {y});
  f.output(y);
  auto writer = b.finish();
  EXPECT_TRUE(writer.ok()) << writer.status().to_string();
  return writer->write_buffer().value();
}

Tensor filled(float start) {
  Tensor t = Tensor::zeros(DType::kF32, {2, 3}).value();
  for (int i = 0; i < 6; ++i) t.data_as<float>()[i] = start + static_cast<float>(i);
  return t;
}

std::unique_ptr<Runtime> fake_runtime(
    std::vector<std::pair<std::string, std::string>> options = {}) {
  RuntimeOptions o;
  o.plugin_paths = {std::filesystem::path(LOOM_TEST_PLUGIN_DIR) / "fake"};
  o.use_environment = false;
  o.use_default_folder = false;
  o.plugin_options = std::move(options);
  auto runtime = Runtime::create(o);
  EXPECT_TRUE(runtime.ok()) << runtime.status().to_string();
  return std::move(*runtime);
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

}  // namespace
}  // namespace loom
