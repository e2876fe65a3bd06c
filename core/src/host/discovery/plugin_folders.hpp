// Where the plugin host looks for manifests and for loom-plugin-host:
// folders from the options and the environment, and the places relative to
// the running program and to the shared library Loom is in (libloom.so).
//
// Private to the core; PluginHost reports the folders (search_folders()).
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

#include "loom/device.hpp"

namespace loom::host {

struct HostOptions;

// The folders to search for *.loom-plugin.json, in order, each once (by
// canonical path), with whether each is a folder now. The order:
//   1. HostOptions::search_paths                                  "option"
//   2. $LOOM_PLUGIN_PATH, ':'-separated (use_environment)         "LOOM_PLUGIN_PATH"
//   3. <program dir>/../lib/loom/plugins (use_default_folder)     "program"
//   4. <dir of libloom.so>/loom/plugins, when Loom runs from its
//      shared library (use_default_folder)                       "library"
//   5. $XDG_DATA_HOME/loom/plugins, or $HOME/.local/share/loom/plugins
//      when XDG_DATA_HOME is unset, empty or relative (use_user_folder) "user"
// Reads the environment when called.
std::vector<PluginFolder> plugin_search_folders(const HostOptions& options);

// The per-user plugin folder (5. above), or nothing when neither
// $XDG_DATA_HOME nor $HOME gives one.
std::optional<std::filesystem::path> user_plugin_folder();

// The file of the shared library this code is linked into, or nothing when
// it is linked into the program itself.
std::optional<std::filesystem::path> loom_library_file();

}  // namespace loom::host
