// Probe verdicts remembered across processes, so that a plugin is probed in
// a child process (HostOptions::probe) once per build of its library rather
// than at every start, and a plugin that hung or crashed while loading stays
// rejected, with the remembered reason, without costing its timeout again.
//
// One small JSON file per verdict in the cache folder, named after the
// plugin and a digest of everything the verdict depends on (the key):
//   - the plugin's manifest: its path, size and modification time, and the
//     library hash it declares;
//   - the library: its canonical path, device, inode, size and modification
//     time (nanoseconds);
//   - the host: Loom's version and the loom-plugin-host program's path, size
//     and modification time;
//   - what the probe was asked: the ABI range offered, the plugin options
//     and the probe timeout;
//   - the environment, less the variables a shell or terminal session sets
//     (kIgnoredEnvironment): a plugin may read any variable while loading
//     (a Vulkan ICD list, a fault switch), and a verdict is reused only where
//     the probe would have seen the same values.
// Any change of those probes again. Only verdicts about the plugin are
// remembered (it loaded; it failed, crashed, exited or hung while loading),
// never a failure of the host to start the probe.
//
// Files are written whole (write_file_atomically), so processes probing at
// once (a test harness forking per case) share the folder safely. A file
// that is unreadable, malformed or not for its key is ignored and replaced.
//
// Private to the core.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "loom/status.hpp"

namespace loom::host {

struct HostOptions;
struct PluginManifest;

// The format of a verdict file this code reads and writes.
inline constexpr int kProbeVerdictFormat = 1;
// The largest verdict file read (a verdict is a few hundred bytes).
inline constexpr uint64_t kMaxProbeVerdictBytes = 64 * 1024;

// Environment variables left out of the key: those a shell, terminal or
// session sets and no plugin reads to decide how to load.
inline constexpr std::string_view kIgnoredEnvironment[] = {
    "_",        "PWD",      "OLDPWD",       "SHLVL",      "TERM",     "COLORTERM",
    "COLUMNS",  "LINES",    "PS1",          "PS2",        "PS4",      "PROMPT_COMMAND",
    "HISTFILE", "HISTSIZE", "HISTFILESIZE", "HISTCONTROL", "LS_COLORS", "LESSOPEN",
    "LESSCLOSE", "MAIL",    "SSH_CLIENT",   "SSH_CONNECTION", "SSH_TTY", "SSH_AUTH_SOCK",
    "TMUX",     "TMUX_PANE", "STY",         "WINDOW",     "GPG_TTY",  "XDG_SESSION_ID",
    "XDG_VTNR", "LOOM_PROBE_CACHE"};

// A remembered verdict: the probe's status (OK, or why the plugin was
// rejected) and when it was taken.
struct ProbeVerdict {
  int format = kProbeVerdictFormat;
  std::string key;        // 32 hex digits (probe_key)
  std::string plugin;     // the manifest's name
  std::string library;    // the library probed, for a reader of the file
  std::string probed_at;  // ISO-8601 UTC, "2026-11-26T09:30:00Z"
  StatusCode code = StatusCode::kOk;
  std::string message;    // empty when code is OK
};

// Where verdicts are kept unless HostOptions names a folder:
// $LOOM_PROBE_CACHE when it is an absolute path; nothing when it is "off"
// or "0" (every load is probed); else $XDG_CACHE_HOME/loom/probes, else
// $HOME/.cache/loom/probes; nothing when none of them gives a folder.
// Reads the environment when called.
std::optional<std::filesystem::path> default_probe_cache_folder();

// The key of probing `manifest` with `options` through `plugin_host`
// (32 hex digits), from the facts above. An error (a file that cannot be
// examined) means the verdict is not to be remembered.
Result<std::string> probe_key(const PluginManifest& manifest, const HostOptions& options,
                              const std::filesystem::path& plugin_host);

// The file that holds the verdict of `key` for plugin `name` in `folder`.
std::filesystem::path probe_verdict_path(const std::filesystem::path& folder,
                                         std::string_view name, std::string_view key);

// Parses verdict text; `name` (usually the file's path) starts every error,
// which names the field at fault.
Result<ProbeVerdict> parse_probe_verdict(std::string_view text, const std::string& name);
// The text of a verdict file.
std::string format_probe_verdict(const ProbeVerdict& verdict);

// The verdict remembered for `key` in `folder`, or nothing (none, or a file
// that is unreadable, malformed or for another key).
std::optional<ProbeVerdict> recall_probe(const std::filesystem::path& folder,
                                         std::string_view name, std::string_view key);
// Remembers `verdict` (creating the folder); errors are UNAVAILABLE with the
// path, and the caller goes on without the cache.
Status remember_probe(const std::filesystem::path& folder, const ProbeVerdict& verdict);

}  // namespace loom::host
