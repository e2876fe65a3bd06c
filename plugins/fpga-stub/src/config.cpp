#include "config.hpp"

#include <cstring>

namespace loom::fpga_stub {
namespace {

constexpr uint64_t kMaxDevices = 64;
constexpr uint64_t kMaxMemoryMb = uint64_t{1} << 20;  // 1 TiB of address space
constexpr uint64_t kMaxCount = uint64_t{1} << 40;

bool known_key(const char* key) {
  static constexpr const char* kKeys[] = {
      "fpga.devices",       "fpga.memory_mb",      "fpga.realtime",     "fpga.sync_timeout_ms",
      "fpga.dma_mbps",      "fpga.dma_latency_ns", "fpga.mac_array",    "fpga.clock_mhz",
      "fpga.f32_divisor",   "fpga.launch_ns",      "fpga.fault.slow",   "fpga.fault.init",
      "fpga.fault.enumerate", "fpga.fault.reject_blob", "fpga.fault.device", "fpga.fault.alloc",
      "fpga.fault.dma",     "fpga.fault.bit_flip", "fpga.fault.hang",   "fpga.fault.lost",
      "fpga.estimate"};
  for (const char* k : kKeys) {
    if (std::strcmp(k, key) == 0) return true;
  }
  return false;
}

Status get_bool(const sdk::Options& o, const char* key, bool* out) {
  uint64_t v = 0;
  LOOM_SDK_RETURN_IF_ERROR(o.get_uint(key, *out ? 1 : 0, 1, &v));
  *out = v != 0;
  return Status();
}

Status get_positive(const sdk::Options& o, const char* key, uint64_t fallback, uint64_t max,
                    uint64_t* out) {
  LOOM_SDK_RETURN_IF_ERROR(o.get_uint(key, fallback, max, out));
  if (*out == 0) return sdk::invalid_argument(std::string("option ") + key + " must be at least 1");
  return Status();
}

}  // namespace

uint64_t Timing::dma_ns(uint64_t bytes) const {
  // bytes / (MB/s) = microseconds; times 1000 for nanoseconds.
  const uint64_t transfer = bytes / dma_bytes_per_us * 1000 +
                            (bytes % dma_bytes_per_us) * 1000 / dma_bytes_per_us;
  return (dma_latency_ns + transfer) * slowdown;
}

uint64_t Timing::kernel_ns(uint64_t int8_macs, uint64_t f32_ops) const {
  const uint64_t f32_lanes = mac_array / f32_divisor == 0 ? 1 : mac_array / f32_divisor;
  const uint64_t cycles = (int8_macs + mac_array - 1) / mac_array + (f32_ops + f32_lanes - 1) / f32_lanes;
  // cycles / MHz = microseconds.
  return (launch_ns + cycles * 1000 / clock_mhz) * slowdown;
}

Status Config::parse(const sdk::Options& o, Config* out) {
  Config c;
  for (size_t i = 0; i < o.size(); ++i) {
    const char* key = o[i].key;
    if (std::strncmp(key, "fpga.", 5) == 0 && !known_key(key)) {
      return sdk::invalid_argument(std::string("fpga-stub: unknown option ") + key +
                                   " (see plugins/fpga-stub/README.md)");
    }
  }
  LOOM_SDK_RETURN_IF_ERROR(get_positive(o, "fpga.devices", 1, kMaxDevices, &c.devices));
  uint64_t mb = 0;
  LOOM_SDK_RETURN_IF_ERROR(get_positive(o, "fpga.memory_mb", 256, kMaxMemoryMb, &mb));
  c.memory_bytes = mb << 20;
  LOOM_SDK_RETURN_IF_ERROR(get_bool(o, "fpga.realtime", &c.realtime));
  if (const char* e = o.find("fpga.estimate"); e != nullptr) {
    if (std::strcmp(e, "host") == 0) {
      c.estimate = Estimate::kHost;
    } else if (std::strcmp(e, "device") == 0) {
      c.estimate = Estimate::kDevice;
    } else {
      return sdk::invalid_argument(std::string("option fpga.estimate=\"") + e +
                                   "\" is not host or device");
    }
  }
  LOOM_SDK_RETURN_IF_ERROR(get_positive(o, "fpga.sync_timeout_ms", 10000, 86400000, &c.sync_timeout_ms));
  Timing& t = c.timing;
  LOOM_SDK_RETURN_IF_ERROR(get_positive(o, "fpga.dma_mbps", 8000, 1u << 30, &t.dma_bytes_per_us));
  LOOM_SDK_RETURN_IF_ERROR(o.get_uint("fpga.dma_latency_ns", 2000, 1'000'000'000, &t.dma_latency_ns));
  LOOM_SDK_RETURN_IF_ERROR(get_positive(o, "fpga.mac_array", 4096, 1u << 24, &t.mac_array));
  LOOM_SDK_RETURN_IF_ERROR(get_positive(o, "fpga.clock_mhz", 250, 100000, &t.clock_mhz));
  LOOM_SDK_RETURN_IF_ERROR(get_positive(o, "fpga.f32_divisor", 4, 1024, &t.f32_divisor));
  LOOM_SDK_RETURN_IF_ERROR(o.get_uint("fpga.launch_ns", 1000, 1'000'000'000, &t.launch_ns));
  LOOM_SDK_RETURN_IF_ERROR(get_positive(o, "fpga.fault.slow", 1, 1'000'000, &t.slowdown));
  Faults& f = c.faults;
  LOOM_SDK_RETURN_IF_ERROR(get_bool(o, "fpga.fault.init", &f.init));
  LOOM_SDK_RETURN_IF_ERROR(get_bool(o, "fpga.fault.enumerate", &f.enumerate));
  LOOM_SDK_RETURN_IF_ERROR(get_bool(o, "fpga.fault.reject_blob", &f.reject_blob));
  LOOM_SDK_RETURN_IF_ERROR(o.get_uint("fpga.fault.device", 0, kMaxDevices - 1, &f.device));
  LOOM_SDK_RETURN_IF_ERROR(o.get_uint("fpga.fault.alloc", 0, kMaxCount, &f.alloc));
  LOOM_SDK_RETURN_IF_ERROR(o.get_uint("fpga.fault.dma", 0, kMaxCount, &f.dma));
  LOOM_SDK_RETURN_IF_ERROR(o.get_uint("fpga.fault.bit_flip", 0, kMaxCount, &f.bit_flip));
  LOOM_SDK_RETURN_IF_ERROR(o.get_uint("fpga.fault.hang", 0, kMaxCount, &f.hang));
  LOOM_SDK_RETURN_IF_ERROR(o.get_uint("fpga.fault.lost", 0, kMaxCount, &f.lost));
  *out = c;
  return Status();
}

}  // namespace loom::fpga_stub
