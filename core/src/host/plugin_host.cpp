// PluginHost: finding manifests, keeping the record of every plugin, and
// loading each library once, on demand.
#include "host/plugin_host.hpp"

#include <algorithm>
#include <optional>
#include <thread>

#include "host/discovery/conformance_stamp.hpp"
#include "host/isolation/log_channel.hpp"
#include "host/discovery/plugin_folders.hpp"
#include "host/discovery/probe_cache.hpp"
#include "host/isolation/remote_plugin.hpp"

namespace loom::host {

bool is_manifest_file_name(std::string_view file_name) {
  return file_name.size() > kManifestSuffix.size() && file_name.ends_with(kManifestSuffix);
}

namespace {

Status duplicate_name(const std::string& name, const std::filesystem::path& first,
                      const std::filesystem::path& second) {
  return Status(StatusCode::kAlreadyExists, "duplicate plugin name '" + name + "': " +
                                                second.string() + " is ignored, " +
                                                first.string() + " was found first");
}

}  // namespace

struct PluginHost::Entry {
  // Guarded by PluginHost::mutex_.
  PluginRecord record;
  Status rejection;  // why record.state is kRejected
  std::shared_ptr<LoadedPlugin> plugin;
  // Set when the manifest was read; constant afterwards.
  std::optional<PluginManifest> manifest;
  // Earlier entries of the same name whose manifests were accepted: this one
  // is their standby, loaded only when none of them loads (a bad library
  // hash, a failed dlopen or create); constant after create().
  std::vector<Entry*> earlier_twins;
  // Held for the whole load, so a library is opened once even when several
  // threads ask for it; other entries and plugins() stay available meanwhile.
  std::mutex load_mutex;
  // The probe's verdict, once taken (guarded by load_mutex).
  std::optional<Status> probe_verdict;
};

Result<std::unique_ptr<PluginHost>> PluginHost::create(HostOptions options) {
  if (options.abi_min > options.abi_max) {
    return invalid_argument("host ABI range " + format_abi_version(options.abi_min) + "-" +
                            format_abi_version(options.abi_max) + " is empty");
  }
  std::unique_ptr<PluginHost> host(new PluginHost());
  host->log_ = std::make_shared<LogChannel>(options.log_sink);
  host->options_ = std::move(options);

  host->folders_ = plugin_search_folders(host->options_);
  for (const PluginFolder& folder : host->folders_) {
    if (folder.exists) host->scan_folder(folder.path);
  }
  // A misspelt name in the isolation list would silently leave that plugin
  // in process: every name must be one a manifest gave.
  for (const std::string& name : host->options_.isolated_plugins) {
    if (name == "*") continue;
    const auto& entries = host->entries_;
    if (std::any_of(entries.begin(), entries.end(),
                    [&](const auto& e) { return e->record.name == name; })) {
      continue;
    }
    std::string found;
    for (const auto& e : entries) found += (found.empty() ? "" : ", ") + e->record.name;
    return not_found("plugin '" + name + "' is to be isolated, but no plugin of that name was "
                     "found; found: " + (found.empty() ? "none" : found));
  }
  return host;
}

PluginHost::~PluginHost() = default;

void PluginHost::scan_folder(const std::filesystem::path& folder) {
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) return;  // absent folders are normal
  std::vector<std::filesystem::path> files;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (is_manifest_file_name(it->path().filename().string())) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());

  for (const auto& file : files) {
    auto entry = std::make_unique<Entry>();
    PluginRecord& record = entry->record;
    record.manifest_path = file;
    std::string file_name = file.filename().string();
    record.name = file_name.substr(0, file_name.size() - kManifestSuffix.size());

    auto manifest = parse_manifest(file);
    if (!manifest.ok()) {
      entry->rejection = manifest.status();
    } else {
      record.name = manifest->name;
      record.version = manifest->version;
      record.loader_keys = manifest->loader_keys;
      if (manifest->abi_max < options_.abi_min || manifest->abi_min > options_.abi_max) {
        entry->rejection = incompatible(
            "plugin speaks ABI " + format_abi_version(manifest->abi_min) + "-" +
            format_abi_version(manifest->abi_max) + ", the host speaks " +
            format_abi_version(options_.abi_min) + "-" + format_abi_version(options_.abi_max));
      }
      // The host checks the library against the manifest's hash when loading,
      // so the stamp is checked against the manifest's hash here.
      const StampStatus stamp = stamp_status(*manifest, manifest->library_hash);
      record.conformance = stamp.summary;
      record.conformance_valid = stamp.valid();
      if (options_.require_conformance && !stamp.valid() && entry->rejection.ok()) {
        entry->rejection = failed_precondition(
            "conformance is required: " + stamp.summary + "; run `loom conformance " +
            manifest->name + " --stamp` to check the plugin and stamp it");
      }
      // A twin of an earlier plugin stands by: the first of a name that
      // loads is the one used (a bad hash is found only when loading).
      for (const auto& earlier : entries_) {
        if (entry->rejection.ok() && earlier->rejection.ok() &&
            earlier->record.name == record.name) {
          entry->earlier_twins.push_back(earlier.get());
        }
      }
      if (!entry->earlier_twins.empty()) {
        record.reason = "standby: " + entry->earlier_twins.front()->record.manifest_path.string() +
                        " has the same name and is used unless it fails to load";
      }
      entry->manifest = std::move(*manifest);
    }
    if (!entry->rejection.ok()) {
      record.state = PluginState::kRejected;
      record.reason = entry->rejection.message();
    }
    entries_.push_back(std::move(entry));
  }
}

std::vector<PluginRecord> PluginHost::plugins() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<PluginRecord> out;
  out.reserve(entries_.size());
  for (const auto& entry : entries_) out.push_back(entry->record);
  return out;
}

Result<std::shared_ptr<LoadedPlugin>> PluginHost::load_entry(Entry& entry) {
  std::lock_guard<std::mutex> load_lock(entry.load_mutex);
  auto rejected = [&entry] {
    return Status(entry.rejection.code(), "plugin '" + entry.record.name + "' (" +
                                              entry.record.manifest_path.string() +
                                              ") is rejected: " + entry.rejection.message());
  };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (entry.plugin) return entry.plugin;
    if (!entry.rejection.ok()) return rejected();
  }
  for (Entry* twin : entry.earlier_twins) {
    if (!load_entry(*twin).ok()) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    entry.rejection = duplicate_name(entry.record.name, twin->record.manifest_path,
                                     entry.record.manifest_path);
    entry.record.state = PluginState::kRejected;
    entry.record.reason = entry.rejection.message();
    return rejected();
  }
  auto opened = open_plugin(entry);
  std::lock_guard<std::mutex> lock(mutex_);
  PluginRecord& record = entry.record;
  if (!opened.ok()) {
    entry.rejection = opened.status();
    record.state = PluginState::kRejected;
    record.reason = entry.rejection.message();
    return rejected();
  }
  entry.plugin = std::move(*opened);
  record.state = PluginState::kLoaded;
  record.reason.clear();
  record.abi_version = entry.plugin->abi_version();
  record.isolated = entry.plugin->isolated();
  record.devices = entry.plugin->devices();
  if (record.devices.empty()) record.reason = "no devices";
  return entry.plugin;
}

bool PluginHost::isolates(const PluginManifest& manifest) const {
  if (manifest.isolated) return true;
  return std::any_of(options_.isolated_plugins.begin(), options_.isolated_plugins.end(),
                     [&](const std::string& name) { return name == "*" || name == manifest.name; });
}

Status PluginHost::probe_entry(Entry& entry) {
  if (entry.probe_verdict) return *entry.probe_verdict;
  const PluginManifest& manifest = *entry.manifest;
  auto program = find_plugin_host_program(options_);
  if (!program.ok()) {
    if (!probe_warned_.exchange(true)) {
      log_->write(LOOM_LOG_WARNING, "loom",
                  "plugins are loaded without a probe: " + program.status().message());
    }
    entry.probe_verdict = Status();
    return Status();
  }
  const std::filesystem::path& folder = options_.probe_cache_folder;
  std::optional<std::string> key;
  if (!folder.empty()) {
    if (auto k = probe_key(manifest, options_, *program); k.ok()) key = std::move(*k);
  }
  if (key) {
    if (auto remembered = recall_probe(folder, manifest.name, *key)) {
      entry.probe_verdict =
          remembered->code == StatusCode::kOk
              ? Status()
              : Status(remembered->code,
                       remembered->message + " (remembered from its probe at " +
                           remembered->probed_at + "; it is probed again when its library, the "
                           "host, the options or the environment change, or with "
                           "LOOM_PROBE_CACHE=off)");
      return *entry.probe_verdict;
    }
  }
  RemoteFacts facts;
  const loom_plugin_api_t* api = nullptr;
  loom_plugin_t* instance = nullptr;
  bool about_plugin = false;
  auto probed = start_remote_plugin(manifest, options_, log_, /*probe=*/true, &facts, &api,
                                    &instance, &about_plugin);
  const Status verdict = probed.ok() ? Status() : probed.status();
  if (key && about_plugin) {
    ProbeVerdict remembered;
    remembered.key = *key;
    remembered.plugin = manifest.name;
    remembered.library = manifest.library.string();
    remembered.probed_at = stamp_time_now();
    remembered.code = verdict.code();
    remembered.message = verdict.message();
    if (Status st = remember_probe(folder, remembered); !st.ok() && !cache_warned_.exchange(true)) {
      log_->write(LOOM_LOG_WARNING, "loom", "probe verdicts are not remembered: " + st.message());
    }
  }
  entry.probe_verdict = verdict;
  return verdict;
}

Result<std::shared_ptr<LoadedPlugin>> PluginHost::open_plugin(Entry& entry) {
  const PluginManifest& manifest = *entry.manifest;
  std::shared_ptr<LoadedPlugin> plugin;
  if (isolates(manifest)) {
    LOOM_ASSIGN_OR_RETURN(plugin, LoadedPlugin::open_isolated(manifest, options_, log_));
  } else {
    if (options_.probe) LOOM_RETURN_IF_ERROR(probe_entry(entry));
    LOOM_ASSIGN_OR_RETURN(plugin, LoadedPlugin::open(manifest, options_, log_));
  }
  if (options_.recorder != nullptr) plugin->start_recording(options_.recorder, options_);
  return plugin;
}

Result<std::shared_ptr<LoadedPlugin>> PluginHost::load(std::string_view name) {
  // The first entry of a name that loads is the one that counts; a later
  // twin stands by for an earlier one that fails.
  std::optional<Status> first_error;
  for (const auto& entry : entries_) {
    if (entry->record.name != name) continue;
    auto plugin = load_entry(*entry);
    if (plugin.ok()) return plugin;
    if (!first_error) first_error = plugin.status();
  }
  if (first_error) return *first_error;
  std::string names;
  for (const auto& entry : entries_) {
    names += (names.empty() ? "" : ", ") + entry->record.name;
  }
  return not_found("no plugin named '" + std::string(name) + "'; found: " +
                   (names.empty() ? "none" : names));
}

std::vector<std::shared_ptr<LoadedPlugin>> PluginHost::load_all() {
  // Probes run at once, each in a process of its own (a hung plugin then
  // costs its timeout once, not once per plugin behind it); the loads that
  // follow, in this process, stay in search order.
  if (options_.probe) {
    std::vector<Entry*> to_probe;
    for (const auto& entry : entries_) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (entry->record.state != PluginState::kRejected && !entry->plugin &&
          entry->earlier_twins.empty() && entry->manifest && !isolates(*entry->manifest)) {
        to_probe.push_back(entry.get());
      }
    }
    if (to_probe.size() > 1) {
      std::vector<std::thread> probes;
      probes.reserve(to_probe.size());
      for (Entry* entry : to_probe) {
        probes.emplace_back([this, entry] {
          std::lock_guard<std::mutex> load_lock(entry->load_mutex);
          if (!entry->plugin) (void)probe_entry(*entry);
        });
      }
      for (std::thread& t : probes) t.join();
    }
  }
  std::vector<std::shared_ptr<LoadedPlugin>> out;
  for (const auto& entry : entries_) {
    bool candidate;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      candidate = entry->record.state != PluginState::kRejected;
    }
    if (!candidate) continue;
    auto plugin = load_entry(*entry);
    if (plugin.ok()) out.push_back(std::move(*plugin));
  }
  return out;
}

Result<std::vector<std::shared_ptr<LoadedPlugin>>> PluginHost::plugins_for_key(
    std::string_view loader_key) {
  std::vector<std::shared_ptr<LoadedPlugin>> out;
  std::string notes;
  for (const auto& entry : entries_) {
    const PluginRecord& record = entry->record;
    // The record's name and keys come from the manifest and never change
    // after create(), so reading them here needs no lock.
    if (std::find(record.loader_keys.begin(), record.loader_keys.end(), loader_key) ==
        record.loader_keys.end()) {
      continue;
    }
    auto plugin = load_entry(*entry);
    if (!plugin.ok()) {
      notes += "; " + plugin.status().message();
      continue;
    }
    if ((*plugin)->serves(loader_key)) {
      out.push_back(std::move(*plugin));
      continue;
    }
    notes += "; plugin '" + record.name + "' lists the key in its manifest, not in plugin_info";
  }
  if (!out.empty()) return out;
  std::string available;
  for (const auto& [key, plugin] : loader_keys()) {
    available += (available.empty() ? "" : ", ") + key + " (plugin " + plugin + ")";
  }
  return not_found("no plugin serves loader key '" + std::string(loader_key) + "'" + notes +
                   "; available: " + (available.empty() ? "none" : available));
}

Result<std::shared_ptr<LoadedPlugin>> PluginHost::plugin_for_key(std::string_view loader_key) {
  LOOM_ASSIGN_OR_RETURN(auto plugins, plugins_for_key(loader_key));
  return plugins.front();
}

std::vector<std::pair<std::string, std::string>> PluginHost::loader_keys() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& entry : entries_) {
    if (entry->record.state == PluginState::kRejected) continue;
    for (const std::string& key : entry->record.loader_keys) {
      out.emplace_back(key, entry->record.name);
    }
  }
  return out;
}

}  // namespace loom::host
