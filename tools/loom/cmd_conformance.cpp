// `loom conformance PLUGIN`: the conformance suite (loom/conformance.hpp)
// against any plugin binary, with its reports.
#include <charconv>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "loom/conformance.hpp"
#include "loom/conformance/operator_sweep.hpp"
#include "loom/conformance/time_scale.hpp"
#include "loom/runtime.hpp"

namespace loom::cli {

namespace {

namespace cf = loom::conformance;

Status write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return unavailable("cannot write " + path);
  return Status();
}

// FILE[:LOADER_KEY[:FORMAT_VERSION]]
Result<cf::SuiteOptions::BlobFile> parse_blob(const std::string& text) {
  cf::SuiteOptions::BlobFile blob;
  const size_t first = text.find(':');
  blob.path = text.substr(0, first);
  if (first != std::string::npos) {
    const size_t second = text.find(':', first + 1);
    blob.loader_key = text.substr(first + 1, second == std::string::npos ? std::string::npos : second - first - 1);
    if (second != std::string::npos) {
      const std::string v = text.substr(second + 1);
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), blob.format_version);
      if (ec != std::errc() || end != v.data() + v.size()) {
        return invalid_argument("--blob " + text + ": the format version '" + v + "' is not a number");
      }
    }
  }
  if (blob.path.empty()) return invalid_argument("--blob " + text + ": no file");
  return blob;
}

}  // namespace

CLI::App* add_conformance_command(CLI::App& app, ConformanceArgs& args) {
  auto* cmd = app.add_subcommand(
      "conformance",
      "Check a plugin binary against the ABI: negotiation, devices, memory, executables, "
      "execution against the ONNX node tests, threads, fences, lifecycle (each check in a "
      "process of its own)");
  cmd->add_option("PLUGIN", args.plugin,
                  "A manifest (*.loom-plugin.json), a plugin library, or a plugin name");
  cmd->add_option("--device", args.device, "The device URI to test (default: the plugin's first)");
  cmd->add_option("--level", args.level, "basic (seconds) or full (many more mutations, cases, cycles)")
      ->default_str("basic");
  cmd->add_option("--report", args.report, "Write the JSON report here");
  cmd->add_option("--junit", args.junit, "Write a JUnit XML report here");
  cmd->add_option("--markdown", args.markdown, "Write a Markdown report here");
  cmd->add_option("--only", args.only, "Run only the checks whose id starts with this (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--skip", args.skip,
                  "Do not run the checks whose id starts with this (repeatable; reported as skipped)")
      ->allow_extra_args(false);
  cmd->add_option("--onnx-dir", args.onnx_dirs,
                  "Folders of ONNX test cases for the execution check (default: libonnx-testdata's "
                  "node tests)")
      ->allow_extra_args(false);
  cmd->add_option("--blob", args.blobs,
                  "FILE[:LOADER_KEY[:FORMAT_VERSION]]: a blob to test besides those the plugin "
                  "compiles (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--plugin-option", args.plugin_options,
                  "KEY=VALUE handed to the plugin when it is created")
      ->allow_extra_args(false);
  cmd->add_option("--plugin-path", args.plugin_paths, "Search this folder for PLUGIN first")
      ->allow_extra_args(false);
  cmd->add_option("--timeout", args.timeout_s,
                  "Seconds one check may go without progress, each ONNX case or round being "
                  "one step (default 120, times $LOOM_TIME_SCALE when set); a check takes at "
                  "most 20 times this in all")
      ->each([&args](const std::string&) { args.timeout_given = true; });
  cmd->add_flag("--stamp", args.stamp,
                "Record the result beside the plugin's manifest (<name>.loom-conformance.json), "
                "shown by `loom devices` and required by --require-conformance");
  cmd->add_flag("--list", args.list, "List the checks and what each asserts");
  cmd->add_flag("--no-fork", args.no_fork, "Run the checks in this process (for debuggers)");
  cmd->add_flag("--quiet", args.quiet, "Print only failures and the totals");
  cmd->add_flag("--ops", args.ops,
                "Run the operator sweep instead of the checks: generated cases of every operator "
                "(shapes, attributes, dtypes) compared with the reference kernels");
  cmd->add_option("--op", args.op_names, "With --ops, --coverage or --list-ops: only these operators "
                  "(comma-separated or repeated; implies --ops alone)")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->add_flag("--perf", args.perf, "With --ops: time each passing case on the plugin and on the "
                "reference kernels (implies --ops)");
  cmd->add_flag("--coverage", args.coverage,
                "Compile the sweep's cases only: which operator, attribute and dtype combinations "
                "the plugin takes and which it declines");
  cmd->add_flag("--list-ops", args.list_ops,
                "List the sweep's operators; with PLUGIN, how many of each one's cases it takes");
  return cmd;
}

namespace {

// --ops, --coverage, --list-ops: the operator sweep.
int run_operator_sweep_command(const ConformanceArgs& args) {
  const char* mode = args.list_ops ? "--list-ops" : args.coverage ? "--coverage" : "--ops";
  if (args.plugin.empty()) {
    if (args.list_ops) {
      auto cases = cf::sweep_cases(args.op_names);
      if (!cases.ok()) return fail(cases.status());
      for (const std::string& op : cf::sweep_operators()) {
        size_t n = 0;
        int opset = 0;
        for (const cf::SweepCase& c : *cases) {
          if (c.op == op) ++n, opset = c.opset;
        }
        if (n > 0) std::cout << op << "  opset " << opset << ", " << n << " cases\n";
      }
      return 0;
    }
    return fail(invalid_argument(std::string("conformance ") + mode +
                                 ": give the plugin (a manifest, a library or a name)"));
  }
  for (const auto& [given, flag] : {std::pair{args.stamp, "--stamp"}, std::pair{!args.only.empty(), "--only"},
                                    std::pair{!args.skip.empty(), "--skip"},
                                    std::pair{!args.junit.empty(), "--junit"},
                                    std::pair{!args.markdown.empty(), "--markdown"},
                                    std::pair{!args.blobs.empty(), "--blob"},
                                    std::pair{!args.onnx_dirs.empty(), "--onnx-dir"}}) {
    if (given) {
      return fail(invalid_argument(std::string("conformance ") + mode + ": " + flag +
                                   " is for the suite's checks, not the operator sweep"));
    }
  }
  cf::SweepOptions options;
  options.plugin = args.plugin;
  options.device = args.device;
  options.ops = args.op_names;
  for (const std::string& d : args.plugin_paths) options.search_paths.emplace_back(d);
  RuntimeOptions parsed;
  if (Status s = add_plugin_options(args.plugin_options, &parsed); !s.ok()) return fail(s);
  options.plugin_options = parsed.plugin_options;
  options.coverage_only = args.coverage || args.list_ops;
  options.perf = args.perf;
  options.fork = !args.no_fork;
  options.case_timeout = std::chrono::seconds(args.timeout_s);
  if (!args.timeout_given) options.case_timeout = cf::scaled(options.case_timeout);
  auto report = cf::run_operator_sweep(options, [&](const cf::SweepCaseResult& r) {
    const bool bad = r.outcome == cf::SweepOutcome::kFail || r.outcome == cf::SweepOutcome::kError;
    if (bad || (args.coverage && !args.quiet)) std::cout << cf::format_sweep_case(r) << std::endl;
  });
  if (!report.ok()) return fail(report.status());
  if (!args.quiet) {
    for (const cf::SweepOperatorTotals& t : report->operators()) {
      std::cout << cf::format_sweep_operator(t, report->coverage_only, report->perf) << "\n";
    }
  }
  bool written = true;
  if (!args.report.empty()) {
    if (Status s = write_file(args.report, cf::sweep_report_json(*report)); !s.ok()) {
      std::cerr << "loom: error: " << s.message() << "\n";
      written = false;
    }
  }
  size_t passed = 0, declined = 0, taken = 0;
  for (const cf::SweepCaseResult& r : report->cases) {
    passed += r.outcome == cf::SweepOutcome::kPass;
    declined += r.outcome == cf::SweepOutcome::kDeclined;
    taken += r.outcome == cf::SweepOutcome::kTaken;
  }
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f s", report->seconds);
  std::cout << "operator sweep: " << report->plugin << " on " << report->device << ": "
            << report->cases.size() << " cases of " << report->operators().size() << " operators: ";
  if (report->coverage_only) {
    std::cout << taken << " taken, " << declined << " declined";
  } else {
    std::cout << passed << " passed, " << report->failed() << " failed, " << declined << " declined";
  }
  std::cout << " (" << seconds << ")" << std::endl;
  return report->ok() && written ? 0 : 1;
}

}  // namespace

int run_conformance(const ConformanceArgs& args) {
  if (args.ops || args.perf || args.coverage || args.list_ops || !args.op_names.empty()) {
    return run_operator_sweep_command(args);
  }
  if (args.list) {
    for (const cf::CheckInfo& c : cf::list_checks()) std::cout << c.id << "  " << c.summary << "\n";
    return 0;
  }
  if (args.plugin.empty()) {
    return fail(invalid_argument("conformance: give the plugin (a manifest, a library or a name)"));
  }
  cf::SuiteOptions options;
  options.plugin = args.plugin;
  options.device = args.device;
  auto level = cf::parse_level(args.level);
  if (!level.ok()) return fail(level.status());
  options.level = *level;
  options.only = args.only;
  options.skip = args.skip;
  for (const std::string& d : args.onnx_dirs) options.onnx_dirs.emplace_back(d);
  for (const std::string& d : args.plugin_paths) options.search_paths.emplace_back(d);
  for (const std::string& b : args.blobs) {
    auto blob = parse_blob(b);
    if (!blob.ok()) return fail(blob.status());
    options.blobs.push_back(std::move(*blob));
  }
  RuntimeOptions parsed;
  if (Status s = add_plugin_options(args.plugin_options, &parsed); !s.ok()) return fail(s);
  options.plugin_options = parsed.plugin_options;
  options.check_timeout = std::chrono::seconds(args.timeout_s);
  if (!args.timeout_given) options.check_timeout = cf::scaled(options.check_timeout);
  options.fork = !args.no_fork;
  const auto checks = cf::list_checks();
  for (const auto& [flag, prefixes] : {std::pair{"--only", &options.only}, std::pair{"--skip", &options.skip}}) {
    for (const std::string& prefix : *prefixes) {
      bool any = false;
      for (const auto& c : checks) any |= c.id.rfind(prefix, 0) == 0;
      if (!any) {
        return fail(invalid_argument(std::string(flag) + " " + prefix +
                                     ": no check id starts with it (see --list)"));
      }
    }
  }
  auto report = cf::run_suite(options, [&](const cf::CheckResult& c) {
    if (args.quiet && c.outcome != cf::CheckOutcome::kFail) return;
    std::string tag = c.outcome == cf::CheckOutcome::kPass ? "PASS" : c.outcome == cf::CheckOutcome::kFail ? "FAIL" : "SKIP";
    std::cout << tag << " " << c.id;
    if (!c.message.empty()) std::cout << ": " << c.message;
    std::cout << std::endl;
  });
  if (!report.ok()) return fail(report.status());
  bool written = true;
  auto write = [&](const std::string& path, const std::string& text) {
    if (path.empty()) return;
    if (Status s = write_file(path, text); !s.ok()) {
      std::cerr << "loom: error: " << s.message() << "\n";
      written = false;
    }
  };
  write(args.report, cf::report_json(*report));
  write(args.junit, cf::report_junit(*report));
  write(args.markdown, cf::report_markdown(*report));
  if (args.stamp) {
    auto path = cf::stamp_plugin(*report);
    if (!path.ok()) {
      std::cerr << "loom: error: " << path.status().message() << "\n";
      written = false;
    } else {
      std::cout << "stamped: " << path->string() << (report->ok() ? "" : " (recording the failures)") << "\n";
    }
  }
  std::cout << "conformance: " << report->plugin << " on " << report->device << " (suite "
            << report->suite_version << ", " << cf::level_name(report->level) << "): "
            << report->passed() << " passed, " << report->failed() << " failed, "
            << report->skipped() << " skipped" << std::endl;
  return report->ok() && written ? 0 : 1;
}

}  // namespace loom::cli
