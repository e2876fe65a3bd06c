// tiny-accel: an example Loom plugin built only on the SDK (loom/plugin.hpp
// and, for its compile side, loom/sdk/graph.hpp). One device,
// tiny-accel://0, that runs float32 Add, Mul, Relu and MatMul programs on
// host memory, synchronously. README.md walks through the files.
//
// The classes below are what plugin.hpp asks of a plugin (the list is at the
// top of that header); LOOM_SDK_DEFINE_ENTRY at the end turns them into the
// C function table and the exported loom_plugin_query.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "compile.hpp"
#include "loom/plugin.hpp"
#include "program.hpp"

#ifndef TINY_ACCEL_VERSION
#define TINY_ACCEL_VERSION "0.0.0"
#endif

namespace tiny_accel {
namespace {

using loom::sdk::invalid_argument;

// Device memory, which for this device is host memory: mappable, and
// copies are memcpy. Thread-safe as plugin.h asks (no state changes after
// creation; the host does not write one buffer from two calls at once).
class Buffer {
 public:
  static Status create(uint64_t size, uint64_t alignment, std::unique_ptr<Buffer>* out) {
    if (alignment == 0) alignment = 64;
    if (size > (uint64_t{1} << 40)) {
      return loom::sdk::resource_exhausted("buffer_allocate: " + std::to_string(size) +
                                           " bytes is more than tiny-accel allocates");
    }
    auto b = std::unique_ptr<Buffer>(new Buffer());
    b->align_ = static_cast<size_t>(alignment);
    b->size_ = size;
    b->data_ = static_cast<uint8_t*>(
        ::operator new(size == 0 ? 1 : static_cast<size_t>(size), std::align_val_t(b->align_),
                       std::nothrow));
    if (b->data_ == nullptr) {
      return loom::sdk::resource_exhausted("buffer_allocate: out of memory for " +
                                           std::to_string(size) + " bytes");
    }
    *out = std::move(b);
    return Status();
  }
  ~Buffer() {
    if (data_ != nullptr) ::operator delete(data_, std::align_val_t(align_));
  }

  Status map(void** out) {
    *out = data_;
    return Status();
  }
  void unmap() {}
  Status copy_from_host(uint64_t offset, const void* src, uint64_t size) {
    LOOM_SDK_RETURN_IF_ERROR(check_range("buffer_copy_from_host", offset, size));
    if (size != 0) std::memcpy(data_ + offset, src, static_cast<size_t>(size));
    return Status();
  }
  Status copy_to_host(uint64_t offset, void* dst, uint64_t size) {
    LOOM_SDK_RETURN_IF_ERROR(check_range("buffer_copy_to_host", offset, size));
    if (size != 0) std::memcpy(dst, data_ + offset, static_cast<size_t>(size));
    return Status();
  }
  // The bytes [offset, offset + size) if they lie inside the buffer.
  Status check_range(const char* what, uint64_t offset, uint64_t size) const {
    if (offset > size_ || size > size_ - offset) {
      return loom::sdk::out_of_range(std::string(what) + ": bytes " + std::to_string(offset) +
                                     " + " + std::to_string(size) + " of a buffer of " +
                                     std::to_string(size_));
    }
    return Status();
  }
  uint8_t* data() const { return data_; }

 private:
  Buffer() = default;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  size_t align_ = 64;
};

// A completion flag. Executions here finish before execute returns, so a
// fence is signaled (or failed) by the time the host looks at it; fence_wait
// still honours its timeout for fences only the host signals.
class Fence {
 public:
  Status signal() { return finish(Status()); }
  Status finish(Status result) {
    std::lock_guard<std::mutex> lock(mutex_);
    signaled_ = true;
    result_ = std::move(result);
    cv_.notify_all();
    return Status();
  }
  Status wait(uint64_t timeout_ns) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto done = [&] { return signaled_; };
    if (timeout_ns == UINT64_MAX) {
      cv_.wait(lock, done);
    } else if (!cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns), done)) {
      return loom::sdk::deadline_exceeded("fence_wait: not signaled within " +
                                          std::to_string(timeout_ns) + " ns");
    }
    return result_;
  }
  Status query(bool* out) {
    std::lock_guard<std::mutex> lock(mutex_);
    *out = signaled_;
    return result_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool signaled_ = false;
  Status result_;
};

// A loaded program. execute is thread-safe: the program is read-only and
// every call has its own scratch (run() in run.cpp).
class Executable {
 public:
  explicit Executable(Program program) : program_(std::move(program)) {}

  Status execute(const loom::sdk::ExecuteCallT<Fence>& call) {
    for (size_t i = 0; i < call.wait_fence_count; ++i) {
      // Host fences of earlier work; a minute is generous for a wait that
      // should already be over.
      LOOM_SDK_RETURN_IF_ERROR(call.wait_fence(i)->wait(60'000'000'000ull));
    }
    Status s = run_checked(call);
    if (call.signal_fence != nullptr) call.signal_fence->finish(s);
    return s;
  }

 private:
  // The float32 data of one tensor argument, checked against the program.
  Status resolve(const loom_tensor_t& t, uint32_t id, const char* what, size_t i, float** out) const {
    const Tensor& expected = program_.tensors[id];
    const std::string where = std::string("execute: ") + what + " " + std::to_string(i);
    bool same = t.dtype == LOOM_DTYPE_F32 && t.rank == expected.dims.size();
    for (uint32_t d = 0; same && d < t.rank; ++d) same = t.shape[d] == expected.dims[d];
    if (!same || t.byte_size != expected.elements() * sizeof(float)) {
      return invalid_argument(where + ": not the float32 tensor of the shape the program expects");
    }
    if (t.buffer != nullptr) {
      const auto* b = reinterpret_cast<const Buffer*>(t.buffer);
      LOOM_SDK_RETURN_IF_ERROR(b->check_range(where.c_str(), t.offset, t.byte_size));
      *out = reinterpret_cast<float*>(b->data() + t.offset);
    } else if (t.host_data != nullptr) {
      *out = reinterpret_cast<float*>(static_cast<uint8_t*>(t.host_data) + t.offset);
    } else {
      return invalid_argument(where + ": neither buffer nor host_data is set");
    }
    return Status();
  }

  Status run_checked(const loom::sdk::ExecuteCallT<Fence>& call) const {
    if (call.input_count != program_.inputs.size() || call.output_count != program_.outputs.size()) {
      return invalid_argument("execute: " + std::to_string(call.input_count) + " inputs and " +
                              std::to_string(call.output_count) + " outputs, the program has " +
                              std::to_string(program_.inputs.size()) + " and " +
                              std::to_string(program_.outputs.size()));
    }
    std::vector<const float*> inputs(call.input_count);
    std::vector<float*> outputs(call.output_count);
    for (size_t i = 0; i < call.input_count; ++i) {
      float* p = nullptr;
      LOOM_SDK_RETURN_IF_ERROR(resolve(*call.inputs[i], program_.inputs[i], "input", i, &p));
      inputs[i] = p;
    }
    for (size_t i = 0; i < call.output_count; ++i) {
      LOOM_SDK_RETURN_IF_ERROR(
          resolve(*call.outputs[i], program_.outputs[i], "output", i, &outputs[i]));
    }
    run(program_, inputs.data(), outputs.data());
    return Status();
  }

  Program program_;
};

// The one device. Everything is fixed at creation, so the entries are
// thread-safe.
class Device {
 public:
  void info(loom_device_info_t* out) const {
    out->uri = "tiny-accel://0";
    out->name = "tiny-accel example device (host memory)";
    out->kind = LOOM_DEVICE_KIND_VIRTUAL;
    out->device_memory_bytes = 0;  // not known: it is the host's
    out->host_visible_memory_bytes = 0;
    out->capabilities = LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE | LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY;
    out->dtype_mask = LOOM_DTYPE_BIT(LOOM_DTYPE_F32);
  }
  Status check_executable(const loom::sdk::Blob& blob) {
    Program ignored;
    return decode(blob, &ignored);
  }
  Status load_executable(const loom::sdk::Blob& blob, const loom::sdk::Options&,
                         std::unique_ptr<Executable>* out) {
    Program program;
    LOOM_SDK_RETURN_IF_ERROR(decode(blob, &program));
    *out = std::make_unique<Executable>(std::move(program));
    return Status();
  }
  Status allocate_buffer(uint64_t size, uint64_t alignment, uint32_t flags,
                         std::unique_ptr<Buffer>* out) {
    if ((flags & ~static_cast<uint32_t>(LOOM_BUFFER_HOST_VISIBLE)) != 0) {
      return invalid_argument("buffer_allocate: unknown flags " + std::to_string(flags));
    }
    return Buffer::create(size, alignment, out);
  }
  Status create_fence(std::unique_ptr<Fence>* out) {
    *out = std::make_unique<Fence>();
    return Status();
  }
};

class Plugin {
 public:
  Status check_available() { return Status(); }
  size_t device_count() { return 1; }
  Device* device(size_t index) { return index == 0 ? &device_ : nullptr; }

  // The compile side (compile.cpp). The SDK has verified the graph and
  // checks the answer: the blob goes to the host in memory from its
  // allocator, under the loader key and version named here.
  Status compile_supported(const loom::sdk::GraphView& graph, loom::sdk::Claims* claims) {
    return tiny_accel::compile_supported(graph, claims);
  }
  Status compile(const loom::sdk::GraphView& graph, const loom::sdk::Options&,
                 loom::sdk::CompiledBlob* out) {
    Program program;
    LOOM_SDK_RETURN_IF_ERROR(compile_graph(graph, &program));
    out->bytes = encode(program);
    out->loader_key = kLoaderKey;
    out->format_version = kFormatVersion;
    return Status();
  }

 private:
  Device device_;
};

}  // namespace

struct TinyAccel {
  using Plugin = tiny_accel::Plugin;
  using Device = tiny_accel::Device;
  using Executable = tiny_accel::Executable;
  using Buffer = tiny_accel::Buffer;
  using Fence = tiny_accel::Fence;

  // Name, vendor, version and the blob formats it loads (the manifest that
  // loom_add_plugin writes lists the same loader key).
  static const loom_plugin_info_t* info() {
    static const loom_loader_key_t kKey = {LOOM_LOADER_KEY_STRUCT_SIZE, kLoaderKey, kFormatVersion,
                                           kFormatVersion};
    static const loom_loader_key_t* const kKeys[] = {&kKey};
    static const loom_plugin_info_t kInfo = {LOOM_PLUGIN_INFO_STRUCT_SIZE, "tiny-accel",
                                             "Loom SDK example", TINY_ACCEL_VERSION, 1, kKeys, 0};
    return &kInfo;
  }
  static Status create(const loom::sdk::CreateContext&, std::unique_ptr<Plugin>* out) {
    *out = std::make_unique<Plugin>();
    return Status();
  }
};

}  // namespace tiny_accel

LOOM_SDK_DEFINE_ENTRY(::tiny_accel::TinyAccel)
