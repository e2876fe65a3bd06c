// The suite's reports: JSON, JUnit XML and Markdown.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "loom/conformance.hpp"

namespace loom::conformance {

namespace {

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 allows no control characters but tab, newline, return.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += '?';
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string md_cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string seconds(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", ms / 1000.0);
  return text;
}

}  // namespace

std::string report_json(const SuiteReport& r) {
  using nlohmann::json;
  json checks = json::array();
  for (const CheckResult& c : r.checks) {
    checks.push_back({{"id", c.id},
                      {"summary", c.summary},
                      {"outcome", check_outcome_name(c.outcome)},
                      {"message", c.message},
                      {"ms", c.ms}});
  }
  json doc = {{"suite_version", r.suite_version},
              {"level", level_name(r.level)},
              {"started_at", r.started_at},
              {"plugin",
               {{"name", r.plugin},
                {"version", r.plugin_version},
                {"manifest", r.manifest.string()},
                {"library", r.library.string()},
                {"library_hash", r.library_hash}}},
              {"device", r.device},
              {"totals", {{"passed", r.passed()}, {"failed", r.failed()}, {"skipped", r.skipped()}}},
              {"checks", checks}};
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string report_junit(const SuiteReport& r) {
  double total = 0;
  for (const CheckResult& c : r.checks) total += c.ms;
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites name=\"loom-conformance\" tests=\"" + std::to_string(r.checks.size()) +
         "\" failures=\"" + std::to_string(r.failed()) + "\" skipped=\"" + std::to_string(r.skipped()) +
         "\" time=\"" + seconds(total) + "\">\n";
  out += "  <testsuite name=\"" + xml_escape(r.plugin) + "\" tests=\"" + std::to_string(r.checks.size()) +
         "\" failures=\"" + std::to_string(r.failed()) + "\" errors=\"0\" skipped=\"" +
         std::to_string(r.skipped()) + "\" time=\"" + seconds(total) + "\" timestamp=\"" +
         xml_escape(r.started_at) + "\">\n";
  out += "    <properties>\n";
  auto prop = [&](const char* name, const std::string& value) {
    out += "      <property name=\"" + std::string(name) + "\" value=\"" + xml_escape(value) + "\"/>\n";
  };
  prop("suite_version", r.suite_version);
  prop("level", std::string(level_name(r.level)));
  prop("plugin_version", r.plugin_version);
  prop("library", r.library.string());
  prop("library_hash", r.library_hash);
  prop("device", r.device);
  out += "    </properties>\n";
  for (const CheckResult& c : r.checks) {
    const std::string dot = c.id.substr(0, c.id.find('.'));
    out += "    <testcase classname=\"" + xml_escape(r.plugin + "." + dot) + "\" name=\"" + xml_escape(c.id) +
           "\" time=\"" + seconds(c.ms) + "\"";
    if (c.outcome == CheckOutcome::kPass) {
      out += "/>\n";
      continue;
    }
    out += ">\n";
    if (c.outcome == CheckOutcome::kFail) {
      out += "      <failure message=\"" + xml_escape(c.message) + "\">" + xml_escape(c.summary) + "</failure>\n";
    } else {
      out += "      <skipped message=\"" + xml_escape(c.message) + "\"/>\n";
    }
    out += "    </testcase>\n";
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

std::string report_markdown(const SuiteReport& r) {
  std::string out = "# Loom conformance: " + md_cell(r.plugin) + " " + md_cell(r.plugin_version) + "\n\n";
  out += "- Verdict: **" + std::string(r.ok() ? "conforms" : "does not conform") + "** (" +
         std::to_string(r.passed()) + " passed, " + std::to_string(r.failed()) + " failed, " +
         std::to_string(r.skipped()) + " skipped)\n";
  out += "- Suite " + r.suite_version + ", level " + std::string(level_name(r.level)) + ", run " + r.started_at + "\n";
  out += "- Device: `" + md_cell(r.device) + "`\n";
  out += "- Library: `" + md_cell(r.library.string()) + "` (" + md_cell(r.library_hash) + ")\n\n";
  out += "| Check | Result | Details |\n|---|---|---|\n";
  for (const CheckResult& c : r.checks) {
    const char* mark = c.outcome == CheckOutcome::kPass ? "pass" : c.outcome == CheckOutcome::kFail ? "**FAIL**" : "skip";
    out += "| `" + c.id + "` | " + mark + " | " + md_cell(c.message.empty() ? c.summary : c.message) + " |\n";
  }
  return out;
}

}  // namespace loom::conformance
