#include "host/handles.hpp"

namespace loom::host {
namespace {

Status check_device(const LoadedPlugin& plugin, size_t device_index) {
  if (device_index >= plugin.devices().size()) {
    return out_of_range("device index " + std::to_string(device_index) + " out of range: plugin '" +
                        plugin.name() + "' has " + std::to_string(plugin.devices().size()) +
                        " devices");
  }
  return Status();
}

Status check_plugin(const std::shared_ptr<LoadedPlugin>& plugin, size_t device_index) {
  if (!plugin) return invalid_argument("no plugin given (null shared_ptr)");
  return check_device(*plugin, device_index);
}

}  // namespace

Status check_blob(const LoadedPlugin& plugin, size_t device_index, std::string_view loader_key,
                  uint32_t format_version, std::span<const std::byte> blob) {
  LOOM_RETURN_IF_ERROR(check_device(plugin, device_index));
  std::string key(loader_key);
  loom_executable_check_args_t args{};
  args.struct_size = LOOM_EXECUTABLE_CHECK_ARGS_STRUCT_SIZE;
  args.device = plugin.device_handle(device_index);
  args.loader_key = key.c_str();
  args.format_version = format_version;
  args.blob = blob.data();
  args.blob_size = blob.size();
  Status status = plugin.take(plugin.api().executable_check(&args));
  if (status.ok()) return status;
  return status.with_context(plugin.devices()[device_index].uri + " cannot load a '" + key +
                             "' blob of " + std::to_string(blob.size()) + " bytes");
}

Result<uint64_t> estimate_blob(const LoadedPlugin& plugin, size_t device_index,
                               std::string_view loader_key, uint32_t format_version,
                               std::span<const std::byte> blob) {
  LOOM_RETURN_IF_ERROR(check_device(plugin, device_index));
  const auto entry = plugin.estimate_entry();
  if (entry == nullptr) return uint64_t{0};
  std::string key(loader_key);
  loom_executable_estimate_args_t args{};
  args.struct_size = LOOM_EXECUTABLE_ESTIMATE_ARGS_STRUCT_SIZE;
  args.device = plugin.device_handle(device_index);
  args.loader_key = key.c_str();
  args.format_version = format_version;
  args.blob = blob.data();
  args.blob_size = blob.size();
  LOOM_RETURN_IF_ERROR(plugin.take(entry(&args)).with_context(
      plugin.devices()[device_index].uri + ": executable_estimate"));
  return args.out_time_ns;
}

Result<std::unique_ptr<Executable>> Executable::load(
    std::shared_ptr<LoadedPlugin> plugin, size_t device_index, std::string_view loader_key,
    uint32_t format_version, std::span<const std::byte> blob,
    const std::vector<std::pair<std::string, std::string>>& specs,
    std::shared_ptr<const void> blob_owner) {
  LOOM_RETURN_IF_ERROR(check_plugin(plugin, device_index));
  std::string key(loader_key);
  std::vector<loom_option_t> values(specs.size());
  std::vector<const loom_option_t*> pointers(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    values[i] = {LOOM_OPTION_STRUCT_SIZE, specs[i].first.c_str(), specs[i].second.c_str()};
    pointers[i] = &values[i];
  }
  loom_executable_load_args_t args{};
  args.struct_size = LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE;
  args.device = plugin->device_handle(device_index);
  args.loader_key = key.c_str();
  args.format_version = format_version;
  args.blob = blob.data();
  args.blob_size = blob.size();
  args.spec_count = pointers.size();
  args.specs = pointers.data();
  const std::string where = "loading a '" + key + "' blob on " +
                            plugin->devices()[device_index].uri;
  LOOM_RETURN_IF_ERROR(plugin->take(plugin->api().executable_load(&args)).with_context(where));
  if (args.out_executable == nullptr) {
    return internal_error(where + ": executable_load succeeded but returned no executable");
  }
  std::unique_ptr<Executable> out(new Executable());
  out->plugin_ = std::move(plugin);
  out->blob_owner_ = std::move(blob_owner);
  out->device_index_ = device_index;
  out->handle_ = args.out_executable;
  return out;
}

Executable::~Executable() {
  if (handle_ != nullptr) plugin_->api().executable_destroy(handle_);
}

Result<std::unique_ptr<PreparedCall>> PreparedCall::make(const Executable& executable,
                                                         std::span<const Operand> operands,
                                                         size_t input_count) {
  if (input_count > operands.size()) {
    return invalid_argument("a call with " + std::to_string(input_count) + " inputs among " +
                            std::to_string(operands.size()) + " operands");
  }
  size_t dims = 0;
  for (const Operand& o : operands) {
    if (o.shape.size() > LOOM_MAX_RANK) {
      return invalid_argument("operand '" + std::string(o.name) + "' has rank " +
                              std::to_string(o.shape.size()) + ", the plugin ABI allows " +
                              std::to_string(LOOM_MAX_RANK));
    }
    dims += o.shape.size();
  }
  std::unique_ptr<PreparedCall> call(new PreparedCall());
  call->executable_ = &executable;
  // Reserved whole first: the tensors point into it.
  call->shapes_.reserve(dims);
  call->tensors_.resize(operands.size());
  for (size_t i = 0; i < operands.size(); ++i) {
    const Operand& o = operands[i];
    loom_tensor_t& t = call->tensors_[i];
    t.struct_size = LOOM_TENSOR_STRUCT_SIZE;
    t.dtype = static_cast<loom_dtype_t>(o.dtype);
    t.rank = static_cast<uint32_t>(o.shape.size());
    t.shape = call->shapes_.data() + call->shapes_.size();
    call->shapes_.insert(call->shapes_.end(), o.shape.begin(), o.shape.end());
    t.byte_size = o.bytes;
  }
  call->pointers_.reserve(operands.size());
  for (const loom_tensor_t& t : call->tensors_) call->pointers_.push_back(&t);
  loom_execute_args_t& args = call->args_;
  args.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
  args.executable = executable.handle();
  args.input_count = input_count;
  args.inputs = call->pointers_.data();
  args.output_count = operands.size() - input_count;
  args.outputs = call->pointers_.data() + input_count;
  return call;
}

void PreparedCall::place_on_host(size_t index, void* data) {
  loom_tensor_t& t = tensors_[index];
  t.host_data = data;
  t.buffer = nullptr;
  t.offset = 0;
}

void PreparedCall::place_in_buffer(size_t index, const DeviceBuffer& buffer, uint64_t offset) {
  loom_tensor_t& t = tensors_[index];
  t.host_data = nullptr;
  t.buffer = buffer.handle();
  t.offset = offset;
}

Status PreparedCall::execute(Fence* signal, std::span<Fence* const> waits) {
  args_.signal_fence = signal != nullptr ? signal->handle() : nullptr;
  waits_.clear();
  for (Fence* f : waits) {
    if (f != nullptr) waits_.push_back(f->handle());
  }
  args_.wait_fence_count = waits_.size();
  args_.wait_fences = waits_.empty() ? nullptr : waits_.data();
  const LoadedPlugin& plugin = executable_->plugin();
  return plugin.take(plugin.api().execute(&args_));
}

Result<std::unique_ptr<DeviceBuffer>> DeviceBuffer::allocate(std::shared_ptr<LoadedPlugin> plugin,
                                                             size_t device_index, uint64_t bytes,
                                                             uint32_t flags) {
  LOOM_RETURN_IF_ERROR(check_plugin(plugin, device_index));
  loom_buffer_allocate_args_t args{};
  args.struct_size = LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE;
  args.device = plugin->device_handle(device_index);
  args.size = bytes;
  args.alignment = 0;
  args.flags = flags;
  const std::string where = "allocating " + std::to_string(bytes) + " bytes on " +
                            plugin->devices()[device_index].uri;
  LOOM_RETURN_IF_ERROR(plugin->take(plugin->api().buffer_allocate(&args)).with_context(where));
  if (args.out_buffer == nullptr) {
    return internal_error(where + ": buffer_allocate succeeded but returned no buffer");
  }
  std::unique_ptr<DeviceBuffer> out(new DeviceBuffer());
  out->plugin_ = std::move(plugin);
  out->handle_ = args.out_buffer;
  out->size_ = bytes;
  return out;
}

Result<std::unique_ptr<DeviceBuffer>> DeviceBuffer::import_host(
    std::shared_ptr<LoadedPlugin> plugin, size_t device_index, void* host, uint64_t bytes) {
  LOOM_RETURN_IF_ERROR(check_plugin(plugin, device_index));
  const std::string where = "importing " + std::to_string(bytes) + " bytes of host memory on " +
                            plugin->devices()[device_index].uri;
  if (plugin->api().buffer_import_host == nullptr) {
    return unimplemented(where + ": the plugin has no buffer_import_host");
  }
  if (host == nullptr) return invalid_argument(where + ": the host pointer is null");
  loom_buffer_import_args_t args{};
  args.struct_size = LOOM_BUFFER_IMPORT_ARGS_STRUCT_SIZE;
  args.device = plugin->device_handle(device_index);
  args.host_pointer = host;
  args.size = bytes;
  LOOM_RETURN_IF_ERROR(plugin->take(plugin->api().buffer_import_host(&args)).with_context(where));
  if (args.out_buffer == nullptr) {
    return internal_error(where + ": buffer_import_host succeeded but returned no buffer");
  }
  std::unique_ptr<DeviceBuffer> out(new DeviceBuffer());
  out->plugin_ = std::move(plugin);
  out->handle_ = args.out_buffer;
  out->size_ = bytes;
  return out;
}

DeviceBuffer::~DeviceBuffer() {
  if (handle_ != nullptr) plugin_->api().buffer_free(handle_);
}

Status DeviceBuffer::check_range(std::string_view what, uint64_t offset, const void* host,
                                 uint64_t bytes) const {
  // Written so that offset + bytes cannot overflow.
  if (offset > size_ || bytes > size_ - offset) {
    return out_of_range(std::string(what) + " of " + std::to_string(bytes) + " bytes at offset " +
                        std::to_string(offset) + " does not fit a buffer of " +
                        std::to_string(size_) + " bytes");
  }
  if (host == nullptr && bytes != 0) {
    return invalid_argument(std::string(what) + " of " + std::to_string(bytes) +
                            " bytes with a null host pointer");
  }
  return Status();
}

Status DeviceBuffer::copy_from_host(uint64_t offset, const void* src, uint64_t bytes) {
  LOOM_RETURN_IF_ERROR(check_range("copy to the device", offset, src, bytes));
  if (bytes == 0) return Status();
  loom_buffer_copy_args_t args{};
  args.struct_size = LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE;
  args.buffer = handle_;
  args.buffer_offset = offset;
  args.host_pointer = const_cast<void*>(src);  // the plugin only reads it
  args.size = bytes;
  return plugin_->take(plugin_->api().buffer_copy_from_host(&args));
}

Status DeviceBuffer::copy_to_host(uint64_t offset, void* dst, uint64_t bytes) const {
  LOOM_RETURN_IF_ERROR(check_range("copy to the host", offset, dst, bytes));
  if (bytes == 0) return Status();
  loom_buffer_copy_args_t args{};
  args.struct_size = LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE;
  args.buffer = handle_;
  args.buffer_offset = offset;
  args.host_pointer = dst;
  args.size = bytes;
  return plugin_->take(plugin_->api().buffer_copy_to_host(&args));
}

Result<void*> DeviceBuffer::map() {
  void* pointer = nullptr;
  LOOM_RETURN_IF_ERROR(plugin_->take(plugin_->api().buffer_map(handle_, &pointer))
                           .with_context("mapping a buffer of " + std::to_string(size_) + " bytes"));
  if (pointer == nullptr && size_ != 0) {
    return internal_error("buffer_map succeeded but returned no pointer");
  }
  return pointer;
}

void DeviceBuffer::unmap() { plugin_->api().buffer_unmap(handle_); }

Result<std::unique_ptr<Fence>> Fence::create(std::shared_ptr<LoadedPlugin> plugin,
                                             size_t device_index) {
  LOOM_RETURN_IF_ERROR(check_plugin(plugin, device_index));
  loom_fence_t* fence = nullptr;
  const std::string where = "creating a fence on " + plugin->devices()[device_index].uri;
  LOOM_RETURN_IF_ERROR(
      plugin->take(plugin->api().fence_create(plugin->device_handle(device_index), &fence))
          .with_context(where));
  if (fence == nullptr) {
    return internal_error(where + ": fence_create succeeded but returned no fence");
  }
  std::unique_ptr<Fence> out(new Fence());
  out->plugin_ = std::move(plugin);
  out->handle_ = fence;
  return out;
}

Fence::~Fence() {
  if (handle_ != nullptr) plugin_->api().fence_destroy(handle_);
}

Status Fence::wait(uint64_t timeout_ns) {
  return plugin_->take(plugin_->api().fence_wait(handle_, timeout_ns));
}

Result<bool> Fence::query() {
  bool signaled = false;
  LOOM_RETURN_IF_ERROR(plugin_->take(plugin_->api().fence_query(handle_, &signaled)));
  return signaled;
}

Status Fence::signal() { return plugin_->take(plugin_->api().fence_signal(handle_)); }

}  // namespace loom::host
