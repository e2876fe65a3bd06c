#include "vk_loader.hpp"

#include <dlfcn.h>

#include <mutex>

namespace loom::vulkan {

std::string vk_result_name(VkResult r) {
  const char* name = nullptr;
  switch (r) {
    case VK_SUCCESS: name = "VK_SUCCESS"; break;
    case VK_NOT_READY: name = "VK_NOT_READY"; break;
    case VK_TIMEOUT: name = "VK_TIMEOUT"; break;
    case VK_INCOMPLETE: name = "VK_INCOMPLETE"; break;
    case VK_ERROR_OUT_OF_HOST_MEMORY: name = "VK_ERROR_OUT_OF_HOST_MEMORY"; break;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: name = "VK_ERROR_OUT_OF_DEVICE_MEMORY"; break;
    case VK_ERROR_INITIALIZATION_FAILED: name = "VK_ERROR_INITIALIZATION_FAILED"; break;
    case VK_ERROR_DEVICE_LOST: name = "VK_ERROR_DEVICE_LOST"; break;
    case VK_ERROR_MEMORY_MAP_FAILED: name = "VK_ERROR_MEMORY_MAP_FAILED"; break;
    case VK_ERROR_LAYER_NOT_PRESENT: name = "VK_ERROR_LAYER_NOT_PRESENT"; break;
    case VK_ERROR_EXTENSION_NOT_PRESENT: name = "VK_ERROR_EXTENSION_NOT_PRESENT"; break;
    case VK_ERROR_FEATURE_NOT_PRESENT: name = "VK_ERROR_FEATURE_NOT_PRESENT"; break;
    case VK_ERROR_INCOMPATIBLE_DRIVER: name = "VK_ERROR_INCOMPATIBLE_DRIVER"; break;
    case VK_ERROR_TOO_MANY_OBJECTS: name = "VK_ERROR_TOO_MANY_OBJECTS"; break;
    case VK_ERROR_INVALID_EXTERNAL_HANDLE: name = "VK_ERROR_INVALID_EXTERNAL_HANDLE"; break;
    case VK_ERROR_OUT_OF_POOL_MEMORY: name = "VK_ERROR_OUT_OF_POOL_MEMORY"; break;
    default: break;
  }
  std::string code = std::to_string(static_cast<int>(r));
  return name == nullptr ? "VkResult " + code : std::string(name) + " (" + code + ")";
}

Status vk_status(VkResult r, const std::string& what) {
  const std::string message = what + " failed: " + vk_result_name(r);
  switch (r) {
    case VK_SUCCESS: return Status();
    case VK_ERROR_DEVICE_LOST: return {LOOM_STATUS_DEVICE_LOST, message};
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_TOO_MANY_OBJECTS: return sdk::resource_exhausted(message);
    case VK_TIMEOUT: return sdk::deadline_exceeded(message);
    default: return sdk::internal_error(message);
  }
}

namespace {

// What volk runs on in this process (see vk_loader.hpp): the loader library's
// handle and entry, and whether instance-level entries are loaded. Part of
// volk's documented global state; only read or written under `mutex`.
struct VolkState {
  std::mutex mutex;
  void* handle = nullptr;
  std::string name;
  bool instance_loaded = false;
};

VolkState& volk_state() {
  static VolkState state;
  return state;
}

}  // namespace

Status volk_initialize(const std::string& name) {
  VolkState& state = volk_state();
  std::lock_guard<std::mutex> lock(state.mutex);
  dlerror();
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return sdk::unavailable("cannot load the Vulkan loader library \"" + name +
                            "\": " + (why != nullptr ? why : "unknown dlopen error") +
                            " (install libvulkan1, or set the vulkan.loader option)");
  }
  auto* gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(handle, "vkGetInstanceProcAddr"));
  if (gipa == nullptr) {
    dlclose(handle);
    return sdk::unavailable("the library \"" + name +
                            "\" is not a Vulkan loader: it has no vkGetInstanceProcAddr");
  }
  if (state.handle != nullptr) {
    // dlopen counts references: the same library gives the same handle.
    dlclose(handle);
    if (handle == state.handle) return Status();
    return sdk::failed_precondition(
        "the Vulkan loader \"" + name + "\" differs from \"" + state.name +
        "\", which this process already uses: volk holds one loader per process, so every "
        "vulkan-compute instance of a process must name the same vulkan.loader");
  }
  // Checked through the loader's own entry before volk is touched, so that
  // a refused library leaves volk as it was.
  for (const char* fn : {"vkCreateInstance", "vkEnumerateInstanceExtensionProperties",
                         "vkEnumerateInstanceLayerProperties"}) {
    if (gipa(VK_NULL_HANDLE, fn) == nullptr) {
      dlclose(handle);
      return sdk::unavailable("the Vulkan loader \"" + name + "\" does not provide " + fn);
    }
  }
  uint32_t version = VK_API_VERSION_1_0;
  auto* enumerate_version = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
      gipa(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));  // NULL on a 1.0 loader
  if (enumerate_version != nullptr && enumerate_version(&version) != VK_SUCCESS) {
    version = VK_API_VERSION_1_0;
  }
  if (version < VK_API_VERSION_1_1) {
    dlclose(handle);
    return sdk::unavailable("the Vulkan loader \"" + name + "\" speaks Vulkan " +
                            std::to_string(VK_API_VERSION_MAJOR(version)) + "." +
                            std::to_string(VK_API_VERSION_MINOR(version)) +
                            "; vulkan-compute needs 1.1");
  }
  volkInitializeCustom(gipa);
  state.handle = handle;  // kept open for the process's life, as volk keeps it
  state.name = name;
  return Status();
}

Status volk_load_instance(VkInstance instance) {
  VolkState& state = volk_state();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!state.instance_loaded) {
    volkLoadInstanceOnly(instance);
    state.instance_loaded = true;
  }
#define LOOM_VK_REQUIRE(fn) \
  if (fn == nullptr) return sdk::internal_error("the Vulkan loader \"" + state.name + "\" gives no " #fn);
  LOOM_VK_REQUIRE(vkDestroyInstance)
  LOOM_VK_REQUIRE(vkEnumeratePhysicalDevices)
  LOOM_VK_REQUIRE(vkGetPhysicalDeviceProperties)
  LOOM_VK_REQUIRE(vkGetPhysicalDeviceProperties2)
  LOOM_VK_REQUIRE(vkGetPhysicalDeviceFeatures2)
  LOOM_VK_REQUIRE(vkGetPhysicalDeviceMemoryProperties)
  LOOM_VK_REQUIRE(vkGetPhysicalDeviceQueueFamilyProperties)
  LOOM_VK_REQUIRE(vkEnumerateDeviceExtensionProperties)
  LOOM_VK_REQUIRE(vkCreateDevice)
  LOOM_VK_REQUIRE(vkGetDeviceProcAddr)
#undef LOOM_VK_REQUIRE
  return Status();
}

Status load_device(VkDevice device, bool host_import, DeviceFns* out) {
  DeviceFns f{};
  volkLoadDeviceTable(&f, device);
#define LOOM_VK_REQUIRE(fn) \
  if (f.fn == nullptr) return sdk::internal_error("the Vulkan driver gives no " #fn);
  LOOM_VK_REQUIRE(vkDestroyDevice)
  LOOM_VK_REQUIRE(vkGetDeviceQueue)
  LOOM_VK_REQUIRE(vkDeviceWaitIdle)
  LOOM_VK_REQUIRE(vkQueueSubmit)
  LOOM_VK_REQUIRE(vkAllocateMemory)
  LOOM_VK_REQUIRE(vkFreeMemory)
  LOOM_VK_REQUIRE(vkMapMemory)
  LOOM_VK_REQUIRE(vkUnmapMemory)
  LOOM_VK_REQUIRE(vkFlushMappedMemoryRanges)
  LOOM_VK_REQUIRE(vkInvalidateMappedMemoryRanges)
  LOOM_VK_REQUIRE(vkCreateBuffer)
  LOOM_VK_REQUIRE(vkDestroyBuffer)
  LOOM_VK_REQUIRE(vkGetBufferMemoryRequirements)
  LOOM_VK_REQUIRE(vkBindBufferMemory)
  LOOM_VK_REQUIRE(vkCreateCommandPool)
  LOOM_VK_REQUIRE(vkDestroyCommandPool)
  LOOM_VK_REQUIRE(vkAllocateCommandBuffers)
  LOOM_VK_REQUIRE(vkFreeCommandBuffers)
  LOOM_VK_REQUIRE(vkBeginCommandBuffer)
  LOOM_VK_REQUIRE(vkEndCommandBuffer)
  LOOM_VK_REQUIRE(vkCmdCopyBuffer)
  LOOM_VK_REQUIRE(vkCmdPipelineBarrier)
  LOOM_VK_REQUIRE(vkCmdBindPipeline)
  LOOM_VK_REQUIRE(vkCmdBindDescriptorSets)
  LOOM_VK_REQUIRE(vkCmdPushConstants)
  LOOM_VK_REQUIRE(vkCmdDispatch)
  LOOM_VK_REQUIRE(vkCmdFillBuffer)
  LOOM_VK_REQUIRE(vkCreateSemaphore)
  LOOM_VK_REQUIRE(vkDestroySemaphore)
  LOOM_VK_REQUIRE(vkCreateFence)
  LOOM_VK_REQUIRE(vkDestroyFence)
  LOOM_VK_REQUIRE(vkResetFences)
  LOOM_VK_REQUIRE(vkWaitForFences)
  LOOM_VK_REQUIRE(vkGetFenceStatus)
  LOOM_VK_REQUIRE(vkCreateShaderModule)
  LOOM_VK_REQUIRE(vkDestroyShaderModule)
  LOOM_VK_REQUIRE(vkCreateDescriptorSetLayout)
  LOOM_VK_REQUIRE(vkDestroyDescriptorSetLayout)
  LOOM_VK_REQUIRE(vkCreatePipelineLayout)
  LOOM_VK_REQUIRE(vkDestroyPipelineLayout)
  LOOM_VK_REQUIRE(vkCreateComputePipelines)
  LOOM_VK_REQUIRE(vkDestroyPipeline)
  LOOM_VK_REQUIRE(vkCreateDescriptorPool)
  LOOM_VK_REQUIRE(vkDestroyDescriptorPool)
  LOOM_VK_REQUIRE(vkAllocateDescriptorSets)
  LOOM_VK_REQUIRE(vkUpdateDescriptorSets)
  LOOM_VK_REQUIRE(vkCreateQueryPool)
  LOOM_VK_REQUIRE(vkDestroyQueryPool)
  LOOM_VK_REQUIRE(vkCmdResetQueryPool)
  LOOM_VK_REQUIRE(vkCmdWriteTimestamp)
  LOOM_VK_REQUIRE(vkGetQueryPoolResults)
#undef LOOM_VK_REQUIRE
  if (host_import && f.vkGetMemoryHostPointerPropertiesEXT == nullptr) {
    return sdk::internal_error(
        "the Vulkan driver enables VK_EXT_external_memory_host but gives no "
        "vkGetMemoryHostPointerPropertiesEXT");
  }
  if (!host_import) f.vkGetMemoryHostPointerPropertiesEXT = nullptr;
  *out = f;
  return Status();
}

}  // namespace loom::vulkan
