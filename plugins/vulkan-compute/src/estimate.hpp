// executable_estimate for vulkan-compute (ABI 1.1): a blob's work
// (blob_work.hpp) over the device's measured rates. The model:
//
//   time(dispatch) = max(executed flops / rate, bytes / bandwidth) + dispatch
//   rate           = peak(kind) * min(1, workgroups / saturation(kind))
//   estimate       = round trip + sum of time(dispatch)
//
// measured once per device with the plugin's own shaders on blobs built
// here: `round trip` is an execute of one single-element unary dispatch
// (vkQueueSubmit plus the fence wait), `dispatch` what each further tiny
// dispatch in the same command buffer adds, peak(matmul) and peak(conv) with
// the grid that reaches them (saturation: a GPU runs a small grid on a few
// of its cores) fitted from a 256^3 matmul and a 3x3 convolution of 32 to 64
// channels on 28x28 and, on a device that runs those in under 1 ms (a GPU),
// larger ones up to 1 ms (estimate.cpp, fit_kind), and `bandwidth` what a binary add of two 4 MiB tensors moves per
// second. Elementwise and copy dispatches are bound by bandwidth only.
//
// The numbers are measured on the first estimate, not at plugin load, and
// kept in the user's cache folder (loom/sdk/device_model.hpp), keyed by the
// device name, vendor and device id, driver version, plugin version and
// kVersion. Each case's time is its fastest of a few runs (at most ~10 ms
// each): the device, not the moment's load.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "loom/plugin.hpp"
#include "loom/sdk/device_model.hpp"
#include "loom/vulkan_compute/blob_format.hpp"

namespace loom::vulkan {

class Device;

class CostModel {
 public:
  // The version of the micro-benchmarks and of the values they produce:
  // part of the cache identity, so that a change re-measures.
  static constexpr int kVersion = 5;

  // `device` outlives the model (the device owns it).
  explicit CostModel(Device* device) : device_(device) {}
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  // One execution of `program` (decode() accepted it) in nanoseconds.
  // Measures the device, or reads its cached model, on the first call.
  // Thread-safe.
  sdk::Status estimate(const BlobProgram& program, uint64_t* out_ns);

  // The measured values (names as in estimate.cpp); measures on first use.
  // Thread-safe.
  sdk::Status values(sdk::DeviceModelValues* out);

 private:
  sdk::Status measure(sdk::DeviceModelValues* out);

  Device* device_;
  std::mutex mu_;
  bool ready_ = false;
  sdk::DeviceModelValues values_;
};

}  // namespace loom::vulkan
