// The vulkan-compute plugin: one device per Vulkan physical device with a
// compute queue. The glue to the C ABI is loom/plugin.hpp (which also makes
// buffer_import_host of Device::import_host); the compile entries are added
// to its table here.
#include <memory>
#include <string>
#include <vector>

#include "device.hpp"
#include "executable.hpp"
#include <cstring>

#include "compile.hpp"

#ifndef LOOM_VULKAN_COMPUTE_VERSION
#define LOOM_VULKAN_COMPUTE_VERSION "0.0.0"
#endif

namespace loom::vulkan {

// The plugin instance: the Vulkan instance (absent when Vulkan cannot be
// loaded) and the devices it exposes. Devices are created at plugin_create
// and live until plugin_destroy; everything is read-only afterwards, so the
// device entries are thread-safe.
class VulkanPlugin {
 public:
  static Status create(const sdk::CreateContext& ctx, std::unique_ptr<VulkanPlugin>* out) {
    InstanceOptions options;
    LOOM_SDK_RETURN_IF_ERROR(parse_options(ctx.options, &options));
    auto plugin = std::make_unique<VulkanPlugin>();
    plugin->host_ = ctx.host;
    Status s = Instance::create(options, ctx.host, &plugin->instance_);
    if (!s.ok()) {
      // The plugin still loads: it offers no devices and says why.
      plugin->unavailable_ = s.message();
      ctx.log(LOOM_LOG_INFO, ("vulkan-compute: no devices: " + s.message()).c_str());
      *out = std::move(plugin);
      return Status();
    }
    plugin->enumerate(options);
    *out = std::move(plugin);
    return Status();
  }

  Status check_available() {
    if (!devices_.empty()) return Status();
    return sdk::unavailable(unavailable_.empty() ? "no Vulkan device" : unavailable_);
  }
  size_t device_count() { return devices_.size(); }
  Device* device(size_t index) { return index < devices_.size() ? devices_[index].get() : nullptr; }

  const loom_host_services_t* host() const { return host_; }
  // Validation messages so far (0 when validation is off).
  uint64_t validation_messages() const {
    return instance_ ? instance_->validation_messages() : 0;
  }

  ~VulkanPlugin() {
    devices_.clear();  // before the instance
  }

 private:
  void enumerate(const InstanceOptions& options) {
    const InstanceFns& f = instance_->fns();
    uint32_t count = 0;
    VkResult r = f.vkEnumeratePhysicalDevices(instance_->handle(), &count, nullptr);
    std::vector<VkPhysicalDevice> physical(count);
    if (r == VK_SUCCESS && count != 0) {
      r = f.vkEnumeratePhysicalDevices(instance_->handle(), &count, physical.data());
    }
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
      unavailable_ = "vkEnumeratePhysicalDevices failed: " + vk_result_name(r);
      return;
    }
    physical.resize(count);
    std::vector<std::string> skipped;
    for (VkPhysicalDevice p : physical) {
      VkPhysicalDeviceProperties props{};
      f.vkGetPhysicalDeviceProperties(p, &props);
      const std::string name = props.deviceName;
      if (props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && !options.allow_cpu) {
        skipped.push_back(name + ": a CPU implementation, hidden by vulkan.allow_cpu=0");
        continue;
      }
      if (VK_API_VERSION_MAJOR(props.apiVersion) == 1 && VK_API_VERSION_MINOR(props.apiVersion) < 1) {
        skipped.push_back(name + ": Vulkan 1.0 only, vulkan-compute needs 1.1");
        continue;
      }
      uint32_t families = 0;
      f.vkGetPhysicalDeviceQueueFamilyProperties(p, &families, nullptr);
      std::vector<VkQueueFamilyProperties> fam(families);
      f.vkGetPhysicalDeviceQueueFamilyProperties(p, &families, fam.data());
      uint32_t compute = UINT32_MAX;
      for (uint32_t i = 0; i < families && compute == UINT32_MAX; ++i) {
        if (fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT) compute = i;
      }
      if (compute == UINT32_MAX) {
        skipped.push_back(name + ": no compute queue");
        continue;
      }
      std::unique_ptr<Device> device;
      Status s = Device::create(instance_.get(), p, static_cast<uint32_t>(devices_.size()), compute,
                                options.force_staging, &device);
      if (!s.ok()) {
        skipped.push_back(name + ": " + s.message());
        continue;
      }
      devices_.push_back(std::move(device));
    }
    if (devices_.empty()) {
      if (count == 0) {
        unavailable_ = "the Vulkan loader \"" + options.loader +
                       "\" found no physical device (no Vulkan driver installed? Debian: "
                       "mesa-vulkan-drivers)";
      } else {
        unavailable_ = "none of the " + std::to_string(count) + " Vulkan devices is usable:";
        for (const std::string& s : skipped) unavailable_ += " " + s + ";";
        unavailable_.pop_back();
      }
    }
    for (const std::string& s : skipped) instance_->log(LOOM_LOG_INFO, "vulkan-compute: skipped " + s);
  }

  const loom_host_services_t* host_ = nullptr;
  std::unique_ptr<Instance> instance_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::string unavailable_;
};

struct VulkanCompute {
  using Plugin = VulkanPlugin;
  using Device = vulkan::Device;
  using Executable = VulkanExecutable;
  using Buffer = vulkan::Buffer;
  using Fence = vulkan::Fence;

  static const loom_plugin_info_t* info() {
    static const loom_loader_key_t kKey = {LOOM_LOADER_KEY_STRUCT_SIZE, kLoaderKey,
                                           kMinFormatVersion, kFormatVersion};
    static const loom_loader_key_t* const kKeys[] = {&kKey};
    static const loom_plugin_info_t kInfo = {LOOM_PLUGIN_INFO_STRUCT_SIZE, "vulkan-compute",
                                             "Loom", LOOM_VULKAN_COMPUTE_VERSION, 1, kKeys};
    return &kInfo;
  }
  static Status create(const sdk::CreateContext& ctx, std::unique_ptr<Plugin>* out) {
    return VulkanPlugin::create(ctx, out);
  }
};

namespace {

using Thunks = sdk::detail::Thunks<VulkanCompute>;

loom_status_t* compile_supported_entry(loom_compile_supported_args_t* args) {
  return Thunks::guard("compile_supported", [&]() -> Status {
    if (args == nullptr) return sdk::invalid_argument("compile_supported: args is NULL");
    LOOM_SDK_RETURN_IF_ERROR(sdk::detail::check_size("compile_supported",
                                                     "loom_compile_supported_args_t",
                                                     args->struct_size,
                                                     LOOM_COMPILE_SUPPORTED_ARGS_STRUCT_SIZE));
    if (args->plugin == nullptr) return sdk::invalid_argument("compile_supported: plugin is NULL");
    if (args->node_count != 0 && args->out_supported == nullptr) {
      return sdk::invalid_argument("compile_supported: out_supported is NULL");
    }
    for (size_t i = 0; i < args->node_count; ++i) args->out_supported[i] = false;
    return compile_supported(args->graph, args->graph_size, args->node_count, args->out_supported);
  });
}

loom_status_t* compile_entry(loom_compile_args_t* args) {
  return Thunks::guard("compile", [&]() -> Status {
    if (args == nullptr) return sdk::invalid_argument("compile: args is NULL");
    LOOM_SDK_RETURN_IF_ERROR(sdk::detail::check_size("compile", "loom_compile_args_t",
                                                     args->struct_size,
                                                     LOOM_COMPILE_ARGS_STRUCT_SIZE));
    args->out_blob = nullptr;
    args->out_blob_size = 0;
    args->out_loader_key = nullptr;
    args->out_format_version = 0;
    if (args->plugin == nullptr) return sdk::invalid_argument("compile: plugin is NULL");
    LOOM_SDK_RETURN_IF_ERROR(
        sdk::Options::validate(args->options, args->option_count, "compile option"));
    const loom_host_services_t* host = reinterpret_cast<VulkanPlugin*>(args->plugin)->host();
    if (host == nullptr || !LOOM_STRUCT_HAS(loom_host_services_t, host->struct_size, free) ||
        host->allocate == nullptr) {
      return sdk::failed_precondition("compile: the host offers no allocate service for the blob");
    }
    BlobProgram program;
    LOOM_SDK_RETURN_IF_ERROR(compile_graph(args->graph, args->graph_size, &program));
    const std::vector<uint8_t> bytes = encode(program);
    void* blob = host->allocate(host->user_data, bytes.size(), 16);
    if (blob == nullptr) {
      return sdk::resource_exhausted("compile: the host could not allocate " +
                                     std::to_string(bytes.size()) + " bytes for the blob");
    }
    std::memcpy(blob, bytes.data(), bytes.size());
    args->out_blob = blob;
    args->out_blob_size = bytes.size();
    args->out_loader_key = kLoaderKey;
    args->out_format_version = kFormatVersion;
    return Status();
  });
}

// The SDK's table for the version chosen (buffer_import_host comes from
// Device::import_host), with the compile entries filled in.
template <uint32_t kVersion>
const loom_plugin_api_t* full_api() {
  static const loom_plugin_api_t kApi = [] {
    loom_plugin_api_t api = *sdk::make_api<VulkanCompute, kVersion>();
    api.compile_supported = &compile_supported_entry;
    api.compile = &compile_entry;
    return api;
  }();
  return &kApi;
}

const loom_plugin_api_t* full_api_for(uint32_t version) {
  return version >= LOOM_ABI_VERSION(1, 1) ? full_api<LOOM_ABI_VERSION(1, 1)>()
                                           : full_api<LOOM_ABI_VERSION(1, 0)>();
}

}  // namespace
}  // namespace loom::vulkan

extern "C" LOOM_PLUGIN_EXPORT loom_status_code_t loom_plugin_query(loom_plugin_query_t* query) {
  const loom_status_code_t code = ::loom::sdk::query<::loom::vulkan::VulkanCompute>(query);
  if (code == LOOM_STATUS_OK) query->out_api = ::loom::vulkan::full_api_for(query->out_abi_version);
  return code;
}
