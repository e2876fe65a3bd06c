// The child side of plugin isolation: loom-plugin-host loads one plugin
// exactly as the host would in process (manifest, hash, negotiation, checks),
// tells the host what it found, and then serves the host's calls, one thread
// per channel, until the host closes the control channel.
//
// The host is trusted, but its messages are still decoded with bounds
// checks and every handle id it names is looked up, never cast.
#include "host/isolation/plugin_server.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "host/handles.hpp"
#include "host/isolation/isolation_wire.hpp"
#include "host/isolation/log_channel.hpp"

namespace loom::host {
namespace {

// A copy of wire bytes at an 8-byte aligned address. A payload sits at any
// offset of its message, while what plugins read in place expects the
// alignment the in-process host gives them (malloc's): graph.fbs buffers and
// flatbuffer blobs hold 8-byte fields (UBSan caught fpga-stub reading a
// graph's int64 dimensions misaligned when a replay compiled through here).
class AlignedCopy {
 public:
  explicit AlignedCopy(std::span<const std::byte> bytes)
      : words_((bytes.size() + 7) / 8), size_(bytes.size()) {
    if (size_ != 0) std::memcpy(words_.data(), bytes.data(), size_);
  }
  std::span<const std::byte> span() const {
    return {reinterpret_cast<const std::byte*>(words_.data()), size_};
  }
  const std::byte* data() const { return span().data(); }
  size_t size() const { return size_; }

 private:
  std::vector<uint64_t> words_;
  size_t size_;
};

using wire::Op;
using wire::WireReader;
using wire::WireWriter;

// A buffer as the child keeps it: the shared memory the host maps too, and,
// on a device that cannot execute on host memory, the plugin's own buffer
// (imported over the shared memory when the device can import, else a copy
// kept in step by push and pull).
struct ChildBuffer {
  wire::SharedMemory shared;
  std::unique_ptr<DeviceBuffer> device;
  bool mirrored = false;  // device is a separate copy
};

// Log lines the plugin wrote, waiting to ride on the next reply.
struct PendingLogs {
  std::mutex mutex;
  std::deque<std::pair<loom_log_level_t, std::string>> lines;
};

class Server {
 public:
  Server(std::shared_ptr<LoadedPlugin> plugin, std::shared_ptr<PendingLogs> logs,
         std::shared_ptr<Trace> trace)
      : plugin_(std::move(plugin)), logs_(std::move(logs)), trace_(std::move(trace)) {}

  // Serves one channel until it closes.
  void serve(int fd) {
    for (;;) {
      auto request = wire::receive_message(fd, -1, wire::kMaxMessageBytes, wire::kChildSpinMicros);
      if (!request.ok()) break;
      WireWriter reply;
      handle(*request, reply);
      if (!wire::send_message(fd, reply.data()).ok()) break;
    }
    ::close(fd);
  }

  // Writes the pending log lines, then OK or the error, then `body`.
  void finish(WireWriter& out, const Status& status, const WireWriter* body) {
    WireWriter head;
    {
      std::lock_guard<std::mutex> lock(logs_->mutex);
      head.u64(logs_->lines.size());
      for (const auto& [level, line] : logs_->lines) {
        head.u32(static_cast<uint32_t>(level));
        head.str(line);
      }
      logs_->lines.clear();
    }
    // The plugin's trace events, for the host's trace (if it records one).
    std::vector<Trace::Event> events = trace_->take_events();
    head.u64(events.size());
    for (const Trace::Event& e : events) {
      head.u32(static_cast<uint32_t>(e.phase));
      head.str(e.track);
      head.str(e.category);
      head.str(e.name);
      head.u64(e.timestamp_ns);
    }
    head.u32(static_cast<uint32_t>(status.code()));
    if (!status.ok()) head.str(status.message());
    if (status.ok() && body != nullptr) {
      head.data().insert(head.data().end(), body->view().begin(), body->view().end());
    }
    out = std::move(head);
  }

 private:
  template <typename T>
  using Table = std::unordered_map<uint64_t, std::shared_ptr<T>>;

  template <typename T>
  uint64_t add(Table<T>& table, std::shared_ptr<T> object) {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t id = ++next_id_;
    table.emplace(id, std::move(object));
    return id;
  }
  template <typename T>
  Result<std::shared_ptr<T>> find(Table<T>& table, uint64_t id, const char* what) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = table.find(id);
    if (it == table.end()) return invalid_argument(std::string("no ") + what + " with id " + std::to_string(id));
    return it->second;
  }
  template <typename T>
  void remove(Table<T>& table, uint64_t id) {
    std::shared_ptr<T> gone;  // destroyed outside the lock
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = table.find(id);
    if (it == table.end()) return;
    gone = std::move(it->second);
    table.erase(it);
  }

  Result<size_t> device(WireReader& in) {
    uint64_t index = in.u64("device index");
    if (in.ok() && index >= plugin_->devices().size()) {
      return out_of_range("device index " + std::to_string(index) + " out of range");
    }
    return static_cast<size_t>(index);
  }

  void handle(const wire::Message& request, WireWriter& out) {
    WireReader in(request.bytes);
    WireWriter body;
    Status status = dispatch(static_cast<Op>(in.u32("op")), in, request, body);
    finish(out, status, &body);
  }

  Status dispatch(Op op, WireReader& in, const wire::Message& request, WireWriter& body) {
    switch (op) {
      case Op::kCheckAvailable:
        LOOM_RETURN_IF_ERROR(in.finish("check_available"));
        return plugin_->check_available();
      case Op::kExecutableCheck:
      case Op::kExecutableEstimate: {
        LOOM_ASSIGN_OR_RETURN(size_t dev, device(in));
        std::string key = in.str("loader key");
        uint32_t format = in.u32("format version");
        const AlignedCopy blob(in.bytes("blob"));
        LOOM_RETURN_IF_ERROR(in.finish("executable check"));
        if (op == Op::kExecutableCheck) return check_blob(*plugin_, dev, key, format, blob.span());
        LOOM_ASSIGN_OR_RETURN(uint64_t ns, estimate_blob(*plugin_, dev, key, format, blob.span()));
        body.u64(ns);
        return Status();
      }
      case Op::kExecutableLoad: {
        LOOM_ASSIGN_OR_RETURN(size_t dev, device(in));
        std::string key = in.str("loader key");
        uint32_t format = in.u32("format version");
        auto blob = in.bytes("blob");
        std::vector<std::pair<std::string, std::string>> specs(in.count("spec count", 4096, 16));
        for (auto& [k, v] : specs) {
          k = in.str("spec key");
          v = in.str("spec value");
        }
        LOOM_RETURN_IF_ERROR(in.finish("executable load"));
        // The plugin may keep pointers into the blob: it gets its own copy,
        // held as long as the executable.
        auto owned = std::make_shared<std::vector<std::byte>>(blob.begin(), blob.end());
        LOOM_ASSIGN_OR_RETURN(auto exe, Executable::load(plugin_, dev, key, format, *owned, specs, owned));
        body.u64(add(executables_, std::shared_ptr<Executable>(std::move(exe))));
        return Status();
      }
      case Op::kExecutableDestroy: {
        uint64_t id = in.u64("executable id");
        LOOM_RETURN_IF_ERROR(in.finish("executable destroy"));
        remove(executables_, id);
        return Status();
      }
      case Op::kExecute: return execute(in);
      case Op::kBufferAllocate: return allocate(in, request, body);
      case Op::kBufferFree: {
        uint64_t id = in.u64("buffer id");
        LOOM_RETURN_IF_ERROR(in.finish("buffer free"));
        remove(buffers_, id);
        return Status();
      }
      case Op::kBufferPush:
      case Op::kBufferPull: {
        uint64_t id = in.u64("buffer id");
        uint64_t offset = in.u64("offset");
        uint64_t size = in.u64("size");
        LOOM_RETURN_IF_ERROR(in.finish("buffer copy"));
        LOOM_ASSIGN_OR_RETURN(auto buffer, find(buffers_, id, "buffer"));
        if (offset > buffer->shared.size() || size > buffer->shared.size() - offset) {
          return out_of_range("copy of " + std::to_string(size) + " bytes at " + std::to_string(offset) +
                              " past a buffer of " + std::to_string(buffer->shared.size()));
        }
        if (!buffer->mirrored) return Status();
        std::byte* at = buffer->shared.data() + offset;
        return op == Op::kBufferPush ? buffer->device->copy_from_host(offset, at, size)
                                     : buffer->device->copy_to_host(offset, at, size);
      }
      case Op::kFenceCreate: {
        LOOM_ASSIGN_OR_RETURN(size_t dev, device(in));
        LOOM_RETURN_IF_ERROR(in.finish("fence create"));
        LOOM_ASSIGN_OR_RETURN(auto fence, Fence::create(plugin_, dev));
        body.u64(add(fences_, std::shared_ptr<Fence>(std::move(fence))));
        return Status();
      }
      case Op::kFenceDestroy: {
        uint64_t id = in.u64("fence id");
        LOOM_RETURN_IF_ERROR(in.finish("fence destroy"));
        remove(fences_, id);
        return Status();
      }
      case Op::kFenceSignal:
      case Op::kFenceWait:
      case Op::kFenceQuery: {
        uint64_t id = in.u64("fence id");
        uint64_t timeout = op == Op::kFenceWait ? in.u64("timeout") : 0;
        LOOM_RETURN_IF_ERROR(in.finish("fence call"));
        LOOM_ASSIGN_OR_RETURN(auto fence, find(fences_, id, "fence"));
        if (op == Op::kFenceSignal) return fence->signal();
        if (op == Op::kFenceWait) return fence->wait(timeout);
        bool signaled = false;
        bool* out = &signaled;
        Status status = plugin_->take(plugin_->api().fence_query(fence->handle(), out));
        body.boolean(signaled);
        return status;
      }
      case Op::kCompileSupported: return compile_supported(in, body);
      case Op::kCompile: return compile(in, body);
      default:
        return invalid_argument("unknown request " + std::to_string(static_cast<uint32_t>(op)));
    }
  }

  Status allocate(WireReader& in, const wire::Message& request, WireWriter& body) {
    LOOM_ASSIGN_OR_RETURN(size_t dev, device(in));
    uint64_t size = in.u64("size");
    LOOM_RETURN_IF_ERROR(in.finish("buffer allocate"));
    if (request.fds.size() != 1) return invalid_argument("buffer allocate without its shared memory");
    auto buffer = std::make_shared<ChildBuffer>();
    LOOM_ASSIGN_OR_RETURN(buffer->shared, wire::SharedMemory::map(request.fds[0], size));
    const uint64_t caps = plugin_->devices()[dev].capabilities;
    if ((caps & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE) == 0) {
      auto imported = (caps & LOOM_DEVICE_CAP_HOST_POINTER_IMPORT) != 0 &&
                              plugin_->api().buffer_import_host != nullptr
                          ? DeviceBuffer::import_host(plugin_, dev, buffer->shared.data(),
                                                      buffer->shared.mapped_size())
                          : Result<std::unique_ptr<DeviceBuffer>>(unimplemented("no import"));
      if (imported.ok()) {
        buffer->device = std::move(*imported);
      } else {
        LOOM_ASSIGN_OR_RETURN(buffer->device, DeviceBuffer::allocate(plugin_, dev, size));
        buffer->mirrored = true;
      }
    }
    const bool mirrored = buffer->mirrored;
    body.u64(add(buffers_, std::move(buffer)));
    body.boolean(mirrored);
    return Status();
  }

  Status execute(WireReader& in) {
    LOOM_ASSIGN_OR_RETURN(auto exe, find(executables_, in.u64("executable id"), "executable"));
    const uint64_t count = in.count("tensor count", 1u << 20, 40);
    const uint64_t inputs = in.u64("input count");
    if (in.ok() && inputs > count) return invalid_argument("more inputs than tensors");
    std::vector<loom_tensor_t> tensors(count);
    std::vector<std::vector<int64_t>> shapes(count);
    std::vector<std::shared_ptr<ChildBuffer>> held;
    for (uint64_t t = 0; t < count && in.ok(); ++t) {
      loom_tensor_t& tensor = tensors[t];
      tensor.struct_size = LOOM_TENSOR_STRUCT_SIZE;
      tensor.dtype = static_cast<loom_dtype_t>(in.u32("dtype"));
      const uint64_t rank = in.count("rank", LOOM_MAX_RANK, 8);
      shapes[t].resize(rank);
      for (auto& d : shapes[t]) d = in.i64("dimension");
      tensor.rank = static_cast<uint32_t>(rank);
      tensor.shape = shapes[t].data();
      const uint64_t id = in.u64("buffer id");
      tensor.offset = in.u64("offset");
      tensor.byte_size = in.u64("byte size");
      if (!in.ok()) break;
      LOOM_ASSIGN_OR_RETURN(auto buffer, find(buffers_, id, "buffer"));
      if (tensor.offset > buffer->shared.size() ||
          tensor.byte_size > buffer->shared.size() - tensor.offset) {
        return out_of_range("tensor " + std::to_string(t) + " of " + std::to_string(tensor.byte_size) +
                            " bytes at " + std::to_string(tensor.offset) + " past its buffer of " +
                            std::to_string(buffer->shared.size()));
      }
      if (buffer->device) {
        tensor.buffer = buffer->device->handle();
      } else {
        tensor.host_data = buffer->shared.data();
      }
      held.push_back(std::move(buffer));
    }
    std::vector<loom_fence_t*> waits(in.count("wait fence count", 1024, 8));
    std::vector<std::shared_ptr<Fence>> fences;
    for (auto& w : waits) {
      LOOM_ASSIGN_OR_RETURN(auto fence, find(fences_, in.u64("wait fence"), "fence"));
      w = fence->handle();
      fences.push_back(std::move(fence));
    }
    const uint64_t signal_id = in.u64("signal fence");
    LOOM_RETURN_IF_ERROR(in.finish("execute"));
    loom_fence_t* signal = nullptr;
    if (signal_id != 0) {
      LOOM_ASSIGN_OR_RETURN(auto fence, find(fences_, signal_id, "fence"));
      signal = fence->handle();
    }
    std::vector<const loom_tensor_t*> pointers(count);
    for (uint64_t t = 0; t < count; ++t) pointers[t] = &tensors[t];
    loom_execute_args_t args{};
    args.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
    args.executable = exe->handle();
    args.input_count = inputs;
    args.inputs = pointers.data();
    args.output_count = count - inputs;
    args.outputs = pointers.data() + inputs;
    args.wait_fence_count = waits.size();
    args.wait_fences = waits.data();
    args.signal_fence = signal;
    return plugin_->take(plugin_->api().execute(&args));
  }

  Status compile_supported(WireReader& in, WireWriter& body) {
    const AlignedCopy graph(in.bytes("graph"));
    uint64_t nodes = in.u64("node count");
    LOOM_RETURN_IF_ERROR(in.finish("compile_supported"));
    if (nodes > (uint64_t{1} << 24)) return invalid_argument("node count " + std::to_string(nodes));
    const auto& api = plugin_->api();
    if (api.compile_supported == nullptr) return failed_precondition("the plugin does not compile");
    std::unique_ptr<bool[]> supported(new bool[nodes == 0 ? 1 : nodes]());
    loom_compile_supported_args_t args{};
    args.struct_size = LOOM_COMPILE_SUPPORTED_ARGS_STRUCT_SIZE;
    args.plugin = plugin_->instance();
    args.graph = graph.data();
    args.graph_size = graph.size();
    args.node_count = nodes;
    args.out_supported = supported.get();
    LOOM_RETURN_IF_ERROR(plugin_->take(api.compile_supported(&args)));
    body.u64(nodes);
    for (uint64_t i = 0; i < nodes; ++i) body.boolean(supported[i]);
    return Status();
  }

  Status compile(WireReader& in, WireWriter& body) {
    const AlignedCopy graph(in.bytes("graph"));
    std::vector<std::pair<std::string, std::string>> options(in.count("option count", 4096, 16));
    for (auto& [k, v] : options) {
      k = in.str("option key");
      v = in.str("option value");
    }
    LOOM_RETURN_IF_ERROR(in.finish("compile"));
    const auto& api = plugin_->api();
    if (api.compile == nullptr) return failed_precondition("the plugin does not compile");
    std::vector<loom_option_t> values(options.size());
    std::vector<const loom_option_t*> pointers(options.size());
    for (size_t i = 0; i < options.size(); ++i) {
      values[i] = {LOOM_OPTION_STRUCT_SIZE, options[i].first.c_str(), options[i].second.c_str()};
      pointers[i] = &values[i];
    }
    loom_compile_args_t args{};
    args.struct_size = LOOM_COMPILE_ARGS_STRUCT_SIZE;
    args.plugin = plugin_->instance();
    args.graph = graph.data();
    args.graph_size = graph.size();
    args.option_count = pointers.size();
    args.options = pointers.data();
    Status status = plugin_->take(api.compile(&args));
    // The blob came from the host's allocate service, which is malloc here.
    std::unique_ptr<void, void (*)(void*)> blob(args.out_blob, std::free);
    LOOM_RETURN_IF_ERROR(status);
    if (args.out_blob == nullptr && args.out_blob_size != 0) {
      return internal_error("compile returned no blob but a size of " + std::to_string(args.out_blob_size));
    }
    body.bytes(std::span(static_cast<const std::byte*>(args.out_blob), args.out_blob_size));
    body.str(args.out_loader_key != nullptr ? std::string_view(args.out_loader_key, ::strnlen(args.out_loader_key, 4096)) : "");
    body.u32(args.out_format_version);
    return Status();
  }

  std::shared_ptr<LoadedPlugin> plugin_;
  std::shared_ptr<PendingLogs> logs_;
  std::shared_ptr<Trace> trace_;
  std::mutex mutex_;
  uint64_t next_id_ = 0;
  Table<Executable> executables_;
  Table<ChildBuffer> buffers_;
  Table<Fence> fences_;
};

void write_hello(WireWriter& out, const LoadedPlugin& plugin) {
  out.u32(wire::kHelloVersion);
  out.u32(plugin.abi_version());
  out.boolean(plugin.api().compile != nullptr);
  out.boolean(plugin.estimate_entry() != nullptr);
  out.u64(plugin.capabilities());
  out.u64(plugin.loader_key_ranges().size());
  for (const auto& key : plugin.loader_key_ranges()) {
    out.str(key.key);
    out.u32(key.format_min);
    out.u32(key.format_max);
  }
  out.u64(plugin.devices().size());
  for (const DeviceInfo& d : plugin.devices()) {
    out.str(d.uri);
    out.str(d.name);
    out.u32(static_cast<uint32_t>(d.kind));
    out.u64(d.device_memory_bytes);
    out.u64(d.host_visible_memory_bytes);
    out.u64(d.capabilities);
    out.u64(d.dtype_mask);
  }
}

int usage(const char* message) {
  std::fprintf(stderr,
               "loom-plugin-host: %s\n"
               "usage: loom-plugin-host --socket FD --manifest PATH [--abi MIN-MAX] [--option K=V]... "
               "[--probe]\n"
               "Runs one Loom plugin for a host process that started it; not for direct use.\n",
               message);
  return 2;
}

}  // namespace

int serve_plugin_process(int argc, char** argv) {
  int socket = -1;
  std::filesystem::path manifest_path;
  bool probe = false;
  HostOptions options;
  options.use_environment = false;
  options.use_default_folder = false;
  options.use_user_folder = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--probe") {
      probe = true;
    } else if (arg == "--socket") {
      const char* v = value();
      if (v == nullptr) return usage("--socket needs a value");
      socket = std::atoi(v);
    } else if (arg == "--manifest") {
      const char* v = value();
      if (v == nullptr) return usage("--manifest needs a value");
      manifest_path = v;
    } else if (arg == "--abi") {
      const char* v = value();
      unsigned a = 0, b = 0;
      if (v == nullptr || std::sscanf(v, "%u-%u", &a, &b) != 2) return usage("--abi needs MIN-MAX");
      options.abi_min = a;
      options.abi_max = b;
    } else if (arg == "--option") {
      const char* v = value();
      const char* eq = v != nullptr ? std::strchr(v, '=') : nullptr;
      if (eq == nullptr) return usage("--option needs KEY=VALUE");
      options.plugin_options.emplace_back(std::string(v, eq), std::string(eq + 1));
    } else {
      return usage(("unknown argument " + std::string(arg)).c_str());
    }
  }
  if (socket < 0 || manifest_path.empty()) return usage("--socket and --manifest are required");

  auto logs = std::make_shared<PendingLogs>();
  options.log_sink = [logs](loom_log_level_t level, std::string_view line) {
    std::lock_guard<std::mutex> lock(logs->mutex);
    if (logs->lines.size() < 4096) logs->lines.emplace_back(level, std::string(line));
  };
  auto trace = std::make_shared<Trace>();
  Result<std::shared_ptr<LoadedPlugin>> plugin = [&]() -> Result<std::shared_ptr<LoadedPlugin>> {
    LOOM_ASSIGN_OR_RETURN(PluginManifest manifest, parse_manifest(manifest_path));
    return LoadedPlugin::open_in_this_process(manifest, options, probe ? nullptr : trace);
  }();
  Server server(plugin.ok() ? *plugin : nullptr, logs, trace);
  WireWriter hello;
  WireWriter facts;
  if (plugin.ok()) write_hello(facts, **plugin);
  server.finish(hello, plugin.status(), &facts);
  if (!wire::send_message(socket, hello.data()).ok() || !plugin.ok() || probe) {
    // A probe ends here; the plugin's destructors are not run (the host
    // only wanted to know that loading survives).
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(plugin.ok() ? 0 : 3);
  }
  // The control channel: new channels, each served by a thread of its own,
  // until the host closes it (or dies).
  for (;;) {
    auto request = wire::receive_message(socket, -1);
    if (!request.ok()) break;
    WireReader in(request->bytes);
    const auto op = static_cast<Op>(in.u32("op"));
    Status status = in.finish("new channel");
    if (status.ok() && (op != Op::kNewChannel || request->fds.size() != 1)) {
      status = invalid_argument("the control channel takes only new channels");
    }
    if (status.ok()) {
      const int fd = request->fds[0];
      request->fds.clear();
      std::thread([&server, fd] { server.serve(fd); }).detach();
    }
    WireWriter reply;
    server.finish(reply, status, nullptr);
    if (!wire::send_message(socket, reply.data()).ok()) break;
  }
  // The host is gone or done with the plugin: leave without tearing down
  // what serving threads may still be using.
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(0);
}

}  // namespace loom::host
