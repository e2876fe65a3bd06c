// A fixed set of worker threads for splitting loops, owned by one plugin
// instance. parallel_for allocates nothing and may be called from several
// threads at once: each call is a job on a short intrusive list, its chunks
// claimed by whichever workers are free and by the calling thread itself.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace loom::cpu_simd {

class ThreadPool {
 public:
  using ChunkFn = void (*)(void* context, size_t begin, size_t end);

  // `parallelism` counts the calling thread: 1 means no workers at all.
  explicit ThreadPool(size_t parallelism);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t parallelism() const { return workers_.size() + 1; }

  // Calls fn(context, begin, end) over disjoint ranges covering [0, count),
  // each at least `grain` long except the last; returns when all are done.
  void parallel_for(size_t count, size_t grain, ChunkFn fn, void* context);

  template <typename F>
  void parallel_for(size_t count, size_t grain, F& f) {
    parallel_for(count, grain,
                 [](void* c, size_t b, size_t e) { (*static_cast<F*>(c))(b, e); }, &f);
  }

 private:
  struct Job {
    ChunkFn fn = nullptr;
    void* context = nullptr;
    size_t count = 0;
    size_t chunk = 0;
    size_t chunks = 0;
    std::atomic<size_t> next{0};
    std::atomic<size_t> done{0};
    size_t workers = 0;  // guarded by mutex_
    Job* link = nullptr; // guarded by mutex_
  };

  void worker_loop();
  Job* find_open_job();  // requires mutex_
  static void work_on(Job* job);

  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  Job* jobs_ = nullptr;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace loom::cpu_simd
