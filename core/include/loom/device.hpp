// Descriptions of plugins and devices as the runtime reports them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

enum class DeviceKind : uint8_t { kCpu = 0, kGpu = 1, kAccelerator = 2, kVirtual = 3 };

std::string_view device_kind_name(DeviceKind kind);

// One device as enumerated by its plugin.
struct DeviceInfo {
  std::string uri;     // "cpu-simd://0"
  std::string name;
  std::string plugin;  // the plugin's name
  DeviceKind kind = DeviceKind::kCpu;
  uint64_t device_memory_bytes = 0;
  uint64_t host_visible_memory_bytes = 0;
  uint64_t capabilities = 0;  // LOOM_DEVICE_CAP_* bits
  uint64_t dtype_mask = 0;    // LOOM_DTYPE_BIT bits
};

// Names of the capability bits set in `capabilities`, e.g. {"async"}.
std::vector<std::string> capability_names(uint64_t capabilities);

enum class PluginState : uint8_t {
  kFound = 0,     // manifest accepted, library not loaded yet
  kLoaded = 1,    // library loaded, ABI negotiated, instance created
  kRejected = 2,  // see PluginRecord::reason
};

std::string_view plugin_state_name(PluginState state);

// One plugin the host found, whatever became of it.
struct PluginRecord {
  std::filesystem::path manifest_path;
  std::string name;  // from the manifest, or the file name if unreadable
  std::string version;
  std::vector<std::string> loader_keys;
  PluginState state = PluginState::kFound;
  std::string reason;  // why it was rejected, or why it has no devices
  uint32_t abi_version = 0;  // negotiated, when loaded
  std::vector<DeviceInfo> devices;  // when loaded
};

}  // namespace loom
