// A vendor's test driver built against an installed libloom-conformance:
// runs the suite's ABI, device and memory checks on the plugin named by
// argv[1] (a manifest), writes the JSON report to argv[2] and prints one
// line per check and the totals. Used by tests/install/check_install.sh only.
#include <cstdio>
#include <fstream>

#include "loom/conformance.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: run_conformance MANIFEST REPORT.json\n");
    return 2;
  }
  loom::conformance::SuiteOptions options;
  options.plugin = argv[1];
  options.only = {"abi.", "devices.", "memory."};
  auto report = loom::conformance::run_suite(options);
  if (!report.ok()) {
    std::fprintf(stderr, "run_conformance: %s\n", report.status().to_string().c_str());
    return 1;
  }
  for (const loom::conformance::CheckResult& c : report->checks) {
    std::printf("%s %s\n", std::string(loom::conformance::check_outcome_name(c.outcome)).c_str(),
                c.id.c_str());
  }
  std::ofstream(argv[2]) << loom::conformance::report_json(*report);
  std::printf("totals %s: %zu passed, %zu failed, %zu skipped\n", report->plugin.c_str(),
              report->passed(), report->failed(), report->skipped());
  return report->ok() ? 0 : 1;
}
