// `loom capture info|dump CAPTURE`: thin front ends over summarize_capture
// and dump_capture (loom/capture.hpp).
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "loom/capture.hpp"

namespace loom::cli {

int run_capture(const CaptureArgs& args) {
  if (args.action == "dump") {
    Status st = dump_capture(args.capture, std::cout);
    return st.ok() ? 0 : fail(st);
  }
  auto summary = summarize_capture(args.capture);
  if (!summary.ok()) return fail(summary.status());
  const CaptureSummary& s = *summary;
  if (args.json) {
    nlohmann::json j;
    j["capture"] = args.capture;
    j["schema_version"] = s.schema_version;
    j["loom_version"] = s.loom_version;
    j["created_unix_s"] = s.created_unix_s;
    j["host"] = s.host;
    j["plugins"] = nlohmann::json::array();
    for (const auto& p : s.plugins) {
      j["plugins"].push_back({{"name", p.name}, {"version", p.version},
                              {"abi_version", p.abi_version}, {"isolated", p.isolated}});
    }
    j["devices"] = nlohmann::json::array();
    for (const auto& d : s.devices) {
      j["devices"].push_back({{"plugin", d.plugin}, {"uri", d.uri}, {"name", d.name}});
    }
    j["payloads"] = s.payloads;
    j["payload_bytes"] = s.payload_bytes;
    j["calls"] = s.calls;
    j["failed_calls"] = s.failed_calls;
    j["executions"] = s.executions;
    j["calls_by_kind"] = s.calls_by_kind;
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::cout << "capture " << args.capture << ": schema " << s.schema_version << ", loom "
            << s.loom_version << ", host " << escape_control(s.host) << "\n";
  for (const auto& p : s.plugins) {
    std::cout << "plugin " << p.name << " " << p.version << " (ABI " << (p.abi_version >> 16)
              << "." << (p.abi_version & 0xffff) << (p.isolated ? ", isolated" : "") << ")\n";
  }
  for (const auto& d : s.devices) {
    std::cout << "device " << d.uri << ": " << escape_control(d.name) << "\n";
  }
  std::cout << "calls: " << s.calls << " (" << s.failed_calls << " failed), executions: "
            << s.executions << "\n";
  for (const auto& [kind, count] : s.calls_by_kind) std::cout << "  " << kind << ": " << count << "\n";
  std::cout << "payloads: " << s.payloads << " (" << s.payload_bytes << " bytes, each stored once)\n";
  return 0;
}

}  // namespace loom::cli
