// run_suite: finds the plugin, runs every check in a child process, and
// gathers the verdicts.
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "check_context.hpp"
#include "child.hpp"
#include "host/plugin_host.hpp"
#include "loom/conformance.hpp"

namespace loom::conformance {

namespace fs = std::filesystem;
using namespace detail;

std::string_view level_name(Level level) { return level == Level::kFull ? "full" : "basic"; }

Result<Level> parse_level(std::string_view text) {
  if (text == "basic") return Level::kBasic;
  if (text == "full") return Level::kFull;
  return invalid_argument("unknown conformance level '" + std::string(text) +
                          "' (levels: basic, full)");
}

std::string_view check_outcome_name(CheckOutcome outcome) {
  switch (outcome) {
    case CheckOutcome::kPass: return "pass";
    case CheckOutcome::kFail: return "fail";
    case CheckOutcome::kSkip: return "skip";
  }
  return "fail";
}

size_t SuiteReport::passed() const {
  size_t n = 0;
  for (const CheckResult& c : checks) n += c.outcome == CheckOutcome::kPass;
  return n;
}
size_t SuiteReport::failed() const {
  size_t n = 0;
  for (const CheckResult& c : checks) n += c.outcome == CheckOutcome::kFail;
  return n;
}
size_t SuiteReport::skipped() const {
  size_t n = 0;
  for (const CheckResult& c : checks) n += c.outcome == CheckOutcome::kSkip;
  return n;
}

namespace {

std::vector<const CheckDef*> all_checks() {
  std::vector<const CheckDef*> out;
  for (auto family : {abi_checks(), device_checks(), executable_checks(), stress_checks()}) {
    for (const CheckDef& c : family) out.push_back(&c);
  }
  return out;
}

bool matches(const std::vector<std::string>& prefixes, std::string_view id) {
  for (const std::string& prefix : prefixes) {
    if (id.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

bool selected(const SuiteOptions& options, std::string_view id) {
  return options.only.empty() || matches(options.only, id);
}

std::string now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// The manifest of a library file: the one beside it that names it.
Result<host::PluginManifest> manifest_for_library(const fs::path& library) {
  std::error_code ec;
  const fs::path wanted = fs::weakly_canonical(library, ec);
  std::vector<std::string> seen;
  for (const auto& entry : fs::directory_iterator(library.parent_path().empty() ? "." : library.parent_path(), ec)) {
    const std::string file = entry.path().filename().string();
    if (file.size() < 17 || file.substr(file.size() - 17) != ".loom-plugin.json") continue;
    auto manifest = host::parse_manifest(entry.path());
    if (!manifest.ok()) continue;
    std::error_code ec2;
    if (fs::weakly_canonical(manifest->library, ec2) == wanted) return manifest;
    seen.push_back(file);
  }
  return not_found("no manifest beside " + library.string() + " names it as its library" +
                   (seen.empty() ? std::string(" (none found there)") : "") +
                   "; a plugin needs its <name>.loom-plugin.json (see loom_add_plugin)");
}

}  // namespace

Result<host::PluginManifest> detail::resolve_plugin(const SuiteOptions& options) {
  if (options.plugin.empty()) return invalid_argument("no plugin given");
  const fs::path path(options.plugin);
  std::error_code ec;
  const std::string text = options.plugin;
  if (text.size() > 5 && text.substr(text.size() - 5) == ".json") {
    if (!fs::exists(path, ec)) return not_found("manifest " + text + " does not exist");
    return host::parse_manifest(path);
  }
  if (text.find('/') != std::string::npos || fs::is_regular_file(path, ec)) {
    if (!fs::is_regular_file(path, ec)) return not_found("plugin library " + text + " does not exist");
    return manifest_for_library(path);
  }
  host::HostOptions host_options;
  host_options.search_paths = options.search_paths;
  host_options.probe = false;
  auto host = host::PluginHost::create(host_options);
  if (!host.ok()) return host.status();
  std::string names;
  for (const PluginRecord& r : (*host)->plugins()) {
    if (r.name == text) return host::parse_manifest(r.manifest_path);
    names += (names.empty() ? "" : ", ") + r.name;
  }
  return not_found("no plugin named '" + text + "' was found (plugins found: " +
                   (names.empty() ? "none" : names) +
                   "); give a manifest or library path, or add its folder to $LOOM_PLUGIN_PATH");
}

namespace {

// A check may report progress forever; this bounds it all the same.
std::chrono::milliseconds total_timeout(const SuiteOptions& options) {
  return options.check_total_timeout.count() > 0 ? options.check_total_timeout
                                                 : options.check_timeout * 20;
}

}  // namespace

std::vector<CheckInfo> list_checks() {
  std::vector<CheckInfo> out;
  for (const CheckDef* c : all_checks()) out.push_back({c->id, c->summary});
  return out;
}

Result<SuiteReport> run_suite(const SuiteOptions& options,
                              const std::function<void(const CheckResult&)>& progress) {
  auto manifest = resolve_plugin(options);
  if (!manifest.ok()) return manifest.status();
  SuiteReport report;
  report.level = options.level;
  report.plugin = manifest->name;
  report.plugin_version = manifest->version;
  report.manifest = manifest->manifest_path;
  report.library = manifest->library;
  report.library_hash = manifest->library_hash;
  report.started_at = now_iso8601();

  // Which device: asked of the plugin in a child, so that this process
  // never runs plugin code.
  Verdict devices = run_in_child(
      [&](const NoteFn& note) -> Verdict {
        CheckContext ctx(options, *manifest, note);
        auto plugin = ctx.load();
        if (!plugin.ok()) return fail(plugin.status().message());
        auto index = ctx.device_index(**plugin);
        if (!index.ok()) return fail(index.status().message());
        return pass((*plugin)->devices()[*index].uri);
      },
      options.check_timeout, total_timeout(options));
  if (devices.outcome == CheckOutcome::kPass) {
    report.device = devices.message;
  } else if (!options.device.empty() && devices.message.find("no device") == 0) {
    return not_found(devices.message);
  } else {
    report.device = options.device;  // the checks report why it fails
  }
  SuiteOptions effective = options;
  effective.device = report.device;

  for (const CheckDef* def : all_checks()) {
    if (!selected(options, def->id)) continue;
    if (matches(options.skip, def->id)) {
      CheckResult result{def->id, def->summary, CheckOutcome::kSkip, "skipped by request (--skip)", 0};
      if (progress) progress(result);
      report.checks.push_back(std::move(result));
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    auto body = [&](const NoteFn& note) -> Verdict {
      CheckContext ctx(effective, *manifest, note);
      return def->run(ctx);
    };
    Verdict v;
    if (options.fork) {
      v = run_in_child(body, options.check_timeout, total_timeout(options));
    } else {
      try {
        v = body(NoteFn{});
      } catch (const std::exception& e) {
        v = fail(std::string("the check threw: ") + e.what());
      }
    }
    CheckResult result{def->id, def->summary, v.outcome, std::move(v.message),
                       std::chrono::duration<double, std::milli>(
                           std::chrono::steady_clock::now() - start).count()};
    if (progress) progress(result);
    report.checks.push_back(std::move(result));
  }
  return report;
}

}  // namespace loom::conformance
