// The thunks: one C function per entry of loom_plugin_api_t, each checking
// its arguments, calling the plugin's C++ object and turning exceptions into
// status objects. loom/sdk/entry.hpp puts them into the function table.
//
// Part of the header-only C++17 plugin SDK (include loom/plugin.hpp); the
// members a plugin's classes provide are listed at the top of plugin.hpp.
// A plugin does not call anything here directly.
//
// Struct sizes: every incoming struct must be at least the size of the ABI
// version that introduced it (the LOOM_*_V1_0_SIZE constants of plugin.h,
// LOOM_EXECUTABLE_ESTIMATE_ARGS_V1_1_SIZE for the 1.1 struct); larger, newer
// structs are accepted and only the fields this header knows are read.
#ifndef LOOM_SDK_THUNKS_HPP_
#define LOOM_SDK_THUNKS_HPP_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include "loom/plugin.h"
#include "loom/sdk/calls.hpp"
#include "loom/sdk/compile.hpp"
#include "loom/sdk/host.hpp"
#include "loom/sdk/options.hpp"
#include "loom/sdk/status.hpp"

namespace loom::sdk {

// The read-only view of a graph.fbs buffer (loom/sdk/graph.hpp). Declared
// here so that a Plugin's compile members can name it; only a plugin that
// has them includes the full definition (and needs flatbuffers).
class GraphView;

namespace detail {

// `T`, but spelled so that it depends on `U`: its use inside a template is
// checked only when the template is instantiated, so GraphView needs to be
// complete only in plugins that compile.
template <typename T, typename U>
struct dependent_type {
  using type = T;
};
template <typename T, typename = void>
struct is_complete : std::false_type {};
template <typename T>
struct is_complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};

// What the host holds as a loom_plugin_t*: the plugin's object plus the
// host services it was created with (the compile thunk allocates the blob
// with them).
template <typename PluginT>
struct PluginBox {
  std::unique_ptr<PluginT> impl;
  const loom_host_services_t* host = nullptr;
};

// `status` with "<entry>: " before its message (OK stays OK).
inline Status prefixed(const char* entry, Status status) {
  if (status.ok()) return status;
  return Status(status.code(), std::string(entry) + ": " + status.message());
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
  using Box = PluginBox<Plugin>;
  // GraphView, checked only when a compile thunk is instantiated.
  using Graph = typename dependent_type<GraphView, Impl>::type;

  static Box* box_of(loom_plugin_t* p) { return reinterpret_cast<Box*>(p); }
  static Plugin* plugin_of(loom_plugin_t* p) { return box_of(p)->impl.get(); }

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
    destroy_c_status(s);
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
      LOOM_SDK_RETURN_IF_ERROR(check_struct_size("plugin_create", "loom_plugin_create_args_t",
                                          args->struct_size, LOOM_PLUGIN_CREATE_ARGS_V1_0_SIZE));
      args->out_plugin = nullptr;
      LOOM_SDK_RETURN_IF_ERROR(Options::validate(args->options, args->option_count, "option"));
      CreateContext ctx;
      ctx.host = args->host;
      ctx.options = Options(args->options, args->option_count);
      std::unique_ptr<Plugin> plugin;
      LOOM_SDK_RETURN_IF_ERROR(Impl::create(ctx, &plugin));
      if (!plugin) return internal_error("plugin_create: the plugin made no instance");
      auto box = std::make_unique<Box>();
      box->impl = std::move(plugin);
      box->host = args->host;
      args->out_plugin = reinterpret_cast<loom_plugin_t*>(box.release());
      return Status();
    });
  }
  static void plugin_destroy(loom_plugin_t* p) {
    guard_void([&] { delete box_of(p); });
  }
  static loom_status_t* plugin_check_available(loom_plugin_t* p) {
    return guard("plugin_check_available", [&]() -> Status {
      if (p == nullptr) return invalid_argument("plugin_check_available: plugin is NULL");
      return plugin_of(p)->check_available();
    });
  }

  static loom_status_t* device_count(loom_plugin_t* p, size_t* out_count) {
    return guard("device_count", [&]() -> Status {
      if (p == nullptr || out_count == nullptr) {
        return invalid_argument("device_count: plugin or out_count is NULL");
      }
      *out_count = plugin_of(p)->device_count();
      return Status();
    });
  }
  static loom_status_t* device_get(loom_plugin_t* p, size_t index, loom_device_t** out_device) {
    return guard("device_get", [&]() -> Status {
      if (p == nullptr || out_device == nullptr) {
        return invalid_argument("device_get: plugin or out_device is NULL");
      }
      *out_device = nullptr;
      Plugin* plugin = plugin_of(p);
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
      LOOM_SDK_RETURN_IF_ERROR(check_struct_size("executable_check", "loom_executable_check_args_t",
                                          args->struct_size, LOOM_EXECUTABLE_CHECK_ARGS_V1_0_SIZE));
      Blob blob;
      LOOM_SDK_RETURN_IF_ERROR(blob_of("executable_check", args->device, args->loader_key,
                                       args->format_version, args->blob, args->blob_size, &blob));
      return reinterpret_cast<Device*>(args->device)->check_executable(blob);
    });
  }
  static loom_status_t* executable_estimate(loom_executable_estimate_args_t* args) {
    return guard("executable_estimate", [&]() -> Status {
      if (args == nullptr) return invalid_argument("executable_estimate: args is NULL");
      LOOM_SDK_RETURN_IF_ERROR(check_struct_size("executable_estimate", "loom_executable_estimate_args_t",
                                          args->struct_size,
                                          LOOM_EXECUTABLE_ESTIMATE_ARGS_V1_1_SIZE, "1.1"));
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
      LOOM_SDK_RETURN_IF_ERROR(check_struct_size("executable_load", "loom_executable_load_args_t",
                                          args->struct_size, LOOM_EXECUTABLE_LOAD_ARGS_V1_0_SIZE));
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
      LOOM_SDK_RETURN_IF_ERROR(check_struct_size("execute", "loom_execute_args_t", args->struct_size,
                                          LOOM_EXECUTE_ARGS_V1_0_SIZE));
      if (args->executable == nullptr) return invalid_argument("execute: executable is NULL");
      LOOM_SDK_RETURN_IF_ERROR(check_execute_tensors(args->inputs, args->input_count, "input"));
      LOOM_SDK_RETURN_IF_ERROR(check_execute_tensors(args->outputs, args->output_count, "output"));
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
      LOOM_SDK_RETURN_IF_ERROR(check_struct_size("buffer_allocate", "loom_buffer_allocate_args_t",
                                          args->struct_size, LOOM_BUFFER_ALLOCATE_ARGS_V1_0_SIZE));
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
      LOOM_SDK_RETURN_IF_ERROR(check_struct_size("buffer_import_host", "loom_buffer_import_args_t",
                                          args->struct_size, LOOM_BUFFER_IMPORT_ARGS_V1_0_SIZE));
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
    LOOM_SDK_RETURN_IF_ERROR(check_struct_size(entry, "loom_buffer_copy_args_t", args->struct_size,
                                        LOOM_BUFFER_COPY_ARGS_V1_0_SIZE));
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

  // -- compile side: Plugin::compile_supported and Plugin::compile --------

  template <typename P>
  static constexpr auto has_supported_impl(int)
      -> decltype(std::declval<P&>().compile_supported(std::declval<const Graph&>(),
                                                       std::declval<Claims*>()),
                  bool()) {
    return true;
  }
  template <typename P>
  static constexpr bool has_supported_impl(long) {
    return false;
  }
  template <typename P>
  static constexpr auto has_compile_impl(int)
      -> decltype(std::declval<P&>().compile(std::declval<const Graph&>(),
                                             std::declval<const Options&>(),
                                             std::declval<CompiledBlob*>()),
                  bool()) {
    return true;
  }
  template <typename P>
  static constexpr bool has_compile_impl(long) {
    return false;
  }
  // True when Plugin has both compile members; then both entries are set.
  static constexpr bool has_compile() {
    constexpr bool supported = has_supported_impl<Plugin>(0);
    constexpr bool compiles = has_compile_impl<Plugin>(0);
    static_assert(supported == compiles,
                  "loom/plugin.hpp: a Plugin with compile_supported(const GraphView&, Claims*) "
                  "needs compile(const GraphView&, const Options&, CompiledBlob*) too, and "
                  "the other way round (check both signatures)");
    return supported && compiles;
  }

  // Opens the graph of a compile entry, or says what is wrong with it.
  static Status open_graph(const char* entry, const void* data, size_t size, Graph* out) {
    static_assert(is_complete<Graph>::value,
                  "loom/plugin.hpp: a plugin with compile members must include "
                  "loom/sdk/graph.hpp in the file that uses LOOM_SDK_DEFINE_ENTRY");
    // ABI 1.2: open dimensions only for a plugin that declares it serves them.
    const loom_plugin_info_t* info = Impl::info();
    const bool open_shapes = info != nullptr &&
                             LOOM_STRUCT_HAS(loom_plugin_info_t, info->struct_size, capabilities) &&
                             (info->capabilities & LOOM_PLUGIN_CAP_OPEN_SHAPES) != 0;
    return prefixed(entry, Graph::open(data, size, out, open_shapes));
  }

  static loom_status_t* compile_supported(loom_compile_supported_args_t* args) {
    return guard("compile_supported", [&]() -> Status {
      if (args == nullptr) return invalid_argument("compile_supported: args is NULL");
      LOOM_SDK_RETURN_IF_ERROR(check_struct_size("compile_supported", "loom_compile_supported_args_t",
                                          args->struct_size,
                                          LOOM_COMPILE_SUPPORTED_ARGS_V1_0_SIZE));
      if (args->plugin == nullptr) return invalid_argument("compile_supported: plugin is NULL");
      if (args->node_count != 0 && args->out_supported == nullptr) {
        return invalid_argument("compile_supported: out_supported is NULL");
      }
      for (size_t i = 0; i < args->node_count; ++i) args->out_supported[i] = false;
      Graph graph;
      LOOM_SDK_RETURN_IF_ERROR(open_graph("compile_supported", args->graph, args->graph_size,
                                          &graph));
      if (graph.node_count() != args->node_count) {
        return invalid_argument("compile_supported: node_count is " +
                                std::to_string(args->node_count) + ", the graph has " +
                                std::to_string(graph.node_count()) + " nodes");
      }
      Claims claims(args->out_supported, args->node_count);
      Status s = plugin_of(args->plugin)->compile_supported(graph, &claims);
      if (!s.ok()) {
        for (size_t i = 0; i < args->node_count; ++i) args->out_supported[i] = false;
      }
      return s;
    });
  }

  // The loader key of `blob` as info() lists it (a string that lives as long
  // as the library), checking that the blob's format version is in its range.
  static Status loader_key_of(const CompiledBlob& blob, const char** out) {
    const loom_plugin_info_t* info = Impl::info();
    std::string listed;
    const size_t count = info == nullptr ? 0 : info->loader_key_count;
    for (size_t i = 0; i < count; ++i) {
      const loom_loader_key_t* k = info->loader_keys[i];
      if (k == nullptr || k->key == nullptr) continue;
      if (blob.loader_key != k->key) {
        listed += (listed.empty() ? "\"" : ", \"") + std::string(k->key) + "\"";
        continue;
      }
      if (blob.format_version < k->format_version_min ||
          blob.format_version > k->format_version_max) {
        return internal_error("compile: the plugin's blob has format version " +
                              std::to_string(blob.format_version) + ", outside loader key \"" +
                              blob.loader_key + "\"'s range " +
                              std::to_string(k->format_version_min) + " to " +
                              std::to_string(k->format_version_max) + " in its plugin_info");
      }
      *out = k->key;
      return Status();
    }
    return internal_error("compile: the plugin's blob names loader key \"" + blob.loader_key +
                          "\", which its plugin_info does not list (it lists " +
                          (listed.empty() ? std::string("none") : listed) + ")");
  }

  static loom_status_t* compile(loom_compile_args_t* args) {
    return guard("compile", [&]() -> Status {
      if (args == nullptr) return invalid_argument("compile: args is NULL");
      LOOM_SDK_RETURN_IF_ERROR(check_struct_size("compile", "loom_compile_args_t", args->struct_size,
                                          LOOM_COMPILE_ARGS_V1_0_SIZE));
      args->out_blob = nullptr;
      args->out_blob_size = 0;
      args->out_loader_key = nullptr;
      args->out_format_version = 0;
      if (args->plugin == nullptr) return invalid_argument("compile: plugin is NULL");
      LOOM_SDK_RETURN_IF_ERROR(
          Options::validate(args->options, args->option_count, "compile option"));
      Box* box = box_of(args->plugin);
      Graph graph;
      LOOM_SDK_RETURN_IF_ERROR(open_graph("compile", args->graph, args->graph_size, &graph));
      CompiledBlob blob;
      LOOM_SDK_RETURN_IF_ERROR(
          box->impl->compile(graph, Options(args->options, args->option_count), &blob));
      if (blob.bytes.empty()) return internal_error("compile: the plugin produced an empty blob");
      if (blob.alignment == 0 || (blob.alignment & (blob.alignment - 1)) != 0) {
        return internal_error("compile: the plugin asked for blob alignment " +
                              std::to_string(blob.alignment) + ", not a power of two");
      }
      const char* key = nullptr;
      LOOM_SDK_RETURN_IF_ERROR(loader_key_of(blob, &key));
      void* memory = nullptr;
      LOOM_SDK_RETURN_IF_ERROR(prefixed("compile", copy_to_host_memory(box->host, blob.bytes.data(),
                                                                       blob.bytes.size(),
                                                                       blob.alignment, &memory)));
      args->out_blob = memory;
      args->out_blob_size = blob.bytes.size();
      args->out_loader_key = key;
      args->out_format_version = blob.format_version;
      return Status();
    });
  }
};

}  // namespace detail
}  // namespace loom::sdk

#endif  // LOOM_SDK_THUNKS_HPP_
