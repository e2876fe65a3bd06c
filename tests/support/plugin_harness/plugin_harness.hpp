// The one harness the plugin tests and benchmarks load a plugin with: the
// library opened with dlopen (no host library involved), its entry point
// queried, plugins created with options, and the device, buffer, compile,
// load and execute entries wrapped so that each call answers "ok" or
// "<code>: <message>". Per-plugin fixtures (tests/unit/<plugin>/) and the
// benchmarks' case runner (benchmarks/bench_support.hpp) sit on top of it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loom/plugin.h"

namespace loom::testing {

// "ok" for NULL, else "<code>: <message>"; destroys the status.
std::string take(const loom_plugin_api_t* api, loom_status_t* status);
// "<code>: ", what a status of `code` starts with after take().
std::string code_prefix(loom_status_code_t code);
bool starts_with(const std::string& text, const std::string& prefix);
bool starts_with(const std::string& text, loom_status_code_t code);

// Query arguments for the host ABI range [lo, hi]; the plugin writes a
// refusal's reason into `reason` (`capacity` bytes).
loom_plugin_query_t make_query(uint32_t lo, uint32_t hi, char* reason, size_t capacity,
                               const loom_host_services_t* host = nullptr);

// Option keys and values handed to plugin_create, in order.
using Options = std::vector<std::pair<std::string, std::string>>;

struct TraceEvent {
  loom_trace_phase_t phase;
  std::string category, name;
  uint64_t ns;
};

// What a HostRecorder keeps and offers. The defaults suit a test that
// asserts on what a plugin logged and traced. A benchmark turns recording
// and the trace service off, so that a timed run does no host work beyond
// what a plain host does (a plugin sends no trace events to a host without
// a trace service), and has warnings echoed instead.
struct HostOptions {
  // Keep every log line for logs() and errors().
  bool record_logs = true;
  // Offer the trace service and keep its events for events(); false leaves
  // the service NULL.
  bool trace = true;
  // Log lines at or above this level are also written to stderr as
  // "plugin: <message>"; none when empty.
  std::optional<loom_log_level_t> echo_from;
};

// Host services that allocate with aligned_alloc (counting what is live)
// and, as HostOptions says, record log lines and trace events. Thread-safe:
// plugins call it from their own threads.
class HostRecorder {
 public:
  explicit HostRecorder(const HostOptions& options = {});
  HostRecorder(const HostRecorder&) = delete;
  HostRecorder& operator=(const HostRecorder&) = delete;

  // Valid while this object lives; its user_data is this object.
  const loom_host_services_t* services() const { return &services_; }
  // Every log line so far, in order.
  std::vector<std::string> logs() const;
  // The log lines at LOOM_LOG_ERROR or above.
  std::vector<std::string> errors() const;
  std::vector<TraceEvent> events() const;
  // Blocks allocated through the services and not freed yet.
  int live_allocations() const { return live_allocations_.load(); }

 private:
  struct Line {
    loom_log_level_t level;
    std::string message;
  };
  HostOptions options_;
  loom_host_services_t services_{};
  mutable std::mutex mutex_;
  std::vector<Line> lines_;
  std::vector<TraceEvent> events_;
  std::atomic<int> live_allocations_{0};
};

// A blob a plugin's compile entry returned, copied out of the plugin's
// allocation (which the harness frees through the host services).
struct CompiledBlob {
  std::vector<std::byte> bytes;
  std::string loader_key;
  uint32_t format_version = 0;
  bool returned = false;  // the plugin set out_blob
};

// One plugin library, open for the harness's lifetime. Not thread-safe
// itself; the wrapped entries are as thread-safe as the plugin says.
class PluginHarness {
 public:
  // Opens `library_path` and queries its entry point for ABI 1.0 up to the
  // current version with this harness's host services (a recorder made with
  // `host`). On failure api() is NULL and error() says why.
  explicit PluginHarness(const char* library_path, const HostOptions& host = {});
  // Destroys the plugins create() made that are still alive, then closes
  // the library.
  ~PluginHarness();
  PluginHarness(const PluginHarness&) = delete;
  PluginHarness& operator=(const PluginHarness&) = delete;

  const loom_plugin_api_t* api() const { return api_; }
  const std::string& error() const { return error_; }
  // The entry point itself (NULL if the library did not open), for tests
  // of the version negotiation.
  loom_plugin_query_fn_t query() const { return query_; }
  HostRecorder& recorder() { return recorder_; }
  const loom_host_services_t* services() const { return recorder_.services(); }

  // A plugin created with `options` and the recorder's services, owned by
  // the harness until destroy(); NULL with *status set on failure.
  loom_plugin_t* create(const Options& options, std::string* status = nullptr);
  // Destroys `plugin` (one create() made) now; NULL does nothing.
  void destroy(loom_plugin_t* plugin);
  // Destroys every plugin create() made and is still alive, newest first.
  void destroy_all();

  // plugin_check_available: "ok", or why the plugin cannot run here.
  std::string check_available(loom_plugin_t* plugin) const;
  std::string device(loom_plugin_t* plugin, size_t index, loom_device_t** out) const;
  // device_info into *out, whose struct_size this sets; the strings it
  // points to live as long as the device.
  std::string device_info(loom_device_t* device, loom_device_info_t* out) const;
  std::string allocate(loom_device_t* device, uint64_t size, uint32_t flags, loom_buffer_t** out) const;
  std::string copy_from_host(loom_buffer_t* buffer, uint64_t offset, const void* source, uint64_t size) const;
  std::string copy_to_host(loom_buffer_t* buffer, uint64_t offset, void* destination, uint64_t size) const;

  std::string check(loom_device_t* device, const char* loader_key, uint32_t format_version,
                    const void* blob, size_t blob_size) const;
  std::string load(loom_device_t* device, const char* loader_key, uint32_t format_version,
                   const void* blob, size_t blob_size, loom_executable_t** out) const;
  std::string execute(loom_executable_t* executable, const std::vector<const loom_tensor_t*>& inputs,
                      const std::vector<const loom_tensor_t*>& outputs, loom_fence_t* signal = nullptr,
                      std::vector<loom_fence_t*> waits = {}) const;

  // compile_supported over `node_count` nodes; *out gets one flag a node.
  std::string supported(loom_plugin_t* plugin, const std::vector<uint8_t>& graph, size_t node_count,
                        std::vector<bool>* out) const;
  std::string compile(loom_plugin_t* plugin, const std::vector<uint8_t>& graph, CompiledBlob* out) const;

 private:
  std::string copy(loom_buffer_t* buffer, uint64_t offset, void* host, uint64_t size, bool to_device) const;

  HostRecorder recorder_;
  void* handle_ = nullptr;
  loom_plugin_query_fn_t query_ = nullptr;
  const loom_plugin_api_t* api_ = nullptr;
  std::string error_;
  std::vector<loom_plugin_t*> plugins_;
};

// The arguments of one execute call with no fences, for a caller that makes
// the same call many times (a benchmark's timed loop) and for
// PluginHarness::execute. They point into `inputs` and `outputs`, which must
// outlive them.
loom_execute_args_t execute_args(loom_executable_t* executable,
                                 const std::vector<const loom_tensor_t*>& inputs,
                                 const std::vector<const loom_tensor_t*>& outputs);

// ABI 1.1 executable_estimate of `blob` on `device`: "ok" (then *out_ns is
// the estimate, 0 for none) or "<code>: <message>"; "unimplemented: ..."
// when the plugin has no such entry.
std::string estimate(const loom_plugin_api_t* api, loom_device_t* device, const char* key,
                     uint32_t version, const void* blob, size_t size, uint64_t* out_ns);

// A scratch folder for the plugins' device-model cache (LOOM_DEVICE_MODEL_DIR),
// so that a test estimating never writes into the user's cache: sets the
// variable to a new empty folder under the temporary directory for the
// object's life, then removes the folder and restores the variable.
class ScratchModelCache {
 public:
  ScratchModelCache();
  ~ScratchModelCache();
  ScratchModelCache(const ScratchModelCache&) = delete;
  ScratchModelCache& operator=(const ScratchModelCache&) = delete;
  const std::string& folder() const { return folder_; }
  // The files in the folder (full paths, sorted).
  std::vector<std::string> files() const;

 private:
  std::string folder_;
  std::string saved_;
  bool had_ = false;
};

// A descriptor of f32 or other dtype data in host memory; `shape` and
// `data` must outlive its use.
loom_tensor_t host_tensor(loom_dtype_t dtype, const std::vector<int64_t>& shape, void* data, uint64_t bytes);
// A descriptor of a whole device buffer; `shape` must outlive its use.
loom_tensor_t buffer_tensor(loom_dtype_t dtype, const std::vector<int64_t>& shape, loom_buffer_t* buffer,
                            uint64_t bytes);

}  // namespace loom::testing
