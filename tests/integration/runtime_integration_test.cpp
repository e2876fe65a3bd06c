// End to end: write a program, read it back, run it on cpu-simd and on the
// reference kernels, from one and from several threads.
#include <atomic>
#include <gtest/gtest.h>

#include <cstring>

#include <cmath>
#include <filesystem>
#include <span>
#include <thread>

#include "program_builder/demo_program.hpp"
#include "program_builder/program_builder.hpp"
#include "loom/runtime.hpp"

namespace loom {
namespace {

class RuntimeIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    auto runtime = Runtime::create();
    ASSERT_TRUE(runtime.ok()) << runtime.status().to_string();
    runtime_ = std::move(*runtime);
    bool has_cpu = false;
    for (const auto& d : runtime_->devices()) has_cpu |= d.uri == "cpu-simd://0";
    ASSERT_TRUE(has_cpu) << "cpu-simd plugin not found in the build tree";
    dir_ = std::filesystem::temp_directory_path() /
           ("loom_integration_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Tensor reference_output(const tools::MlpShape& shape, const Tensor& x) {
    auto writer = tools::build_mlp_program(*runtime_, shape, 7, false);
    EXPECT_TRUE(writer.ok());
    ref_bytes_ = writer->write_buffer().value();
    auto program = runtime_->load_program(ref_bytes_);
    EXPECT_TRUE(program.ok()) << program.status().to_string();
    NamedTensor in{"x", x};
    auto out = (*program)->run("reference", {&in, 1});
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return (*out)[0].tensor;
  }

  std::unique_ptr<Runtime> runtime_;
  std::filesystem::path dir_;
  std::vector<std::byte> ref_bytes_;
};

float max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  float worst = 0;
  for (uint64_t i = 0; i < a.element_count(); ++i) {
    worst = std::max(worst, std::fabs(a.data_as<float>()[i] - b.data_as<float>()[i]));
  }
  return worst;
}

TEST_F(RuntimeIntegration, WrittenFileRunsOnCpuSimdAndMatchesReference) {
  tools::MlpShape shape;
  auto writer = tools::build_mlp_program(*runtime_, shape);
  ASSERT_TRUE(writer.ok()) << writer.status().to_string();
  auto path = dir_ / "mlp.loom";
  ASSERT_TRUE(writer->write_file(path).ok());

  auto program = runtime_->load_program(path, {"cpu-simd://0"});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  ASSERT_EQ((*program)->placements().size(), 1u);
  EXPECT_EQ((*program)->placements()[0].device, "cpu-simd://0");

  Tensor x = tools::mlp_input(shape);
  NamedTensor in{"x", x};
  auto out = (*program)->run("main", {&in, 1});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  Tensor expected = reference_output(shape, x);
  EXPECT_LE(max_diff((*out)[0].tensor, expected), 1e-5f);
  // Softmax rows sum to one: the result is not trivially zero.
  float row = 0;
  for (int64_t j = 0; j < shape.out; ++j) row += (*out)[0].tensor.data_as<float>()[j];
  EXPECT_NEAR(row, 1.0f, 1e-5f);
}

TEST_F(RuntimeIntegration, DefaultPlacementPicksAServingDevice) {
  auto writer = tools::build_mlp_program(*runtime_, {});
  auto bytes = writer->write_buffer().value();
  auto program = runtime_->load_program(bytes);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  EXPECT_EQ((*program)->placements()[0].loader_key, "cpu-simd");
}

// The demo's delegate comes from the plugins' compile entries: a target
// that is missing is an error naming it, and with no targets listed every
// plugin that takes the whole MLP adds a variant.
TEST_F(RuntimeIntegration, DemoDelegateIsCompiledByThePlugins) {
  const tools::MlpShape shape;
  const auto weights = tools::mlp_weights(shape);
  tools::MlpOptions options;
  options.targets = {"no-such-plugin"};
  auto missing = tools::build_mlp(*runtime_, shape, weights, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("target 'no-such-plugin': no such plugin (found: "),
            std::string::npos)
      << missing.status().message();

  options.targets = {};
  auto every = tools::build_mlp(*runtime_, shape, weights, options);
  ASSERT_TRUE(every.ok()) << every.status().to_string();
  ASSERT_FALSE(every->compiled_for.empty());
  EXPECT_EQ(every->compiled_for.front(), "cpu-simd");
  auto bytes = every->writer.write_buffer().value();
  auto program = runtime_->load_program(bytes, {"cpu-simd://0"});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
}

// A plugin that does not take a node of the MLP is named with the node,
// whether it was asked for or only tried.
TEST_F(RuntimeIntegration, DemoDelegateNamesThePluginAndNodeItDeclines) {
  bool has_fpga = false;
  for (const PluginRecord& p : runtime_->plugins()) has_fpga |= p.name == "fpga-stub";
  if (!has_fpga) GTEST_SKIP() << "fpga-stub is not built in this configuration";
  const tools::MlpShape shape;
  const auto weights = tools::mlp_weights(shape);
  tools::MlpOptions options;
  options.targets = {"fpga-stub"};
  auto declined = tools::build_mlp(*runtime_, shape, weights, options);
  ASSERT_FALSE(declined.ok());
  EXPECT_NE(declined.status().message().find(
                "plugin 'fpga-stub' does not take node 5 ('softmax', Softmax)"),
            std::string::npos)
      << declined.status().message();

  options.targets = {};
  auto every = tools::build_mlp(*runtime_, shape, weights, options);
  ASSERT_TRUE(every.ok()) << every.status().to_string();
  bool fpga_declined = false;
  for (const auto& [plugin, why] : every->declined) {
    fpga_declined |= plugin == "fpga-stub" && why.find("Softmax") != std::string::npos;
  }
  EXPECT_TRUE(fpga_declined);
}

TEST_F(RuntimeIntegration, FourThreadsGetIdenticalResults) {
  tools::MlpShape shape{8, 64, 256, 16};
  auto bytes = tools::build_mlp_program(*runtime_, shape).value().write_buffer().value();
  auto program = runtime_->load_program(bytes, {"cpu-simd://0"});
  ASSERT_TRUE(program.ok()) << program.status().to_string();

  std::vector<Tensor> inputs;
  std::vector<Tensor> expected;
  for (int t = 0; t < 4; ++t) {
    inputs.push_back(tools::mlp_input(shape, 100 + t));
    NamedTensor in{"x", inputs.back()};
    expected.push_back((*program)->run("main", {&in, 1}).value()[0].tensor);
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto session = (*program)->create_session("main").value();
      for (int i = 0; i < 200; ++i) {
        if (!session->set_input("x", inputs[t]).ok() || !session->run().ok()) {
          ++mismatches[t];
          continue;
        }
        const Tensor& y = session->output(0);
        if (std::memcmp(y.data(), expected[t].data(), y.byte_size()) != 0) ++mismatches[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST_F(RuntimeIntegration, MistypedDeviceGetsSuggestionAndList) {
  auto bytes = tools::build_mlp_program(*runtime_, {}).value().write_buffer().value();
  auto program = runtime_->load_program(bytes, {"cpu-smid://0"});
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.status().code(), StatusCode::kNotFound);
  EXPECT_NE(program.status().message().find("did you mean 'cpu-simd://0'"), std::string::npos)
      << program.status().message();
  EXPECT_NE(program.status().message().find("available: "), std::string::npos);
}

TEST_F(RuntimeIntegration, UnknownLoaderKeyListsTheKeysAndTheirPlugins) {
  tools::ProgramBuilder b;
  std::byte blob[4] = {};
  uint32_t art = b.add_artifact("npu-vendor-x", 1, "sub0.npu", blob);
  uint32_t d = b.add_delegate("sub0", {art});
  auto f = b.add_function("main");
  uint32_t x = f.input("x", DType::kF32, {4});
  uint32_t y = f.value("y", DType::kF32, {4});
  f.delegate_call(d, {x}, {y});
  f.output(y);
  auto bytes = b.finish().value().write_buffer().value();
  auto program = runtime_->load_program(bytes);
  ASSERT_FALSE(program.ok());
  const std::string m = program.status().message();
  EXPECT_NE(m.find("delegate 'sub0'"), std::string::npos) << m;
  EXPECT_NE(m.find("no plugin serves loader key 'npu-vendor-x'"), std::string::npos) << m;
  EXPECT_NE(m.find("available: cpu-simd (plugin cpu-simd)"), std::string::npos) << m;
}

TEST_F(RuntimeIntegration, HugeDeclaredInputIsResourceExhaustedNotAnAbort) {
  // 2^40 f32 elements (4 TiB): refused before any allocation is attempted.
  tools::ProgramBuilder b;
  auto f = b.add_function("main");
  uint32_t x = f.input("x", DType::kF32, {int64_t{1} << 20, int64_t{1} << 20});
  uint32_t y = f.value("y", DType::kF32, {int64_t{1} << 20, int64_t{1} << 20});
  f.kernel_call("Relu", {x}, {y});
  f.output(y);
  auto built = b.finish();
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  auto bytes = built->write_buffer();
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto program = runtime_->load_program(*bytes);
  if (!program.ok()) {
    // Refused at load (the arena plan): also fine, as long as it says so.
    EXPECT_EQ(program.status().code(), StatusCode::kResourceExhausted)
        << program.status().to_string();
    return;
  }
  auto session = (*program)->create_session("main");
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), StatusCode::kResourceExhausted)
      << session.status().to_string();
  const std::string m = session.status().message();
  EXPECT_NE(m.find("function 'main'"), std::string::npos) << m;
  EXPECT_NE(m.find("input 'x' (f32 [1048576, 1048576]) of function 'main' takes 4398046511104 "
                   "bytes, more than the limit of"),
            std::string::npos)
      << m;
}

TEST_F(RuntimeIntegration, WrongInputShapeIsRejectedWithBothShapes) {
  auto bytes = tools::build_mlp_program(*runtime_, {}).value().write_buffer().value();
  auto session = runtime_->load_program(bytes).value()->create_session("main").value();
  Tensor bad = Tensor::zeros(DType::kF32, {3, 3}).value();
  Status st = session->set_input("x", bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("[4, 64]"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[3, 3]"), std::string::npos) << st.message();
  EXPECT_FALSE(session->set_input("nope", bad).ok());
}

TEST_F(RuntimeIntegration, UnknownFunctionListsFunctions) {
  auto bytes = tools::build_mlp_program(*runtime_, {}).value().write_buffer().value();
  auto program = runtime_->load_program(bytes).value();
  auto session = program->create_session("mian");
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("main, reference"), std::string::npos)
      << session.status().message();
}

TEST_F(RuntimeIntegration, BindInputUsesCallerMemoryWithoutCopy) {
  tools::MlpShape shape;
  auto bytes = tools::build_mlp_program(*runtime_, shape).value().write_buffer().value();
  auto session = runtime_->load_program(bytes).value()->create_session("main").value();
  Tensor x = tools::mlp_input(shape);
  ASSERT_TRUE(session->bind_input(0, x.data(), x.byte_size()).ok());
  ASSERT_TRUE(session->run().ok());
  Tensor first = session->output(0);
  // Changing the caller's memory changes the next result: it was not copied.
  for (uint64_t i = 0; i < x.element_count(); ++i) x.data_as<float>()[i] *= -1.0f;
  ASSERT_TRUE(session->run().ok());
  EXPECT_GT(max_diff(first, session->output(0)), 1e-4f);
  EXPECT_FALSE(session->bind_input(0, x.data(), x.byte_size() - 4).ok());
  EXPECT_FALSE(session->bind_input(5, x.data(), x.byte_size()).ok());
}

TEST_F(RuntimeIntegration, FrozenFormat11MultiVariantProgramRunsOnEitherVariant) {
  // Written by the 1.1 writer (tests/fixtures/README.md): `loom compile
  // --variants all` of ONNX's test_relu, so its delegate has a cpu-simd
  // variant and a loom.reference variant naming cpu-simd_0.reference.
  const auto path = std::filesystem::path(LOOM_FIXTURE_DIR) / "programs" / "format_1_1_variants.loom";
  std::vector<float> values(60);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 30.5f;
  NamedTensor x{"x", Tensor::copy_of(DType::kF32, {3, 4, 5},
                                     std::as_bytes(std::span<const float>(values)))
                         .value()};
  // With cpu-simd, and with a runtime whose cpu-simd is rejected (an ISA it
  // does not know), where only the reference variant is left.
  RuntimeOptions without_cpu_simd;
  without_cpu_simd.plugin_options = {{"cpu.isa", "bogus"}};
  auto other = Runtime::create(without_cpu_simd).value();
  for (Runtime* runtime : {runtime_.get(), other.get()}) {
    auto program = runtime->load_program(path);
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    const std::string expected = runtime == runtime_.get() ? "cpu-simd://0" : "reference";
    EXPECT_EQ((*program)->placements().at(0).device, expected);
    auto out = (*program)->run("main", {&x, 1});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& y = (*out)[0].tensor;
    ASSERT_EQ(y.element_count(), 60u);
    for (size_t i = 0; i < 60; ++i) EXPECT_EQ(y.data_as<float>()[i], std::max(0.0f, values[i])) << i;
  }
}

// Runs a test_relu session at `shape` (rank 3) and checks y = max(x, 0).
void run_relu_at(Session& session, const Shape& shape) {
  const uint64_t n = static_cast<uint64_t>(shape[0] * shape[1] * shape[2]);
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 11) - 5.5f;
  Tensor x = Tensor::copy_of(DType::kF32, shape, std::as_bytes(std::span<const float>(values))).value();
  ASSERT_TRUE(session.set_input("x", x).ok());
  ASSERT_TRUE(session.run().ok());
  const Tensor& y = session.output(0);
  ASSERT_EQ(y.shape(), shape);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(y.data_as<float>()[i], std::max(0.0f, values[i])) << i;
}

TEST_F(RuntimeIntegration, FrozenFormat13OpenProgramRunsAtShapesOfItsChoice) {
  // Written by the 1.3 writer (tests/fixtures/README.md): ONNX's test_relu
  // compiled for cpu-simd with x's first and last dimensions open.
  const auto path = std::filesystem::path(LOOM_FIXTURE_DIR) / "programs" / "format_1_3_open.loom";
  auto program = runtime_->load_program(path);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  const FunctionInfo info = (*program)->function("main").value();
  EXPECT_TRUE(info.open);
  EXPECT_EQ(info.inputs[0].shape, (Shape{-1, 4, -1}));
  auto session = (*program)->create_session().value();
  for (const Shape& shape : {Shape{3, 4, 5}, Shape{2, 4, 9}, Shape{1, 4, 1}}) {
    ASSERT_NO_FATAL_FAILURE(run_relu_at(*session, shape));
    EXPECT_EQ(session->bound_program()->placements().at(0).device, "cpu-simd://0");
  }
  // The program's own reader refuses x of rank 2, naming it.
  Status st = session->set_input("x", Tensor::zeros(DType::kF32, {4, 4}).value());
  EXPECT_EQ(st.message(), "input 'x' must have rank 3 ([?, 4, ?]), got rank 2 ([4, 4])");
}

TEST_F(RuntimeIntegration, FrozenFormat15StagedProgramRuns) {
  // Written by the 1.5 writer (tests/fixtures/README.md): ONNX's test_loop11,
  // a staged main with a Loop, for the reference kernels. A 1.6 reader runs it.
  const auto path = std::filesystem::path(LOOM_FIXTURE_DIR) / "programs" / "format_1_5_staged.loom";
  auto program = runtime_->load_program(path);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  EXPECT_TRUE((*program)->function("main").value().staged);
  auto session = (*program)->create_session().value();
  for (const ArgumentInfo& a : session->function().inputs) EXPECT_EQ(a.kind, ValueKind::kTensor);
  int64_t trip = 5;
  uint8_t cond = 1;
  float y = -2;
  ASSERT_TRUE(session->set_input("trip_count", Tensor::copy_of(DType::kI64, {}, std::as_bytes(std::span(&trip, 1))).value()).ok());
  ASSERT_TRUE(session->set_input("cond", Tensor::copy_of(DType::kBool, {}, std::as_bytes(std::span(&cond, 1))).value()).ok());
  ASSERT_TRUE(session->set_input("y", Tensor::copy_of(DType::kF32, {1}, std::as_bytes(std::span(&y, 1))).value()).ok());
  Status st = session->run();
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(*session->output(0).data_as<float>(), 13.0f);
  ASSERT_EQ(session->output(1).shape(), (Shape{5, 1}));
  const float* scan = session->output(1).data_as<float>();
  EXPECT_EQ(std::vector<float>(scan, scan + 5), (std::vector<float>{-1, 1, 4, 8, 13}));
}

TEST_F(RuntimeIntegration, FrozenFormat14NativeOpenProgramRunsEveryBindingWithoutCompiling) {
  // Written by the 1.4 writer (tests/fixtures/README.md): ONNX's test_relu
  // compiled once, for the reference kernels, with x's first and last
  // dimensions open: main has a Relu kernel call on open values.
  const auto path = std::filesystem::path(LOOM_FIXTURE_DIR) / "programs" / "format_1_4_native.loom";
  auto program = runtime_->load_program(path);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  EXPECT_TRUE((*program)->function("main").value().open);
  auto session = (*program)->create_session().value();
  for (const Shape& shape : {Shape{3, 4, 5}, Shape{2, 4, 9}, Shape{1, 4, 1}, Shape{3, 4, 5}}) {
    ASSERT_NO_FATAL_FAILURE(run_relu_at(*session, shape));
    EXPECT_EQ(session->bound_program(), nullptr);  // no program compiled for the binding
  }
}

// Sessions on several threads bind one native open-shape program (format
// 1.4) at once: the bindings' plans share the program's delegates and cache
// (labelled tsan: ThreadSanitizer runs it).
TEST_F(RuntimeIntegration, NativeOpenProgramBindsSafelyFromSeveralThreads) {
  const auto path = std::filesystem::path(LOOM_FIXTURE_DIR) / "programs" / "format_1_4_native.loom";
  LoadOptions load;
  load.shape_cache = 2;
  auto program = runtime_->load_program(path, load);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      auto session = (*program)->create_session();
      if (!session.ok()) {
        ++failures;
        return;
      }
      for (int i = 0; i < 6; ++i) {
        const Shape shape{1 + (i + t) % 3, 4, 2 + i % 2};
        const uint64_t n = static_cast<uint64_t>(shape[0] * 4 * shape[2]);
        std::vector<float> values(n);
        for (size_t k = 0; k < n; ++k) values[k] = static_cast<float>((k + static_cast<size_t>(t)) % 7) - 3.0f;
        Tensor x = Tensor::copy_of(DType::kF32, shape, std::as_bytes(std::span<const float>(values))).value();
        if (!(*session)->set_input("x", x).ok() || !(*session)->run().ok()) {
          ++failures;
          return;
        }
        const Tensor& y = (*session)->output(0);
        for (size_t k = 0; k < n; ++k) {
          if (y.data_as<float>()[k] != std::max(0.0f, values[k])) {
            ++failures;
            return;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

// Sessions on several threads bind the same open-shape program at once, to
// shapes they share and shapes of their own: the program's cache of
// specializations is shared (labelled tsan: ThreadSanitizer runs it).
TEST_F(RuntimeIntegration, OpenProgramSpecializesSafelyFromSeveralThreads) {
  const auto path = std::filesystem::path(LOOM_FIXTURE_DIR) / "programs" / "format_1_3_open.loom";
  LoadOptions load;
  load.shape_cache = 3;  // fewer than the bindings: entries are evicted while others run
  auto program = runtime_->load_program(path, load);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  std::vector<std::string> failures(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      auto session = (*program)->create_session();
      if (!session.ok()) {
        failures[t] = session.status().to_string();
        return;
      }
      for (int i = 0; i < 8; ++i) {
        const Shape shape{1 + (i + t) % 4, 4, 2 + i % 2};
        Tensor x = Tensor::zeros(DType::kF32, shape).value();
        for (uint64_t k = 0; k < x.element_count(); ++k) x.data_as<float>()[k] = static_cast<float>(k % 5) - 2.0f;
        Status st = (*session)->set_input("x", x);
        if (st.ok()) st = (*session)->run();
        if (!st.ok()) {
          failures[t] = st.to_string();
          return;
        }
        const Tensor& y = (*session)->output(0);
        if (y.shape() != shape) {
          failures[t] = "output shape " + shape_to_string(y.shape());
          return;
        }
        for (uint64_t k = 0; k < y.element_count(); ++k) {
          if (y.data_as<float>()[k] != std::max(0.0f, x.data_as<float>()[k])) {
            failures[t] = "element " + std::to_string(k) + " of " + shape_to_string(shape);
            return;
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 3; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
}

TEST_F(RuntimeIntegration, FrozenFormat10ProgramRunsToHandWorkedValues) {
  // Written by the 1.0 writer (tests/fixtures/README.md): main computes
  // s = x + w, r = Relu(s), y = Softmax(r, axis 1); square computes x * x.
  auto program = runtime_->load_program(
      std::filesystem::path(LOOM_FIXTURE_DIR) / "programs" / "format_1_0.loom");
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  const float x_values[6] = {1, 2, 3, 4, 5, -6};
  NamedTensor x{"x", Tensor::copy_of(DType::kF32, {2, 3},
                                     std::as_bytes(std::span<const float>(x_values, 6)))
                         .value()};
  auto out = (*program)->run("main", {&x, 1});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->size(), 2u);
  // w = [[0.5, -1, 2], [-3, 0, 1]]: r = Relu(x + w) = [[1.5, 1, 5], [1, 5, 0]].
  const std::vector<float> r = {1.5f, 1, 5, 1, 5, 0};
  const Tensor& y = (*out)[0].tensor;
  const Tensor& relu = (*out)[1].tensor;
  ASSERT_EQ(relu.element_count(), 6u);
  ASSERT_EQ(y.element_count(), 6u);
  for (int row = 0; row < 2; ++row) {
    float sum = 0;
    for (int c = 0; c < 3; ++c) sum += std::exp(r[row * 3 + c]);
    for (int c = 0; c < 3; ++c) {
      const int i = row * 3 + c;
      EXPECT_EQ(relu.data_as<float>()[i], r[i]) << i;
      EXPECT_NEAR(y.data_as<float>()[i], std::exp(r[i]) / sum, 1e-6f) << i;
    }
  }
  const float v_values[4] = {1, -2, 3, 0.5f};
  NamedTensor v{"x", Tensor::copy_of(DType::kF32, {4},
                                     std::as_bytes(std::span<const float>(v_values, 4)))
                         .value()};
  auto squared = (*program)->run("square", {&v, 1});
  ASSERT_TRUE(squared.ok()) << squared.status().to_string();
  const float* sq = (*squared)[0].tensor.data_as<float>();
  EXPECT_EQ(std::vector<float>(sq, sq + 4), (std::vector<float>{1, 4, 9, 0.25f}));
}

}  // namespace
}  // namespace loom
