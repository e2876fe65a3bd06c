// The upgrade gate over a folder of captures (loom/capture.hpp,
// replay_folder): one expectations file per plugin, keyed by device.
#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "host/plugin_host.hpp"
#include "loom/capture.hpp"

namespace loom {

namespace {

constexpr uint64_t kGateMaxExpectationsBytes = 1 << 20;

std::string gate_xml(std::string_view s) {
  std::string out;
  for (char ch : s) {
    if (ch == '&') out += "&amp;";
    else if (ch == '<') out += "&lt;";
    else if (ch == '>') out += "&gt;";
    else if (ch == '"') out += "&quot;";
    else if (static_cast<unsigned char>(ch) < 0x20) out += ' ';
    else out += ch;
  }
  return out;
}

}  // namespace

Result<GateReport> replay_folder(const std::filesystem::path& folder, const ReplayOptions& options) {
  namespace fs = std::filesystem;
  GateReport report;
  report.folder = folder.string();
  if (options.plugin.empty()) {
    return invalid_argument("replaying the folder " + folder.string() +
                            " needs --plugin: its expectations are per plugin");
  }
  std::string name = options.plugin;
  if (host::is_manifest_file_name(fs::path(name).filename().string()) ||
      name.find('/') != std::string::npos) {
    LOOM_ASSIGN_OR_RETURN(host::PluginManifest manifest, host::parse_manifest(name));
    name = manifest.name;
  }
  report.plugin = name;
  report.device = options.device.empty() ? name + "://0" : options.device;
  const fs::path expectations = folder / (name + ".expectations.json");
  report.expectations_file = expectations.string();
  std::error_code ec;
  if (!fs::is_regular_file(expectations, ec)) {
    return not_found("no expectations for plugin '" + name + "' in " + folder.string() +
                     ": " + expectations.filename().string() +
                     " is missing (a gate that checks nothing does not pass)");
  }
  if (fs::file_size(expectations, ec) > kGateMaxExpectationsBytes) {
    return invalid_argument(expectations.string() + " is larger than 1 MiB");
  }
  nlohmann::json doc;
  {
    std::ifstream in(expectations);
    doc = nlohmann::json::parse(in, nullptr, false);
  }
  if (doc.is_discarded() || !doc.is_object()) {
    return invalid_argument(expectations.string() +
                            ": not a JSON object keyed by device URI");
  }
  const nlohmann::json* device = nullptr;
  if (auto it = doc.find(report.device); it != doc.end()) {
    if (!it->is_object()) {
      return invalid_argument(expectations.string() + ": \"" + report.device +
                              "\" must map capture file names to expectations");
    }
    device = &*it;
  }
  std::vector<fs::path> captures;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".loomcap") {
      captures.push_back(entry.path());
    }
  }
  if (ec) return not_found("cannot list " + folder.string() + ": " + ec.message());
  std::sort(captures.begin(), captures.end());
  if (captures.empty()) return not_found("no *.loomcap capture in " + folder.string());
  for (const fs::path& path : captures) {
    GateEntry e;
    e.capture = path.filename().string();
    const nlohmann::json* want = nullptr;
    if (device != nullptr) {
      if (auto it = device->find(e.capture); it != device->end()) want = &*it;
    }
    if (want == nullptr) {
      e.outcome = "SKIP";
      e.detail = "no expectation for " + report.device + " in " + expectations.filename().string();
      ++report.skipped;
      report.entries.push_back(std::move(e));
      continue;
    }
    if (!want->is_string()) {
      return invalid_argument(expectations.string() + ": \"" + report.device + "\" / \"" +
                              e.capture + "\" must be a string (exact, a tolerance, skip: ...)");
    }
    e.expectation = want->get<std::string>();
    if (e.expectation.rfind("skip", 0) == 0) {
      e.outcome = "SKIP";
      e.detail = e.expectation;
      ++report.skipped;
      report.entries.push_back(std::move(e));
      continue;
    }
    ReplayOptions one = options;
    one.device = report.device;
    if (e.expectation != "exact") {
      std::stringstream parts(e.expectation);
      std::string part;
      while (std::getline(parts, part, ';')) {
        LOOM_RETURN_IF_ERROR(parse_tolerance(part, &one.tolerances)
                                 .with_context(expectations.string() + ": " + e.capture));
      }
    }
    auto replayed = replay_capture(path, one);
    if (!replayed.ok()) {
      e.outcome = "FAIL";
      e.detail = replayed.status().to_string();
    } else if (replayed->passed()) {
      e.outcome = "PASS";
      e.detail = replayed->all_calls
                     ? std::to_string(replayed->matched) + " calls matched (" +
                           std::to_string(replayed->executions) + " executions)"
                     : std::to_string(replayed->matched) + " executions matched";
    } else {
      e.outcome = "FAIL";
      const ReplayedCall* first = nullptr;
      if (replayed->first_difference) {
        first = &replayed->calls[*replayed->first_difference];
      } else {
        for (const ReplayedCall& c : replayed->calls) {
          if (c.outcome != "match" && first == nullptr) first = &c;
        }
      }
      if (first != nullptr) {
        e.detail = "call " + std::to_string(first->call) + " (" + first->kind + "): " +
                   first->outcome + ": " + first->detail;
      } else {
        e.detail = "no execution was replayed";
      }
    }
    (e.outcome == "PASS" ? report.passed : report.failed)++;
    report.entries.push_back(std::move(e));
  }
  return report;
}

std::string gate_report_json(const GateReport& report) {
  nlohmann::json j;
  j["folder"] = report.folder;
  j["plugin"] = report.plugin;
  j["device"] = report.device;
  j["expectations"] = report.expectations_file;
  j["passed"] = report.passed;
  j["failed"] = report.failed;
  j["skipped"] = report.skipped;
  j["captures"] = nlohmann::json::array();
  for (const GateEntry& e : report.entries) {
    j["captures"].push_back({{"capture", e.capture}, {"outcome", e.outcome},
                             {"expectation", e.expectation}, {"detail", e.detail}});
  }
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string gate_report_junit(const GateReport& report) {
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\""
    << gate_xml("replay gate " + report.folder + " on " + report.device) << "\" tests=\""
    << report.entries.size() << "\" failures=\"" << report.failed << "\" skipped=\""
    << report.skipped << "\">\n";
  for (const GateEntry& e : report.entries) {
    x << "  <testcase classname=\"" << gate_xml(report.plugin) << "\" name=\"" << gate_xml(e.capture)
      << "\">";
    if (e.outcome == "FAIL") x << "<failure message=\"" << gate_xml(e.detail) << "\"/>";
    if (e.outcome == "SKIP") x << "<skipped message=\"" << gate_xml(e.detail) << "\"/>";
    x << "</testcase>\n";
  }
  x << "</testsuite>\n";
  return x.str();
}

}  // namespace loom
