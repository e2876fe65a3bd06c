// What the parts of ModelServer share (private to serve/): a model's state
// (ModelServer::Model), the requests waiting for it, its counters, and the
// workers that run requests on its sessions (model_pool.cpp). The metrics
// (model_metrics.cpp) read the same state.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model_server.hpp"

namespace loom::serve {

using Clock = std::chrono::steady_clock;

// Upper bounds (seconds) of the request-latency histogram's buckets.
inline constexpr double kLatencyBuckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                      0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5,
                                      5,      10};
inline constexpr size_t kBucketCount = sizeof(kLatencyBuckets) / sizeof(kLatencyBuckets[0]);

// A request waiting for its model's pool.
struct Pending {
  InferRequest request;
  std::promise<Result<InferResponse>> done;
  Clock::time_point enqueued;
  // Dimension 0 of every input when they all agree on it and the model
  // batches; -1: the request runs alone.
  int64_t rows = -1;
};

// Counters of one model on one device ("" before any run got there).
struct DeviceCounters {
  uint64_t success = 0;
  uint64_t failure = 0;
  double queue_seconds = 0;
  double compute_seconds = 0;
  uint64_t batches = 0;
  uint64_t batch_rows = 0;
};

// Runs requests on one session of a model (model_pool.cpp).
class Worker;

struct ModelServer::Model {
  ModelConfig config;
  std::shared_ptr<Program> program;
  FunctionInfo function;
  bool batching = false;      // requests may be run together
  int64_t batch_rows = 1;     // the most rows of one batched run
  std::atomic<bool> batching_broken{false};  // an output is not batch-major

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Pending>> queue;  // requests for the worker threads
  bool stopping = false;
  // One per instance, each with its own session: a plugin that runs on
  // worker threads of its own (cpu-simd's OpenMP team) gets one team per
  // instance, however many threads the front ends receive requests on.
  std::vector<std::thread> workers;

  mutable std::mutex metrics_mu;
  std::map<std::string, DeviceCounters> counters;  // by device label
  uint64_t latency_buckets[kBucketCount + 1] = {};  // the last: +Inf
  double latency_sum = 0;
  uint64_t latency_count = 0;
};

// A worker owning `session`; run worker_loop() on a thread of its own.
std::shared_ptr<Worker> make_worker(ModelServer* server, ModelServer::Model* model,
                                    std::unique_ptr<Session> session);
// Takes requests (batches, when the model batches) from the model's queue
// and runs them until the model stops.
void worker_loop(Worker& worker);

}  // namespace loom::serve
