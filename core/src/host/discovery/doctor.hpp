// The checks behind loom::diagnose_plugins (loom/doctor.hpp), on the host's
// options, so that tests can point them at any folder and ABI range.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "host/discovery/library_search.hpp"
#include "host/plugin_host.hpp"
#include "loom/doctor.hpp"

namespace loom::host {

// Every check of the plugin whose manifest is `manifest_path`, against a host
// with `options` (its ABI range and require_conformance), resolving needed
// libraries through `search`.
PluginDiagnosis diagnose_manifest(const std::filesystem::path& manifest_path,
                                  const HostOptions& options, const LibrarySearchPath& search);

// The same for a library path: through the manifest beside it that names it,
// else the library's own checks after a problem saying no manifest names it.
PluginDiagnosis diagnose_library(const std::filesystem::path& library, const HostOptions& options,
                                 const LibrarySearchPath& search);

// What loom::diagnose_plugins does, with host options.
Result<std::vector<PluginDiagnosis>> diagnose(const HostOptions& options, std::string_view plugin,
                                              const LibrarySearchPath& search);

}  // namespace loom::host
