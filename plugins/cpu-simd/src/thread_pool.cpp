#include "thread_pool.hpp"

namespace loom::cpu_simd {

ThreadPool::ThreadPool(size_t parallelism) {
  if (parallelism == 0) parallelism = 1;
  workers_.reserve(parallelism - 1);
  for (size_t i = 1; i < parallelism; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

ThreadPool::Job* ThreadPool::find_open_job() {
  for (Job* j = jobs_; j != nullptr; j = j->link) {
    if (j->next.load(std::memory_order_relaxed) < j->chunks) return j;
  }
  return nullptr;
}

void ThreadPool::work_on(Job* job) {
  for (;;) {
    const size_t c = job->next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job->chunks) return;
    const size_t begin = c * job->chunk;
    const size_t end = begin + job->chunk < job->count ? begin + job->chunk : job->count;
    job->fn(job->context, begin, end);
    job->done.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stop_ || find_open_job() != nullptr; });
    if (stop_) return;
    Job* job = find_open_job();
    // Registered under the lock, so the job's owner cannot unlink it while
    // this worker still holds a pointer to it.
    ++job->workers;
    lock.unlock();
    work_on(job);
    lock.lock();
    if (--job->workers == 0) done_cv_.notify_all();
  }
}

void ThreadPool::parallel_for(size_t count, size_t grain, ChunkFn fn, void* context) {
  if (count == 0) return;
  if (grain == 0) grain = 1;
  // A few chunks per thread evens out uneven progress.
  size_t chunk = (count + parallelism() * 4 - 1) / (parallelism() * 4);
  if (chunk < grain) chunk = grain;
  const size_t chunks = (count + chunk - 1) / chunk;
  if (workers_.empty() || chunks == 1) {
    fn(context, 0, count);
    return;
  }
  Job job;
  job.fn = fn;
  job.context = context;
  job.count = count;
  job.chunk = chunk;
  job.chunks = chunks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job.link = jobs_;
    jobs_ = &job;
  }
  work_cv_.notify_all();
  work_on(&job);
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] {
    return job.done.load(std::memory_order_acquire) == job.chunks && job.workers == 0;
  });
  for (Job** p = &jobs_; *p != nullptr; p = &(*p)->link) {
    if (*p == &job) {
      *p = job.link;
      break;
    }
  }
}

}  // namespace loom::cpu_simd
