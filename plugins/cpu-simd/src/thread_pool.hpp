// Loop splitting for the plain kernels, on the same OpenMP threads that run
// oneDNN's primitives. Two sets of workers (this plugin's own and OpenMP's,
// which spin for a while after each oneDNN call) would compete for the same
// cores between steps; one set hands work from step to step without a
// wake-up. parallel_for allocates nothing itself and may be called from
// several threads at once (each caller leads its own OpenMP team).
#pragma once

#include <cstddef>

namespace loom::cpu_simd {

class ThreadPool {
 public:
  using ChunkFn = void (*)(void* context, size_t begin, size_t end);

  // `parallelism` counts the calling thread: 1 means it runs every loop.
  explicit ThreadPool(size_t parallelism) : parallelism_(parallelism == 0 ? 1 : parallelism) {}
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t parallelism() const { return parallelism_; }

  // Calls fn(context, begin, end) over disjoint ranges covering [0, count),
  // each at least `grain` long except the last; returns when all are done.
  void parallel_for(size_t count, size_t grain, ChunkFn fn, void* context);

  template <typename F>
  void parallel_for(size_t count, size_t grain, F& f) {
    parallel_for(count, grain,
                 [](void* c, size_t b, size_t e) { (*static_cast<F*>(c))(b, e); }, &f);
  }

 private:
  size_t parallelism_;
};

}  // namespace loom::cpu_simd
