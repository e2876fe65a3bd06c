#include "loom/device.hpp"

#include "loom/plugin.h"

namespace loom {

std::string_view device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kGpu: return "gpu";
    case DeviceKind::kAccelerator: return "accelerator";
    case DeviceKind::kVirtual: return "virtual";
  }
  return "unknown";
}

std::vector<std::string> capability_names(uint64_t caps) {
  std::vector<std::string> out;
  if (caps & LOOM_DEVICE_CAP_ASYNC) out.emplace_back("async");
  if (caps & LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY) out.emplace_back("host-visible-memory");
  if (caps & LOOM_DEVICE_CAP_HOST_POINTER_IMPORT) out.emplace_back("host-pointer-import");
  if (caps & LOOM_DEVICE_CAP_TIMESTAMPS) out.emplace_back("timestamps");
  if (caps & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE) out.emplace_back("host-pointer-execute");
  return out;
}

std::string_view plugin_state_name(PluginState state) {
  switch (state) {
    case PluginState::kFound: return "found";
    case PluginState::kLoaded: return "loaded";
    case PluginState::kRejected: return "rejected";
  }
  return "unknown";
}

}  // namespace loom
