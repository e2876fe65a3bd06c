// Header-only C++17 helper for writing a Loom plugin on top of plugin.h.
//
// It turns a handful of C++ classes into the C function table, so that a
// plugin is its logic plus ~50 lines of glue. What it takes care of:
//  - status objects: loom::sdk::Status (code + message) becomes a
//    loom_status_t* at the boundary, and status_code/message/destroy exist;
//  - every incoming struct is checked: non-NULL, struct_size at least the
//    1.0 size (larger, newer structs are accepted; only known fields are read);
//  - exceptions never cross the boundary: they become LOOM_STATUS_INTERNAL
//    (or are swallowed by entries that return nothing, such as destroy);
//  - device_info writes only the fields that fit the host's struct;
//  - LOOM_SDK_DEFINE_ENTRY writes loom_plugin_query with ABI negotiation:
//    the highest version both sides speak, or a refusal with a reason.
// It uses no global mutable state: the function table is a function-local
// static const.
//
// The plugin supplies one class `Impl` with these members (any may throw):
//
//   struct MyPlugin {
//     class Plugin;  class Device;  class Executable;  class Buffer;  class Fence;
//     static const loom_plugin_info_t* info();
//     static loom::sdk::Status create(const loom::sdk::CreateContext& ctx,
//                                     std::unique_ptr<Plugin>* out);
//   };
//   Plugin:     Status check_available();  size_t device_count();
//               Device* device(size_t index);  // nullptr when out of range
//   Device:     void info(loom_device_info_t* full);  // fill every field but struct_size
//               Status check_executable(const Blob& blob);
//               Status load_executable(const Blob& blob, const Options& specs,
//                                      std::unique_ptr<Executable>* out);
//               Status allocate_buffer(uint64_t size, uint64_t alignment, uint32_t flags,
//                                      std::unique_ptr<Buffer>* out);
//               Status create_fence(std::unique_ptr<Fence>* out);
//   Executable: Status execute(const loom::sdk::ExecuteCallT<Fence>& call);
//   Buffer:     Status map(void** out);  void unmap();
//               Status copy_from_host(uint64_t offset, const void* src, uint64_t size);
//               Status copy_to_host(uint64_t offset, void* dst, uint64_t size);
//   Fence:      Status signal();  Status wait(uint64_t timeout_ns);  Status query(bool* out);
//
// Optional members, detected at compile time (the entry is NULL without them):
//   Device:     Status import_host(void* pointer, uint64_t size,
//                                  std::unique_ptr<Buffer>* out);   // buffer_import_host
//               Status estimate_executable(const Blob& blob,
//                                          uint64_t* out_time_ns);  // ABI 1.1
//
// and then, in one source file:
//
//   LOOM_SDK_DEFINE_ENTRY(MyPlugin)
//
// Handles given to the host are the Impl objects themselves (reinterpret_cast
// to the opaque C types); the thunks take ownership back on destroy.
// buffer_import_host and executable_estimate are set when Device has the
// optional member; compile_supported and compile are NULL (a plugin that
// compiles sets them in a copy of the table).
#ifndef LOOM_PLUGIN_HPP_
#define LOOM_PLUGIN_HPP_

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "loom/plugin.h"

// The status object behind loom_status_t* for plugins built with this
// helper. Each plugin library has its own copy (hidden visibility); the host
// only ever sees the opaque pointer and the plugin's own accessors.
struct loom_status_t {
  loom_status_code_t code;
  std::string message;
};

namespace loom::sdk {

// The ABI versions a plugin built with this header speaks by default.
inline constexpr uint32_t kDefaultAbiMin = LOOM_ABI_VERSION(1, 0);
inline constexpr uint32_t kDefaultAbiMax = LOOM_ABI_CURRENT;

// A code plus a message; the default is OK. Cheap to move.
class Status {
 public:
  Status() = default;
  Status(loom_status_code_t code, std::string message)
      : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == LOOM_STATUS_OK; }
  loom_status_code_t code() const { return code_; }
  const std::string& message() const { return message_; }

  // The C object to return across the ABI: NULL when OK, otherwise a new
  // loom_status_t the host releases with status_destroy. Never throws; on
  // allocation failure it returns a shared, never-freed out-of-memory status.
  loom_status_t* to_c() const noexcept;

 private:
  loom_status_code_t code_ = LOOM_STATUS_OK;
  std::string message_;
};

inline Status ok_status() { return Status(); }
inline Status invalid_argument(std::string m) { return {LOOM_STATUS_INVALID_ARGUMENT, std::move(m)}; }
inline Status not_found(std::string m) { return {LOOM_STATUS_NOT_FOUND, std::move(m)}; }
inline Status unimplemented(std::string m) { return {LOOM_STATUS_UNIMPLEMENTED, std::move(m)}; }
inline Status incompatible(std::string m) { return {LOOM_STATUS_INCOMPATIBLE, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {LOOM_STATUS_RESOURCE_EXHAUSTED, std::move(m)}; }
inline Status deadline_exceeded(std::string m) { return {LOOM_STATUS_DEADLINE_EXCEEDED, std::move(m)}; }
inline Status internal_error(std::string m) { return {LOOM_STATUS_INTERNAL, std::move(m)}; }
inline Status failed_precondition(std::string m) { return {LOOM_STATUS_FAILED_PRECONDITION, std::move(m)}; }
inline Status unavailable(std::string m) { return {LOOM_STATUS_UNAVAILABLE, std::move(m)}; }
inline Status out_of_range(std::string m) { return {LOOM_STATUS_OUT_OF_RANGE, std::move(m)}; }

// Returns from the enclosing function when `expr` (a loom::sdk::Status) is
// not OK.
#define LOOM_SDK_RETURN_IF_ERROR(expr)          \
  do {                                          \
    ::loom::sdk::Status loom_sdk_s_ = (expr);   \
    if (!loom_sdk_s_.ok()) return loom_sdk_s_;  \
  } while (0)

namespace detail {

// Returned when even the error object cannot be allocated. It is immutable
// and status_destroy recognizes and keeps it.
inline loom_status_t* out_of_memory_status() noexcept {
  static const loom_status_t kStatus{LOOM_STATUS_RESOURCE_EXHAUSTED,
                                     "out of memory while reporting an error"};
  return const_cast<loom_status_t*>(&kStatus);
}

inline loom_status_t* make_c_status(loom_status_code_t code, const char* message) noexcept {
  try {
    return new loom_status_t{code, message};
  } catch (...) {
    return out_of_memory_status();
  }
}

// "input 2: loom_tensor_t.struct_size is 16, the 1.0 size is 56".
inline Status check_size(const char* what, const char* type, size_t actual, size_t needed) {
  if (actual >= needed) return Status();
  return invalid_argument(std::string(what) + ": " + type + ".struct_size is " +
                          std::to_string(actual) + ", the 1.0 size is " + std::to_string(needed));
}

inline std::string version_string(uint32_t v) {
  return std::to_string(LOOM_ABI_VERSION_MAJOR_OF(v)) + "." +
         std::to_string(LOOM_ABI_VERSION_MINOR_OF(v));
}

}  // namespace detail

inline loom_status_t* Status::to_c() const noexcept {
  if (ok()) return nullptr;
  return detail::make_c_status(code_, message_.c_str());
}

// Key/value options (plugin options or compile specs), checked on entry.
class Options {
 public:
  Options() = default;
  Options(const loom_option_t* const* items, size_t count) : items_(items), count_(count) {}

  size_t size() const { return count_; }
  const loom_option_t& operator[](size_t i) const { return *items_[i]; }
  // The value of `key`, or nullptr when absent (the last entry wins).
  const char* find(const char* key) const {
    const char* value = nullptr;
    for (size_t i = 0; i < count_; ++i) {
      if (std::strcmp(items_[i]->key, key) == 0) value = items_[i]->value;
    }
    return value;
  }
  // Parses an unsigned decimal option; `fallback` when absent, an error when
  // the value is not a number in [0, max].
  Status get_uint(const char* key, uint64_t fallback, uint64_t max, uint64_t* out) const {
    const char* v = find(key);
    if (v == nullptr) {
      *out = fallback;
      return Status();
    }
    uint64_t r = 0;
    const char* p = v;
    if (*p == '\0') return invalid_argument(std::string("option ") + key + " is empty");
    for (; *p != '\0'; ++p) {
      const uint64_t digit = static_cast<uint64_t>(*p - '0');
      if (*p < '0' || *p > '9' || digit > max || r > (max - digit) / 10) {
        return invalid_argument(std::string("option ") + key + "=\"" + v +
                                "\" is not a whole number from 0 to " + std::to_string(max));
      }
      r = r * 10 + static_cast<uint64_t>(*p - '0');
    }
    *out = r;
    return Status();
  }

  // Every entry non-NULL, of at least the 1.0 size, with key and value set.
  static Status validate(const loom_option_t* const* items, size_t count, const char* what) {
    if (count != 0 && items == nullptr) {
      return invalid_argument(std::string(what) + ": " + std::to_string(count) +
                              " options but no array");
    }
    for (size_t i = 0; i < count; ++i) {
      const std::string where = std::string(what) + " " + std::to_string(i);
      if (items[i] == nullptr) return invalid_argument(where + " is NULL");
      LOOM_SDK_RETURN_IF_ERROR(detail::check_size(where.c_str(), "loom_option_t",
                                                  items[i]->struct_size, LOOM_OPTION_STRUCT_SIZE));
      if (items[i]->key == nullptr || items[i]->value == nullptr) {
        return invalid_argument(where + " has a NULL key or value");
      }
    }
    return Status();
  }

 private:
  const loom_option_t* const* items_ = nullptr;
  size_t count_ = 0;
};

// What plugin_create hands to Impl::create.
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

struct CreateContext {
  const loom_host_services_t* host = nullptr;  // may be NULL; valid until unload
  Options options;

  void log(loom_log_level_t level, const char* message) const { sdk::log(host, level, message); }
};

// A blob handed to executable_check / executable_load.
struct Blob {
  const char* loader_key = nullptr;  // never NULL
  uint32_t format_version = 0;       // 0 when the program did not record it
  const void* data = nullptr;
  size_t size = 0;
};

// One execute call, its structs already checked (non-NULL, 1.0 size, rank
// within LOOM_MAX_RANK, shape set when rank > 0).
template <typename FenceT>
struct ExecuteCallT {
  const loom_tensor_t* const* inputs = nullptr;
  size_t input_count = 0;
  const loom_tensor_t* const* outputs = nullptr;
  size_t output_count = 0;
  loom_fence_t* const* wait_fences = nullptr;
  size_t wait_fence_count = 0;
  FenceT* signal_fence = nullptr;  // may be NULL

  FenceT* wait_fence(size_t i) const { return reinterpret_cast<FenceT*>(wait_fences[i]); }
};

namespace detail {

inline Status check_tensors(const loom_tensor_t* const* tensors, size_t count, const char* what) {
  if (count != 0 && tensors == nullptr) {
    return invalid_argument("execute: " + std::to_string(count) + " " + what + "s but no array");
  }
  // The happy path builds no strings: execute runs per inference and must
  // not allocate.
  auto where = [&](size_t i) { return std::string("execute: ") + what + " " + std::to_string(i); };
  for (size_t i = 0; i < count; ++i) {
    const loom_tensor_t* t = tensors[i];
    if (t == nullptr) return invalid_argument(where(i) + " is NULL");
    if (t->struct_size < LOOM_TENSOR_STRUCT_SIZE) {
      LOOM_SDK_RETURN_IF_ERROR(check_size(where(i).c_str(), "loom_tensor_t", t->struct_size,
                                          LOOM_TENSOR_STRUCT_SIZE));
    }
    if (t->rank > LOOM_MAX_RANK) {
      return invalid_argument(where(i) + " has rank " + std::to_string(t->rank) +
                              ", the ABI allows " + std::to_string(LOOM_MAX_RANK));
    }
    if (t->rank != 0 && t->shape == nullptr) return invalid_argument(where(i) + " has no shape");
  }
  return Status();
}

// The thunks: one C entry per function-table slot. Each checks its
// arguments, calls the Impl and converts exceptions.
template <typename Impl>
struct Thunks {
  using Plugin = typename Impl::Plugin;
  using Device = typename Impl::Device;
  using Executable = typename Impl::Executable;
  using Buffer = typename Impl::Buffer;
  using Fence = typename Impl::Fence;

  template <typename Fn>
  static loom_status_t* guard(const char* entry, Fn&& fn) noexcept {
    try {
      return fn().to_c();
    } catch (const std::bad_alloc&) {
      return make_c_status(LOOM_STATUS_RESOURCE_EXHAUSTED,
                           (std::string(entry) + ": out of memory").c_str());
    } catch (const std::exception& e) {
      return make_c_status(LOOM_STATUS_INTERNAL,
                           (std::string(entry) + ": unexpected exception: " + e.what()).c_str());
    } catch (...) {
      return make_c_status(LOOM_STATUS_INTERNAL,
                           (std::string(entry) + ": unexpected exception").c_str());
    }
  }
  template <typename Fn>
  static void guard_void(Fn&& fn) noexcept {
    try {
      fn();
    } catch (...) {
      // Nowhere to report it: destroy/unmap entries return nothing.
    }
  }

  static loom_status_code_t status_code(const loom_status_t* s) {
    return s == nullptr ? LOOM_STATUS_OK : s->code;
  }
  static const char* status_message(const loom_status_t* s) {
    return s == nullptr ? "" : s->message.c_str();
  }
  static void status_destroy(loom_status_t* s) {
    if (s != out_of_memory_status()) delete s;
  }

  static const loom_plugin_info_t* plugin_info() {
    try {
      return Impl::info();
    } catch (...) {
      return nullptr;
    }
  }

  static loom_status_t* plugin_create(loom_plugin_create_args_t* args) {
    return guard("plugin_create", [&]() -> Status {
      if (args == nullptr) return invalid_argument("plugin_create: args is NULL");
      LOOM_SDK_RETURN_IF_ERROR(check_size("plugin_create", "loom_plugin_create_args_t",
                                          args->struct_size, LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE));
      args->out_plugin = nullptr;
      LOOM_SDK_RETURN_IF_ERROR(Options::validate(args->options, args->option_count, "option"));
      CreateContext ctx;
      ctx.host = args->host;
      ctx.options = Options(args->options, args->option_count);
      std::unique_ptr<Plugin> plugin;
      LOOM_SDK_RETURN_IF_ERROR(Impl::create(ctx, &plugin));
      if (!plugin) return internal_error("plugin_create: the plugin made no instance");
      args->out_plugin = reinterpret_cast<loom_plugin_t*>(plugin.release());
      return Status();
    });
  }
  static void plugin_destroy(loom_plugin_t* p) {
    guard_void([&] { delete reinterpret_cast<Plugin*>(p); });
  }
  static loom_status_t* plugin_check_available(loom_plugin_t* p) {
    return guard("plugin_check_available", [&]() -> Status {
      if (p == nullptr) return invalid_argument("plugin_check_available: plugin is NULL");
      return reinterpret_cast<Plugin*>(p)->check_available();
    });
  }

  static loom_status_t* device_count(loom_plugin_t* p, size_t* out_count) {
    return guard("device_count", [&]() -> Status {
      if (p == nullptr || out_count == nullptr) {
        return invalid_argument("device_count: plugin or out_count is NULL");
      }
      *out_count = reinterpret_cast<Plugin*>(p)->device_count();
      return Status();
    });
  }
  static loom_status_t* device_get(loom_plugin_t* p, size_t index, loom_device_t** out_device) {
    return guard("device_get", [&]() -> Status {
      if (p == nullptr || out_device == nullptr) {
        return invalid_argument("device_get: plugin or out_device is NULL");
      }
      *out_device = nullptr;
      Plugin* plugin = reinterpret_cast<Plugin*>(p);
      Device* d = plugin->device(index);
      if (d == nullptr) {
        return not_found("device_get: no device " + std::to_string(index) + " (the plugin has " +
                         std::to_string(plugin->device_count()) + ")");
      }
      *out_device = reinterpret_cast<loom_device_t*>(d);
      return Status();
    });
  }
  static loom_status_t* device_info(loom_device_t* d, loom_device_info_t* info) {
    return guard("device_info", [&]() -> Status {
      if (d == nullptr || info == nullptr) return invalid_argument("device_info: device or info is NULL");
      if (info->struct_size < sizeof(size_t)) {
        return invalid_argument("device_info: info->struct_size is " +
                                std::to_string(info->struct_size));
      }
      loom_device_info_t full{};
      reinterpret_cast<Device*>(d)->info(&full);
      // Write only what fits the host's struct, and keep its struct_size.
      const size_t fit = info->struct_size < sizeof full ? info->struct_size : sizeof full;
      std::memcpy(reinterpret_cast<char*>(info) + sizeof(size_t),
                  reinterpret_cast<const char*>(&full) + sizeof(size_t), fit - sizeof(size_t));
      return Status();
    });
  }

  static Status blob_of(const char* entry, loom_device_t* d, const char* key, uint32_t version,
                        const void* data, size_t size, Blob* out) {
    if (d == nullptr) return invalid_argument(std::string(entry) + ": device is NULL");
    if (key == nullptr) return invalid_argument(std::string(entry) + ": loader_key is NULL");
    if (data == nullptr && size != 0) return invalid_argument(std::string(entry) + ": blob is NULL");
    *out = Blob{key, version, data, size};
    return Status();
  }

  static loom_status_t* executable_check(loom_executable_check_args_t* args) {
    return guard("executable_check", [&]() -> Status {
      if (args == nullptr) return invalid_argument("executable_check: args is NULL");
      LOOM_SDK_RETURN_IF_ERROR(check_size("executable_check", "loom_executable_check_args_t",
                                          args->struct_size, LOOM_EXECUTABLE_CHECK_ARGS_STRUCT_SIZE));
      Blob blob;
      LOOM_SDK_RETURN_IF_ERROR(blob_of("executable_check", args->device, args->loader_key,
                                       args->format_version, args->blob, args->blob_size, &blob));
      return reinterpret_cast<Device*>(args->device)->check_executable(blob);
    });
  }
  static loom_status_t* executable_estimate(loom_executable_estimate_args_t* args) {
    return guard("executable_estimate", [&]() -> Status {
      if (args == nullptr) return invalid_argument("executable_estimate: args is NULL");
      LOOM_SDK_RETURN_IF_ERROR(check_size("executable_estimate", "loom_executable_estimate_args_t",
                                          args->struct_size,
                                          LOOM_EXECUTABLE_ESTIMATE_ARGS_STRUCT_SIZE));
      args->out_time_ns = 0;
      Blob blob;
      LOOM_SDK_RETURN_IF_ERROR(blob_of("executable_estimate", args->device, args->loader_key,
                                       args->format_version, args->blob, args->blob_size, &blob));
      return estimate_of(reinterpret_cast<Device*>(args->device), blob, &args->out_time_ns, 0);
    });
  }
  // Calls Device::estimate_executable when the plugin has one.
  template <typename D>
  static auto estimate_of(D* device, const Blob& blob, uint64_t* out, int)
      -> decltype(device->estimate_executable(blob, out)) {
    return device->estimate_executable(blob, out);
  }
  template <typename D>
  static Status estimate_of(D*, const Blob&, uint64_t*, long) {
    return Status();
  }
  static constexpr bool has_estimate() { return has_estimate_impl<Device>(0); }
  template <typename D>
  static constexpr auto has_estimate_impl(int)
      -> decltype(std::declval<D&>().estimate_executable(std::declval<const Blob&>(),
                                                         std::declval<uint64_t*>()),
                  bool()) {
    return true;
  }
  template <typename D>
  static constexpr bool has_estimate_impl(long) {
    return false;
  }

  static loom_status_t* executable_load(loom_executable_load_args_t* args) {
    return guard("executable_load", [&]() -> Status {
      if (args == nullptr) return invalid_argument("executable_load: args is NULL");
      LOOM_SDK_RETURN_IF_ERROR(check_size("executable_load", "loom_executable_load_args_t",
                                          args->struct_size, LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE));
      args->out_executable = nullptr;
      Blob blob;
      LOOM_SDK_RETURN_IF_ERROR(blob_of("executable_load", args->device, args->loader_key,
                                       args->format_version, args->blob, args->blob_size, &blob));
      LOOM_SDK_RETURN_IF_ERROR(Options::validate(args->specs, args->spec_count, "compile spec"));
      std::unique_ptr<Executable> exe;
      LOOM_SDK_RETURN_IF_ERROR(reinterpret_cast<Device*>(args->device)->load_executable(
          blob, Options(args->specs, args->spec_count), &exe));
      if (!exe) return internal_error("executable_load: the plugin made no executable");
      args->out_executable = reinterpret_cast<loom_executable_t*>(exe.release());
      return Status();
    });
  }
  static void executable_destroy(loom_executable_t* e) {
    guard_void([&] { delete reinterpret_cast<Executable*>(e); });
  }
  static loom_status_t* execute(loom_execute_args_t* args) {
    return guard("execute", [&]() -> Status {
      if (args == nullptr) return invalid_argument("execute: args is NULL");
      LOOM_SDK_RETURN_IF_ERROR(check_size("execute", "loom_execute_args_t", args->struct_size,
                                          LOOM_EXECUTE_ARGS_STRUCT_SIZE));
      if (args->executable == nullptr) return invalid_argument("execute: executable is NULL");
      LOOM_SDK_RETURN_IF_ERROR(check_tensors(args->inputs, args->input_count, "input"));
      LOOM_SDK_RETURN_IF_ERROR(check_tensors(args->outputs, args->output_count, "output"));
      if (args->wait_fence_count != 0 && args->wait_fences == nullptr) {
        return invalid_argument("execute: wait fences but no array");
      }
      for (size_t i = 0; i < args->wait_fence_count; ++i) {
        if (args->wait_fences[i] == nullptr) {
          return invalid_argument("execute: wait fence " + std::to_string(i) + " is NULL");
        }
      }
      ExecuteCallT<Fence> call;
      call.inputs = args->inputs;
      call.input_count = args->input_count;
      call.outputs = args->outputs;
      call.output_count = args->output_count;
      call.wait_fences = args->wait_fences;
      call.wait_fence_count = args->wait_fence_count;
      call.signal_fence = reinterpret_cast<Fence*>(args->signal_fence);
      return reinterpret_cast<Executable*>(args->executable)->execute(call);
    });
  }

  static loom_status_t* buffer_allocate(loom_buffer_allocate_args_t* args) {
    return guard("buffer_allocate", [&]() -> Status {
      if (args == nullptr) return invalid_argument("buffer_allocate: args is NULL");
      LOOM_SDK_RETURN_IF_ERROR(check_size("buffer_allocate", "loom_buffer_allocate_args_t",
                                          args->struct_size, LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE));
      args->out_buffer = nullptr;
      if (args->device == nullptr) return invalid_argument("buffer_allocate: device is NULL");
      if (args->alignment & (args->alignment - 1)) {
        return invalid_argument("buffer_allocate: alignment " + std::to_string(args->alignment) +
                                " is not a power of two");
      }
      std::unique_ptr<Buffer> buffer;
      LOOM_SDK_RETURN_IF_ERROR(reinterpret_cast<Device*>(args->device)->allocate_buffer(
          args->size, args->alignment, args->flags, &buffer));
      if (!buffer) return internal_error("buffer_allocate: the plugin made no buffer");
      args->out_buffer = reinterpret_cast<loom_buffer_t*>(buffer.release());
      return Status();
    });
  }
  static loom_status_t* buffer_import_host(loom_buffer_import_args_t* args) {
    return guard("buffer_import_host", [&]() -> Status {
      if (args == nullptr) return invalid_argument("buffer_import_host: args is NULL");
      LOOM_SDK_RETURN_IF_ERROR(check_size("buffer_import_host", "loom_buffer_import_args_t",
                                          args->struct_size, LOOM_BUFFER_IMPORT_ARGS_STRUCT_SIZE));
      args->out_buffer = nullptr;
      if (args->device == nullptr) return invalid_argument("buffer_import_host: device is NULL");
      if (args->host_pointer == nullptr) {
        return invalid_argument("buffer_import_host: host_pointer is NULL");
      }
      std::unique_ptr<Buffer> buffer;
      LOOM_SDK_RETURN_IF_ERROR(import_of(reinterpret_cast<Device*>(args->device),
                                         args->host_pointer, args->size, &buffer, 0));
      if (!buffer) return internal_error("buffer_import_host: the plugin made no buffer");
      args->out_buffer = reinterpret_cast<loom_buffer_t*>(buffer.release());
      return Status();
    });
  }
  // Calls Device::import_host when the plugin has one.
  template <typename D>
  static auto import_of(D* device, void* p, uint64_t size, std::unique_ptr<Buffer>* out, int)
      -> decltype(device->import_host(p, size, out)) {
    return device->import_host(p, size, out);
  }
  template <typename D>
  static Status import_of(D*, void*, uint64_t, std::unique_ptr<Buffer>*, long) {
    return Status(LOOM_STATUS_UNIMPLEMENTED, "buffer_import_host: not supported");
  }
  static constexpr bool has_import() { return has_import_impl<Device>(0); }
  template <typename D>
  static constexpr auto has_import_impl(int)
      -> decltype(std::declval<D&>().import_host(std::declval<void*>(), uint64_t{},
                                                 std::declval<std::unique_ptr<Buffer>*>()),
                  bool()) {
    return true;
  }
  template <typename D>
  static constexpr bool has_import_impl(long) {
    return false;
  }
  static void buffer_free(loom_buffer_t* b) {
    guard_void([&] { delete reinterpret_cast<Buffer*>(b); });
  }
  static loom_status_t* buffer_map(loom_buffer_t* b, void** out_pointer) {
    return guard("buffer_map", [&]() -> Status {
      if (b == nullptr || out_pointer == nullptr) {
        return invalid_argument("buffer_map: buffer or out_pointer is NULL");
      }
      *out_pointer = nullptr;
      return reinterpret_cast<Buffer*>(b)->map(out_pointer);
    });
  }
  static void buffer_unmap(loom_buffer_t* b) {
    if (b != nullptr) guard_void([&] { reinterpret_cast<Buffer*>(b)->unmap(); });
  }
  static Status copy_args(const char* entry, loom_buffer_copy_args_t* args) {
    if (args == nullptr) return invalid_argument(std::string(entry) + ": args is NULL");
    LOOM_SDK_RETURN_IF_ERROR(check_size(entry, "loom_buffer_copy_args_t", args->struct_size,
                                        LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE));
    if (args->buffer == nullptr) return invalid_argument(std::string(entry) + ": buffer is NULL");
    if (args->host_pointer == nullptr && args->size != 0) {
      return invalid_argument(std::string(entry) + ": host_pointer is NULL");
    }
    return Status();
  }
  static loom_status_t* buffer_copy_from_host(loom_buffer_copy_args_t* args) {
    return guard("buffer_copy_from_host", [&]() -> Status {
      LOOM_SDK_RETURN_IF_ERROR(copy_args("buffer_copy_from_host", args));
      return reinterpret_cast<Buffer*>(args->buffer)
          ->copy_from_host(args->buffer_offset, args->host_pointer, args->size);
    });
  }
  static loom_status_t* buffer_copy_to_host(loom_buffer_copy_args_t* args) {
    return guard("buffer_copy_to_host", [&]() -> Status {
      LOOM_SDK_RETURN_IF_ERROR(copy_args("buffer_copy_to_host", args));
      return reinterpret_cast<Buffer*>(args->buffer)
          ->copy_to_host(args->buffer_offset, args->host_pointer, args->size);
    });
  }

  static loom_status_t* fence_create(loom_device_t* d, loom_fence_t** out_fence) {
    return guard("fence_create", [&]() -> Status {
      if (d == nullptr || out_fence == nullptr) {
        return invalid_argument("fence_create: device or out_fence is NULL");
      }
      *out_fence = nullptr;
      std::unique_ptr<Fence> fence;
      LOOM_SDK_RETURN_IF_ERROR(reinterpret_cast<Device*>(d)->create_fence(&fence));
      if (!fence) return internal_error("fence_create: the plugin made no fence");
      *out_fence = reinterpret_cast<loom_fence_t*>(fence.release());
      return Status();
    });
  }
  static void fence_destroy(loom_fence_t* f) {
    guard_void([&] { delete reinterpret_cast<Fence*>(f); });
  }
  static loom_status_t* fence_signal(loom_fence_t* f) {
    return guard("fence_signal", [&]() -> Status {
      if (f == nullptr) return invalid_argument("fence_signal: fence is NULL");
      return reinterpret_cast<Fence*>(f)->signal();
    });
  }
  static loom_status_t* fence_wait(loom_fence_t* f, uint64_t timeout_ns) {
    return guard("fence_wait", [&]() -> Status {
      if (f == nullptr) return invalid_argument("fence_wait: fence is NULL");
      return reinterpret_cast<Fence*>(f)->wait(timeout_ns);
    });
  }
  static loom_status_t* fence_query(loom_fence_t* f, bool* out_signaled) {
    return guard("fence_query", [&]() -> Status {
      if (f == nullptr || out_signaled == nullptr) {
        return invalid_argument("fence_query: fence or out_signaled is NULL");
      }
      *out_signaled = false;
      return reinterpret_cast<Fence*>(f)->query(out_signaled);
    });
  }
};

}  // namespace detail

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
    api.struct_size = kVersion >= LOOM_ABI_VERSION(1, 1) ? LOOM_PLUGIN_API_V1_1_SIZE
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
    api.compile_supported = nullptr;
    api.compile = nullptr;
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
  if (q->struct_size < LOOM_PLUGIN_QUERY_STRUCT_SIZE) return LOOM_STATUS_INVALID_ARGUMENT;
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

#endif  // LOOM_PLUGIN_HPP_
