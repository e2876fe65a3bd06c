// `loom compare`: runs an ONNX model or a compiled program (.loom) on a
// device and on the reference with every value between the program's steps
// observed, reports each step's worst error (as text or --json), names the
// first step that diverges, and with --bisect writes that step as a model or
// program of its own; a front end to loom/conformance/model_compare.hpp.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "loom/conformance/model_compare.hpp"
#include "loom/conformance/onnx_runner.hpp"
#include "loom/runtime.hpp"

namespace loom::cli {
namespace {

namespace cf = loom::conformance;

// The scratch folder of one comparison, removed with this object.
class CompareScratch {
 public:
  explicit CompareScratch(std::filesystem::path dir) : dir_(std::move(dir)) {}
  CompareScratch(const CompareScratch&) = delete;
  CompareScratch& operator=(const CompareScratch&) = delete;
  ~CompareScratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

std::string compare_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

const char* comparison_mode(const cf::ModelComparison& c) {
  if (c.bound_graph) {
    return c.split_delegates ? "an open-shape program bound to the inputs' shapes, every plugin node compiled on its own"
                             : "an open-shape program bound to the inputs' shapes and compiled, as a run does";
  }
  if (c.program) {
    return c.split_delegates ? "every plugin node compiled on its own, from the program's reference variants"
                             : "the program as compiled, instruction by instruction";
  }
  return c.split_delegates ? "every plugin node compiled on its own" : "delegates compared at their outputs";
}

void print_comparison(const std::string& model, const cf::ModelComparison& c) {
  std::cout << "compare " << model << ": " << c.device << " against the " << c.reference
            << " (rtol " << compare_number(c.tolerance.rtol) << ", atol "
            << compare_number(c.tolerance.atol) << "; " << comparison_mode(c) << ")\n";
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const cf::StepComparison& s = c.steps[i];
    std::cout << "step " << i << ": " << s.describe();
    if (s.instruction >= 0) std::cout << " (instruction " << s.instruction << ")";
    std::cout << " on " << s.ran_on << "\n";
    for (const cf::ValueComparison& v : s.outputs) {
      std::cout << "  " << v.value << ": ";
      if (!v.difference.mismatch.empty()) {
        std::cout << "OUTSIDE: " << v.detail << "\n";
        continue;
      }
      std::cout << "max |diff| " << compare_number(v.difference.max_abs_diff);
      if (v.difference.within()) {
        std::cout << ", within\n";
      } else {
        std::cout << ", OUTSIDE: " << v.detail << (s.inputs_within ? "" : " (its inputs already were)")
                  << "\n";
      }
    }
  }
}

// The message naming the first divergent step.
std::string divergence_text(const std::string& model, const cf::ModelComparison& c) {
  const cf::StepComparison& s = c.steps[static_cast<size_t>(c.first_divergent)];
  std::string text = model + " on " + c.device + " diverges from the " + c.reference + " first at " +
                     s.describe();
  for (const cf::ValueComparison& v : s.outputs) {
    if (!v.difference.within()) {
      text += ": output '" + v.value + "' " + v.detail;
      break;
    }
  }
  text += ", while its inputs are within the tolerance";
  if (s.step.nodes.size() > 1 && !c.split_delegates) {
    text += " (a delegate of " + std::to_string(s.step.nodes.size()) +
            " nodes: --split-delegates compares each node)";
  }
  return text;
}

// A number JSON can hold: infinities and NaN become strings.
nlohmann::json compare_json_number(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

nlohmann::json comparison_json(const std::string& model, const cf::ModelComparison& c) {
  nlohmann::json steps = nlohmann::json::array();
  for (const cf::StepComparison& s : c.steps) {
    nlohmann::json nodes = nlohmann::json::array();
    for (size_t n = 0; n < s.step.nodes.size(); ++n) {
      nodes.push_back({{"name", s.step.nodes[n]}, {"op_type", s.step.op_types[n]}});
    }
    nlohmann::json values = nlohmann::json::array();
    for (const cf::ValueComparison& v : s.outputs) {
      values.push_back({{"value", v.value},
                        {"within", v.difference.within()},
                        {"max_abs_diff", compare_json_number(v.difference.max_abs_diff)},
                        {"elements", v.difference.elements},
                        {"outside", v.difference.outside},
                        {"detail", v.detail}});
    }
    nlohmann::json step = {{"describe", s.describe()},
                           {"delegate", s.step.delegate},
                           {"ran_on", s.ran_on},
                           {"nodes", nodes},
                           {"inputs", s.step.inputs},
                           {"inputs_within", s.inputs_within},
                           {"within", s.within()},
                           {"outputs", values}};
    if (s.instruction >= 0) step["instruction"] = s.instruction;
    steps.push_back(std::move(step));
  }
  return {{"model", model},
          {"kind", c.program ? "program" : "onnx"},
          {"device", c.device},
          {"reference", c.reference},
          {"rtol", c.tolerance.rtol},
          {"atol", c.tolerance.atol},
          {"split_delegates", c.split_delegates},
          {"first_divergent", c.first_divergent},
          {"steps", steps}};
}

Result<std::vector<NamedTensor>> read_compare_inputs(const std::vector<std::string>& texts) {
  std::vector<NamedTensor> inputs;
  for (const std::string& text : texts) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
      return invalid_argument("--input '" + text + "' is not NAME=PATH.npy");
    }
    const std::string name = text.substr(0, eq), path = text.substr(eq + 1);
    if (path == "random") {
      return invalid_argument("--input " + name + "=random: loom compare needs input files (.npy or .pb), "
                              "so that a divergence can be reproduced");
    }
    for (const NamedTensor& in : inputs) {
      if (in.name == name) return invalid_argument("--input " + name + " is given twice");
    }
    Result<Tensor> tensor = read_input_file(path);
    if (!tensor.ok()) return tensor.status().with_context("--input " + name);
    inputs.push_back({name, std::move(*tensor)});
  }
  return inputs;
}

// --rtol / --atol: a finite number >= 0.
Result<double> parse_tolerance(const std::string& text, const char* option) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(value) ||
      value < 0) {
    return invalid_argument(std::string(option) + " '" + text + "' is not a number >= 0 (for example 1e-4)");
  }
  return value;
}

Result<cf::ModelComparison> compare_once(Runtime& runtime, const CompareArgs& args,
                                         const std::vector<NamedTensor>& inputs, bool split) {
  cf::ModelCompareOptions options;
  options.device = args.device;
  options.reference_device = args.reference;
  LOOM_ASSIGN_OR_RETURN(options.tolerance.rtol, parse_tolerance(args.rtol, "--rtol"));
  LOOM_ASSIGN_OR_RETURN(options.tolerance.atol, parse_tolerance(args.atol, "--atol"));
  options.split_delegates = split;
  LOOM_ASSIGN_OR_RETURN(std::filesystem::path dir, cf::make_scratch_dir("compare"));
  CompareScratch scratch(dir);
  return cf::compare_model(runtime, args.model, inputs, options, scratch.dir());
}

// --bisect: the first divergent step as a model of its own; a delegate of
// several nodes is first narrowed with every node compiled on its own.
Status bisect(Runtime& runtime, const CompareArgs& args, const std::vector<NamedTensor>& inputs,
              const cf::ModelComparison& found) {
  const cf::ModelComparison* use = &found;
  cf::ModelComparison narrowed;
  const cf::StepComparison& step = found.steps[static_cast<size_t>(found.first_divergent)];
  // An open-shape program has no instruction to cut out: write_reproducer
  // says so.
  if (step.step.nodes.size() > 1 && !found.split_delegates && !found.bound_graph) {
    // A program is cut at its instructions: the node found inside the
    // delegate is told, the whole delegate call is written.
    Result<cf::ModelComparison> split = compare_once(runtime, args, inputs, true);
    if (!split.ok() && !found.program) return split.status();
    if (!split.ok()) {
      std::cout << "bisect: not narrowed inside the delegate: " << escape_control(split.status().message())
                << "\n";
    } else if (split->first_divergent >= 0) {
      narrowed = std::move(*split);
      std::cout << "bisect: with every node compiled on its own, the first to diverge is "
                << narrowed.steps[static_cast<size_t>(narrowed.first_divergent)].describe()
                << (found.program ? "; a program is cut at its instructions: writing the delegate call" : "")
                << "\n";
      if (!found.program) use = &narrowed;
    } else {
      std::cout << "bisect: compiled node by node, every value is within the tolerance: the "
                   "divergence needs the nodes fused; keeping the whole delegate\n";
    }
  }
  const size_t index = static_cast<size_t>(use->first_divergent);
  LOOM_ASSIGN_OR_RETURN(cf::Reproducer r, cf::write_reproducer(args.model, *use, index, args.bisect));
  std::cout << "bisect: wrote " << r.model.string() << " (" << r.nodes << (r.nodes == 1 ? " node" : " nodes")
            << ", " << use->steps[index].describe() << "): its inputs as .npy files and its outputs on "
            << "the " << use->reference << " as expected_*.npy, both from the reference run\n";
  std::string command = "loom run " + r.model.string() + " --device " + args.device;
  for (const auto& [name, path] : r.inputs) command += " --input " + name + "=" + path.string();
  std::cout << "reproduce: " << command << "\n";
  return Status();
}

}  // namespace

int run_compare(const CompareArgs& args) {
  if (args.json && !args.bisect.empty()) {
    return fail(invalid_argument("--json and --bisect do not go together (--bisect reports in text)"));
  }
  for (const auto& [text, option] : {std::pair{&args.rtol, "--rtol"}, std::pair{&args.atol, "--atol"}}) {
    if (auto t = parse_tolerance(*text, option); !t.ok()) return fail(t.status());
  }
  RuntimeOptions runtime_options;
  runtime_options.threads = args.threads;
  if (Status s = add_plugin_options(args.plugin_options, &runtime_options); !s.ok()) return fail(s);
  auto runtime = Runtime::create(runtime_options);
  if (!runtime.ok()) return fail(runtime.status());
  auto inputs = read_compare_inputs(args.inputs);
  if (!inputs.ok()) return fail(inputs.status());
  auto found = compare_once(**runtime, args, *inputs, args.split_delegates);
  if (!found.ok()) return fail(found.status());
  if (args.json) {
    std::cout << comparison_json(args.model, *found).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    print_comparison(args.model, *found);
  }
  if (found->first_divergent < 0) {
    if (args.json) return 0;
    size_t values = 0;
    for (const cf::StepComparison& s : found->steps) values += s.outputs.size();
    std::cout << "all " << values << " values of " << found->steps.size()
              << " steps are within the tolerance\n";
    if (!args.bisect.empty()) std::cout << "bisect: nothing diverges, nothing written\n";
    return 0;
  }
  if (!args.bisect.empty()) {
    if (Status s = bisect(**runtime, args, *inputs, *found); !s.ok()) return fail(s.with_context("--bisect"));
  }
  // A divergence is the command's failure: one error line, exit 1.
  std::fprintf(stderr, "loom: error: %s\n", escape_control(divergence_text(args.model, *found)).c_str());
  return 1;
}

}  // namespace loom::cli
