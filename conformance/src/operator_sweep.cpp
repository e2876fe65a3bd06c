// run_operator_sweep: each case of the table compiled for the plugin and for
// the reference kernels, run on both with the same inputs and compared.
#include "loom/conformance/operator_sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check_context.hpp"
#include "child.hpp"
#include "loom/compiler.hpp"
#include "loom/conformance/onnx_cases.hpp"
#include "loom/conformance/onnx_runner.hpp"
#include "loom/runtime.hpp"
#include "sweep_table.hpp"

namespace loom::conformance {

namespace fs = std::filesystem;

namespace {

// Case labels hash to seeds, so that a case's inputs do not change when
// --op picks other cases or rows are added.
uint64_t sweep_seed(const SweepCase& c) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char ch : c.op + "|" + c.label()) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  return h;
}

// Integers and bools exactly (compare_tensors); floats relative + absolute,
// loose enough for another summation order or a SIMD exp, far tighter than
// any wrong constant.
Tolerance sweep_tolerance(DType dtype) {
  if (dtype == DType::kF16 || dtype == DType::kBF16) return {1e-2, 1e-3};
  return {1e-4, 1e-5};
}

Status write_sweep_model(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return unavailable("cannot write " + path.string());
  return Status();
}

// The median of `runs` timed runs after one warm-up, in microseconds; -1
// when a run fails.
double time_sweep_session(Session& session, const std::vector<NamedTensor>& inputs, int runs) {
  if (!detail::run_session_once(session, inputs).ok()) return -1;
  std::vector<double> us;
  for (int i = 0; i < std::max(runs, 1); ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (!session.run().ok()) return -1;
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

struct SweepRig {
  Runtime& runtime;
  std::string plugin;
  std::string device;
  fs::path scratch;
  const SweepOptions& options;
};

// Runs one case; `row` is the table row it came from.
SweepCaseResult run_sweep_case(SweepRig& rig, const sweep::SweepRow& row, const SweepCase& c) {
  SweepCaseResult r;
  r.c = c;
  auto error = [&](std::string why) {
    r.outcome = SweepOutcome::kError;
    r.message = std::move(why);
    return r;
  };
  auto failure = [&](std::string why) {
    r.outcome = SweepOutcome::kFail;
    r.message = std::move(why);
    return r;
  };
  auto built = sweep::build_case(row, c, sweep_seed(c));
  if (!built.ok()) return error(built.status().message());
  const fs::path model = rig.scratch / "case.onnx";
  if (Status st = write_sweep_model(model, built->model); !st.ok()) return error(st.message());

  // The plugin's compile first: a declined case needs no reference run.
  compiler::CompileOptions compile;
  compile.targets = {rig.plugin};
  const fs::path plugin_file = rig.scratch / "plugin.loom";
  auto report = compiler::compile_onnx_file(rig.runtime.plugin_host(), model, plugin_file, compile);
  const fs::path reference_file = rig.scratch / "reference.loom";
  if (!report.ok()) {
    // A case the importer refuses whatever the target is the table's fault.
    auto reference_report = compiler::compile_onnx_file(rig.runtime.plugin_host(), model, reference_file, {});
    if (!reference_report.ok()) return error("the case is not valid ONNX: " + reference_report.status().message());
    return failure("compile for " + rig.plugin + ": " + report.status().message());
  }
  size_t taken = 0;
  std::string loader_key;
  for (const compiler::TargetReport& t : report->targets) {
    taken += t.nodes;
    if (t.plugin == rig.plugin) loader_key = t.loader_key;
  }
  if (taken == 0) {
    r.outcome = SweepOutcome::kDeclined;
    return r;
  }
  if (rig.options.coverage_only) {
    r.outcome = SweepOutcome::kTaken;
    return r;
  }

  auto reference_report = compiler::compile_onnx_file(rig.runtime.plugin_host(), model, reference_file, {});
  if (!reference_report.ok()) {
    return error("the reference compile refuses the case: " + reference_report.status().message());
  }
  auto reference = rig.runtime.load_program(reference_file);
  if (!reference.ok()) return error("the reference program does not load: " + reference.status().message());
  auto reference_session = (*reference)->create_session();
  if (!reference_session.ok()) return error("reference session: " + reference_session.status().message());
  auto expected = detail::run_session_once(**reference_session, built->inputs);
  if (!expected.ok()) return error("the reference kernels refuse the case: " + expected.status().message());

  LoadOptions load;
  load.device = rig.device;
  load.run_timeout = rig.options.case_timeout;
  auto program = rig.runtime.load_program(plugin_file, load);
  if (!program.ok()) return failure("load on " + rig.device + ": " + program.status().message());
  for (const DelegatePlacement& p : (*program)->placements()) {
    if (p.loader_key == loader_key && p.device != rig.device) {
      return failure("delegate " + p.delegate + " ran on " + p.device + ", not " + rig.device);
    }
  }
  auto session = (*program)->create_session();
  if (!session.ok()) return failure("session on " + rig.device + ": " + session.status().message());
  auto got = detail::run_session_once(**session, built->inputs);
  if (!got.ok()) return failure("run on " + rig.device + ": " + got.status().message());
  for (const NamedTensor& want : *expected) {
    auto it = std::find_if(got->begin(), got->end(), [&](const NamedTensor& g) { return g.name == want.name; });
    if (it == got->end()) return failure("no output '" + want.name + "'");
    if (Status st = compare_tensors(want.name, it->tensor, want.tensor, sweep_tolerance(want.tensor.dtype()));
        !st.ok()) {
      return failure(st.message());
    }
  }
  r.outcome = SweepOutcome::kPass;
  if (rig.options.perf) {
    r.plugin_us = time_sweep_session(**session, built->inputs, rig.options.perf_runs);
    r.reference_us = time_sweep_session(**reference_session, built->inputs, rig.options.perf_runs);
  }
  std::error_code ec;
  fs::remove(plugin_file, ec);
  fs::remove(reference_file, ec);
  return r;
}

std::string sweep_us(double us) {
  char text[32];
  std::snprintf(text, sizeof text, us < 100 ? "%.1f us" : "%.0f us", us);
  return text;
}


// The row a case came from: its op, opset, input set and attribute set.
const sweep::SweepRow* sweep_row_of(const SweepCase& c) {
  for (const sweep::SweepRow& row : sweep::table()) {
    if (c.op != row.op || c.opset != row.opset) continue;
    const auto same = [](const std::string& text) { return [&text](const char* s) { return text == s; }; };
    if (std::any_of(row.inputs.begin(), row.inputs.end(), same(c.inputs)) &&
        std::any_of(row.attributes.begin(), row.attributes.end(), same(c.attributes))) {
      return &row;
    }
  }
  return nullptr;
}

// The cases from `first` on, in this process, each result a line of
// `results` as it is known: "device\tURI" first, then
// "INDEX\tOUTCOME\tPLUGIN_US\tREFERENCE_US\tMESSAGE". Setup errors come
// back as a failed verdict "setup: ...".
detail::Verdict sweep_in_this_process(const host::PluginManifest& manifest, const SweepOptions& options,
                                      const std::vector<SweepCase>& cases, size_t first, const fs::path& work,
                                      const fs::path& results, const detail::NoteFn& note) {
  auto runtime = Runtime::create(detail::plugin_runtime_options(manifest, options.plugin_options));
  if (!runtime.ok()) return detail::fail("setup: operator sweep: runtime: " + runtime.status().message());
  auto devices = (*runtime)->devices(manifest.name);
  if (!devices.ok()) {
    return detail::fail("setup: operator sweep: the devices of " + manifest.name + ": " + devices.status().message());
  }
  std::string device, known;
  for (const DeviceInfo& d : *devices) {
    if (device.empty() && (options.device.empty() || d.uri == options.device)) device = d.uri;
    known += (known.empty() ? "" : ", ") + d.uri;
  }
  if (device.empty()) {
    return detail::fail(options.device.empty()
                            ? "setup: operator sweep: " + manifest.name + " lists no device"
                            : "setup: no device '" + options.device + "' in " + manifest.name + " (devices: " +
                                  (known.empty() ? "none" : known) + ")");
  }
  std::error_code ec;
  fs::create_directories(work, ec);
  std::ofstream out(results, std::ios::trunc);
  out << "device\t" << device << std::endl;
  SweepRig rig{**runtime, manifest.name, device, work, options};
  for (size_t i = first; i < cases.size(); ++i) {
    const SweepCase& c = cases[i];
    note("case " + std::to_string(i) + ": " + c.op + " [" + c.label() + "]");
    const sweep::SweepRow* row = sweep_row_of(c);
    SweepCaseResult r = row ? run_sweep_case(rig, *row, c) : SweepCaseResult{c, SweepOutcome::kError, "no table row"};
    std::string message = r.message;
    std::replace(message.begin(), message.end(), '\n', ' ');
    std::replace(message.begin(), message.end(), '\t', ' ');
    out << i << '\t' << static_cast<int>(r.outcome) << '\t' << r.plugin_us << '\t' << r.reference_us << '\t'
        << message << std::endl;
  }
  return detail::pass(device);
}

// Appends the results a child wrote to `report`; `next` becomes the index
// after the last one.
void read_sweep_results(const fs::path& results, const std::vector<SweepCase>& cases, SweepReport* report,
                        size_t* next, const std::function<void(const SweepCaseResult&)>& progress) {
  std::ifstream in(results);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> parts;
    for (size_t at = 0, k = 0; k < 5; ++k) {
      const size_t tab = k == 4 ? std::string::npos : line.find('\t', at);
      parts.push_back(line.substr(at, tab == std::string::npos ? std::string::npos : tab - at));
      if (tab == std::string::npos) break;
      at = tab + 1;
    }
    if (parts.size() == 2 && parts[0] == "device") {
      report->device = parts[1];
      continue;
    }
    if (parts.size() != 5) continue;
    // A line cut short by a crash is left out (strtoul/strtod never throw).
    const size_t index = std::strtoul(parts[0].c_str(), nullptr, 10);
    const long outcome = std::strtol(parts[1].c_str(), nullptr, 10);
    if (index >= cases.size() || outcome < 0 || outcome > static_cast<long>(SweepOutcome::kError)) continue;
    SweepCaseResult r;
    r.c = cases[index];
    r.outcome = static_cast<SweepOutcome>(outcome);
    r.plugin_us = std::strtod(parts[2].c_str(), nullptr);
    r.reference_us = std::strtod(parts[3].c_str(), nullptr);
    r.message = parts[4];
    if (progress) progress(r);
    report->cases.push_back(std::move(r));
    *next = index + 1;
  }
}

}  // namespace

std::string SweepCase::label() const {
  return "inputs " + inputs + ", " + (attributes.empty() ? std::string("default attributes") : attributes) +
         ", " + dtype + ", opset " + std::to_string(opset);
}

std::string_view sweep_outcome_name(SweepOutcome outcome) {
  switch (outcome) {
    case SweepOutcome::kPass: return "pass";
    case SweepOutcome::kFail: return "fail";
    case SweepOutcome::kDeclined: return "declined";
    case SweepOutcome::kTaken: return "taken";
    case SweepOutcome::kError: return "error";
  }
  return "error";
}

std::vector<std::string> sweep_operators() { return sweep::operator_names(); }

Result<std::vector<SweepCase>> sweep_cases(const std::vector<std::string>& ops) {
  const std::vector<std::string> known = sweep::operator_names();
  for (const std::string& op : ops) {
    if (!std::binary_search(known.begin(), known.end(), op)) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      return invalid_argument("--op " + op + ": the operator sweep has no operator '" + op +
                              "' (operators: " + list + ")");
    }
  }
  std::vector<SweepCase> cases;
  for (const sweep::SweepRow& row : sweep::table()) {
    if (!ops.empty() && std::find(ops.begin(), ops.end(), row.op) == ops.end()) continue;
    std::vector<std::string> dtypes;
    for (std::string_view rest = row.dtypes; !rest.empty();) {
      const size_t sp = rest.find(' ');
      dtypes.emplace_back(rest.substr(0, sp));
      rest = sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
    }
    for (const std::string& dtype : dtypes) {
      for (const char* attributes : row.attributes) {
        for (const char* inputs : row.inputs) {
          cases.push_back({row.op, row.opset, dtype, inputs, attributes});
        }
      }
    }
  }
  return cases;
}

std::vector<SweepOperatorTotals> SweepReport::operators() const {
  std::vector<SweepOperatorTotals> out;
  for (const SweepCaseResult& r : cases) {
    auto it = std::find_if(out.begin(), out.end(), [&](const SweepOperatorTotals& t) { return t.op == r.c.op; });
    if (it == out.end()) {
      out.push_back({});
      out.back().op = r.c.op;
      it = out.end() - 1;
    }
    switch (r.outcome) {
      case SweepOutcome::kPass: ++it->passed; break;
      case SweepOutcome::kFail: ++it->failed; break;
      case SweepOutcome::kDeclined: ++it->declined; break;
      case SweepOutcome::kTaken: ++it->taken; break;
      case SweepOutcome::kError: ++it->errors; break;
    }
    if (r.plugin_us >= 0 && r.reference_us >= 0) {
      it->plugin_us += r.plugin_us;
      it->reference_us += r.reference_us;
      ++it->timed;
    }
  }
  return out;
}

size_t SweepReport::failed() const {
  size_t n = 0;
  for (const SweepCaseResult& r : cases) n += r.outcome == SweepOutcome::kFail || r.outcome == SweepOutcome::kError;
  return n;
}

Result<SweepReport> run_operator_sweep(const SweepOptions& options,
                                       const std::function<void(const SweepCaseResult&)>& progress) {
  auto cases = sweep_cases(options.ops);
  if (!cases.ok()) return cases.status();
  SuiteOptions suite;
  suite.plugin = options.plugin;
  suite.search_paths = options.search_paths;
  auto manifest = detail::resolve_plugin(suite);
  if (!manifest.ok()) return manifest.status();
  auto scratch = make_scratch_dir("conformance-sweep");
  if (!scratch.ok()) return scratch.status();
  const detail::ScratchCleanup cleanup{*scratch};

  SweepReport report;
  report.plugin = manifest->name;
  report.coverage_only = options.coverage_only;
  report.perf = options.perf && !options.coverage_only;
  const auto start = std::chrono::steady_clock::now();
  // The cases run in a child process (this one never loads the plugin); a
  // child that crashes or hangs fails the case it was running, and a new
  // child goes on with the next one.
  for (size_t next = 0, round = 0; next < cases->size(); ++round) {
    const fs::path results = *scratch / ("results-" + std::to_string(round) + ".tsv");
    const fs::path work = *scratch / ("work-" + std::to_string(round));
    auto body = [&](const detail::NoteFn& note) {
      return sweep_in_this_process(*manifest, options, *cases, next, work, results, note);
    };
    const auto whole = options.case_timeout * static_cast<int64_t>(cases->size() - next + 1);
    const detail::Verdict verdict =
        options.fork ? detail::run_in_child(body, options.case_timeout, whole) : body([](std::string_view) {});
    const size_t before = next;
    read_sweep_results(results, *cases, &report, &next, progress);
    if (verdict.outcome == CheckOutcome::kPass) {
      if (next != cases->size()) return internal_error("operator sweep: the child stopped at case " + std::to_string(next));
      break;
    }
    const std::string& why = verdict.message;
    if (why.rfind("setup: ", 0) == 0) return invalid_argument(why.substr(7));
    if (next == before && report.device.empty() && why.find("during case") == std::string::npos) {
      return internal_error("operator sweep: " + why);
    }
    if (next >= cases->size()) break;
    SweepCaseResult crashed;
    crashed.c = (*cases)[next];
    crashed.outcome = SweepOutcome::kFail;
    const std::string_view generic = "the check's process ";
    crashed.message = "the sweep's process " + (why.rfind(generic, 0) == 0 ? why.substr(generic.size()) : why);
    if (progress) progress(crashed);
    report.cases.push_back(std::move(crashed));
    ++next;
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

std::string format_sweep_operator(const SweepOperatorTotals& t, bool coverage_only, bool perf) {
  const size_t n = t.passed + t.failed + t.declined + t.taken + t.errors;
  std::string line = t.op + ": " + std::to_string(n) + (n == 1 ? " case: " : " cases: ");
  if (coverage_only) {
    line += std::to_string(t.taken) + " taken, " + std::to_string(t.declined) + " declined";
  } else {
    line += std::to_string(t.passed) + " passed, " + std::to_string(t.failed) + " failed, " +
            std::to_string(t.declined) + " declined";
  }
  if (t.errors > 0) line += ", " + std::to_string(t.errors) + " errors in the table";
  if (perf && t.timed > 0) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2fx", t.plugin_us > 0 ? t.reference_us / t.plugin_us : 0.0);
    line += "; " + std::to_string(t.timed) + " timed: plugin " + sweep_us(t.plugin_us) + ", reference " +
            sweep_us(t.reference_us) + " (" + ratio + " the reference's speed)";
  }
  return line;
}

std::string format_sweep_case(const SweepCaseResult& r) {
  std::string tag = r.outcome == SweepOutcome::kFail ? "FAIL" : r.outcome == SweepOutcome::kError ? "ERROR" : "";
  if (tag.empty()) tag = std::string(sweep_outcome_name(r.outcome));
  std::string line = tag + " " + r.c.op + " [" + r.c.label() + "]";
  if (!r.message.empty()) line += ": " + r.message;
  if (r.plugin_us >= 0 && r.reference_us >= 0) {
    line += " (plugin " + sweep_us(r.plugin_us) + ", reference " + sweep_us(r.reference_us) + ")";
  }
  return line;
}

std::string sweep_report_json(const SweepReport& report) {
  nlohmann::ordered_json j;
  j["plugin"] = report.plugin;
  j["device"] = report.device;
  j["mode"] = report.coverage_only ? "coverage" : "run";
  j["seconds"] = report.seconds;
  SweepOperatorTotals all;
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (const SweepOperatorTotals& t : report.operators()) {
    ops.push_back({{"op", t.op}, {"passed", t.passed}, {"failed", t.failed}, {"declined", t.declined},
                   {"taken", t.taken}, {"errors", t.errors}, {"plugin_us", t.timed ? t.plugin_us : -1.0},
                   {"reference_us", t.timed ? t.reference_us : -1.0}});
    all.passed += t.passed, all.failed += t.failed, all.declined += t.declined;
    all.taken += t.taken, all.errors += t.errors;
  }
  j["totals"] = {{"cases", report.cases.size()}, {"passed", all.passed}, {"failed", all.failed},
                 {"declined", all.declined}, {"taken", all.taken}, {"errors", all.errors}};
  j["operators"] = std::move(ops);
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  for (const SweepCaseResult& r : report.cases) {
    cases.push_back({{"op", r.c.op}, {"opset", r.c.opset}, {"dtype", r.c.dtype}, {"inputs", r.c.inputs},
                     {"attributes", r.c.attributes}, {"outcome", sweep_outcome_name(r.outcome)},
                     {"message", r.message}, {"plugin_us", r.plugin_us}, {"reference_us", r.reference_us}});
  }
  j["cases"] = std::move(cases);
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace loom::conformance
