// Messages, descriptors and shared memory between the host and an isolated
// plugin's process.
#include "host/isolation/isolation_wire.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>

namespace loom::host::wire {
namespace {

// The first word of a packet whose message travels in the memfd it carries;
// then the message size as a u64.
constexpr uint32_t kSpilled = 0x4c53504cu;  // "LPSL"

uint64_t page_round(uint64_t bytes) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (bytes == 0) return page;
  return (bytes + page - 1) / page * page;
}

Status send_packet(int socket, const void* data, size_t size, std::span<const int> fds) {
  iovec iov{const_cast<void*>(data), size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  if (!fds.empty()) {
    if (fds.size() > kMaxFds) return internal_error("too many descriptors for one message");
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    ssize_t sent = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (sent >= 0) return Status();
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET) return unavailable("closed");
    return unavailable(std::string("send failed: ") + std::strerror(errno));
  }
}

}  // namespace

void WireWriter::raw(const void* p, size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  data_.insert(data_.end(), b, b + n);
}

void WireWriter::bytes(std::span<const std::byte> v) {
  u64(v.size());
  data_.insert(data_.end(), v.begin(), v.end());
}

bool WireReader::take(void* out, size_t n, const char* what) {
  if (!error_.empty()) {
    std::memset(out, 0, n);
    return false;
  }
  if (data_.size() - pos_ < n) {
    error_ = std::string(what) + " runs past the end (" + std::to_string(data_.size()) +
             " bytes)";
    std::memset(out, 0, n);
    return false;
  }
  std::memcpy(out, data_.data() + pos_, n);
  pos_ += n;
  return true;
}

uint32_t WireReader::u32(const char* what) {
  uint32_t v;
  take(&v, sizeof v, what);
  return v;
}

uint64_t WireReader::u64(const char* what) {
  uint64_t v;
  take(&v, sizeof v, what);
  return v;
}

int64_t WireReader::i64(const char* what) {
  int64_t v;
  take(&v, sizeof v, what);
  return v;
}

bool WireReader::boolean(const char* what) {
  uint32_t v = u32(what);
  if (v > 1 && error_.empty()) error_ = std::string(what) + " is " + std::to_string(v) + ", not 0 or 1";
  return v == 1;
}

std::span<const std::byte> WireReader::bytes(const char* what, uint64_t max) {
  uint64_t n = u64(what);
  if (!error_.empty()) return {};
  if (n > max || n > data_.size() - pos_) {
    error_ = std::string(what) + " claims " + std::to_string(n) + " bytes, " +
             std::to_string(std::min<uint64_t>(max, data_.size() - pos_)) + " at most fit";
    return {};
  }
  auto out = data_.subspan(pos_, n);
  pos_ += n;
  return out;
}

std::string WireReader::str(const char* what, uint64_t max) {
  auto b = bytes(what, max);
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

uint64_t WireReader::count(const char* what, uint64_t max, size_t min_bytes) {
  uint64_t n = u64(what);
  if (!error_.empty()) return 0;
  const uint64_t room = (data_.size() - pos_) / (min_bytes == 0 ? 1 : min_bytes);
  if (n > max || n > room) {
    error_ = std::string(what) + " is " + std::to_string(n) + ", at most " +
             std::to_string(std::min<uint64_t>(max, room)) + " fit";
    return 0;
  }
  return n;
}

Status WireReader::finish(std::string_view message) const {
  if (!error_.empty()) return data_loss(std::string(message) + ": " + error_);
  if (pos_ != data_.size()) {
    return data_loss(std::string(message) + ": " + std::to_string(data_.size() - pos_) +
                     " unexpected bytes at the end");
  }
  return Status();
}

Message::Message(Message&& other) noexcept
    : bytes(std::move(other.bytes)), fds(std::move(other.fds)) {
  other.fds.clear();
}

Message& Message::operator=(Message&& other) noexcept {
  if (this != &other) {
    for (int fd : fds) ::close(fd);
    bytes = std::move(other.bytes);
    fds = std::move(other.fds);
    other.fds.clear();
  }
  return *this;
}

Message::~Message() {
  for (int fd : fds) ::close(fd);
}

Status send_message(int socket, std::span<const std::byte> bytes, std::span<const int> fds) {
  if (bytes.size() <= kInlineMessageBytes) {
    return send_packet(socket, bytes.data(), bytes.size(), fds);
  }
  if (fds.size() + 1 > kMaxFds) return internal_error("too many descriptors for one message");
  LOOM_ASSIGN_OR_RETURN(SharedMemory spill, SharedMemory::create(bytes.size(), "loom-message"));
  std::memcpy(spill.data(), bytes.data(), bytes.size());
  WireWriter head;
  head.u32(kSpilled);
  head.u64(bytes.size());
  std::vector<int> all(fds.begin(), fds.end());
  all.push_back(spill.fd());
  return send_packet(socket, head.data().data(), head.data().size(), all);
}

Result<Message> receive_message(int socket, int timeout_ms, uint64_t max_bytes, int spin_us) {
  if (spin_us > 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
    pollfd p{socket, POLLIN, 0};
    while (::poll(&p, 1, 0) == 0 && std::chrono::steady_clock::now() < until) {
    }
  }
  if (timeout_ms >= 0) {
    pollfd p{socket, POLLIN, 0};
    for (;;) {
      int r = ::poll(&p, 1, timeout_ms);
      if (r > 0) break;
      if (r == 0) return deadline_exceeded("no answer within " + std::to_string(timeout_ms) + " ms");
      if (errno != EINTR) return unavailable(std::string("poll failed: ") + std::strerror(errno));
    }
  }
  Message out;
  // Received into a buffer that is not zeroed first (most messages are a
  // few dozen bytes), then copied to its size.
  std::unique_ptr<std::byte[]> buffer(new std::byte[kInlineMessageBytes]);
  iovec iov{buffer.get(), kInlineMessageBytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t got;
  do {
    got = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return unavailable(std::string("receive failed: ") + std::strerror(errno));
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      out.fds.push_back(fd);
    }
  }
  if (got == 0) return unavailable("closed");
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    return data_loss("message truncated (larger than " + std::to_string(kInlineMessageBytes) +
                     " bytes inline, or too many descriptors)");
  }
  out.bytes.assign(buffer.get(), buffer.get() + got);
  if (got == 12) {
    uint32_t word;
    std::memcpy(&word, out.bytes.data(), sizeof word);
    if (word == kSpilled) {
      uint64_t size;
      std::memcpy(&size, out.bytes.data() + 4, sizeof size);
      if (out.fds.empty()) return data_loss("spilled message without its memfd");
      if (size > max_bytes) {
        return resource_exhausted("message of " + std::to_string(size) + " bytes, at most " +
                                  std::to_string(max_bytes) + " accepted");
      }
      const int fd = out.fds.back();
      LOOM_ASSIGN_OR_RETURN(SharedMemory spill, SharedMemory::map(fd, size));
      out.fds.pop_back();
      ::close(fd);
      try {
        out.bytes.assign(spill.data(), spill.data() + size);
      } catch (const std::bad_alloc&) {
        return resource_exhausted("no memory for a message of " + std::to_string(size) + " bytes");
      }
    }
  }
  return out;
}

Result<SharedMemory> SharedMemory::create(uint64_t bytes, const char* name) {
  SharedMemory out;
  out.fd_ = ::memfd_create(name, MFD_CLOEXEC);
  if (out.fd_ < 0) return resource_exhausted(std::string("memfd_create: ") + std::strerror(errno));
  out.size_ = bytes;
  out.mapped_ = page_round(bytes);
  if (::ftruncate(out.fd_, static_cast<off_t>(out.mapped_)) != 0) {
    return resource_exhausted("cannot size shared memory to " + std::to_string(out.mapped_) +
                              " bytes: " + std::strerror(errno));
  }
  void* p = ::mmap(nullptr, out.mapped_, PROT_READ | PROT_WRITE, MAP_SHARED, out.fd_, 0);
  if (p == MAP_FAILED) {
    return resource_exhausted("cannot map " + std::to_string(out.mapped_) +
                              " bytes of shared memory: " + std::strerror(errno));
  }
  out.data_ = static_cast<std::byte*>(p);
  return out;
}

Result<SharedMemory> SharedMemory::map(int fd, uint64_t bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return data_loss("shared memory descriptor is not a memory file");
  }
  SharedMemory out;
  out.size_ = bytes;
  out.mapped_ = page_round(bytes);
  if (static_cast<uint64_t>(st.st_size) < out.mapped_) {
    return data_loss("shared memory holds " + std::to_string(st.st_size) + " bytes, " +
                     std::to_string(out.mapped_) + " expected");
  }
  out.fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (out.fd_ < 0) return resource_exhausted(std::string("dup: ") + std::strerror(errno));
  void* p = ::mmap(nullptr, out.mapped_, PROT_READ | PROT_WRITE, MAP_SHARED, out.fd_, 0);
  if (p == MAP_FAILED) {
    return resource_exhausted("cannot map " + std::to_string(out.mapped_) +
                              " bytes of shared memory: " + std::strerror(errno));
  }
  out.data_ = static_cast<std::byte*>(p);
  return out;
}

SharedMemory::SharedMemory(SharedMemory&& other) noexcept { *this = std::move(other); }

SharedMemory& SharedMemory::operator=(SharedMemory&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = other.data_;
    size_ = other.size_;
    mapped_ = other.mapped_;
    fd_ = other.fd_;
    other.data_ = nullptr;
    other.fd_ = -1;
    other.size_ = other.mapped_ = 0;
  }
  return *this;
}

SharedMemory::~SharedMemory() { reset(); }

void SharedMemory::reset() {
  if (data_ != nullptr) ::munmap(data_, mapped_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  fd_ = -1;
}

std::string describe_exit(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const char* abbrev = sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) +
           (abbrev != nullptr ? std::string(" (SIG") + abbrev + ")" : std::string());
  }
  if (WIFEXITED(wait_status)) return "exited with code " + std::to_string(WEXITSTATUS(wait_status));
  return "stopped (wait status " + std::to_string(wait_status) + ")";
}

}  // namespace loom::host::wire
