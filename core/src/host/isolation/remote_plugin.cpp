// The host's side of an isolated plugin: starting its process, channels,
// calls and losing the plugin when its process dies or stops answering
// (the forwarding table itself is in remote_api.cpp).
#include "host/isolation/remote_plugin_impl.hpp"

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

#include "host/isolation/isolation_wire.hpp"
#include "host/isolation/log_channel.hpp"
#include "host/discovery/plugin_folders.hpp"

extern char** environ;

namespace loom::host {

using wire::Op;
using wire::WireReader;
using wire::WireWriter;

void RemotePluginDeleter::operator()(RemotePlugin* remote) const { delete remote; }

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
    std::string line = in.str("log line", kMaxRemoteText);
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
  std::string message = in.str("error message", kMaxRemoteText);
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
  auto reply = sent.ok() ? wire::receive_message(channel, timeout_ms, wire::kMaxMessageBytes,
                                                 wire::kHostSpinMicros)
                         : Result<wire::Message>(sent);
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
    // A host program linked with libloom.so, anywhere: the installed helper.
    if (auto library = loom_library_file()) {
      tried.push_back((library->parent_path() / ".." / "bin" / "loom-plugin-host").lexically_normal());
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
  const uint32_t hello = in.u32("report version");
  if (in.ok() && hello != wire::kHelloVersion) {
    return incompatible("the plugin process (loom-plugin-host) reports in layout " + std::to_string(hello) +
                        ", this host reads layout " + std::to_string(wire::kHelloVersion) +
                        ": it is from another Loom build (check $LOOM_PLUGIN_HOST)");
  }
  facts->abi_version = in.u32("abi version");
  r.has_compile_ = in.boolean("has compile");
  r.has_estimate_ = in.boolean("has estimate");
  // LOOM_PLUGIN_CAP_* of the plugin as its process negotiated it (0 below
  // ABI 1.2); bits this host does not know are dropped.
  facts->capabilities = in.u64("plugin capabilities") & LOOM_PLUGIN_CAP_OPEN_SHAPES;
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
                                            loom_plugin_t** out_instance, bool* out_about_plugin) {
  if (out_about_plugin != nullptr) *out_about_plugin = false;
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
  if (out_about_plugin != nullptr) *out_about_plugin = true;

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
  fill_forwarding_table(*r, facts.abi_version);
  *out_facts = std::move(facts);
  *out_api = &r->api_;
  *out_instance = reinterpret_cast<loom_plugin_t*>(&r->self_);
  return r;
}

}  // namespace loom::host
