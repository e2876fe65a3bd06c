// A vulkan-compute blob loaded on a device: its pipelines, its own memory
// (intermediate and constant tensors) and, per binding set (the device
// buffers and offsets of one call's inputs and outputs), a command buffer
// recorded once. A steady-state execute is one vkQueueSubmit and a fence.
//
// An executable of a format-3 blob (an open graph, ABI 1.2) holds the graph
// instead: each execute takes its inputs' shapes, binds every tensor's
// shape with the plugin's own rules (open_graph.hpp), checks the outputs'
// shapes the host passed, and runs a static executable made for that
// binding, kept in an LRU of kMaxOpenBindings (the pipelines are the
// device's, shared by all; a binding owns its intermediates and small
// constants).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "device.hpp"
#include "loom/vulkan_compute/kernels.hpp"
#include "open_graph.hpp"

namespace loom::vulkan {

class VulkanExecutable {
 public:
  // Uploads the constants, allocates the intermediates and builds the
  // pipelines. `program` was decoded (and validated) from the blob.
  static Status load(Device* device, BlobProgram program, std::unique_ptr<VulkanExecutable>* out);
  // An executable of an open graph (format 3), prepared per binding.
  static Status load_open(Device* device, std::unique_ptr<OpenGraph> graph,
                          std::unique_ptr<VulkanExecutable>* out);
  // Waits for the last submission, then frees everything.
  ~VulkanExecutable();
  VulkanExecutable(const VulkanExecutable&) = delete;
  VulkanExecutable& operator=(const VulkanExecutable&) = delete;

  // Thread-safe; executions of one executable are serialized (its
  // intermediates are shared), at most one is in flight at a time. The
  // first call with new buffers records a command buffer (up to
  // kMaxBindingSets are kept, the least recently used is dropped).
  Status execute(const sdk::ExecuteCallT<Fence>& call);

  static constexpr size_t kMaxBindingSets = 8;
  // Bindings (input shapes) an open executable keeps prepared.
  static constexpr size_t kMaxOpenBindings = 8;

 private:
  // One binding of an open executable: its input shapes, the output shapes
  // the rules give, and the static executable made for it.
  struct OpenBinding {
    std::vector<Shape> inputs;
    std::vector<Shape> outputs;
    std::shared_ptr<VulkanExecutable> exe;
    uint64_t last_use = 0;
  };
  Status execute_open(const sdk::ExecuteCallT<Fence>& call);
  Status prepare_binding(const std::vector<Shape>& inputs, OpenBinding* out);
  struct BindingSet;
  struct Operand {
    VkBuffer buffer = VK_NULL_HANDLE;
    uint64_t offset = 0;
    uint64_t range = 0;
    uint64_t buffer_id = 0;  // Buffer::id: what a cached binding set is matched on
  };
  explicit VulkanExecutable(Device* device);
  Status check_call(const sdk::ExecuteCallT<Fence>& call) const;
  Operand operand(const sdk::ExecuteCallT<Fence>& call, uint32_t tensor) const;
  Status record(const sdk::ExecuteCallT<Fence>& call, std::unique_ptr<BindingSet>* out);
  void destroy_set(BindingSet* set);

  Device* device_;
  BlobProgram program_;
  std::vector<VkPipeline> pipelines_;              // per dispatch
  std::vector<std::unique_ptr<Buffer>> owned_;     // per tensor: intermediates and constants
  std::vector<uint32_t> io_index_;                 // per tensor: position in inputs/outputs
  std::unique_ptr<Buffer> dummy_;                  // bound where a tensor has no bytes
  std::mutex mu_;
  std::vector<std::unique_ptr<BindingSet>> sets_;
  uint64_t uses_ = 0;
  std::shared_ptr<SubmitSlot> last_;               // the last submission, maybe in flight
  // Open executables only (mu_ guards the bindings).
  std::unique_ptr<OpenGraph> open_;
  std::vector<OpenBinding> bindings_;
  uint64_t bindings_prepared_ = 0;
};

// executable_check: loader key, format version and a full decode. A
// format-3 blob (an open graph) fills `*open` instead of `*out` (it must
// not be NULL then; with NULL, the blob is checked and left). A program
// with int8 kernels (format 4) is INCOMPATIBLE with a device that lacks
// their features, naming them.
Status check_blob(const sdk::Blob& blob, const DeviceProperties& device, BlobProgram* out,
                  std::unique_ptr<OpenGraph>* open = nullptr);

}  // namespace loom::vulkan
