// `loom compile MODEL.onnx -o OUT.loom`: ONNX model in, Loom program out
// (loom/compiler.hpp), with a progress bar on stderr and a summary of what
// went where on stdout.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.hpp"

#if LOOM_HAVE_COMPILER
#include "loom/compiler.hpp"
#include "loom/runtime.hpp"
#endif

namespace loom::cli {

#if LOOM_HAVE_COMPILER
namespace {

struct InputShapeArg {
  std::string name;
  Shape shape;                          // -1: open
  std::vector<compiler::DimRange> ranges;  // empty when no dimension has bounds
};

Result<int64_t> parse_size(const std::string& text, const std::string& part, bool allow_empty) {
  if (part.empty() && allow_empty) return int64_t{0};
  char* end = nullptr;
  errno = 0;
  const long long v = part.empty() ? -1 : std::strtoll(part.c_str(), &end, 10);
  if (part.empty() || *end != '\0' || errno != 0 || v < 0) {
    return invalid_argument("--input-shape '" + text + "': '" + part +
                            "' is not a dimension (0 or more, '?' for an open one, or MIN..MAX)");
  }
  return static_cast<int64_t>(v);
}

// "x=1x3x224x224" or "x=1,3,224,224"; "?" leaves a dimension open, "32..2048"
// leaves it open within bounds (either side may be left out: "32..").
Result<InputShapeArg> parse_input_shape(const std::string& text) {
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0) {
    return invalid_argument("--input-shape '" + text + "': expected NAME=DIMS, e.g. x=1x3x224x224 or x=1,3,?,?");
  }
  InputShapeArg out;
  out.name = text.substr(0, eq);
  std::string dims = text.substr(eq + 1);
  std::replace(dims.begin(), dims.end(), ',', 'x');
  std::stringstream in(dims);
  std::string part;
  bool bounded = false;
  while (std::getline(in, part, 'x')) {
    compiler::DimRange range;
    const size_t dots = part.find("..");
    if (part == "?") {
      out.shape.push_back(-1);
    } else if (dots != std::string::npos) {
      LOOM_ASSIGN_OR_RETURN(range.min, parse_size(text, part.substr(0, dots), true));
      LOOM_ASSIGN_OR_RETURN(range.max, parse_size(text, part.substr(dots + 2), true));
      if (range.max != 0 && range.min > range.max) {
        return invalid_argument("--input-shape '" + text + "': '" + part + "' is an empty range");
      }
      out.shape.push_back(-1);
      bounded = true;
    } else {
      LOOM_ASSIGN_OR_RETURN(int64_t v, parse_size(text, part, false));
      out.shape.push_back(v);
    }
    out.ranges.push_back(range);
  }
  if (dims.empty()) out.shape.clear();  // "x=" binds a scalar
  if (!bounded) out.ranges.clear();
  return out;
}

std::vector<std::string> split_targets(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const std::string& v : values) {
    std::stringstream in(v);
    std::string part;
    while (std::getline(in, part, ',')) {
      if (!part.empty()) out.push_back(part);
    }
  }
  return out;
}

// A bar redrawn in place on stderr when stderr is a terminal. Otherwise one
// plain line per stage, on stdout: a script's stderr then holds nothing but
// the one-line error ("loom: error: ...") when the compile fails.
class Progress {
 public:
  Progress() : tty_(::isatty(STDERR_FILENO) == 1) {}
  ~Progress() { finish(); }

  void update(std::string_view stage, double fraction) {
    if (tty_) {
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * kWidth);
      std::fprintf(stderr, "\r[%s%s] %3d%% %-10.*s", std::string(filled, '#').c_str(),
                   std::string(kWidth - filled, '.').c_str(), static_cast<int>(fraction * 100),
                   static_cast<int>(stage.size()), stage.data());
      std::fflush(stderr);
      drawn_ = true;
    } else if (stage != last_) {
      std::printf("loom: compile: %.*s\n", static_cast<int>(stage.size()), stage.data());
      std::fflush(stdout);
    }
    last_ = stage;
  }
  // Clears the bar so that what follows starts on a clean line.
  void finish() {
    if (tty_ && drawn_) std::fprintf(stderr, "\r%*s\r", 50, "");
    drawn_ = false;
  }

 private:
  bool tty_;
  bool drawn_ = false;
  std::string last_;
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s.empty() ? "-" : s;
}

// What the compile was for: the targets, whether they were the default, and
// the variants it made.
struct CompileChoice {
  std::vector<std::string> targets;
  bool defaulted = false;
  bool all_variants = false;
};

void print_summary(const compiler::CompileReport& r, const CompileArgs& args,
                   const CompileChoice& choice) {
  std::printf("compiled %s -> %s (opset %lld, %zu nodes in the model)\n", args.model.c_str(),
              args.output.c_str(), static_cast<long long>(r.opset), r.model_nodes);
  if (choice.defaulted) {
    std::printf("targets: %s (every plugin found that compiles, accelerators first, each subgraph "
                "with a variant for every target that takes it and for the reference kernels; "
                "--target chooses, --target none keeps everything on the reference kernels)\n",
                choice.targets.empty() ? "none found" : join(choice.targets).c_str());
  }
  const bool all = choice.all_variants;
  if (all) {
    std::printf("%-16s %9s %6s %8s  %-12s %s\n", "target", "subgraphs", "nodes", "variants",
                "blob bytes", "op types");
  } else {
    std::printf("%-16s %9s %6s  %-12s %s\n", "target", "subgraphs", "nodes", "blob bytes",
                "op types");
  }
  for (const compiler::TargetReport& t : r.targets) {
    if (all) {
      std::printf("%-16s %9zu %6zu %8zu  %-12llu %s\n", t.plugin.c_str(), t.subgraphs, t.nodes,
                  t.extra_variants, static_cast<unsigned long long>(t.blob_bytes),
                  join(t.op_types).c_str());
    } else {
      std::printf("%-16s %9zu %6zu  %-12llu %s\n", t.plugin.c_str(), t.subgraphs, t.nodes,
                  static_cast<unsigned long long>(t.blob_bytes), join(t.op_types).c_str());
    }
  }
  if (all) {
    std::printf("%-16s %9s %6zu %8zu  %-12s %s\n", "reference", "-", r.reference_nodes,
                r.reference_variants, "-", join(r.reference_op_types).c_str());
    for (const compiler::TargetReport& t : r.targets) {
      for (const std::string& failure : t.variant_failures) {
        std::printf("no %s variant for %s\n", t.plugin.c_str(), failure.c_str());
      }
    }
  } else {
    std::printf("%-16s %9s %6zu  %-12s %s\n", "reference", "-", r.reference_nodes, "-",
                join(r.reference_op_types).c_str());
  }
  std::printf("removed: %zu folded, %zu fused, %zu dead\n", r.folded_nodes, r.fused_nodes, r.dead_nodes);
  if (!r.frozen_inputs.empty()) std::printf("frozen inputs: %s\n", join(r.frozen_inputs).c_str());
  if (r.open_native) {
    std::printf("open shapes: compiled once for every binding (the plugins bind shapes per run)\n");
    for (const std::string& in : r.open_inputs) std::printf("  %s\n", in.c_str());
  } else if (!r.open_inputs.empty() || !r.value_inputs.empty()) {
    std::printf("open shapes: the subgraphs are compiled for each binding when the program runs (%s)\n",
                r.open_per_binding_why.c_str());
    for (const std::string& in : r.open_inputs) std::printf("  %s\n", in.c_str());
    for (const std::string& in : r.value_inputs) std::printf("  values of %s\n", in.c_str());
  }
  std::printf("program: %llu bytes\n", static_cast<unsigned long long>(r.program_bytes));
  if (!args.params_out.empty()) {
    std::printf("params: %llu bytes in %s (scope '%s')\n", static_cast<unsigned long long>(r.params_bytes),
                args.params_out.c_str(), args.params_scope.c_str());
  }
}

// The plugins' compile notes, grouped as they came (one subgraph's after
// another's), with a count of int8 steps and f32 fallbacks when there are any.
void print_notes(const std::vector<std::string>& notes) {
  if (notes.empty()) return;
  size_t int8 = 0, f32 = 0, declined = 0;
  for (const std::string& n : notes) {
    int8 += n.find(": compile: int8: ") != std::string::npos;
    f32 += n.find(": compile: f32: ") != std::string::npos;
    declined += n.find(": compile: declined: ") != std::string::npos;
  }
  std::printf("notes from the plugins (%zu int8 steps, %zu nodes in f32 on dequantized values, %zu reasons for "
              "declining quantized nodes):\n",
              int8, f32, declined);
  for (const std::string& n : notes) std::printf("  %s\n", n.c_str());
}

void print_json(const compiler::CompileReport& r, const CompileArgs& args, const CompileChoice& choice,
                const std::vector<std::string>& notes) {
  nlohmann::json targets = nlohmann::json::array();
  for (const compiler::TargetReport& t : r.targets) {
    targets.push_back({{"plugin", t.plugin},
                       {"loader_key", t.loader_key},
                       {"subgraphs", t.subgraphs},
                       {"nodes", t.nodes},
                       {"extra_variants", t.extra_variants},
                       {"variant_failures", t.variant_failures},
                       {"blob_bytes", t.blob_bytes},
                       {"op_types", t.op_types}});
  }
  nlohmann::json doc = {{"model", args.model},
                        {"output", args.output},
                        {"opset", r.opset},
                        {"model_nodes", r.model_nodes},
                        {"variants", choice.all_variants ? "all" : "first"},
                        {"default_targets", choice.defaulted},
                        {"targets", std::move(targets)},
                        {"reference", {{"nodes", r.reference_nodes},
                                       {"variants", r.reference_variants},
                                       {"op_types", r.reference_op_types}}},
                        {"removed", {{"folded", r.folded_nodes},
                                     {"fused", r.fused_nodes},
                                     {"dead", r.dead_nodes}}},
                        {"frozen_inputs", r.frozen_inputs},
                        {"open_inputs", r.open_inputs},
                        {"value_inputs", r.value_inputs},
                        {"open_native", r.open_native},
                        {"open_per_binding_why", r.open_per_binding_why},
                        {"program_bytes", r.program_bytes},
                        {"params_bytes", r.params_bytes},
                        {"notes", notes}};
  std::cout << doc.dump(2) << "\n";
}

}  // namespace

int run_compile(const CompileArgs& args) {
  compiler::CompileOptions options;
  CompileChoice choice;
  choice.targets = split_targets(args.targets);
  choice.defaulted = choice.targets.empty();
  if (choice.targets.size() == 1 && choice.targets[0] == "none") choice.targets.clear();
  if (std::find(choice.targets.begin(), choice.targets.end(), "none") != choice.targets.end()) {
    return fail(invalid_argument("--target none means the reference kernels only: name no plugin with it"));
  }
  choice.all_variants = args.variants.empty() ? choice.defaulted : args.variants == "all";
  for (const std::string& s : args.input_shapes) {
    auto shape = parse_input_shape(s);
    if (!shape.ok()) return fail(shape.status());
    options.input_shapes.emplace_back(shape->name, shape->shape);
    if (!shape->ranges.empty()) options.input_ranges.emplace_back(shape->name, std::move(shape->ranges));
  }
  options.params_out = args.params_out;
  options.params_scope = args.params_scope;
  options.variants = choice.all_variants ? compiler::CompileOptions::Variants::kAll
                                         : compiler::CompileOptions::Variants::kFirst;
  if (args.params_scope.empty() && !args.params_out.empty()) {
    return fail(invalid_argument("--params-scope must not be empty"));
  }
  RuntimeOptions runtime_options;
  for (const std::string& p : args.plugin_paths) runtime_options.plugin_paths.emplace_back(p);
  // Plugins' compile notes ("PLUGIN: compile: ..." info lines: cpu-simd's
  // int8 steps and f32 fallbacks) go to the summary; warnings and errors to
  // stderr as the runtime's default does. The sink's calls are serialized.
  std::vector<std::string> notes;
  runtime_options.log_sink = [&notes](LogLevel level, std::string_view line) {
    if (level == LogLevel::kInfo && line.find(": compile: ") != std::string_view::npos) {
      // Once each: a plugin asked twice about one subgraph says it twice.
      if (std::find(notes.begin(), notes.end(), line) == notes.end()) notes.emplace_back(line);
    } else if (level == LogLevel::kWarning || level == LogLevel::kError) {
      std::cerr << "loom: " << (level == LogLevel::kError ? "error" : "warning") << ": " << line << "\n";
    }
  };
  if (Status s = add_plugin_options(args.plugin_options, &runtime_options); !s.ok()) return fail(s);
  auto runtime = Runtime::create(runtime_options);
  if (!runtime.ok()) return fail(runtime.status());
  if (choice.defaulted) choice.targets = compiler::default_targets((*runtime)->plugin_host());
  options.targets = choice.targets;
  Progress progress;
  if (!args.json) {
    options.progress = [&](std::string_view stage, double f) { progress.update(stage, f); };
  }
  auto report = compiler::compile_onnx_file((*runtime)->plugin_host(), args.model, args.output, options);
  if (!args.json) progress.finish();
  if (!report.ok()) return fail(report.status());
  if (args.json) {
    print_json(*report, args, choice, notes);
  } else {
    print_summary(*report, args, choice);
    print_notes(notes);
  }
  return 0;
}

#else

int run_compile(const CompileArgs&) {
  return fail(Status(StatusCode::kUnimplemented, "compile: loom was built without ONNX support"));
}

#endif

}  // namespace loom::cli
