// The fpga-stub plugin instance: its configuration, its devices and the
// table of handles it gave out.
#pragma once

#include <memory>
#include <vector>

#include "config.hpp"
#include "device.hpp"
#include "handles.hpp"

namespace loom::fpga_stub {

class Plugin {
 public:
  Plugin(const Config& config, const loom_host_services_t* host);
  // Drops what the host left alive, then stops and destroys the devices.
  ~Plugin();

  const Config& config() const { return config_; }
  const loom_host_services_t* host() const { return host_; }
  HandleTable& handles() { return handles_; }
  size_t device_count() const { return devices_.size(); }
  Device* device(size_t i) { return i < devices_.size() ? devices_[i].get() : nullptr; }

 private:
  Config config_;
  const loom_host_services_t* host_;
  HandleTable handles_;  // before the devices: they keep a pointer to it
  std::vector<std::unique_ptr<Device>> devices_;
};

// Compile side (compile.cpp, lower.cpp).
Status compile_supported(const Config& config, const void* graph, size_t size, size_t node_count,
                         bool* out);
Status compile_graph(const Config& config, const void* graph, size_t size, Bitstream* out);

}  // namespace loom::fpga_stub
