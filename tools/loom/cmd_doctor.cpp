// `loom doctor [PLUGIN]`: why a plugin is or would be rejected, from its
// files alone (loom/doctor.hpp does the work).
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "loom/doctor.hpp"
#include "loom/runtime.hpp"

namespace loom::cli {

int run_doctor(const DoctorArgs& args) {
  RuntimeOptions options;
  for (const auto& path : args.plugin_paths) options.plugin_paths.emplace_back(path);
  options.require_conformance = args.require_conformance;
  auto diagnoses = diagnose_plugins(options, args.plugin);
  if (!diagnoses.ok()) return fail(diagnoses.status());
  bool all_accepted = true;
  for (const PluginDiagnosis& d : *diagnoses) all_accepted = all_accepted && d.accepted();

  if (args.json) {
    nlohmann::json out = {{"accepted", all_accepted}, {"plugins", nlohmann::json::array()}};
    for (const PluginDiagnosis& d : *diagnoses) {
      nlohmann::json checks = nlohmann::json::array();
      for (const DoctorCheck& c : d.checks) {
        nlohmann::json check = {{"check", c.name},
                                {"outcome", std::string(doctor_outcome_name(c.outcome))},
                                {"detail", c.detail}};
        if (!c.fix.empty() && c.outcome != DoctorCheck::Outcome::kOk) check["fix"] = c.fix;
        checks.push_back(std::move(check));
      }
      out["plugins"].push_back({{"plugin", d.plugin},
                                {"manifest", d.manifest_path.string()},
                                {"library", d.library.string()},
                                {"accepted", d.accepted()},
                                {"checks", std::move(checks)}});
    }
    std::cout << out.dump(2) << "\n";
    return all_accepted ? 0 : 1;
  }
  if (diagnoses->empty()) {
    std::cout << "No plugins found. Loom looks for *.loom-plugin.json manifests in "
                 "$LOOM_PLUGIN_PATH and in <loom>/../lib/loom/plugins.\n";
    return 0;
  }
  for (size_t i = 0; i < diagnoses->size(); ++i) {
    if (i != 0) std::cout << "\n";
    std::cout << (*diagnoses)[i].to_string();
  }
  return all_accepted ? 0 : 1;
}

}  // namespace loom::cli
