// Plugin isolation, the host's side: the RemotePlugin object shared by its
// lifecycle (remote_plugin.cpp) and its forwarding function table
// (remote_api.cpp). Private to those two files.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "host/isolation/isolation_wire.hpp"
#include "host/isolation/remote_plugin.hpp"

namespace loom::host {

// The largest log line or error message taken from the child.
inline constexpr uint64_t kMaxRemoteText = 64 * 1024;

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
  Result<std::vector<std::byte>> call(const wire::WireWriter& request, std::span<const int> fds,
                                      int timeout_ms, const char* what);
  int call_timeout_ms() const { return call_timeout_ms_; }

  // Reads the log lines and status at the head of a reply; the body is left
  // in `reader`.
  Status take_reply(wire::WireReader& reader);
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

// Fills `r.api_` with the forwarding entries (the optional ones only when
// the child's plugin has them).
void fill_forwarding_table(RemotePlugin& r, uint32_t abi_version);

}  // namespace loom::host
