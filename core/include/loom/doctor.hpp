// Plugin diagnosis (`loom doctor`): why a plugin is, or would be, rejected,
// found without running any of its code. Each check reads files only: the
// manifest, the library's ELF headers, dynamic section and symbol table, the
// libraries it needs, its hash, and the conformance stamp.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "loom/status.hpp"

namespace loom {

// loom/runtime.hpp, which callers of diagnose_plugins include; the plugin
// host's checks include this header for the report types alone.
struct RuntimeOptions;

// One check of one plugin.
struct DoctorCheck {
  enum class Outcome : uint8_t {
    kOk = 0,
    kProblem = 1,  // the host rejects the plugin for this
    kNote = 2,     // worth knowing, not a reason to reject (say, no stamp when none is required)
    kSkipped = 3,  // an earlier problem keeps it from being checked
  };
  std::string name;  // "manifest", "library", "ELF", "dependencies", "entry point", ...
  Outcome outcome = Outcome::kOk;
  std::string detail;  // what was found
  std::string fix;     // for a problem or a note: what to do about it
};

// "OK", "PROBLEM", "NOTE", "SKIP".
std::string_view doctor_outcome_name(DoctorCheck::Outcome outcome);

// Every check of one plugin, in order.
struct PluginDiagnosis {
  std::string plugin;  // the manifest's name, else the file's
  std::filesystem::path manifest_path;  // empty when no manifest names the library
  std::filesystem::path library;        // empty when the manifest is unreadable
  std::vector<DoctorCheck> checks;

  // Whether the host would accept it: no check has a problem.
  bool accepted() const;
  // A readable report: a heading, then one line per check with its outcome,
  // and the fix under each problem or note.
  std::string to_string() const;
};

// Diagnoses the plugins `plugin` names: a manifest path
// (*.loom-plugin.json), a library path, or a plugin name looked up in the
// folders `options` searches (as Runtime does); empty: every manifest found.
// options.require_conformance makes a missing or mismatched stamp a problem.
// NOT_FOUND when a name matches no manifest (listing those found) or a path
// does not exist.
Result<std::vector<PluginDiagnosis>> diagnose_plugins(const RuntimeOptions& options,
                                                      std::string_view plugin = {});

}  // namespace loom
