// The wire between the host and an isolated plugin's process
// (loom-plugin-host): messages over a local SOCK_SEQPACKET socket, file
// descriptors passed beside them (memfd shared memory), and the encoding of
// their fields.
//
// Each message is one packet: an op or status word, then fields written by
// WireWriter. A message larger than kInlineMessageBytes travels in a memfd
// sent with a short packet that says so, so blobs and graphs of any size
// cross without a socket-buffer limit. The reader of a message never trusts
// it: every field read is bounds-checked, and a short or malformed message
// is an error naming the field, never a read past its end. The host treats
// everything the child sends this way, since the child runs vendor code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/status.hpp"

namespace loom::host::wire {

// The requests a host sends; the child answers each with a reply.
enum class Op : uint32_t {
  kHello = 1,          // child -> host, once, after loading: the plugin's facts
  kNewChannel,         // host -> child on the control channel: one fd, a new channel
  kCheckAvailable,
  kExecutableCheck,
  kExecutableEstimate,
  kExecutableLoad,
  kExecutableDestroy,
  kExecute,
  kBufferAllocate,     // with the memfd that backs the buffer
  kBufferFree,
  kBufferPush,         // shared memory -> the plugin's buffer
  kBufferPull,         // the plugin's buffer -> shared memory
  kFenceCreate,
  kFenceDestroy,
  kFenceSignal,
  kFenceWait,
  kFenceQuery,
  kCompileSupported,
  kCompile,
  kLast = kCompile,
};

// Messages up to this size travel inline; larger ones in a memfd.
// The layout of the plugin process's report after loading (plugin_server.cpp
// write_hello, remote_plugin.cpp read_hello): its first field, so that a
// loom-plugin-host from another build is refused by name rather than
// misread. 2: the plugin's capabilities follow its estimate flag.
inline constexpr uint32_t kHelloVersion = 2;

inline constexpr size_t kInlineMessageBytes = 64 * 1024;
// The largest message either side accepts (a compiled blob or a graph with
// its weights): 4 GiB.
inline constexpr uint64_t kMaxMessageBytes = uint64_t{4} << 30;
// The most descriptors one message carries.
inline constexpr size_t kMaxFds = 4;

// Appends fields to a message.
class WireWriter {
 public:
  void u32(uint32_t v) { raw(&v, sizeof v); }
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void i64(int64_t v) { raw(&v, sizeof v); }
  void boolean(bool v) { u32(v ? 1 : 0); }
  // A length-prefixed byte string.
  void bytes(std::span<const std::byte> v);
  void str(std::string_view v) { bytes(std::as_bytes(std::span(v.data(), v.size()))); }
  std::vector<std::byte>& data() { return data_; }
  const std::vector<std::byte>& view() const { return data_; }

 private:
  void raw(const void* p, size_t n);
  std::vector<std::byte> data_;
};

// Reads fields of a message; the first field that runs past the end (or a
// string over its limit) sets an error, after which every read yields zero
// and status() names the field.
class WireReader {
 public:
  explicit WireReader(std::span<const std::byte> data) : data_(data) {}
  uint32_t u32(const char* what);
  uint64_t u64(const char* what);
  int64_t i64(const char* what);
  bool boolean(const char* what);
  // A view into the message (valid while it is).
  std::span<const std::byte> bytes(const char* what, uint64_t max = kMaxMessageBytes);
  std::string str(const char* what, uint64_t max = 4096);
  // A count of elements that each take at least `min_bytes` of what is left:
  // a count the message cannot hold is an error before anything is reserved.
  uint64_t count(const char* what, uint64_t max, size_t min_bytes);
  // The bytes not read yet, consumed.
  std::span<const std::byte> rest() {
    auto out = data_.subspan(pos_);
    pos_ = data_.size();
    return out;
  }
  bool ok() const { return error_.empty(); }
  // OK, or data_loss naming the first bad field; also an error when bytes
  // are left over.
  Status finish(std::string_view message) const;

 private:
  bool take(void* out, size_t n, const char* what);
  std::span<const std::byte> data_;
  size_t pos_ = 0;
  std::string error_;
};

// One received message: its bytes and the descriptors that came with it
// (owned; closed by the destructor).
struct Message {
  Message() = default;
  Message(Message&& other) noexcept;
  Message& operator=(Message&& other) noexcept;
  ~Message();
  std::vector<std::byte> bytes;
  std::vector<int> fds;
};

// Sends `bytes` with `fds` (borrowed) as one message; spills to a memfd when
// large. Never raises SIGPIPE: a closed peer is an error.
Status send_message(int socket, std::span<const std::byte> bytes, std::span<const int> fds = {});

// Receives one message. `timeout_ms` < 0 waits forever; on timeout
// deadline_exceeded. A closed peer is unavailable("closed"). `max_bytes`
// bounds a spilled message. For the first `spin_us` microseconds it polls
// without sleeping: a sleeping thread woken by the other process costs tens
// of microseconds (more in a virtual machine), a round trip's whole budget.
Result<Message> receive_message(int socket, int timeout_ms, uint64_t max_bytes = kMaxMessageBytes,
                                int spin_us = 0);

// How long each side of a call polls before sleeping (receive_message).
inline constexpr int kHostSpinMicros = 30;   // the host, waiting for a reply
inline constexpr int kChildSpinMicros = 30;  // the child, between requests

// A shared memory block: a memfd of `bytes` bytes (at least one page),
// mapped read-write. Owns both; movable.
class SharedMemory {
 public:
  static Result<SharedMemory> create(uint64_t bytes, const char* name);
  // Maps `fd` (borrowed; the mapping keeps its own reference); its size
  // must be at least `bytes`.
  static Result<SharedMemory> map(int fd, uint64_t bytes);
  SharedMemory() = default;
  SharedMemory(SharedMemory&& other) noexcept;
  SharedMemory& operator=(SharedMemory&& other) noexcept;
  ~SharedMemory();
  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }        // as asked
  uint64_t mapped_size() const { return mapped_; } // whole pages
  int fd() const { return fd_; }

 private:
  void reset();
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mapped_ = 0;
  int fd_ = -1;
};

// "killed by signal 11 (SIGSEGV)", "exited with code 0" for a waitpid status.
std::string describe_exit(int wait_status);

}  // namespace loom::host::wire
