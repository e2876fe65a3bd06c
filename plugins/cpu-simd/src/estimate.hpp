// executable_estimate for cpu-simd (ABI 1.1): a blob's work (blob_work.hpp)
// over the device's measured rates. The model, per node:
//
//   time(node) = min over t in {1, N} of
//                  max(flops / rate_t(kind), bytes / bandwidth_t) + step_t
//   estimate   = sum of time(node)
//
// where N is the plugin's thread count, rate_t(kind) the sustained FLOP/s of
// the plugin's own MatMul (256^3) or Conv (3x3, 64 channels, 28x28) at t
// threads, bandwidth_t what its elementwise Add of two 4 MiB tensors moves
// per second, and step_t the time of a one-element Relu (the cost of a step
// and of an execute). Elementwise and data-movement nodes are bound by
// bandwidth only. The minimum over t stands for small nodes, which gain
// nothing from threads.
//
// The rates are measured on the first estimate (about 0.2 s), not at plugin
// load, and kept in the user's cache folder (loom/sdk/device_model.hpp),
// keyed by the CPU model, the kernels and oneDNN instruction set, the thread
// count and the plugin version.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "loom/cpu_simd/blob_format.hpp"
#include "loom/plugin.hpp"
#include "loom/sdk/device_model.hpp"
#include "ops.hpp"
#include "thread_pool.hpp"

namespace loom::cpu_simd {

class CostModel {
 public:
  // `pool` runs the measurements at N threads and outlives the model;
  // `onednn` and `kernels` are the device's. `device_key` names the cache
  // file, `identity` (device_key plus the plugin version) must match a
  // cached file's for it to be used.
  CostModel(ThreadPool* pool, bool onednn, Kernels kernels, std::string device_key,
            std::string identity);
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  // One execution of `graph` (decode() accepted it) in nanoseconds; 0 for a
  // graph with open dimensions (its work follows the binding). Measures the
  // device, or reads its cached model, on the first call. Thread-safe.
  sdk::Status estimate(const BlobGraph& graph, uint64_t* out_ns);

  // The measured values (see the file comment for their names); measures on
  // first use like estimate. Thread-safe.
  sdk::Status values(sdk::DeviceModelValues* out);

 private:
  sdk::Status ensure_model();  // with mu_ held
  sdk::Status measure(sdk::DeviceModelValues* out);

  ThreadPool* pool_;
  bool onednn_;
  Kernels kernels_;
  std::string device_key_;
  std::string identity_;
  std::mutex mu_;
  bool ready_ = false;
  sdk::DeviceModelValues values_;
};

}  // namespace loom::cpu_simd
