// PluginHost: discovers plugins through their manifests, negotiates the ABI,
// loads libraries lazily with Boost.DLL and keeps each library loaded while
// any object it made is alive.
//
// Private to the core; the public face is loom::Runtime (loom/runtime.hpp).
#pragma once

#include <chrono>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loom/device.hpp"
#include "loom/plugin.h"
#include "loom/status.hpp"
#include "loom/trace.hpp"

namespace loom::host {

// The most devices the host lists for one plugin; a plugin reporting more is
// rejected (a count is a size the plugin declares: it is checked before
// anything is made for it).
inline constexpr size_t kMaxDevicesPerPlugin = 1024;
// Device names longer than this are cut when listed (control characters in
// them are escaped).
inline constexpr size_t kMaxDeviceNameLength = 256;
// The largest manifest file the host reads (they are a few hundred bytes);
// a larger one is rejected unread. Its string fields are bounded too (name
// and version 64 characters, loader keys 128, the library file name 255,
// printable ASCII only), so nothing printed from a manifest runs long or
// carries control characters.
inline constexpr uint64_t kMaxManifestBytes = 64 * 1024;

// The file name ending of a plugin's manifest: <name>.loom-plugin.json.
inline constexpr std::string_view kManifestSuffix = ".loom-plugin.json";
// Whether `file_name` is a manifest's (a name before kManifestSuffix).
bool is_manifest_file_name(std::string_view file_name);

// What a plugin's manifest (<name>.loom-plugin.json) says.
struct PluginManifest {
  std::filesystem::path manifest_path;
  std::string name;
  std::string version;
  uint32_t abi_min = 0;  // LOOM_ABI_VERSION values
  uint32_t abi_max = 0;
  std::vector<std::string> loader_keys;
  std::filesystem::path library;  // absolute, resolved against the manifest
  std::string library_hash;       // "xxh3-128:<32 hex digits>"
  // "isolation": "process" asks for the plugin to run in a process of its
  // own (remote_plugin.hpp); absent or "in-process": loaded into the host.
  bool isolated = false;
};

// Parses a manifest file. Errors name the file and the field.
Result<PluginManifest> parse_manifest(const std::filesystem::path& path);
// Hash of a file in the manifest's notation ("xxh3-128:...").
Result<std::string> hash_file(const std::filesystem::path& path);
// Parses "major.minor" into a LOOM_ABI_VERSION value.
Result<uint32_t> parse_abi_version(std::string_view text);
// Formats a LOOM_ABI_VERSION value as "major.minor".
std::string format_abi_version(uint32_t version);
// Formats an ABI version range as "major.minor-major.minor".
std::string format_abi_range(uint32_t min, uint32_t max);

// Receives the log lines of plugins. May be called from any thread; the host
// serializes calls, so a sink needs no lock of its own.
using LogSink = std::function<void(loom_log_level_t, std::string_view)>;

// Converts a plugin status object to a loom::Status and destroys it.
// A NULL status is OK.
Status take_status(const loom_plugin_api_t& api, loom_status_t* status);

struct HostOptions;
struct LogChannel;  // the log sink shared by a host and its plugins
class RemotePlugin;
struct RemotePluginDeleter {
  void operator()(RemotePlugin* remote) const;
};
class CaptureRecorder;  // host/recording/capture_recorder.hpp
class RecordingPlugin;
struct RecordingPluginDeleter {
  void operator()(RecordingPlugin* plugin) const;
};

// One loaded, negotiated, created plugin. Shared by every object that the
// plugin made, so the library outlives all of them. Thread-safe after
// construction.
class LoadedPlugin {
 public:
  ~LoadedPlugin();  // destroys the instance, then unloads the library

  // A loader key the plugin serves and the blob format versions it takes.
  struct LoaderKeyRange {
    std::string key;
    uint32_t format_min = 0;
    uint32_t format_max = 0;
  };

  // Loads the plugin of `manifest` into this process, as PluginHost does
  // (hash, negotiation, checks, instance, devices); its log lines go to
  // options.log_sink. Used by loom-plugin-host, which runs one plugin for an
  // isolating host.
  // Its trace events go to `trace` when one is given.
  static Result<std::shared_ptr<LoadedPlugin>> open_in_this_process(
      const PluginManifest& manifest, const HostOptions& options,
      std::shared_ptr<Trace> trace = nullptr);

  const PluginManifest& manifest() const { return manifest_; }
  const std::string& name() const { return manifest_.name; }
  const loom_plugin_api_t& api() const { return *api_; }
  loom_plugin_t* instance() const { return instance_; }
  uint32_t abi_version() const { return abi_version_; }
  const std::vector<DeviceInfo>& devices() const { return devices_; }
  // Borrowed device handle for devices()[index].
  loom_device_t* device_handle(size_t index) const { return device_handles_[index]; }
  // Whether the plugin serves `loader_key` (per plugin_info).
  bool serves(std::string_view loader_key) const;
  // The loader keys of plugin_info with their format version ranges.
  const std::vector<LoaderKeyRange>& loader_key_ranges() const { return loader_keys_; }
  // Whether it runs in a process of its own; then its process id, else 0.
  bool isolated() const { return remote_ != nullptr; }
  int process_id() const { return process_id_; }
  // The ABI 1.1 executable_estimate entry, when the version chosen has it
  // and the plugin gives one; else nullptr.
  auto estimate_entry() const -> decltype(loom_plugin_api_t::executable_estimate) {
    return abi_version_ >= LOOM_ABI_VERSION(1, 1) && abi_version_ < LOOM_ABI_VERSION(2, 0) &&
                   LOOM_STRUCT_HAS(loom_plugin_api_t, api_->struct_size, executable_estimate)
               ? api_->executable_estimate
               : nullptr;
  }
  // ABI 1.2: whether its compile entries take graphs with open dimensions
  // and its executables the shapes of each execution
  // (LOOM_PLUGIN_CAP_OPEN_SHAPES). An isolated plugin's process forwards
  // what its plugin declared.
  bool serves_open_shapes() const { return (capabilities_ & LOOM_PLUGIN_CAP_OPEN_SHAPES) != 0; }
  // Its LOOM_PLUGIN_CAP_* bits (ABI 1.2; 0 below).
  uint64_t capabilities() const { return capabilities_; }
  // Whether the plugin makes buffers over host memory (buffer_import_host).
  bool imports_host_memory() const { return api_->buffer_import_host != nullptr; }
  // Whether a fence handed to execute is re-armed by each execution (ABI
  // 1.1), so one fence serves every run; under 1.0 a fence signals once.
  bool rearms_fences() const {
    return abi_version_ >= LOOM_ABI_VERSION(1, 1) && abi_version_ < LOOM_ABI_VERSION(2, 0);
  }
  // Whether `pointer` came from this plugin's `allocate` service and was not
  // freed; if so it is no longer tracked, and the caller frees it with
  // std::free. False for anything else (memory the plugin made itself).
  bool take_host_allocation(void* pointer) const;
  // Converts and destroys a status object of this plugin.
  Status take(loom_status_t* status) const { return take_status(*api_, status); }
  // Asks the plugin again whether it can run here (plugin_check_available);
  // availability can change after loading, e.g. when a device is lost.
  Status check_available() const;
  // Puts the recording table (host/recording/capture_recorder.hpp) between
  // the host and the plugin: every later call is recorded into `recorder`.
  // Called once, right after loading, before any object is made.
  void start_recording(std::shared_ptr<CaptureRecorder> recorder, const HostOptions& options);
  // Whether calls are recorded.
  bool recording() const { return recording_ != nullptr; }
  // The reason the last check_available() failed; empty while available.
  // Plugins unavailable at load time are rejected and never handed out.
  std::string unavailable_reason() const;

 private:
  friend class PluginHost;
  struct Library;         // the Boost.DLL handle, hidden from this header
  struct ServiceContext;  // what the host services' user_data points to
  LoadedPlugin() = default;
  // Loads the library of `manifest`, negotiates the ABI, creates the instance
  // and lists its devices. Errors are the rejection reason.
  static Result<std::shared_ptr<LoadedPlugin>> open(const PluginManifest& manifest,
                                                    const HostOptions& options,
                                                    std::shared_ptr<LogChannel> log);
  // The same, with the plugin in a loom-plugin-host process of its own.
  static Result<std::shared_ptr<LoadedPlugin>> open_isolated(const PluginManifest& manifest,
                                                             const HostOptions& options,
                                                             std::shared_ptr<LogChannel> log);
  Status negotiate(const HostOptions& options);
  Status create_instance(const HostOptions& options);
  Status list_devices();

  PluginManifest manifest_;
  std::unique_ptr<Library> library_;
  const loom_plugin_api_t* api_ = nullptr;
  loom_plugin_t* instance_ = nullptr;
  uint32_t abi_version_ = 0;
  uint64_t capabilities_ = 0;  // LOOM_PLUGIN_CAP_* (ABI 1.2)
  std::vector<LoaderKeyRange> loader_keys_;
  std::unique_ptr<RemotePlugin, RemotePluginDeleter> remote_;  // when isolated
  std::unique_ptr<RecordingPlugin, RecordingPluginDeleter> recording_;  // when recording
  int process_id_ = 0;
  std::vector<DeviceInfo> devices_;
  std::vector<loom_device_t*> device_handles_;
  std::unique_ptr<ServiceContext> service_context_;
  std::unique_ptr<loom_host_services_t> services_;
  mutable std::mutex availability_mutex_;
  mutable std::string unavailable_reason_;
};

struct HostOptions {
  // Folders searched for *.loom-plugin.json, before the ones below.
  std::vector<std::filesystem::path> search_paths;
  // Also search the folders in $LOOM_PLUGIN_PATH (':'-separated).
  bool use_environment = true;
  // Also search the plugin folder of the build or install tree (beside the
  // program, and beside libloom.so when Loom runs from it).
  bool use_default_folder = true;
  // Also search the per-user folder: $XDG_DATA_HOME/loom/plugins, else
  // $HOME/.local/share/loom/plugins.
  bool use_user_folder = true;
  // Options handed to every plugin's plugin_create (e.g. loom.threads).
  std::vector<std::pair<std::string, std::string>> plugin_options;
  // The ABI range this host offers (tests narrow it).
  uint32_t abi_min = LOOM_ABI_VERSION(1, 0);
  uint32_t abi_max = LOOM_ABI_CURRENT;
  // Where plugin log lines go. Default: warnings and errors to stderr.
  std::function<void(loom_log_level_t, std::string_view)> log_sink;

  // Isolation (remote_plugin.hpp). Plugins named here run in a process of
  // their own, as do those whose manifest asks for it; "*" names every
  // plugin. The others are loaded into this process. A name no manifest
  // gives makes create() fail (NOT_FOUND, listing the names found).
  std::vector<std::string> isolated_plugins;
  // Before a plugin is loaded into this process, load it once in a child
  // process (loom-plugin-host --probe): a plugin that crashes, hangs or
  // exits while loading is rejected with what happened, and this process
  // never runs its code. When loom-plugin-host cannot be found the probe is
  // skipped with a warning.
  bool probe = true;
  // How long a probe, or an isolated plugin's process, may take to load
  // the plugin and report.
  std::chrono::milliseconds probe_timeout{20'000};
  // Where probe verdicts are remembered across processes
  // (host/discovery/probe_cache.hpp): a plugin whose library, host, options and
  // environment are unchanged since a remembered probe is not probed again
  // (loaded in process when it passed, rejected with the remembered reason
  // when it did not). Empty: every load is probed.
  std::filesystem::path probe_cache_folder;
  // How long an isolated plugin may take to answer one call (fence waits:
  // their own timeout plus this); past it the process is killed and the
  // plugin is lost.
  std::chrono::milliseconds isolated_call_timeout{60'000};
  // The loom-plugin-host program; empty: $LOOM_PLUGIN_HOST, else beside
  // the running program, else <program dir>/../libexec/loom, else
  // <dir of libloom.so>/../bin.
  std::filesystem::path plugin_host_program;
  // Refuse every plugin without a valid conformance stamp beside its
  // manifest (host/discovery/conformance_stamp.hpp): missing, unreadable, for another
  // library or version, or recording a failed check. Such a plugin is listed
  // as rejected with the reason and never loaded.
  bool require_conformance = false;
  // When set, every plugin loaded is recorded into it (`loom run --record`,
  // RuntimeOptions::record_path): host/recording/capture_recorder.hpp.
  std::shared_ptr<CaptureRecorder> recorder;
};

// Scans manifests at creation; loads a library only when asked for it (its
// devices are listed or one of its loader keys is needed). A plugin that fails
// at any step stays in plugins() with the reason. Thread-safe.
//
// Search order: HostOptions::search_paths, then $LOOM_PLUGIN_PATH, then the
// default folders, then the per-user folder (host/discovery/plugin_folders.hpp); within
// a folder, manifests by file name. When two accepted
// manifests name the same plugin, the first wins and the later one is listed
// as rejected, naming both files. Loaded plugins are shared with the objects
// they made and may outlive the host.
class PluginHost {
 public:
  static Result<std::unique_ptr<PluginHost>> create(HostOptions options);
  ~PluginHost();

  // A snapshot of every plugin found, loaded or not, rejected or not.
  std::vector<PluginRecord> plugins() const;
  // The folders searched at creation, in order, each with whether it existed.
  const std::vector<PluginFolder>& search_folders() const { return folders_; }

  // Loads (once) and returns the plugin named `name`.
  Result<std::shared_ptr<LoadedPlugin>> load(std::string_view name);
  // Loads every plugin that is not rejected and returns the loaded ones, in
  // search order; rejections are recorded in plugins(), not returned.
  std::vector<std::shared_ptr<LoadedPlugin>> load_all();
  // The loaded plugin serving `loader_key`, loading it if needed; the first
  // in search order when several do. The error lists the keys that are
  // available and the plugin that serves each, and why a plugin that names
  // the key was rejected.
  Result<std::shared_ptr<LoadedPlugin>> plugin_for_key(std::string_view loader_key);
  // Every loaded plugin serving `loader_key`, in search order, loading them
  // if needed; the error is plugin_for_key's.
  Result<std::vector<std::shared_ptr<LoadedPlugin>>> plugins_for_key(std::string_view loader_key);
  // Every loader key named by a manifest that is not rejected, with its plugin.
  std::vector<std::pair<std::string, std::string>> loader_keys() const;
  // The log and trace channel shared with the plugins (host/isolation/log_channel.hpp).
  const std::shared_ptr<LogChannel>& channel() const { return log_; }

 private:
  PluginHost() = default;
  struct Entry;
  Result<std::shared_ptr<LoadedPlugin>> load_entry(Entry& entry);
  // Whether `manifest`'s plugin runs in a process of its own.
  bool isolates(const PluginManifest& manifest) const;
  // Loads a plugin isolated, or probed and then in process.
  Result<std::shared_ptr<LoadedPlugin>> open_plugin(Entry& entry);
  // Probes the plugin of `entry` in a child process, or recalls the verdict
  // (HostOptions::probe_cache_folder), once; the verdict is kept in the
  // entry. OK when the plugin may be loaded in process. The caller holds
  // entry.load_mutex.
  Status probe_entry(Entry& entry);
  std::atomic<bool> probe_warned_{false};
  std::atomic<bool> cache_warned_{false};
  void scan_folder(const std::filesystem::path& folder);
  HostOptions options_;
  std::vector<PluginFolder> folders_;  // constant after create()
  std::shared_ptr<LogChannel> log_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace loom::host
