// LoadedPlugin: loading one library, negotiating the ABI, validating what the
// plugin answers, creating its instance and listing its devices.
//
// Everything read from the plugin is checked before use: a plugin that lies
// about a size or leaves an entry NULL is rejected with a reason, never called.
#define BOOST_DLL_USE_STD_FS
#include <vector>  // Boost 1.74's DLL headers use std::vector without including it

#include <boost/dll/shared_library.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <unordered_set>

#include "common/hash.hpp"
#include "host/isolation/log_channel.hpp"
#include "host/plugin_host.hpp"
#include "host/isolation/remote_plugin.hpp"
#include "host/recording/capture_recorder.hpp"

namespace loom::host {

struct LoadedPlugin::Library {
  boost::dll::shared_library library;
};

namespace {

// Which file and which version of it: device, inode, size, modification and
// change times.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  timespec mtime{}, ctime{};
  bool operator==(const FileIdentity& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec &&
           ctime.tv_nsec == o.ctime.tv_nsec;
  }
};

FileIdentity identity_of(const struct stat& st) {
  return {st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
}

// Opens the library once (refusing anything but a regular file, without
// blocking on a FIFO), hashes it through that descriptor and records which
// file it was.
Result<std::string> hash_library(const std::filesystem::path& path, FileIdentity* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return not_found("library " + path.string() + " named by the manifest does not exist");
    return not_found("cannot open library " + path.string() + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return not_found("library " + path.string() + " named by the manifest is not a regular file");
  }
  auto hash = hash_fd_xxh3_128(fd, path.string());
  struct stat after {};
  const bool same = ::fstat(fd, &after) == 0 && identity_of(after) == identity_of(st);
  ::close(fd);
  if (hash.ok() && !same) {
    return data_loss("library " + path.string() + " changed while it was being hashed");
  }
  *out = identity_of(st);
  return hash;
}

// Whether the object behind a dlopen handle is the file `want` describes,
// unchanged since.
bool loaded_file_is(void* handle, const FileIdentity& want) {
  struct link_map* map = nullptr;
  if (handle == nullptr || ::dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr ||
      map->l_name == nullptr) {
    return false;
  }
  struct stat st {};
  return ::stat(map->l_name, &st) == 0 && identity_of(st) == want;
}

// What user_data of the host services points to.
struct ServiceState {
  std::shared_ptr<LogChannel> log;
  std::string plugin_name;
  // What `allocate` handed out and `free` has not taken back, so that the
  // host can tell a compile blob from its allocator from one the plugin
  // made with new[] or its own malloc (which `free` must never see).
  std::mutex allocations_mutex;
  std::unordered_set<void*> allocations;
};
}  // namespace

struct LoadedPlugin::ServiceContext : ServiceState {};

void LogChannel::write(loom_log_level_t level, std::string_view plugin, std::string_view message) {
  std::lock_guard<std::mutex> lock(mutex);
  // A plugin's text is escaped here, once, for every sink: one line each.
  std::string line(plugin);
  line += ": ";
  line += escape_control(message);
  if (sink) {
    sink(level, line);
    return;
  }
  if (level >= LOOM_LOG_WARNING) {
    std::fprintf(stderr, "loom: %s: %s\n", level == LOOM_LOG_ERROR ? "error" : "warning",
                 line.c_str());
  }
}

namespace {

// Host services. They are C callbacks, so each one is a plain function that
// finds its state through user_data.
void* service_allocate(void* user_data, size_t size, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) return nullptr;
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  void* ptr = nullptr;
  if (posix_memalign(&ptr, alignment, size == 0 ? 1 : size) != 0) return nullptr;
  if (user_data != nullptr) {
    auto* state = static_cast<ServiceState*>(user_data);
    std::lock_guard<std::mutex> lock(state->allocations_mutex);
    state->allocations.insert(ptr);
  }
  return ptr;
}

void service_free(void* user_data, void* ptr) {
  if (ptr == nullptr) return;
  if (user_data != nullptr) {
    auto* state = static_cast<ServiceState*>(user_data);
    std::lock_guard<std::mutex> lock(state->allocations_mutex);
    // Memory this host did not allocate is not freed: freeing it would
    // corrupt the heap (a plugin's own buffer, or a double free).
    if (state->allocations.erase(ptr) == 0) return;
  }
  std::free(ptr);
}

void service_log(void* user_data, loom_log_level_t level, const char* message) {
  if (user_data == nullptr || message == nullptr) return;
  const auto* state = static_cast<const ServiceState*>(user_data);
  state->log->write(level, state->plugin_name, message);
}

// A plugin's trace event goes to the active trace, if any: on the track of
// the device its category names (a URI of this plugin, as fpga-stub sends),
// else on the plugin's own track. Malformed events are dropped: a trace must
// never take a run down.
void service_trace(void* user_data, const loom_trace_event_t* event) {
  if (user_data == nullptr || event == nullptr) return;
  const auto* state = static_cast<const ServiceState*>(user_data);
  if (!state->log->tracing()) return;
  if (event->struct_size < LOOM_STRUCT_SIZE(loom_trace_event_t, name) || event->name == nullptr) {
    return;
  }
  std::shared_ptr<Trace> trace = state->log->active_trace();
  if (trace == nullptr) return;
  Trace::Event e;
  switch (event->phase) {
    case LOOM_TRACE_BEGIN: e.phase = Trace::Phase::kBegin; break;
    case LOOM_TRACE_END: e.phase = Trace::Phase::kEnd; break;
    case LOOM_TRACE_INSTANT: e.phase = Trace::Phase::kInstant; break;
    default: return;
  }
  e.category = event->category != nullptr ? event->category : "";
  e.name = event->name;
  const auto uri = parse_device_uri(e.category);
  e.track = uri.ok() && uri->plugin == state->plugin_name ? e.category : state->plugin_name;
  uint64_t ns = LOOM_STRUCT_HAS(loom_trace_event_t, event->struct_size, timestamp_ns)
                    ? event->timestamp_ns
                    : 0;
  if (ns == 0) {
    ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
  }
  e.timestamp_ns = ns;
  trace->record(std::move(e));
}

// The buffer a plugin writes its refusal reason into, placed at the end of
// a page whose next page is inaccessible: a plugin that writes past it
// faults at once (in a probe's process, which reports it) instead of
// silently overwriting the host's memory.
class ReasonBuffer {
 public:
  static constexpr size_t kCapacity = 512;
  ReasonBuffer() {
    page_ = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* p = ::mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    base_ = static_cast<char*>(p);
    ::mprotect(base_ + page_, page_, PROT_NONE);
    data_ = base_ + page_ - kCapacity;
    data_[0] = '\0';
  }
  ~ReasonBuffer() {
    if (base_ != nullptr) ::munmap(base_, 2 * page_);
  }
  ReasonBuffer(const ReasonBuffer&) = delete;
  ReasonBuffer& operator=(const ReasonBuffer&) = delete;
  // NULL when no memory could be mapped (the plugin then gets no buffer).
  char* data() { return data_; }

 private:
  char* base_ = nullptr;
  char* data_ = nullptr;
  size_t page_ = 0;
};

// INCOMPATIBLE, naming both lists, when the manifest's loader keys and the
// plugin's (plugin_info) are not the same set.
Status compare_loader_keys(const std::vector<std::string>& manifest_keys,
                           const std::vector<LoadedPlugin::LoaderKeyRange>& plugin_keys) {
  std::set<std::string> from_manifest(manifest_keys.begin(), manifest_keys.end());
  std::set<std::string> from_plugin;
  for (const auto& key : plugin_keys) from_plugin.insert(key.key);
  if (from_manifest == from_plugin) return Status();
  auto list = [](const std::set<std::string>& keys) {
    std::string out;
    for (const auto& key : keys) out += (out.empty() ? "" : ", ") + escape_control(key);
    return "[" + out + "]";
  };
  return incompatible("the manifest lists loader keys " + list(from_manifest) +
                      " but plugin_info lists " + list(from_plugin) +
                      "; rebuild the manifest with the plugin's keys (loom_add_plugin "
                      "LOADER_KEYS, loom-manifest --loader-key)");
}

}  // namespace

Status take_status(const loom_plugin_api_t& api, loom_status_t* status) {
  if (status == nullptr) return Status();
  int code = static_cast<int>(api.status_code(status));
  const char* text = api.status_message(status);
  std::string message = text != nullptr ? text : "(no message)";
  api.status_destroy(status);
  if (code == LOOM_STATUS_OK) {
    return internal_error("plugin returned a status object with code ok: " + message);
  }
  if (code < 0 || code > LOOM_STATUS_ALREADY_EXISTS) {
    return internal_error("(unknown status code " + std::to_string(code) + ") " + message);
  }
  return Status(static_cast<StatusCode>(code), std::move(message));
}

LoadedPlugin::~LoadedPlugin() {
  if (instance_ != nullptr) api_->plugin_destroy(instance_);
  instance_ = nullptr;
  api_ = nullptr;
  // The recording table (whose destroy entry just ran) goes before the
  // plugin it forwards to.
  recording_.reset();
  // An isolated plugin's process is told to leave (and reaped).
  remote_.reset();
  // The services must stay valid until the library is gone, so the library
  // goes first; the members below it are destroyed afterwards.
  library_.reset();
}

bool LoadedPlugin::serves(std::string_view loader_key) const {
  for (const LoaderKeyRange& key : loader_keys_) {
    if (key.key == loader_key) return true;
  }
  return false;
}

bool LoadedPlugin::take_host_allocation(void* pointer) const {
  if (pointer == nullptr || !service_context_) return false;
  std::lock_guard<std::mutex> lock(service_context_->allocations_mutex);
  return service_context_->allocations.erase(pointer) != 0;
}

Status LoadedPlugin::check_available() const {
  Status status = take(api_->plugin_check_available(instance_));
  std::lock_guard<std::mutex> lock(availability_mutex_);
  unavailable_reason_ = status.ok() ? std::string() : status.message();
  return status;
}

void LoadedPlugin::start_recording(std::shared_ptr<CaptureRecorder> recorder,
                                   const HostOptions& options) {
  if (recorder == nullptr || recording_ != nullptr) return;
  RecordedPluginFacts facts;
  facts.manifest = &manifest_;
  facts.abi_version = abi_version_;
  // What negotiate() offered: the host's range within the manifest's.
  facts.abi_min = std::max(options.abi_min, manifest_.abi_min);
  facts.abi_max = std::min(options.abi_max, manifest_.abi_max);
  facts.loader_keys = &loader_keys_;
  facts.isolated = isolated();
  facts.devices = &devices_;
  facts.plugin_options = &options.plugin_options;
  recording_ = wrap_for_recording(std::move(recorder), facts, api_, instance_, device_handles_,
                                  &api_, &instance_, &device_handles_);
}

std::string LoadedPlugin::unavailable_reason() const {
  std::lock_guard<std::mutex> lock(availability_mutex_);
  return unavailable_reason_;
}

Result<std::shared_ptr<LoadedPlugin>> LoadedPlugin::open(const PluginManifest& manifest,
                                                         const HostOptions& options,
                                                         std::shared_ptr<LogChannel> log) {
  std::shared_ptr<LoadedPlugin> plugin(new LoadedPlugin());
  plugin->manifest_ = manifest;
  const std::string& lib_path = manifest.library.string();

  // The file is opened once and hashed through that descriptor; after
  // dlopen (by path, so that the library's $ORIGIN is its folder) the file
  // the loader mapped must be the one hashed, unchanged: a library swapped
  // in or rewritten in between is refused, never run unverified.
  FileIdentity hashed;
  LOOM_ASSIGN_OR_RETURN(std::string hash, hash_library(manifest.library, &hashed));
  if (hash != manifest.library_hash) {
    return data_loss("library " + lib_path + " has hash " + hash + ", the manifest expects " +
                     manifest.library_hash + " (stale build or wrong file)");
  }

  plugin->library_ = std::make_unique<Library>();
  // Boost.DLL reports a failed dlopen by exception; its text carries dlerror().
  try {
    plugin->library_->library.load(
        manifest.library, boost::dll::load_mode::rtld_local | boost::dll::load_mode::rtld_now);
  } catch (const std::exception& e) {
    return unavailable("cannot load library " + lib_path + ": " + e.what());
  }
  if (!loaded_file_is(plugin->library_->library.native(), hashed)) {
    plugin->library_->library.unload();
    return data_loss("library " + lib_path +
                     " was replaced or changed between its hash check and loading; not loaded");
  }
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer builds only: keep the library mapped for good. ld.so
  // unmaps a closed library with its own internal munmap, which TSan never
  // sees, so the shadow state of the library's statics outlives it, and a
  // reload at the same address (plugins now export one symbol, so nothing
  // pins them) is reported as races with accesses made before the unload.
  // By the path it was loaded from: asking Boost.DLL for the location would
  // read the loader's link_map name outside the loader's lock once more.
  ::dlopen(lib_path.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
#endif

  plugin->service_context_ = std::make_unique<ServiceContext>();
  plugin->service_context_->log = std::move(log);
  plugin->service_context_->plugin_name = manifest.name;
  plugin->services_ = std::make_unique<loom_host_services_t>();
  loom_host_services_t& services = *plugin->services_;
  services.struct_size = LOOM_HOST_SERVICES_STRUCT_SIZE;
  services.user_data = static_cast<ServiceState*>(plugin->service_context_.get());
  services.allocate = &service_allocate;
  services.free = &service_free;
  services.log = &service_log;
  services.trace = &service_trace;

  LOOM_RETURN_IF_ERROR(plugin->negotiate(options));
  LOOM_RETURN_IF_ERROR(plugin->create_instance(options));
  LOOM_RETURN_IF_ERROR(plugin->list_devices());
  return plugin;
}

Result<std::shared_ptr<LoadedPlugin>> LoadedPlugin::open_in_this_process(
    const PluginManifest& manifest, const HostOptions& options, std::shared_ptr<Trace> trace) {
  auto channel = std::make_shared<LogChannel>(options.log_sink);
  if (trace != nullptr) channel->set_trace(std::move(trace));
  return open(manifest, options, std::move(channel));
}

Result<std::shared_ptr<LoadedPlugin>> LoadedPlugin::open_isolated(const PluginManifest& manifest,
                                                                  const HostOptions& options,
                                                                  std::shared_ptr<LogChannel> log) {
  std::shared_ptr<LoadedPlugin> plugin(new LoadedPlugin());
  plugin->manifest_ = manifest;
  RemoteFacts facts;
  LOOM_ASSIGN_OR_RETURN(plugin->remote_, start_remote_plugin(manifest, options, std::move(log),
                                                             /*probe=*/false, &facts,
                                                             &plugin->api_, &plugin->instance_));
  plugin->abi_version_ = facts.abi_version;
  plugin->loader_keys_ = std::move(facts.loader_keys);
  plugin->capabilities_ = facts.capabilities;
  plugin->process_id_ = facts.pid;
  // The child checked what its plugin said; what the child says is checked
  // again here, through the forwarding table, as for any plugin.
  LOOM_RETURN_IF_ERROR(plugin->list_devices());
  return plugin;
}

Status LoadedPlugin::negotiate(const HostOptions& options) {
  const std::string lib_path = manifest_.library.string();
  boost::dll::shared_library& library = library_->library;
  if (!library.has(LOOM_PLUGIN_ENTRY_POINT_NAME)) {
    return not_found("library " + lib_path + " does not export the entry point " +
                     LOOM_PLUGIN_ENTRY_POINT_NAME);
  }
  auto query_fn = reinterpret_cast<loom_plugin_query_fn_t>(
      library.get<void()>(LOOM_PLUGIN_ENTRY_POINT_NAME));

  ReasonBuffer reason_buffer;
  char* reason = reason_buffer.data();
  loom_plugin_query_t query{};
  query.struct_size = LOOM_PLUGIN_QUERY_STRUCT_SIZE;
  // The host offers the versions both it and the manifest speak (discovery
  // already refused a plugin whose manifest range misses the host's), so a
  // plugin whose library speaks newer versions than its manifest declares
  // answers one the manifest promised.
  const uint32_t offered_min = std::max(options.abi_min, manifest_.abi_min);
  const uint32_t offered_max = std::min(options.abi_max, manifest_.abi_max);
  query.host_abi_min = offered_min;
  query.host_abi_max = offered_max;
  query.host = services_.get();
  query.reason = reason;
  query.reason_capacity = reason != nullptr ? ReasonBuffer::kCapacity : 0;
  loom_status_code_t code = query_fn(&query);
  if (reason != nullptr) reason[ReasonBuffer::kCapacity - 1] = '\0';
  const std::string host_range = format_abi_range(offered_min, offered_max);
  if (code != LOOM_STATUS_OK) {
    return incompatible("plugin refused the host's ABI range " + host_range + ": " +
                        (reason != nullptr && reason[0] != '\0' ? std::string(reason) : std::string("(no reason given)")));
  }
  if (query.out_abi_version < offered_min || query.out_abi_version > offered_max) {
    return incompatible("plugin chose ABI " + format_abi_version(query.out_abi_version) +
                        ", outside the host's range " + host_range);
  }
  const loom_plugin_api_t* api = query.out_api;
  if (api == nullptr) return incompatible("plugin answered the query without a function table");
  if (api->struct_size < LOOM_PLUGIN_API_V1_0_SIZE) {
    return incompatible("function table has struct_size " + std::to_string(api->struct_size) +
                        ", smaller than the ABI 1.0 size " +
                        std::to_string(LOOM_PLUGIN_API_V1_0_SIZE));
  }
  if (api->abi_version != query.out_abi_version) {
    return incompatible("function table says ABI " + format_abi_version(api->abi_version) +
                        " but the query answered " + format_abi_version(query.out_abi_version));
  }
  if (query.out_abi_version >= LOOM_ABI_VERSION(1, 1) &&
      query.out_abi_version < LOOM_ABI_VERSION(2, 0) &&
      api->struct_size < LOOM_PLUGIN_API_V1_1_SIZE) {
    return incompatible("function table has struct_size " + std::to_string(api->struct_size) +
                        ", smaller than the ABI 1.1 size " +
                        std::to_string(LOOM_PLUGIN_API_V1_1_SIZE) + " the plugin chose");
  }
  const std::pair<const char*, bool> required[] = {
      {"status_code", api->status_code != nullptr},
      {"status_message", api->status_message != nullptr},
      {"status_destroy", api->status_destroy != nullptr},
      {"plugin_info", api->plugin_info != nullptr},
      {"plugin_create", api->plugin_create != nullptr},
      {"plugin_destroy", api->plugin_destroy != nullptr},
      {"plugin_check_available", api->plugin_check_available != nullptr},
      {"device_count", api->device_count != nullptr},
      {"device_get", api->device_get != nullptr},
      {"device_info", api->device_info != nullptr},
      {"executable_check", api->executable_check != nullptr},
      {"executable_load", api->executable_load != nullptr},
      {"executable_destroy", api->executable_destroy != nullptr},
      {"execute", api->execute != nullptr},
      {"buffer_allocate", api->buffer_allocate != nullptr},
      {"buffer_free", api->buffer_free != nullptr},
      {"buffer_map", api->buffer_map != nullptr},
      {"buffer_unmap", api->buffer_unmap != nullptr},
      {"buffer_copy_from_host", api->buffer_copy_from_host != nullptr},
      {"buffer_copy_to_host", api->buffer_copy_to_host != nullptr},
      {"fence_create", api->fence_create != nullptr},
      {"fence_destroy", api->fence_destroy != nullptr},
      {"fence_signal", api->fence_signal != nullptr},
      {"fence_wait", api->fence_wait != nullptr},
      {"fence_query", api->fence_query != nullptr},
  };
  for (const auto& [name, present] : required) {
    if (!present) return incompatible(std::string("required entry ") + name + " is NULL");
  }
  if ((api->compile == nullptr) != (api->compile_supported == nullptr)) {
    return incompatible("compile and compile_supported must be both set or both NULL");
  }

  const loom_plugin_info_t* info = api->plugin_info();
  if (info == nullptr) return incompatible("plugin_info returned NULL");
  if (!LOOM_STRUCT_HAS(loom_plugin_info_t, info->struct_size, name) || info->name == nullptr) {
    return incompatible("plugin_info has no name (struct_size " +
                        std::to_string(info->struct_size) + ")");
  }
  if (manifest_.name != info->name) {
    return incompatible("plugin_info names the plugin '" + std::string(info->name) +
                        "', its manifest names it '" + manifest_.name + "'");
  }
  if (LOOM_STRUCT_HAS(loom_plugin_info_t, info->struct_size, loader_keys) &&
      info->loader_key_count > 0) {
    if (info->loader_keys == nullptr) {
      return incompatible("plugin_info has " + std::to_string(info->loader_key_count) +
                          " loader keys but a NULL loader_keys array");
    }
    for (size_t i = 0; i < info->loader_key_count; ++i) {
      const loom_loader_key_t* key = info->loader_keys[i];
      if (key == nullptr || !LOOM_STRUCT_HAS(loom_loader_key_t, key->struct_size, key) ||
          key->key == nullptr) {
        return incompatible("plugin_info loader key " + std::to_string(i) + " is missing");
      }
      LoaderKeyRange range;
      range.key = key->key;
      if (LOOM_STRUCT_HAS(loom_loader_key_t, key->struct_size, format_version_max)) {
        range.format_min = key->format_version_min;
        range.format_max = key->format_version_max;
      }
      loader_keys_.push_back(std::move(range));
    }
  }
  // Discovery trusts the manifest's keys (a plugin is loaded only when one
  // of them is needed), so a plugin whose own list differs would be loaded
  // for a key it does not serve, or never for one it does.
  if (LOOM_STRUCT_HAS(loom_plugin_info_t, info->struct_size, loader_keys)) {
    LOOM_RETURN_IF_ERROR(compare_loader_keys(manifest_.loader_keys, loader_keys_));
  }
  // ABI 1.2: the plugin's capabilities (open-shape executables).
  if (query.out_abi_version >= LOOM_ABI_VERSION(1, 2) &&
      query.out_abi_version < LOOM_ABI_VERSION(2, 0) &&
      LOOM_STRUCT_HAS(loom_plugin_info_t, info->struct_size, capabilities)) {
    capabilities_ = info->capabilities;
  }
  api_ = api;
  abi_version_ = query.out_abi_version;
  return Status();
}

Status LoadedPlugin::create_instance(const HostOptions& options) {
  std::vector<loom_option_t> values(options.plugin_options.size());
  std::vector<const loom_option_t*> pointers(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    values[i].struct_size = LOOM_OPTION_STRUCT_SIZE;
    values[i].key = options.plugin_options[i].first.c_str();
    values[i].value = options.plugin_options[i].second.c_str();
    pointers[i] = &values[i];
  }
  loom_plugin_create_args_t args{};
  args.struct_size = LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
  args.host = services_.get();
  args.option_count = pointers.size();
  args.options = pointers.data();
  Status created = take(api_->plugin_create(&args));
  if (!created.ok()) return created.with_context("plugin_create failed");
  if (args.out_plugin == nullptr) {
    return internal_error("plugin_create succeeded but returned no instance");
  }
  instance_ = args.out_plugin;
  Status available = take(api_->plugin_check_available(instance_));
  if (!available.ok()) {
    unavailable_reason_ = available.message();
    return Status(available.code(), "unavailable: " + available.message());
  }
  return Status();
}

Status LoadedPlugin::list_devices() {
  size_t count = 0;
  LOOM_RETURN_IF_ERROR(take(api_->device_count(instance_, &count)).with_context("device_count"));
  if (count > kMaxDevicesPerPlugin) {
    return incompatible("device_count reports " + std::to_string(count) +
                        " devices; the host takes at most " + std::to_string(kMaxDevicesPerPlugin) +
                        " from one plugin");
  }
  const std::string prefix = manifest_.name + "://";
  std::set<std::string> uris;
  for (size_t i = 0; i < count; ++i) {
    const std::string where = "device " + std::to_string(i);
    loom_device_t* device = nullptr;
    LOOM_RETURN_IF_ERROR(take(api_->device_get(instance_, i, &device)).with_context(where));
    if (device == nullptr) return internal_error(where + ": device_get returned no handle");
    loom_device_info_t info{};
    info.struct_size = LOOM_DEVICE_INFO_STRUCT_SIZE;
    LOOM_RETURN_IF_ERROR(take(api_->device_info(device, &info)).with_context(where));
    DeviceInfo out;
    out.plugin = manifest_.name;
    out.uri = info.uri != nullptr ? info.uri : prefix + std::to_string(i);
    const auto parsed = parse_device_uri(out.uri);
    if (!parsed.ok() || parsed->plugin != manifest_.name) {
      return incompatible(where + " has URI '" + out.uri + "', which does not start with '" +
                          prefix + "'");
    }
    if (!uris.insert(out.uri).second) {
      return incompatible(where + " repeats the URI '" + out.uri + "'");
    }
    // A device name is shown to users: bounded and one line.
    out.name = info.name != nullptr ? escape_control(info.name) : out.uri;
    if (out.name.size() > kMaxDeviceNameLength) {
      out.name = out.name.substr(0, kMaxDeviceNameLength) + "... (" +
                 std::to_string(out.name.size()) + " characters)";
    }
    if (info.kind < LOOM_DEVICE_KIND_CPU || info.kind > LOOM_DEVICE_KIND_VIRTUAL) {
      return incompatible(where + " (" + out.uri + ") reports unknown device kind " +
                          std::to_string(static_cast<int>(info.kind)));
    }
    out.kind = static_cast<DeviceKind>(info.kind);
    out.device_memory_bytes = info.device_memory_bytes;
    out.host_visible_memory_bytes = info.host_visible_memory_bytes;
    out.capabilities = info.capabilities;
    out.dtype_mask = info.dtype_mask;
    devices_.push_back(std::move(out));
    device_handles_.push_back(device);
  }
  return Status();
}

}  // namespace loom::host
