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
#include "loom/tensor.hpp"

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
  // `flags`: loom_buffer_flags_t bits (LOOM_BUFFER_HOST_VISIBLE for a buffer
  // to map).
  static Result<std::unique_ptr<DeviceBuffer>> allocate(std::shared_ptr<LoadedPlugin> plugin,
                                                        size_t device_index, uint64_t bytes,
                                                        uint32_t flags = LOOM_BUFFER_DEVICE_LOCAL);
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
  // buffer_map: the buffer's bytes in host memory, valid until unmap().
  Result<void*> map();
  // buffer_unmap of a buffer map() mapped.
  void unmap();

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

// One call of an Executable, prepared once and executed many times: the
// operand descriptions the plugin reads (dtype, shape, size, where the bytes
// live) are built here, so callers above the host never fill ABI structs.
// Making it allocates; executing it does not. One execution at a time; the
// Executable, the buffers its operands live in and every fence handed to
// execute must outlive it.
class PreparedCall {
 public:
  // What one operand is; `name` appears in errors only.
  struct Operand {
    std::string_view name;
    DType dtype = DType::kInvalid;
    std::span<const int64_t> shape;
    uint64_t bytes = 0;
  };
  // A call of `executable` on `operands`, the first `input_count` of which
  // are its inputs and the rest its outputs. Every operand starts with no
  // storage: place each before the first execute. Errors: a rank the ABI
  // cannot carry, more inputs than operands.
  static Result<std::unique_ptr<PreparedCall>> make(const Executable& executable,
                                                    std::span<const Operand> operands,
                                                    size_t input_count);
  PreparedCall(const PreparedCall&) = delete;
  PreparedCall& operator=(const PreparedCall&) = delete;

  size_t operand_count() const { return tensors_.size(); }
  // Operand `index` is read or written at `data` in host memory (a device
  // that executes on host pointers).
  void place_on_host(size_t index, void* data);
  // Operand `index` is at `offset` in `buffer` (the device's own memory, or
  // host memory imported as a buffer).
  void place_in_buffer(size_t index, const DeviceBuffer& buffer, uint64_t offset = 0);
  // Where operand `index`'s host address is held (after place_on_host), for
  // a caller that moves it between executions without preparing again.
  void** host_data_slot(size_t index) { return &tensors_[index].host_data; }
  uint64_t byte_size(size_t index) const { return tensors_[index].byte_size; }

  // Runs the executable on the operands as placed. `signal`: null for a
  // synchronous call, else the fence the device signals when it is done.
  // `waits`: fences the device waits for before it starts (each must
  // outlive the execution). Errors are the plugin's.
  Status execute(Fence* signal, std::span<Fence* const> waits = {});

 private:
  PreparedCall() = default;
  const Executable* executable_ = nullptr;
  std::vector<int64_t> shapes_;  // every operand's shape, back to back
  std::vector<loom_tensor_t> tensors_;
  std::vector<const loom_tensor_t*> pointers_;  // inputs, then outputs
  std::vector<loom_fence_t*> waits_;  // borrowed by the plugin until it starts
  loom_execute_args_t args_{};
};

}  // namespace loom::host
