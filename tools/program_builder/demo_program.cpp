#include "program_builder/demo_program.hpp"

#include <iterator>
#include <memory>
#include <random>
#include <span>
#include <string_view>
#include <utility>

#include "graph/graph.hpp"
#include "graph/graph_codec.hpp"
#include "host/compile_entries.hpp"
#include "host/plugin_host.hpp"
#include "loom/irpa.hpp"
#include "loom/runtime.hpp"
#include "loom/tensor_metadata.hpp"
#include "program_builder/program_builder.hpp"

namespace loom::tools {
namespace {

Tensor random_tensor(Shape shape, float scale, std::mt19937_64& rng) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(shape)).value();
  std::uniform_real_distribution<float> dist(-scale, scale);
  float* p = t.data_as<float>();
  for (uint64_t i = 0; i < t.element_count(); ++i) p[i] = dist(rng);
  return t;
}

AttributeDef int_attr(std::string name, int64_t v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kInt;
  a.i = v;
  return a;
}

// The opset the demo's graphs are written for (Softmax's axis = -1 is the
// opset 13 meaning).
constexpr int64_t kOpset = 17;

graph::Node node(std::string name, std::string op, std::vector<int32_t> in,
                 std::vector<int32_t> out, std::vector<AttributeDef> attributes = {}) {
  graph::Node n;
  n.name = std::move(name);
  n.op_type = std::move(op);
  n.opset = kOpset;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attributes = std::move(attributes);
  return n;
}

// The MLP as the graph a plugin compiles: x and the four weights are the
// graph's inputs, in the order of the delegate call's operands (the weights
// stay program parameters: inline or external, the plugin sees operands).
graph::Graph mlp_graph(const MlpShape& s) {
  graph::Graph g;
  g.name = "mlp";
  auto t = [&](const char* name, Shape shape) {
    return g.add_tensor({name, DType::kF32, std::move(shape), nullptr});
  };
  const int32_t x = t("x", {s.batch, s.in}), w1 = t("w1", {s.in, s.hidden});
  const int32_t b1 = t("b1", {s.hidden}), w2 = t("w2", {s.hidden, s.out}), b2 = t("b2", {s.out});
  const int32_t h = t("h", {s.batch, s.hidden}), h1 = t("h1", {s.batch, s.hidden});
  const int32_t r = t("r", {s.batch, s.hidden}), z = t("z", {s.batch, s.out});
  const int32_t z1 = t("z1", {s.batch, s.out}), y = t("y", {s.batch, s.out});
  g.inputs = {x, w1, b1, w2, b2};
  g.outputs = {y};
  g.nodes.push_back(node("matmul1", "MatMul", {x, w1}, {h}));
  g.nodes.push_back(node("add1", "Add", {h, b1}, {h1}));
  g.nodes.push_back(node("relu", "Relu", {h1}, {r}));
  g.nodes.push_back(node("matmul2", "MatMul", {r, w2}, {z}));
  g.nodes.push_back(node("add2", "Add", {z, b2}, {z1}));
  g.nodes.push_back(node("softmax", "Softmax", {z1}, {y}, {int_attr("axis", -1)}));
  return g;
}

struct Variant {
  std::string plugin;
  host::CompiledBlob blob;
};

struct Variants {
  std::vector<Variant> compiled;
  std::vector<std::pair<std::string, std::string>> declined;  // plugin, why
};

// Compiles all of `g` with `plugin`; an error names the first node the
// plugin does not take.
Result<host::CompiledBlob> compile_whole(const host::LoadedPlugin& plugin, const graph::Graph& g,
                                         std::span<const std::byte> bytes) {
  LOOM_ASSIGN_OR_RETURN(std::vector<bool> supported,
                        host::compile_supported(plugin, bytes, g.nodes.size()));
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!supported[i]) {
      return Status(StatusCode::kFailedPrecondition,
                    "plugin '" + plugin.name() + "' does not take " + graph::describe_node(g, i));
    }
  }
  return host::compile(plugin, bytes);
}

// One variant of `g` per target, in order; `targets` empty: one for every
// plugin of `runtime` that compiles all of `g` (none is an error), and why
// each other one did not.
Result<Variants> compile_variants(Runtime& runtime, const graph::Graph& g,
                                  const std::vector<std::string>& targets, std::string_view what) {
  LOOM_RETURN_IF_ERROR(graph::validate(g));
  LOOM_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, graph::encode_graph(g));
  host::PluginHost& host = runtime.plugin_host();
  Variants out;
  if (!targets.empty()) {
    for (const std::string& name : targets) {
      LOOM_ASSIGN_OR_RETURN(std::shared_ptr<host::LoadedPlugin> plugin,
                            host::load_compile_target(host, name));
      auto blob = compile_whole(*plugin, g, bytes);
      if (!blob.ok()) {
        return blob.status().with_context("compiling the " + std::string(what) + " for '" + name + "'");
      }
      out.compiled.push_back({name, std::move(*blob)});
    }
    return out;
  }
  std::string skipped;
  for (const PluginRecord& record : host.plugins()) {
    if (record.state == PluginState::kRejected) continue;
    auto plugin = host::load_compile_target(host, record.name);
    auto blob = plugin.ok() ? compile_whole(**plugin, g, bytes)
                            : Result<host::CompiledBlob>(plugin.status());
    if (!blob.ok()) {
      skipped += (skipped.empty() ? " " : "; ") + blob.status().message();
      out.declined.emplace_back(record.name, blob.status().message());
      continue;
    }
    out.compiled.push_back({record.name, std::move(*blob)});
  }
  if (out.compiled.empty()) {
    return Status(StatusCode::kFailedPrecondition,
                  "no plugin compiles the " + std::string(what) +
                      (skipped.empty() ? std::string(" (no plugins found)") : ":" + skipped));
  }
  return out;
}

}  // namespace

Tensor mlp_input(const MlpShape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return random_tensor({s.batch, s.in}, 1.0f, rng);
}

std::vector<NamedWeight> mlp_weights(const MlpShape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<NamedWeight> out;
  out.push_back({"w1", random_tensor({s.in, s.hidden}, 0.2f, rng)});
  out.push_back({"b1", random_tensor({s.hidden}, 0.1f, rng)});
  out.push_back({"w2", random_tensor({s.hidden, s.out}, 0.2f, rng)});
  out.push_back({"b2", random_tensor({s.out}, 0.1f, rng)});
  return out;
}

Result<ProgramWriter> build_mlp_program(Runtime& runtime, const MlpShape& s, uint64_t seed,
                                        bool with_delegate) {
  MlpOptions options;
  options.with_delegate = with_delegate;
  LOOM_ASSIGN_OR_RETURN(MlpProgram program, build_mlp(runtime, s, mlp_weights(s, seed), options));
  return std::move(program.writer);
}

Result<MlpProgram> build_mlp(Runtime& runtime, const MlpShape& s,
                             const std::vector<NamedWeight>& weights, const MlpOptions& options) {
  const std::pair<const char*, Shape> expected[] = {
      {"w1", {s.in, s.hidden}}, {"b1", {s.hidden}}, {"w2", {s.hidden, s.out}}, {"b2", {s.out}}};
  if (weights.size() != std::size(expected)) {
    return invalid_argument("the demo MLP takes 4 weights (w1, b1, w2, b2), got " +
                            std::to_string(weights.size()));
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor& t = weights[i].tensor;
    if (weights[i].name != expected[i].first || t.dtype() != DType::kF32 ||
        t.shape() != expected[i].second) {
      return invalid_argument("demo MLP weight " + std::to_string(i) + " is '" +
                              weights[i].name + "' " + std::string(dtype_name(t.dtype())) + " " +
                              shape_to_string(t.shape()) + ", expected '" + expected[i].first +
                              "' f32 " + shape_to_string(expected[i].second));
    }
  }

  ProgramBuilder b("loom demo");
  MlpProgram out;
  io::irpa::ArchiveBuilder archive;
  std::vector<uint32_t> params;
  for (const NamedWeight& w : weights) {
    if (!options.external_weights) {
      params.push_back(b.add_parameter(w.name, w.tensor));
      continue;
    }
    ArchiveRef where{options.scope, options.archive};
    params.push_back(options.record_checksums
                         ? b.add_external_parameter(w.name, w.tensor, where)
                         : b.add_external_parameter(w.name, w.tensor.dtype(), w.tensor.shape(),
                                                    where));
    std::string metadata = io::encode_tensor_metadata(w.tensor.dtype(), w.tensor.shape());
    LOOM_RETURN_IF_ERROR(archive.add_data(w.name, w.tensor.bytes(), std::move(metadata)));
  }
  if (options.external_weights) {
    LOOM_ASSIGN_OR_RETURN(out.archive, archive.write_buffer());
  }
  const uint32_t w1 = params[0], b1 = params[1], w2 = params[2], b2 = params[3];

  if (options.with_delegate) {
    LOOM_ASSIGN_OR_RETURN(Variants variants,
                          compile_variants(runtime, mlp_graph(s), options.targets, "demo MLP"));
    out.declined = std::move(variants.declined);
    std::vector<uint32_t> artifacts;
    for (Variant& v : variants.compiled) {
      artifacts.push_back(b.add_artifact(v.blob.loader_key, v.blob.format_version,
                                         "mlp." + v.plugin, std::move(v.blob.bytes)));
      out.compiled_for.push_back(v.plugin);
    }
    const uint32_t mlp = b.add_delegate("mlp", std::move(artifacts));
    FunctionBuilder f = b.add_function("main");
    uint32_t x = f.input("x", DType::kF32, {s.batch, s.in});
    uint32_t y = f.value("y", DType::kF32, {s.batch, s.out});
    f.delegate_call(mlp, {x, f.constant(w1), f.constant(b1), f.constant(w2), f.constant(b2)},
                    {y});
    f.output(y);
  }
  {
    FunctionBuilder f = b.add_function("reference");
    uint32_t x = f.input("x", DType::kF32, {s.batch, s.in});
    uint32_t h = f.value("h", DType::kF32, {s.batch, s.hidden});
    uint32_t h1 = f.value("h1", DType::kF32, {s.batch, s.hidden});
    uint32_t r = f.value("r", DType::kF32, {s.batch, s.hidden});
    uint32_t z = f.value("z", DType::kF32, {s.batch, s.out});
    uint32_t z1 = f.value("z1", DType::kF32, {s.batch, s.out});
    uint32_t y = f.value("y", DType::kF32, {s.batch, s.out});
    f.kernel_call("MatMul", {x, f.constant(w1)}, {h});
    f.kernel_call("Add", {h, f.constant(b1)}, {h1});
    f.kernel_call("Relu", {h1}, {r});
    f.kernel_call("MatMul", {r, f.constant(w2)}, {z});
    f.kernel_call("Add", {z, f.constant(b2)}, {z1});
    f.kernel_call("Softmax", {z1}, {y}, {int_attr("axis", -1)});
    f.output(y);
  }
  LOOM_ASSIGN_OR_RETURN(out.writer, b.finish());
  return out;
}

Result<ProgramWriter> build_single_op_program(Runtime& runtime, int64_t n,
                                             const std::string& target) {
  graph::Graph g;
  g.name = "relu";
  const int32_t x = g.add_tensor({"x", DType::kF32, {n}, nullptr});
  const int32_t y = g.add_tensor({"y", DType::kF32, {n}, nullptr});
  g.inputs = {x};
  g.outputs = {y};
  g.nodes.push_back(node("relu", "Relu", {x}, {y}));
  LOOM_ASSIGN_OR_RETURN(Variants variants, compile_variants(runtime, g, {target}, "Relu program"));
  ProgramBuilder b("loom benchmark");
  Variant& v = variants.compiled.front();
  uint32_t art = b.add_artifact(v.blob.loader_key, v.blob.format_version, "relu." + v.plugin,
                                std::move(v.blob.bytes));
  uint32_t d = b.add_delegate("relu", {art});
  FunctionBuilder f = b.add_function("main");
  uint32_t fx = f.input("x", DType::kF32, {n});
  uint32_t fy = f.value("y", DType::kF32, {n});
  f.delegate_call(d, {fx}, {fy});
  f.output(fy);
  return b.finish();
}

}  // namespace loom::tools
