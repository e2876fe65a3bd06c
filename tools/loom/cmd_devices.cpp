#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "loom/plugin.h"
#include "loom/runtime.hpp"

namespace loom::cli {

int fail(const Status& status) {
  std::fprintf(stderr, "loom: error: %s\n", status.to_string().c_str());
  return 1;
}

namespace {

std::string format_bytes(uint64_t bytes) {
  if (bytes == 0) return "-";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string abi_string(uint32_t v) {
  return std::to_string(LOOM_ABI_VERSION_MAJOR_OF(v)) + "." +
         std::to_string(LOOM_ABI_VERSION_MINOR_OF(v));
}

std::vector<std::string> dtype_names(uint64_t mask) {
  std::vector<std::string> out;
  for (int i = 1; i < 64; ++i) {
    if (mask & (uint64_t{1} << i)) out.emplace_back(dtype_name(static_cast<DType>(i)));
  }
  return out;
}

nlohmann::json device_json(const DeviceInfo& d) {
  return {{"uri", d.uri},
          {"name", d.name},
          {"plugin", d.plugin},
          {"kind", std::string(device_kind_name(d.kind))},
          {"device_memory_bytes", d.device_memory_bytes},
          {"host_visible_memory_bytes", d.host_visible_memory_bytes},
          {"capabilities", capability_names(d.capabilities)},
          {"dtypes", dtype_names(d.dtype_mask)}};
}

// The folders searched, in order, marking those that did not exist.
void print_folders(const std::vector<PluginFolder>& folders) {
  std::cout << "plugin folders searched, in order:\n";
  if (folders.empty()) std::cout << "  (none)\n";
  for (const PluginFolder& f : folders) {
    std::cout << "  " << escape_control(f.path.string()) << "  (" << f.origin
              << (f.exists ? "" : "; does not exist") << ")\n";
  }
}

}  // namespace

int run_devices(const DevicesArgs& args) {
  RuntimeOptions options;
  if (Status s = add_plugin_options(args.plugin_options, &options); !s.ok()) return fail(s);
  add_isolated_plugins(args.isolate, &options);
  options.require_conformance = args.require_conformance;
  auto runtime = Runtime::create(options);
  if (!runtime.ok()) return fail(runtime.status());
  std::vector<PluginRecord> plugins = (*runtime)->plugins();
  std::vector<PluginFolder> folders = (*runtime)->plugin_folders();

  if (args.json) {
    nlohmann::json out = {{"plugins", nlohmann::json::array()},
                          {"search_folders", nlohmann::json::array()}};
    for (const PluginFolder& f : folders) {
      out["search_folders"].push_back(
          {{"path", f.path.string()}, {"origin", f.origin}, {"exists", f.exists}});
    }
    for (const PluginRecord& p : plugins) {
      nlohmann::json devices = nlohmann::json::array();
      for (const DeviceInfo& d : p.devices) devices.push_back(device_json(d));
      nlohmann::json entry = {{"name", p.name},
                              {"version", p.version},
                              {"manifest", p.manifest_path.string()},
                              {"state", std::string(plugin_state_name(p.state))},
                              {"loader_keys", p.loader_keys},
                              {"devices", devices}};
      if (!p.reason.empty()) entry["reason"] = p.reason;
      if (p.abi_version != 0) entry["abi"] = abi_string(p.abi_version);
      if (p.isolated) entry["isolated"] = true;
      if (!p.conformance.empty()) {
        entry["conformance"] = {{"valid", p.conformance_valid}, {"summary", p.conformance}};
      }
      out["plugins"].push_back(entry);
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }

  if (plugins.empty()) {
    std::cout << "No plugins found: no *.loom-plugin.json manifest in the folders below. "
                 "Add a plugin's folder to $LOOM_PLUGIN_PATH (':'-separated), or copy the "
                 "plugin with its manifest into one of them.\n";
    print_folders(folders);
    return 0;
  }
  for (const PluginRecord& p : plugins) {
    std::cout << "plugin " << p.name << " " << p.version << "  ["
              << plugin_state_name(p.state);
    if (p.abi_version != 0) std::cout << ", ABI " << abi_string(p.abi_version);
    if (p.isolated) std::cout << ", own process";
    std::cout << "]\n";
    std::cout << "  manifest: " << escape_control(p.manifest_path.string()) << "\n";
    if (!p.loader_keys.empty()) {
      std::cout << "  loader keys:";
      for (const auto& k : p.loader_keys) std::cout << " " << k;
      std::cout << "\n";
    }
    if (!p.reason.empty()) std::cout << "  reason: " << escape_control(p.reason) << "\n";
    if (p.state == PluginState::kRejected) {
      std::cout << "  run `loom doctor " << escape_control(p.name) << "` for details\n";
    }
    if (!p.conformance.empty()) {
      std::cout << "  conformance: " << escape_control(p.conformance) << "\n";
    }
    for (const DeviceInfo& d : p.devices) {
      std::cout << "  device " << escape_control(d.uri) << "  " << device_kind_name(d.kind) << "  "
                << escape_control(d.name) << "\n";
      std::cout << "    memory: " << format_bytes(d.device_memory_bytes)
                << " device, " << format_bytes(d.host_visible_memory_bytes)
                << " host-visible\n";
      std::cout << "    capabilities:";
      for (const auto& c : capability_names(d.capabilities)) std::cout << " " << c;
      std::cout << "\n    dtypes:";
      for (const auto& t : dtype_names(d.dtype_mask)) std::cout << " " << t;
      std::cout << "\n";
    }
  }
  print_folders(folders);
  return 0;
}

}  // namespace loom::cli
