// RAII owners of the handles a plugin makes: executables, device buffers and
// fences. Each holds a shared_ptr to its LoadedPlugin, so the plugin instance
// and its library stay alive until the last handle is gone, even after the
// PluginHost that loaded them was destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "host/plugin_host.hpp"
#include "loom/plugin.h"
#include "loom/status.hpp"

namespace loom::host {

// Checks a blob with executable_check; OK or the plugin's error (incompatible) with context.
Status check_blob(const LoadedPlugin& plugin, size_t device_index, std::string_view loader_key,
                  uint32_t format_version, std::span<const std::byte> blob);

// The plugin's estimate of one execution of a blob on a device, in
// nanoseconds (ABI 1.1 executable_estimate); 0 when the plugin has no such
// entry or gives no estimate for this blob. Errors are the plugin's.
Result<uint64_t> estimate_blob(const LoadedPlugin& plugin, size_t device_index,
                               std::string_view loader_key, uint32_t format_version,
                               std::span<const std::byte> blob);

// A delegate blob loaded on one device. Not copyable; destroying it calls
// executable_destroy. handle() may be used concurrently as execute allows.
class Executable {
 public:
  // Loads `blob` on devices()[device_index]. The plugin may keep pointers into
  // the blob, so its memory must stay valid while the Executable lives:
  // `blob_owner` (if given) is held until then.
  static Result<std::unique_ptr<Executable>> load(
      std::shared_ptr<LoadedPlugin> plugin, size_t device_index, std::string_view loader_key,
      uint32_t format_version, std::span<const std::byte> blob,
      const std::vector<std::pair<std::string, std::string>>& specs,
      std::shared_ptr<const void> blob_owner = nullptr);
  ~Executable();  // executable_destroy
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  loom_executable_t* handle() const { return handle_; }
  const LoadedPlugin& plugin() const { return *plugin_; }
  size_t device_index() const { return device_index_; }

 private:
  Executable() = default;
  std::shared_ptr<LoadedPlugin> plugin_;
  std::shared_ptr<const void> blob_owner_;
  size_t device_index_ = 0;
  loom_executable_t* handle_ = nullptr;
};

// A block of device memory made by the plugin. Copies are synchronous and
// bounds-checked against size().
class DeviceBuffer {
 public:
  static Result<std::unique_ptr<DeviceBuffer>> allocate(std::shared_ptr<LoadedPlugin> plugin,
                                                        size_t device_index, uint64_t bytes);
  // buffer_import_host: a buffer over `bytes` of host memory at `host`,
  // which must outlive the buffer.
  static Result<std::unique_ptr<DeviceBuffer>> import_host(std::shared_ptr<LoadedPlugin> plugin,
                                                           size_t device_index, void* host,
                                                           uint64_t bytes);
  ~DeviceBuffer();  // buffer_free
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  loom_buffer_t* handle() const { return handle_; }
  uint64_t size() const { return size_; }
  // Copies `bytes` from `src` to [offset, offset + bytes) of the buffer.
  Status copy_from_host(uint64_t offset, const void* src, uint64_t bytes);
  // Copies [offset, offset + bytes) of the buffer to `dst`.
  Status copy_to_host(uint64_t offset, void* dst, uint64_t bytes) const;

 private:
  DeviceBuffer() = default;
  Status check_range(std::string_view what, uint64_t offset, const void* host,
                     uint64_t bytes) const;
  std::shared_ptr<LoadedPlugin> plugin_;
  loom_buffer_t* handle_ = nullptr;
  uint64_t size_ = 0;
};

// A completion object for asynchronous executions. Under ABI 1.0 it signals
// once; a 1.1 plugin re-arms it each time it is handed to execute.
class Fence {
 public:
  static Result<std::unique_ptr<Fence>> create(std::shared_ptr<LoadedPlugin> plugin,
                                               size_t device_index);
  ~Fence();  // fence_destroy
  Fence(const Fence&) = delete;
  Fence& operator=(const Fence&) = delete;

  loom_fence_t* handle() const { return handle_; }
  // OK once signaled; deadline_exceeded after `timeout_ns` (UINT64_MAX: no
  // limit); or the error of the work that was to signal it.
  Status wait(uint64_t timeout_ns);
  // Whether it is signaled, without blocking; the error of failed work.
  Result<bool> query();
  // Signals from the host.
  Status signal();

 private:
  Fence() = default;
  std::shared_ptr<LoadedPlugin> plugin_;
  loom_fence_t* handle_ = nullptr;
};

}  // namespace loom::host
