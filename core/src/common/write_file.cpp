#include "common/write_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace loom {

Status write_file_atomically(const std::filesystem::path& path, std::string_view text,
                             std::string_view what) {
  const std::filesystem::path temp =
      path.parent_path() / (path.filename().string() + ".tmp" + std::to_string(::getpid()));
  const std::string name(what);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return unavailable("cannot write " + name + " " + temp.string() + ": " + std::strerror(errno));
  }
  size_t done = 0;
  int saved = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      saved = n < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(n);
  }
  const bool written = done == text.size();
  if (::close(fd) != 0 && written) saved = errno;
  if (!written || saved != 0) {
    ::unlink(temp.c_str());
    return unavailable("cannot write " + name + " " + temp.string() + ": " + std::strerror(saved));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    return unavailable("cannot move " + name + " into place at " + path.string() + ": " +
                       std::strerror(err));
  }
  return Status();
}

}  // namespace loom
