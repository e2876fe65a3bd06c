// The fake plugin's buffers (host memory standing in for device memory)
// and fences (a FenceState each, shared with pending executions).
#include <chrono>
#include <cstring>

#include "fake_objects.hpp"

namespace fake {

// ---- buffers -------------------------------------------------------------

loom_status_t* buffer_allocate(loom_buffer_allocate_args_t* args) {
  return guarded([&]() -> loom_status_t* {
    if (args == nullptr) return invalid("buffer_allocate args is NULL");
    if (args->struct_size < LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE) return invalid("buffer_allocate args.struct_size too small");
    args->out_buffer = nullptr;
    if (args->device == nullptr) return invalid("args.device is NULL");
    if (args->alignment & (args->alignment - 1)) return invalid("args.alignment is not a power of two");
    if (args->size > kMaxBufferBytes) {
      return make_status(LOOM_STATUS_RESOURCE_EXHAUSTED, "buffer of " + std::to_string(args->size) + " bytes exceeds the fake's limit");
    }
    if ((args->flags & LOOM_BUFFER_HOST_VISIBLE) && !(args->device->capabilities & LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY)) {
      return invalid("args.flags asks for host-visible memory, which the device lacks");
    }
    auto* buffer = new loom_buffer_t{kBufferMagic, args->device, std::vector<std::byte>(args->size)};
    args->device->plugin->track(args->device->plugin->buffers, buffer);
    args->out_buffer = buffer;
    return nullptr;
  });
}

// Like a Vulkan driver's host-pointer import: the address and the size must
// be multiples of 4096.
loom_status_t* buffer_import_host(loom_buffer_import_args_t* args) {
  return guarded([&]() -> loom_status_t* {
    if (args == nullptr) return invalid("buffer_import_host args is NULL");
    if (args->struct_size < LOOM_BUFFER_IMPORT_ARGS_STRUCT_SIZE) return invalid("buffer_import_host args.struct_size too small");
    args->out_buffer = nullptr;
    if (args->device == nullptr) return invalid("args.device is NULL");
    if (!(args->device->capabilities & LOOM_DEVICE_CAP_HOST_POINTER_IMPORT)) {
      return make_status(LOOM_STATUS_UNIMPLEMENTED, "buffer_import_host: the device imports nothing (fake.import=0)");
    }
    constexpr uint64_t kAlign = 4096;
    if (args->host_pointer == nullptr || args->size == 0 ||
        reinterpret_cast<uintptr_t>(args->host_pointer) % kAlign != 0 || args->size % kAlign != 0) {
      return invalid("buffer_import_host: address and size must be non-zero multiples of 4096 (size " +
                     std::to_string(args->size) + ")");
    }
    auto* buffer = new loom_buffer_t{kBufferMagic, args->device, {}, static_cast<std::byte*>(args->host_pointer),
                                     args->size};
    args->device->plugin->track(args->device->plugin->buffers, buffer);
    args->out_buffer = buffer;
    return nullptr;
  });
}

void buffer_free(loom_buffer_t* buffer) {
  if (buffer == nullptr || buffer->magic != kBufferMagic) return;
  loom_plugin_t* plugin = buffer->device->plugin;
  plugin->untrack_and_delete(plugin->buffers, buffer);
}

loom_status_t* buffer_map(loom_buffer_t* buffer, void** out_pointer) {
  if (out_pointer == nullptr) return invalid("out_pointer is NULL");
  *out_pointer = nullptr;
  if (buffer == nullptr || buffer->magic != kBufferMagic) return invalid("buffer is not a buffer of this plugin");
  if (!(buffer->device->capabilities & LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY)) {
    return make_status(LOOM_STATUS_FAILED_PRECONDITION, "buffer is not host-visible");
  }
  *out_pointer = buffer->data();
  return nullptr;
}

void buffer_unmap(loom_buffer_t* buffer) {}

static loom_status_t* buffer_copy(loom_buffer_copy_args_t* args, bool to_host) {
  if (args == nullptr) return invalid("buffer copy args is NULL");
  if (args->struct_size < LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE) return invalid("buffer copy args.struct_size too small");
  loom_buffer_t* buffer = args->buffer;
  if (buffer == nullptr || buffer->magic != kBufferMagic) return invalid("args.buffer is not a buffer of this plugin");
  if (args->host_pointer == nullptr && args->size != 0) return invalid("args.host_pointer is NULL");
  const uint64_t size = buffer->size();
  if (args->buffer_offset > size || args->size > size - args->buffer_offset) {
    return make_status(LOOM_STATUS_OUT_OF_RANGE, "copy of " + std::to_string(args->size) + " bytes at offset " +
                                                     std::to_string(args->buffer_offset) + " exceeds the buffer of " +
                                                     std::to_string(size) + " bytes");
  }
  if (args->size == 0) return nullptr;
  std::byte* device = buffer->data() + args->buffer_offset;
  if (to_host) std::memcpy(args->host_pointer, device, args->size);
  else std::memcpy(device, args->host_pointer, args->size);
  return nullptr;
}
loom_status_t* buffer_copy_from_host(loom_buffer_copy_args_t* args) { return buffer_copy(args, false); }
loom_status_t* buffer_copy_to_host(loom_buffer_copy_args_t* args) { return buffer_copy(args, true); }

// ---- fences --------------------------------------------------------------

loom_status_t* fence_create(loom_device_t* device, loom_fence_t** out_fence) {
  return guarded([&]() -> loom_status_t* {
    if (out_fence == nullptr) return invalid("out_fence is NULL");
    *out_fence = nullptr;
    if (device == nullptr) return invalid("device is NULL");
    {
      loom_plugin_t* plugin = device->plugin;
      std::lock_guard<std::mutex> lock(plugin->objects_mutex);
      if (plugin->config.max_fences != 0 && plugin->fences_created >= plugin->config.max_fences) {
        return make_status(LOOM_STATUS_RESOURCE_EXHAUSTED,
                           "fence_create: fake.max_fences=" + std::to_string(plugin->config.max_fences) +
                               " fences made already");
      }
      ++plugin->fences_created;
    }
    auto* fence = new loom_fence_t{kFenceMagic, device, std::make_shared<FenceState>()};
    fence->state->worker = device->plugin->worker.get();
    device->plugin->track(device->plugin->fences, fence);
    *out_fence = fence;
    return nullptr;
  });
}

void fence_destroy(loom_fence_t* fence) {
  if (fence == nullptr || fence->magic != kFenceMagic) return;
  loom_plugin_t* plugin = fence->device->plugin;
  plugin->untrack_and_delete(plugin->fences, fence);
}

loom_status_t* fence_signal(loom_fence_t* fence) {
  if (fence == nullptr || fence->magic != kFenceMagic) return invalid("fence is not a fence of this plugin");
  fence->state->signal(LOOM_STATUS_OK, "");
  return nullptr;
}

static loom_status_t* fence_result(FenceState& state) {
  return state.error == LOOM_STATUS_OK ? nullptr : new (std::nothrow) loom_status_t{state.error, state.error_message};
}

loom_status_t* fence_wait(loom_fence_t* fence, uint64_t timeout_ns) {
  if (fence == nullptr || fence->magic != kFenceMagic) return invalid("fence is not a fence of this plugin");
  FenceState& state = *fence->state;
  std::unique_lock<std::mutex> lock(state.mutex);
  auto done = [&] { return state.signaled; };
  // Waits of a day or more count as forever, which keeps the chrono
  // arithmetic far from overflow.
  constexpr uint64_t kForever = uint64_t{86400} * 1000000000;
  if (timeout_ns >= kForever) {
    state.cv.wait(lock, done);
  } else if (!state.cv.wait_for(lock, std::chrono::nanoseconds(timeout_ns), done)) {
    return make_status(LOOM_STATUS_DEADLINE_EXCEEDED, "fence not signaled within " + std::to_string(timeout_ns) + " ns");
  }
  return fence_result(state);
}

loom_status_t* fence_query(loom_fence_t* fence, bool* out_signaled) {
  if (out_signaled == nullptr) return invalid("out_signaled is NULL");
  *out_signaled = false;
  if (fence == nullptr || fence->magic != kFenceMagic) return invalid("fence is not a fence of this plugin");
  std::lock_guard<std::mutex> lock(fence->state->mutex);
  *out_signaled = fence->state->signaled;
  return *out_signaled ? fence_result(*fence->state) : nullptr;
}

}  // namespace fake
