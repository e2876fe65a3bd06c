// Test harness for the fpga-stub plugin: loads the built library with dlopen
// (no host library involved), creates an instance with options, records what
// the plugin logs and traces, and wraps the buffer/execute entries.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "bitstream.hpp"
#include "loom/plugin.h"

namespace loom::fpga_stub::testing {

// "ok" or "<code>: <message>"; releases the status.
inline std::string take(const loom_plugin_api_t* api, loom_status_t* s) {
  if (s == nullptr) return "ok";
  std::string out = std::to_string(api->status_code(s)) + ": " + api->status_message(s);
  api->status_destroy(s);
  return out;
}

inline std::string code(loom_status_code_t c) { return std::to_string(c) + ": "; }
inline bool starts_with(const std::string& s, loom_status_code_t c) { return s.rfind(code(c), 0) == 0; }

struct TraceEvent {
  loom_trace_phase_t phase;
  std::string category, name;
  uint64_t ns;
};

// Host services that allocate with aligned_alloc and record logs and traces.
class Recorder {
 public:
  Recorder() {
    services_.struct_size = LOOM_HOST_SERVICES_STRUCT_SIZE;
    services_.user_data = this;
    services_.allocate = [](void*, size_t size, size_t alignment) -> void* {
      return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
    };
    services_.free = [](void*, void* p) { std::free(p); };
    services_.log = [](void* self, loom_log_level_t, const char* m) {
      auto* r = static_cast<Recorder*>(self);
      std::lock_guard<std::mutex> lock(r->mutex_);
      r->logs_.emplace_back(m);
    };
    services_.trace = [](void* self, const loom_trace_event_t* e) {
      auto* r = static_cast<Recorder*>(self);
      std::lock_guard<std::mutex> lock(r->mutex_);
      r->events_.push_back({e->phase, e->category, e->name, e->timestamp_ns});
    };
  }
  const loom_host_services_t* services() const { return &services_; }
  std::vector<std::string> logs() {
    std::lock_guard<std::mutex> lock(mutex_);
    return logs_;
  }
  std::vector<TraceEvent> events() {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }

 private:
  loom_host_services_t services_{};
  std::mutex mutex_;
  std::vector<std::string> logs_;
  std::vector<TraceEvent> events_;
};

class Harness {
 public:
  Harness() {
    handle_ = dlopen(LOOM_FPGA_STUB_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) return;
    auto query = reinterpret_cast<loom_plugin_query_fn_t>(dlsym(handle_, LOOM_PLUGIN_ENTRY_POINT_NAME));
    loom_plugin_query_t q{};
    q.struct_size = LOOM_PLUGIN_QUERY_STRUCT_SIZE;
    q.host_abi_min = LOOM_ABI_VERSION(1, 0);
    q.host_abi_max = LOOM_ABI_CURRENT;
    q.host = recorder_.services();
    if (query != nullptr && query(&q) == LOOM_STATUS_OK) api_ = q.out_api;
  }
  ~Harness() {
    if (plugin_ != nullptr) api_->plugin_destroy(plugin_);
    if (handle_ != nullptr) dlclose(handle_);
  }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  const loom_plugin_api_t* api() const { return api_; }
  Recorder& recorder() { return recorder_; }
  loom_plugin_t* plugin() const { return plugin_; }

  // Creates the instance with KEY=VALUE options; "ok" or the error.
  std::string create(const std::map<std::string, std::string>& options = {}) {
    std::vector<loom_option_t> opts;
    for (const auto& [k, v] : options) opts.push_back({LOOM_OPTION_STRUCT_SIZE, k.c_str(), v.c_str()});
    std::vector<const loom_option_t*> ptrs;
    for (const auto& o : opts) ptrs.push_back(&o);
    loom_plugin_create_args_t args{};
    args.struct_size = LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
    args.host = recorder_.services();
    args.option_count = ptrs.size();
    args.options = ptrs.data();
    std::string s = take(api_, api_->plugin_create(&args));
    plugin_ = args.out_plugin;
    return s;
  }
  void destroy_plugin() {
    api_->plugin_destroy(plugin_);
    plugin_ = nullptr;
  }

  loom_device_t* device(size_t i) {
    loom_device_t* d = nullptr;
    EXPECT_EQ(take(api_, api_->device_get(plugin_, i, &d)), "ok");
    return d;
  }

  std::string allocate(loom_device_t* d, uint64_t size, loom_buffer_t** out, uint32_t flags = 0) {
    loom_buffer_allocate_args_t a{};
    a.struct_size = LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE;
    a.device = d;
    a.size = size;
    a.flags = flags;
    std::string s = take(api_, api_->buffer_allocate(&a));
    *out = a.out_buffer;
    return s;
  }
  std::string upload(loom_buffer_t* b, const void* src, uint64_t size, uint64_t offset = 0) {
    loom_buffer_copy_args_t a{LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE, b, offset, const_cast<void*>(src), size};
    return take(api_, api_->buffer_copy_from_host(&a));
  }
  std::string download(loom_buffer_t* b, void* dst, uint64_t size, uint64_t offset = 0) {
    loom_buffer_copy_args_t a{LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE, b, offset, dst, size};
    return take(api_, api_->buffer_copy_to_host(&a));
  }

  std::string load(loom_device_t* d, const std::vector<std::byte>& blob, loom_executable_t** out) {
    loom_executable_load_args_t a{};
    a.struct_size = LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE;
    a.device = d;
    a.loader_key = "fpga-stub";
    a.format_version = kFormatVersion;
    a.blob = blob.data();
    a.blob_size = blob.size();
    std::string s = take(api_, api_->executable_load(&a));
    *out = a.out_executable;
    return s;
  }
  std::string check(loom_device_t* d, const void* blob, size_t size, const char* key = "fpga-stub") {
    loom_executable_check_args_t a{};
    a.struct_size = LOOM_EXECUTABLE_CHECK_ARGS_STRUCT_SIZE;
    a.device = d;
    a.loader_key = key;
    a.blob = blob;
    a.blob_size = size;
    return take(api_, api_->executable_check(&a));
  }

 private:
  Recorder recorder_;
  void* handle_ = nullptr;
  const loom_plugin_api_t* api_ = nullptr;
  loom_plugin_t* plugin_ = nullptr;
};

// A tensor on the device: its descriptor bound to a buffer of exactly its size.
struct DeviceTensor {
  std::vector<int64_t> shape;
  loom_dtype_t dtype = LOOM_DTYPE_F32;
  loom_buffer_t* buffer = nullptr;
  loom_tensor_t desc{};
  uint64_t bytes() const { return desc.byte_size; }
  // The descriptor, its shape pointing at this object's `shape`.
  const loom_tensor_t* d() {
    desc.shape = shape.data();
    return &desc;
  }
};

inline DeviceTensor make_tensor(Harness& h, loom_device_t* d, loom_dtype_t dtype, std::vector<int64_t> shape) {
  DeviceTensor t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  uint64_t n = 1;
  for (int64_t s : t.shape) n *= static_cast<uint64_t>(s);
  const uint64_t bytes = n * dtype_size(dtype);
  EXPECT_EQ(h.allocate(d, bytes, &t.buffer), "ok");
  t.desc.struct_size = LOOM_TENSOR_STRUCT_SIZE;
  t.desc.dtype = dtype;
  t.desc.rank = static_cast<uint32_t>(t.shape.size());
  t.desc.buffer = t.buffer;
  t.desc.byte_size = bytes;
  return t;
}

// A one-node bitstream: `inputs` (dtype, shape) are I/O inputs, then one
// output; consts are appended to the weights and named by index after the
// inputs.
struct ProgramBuilder {
  Bitstream bs;
  uint32_t input(loom_dtype_t dtype, std::vector<int64_t> shape) {
    const uint32_t t = add(dtype, std::move(shape), Storage::kIo);
    bs.inputs.push_back(t);
    return t;
  }
  template <typename T>
  uint32_t constant(loom_dtype_t dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
    const uint32_t t = add(dtype, std::move(shape), Storage::kConst);
    bs.tensors[t].offset = bs.weights.size();
    const auto* p = reinterpret_cast<const std::byte*>(values.data());
    bs.weights.insert(bs.weights.end(), p, p + values.size() * sizeof(T));
    bs.weights.resize((bs.weights.size() + 63) / 64 * 64);
    return t;
  }
  uint32_t scratch(loom_dtype_t dtype, std::vector<int64_t> shape) {
    const uint32_t t = add(dtype, std::move(shape), Storage::kScratch);
    bs.tensors[t].offset = bs.activation_bytes;
    bs.activation_bytes += (bs.tensors[t].bytes + 63) / 64 * 64;
    return t;
  }
  uint32_t output(loom_dtype_t dtype, std::vector<int64_t> shape) {
    const uint32_t t = add(dtype, std::move(shape), Storage::kIo);
    bs.outputs.push_back(t);
    return t;
  }
  void node(Op op, std::vector<int32_t> inputs, uint32_t out, std::vector<int64_t> params = {}) {
    bs.nodes.push_back({op, std::move(inputs), static_cast<int32_t>(out), std::move(params)});
  }
  uint32_t add(loom_dtype_t dtype, std::vector<int64_t> shape, Storage storage) {
    BsTensor t;
    t.dtype = dtype;
    t.storage = storage;
    t.bytes = element_count(shape) * dtype_size(dtype);
    t.shape = std::move(shape);
    bs.tensors.push_back(std::move(t));
    return static_cast<uint32_t>(bs.tensors.size() - 1);
  }
};

// Window parameters (WindowParam order) for a conv or pool.
inline std::vector<int64_t> window(int64_t group, int64_t k, int64_t stride, int64_t pad, int64_t include_pad = 0,
                                   int64_t ceil = 0, int64_t dilation = 1) {
  return {group, k, k, stride, stride, dilation, dilation, pad, pad, pad, pad, include_pad, ceil};
}

}  // namespace loom::fpga_stub::testing
