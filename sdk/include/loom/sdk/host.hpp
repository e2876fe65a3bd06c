// The host's services seen from a plugin: logging, trace events, memory
// from the host's allocator, and what plugin_create hands to Impl::create.
//
// Part of the header-only C++17 plugin SDK (include loom/plugin.hpp).
// The loom_host_services_t a plugin receives stays valid until its library
// is unloaded, and every service in it is thread-safe, so all functions here
// may be called from any thread at any time.
#ifndef LOOM_SDK_HOST_HPP_
#define LOOM_SDK_HOST_HPP_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "loom/plugin.h"
#include "loom/sdk/options.hpp"
#include "loom/sdk/status.hpp"

namespace loom::sdk {

// Sends one trace event through the host's trace service, when `host` offers
// one (NULL-tolerant; the host drops it unless a trace is being recorded).
// `category` is a device URI to put the event on that device's track;
// `timestamp_ns` is on the steady clock, 0 to let the host stamp it.
inline void send_trace(const loom_host_services_t* host, loom_trace_phase_t phase,
                       const char* category, const char* name, uint64_t timestamp_ns) {
  if (host == nullptr || !LOOM_STRUCT_HAS(loom_host_services_t, host->struct_size, trace) ||
      host->trace == nullptr) {
    return;
  }
  loom_trace_event_t e{};
  e.struct_size = LOOM_TRACE_EVENT_STRUCT_SIZE;
  e.phase = phase;
  e.category = category;
  e.name = name;
  e.timestamp_ns = timestamp_ns;
  host->trace(host->user_data, &e);
}

// Logs a line through the host's log service, if any (`message` is borrowed).
inline void log(const loom_host_services_t* host, loom_log_level_t level, const char* message) {
  if (host != nullptr && LOOM_STRUCT_HAS(loom_host_services_t, host->struct_size, log) &&
      host->log != nullptr && message != nullptr) {
    host->log(host->user_data, level, message);
  }
}

// Copies `size` bytes into memory from the host's `allocate` service, as the
// ABI requires for everything the host frees (the compile blob): the host
// releases it with its `free`, never with delete[] or the plugin's free().
// `*out` is the new memory, owned by whoever the ABI hands it to; NULL on
// error (FAILED_PRECONDITION when the host offers no allocator,
// RESOURCE_EXHAUSTED when it returns NULL). `alignment` is a power of two.
// The compile thunk calls this for you; a plugin rarely needs it directly.
inline Status copy_to_host_memory(const loom_host_services_t* host, const void* bytes, size_t size,
                                  size_t alignment, void** out) {
  *out = nullptr;
  if (host == nullptr || !LOOM_STRUCT_HAS(loom_host_services_t, host->struct_size, free) ||
      host->allocate == nullptr || host->free == nullptr) {
    return failed_precondition("the host offers no allocate service for the blob");
  }
  void* p = host->allocate(host->user_data, size, alignment);
  if (p == nullptr) {
    return resource_exhausted("the host could not allocate " + std::to_string(size) +
                              " bytes for the blob");
  }
  if (size != 0) std::memcpy(p, bytes, size);
  *out = p;
  return Status();
}

// What plugin_create hands to Impl::create.
struct CreateContext {
  const loom_host_services_t* host = nullptr;  // may be NULL; valid until unload
  Options options;                             // borrowed for the create call

  void log(loom_log_level_t level, const char* message) const { sdk::log(host, level, message); }
};

}  // namespace loom::sdk

#endif  // LOOM_SDK_HOST_HPP_
