#include "loom/conformance/baseline.hpp"

#include <algorithm>

namespace loom::conformance {
namespace {

std::string_view trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool is_case_name(std::string_view name) {
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.';
  });
}

std::string where(const Baseline& baseline, const Baseline::Entry& e) {
  return baseline.source() + ":" + std::to_string(e.line);
}

}  // namespace

Result<Baseline> Baseline::parse(std::string_view text, std::string_view source) {
  Baseline list;
  list.source_ = std::string(source);
  int line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    std::string at = std::string(source) + ":" + std::to_string(line_no);
    if (line.find_first_of(" \t") != std::string_view::npos) {
      return invalid_argument(at + ": one case name a line, got '" + std::string(line) + "'");
    }
    if (!is_case_name(line) || line.size() > 256) {
      return invalid_argument(at + ": '" + std::string(line.substr(0, 64)) +
                              "' is not a test case name (letters, digits, '_', '-', '.')");
    }
    list.entries_.push_back({std::string(line), line_no});
  }
  std::stable_sort(list.entries_.begin(), list.entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.name < b.name; });
  for (size_t i = 1; i < list.entries_.size(); ++i) {
    const Entry& a = list.entries_[i - 1];
    const Entry& b = list.entries_[i];
    if (a.name == b.name) {
      return invalid_argument(std::string(source) + ":" + std::to_string(std::max(a.line, b.line)) +
                              ": '" + a.name + "' is already listed on line " +
                              std::to_string(std::min(a.line, b.line)));
    }
  }
  return list;
}

Result<Baseline> Baseline::load(const fs::path& file) {
  LOOM_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, read_bounded(file, uint64_t{16} << 20));
  return parse(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
               file.string());
}

const Baseline::Entry* Baseline::find(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const Entry& e, std::string_view n) { return e.name < n; });
  return it != entries_.end() && it->name == name ? &*it : nullptr;
}

BaselineCheck check_baseline(std::span<const CaseResult> results, const Baseline& baseline,
                             bool complete) {
  BaselineCheck check;
  check.listed = baseline.entries().size();
  std::vector<bool> seen(baseline.entries().size(), false);
  for (const CaseResult& r : results) {
    const Baseline::Entry* entry = baseline.find(r.name);
    if (entry) seen[static_cast<size_t>(entry - baseline.entries().data())] = true;
    const bool passed = r.outcome == Outcome::kPass && !r.known_failure;
    if (entry && !passed) {
      ++check.regressed;
      std::string detail(outcome_name(r.outcome));
      if (!r.message.empty()) detail += ": " + r.message;
      check.problems.push_back("baseline case '" + r.name + "' (" + where(baseline, *entry) +
                               ") did not pass: " + detail);
    } else if (!entry && passed) {
      ++check.added;
      check.problems.push_back("case '" + r.name + "' passed but is not in the baseline " +
                               baseline.source() + ": add it (--write-baseline writes the list)");
    }
  }
  if (complete) {
    for (size_t i = 0; i < seen.size(); ++i) {
      if (seen[i]) continue;
      const Baseline::Entry& e = baseline.entries()[i];
      ++check.missing;
      check.problems.push_back("baseline case '" + e.name + "' (" + where(baseline, e) +
                               ") was not run: it is not in the test data given");
    }
  }
  return check;
}

std::string format_baseline(const BaselineCheck& check, const Baseline& baseline) {
  return "baseline " + baseline.source() + ": " + std::to_string(check.listed) + " listed, " +
         std::to_string(check.regressed) + " regressed, " + std::to_string(check.added) +
         " newly passing, " + std::to_string(check.missing) + " missing";
}

std::string baseline_text(std::span<const CaseResult> results, std::string_view device) {
  std::vector<std::string> names;
  for (const CaseResult& r : results) {
    if (r.outcome == Outcome::kPass && !r.known_failure) names.push_back(r.name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::string text =
      "# ONNX backend test cases that pass on " +
      std::string(device.empty() ? "the reference kernels" : device) +
      " (loom test-onnx --baseline).\n"
      "# Every case listed must pass, and a case that passes must be listed: a run\n"
      "# fails otherwise. Regenerate with --write-baseline after a deliberate change.\n";
  for (const std::string& n : names) text += n + "\n";
  return text;
}

}  // namespace loom::conformance
