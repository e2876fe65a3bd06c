// The pinned conformance baseline of `loom test-onnx --baseline`: the list of
// ONNX test cases that pass on one device, checked in beside the known
// failures (tests/onnx/baseline_<device>.txt).
//
// Why it exists: test-onnx allows UNSUPPORTED for any case that uses an
// operator outside the original op list, so a kernel that started refusing
// such an operator would move its cases from PASS to UNSUPPORTED and the run
// would stay green. Against a baseline, every listed case must PASS, and a
// case that passes but is not listed is reported too (add it), so the list is
// exactly the passing set and can only grow on purpose.
//
// Part of the loom_onnx_conformance library (no compiler, no runtime).
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/status.hpp"
#include "loom/conformance/onnx_cases.hpp"

namespace loom::conformance {

// One case name a line; '#' starts a comment; blank lines are ignored. Names
// are ONNX test-case folder names (letters, digits, '_', '-', '.'); a line
// with more than one word, a bad character or a duplicate name is an error
// naming the file and line.
class Baseline {
 public:
  struct Entry {
    std::string name;
    int line = 0;
  };

  static Result<Baseline> parse(std::string_view text, std::string_view source);
  static Result<Baseline> load(const fs::path& file);

  // The entry for `name`, or null.
  const Entry* find(std::string_view name) const;
  const std::vector<Entry>& entries() const { return entries_; }
  const std::string& source() const { return source_; }

 private:
  std::vector<Entry> entries_;  // sorted by name
  std::string source_;
};

// What a run did against a baseline.
struct BaselineCheck {
  size_t listed = 0;     // entries in the baseline
  size_t regressed = 0;  // listed, run, and not PASS
  size_t added = 0;      // PASS but not listed
  size_t missing = 0;    // listed but not among the cases run (only when complete)
  // One line each, for the run's problem list: "baseline case 'x' (FILE:12)
  // did not pass: UNSUPPORTED: ...", "case 'y' passed but is not in the
  // baseline FILE: add it ...", "baseline case 'z' (FILE:3) was not run ...".
  std::vector<std::string> problems;
};

// Compares `results` with `baseline`. `complete`: the run covered the whole
// test data (no --filter), so a listed case that was not run at all is a
// problem (a folder dropped from the run must not pass silently).
BaselineCheck check_baseline(std::span<const CaseResult> results, const Baseline& baseline,
                             bool complete);

// "baseline FILE: L listed, R regressed, A newly passing, M missing".
std::string format_baseline(const BaselineCheck& check, const Baseline& baseline);

// The text of a baseline listing every PASS of `results` (sorted, one a
// line), with a header comment naming the device.
std::string baseline_text(std::span<const CaseResult> results, std::string_view device);

}  // namespace loom::conformance
