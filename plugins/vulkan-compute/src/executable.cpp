#include "executable.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "int8_dot.hpp"

namespace loom::vulkan {

struct VulkanExecutable::BindingSet {
  std::vector<Operand> key;  // inputs then outputs
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkDescriptorPool descriptors = VK_NULL_HANDLE;
  std::shared_ptr<SubmitSlot> slot;
  uint64_t last_use = 0;
};

VulkanExecutable::VulkanExecutable(Device* device) : device_(device) {}

Status check_blob(const sdk::Blob& blob, const DeviceProperties& device, BlobProgram* out,
                  std::unique_ptr<OpenGraph>* open) {
  if (std::strcmp(blob.loader_key, kLoaderKey) != 0) {
    return sdk::incompatible(std::string("vulkan-compute serves loader key \"") + kLoaderKey +
                             "\", not \"" + blob.loader_key + "\"");
  }
  if (blob.format_version != 0 &&
      (blob.format_version < kMinFormatVersion || blob.format_version > kFormatVersion)) {
    return sdk::incompatible("vulkan-compute reads blob formats " +
                             std::to_string(kMinFormatVersion) + " to " +
                             std::to_string(kFormatVersion) + ", the program records format " +
                             std::to_string(blob.format_version));
  }
  if (blob_version(blob.data, blob.size) == kOpenFormatVersion) {
    std::unique_ptr<OpenGraph> graph;
    // The int8 kernels' device check happens node by node here (the
    // quantized nodes lower only where the device runs them).
    const std::string int8_unavailable =
        device.int8_missing.empty()
            ? std::string()
            : device.uri + " (" + device.device_name + ") lacks " + device.int8_missing + ", which the int8 kernels need";
    LOOM_SDK_RETURN_IF_ERROR(OpenGraph::make(blob.data, blob.size, int8_unavailable, &graph));
    if (open != nullptr) *open = std::move(graph);
    return Status();
  }
  std::string error;
  if (!decode(blob.data, blob.size, out, &error)) {
    return sdk::incompatible("vulkan-compute blob rejected: " + error);
  }
  if (!device.int8_missing.empty()) {
    for (const BlobDispatch& d : out->dispatches) {
      if (is_int8_kernel(d.kernel)) {
        return sdk::incompatible(device.uri + " (" + device.device_name + ") lacks " + device.int8_missing +
                                 ", which the blob's int8 kernels need");
      }
    }
  }
  return Status();
}

Status Device::check_executable(const sdk::Blob& blob) {
  BlobProgram program;
  return check_blob(blob, props_, &program);
}

Status Device::load_executable(const sdk::Blob& blob, const sdk::Options&,
                               std::unique_ptr<VulkanExecutable>* out) {
  BlobProgram program;
  std::unique_ptr<OpenGraph> open;
  LOOM_SDK_RETURN_IF_ERROR(check_blob(blob, props_, &program, &open));
  if (open) return VulkanExecutable::load_open(this, std::move(open), out);
  return VulkanExecutable::load(this, std::move(program), out);
}

Status VulkanExecutable::load_open(Device* device, std::unique_ptr<OpenGraph> graph,
                                   std::unique_ptr<VulkanExecutable>* out) {
  std::unique_ptr<VulkanExecutable> exe(new VulkanExecutable(device));
  exe->open_ = std::move(graph);
  *out = std::move(exe);
  return Status();
}

Status VulkanExecutable::load(Device* device, BlobProgram program,
                              std::unique_ptr<VulkanExecutable>* out) {
  std::unique_ptr<VulkanExecutable> exe(new VulkanExecutable(device));
  // Integer dot products where the device has them (int8_dot.hpp): the
  // packed weights are new constants, uploaded from `packed`.
  std::map<uint32_t, std::vector<uint8_t>> packed;
  if (device->props().int8_missing.empty() && device->props().int8_features.integer_dot) {
    use_integer_dot(&program, &packed);
  }
  const size_t n = program.tensors.size();
  exe->owned_.resize(n);
  exe->io_index_.assign(n, 0);
  for (size_t i = 0; i < program.inputs.size(); ++i) exe->io_index_[program.inputs[i]] = static_cast<uint32_t>(i);
  for (size_t i = 0; i < program.outputs.size(); ++i) exe->io_index_[program.outputs[i]] = static_cast<uint32_t>(i);
  LOOM_SDK_RETURN_IF_ERROR(device->create_buffer(16, false, &exe->dummy_));
  // A tensor no dispatch binds (the weights of a qconv the rewrite above
  // packed anew) gets no device memory.
  std::vector<bool> bound(n, false);
  for (const BlobDispatch& d : program.dispatches) {
    for (uint32_t b : d.bindings) bound[b] = true;
  }
  for (const BlobTensor& bt : program.tensors) {
    if (bt.kind == TensorKind::kAlias) bound[bt.alias] = true;
  }
  for (size_t t = 0; t < n; ++t) {
    const BlobTensor& bt = program.tensors[t];
    if (bt.kind != TensorKind::kIntermediate && bt.kind != TensorKind::kConstant) continue;
    if (bt.bytes() == 0 || !bound[t]) continue;
    Status s = device->create_buffer(bt.bytes(), false, &exe->owned_[t]);
    if (!s.ok()) return {s.code(), "tensor " + std::to_string(t) + ": " + s.message()};
    if (bt.kind == TensorKind::kConstant) {
      const auto own = packed.find(static_cast<uint32_t>(t));
      const uint8_t* from = own != packed.end() ? own->second.data() : program.data_view + bt.data_offset;
      LOOM_SDK_RETURN_IF_ERROR(exe->owned_[t]->copy_from_host(0, from, bt.bytes()));
    }
  }
  for (const BlobDispatch& d : program.dispatches) {
    VkPipeline pipeline = VK_NULL_HANDLE;
    LOOM_SDK_RETURN_IF_ERROR(device->pipelines().get(d.kernel, &pipeline));
    exe->pipelines_.push_back(pipeline);
  }
  // The blob's bytes are not kept: only the structure is needed from here.
  program.data_view = nullptr;
  program.data_size = 0;
  program.data.clear();
  exe->program_ = std::move(program);
  *out = std::move(exe);
  return Status();
}

VulkanExecutable::~VulkanExecutable() {
  if (last_) (void)last_->wait(0, kInternalWaitNs);
  for (auto& set : sets_) destroy_set(set.get());
}

void VulkanExecutable::destroy_set(BindingSet* set) {
  const DeviceFns& f = device_->fns();
  if (set->slot) (void)set->slot->wait(0, kInternalWaitNs);
  if (set->descriptors != VK_NULL_HANDLE) {
    f.vkDestroyDescriptorPool(device_->handle(), set->descriptors, nullptr);
  }
  if (set->pool != VK_NULL_HANDLE) f.vkDestroyCommandPool(device_->handle(), set->pool, nullptr);
}

Status VulkanExecutable::check_call(const sdk::ExecuteCallT<Fence>& call) const {
  if (call.input_count != program_.inputs.size() || call.output_count != program_.outputs.size()) {
    return sdk::invalid_argument("execute: the executable takes " +
                                 std::to_string(program_.inputs.size()) + " inputs and " +
                                 std::to_string(program_.outputs.size()) + " outputs, got " +
                                 std::to_string(call.input_count) + " and " +
                                 std::to_string(call.output_count));
  }
  const uint64_t align = device_->props().min_storage_offset_alignment;
  for (size_t k = 0; k < call.input_count + call.output_count; ++k) {
    const bool in = k < call.input_count;
    const size_t i = in ? k : k - call.input_count;
    const loom_tensor_t& t = in ? *call.inputs[i] : *call.outputs[i];
    const BlobTensor& bt = program_.tensors[in ? program_.inputs[i] : program_.outputs[i]];
    auto where = [&] { return std::string("execute: ") + (in ? "input " : "output ") + std::to_string(i); };
    const loom_dtype_t want = bt.dtype == DType::kU8    ? LOOM_DTYPE_U8
                              : bt.dtype == DType::kI8  ? LOOM_DTYPE_I8
                              : bt.dtype == DType::kI32 ? LOOM_DTYPE_I32
                                                        : LOOM_DTYPE_F32;
    if (t.dtype != want) return sdk::invalid_argument(where() + " is not " + dtype_text(bt.dtype));
    bool same = t.rank == bt.shape.size();
    for (uint32_t d = 0; same && d < t.rank; ++d) same = t.shape[d] == bt.shape[d];
    if (!same || t.byte_size != bt.bytes()) {
      std::string want;
      for (int64_t d : bt.shape) want += (want.empty() ? "" : "x") + std::to_string(d);
      return sdk::invalid_argument(where() + " does not have the blob's shape [" + want + "] (" +
                                   std::to_string(bt.bytes()) + " bytes)");
    }
    if (t.buffer == nullptr) {
      return sdk::invalid_argument(where() + " is host memory; " + device_->props().uri +
                                   " executes on its own buffers (it does not report "
                                   "LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE)");
    }
    const Buffer* b = reinterpret_cast<const Buffer*>(t.buffer);
    if (b->device() != device_) {
      return sdk::invalid_argument(where() + " is a buffer of another device");
    }
    if (t.offset > b->size() || t.byte_size > b->size() - t.offset) {
      return sdk::out_of_range(where() + ": bytes [" + std::to_string(t.offset) + ", +" +
                               std::to_string(t.byte_size) + ") exceed its buffer of " +
                               std::to_string(b->size()) + " bytes");
    }
    if (align > 1 && t.offset % align != 0) {
      return sdk::invalid_argument(where() + ": offset " + std::to_string(t.offset) +
                                   " is not a multiple of the device's storage-buffer alignment " +
                                   std::to_string(align));
    }
  }
  return Status();
}

VulkanExecutable::Operand VulkanExecutable::operand(const sdk::ExecuteCallT<Fence>& call,
                                                    uint32_t tensor) const {
  const BlobTensor* bt = &program_.tensors[tensor];
  const uint64_t range = bt->bytes();
  if (bt->kind == TensorKind::kAlias) {
    tensor = bt->alias;
    bt = &program_.tensors[tensor];
  }
  if (range == 0) return {dummy_->handle(), 0, VK_WHOLE_SIZE, dummy_->id()};
  if (bt->kind == TensorKind::kInput || bt->kind == TensorKind::kOutput) {
    const loom_tensor_t& t = bt->kind == TensorKind::kInput ? *call.inputs[io_index_[tensor]]
                                                            : *call.outputs[io_index_[tensor]];
    const Buffer* b = reinterpret_cast<const Buffer*>(t.buffer);
    return {b->handle(), t.offset, range, b->id()};
  }
  return {owned_[tensor]->handle(), 0, range, owned_[tensor]->id()};
}

namespace {

const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::kUnary: return "Unary";
    case Kernel::kBinary: return "Binary";
    case Kernel::kMatMul: return "MatMul";
    case Kernel::kSoftmax: return "Softmax";
    case Kernel::kConv: return "Conv";
    case Kernel::kPool: return "Pool";
    case Kernel::kReduce: return "Reduce";
    case Kernel::kLayerNorm: return "LayerNorm";
    case Kernel::kCopy: return "Copy";
    case Kernel::kResize: return "Resize";
    case Kernel::kConvTranspose: return "ConvTranspose";
    case Kernel::kDirectConv: return "Conv (direct)";
    case Kernel::kQuantize: return "QuantizeLinear";
    case Kernel::kDequantize: return "DequantizeLinear";
    case Kernel::kQConv: return "QConv";
    case Kernel::kQBinary: return "QBinary (int8 Add / Mul)";
    case Kernel::kQPack: return "QConv packing (int8 dot)";
    case Kernel::kQConvDot: return "QConv (int8 dot)";
    case Kernel::kCount: break;
  }
  return "kernel";
}

}  // namespace

Status VulkanExecutable::record(const sdk::ExecuteCallT<Fence>& call,
                                std::unique_ptr<BindingSet>* out) {
  const DeviceFns& f = device_->fns();
  const VkDevice dev = device_->handle();
  const std::string& uri = device_->props().uri;
  auto set = std::make_unique<BindingSet>();
  struct Cleanup {
    VulkanExecutable* self;
    BindingSet* set;
    ~Cleanup() {
      if (set != nullptr) self->destroy_set(set);
    }
  } cleanup{this, set.get()};
  for (size_t i = 0; i < call.input_count; ++i) set->key.push_back(operand(call, program_.inputs[i]));
  for (size_t i = 0; i < call.output_count; ++i) set->key.push_back(operand(call, program_.outputs[i]));

  set->slot = std::make_shared<SubmitSlot>();
  set->slot->device = device_;
  VkFenceCreateInfo fence{};
  fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  VkResult r = f.vkCreateFence(dev, &fence, nullptr, &set->slot->fence);
  if (r != VK_SUCCESS) return vk_status(r, uri + ": vkCreateFence");
  if (device_->wait_mode() == WaitMode::kTimeline) {
    VkSemaphoreTypeCreateInfoKHR type{};
    type.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO_KHR;
    type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE_KHR;
    VkSemaphoreCreateInfo semaphore{};
    semaphore.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
    semaphore.pNext = &type;
    r = f.vkCreateSemaphore(dev, &semaphore, nullptr, &set->slot->timeline);
    if (r != VK_SUCCESS) return vk_status(r, uri + ": vkCreateSemaphore (timeline)");
  }

  VkCommandPoolCreateInfo pool{};
  pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  r = f.vkCreateCommandPool(dev, &pool, nullptr, &set->pool);
  if (r != VK_SUCCESS) return vk_status(r, uri + ": vkCreateCommandPool");
  VkCommandBufferAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  alloc.commandPool = set->pool;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  r = f.vkAllocateCommandBuffers(dev, &alloc, &set->cmd);
  if (r != VK_SUCCESS) return vk_status(r, uri + ": vkAllocateCommandBuffers");

  const uint32_t dispatches = static_cast<uint32_t>(program_.dispatches.size());
  const bool timed = dispatches != 0 && device_->props().timestamp_period_ns > 0;
  if (timed) {
    VkQueryPoolCreateInfo q{};
    q.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    q.queryType = VK_QUERY_TYPE_TIMESTAMP;
    q.queryCount = dispatches + 1;
    r = f.vkCreateQueryPool(dev, &q, nullptr, &set->slot->queries);
    if (r != VK_SUCCESS) return vk_status(r, uri + ": vkCreateQueryPool");
    set->slot->ticks.assign(size_t{dispatches} + 1, 0);
    for (uint32_t d = 0; d < dispatches; ++d) {
      set->slot->dispatch_names.push_back("dispatch #" + std::to_string(d) + " " +
                                          (qconv_transposed(program_.dispatches[d])
                                               ? "QConvTranspose"
                                               : kernel_name(program_.dispatches[d].kernel)));
    }
  }
  std::vector<VkDescriptorSet> sets(dispatches, VK_NULL_HANDLE);
  if (dispatches != 0) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, dispatches * kMaxBindings};
    VkDescriptorPoolCreateInfo dp{};
    dp.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    dp.maxSets = dispatches;
    dp.poolSizeCount = 1;
    dp.pPoolSizes = &size;
    r = f.vkCreateDescriptorPool(dev, &dp, nullptr, &set->descriptors);
    if (r != VK_SUCCESS) return vk_status(r, uri + ": vkCreateDescriptorPool");
    std::vector<VkDescriptorSetLayout> layouts(dispatches, device_->pipelines().set_layout());
    VkDescriptorSetAllocateInfo ds{};
    ds.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    ds.descriptorPool = set->descriptors;
    ds.descriptorSetCount = dispatches;
    ds.pSetLayouts = layouts.data();
    r = f.vkAllocateDescriptorSets(dev, &ds, sets.data());
    if (r != VK_SUCCESS) return vk_status(r, uri + ": vkAllocateDescriptorSets");
    std::vector<VkDescriptorBufferInfo> infos(size_t{dispatches} * kMaxBindings);
    std::vector<VkWriteDescriptorSet> writes(dispatches);
    for (uint32_t d = 0; d < dispatches; ++d) {
      const BlobDispatch& bd = program_.dispatches[d];
      for (uint32_t b = 0; b < kMaxBindings; ++b) {
        VkDescriptorBufferInfo& info = infos[size_t{d} * kMaxBindings + b];
        if (b < bd.bindings.size()) {
          const Operand o = operand(call, bd.bindings[b]);
          info = {o.buffer, o.offset, o.range};
        } else {
          info = {dummy_->handle(), 0, VK_WHOLE_SIZE};
        }
      }
      VkWriteDescriptorSet& w = writes[d];
      w.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      w.dstSet = sets[d];
      w.dstBinding = 0;
      w.descriptorCount = kMaxBindings;
      w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      w.pBufferInfo = &infos[size_t{d} * kMaxBindings];
    }
    f.vkUpdateDescriptorSets(dev, dispatches, writes.data(), 0, nullptr);
  }

  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  r = f.vkBeginCommandBuffer(set->cmd, &begin);
  if (r != VK_SUCCESS) return vk_status(r, uri + ": vkBeginCommandBuffer");
  auto barrier = [&](VkPipelineStageFlags src_stage, VkAccessFlags src, VkPipelineStageFlags dst_stage,
                     VkAccessFlags dst) {
    VkMemoryBarrier m{};
    m.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    m.srcAccessMask = src;
    m.dstAccessMask = dst;
    f.vkCmdPipelineBarrier(set->cmd, src_stage, dst_stage, 0, 1, &m, 0, nullptr, 0, nullptr);
  };
  barrier(VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  if (timed) {
    f.vkCmdResetQueryPool(set->cmd, set->slot->queries, 0, dispatches + 1);
    f.vkCmdWriteTimestamp(set->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, set->slot->queries, 0);
  }
  for (uint32_t d = 0; d < dispatches; ++d) {
    const BlobDispatch& bd = program_.dispatches[d];
    f.vkCmdBindPipeline(set->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipelines_[d]);
    f.vkCmdBindDescriptorSets(set->cmd, VK_PIPELINE_BIND_POINT_COMPUTE,
                              device_->pipelines().layout(), 0, 1, &sets[d], 0, nullptr);
    if (!bd.push.empty()) {
      std::vector<uint32_t> push = bd.push;
      // A format-1 convolution has no splits constant: 1.
      if (bd.kernel == Kernel::kConv && push.size() == 17) push.push_back(1);
      f.vkCmdPushConstants(set->cmd, device_->pipelines().layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                           static_cast<uint32_t>(push.size() * 4), push.data());
    }
    if (bd.groups[0] != 0 && bd.groups[1] != 0 && bd.groups[2] != 0) {
      f.vkCmdDispatch(set->cmd, bd.groups[0], bd.groups[1], bd.groups[2]);
    }
    if (timed) {
      f.vkCmdWriteTimestamp(set->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, set->slot->queries,
                            d + 1);
    }
    barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  }
  barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
          VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT);
  r = f.vkEndCommandBuffer(set->cmd);
  if (r != VK_SUCCESS) return vk_status(r, uri + ": vkEndCommandBuffer");
  cleanup.set = nullptr;
  *out = std::move(set);
  return Status();
}

Status VulkanExecutable::execute(const sdk::ExecuteCallT<Fence>& call) {
  if (open_) return execute_open(call);
  std::lock_guard<std::mutex> lock(mu_);
  LOOM_SDK_RETURN_IF_ERROR(check_call(call));
  for (size_t i = 0; i < call.wait_fence_count; ++i) {
    LOOM_SDK_RETURN_IF_ERROR(call.wait_fence(i)->wait(kInternalWaitNs));
  }
  BindingSet* set = nullptr;
  for (auto& s : sets_) {
    bool same = true;
    for (size_t k = 0; same && k < s->key.size(); ++k) {
      const bool in = k < call.input_count;
      const size_t i = in ? k : k - call.input_count;
      const Operand o = operand(call, in ? program_.inputs[i] : program_.outputs[i]);
      // By id, not VkBuffer: a buffer freed and another allocated may share
      // a handle, and a set recorded for the first would write freed memory.
      same = o.buffer_id == s->key[k].buffer_id && o.offset == s->key[k].offset;
    }
    if (same) {
      set = s.get();
      break;
    }
  }
  if (set == nullptr) {
    if (last_) LOOM_SDK_RETURN_IF_ERROR(last_->wait(0, kInternalWaitNs));
    if (sets_.size() >= kMaxBindingSets) {
      auto oldest = std::min_element(sets_.begin(), sets_.end(), [](const auto& a, const auto& b) {
        return a->last_use < b->last_use;
      });
      destroy_set(oldest->get());
      sets_.erase(oldest);
    }
    std::unique_ptr<BindingSet> made;
    LOOM_SDK_RETURN_IF_ERROR(record(call, &made));
    sets_.push_back(std::move(made));
    set = sets_.back().get();
  }
  set->last_use = ++uses_;
  if (last_ && last_ != set->slot) LOOM_SDK_RETURN_IF_ERROR(last_->wait(0, kInternalWaitNs));

  SubmitSlot& slot = *set->slot;
  uint64_t serial = 0;
  {
    std::lock_guard<std::mutex> slot_lock(slot.mu);
    if (slot.in_flight) {
      const Status s = slot.wait_locked(kInternalWaitNs);
      if (!s.ok()) {
        return {s.code(), "waiting for the previous execution: " + std::string(s.message())};
      }
      slot.in_flight = false;
      slot.report_locked();  // before the next submission overwrites its timestamps
    }
    LOOM_SDK_RETURN_IF_ERROR(slot.prepare_locked());
    LOOM_SDK_RETURN_IF_ERROR(slot.submit_locked(set->cmd));
    serial = slot.serial;
  }
  last_ = set->slot;
  if (call.signal_fence != nullptr) {
    call.signal_fence->attach(set->slot, serial);
    return Status();
  }
  return slot.wait(serial, kInternalWaitNs);
}

}  // namespace loom::vulkan

namespace loom::vulkan {

Status VulkanExecutable::prepare_binding(const std::vector<Shape>& inputs, OpenBinding* out) {
  BlobProgram program;
  LOOM_SDK_RETURN_IF_ERROR(open_->bind(inputs, &program, &out->outputs));
  program.data_view = program.data.data();
  program.data_size = program.data.size();
  std::unique_ptr<VulkanExecutable> exe;
  Status s = load(device_, std::move(program), &exe);
  if (!s.ok()) return {s.code(), "execute: at binding " + open_->binding_text(inputs) + ": " + s.message()};
  out->inputs = inputs;
  out->exe = std::move(exe);
  return Status();
}

namespace {

// Whether `t` has shape `s` (no allocation: the steady state of an open
// executable compares shapes per call).
bool has_shape(const loom_tensor_t& t, const Shape& s) {
  if (t.rank != s.size()) return false;
  for (uint32_t d = 0; d < t.rank; ++d) {
    if (t.shape[d] != s[d]) return false;
  }
  return true;
}

}  // namespace

Status VulkanExecutable::execute_open(const sdk::ExecuteCallT<Fence>& call) {
  if (call.output_count != open_->graph().output_count()) {
    return sdk::invalid_argument("execute: the executable takes " + std::to_string(open_->graph().output_count()) +
                                 " outputs, got " + std::to_string(call.output_count));
  }
  std::shared_ptr<VulkanExecutable> exe;
  {
    std::lock_guard<std::mutex> lock(mu_);
    OpenBinding* binding = nullptr;
    for (OpenBinding& b : bindings_) {
      bool same = call.input_count == b.inputs.size();
      for (size_t i = 0; same && i < call.input_count; ++i) same = has_shape(*call.inputs[i], b.inputs[i]);
      if (same) {
        binding = &b;
        break;
      }
    }
    if (binding == nullptr) {
      std::vector<Shape> inputs;
      LOOM_SDK_RETURN_IF_ERROR(open_->input_shapes(call.inputs, call.input_count, &inputs));
      OpenBinding made;
      const auto start = std::chrono::steady_clock::now();
      LOOM_SDK_RETURN_IF_ERROR(prepare_binding(inputs, &made));
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (bindings_.size() >= kMaxOpenBindings) {
        // The least recently used goes; an execution still running on it
        // holds its executable until it returns.
        auto oldest = std::min_element(bindings_.begin(), bindings_.end(),
                                       [](const OpenBinding& a, const OpenBinding& b) { return a.last_use < b.last_use; });
        bindings_.erase(oldest);
      }
      ++bindings_prepared_;
      device_->instance()->log(LOOM_LOG_DEBUG, "vulkan-compute: open executable: prepared binding " +
                                                   open_->binding_text(inputs) + " in " + std::to_string(ms) +
                                                   " ms (" + std::to_string(made.exe->program_.dispatches.size()) +
                                                   " dispatches; " + std::to_string(bindings_.size() + 1) + " of " +
                                                   std::to_string(kMaxOpenBindings) + " kept, " +
                                                   std::to_string(bindings_prepared_) + " prepared in all)");
      bindings_.push_back(std::move(made));
      binding = &bindings_.back();
    }
    binding->last_use = ++uses_;
    for (size_t i = 0; i < call.output_count; ++i) {
      const loom_tensor_t& t = *call.outputs[i];
      if (!has_shape(t, binding->outputs[i])) {
        return sdk::invalid_argument("execute: output " + std::to_string(i) + " (" +
                                     open_->graph().output(i).name() + ") has shape " +
                                     shape_text(Shape(t.shape, t.shape + t.rank)) +
                                     ", but vulkan-compute's shape rules give " + shape_text(binding->outputs[i]) +
                                     " at binding " + open_->binding_text(binding->inputs));
      }
    }
    exe = binding->exe;
  }
  return exe->execute(call);
}

}  // namespace loom::vulkan
