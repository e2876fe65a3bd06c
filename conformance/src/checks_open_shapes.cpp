// execution.open_shapes: a plugin that declares LOOM_PLUGIN_CAP_OPEN_SHAPES
// (ABI 1.2) compiles ONNX node tests once with every input dimension open,
// and that one program runs at bindings it never saw, each compared with the
// reference kernels compiled for that binding alone.
//
// The bindings: the data set's own, then two derived from it by mapping
// every dimension size n >= 2 to n + 1 and to 2n - 1, the same map for every
// input, so that dimensions that must agree still agree and broadcast 1s
// stay 1. A derived binding the reference kernels refuse (an attribute such
// as kernel_shape ties a size) is not counted. They run on one session in
// the order data set, n + 1, 2n - 1, data set again: alternating bindings
// must not disturb each other.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "check_context.hpp"
#include "loom/compiler.hpp"
#include "loom/conformance/onnx_cases.hpp"
#include "loom/conformance/onnx_runner.hpp"
#include "loom/conformance/time_scale.hpp"
#include "loom/runtime.hpp"

namespace loom::conformance::detail {

namespace fs = std::filesystem;
fs::path default_onnx_dir();

namespace {

// Cases that usually compile once on a plugin that serves open shapes;
// tried first, then the rest in discovery order.
constexpr std::string_view kOpenCases[] = {
    "test_relu", "test_add_bcast", "test_matmul_2d", "test_sigmoid", "test_softmax_axis_1",
    "test_conv_with_strides_padding", "test_averagepool_2d_default", "test_tanh", "test_mul_bcast",
    "test_maxpool_2d_default"};

using Inputs = std::vector<NamedTensor>;

// The data set's inputs with every dimension size n >= 2 mapped by `map`
// and values in [0.05, 0.95] (inside the domain of every unary operator of
// the node tests). False if an input is not f32.
bool derive(const Inputs& base, int64_t (*map)(int64_t), uint64_t seed, Inputs* out) {
  out->clear();
  uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
  for (const NamedTensor& in : base) {
    if (in.tensor.dtype() != DType::kF32) return false;
    Shape shape = in.tensor.shape();
    for (int64_t& d : shape) d = d >= 2 ? map(d) : d;
    auto t = Tensor::zeros(DType::kF32, shape);
    if (!t.ok()) return false;
    float* v = t->data_as<float>();
    for (uint64_t i = 0; i < t->element_count(); ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v[i] = 0.05f + 0.9f * static_cast<float>(x >> 40) / static_cast<float>(1u << 24);
    }
    out->push_back({in.name, std::move(*t)});
  }
  return true;
}

std::string shapes_of(const Inputs& inputs) {
  std::string s;
  for (const NamedTensor& in : inputs) {
    s += (s.empty() ? "" : ", ") + in.name + " " + shape_to_string(in.tensor.shape());
  }
  return s;
}

// The reference kernels' outputs for `inputs`, from `program`: the model
// compiled with its input dimensions open and no plugin, which the runtime
// compiles per binding (the path that does not use the plugin's open-shape
// support). An error means the binding is not one the model allows.
Result<std::vector<NamedTensor>> reference_outputs(Program& program, const Inputs& inputs) {
  auto session = program.create_session();
  if (!session.ok()) return session.status();
  return run_session_once(**session, inputs);
}

}  // namespace

Verdict open_shape_bindings(CheckContext& ctx) {
  auto plugin = ctx.load();
  if (!plugin.ok()) return fail(plugin.status().message());
  if (!(*plugin)->serves_open_shapes()) {
    return skip("the plugin does not declare LOOM_PLUGIN_CAP_OPEN_SHAPES (ABI 1.2): the host "
                "compiles its subgraphs per binding");
  }
  if ((*plugin)->api().compile == nullptr) {
    return fail("the plugin declares LOOM_PLUGIN_CAP_OPEN_SHAPES but has no compile entries");
  }
  const std::string device = ctx.options().device;
  if (device.empty()) return fail("no device to run on");
  std::vector<fs::path> roots = ctx.options().onnx_dirs;
  if (roots.empty()) roots.push_back(default_onnx_dir());
  std::error_code ec;
  for (const fs::path& r : roots) {
    if (!fs::is_directory(r, ec)) {
      return skip("no ONNX test cases: " + r.string() +
                  " does not exist (install libonnx-testdata or give --onnx-dir)");
    }
  }
  auto cases = discover_cases(roots);
  if (!cases.ok()) return fail(cases.status().message());
  std::stable_partition(cases->begin(), cases->end(), [](const TestCase& c) {
    return std::find(std::begin(kOpenCases), std::end(kOpenCases), c.name) != std::end(kOpenCases);
  });
  RuntimeOptions options = plugin_runtime_options(ctx.manifest(), ctx.options().plugin_options);
  auto plugin_runtime = Runtime::create(options);
  if (!plugin_runtime.ok()) return fail("runtime: " + plugin_runtime.status().message());
  RuntimeOptions reference_options = options;
  reference_options.plugin_paths.clear();
  auto reference_runtime = Runtime::create(reference_options);
  if (!reference_runtime.ok()) return fail("runtime: " + reference_runtime.status().message());
  auto scratch = make_scratch_dir("conformance-open");
  if (!scratch.ok()) return fail(scratch.status().message());
  const ScratchCleanup cleanup{*scratch};

  const size_t wanted = ctx.count(4, 24);
  size_t counted = 0, tried = 0, runs = 0, per_binding = 0;
  std::string first_reason;  // why the first case was compiled per binding
  std::string names;         // of the cases counted
  Tolerance tolerance;
  for (const TestCase& test : *cases) {
    if (counted >= wanted || tried >= 300) break;
    auto summary = summarize_model(test.dir / "model.onnx");
    if (!summary.ok() || !summary->non_tensor.empty() || !summary->values.empty() || !summary->out_of_scope.empty()) {
      continue;  // tensors only here
    }
    auto data = read_data_set(test.data_sets[0], summary->inputs, summary->outputs);
    if (!data.ok() || data->inputs.empty()) continue;
    Inputs plus_one, doubled;
    if (!derive(data->inputs, [](int64_t n) { return n + 1; }, 1, &plus_one) ||
        !derive(data->inputs, [](int64_t n) { return 2 * n - 1; }, 2, &doubled)) {
      continue;  // f32 inputs only: an integer input is usually a shape or an index
    }
    ++tried;
    // Compiled once, every input dimension open, for the plugin alone.
    compiler::CompileOptions compile;
    compile.targets = {ctx.manifest().name};
    for (const NamedTensor& in : data->inputs) {
      compile.input_shapes.emplace_back(in.name, Shape(in.tensor.rank(), -1));
    }
    const fs::path open_file = *scratch / (test.name + ".open.loom");
    ctx.note("compiling " + test.name + " once with every input dimension open");
    auto report = compiler::compile_onnx_file((*plugin_runtime)->plugin_host(), test.dir / "model.onnx",
                                              open_file, compile);
    if (!report.ok() || report->open_inputs.empty()) continue;
    if (!report->open_native) {
      if (per_binding++ == 0) first_reason = test.name + ": " + report->open_per_binding_why;
      continue;
    }
    size_t taken = 0;
    for (const compiler::TargetReport& t : report->targets) taken += t.nodes;
    if (taken == 0) continue;
    LoadOptions load;
    load.device = device;
    // As execution.onnx_node_tests: 30 s, stretched on a slow build. A
    // first dispatch on lavapipe compiles its shaders; on a 2-core CI machine
    // running a dozen tests at once, 10 s was once not enough for a 3 x 4
    // MatMul (the same check passed when run alone).
    load.run_timeout = scaled(std::chrono::milliseconds(30'000));
    auto program = (*plugin_runtime)->load_program(open_file, load);
    if (!program.ok()) {
      return fail(test.name + ": the program compiled once with open dimensions does not load on " +
                  device + ": " + program.status().message());
    }
    auto session = (*program)->create_session();
    if (!session.ok()) return fail(test.name + ": session: " + session.status().message());

    const Inputs* bindings[] = {&data->inputs, &plus_one, &doubled, &data->inputs};
    const char* labels[] = {"the data set's binding", "a binding with every size n >= 2 made n + 1",
                            "a binding with every size n >= 2 made 2n - 1",
                            "the data set's binding again"};
    compiler::CompileOptions reference_compile = compile;
    reference_compile.targets.clear();
    const fs::path reference_file = *scratch / (test.name + ".reference.loom");
    auto reference_report = compiler::compile_onnx_file((*reference_runtime)->plugin_host(),
                                                        test.dir / "model.onnx", reference_file,
                                                        reference_compile);
    if (!reference_report.ok()) continue;
    auto reference = (*reference_runtime)->load_program(reference_file);
    if (!reference.ok()) continue;
    std::vector<std::vector<NamedTensor>> expected(3);
    std::vector<bool> valid(3, false);
    for (size_t b = 0; b < 3; ++b) {
      ctx.note(test.name + ": reference kernels at " + shapes_of(*bindings[b]));
      auto ref = reference_outputs(**reference, *bindings[b]);
      if (ref.ok()) {
        expected[b] = std::move(*ref);
        valid[b] = true;
      }
    }
    if (!valid[0] || (!valid[1] && !valid[2])) continue;  // no binding besides the data set's
    for (size_t b = 0; b < 4; ++b) {
      const size_t e = b == 3 ? 0 : b;
      if (!valid[e]) continue;
      const std::string where = test.name + ", " + labels[b] + " (" + shapes_of(*bindings[b]) + ")";
      ctx.note("running " + where + " on " + device);
      auto got = run_session_once(**session, *bindings[b]);
      if (!got.ok()) return fail(where + ": " + got.status().message());
      ++runs;
      bool on_device = false;
      for (const DelegateTransfers& t : (*session)->transfers()) {
        if (t.device == device) on_device = true;
        if (t.device != device && t.device != "reference") {
          return fail(where + ": delegate " + t.delegate + " ran on " + t.device + ", not " + device);
        }
      }
      if (!on_device) return fail(where + ": no delegate ran on " + device);
      for (const NamedTensor& want : expected[e]) {
        auto it = std::find_if(got->begin(), got->end(),
                               [&](const NamedTensor& g) { return g.name == want.name; });
        if (it == got->end()) return fail(where + ": no output '" + want.name + "'");
        if (Status st = compare_tensors(want.name, it->tensor, want.tensor, tolerance); !st.ok()) {
          return fail(where + ": " + st.message());
        }
      }
    }
    ++counted;
    names += (names.empty() ? "" : ", ") + test.name;
  }
  if (counted == 0) {
    return fail("the plugin declares LOOM_PLUGIN_CAP_OPEN_SHAPES but compiled none of the " +
                std::to_string(tried) + " ONNX node tests tried once for every binding (" +
                std::to_string(per_binding) + " compiled per binding instead" +
                (first_reason.empty() ? "" : "; first: " + first_reason) + ")");
  }
  return pass(std::to_string(counted) + " cases compiled once ran " + std::to_string(runs) +
              " bindings matching the reference kernels (" + names + ")");
}

}  // namespace loom::conformance::detail
