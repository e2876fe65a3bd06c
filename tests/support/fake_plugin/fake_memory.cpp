// The fake plugin's buffers (host memory standing in for device memory)
// and fences (a FenceState each, shared with pending executions).
#include <chrono>
#include <cstring>

#include "fake_objects.hpp"

namespace fake {

// ---- buffers -------------------------------------------------------------

Status Device::allocate_buffer(uint64_t size, uint64_t, uint32_t flags, std::unique_ptr<Buffer>* out) {
  if (size > kMaxBufferBytes) {
    return error(LOOM_STATUS_RESOURCE_EXHAUSTED, "buffer of " + std::to_string(size) + " bytes exceeds the fake's limit");
  }
  if ((flags & LOOM_BUFFER_HOST_VISIBLE) && !(capabilities_ & LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY)) {
    return invalid("args.flags asks for host-visible memory, which the device lacks");
  }
  *out = std::make_unique<Buffer>(this, size, nullptr);
  plugin_->track(out->get());
  return Status();
}

// Like a Vulkan driver's host-pointer import: the address and the size must
// be multiples of 4096.
Status Device::import_host(void* pointer, uint64_t size, std::unique_ptr<Buffer>* out) {
  if (!(capabilities_ & LOOM_DEVICE_CAP_HOST_POINTER_IMPORT)) {
    return error(LOOM_STATUS_UNIMPLEMENTED, "buffer_import_host: the device imports nothing (fake.import=0)");
  }
  constexpr uint64_t kAlign = 4096;
  if (size == 0 || reinterpret_cast<uintptr_t>(pointer) % kAlign != 0 || size % kAlign != 0) {
    return invalid("buffer_import_host: address and size must be non-zero multiples of 4096 (size " +
                   std::to_string(size) + ")");
  }
  *out = std::make_unique<Buffer>(this, size, static_cast<std::byte*>(pointer));
  plugin_->track(out->get());
  return Status();
}

Buffer::Buffer(Device* device, uint64_t size, std::byte* imported) : device_(device) {
  if (imported != nullptr) {
    imported_ = imported;
    imported_size_ = size;
  } else {
    bytes_.resize(size);
  }
}

Buffer::~Buffer() { device_->plugin()->untrack(this); }

Status Buffer::map(void** out) {
  if (magic != kBufferMagic) return invalid("buffer is not a buffer of this plugin");
  if (!(device_->capabilities() & LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY)) {
    return error(LOOM_STATUS_FAILED_PRECONDITION, "buffer is not host-visible");
  }
  *out = data();
  return Status();
}

Status Buffer::check_range(uint64_t offset, uint64_t count) {
  if (magic != kBufferMagic) return invalid("args.buffer is not a buffer of this plugin");
  if (offset > size() || count > size() - offset) {
    return error(LOOM_STATUS_OUT_OF_RANGE, "copy of " + std::to_string(count) + " bytes at offset " +
                                               std::to_string(offset) + " exceeds the buffer of " +
                                               std::to_string(size()) + " bytes");
  }
  return Status();
}

Status Buffer::copy_from_host(uint64_t offset, const void* src, uint64_t count) {
  LOOM_SDK_RETURN_IF_ERROR(check_range(offset, count));
  if (count != 0) std::memcpy(data() + offset, src, count);
  return Status();
}

Status Buffer::copy_to_host(uint64_t offset, void* dst, uint64_t count) {
  LOOM_SDK_RETURN_IF_ERROR(check_range(offset, count));
  if (count != 0) std::memcpy(dst, data() + offset, count);
  return Status();
}

// ---- fences --------------------------------------------------------------

Status Device::create_fence(std::unique_ptr<Fence>* out) {
  LOOM_SDK_RETURN_IF_ERROR(plugin_->count_fence());
  *out = std::make_unique<Fence>(this, plugin_->worker());
  plugin_->track(out->get());
  return Status();
}

Fence::Fence(Device* device, fake_async::Worker* worker)
    : device_(device), state_(std::make_shared<FenceState>()) {
  state_->worker = worker;
}

Fence::~Fence() { device_->plugin()->untrack(this); }

std::shared_ptr<FenceState> Fence::rearm() {
  auto fresh = std::make_shared<FenceState>();
  fresh->worker = state_->worker;
  state_ = fresh;
  return fresh;
}

Status Fence::signal() {
  if (magic != kFenceMagic) return invalid("fence is not a fence of this plugin");
  state_->signal(LOOM_STATUS_OK, "");
  return Status();
}

namespace {
Status result_of(FenceState& state) {
  return state.error == LOOM_STATUS_OK ? Status() : Status(state.error, state.error_message);
}
}  // namespace

Status Fence::wait(uint64_t timeout_ns) {
  if (magic != kFenceMagic) return invalid("fence is not a fence of this plugin");
  FenceState& state = *state_;
  std::unique_lock<std::mutex> lock(state.mutex);
  auto done = [&] { return state.signaled; };
  // Waits of a day or more count as forever, which keeps the chrono
  // arithmetic far from overflow.
  constexpr uint64_t kForever = uint64_t{86400} * 1000000000;
  if (timeout_ns >= kForever) {
    state.cv.wait(lock, done);
  } else if (!state.cv.wait_for(lock, std::chrono::nanoseconds(timeout_ns), done)) {
    return error(LOOM_STATUS_DEADLINE_EXCEEDED, "fence not signaled within " + std::to_string(timeout_ns) + " ns");
  }
  return result_of(state);
}

Status Fence::query(bool* out) {
  if (magic != kFenceMagic) return invalid("fence is not a fence of this plugin");
  std::lock_guard<std::mutex> lock(state_->mutex);
  *out = state_->signaled;
  return *out ? result_of(*state_) : Status();
}

}  // namespace fake
