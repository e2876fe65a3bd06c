#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "loom/file_type.hpp"
#include "loom/npy.hpp"
#include "loom/runtime.hpp"
#if LOOM_HAVE_ONNX
#include "loom/conformance/onnx_cases.hpp"
#endif
#if LOOM_HAVE_COMPILER
#include "loom/compiler.hpp"
#include "loom/conformance/model_compare.hpp"
#endif

namespace loom::cli {
namespace {

// Splits "NAME=VALUE"; the error names the option. A parameter scope may be
// empty (IREE's default scope), so --params accepts "=PATH".
Result<std::pair<std::string, std::string>> split_binding(const std::string& text,
                                                          const char* option,
                                                          const char* form = "NAME=VALUE",
                                                          bool allow_empty_name = false) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || (eq == 0 && !allow_empty_name) || eq + 1 == text.size()) {
    return invalid_argument(std::string(option) + " '" + text + "' is not " + form);
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

Result<Tensor> random_tensor(const ArgumentInfo& arg, std::mt19937_64& rng) {
  if (std::find(arg.shape.begin(), arg.shape.end(), -1) != arg.shape.end()) {
    return invalid_argument("input '" + arg.name + "' has open dimensions " + shape_to_string(arg.shape) +
                            ", so 'random' has no shape to fill; give a file (NAME=PATH.npy) of the shape to run");
  }
  LOOM_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(arg.dtype, arg.shape));
  uint64_t n = t.element_count();
  switch (arg.dtype) {
    case DType::kF32: {
      std::uniform_real_distribution<float> d(-1.0f, 1.0f);
      for (uint64_t i = 0; i < n; ++i) t.data_as<float>()[i] = d(rng);
      break;
    }
    case DType::kF64: {
      std::uniform_real_distribution<double> d(-1.0, 1.0);
      for (uint64_t i = 0; i < n; ++i) t.data_as<double>()[i] = d(rng);
      break;
    }
    case DType::kI32: {
      std::uniform_int_distribution<int32_t> d(-8, 8);
      for (uint64_t i = 0; i < n; ++i) t.data_as<int32_t>()[i] = d(rng);
      break;
    }
    case DType::kI64: {
      std::uniform_int_distribution<int64_t> d(-8, 8);
      for (uint64_t i = 0; i < n; ++i) t.data_as<int64_t>()[i] = d(rng);
      break;
    }
    case DType::kU8:
    case DType::kI8:
    case DType::kBool: {
      std::uniform_int_distribution<int> d(0, arg.dtype == DType::kBool ? 1 : 100);
      for (uint64_t i = 0; i < n; ++i) t.data_as<uint8_t>()[i] = static_cast<uint8_t>(d(rng));
      break;
    }
    default:
      return unimplemented("input '" + arg.name + "': random values of dtype " +
                           std::string(dtype_name(arg.dtype)) + " are not supported; "
                           "pass a .npy file");
  }
  return t;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(),
                                                suffix) == 0;
}

void print_summary(const std::string& name, const Tensor& t) {
  std::cout << name << ": " << dtype_name(t.dtype()) << shape_to_string(t.shape());
  if (t.dtype() == DType::kF32) {
    const float* p = t.data_as<float>();
    uint64_t n = t.element_count();
    std::cout << " = [";
    for (uint64_t i = 0; i < std::min<uint64_t>(n, 8); ++i) {
      std::printf("%s%.6g", i ? ", " : "", p[i]);
      std::fflush(stdout);
    }
    std::cout << (n > 8 ? ", ...]" : "]");
  }
  std::cout << "\n";
}

// The program compiled from an ONNX model, removed with this object.
class TempProgram {
 public:
  TempProgram() = default;
  TempProgram(const TempProgram&) = delete;
  TempProgram& operator=(const TempProgram&) = delete;
  ~TempProgram() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
  std::filesystem::path dir;
};

// `loom run model.onnx`: compiles for --device's plugin (or the reference
// kernels) into a scratch folder; the given input files bind the shapes.
Result<std::filesystem::path> compile_for_run(
    Runtime& runtime, const RunArgs& args,
    const std::vector<std::pair<std::string, Tensor>>& files, TempProgram& temp) {
#if LOOM_HAVE_COMPILER
  compiler::CompileOptions options;
  // Compile for the plugins of the devices the selector picks, in its
  // order; a selector matching nothing is reported by load_program with
  // suggestions.
  LOOM_ASSIGN_OR_RETURN(options.targets, conformance::compile_targets_for(runtime, args.device));
  for (const auto& [name, tensor] : files) options.input_shapes.emplace_back(name, tensor.shape());
  options.input_value = [&files](std::string_view name) -> const Tensor* {
    for (const auto& [n, t] : files) {
      if (n == name) return &t;
    }
    return nullptr;
  };
  std::error_code ec;
  std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string pattern = (base / "loom-run-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return unavailable("cannot create a scratch folder in " + base.string());
  }
  temp.dir = pattern;
  std::filesystem::path out = temp.dir / "program.loom";
  auto report = compiler::compile_onnx_file(runtime.plugin_host(), args.file, out, options);
  if (!report.ok()) return report.status();
  return out;
#else
  return unimplemented(args.file + ": running an ONNX model needs loom built with the compiler; "
                       "compile it to a .loom program first");
#endif
}

}  // namespace

// An input file is .npy or a serialized ONNX TensorProto (.pb, as in ONNX's
// test data): by extension, else by content (.npy files start with a magic).
// Only a regular file is opened, whatever its name: a FIFO would block the
// open or the read, and a device such as /dev/zero would never end; each is
// refused before any open, saying what it is.
Result<Tensor> read_input_file(const std::string& path) {
  Status regular = check_regular_file(path, "input file");
  if (regular.code() == StatusCode::kInvalidArgument) {
    return invalid_argument(regular.message() + "; inputs are read from .npy or .pb files");
  }
  LOOM_RETURN_IF_ERROR(regular);
  bool pb = ends_with(path, ".pb");
  if (!pb && !ends_with(path, ".npy")) {
    std::ifstream in(path, std::ios::binary);
    char magic[6] = {};
    in.read(magic, sizeof magic);
    pb = in.gcount() == sizeof magic && std::string_view(magic, 6) != "\x93NUMPY";
  }
  if (!pb) return io::read_npy(path);
#if LOOM_HAVE_ONNX
  LOOM_ASSIGN_OR_RETURN(NamedTensor t, conformance::read_tensor_pb(path));
  return std::move(t.tensor);
#else
  return unimplemented(path + ": reading ONNX .pb tensors needs loom built with ONNX support");
#endif
}

Status add_plugin_options(const std::vector<std::string>& texts, RuntimeOptions* options) {
  for (const std::string& text : texts) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0) {
      return invalid_argument("--plugin-option '" + text + "': expected KEY=VALUE");
    }
    options->plugin_options.emplace_back(text.substr(0, eq), text.substr(eq + 1));
  }
  return Status();
}

void add_isolated_plugins(const std::vector<std::string>& texts, RuntimeOptions* options) {
  for (const std::string& text : texts) {
    size_t start = 0;
    while (start <= text.size()) {
      const size_t comma = std::min(text.find(',', start), text.size());
      if (comma > start) options->isolated_plugins.push_back(text.substr(start, comma - start));
      start = comma + 1;
    }
  }
}

namespace {

// What `loom run` did, printed as text or as one JSON document.
struct RunReport {
  bool loaded = false;
  PlacementExplanation explanation;
  std::vector<DelegatePlacement> placements;
  std::string function;
  std::vector<NamedTensor> outputs;                      // the last run's results
  // Results that are not tensors: "name: a sequence of 3 tensors" (their
  // elements are in `outputs` as name[0], ...), "name: none (an empty optional)".
  std::vector<std::string> value_notes;
  std::vector<std::pair<std::string, std::string>> written;  // (output, path)
  std::vector<double> times_us;                          // after the warm-up, sorted
  double first_run_us = -1;  // the first run (the warm-up when --repeat > 1), shape binding included
  std::shared_ptr<Trace> trace;                          // --trace or --profile
  std::vector<FallbackEvent> fallbacks;
  std::vector<DelegateTransfers> transfers;  // of the session run
  // An open-shape function: the binding of the last run ("x=[1, 3, 224, 224]"),
  // whose program the placements, explanation and transfers are of.
  std::string binding;
  bool compiled_once = false;  // the binding ran the program's own instructions (format 1.4)
  bool staged = false;         // a staged program (control flow) ran
};

// A sequence or optional given on the command line (docs/control-flow.md):
// files separated by commas ("a.npy,b.npy"; "a.npy," for one), "[]" for an
// empty sequence, "none" for an empty optional.
bool is_value_list(const std::string& source) {
  return source == "[]" || source == "none" || source.find(',') != std::string::npos;
}

Result<Value> read_value_list(const std::string& source) {
  if (source == "none") return Value::none();
  std::vector<Tensor> elements;
  if (source == "[]") return Value::sequence(std::move(elements));
  size_t start = 0;
  while (start < source.size()) {
    const size_t comma = std::min(source.find(',', start), source.size());
    if (comma > start) {
      const std::string file = source.substr(start, comma - start);
      Result<Tensor> t = read_input_file(file);
      if (!t.ok()) return t.status().with_context("element " + std::to_string(elements.size()) + " (" + file + ")");
      elements.push_back(std::move(*t));
    }
    start = comma + 1;
  }
  return Value::sequence(std::move(elements));
}

// Writes a result: a tensor to `path`; a sequence as one file per element,
// STEM_0.npy, STEM_1.npy, ... (an empty sequence or none writes no file; the
// report says what the result was).
Status write_value(const Value& v, const std::string& name, const std::string& path, const std::string& stem,
                   RunReport& report) {
  if (v.is_tensor()) {
    LOOM_RETURN_IF_ERROR(io::write_npy(path, v.tensor));
    report.written.emplace_back(name, path);
    return Status();
  }
  for (size_t k = 0; k < v.elements.size(); ++k) {
    const std::string file = stem + "_" + std::to_string(k) + ".npy";
    LOOM_RETURN_IF_ERROR(io::write_npy(file, v.elements[k]).with_context("element " + std::to_string(k)));
    report.written.emplace_back(name + "[" + std::to_string(k) + "]", file);
  }
  if (v.elements.empty()) report.written.emplace_back(name, "(no file: " + describe_value(v) + ")");
  return Status();
}


// One line per delegate call: how its operands reach the device.
std::string transfers_text(const std::string& function, const std::vector<DelegateTransfers>& ts) {
  std::string out = "transfers (function " + function + ", planned when the session was made):\n";
  for (const DelegateTransfers& t : ts) {
    out += "  " + t.delegate + " on " + t.device + ": ";
    if (t.host_pointers != 0 || (t.imported + t.staged_in + t.staged_out + t.constants) == 0) {
      out += std::to_string(t.host_pointers) + " operands in host memory, no copies\n";
      continue;
    }
    out += std::to_string(t.imported) + " in the imported arena (no copies), " +
           std::to_string(t.staged_in) + " copied in and " + std::to_string(t.staged_out) +
           " copied out per run, " + std::to_string(t.constants) + " constants copied once\n";
  }
  return out;
}

double quantile(const std::vector<double>& sorted, double q) {
  size_t k = static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(k, sorted.size() - 1)];
}

nlohmann::json explanation_json(const PlacementExplanation& e) {
  nlohmann::json delegates = nlohmann::json::array();
  for (const DelegateExplanation& d : e.delegates) {
    nlohmann::json candidates = nlohmann::json::array();
    for (const PlacementCandidate& c : d.candidates) {
      candidates.push_back({{"variant", c.variant},
                            {"loader_key", c.loader_key},
                            {"device", c.device},
                            {"matched_by", c.matched_by},
                            {"score", c.score},
                            {"estimate_ns", c.estimate_ns},
                            {"outcome", placement_outcome_name(c.outcome)},
                            {"reason", c.reason}});
    }
    delegates.push_back({{"delegate", d.delegate}, {"candidates", std::move(candidates)}});
  }
  return {{"selector", e.selector}, {"delegates", std::move(delegates)}};
}

nlohmann::json tensor_summary_json(const NamedTensor& t) {
  nlohmann::json out = {{"name", t.name},
                        {"dtype", dtype_name(t.tensor.dtype())},
                        {"shape", t.tensor.shape()}};
  if (t.tensor.dtype() == DType::kF32) {
    nlohmann::json head = nlohmann::json::array();
    const float* p = t.tensor.data_as<float>();
    for (uint64_t i = 0; i < std::min<uint64_t>(t.tensor.element_count(), 8); ++i) {
      head.push_back(p[i]);
    }
    out["first_values"] = std::move(head);
  }
  return out;
}

void print_json(const RunArgs& args, const RunReport& r, const Status& status) {
  nlohmann::json doc = {{"file", args.file}, {"device", args.device}};
  if (!status.ok()) {
    doc["error"] = {{"code", status_code_name(status.code())}, {"message", status.message()}};
  }
  if (!r.explanation.delegates.empty() || r.loaded) {
    doc["placement"] = explanation_json(r.explanation);
  }
  if (r.loaded) {
    nlohmann::json placements = nlohmann::json::array();
    for (const DelegatePlacement& p : r.placements) {
      placements.push_back(
          {{"delegate", p.delegate}, {"device", p.device}, {"loader_key", p.loader_key}});
    }
    doc["placements"] = std::move(placements);
    nlohmann::json fallbacks = nlohmann::json::array();
    for (const FallbackEvent& f : r.fallbacks) {
      fallbacks.push_back({{"delegate", f.delegate},
                           {"from", f.from_device},
                           {"to", f.to_device},
                           {"loader_key", f.to_loader_key},
                           {"reason", f.reason.to_string()}});
    }
    doc["fallbacks"] = std::move(fallbacks);
  }
  if (!r.transfers.empty()) {
    nlohmann::json transfers = nlohmann::json::array();
    for (const DelegateTransfers& t : r.transfers) {
      transfers.push_back({{"delegate", t.delegate},
                           {"device", t.device},
                           {"host_pointers", t.host_pointers},
                           {"imported", t.imported},
                           {"staged_in", t.staged_in},
                           {"staged_out", t.staged_out},
                           {"constants", t.constants}});
    }
    doc["transfers"] = std::move(transfers);
  }
  if (status.ok()) {
    doc["function"] = r.function;
    if (!r.binding.empty()) {
      doc["binding"] = r.binding;
      doc["compiled_once"] = r.compiled_once;
    }
    nlohmann::json outputs = nlohmann::json::array();
    for (const NamedTensor& t : r.outputs) outputs.push_back(tensor_summary_json(t));
    doc["outputs"] = std::move(outputs);
    doc["values"] = r.value_notes;
    nlohmann::json written = nlohmann::json::array();
    for (const auto& [name, path] : r.written) written.push_back({{"output", name}, {"path", path}});
    doc["written"] = std::move(written);
    if (args.profile && r.trace != nullptr) {
      nlohmann::json rows = nlohmann::json::array();
      for (const Trace::ProfileRow& row : r.trace->profile()) {
        rows.push_back({{"device", row.track},
                        {"category", row.category},
                        {"name", row.name},
                        {"calls", row.calls},
                        {"total_ns", row.total_ns},
                        {"mean_ns", row.mean_ns},
                        {"share", row.share}});
      }
      doc["profile"] = std::move(rows);
    }
    if (r.first_run_us >= 0) doc["first_run_us"] = r.first_run_us;
    if (args.repeat > 1) {
      doc["latency_us"] = {{"runs", r.times_us.size()},
                           {"median", quantile(r.times_us, 0.5)},
                           {"p90", quantile(r.times_us, 0.9)},
                           {"min", r.times_us.front()}};
    }
  }
  std::cout << doc.dump(2) << "\n";
}

Status run_program(const RunArgs& args, RunReport& report) {
  RuntimeOptions options;
  options.threads = args.threads;
  LOOM_RETURN_IF_ERROR(add_plugin_options(args.plugin_options, &options));
  add_isolated_plugins(args.isolate, &options);
  options.require_conformance = args.require_conformance;
  options.record_path = args.record;
  if (args.verbose) {
    options.log_sink = [](LogLevel level, std::string_view line) {
      if (level == LogLevel::kDebug) return;
      static constexpr const char* kNames[] = {"debug", "info", "warning", "error"};
      std::cerr << "loom: " << kNames[static_cast<int>(level)] << ": " << line << "\n";
    };
  }
  LOOM_ASSIGN_OR_RETURN(auto runtime, Runtime::create(options));
  LoadOptions load;
  load.device = args.device;
  load.check_parameter_checksums = !args.no_param_checksums;
  load.run_timeout = std::chrono::seconds(args.timeout_s);
  load.max_tensor_bytes = args.max_tensor_bytes;
  load.explanation = &report.explanation;
  load.fallback = args.fallback;
  for (const std::string& text : args.params) {
    LOOM_ASSIGN_OR_RETURN(auto binding, split_binding(text, "--params", "SCOPE=PATH.irpa", true));
    load.parameter_archives.emplace_back(binding.first, binding.second);
  }
  // Input files are read first: compiling an ONNX model needs their shapes.
  std::vector<std::pair<std::string, std::string>> bindings;
  std::vector<std::pair<std::string, Tensor>> files;
  for (const std::string& text : args.inputs) {
    LOOM_ASSIGN_OR_RETURN(auto binding, split_binding(text, "--input"));
    bindings.push_back(binding);
    if (binding.second == "random" || is_value_list(binding.second)) continue;
    Result<Tensor> tensor = read_input_file(binding.second);
    if (!tensor.ok()) return tensor.status().with_context("--input " + binding.first);
    files.emplace_back(binding.first, std::move(*tensor));
  }
  std::filesystem::path program_path = args.file;
  TempProgram temp;
  if (ends_with(args.file, ".onnx")) {
    LOOM_ASSIGN_OR_RETURN(program_path, compile_for_run(*runtime, args, files, temp));
  }
  if (!args.trace.empty() || args.profile) report.trace = runtime->start_trace();
  LOOM_ASSIGN_OR_RETURN(auto program, runtime->load_program(program_path, load));
  report.loaded = true;
  report.placements = program->placements();
  LOOM_ASSIGN_OR_RETURN(auto session, program->create_session(args.function));
  const FunctionInfo& fn = session->function();
  report.function = fn.name;
  report.transfers = session->transfers();

  std::mt19937_64 rng(1234);
  std::vector<bool> given(fn.inputs.size(), false);
  std::string set_shapes;  // an open-shape function: "x=[1, 3, 8, 8], ..." as set
  for (const auto& [name, source] : bindings) {
    auto it = std::find_if(fn.inputs.begin(), fn.inputs.end(),
                           [&](const ArgumentInfo& a) { return a.name == name; });
    if (it == fn.inputs.end()) {
      std::string names;
      for (const auto& a : fn.inputs) names += (names.empty() ? "" : ", ") + a.name;
      return not_found("function '" + fn.name + "' has no input '" + name + "' (inputs: " +
                       names + ")");
    }
    size_t index = static_cast<size_t>(it - fn.inputs.begin());
    Result<Value> value = Value();
    if (source == "random") {
      if (it->kind != ValueKind::kTensor) {
        return invalid_argument("--input " + name + "=random: input '" + name + "' is a " +
                                value_kind_name(it->kind) + "; 'random' makes tensors only");
      }
      Result<Tensor> tensor = random_tensor(*it, rng);
      if (!tensor.ok()) return tensor.status().with_context("--input " + name);
      value = Value::of(std::move(*tensor));
    } else if (is_value_list(source)) {
      value = read_value_list(source);
    } else {
      for (const auto& [file_name, t] : files) {
        if (file_name == name) value = Value::of(t);
      }
    }
    if (!value.ok()) return value.status().with_context("--input " + name);
    Status st = session->set_input_value(index, *value);
    if (!st.ok() && value->is_tensor() && (it->kind == ValueKind::kSequence || it->kind == ValueKind::kOptionalSequence)) {
      st = Status(st.code(), st.message() + "; give a sequence as " + name + "=a.npy,b.npy (a.npy, for one tensor, [] " +
                                 "for none)");
    }
    if (!st.ok()) return st.with_context("--input " + name + "=" + source);
    given[index] = true;
    if (fn.open) {
      set_shapes += (set_shapes.empty() ? "" : ", ") + name + "=" +
                    (value->is_tensor() ? shape_to_string(value->tensor.shape()) : describe_value(*value));
    }
  }
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    if (!given[i] && fn.inputs[i].kind != ValueKind::kTensor) {
      return invalid_argument("input '" + fn.inputs[i].name + "' (a " + value_kind_name(fn.inputs[i].kind) +
                              ") is not given; use --input " + fn.inputs[i].name +
                              "=A.npy,B.npy (a sequence; [] for an empty one" +
                              (fn.inputs[i].kind == ValueKind::kSequence ? "" : ", none for an empty optional") + ")");
    }
    if (!given[i]) {
      return invalid_argument("input '" + fn.inputs[i].name + "' (" +
                              std::string(dtype_name(fn.inputs[i].dtype)) +
                              shape_to_string(fn.inputs[i].shape) + ") is not given; use "
                              "--input " + fn.inputs[i].name + "=PATH.npy or " +
                              fn.inputs[i].name + "=random");
    }
  }
  std::vector<std::pair<std::string, std::string>> outputs;
  for (const std::string& text : args.outputs) {
    LOOM_ASSIGN_OR_RETURN(auto binding, split_binding(text, "--output"));
    LOOM_RETURN_IF_ERROR(session->output_value(binding.first).status());
    outputs.push_back(binding);
  }

  using Clock = std::chrono::steady_clock;
  uint32_t warmup = args.repeat > 1 ? 1 : 0;
  for (uint32_t i = 0; i < args.repeat + warmup; ++i) {
    auto start = Clock::now();
    LOOM_RETURN_IF_ERROR(session->run());
    auto end = Clock::now();
    double us = std::chrono::duration<double, std::micro>(end - start).count();
    if (i == 0) report.first_run_us = us;
    if (i >= warmup) report.times_us.push_back(us);
  }
  std::sort(report.times_us.begin(), report.times_us.end());
  report.placements = program->placements();  // after any fallback
  report.fallbacks = program->fallbacks();
  report.transfers = session->transfers();  // a fallback re-plans the moved calls
  if (std::shared_ptr<Program> bound = session->bound_program()) {
    // An open-shape function: what ran is the program prepared for this
    // binding, compiled through the targets' compile entries when the
    // session first met it.
    report.placements = bound->placements();
    report.fallbacks = bound->fallbacks();
    report.explanation = bound->explain();
    const FunctionInfo bound_fn = bound->function(fn.name).value();
    for (const ArgumentInfo& in : bound_fn.inputs) {
      report.binding += (report.binding.empty() ? "" : ", ") + in.name + "=" + shape_to_string(in.shape);
    }
  } else if (fn.staged) {
    report.binding = set_shapes;
    report.staged = true;
  } else if (fn.open) {
    // Compiled once (format 1.4): the program's own delegates ran, at the
    // shapes set.
    report.binding = set_shapes;
    report.compiled_once = true;
  }
  if (report.trace != nullptr) runtime->stop_trace();
  if (!args.trace.empty()) {
    std::ofstream out(args.trace, std::ios::binary | std::ios::trunc);
    out << report.trace->to_chrome_json();
    out.close();
    if (!out) return unavailable("--trace " + args.trace + ": cannot write the file");
    report.written.emplace_back("trace", args.trace);
  }
  for (size_t i = 0; i < session->output_count(); ++i) {
    LOOM_ASSIGN_OR_RETURN(Value v, session->output_value(i));
    if (v.is_tensor()) {
      report.outputs.push_back({fn.outputs[i].name, std::move(v.tensor)});
      continue;
    }
    report.value_notes.push_back(fn.outputs[i].name + ": " + describe_value(v));
    for (size_t k = 0; k < v.elements.size(); ++k) {
      report.outputs.push_back({fn.outputs[i].name + "[" + std::to_string(k) + "]", v.elements[k]});
    }
  }

  for (const auto& [name, path] : outputs) {
    LOOM_ASSIGN_OR_RETURN(Value v, session->output_value(name));
    std::string stem = path;
    if (ends_with(stem, ".npy")) stem.resize(stem.size() - 4);
    Status st = write_value(v, name, path, stem, report);
    if (!st.ok()) return st.with_context("--output " + name);
  }
  if (!args.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.output_dir, ec);
    if (ec) return invalid_argument("--output-dir " + args.output_dir + ": " + ec.message());
    std::set<std::string> used;
    for (size_t i = 0; i < session->output_count(); ++i) {
      std::string base = io::npy_file_stem(fn.outputs[i].name);
      std::string file = base;
      for (int k = 2; !used.insert(file).second; ++k) file = base + "_" + std::to_string(k);
      std::filesystem::path path = std::filesystem::path(args.output_dir) / (file + ".npy");
      LOOM_ASSIGN_OR_RETURN(Value v, session->output_value(i));
      Status st = write_value(v, fn.outputs[i].name, path.string(),
                              (std::filesystem::path(args.output_dir) / file).string(), report);
      if (!st.ok()) return st.with_context("--output-dir: output '" + fn.outputs[i].name + "'");
    }
  }
  return Status();
}

}  // namespace

int run_run(const RunArgs& args) {
  RunReport report;
  Status status = run_program(args, report);
  if (args.json) {
    print_json(args, report, status);
    return status.ok() ? 0 : fail(status);
  }
  if (args.explain && (report.loaded || !report.explanation.delegates.empty())) {
    std::cout << report.explanation.to_string();
    if (!report.transfers.empty()) std::cout << transfers_text(report.function, report.transfers);
  }
  if (!status.ok()) return fail(status);
  if (!report.binding.empty()) {
    std::cout << "binding: " << report.binding
              << (report.staged ? " (a staged program: its parts and bodies were specialized for the shapes they met)\n"
                  : report.compiled_once
                      ? " (open shapes: the program, compiled once, bound these shapes when first run)\n"
                      : " (open shapes: the program was specialized for these shapes when first run)\n");
  }
  for (const FallbackEvent& f : report.fallbacks) {
    std::cout << "fallback: delegate " << f.delegate << " moved from " << f.from_device << " to "
              << f.to_device << " (" << f.to_loader_key << ") after: " << f.reason.to_string()
              << "\n";
  }
  for (const DelegatePlacement& p : report.placements) {
    std::cout << "delegate " << p.delegate << " -> " << p.device << " (" << p.loader_key << ")\n";
  }
  for (const std::string& note : report.value_notes) std::cout << note << "\n";
  for (const NamedTensor& t : report.outputs) print_summary(t.name, t.tensor);
  for (const auto& [name, path] : report.written) {
    std::cout << "wrote " << name << " to " << path << "\n";
  }
  if (args.profile && report.trace != nullptr) {
    std::cout << Trace::format_profile(report.trace->profile());
  }
  if (args.repeat > 1) std::printf("first run: %.3f us (the warm-up; an open-shape program specializes then)\n", report.first_run_us);
  if (args.repeat > 1) {
    std::printf("latency over %u runs (after 1 warm-up): median %.3f us, p90 %.3f us\n",
                args.repeat, quantile(report.times_us, 0.5), quantile(report.times_us, 0.9));
  }
  return 0;
}

}  // namespace loom::cli
