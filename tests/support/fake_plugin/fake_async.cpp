#include "fake_async.hpp"

#include <utility>

namespace fake_async {

void FenceState::signal(loom_status_code_t code, std::string message) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    signaled = true;
    error = code;
    error_message = std::move(message);
    cv.notify_all();
  }
  // Outside the fence's lock: the worker takes its own lock, then fence locks.
  if (worker != nullptr) worker->wake();
}

bool FenceState::is_signaled() {
  std::lock_guard<std::mutex> lock(mutex);
  return signaled;
}

Worker::Worker(Order order, size_t hold_until)
    : order_(order), hold_until_(hold_until), released_(hold_until <= 1) {
  thread_ = std::thread([this] { loop(); });
}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Worker::submit(std::vector<std::shared_ptr<FenceState>> waits,
                    std::shared_ptr<FenceState> signal, std::function<void()> run) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(Job{std::move(waits), std::move(signal), std::move(run)});
    if (jobs_.size() >= hold_until_) released_ = true;
  }
  cv_.notify_all();
}

void Worker::wake() {
  std::lock_guard<std::mutex> lock(mutex_);
  cv_.notify_all();
}

long Worker::next_ready() {
  const long n = static_cast<long>(jobs_.size());
  for (long k = 0; k < n; ++k) {
    const long i = order_ == Order::kFifo ? k : n - 1 - k;
    bool ready = true;
    for (const auto& f : jobs_[i].waits) ready = ready && f->is_signaled();
    if (ready) return i;
  }
  return -1;
}

void Worker::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    long i = -1;
    cv_.wait(lock, [&] {
      if (!released_ && !stopping_) return false;
      i = next_ready();
      return i >= 0 || stopping_;
    });
    if (i < 0) {
      // Stopping, and what remains (if anything) waits for fences nobody
      // will signal now.
      std::deque<Job> abandoned = std::move(jobs_);
      jobs_.clear();
      lock.unlock();
      for (Job& job : abandoned) {
        job.signal->signal(LOOM_STATUS_CANCELLED,
                           "fake: plugin destroyed while the execution waited for its fences");
      }
      return;
    }
    Job job = std::move(jobs_[static_cast<size_t>(i)]);
    jobs_.erase(jobs_.begin() + i);
    lock.unlock();
    job.run();
    lock.lock();
  }
}

}  // namespace fake_async
