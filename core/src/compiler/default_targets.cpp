// default_targets: what `loom compile` (and loom.compile()) compiles for
// when no target is named.
#include <algorithm>
#include <string>
#include <vector>

#include "host/compile_entries.hpp"
#include "host/plugin_host.hpp"
#include "loom/compiler.hpp"
#include "loom/device.hpp"

namespace loom::compiler {

std::vector<std::string> default_targets(host::PluginHost& plugins) {
  // Every device of every plugin that loads and compiles, ranked as
  // policy:prefer-accelerator ranks devices; a plugin's place is that of
  // its best device.
  std::vector<DeviceInfo> devices;
  for (const auto& plugin : plugins.load_all()) {
    if (!host::has_compile_entries(*plugin)) continue;
    for (const DeviceInfo& d : plugin->devices()) devices.push_back(d);
  }
  auto selector = DeviceSelector::parse("policy:prefer-accelerator");
  std::vector<std::string> targets;
  if (!selector.ok()) return targets;
  for (const auto& [index, alternative] : selector->order(devices)) {
    const std::string& name = devices[index].plugin;
    if (std::find(targets.begin(), targets.end(), name) == targets.end()) targets.push_back(name);
  }
  return targets;
}

}  // namespace loom::compiler
