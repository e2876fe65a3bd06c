#include "instance.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace loom::vulkan {
namespace {

Status parse_bool(const sdk::Options& options, const char* key, bool fallback, bool* out) {
  const char* v = options.find(key);
  if (v == nullptr) {
    *out = fallback;
  } else if (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0) {
    *out = true;
  } else if (std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0) {
    *out = false;
  } else {
    return sdk::invalid_argument(std::string("option ") + key + "=\"" + v +
                                 "\" must be 0, 1, true or false");
  }
  return Status();
}

}  // namespace

const char* wait_mode_name(WaitMode mode) {
  switch (mode) {
    case WaitMode::kBlock: return "block";
    case WaitMode::kSpin: return "spin";
    case WaitMode::kTimeline: return "timeline";
    case WaitMode::kAuto: break;
  }
  return "auto";
}

Status parse_options(const sdk::Options& options, InstanceOptions* out) {
  InstanceOptions o;
  for (size_t i = 0; i < options.size(); ++i) {
    const char* key = options[i].key;
    if (std::strncmp(key, "vulkan.", 7) != 0) continue;
    if (std::strcmp(key, kOptionLoader) != 0 && std::strcmp(key, kOptionAllowCpu) != 0 &&
        std::strcmp(key, kOptionValidation) != 0 && std::strcmp(key, kOptionStaging) != 0 &&
        std::strcmp(key, kOptionWait) != 0 && std::strcmp(key, kOptionHideFeatures) != 0) {
      return sdk::invalid_argument(std::string("unknown option ") + key + " (vulkan-compute takes " +
                                   kOptionLoader + ", " + kOptionAllowCpu + ", " +
                                   kOptionValidation + ", " + kOptionStaging + ", " + kOptionWait +
                                   ", " + kOptionHideFeatures + ")");
    }
  }
  if (const char* loader = options.find(kOptionLoader)) {
    if (*loader == '\0') return sdk::invalid_argument("option vulkan.loader is empty");
    o.loader = loader;
  }
  LOOM_SDK_RETURN_IF_ERROR(parse_bool(options, kOptionAllowCpu, true, &o.allow_cpu));
  LOOM_SDK_RETURN_IF_ERROR(parse_bool(options, kOptionValidation, false, &o.validation));
  LOOM_SDK_RETURN_IF_ERROR(parse_bool(options, kOptionStaging, false, &o.force_staging));
  if (const char* wait = options.find(kOptionWait)) {
    bool known = false;
    for (WaitMode m : {WaitMode::kAuto, WaitMode::kBlock, WaitMode::kSpin, WaitMode::kTimeline}) {
      if (std::strcmp(wait, wait_mode_name(m)) == 0) {
        o.wait = m;
        known = true;
      }
    }
    if (!known) {
      return sdk::invalid_argument(std::string("option vulkan.wait=\"") + wait +
                                   "\" must be auto, block, spin or timeline");
    }
  }
  if (const char* hide = options.find(kOptionHideFeatures)) {
    static const char* const kKnown[] = {"shaderInt8", "storageBuffer8BitAccess", "shaderFloat64",
                                         "shaderIntegerDotProduct"};
    std::string list = hide;
    size_t at = 0;
    while (at <= list.size()) {
      const size_t end = std::min(list.find(',', at), list.size());
      const std::string name = list.substr(at, end - at);
      bool known = false;
      for (const char* k : kKnown) known |= name == k;
      if (!known) {
        return sdk::invalid_argument(std::string("option vulkan.hide_features=\"") + hide + "\": \"" + name +
                                     "\" is not one of shaderInt8, storageBuffer8BitAccess, shaderFloat64, "
                                     "shaderIntegerDotProduct");
      }
      o.hidden_features.push_back(name);
      at = end + 1;
    }
  }
  *out = std::move(o);
  return Status();
}

void Instance::log(loom_log_level_t level, const std::string& message) const {
  if (host_ != nullptr && LOOM_STRUCT_HAS(loom_host_services_t, host_->struct_size, log) &&
      host_->log != nullptr) {
    host_->log(host_->user_data, level, message.c_str());
  }
}

void Instance::trace(loom_trace_phase_t phase, const std::string& category,
                     const std::string& name, uint64_t timestamp_ns) const {
  sdk::send_trace(host_, phase, category.c_str(), name.c_str(), timestamp_ns);
}

VKAPI_ATTR VkBool32 VKAPI_CALL Instance::on_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT, VkDebugUtilsMessageTypeFlagsEXT,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  auto* self = static_cast<Instance*>(user);
  self->messages_.fetch_add(1);
  try {
    self->log(LOOM_LOG_ERROR, std::string("vulkan-compute: validation: ") +
                                  (data != nullptr && data->pMessage != nullptr ? data->pMessage
                                                                                : "(no text)"));
  } catch (...) {
    // The count above still records the message.
  }
  return VK_FALSE;
}

Status Instance::create(const InstanceOptions& options, const loom_host_services_t* host,
                        std::unique_ptr<Instance>* out) {
  std::unique_ptr<Instance> self(new Instance());
  self->host_ = host;
  LOOM_SDK_RETURN_IF_ERROR(volk_initialize(options.loader));
  self->api_version_ = VK_API_VERSION_1_1;

  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  if (options.validation) {
    uint32_t count = 0;
    vkEnumerateInstanceLayerProperties(&count, nullptr);
    std::vector<VkLayerProperties> props(count);
    vkEnumerateInstanceLayerProperties(&count, props.data());
    bool found = false;
    for (uint32_t i = 0; i < count; ++i) found |= std::strcmp(props[i].layerName, kValidationLayer) == 0;
    if (!found) {
      return sdk::failed_precondition(std::string("vulkan.validation=1 but the layer ") +
                                      kValidationLayer +
                                      " is not installed (Debian: vulkan-validationlayers)");
    }
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }

  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "loom";
  app.pEngineName = "loom vulkan-compute";
  app.apiVersion = self->api_version_;
  VkDebugUtilsMessengerCreateInfoEXT messenger{};
  messenger.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
  messenger.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                              VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger.pfnUserCallback = &Instance::on_message;
  messenger.pUserData = self.get();
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  // Messages from vkCreateInstance/vkDestroyInstance themselves.
  if (options.validation) info.pNext = &messenger;
  const VkResult r = vkCreateInstance(&info, nullptr, &self->instance_);
  if (r != VK_SUCCESS) {
    self->instance_ = VK_NULL_HANDLE;
    return sdk::unavailable("the Vulkan loader \"" + options.loader +
                            "\" cannot create an instance: vkCreateInstance returned " +
                            vk_result_name(r) +
                            (r == VK_ERROR_INCOMPATIBLE_DRIVER ? " (no Vulkan driver installed?)"
                                                               : ""));
  }
  LOOM_SDK_RETURN_IF_ERROR(volk_load_instance(self->instance_));
  if (options.validation) {
    self->create_messenger_ = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(self->instance_, "vkCreateDebugUtilsMessengerEXT"));
    self->destroy_messenger_ = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(self->instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (self->create_messenger_ == nullptr || self->destroy_messenger_ == nullptr) {
      return sdk::internal_error("VK_EXT_debug_utils is enabled but its entries are missing");
    }
    const VkResult m =
        self->create_messenger_(self->instance_, &messenger, nullptr, &self->messenger_);
    if (m != VK_SUCCESS) return vk_status(m, "vkCreateDebugUtilsMessengerEXT");
  }
  *out = std::move(self);
  return Status();
}

Instance::~Instance() {
  if (instance_ != VK_NULL_HANDLE && vkDestroyInstance != nullptr) {
    if (messenger_ != VK_NULL_HANDLE) destroy_messenger_(instance_, messenger_, nullptr);
    vkDestroyInstance(instance_, nullptr);
  }
}

}  // namespace loom::vulkan
