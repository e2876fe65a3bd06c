#include "pipelines.hpp"

#include "device.hpp"

namespace loom::vulkan {
namespace {

// glslc -mfmt=num output, generated at build time from shaders/*.comp.
const uint32_t kUnarySpirv[] = {
#include "unary.spv.inc"
};
const uint32_t kBinarySpirv[] = {
#include "binary.spv.inc"
};
const uint32_t kMatMulSpirv[] = {
#include "matmul.spv.inc"
};
const uint32_t kSoftmaxSpirv[] = {
#include "softmax.spv.inc"
};
const uint32_t kConvSpirv[] = {
#include "conv.spv.inc"
};
const uint32_t kPoolSpirv[] = {
#include "pool.spv.inc"
};
const uint32_t kReduceSpirv[] = {
#include "reduce.spv.inc"
};
const uint32_t kLayerNormSpirv[] = {
#include "layernorm.spv.inc"
};
const uint32_t kCopySpirv[] = {
#include "copy.spv.inc"
};
const uint32_t kResizeSpirv[] = {
#include "resize.spv.inc"
};
const uint32_t kConvTransposeSpirv[] = {
#include "conv_transpose.spv.inc"
};
const uint32_t kDirectConvSpirv[] = {
#include "direct_conv.spv.inc"
};
const uint32_t kQuantizeSpirv[] = {
#include "quantize.spv.inc"
};
const uint32_t kDequantizeSpirv[] = {
#include "dequantize.spv.inc"
};
const uint32_t kQConvSpirv[] = {
#include "qconv.spv.inc"
};
const uint32_t kQBinarySpirv[] = {
#include "qbinary.spv.inc"
};
const uint32_t kQPackSpirv[] = {
#include "qpack.spv.inc"
};
const uint32_t kQConvDotSpirv[] = {
#include "qconv_dot.spv.inc"
};

}  // namespace

void kernel_spirv(Kernel kernel, const uint32_t** words, size_t* count) {
  switch (kernel) {
    case Kernel::kUnary: *words = kUnarySpirv; *count = std::size(kUnarySpirv); return;
    case Kernel::kBinary: *words = kBinarySpirv; *count = std::size(kBinarySpirv); return;
    case Kernel::kMatMul: *words = kMatMulSpirv; *count = std::size(kMatMulSpirv); return;
    case Kernel::kSoftmax: *words = kSoftmaxSpirv; *count = std::size(kSoftmaxSpirv); return;
    case Kernel::kConv: *words = kConvSpirv; *count = std::size(kConvSpirv); return;
    case Kernel::kPool: *words = kPoolSpirv; *count = std::size(kPoolSpirv); return;
    case Kernel::kReduce: *words = kReduceSpirv; *count = std::size(kReduceSpirv); return;
    case Kernel::kLayerNorm: *words = kLayerNormSpirv; *count = std::size(kLayerNormSpirv); return;
    case Kernel::kCopy: *words = kCopySpirv; *count = std::size(kCopySpirv); return;
    case Kernel::kResize: *words = kResizeSpirv; *count = std::size(kResizeSpirv); return;
    case Kernel::kConvTranspose:
      *words = kConvTransposeSpirv;
      *count = std::size(kConvTransposeSpirv);
      return;
    case Kernel::kDirectConv:
      *words = kDirectConvSpirv;
      *count = std::size(kDirectConvSpirv);
      return;
    case Kernel::kQuantize: *words = kQuantizeSpirv; *count = std::size(kQuantizeSpirv); return;
    case Kernel::kDequantize: *words = kDequantizeSpirv; *count = std::size(kDequantizeSpirv); return;
    case Kernel::kQConv: *words = kQConvSpirv; *count = std::size(kQConvSpirv); return;
    case Kernel::kQBinary: *words = kQBinarySpirv; *count = std::size(kQBinarySpirv); return;
    case Kernel::kQPack: *words = kQPackSpirv; *count = std::size(kQPackSpirv); return;
    case Kernel::kQConvDot: *words = kQConvDotSpirv; *count = std::size(kQConvDotSpirv); return;
    case Kernel::kCount: break;
  }
  *words = nullptr;
  *count = 0;
}

Pipelines::~Pipelines() {
  const DeviceFns& f = device_->fns();
  for (VkPipeline p : pipelines_) {
    if (p != VK_NULL_HANDLE) f.vkDestroyPipeline(device_->handle(), p, nullptr);
  }
  if (layout_ != VK_NULL_HANDLE) f.vkDestroyPipelineLayout(device_->handle(), layout_, nullptr);
  if (set_layout_ != VK_NULL_HANDLE) {
    f.vkDestroyDescriptorSetLayout(device_->handle(), set_layout_, nullptr);
  }
}

Status Pipelines::init_layouts() {
  const DeviceFns& f = device_->fns();
  const std::string& uri = device_->props().uri;
  VkDescriptorSetLayoutBinding bindings[kMaxBindings]{};
  for (uint32_t i = 0; i < kMaxBindings; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set{};
  set.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set.bindingCount = kMaxBindings;
  set.pBindings = bindings;
  VkResult r = f.vkCreateDescriptorSetLayout(device_->handle(), &set, nullptr, &set_layout_);
  if (r != VK_SUCCESS) {
    set_layout_ = VK_NULL_HANDLE;
    return vk_status(r, uri + ": vkCreateDescriptorSetLayout");
  }
  VkPushConstantRange push{};
  push.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  push.size = kMaxPush * 4;
  VkPipelineLayoutCreateInfo layout{};
  layout.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout.setLayoutCount = 1;
  layout.pSetLayouts = &set_layout_;
  layout.pushConstantRangeCount = 1;
  layout.pPushConstantRanges = &push;
  r = f.vkCreatePipelineLayout(device_->handle(), &layout, nullptr, &layout_);
  if (r != VK_SUCCESS) {
    layout_ = VK_NULL_HANDLE;
    return vk_status(r, uri + ": vkCreatePipelineLayout");
  }
  return Status();
}

Status Pipelines::get(Kernel kernel, VkPipeline* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (layout_ == VK_NULL_HANDLE) LOOM_SDK_RETURN_IF_ERROR(init_layouts());
  VkPipeline& slot = pipelines_[static_cast<size_t>(kernel)];
  if (slot != VK_NULL_HANDLE) {
    *out = slot;
    return Status();
  }
  const DeviceFns& f = device_->fns();
  const std::string& uri = device_->props().uri;
  const uint32_t* words = nullptr;
  size_t count = 0;
  kernel_spirv(kernel, &words, &count);
  if (words == nullptr) return sdk::internal_error(uri + ": no shader for kernel");
  VkShaderModuleCreateInfo module{};
  module.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module.codeSize = count * 4;
  module.pCode = words;
  VkShaderModule shader = VK_NULL_HANDLE;
  VkResult r = f.vkCreateShaderModule(device_->handle(), &module, nullptr, &shader);
  if (r != VK_SUCCESS) return vk_status(r, uri + ": vkCreateShaderModule");
  VkComputePipelineCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = shader;
  info.stage.pName = "main";
  info.layout = layout_;
  r = f.vkCreateComputePipelines(device_->handle(), VK_NULL_HANDLE, 1, &info, nullptr, &slot);
  f.vkDestroyShaderModule(device_->handle(), shader, nullptr);
  if (r != VK_SUCCESS) {
    slot = VK_NULL_HANDLE;
    return vk_status(r, uri + ": vkCreateComputePipelines");
  }
  *out = slot;
  return Status();
}

}  // namespace loom::vulkan
