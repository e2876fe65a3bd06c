// Handles given to the host for buffers, fences and executables. A handle
// names a slot of the plugin's HandleTable plus the slot's generation, so a
// handle used after its destroy (or destroyed twice) is recognised and
// answered with FAILED_PRECONDITION instead of touching freed memory. Slots
// are recycled with a new generation and freed with the table.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device.hpp"

namespace loom::fpga_stub {

enum class HandleKind : uint8_t { kFree = 0, kBuffer, kFence, kExecutable };

struct BufferObject {
  Device* device;
  std::shared_ptr<Allocation> allocation;
  uint64_t size;  // as requested; the allocation may be larger
};
struct FenceObject {
  Device* device;
  std::shared_ptr<FenceState> state;
};
struct ExecutableObject {
  Device* device;
  std::shared_ptr<Program> program;
};

class HandleTable {
 public:
  // `host` (may be NULL) receives a log line for every misused destroy.
  explicit HandleTable(const loom_host_services_t* host) : host_(host) {}
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  // A new handle owning `object`.
  void* add(HandleKind kind, std::shared_ptr<void> object);
  // The object behind a live handle of `kind`; FAILED_PRECONDITION naming
  // `entry` for a destroyed handle, INVALID_ARGUMENT for a NULL one or one of
  // another kind. Thread-safe.
  template <typename T>
  static Status get(void* handle, HandleKind kind, const char* entry, std::shared_ptr<T>* out) {
    std::shared_ptr<void> object;
    LOOM_SDK_RETURN_IF_ERROR(lookup(handle, kind, entry, false, &object));
    *out = std::static_pointer_cast<T>(std::move(object));
    return Status();
  }
  // Ends a handle; the object lives on while commands in flight hold it. A
  // failure is also logged through the host (destroy entries return nothing).
  static Status remove(void* handle, HandleKind kind, const char* entry);
  // Drops every live object (plugin_destroy, after the devices stopped).
  void clear();

 private:
  struct Slot {
    uint64_t magic;
    HandleTable* table;
    uint16_t generation;
    HandleKind kind;
    std::shared_ptr<void> object;
  };
  static Status lookup(void* handle, HandleKind kind, const char* entry, bool remove,
                       std::shared_ptr<void>* out);

  const loom_host_services_t* host_;
  std::mutex mutex_;
  std::deque<Slot> slots_;  // stable addresses
  std::vector<Slot*> free_;
};

}  // namespace loom::fpga_stub
