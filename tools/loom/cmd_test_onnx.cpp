// `loom test-onnx`: runs ONNX backend test cases through the whole path a
// user takes and compares the results with the expected outputs of each
// data set; a front end to the conformance library's ONNX runner
// (loom/conformance/onnx_runner.hpp).
//
// Cases run in a child process (unless --no-fork) that keeps its runtime from
// case to case (conformance::CaseWorker), so that a crash or a hang in one
// case is reported as that case's ERROR and the run goes on with a fresh
// child, while the plugin is loaded once per child, not once per case.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "loom/conformance/baseline.hpp"
#include "loom/runtime.hpp"
#include "loom/conformance/onnx_cases.hpp"
#include "loom/conformance/onnx_runner.hpp"
#include "loom/conformance/time_scale.hpp"

namespace loom::cli {
namespace {

namespace fs = std::filesystem;
namespace cf = loom::conformance;

}  // namespace

int run_test_onnx(const TestOnnxArgs& args) {
  std::vector<fs::path> roots(args.dirs.begin(), args.dirs.end());
  auto cases = cf::discover_cases(roots, args.filter);
  if (!cases.ok()) return fail(cases.status());
  std::optional<cf::KnownFailures> known;
  if (!args.known_failures.empty()) {
    auto loaded = cf::KnownFailures::load(args.known_failures);
    if (!loaded.ok()) return fail(loaded.status());
    known = std::move(*loaded);
  }
  std::optional<cf::Baseline> baseline;
  if (!args.baseline.empty()) {
    auto loaded = cf::Baseline::load(args.baseline);
    if (!loaded.ok()) return fail(loaded.status());
    baseline = std::move(*loaded);
  }
  cf::CaseRunOptions run_options;
  run_options.runtime.threads = args.threads;
  if (Status s = add_plugin_options(args.plugin_options, &run_options.runtime); !s.ok()) {
    return fail(s);
  }
  run_options.device = args.device;
  run_options.open_shapes = args.open_shapes;
  auto scratch = cf::make_scratch_dir("test-onnx");
  if (!scratch.ok()) return fail(scratch.status());
  const std::string device = cf::device_key(args.device);
  // A case's limit: 300 s by default, stretched on a slow build
  // (cf::time_scale); one given with --timeout is taken as given.
  const auto case_timeout =
      args.timeout_given ? std::chrono::seconds(args.timeout_s)
                         : std::chrono::duration_cast<std::chrono::seconds>(
                               cf::scaled(std::chrono::seconds(args.timeout_s)));

  cf::CaseWorker worker(*cases, run_options, case_timeout);
  std::vector<cf::CaseResult> results;
  std::vector<std::string> problems;
  for (size_t i = 0; i < cases->size(); ++i) {
    const cf::TestCase& test = (*cases)[i];
    auto start = std::chrono::steady_clock::now();
    cf::CaseResult result;
    result.name = test.name;
    result.dir = test.dir;
    auto summary = cf::summarize_model(test.dir / "model.onnx");
    cf::CaseVerdict v;
    if (!summary.ok()) {
      v.outcome = cf::Outcome::kError;
      v.message = summary.status().message();
    } else {
      fs::path dir = *scratch / std::to_string(i);
      std::error_code ec;
      fs::create_directories(dir, ec);
      v = args.no_fork ? cf::run_onnx_case(test, *summary, run_options, dir)
                       : worker.run(i, dir);
      fs::remove_all(dir, ec);
    }
    // Out of scope (a value type Loom lacks, an opset outside
    // 1-21): an UNSUPPORTED verdict is allowed whatever the operators. Such a
    // case still runs, and a wrong result still fails.
    const bool out_of_scope = summary.ok() && !summary->out_of_scope.empty();
    if (out_of_scope && v.outcome == cf::Outcome::kUnsupported) {
      v.message = summary->out_of_scope + ": " + v.message;
    }
    if (summary.ok() && !v.type_only && !out_of_scope) result.op_types = summary->op_types;
    result.outcome = v.outcome;
    result.message = std::move(v.message);
    if (!args.device.empty()) result.placement = v.placement.to_string();
    result.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                          start).count();
    std::vector<cf::CaseResult> one{std::move(result)};
    for (std::string& p : cf::classify(one, known ? &*known : nullptr, device)) {
      problems.push_back(std::move(p));
    }
    if (!args.json) std::cout << cf::format_case(one[0]) << std::endl;
    results.push_back(std::move(one[0]));
  }
  std::error_code ec;
  fs::remove_all(*scratch, ec);

  std::optional<cf::BaselineCheck> pinned;
  if (baseline) {
    pinned = cf::check_baseline(results, *baseline, args.filter.empty());
    for (std::string& p : pinned->problems) problems.push_back(std::move(p));
  }
  if (!args.write_baseline.empty()) {
    std::ofstream out(args.write_baseline, std::ios::binary | std::ios::trunc);
    out << cf::baseline_text(results, args.device);
    out.close();
    if (!out) problems.push_back("cannot write the baseline " + args.write_baseline);
  }
  if (!args.report.empty()) {
    std::ofstream out(args.report, std::ios::binary | std::ios::trunc);
    out << cf::report_json(results, args.device, problems);
    out.close();
    if (!out) problems.push_back("cannot write the report " + args.report);
  }
  cf::Totals totals = cf::count(results);
  if (args.json) {
    std::cout << cf::report_json(results, args.device, problems) << std::endl;
  } else {
    for (const std::string& p : problems) std::cout << "problem: " << p << "\n";
    if (pinned) std::cout << cf::format_baseline(*pinned, *baseline) << "\n";
    std::cout << cf::format_totals(totals, args.device) << std::endl;
  }
  return totals.failed == 0 && totals.errors == 0 && problems.empty() ? 0 : 1;
}

}  // namespace loom::cli
