#include "child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace loom::conformance::detail {

namespace {

// Frames: one type byte ('n' note, 'r' result), a 4-byte length, the text.
void send_frame(int fd, char type, std::string_view text) {
  if (text.size() > (1u << 16)) text = text.substr(0, 1u << 16);
  std::string frame(1, type);
  uint32_t n = static_cast<uint32_t>(text.size());
  frame.append(reinterpret_cast<const char*>(&n), 4);
  frame.append(text);
  for (size_t done = 0; done < frame.size();) {
    ssize_t w = ::write(fd, frame.data() + done, frame.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    done += static_cast<size_t>(w);
  }
}

std::string describe_exit(int wstatus) {
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    const char* abbrev = ::sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + " (SIG" + (abbrev ? abbrev : "?") + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(wstatus)) + " without a verdict";
}

}  // namespace

Verdict run_in_child(const std::function<Verdict(const NoteFn&)>& body,
                     std::chrono::milliseconds step_timeout,
                     std::chrono::milliseconds total_timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return fail(std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return fail(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    // A crash is an expected outcome here: no core file (slow, and litter).
    struct rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    const int out = fds[1];
    Verdict v;
    try {
      v = body([out](std::string_view note) { send_frame(out, 'n', note); });
    } catch (const std::exception& e) {
      v = fail(std::string("the check threw: ") + e.what());
    }
    std::string text(1, static_cast<char>('0' + static_cast<int>(v.outcome)));
    text += v.message;
    send_frame(out, 'r', text);
    // Quick exit: a plugin's static destructors or leaked threads must not
    // change a verdict that is already sent.
    ::_exit(0);
  }
  ::close(fds[1]);
  const auto started = std::chrono::steady_clock::now();
  const auto end = started + total_timeout;
  auto step_end = started + step_timeout;
  std::string buffer, last_note, result;
  bool have_result = false, silent = false, too_long = false;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    silent = now >= step_end;
    too_long = now >= end;
    if (silent || too_long) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::min(step_end, end) - now);
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char chunk[4096];
    ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    while (buffer.size() >= 5) {
      uint32_t len = 0;
      std::memcpy(&len, buffer.data() + 1, 4);
      if (buffer.size() < 5 + size_t{len}) break;
      std::string text = buffer.substr(5, len);
      if (buffer[0] == 'n') {
        last_note = std::move(text);
        step_end = std::chrono::steady_clock::now() + step_timeout;
      } else if (buffer[0] == 'r') {
        result = std::move(text);
        have_result = true;
      }
      buffer.erase(0, 5 + size_t{len});
    }
  }
  const bool timed_out = silent || too_long;
  if (timed_out) ::kill(pid, SIGKILL);
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  const std::string during = last_note.empty() ? "" : " during " + last_note;
  if (too_long) {
    return fail("still running after " + std::to_string(total_timeout.count()) + " ms" + during +
                " (the process was killed)");
  }
  if (silent) {
    return fail("no progress within " + std::to_string(step_timeout.count()) + " ms" + during +
                " (the process was killed)");
  }
  if (!have_result) return fail("the check's process " + describe_exit(wstatus) + during);
  if (result.empty() || result[0] < '0' || result[0] > '2') {
    return fail("the check's process sent a malformed verdict");
  }
  return {static_cast<CheckOutcome>(result[0] - '0'), result.substr(1)};
}

}  // namespace loom::conformance::detail
