// The function table and the entry point: make_api builds the table of one
// ABI version from the thunks, negotiate_abi picks the version, and
// LOOM_SDK_DEFINE_ENTRY writes the plugin's one exported symbol.
//
// Part of the header-only C++17 plugin SDK (include loom/plugin.hpp).
// Everything here is thread-safe: the tables are function-local static
// consts, built once.
#ifndef LOOM_SDK_ENTRY_HPP_
#define LOOM_SDK_ENTRY_HPP_

#include <cstdint>
#include <cstdio>
#include <string>

#include "loom/plugin.h"
#include "loom/sdk/status.hpp"
#include "loom/sdk/thunks.hpp"

namespace loom::sdk {

// The ABI versions a plugin built with this header speaks by default.
inline constexpr uint32_t kDefaultAbiMin = LOOM_ABI_VERSION(1, 0);
inline constexpr uint32_t kDefaultAbiMax = LOOM_ABI_CURRENT;

// The function table for `Impl` at ABI version `kVersion` (the version
// loom_plugin_query chose), built once (function-local static const): its
// abi_version is kVersion and its struct_size that version's size, as
// plugin.h's versioning rule asks.
template <typename Impl, uint32_t kVersion = kDefaultAbiMax>
const loom_plugin_api_t* make_api() {
  using T = detail::Thunks<Impl>;
  static_assert(kVersion >= LOOM_ABI_VERSION(1, 0) && kVersion <= LOOM_ABI_CURRENT,
                "make_api: a version this header does not describe");
  static const loom_plugin_api_t kApi = [] {
    loom_plugin_api_t api{};
    api.struct_size = kVersion >= LOOM_ABI_VERSION(1, 2)   ? LOOM_PLUGIN_API_V1_2_SIZE
                      : kVersion >= LOOM_ABI_VERSION(1, 1) ? LOOM_PLUGIN_API_V1_1_SIZE
                                                           : LOOM_PLUGIN_API_V1_0_SIZE;
    api.abi_version = kVersion;
    api.status_code = &T::status_code;
    api.status_message = &T::status_message;
    api.status_destroy = &T::status_destroy;
    api.plugin_info = &T::plugin_info;
    api.plugin_create = &T::plugin_create;
    api.plugin_destroy = &T::plugin_destroy;
    api.plugin_check_available = &T::plugin_check_available;
    api.device_count = &T::device_count;
    api.device_get = &T::device_get;
    api.device_info = &T::device_info;
    api.executable_check = &T::executable_check;
    api.executable_load = &T::executable_load;
    api.executable_destroy = &T::executable_destroy;
    api.execute = &T::execute;
    api.buffer_allocate = &T::buffer_allocate;
    api.buffer_free = &T::buffer_free;
    api.buffer_map = &T::buffer_map;
    api.buffer_unmap = &T::buffer_unmap;
    api.buffer_copy_from_host = &T::buffer_copy_from_host;
    api.buffer_copy_to_host = &T::buffer_copy_to_host;
    api.buffer_import_host = T::has_import() ? &T::buffer_import_host : nullptr;
    api.fence_create = &T::fence_create;
    api.fence_destroy = &T::fence_destroy;
    api.fence_signal = &T::fence_signal;
    api.fence_wait = &T::fence_wait;
    api.fence_query = &T::fence_query;
    // Set when Plugin has the compile members (loom/sdk/compile.hpp).
    if constexpr (T::has_compile()) {
      api.compile_supported = &T::compile_supported;
      api.compile = &T::compile;
    }
    if constexpr (kVersion >= LOOM_ABI_VERSION(1, 1)) {
      api.executable_estimate = T::has_estimate() ? &T::executable_estimate : nullptr;
    }
    return api;
  }();
  return &kApi;
}

// make_api for a version chosen at run time (one of those this header
// describes, as negotiate_abi answers).
template <typename Impl>
const loom_plugin_api_t* make_api_for(uint32_t version) {
  if (version >= LOOM_ABI_VERSION(1, 2)) return make_api<Impl, LOOM_ABI_VERSION(1, 2)>();
  return version >= LOOM_ABI_VERSION(1, 1) ? make_api<Impl, LOOM_ABI_VERSION(1, 1)>()
                                           : make_api<Impl, LOOM_ABI_VERSION(1, 0)>();
}

// Picks the newest version inside both ranges. Both ranges are closed and
// compared as packed LOOM_ABI_VERSION values, so a host speaking 1.0-1.3 and
// a plugin speaking 1.0-1.1 agree on 1.1. Returns false with `*reason` when
// the ranges do not meet or the host's range is malformed.
inline bool negotiate_abi(uint32_t host_min, uint32_t host_max, uint32_t plugin_min,
                          uint32_t plugin_max, uint32_t* out_version, std::string* reason) {
  using detail::version_string;
  if (host_min > host_max) {
    *reason = "the host's ABI range " + version_string(host_min) + "-" + version_string(host_max) +
              " is empty";
    return false;
  }
  const uint32_t lo = host_min > plugin_min ? host_min : plugin_min;
  const uint32_t hi = host_max < plugin_max ? host_max : plugin_max;
  if (lo > hi) {
    *reason = "the host speaks ABI " + version_string(host_min) + "-" + version_string(host_max) +
              ", the plugin speaks " + version_string(plugin_min) + "-" +
              version_string(plugin_max);
    return false;
  }
  *out_version = hi;
  return true;
}

// The body of loom_plugin_query; see LOOM_SDK_DEFINE_ENTRY.
template <typename Impl, uint32_t kAbiMin = kDefaultAbiMin, uint32_t kAbiMax = kDefaultAbiMax>
loom_status_code_t query(loom_plugin_query_t* q) noexcept {
  if (q == nullptr) return LOOM_STATUS_INVALID_ARGUMENT;
  // The reason buffer lies inside the 1.0 struct; too small a struct gets
  // only the code.
  if (q->struct_size < LOOM_PLUGIN_QUERY_V1_0_SIZE) return LOOM_STATUS_INVALID_ARGUMENT;
  q->out_abi_version = 0;
  q->out_api = nullptr;
  auto refuse = [&](loom_status_code_t code, const std::string& why) {
    if (q->reason != nullptr && q->reason_capacity > 0) {
      std::snprintf(q->reason, q->reason_capacity, "%s", why.c_str());
    }
    return code;
  };
  try {
    uint32_t version = 0;
    std::string reason;
    if (!negotiate_abi(q->host_abi_min, q->host_abi_max, kAbiMin, kAbiMax, &version, &reason)) {
      return refuse(LOOM_STATUS_INCOMPATIBLE, reason);
    }
    q->out_abi_version = version;
    q->out_api = make_api_for<Impl>(version);
    return LOOM_STATUS_OK;
  } catch (...) {
    return refuse(LOOM_STATUS_INTERNAL, "unexpected exception during the ABI query");
  }
}

}  // namespace loom::sdk

// Defines the plugin's one exported symbol for `Impl`, speaking the ABI
// versions this header describes.
#define LOOM_SDK_DEFINE_ENTRY(Impl)                                                  \
  extern "C" LOOM_PLUGIN_EXPORT loom_status_code_t loom_plugin_query(               \
      loom_plugin_query_t* query) {                                                 \
    return ::loom::sdk::query<Impl>(query);                                         \
  }

// The same with an explicit ABI range (LOOM_ABI_VERSION values).
#define LOOM_SDK_DEFINE_ENTRY_RANGE(Impl, abi_min, abi_max)                          \
  extern "C" LOOM_PLUGIN_EXPORT loom_status_code_t loom_plugin_query(               \
      loom_plugin_query_t* query) {                                                 \
    return ::loom::sdk::query<Impl, (abi_min), (abi_max)>(query);                   \
  }

#endif  // LOOM_SDK_ENTRY_HPP_
