// Captures of plugin calls: reading, summarizing and replaying them.
//
// A capture (`loom run --record FILE`, RuntimeOptions::record_path) holds
// every ABI call a host made into its plugins, with the bytes that crossed
// (blobs, graphs, tensors), handles replaced by stable ids and payloads
// stored once per content. Replaying it loads each recorded executable again
// on a plugin (the same build, another build, or another plugin, which then
// compiles the recorded graph itself), runs each recorded execution on the
// recorded inputs and compares every output with the recorded one under
// per-dtype tolerances; or, in the calls mode, replays every recorded call
// in order (buffers, copies, maps, fences, executions on those buffers).
// This is how a vendor gates a release and how a customer's failure reaches
// the vendor.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "loom/runtime.hpp"
#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom {

// What a capture holds, for `loom capture info`.
struct CaptureSummary {
  uint32_t schema_version = 0;
  std::string loom_version;
  uint64_t created_unix_s = 0;
  std::string host;
  struct Plugin {
    std::string name, version;
    uint32_t abi_version = 0;
    bool isolated = false;
  };
  std::vector<Plugin> plugins;
  struct Device {
    std::string plugin, uri, name;
  };
  std::vector<Device> devices;
  uint64_t payloads = 0;
  uint64_t payload_bytes = 0;
  uint64_t calls = 0;
  uint64_t failed_calls = 0;
  std::map<std::string, uint64_t> calls_by_kind;  // by ABI entry name
  uint64_t executions = 0;
};

// Reads and validates a capture file; errors name the file and what is wrong.
Result<CaptureSummary> summarize_capture(const std::filesystem::path& path);
// Writes one JSON object per line: the capture's header, then each call
// (index, kind, plugin, device, object ids, status, sizes, tensors with
// dtype, shape and payload hash).
Status dump_capture(const std::filesystem::path& path, std::ostream& out);

// How far a replayed float may be from the recorded one. An element passes
// when it is within any bound that is set; with none set (the default) it
// must be identical. Integers and booleans are always compared exactly.
struct FloatTolerance {
  uint64_t ulps = 0;  // units in the last place of the dtype
  double rel = 0;     // |a - b| <= rel * |recorded|
  double abs = 0;     // |a - b| <= abs
};

// Parses a tolerance option: "[DTYPE=]BOUND[,BOUND]" with DTYPE one of
// f32, f16, bf16, f64 (none: every float dtype) and BOUND "ulps:N",
// "rel:X", "abs:X" or "exact"; adds it to `tolerances`.
Status parse_tolerance(std::string_view text, std::map<DType, FloatTolerance>* tolerances);

// The worst element of an output that differs.
struct TensorDifference {
  size_t output = 0;      // which output of the execution
  uint64_t index = 0;     // flat element index
  uint64_t elements_differing = 0;
  double recorded = 0, replayed = 0;
  double abs_diff = 0;
  uint64_t ulps = 0;      // for floats
};

// Compares one tensor's replayed bytes with the recorded ones. The result
// is empty when every element passes.
std::optional<TensorDifference> compare_tensor(DType dtype, const void* recorded,
                                               const void* replayed, uint64_t byte_size,
                                               const FloatTolerance& tolerance);

struct ReplayOptions {
  // Where plugins are found and how they are created (plugin paths,
  // options, threads).
  RuntimeOptions runtime;
  // The plugin replayed against: a name, or a manifest file
  // (*.loom-plugin.json) whose folder is searched first. Empty: the plugin
  // that made the recorded executions.
  std::string plugin;
  // The device, a URI of that plugin; empty: the recorded device's index.
  std::string device;
  // Tolerances per float dtype; absent: exact.
  std::map<DType, FloatTolerance> tolerances;
  // Run the plugin in a child process (loom-plugin-host), so that a crash
  // is reported against the call that caused it, and the next execution
  // runs in a fresh process (up to 8 restarts); on by default.
  bool isolate = true;
  // The calls mode: replay every recorded call of the plugin in the
  // capture's order instead of each execution on its own. Buffers are
  // allocated and imported again with their recorded sizes (an import over
  // memory the replay owns; allocated instead, and said so, where the
  // plugin cannot import, as an isolated one cannot), copies from the host
  // write the recorded bytes, copies to the host are compared with the
  // recorded bytes (as the dtype of the execution output that last wrote
  // that range, else exactly), maps, unmaps and fences are replayed, and
  // executions run on the replay's buffers at the recorded offsets (inputs
  // in imported or mapped memory get their recorded bytes first: what the
  // host wrote there was no call). Each status is compared with the
  // recorded one; a fence query's answer and a timed-out wait are timing
  // and are not. Serial: an execution with a signal fence is waited for at
  // once, so the fences later executions wait for are signaled by then.
  // Creation, negotiation, device listing, blob checks, estimates and
  // compiles are not replayed as calls. Everything runs on one device.
  // After a crash the plugin starts again; the buffers and fences it held
  // are gone with their contents, so calls on them are skipped with that
  // reason, while executables are loaded again and objects made after the
  // restart replay normally.
  bool all_calls = false;
  // The calls mode: how long an execution with a signal fence is waited
  // for. One that does not signal in time is reported failed; in a child
  // process the plugin is then started again, in this process the rest of
  // the replay is skipped and nothing the execution may still use is freed.
  std::chrono::milliseconds execution_timeout{60'000};
};

// The outcome of one replayed call.
struct ReplayedCall {
  uint64_t call = 0;       // index in the capture
  std::string kind;        // the ABI entry: "execute", "buffer_copy_to_host", ...
  int64_t object = -1;     // the id of the executable, buffer or fence it is on
  // "match", "differs", "failed" (the replay's status differs from the
  // recorded one), "crashed" (the plugin's process died in this call),
  // "skipped" (with the reason in detail).
  std::string outcome;
  std::string detail;
  std::optional<TensorDifference> difference;
  std::string dtype;       // of the differing output
  double seconds = 0;
};

struct ReplayReport {
  std::string capture;
  std::string plugin;      // replayed against
  std::string recorded_plugin;
  std::string device;
  bool all_calls = false;  // the calls mode (ReplayOptions::all_calls)
  uint64_t replayed_calls = 0;  // the calls mode: calls replayed (all kinds)
  uint64_t executions = 0, matched = 0, differed = 0, failed = 0, skipped = 0;
  std::optional<size_t> first_difference;  // index into calls
  std::vector<ReplayedCall> calls;
  // Every execution matched (none differed, failed or was skipped); in the
  // calls mode, every replayed call did too.
  bool passed() const {
    return executions > 0 && (all_calls ? matched == calls.size() : matched == executions);
  }
};

// Replays the executions of a capture, or all its calls (see the top of
// this file and ReplayOptions::all_calls). Errors: the capture cannot be
// read, or (calls mode) a call is on a buffer or fence no earlier call
// made, or copies outside its buffer; the plugin cannot be loaded.
Result<ReplayReport> replay_capture(const std::filesystem::path& capture,
                                    const ReplayOptions& options);
// An upgrade gate: every capture (*.loomcap) of a folder replayed against
// one plugin and device, each under the expectation the folder's
// expectations file for that plugin gives it. The file is
// `<folder>/<plugin>.expectations.json`, an object keyed by device URI
// whose values map a capture's file name to "exact", a tolerance
// ("f32=rel:1e-4,abs:1e-6", as parse_tolerance reads it, ";" between
// several), or "skip: <reason>". A capture without an expectation for the
// device is skipped and says so; a plugin without an expectations file is
// an error (a gate that checks nothing must not pass).
struct GateEntry {
  std::string capture;  // file name
  std::string outcome;  // "PASS", "FAIL", "SKIP"
  std::string detail;   // why it failed or was skipped; the first difference
  std::string expectation;
};
struct GateReport {
  std::string folder, plugin, device, expectations_file;
  std::vector<GateEntry> entries;
  uint64_t passed = 0, failed = 0, skipped = 0;
  bool ok() const { return failed == 0; }
};
// Runs the gate. `options.plugin` is required; `options.device` defaults to
// the plugin's first device (<name>://0).
Result<GateReport> replay_folder(const std::filesystem::path& folder, const ReplayOptions& options);
std::string gate_report_json(const GateReport& report);
std::string gate_report_junit(const GateReport& report);

// What a replayed call's object id names: "executable", "buffer" or
// "fence", by its kind.
std::string_view replay_object_noun(std::string_view kind);

// The report as JSON, and as a JUnit XML test suite (one case per call).
std::string replay_report_json(const ReplayReport& report);
std::string replay_report_junit(const ReplayReport& report);

}  // namespace loom
