// The plugin's VkInstance (volk initialized with the loader library first)
// and, with `vulkan.validation=1`, the Khronos validation layer whose every
// message is logged through the host as an error.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "vk_loader.hpp"

namespace loom::vulkan {

// Plugin options (loom_option_t keys). Keys outside "vulkan." are ignored
// (the host passes every plugin the same list); unknown "vulkan." keys are
// an error.
inline constexpr const char* kOptionLoader = "vulkan.loader";          // library name or path
inline constexpr const char* kOptionAllowCpu = "vulkan.allow_cpu";     // 0 hides CPU devices
inline constexpr const char* kOptionValidation = "vulkan.validation";  // 1 enables the layer
inline constexpr const char* kOptionStaging = "vulkan.staging";        // 1 forces staged copies
inline constexpr const char* kOptionWait = "vulkan.wait";              // auto, block, spin, timeline
// Comma-separated Vulkan feature names the devices are to treat as absent
// (shaderInt8, storageBuffer8BitAccess, shaderFloat64,
// shaderIntegerDotProduct): how a test sees a device without them.
inline constexpr const char* kOptionHideFeatures = "vulkan.hide_features";
inline constexpr const char* kDefaultLoader = "libvulkan.so.1";
inline constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

// How a host thread waits for a submission to finish (vulkan.wait).
//   kBlock: vkWaitForFences; the thread sleeps until the driver wakes it.
//   kSpin: polls vkGetFenceStatus for about twice the slot's last execution
//     time (at most kSpinMaxNs, nothing once executions take longer), then
//     blocks: no sleep/wake round trip for short executions.
//   kTimeline: the submission signals a timeline semaphore
//     (VK_KHR_timeline_semaphore), waited for with vkWaitSemaphoresKHR.
//   kAuto: kBlock on CPU implementations (lavapipe: their threads are the
//     device's, a spinning host thread would take a core from it), kSpin on
//     GPUs (benchmarks/README.md, "Waiting for the GPU", has the measurements).
enum class WaitMode { kAuto, kBlock, kSpin, kTimeline };
const char* wait_mode_name(WaitMode mode);
inline constexpr uint64_t kSpinMaxNs = 1000 * 1000;

struct InstanceOptions {
  std::string loader = kDefaultLoader;
  bool allow_cpu = true;
  bool validation = false;
  bool force_staging = false;
  WaitMode wait = WaitMode::kAuto;
  std::vector<std::string> hidden_features;  // vulkan.hide_features
};

// Parses the plugin options; INVALID_ARGUMENT naming the bad key.
Status parse_options(const sdk::Options& options, InstanceOptions* out);

// Owns the VkInstance; instance-level calls go through volk's entries (see
// vk_loader.hpp). Thread-safe after creation: it is only read.
class Instance {
 public:
  // UNAVAILABLE when the loader cannot be opened or refuses an instance
  // (the reason names the library and the VkResult); FAILED_PRECONDITION
  // when validation is asked for and the layer is not installed, or when the
  // process already runs volk on another loader library.
  static Status create(const InstanceOptions& options, const loom_host_services_t* host,
                       std::unique_ptr<Instance>* out);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance handle() const { return instance_; }
  uint32_t api_version() const { return api_version_; }
  bool validation() const { return messenger_ != VK_NULL_HANDLE; }
  // Validation messages seen so far (each was logged as an error).
  uint64_t validation_messages() const { return messages_.load(); }

  // Logs through the host's logger when it has one.
  void log(loom_log_level_t level, const std::string& message) const;
  // Sends one trace event to the host's trace service when it has one
  // (`timestamp_ns` on the steady clock; the host drops it unless a trace is
  // being recorded).
  void trace(loom_trace_phase_t phase, const std::string& category, const std::string& name,
             uint64_t timestamp_ns) const;

 private:
  Instance() = default;
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(
      VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
      const VkDebugUtilsMessengerCallbackDataEXT* data, void* user);

  const loom_host_services_t* host_ = nullptr;
  VkInstance instance_ = VK_NULL_HANDLE;
  // VK_EXT_debug_utils entries of this instance (validation only).
  PFN_vkCreateDebugUtilsMessengerEXT create_messenger_ = nullptr;
  PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger_ = nullptr;
  uint32_t api_version_ = VK_API_VERSION_1_1;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  std::atomic<uint64_t> messages_{0};
};

}  // namespace loom::vulkan
