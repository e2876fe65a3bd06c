// The vulkan-compute plugin: one device per Vulkan physical device with a
// compute queue; open-shape graphs included (ABI 1.2,
// LOOM_PLUGIN_CAP_OPEN_SHAPES: one format-3 blob for every binding, lowered
// per binding at execute, executable.hpp). The glue to the C ABI is
// loom/plugin.hpp (which also makes buffer_import_host of Device::import_host, and the compile entries of
// VulkanPlugin's compile members).
#include <memory>
#include <string>
#include <vector>

#include "device.hpp"
#include "executable.hpp"
#include <cstring>

#include "compile.hpp"
#include "loom/sdk/graph.hpp"

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
    plugin->int8_unavailable_ = plugin->int8_target();
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

  // The compile side (compile.hpp), over the graph the SDK has verified.
  // Thread-safe: both only read the graph.
  Status compile_supported(const sdk::GraphView& graph, sdk::Claims* claims) {
    // Why quantized nodes stay off this plugin, as info lines (`loom
    // compile` prints them).
    std::vector<std::string> notes;
    LOOM_SDK_RETURN_IF_ERROR(vulkan::compile_supported(graph, int8_unavailable_, claims, &notes));
    for (const std::string& note : notes) sdk::log(host_, LOOM_LOG_INFO, ("compile: " + note).c_str());
    return Status();
  }
  Status compile(const sdk::GraphView& graph, const sdk::Options&, sdk::CompiledBlob* out) {
    if (graph.has_open_dims()) {
      // Format 3 only for a graph with open dimensions: the graph itself,
      // lowered per binding at execute. Static graphs stay format 2.
      LOOM_SDK_RETURN_IF_ERROR(check_open_graph(graph, int8_unavailable_));
      // The fusions' notes, from the binding at the probe size (only for a
      // graph with quantized nodes: the binding lowers the whole graph).
      std::vector<std::string> notes;
      bool quantized = false;
      for (size_t n = 0; n < graph.node_count() && !quantized; ++n) {
        quantized = sdk::is_quantized_op(graph.node(n).op_type());
      }
      const Status probed = quantized ? probe_binding_notes(graph, int8_unavailable_, &notes) : Status();
      if (!probed.ok()) {
        notes = {"the int8 fusions are decided per binding (the probe binding failed: " + probed.message() + ")"};
      }
      for (const std::string& note : notes) sdk::log(host_, LOOM_LOG_INFO, ("compile: " + note).c_str());
      out->bytes = encode_open(graph.buffer(), graph.buffer_size());
      out->loader_key = kLoaderKey;
      out->format_version = kOpenFormatVersion;
      return Status();
    }
    BlobProgram program;
    std::vector<std::string> notes;
    LOOM_SDK_RETURN_IF_ERROR(compile_graph(graph, int8_unavailable_, &program, &notes));
    // Which convolutions of dequantized values run in int8, which stay f32
    // and why, as info lines (`loom compile` prints them).
    for (const std::string& note : notes) sdk::log(host_, LOOM_LOG_INFO, ("compile: " + note).c_str());
    out->bytes = encode(program);
    out->loader_key = kLoaderKey;
    out->format_version = program_format(program);
    return Status();
  }
  // Validation messages so far (0 when validation is off).
  uint64_t validation_messages() const {
    return instance_ ? instance_->validation_messages() : 0;
  }

  ~VulkanPlugin() {
    devices_.clear();  // before the instance
  }

 private:
  void enumerate(const InstanceOptions& options) {
    uint32_t count = 0;
    VkResult r = vkEnumeratePhysicalDevices(instance_->handle(), &count, nullptr);
    std::vector<VkPhysicalDevice> physical(count);
    if (r == VK_SUCCESS && count != 0) {
      r = vkEnumeratePhysicalDevices(instance_->handle(), &count, physical.data());
    }
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
      unavailable_ = "vkEnumeratePhysicalDevices failed: " + vk_result_name(r);
      return;
    }
    physical.resize(count);
    std::vector<std::string> skipped;
    for (VkPhysicalDevice p : physical) {
      VkPhysicalDeviceProperties props{};
      vkGetPhysicalDeviceProperties(p, &props);
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
      vkGetPhysicalDeviceQueueFamilyProperties(p, &families, nullptr);
      std::vector<VkQueueFamilyProperties> fam(families);
      vkGetPhysicalDeviceQueueFamilyProperties(p, &families, fam.data());
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
                                options.force_staging, options.wait, options.hidden_features, &device);
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

  // Why quantized nodes are declined at compile (empty: the int8 kernels
  // run): every device must have their features, since a blob may be
  // loaded on any of them.
  std::string int8_target() const {
    if (devices_.empty()) return kNoInt8Target;
    for (const auto& d : devices_) {
      const DeviceProperties& p = d->props();
      if (!p.int8_missing.empty()) {
        return p.uri + " (" + p.device_name + ") lacks " + p.int8_missing + ", which the int8 kernels need";
      }
    }
    return std::string();
  }

  const loom_host_services_t* host_ = nullptr;
  std::string int8_unavailable_ = kNoInt8Target;
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
                                             "Loom", LOOM_VULKAN_COMPUTE_VERSION, 1, kKeys,
                                             LOOM_PLUGIN_CAP_OPEN_SHAPES};
    return &kInfo;
  }
  static Status create(const sdk::CreateContext& ctx, std::unique_ptr<Plugin>* out) {
    return VulkanPlugin::create(ctx, out);
  }
};

}  // namespace loom::vulkan

LOOM_SDK_DEFINE_ENTRY(::loom::vulkan::VulkanCompute)
