// What the two replay modes of loom/capture.hpp share: the plugin replayed
// against (and starting it again after a crash), loading a recorded
// executable, comparing replayed bytes, counting outcomes. The executions
// mode lives in capture_replay.cpp, the calls mode (every recorded call in
// order, ReplayOptions::all_calls) in capture_replay_calls.cpp, which
// capture_replay_check.cpp checks the capture for first.
//
// Private to loom_runtime.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "host/handles.hpp"
#include "host/plugin_host.hpp"
#include "host/recording/capture_model.hpp"
#include "loom/capture.hpp"

namespace loom::runtime {

// How often a replay starts the plugin again after it crashed.
inline constexpr int kReplayMaxRestarts = 8;

// The plugin a replay runs on, and how to start it again.
struct ReplayTarget {
  std::unique_ptr<host::PluginHost> host;
  std::shared_ptr<host::LoadedPlugin> plugin;
  size_t device_index = 0;
  std::string name;
  host::HostOptions restart_options;
  int restarts = 0;
};

// Which recorded plugin made the executions: the one with the most.
uint32_t replay_source_plugin(const host::capture::Capture& c);

// Loads the plugin of `options` (else the recorded `source` plugin) and
// picks the device (options.device, else the recorded device's index);
// fills report->plugin and report->device.
Result<ReplayTarget> open_replay_target(const host::capture::Capture& c, uint32_t source,
                                        const ReplayOptions& options, ReplayReport* report);

// Starts the plugin again (a fresh child process when isolated) after it
// was lost; every handle of the old one must be gone. Fails after
// kReplayMaxRestarts restarts, or when the fresh plugin lacks the device.
Status restart_replay_target(ReplayTarget* target);

// The executable of recorded load `r`: its blob when the plugin serves the
// loader key, else the recorded graph that compiled to the blob, compiled
// by the plugin.
Result<std::unique_ptr<host::Executable>> replay_load(
    const host::capture::Capture& c, const host::capture::CallRecord& r,
    const std::shared_ptr<host::LoadedPlugin>& plugin, size_t device_index);

// Compares `byte_size` replayed bytes with the recorded ones as `dtype`
// under options' tolerance for it. When they differ, sets out's outcome
// ("differs"), dtype, difference (its `output` field is `output`) and a
// detail that starts with `what` ("output 0") and returns true.
bool replay_compare(DType dtype, const void* recorded, const void* replayed, uint64_t byte_size,
                    const ReplayOptions& options, std::string_view what, size_t output,
                    ReplayedCall* out);

// Adds `out` to the report: counts its outcome, notes it as the first
// difference when it is one.
void replay_add(ReplayReport* report, ReplayedCall&& out);

// Whether the calls mode replays calls of this kind. The plugin's creation,
// negotiation and device listing happen when the replay loads it; checks,
// estimates and compiles make no state the other calls use.
bool replay_calls_mode_replays(host::capture::CallKind kind);

// Checks what the calls mode relies on, before anything runs: every call
// of recorded plugin `source` on a buffer or fence names one an earlier
// call made and nothing freed since; copies, and tensors in buffers, lie
// within their buffer; a copy's bytes are as many as it copies. Errors
// start with `where` and name the call.
Status check_all_calls(const host::capture::Capture& c, uint32_t source, const std::string& where);

// The calls mode: every call of recorded plugin `source` in the capture's
// order, on `target` (see ReplayOptions::all_calls); `c` passed
// check_all_calls.
Status replay_all_calls(const host::capture::Capture& c, uint32_t source, ReplayTarget& target,
                        const ReplayOptions& options, ReplayReport* report);

}  // namespace loom::runtime
