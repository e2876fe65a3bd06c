// compile_onnx_file from several threads at once, each on a Runtime of its
// own (loom/compiler.hpp: separate calls may run concurrently on separate
// Runtimes): ONNX node tests from Debian's libonnx-testdata, compiled for
// cpu-simd or for the reference kernels, the same model on two threads at a
// time; each program is then loaded and run, and its result checked against
// the operator's definition. Labelled "tsan": ThreadSanitizer runs it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "loom/compiler.hpp"
#include "loom/runtime.hpp"

namespace loom {
namespace {

namespace fs = std::filesystem;

const fs::path kNodeTests = "/usr/share/libonnx-testdata/data/node";

struct Model {
  std::string test;  // folder under kNodeTests
  std::function<float(float, float)> op;  // y from x (and the second input, if any)
};

// Deterministic values in [-2, 2) with both signs.
Tensor input_for(const ArgumentInfo& arg, int seed) {
  Tensor t = Tensor::zeros(arg.dtype, arg.shape).value();
  float* p = t.data_as<float>();
  for (uint64_t i = 0; i < t.element_count(); ++i) {
    const uint64_t k = (i * 7 + static_cast<uint64_t>(seed) * 13) % 16;
    p[i] = static_cast<float>(static_cast<int>(k) - 8) / 4.0f;
  }
  return t;
}

// Compiles `model` for `targets` on a fresh Runtime, loads the program, runs
// it and checks every element. Returns what went wrong, empty if nothing.
std::string compile_and_check(const Model& model, const std::vector<std::string>& targets,
                              const fs::path& out, int seed) {
  auto runtime = Runtime::create();
  if (!runtime.ok()) return "runtime: " + runtime.status().to_string();
  compiler::CompileOptions options;
  options.targets = targets;
  auto report = compiler::compile_onnx_file((*runtime)->plugin_host(), kNodeTests / model.test / "model.onnx",
                                            out, options);
  if (!report.ok()) return "compile: " + report.status().to_string();
  if (!targets.empty() && report->targets.size() != 1) return "no target report";
  auto program = (*runtime)->load_program(out);
  if (!program.ok()) return "load: " + program.status().to_string();
  const std::vector<FunctionInfo> functions = (*program)->functions();
  if (functions.size() != 1) return "expected one function";
  const FunctionInfo* function = &functions[0];
  std::vector<NamedTensor> inputs;
  for (size_t i = 0; i < function->inputs.size(); ++i) {
    if (function->inputs[i].dtype != DType::kF32) return "input not f32";
    inputs.push_back({function->inputs[i].name,
                      input_for(function->inputs[i], seed + static_cast<int>(i))});
  }
  auto outputs = (*program)->run(function->name, inputs);
  if (!outputs.ok()) return "run: " + outputs.status().to_string();
  if (outputs->size() != 1) return "expected one output";
  const Tensor& y = (*outputs)[0].tensor;
  const Tensor& x = inputs[0].tensor;
  if (y.element_count() != x.element_count()) return "output size";
  for (uint64_t k = 0; k < y.element_count(); ++k) {
    const float a = x.data_as<float>()[k];
    const float b = inputs.size() > 1 ? inputs[1].tensor.data_as<float>()[k] : 0.0f;
    const float want = model.op(a, b);
    if (!(std::fabs(y.data_as<float>()[k] - want) <= 1e-5f)) {
      return model.test + " element " + std::to_string(k) + ": " +
             std::to_string(y.data_as<float>()[k]) + ", expected " + std::to_string(want);
    }
  }
  return "";
}

TEST(ConcurrentCompile, SixThreadsEachWithARuntimeCompileAndRunCorrectPrograms) {
  std::error_code ec;
  if (!fs::is_directory(kNodeTests, ec)) {
    const char* required = std::getenv("LOOM_REQUIRE_ALL_SUITES");
    if (required && std::strcmp(required, "1") == 0) {
      FAIL() << kNodeTests << " is missing (libonnx-testdata; scripts/setup.sh installs it)";
    }
    GTEST_SKIP() << kNodeTests << " is missing: libonnx-testdata is not installed";
  }
  const std::vector<Model> models = {
      {"test_relu", [](float x, float) { return x > 0 ? x : 0.0f; }},
      {"test_add", [](float x, float y) { return x + y; }},
      {"test_sigmoid", [](float x, float) { return 1.0f / (1.0f + std::exp(-x)); }},
      {"test_neg", [](float x, float) { return -x; }},
  };
  const fs::path dir =
      fs::temp_directory_path() / ("loom_concurrent_compile_" + std::to_string(::getpid()));
  fs::create_directories(dir);

  // Threads 2k and 2k+1 compile the same model at the same time, one for
  // cpu-simd and one for the reference kernels.
  constexpr int kThreads = 6, kRounds = 2;
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        const Model& model = models[static_cast<size_t>(t / 2 + round) % models.size()];
        const std::vector<std::string> targets =
            t % 2 == 0 ? std::vector<std::string>{"cpu-simd"} : std::vector<std::string>{};
        const fs::path out =
            dir / (model.test + "_t" + std::to_string(t) + "_r" + std::to_string(round) + ".loom");
        const std::string error = compile_and_check(model, targets, out, t + round);
        if (!error.empty()) errors[t] += error + "\n";
      }
    });
  }
  for (auto& th : threads) th.join();
  fs::remove_all(dir, ec);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
}

}  // namespace
}  // namespace loom
