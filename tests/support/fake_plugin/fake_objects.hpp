// What the fake plugin's sources share: its variants and constants, the
// objects behind the ABI's opaque handles, status helpers, and the buffer
// and fence entries (fake_memory.cpp). Included only by the fake's sources;
// FAKE_NAME and FAKE_VARIANT come from the build (see CMakeLists.txt).
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "fake_async.hpp"
#include "loom/plugin.h"

#ifndef FAKE_NAME
#error "FAKE_NAME must name the plugin"
#endif
#ifndef FAKE_VARIANT
#define FAKE_VARIANT kNormal
#endif

namespace fake {

enum class Variant {
  kNormal,
  kAbi2,         // speaks only ABI 2.x
  kNoEntry,      // does not export loom_plugin_query
  kSmall,        // function table smaller than ABI 1.0
  kLarge,        // every struct it fills is larger than ABI 1.0
  kRefuses,      // query refuses with a reason
  kUnavailable,  // plugin_check_available refuses
  kNullEntry,    // a required entry (fence_wait) is NULL
  kBadUri,       // device URIs of another plugin
  kBadVersion,   // answers an ABI version outside the host's range
  kNullApi,      // answers OK without a function table
};
constexpr Variant kVariant = Variant::FAKE_VARIANT;

// The deliberately broken builds the conformance suite must catch, one
// defect each (FAKE_DEFECT; they are otherwise the normal build).
enum class Defect {
  kNone,
  kStructSize,     // refuses structs larger than its own (a newer host's)
  kExecuteCrash,   // execute dereferences NULL
  kLeak,           // plugin_create leaks 256 KiB
  kCorruptBlobs,   // loads any blob it does not know as a copy
  kWrongResults,   // Add subtracts
  kRace,           // execute computes in a scratch area shared by all calls
  kFenceNeverSignals,  // async devices whose executions never signal
};
#ifndef FAKE_DEFECT
#define FAKE_DEFECT kNone
#endif
constexpr Defect kDefect = Defect::FAKE_DEFECT;
constexpr const char* kName = FAKE_NAME;
// Each build serves a loader key equal to its name.
constexpr const char* kLoaderKey = FAKE_NAME;

enum class Op { kAdd, kCopy };

constexpr uint32_t kExecutableMagic = 0x45584531;
constexpr uint32_t kBufferMagic = 0x42554631;
constexpr uint32_t kFenceMagic = 0x46454e31;
constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 32;

using fake_async::FenceState;

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
  bool import = false;
  uint64_t max_fences = 0;  // fence_create fails after this many (0: no limit)  // CAP_HOST_POINTER_IMPORT: buffer_import_host of page-aligned memory
  bool null_uri = false;
  std::set<std::string> compile_ops;
  std::string compile_fault;  // "", fail, null_blob, bad_key, bad_version
  std::vector<loom_device_kind_t> kinds;  // per device, cycled; empty: virtual
  std::set<size_t> fail_load;             // devices whose executable_load runs out of memory
  std::set<size_t> lose;                  // devices whose executions fail with DEVICE_LOST
  std::set<size_t> hang;                  // devices whose asynchronous executions never finish
  std::vector<uint64_t> estimate_ns;      // executable_estimate's answer per device (cycled)
};

}  // namespace fake

struct loom_status_t {
  loom_status_code_t code;
  std::string message;
};

struct loom_device_t {
  loom_plugin_t* plugin;
  size_t index;
  std::string uri;
  std::string name;
  uint64_t capabilities;
};

struct loom_executable_t {
  uint32_t magic = fake::kExecutableMagic;
  loom_device_t* device;
  fake::Op op;
};

struct loom_buffer_t {
  uint32_t magic = fake::kBufferMagic;
  loom_device_t* device;
  std::vector<std::byte> bytes;  // the fake's "device memory"
  // buffer_import_host (fake.import=1): the host's memory instead of `bytes`.
  std::byte* imported = nullptr;
  uint64_t imported_size = 0;
  std::byte* data() { return imported != nullptr ? imported : bytes.data(); }
  uint64_t size() const { return imported != nullptr ? imported_size : bytes.size(); }
};

struct loom_fence_t {
  uint32_t magic = fake::kFenceMagic;
  loom_device_t* device;
  std::shared_ptr<fake_async::FenceState> state;  // shared with pending work
};

struct loom_plugin_t {
  const loom_host_services_t* host = nullptr;
  fake::Config config;
  std::vector<std::unique_ptr<loom_device_t>> devices;

  // Live objects, to report and free what the host leaked.
  std::mutex objects_mutex;
  std::set<loom_executable_t*> executables;
  std::set<loom_buffer_t*> buffers;
  std::set<loom_fence_t*> fences;
  uint64_t fences_created = 0;  // under objects_mutex
  // fake.compile_fault=new_blob: blobs made with new[] (under objects_mutex).
  std::vector<std::unique_ptr<char[]>> own_blobs;

  // Defect::kRace: one scratch area for every execution, unguarded.
  std::vector<std::byte> shared_scratch;

  // Completes asynchronous executions (fake.async=1); null otherwise.
  std::unique_ptr<fake_async::Worker> worker;

  void log(loom_log_level_t level, const std::string& message) const {
    if (host != nullptr && LOOM_STRUCT_HAS(loom_host_services_t, host->struct_size, log) &&
        host->log != nullptr) {
      host->log(host->user_data, level, message.c_str());
    }
  }

  template <typename T>
  void track(std::set<T*>& set, T* object) {
    std::lock_guard<std::mutex> lock(objects_mutex);
    set.insert(object);
  }
  template <typename T>
  void untrack_and_delete(std::set<T*>& set, T* object) {
    {
      std::lock_guard<std::mutex> lock(objects_mutex);
      set.erase(object);
    }
    delete object;
  }
};

namespace fake {

inline loom_status_t* make_status(loom_status_code_t code, const std::string& message) {
  return new (std::nothrow) loom_status_t{code, std::string(kName) + ": " + message};
}
inline loom_status_t* invalid(const std::string& message) {
  return make_status(LOOM_STATUS_INVALID_ARGUMENT, message);
}

// Runs an entry body, turning an escaping C++ exception into a status: no
// exception may cross the C ABI.
template <typename Body>
loom_status_t* guarded(Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return make_status(LOOM_STATUS_INTERNAL, std::string("exception: ") + e.what());
  } catch (...) {
    return make_status(LOOM_STATUS_INTERNAL, "unknown exception");
  }
}

// Buffer and fence entries of the function table (fake_memory.cpp).
loom_status_t* buffer_allocate(loom_buffer_allocate_args_t* args);
void buffer_free(loom_buffer_t* buffer);
loom_status_t* buffer_map(loom_buffer_t* buffer, void** out_pointer);
void buffer_unmap(loom_buffer_t* buffer);
loom_status_t* buffer_copy_from_host(loom_buffer_copy_args_t* args);
loom_status_t* buffer_copy_to_host(loom_buffer_copy_args_t* args);
loom_status_t* buffer_import_host(loom_buffer_import_args_t* args);
loom_status_t* fence_create(loom_device_t* device, loom_fence_t** out_fence);
void fence_destroy(loom_fence_t* fence);
loom_status_t* fence_signal(loom_fence_t* fence);
loom_status_t* fence_wait(loom_fence_t* fence, uint64_t timeout_ns);
loom_status_t* fence_query(loom_fence_t* fence, bool* out_signaled);

}  // namespace fake
