#include "device.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace loom::vulkan {
namespace {

constexpr uint64_t kStagingBytes = 4ull << 20;

std::string version_text(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
         "." + std::to_string(VK_API_VERSION_PATCH(v));
}

bool has_extension(const std::vector<VkExtensionProperties>& list, const char* name) {
  return std::any_of(list.begin(), list.end(), [&](const VkExtensionProperties& e) {
    return std::strcmp(e.extensionName, name) == 0;
  });
}

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// A hint to the core that this thread is spinning.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

// ------------------------------------------------------------------ fences

SubmitSlot::~SubmitSlot() {
  if (fence != VK_NULL_HANDLE) device->fns().vkDestroyFence(device->handle(), fence, nullptr);
  if (timeline != VK_NULL_HANDLE) {
    device->fns().vkDestroySemaphore(device->handle(), timeline, nullptr);
  }
  if (queries != VK_NULL_HANDLE) {
    device->fns().vkDestroyQueryPool(device->handle(), queries, nullptr);
  }
}

void SubmitSlot::report_locked() {
  if (queries == VK_NULL_HANDLE || reported == serial || dispatch_names.empty()) return;
  reported = serial;
  const size_t n = ticks.size();
  const VkResult r = device->fns().vkGetQueryPoolResults(
      device->handle(), queries, 0, static_cast<uint32_t>(n), n * sizeof(uint64_t), ticks.data(),
      sizeof(uint64_t), VK_QUERY_RESULT_64_BIT);
  if (r != VK_SUCCESS) return;  // not available: no spans for this submission
  const double period = device->props().timestamp_period_ns;
  const auto at = [&](size_t q) {
    return submitted_ns + static_cast<uint64_t>(static_cast<double>(ticks[q] - ticks[0]) * period);
  };
  const Instance& instance = *device->instance();
  const std::string& uri = device->props().uri;
  for (size_t d = 0; d + 1 < n; ++d) {
    instance.trace(LOOM_TRACE_BEGIN, uri, dispatch_names[d], at(d));
    instance.trace(LOOM_TRACE_END, uri, dispatch_names[d], std::max(at(d), at(d + 1)));
  }
}

Status SubmitSlot::wait(uint64_t which, uint64_t timeout_ns) {
  std::lock_guard<std::mutex> lock(mu);
  if (!in_flight || (which != 0 && serial > which)) return Status();
  LOOM_SDK_RETURN_IF_ERROR(wait_locked(timeout_ns));
  in_flight = false;
  report_locked();
  return Status();
}

Status SubmitSlot::wait_locked(uint64_t timeout_ns) {
  const DeviceFns& f = device->fns();
  const VkDevice dev = device->handle();
  const char* call = "vkWaitForFences";
  VkResult r = VK_SUCCESS;
  switch (device->wait_mode()) {
    case WaitMode::kTimeline: {
      call = "vkWaitSemaphoresKHR";
      VkSemaphoreWaitInfoKHR info{};
      info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO_KHR;
      info.semaphoreCount = 1;
      info.pSemaphores = &timeline;
      info.pValues = &serial;
      r = f.vkWaitSemaphoresKHR(dev, &info, timeout_ns);
      break;
    }
    case WaitMode::kSpin: {
      // Spin until about twice the last execution's time has passed since
      // this submission (the first time: kSpinMaxNs), then block.
      const uint64_t start = now_ns();
      const uint64_t expected = last_duration_ns == 0 ? kSpinMaxNs : 2 * last_duration_ns + 20000;
      const uint64_t until = expected > kSpinMaxNs ? 0 : submitted_ns + expected;
      call = "vkGetFenceStatus";
      r = f.vkGetFenceStatus(dev, fence);
      uint64_t now = start;
      while (r == VK_NOT_READY && now < until && now - start < timeout_ns) {
        cpu_relax();
        r = f.vkGetFenceStatus(dev, fence);
        now = now_ns();
      }
      if (r == VK_NOT_READY) {
        const uint64_t spent = now - start;
        call = "vkWaitForFences";
        r = spent >= timeout_ns ? VK_TIMEOUT
                                : f.vkWaitForFences(dev, 1, &fence, VK_TRUE, timeout_ns - spent);
      }
      break;
    }
    case WaitMode::kBlock:
    case WaitMode::kAuto: r = f.vkWaitForFences(dev, 1, &fence, VK_TRUE, timeout_ns); break;
  }
  if (r == VK_TIMEOUT || r == VK_NOT_READY) {
    return sdk::deadline_exceeded(device->props().uri + ": the execution did not finish within " +
                                  std::to_string(timeout_ns) + " ns");
  }
  if (r != VK_SUCCESS) return vk_status(r, device->props().uri + ": " + call);
  last_duration_ns = now_ns() - submitted_ns;
  return Status();
}

Status SubmitSlot::prepare_locked() {
  if (device->wait_mode() == WaitMode::kTimeline) return Status();  // no fence to reset
  const VkResult r = device->fns().vkResetFences(device->handle(), 1, &fence);
  if (r != VK_SUCCESS) return vk_status(r, device->props().uri + ": vkResetFences");
  return Status();
}

Status SubmitSlot::submit_locked(VkCommandBuffer cmd) {
  submitted_ns = now_ns();
  if (device->wait_mode() == WaitMode::kTimeline) {
    LOOM_SDK_RETURN_IF_ERROR(device->submit(cmd, VK_NULL_HANDLE, timeline, serial + 1));
  } else {
    LOOM_SDK_RETURN_IF_ERROR(device->submit(cmd, fence));
  }
  in_flight = true;
  ++serial;
  return Status();
}

Status Fence::signal() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    host_signaled_ = true;
    slot_.reset();
  }
  cv_.notify_all();
  return Status();
}

void Fence::attach(std::shared_ptr<SubmitSlot> slot, uint64_t serial) {
  std::lock_guard<std::mutex> lock(mu_);
  host_signaled_ = false;
  slot_ = std::move(slot);
  serial_ = serial;
}

Status Fence::wait(uint64_t timeout_ns) {
  std::unique_lock<std::mutex> lock(mu_);
  if (host_signaled_) return Status();
  if (slot_) {
    std::shared_ptr<SubmitSlot> slot = slot_;
    const uint64_t serial = serial_;
    lock.unlock();
    return slot->wait(serial, timeout_ns);
  }
  auto ready = [&] { return host_signaled_ || slot_ != nullptr; };
  if (timeout_ns == UINT64_MAX) {
    cv_.wait(lock, ready);
  } else {
    const auto limit = std::chrono::nanoseconds(std::min<uint64_t>(timeout_ns, INT64_MAX / 2));
    if (!cv_.wait_for(lock, limit, ready)) {
      return sdk::deadline_exceeded(device_->props().uri + ": the fence was not signaled within " +
                                    std::to_string(timeout_ns) + " ns");
    }
  }
  if (host_signaled_) return Status();
  std::shared_ptr<SubmitSlot> slot = slot_;
  const uint64_t serial = serial_;
  lock.unlock();
  return slot->wait(serial, timeout_ns);
}

Status Fence::query(bool* out_signaled) {
  std::unique_lock<std::mutex> lock(mu_);
  *out_signaled = host_signaled_;
  if (host_signaled_ || !slot_) return Status();
  std::shared_ptr<SubmitSlot> slot = slot_;
  const uint64_t serial = serial_;
  lock.unlock();
  Status s = slot->wait(serial, 0);
  if (s.code() == LOOM_STATUS_DEADLINE_EXCEEDED) return Status();
  *out_signaled = s.ok();
  return s;
}

// ------------------------------------------------------------------ buffers

Buffer::Buffer(Device* device, VkBuffer buffer, VkDeviceMemory memory, uint64_t size, void* mapped,
               bool imported)
    : device_(device), buffer_(buffer), memory_(memory), size_(size), mapped_(mapped),
      imported_(imported), id_(device->next_buffer_id()) {}

Buffer::~Buffer() {
  const DeviceFns& f = device_->fns();
  f.vkDestroyBuffer(device_->handle(), buffer_, nullptr);
  if (mapped_ != nullptr && !imported_) f.vkUnmapMemory(device_->handle(), memory_);
  f.vkFreeMemory(device_->handle(), memory_, nullptr);
}

Status Buffer::check_range(const char* entry, uint64_t offset, uint64_t size) const {
  if (offset > size_ || size > size_ - offset) {
    return sdk::out_of_range(std::string(entry) + ": bytes [" + std::to_string(offset) + ", " +
                             std::to_string(offset) + "+" + std::to_string(size) +
                             ") lie outside the buffer of " + std::to_string(size_) + " bytes");
  }
  return Status();
}

Status Buffer::map(void** out) {
  if (mapped_ == nullptr) {
    return sdk::failed_precondition("buffer_map: the buffer is in device-local memory that is "
                                    "not host-visible; allocate it with LOOM_BUFFER_HOST_VISIBLE");
  }
  *out = mapped_;
  return Status();
}

Status Buffer::copy_from_host(uint64_t offset, const void* src, uint64_t size) {
  LOOM_SDK_RETURN_IF_ERROR(check_range("buffer_copy_from_host", offset, size));
  if (size == 0) return Status();
  if (mapped_ != nullptr && (imported_ || !device_->force_staging())) {
    std::memcpy(static_cast<char*>(mapped_) + offset, src, size);
    return Status();
  }
  return device_->staged_copy(buffer_, offset, const_cast<void*>(src), size, true);
}

Status Buffer::copy_to_host(uint64_t offset, void* dst, uint64_t size) {
  LOOM_SDK_RETURN_IF_ERROR(check_range("buffer_copy_to_host", offset, size));
  if (size == 0) return Status();
  if (mapped_ != nullptr && (imported_ || !device_->force_staging())) {
    std::memcpy(dst, static_cast<const char*>(mapped_) + offset, size);
    return Status();
  }
  return device_->staged_copy(buffer_, offset, dst, size, false);
}

// ------------------------------------------------------------------ device

Status Device::create(const Instance* instance, VkPhysicalDevice physical, uint32_t index,
                      uint32_t queue_family, bool force_staging, WaitMode wait,
                      const std::vector<std::string>& hidden_features, std::unique_ptr<Device>* out) {
  std::unique_ptr<Device> d(new Device());
  d->instance_ = instance;
  d->force_staging_ = force_staging;
  d->props_.uri = "vulkan-compute://" + std::to_string(index);
  LOOM_SDK_RETURN_IF_ERROR(d->init(physical, queue_family, wait, hidden_features));
  *out = std::move(d);
  return Status();
}

Status Device::init(VkPhysicalDevice physical, uint32_t queue_family, WaitMode wait,
                    const std::vector<std::string>& hidden_features) {
  queue_family_ = queue_family;
  uint32_t ext_count = 0;
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &ext_count, nullptr);
  std::vector<VkExtensionProperties> exts(ext_count);
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &ext_count, exts.data());
  const bool host_import = has_extension(exts, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  const bool f16_int8 = has_extension(exts, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
  const bool has_timeline = has_extension(exts, VK_KHR_TIMELINE_SEMAPHORE_EXTENSION_NAME);
  const bool has_8bit = has_extension(exts, VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
  const bool has_dot = has_extension(exts, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);

  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  VkPhysicalDeviceExternalMemoryHostPropertiesEXT import{};
  import.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT;
  VkPhysicalDeviceProperties2 p2{};
  p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  p2.pNext = &subgroup;
  if (host_import) subgroup.pNext = &import;
  vkGetPhysicalDeviceProperties2(physical, &p2);
  const VkPhysicalDeviceProperties& p = p2.properties;
  const VkPhysicalDeviceLimits& lim = p.limits;

  VkPhysicalDeviceShaderFloat16Int8FeaturesKHR f16i8{};
  f16i8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR;
  VkPhysicalDeviceTimelineSemaphoreFeaturesKHR timeline{};
  timeline.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES_KHR;
  VkPhysicalDeviceFeatures2 f2{};
  f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  if (f16_int8) f2.pNext = &f16i8;
  if (has_timeline) {
    timeline.pNext = f2.pNext;
    f2.pNext = &timeline;
  }
  VkPhysicalDevice8BitStorageFeaturesKHR storage8{};
  storage8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES_KHR;
  if (has_8bit) {
    storage8.pNext = f2.pNext;
    f2.pNext = &storage8;
  }
  VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR dot{};
  dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR;
  if (has_dot) {
    dot.pNext = f2.pNext;
    f2.pNext = &dot;
  }
  vkGetPhysicalDeviceFeatures2(physical, &f2);

  vkGetPhysicalDeviceMemoryProperties(physical, &memory_);
  DeviceProperties& d = props_;
  d.device_name = p.deviceName;
  d.vendor_id = p.vendorID;
  d.device_id = p.deviceID;
  d.driver_version = p.driverVersion;
  d.kind = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? LOOM_DEVICE_KIND_CPU : LOOM_DEVICE_KIND_GPU;
  d.api_version = p.apiVersion;
  d.subgroup_size = subgroup.subgroupSize;
  d.max_workgroup_invocations = lim.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) {
    d.max_workgroup_size[i] = lim.maxComputeWorkGroupSize[i];
    d.max_workgroup_count[i] = lim.maxComputeWorkGroupCount[i];
  }
  d.max_shared_memory = lim.maxComputeSharedMemorySize;
  d.max_push_constants = lim.maxPushConstantsSize;
  d.min_storage_offset_alignment = lim.minStorageBufferOffsetAlignment;
  d.max_storage_range = lim.maxStorageBufferRange;
  d.f16 = f16_int8 && f16i8.shaderFloat16;
  d.int8 = f16_int8 && f16i8.shaderInt8;
  // The int8 kernels' features (vulkan.hide_features: as if the driver
  // lacked the ones it names).
  auto shown = [&](const char* name, bool have) {
    return have && std::find(hidden_features.begin(), hidden_features.end(), name) == hidden_features.end();
  };
  d.int8_features.shader_int8 = shown("shaderInt8", d.int8);
  d.int8_features.storage_8bit = shown("storageBuffer8BitAccess", has_8bit && storage8.storageBuffer8BitAccess);
  d.int8_features.float64 = shown("shaderFloat64", f2.features.shaderFloat64 != VK_FALSE);
  d.int8_features.integer_dot = shown("shaderIntegerDotProduct", has_dot && dot.shaderIntegerDotProduct);
  d.int8_missing = int8_missing(d.int8_features);
  d.host_import = host_import;
  d.import_alignment = host_import ? import.minImportedHostPointerAlignment : 0;
  {
    uint32_t families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, nullptr);
    std::vector<VkQueueFamilyProperties> fam(families);
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, fam.data());
    if (queue_family < families && fam[queue_family].timestampValidBits != 0 &&
        lim.timestampPeriod > 0) {
      d.timestamp_period_ns = lim.timestampPeriod;
    }
  }
  for (uint32_t h = 0; h < memory_.memoryHeapCount; ++h) {
    const VkMemoryHeap& heap = memory_.memoryHeaps[h];
    bool host_visible = false;
    for (uint32_t t = 0; t < memory_.memoryTypeCount; ++t) {
      host_visible |= memory_.memoryTypes[t].heapIndex == h &&
                      (memory_.memoryTypes[t].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
    }
    if (heap.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) d.device_local_bytes += heap.size;
    if (host_visible) d.host_visible_bytes += heap.size;
  }
  if (wait == WaitMode::kAuto) {
    // Measured on an H200 (benchmarks/README.md, "Waiting for the GPU"):
    // spinning cut a call's round trip from 55 to 22 us in one session and
    // tied the other modes in another; blocking on a fence or a timeline
    // semaphore cost the same. Never spin on a CPU implementation.
    wait = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? WaitMode::kBlock : WaitMode::kSpin;
  }
  if (wait == WaitMode::kTimeline && !(has_timeline && timeline.timelineSemaphore)) {
    return sdk::failed_precondition(std::string("vulkan.wait=timeline, but ") + p.deviceName +
                                    " has no timeline semaphores (VK_KHR_timeline_semaphore)");
  }
  wait_mode_ = wait;
  d.name = std::string(p.deviceName) + " [Vulkan " + version_text(p.apiVersion) + ", driver " +
           version_text(p.driverVersion) + ", subgroup " + std::to_string(d.subgroup_size) +
           ", workgroup <= " + std::to_string(d.max_workgroup_invocations) + ", shared " +
           std::to_string(d.max_shared_memory / 1024) + " KiB" + (d.f16 ? ", f16" : "") +
           (d.int8 ? ", int8" : "") + (d.int8_missing.empty() ? ", int8 kernels" : "") +
           (d.int8_features.integer_dot ? ", int8 dot" : "") + ", wait " + wait_mode_name(wait_mode_) + "]";

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo q{};
  q.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  q.queueFamilyIndex = queue_family;
  q.queueCount = 1;
  q.pQueuePriorities = &priority;
  std::vector<const char*> enable;
  if (host_import) enable.push_back(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  VkPhysicalDeviceTimelineSemaphoreFeaturesKHR enable_timeline{};
  enable_timeline.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES_KHR;
  enable_timeline.timelineSemaphore = VK_TRUE;
  VkDeviceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &q;
  if (wait_mode_ == WaitMode::kTimeline) {
    enable.push_back(VK_KHR_TIMELINE_SEMAPHORE_EXTENSION_NAME);
    info.pNext = &enable_timeline;
  }
  // The int8 kernels' features, only where all of them are present.
  VkPhysicalDeviceFeatures2 enable_f2{};
  enable_f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  VkPhysicalDeviceShaderFloat16Int8FeaturesKHR enable_int8{};
  enable_int8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR;
  VkPhysicalDevice8BitStorageFeaturesKHR enable_8bit{};
  enable_8bit.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES_KHR;
  if (d.int8_missing.empty()) {
    enable_f2.features.shaderFloat64 = VK_TRUE;
    enable_int8.shaderInt8 = VK_TRUE;
    enable_8bit.storageBuffer8BitAccess = VK_TRUE;
    enable_8bit.pNext = &enable_int8;
    enable_int8.pNext = const_cast<void*>(info.pNext);
    enable_f2.pNext = &enable_8bit;
    info.pNext = &enable_f2;
    enable.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    enable.push_back(VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
  }
  // Integer dot products, for the int8 convolutions (int8_dot.hpp).
  VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR enable_dot{};
  enable_dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR;
  if (d.int8_missing.empty() && d.int8_features.integer_dot) {
    enable_dot.shaderIntegerDotProduct = VK_TRUE;
    enable_dot.pNext = enable_f2.pNext;
    enable_f2.pNext = &enable_dot;
    enable.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  }
  info.enabledExtensionCount = static_cast<uint32_t>(enable.size());
  info.ppEnabledExtensionNames = enable.data();
  VkResult r = vkCreateDevice(physical, &info, nullptr, &device_);
  if (r != VK_SUCCESS) {
    device_ = VK_NULL_HANDLE;
    return vk_status(r, d.uri + " (" + p.deviceName + "): vkCreateDevice");
  }
  LOOM_SDK_RETURN_IF_ERROR(load_device(device_, host_import, &fns_));
  if (wait_mode_ == WaitMode::kTimeline && fns_.vkWaitSemaphoresKHR == nullptr) {
    return sdk::internal_error(d.uri + ": VK_KHR_timeline_semaphore is enabled but the driver "
                               "gives no vkWaitSemaphoresKHR");
  }
  fns_.vkGetDeviceQueue(device_, queue_family, 0, &queue_);
  pipelines_ = std::make_unique<Pipelines>(this);
  cost_ = std::make_unique<CostModel>(this);

  LOOM_SDK_RETURN_IF_ERROR(create_buffer(kStagingBytes, true, &staging_));
  LOOM_SDK_RETURN_IF_ERROR(staging_->map(&staging_ptr_));
  VkCommandPoolCreateInfo pool{};
  pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = queue_family;
  r = fns_.vkCreateCommandPool(device_, &pool, nullptr, &staging_pool_);
  if (r != VK_SUCCESS) return vk_status(r, d.uri + ": vkCreateCommandPool");
  VkCommandBufferAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  alloc.commandPool = staging_pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  r = fns_.vkAllocateCommandBuffers(device_, &alloc, &staging_cmd_);
  if (r != VK_SUCCESS) return vk_status(r, d.uri + ": vkAllocateCommandBuffers");
  VkFenceCreateInfo fence{};
  fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  r = fns_.vkCreateFence(device_, &fence, nullptr, &staging_fence_);
  if (r != VK_SUCCESS) return vk_status(r, d.uri + ": vkCreateFence");
  return Status();
}

Device::~Device() {
  if (device_ == VK_NULL_HANDLE) return;
  if (fns_.vkDeviceWaitIdle != nullptr) {
    fns_.vkDeviceWaitIdle(device_);
    staging_.reset();
    pipelines_.reset();
    if (staging_fence_ != VK_NULL_HANDLE) fns_.vkDestroyFence(device_, staging_fence_, nullptr);
    if (staging_pool_ != VK_NULL_HANDLE) fns_.vkDestroyCommandPool(device_, staging_pool_, nullptr);
  }
  if (fns_.vkDestroyDevice != nullptr) fns_.vkDestroyDevice(device_, nullptr);
}

void Device::info(loom_device_info_t* out) const {
  out->uri = props_.uri.c_str();
  out->name = props_.name.c_str();
  out->kind = props_.kind;
  out->device_memory_bytes = props_.device_local_bytes;
  out->host_visible_memory_bytes = props_.host_visible_bytes;
  out->capabilities = LOOM_DEVICE_CAP_ASYNC |
                      (props_.host_visible_bytes != 0 ? LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY : 0) |
                      (props_.host_import ? LOOM_DEVICE_CAP_HOST_POINTER_IMPORT : 0);
  out->dtype_mask = LOOM_DTYPE_BIT(LOOM_DTYPE_F32);
  if (props_.int8_missing.empty()) {
    out->dtype_mask |= LOOM_DTYPE_BIT(LOOM_DTYPE_U8) | LOOM_DTYPE_BIT(LOOM_DTYPE_I8) | LOOM_DTYPE_BIT(LOOM_DTYPE_I32);
  }
}

Status Device::alloc_memory(const VkMemoryRequirements& req, bool host_visible, const void* next,
                            VkDeviceMemory* out, bool* out_mapped_ok) {
  const VkMemoryPropertyFlags mappable =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags want = host_visible ? mappable : VkMemoryPropertyFlags{VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT};
  uint32_t type = UINT32_MAX;
  for (uint32_t t = 0; t < memory_.memoryTypeCount && type == UINT32_MAX; ++t) {
    if ((req.memoryTypeBits & (1u << t)) && (memory_.memoryTypes[t].propertyFlags & want) == want) {
      type = t;
    }
  }
  for (uint32_t t = 0; t < memory_.memoryTypeCount && type == UINT32_MAX && !host_visible; ++t) {
    if (req.memoryTypeBits & (1u << t)) type = t;
  }
  if (type == UINT32_MAX) {
    return sdk::resource_exhausted(props_.uri + ": no memory type fits (type bits 0x" +
                                   std::to_string(req.memoryTypeBits) + (host_visible ? ", host-visible" : "") + ")");
  }
  VkMemoryAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  info.pNext = next;
  info.allocationSize = req.size;
  info.memoryTypeIndex = type;
  const VkResult r = fns_.vkAllocateMemory(device_, &info, nullptr, out);
  if (r != VK_SUCCESS) {
    *out = VK_NULL_HANDLE;
    return vk_status(r, props_.uri + ": vkAllocateMemory of " + std::to_string(req.size) + " bytes");
  }
  *out_mapped_ok = (memory_.memoryTypes[type].propertyFlags & mappable) == mappable;
  return Status();
}

Status Device::create_buffer(uint64_t size, bool host_visible, std::unique_ptr<Buffer>* out) {
  if (props_.max_storage_range != 0 && size > props_.max_storage_range) {
    return sdk::resource_exhausted(props_.uri + ": a buffer of " + std::to_string(size) +
                                   " bytes exceeds the device's storage-buffer range of " +
                                   std::to_string(props_.max_storage_range));
  }
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = std::max<uint64_t>(size, 4);
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkResult r = fns_.vkCreateBuffer(device_, &info, nullptr, &buffer);
  if (r != VK_SUCCESS) return vk_status(r, props_.uri + ": vkCreateBuffer");
  VkMemoryRequirements req{};
  fns_.vkGetBufferMemoryRequirements(device_, buffer, &req);
  VkDeviceMemory memory = VK_NULL_HANDLE;
  bool mappable = false;
  Status s = alloc_memory(req, host_visible, nullptr, &memory, &mappable);
  if (!s.ok()) {
    fns_.vkDestroyBuffer(device_, buffer, nullptr);
    return s;
  }
  void* mapped = nullptr;
  r = fns_.vkBindBufferMemory(device_, buffer, memory, 0);
  if (r == VK_SUCCESS && mappable) r = fns_.vkMapMemory(device_, memory, 0, VK_WHOLE_SIZE, 0, &mapped);
  if (r != VK_SUCCESS) {
    fns_.vkDestroyBuffer(device_, buffer, nullptr);
    fns_.vkFreeMemory(device_, memory, nullptr);
    return vk_status(r, props_.uri + ": binding or mapping buffer memory");
  }
  *out = std::make_unique<Buffer>(this, buffer, memory, size, mapped, false);
  return Status();
}

Status Device::allocate_buffer(uint64_t size, uint64_t, uint32_t flags,
                               std::unique_ptr<Buffer>* out) {
  if ((flags & ~static_cast<uint32_t>(LOOM_BUFFER_HOST_VISIBLE)) != 0) {
    return sdk::invalid_argument("buffer_allocate: unknown flags " + std::to_string(flags));
  }
  return create_buffer(size, (flags & LOOM_BUFFER_HOST_VISIBLE) != 0, out);
}

Status Device::import_host(void* pointer, uint64_t size, std::unique_ptr<Buffer>* out) {
  if (!props_.host_import) {
    return sdk::unimplemented(props_.uri + " has no VK_EXT_external_memory_host");
  }
  const uint64_t align = props_.import_alignment;
  if (pointer == nullptr || size == 0 || reinterpret_cast<uintptr_t>(pointer) % align != 0 ||
      size % align != 0) {
    return sdk::invalid_argument("buffer_import_host: " + props_.uri +
                                 " imports non-empty host memory whose address and size are "
                                 "multiples of " + std::to_string(align) + " bytes (got size " +
                                 std::to_string(size) + ", address mod " +
                                 std::to_string(reinterpret_cast<uintptr_t>(pointer) % align) + ")");
  }
  VkMemoryHostPointerPropertiesEXT host_props{};
  host_props.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT;
  VkResult r = fns_.vkGetMemoryHostPointerPropertiesEXT(
      device_, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, pointer, &host_props);
  if (r != VK_SUCCESS) return vk_status(r, props_.uri + ": vkGetMemoryHostPointerPropertiesEXT");
  VkExternalMemoryBufferCreateInfo external{};
  external.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
  external.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.pNext = &external;
  info.size = size;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBuffer buffer = VK_NULL_HANDLE;
  r = fns_.vkCreateBuffer(device_, &info, nullptr, &buffer);
  if (r != VK_SUCCESS) return vk_status(r, props_.uri + ": vkCreateBuffer (import)");
  VkMemoryRequirements req{};
  fns_.vkGetBufferMemoryRequirements(device_, buffer, &req);
  req.memoryTypeBits &= host_props.memoryTypeBits;
  req.size = size;
  VkImportMemoryHostPointerInfoEXT import{};
  import.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT;
  import.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  import.pHostPointer = pointer;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  bool mappable = false;
  Status s = alloc_memory(req, false, &import, &memory, &mappable);
  if (s.ok()) {
    r = fns_.vkBindBufferMemory(device_, buffer, memory, 0);
    if (r != VK_SUCCESS) s = vk_status(r, props_.uri + ": vkBindBufferMemory (import)");
  }
  if (!s.ok()) {
    fns_.vkDestroyBuffer(device_, buffer, nullptr);
    if (memory != VK_NULL_HANDLE) fns_.vkFreeMemory(device_, memory, nullptr);
    return s;
  }
  *out = std::make_unique<Buffer>(this, buffer, memory, size, pointer, true);
  return Status();
}

Status Device::create_fence(std::unique_ptr<Fence>* out) {
  *out = std::make_unique<Fence>(this);
  return Status();
}

Status Device::submit(VkCommandBuffer cmd, VkFence fence, VkSemaphore timeline, uint64_t value) {
  VkSubmitInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  info.commandBufferCount = 1;
  info.pCommandBuffers = &cmd;
  VkTimelineSemaphoreSubmitInfoKHR values{};
  if (timeline != VK_NULL_HANDLE) {
    values.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO_KHR;
    values.signalSemaphoreValueCount = 1;
    values.pSignalSemaphoreValues = &value;
    info.pNext = &values;
    info.signalSemaphoreCount = 1;
    info.pSignalSemaphores = &timeline;
  }
  std::lock_guard<std::mutex> lock(queue_mu_);
  const VkResult r = fns_.vkQueueSubmit(queue_, 1, &info, fence);
  if (r != VK_SUCCESS) return vk_status(r, props_.uri + ": vkQueueSubmit");
  return Status();
}

Status Device::staged_copy(VkBuffer buffer, uint64_t offset, void* host, uint64_t size,
                           bool to_device) {
  std::lock_guard<std::mutex> lock(staging_mu_);
  for (uint64_t done = 0; done < size;) {
    const uint64_t n = std::min(size - done, kStagingBytes);
    char* h = static_cast<char*>(host) + done;
    if (to_device) std::memcpy(staging_ptr_, h, n);
    VkCommandBufferBeginInfo begin{};
    begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    VkResult r = fns_.vkBeginCommandBuffer(staging_cmd_, &begin);
    if (r != VK_SUCCESS) return vk_status(r, props_.uri + ": vkBeginCommandBuffer (staging)");
    VkBufferCopy region{};
    region.srcOffset = to_device ? 0 : offset + done;
    region.dstOffset = to_device ? offset + done : 0;
    region.size = n;
    fns_.vkCmdCopyBuffer(staging_cmd_, to_device ? staging_->handle() : buffer,
                         to_device ? buffer : staging_->handle(), 1, &region);
    VkMemoryBarrier barrier{};
    barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT;
    fns_.vkCmdPipelineBarrier(staging_cmd_, VK_PIPELINE_STAGE_TRANSFER_BIT,
                              VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0,
                              1, &barrier, 0, nullptr, 0, nullptr);
    r = fns_.vkEndCommandBuffer(staging_cmd_);
    if (r != VK_SUCCESS) return vk_status(r, props_.uri + ": vkEndCommandBuffer (staging)");
    LOOM_SDK_RETURN_IF_ERROR(submit(staging_cmd_, staging_fence_));
    r = fns_.vkWaitForFences(device_, 1, &staging_fence_, VK_TRUE, kInternalWaitNs);
    if (r != VK_SUCCESS) return vk_status(r, props_.uri + ": waiting for a staging copy");
    fns_.vkResetFences(device_, 1, &staging_fence_);
    if (!to_device) std::memcpy(h, staging_ptr_, n);
    done += n;
  }
  return Status();
}

}  // namespace loom::vulkan
