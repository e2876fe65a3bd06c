// Recording the ABI calls a host makes into its plugins (issue 29).
//
// A CaptureRecorder collects calls from every plugin of one PluginHost
// (HostOptions::record_path) and writes them as one capture file
// (schemas/capture.fbs) when the last owner lets go of it, or on flush().
// A recording function table (recording_api.cpp) sits between LoadedPlugin
// and the plugin's own table, in process or isolated alike: it wraps every
// handle the plugin makes in a struct carrying a stable id, forwards each
// call and records its arguments, bytes, outcome and duration.
//
// What recording changes: an execution with a signal fence is recorded when
// the fence reports completion (its outputs are read then); tensor and copy
// bytes are hashed and kept once per distinct content. Thread-safe.
//
// Private to the core.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "host/plugin_host.hpp"
#include "host/recording/capture_model.hpp"

namespace loom::host {

class CaptureRecorder {
 public:
  // A recorder writing to `path`; fails when the file cannot be created.
  static Result<std::shared_ptr<CaptureRecorder>> create(const std::filesystem::path& path);
  // Writes the capture (a failure is reported on stderr).
  ~CaptureRecorder();
  CaptureRecorder(const CaptureRecorder&) = delete;
  CaptureRecorder& operator=(const CaptureRecorder&) = delete;

  // Writes what was recorded so far; later calls are written again at the
  // end.
  Status flush();
  const std::filesystem::path& path() const { return path_; }

  uint32_t add_plugin(capture::PluginEntry entry);
  int64_t add_device(capture::DeviceEntry entry);
  // The index of a payload with these bytes, stored once per content.
  int64_t add_payload(std::span<const std::byte> bytes);
  void add_call(capture::CallRecord call);
  // A new id for an executable, buffer or fence (numbered per kind).
  enum class ObjectKind { kExecutable = 0, kBuffer = 1, kFence = 2 };
  int64_t new_id(ObjectKind kind);
  // Nanoseconds since the recorder was made.
  uint64_t now_ns() const;
  // A small number for the calling thread, stable for the capture.
  uint32_t thread_number();
  // A copy of what was recorded (tests, the benchmark).
  capture::Capture snapshot() const;

 private:
  CaptureRecorder() = default;
  Status write_locked();
  std::filesystem::path path_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;
  capture::Capture capture_;
  std::unordered_map<std::string, int64_t> payload_index_;
  std::map<std::thread::id, uint32_t> threads_;
  int64_t next_ids_[3] = {0, 0, 0};
};

// The recording layer over one loaded plugin. Owns the wrapped handles of
// the plugin instance and its devices and the recording table.
// (RecordingPlugin and its deleter are declared in plugin_host.hpp.)
using RecordingPluginPtr = std::unique_ptr<RecordingPlugin, RecordingPluginDeleter>;

// What the host knew of a plugin when it started recording it.
struct RecordedPluginFacts {
  const PluginManifest* manifest = nullptr;
  uint32_t abi_version = 0;
  uint32_t abi_min = 0, abi_max = 0;  // the range the host offered
  const std::vector<LoadedPlugin::LoaderKeyRange>* loader_keys = nullptr;
  bool isolated = false;
  const std::vector<DeviceInfo>* devices = nullptr;
  const std::vector<std::pair<std::string, std::string>>* plugin_options = nullptr;
};

// Puts a recording table over `real_api`/`real_instance`: records the
// negotiation, the plugin's creation and its devices as they happened, and
// sets the outputs to the table, instance and device handles the host uses
// from then on (valid while the returned object lives).
RecordingPluginPtr wrap_for_recording(std::shared_ptr<CaptureRecorder> recorder,
                                      const RecordedPluginFacts& facts,
                                      const loom_plugin_api_t* real_api,
                                      loom_plugin_t* real_instance,
                                      const std::vector<loom_device_t*>& real_devices,
                                      const loom_plugin_api_t** out_api,
                                      loom_plugin_t** out_instance,
                                      std::vector<loom_device_t*>* out_devices);

}  // namespace loom::host
