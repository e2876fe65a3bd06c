// Loading Vulkan at run time without linking libvulkan and without globals.
//
// The plugin opens the Vulkan loader library itself (dlopen of the name given
// by the `vulkan.loader` option, libvulkan.so.1 by default), looks up only
// vkGetInstanceProcAddr, and fills dispatch tables held by the objects that
// use them: LoaderFns (global entries), InstanceFns (per VkInstance) and
// DeviceFns (per VkDevice, from vkGetDeviceProcAddr, so calls skip the
// loader's trampolines). This is volk's scheme, with the tables in objects
// instead of volk's process-wide function pointers: two plugin instances may
// use two different loader libraries, and nothing mutable is global.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <memory>
#include <string>

#include "loom/plugin.hpp"

namespace loom::vulkan {

using sdk::Status;

// "VK_ERROR_OUT_OF_DEVICE_MEMORY (-2)".
std::string vk_result_name(VkResult r);

// The status for a failed Vulkan call: DEVICE_LOST for VK_ERROR_DEVICE_LOST,
// RESOURCE_EXHAUSTED for out-of-memory results, INTERNAL otherwise. `what`
// names the call and the device, e.g. "vulkan-compute://0: vkQueueSubmit".
Status vk_status(VkResult r, const std::string& what);

#define LOOM_VK_LOADER_FNS(X)              \
  X(vkCreateInstance)                      \
  X(vkEnumerateInstanceExtensionProperties) \
  X(vkEnumerateInstanceLayerProperties)

#define LOOM_VK_INSTANCE_FNS(X)                  \
  X(vkDestroyInstance)                           \
  X(vkEnumeratePhysicalDevices)                  \
  X(vkGetPhysicalDeviceProperties)               \
  X(vkGetPhysicalDeviceProperties2)              \
  X(vkGetPhysicalDeviceFeatures2)                \
  X(vkGetPhysicalDeviceMemoryProperties)         \
  X(vkGetPhysicalDeviceQueueFamilyProperties)    \
  X(vkEnumerateDeviceExtensionProperties)        \
  X(vkCreateDevice)                              \
  X(vkGetDeviceProcAddr)

#define LOOM_VK_DEVICE_FNS(X)             \
  X(vkDestroyDevice)                      \
  X(vkGetDeviceQueue)                     \
  X(vkDeviceWaitIdle)                     \
  X(vkQueueSubmit)                        \
  X(vkAllocateMemory)                     \
  X(vkFreeMemory)                         \
  X(vkMapMemory)                          \
  X(vkUnmapMemory)                        \
  X(vkFlushMappedMemoryRanges)            \
  X(vkInvalidateMappedMemoryRanges)       \
  X(vkCreateBuffer)                       \
  X(vkDestroyBuffer)                      \
  X(vkGetBufferMemoryRequirements)        \
  X(vkBindBufferMemory)                   \
  X(vkCreateCommandPool)                  \
  X(vkDestroyCommandPool)                 \
  X(vkAllocateCommandBuffers)             \
  X(vkFreeCommandBuffers)                 \
  X(vkBeginCommandBuffer)                 \
  X(vkEndCommandBuffer)                   \
  X(vkCmdCopyBuffer)                      \
  X(vkCmdPipelineBarrier)                 \
  X(vkCmdBindPipeline)                    \
  X(vkCmdBindDescriptorSets)              \
  X(vkCmdPushConstants)                   \
  X(vkCmdDispatch)                        \
  X(vkCmdFillBuffer)                      \
  X(vkCreateFence)                        \
  X(vkDestroyFence)                       \
  X(vkResetFences)                        \
  X(vkWaitForFences)                      \
  X(vkGetFenceStatus)                     \
  X(vkCreateShaderModule)                 \
  X(vkDestroyShaderModule)                \
  X(vkCreateDescriptorSetLayout)          \
  X(vkDestroyDescriptorSetLayout)         \
  X(vkCreatePipelineLayout)               \
  X(vkDestroyPipelineLayout)              \
  X(vkCreateComputePipelines)             \
  X(vkDestroyPipeline)                    \
  X(vkCreateDescriptorPool)               \
  X(vkDestroyDescriptorPool)              \
  X(vkAllocateDescriptorSets)             \
  X(vkUpdateDescriptorSets)               \
  X(vkCreateQueryPool)                    \
  X(vkDestroyQueryPool)                   \
  X(vkCmdResetQueryPool)                  \
  X(vkCmdWriteTimestamp)                  \
  X(vkGetQueryPoolResults)

#define LOOM_VK_DECLARE_FN(name) PFN_##name name = nullptr;

// Entries that need no instance, from vkGetInstanceProcAddr(NULL, ...).
struct LoaderFns {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  LOOM_VK_LOADER_FNS(LOOM_VK_DECLARE_FN)
  PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion = nullptr;  // NULL on a 1.0 loader
};

// Entries of one VkInstance. Optional extension entries may stay NULL.
struct InstanceFns {
  LOOM_VK_INSTANCE_FNS(LOOM_VK_DECLARE_FN)
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT = nullptr;
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT = nullptr;
};

// Entries of one VkDevice. vkGetMemoryHostPointerPropertiesEXT is NULL unless
// VK_EXT_external_memory_host was enabled.
struct DeviceFns {
  LOOM_VK_DEVICE_FNS(LOOM_VK_DECLARE_FN)
  PFN_vkGetMemoryHostPointerPropertiesEXT vkGetMemoryHostPointerPropertiesEXT = nullptr;
};

// The opened loader library. Owns the dlopen handle: it must outlive every
// Vulkan object created through its tables. Not copyable.
class LoaderLibrary {
 public:
  // Opens `name` (a file name searched like dlopen does, or a path) and loads
  // the global entries. UNAVAILABLE naming the library and dlerror() when it
  // cannot be opened or lacks vkGetInstanceProcAddr.
  static Status open(const std::string& name, std::unique_ptr<LoaderLibrary>* out);
  ~LoaderLibrary();
  LoaderLibrary(const LoaderLibrary&) = delete;
  LoaderLibrary& operator=(const LoaderLibrary&) = delete;

  const LoaderFns& fns() const { return fns_; }
  const std::string& name() const { return name_; }

  // Fills the instance table; INTERNAL naming the first required entry the
  // loader does not give.
  Status load_instance(VkInstance instance, InstanceFns* out) const;

 private:
  LoaderLibrary() = default;
  void* handle_ = nullptr;
  std::string name_;
  LoaderFns fns_;
};

// Fills a device table from the instance's vkGetDeviceProcAddr; INTERNAL
// naming the first required entry missing. `host_import` asks for the
// VK_EXT_external_memory_host entry too.
Status load_device(const InstanceFns& instance, VkDevice device, bool host_import,
                   DeviceFns* out);

}  // namespace loom::vulkan
