// The Loom conformance suite: checks that a plugin binary behaves as the ABI
// (loom/plugin.h) says, whoever built it. `loom conformance` is its front
// end; a vendor's CI or a test calls run_suite() directly.
//
// Every check runs in a child process of its own (unless SuiteOptions::fork
// is off), so a plugin that crashes, aborts or hangs is reported as such
// (signal, exit status, timeout) and the suite goes on with the next check.
// The calling process never loads the plugin.
//
// Checks have stable ids ("memory.copy_odd_offsets"), grouped by the part of
// the ABI they exercise: abi, devices, memory, executables, execution,
// threads, fences, lifecycle. list_checks() names them all with what each
// asserts. A check that does not apply (no compile entries, no host-visible
// memory) is skipped with the reason; a failing check says in one line what
// was expected and what happened.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loom/status.hpp"

namespace loom::conformance {

// The suite's version, recorded in reports and conformance stamps. It
// changes whenever a check is added or made stricter.
inline constexpr std::string_view kSuiteVersion = "1.0";

enum class Level : uint8_t {
  kBasic,  // every check, with small repeat counts (seconds per plugin)
  kFull,   // the same checks with large counts: ~1000 mutations per blob,
           // every ONNX node test the plugin takes, many lifecycle cycles
};
std::string_view level_name(Level level);  // "basic", "full"
Result<Level> parse_level(std::string_view text);

struct CheckInfo {
  std::string id;       // "memory.copy_odd_offsets"
  std::string summary;  // what it asserts, one line
};
// Every check, in the order run_suite runs them.
std::vector<CheckInfo> list_checks();

struct SuiteOptions {
  // A manifest path (*.loom-plugin.json), a plugin library path (the
  // manifest beside it that names it is used) or a plugin name (searched
  // in `search_paths`, $LOOM_PLUGIN_PATH and the default plugin folder, as
  // the host does).
  std::string plugin;
  // The device to test; empty: the plugin's first device.
  std::string device;
  Level level = Level::kBasic;
  // Options handed to plugin_create ("key", "value").
  std::vector<std::pair<std::string, std::string>> plugin_options;
  // Where plugin names are searched first.
  std::vector<std::filesystem::path> search_paths;
  // Checks to run: those whose id starts with one of these; empty: all.
  std::vector<std::string> only;
  // Checks not to run (id prefixes): reported as skipped "by request", so
  // a report never hides that a check was left out.
  std::vector<std::string> skip;
  // Folders of ONNX backend test cases for the execution checks; empty:
  // the node tests of Debian's libonnx-testdata when installed.
  std::vector<std::filesystem::path> onnx_dirs;
  // Blobs to test besides those the plugin compiles itself (a plugin
  // without compile entries has no others): the file's bytes, loaded under
  // `loader_key` (empty: the plugin's first loader key) and format version.
  struct BlobFile {
    std::filesystem::path path;
    std::string loader_key;
    uint32_t format_version = 0;
  };
  std::vector<BlobFile> blobs;
  // The longest one check may go without progress before its process is
  // killed: each step it reports (an ONNX case, a thread's round) starts
  // the clock again, so the limit bounds a step, whatever the number of
  // steps.
  std::chrono::milliseconds check_timeout{60'000};
  // The most one check may take in all; zero: 20 times check_timeout.
  std::chrono::milliseconds check_total_timeout{0};
  // Run each check in a child process (turn off only to debug a check).
  bool fork = true;
  // The loom-plugin-host program, for the isolation check; empty: found as
  // the host finds it.
  std::filesystem::path plugin_host_program;
};

enum class CheckOutcome : uint8_t { kPass, kFail, kSkip };
std::string_view check_outcome_name(CheckOutcome outcome);  // "pass", "fail", "skip"

struct CheckResult {
  std::string id;
  std::string summary;
  CheckOutcome outcome = CheckOutcome::kFail;
  // For a failure: what was expected and what happened, one line. For a
  // skip: why. For a pass: a short note on what was covered (may be empty).
  std::string message;
  double ms = 0;
};

struct SuiteReport {
  std::string suite_version{kSuiteVersion};
  Level level = Level::kBasic;
  std::string plugin;           // the plugin's name (from its manifest)
  std::string plugin_version;
  std::filesystem::path manifest;
  std::filesystem::path library;
  std::string library_hash;     // the manifest's notation
  std::string device;           // the device URI tested
  std::string started_at;       // ISO-8601 UTC
  std::vector<CheckResult> checks;
  size_t passed() const;
  size_t failed() const;
  size_t skipped() const;
  bool ok() const { return failed() == 0; }
};

// Runs the checks. `progress`, when set, is called after each check. The
// error is for a suite that could not start (no such plugin, an unreadable
// manifest); everything the plugin does wrong is a failed check instead.
Result<SuiteReport> run_suite(const SuiteOptions& options,
                              const std::function<void(const CheckResult&)>& progress = {});

// Writes the conformance stamp of `report` beside the plugin's manifest
// (<manifest dir>/<plugin>.loom-conformance.json, docs/conformance-stamp.md)
// and returns its path. The stamp records the results as they are: a run
// with failures is stamped too, and a host requiring conformance refuses it.
// Refused (FAILED_PRECONDITION) when the library is no longer the one the
// suite ran.
Result<std::filesystem::path> stamp_plugin(const SuiteReport& report);

// Reports. JSON: {"suite_version", "level", "plugin": {...}, "device",
// "totals": {"passed", "failed", "skipped"}, "checks": [{"id", "summary",
// "outcome", "message", "ms"}]}. JUnit XML: one testsuite, one testcase
// per check (failure/skipped elements). Markdown: a title, the totals and
// a table of every check.
std::string report_json(const SuiteReport& report);
std::string report_junit(const SuiteReport& report);
std::string report_markdown(const SuiteReport& report);

}  // namespace loom::conformance
