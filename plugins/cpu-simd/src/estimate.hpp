// executable_estimate for cpu-simd (ABI 1.1): a blob's work (blob_work.hpp)
// over the device's measured rates. The model, per node, on the line of t
// threads:
//
//   MatMul, Gemm, Conv, ConvTranspose (oneDNN):
//     line_t = overhead_t(kind) + max(flops / rate_t(kind), bytes / bandwidth_t)
//   other nodes:
//     line_t = overhead_t(add) + bytes / bandwidth_t
//
//   time(node) = min(line_N, line_1), except other nodes of fewer than 2^17
//                output elements, which the plain kernels run on one thread:
//                step_1 + bytes / bandwidth_1
//   estimate   = sum of time(node)
//
// N is the plugin's thread count. Each (rate, overhead) pair is a straight
// line fitted through a small and a large case of the plugin's own kernels,
// measured at N threads and at 1: MatMul 32^3 and 256^3, Conv 3x3 of 8
// channels on 8x8 and of 64 channels on 28x28, Add of 2^17 and 2^20
// elements (bandwidth in bytes moved per second); step_1 is a one-element
// Relu on one thread (the cost of an execute and a step). Threads are taken
// never to make a node slower (the minimum): on an idle machine the N-thread
// line wins for large nodes; on one whose cores are busy, N-thread steps can
// wait a scheduler tick for a worker, which the model does not try to
// predict.
//
// The rates are measured on the first estimate (about 0.2 s), not at plugin
// load, and kept in the user's cache folder (loom/sdk/device_model.hpp),
// keyed by the CPU model, the kernels and oneDNN instruction set, the thread
// count, the plugin version and kVersion. Each case's time is its fastest of
// a few runs (at most ~10 ms each): the device, not the moment's load.
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
  // The version of the micro-benchmarks and of the values they produce:
  // part of the cache identity, so that a change re-measures.
  static constexpr int kVersion = 2;

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
  sdk::Status fit(const BlobGraph& small, const BlobGraph& large, bool bytes, ThreadPool* pool,
                  const std::string& name, const std::string& suffix,
                  sdk::DeviceModelValues* out);

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
