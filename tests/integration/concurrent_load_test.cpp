// Program loads through one Runtime from several threads at once: the same
// program and different ones, from memory and from files, while other
// threads run and drop what they loaded, and traces start and stop. The
// first loads also race to load the plugin itself (nothing enumerates
// devices before the threads start).
// Every run's result is checked. Labelled "tsan": ThreadSanitizer runs it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "program_builder/demo_program.hpp"
#include "fake_sum_program.hpp"
#include "loom/runtime.hpp"

namespace loom {
namespace {

namespace fs = std::filesystem;

Tensor filled(float start) {
  Tensor t = Tensor::zeros(DType::kF32, {2, 3}).value();
  for (int i = 0; i < 6; ++i) t.data_as<float>()[i] = start + static_cast<float>(i);
  return t;
}

bool write_file(const fs::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

// Runs `body(thread)` on `threads` threads and joins them.
template <typename F>
void on_threads(int threads, F body) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back([&body, t] { body(t); });
  for (auto& th : pool) th.join();
}

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Three different programs for the fake plugin (asynchronous, with memory of
// its own): the same delegate a + b behind different variant lists, one of
// which the plugin refuses first, so that load-time fallback runs too.
TEST(ConcurrentLoad, SameAndDifferentFakeProgramsFromEightThreads) {
  auto runtime = testing::fake_plugins_runtime({{"fake.async", "1"},
                                                {"fake.async_delay_ms", "1"},
                                                {"fake.separate_memory", "1"}});
  ASSERT_NE(runtime, nullptr);
  const std::vector<std::vector<std::byte>> programs = {
      testing::sum_program({{"fake", "fake:add"}}),
      testing::sum_program({{"fake", "fake:bogus"}, {"fake", "fake:add"}}),
      testing::sum_program({{"vulkan-compute", "spirv"}, {"fake", "fake:add"}}),
  };
  ScratchDir dir("loom_concurrent_load_fake");
  std::vector<fs::path> files;
  for (size_t i = 0; i < programs.size(); ++i) {
    files.push_back(dir.path() / ("sum" + std::to_string(i) + ".loom"));
    ASSERT_TRUE(write_file(files.back(), programs[i]));
  }

  // Meanwhile one more thread lists the devices and starts and stops traces,
  // so that runs record into a trace that may be replaced under them.
  constexpr int kThreads = 8, kRounds = 6;
  std::vector<std::string> errors(kThreads);
  std::vector<int> runs(kThreads, 0);
  std::atomic<int> finished{0};
  std::string observer_errors;
  std::thread observer([&] {
    while (finished.load() < kThreads) {
      auto trace = runtime->start_trace();
      if (runtime->devices().size() != 1) {
        observer_errors = "devices() does not list fake://0 alone";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      runtime->stop_trace();
      (void)trace->events();
    }
  });
  on_threads(kThreads, [&](int t) {
    for (int round = 0; round < kRounds; ++round) {
      // Thread t loads program (t + round) % 3: at any moment several threads
      // load the same program and others a different one.
      const size_t which = static_cast<size_t>(t + round) % programs.size();
      auto program = (t + round) % 2 == 0 ? runtime->load_program(programs[which])
                                          : runtime->load_program(files[which]);
      if (!program.ok()) {
        errors[t] += "load: " + program.status().to_string() + "\n";
        continue;
      }
      if ((*program)->placements().size() != 1 ||
          (*program)->placements()[0].device != "fake://0") {
        errors[t] += "placed elsewhere\n";
        continue;
      }
      auto session = (*program)->create_session("main");
      if (!session.ok()) {
        errors[t] += "session: " + session.status().to_string() + "\n";
        continue;
      }
      Tensor a = filled(static_cast<float>(100 * t + round)), b = filled(0.5f);
      Status st = (*session)->set_input("a", a);
      if (st.ok()) st = (*session)->set_input("b", b);
      if (st.ok()) st = (*session)->run();
      if (!st.ok()) {
        errors[t] += "run: " + st.to_string() + "\n";
        continue;
      }
      const float* y = (*session)->output(0).data_as<float>();
      for (int k = 0; k < 6; ++k) {
        if (y[k] != a.data_as<float>()[k] + b.data_as<float>()[k]) {
          errors[t] += "round " + std::to_string(round) + " element " + std::to_string(k) +
                       ": " + std::to_string(y[k]) + "\n";
        }
      }
      ++runs[t];
    }
    ++finished;
  });
  observer.join();
  EXPECT_EQ(observer_errors, "");
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
    EXPECT_EQ(runs[t], kRounds) << "thread " << t;
  }
}

// The demo MLP in three shapes on cpu-simd: four threads load them (the same
// bytes, and files) through one Runtime whose plugins nothing has listed yet,
// and every result matches the program's own reference function, computed
// beforehand on another Runtime.
TEST(ConcurrentLoad, DifferentCpuSimdProgramsMatchTheReferenceFromFourThreads) {
  const std::vector<tools::MlpShape> shapes = {{2, 16, 32, 4}, {4, 32, 64, 10}, {1, 8, 8, 3}};
  std::vector<std::vector<std::byte>> programs;
  std::vector<Tensor> inputs, expected;
  {
    auto reference_runtime = Runtime::create();
    ASSERT_TRUE(reference_runtime.ok()) << reference_runtime.status().to_string();
    for (size_t i = 0; i < shapes.size(); ++i) {
      auto writer = tools::build_mlp_program(**reference_runtime, shapes[i], 7 + i);
      ASSERT_TRUE(writer.ok()) << writer.status().to_string();
      programs.push_back(writer->write_buffer().value());
      inputs.push_back(tools::mlp_input(shapes[i], 20 + i));
      auto program = (*reference_runtime)->load_program(programs.back());
      ASSERT_TRUE(program.ok()) << program.status().to_string();
      NamedTensor in{"x", inputs.back()};
      auto out = (*program)->run("reference", {&in, 1});
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      expected.push_back((*out)[0].tensor);
    }
  }
  ScratchDir dir("loom_concurrent_load_cpu");
  std::vector<fs::path> files;
  for (size_t i = 0; i < programs.size(); ++i) {
    files.push_back(dir.path() / ("mlp" + std::to_string(i) + ".loom"));
    ASSERT_TRUE(write_file(files.back(), programs[i]));
  }

  auto runtime = Runtime::create();
  ASSERT_TRUE(runtime.ok()) << runtime.status().to_string();
  constexpr int kThreads = 4, kRounds = 4;
  std::vector<std::string> errors(kThreads);
  on_threads(kThreads, [&](int t) {
    for (int round = 0; round < kRounds; ++round) {
      const size_t which = static_cast<size_t>(t + round) % programs.size();
      auto program = round % 2 == 0 ? (*runtime)->load_program(programs[which], {"cpu-simd://0"})
                                    : (*runtime)->load_program(files[which], {"cpu-simd://0"});
      if (!program.ok()) {
        errors[t] += "load: " + program.status().to_string() + "\n";
        continue;
      }
      NamedTensor in{"x", inputs[which]};
      auto out = (*program)->run("main", {&in, 1});
      if (!out.ok()) {
        errors[t] += "run: " + out.status().to_string() + "\n";
        continue;
      }
      const Tensor& y = (*out)[0].tensor;
      if (y.shape() != expected[which].shape()) {
        errors[t] += "shape of program " + std::to_string(which) + "\n";
        continue;
      }
      float worst = 0;
      for (uint64_t k = 0; k < y.element_count(); ++k) {
        worst = std::max(worst, std::fabs(y.data_as<float>()[k] -
                                          expected[which].data_as<float>()[k]));
      }
      if (!(worst <= 1e-5f)) {
        errors[t] += "program " + std::to_string(which) + " differs by " +
                     std::to_string(worst) + "\n";
      }
    }
  });
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
}

}  // namespace
}  // namespace loom
