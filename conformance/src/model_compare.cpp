// compare_model (loom/conformance/model_compare.hpp) on an ONNX model, and
// the part shared with a program's comparison (program_compare.cpp):
// compile the source once to learn its steps, once more with every value
// crossing between steps as an output, for the device and for the
// reference, run both, compare step by step.
#include "loom/conformance/model_compare.hpp"

#include <algorithm>
#include <set>

#include "loom/device.hpp"
#include "model_compare_detail.hpp"
#include "model_compare_onnx.hpp"

namespace loom::conformance {

namespace fs = std::filesystem;

namespace model_compare_detail {

Result<RunValues> run_compiled(Runtime& runtime, const fs::path& program_path, const std::string& device,
                               std::span<const NamedTensor> inputs,
                               const std::vector<std::string>& frozen,
                               const ModelCompareOptions& options, std::string_view side,
                               const ParameterArchives& archives) {
  auto where = [&](const Status& s) {
    return s.with_context(std::string(side) + (device.empty() ? std::string() : " on " + device));
  };
  LoadOptions load;
  load.device = device;
  load.run_timeout = options.run_timeout;
  load.parameter_archives = archives;
  auto program = runtime.load_program(program_path, load);
  if (!program.ok()) return where(program.status());
  auto session = (*program)->create_session();
  if (!session.ok()) return where(session.status());
  const FunctionInfo& fn = (*session)->function();
  std::vector<bool> given(fn.inputs.size(), false);
  for (const NamedTensor& in : inputs) {
    auto it = std::find_if(fn.inputs.begin(), fn.inputs.end(),
                           [&](const ArgumentInfo& a) { return a.name == in.name; });
    if (it == fn.inputs.end()) {
      if (std::find(frozen.begin(), frozen.end(), in.name) != frozen.end()) continue;
      std::string names;
      for (const ArgumentInfo& a : fn.inputs) names += (names.empty() ? "" : ", ") + a.name;
      return not_found("the model has no input '" + in.name + "' (inputs: " + names + ")");
    }
    const size_t index = static_cast<size_t>(it - fn.inputs.begin());
    Status st = (*session)->set_input(index, in.tensor);
    if (!st.ok()) return st.with_context("input '" + in.name + "'");
    given[index] = true;
  }
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    if (!given[i]) {
      return invalid_argument("input '" + fn.inputs[i].name + "' (" +
                              std::string(dtype_name(fn.inputs[i].dtype)) +
                              shape_to_string(fn.inputs[i].shape) + ") is not given");
    }
  }
  if (Status st = (*session)->run(); !st.ok()) return where(st);
  RunValues out;
  for (size_t i = 0; i < (*session)->output_count(); ++i) {
    const Tensor& t = (*session)->output(i);
    LOOM_ASSIGN_OR_RETURN(Tensor copy, Tensor::copy_of(t.dtype(), t.shape(), t.bytes()));
    out.values.push_back({fn.outputs[i].name, std::move(copy)});
  }
  out.placements = (*program)->placements();
  return out;
}

Result<compiler::CompileReport> compile_for(Runtime& runtime, const fs::path& model, const fs::path& out,
                                            const std::vector<std::string>& targets,
                                            std::span<const NamedTensor> inputs, bool split) {
  compiler::CompileOptions options;
  options.targets = targets;
  options.one_node_per_subgraph = split;
  for (const NamedTensor& in : inputs) options.input_shapes.emplace_back(in.name, in.tensor.shape());
  options.input_value = [inputs](std::string_view name) -> const Tensor* {
    for (const NamedTensor& in : inputs) {
      if (in.name == name) return &in.tensor;
    }
    return nullptr;
  };
  LOOM_ASSIGN_OR_RETURN(compiler::CompileReport report,
                        compiler::compile_onnx_file(runtime.plugin_host(), model, out, options));
  if (report.subgraphs.empty() && (!report.open_inputs.empty() || !report.value_inputs.empty())) {
    return invalid_argument(model.string() + ": the inputs given leave the model's shapes open (" +
                            (report.open_inputs.empty() ? report.value_inputs.front()
                                                        : report.open_inputs.front()) +
                            "); give every input as a file");
  }
  return report;
}

}  // namespace model_compare_detail

bool StepComparison::within() const {
  return std::all_of(outputs.begin(), outputs.end(),
                     [](const ValueComparison& v) { return v.difference.within(); });
}

std::string StepComparison::describe() const {
  if (step.nodes.empty()) return step.delegate.empty() ? "a step" : "delegate " + step.delegate;
  if (step.nodes.size() == 1) {
    return "node '" + step.nodes[0] + "' (" + step.op_types[0] + ")";
  }
  std::string out = "delegate " + step.delegate + " (" + std::to_string(step.nodes.size()) + " nodes: ";
  for (size_t i = 0; i < step.nodes.size(); ++i) {
    if (i == 3 && step.nodes.size() > 4) {
      out += ", ...";
      break;
    }
    out += (i ? ", " : "") + step.nodes[i] + " (" + step.op_types[i] + ")";
  }
  return out + ")";
}

const Tensor* ModelComparison::reference_value(std::string_view name) const {
  for (const NamedTensor& v : reference_values) {
    if (v.name == name) return &v.tensor;
  }
  return nullptr;
}

Result<std::vector<std::string>> compile_targets_for(Runtime& runtime, std::string_view selector_text) {
  std::vector<std::string> targets;
  if (selector_text.empty()) return targets;
  LOOM_ASSIGN_OR_RETURN(DeviceSelector selector, DeviceSelector::parse(std::string(selector_text)));
  const std::vector<DeviceInfo> devices = runtime.devices();
  for (const auto& [d, alternative] : selector.order(devices)) {
    const std::string& plugin = devices[d].plugin;
    if (std::find(targets.begin(), targets.end(), plugin) == targets.end()) targets.push_back(plugin);
  }
  return targets;
}

Result<ModelComparison> compare_model(Runtime& runtime, const fs::path& model,
                                      std::span<const NamedTensor> inputs,
                                      const ModelCompareOptions& options, const fs::path& scratch) {
  namespace detail = model_compare_detail;
  if (options.device.empty()) return invalid_argument("no device to compare: give a device selector");
  if (!(options.tolerance.rtol >= 0) || !(options.tolerance.atol >= 0)) {
    return invalid_argument("tolerances must be numbers >= 0 (rtol " +
                            std::to_string(options.tolerance.rtol) + ", atol " +
                            std::to_string(options.tolerance.atol) + ")");
  }
  if (is_program_path(model)) return detail::compare_program(runtime, model, inputs, options, scratch);
  // The ONNX model, with the values in `observed` as further outputs.
  // Written once per comparison (a scratch folder may hold another
  // model's from an earlier call).
  bool observed_written = false;
  detail::CompileSource source = [&](const std::vector<std::string>& observed, const fs::path& out,
                                     const std::vector<std::string>& targets,
                                     bool split) -> Result<compiler::CompileReport> {
    if (observed.empty()) return detail::compile_for(runtime, model, out, targets, inputs, split);
    const fs::path observed_model = scratch / "observed.onnx";
    if (!observed_written) {
      LOOM_RETURN_IF_ERROR(write_observing_model(model, observed, observed_model));
      observed_written = true;
    }
    return detail::compile_for(runtime, observed_model, out, targets, inputs, split);
  };
  return detail::compare_source(runtime, source, model.string(), inputs, options, scratch);
}

bool is_program_path(const fs::path& path) { return path.extension() == ".loom"; }

namespace model_compare_detail {

Status append_step(ModelComparison& out, StepComparison c, const ValueLookup& got, const ValueLookup& expected,
                   std::set<std::string>& outside) {
  for (const std::string& in : c.step.inputs) c.inputs_within = c.inputs_within && !outside.count(in);
  for (const std::string& v : c.step.outputs) {
    const Tensor* a = got(v);
    const Tensor* e = expected(v);
    if (a == nullptr || e == nullptr) {
      return internal_error("value '" + v + "' is missing from the " +
                            std::string(a == nullptr ? "device's" : "reference's") + " results");
    }
    ValueComparison vc;
    vc.value = v;
    vc.difference = measure_difference(*a, *e, out.tolerance);
    vc.detail = describe_difference(vc.difference, *a, *e);
    if (!vc.difference.within()) outside.insert(v);
    c.outputs.push_back(std::move(vc));
  }
  if (out.first_divergent < 0 && c.inputs_within && !c.within()) {
    out.first_divergent = static_cast<int>(out.steps.size());
  }
  out.steps.push_back(std::move(c));
  return Status();
}

Result<ModelComparison> compare_source(Runtime& runtime, const CompileSource& source, const std::string& what,
                                       std::span<const NamedTensor> inputs, const ModelCompareOptions& options,
                                       const fs::path& scratch) {
  LOOM_ASSIGN_OR_RETURN(std::vector<std::string> targets, compile_targets_for(runtime, options.device));
  LOOM_ASSIGN_OR_RETURN(std::vector<std::string> reference_targets,
                        compile_targets_for(runtime, options.reference_device));
  if (targets.empty() || (!options.reference_device.empty() && reference_targets.empty())) {
    // Loading a program with the selector names the devices there are, with
    // a suggestion.
    const bool under_test = targets.empty();
    const std::string& selector = under_test ? options.device : options.reference_device;
    const fs::path probe_path = scratch / "probe.loom";
    LOOM_RETURN_IF_ERROR(source({}, probe_path, {}, false).status());
    LoadOptions load;
    load.device = selector;
    auto program = runtime.load_program(probe_path, load);
    if (!program.ok()) {
      // The scratch program's path means nothing to the caller.
      std::string message = program.status().message();
      const std::string prefix = probe_path.string() + ": ";
      if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
      return Status(program.status().code(), message).with_context(under_test ? "--device" : "--reference");
    }
    return not_found("no device matches '" + selector + "'");
  }

  // 1. The steps of the program as the device runs it.
  LOOM_ASSIGN_OR_RETURN(compiler::CompileReport plan,
                        source({}, scratch / "plan.loom", targets, options.split_delegates));
  // 2. The same model with every value crossing between steps as an output.
  std::vector<std::string> observed;
  for (const compiler::SubgraphReport& s : plan.subgraphs) {
    for (const std::string& v : s.outputs) {
      if (std::find(observed.begin(), observed.end(), v) == observed.end()) observed.push_back(v);
    }
  }
  auto device_report = source(observed, scratch / "device.loom", targets, options.split_delegates);
  if (!device_report.ok()) return device_report.status().with_context(what);
  auto reference_report = source(observed, scratch / "reference.loom", reference_targets, false);
  if (!reference_report.ok()) {
    return reference_report.status().with_context(what + " (compiled for the reference)");
  }
  // 3. Both runs.
  LOOM_ASSIGN_OR_RETURN(RunValues got,
                        run_compiled(runtime, scratch / "device.loom", options.device, inputs,
                                     device_report->frozen_inputs, options, "the device's run", {}));
  LOOM_ASSIGN_OR_RETURN(
      RunValues expected,
      run_compiled(runtime, scratch / "reference.loom", options.reference_device, inputs,
                   reference_report->frozen_inputs, options, "the reference run", {}));

  ModelComparison out;
  out.device = options.device;
  out.reference = options.reference_device.empty() ? "reference kernels" : options.reference_device;
  out.tolerance = options.tolerance;
  out.split_delegates = options.split_delegates;
  for (const NamedTensor& in : inputs) out.reference_values.push_back(in);
  for (const NamedTensor& v : expected.values) {
    if (out.reference_value(v.name) == nullptr) out.reference_values.push_back(v);
  }
  // 4. Step by step, in execution order.
  std::set<std::string> outside;  // values found outside the tolerance
  const ValueLookup got_value = [&](const std::string& v) { return got.find(v); };
  const ValueLookup expected_value = [&](const std::string& v) { return expected.find(v); };
  for (const compiler::SubgraphReport& s : device_report->subgraphs) {
    StepComparison c;
    c.step = s;
    c.ran_on = "reference kernels";
    for (const DelegatePlacement& p : got.placements) {
      if (!s.delegate.empty() && p.delegate == s.delegate) c.ran_on = p.device;
    }
    LOOM_RETURN_IF_ERROR(append_step(out, std::move(c), got_value, expected_value, outside));
  }
  return out;
}

}  // namespace model_compare_detail

}  // namespace loom::conformance
