// The fake plugin's asynchronous side: fence state and the worker thread
// that completes executions submitted with a signal fence.
//
// The worker honors wait fences itself (an execution starts only once every
// fence it waits for is signaled), and can be told to run ready executions
// out of submission order and to hold everything until a number of them are
// queued, so that tests can see whether ordering comes from the fences.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loom/plugin.h"

namespace fake_async {

class Worker;

// One fence's state, shared by the fence object and the work that signals
// or waits for it. Thread-safe.
struct FenceState {
  std::mutex mutex;
  std::condition_variable cv;
  bool signaled = false;
  loom_status_code_t error = LOOM_STATUS_OK;
  std::string error_message;
  // Woken after every signal so it can start work that waited for it; may
  // be null. Borrowed: the worker outlives every fence signal (the plugin
  // joins it before freeing fences).
  Worker* worker = nullptr;

  void signal(loom_status_code_t code, std::string message);
  bool is_signaled();
};

// Which ready execution the worker starts first.
enum class Order { kFifo, kLifo };

// One thread that runs submitted jobs. A job starts once all its wait fences
// are signaled; among ready jobs, `order` picks. No job starts before
// `hold_until` jobs have been queued at once (0 or 1: no holding), or the
// worker is stopping. Thread-safe.
class Worker {
 public:
  Worker(Order order, size_t hold_until);
  // Runs every queued job whose fences get signaled, then joins the thread.
  // Jobs still waiting when nothing else can run have their signal fence
  // signaled with an error instead.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Queues `run`, which must signal `signal` (never null) when done.
  void submit(std::vector<std::shared_ptr<FenceState>> waits, std::shared_ptr<FenceState> signal,
              std::function<void()> run);
  // Re-examines the queue; called after a fence is signaled.
  void wake();

 private:
  struct Job {
    std::vector<std::shared_ptr<FenceState>> waits;
    std::shared_ptr<FenceState> signal;
    std::function<void()> run;
  };
  void loop();
  // Index of the job to start next, or -1; the caller holds mutex_.
  long next_ready();

  const Order order_;
  const size_t hold_until_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool released_ = false;  // hold_until_ jobs were queued once
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace fake_async
