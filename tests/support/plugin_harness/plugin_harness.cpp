#include "plugin_harness.hpp"

#include <dlfcn.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

namespace loom::testing {

std::string take(const loom_plugin_api_t* api, loom_status_t* status) {
  if (status == nullptr) return "ok";
  std::string out = code_prefix(api->status_code(status)) + api->status_message(status);
  api->status_destroy(status);
  return out;
}

std::string code_prefix(loom_status_code_t code) { return std::to_string(code) + ": "; }

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

bool starts_with(const std::string& text, loom_status_code_t code) {
  return starts_with(text, code_prefix(code));
}

loom_plugin_query_t make_query(uint32_t lo, uint32_t hi, char* reason, size_t capacity,
                               const loom_host_services_t* host) {
  loom_plugin_query_t q{};
  q.struct_size = LOOM_PLUGIN_QUERY_STRUCT_SIZE;
  q.host_abi_min = lo;
  q.host_abi_max = hi;
  q.host = host;
  q.reason = reason;
  q.reason_capacity = capacity;
  return q;
}

HostRecorder::HostRecorder(const HostOptions& options) : options_(options) {
  services_.struct_size = LOOM_HOST_SERVICES_STRUCT_SIZE;
  services_.user_data = this;
  services_.allocate = [](void* self, size_t size, size_t alignment) -> void* {
    const size_t a = alignment < 16 ? 16 : alignment;
    void* p = std::aligned_alloc(a, (size + a - 1) / a * a);
    if (p != nullptr) ++static_cast<HostRecorder*>(self)->live_allocations_;
    return p;
  };
  services_.free = [](void* self, void* p) {
    if (p != nullptr) --static_cast<HostRecorder*>(self)->live_allocations_;
    std::free(p);
  };
  services_.log = [](void* self, loom_log_level_t level, const char* message) {
    auto* r = static_cast<HostRecorder*>(self);
    const std::optional<loom_log_level_t>& echo = r->options_.echo_from;
    if (echo.has_value() && level >= *echo) std::fprintf(stderr, "plugin: %s\n", message);
    if (!r->options_.record_logs) return;
    std::lock_guard<std::mutex> lock(r->mutex_);
    r->lines_.push_back({level, message});
  };
  if (options_.trace) {
    services_.trace = [](void* self, const loom_trace_event_t* e) {
      auto* r = static_cast<HostRecorder*>(self);
      std::lock_guard<std::mutex> lock(r->mutex_);
      r->events_.push_back({e->phase, e->category, e->name, e->timestamp_ns});
    };
  }
}

std::vector<std::string> HostRecorder::logs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const Line& l : lines_) out.push_back(l.message);
  return out;
}

std::vector<std::string> HostRecorder::errors() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const Line& l : lines_) {
    if (l.level >= LOOM_LOG_ERROR) out.push_back(l.message);
  }
  return out;
}

std::vector<TraceEvent> HostRecorder::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

PluginHarness::PluginHarness(const char* library_path, const HostOptions& host) : recorder_(host) {
  handle_ = dlopen(library_path, RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* why = dlerror();
    error_ = std::string("cannot load ") + library_path + ": " + (why != nullptr ? why : "");
    return;
  }
  query_ = reinterpret_cast<loom_plugin_query_fn_t>(dlsym(handle_, LOOM_PLUGIN_ENTRY_POINT_NAME));
  if (query_ == nullptr) {
    error_ = std::string(library_path) + " exports no " + LOOM_PLUGIN_ENTRY_POINT_NAME;
    return;
  }
  char reason[256] = {};
  loom_plugin_query_t q =
      make_query(LOOM_ABI_VERSION(1, 0), LOOM_ABI_CURRENT, reason, sizeof reason, recorder_.services());
  if (query_(&q) != LOOM_STATUS_OK || q.out_api == nullptr) {
    error_ = std::string("the query refused: ") + reason;
    return;
  }
  api_ = q.out_api;
}

PluginHarness::~PluginHarness() {
  destroy_all();
  if (handle_ != nullptr) dlclose(handle_);
}

loom_plugin_t* PluginHarness::create(const Options& options, std::string* status) {
  std::vector<loom_option_t> opts;
  for (const auto& [key, value] : options) opts.push_back({LOOM_OPTION_STRUCT_SIZE, key.c_str(), value.c_str()});
  std::vector<const loom_option_t*> pointers;
  for (const loom_option_t& o : opts) pointers.push_back(&o);
  loom_plugin_create_args_t args{};
  args.struct_size = LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
  args.host = recorder_.services();
  args.option_count = pointers.size();
  args.options = pointers.data();
  const std::string s = take(api_, api_->plugin_create(&args));
  if (status != nullptr) *status = s;
  if (args.out_plugin != nullptr) plugins_.push_back(args.out_plugin);
  return args.out_plugin;
}

void PluginHarness::destroy(loom_plugin_t* plugin) {
  if (plugin == nullptr) return;
  plugins_.erase(std::remove(plugins_.begin(), plugins_.end(), plugin), plugins_.end());
  api_->plugin_destroy(plugin);
}

void PluginHarness::destroy_all() {
  while (!plugins_.empty()) {
    loom_plugin_t* p = plugins_.back();
    plugins_.pop_back();
    api_->plugin_destroy(p);
  }
}

std::string PluginHarness::check_available(loom_plugin_t* plugin) const {
  return take(api_, api_->plugin_check_available(plugin));
}

std::string PluginHarness::device(loom_plugin_t* plugin, size_t index, loom_device_t** out) const {
  return take(api_, api_->device_get(plugin, index, out));
}

std::string PluginHarness::device_info(loom_device_t* device, loom_device_info_t* out) const {
  *out = loom_device_info_t{};
  out->struct_size = LOOM_DEVICE_INFO_STRUCT_SIZE;
  return take(api_, api_->device_info(device, out));
}

std::string PluginHarness::allocate(loom_device_t* device, uint64_t size, uint32_t flags,
                                    loom_buffer_t** out) const {
  loom_buffer_allocate_args_t args{};
  args.struct_size = LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE;
  args.device = device;
  args.size = size;
  args.flags = flags;
  std::string s = take(api_, api_->buffer_allocate(&args));
  *out = args.out_buffer;
  return s;
}

std::string PluginHarness::copy_from_host(loom_buffer_t* buffer, uint64_t offset,
                                          const void* source, uint64_t size) const {
  return copy(buffer, offset, const_cast<void*>(source), size, true);
}

std::string PluginHarness::copy_to_host(loom_buffer_t* buffer, uint64_t offset, void* destination,
                                        uint64_t size) const {
  return copy(buffer, offset, destination, size, false);
}

std::string PluginHarness::copy(loom_buffer_t* buffer, uint64_t offset, void* host, uint64_t size,
                                bool to_device) const {
  loom_buffer_copy_args_t args{};
  args.struct_size = LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE;
  args.buffer = buffer;
  args.buffer_offset = offset;
  args.host_pointer = host;
  args.size = size;
  return take(api_, to_device ? api_->buffer_copy_from_host(&args) : api_->buffer_copy_to_host(&args));
}

std::string PluginHarness::check(loom_device_t* device, const char* loader_key, uint32_t format_version,
                                 const void* blob, size_t blob_size) const {
  loom_executable_check_args_t args{};
  args.struct_size = LOOM_EXECUTABLE_CHECK_ARGS_STRUCT_SIZE;
  args.device = device;
  args.loader_key = loader_key;
  args.format_version = format_version;
  args.blob = blob;
  args.blob_size = blob_size;
  return take(api_, api_->executable_check(&args));
}

std::string PluginHarness::load(loom_device_t* device, const char* loader_key, uint32_t format_version,
                                const void* blob, size_t blob_size, loom_executable_t** out) const {
  loom_executable_load_args_t args{};
  args.struct_size = LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE;
  args.device = device;
  args.loader_key = loader_key;
  args.format_version = format_version;
  args.blob = blob;
  args.blob_size = blob_size;
  std::string s = take(api_, api_->executable_load(&args));
  *out = args.out_executable;
  return s;
}

std::string PluginHarness::execute(loom_executable_t* executable, const std::vector<const loom_tensor_t*>& inputs,
                                   const std::vector<const loom_tensor_t*>& outputs, loom_fence_t* signal,
                                   std::vector<loom_fence_t*> waits) const {
  loom_execute_args_t args = execute_args(executable, inputs, outputs);
  args.signal_fence = signal;
  if (!waits.empty()) {
    args.wait_fence_count = waits.size();
    args.wait_fences = waits.data();
  }
  return take(api_, api_->execute(&args));
}

std::string PluginHarness::supported(loom_plugin_t* plugin, const std::vector<uint8_t>& graph, size_t node_count,
                                     std::vector<bool>* out) const {
  std::unique_ptr<bool[]> flags(new bool[node_count + 1]());
  loom_compile_supported_args_t args{};
  args.struct_size = LOOM_COMPILE_SUPPORTED_ARGS_STRUCT_SIZE;
  args.plugin = plugin;
  args.graph = graph.data();
  args.graph_size = graph.size();
  args.node_count = node_count;
  args.out_supported = flags.get();
  std::string s = take(api_, api_->compile_supported(&args));
  out->assign(flags.get(), flags.get() + node_count);
  return s;
}

std::string PluginHarness::compile(loom_plugin_t* plugin, const std::vector<uint8_t>& graph,
                                   CompiledBlob* out) const {
  loom_compile_args_t args{};
  args.struct_size = LOOM_COMPILE_ARGS_STRUCT_SIZE;
  args.plugin = plugin;
  args.graph = graph.data();
  args.graph_size = graph.size();
  std::string s = take(api_, api_->compile(&args));
  *out = CompiledBlob{};
  if (args.out_blob != nullptr) {
    out->returned = true;
    const auto* p = static_cast<const std::byte*>(args.out_blob);
    out->bytes.assign(p, p + args.out_blob_size);
    out->loader_key = args.out_loader_key != nullptr ? args.out_loader_key : "";
    out->format_version = args.out_format_version;
    const loom_host_services_t* host = recorder_.services();
    host->free(host->user_data, args.out_blob);
  }
  return s;
}

std::string estimate(const loom_plugin_api_t* api, loom_device_t* device, const char* key,
                     uint32_t version, const void* blob, size_t size, uint64_t* out_ns) {
  if (api->struct_size < LOOM_PLUGIN_API_V1_1_SIZE || api->executable_estimate == nullptr) {
    return code_prefix(LOOM_STATUS_UNIMPLEMENTED) + "no executable_estimate";
  }
  loom_executable_estimate_args_t args{};
  args.struct_size = LOOM_EXECUTABLE_ESTIMATE_ARGS_STRUCT_SIZE;
  args.device = device;
  args.loader_key = key;
  args.format_version = version;
  args.blob = blob;
  args.blob_size = size;
  args.out_time_ns = 12345;
  std::string s = take(api, api->executable_estimate(&args));
  *out_ns = args.out_time_ns;
  return s;
}

ScratchModelCache::ScratchModelCache() {
  char name[64];
  std::snprintf(name, sizeof name, "loom_model_cache_%ld_%p", static_cast<long>(::getpid()),
                static_cast<void*>(this));
  folder_ = (std::filesystem::temp_directory_path() / name).string();
  std::filesystem::remove_all(folder_);
  std::filesystem::create_directories(folder_);
  if (const char* old = std::getenv("LOOM_DEVICE_MODEL_DIR")) {
    saved_ = old;
    had_ = true;
  }
  ::setenv("LOOM_DEVICE_MODEL_DIR", folder_.c_str(), 1);
}

ScratchModelCache::~ScratchModelCache() {
  if (had_) {
    ::setenv("LOOM_DEVICE_MODEL_DIR", saved_.c_str(), 1);
  } else {
    ::unsetenv("LOOM_DEVICE_MODEL_DIR");
  }
  std::error_code ec;
  std::filesystem::remove_all(folder_, ec);
}

std::vector<std::string> ScratchModelCache::files() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(folder_, ec)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

loom_execute_args_t execute_args(loom_executable_t* executable,
                                 const std::vector<const loom_tensor_t*>& inputs,
                                 const std::vector<const loom_tensor_t*>& outputs) {
  loom_execute_args_t args{};
  args.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
  args.executable = executable;
  args.input_count = inputs.size();
  args.inputs = inputs.data();
  args.output_count = outputs.size();
  args.outputs = outputs.data();
  return args;
}

loom_tensor_t host_tensor(loom_dtype_t dtype, const std::vector<int64_t>& shape, void* data, uint64_t bytes) {
  loom_tensor_t t{};
  t.struct_size = LOOM_TENSOR_STRUCT_SIZE;
  t.dtype = dtype;
  t.rank = static_cast<uint32_t>(shape.size());
  t.shape = shape.data();
  t.host_data = data;
  t.byte_size = bytes;
  return t;
}

loom_tensor_t buffer_tensor(loom_dtype_t dtype, const std::vector<int64_t>& shape, loom_buffer_t* buffer,
                            uint64_t bytes) {
  loom_tensor_t t = host_tensor(dtype, shape, nullptr, bytes);
  t.buffer = buffer;
  return t;
}

}  // namespace loom::testing
