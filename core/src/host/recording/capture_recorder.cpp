#include "host/recording/capture_recorder.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>

#include "loom/version.hpp"

namespace loom::host {

Result<std::shared_ptr<CaptureRecorder>> CaptureRecorder::create(
    const std::filesystem::path& path) {
  {
    // Made now, so that a path that cannot be written fails at the start,
    // not after the run.
    std::ofstream probe(path, std::ios::binary | std::ios::trunc);
    if (!probe) {
      return not_found("cannot create capture file " + path.string() + ": " +
                       std::strerror(errno));
    }
  }
  std::shared_ptr<CaptureRecorder> recorder(new CaptureRecorder());
  recorder->path_ = path;
  recorder->start_ = std::chrono::steady_clock::now();
  recorder->capture_.loom_version = LOOM_VERSION_STRING;
  recorder->capture_.created_unix_s = static_cast<uint64_t>(std::time(nullptr));
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) recorder->capture_.host = host;
  LOOM_RETURN_IF_ERROR(recorder->flush());
  return recorder;
}

CaptureRecorder::~CaptureRecorder() {
  std::lock_guard<std::mutex> lock(mutex_);
  Status st = write_locked();
  if (!st.ok()) std::fprintf(stderr, "loom: warning: recording: %s\n", st.to_string().c_str());
}

Status CaptureRecorder::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  return write_locked();
}

Status CaptureRecorder::write_locked() { return capture::write_capture_file(capture_, path_); }

uint32_t CaptureRecorder::add_plugin(capture::PluginEntry entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_.plugins.push_back(std::move(entry));
  return static_cast<uint32_t>(capture_.plugins.size() - 1);
}

int64_t CaptureRecorder::add_device(capture::DeviceEntry entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_.devices.push_back(std::move(entry));
  return static_cast<int64_t>(capture_.devices.size() - 1);
}

int64_t CaptureRecorder::add_payload(std::span<const std::byte> bytes) {
  std::string hash = capture::payload_hash(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, fresh] = payload_index_.emplace(hash, static_cast<int64_t>(capture_.payloads.size()));
  if (fresh) {
    capture::Payload p;
    p.hash = std::move(hash);
    p.bytes.assign(bytes.begin(), bytes.end());
    capture_.payloads.push_back(std::move(p));
  }
  return it->second;
}

void CaptureRecorder::add_call(capture::CallRecord call) {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_.calls.push_back(std::move(call));
}

int64_t CaptureRecorder::new_id(ObjectKind kind) {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_ids_[static_cast<int>(kind)]++;
}

uint64_t CaptureRecorder::now_ns() const {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now() - start_)
                                   .count());
}

uint32_t CaptureRecorder::thread_number() {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, fresh] =
      threads_.emplace(std::this_thread::get_id(), static_cast<uint32_t>(threads_.size()));
  return it->second;
}

capture::Capture CaptureRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capture_;
}

}  // namespace loom::host
