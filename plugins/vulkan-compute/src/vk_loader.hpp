// Loading Vulkan at run time with volk (Debian libvulkan-volk-dev), without
// linking libvulkan.
//
// The plugin opens the Vulkan loader library itself (dlopen of the name given
// by the `vulkan.loader` option, libvulkan.so.1 by default) and hands its
// vkGetInstanceProcAddr to volkInitializeCustom. volk then holds the global
// and instance-level entries in its process-wide function pointers; every
// VkDevice gets its own VolkDeviceTable (volkLoadDeviceTable, through
// vkGetDeviceProcAddr), so device-level calls skip the loader's trampolines
// and two devices share no mutable state.
//
// volk's pointers are the one mutable global of the plugin (the design's
// documented exception). They are written once per process, under a mutex,
// before any instance exists: volk_initialize() with the first loader that
// works, volk_load_instance() with the first VkInstance. The instance-level
// entries the loader gives are its trampolines, which dispatch on the handle,
// so one set serves every later VkInstance of the same loader. The loader
// library is never closed. One process uses one loader library: a plugin
// instance that names another one is refused (FAILED_PRECONDITION).
#pragma once

#include <volk.h>

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

// The entries of one VkDevice: volk's table, filled from vkGetDeviceProcAddr.
// vkGetMemoryHostPointerPropertiesEXT is NULL unless
// VK_EXT_external_memory_host was enabled.
using DeviceFns = VolkDeviceTable;

// Initializes volk with the loader library `name` (a file name searched like
// dlopen does, or a path), once per process. UNAVAILABLE naming the library
// and dlerror() when it cannot be opened, lacks vkGetInstanceProcAddr or
// speaks a Vulkan older than 1.1; FAILED_PRECONDITION when volk already runs
// on another loader library in this process. A failed call leaves volk as it
// was, so a later call with a working loader succeeds.
Status volk_initialize(const std::string& name);

// Loads volk's instance-level entries from `instance` unless an earlier
// instance did (see above). INTERNAL naming the first required entry missing.
Status volk_load_instance(VkInstance instance);

// Fills a device table; INTERNAL naming the first required entry missing.
// `host_import` requires the VK_EXT_external_memory_host entry too.
Status load_device(VkDevice device, bool host_import, DeviceFns* out);

}  // namespace loom::vulkan
