// Open-shape programs end to end: an ONNX model whose dimensions stay open is
// compiled once, then run at shapes never seen at compile time on the shipped
// plugins (compared with the reference kernels, and with a program compiled
// for that shape alone); the session's binding cache; every binding error;
// and the signature checks of lowering/open_shapes.hpp on their own.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include <unistd.h>

#include "graph/graph_codec.hpp"
#include "import_test_util.hpp"
#include "loom/compiler.hpp"
#include "loom/runtime.hpp"
#include "loom/trace.hpp"
#include "lowering/open_shapes.hpp"
#include "open_shapes_util.hpp"

namespace loom::compiler::testing {
namespace {

namespace fs = std::filesystem;
namespace fx = loom::testing::onnx_fixtures;
using open_shapes_util::make_runtime;
using open_shapes_util::max_diff;
using open_shapes_util::open_value;
using open_shapes_util::pattern;
using open_shapes_util::scratch;

// x[d0, 3, d2, d3] -> Conv(w[4,3,3,3], b, pads 1) -> Relu -> r
// r -> Reshape to [d0, -1] with the target from Shape -> Gather -> Unsqueeze
//   -> Concat (as tracing exporters write it) -> y
// s[d0] -> Relu -> z     (s shares the symbol d0 with x)
// batch_last: the target is [-1, d0] instead, which no binding-independent
// Reshape target spells (0 copies the data's dimension at the same index).
::onnx::ModelProto open_cnn(bool batch_last = false) {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {-1, 3, -1, -1});
  add_input(m, "s", TP::FLOAT, {-1});
  std::vector<float> w(4 * 3 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 8.0f;
  init_f32(m, "w", {4, 3, 3, 3}, w);
  init_f32(m, "b", {4}, {0.1f, -0.2f, 0.3f, 0.0f});
  init_i64(m, "zero", {}, {0});
  init_i64(m, "axes", {1}, {0});
  init_i64(m, "minus_one", {1}, {-1});
  auto& conv = add_node(m, "Conv", {"x", "w", "b"}, {"c"}, "conv");
  attr_ints(conv, "pads", {1, 1, 1, 1});
  attr_ints(conv, "kernel_shape", {3, 3});
  add_node(m, "Relu", {"c"}, {"r"}, "relu");
  add_node(m, "Shape", {"r"}, {"shape"}, "shape");
  add_node(m, "Gather", {"shape", "zero"}, {"batch"}, "gather");
  add_node(m, "Unsqueeze", {"batch", "axes"}, {"batch1"}, "unsqueeze");
  add_node(m, "Concat", batch_last ? std::vector<std::string>{"minus_one", "batch1"}
                                    : std::vector<std::string>{"batch1", "minus_one"},
           {"target"}, "concat");
  attr_int(*m.mutable_graph()->mutable_node(5), "axis", 0);
  add_node(m, "Reshape", {"r", "target"}, {"y"}, "reshape");
  add_node(m, "Relu", {"s"}, {"z"}, "relu_s");
  add_output(m, "y", TP::FLOAT, {-1, -1});
  add_output(m, "z", TP::FLOAT, {-1});
  return m;
}

fs::path write_open_cnn(bool batch_last = false) {
  const fs::path path = scratch() / (batch_last ? "open_cnn_batch_last.onnx" : "open_cnn.onnx");
  EXPECT_TRUE(fx::write_model(open_cnn(batch_last), path).ok());
  return path;
}

Result<fs::path> compile(Runtime& runtime, const std::string& name, CompileOptions options,
                         bool batch_last = false) {
  const fs::path out = scratch() / (name + ".loom");
  LOOM_RETURN_IF_ERROR(compile_onnx_file(runtime.plugin_host(), write_open_cnn(batch_last), out, options).status());
  return out;
}

struct Outputs {
  Tensor y, z;
};

Result<Outputs> run(Session& session, int64_t n, int64_t h, int64_t w, int seed = 1) {
  LOOM_RETURN_IF_ERROR(session.set_input("x", pattern({n, 3, h, w}, seed)));
  LOOM_RETURN_IF_ERROR(session.set_input("s", pattern({n}, seed + 1)));
  LOOM_RETURN_IF_ERROR(session.run());
  return Outputs{session.output(0), session.output(1)};
}

// The model's Reshape target [-1, d0] follows the binding: cpu-simd
// compiles each binding's subgraphs when the binding first runs.
TEST(OpenShapes, CompiledOnceWithoutShapesRunsAtUnseenShapes) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  CompileOptions options;
  options.targets = {"cpu-simd"};
  auto report = compile_onnx_file(runtime->plugin_host(), write_open_cnn(true),
                                  scratch() / "open_cnn_simd.loom", options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->open_inputs, (std::vector<std::string>{"x: f32 [?(d0), 3, ?(d2), ?(d3)]", "s: f32 [?(d0)]"}));
  auto program = runtime->load_program(scratch() / "open_cnn_simd.loom").value();
  const FunctionInfo info = program->function("main").value();
  EXPECT_TRUE(info.open);
  EXPECT_EQ(info.inputs[0].shape, (Shape{-1, 3, -1, -1}));
  EXPECT_EQ(info.inputs[0].symbols, (std::vector<std::string>{"d0", "", "d2", "d3"}));
  EXPECT_NE(info.reflection.find("[\"ndarray\",\"f32\",4,null,3,null,null]"), std::string::npos) << info.reflection;

  EXPECT_FALSE(report->open_native);
  auto reference_file = compile(*runtime, "open_cnn_reference", {}, true).value();
  auto reference = runtime->load_program(reference_file).value();
  auto session = program->create_session().value();
  auto oracle = reference->create_session().value();
  for (auto [n, h, w] : {std::tuple{1, 8, 8}, {2, 5, 9}, {3, 16, 4}, {1, 1, 1}}) {
    auto got = run(*session, n, h, w);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    auto want = run(*oracle, n, h, w);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    EXPECT_EQ(got->y.shape(), (Shape{4 * h * w, n}));
    EXPECT_EQ(got->z.shape(), (Shape{n}));
    EXPECT_LE(max_diff(got->y, want->y), 1e-5f) << n << "x3x" << h << "x" << w;
    EXPECT_EQ(max_diff(got->z, want->z), 0.0f);
    // What ran: an ordinary program for this binding, its delegates on cpu-simd.
    std::shared_ptr<Program> bound = session->bound_program();
    ASSERT_NE(bound, nullptr);
    EXPECT_EQ(bound->function("main").value().inputs[0].shape, (Shape{n, 3, h, w}));
    ASSERT_FALSE(bound->placements().empty());
    EXPECT_EQ(bound->placements()[0].device, "cpu-simd://0");
  }
  EXPECT_EQ(reference->create_session().value()->bound_program(), nullptr);
}

TEST(OpenShapes, SameBytesAsAProgramCompiledForThatShapeAlone) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  CompileOptions open;
  open.targets = {"cpu-simd"};
  auto open_program = runtime->load_program(compile(*runtime, "same_open", open).value()).value();
  CompileOptions fixed = open;
  fixed.input_shapes = {{"x", {2, 3, 6, 7}}, {"s", {2}}};
  auto fixed_program = runtime->load_program(compile(*runtime, "same_fixed", fixed).value()).value();
  EXPECT_FALSE(fixed_program->function("main").value().open);
  auto a = run(*open_program->create_session().value(), 2, 6, 7);
  auto b = run(*fixed_program->create_session().value(), 2, 6, 7);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(max_diff(a->y, b->y), 0.0f);
}

TEST(OpenShapes, RunsOnEveryShippedDevice) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto reference = runtime->load_program(compile(*runtime, "devices_reference", {}).value()).value();
  auto oracle = reference->create_session().value();
  size_t ran = 0;
  for (const std::string plugin : {"cpu-simd", "vulkan-compute", "fpga-stub"}) {
    auto devices = runtime->devices(plugin);
    if (!devices.ok() || devices->empty()) {
      ADD_FAILURE() << plugin << " has no device here: " << devices.status().to_string();
      continue;
    }
    CompileOptions options;
    options.targets = {plugin};
    auto file = compile(*runtime, "devices_" + plugin, options);
    ASSERT_TRUE(file.ok()) << plugin << ": " << file.status().to_string();
    LoadOptions load;
    load.device = devices->front().uri;
    auto program = runtime->load_program(*file, load);
    ASSERT_TRUE(program.ok()) << plugin << ": " << program.status().to_string();
    auto session = (*program)->create_session().value();
    for (auto [n, h, w] : {std::tuple{1, 6, 6}, {2, 7, 3}}) {
      auto got = run(*session, n, h, w);
      ASSERT_TRUE(got.ok()) << plugin << ": " << got.status().to_string();
      auto want = run(*oracle, n, h, w).value();
      EXPECT_LE(max_diff(got->y, want.y), 1e-4f) << plugin << " at " << n << "x3x" << h << "x" << w;
      // The delegates ran on the device asked for.
      bool on_device = false;
      for (const DelegateTransfers& t : session->transfers()) on_device |= t.device == load.device;
      EXPECT_TRUE(on_device) << plugin;
    }
    ++ran;
  }
  EXPECT_EQ(ran, 3u);
}

// Counts the specializations made while `body` runs (trace spans).
size_t specializations(Runtime& runtime, const std::function<void()>& body) {
  auto trace = runtime.start_trace();
  body();
  runtime.stop_trace();
  size_t n = 0;
  for (const Trace::Event& e : trace->events()) n += e.category == "specialize";
  return n;
}

TEST(OpenShapes, AlternatingBindingsSpecializeOnceEach) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  CompileOptions options;
  options.targets = {"cpu-simd"};
  LoadOptions load;
  load.shape_cache = 2;
  auto program = runtime->load_program(compile(*runtime, "cache", options).value(), load).value();
  auto session = program->create_session().value();
  EXPECT_EQ(specializations(*runtime, [&] {
              for (int i = 0; i < 6; ++i) ASSERT_TRUE(run(*session, 1, i % 2 ? 5 : 7, 4).ok());
            }),
            2u);
  // Each run names its binding in the trace.
  auto trace = runtime->start_trace();
  ASSERT_TRUE(run(*session, 1, 5, 4).ok());
  runtime->stop_trace();
  std::vector<std::string> bindings;
  for (const Trace::Event& e : trace->events()) {
    if (e.category == "binding") bindings.push_back(e.name);
  }
  EXPECT_EQ(bindings, (std::vector<std::string>{"main x=[1, 3, 5, 4], s=[1]"}));
  // A second session shares the program's specializations.
  auto second = program->create_session().value();
  EXPECT_EQ(specializations(*runtime, [&] { ASSERT_TRUE(run(*second, 1, 5, 4).ok()); }), 0u);
  // A third binding (9) pushes out the least recently used one (7): 5 is
  // still there, 7 costs a new specialization.
  EXPECT_EQ(specializations(*runtime, [&] {
              ASSERT_TRUE(run(*session, 1, 9, 4).ok());
              ASSERT_TRUE(run(*session, 1, 5, 4).ok());
            }),
            1u);
  EXPECT_EQ(specializations(*runtime, [&] { ASSERT_TRUE(run(*session, 1, 7, 4).ok()); }), 1u);
}

TEST(OpenShapes, BindingErrorsNameTheInputTheDimensionAndBothValues) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  CompileOptions options;
  options.input_shapes = {{"x", {-1, 3, -1, -1}}};
  options.input_ranges = {{"x", {{}, {}, {2, 64}, {}}}};
  auto program = runtime->load_program(compile(*runtime, "errors", options).value()).value();
  auto session = program->create_session().value();
  auto message = [](const Status& s) { return std::string(s.message()); };

  Status st = session->set_input("x", pattern({1, 3, 8}, 0));
  EXPECT_EQ(message(st), "input 'x' must have rank 4 ([?, 3, ?, ?]), got rank 3 ([1, 3, 8])");
  st = session->set_input("x", pattern({1, 4, 8, 8}, 0));
  EXPECT_EQ(message(st), "input 'x' dimension 1 is fixed at 3 by the program, got 4 ([1, 4, 8, 8] for [?, 3, ?, ?])");
  st = session->set_input("x", pattern({1, 3, 65, 8}, 0));
  EXPECT_EQ(message(st), "input 'x' dimension 2 ('d2') is 65, outside its declared range 2..64");
  st = session->set_input("x", Tensor::zeros(DType::kI32, {1, 3, 8, 8}).value());
  EXPECT_EQ(message(st), "input 'x' of function 'main' must be f32, got i32");

  ASSERT_TRUE(session->set_input("x", pattern({2, 3, 8, 8}, 0)).ok());
  st = session->run();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(message(st).find("input 's' of function 'main' has open dimensions [?] and was not set"),
            std::string::npos) << message(st);
  ASSERT_TRUE(session->set_input("s", pattern({3}, 0)).ok());
  st = session->run();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(message(st), "input 's' dimension 0 ('d0') is 3, but input 'x' dimension 0 binds 'd0' to 2");

  std::vector<float> data(2 * 3 * 8 * 8);
  st = session->bind_input(0, data.data(), data.size() * sizeof(float));
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(message(st).find("has open dimensions; bind it with set_input"), std::string::npos) << message(st);
}

TEST(OpenShapes, HugeBindingIsRefusedByMaxTensorBytesBeforeAnyCompile) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  LoadOptions load;
  load.max_tensor_bytes = 64 << 10;
  auto program = runtime->load_program(compile(*runtime, "huge", {}).value(), load).value();
  auto session = program->create_session().value();
  // x itself is 48 KiB; the Conv's output, [1, 4, 64, 64] f32, is 64 KiB + 1 element over.
  auto got = run(*session, 1, 64, 65);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(got.status().message().find("tensor 'c' (output of node 0 ('conv', Conv)) is f32 [1, 4, 64, 65] at "
                                        "this binding, 66560 bytes; the limit is 65536 bytes"),
            std::string::npos)
      << got.status().message();
  EXPECT_TRUE(run(*session, 1, 8, 8).ok());
}

TEST(OpenShapes, ShapeCacheOfZeroIsRefused) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  LoadOptions load;
  load.shape_cache = 0;
  auto program = runtime->load_program(compile(*runtime, "zero_cache", {}).value(), load);
  ASSERT_FALSE(program.ok());
  EXPECT_NE(program.status().message().find("shape_cache is 0"), std::string::npos);
}

// Reshape(x[2, 6], shape) with `shape` a model input: its values decide y's
// shape, so they are part of the binding.
TEST(OpenShapes, InputValuesThatDecideShapesAreBoundPerRun) {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {2, 6});
  add_input(m, "shape", TP::INT64, {2});
  add_node(m, "Reshape", {"x", "shape"}, {"y"}, "r");
  add_node(m, "Relu", {"y"}, {"z"}, "relu");
  add_output(m, "z", TP::FLOAT, {-1, -1});
  const fs::path model = scratch() / "reshape_input.onnx";
  ASSERT_TRUE(fx::write_model(m, model).ok());
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  const fs::path out = scratch() / "reshape_input.loom";
  CompileOptions options;
  options.targets = {"cpu-simd"};
  auto report = compile_onnx_file(runtime->plugin_host(), model, out, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->value_inputs,
            (std::vector<std::string>{"shape (decides the output shape of node 'r', Reshape)"}));
  auto program = runtime->load_program(out).value();
  auto session = program->create_session().value();
  const Tensor x = pattern({2, 6}, 3);
  auto run_as = [&](std::vector<int64_t> dims) -> Result<Shape> {
    LOOM_RETURN_IF_ERROR(session->set_input("x", x));
    LOOM_ASSIGN_OR_RETURN(Tensor shape, Tensor::copy_of(DType::kI64, {2}, fx::bytes_of(dims)));
    LOOM_RETURN_IF_ERROR(session->set_input("shape", shape));
    LOOM_RETURN_IF_ERROR(session->run());
    for (uint64_t i = 0; i < 12; ++i) {
      if (session->output(0).data_as<float>()[i] != std::max(0.0f, x.data_as<float>()[i])) {
        return internal_error("element " + std::to_string(i) + " differs");
      }
    }
    return session->output(0).shape();
  };
  EXPECT_EQ(specializations(*runtime, [&] {
              EXPECT_EQ(run_as({3, 4}).value(), (Shape{3, 4}));
              EXPECT_EQ(run_as({4, 3}).value(), (Shape{4, 3}));
              EXPECT_EQ(run_as({3, 4}).value(), (Shape{3, 4}));
              EXPECT_EQ(run_as({4, -1}).value(), (Shape{4, 3}));
            }),
            3u);
  auto bad = run_as({5, 5});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("function 'main' at x=[2, 6], shape=[2]"), std::string::npos)
      << bad.status().message();
}

// --- lowering::decode_open_graph on damaged artifacts -------------------------

// x[?, 2000] * w[2000] -> y; w (8000 bytes, over the inline limit) is a parameter named in the graph
std::vector<std::byte> open_graph_bytes() {
  graph::Graph g;
  g.name = "main";
  graph::Tensor x{"x", DType::kF32, {-1, 2000}, nullptr};
  graph::Tensor w{"w", DType::kF32, {2000}, std::make_shared<const std::vector<std::byte>>(8000)};
  graph::Tensor y{"y", DType::kInvalid, {}, nullptr};
  g.inputs = {g.add_tensor(x)};
  const int32_t wi = g.add_tensor(w);
  const int32_t yi = g.add_tensor(y);
  graph::Node mul;
  mul.op_type = "Mul";
  mul.opset = 17;
  mul.inputs = {g.inputs[0], wi};
  mul.outputs = {yi};
  g.nodes.push_back(mul);
  g.outputs = {yi};
  graph::EncodeOptions encode;
  encode.open = true;
  return graph::encode_graph(g, encode).value();
}

TEST(DecodeOpenGraph, DamagedArtifactsAreErrorsNamingWhatIsWrong) {
  const std::vector<std::byte> bytes = open_graph_bytes();
  auto weights = [](const std::string&) -> Result<graph::ConstantBytes> {
    return std::make_shared<const std::vector<std::byte>>(8000);
  };
  auto good = lowering::decode_open_graph(bytes, {{"targets", "cpu-simd"}, {"variants", "all"}}, 1, weights);
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_EQ(good->targets, (std::vector<std::string>{"cpu-simd"}));
  EXPECT_TRUE(good->all_variants);
  EXPECT_TRUE(good->graph.tensors[1].is_constant());
  EXPECT_EQ(good->graph.inputs.size(), 1u);

  auto missing = lowering::decode_open_graph(bytes, {}, 1, [](const std::string& name) -> Result<graph::ConstantBytes> {
    return invalid_argument("graph IR names parameter '" + name + "', which the program does not have");
  });
  EXPECT_EQ(missing.status().message(), "graph IR names parameter 'w', which the program does not have");
  auto short_weights = lowering::decode_open_graph(bytes, {}, 1, [](const std::string&) -> Result<graph::ConstantBytes> {
    return std::make_shared<const std::vector<std::byte>>(16);
  });
  EXPECT_EQ(short_weights.status().message(), "parameter 'w': 16 bytes, but the graph reads it as f32 [2000]");
  auto variants = lowering::decode_open_graph(bytes, {{"variants", "some"}}, 1, weights);
  EXPECT_EQ(variants.status().message(), "metadata 'variants': 'some' is neither 'first' nor 'all'");
  EXPECT_FALSE(good->keep_qdq_weights) << "programs before the key fold a QDQ group's weights";
  auto kept = lowering::decode_open_graph(bytes, {{"qdq_weights", "kept"}}, 1, weights);
  ASSERT_TRUE(kept.ok()) << kept.status().to_string();
  EXPECT_TRUE(kept->keep_qdq_weights);
  auto qdq = lowering::decode_open_graph(bytes, {{"qdq_weights", "some"}}, 1, weights);
  EXPECT_EQ(qdq.status().message(), "metadata 'qdq_weights': 'some' is neither 'kept' nor 'folded'");
  auto inputs = lowering::decode_open_graph(bytes, {}, 3, weights);
  EXPECT_EQ(inputs.status().message(), "graph IR: 2 inputs, but the function has 3");
  std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() / 2));
  auto truncated = lowering::decode_open_graph(cut, {}, 1, weights);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("not a valid graph.fbs buffer"), std::string::npos)
      << truncated.status().message();
}

// --- native open-shape programs (format 1.4, plugin ABI 1.2) ----------------

// x[n, 3, h, w] -> Conv(w[4,3,3,3], b, pads 1) -> BatchNormalization -> Relu
//   -> GlobalAveragePool -> Flatten -> y[n, 4]: no shape is computed into a
// value, so one compile serves every binding.
::onnx::ModelProto pooled_cnn() {
  auto m = fx::empty_model();
  add_input(m, "x", TP::FLOAT, {-1, 3, -1, -1});
  std::vector<float> w(4 * 3 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i % 5) - 2) / 4.0f;
  init_f32(m, "w", {4, 3, 3, 3}, w);
  init_f32(m, "b", {4}, {0.1f, -0.2f, 0.3f, 0.0f});
  init_f32(m, "gamma", {4}, {1.5f, 0.5f, 1.0f, 2.0f});
  init_f32(m, "beta", {4}, {0.0f, 0.1f, -0.1f, 0.2f});
  init_f32(m, "mean", {4}, {0.2f, -0.1f, 0.0f, 0.3f});
  init_f32(m, "var", {4}, {1.0f, 2.0f, 0.5f, 1.5f});
  auto& conv = add_node(m, "Conv", {"x", "w", "b"}, {"c"}, "conv");
  attr_ints(conv, "pads", {1, 1, 1, 1});
  attr_ints(conv, "kernel_shape", {3, 3});
  add_node(m, "BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"bn"}, "bn");
  add_node(m, "Relu", {"bn"}, {"r"}, "relu");
  add_node(m, "GlobalAveragePool", {"r"}, {"g"}, "pool");
  add_node(m, "Flatten", {"g"}, {"y"}, "flatten");
  add_output(m, "y", TP::FLOAT, {-1, 4});
  return m;
}

Result<CompileReport> compile_pooled(Runtime& runtime, const std::string& name, CompileOptions options) {
  const fs::path model = scratch() / "pooled_cnn.onnx";
  LOOM_RETURN_IF_ERROR(fx::write_model(pooled_cnn(), model));
  return compile_onnx_file(runtime.plugin_host(), model, scratch() / (name + ".loom"),
                           options);
}

TEST(NativeOpenShapes, CompiledOnceRunsEveryBindingWithoutCompilingAgain) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto report = compile_pooled(*runtime, "pooled_native", {});
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_TRUE(report->open_native) << report->open_per_binding_why;
  EXPECT_EQ(report->reference_nodes, 4u);  // BN folded into the Conv once, at compile time
  auto program = runtime->load_program(scratch() / "pooled_native.loom").value();
  const FunctionInfo info = program->function("main").value();
  EXPECT_TRUE(info.open);
  EXPECT_EQ(info.inputs[0].shape, (Shape{-1, 3, -1, -1}));
  auto session = program->create_session().value();
  for (auto [n, h, w] : {std::tuple{1, 8, 8}, {2, 5, 9}, {3, 16, 4}, {1, 1, 1}, {2, 5, 9}}) {
    // The oracle: the same model compiled for this binding alone.
    CompileOptions fixed;
    fixed.input_shapes = {{"x", {n, 3, h, w}}};
    ASSERT_TRUE(compile_pooled(*runtime, "pooled_fixed", fixed).ok());
    auto oracle = runtime->load_program(scratch() / "pooled_fixed.loom").value();
    auto want_session = oracle->create_session().value();
    const Tensor x = pattern({n, 3, h, w}, n + h);
    ASSERT_TRUE(want_session->set_input("x", x).ok());
    ASSERT_TRUE(want_session->run().ok());
    ASSERT_TRUE(session->set_input("x", x).ok());
    ASSERT_TRUE(session->run().ok());
    EXPECT_EQ(session->output(0).shape(), (Shape{n, 4}));
    EXPECT_LE(max_diff(session->output(0), want_session->output(0)), 1e-5f) << n << "x3x" << h << "x" << w;
    // No program of its own: the binding ran the program's own instructions.
    EXPECT_EQ(session->bound_program(), nullptr);
  }
}

TEST(NativeOpenShapes, ABindingIsPlannedNotCompiled) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  ASSERT_TRUE(compile_pooled(*runtime, "pooled_plan", {}).ok());
  LoadOptions load;
  load.shape_cache = 2;
  auto program = runtime->load_program(scratch() / "pooled_plan.loom", load).value();
  auto session = program->create_session().value();
  // Still one "specialize" span per new binding (planned, not compiled),
  // none for a binding in the cache.
  EXPECT_EQ(specializations(*runtime, [&] {
              for (int i = 0; i < 4; ++i) {
                ASSERT_TRUE(session->set_input("x", pattern({1, 3, i % 2 ? 5 : 7, 4}, i)).ok());
                ASSERT_TRUE(session->run().ok());
              }
            }),
            2u);
  // A binding beyond max_tensor_bytes is refused before anything is planned.
  LoadOptions small;
  small.max_tensor_bytes = 4096;
  auto tight = runtime->load_program(scratch() / "pooled_plan.loom", small).value();
  auto s2 = tight->create_session().value();
  ASSERT_TRUE(s2->set_input("x", pattern({1, 3, 64, 64}, 1)).ok());
  const Status st = s2->run();
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.to_string();
  EXPECT_NE(st.message().find("max_tensor_bytes"), std::string::npos) << st.message();
}

TEST(NativeOpenShapes, CompiledPerBindingWhenTheStructureOrATargetRequiresIt) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  // open_cnn's Reshape target computed from Shape(r) as [-1, d0]: a
  // different constant at every binding, with no spelling for all.
  const fs::path out = scratch() / "open_cnn_per_binding.loom";
  auto report = compile_onnx_file(runtime->plugin_host(), write_open_cnn(true), out, {});
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_FALSE(report->open_native);
  EXPECT_NE(report->open_per_binding_why.find("the graph's structure follows the binding"), std::string::npos)
      << report->open_per_binding_why;
  // A target that compiles fixed shapes only: the test's fake plugin.
  RuntimeOptions with_fake;
  with_fake.plugin_paths = {fs::path(LOOM_TEST_PLUGIN_DIR) / "fake"};
  with_fake.plugin_options = {{"fake.compile_ops", "Relu"}};
  auto fake_runtime = Runtime::create(with_fake);
  ASSERT_TRUE(fake_runtime.ok()) << fake_runtime.status().to_string();
  CompileOptions fake;
  fake.targets = {"fake"};
  auto fixed_only = compile_pooled(**fake_runtime, "pooled_fake", fake);
  ASSERT_TRUE(fixed_only.ok()) << fixed_only.status().to_string();
  EXPECT_FALSE(fixed_only->open_native);
  EXPECT_EQ(fixed_only->open_per_binding_why, "fake compiles fixed shapes only (no open-shape executables, ABI 1.2)");
}

// fpga-stub serves open shapes (format-2 bitstreams): the program is
// compiled once for it, and every binding runs that one bitstream on the
// device, against the model compiled for the binding alone.
TEST(NativeOpenShapes, FpgaStubCompiledOnceRunsEveryBindingOnTheDevice) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  CompileOptions fpga;
  fpga.targets = {"fpga-stub"};
  auto report = compile_pooled(*runtime, "pooled_fpga", fpga);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_TRUE(report->open_native) << report->open_per_binding_why;
  LoadOptions load;
  load.device = "fpga-stub://0";
  auto program = runtime->load_program(scratch() / "pooled_fpga.loom", load).value();
  EXPECT_TRUE(program->function("main").value().open);
  auto session = program->create_session().value();
  for (auto [n, h, w] : {std::tuple{1, 8, 8}, {2, 5, 9}, {3, 16, 4}, {1, 1, 1}, {2, 5, 9}}) {
    CompileOptions fixed;
    fixed.input_shapes = {{"x", {n, 3, h, w}}};
    ASSERT_TRUE(compile_pooled(*runtime, "pooled_fpga_fixed", fixed).ok());
    auto oracle = runtime->load_program(scratch() / "pooled_fpga_fixed.loom").value();
    auto want_session = oracle->create_session().value();
    const Tensor x = pattern({n, 3, h, w}, n + h);
    ASSERT_TRUE(want_session->set_input("x", x).ok());
    ASSERT_TRUE(want_session->run().ok());
    ASSERT_TRUE(session->set_input("x", x).ok());
    const Status ran = session->run();
    ASSERT_TRUE(ran.ok()) << ran.to_string();
    EXPECT_EQ(session->output(0).shape(), (Shape{n, 4}));
    EXPECT_LE(max_diff(session->output(0), want_session->output(0)), 1e-5f) << n << "x3x" << h << "x" << w;
    EXPECT_EQ(session->bound_program(), nullptr);  // compiled once: no per-binding program
    bool on_device = false;
    for (const DelegateTransfers& t : session->transfers()) on_device |= t.device == load.device;
    EXPECT_TRUE(on_device);
  }
}

// vulkan-compute serves open shapes (format-3 blobs, lowered per binding):
// compiled once, every binding runs that one blob on the device (lavapipe
// here), against the model compiled for the binding alone on the reference
// kernels.
TEST(NativeOpenShapes, VulkanComputeCompiledOnceRunsEveryBindingOnTheDevice) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto plugin = runtime->plugin_host().load("vulkan-compute");
  if (!plugin.ok()) GTEST_SKIP() << "vulkan-compute is not built: " << plugin.status().to_string();
  EXPECT_TRUE((*plugin)->serves_open_shapes());
  bool has_device = false;
  for (const auto& d : runtime->devices()) has_device |= d.uri == "vulkan-compute://0";
  CompileOptions vulkan;
  vulkan.targets = {"vulkan-compute"};
  auto report = compile_pooled(*runtime, "pooled_vulkan", vulkan);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_TRUE(report->open_native) << report->open_per_binding_why;
  if (!has_device) GTEST_SKIP() << "no Vulkan device";
  LoadOptions load;
  load.device = "vulkan-compute://0";
  auto program = runtime->load_program(scratch() / "pooled_vulkan.loom", load).value();
  EXPECT_TRUE(program->function("main").value().open);
  auto session = program->create_session().value();
  CompileOptions none;
  none.targets = {};
  for (auto [n, h, w] : {std::tuple{1, 8, 8}, {2, 5, 9}, {3, 16, 4}, {2, 5, 9}}) {
    CompileOptions fixed = none;
    fixed.input_shapes = {{"x", {n, 3, h, w}}};
    ASSERT_TRUE(compile_pooled(*runtime, "pooled_vulkan_ref", fixed).ok());
    auto oracle = runtime->load_program(scratch() / "pooled_vulkan_ref.loom").value();
    auto want = oracle->create_session().value();
    const Tensor x = pattern({n, 3, h, w}, n + h);
    ASSERT_TRUE(want->set_input("x", x).ok());
    ASSERT_TRUE(want->run().ok());
    ASSERT_TRUE(session->set_input("x", x).ok());
    const Status ran = session->run();
    ASSERT_TRUE(ran.ok()) << ran.to_string();
    EXPECT_EQ(session->output(0).shape(), (Shape{n, 4}));
    EXPECT_LE(max_diff(session->output(0), want->output(0)), 1e-4f) << n << "x3x" << h << "x" << w;
    EXPECT_EQ(session->bound_program(), nullptr);  // compiled once: no per-binding program
    bool on_device = false;
    for (const DelegateTransfers& t : session->transfers()) on_device |= t.device == load.device;
    EXPECT_TRUE(on_device);
  }
}

// A plugin run in a process of its own keeps its capabilities: the child
// forwards cpu-simd's LOOM_PLUGIN_CAP_OPEN_SHAPES, so the program is still
// compiled once and every binding runs the one executable in the child.
TEST(NativeOpenShapes, AnIsolatedPluginIsStillCompiledOnce) {
  RuntimeOptions o;
  o.isolated_plugins = {"cpu-simd"};
  auto created = Runtime::create(o);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  std::unique_ptr<Runtime> runtime = std::move(*created);
  auto plugin = runtime->plugin_host().load("cpu-simd");
  ASSERT_TRUE(plugin.ok()) << plugin.status().to_string();
  EXPECT_TRUE((*plugin)->isolated());
  EXPECT_TRUE((*plugin)->serves_open_shapes());
  CompileOptions simd;
  simd.targets = {"cpu-simd"};
  auto report = compile_pooled(*runtime, "pooled_isolated", simd);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_TRUE(report->open_native) << report->open_per_binding_why;
  auto program = runtime->load_program(scratch() / "pooled_isolated.loom").value();
  auto session = program->create_session().value();
  auto reference = make_runtime();
  ASSERT_NE(reference, nullptr);
  CompileOptions none;
  none.targets = {};
  for (auto [n, h, w] : {std::tuple{1, 8, 8}, {2, 5, 9}, {1, 8, 8}}) {
    const Tensor x = pattern({n, 3, h, w}, n + h);
    ASSERT_TRUE(session->set_input("x", x).ok());
    const Status ran = session->run();
    ASSERT_TRUE(ran.ok()) << ran.to_string();
    EXPECT_EQ(session->output(0).shape(), (Shape{n, 4}));
    EXPECT_EQ(session->bound_program(), nullptr);  // compiled once
    bool on_cpu_simd = false;
    for (const DelegateTransfers& t : session->transfers()) on_cpu_simd |= t.device == "cpu-simd://0";
    EXPECT_TRUE(on_cpu_simd);
    // Against the reference kernels at this binding.
    CompileOptions fixed = none;
    fixed.input_shapes = {{"x", {n, 3, h, w}}};
    ASSERT_TRUE(compile_pooled(*reference, "pooled_isolated_ref", fixed).ok());
    auto oracle = reference->load_program(scratch() / "pooled_isolated_ref.loom").value();
    auto want = oracle->create_session().value();
    ASSERT_TRUE(want->set_input("x", x).ok());
    ASSERT_TRUE(want->run().ok());
    EXPECT_LE(max_diff(session->output(0), want->output(0)), 1e-5f) << n << "x3x" << h << "x" << w;
  }
}

TEST(NativeOpenShapes, CompareBindingsNamesWhatDiffers) {
  graph::Graph a;
  a.tensors.push_back({"x", DType::kF32, {2, 3}, nullptr});
  a.tensors.push_back({"k", DType::kI64, {1},
                       std::make_shared<const std::vector<std::byte>>(8, std::byte{1})});
  a.tensors.push_back({"y", DType::kF32, {2, 3}, nullptr});
  a.nodes.push_back({"r", "Reshape", "", 13, {}, {0, 1}, {2}, {}, 0});
  a.inputs = {0};
  a.outputs = {2};
  graph::Graph b = a;
  b.tensors[0].shape = {5, 3};
  b.tensors[2].shape = {5, 3};
  EXPECT_EQ(lowering::compare_bindings(a, b), "");
  b.tensors[1].data = std::make_shared<const std::vector<std::byte>>(8, std::byte{2});
  EXPECT_EQ(lowering::compare_bindings(a, b),
            "tensor 'k': a constant whose value follows the binding (shapes computed into values)");
  b = a;
  b.nodes[0].op_type = "Expand";
  EXPECT_NE(lowering::compare_bindings(a, b).find("differs at another binding"), std::string::npos);
  b = a;
  b.tensors.pop_back();
  EXPECT_NE(lowering::compare_bindings(a, b).find("at one binding"), std::string::npos);
}

// open_cnn's target [d0, -1], folded from Shape/Gather/Unsqueeze/Concat as
// exporters write it, is spelled [0, -1] for every binding: compiled once,
// and every binding (the runtime checks that the spelling gives the shape
// the binding's own target gives) runs the program's own instructions.
TEST(NativeOpenShapes, AReshapeTargetFromTheBatchSizeIsCompiledOnce) {
  auto runtime = make_runtime();
  ASSERT_NE(runtime, nullptr);
  const fs::path out = scratch() / "open_cnn_native.loom";
  auto report = compile_onnx_file(runtime->plugin_host(), write_open_cnn(), out, {});
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_TRUE(report->open_native) << report->open_per_binding_why;
  auto program = runtime->load_program(out).value();
  auto session = program->create_session().value();
  for (auto [n, h, w] : {std::tuple{1, 6, 6}, {3, 5, 7}, {2, 9, 4}, {3, 5, 7}}) {
    // The oracle: the model compiled for this binding alone.
    CompileOptions fixed;
    fixed.input_shapes = {{"x", {n, 3, h, w}}, {"s", {n}}};
    auto oracle_file = compile(*runtime, "open_cnn_oracle", fixed);
    ASSERT_TRUE(oracle_file.ok()) << oracle_file.status().to_string();
    auto oracle = runtime->load_program(*oracle_file).value()->create_session().value();
    auto got = run(*session, n, h, w, n + h);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    auto want = run(*oracle, n, h, w, n + h);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    EXPECT_EQ(got->y.shape(), (Shape{n, 4 * h * w}));
    EXPECT_LE(max_diff(got->y, want->y), 1e-5f) << n << "x3x" << h << "x" << w;
    EXPECT_LE(max_diff(got->z, want->z), 0.0f);
    EXPECT_EQ(session->bound_program(), nullptr) << "binding " << n << "x3x" << h << "x" << w << " was compiled";
  }
}

// --- lowering::check_binding on a signature of its own ----------------------

TEST(CheckBinding, SharedSymbolsMustAgreeAcrossInputs) {
  lowering::OpenSignature sig;
  sig.inputs = {open_value("ids", {-1, -1}, {"batch", "seq"}), open_value("mask", {-1, -1}, {"batch", "seq"})};
  EXPECT_TRUE(lowering::check_binding(sig, std::vector<Shape>{{2, 7}, {2, 7}}).ok());
  Status st = lowering::check_binding(sig, std::vector<Shape>{{2, 7}, {2, 8}});
  EXPECT_EQ(st.message(), "input 'mask' dimension 1 ('seq') is 8, but input 'ids' dimension 1 binds 'seq' to 7");
  // Anonymous open dimensions are independent.
  sig.inputs[1].dim_symbols = {};
  EXPECT_TRUE(lowering::check_binding(sig, std::vector<Shape>{{2, 7}, {5, 8}}).ok());
  st = lowering::check_binding(sig, std::vector<Shape>{{2, 7}});
  EXPECT_EQ(st.message(), "got 1 input shapes for 2 inputs");
}

}  // namespace
}  // namespace loom::compiler::testing
