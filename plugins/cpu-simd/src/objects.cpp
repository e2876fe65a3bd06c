#include "objects.hpp"

#include <algorithm>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <new>

namespace loom::cpu_simd {

// ------------------------------------------------------------------ Fence

Status Fence::signal() {
  signal_with(Status());
  return Status();
}

void Fence::signal_with(Status error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    signaled_ = true;
    if (error_.ok()) error_ = std::move(error);
  }
  cv_.notify_all();
}

Status Fence::wait(uint64_t timeout_ns) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout_ns == UINT64_MAX) {
    cv_.wait(lock, [this] { return signaled_; });
  } else if (!cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns > INT64_MAX ? INT64_MAX : timeout_ns),
                           [this] { return signaled_; })) {
    return sdk::deadline_exceeded("fence not signaled within " + std::to_string(timeout_ns) + " ns");
  }
  return error_;
}

Status Fence::query(bool* out_signaled) {
  std::lock_guard<std::mutex> lock(mutex_);
  *out_signaled = signaled_;
  return signaled_ ? error_ : Status();
}

// ------------------------------------------------------------------ Buffer

Status Buffer::create(uint64_t size, uint64_t alignment, std::unique_ptr<Buffer>* out) {
  if (alignment < kDefaultAlignment) alignment = kDefaultAlignment;
  if (alignment > (uint64_t{1} << 30) || size > SIZE_MAX - alignment) {
    return sdk::resource_exhausted("buffer of " + std::to_string(size) + " bytes aligned to " +
                                   std::to_string(alignment) + " cannot be allocated");
  }
  const size_t bytes = size == 0 ? 1 : static_cast<size_t>(size);
  void* p = ::operator new(bytes, std::align_val_t(alignment), std::nothrow);
  if (p == nullptr) {
    return sdk::resource_exhausted("out of host memory allocating a buffer of " +
                                   std::to_string(size) + " bytes");
  }
  std::unique_ptr<Buffer> b(new Buffer());
  b->data_ = static_cast<std::byte*>(p);
  b->size_ = size;
  b->alignment_ = static_cast<size_t>(alignment);
  *out = std::move(b);
  return Status();
}

Status Buffer::wrap(void* pointer, uint64_t size, std::unique_ptr<Buffer>* out) {
  if (pointer == nullptr) return sdk::invalid_argument("buffer_import_host: host_pointer is NULL");
  if (size > UINTPTR_MAX - reinterpret_cast<uintptr_t>(pointer)) {
    return sdk::invalid_argument("buffer_import_host: " + std::to_string(size) +
                                 " bytes from the pointer run past the address space");
  }
  std::unique_ptr<Buffer> b(new Buffer());
  b->data_ = static_cast<std::byte*>(pointer);
  b->size_ = size;
  b->owned_ = false;
  *out = std::move(b);
  return Status();
}

Buffer::~Buffer() {
  if (owned_) ::operator delete(data_, std::align_val_t(alignment_));
}

Status Buffer::check_range(const char* what, uint64_t offset, uint64_t size) const {
  if (offset > size_ || size > size_ - offset) {
    return sdk::out_of_range(std::string(what) + ": range [" + std::to_string(offset) +
                                        ", +" + std::to_string(size) + ") exceeds the buffer's " +
                                        std::to_string(size_) + " bytes");
  }
  return Status();
}

Status Buffer::copy_from_host(uint64_t offset, const void* src, uint64_t size) {
  LOOM_SDK_RETURN_IF_ERROR(check_range("buffer_copy_from_host", offset, size));
  if (size != 0) std::memcpy(data_ + offset, src, static_cast<size_t>(size));
  return Status();
}

Status Buffer::copy_to_host(uint64_t offset, void* dst, uint64_t size) {
  LOOM_SDK_RETURN_IF_ERROR(check_range("buffer_copy_to_host", offset, size));
  if (size != 0) std::memcpy(dst, data_ + offset, static_cast<size_t>(size));
  return Status();
}

// ------------------------------------------------------------------ Executable

// The byte size of every tensor of a static graph (a bound one, for a
// binding of an open executable).
void Executable::size_tensors() {
  const size_t n = graph_.tensors.size();
  byte_size_.resize(n);
  for (size_t t = 0; t < n; ++t) {
    uint64_t count = 1;
    for (int64_t d : graph_.tensors[t].shape) count *= static_cast<uint64_t>(d);
    byte_size_[t] = count * dtype_size(graph_.tensors[t].dtype);
  }
}

Status Executable::create(BlobGraph graph, ThreadPool* pool, bool onednn, Kernels kernels,
                          std::unique_ptr<Executable>* out, size_t cache_size) {
  std::unique_ptr<Executable> e(new Executable(std::move(graph), pool));
  if (has_open_dims(e->graph_)) {
    e->open_ = true;
    e->onednn_ = onednn;
    e->kernels_ = kernels;
    e->cache_size_ = cache_size == 0 ? 1 : cache_size;
    e->shared_packs_ = make_packed_weights();
    *out = std::move(e);
    return Status();
  }
  e->size_tensors();
  LOOM_SDK_RETURN_IF_ERROR(Schedule::build(e->graph_, pool->parallelism(), onednn, kernels, &e->schedule_));
  *out = std::move(e);
  return Status();
}

void Executable::report_packing_to(const loom_host_services_t* host) {
  log_host_ = host;
  if (host == nullptr || open_) return;
  std::string steps = schedule_->describe();
  while (!steps.empty() && steps.back() == '\n') steps.pop_back();
  for (size_t at = steps.find('\n'); at != std::string::npos; at = steps.find('\n', at)) {
    steps.replace(at, 1, "; ");
  }
  sdk::log(host, LOOM_LOG_DEBUG, ("executable: schedule: " + steps).c_str());
}

void Executable::report_packing() {
  if (open_ || packing_reported_.exchange(true) || schedule_->packed_count() == 0) return;
  auto size = [](uint64_t bytes) {
    char text[32];
    if (bytes < (1u << 20)) {
      std::snprintf(text, sizeof text, "%.1f KiB", static_cast<double>(bytes) / 1024);
    } else {
      std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
    }
    return std::string(text);
  };
  const size_t count = schedule_->packed_count();
  const std::string line = "executable: packed " + std::to_string(count) + " weight tensor" +
                           (count == 1 ? "" : "s") + " once, on the first run: " +
                           size(schedule_->packed_bytes()) + " in oneDNN's layouts, from " +
                           size(schedule_->packed_source_bytes()) +
                           " of the program's tensors, which later runs do not read";
  sdk::log(log_host_, LOOM_LOG_INFO, line.c_str());
}

size_t Executable::arena_count() {
  std::lock_guard<std::mutex> lock(arenas_mutex_);
  return arenas_.size();
}

Executable::Arena* Executable::acquire() {
  std::lock_guard<std::mutex> lock(arenas_mutex_);
  for (auto& a : arenas_) {
    if (!a->busy) {
      a->busy = true;
      return a.get();
    }
  }
  auto arena = std::make_unique<Arena>();
  const uint64_t scratch = schedule_->scratch_bytes();
  arena->storage.reset(new std::byte[scratch + kDefaultAlignment]);
  const auto addr = reinterpret_cast<uintptr_t>(arena->storage.get());
  arena->base = arena->storage.get() + ((kDefaultAlignment - addr % kDefaultAlignment) % kDefaultAlignment);
  const std::vector<Slot>& slots = schedule_->slots();
  arena->tensors.assign(slots.size(), nullptr);
  for (size_t t = 0; t < slots.size(); ++t) {
    if (slots[t].offset >= 0) {
      arena->tensors[t] = reinterpret_cast<float*>(arena->base + slots[t].offset);
    } else if (t < constants_->tensors.size() && constants_->tensors[t].constant) {
      // Kernels never write their inputs, so constants are shared read-only.
      const BlobTensor& c = constants_->tensors[t];
      // Format 6's u8, i8 and i32 constants keep their bytes in `bytes`.
      arena->tensors[t] = c.dtype == LOOM_DTYPE_F32 ? const_cast<float*>(c.data.data())
                                                    : reinterpret_cast<float*>(const_cast<uint8_t*>(c.bytes.data()));
    }
  }
  arena->state = schedule_->make_arena();
  arena->busy = true;
  arenas_.push_back(std::move(arena));
  return arenas_.back().get();
}

void Executable::release(Arena* arena) {
  std::lock_guard<std::mutex> lock(arenas_mutex_);
  arena->busy = false;
}

namespace {

// Only the error path builds strings.
Status tensor_error(const char* role, size_t index, const std::string& what) {
  return sdk::invalid_argument(std::string("execute: ") + role + " " + std::to_string(index) + " " +
                               what);
}

}  // namespace

Status Executable::bind(const sdk::ExecuteCallT<Fence>& call, float** tensors) const {
  if (call.input_count != graph_.inputs.size() || call.output_count != graph_.outputs.size()) {
    return sdk::invalid_argument(
        "execute: the executable takes " + std::to_string(graph_.inputs.size()) + " inputs and " +
        std::to_string(graph_.outputs.size()) + " outputs, got " + std::to_string(call.input_count) +
        " and " + std::to_string(call.output_count));
  }
  for (int pass = 0; pass < 2; ++pass) {
    const bool in = pass == 0;
    const char* role = in ? "input" : "output";
    const std::vector<uint32_t>& ids = in ? graph_.inputs : graph_.outputs;
    const loom_tensor_t* const* given = in ? call.inputs : call.outputs;
    for (size_t i = 0; i < ids.size(); ++i) {
      const loom_tensor_t& t = *given[i];
      const BlobTensor& want = graph_.tensors[ids[i]];
      if (t.dtype != want.dtype) {
        return tensor_error(role, i, "has dtype " + std::to_string(static_cast<int>(t.dtype)) +
                                         ", expected " + dtype_name(want.dtype) + " (" +
                                         std::to_string(static_cast<int>(want.dtype)) + ")");
      }
      bool same = t.rank == want.shape.size();
      for (size_t d = 0; same && d < want.shape.size(); ++d) same = t.shape[d] == want.shape[d];
      if (!same) {
        std::vector<int64_t> got(t.shape, t.shape + t.rank);
        return tensor_error(role, i, "has shape " + detail::shape_string(got) + ", expected " +
                                         detail::shape_string(want.shape));
      }
      const uint64_t bytes = byte_size_[ids[i]];
      if (t.byte_size != bytes) {
        return tensor_error(role, i, "has byte_size " + std::to_string(t.byte_size) + ", expected " +
                                         std::to_string(bytes));
      }
      std::byte* base = nullptr;
      if (t.buffer != nullptr && t.host_data != nullptr) {
        return tensor_error(role, i, "sets both buffer and host_data");
      }
      if (t.buffer != nullptr) {
        const Buffer* b = reinterpret_cast<const Buffer*>(t.buffer);
        if (t.offset > b->size() || bytes > b->size() - t.offset) {
          return tensor_error(role, i, "range [" + std::to_string(t.offset) + ", +" +
                                           std::to_string(bytes) + ") exceeds its buffer of " +
                                           std::to_string(b->size()) + " bytes");
        }
        base = b->data() + t.offset;
      } else if (t.host_data != nullptr) {
        base = static_cast<std::byte*>(t.host_data) + t.offset;
      } else if (bytes != 0) {
        return tensor_error(role, i, "has neither buffer nor host_data");
      }
      const uint32_t align = dtype_size(want.dtype);
      if (reinterpret_cast<uintptr_t>(base) % align != 0) {
        return tensor_error(role, i, "data is not aligned to " + std::to_string(align) + " bytes");
      }
      tensors[ids[i]] = reinterpret_cast<float*>(base);
    }
  }
  return Status();
}

size_t Executable::cached_bindings() {
  std::lock_guard<std::mutex> lock(bindings_mutex_);
  return bindings_.size();
}

size_t Executable::bindings_prepared() {
  std::lock_guard<std::mutex> lock(bindings_mutex_);
  return bindings_prepared_;
}

Status Executable::binding_for(const sdk::ExecuteCallT<Fence>& call, std::shared_ptr<Executable>* out) {
  if (call.input_count != graph_.inputs.size() || call.output_count != graph_.outputs.size()) {
    return sdk::invalid_argument(
        "execute: the executable takes " + std::to_string(graph_.inputs.size()) + " inputs and " +
        std::to_string(graph_.outputs.size()) + " outputs, got " + std::to_string(call.input_count) +
        " and " + std::to_string(call.output_count));
  }
  for (size_t i = 0; i < call.input_count; ++i) {
    const loom_tensor_t& t = *call.inputs[i];
    if (t.rank > kMaxRank || (t.rank != 0 && t.shape == nullptr)) {
      return tensor_error("input", i, "has rank " + std::to_string(t.rank) +
                                          (t.rank > kMaxRank ? " (at most 8)" : " but no shape"));
    }
  }
  // A binding seen before is found without allocating: the shapes are
  // compared where the call holds them.
  auto same = [&](const std::vector<std::vector<int64_t>>& known) {
    if (known.size() != call.input_count) return false;
    for (size_t i = 0; i < call.input_count; ++i) {
      const loom_tensor_t& t = *call.inputs[i];
      if (known[i].size() != t.rank || !std::equal(known[i].begin(), known[i].end(), t.shape)) return false;
    }
    return true;
  };
  {
    std::lock_guard<std::mutex> lock(bindings_mutex_);
    for (Binding& b : bindings_) {
      if (!same(b.shapes)) continue;
      b.last_use = ++use_clock_;
      *out = b.exe;
      return Status();
    }
  }
  std::vector<std::vector<int64_t>> shapes(call.input_count);
  for (size_t i = 0; i < call.input_count; ++i) {
    shapes[i].assign(call.inputs[i]->shape, call.inputs[i]->shape + call.inputs[i]->rank);
  }
  // A new binding: prepared outside the lock (executions at other bindings
  // go on meanwhile), then recorded unless another thread was quicker.
  BlobGraph bound;
  std::string error;
  if (!bind_shapes(graph_, shapes, &bound, &error)) {
    return sdk::invalid_argument("execute: the input shapes do not fit the executable: " + error);
  }
  std::unique_ptr<Executable> exe(new Executable(std::move(bound), pool_));
  exe->constants_ = &graph_;
  exe->size_tensors();
  LOOM_SDK_RETURN_IF_ERROR(Schedule::build(exe->graph_, pool_->parallelism(), onednn_, kernels_,
                                           &exe->schedule_, shared_packs_));
  std::shared_ptr<Executable> made(std::move(exe));
  std::lock_guard<std::mutex> lock(bindings_mutex_);
  for (Binding& b : bindings_) {
    if (b.shapes != shapes) continue;
    b.last_use = ++use_clock_;
    *out = b.exe;
    return Status();
  }
  if (bindings_.size() >= cache_size_) {
    auto lru = std::min_element(bindings_.begin(), bindings_.end(),
                                [](const Binding& a, const Binding& b) { return a.last_use < b.last_use; });
    bindings_.erase(lru);  // executions still running on it hold their own reference
  }
  ++bindings_prepared_;
  if (log_host_ != nullptr) {
    size_t packs = 0, reuses = 0;
    packed_weights_counts(*shared_packs_, &packs, &reuses);
    std::string line = "executable: prepared binding " + std::to_string(bindings_prepared_) + " (inputs";
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (!graph_.tensors[graph_.inputs[i]].parameter) line += " " + detail::shape_string(shapes[i]);
    }
    line += "; " + std::to_string(bindings_.size() + 1) + " of " + std::to_string(cache_size_) +
            " kept; weight packs so far: " + std::to_string(packs) + " made, " + std::to_string(reuses) +
            " reused)";
    sdk::log(log_host_, LOOM_LOG_DEBUG, line.c_str());
  }
  bindings_.push_back(Binding{std::move(shapes), made, ++use_clock_});
  *out = std::move(made);
  return Status();
}

Status Executable::execute_open(const sdk::ExecuteCallT<Fence>& call) {
  std::shared_ptr<Executable> exe;
  Status s = binding_for(call, &exe);
  if (!s.ok()) {
    for (size_t i = 0; i < call.wait_fence_count; ++i) (void)call.wait_fence(i)->wait(UINT64_MAX);
    if (call.signal_fence != nullptr) call.signal_fence->signal_with(s);
    return s;
  }
  return exe->execute(call);
}

Status Executable::execute(const sdk::ExecuteCallT<Fence>& call) {
  if (open_) return execute_open(call);
  for (size_t i = 0; i < call.wait_fence_count; ++i) {
    Status s = call.wait_fence(i)->wait(UINT64_MAX);
    if (!s.ok()) {
      Status e = sdk::Status(s.code(), "execute: wait fence " + std::to_string(i) +
                                           " reported an error: " + s.message());
      if (call.signal_fence != nullptr) call.signal_fence->signal_with(e);
      return e;
    }
  }
  Arena* arena = acquire();
  Status s = bind(call, arena->tensors.data());
  if (s.ok()) s = schedule_->run(*arena->state, arena->tensors.data(), *pool_);
  release(arena);
  if (s.ok() && log_host_ != nullptr && !packing_reported_.load(std::memory_order_relaxed)) {
    report_packing();
  }
  if (call.signal_fence != nullptr) call.signal_fence->signal_with(s);
  return s;
}

}  // namespace loom::cpu_simd
