#include "vk_loader.hpp"

#include <dlfcn.h>

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

Status LoaderLibrary::open(const std::string& name, std::unique_ptr<LoaderLibrary>* out) {
  std::unique_ptr<LoaderLibrary> lib(new LoaderLibrary());
  lib->name_ = name;
  dlerror();
  lib->handle_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* why = dlerror();
    return sdk::unavailable("cannot load the Vulkan loader library \"" + name +
                            "\": " + (why != nullptr ? why : "unknown dlopen error") +
                            " (install libvulkan1, or set the vulkan.loader option)");
  }
  void* sym = dlsym(lib->handle_, "vkGetInstanceProcAddr");
  if (sym == nullptr) {
    return sdk::unavailable("the library \"" + name +
                            "\" is not a Vulkan loader: it has no vkGetInstanceProcAddr");
  }
  LoaderFns& f = lib->fns_;
  f.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(sym);
#define LOOM_VK_LOAD_GLOBAL(fn)                                                          \
  f.fn = reinterpret_cast<PFN_##fn>(f.vkGetInstanceProcAddr(VK_NULL_HANDLE, #fn));      \
  if (f.fn == nullptr) {                                                                 \
    return sdk::unavailable("the Vulkan loader \"" + name + "\" does not provide " #fn); \
  }
  LOOM_VK_LOADER_FNS(LOOM_VK_LOAD_GLOBAL)
#undef LOOM_VK_LOAD_GLOBAL
  f.vkEnumerateInstanceVersion = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
      f.vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));
  *out = std::move(lib);
  return Status();
}

LoaderLibrary::~LoaderLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

Status LoaderLibrary::load_instance(VkInstance instance, InstanceFns* out) const {
  InstanceFns f;
#define LOOM_VK_LOAD_INSTANCE(fn)                                                       \
  f.fn = reinterpret_cast<PFN_##fn>(fns_.vkGetInstanceProcAddr(instance, #fn));        \
  if (f.fn == nullptr) {                                                                \
    return sdk::internal_error("the Vulkan loader \"" + name_ + "\" gives no " #fn);    \
  }
  LOOM_VK_INSTANCE_FNS(LOOM_VK_LOAD_INSTANCE)
#undef LOOM_VK_LOAD_INSTANCE
  f.vkCreateDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
      fns_.vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
  f.vkDestroyDebugUtilsMessengerEXT = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
      fns_.vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
  *out = f;
  return Status();
}

Status load_device(const InstanceFns& instance, VkDevice device, bool host_import,
                   DeviceFns* out) {
  DeviceFns f;
#define LOOM_VK_LOAD_DEVICE(fn)                                                        \
  f.fn = reinterpret_cast<PFN_##fn>(instance.vkGetDeviceProcAddr(device, #fn));       \
  if (f.fn == nullptr) return sdk::internal_error("the Vulkan driver gives no " #fn);
  LOOM_VK_DEVICE_FNS(LOOM_VK_LOAD_DEVICE)
#undef LOOM_VK_LOAD_DEVICE
  if (host_import) {
    f.vkGetMemoryHostPointerPropertiesEXT =
        reinterpret_cast<PFN_vkGetMemoryHostPointerPropertiesEXT>(
            instance.vkGetDeviceProcAddr(device, "vkGetMemoryHostPointerPropertiesEXT"));
    if (f.vkGetMemoryHostPointerPropertiesEXT == nullptr) {
      return sdk::internal_error(
          "the Vulkan driver enables VK_EXT_external_memory_host but gives no "
          "vkGetMemoryHostPointerPropertiesEXT");
    }
  }
  *out = f;
  return Status();
}

}  // namespace loom::vulkan
