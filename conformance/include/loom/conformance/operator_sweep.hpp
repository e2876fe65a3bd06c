// The operator sweep (`loom conformance PLUGIN --ops`): for every operator
// of a table, cases generated over shapes (odd sizes, broadcasting, empty
// tensors), attribute values and dtypes, each built as a one-node ONNX
// model, compiled for the plugin and for the reference kernels, run on both
// with the same seeded inputs and compared (compare_tensors: integers
// exactly, floats within a tolerance per dtype). A case the plugin does not
// take (compile_supported says no) is declined, not failed: the sweep also
// says which operators and attribute combinations a plugin takes.
//
// It complements the ONNX node tests: those hold one or two shapes per
// operator, the sweep the odd and empty ones and attribute values they lack.
//
// Library: loom_conformance. The cases run in a child process, so that
// this one never loads the plugin: a case that crashes or hangs fails with
// the signal or the timeout, and a new child goes on with the next case.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "loom/status.hpp"

namespace loom::conformance {

// One generated case: an operator at an opset with its inputs (the table's
// notation, see sweep_table.cpp: "2x3x5; 5" is two data inputs, the second
// broadcast), attributes ("alpha=0.5 beta=0.25", "" for the defaults) and
// the dtype of its data inputs.
struct SweepCase {
  std::string op;
  int opset = 0;
  std::string dtype;
  std::string inputs;
  std::string attributes;
  // "inputs 2x3x5; 5, alpha=0.5, f32": what a failure line names.
  std::string label() const;
};

// The cases of `ops` (empty: every operator of the table), in table order.
// An operator the table lacks is an error naming it and the known ones.
Result<std::vector<SweepCase>> sweep_cases(const std::vector<std::string>& ops = {});
// The table's operators, sorted.
std::vector<std::string> sweep_operators();

struct SweepOptions {
  // The plugin as SuiteOptions::plugin takes it (manifest, library, name).
  std::string plugin;
  std::string device;  // empty: the plugin's first device
  std::vector<std::pair<std::string, std::string>> plugin_options;
  std::vector<std::filesystem::path> search_paths;
  std::vector<std::string> ops;  // empty: all
  // Compile only: which cases the plugin takes (no run, no comparison).
  bool coverage_only = false;
  // Time each passing case on the plugin and on the reference kernels
  // (median of `perf_runs` runs after one warm-up).
  bool perf = false;
  int perf_runs = 5;
  // The longest one case may take before the sweep's process is killed
  // (the case fails, and a new process goes on with the next one).
  std::chrono::milliseconds case_timeout{60'000};
  // Run the cases in a child process (turn off only to debug the sweep).
  bool fork = true;
};

enum class SweepOutcome : uint8_t {
  kPass,      // the plugin's outputs match the reference kernels'
  kFail,      // they differ, or the plugin's compile, load or run failed
  kDeclined,  // the plugin took no node of the case
  kTaken,     // coverage only: the plugin takes the case (not run)
  kError,     // the case itself is wrong (the reference kernels refuse it)
};
std::string_view sweep_outcome_name(SweepOutcome outcome);  // "pass", "fail", ...

struct SweepCaseResult {
  SweepCase c;
  SweepOutcome outcome = SweepOutcome::kError;
  // A failure: where and how ("output 'y' element [1, 2]: got 0.81, expected
  // 0.75 ..."); an error: why the case is wrong; else empty.
  std::string message;
  double plugin_us = -1;     // perf: the median run on the plugin; -1: not timed
  double reference_us = -1;  // perf: the same on the reference kernels
};

struct SweepOperatorTotals {
  std::string op;
  size_t passed = 0, failed = 0, declined = 0, taken = 0, errors = 0;
  double plugin_us = 0, reference_us = 0;  // perf: sums over the timed cases
  size_t timed = 0;
};

struct SweepReport {
  std::string plugin;
  std::string device;
  bool coverage_only = false;
  bool perf = false;
  std::vector<SweepCaseResult> cases;
  double seconds = 0;
  // Per operator, in the order of the cases.
  std::vector<SweepOperatorTotals> operators() const;
  size_t failed() const;  // failed + errors
  bool ok() const { return failed() == 0; }
};

// Runs the sweep. `progress` is called after each case. The error is for a
// sweep that could not start (no such plugin or device, an unknown op); a
// case the plugin gets wrong is a failed case instead.
Result<SweepReport> run_operator_sweep(
    const SweepOptions& options, const std::function<void(const SweepCaseResult&)>& progress = {});

// One line per operator: "HardSigmoid  opset 6: 12 cases: 9 passed, 3 failed,
// 0 declined" (perf: and the time on the plugin against the reference).
std::string format_sweep_operator(const SweepOperatorTotals& totals, bool coverage_only, bool perf);
// A failed or erroneous case: "FAIL HardSigmoid [inputs 3x5, alpha=0.5, f32]: ...".
std::string format_sweep_case(const SweepCaseResult& result);
// {"plugin", "device", "mode": "run"|"coverage", "seconds", "totals": {...},
//  "operators": [{"op", "passed", "failed", "declined", "taken", "errors",
//  "plugin_us", "reference_us"}], "cases": [{"op", "opset", "dtype",
//  "inputs", "attributes", "outcome", "message", "plugin_us", "reference_us"}]}
std::string sweep_report_json(const SweepReport& report);

}  // namespace loom::conformance
