// stamp_plugin: the conformance stamp beside a plugin's manifest
// (docs/conformance-stamp.md), written with the host's stamp code so that
// what the suite writes is what a host requiring conformance reads.
#include "host/discovery/conformance_stamp.hpp"
#include "host/plugin_host.hpp"
#include "loom/conformance.hpp"

namespace loom::conformance {

Result<std::filesystem::path> stamp_plugin(const SuiteReport& report) {
  auto manifest = host::parse_manifest(report.manifest);
  if (!manifest.ok()) return manifest.status();
  // The stamp vouches for these bytes: the library must still be the one
  // the suite ran and the one the manifest names.
  auto hash = host::hash_file(manifest->library);
  if (!hash.ok()) return hash.status();
  if (*hash != report.library_hash || manifest->library_hash != report.library_hash) {
    return failed_precondition("not stamping " + report.plugin + ": its library changed since the suite ran (" +
                               report.library_hash + " then, " + *hash + " now; the manifest says " +
                               manifest->library_hash + ")");
  }
  host::ConformanceStamp stamp;
  stamp.suite_version = report.suite_version;
  stamp.level = report.level == Level::kFull ? host::ConformanceLevel::kFull : host::ConformanceLevel::kBasic;
  stamp.plugin = manifest->name;
  stamp.plugin_version = manifest->version;
  stamp.library_hash = report.library_hash;
  stamp.stamped_at = report.started_at;
  stamp.passed = report.passed();
  stamp.failed = report.failed();
  stamp.skipped = report.skipped();
  for (const CheckResult& c : report.checks) {
    if (c.outcome == CheckOutcome::kFail) stamp.failed_checks.push_back(c.id);
  }
  const std::filesystem::path path = host::stamp_path_for(*manifest);
  if (Status s = host::write_stamp(path, stamp); !s.ok()) return s;
  return path;
}

}  // namespace loom::conformance
