// One Vulkan physical device with a compute queue, its logical device, and
// the objects the ABI hands out for it: buffers (device memory) and fences.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "estimate.hpp"
#include "loom/vulkan_compute/kernels.hpp"
#include "instance.hpp"
#include "pipelines.hpp"

namespace loom::vulkan {

class Device;
class VulkanExecutable;

// What the device offers, read once at plugin creation.
struct DeviceProperties {
  std::string uri;          // "vulkan-compute://N"
  std::string name;         // the driver's name plus driver, API version and limits
  // What identifies the device to the cost model's cache (estimate.hpp).
  std::string device_name;  // VkPhysicalDeviceProperties::deviceName
  uint32_t vendor_id = 0, device_id = 0, driver_version = 0;
  loom_device_kind_t kind = LOOM_DEVICE_KIND_GPU;
  uint32_t api_version = 0;
  uint64_t device_local_bytes = 0;
  uint64_t host_visible_bytes = 0;
  uint32_t subgroup_size = 0;
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_workgroup_size[3] = {0, 0, 0};
  uint32_t max_workgroup_count[3] = {0, 0, 0};
  uint32_t max_shared_memory = 0;
  uint32_t max_push_constants = 0;
  uint64_t min_storage_offset_alignment = 1;
  uint64_t max_storage_range = 0;
  bool f16 = false;
  bool int8 = false;        // shaderInt8
  // What the int8 kernels (blob format 4) need, as offered (less the
  // features vulkan.hide_features hides), and the names of those missing
  // (int8_kernels.hpp, int8_missing): empty when the int8 kernels run here
  // (their features are then enabled on the logical device).
  Int8Features int8_features;
  std::string int8_missing;
  bool host_import = false;  // VK_EXT_external_memory_host enabled
  uint64_t import_alignment = 0;
  // Nanoseconds per timestamp tick on the compute queue; 0: the queue has no
  // timestamps (then dispatches are not traced).
  double timestamp_period_ns = 0;
};

// A fence the host can wait on. Signaled by the host (fence_signal) or by a
// submission (execute with this signal fence). Thread-safe.
class Fence {
 public:
  explicit Fence(Device* device) : device_(device) {}
  Status signal();
  Status wait(uint64_t timeout_ns);
  Status query(bool* out_signaled);

  // Makes the fence wait for `fence` (a VkFence of the device that the
  // submission with serial `serial` of `slot` signals). Called by execute.
  void attach(std::shared_ptr<struct SubmitSlot> slot, uint64_t serial);

 private:
  Device* device_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool host_signaled_ = false;
  std::shared_ptr<struct SubmitSlot> slot_;
  uint64_t serial_ = 0;
};

// A VkFence reused by successive submissions of one recorded command buffer.
// `serial` counts submissions; a submission is done once the VkFence is
// signaled after it or a later submission has started (execute waits for the
// previous one before resubmitting). Owned jointly by its binding set and the
// Fence objects that wait on it.
struct SubmitSlot {
  Device* device = nullptr;
  VkFence fence = VK_NULL_HANDLE;          // signaled by each submission, but not
                                           // under WaitMode::kTimeline
  VkSemaphore timeline = VK_NULL_HANDLE;   // WaitMode::kTimeline: reaches `serial`
  std::mutex mu;
  uint64_t serial = 0;     // submissions so far
  bool in_flight = false;  // the last submission may still run
  // Dispatch timing (when the queue has timestamps): query 0 is written
  // before the first dispatch, query d + 1 after dispatch d. Each finished
  // submission becomes one trace span per dispatch on the device's track,
  // placed from the host time of its submission.
  VkQueryPool queries = VK_NULL_HANDLE;
  std::vector<std::string> dispatch_names;
  std::vector<uint64_t> ticks;  // query results, one per query
  uint64_t submitted_ns = 0;  // steady clock, at the last vkQueueSubmit
  uint64_t reported = 0;      // the last serial whose spans were sent
  uint64_t last_duration_ns = 0;  // submission to seen finished, the last time
  ~SubmitSlot();
  // Waits for submission `serial` (or all, when 0); DEADLINE_EXCEEDED on
  // timeout, DEVICE_LOST naming the device.
  Status wait(uint64_t serial, uint64_t timeout_ns);
  // With `mu` held and a submission in flight: waits for it the device's way
  // (WaitMode); DEADLINE_EXCEEDED once `timeout_ns` passed. Leaves
  // `in_flight` to the caller.
  Status wait_locked(uint64_t timeout_ns);
  // With `mu` held, nothing in flight: readies the slot for the next
  // submission (resets the fence).
  Status prepare_locked();
  // With `mu` held: submits `cmd` signaling the slot; counts `serial`.
  Status submit_locked(VkCommandBuffer cmd);
  // With `mu` held, once the last submission finished: sends its dispatch
  // spans (once per submission).
  void report_locked();
};

// Device memory. A host-visible buffer stays mapped for its lifetime.
// Copies through mapped memory when the memory is host-visible (and staging
// is not forced), otherwise through the device's staging buffer.
// One buffer is not written by two calls at once (the ABI's rule).
class Buffer {
 public:
  Buffer(Device* device, VkBuffer buffer, VkDeviceMemory memory, uint64_t size, void* mapped,
         bool imported);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Status map(void** out);
  void unmap() {}
  Status copy_from_host(uint64_t offset, const void* src, uint64_t size);
  Status copy_to_host(uint64_t offset, void* dst, uint64_t size);

  VkBuffer handle() const { return buffer_; }
  // Unique among the device's buffers for the device's life. Vulkan may hand
  // a freed VkBuffer's handle to the next buffer, so caches key on this.
  uint64_t id() const { return id_; }
  uint64_t size() const { return size_; }
  Device* device() const { return device_; }
  bool imported() const { return imported_; }

 private:
  Status check_range(const char* entry, uint64_t offset, uint64_t size) const;
  Device* device_;
  VkBuffer buffer_;
  VkDeviceMemory memory_;
  uint64_t size_;
  void* mapped_;  // NULL unless host-visible
  bool imported_;
  uint64_t id_;
};

// A physical device and its logical device. Thread-safe: queue submissions
// and staging copies are serialized by mutexes inside.
class Device {
 public:
  // Creates the logical device on `queue_family` (which supports compute).
  static Status create(const Instance* instance, VkPhysicalDevice physical, uint32_t index,
                       uint32_t queue_family, bool force_staging, WaitMode wait,
                       const std::vector<std::string>& hidden_features, std::unique_ptr<Device>* out);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // -- the ABI's device entries (see loom/plugin.hpp) --
  void info(loom_device_info_t* out) const;
  Status check_executable(const sdk::Blob& blob);
  Status load_executable(const sdk::Blob& blob, const sdk::Options& specs,
                         std::unique_ptr<VulkanExecutable>* out);
  Status allocate_buffer(uint64_t size, uint64_t alignment, uint32_t flags,
                         std::unique_ptr<Buffer>* out);
  Status create_fence(std::unique_ptr<Fence>* out);
  // buffer_import_host: wraps `pointer` (aligned to the import alignment)
  // without copying; UNIMPLEMENTED without VK_EXT_external_memory_host.
  Status import_host(void* pointer, uint64_t size, std::unique_ptr<Buffer>* out);
  // executable_estimate (ABI 1.1, estimate.cpp): the blob's work over this
  // device's measured rates. Thread-safe.
  Status estimate_executable(const sdk::Blob& blob, uint64_t* out_time_ns);

  // -- for the plugin's own objects --
  const DeviceProperties& props() const { return props_; }
  const DeviceFns& fns() const { return fns_; }
  VkDevice handle() const { return device_; }
  const Instance* instance() const { return instance_; }
  // A storage buffer of `size` bytes in device-local memory.
  Status create_buffer(uint64_t size, bool host_visible, std::unique_ptr<Buffer>* out);
  // Submits one command buffer signaling `fence` (may be VK_NULL_HANDLE) and,
  // when `timeline` is not VK_NULL_HANDLE, that semaphore to `value`.
  Status submit(VkCommandBuffer cmd, VkFence fence, VkSemaphore timeline = VK_NULL_HANDLE,
                uint64_t value = 0);
  // How executions are waited for (never kAuto: resolved at creation).
  WaitMode wait_mode() const { return wait_mode_; }
  // Copies through the staging buffer, in chunks, waiting for each.
  Status staged_copy(VkBuffer buffer, uint64_t offset, void* host, uint64_t size, bool to_device);
  bool force_staging() const { return force_staging_; }
  Pipelines& pipelines() { return *pipelines_; }
  // The next Buffer::id (from 1).
  uint64_t next_buffer_id() { return ++buffer_ids_; }

 private:
  Device() = default;
  Status init(VkPhysicalDevice physical, uint32_t queue_family, WaitMode wait,
              const std::vector<std::string>& hidden_features);
  Status alloc_memory(const VkMemoryRequirements& req, bool host_visible, const void* next,
                      VkDeviceMemory* out, bool* out_mapped_ok);

  const Instance* instance_ = nullptr;
  DeviceProperties props_;
  VkPhysicalDeviceMemoryProperties memory_{};
  VkDevice device_ = VK_NULL_HANDLE;
  DeviceFns fns_;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  bool force_staging_ = false;
  WaitMode wait_mode_ = WaitMode::kBlock;
  std::mutex queue_mu_;
  std::unique_ptr<Pipelines> pipelines_;
  std::unique_ptr<CostModel> cost_;  // measured on the first estimate
  std::atomic<uint64_t> buffer_ids_{0};

  // Staging: a host-visible buffer, a command buffer and a fence.
  std::mutex staging_mu_;
  std::unique_ptr<Buffer> staging_;
  void* staging_ptr_ = nullptr;
  VkCommandPool staging_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer staging_cmd_ = VK_NULL_HANDLE;
  VkFence staging_fence_ = VK_NULL_HANDLE;
};

// A finite wait used where the ABI gives no timeout (synchronous execute,
// staging copies): long enough for any real dispatch, short enough that a
// hung queue becomes an error instead of a hung host.
inline constexpr uint64_t kInternalWaitNs = 120ull * 1000 * 1000 * 1000;

}  // namespace loom::vulkan
