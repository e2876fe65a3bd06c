// What an execute of a bitstream costs on this host (host_cost.cpp): the
// simulator computes every kernel on the host CPU, so with fpga.realtime=0
// a run takes that time, not the simulated device's (which is only traced).
// executable_estimate answers with it by default (fpga.estimate=host), so
// that policy:fastest ranks the stub by what choosing it costs here.
//
// The rates come from timing the simulator's own kernels on a few small
// nodes, once per host: the numbers are kept in the user's cache folder
// (loom/sdk/device_model.hpp) under the host CPU's name and the plugin
// version, and measured again when either changes.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "bitstream.hpp"
#include "loom/sdk/device_model.hpp"

namespace loom::fpga_stub {

class HostCost {
 public:
  // The version of what is measured; part of the cache identity.
  static constexpr int kVersion = 2;

  HostCost();
  HostCost(const HostCost&) = delete;
  HostCost& operator=(const HostCost&) = delete;

  // Host nanoseconds to run `bs` (static shapes): its DMA copies, the
  // checksums the device takes and checks (the weights and every input on
  // each launch, inputs and outputs again around their DMAs) and every
  // node on the simulator's kernels. Measures the host on first use.
  Status estimate(const Bitstream& bs, uint64_t* out_ns);
  // The measured values (measuring them first if needed), for tests.
  Status values(sdk::DeviceModelValues* out);

 private:
  Status ensure_model();  // under mu_
  std::mutex mu_;
  bool ready_ = false;
  sdk::DeviceModelValues values_;
  std::string key_, identity_;
};

}  // namespace loom::fpga_stub
