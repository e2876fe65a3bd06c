// The objects behind the cpu-simd plugin's handles. Everything lives in host
// memory: a buffer is an aligned allocation, a fence a flag with a condition
// variable, and execution runs on the calling thread plus the plugin's pool.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loom/cpu_simd/blob_format.hpp"
#include "loom/plugin.hpp"
#include "ops.hpp"
#include "schedule.hpp"
#include "thread_pool.hpp"

namespace loom::cpu_simd {

inline constexpr const char* kLoaderKey = "cpu-simd";
inline constexpr size_t kDefaultAlignment = 64;

using sdk::Status;

class Fence {
 public:
  Status signal();
  // Marks the fence signaled with the error of the work that was to signal it.
  void signal_with(Status error);
  Status wait(uint64_t timeout_ns);
  Status query(bool* out_signaled);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool signaled_ = false;
  Status error_;
};

class Buffer {
 public:
  // Fails with RESOURCE_EXHAUSTED when the memory cannot be had.
  static Status create(uint64_t size, uint64_t alignment, std::unique_ptr<Buffer>* out);
  // buffer_import_host: a buffer over the caller's memory, which it neither
  // copies nor frees (the caller keeps it valid until the buffer is freed).
  static Status wrap(void* pointer, uint64_t size, std::unique_ptr<Buffer>* out);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  uint64_t size() const { return size_; }
  std::byte* data() const { return data_; }

  Status map(void** out) {
    *out = data_;
    return Status();
  }
  void unmap() {}
  Status copy_from_host(uint64_t offset, const void* src, uint64_t size);
  Status copy_to_host(uint64_t offset, void* dst, uint64_t size);

 private:
  Buffer() = default;
  Status check_range(const char* what, uint64_t offset, uint64_t size) const;

  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  size_t alignment_ = kDefaultAlignment;
  bool owned_ = true;  // false: imported host memory
};

// How many bindings an open-shape executable keeps prepared.
inline constexpr size_t kBindingCacheSize = 8;

class Executable {
 public:
  // Plans `graph` (accepted by decode) for execution with `pool`, which
  // outlives the executable.
  // `onednn` false: the plain kernels only (option cpu.onednn=0).
  // A graph with open dimensions (format 5) is planned per binding instead:
  // each execute binds the shapes its inputs carry (bind_shapes), checks
  // the outputs', and runs a schedule prepared for that binding, kept in an
  // LRU cache of `cache_size` bindings; the schedules share packed weights.
  static Status create(BlobGraph graph, ThreadPool* pool, bool onednn, Kernels kernels,
                       std::unique_ptr<Executable>* out, size_t cache_size = kBindingCacheSize);
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Thread-safe. Allocates nothing unless every scratch arena is in use.
  Status execute(const sdk::ExecuteCallT<Fence>& call);

  // After its first run the executable logs, at INFO through `host`'s log
  // service (when it has one), how many bytes of weights it packed.
  // It also logs its schedule at DEBUG now, one line ("executable:
  // schedule: conv nodes 0,1 -> nhwc; ...").
  void report_packing_to(const loom_host_services_t* host);

  // Scratch arenas made so far (for tests of the pool).
  size_t arena_count();
  // The schedule of a static executable (open ones have one per binding).
  const Schedule& schedule() const { return *schedule_; }

  // Open-shape executables: whether this is one, the bindings prepared now,
  // how many were prepared in all, and the shared weight packs.
  bool is_open() const { return open_; }
  size_t cached_bindings();
  size_t bindings_prepared();
  const PackedWeights* packed_weights() const { return shared_packs_.get(); }

 private:
  Executable(BlobGraph graph, ThreadPool* pool) : graph_(std::move(graph)), pool_(pool) {}

  // One binding of an open executable: the input shapes and the static
  // executable prepared for them.
  struct Binding {
    std::vector<std::vector<int64_t>> shapes;
    std::shared_ptr<Executable> exe;
    uint64_t last_use = 0;
  };
  Status binding_for(const sdk::ExecuteCallT<Fence>& call, std::shared_ptr<Executable>* out);
  Status execute_open(const sdk::ExecuteCallT<Fence>& call);

  // Memory for one concurrent execution: intermediates, the table of slot
  // pointers and oneDNN's per-execution state.
  struct Arena {
    std::unique_ptr<std::byte[]> storage;
    std::byte* base = nullptr;  // storage, aligned to kDefaultAlignment
    std::vector<float*> tensors;
    ScheduleArenaPtr state;
    bool busy = false;
  };

  Status bind(const sdk::ExecuteCallT<Fence>& call, float** tensors) const;
  Arena* acquire();
  void release(Arena* arena);

  void report_packing();

  BlobGraph graph_;
  std::unique_ptr<Schedule> schedule_;
  void size_tensors();  // fills byte_size_ from graph_
  std::vector<uint64_t> byte_size_;  // per blob tensor
  ThreadPool* pool_;

  const loom_host_services_t* log_host_ = nullptr;
  std::atomic<bool> packing_reported_{false};

  std::mutex arenas_mutex_;
  std::vector<std::unique_ptr<Arena>> arenas_;

  // Constants are read from this graph (an open executable's, for the
  // executables of its bindings: one copy, and stable addresses for the
  // shared weight packs).
  const BlobGraph* constants_ = &graph_;

  // Open-shape executables only.
  bool open_ = false;
  bool onednn_ = true;
  Kernels kernels_{};
  size_t cache_size_ = kBindingCacheSize;
  std::shared_ptr<PackedWeights> shared_packs_;
  std::mutex bindings_mutex_;
  std::vector<Binding> bindings_;
  uint64_t use_clock_ = 0;
  size_t bindings_prepared_ = 0;
};

}  // namespace loom::cpu_simd
