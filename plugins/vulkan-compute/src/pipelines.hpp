// The compute pipelines of one device: one per kernel, built on first use
// from the SPIR-V embedded in the plugin, sharing one descriptor-set layout
// (four storage buffers) and one pipeline layout (128 bytes of push
// constants). Thread-safe.
#pragma once

#include <array>
#include <mutex>

#include "loom/vulkan_compute/blob_format.hpp"
#include "vk_loader.hpp"

namespace loom::vulkan {

class Device;

class Pipelines {
 public:
  explicit Pipelines(Device* device) : device_(device) {}
  ~Pipelines();
  Pipelines(const Pipelines&) = delete;
  Pipelines& operator=(const Pipelines&) = delete;

  // The pipeline of `kernel`, built on first use; valid until the device is
  // destroyed.
  Status get(Kernel kernel, VkPipeline* out);
  // Valid after the first successful get().
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  VkPipelineLayout layout() const { return layout_; }

 private:
  Status init_layouts();
  Device* device_;
  std::mutex mu_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  std::array<VkPipeline, static_cast<size_t>(Kernel::kCount)> pipelines_{};
};

// The embedded SPIR-V of `kernel` (words and their count).
void kernel_spirv(Kernel kernel, const uint32_t** words, size_t* count);

}  // namespace loom::vulkan
