// What the fake plugin's sources share: its variants and options, and the
// classes that loom/plugin.hpp turns into the C function table (Plugin,
// Device, Executable, Buffer, Fence). The deliberately malformed ABI
// behaviour that plugin.hpp cannot express lives in fake_abi_variants.cpp
// (see fake_raw.h). Included only by the fake's sources; FAKE_NAME and
// FAKE_VARIANT come from the build (see CMakeLists.txt).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fake_async.hpp"
#include "fake_variant.hpp"
#include "loom/plugin.h"
#include "loom/plugin.hpp"

namespace fake {

enum class Op { kAdd, kCopy };

// The first field of every object handed to the host, so that a handle of
// the wrong kind (or of another plugin) is refused by name.
constexpr uint32_t kExecutableMagic = 0x45584531;
constexpr uint32_t kBufferMagic = 0x42554631;
constexpr uint32_t kFenceMagic = 0x46454e31;
constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 32;

using fake_async::FenceState;
using loom::sdk::Status;

struct Config {
  size_t devices = 1;
  uint64_t claimed_devices = 0;  // device_count's answer when set (the devices are not made)
  bool fail_create = false;
  bool fail_execute = false;
  std::string misbehave;  // fake.misbehave
  bool async = false;
  uint64_t async_delay_ms = 0;
  fake_async::Order async_order = fake_async::Order::kFifo;
  uint64_t async_hold = 0;
  bool separate_memory = false;
  bool import = false;      // CAP_HOST_POINTER_IMPORT: buffer_import_host of page-aligned memory
  uint64_t max_fences = 0;  // fence_create fails after this many (0: no limit)
  bool null_uri = false;
  std::set<std::string> compile_ops;
  std::string compile_fault;  // "", fail, null_blob, bad_key, bad_version, new_blob
  std::vector<loom_device_kind_t> kinds;  // per device, cycled; empty: virtual
  std::set<size_t> fail_load;             // devices whose executable_load runs out of memory
  std::set<size_t> lose;                  // devices whose executions fail with DEVICE_LOST
  std::set<size_t> hang;                  // devices whose asynchronous executions never finish
  std::vector<uint64_t> estimate_ns;      // executable_estimate's answer per device (cycled)
};

// A status whose message starts with the plugin's name, as all the fake's
// own errors do ("fake: unknown fake blob (4 bytes)").
inline Status error(loom_status_code_t code, const std::string& message) {
  return Status(code, std::string(fake::name()) + ": " + message);
}
inline Status invalid(const std::string& message) {
  return error(LOOM_STATUS_INVALID_ARGUMENT, message);
}

class Plugin;
class Device;
class Executable;
class Buffer;
class Fence;

struct Impl {
  using Plugin = fake::Plugin;
  using Device = fake::Device;
  using Executable = fake::Executable;
  using Buffer = fake::Buffer;
  using Fence = fake::Fence;
  static const loom_plugin_info_t* info();
  static Status create(const loom::sdk::CreateContext& ctx, std::unique_ptr<Plugin>* out);
};

class Executable {
 public:
  Executable(Device* device, Op op) : device_(device), op_(op) {}
  ~Executable();
  Status execute(const loom::sdk::ExecuteCallT<Fence>& call);

  const uint32_t magic = kExecutableMagic;

 private:
  Device* device_;
  Op op_;
};

class Buffer {
 public:
  // Owned memory of `size` bytes, or (imported != nullptr) the host's memory.
  Buffer(Device* device, uint64_t size, std::byte* imported);
  ~Buffer();
  Status map(void** out);
  void unmap() {}
  Status copy_from_host(uint64_t offset, const void* src, uint64_t size);
  Status copy_to_host(uint64_t offset, void* dst, uint64_t size);

  std::byte* data() { return imported_ != nullptr ? imported_ : bytes_.data(); }
  uint64_t size() const { return imported_ != nullptr ? imported_size_ : bytes_.size(); }
  Device* device() const { return device_; }

  const uint32_t magic = kBufferMagic;

 private:
  Status check_range(uint64_t offset, uint64_t size);

  Device* device_;
  std::vector<std::byte> bytes_;  // the fake's "device memory"
  // buffer_import_host (fake.import=1): the host's memory instead of bytes_.
  std::byte* imported_ = nullptr;
  uint64_t imported_size_ = 0;
};

class Fence {
 public:
  Fence(Device* device, fake_async::Worker* worker);
  ~Fence();
  Status signal();
  Status wait(uint64_t timeout_ns);
  Status query(bool* out);

  // ABI 1.1: a fence that signaled an earlier execution is re-armed; the
  // pending work keeps the state it was given.
  std::shared_ptr<FenceState> rearm();
  std::shared_ptr<FenceState> state() const { return state_; }

  const uint32_t magic = kFenceMagic;

 private:
  Device* device_;
  std::shared_ptr<FenceState> state_;  // shared with pending work
};

class Device {
 public:
  Device(Plugin* plugin, size_t index, uint64_t capabilities);
  void info(loom_device_info_t* full);
  Status check_executable(const loom::sdk::Blob& blob);
  Status load_executable(const loom::sdk::Blob& blob, const loom::sdk::Options& specs,
                         std::unique_ptr<Executable>* out);
  Status allocate_buffer(uint64_t size, uint64_t alignment, uint32_t flags,
                         std::unique_ptr<Buffer>* out);
  Status import_host(void* pointer, uint64_t size, std::unique_ptr<Buffer>* out);
  Status create_fence(std::unique_ptr<Fence>* out);
  Status estimate_executable(const loom::sdk::Blob& blob, uint64_t* out_time_ns);

  Plugin* plugin() const { return plugin_; }
  size_t index() const { return index_; }
  const std::string& uri() const { return uri_; }
  uint64_t capabilities() const { return capabilities_; }

 private:
  // What executable_check, _load and _estimate share; sets *op.
  Status check_blob(const loom::sdk::Blob& blob, Op* op) const;

  Plugin* plugin_;
  size_t index_;
  std::string uri_;
  std::string name_;
  uint64_t capabilities_;
};

class Plugin {
 public:
  Plugin(const loom_host_services_t* host, Config config) : host_(host), config_(std::move(config)) {}
  // Finishes queued executions, logs the objects the host leaked ("leaked 2
  // buffers") and frees them.
  ~Plugin();

  Status check_available();
  size_t device_count();
  Device* device(size_t index);
  Status compile_supported(const loom::sdk::GraphView& graph, loom::sdk::Claims* claims);
  Status compile(const loom::sdk::GraphView& graph, const loom::sdk::Options& options,
                 loom::sdk::CompiledBlob* out);

  const Config& config() const { return config_; }
  const loom_host_services_t* host() const { return host_; }
  fake_async::Worker* worker() const { return worker_.get(); }
  std::vector<std::byte>& shared_scratch() { return shared_scratch_; }
  void log(loom_log_level_t level, const std::string& message) const {
    loom::sdk::log(host_, level, message.c_str());
  }

  // Live objects, to report and free what the host leaked.
  void track(Executable* e) { add(&executables_, e); }
  void track(Buffer* b) { add(&buffers_, b); }
  void track(Fence* f) { add(&fences_, f); }
  void untrack(Executable* e) { remove(&executables_, e); }
  void untrack(Buffer* b) { remove(&buffers_, b); }
  void untrack(Fence* f) { remove(&fences_, f); }
  // Counts a fence against fake.max_fences.
  Status count_fence();
  // fake.compile_fault=new_blob: keeps a blob made with new[] until destroy.
  void keep_blob(std::unique_ptr<char[]> blob);

 private:
  friend struct Impl;
  template <typename T>
  void add(std::set<T*>* set, T* object) {
    std::lock_guard<std::mutex> lock(objects_mutex_);
    set->insert(object);
  }
  template <typename T>
  void remove(std::set<T*>* set, T* object) {
    std::lock_guard<std::mutex> lock(objects_mutex_);
    set->erase(object);
  }

  const loom_host_services_t* host_;
  Config config_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::mutex objects_mutex_;
  std::set<Executable*> executables_;
  std::set<Buffer*> buffers_;
  std::set<Fence*> fences_;
  uint64_t fences_created_ = 0;                     // under objects_mutex_
  std::vector<std::unique_ptr<char[]>> own_blobs_;  // under objects_mutex_
  // Defect::kRace: one scratch area for every execution, unguarded.
  std::vector<std::byte> shared_scratch_;
  // Completes asynchronous executions (fake.async=1); null otherwise.
  std::unique_ptr<fake_async::Worker> worker_;
};

}  // namespace fake
