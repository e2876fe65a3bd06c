// `loom replay CAPTURE`: a thin front end over loom::replay_capture
// (loom/capture.hpp): replays the recorded executions (or, with --calls
// all, every recorded call) against a plugin and prints the first call that
// differs, with the tensor and its worst element.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "commands.hpp"
#include "loom/capture.hpp"

namespace loom::cli {

namespace {

Status replay_write_file(const std::string& path, const std::string& text, std::string_view flag) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return unavailable(std::string(flag) + " " + path + ": cannot write the file");
  out << text;
  if (!out) return unavailable(std::string(flag) + " " + path + ": writing failed");
  return Status();
}

}  // namespace

int run_replay(const ReplayArgs& args) {
  ReplayOptions options;
  options.plugin = args.plugin;
  options.device = args.device;
  options.isolate = !args.in_process;
  if (args.calls == "all") {
    options.all_calls = true;
  } else if (args.calls != "executions") {
    return fail(invalid_argument("--calls " + args.calls + ": expected 'executions' (the "
                                 "default) or 'all'"));
  }
  if (args.timeout_ms == 0) return fail(invalid_argument("--timeout 0: give at least 1 ms"));
  options.execution_timeout = std::chrono::milliseconds(args.timeout_ms);
  options.runtime.threads = args.threads;
  for (const auto& dir : args.plugin_paths) options.runtime.plugin_paths.emplace_back(dir);
  if (Status st = add_plugin_options(args.plugin_options, &options.runtime); !st.ok()) {
    return fail(st);
  }
  for (const std::string& text : args.tolerances) {
    if (Status st = parse_tolerance(text, &options.tolerances); !st.ok()) {
      return fail(st.with_context("--tolerance"));
    }
  }
  if (std::filesystem::is_directory(args.capture)) {
    auto gate = replay_folder(args.capture, options);
    if (!gate.ok()) return fail(gate.status());
    if (!args.report.empty()) {
      if (Status st = replay_write_file(args.report, gate_report_json(*gate), "--report"); !st.ok()) {
        return fail(st);
      }
    }
    if (!args.junit.empty()) {
      if (Status st = replay_write_file(args.junit, gate_report_junit(*gate), "--junit"); !st.ok()) {
        return fail(st);
      }
    }
    if (args.json) {
      std::cout << gate_report_json(*gate);
    } else {
      for (const GateEntry& e : gate->entries) {
        std::cout << e.outcome << " " << e.capture << ": " << e.detail << "\n";
      }
      std::cout << "gate " << gate->folder << " on " << gate->device << ": " << gate->passed
                << " passed, " << gate->failed << " failed, " << gate->skipped << " skipped\n";
    }
    return gate->ok() ? 0 : 1;
  }
  auto report = replay_capture(args.capture, options);
  if (!report.ok()) return fail(report.status());
  if (report->executions == 0) {
    return fail(failed_precondition("capture " + args.capture + " records no execution to replay"));
  }
  if (!args.report.empty()) {
    if (Status st = replay_write_file(args.report, replay_report_json(*report), "--report"); !st.ok()) {
      return fail(st);
    }
  }
  if (!args.junit.empty()) {
    if (Status st = replay_write_file(args.junit, replay_report_junit(*report), "--junit"); !st.ok()) {
      return fail(st);
    }
  }
  if (args.json) {
    std::cout << replay_report_json(*report);
  } else {
    std::cout << "replayed " << report->capture << " (recorded on " << report->recorded_plugin
              << ") on " << report->device << ": ";
    if (report->all_calls) {
      std::cout << report->replayed_calls << " calls (" << report->executions << " executions), ";
    } else {
      std::cout << report->executions << " executions, ";
    }
    std::cout << report->matched << " matched, " << report->differed << " differ, "
              << report->failed << " failed, " << report->skipped << " skipped\n";
    if (report->first_difference) {
      const ReplayedCall& c = report->calls[*report->first_difference];
      std::cout << "first difference: call " << c.call << " (" << c.kind << ", "
                << replay_object_noun(c.kind) << " " << c.object << "): " << c.outcome << ": "
                << c.detail << "\n";
    }
    if (report->all_calls) {
      // Skips are no difference, but the replay did not pass: say the first.
      for (const ReplayedCall& c : report->calls) {
        if (c.outcome != "skipped") continue;
        std::cout << "first skipped: call " << c.call << " (" << c.kind << ", "
                  << replay_object_noun(c.kind) << " " << c.object << "): " << c.detail << "\n";
        break;
      }
    }
  }
  return report->passed() ? 0 : 1;
}

}  // namespace loom::cli
