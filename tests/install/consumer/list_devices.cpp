// A host program built against an installed libloom: prints the folders the
// runtime searched and every plugin and device it found, one per line.
// Used by tests/install/check_install.sh only.
#include <cstdio>

#include "loom/runtime.hpp"
#include "loom/version.hpp"

int main() {
  auto runtime = loom::Runtime::create();
  if (!runtime.ok()) {
    std::fprintf(stderr, "list_devices: %s\n", runtime.status().to_string().c_str());
    return 1;
  }
  std::printf("loom %s\n", LOOM_VERSION_STRING);
  for (const loom::PluginFolder& f : (*runtime)->plugin_folders()) {
    std::printf("folder %s %s%s\n", f.origin.c_str(), f.path.c_str(), f.exists ? "" : " (missing)");
  }
  for (const loom::PluginRecord& p : (*runtime)->plugins()) {
    std::printf("plugin %s %s\n", p.name.c_str(),
                std::string(loom::plugin_state_name(p.state)).c_str());
    if (!p.reason.empty()) std::printf("  reason: %s\n", p.reason.c_str());
  }
  for (const loom::DeviceInfo& d : (*runtime)->devices()) std::printf("device %s\n", d.uri.c_str());
  return 0;
}
