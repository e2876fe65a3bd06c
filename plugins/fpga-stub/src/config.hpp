// The fpga-stub plugin's options (loom_plugin_create_args_t.options), parsed
// once at plugin_create. Every key is documented in plugins/fpga-stub/README.md.
#pragma once

#include <cstdint>
#include <string>

#include "loom/plugin.hpp"

namespace loom::fpga_stub {

using sdk::Status;

// The timing model of one simulated device. Durations are whole nanoseconds.
struct Timing {
  uint64_t dma_bytes_per_us = 8000;  // fpga.dma_mbps: 8000 MB/s = 8 GB/s
  uint64_t dma_latency_ns = 2000;    // fpga.dma_latency_ns
  uint64_t mac_array = 4096;         // fpga.mac_array: int8 MACs per cycle
  uint64_t clock_mhz = 250;          // fpga.clock_mhz
  uint64_t f32_divisor = 4;          // fpga.f32_divisor: f32 runs at mac_array / divisor
  uint64_t launch_ns = 1000;         // fpga.launch_ns: fixed cost of a kernel launch
  uint64_t slowdown = 1;             // fpga.fault.slow: every duration times K

  // Simulated duration of a DMA of `bytes`.
  uint64_t dma_ns(uint64_t bytes) const;
  // Simulated duration of `int8_macs` int8 multiply-accumulates plus
  // `f32_ops` f32 operations on the MAC array, plus the launch cost.
  uint64_t kernel_ns(uint64_t int8_macs, uint64_t f32_ops) const;
};

// Deterministic faults. Counters are 1-based ("the Nth allocation"); 0 means
// off. Faults apply to the device `device` only, so tests can show that the
// other devices keep working.
struct Faults {
  bool init = false;            // fpga.fault.init=1: plugin_create fails
  bool enumerate = false;       // fpga.fault.enumerate=1: device_count fails
  bool reject_blob = false;     // fpga.fault.reject_blob=1: check/load -> INCOMPATIBLE
  uint64_t device = 0;          // fpga.fault.device: index of the faulty device
  uint64_t alloc = 0;           // fpga.fault.alloc=N: Nth allocation -> RESOURCE_EXHAUSTED
  uint64_t dma = 0;             // fpga.fault.dma=N: Nth DMA -> DATA_LOSS
  uint64_t bit_flip = 0;        // fpga.fault.bit_flip=N: Nth host->device DMA flips a bit
  uint64_t hang = 0;            // fpga.fault.hang=N: Nth kernel launch never completes
  uint64_t lost = 0;            // fpga.fault.lost=N: the device is lost at the Nth launch
};

// What executable_estimate answers (fpga.estimate).
enum class Estimate {
  kHost,    // host: what an execute costs on this host (the simulator's
            // kernels, plus the device's time when fpga.realtime=1)
  kDevice,  // device: the simulated device's time alone (the timing model)
};

struct Config {
  uint64_t devices = 1;                          // fpga.devices
  uint64_t memory_bytes = uint64_t{256} << 20;   // fpga.memory_mb (MiB)
  bool realtime = false;                         // fpga.realtime=1
  Estimate estimate = Estimate::kHost;           // fpga.estimate=host|device
  uint64_t sync_timeout_ms = 10000;              // fpga.sync_timeout_ms
  Timing timing;
  Faults faults;

  // Parses `options`; INVALID_ARGUMENT naming the key for a bad value or an
  // unknown "fpga." key (other keys, such as loom.threads, are ignored).
  static Status parse(const sdk::Options& options, Config* out);
};

}  // namespace loom::fpga_stub
