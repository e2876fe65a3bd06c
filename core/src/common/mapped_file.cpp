#include "common/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace loom {

Result<MappedFile> MappedFile::open(const std::filesystem::path& path) {
  MappedFile file;
  // O_NONBLOCK: opening a FIFO named by a hostile file would otherwise wait
  // for a writer forever; it is refused below as not a regular file.
  file.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (file.fd_ < 0) {
    int err = errno;
    std::string message = "cannot open " + path.string() + ": " + std::strerror(err);
    return err == ENOENT ? not_found(message) : unavailable(message);
  }
  struct stat st {};
  if (::fstat(file.fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    return invalid_argument(path.string() + " is not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > SIZE_MAX) {
    return resource_exhausted("cannot map " + path.string() + " (" +
                              std::to_string(st.st_size) + " bytes): larger than the address space");
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) return file;
  void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd_, 0);
  if (address == MAP_FAILED) {
    int err = errno;
    return resource_exhausted("cannot map " + path.string() + " (" + std::to_string(size) +
                              " bytes): " + std::strerror(err));
  }
  file.address_ = static_cast<const std::byte*>(address);
  file.size_ = size;
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : address_(std::exchange(other.address_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    address_ = std::exchange(other.address_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::close_descriptor() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void MappedFile::reset() {
  if (address_ != nullptr) ::munmap(const_cast<std::byte*>(address_), size_);
  address_ = nullptr;
  size_ = 0;
  close_descriptor();
}

}  // namespace loom
