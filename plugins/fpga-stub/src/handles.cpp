#include "handles.hpp"

namespace loom::fpga_stub {
namespace {

constexpr uint64_t kSlotMagic = 0x46504741534c4f54ull;  // "FPGASLOT"
constexpr unsigned kGenerationShift = 48;
constexpr uintptr_t kAddressMask = (uintptr_t{1} << kGenerationShift) - 1;

const char* kind_name(HandleKind kind) {
  switch (kind) {
    case HandleKind::kBuffer: return "buffer";
    case HandleKind::kFence: return "fence";
    case HandleKind::kExecutable: return "executable";
    default: return "destroyed";
  }
}

}  // namespace

void* HandleTable::add(HandleKind kind, std::shared_ptr<void> object) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot* slot = nullptr;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = &slots_.emplace_back(Slot{kSlotMagic, this, 0, HandleKind::kFree, nullptr});
  }
  ++slot->generation;
  if (slot->generation == 0) slot->generation = 1;  // 0 never names a live slot
  slot->kind = kind;
  slot->object = std::move(object);
  const auto address = reinterpret_cast<uintptr_t>(slot);
  if ((address & ~kAddressMask) != 0) return slot;  // no room for the generation
  return reinterpret_cast<void*>(address | (uintptr_t{slot->generation} << kGenerationShift));
}

Status HandleTable::lookup(void* handle, HandleKind kind, const char* entry, bool remove,
                           std::shared_ptr<void>* out) {
  if (handle == nullptr) return sdk::invalid_argument(std::string(entry) + ": the " + kind_name(kind) + " is NULL");
  const auto value = reinterpret_cast<uintptr_t>(handle);
  auto* slot = reinterpret_cast<Slot*>(value & kAddressMask);
  const auto generation = static_cast<uint16_t>(value >> kGenerationShift);
  if (slot->magic != kSlotMagic) {
    return sdk::invalid_argument(std::string(entry) + ": " + kind_name(kind) +
                                 " handle was not made by fpga-stub");
  }
  HandleTable* table = slot->table;
  std::lock_guard<std::mutex> lock(table->mutex_);
  if ((generation != 0 && slot->generation != generation) || slot->kind == HandleKind::kFree) {
    return sdk::failed_precondition(std::string(entry) + ": the " + kind_name(kind) +
                                    " handle was already destroyed (use after destroy, or a double destroy)");
  }
  if (slot->kind != kind) {
    return sdk::invalid_argument(std::string(entry) + ": the handle is a " + kind_name(slot->kind) +
                                 ", not a " + kind_name(kind));
  }
  if (!remove) {
    *out = slot->object;
    return Status();
  }
  *out = std::move(slot->object);
  slot->object = nullptr;
  slot->kind = HandleKind::kFree;
  if (generation != 0) table->free_.push_back(slot);  // a slot without a generation is never reused
  return Status();
}

Status HandleTable::remove(void* handle, HandleKind kind, const char* entry) {
  std::shared_ptr<void> object;
  // The object is released after the table's lock is gone: releasing a
  // buffer takes the arena's lock.
  Status s = lookup(handle, kind, entry, true, &object);
  if (!s.ok() && handle != nullptr) {
    const auto* slot = reinterpret_cast<const Slot*>(reinterpret_cast<uintptr_t>(handle) & kAddressMask);
    const loom_host_services_t* host = slot->magic == kSlotMagic ? slot->table->host_ : nullptr;
    if (host != nullptr && LOOM_STRUCT_HAS(loom_host_services_t, host->struct_size, log) && host->log != nullptr) {
      host->log(host->user_data, LOOM_LOG_ERROR, ("fpga-stub: " + s.message()).c_str());
    }
  }
  return s;
}

void HandleTable::clear() {
  std::vector<std::shared_ptr<void>> objects;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Slot& s : slots_) {
      if (s.object) objects.push_back(std::move(s.object));
      s.kind = HandleKind::kFree;
    }
  }
}

}  // namespace loom::fpga_stub
