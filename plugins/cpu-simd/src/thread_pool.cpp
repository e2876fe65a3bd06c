#include "thread_pool.hpp"

#include <omp.h>

namespace loom::cpu_simd {

void ThreadPool::parallel_for(size_t count, size_t grain, ChunkFn fn, void* context) {
  if (count == 0) return;
  if (grain == 0) grain = 1;
  // A few chunks per thread even out uneven progress.
  size_t chunk = (count + parallelism_ * 4 - 1) / (parallelism_ * 4);
  if (chunk < grain) chunk = grain;
  const size_t chunks = (count + chunk - 1) / chunk;
  if (parallelism_ == 1 || chunks == 1) {
    fn(context, 0, count);
    return;
  }
  const int team = static_cast<int>(chunks < parallelism_ ? chunks : parallelism_);
  const long long n = static_cast<long long>(chunks);
#pragma omp parallel for num_threads(team) schedule(dynamic, 1)
  for (long long c = 0; c < n; ++c) {
    const size_t begin = static_cast<size_t>(c) * chunk;
    const size_t end = begin + chunk < count ? begin + chunk : count;
    fn(context, begin, end);
  }
}

}  // namespace loom::cpu_simd
