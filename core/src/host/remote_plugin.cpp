// The host's side of an isolated plugin: starting its process, the
// forwarding function table, channels, shared-memory buffers, and losing
// the plugin when its process dies or stops answering.
#include "host/remote_plugin.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <cstring>
#include <thread>

#include "host/isolation_wire.hpp"
#include "host/log_channel.hpp"

extern char** environ;

namespace loom::host {

using wire::Op;
using wire::WireReader;
using wire::WireWriter;

namespace {

// The largest log line or error message taken from the child.
constexpr uint64_t kMaxText = 64 * 1024;

struct ProxyStatus {
  loom_status_code_t code;
  std::string message;
};

loom_status_t* to_c(const Status& status) {
  if (status.ok()) return nullptr;
  auto* s = new (std::nothrow) ProxyStatus{static_cast<loom_status_code_t>(status.code()), status.message()};
  return reinterpret_cast<loom_status_t*>(s);
}

}  // namespace

class RemotePlugin {
 public:
  struct Device {
    RemotePlugin* remote;
    size_t index;
    DeviceInfo info;
  };
  struct Executable {
    RemotePlugin* remote;
    uint64_t id;
  };
  struct Buffer {
    RemotePlugin* remote;
    uint64_t id;
    wire::SharedMemory shared;
    bool mirrored;
  };
  struct Fence {
    RemotePlugin* remote;
    uint64_t id;
  };

  RemotePlugin(std::string name, std::shared_ptr<LogChannel> log, int call_timeout_ms)
      : name_(std::move(name)), log_(std::move(log)), call_timeout_ms_(call_timeout_ms) {}
  ~RemotePlugin();

  // One request and its reply: the reply's body (after the child's log
  // lines and status), or the child's error, or the loss of the child.
  Result<std::vector<std::byte>> call(const WireWriter& request, std::span<const int> fds,
                                      int timeout_ms, const char* what);
  int call_timeout_ms() const { return call_timeout_ms_; }

  // Reads the log lines and status at the head of a reply; the body is left
  // in `reader`.
  Status take_reply(WireReader& reader);
  // Marks the plugin lost after `what` failed with `why`; returns the error
  // for that call.
  Status lose(const char* what, const Status& why);
  Status lost_status() const;
  // A string that lives as long as this object, equal to `key`.
  const char* intern_key(const std::string& key);

  std::string name_;
  std::shared_ptr<LogChannel> log_;
  int call_timeout_ms_;
  pid_t pid_ = -1;
  int control_ = -1;
  std::mutex control_mutex_;  // one request at a time on the control channel
  std::mutex channels_mutex_;
  std::vector<int> idle_channels_;
  std::atomic<bool> lost_{false};
  mutable std::mutex lost_mutex_;
  std::string lost_reason_;
  bool reaped_ = false;
  int exit_status_ = 0;
  std::vector<std::unique_ptr<Device>> devices_;
  bool has_compile_ = false;
  bool has_estimate_ = false;
  loom_plugin_api_t api_{};
  RemotePlugin* self_ = this;  // its address is the instance handle
  std::vector<LoadedPlugin::LoaderKeyRange> keys_;
  std::mutex interned_mutex_;
  std::deque<std::string> interned_;

  // Waits up to `grace_ms` for the child to exit, then kills it; true when
  // it exited by itself. Records its wait status (-1: unknown).
  bool reap(int grace_ms);

 private:
  Result<int> take_channel();
  void return_channel(int fd);
};

void RemotePluginDeleter::operator()(RemotePlugin* remote) const { delete remote; }

namespace {

// The instance handle points at RemotePlugin::self_.
RemotePlugin* remote_of(loom_plugin_t* p) { return *reinterpret_cast<RemotePlugin**>(p); }
RemotePlugin::Device* dev(loom_device_t* d) { return reinterpret_cast<RemotePlugin::Device*>(d); }
RemotePlugin::Executable* exe(loom_executable_t* e) { return reinterpret_cast<RemotePlugin::Executable*>(e); }
RemotePlugin::Buffer* buf(loom_buffer_t* b) { return reinterpret_cast<RemotePlugin::Buffer*>(b); }
RemotePlugin::Fence* fen(loom_fence_t* f) { return reinterpret_cast<RemotePlugin::Fence*>(f); }

// ---- the forwarding table ----

loom_status_code_t p_status_code(const loom_status_t* s) {
  return reinterpret_cast<const ProxyStatus*>(s)->code;
}
const char* p_status_message(const loom_status_t* s) {
  return reinterpret_cast<const ProxyStatus*>(s)->message.c_str();
}
void p_status_destroy(loom_status_t* s) { delete reinterpret_cast<ProxyStatus*>(s); }

const loom_plugin_info_t* p_plugin_info() {
  static const loom_plugin_info_t info = {LOOM_PLUGIN_INFO_STRUCT_SIZE, "isolated", "", "", 0, nullptr};
  return &info;
}
loom_status_t* p_plugin_create(loom_plugin_create_args_t*) {
  return to_c(failed_precondition("an isolated plugin is created in its own process"));
}
void p_plugin_destroy(loom_plugin_t*) {}

loom_status_t* p_check_available(loom_plugin_t* p) {
  RemotePlugin* r = remote_of(p);
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kCheckAvailable));
  return to_c(r->call(w, {}, r->call_timeout_ms(), "plugin_check_available").status());
}

loom_status_t* p_device_count(loom_plugin_t* p, size_t* out) {
  *out = remote_of(p)->devices_.size();
  return nullptr;
}
loom_status_t* p_device_get(loom_plugin_t* p, size_t index, loom_device_t** out) {
  RemotePlugin* r = remote_of(p);
  if (index >= r->devices_.size()) return to_c(out_of_range("device index " + std::to_string(index)));
  *out = reinterpret_cast<loom_device_t*>(r->devices_[index].get());
  return nullptr;
}
loom_status_t* p_device_info(loom_device_t* d, loom_device_info_t* info) {
  const DeviceInfo& in = dev(d)->info;
  loom_device_info_t full{};
  full.struct_size = info->struct_size;
  full.uri = in.uri.c_str();
  full.name = in.name.c_str();
  full.kind = static_cast<loom_device_kind_t>(in.kind);
  full.device_memory_bytes = in.device_memory_bytes;
  full.host_visible_memory_bytes = in.host_visible_memory_bytes;
  full.capabilities = in.capabilities;
  full.dtype_mask = in.dtype_mask;
  std::memcpy(info, &full, std::min(info->struct_size, sizeof full));
  return nullptr;
}

void write_blob_args(WireWriter& w, Op op, loom_device_t* device, const char* key, uint32_t format,
                     const void* blob, size_t size) {
  w.u32(static_cast<uint32_t>(op));
  w.u64(dev(device)->index);
  w.str(key != nullptr ? key : "");
  w.u32(format);
  w.bytes(std::span(static_cast<const std::byte*>(blob), blob != nullptr ? size : 0));
}

loom_status_t* p_executable_check(loom_executable_check_args_t* a) {
  RemotePlugin* r = dev(a->device)->remote;
  WireWriter w;
  write_blob_args(w, Op::kExecutableCheck, a->device, a->loader_key, a->format_version, a->blob, a->blob_size);
  return to_c(r->call(w, {}, r->call_timeout_ms(), "executable_check").status());
}

loom_status_t* p_executable_estimate(loom_executable_estimate_args_t* a) {
  RemotePlugin* r = dev(a->device)->remote;
  WireWriter w;
  write_blob_args(w, Op::kExecutableEstimate, a->device, a->loader_key, a->format_version, a->blob, a->blob_size);
  auto body = r->call(w, {}, r->call_timeout_ms(), "executable_estimate");
  if (!body.ok()) return to_c(body.status());
  WireReader in(*body);
  a->out_time_ns = in.u64("estimate");
  return to_c(in.finish("executable_estimate reply"));
}

loom_status_t* p_executable_load(loom_executable_load_args_t* a) {
  RemotePlugin* r = dev(a->device)->remote;
  WireWriter w;
  write_blob_args(w, Op::kExecutableLoad, a->device, a->loader_key, a->format_version, a->blob, a->blob_size);
  w.u64(a->spec_count);
  for (size_t i = 0; i < a->spec_count; ++i) {
    w.str(a->specs[i]->key != nullptr ? a->specs[i]->key : "");
    w.str(a->specs[i]->value != nullptr ? a->specs[i]->value : "");
  }
  auto body = r->call(w, {}, r->call_timeout_ms(), "executable_load");
  if (!body.ok()) return to_c(body.status());
  WireReader in(*body);
  const uint64_t id = in.u64("executable id");
  if (Status s = in.finish("executable_load reply"); !s.ok()) return to_c(s);
  a->out_executable = reinterpret_cast<loom_executable_t*>(new RemotePlugin::Executable{r, id});
  return nullptr;
}

void p_executable_destroy(loom_executable_t* e) {
  if (e == nullptr) return;
  std::unique_ptr<RemotePlugin::Executable> owned(exe(e));
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kExecutableDestroy));
  w.u64(owned->id);
  (void)owned->remote->call(w, {}, owned->remote->call_timeout_ms(), "executable_destroy");
}

loom_status_t* p_execute(loom_execute_args_t* a) {
  RemotePlugin* r = exe(a->executable)->remote;
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kExecute));
  w.u64(exe(a->executable)->id);
  w.u64(a->input_count + a->output_count);
  w.u64(a->input_count);
  for (size_t t = 0; t < a->input_count + a->output_count; ++t) {
    const loom_tensor_t* tensor = t < a->input_count ? a->inputs[t] : a->outputs[t - a->input_count];
    if (tensor->buffer == nullptr) {
      return to_c(invalid_argument("tensor " + std::to_string(t) +
                                   " is in host memory; the devices of an isolated plugin take buffers"));
    }
    w.u32(static_cast<uint32_t>(tensor->dtype));
    w.u64(tensor->rank);
    for (uint32_t d = 0; d < tensor->rank && d < LOOM_MAX_RANK; ++d) w.i64(tensor->shape[d]);
    w.u64(buf(tensor->buffer)->id);
    w.u64(tensor->offset);
    w.u64(tensor->byte_size);
  }
  w.u64(a->wait_fence_count);
  for (size_t i = 0; i < a->wait_fence_count; ++i) w.u64(fen(a->wait_fences[i])->id);
  w.u64(a->signal_fence != nullptr ? fen(a->signal_fence)->id : 0);
  return to_c(r->call(w, {}, r->call_timeout_ms(), "execute").status());
}

loom_status_t* p_buffer_allocate(loom_buffer_allocate_args_t* a) {
  RemotePlugin* r = dev(a->device)->remote;
  auto shared = wire::SharedMemory::create(a->size, "loom-buffer");
  if (!shared.ok()) return to_c(shared.status());
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kBufferAllocate));
  w.u64(dev(a->device)->index);
  w.u64(a->size);
  const int fd = shared->fd();
  auto body = r->call(w, std::span(&fd, 1), r->call_timeout_ms(), "buffer_allocate");
  if (!body.ok()) return to_c(body.status());
  WireReader in(*body);
  const uint64_t id = in.u64("buffer id");
  const bool mirrored = in.boolean("mirrored");
  if (Status s = in.finish("buffer_allocate reply"); !s.ok()) return to_c(s);
  a->out_buffer = reinterpret_cast<loom_buffer_t*>(
      new RemotePlugin::Buffer{r, id, std::move(*shared), mirrored});
  return nullptr;
}

void p_buffer_free(loom_buffer_t* b) {
  if (b == nullptr) return;
  std::unique_ptr<RemotePlugin::Buffer> owned(buf(b));
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kBufferFree));
  w.u64(owned->id);
  (void)owned->remote->call(w, {}, owned->remote->call_timeout_ms(), "buffer_free");
}

Status sync(RemotePlugin::Buffer* b, Op op, uint64_t offset, uint64_t size) {
  if (!b->mirrored) return b->remote->lost_status();
  WireWriter w;
  w.u32(static_cast<uint32_t>(op));
  w.u64(b->id);
  w.u64(offset);
  w.u64(size);
  return b->remote->call(w, {}, b->remote->call_timeout_ms(), op == Op::kBufferPush ? "buffer copy in" : "buffer copy out").status();
}

Status check_copy(const RemotePlugin::Buffer* b, uint64_t offset, uint64_t size) {
  if (offset > b->shared.size() || size > b->shared.size() - offset) {
    return out_of_range("copy of " + std::to_string(size) + " bytes at offset " + std::to_string(offset) +
                        " past a buffer of " + std::to_string(b->shared.size()) + " bytes");
  }
  return Status();
}

loom_status_t* p_buffer_map(loom_buffer_t* b, void** out) {
  if (Status s = sync(buf(b), Op::kBufferPull, 0, buf(b)->shared.size()); !s.ok()) return to_c(s);
  *out = buf(b)->shared.data();
  return nullptr;
}
void p_buffer_unmap(loom_buffer_t* b) { (void)sync(buf(b), Op::kBufferPush, 0, buf(b)->shared.size()); }

loom_status_t* p_copy_from_host(loom_buffer_copy_args_t* a) {
  RemotePlugin::Buffer* b = buf(a->buffer);
  if (Status s = check_copy(b, a->buffer_offset, a->size); !s.ok()) return to_c(s);
  std::memcpy(b->shared.data() + a->buffer_offset, a->host_pointer, a->size);
  return to_c(sync(b, Op::kBufferPush, a->buffer_offset, a->size));
}

loom_status_t* p_copy_to_host(loom_buffer_copy_args_t* a) {
  RemotePlugin::Buffer* b = buf(a->buffer);
  if (Status s = check_copy(b, a->buffer_offset, a->size); !s.ok()) return to_c(s);
  if (Status s = sync(b, Op::kBufferPull, a->buffer_offset, a->size); !s.ok()) return to_c(s);
  std::memcpy(a->host_pointer, b->shared.data() + a->buffer_offset, a->size);
  return nullptr;
}

loom_status_t* p_fence_create(loom_device_t* d, loom_fence_t** out) {
  RemotePlugin* r = dev(d)->remote;
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kFenceCreate));
  w.u64(dev(d)->index);
  auto body = r->call(w, {}, r->call_timeout_ms(), "fence_create");
  if (!body.ok()) return to_c(body.status());
  WireReader in(*body);
  const uint64_t id = in.u64("fence id");
  if (Status s = in.finish("fence_create reply"); !s.ok()) return to_c(s);
  *out = reinterpret_cast<loom_fence_t*>(new RemotePlugin::Fence{r, id});
  return nullptr;
}

void p_fence_destroy(loom_fence_t* f) {
  if (f == nullptr) return;
  std::unique_ptr<RemotePlugin::Fence> owned(fen(f));
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kFenceDestroy));
  w.u64(owned->id);
  (void)owned->remote->call(w, {}, owned->remote->call_timeout_ms(), "fence_destroy");
}

loom_status_t* fence_call(loom_fence_t* f, Op op, uint64_t timeout_ns, bool* out_signaled, const char* what) {
  RemotePlugin* r = fen(f)->remote;
  WireWriter w;
  w.u32(static_cast<uint32_t>(op));
  w.u64(fen(f)->id);
  int timeout_ms = r->call_timeout_ms();
  if (op == Op::kFenceWait) {
    w.u64(timeout_ns);
    // The child's wait, plus the usual allowance for an answer.
    const uint64_t wait_ms = timeout_ns / 1'000'000;
    timeout_ms = timeout_ns == UINT64_MAX || wait_ms > 24ull * 3600 * 1000
                     ? -1
                     : static_cast<int>(wait_ms) + std::max(timeout_ms, 0);
  }
  auto body = r->call(w, {}, timeout_ms, what);
  if (!body.ok()) return to_c(body.status());
  WireReader in(*body);
  if (out_signaled != nullptr) *out_signaled = in.boolean("signaled");
  return to_c(in.finish("fence reply"));
}

loom_status_t* p_fence_signal(loom_fence_t* f) { return fence_call(f, Op::kFenceSignal, 0, nullptr, "fence_signal"); }
loom_status_t* p_fence_wait(loom_fence_t* f, uint64_t t) { return fence_call(f, Op::kFenceWait, t, nullptr, "fence_wait"); }
loom_status_t* p_fence_query(loom_fence_t* f, bool* out) { return fence_call(f, Op::kFenceQuery, 0, out, "fence_query"); }

loom_status_t* p_compile_supported(loom_compile_supported_args_t* a) {
  RemotePlugin* r = remote_of(a->plugin);
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kCompileSupported));
  w.bytes(std::span(static_cast<const std::byte*>(a->graph), a->graph_size));
  w.u64(a->node_count);
  auto body = r->call(w, {}, r->call_timeout_ms(), "compile_supported");
  if (!body.ok()) return to_c(body.status());
  WireReader in(*body);
  const uint64_t n = in.count("node count", a->node_count, 4);
  if (in.ok() && n != a->node_count) return to_c(data_loss("compile_supported answered for " + std::to_string(n) + " nodes"));
  for (uint64_t i = 0; i < n; ++i) a->out_supported[i] = in.boolean("supported");
  return to_c(in.finish("compile_supported reply"));
}

loom_status_t* p_compile(loom_compile_args_t* a) {
  RemotePlugin* r = remote_of(a->plugin);
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kCompile));
  w.bytes(std::span(static_cast<const std::byte*>(a->graph), a->graph_size));
  w.u64(a->option_count);
  for (size_t i = 0; i < a->option_count; ++i) {
    w.str(a->options[i]->key != nullptr ? a->options[i]->key : "");
    w.str(a->options[i]->value != nullptr ? a->options[i]->value : "");
  }
  auto body = r->call(w, {}, r->call_timeout_ms(), "compile");
  if (!body.ok()) return to_c(body.status());
  WireReader in(*body);
  auto blob = in.bytes("blob");
  const std::string key = in.str("loader key", 256);
  const uint32_t format = in.u32("format version");
  if (Status s = in.finish("compile reply"); !s.ok()) return to_c(s);
  // The host frees the blob with its `free` service (std::free), and takes
  // the loader key as one of the plugin's static strings: the key is matched
  // against the plugin's own (kept in the loaded plugin's records).
  void* out = std::malloc(blob.empty() ? 1 : blob.size());
  if (out == nullptr) return to_c(resource_exhausted("no memory for a compiled blob of " + std::to_string(blob.size()) + " bytes"));
  std::memcpy(out, blob.data(), blob.size());
  a->out_blob = out;
  a->out_blob_size = blob.size();
  a->out_format_version = format;
  a->out_loader_key = r->intern_key(key);
  return nullptr;
}

}  // namespace

// ---- RemotePlugin ----

const char* RemotePlugin::intern_key(const std::string& key) {
  for (const auto& k : keys_) {
    if (k.key == key) return k.key.c_str();
  }
  std::lock_guard<std::mutex> lock(interned_mutex_);
  for (const auto& k : interned_) {
    if (k == key) return k.c_str();
  }
  return interned_.emplace_back(key).c_str();
}

Status RemotePlugin::lost_status() const {
  if (!lost_.load(std::memory_order_acquire)) return Status();
  std::lock_guard<std::mutex> lock(lost_mutex_);
  return device_lost(lost_reason_);
}

bool RemotePlugin::reap(int grace_ms) {
  if (reaped_ || pid_ <= 0) return true;
  int status = 0;
  for (int waited = 0;; waited += 5) {
    pid_t got = ::waitpid(pid_, &status, WNOHANG);
    if (got == pid_) {
      reaped_ = true;
      exit_status_ = status;
      return true;
    }
    if (got < 0 && errno != EINTR) {  // not our child any more (SIGCHLD ignored?)
      reaped_ = true;
      exit_status_ = -1;
      return true;
    }
    if (waited >= grace_ms) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid_, SIGKILL);
  pid_t got;
  do {
    got = ::waitpid(pid_, &status, 0);
  } while (got < 0 && errno == EINTR);
  reaped_ = true;
  exit_status_ = got == pid_ ? status : -1;
  return false;
}

Status RemotePlugin::lose(const char* what, const Status& why) {
  const bool timed_out = why.code() == StatusCode::kDeadlineExceeded;
  std::lock_guard<std::mutex> lock(lost_mutex_);
  if (!lost_.load(std::memory_order_acquire)) {
    std::string reason = "plugin '" + name_ + "' (isolated, process " + std::to_string(pid_) + ") ";
    if (timed_out) {
      reap(0);
      reason += "did not answer " + std::string(what) + " within " +
                std::to_string(call_timeout_ms_) + " ms and was killed";
    } else if (why.code() == StatusCode::kUnavailable) {
      // A closed channel: the process died, or is about to.
      if (reap(1000)) {
        reason += (exit_status_ == -1 ? std::string("is gone") : wire::describe_exit(exit_status_)) +
                  " during " + what;
      } else {
        reason += "closed its channel during " + std::string(what) + " and was killed";
      }
    } else {
      reap(0);
      reason += "broke the protocol during " + std::string(what) + " (" + why.message() +
                ") and was killed";
    }
    lost_reason_ = std::move(reason);
    lost_.store(true, std::memory_order_release);
  }
  return Status(timed_out ? StatusCode::kDeadlineExceeded : StatusCode::kDeviceLost, lost_reason_);
}

Result<int> RemotePlugin::take_channel() {
  {
    std::lock_guard<std::mutex> lock(channels_mutex_);
    if (!idle_channels_.empty()) {
      int fd = idle_channels_.back();
      idle_channels_.pop_back();
      return fd;
    }
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return resource_exhausted(std::string("socketpair: ") + std::strerror(errno));
  }
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kNewChannel));
  Status status;
  {
    std::lock_guard<std::mutex> lock(control_mutex_);
    status = wire::send_message(control_, w.data(), std::span(&pair[1], 1));
    ::close(pair[1]);
    if (status.ok()) {
      auto reply = wire::receive_message(control_, call_timeout_ms_);
      if (!reply.ok()) {
        status = reply.status();
      } else {
        WireReader in(reply->bytes);
        status = take_reply(in);
        if (status.ok()) status = in.finish("new channel reply");
      }
    }
  }
  if (!status.ok()) {
    ::close(pair[0]);
    if (status.code() == StatusCode::kDataLoss || status.code() == StatusCode::kInvalidArgument) {
      return status;
    }
    return lose("opening a channel", status);
  }
  return pair[0];
}

void RemotePlugin::return_channel(int fd) {
  std::lock_guard<std::mutex> lock(channels_mutex_);
  idle_channels_.push_back(fd);
}

Status RemotePlugin::take_reply(WireReader& in) {
  const uint64_t lines = in.count("log line count", 4096, 12);
  for (uint64_t i = 0; i < lines && in.ok(); ++i) {
    uint32_t level = in.u32("log level");
    std::string line = in.str("log line", kMaxText);
    if (!in.ok()) break;
    if (level > LOOM_LOG_ERROR) level = LOOM_LOG_ERROR;
    // The child's channel wrote "<plugin>: <line>"; this host's adds it again.
    const std::string prefix = name_ + ": ";
    std::string_view text = line;
    if (text.substr(0, prefix.size()) == prefix) text.remove_prefix(prefix.size());
    log_->write(static_cast<loom_log_level_t>(level), name_, text);
  }
  const uint64_t events = in.count("trace event count", 1u << 20, 36);
  std::shared_ptr<Trace> trace = events > 0 ? log_->active_trace() : nullptr;
  for (uint64_t i = 0; i < events && in.ok(); ++i) {
    Trace::Event e;
    const uint32_t phase = in.u32("trace phase");
    e.track = in.str("trace track", 512);
    e.category = in.str("trace category", 512);
    e.name = in.str("trace name", 4096);
    e.timestamp_ns = in.u64("trace timestamp");
    // Only a plugin's own kinds of event, on this plugin's tracks.
    const bool own_track = e.track == name_ || e.track.rfind(name_ + "://", 0) == 0;
    if (!in.ok() || trace == nullptr || !own_track ||
        phase > static_cast<uint32_t>(Trace::Phase::kInstant)) {
      continue;
    }
    e.phase = static_cast<Trace::Phase>(phase);
    if (e.phase == Trace::Phase::kComplete) continue;
    trace->record(std::move(e));
  }
  const uint32_t code = in.u32("status code");
  if (!in.ok()) return in.finish("reply");
  if (code == 0) return Status();
  std::string message = in.str("error message", kMaxText);
  if (!in.ok()) return in.finish("reply");
  if (code > static_cast<uint32_t>(LOOM_STATUS_ALREADY_EXISTS)) {
    return internal_error("(unknown status code " + std::to_string(code) + ") " + message);
  }
  return Status(static_cast<StatusCode>(code), std::move(message));
}

Result<std::vector<std::byte>> RemotePlugin::call(const WireWriter& request, std::span<const int> fds,
                                                  int timeout_ms, const char* what) {
  LOOM_RETURN_IF_ERROR(lost_status());
  LOOM_ASSIGN_OR_RETURN(int channel, take_channel());
  Status sent = wire::send_message(channel, request.view(), fds);
  auto reply = sent.ok() ? wire::receive_message(channel, timeout_ms) : Result<wire::Message>(sent);
  if (!reply.ok()) {
    ::close(channel);
    if (reply.status().code() == StatusCode::kDataLoss ||
        reply.status().code() == StatusCode::kResourceExhausted) {
      // The child answered something this host will not read: it is not
      // trusted any more.
      return lose(what, device_lost(reply.status().message()));
    }
    return lose(what, reply.status());
  }
  return_channel(channel);
  WireReader in(reply->bytes);
  Status status = take_reply(in);
  if (!status.ok()) return status;
  auto body = in.rest();
  return std::vector<std::byte>(body.begin(), body.end());
}

RemotePlugin::~RemotePlugin() {
  {
    std::lock_guard<std::mutex> lock(channels_mutex_);
    for (int fd : idle_channels_) ::close(fd);
    idle_channels_.clear();
  }
  if (control_ >= 0) ::close(control_);
  // The child leaves when its control channel closes; one that does not
  // within a second is killed.
  reap(1000);
}

// ---- starting the child ----

Result<std::filesystem::path> find_plugin_host_program(const HostOptions& options) {
  std::vector<std::filesystem::path> tried;
  if (!options.plugin_host_program.empty()) {
    tried.push_back(options.plugin_host_program);
  } else {
    if (const char* env = std::getenv("LOOM_PLUGIN_HOST"); env != nullptr && env[0] != '\0') {
      tried.emplace_back(env);
    }
    std::error_code ec;
    std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      tried.push_back(exe.parent_path() / "loom-plugin-host");
      tried.push_back((exe.parent_path() / ".." / "libexec" / "loom" / "loom-plugin-host").lexically_normal());
    }
  }
  for (const auto& path : tried) {
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  std::string list;
  for (const auto& path : tried) list += (list.empty() ? "" : ", ") + path.string();
  return not_found("loom-plugin-host, which runs plugins in a process of their own, is not at " +
                   (list.empty() ? std::string("any known place") : list) +
                   " (set $LOOM_PLUGIN_HOST to its path)");
}

namespace {

Status read_hello(RemotePlugin& r, WireReader& in, const PluginManifest& manifest, RemoteFacts* facts) {
  facts->abi_version = in.u32("abi version");
  r.has_compile_ = in.boolean("has compile");
  r.has_estimate_ = in.boolean("has estimate");
  const uint64_t keys = in.count("loader key count", 64, 16);
  for (uint64_t i = 0; i < keys && in.ok(); ++i) {
    LoadedPlugin::LoaderKeyRange key;
    key.key = in.str("loader key", 128);
    key.format_min = in.u32("format min");
    key.format_max = in.u32("format max");
    facts->loader_keys.push_back(std::move(key));
  }
  const uint64_t devices = in.count("device count", kMaxDevicesPerPlugin, 56);
  for (uint64_t i = 0; i < devices && in.ok(); ++i) {
    auto d = std::make_unique<RemotePlugin::Device>();
    d->remote = &r;
    d->index = i;
    DeviceInfo& info = d->info;
    info.plugin = manifest.name;
    info.uri = in.str("device uri", 512);
    info.name = in.str("device name", 4 * kMaxDeviceNameLength);
    const uint32_t kind = in.u32("device kind");
    info.kind = static_cast<DeviceKind>(kind <= LOOM_DEVICE_KIND_VIRTUAL ? kind : 0xff);
    info.device_memory_bytes = in.u64("device memory");
    info.host_visible_memory_bytes = in.u64("host-visible memory");
    const uint64_t caps = in.u64("capabilities");
    info.dtype_mask = in.u64("dtype mask");
    // The child's memory is not the host's: buffers only, mapped here.
    info.capabilities = (caps & ~(LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE | LOOM_DEVICE_CAP_HOST_POINTER_IMPORT)) |
                        LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY;
    if (info.host_visible_memory_bytes == 0) info.host_visible_memory_bytes = info.device_memory_bytes;
    r.devices_.push_back(std::move(d));
  }
  return in.finish("the plugin process's report");
}

// Starts the child with `socket` as its fd 3.
Result<pid_t> spawn_child(const std::filesystem::path& program, int socket,
                          const std::vector<std::string>& args) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, socket, 3);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> all = {program.string()};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    return unavailable("cannot start " + program.string() + ": " + std::strerror(err));
  }
  return pid;
}

}  // namespace

Result<RemotePluginPtr> start_remote_plugin(const PluginManifest& manifest, const HostOptions& options,
                                            std::shared_ptr<LogChannel> log, bool probe,
                                            RemoteFacts* out_facts, const loom_plugin_api_t** out_api,
                                            loom_plugin_t** out_instance) {
  LOOM_ASSIGN_OR_RETURN(std::filesystem::path program, find_plugin_host_program(options));
  // A probe's log lines would repeat those of the load that follows it.
  if (probe) log = std::make_shared<LogChannel>([](loom_log_level_t, std::string_view) {});
  RemotePluginPtr r(new RemotePlugin(manifest.name, std::move(log),
                                     static_cast<int>(options.isolated_call_timeout.count())));
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return resource_exhausted(std::string("socketpair: ") + std::strerror(errno));
  }
  // Above the standard descriptors, so that dup2 onto 3 always copies (and
  // clears close-on-exec).
  const int child_end = ::fcntl(pair[1], F_DUPFD_CLOEXEC, 10);
  ::close(pair[1]);
  r->control_ = pair[0];
  if (child_end < 0) return resource_exhausted(std::string("fcntl: ") + std::strerror(errno));

  std::vector<std::string> args = {"--socket", "3", "--manifest", manifest.manifest_path.string(),
                                   "--abi",
                                   std::to_string(std::max(options.abi_min, manifest.abi_min)) + "-" +
                                       std::to_string(std::min(options.abi_max, manifest.abi_max))};
  for (const auto& [key, value] : options.plugin_options) {
    args.push_back("--option");
    args.push_back(key + "=" + value);
  }
  if (probe) args.push_back("--probe");
  auto pid = spawn_child(program, child_end, args);
  ::close(child_end);
  if (!pid.ok()) return pid.status();
  r->pid_ = *pid;

  const auto timeout = options.probe_timeout;
  const std::string who = std::string(probe ? "probe" : "isolated plugin") + " process " + std::to_string(*pid);
  auto hello = wire::receive_message(r->control_, static_cast<int>(timeout.count()));
  if (!hello.ok()) {
    if (hello.status().code() == StatusCode::kDeadlineExceeded) {
      r->reap(0);
      return deadline_exceeded(who + " did not finish loading the plugin within " +
                               std::to_string(timeout.count()) + " ms and was killed (a hang in "
                               "its constructors, query, plugin_create or device listing?)");
    }
    r->reap(1000);
    return unavailable(who + " " + (r->exit_status_ == -1 ? std::string("vanished") : wire::describe_exit(r->exit_status_)) +
                       " while loading the plugin, before it reported (a crash or an exit in its "
                       "constructors, query, plugin_create or device listing?)");
  }
  WireReader in(hello->bytes);
  Status loaded = r->take_reply(in);
  if (!loaded.ok()) {
    r->reap(1000);
    return loaded;
  }
  RemoteFacts facts;
  facts.pid = *pid;
  if (Status s = read_hello(*r, in, manifest, &facts); !s.ok()) {
    r->reap(0);
    return s;
  }
  r->keys_ = facts.loader_keys;
  if (probe) {
    r->reap(2000);
    if (!(WIFEXITED(r->exit_status_) && WEXITSTATUS(r->exit_status_) == 0)) {
      return unavailable(who + " " + wire::describe_exit(r->exit_status_) +
                         " after loading the plugin (a crash or an exit in its destructors?)");
    }
  }
  loom_plugin_api_t& api = r->api_;
  api.struct_size = LOOM_PLUGIN_API_STRUCT_SIZE;
  api.abi_version = facts.abi_version;
  api.status_code = p_status_code;
  api.status_message = p_status_message;
  api.status_destroy = p_status_destroy;
  api.plugin_info = p_plugin_info;
  api.plugin_create = p_plugin_create;
  api.plugin_destroy = p_plugin_destroy;
  api.plugin_check_available = p_check_available;
  api.device_count = p_device_count;
  api.device_get = p_device_get;
  api.device_info = p_device_info;
  api.executable_check = p_executable_check;
  api.executable_load = p_executable_load;
  api.executable_destroy = p_executable_destroy;
  api.execute = p_execute;
  api.buffer_allocate = p_buffer_allocate;
  api.buffer_free = p_buffer_free;
  api.buffer_map = p_buffer_map;
  api.buffer_unmap = p_buffer_unmap;
  api.buffer_copy_from_host = p_copy_from_host;
  api.buffer_copy_to_host = p_copy_to_host;
  api.buffer_import_host = nullptr;
  api.fence_create = p_fence_create;
  api.fence_destroy = p_fence_destroy;
  api.fence_signal = p_fence_signal;
  api.fence_wait = p_fence_wait;
  api.fence_query = p_fence_query;
  api.compile_supported = r->has_compile_ ? p_compile_supported : nullptr;
  api.compile = r->has_compile_ ? p_compile : nullptr;
  api.executable_estimate = r->has_estimate_ ? p_executable_estimate : nullptr;
  *out_facts = std::move(facts);
  *out_api = &r->api_;
  *out_instance = reinterpret_cast<loom_plugin_t*>(&r->self_);
  return r;
}

}  // namespace loom::host
