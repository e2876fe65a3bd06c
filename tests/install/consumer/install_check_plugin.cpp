// The smallest plugin built against an installed SDK (C++17): one CPU
// device with host-memory buffers that loads no executables. Used by
// tests/install/check_install.sh only.
#include <cstring>
#include <memory>
#include <vector>

#include "loom/plugin.hpp"

namespace {

using loom::sdk::Status;

struct InstallCheck {
  class Fence {
   public:
    Status signal() {
      signaled_ = true;
      return Status();
    }
    Status wait(uint64_t) {
      return signaled_ ? Status() : loom::sdk::deadline_exceeded("install-check: fence not signalled");
    }
    Status query(bool* out) {
      *out = signaled_;
      return Status();
    }

   private:
    bool signaled_ = false;
  };

  class Buffer {
   public:
    explicit Buffer(uint64_t size) : bytes_(size) {}
    Status map(void** out) {
      *out = bytes_.data();
      return Status();
    }
    void unmap() {}
    Status copy_from_host(uint64_t offset, const void* src, uint64_t size) {
      if (offset > bytes_.size() || size > bytes_.size() - offset) return out_of_range(offset, size);
      std::memcpy(bytes_.data() + offset, src, size);
      return Status();
    }
    Status copy_to_host(uint64_t offset, void* dst, uint64_t size) {
      if (offset > bytes_.size() || size > bytes_.size() - offset) return out_of_range(offset, size);
      std::memcpy(dst, bytes_.data() + offset, size);
      return Status();
    }

   private:
    Status out_of_range(uint64_t offset, uint64_t size) const {
      return loom::sdk::out_of_range("install-check: " + std::to_string(size) + " bytes at " +
                                     std::to_string(offset) + " in a buffer of " +
                                     std::to_string(bytes_.size()));
    }
    std::vector<unsigned char> bytes_;
  };

  class Executable {
   public:
    Status execute(const loom::sdk::ExecuteCallT<Fence>&) {
      return loom::sdk::unimplemented("install-check: runs nothing");
    }
  };

  class Device {
   public:
    void info(loom_device_info_t* d) {
      d->uri = "install-check://0";
      d->name = "install check device";
      d->kind = LOOM_DEVICE_KIND_CPU;
      d->device_memory_bytes = 0;
      d->host_visible_memory_bytes = 0;
      d->capabilities = LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY;
      d->dtype_mask = LOOM_DTYPE_BIT(LOOM_DTYPE_F32);
    }
    Status check_executable(const loom::sdk::Blob&) {
      return loom::sdk::incompatible("install-check: loads no blobs");
    }
    Status load_executable(const loom::sdk::Blob&, const loom::sdk::Options&,
                           std::unique_ptr<Executable>*) {
      return loom::sdk::incompatible("install-check: loads no blobs");
    }
    Status allocate_buffer(uint64_t size, uint64_t, uint32_t, std::unique_ptr<Buffer>* out) {
      *out = std::make_unique<Buffer>(size);
      return Status();
    }
    Status create_fence(std::unique_ptr<Fence>* out) {
      *out = std::make_unique<Fence>();
      return Status();
    }
  };

  class Plugin {
   public:
    Status check_available() { return Status(); }
    size_t device_count() { return 1; }
    Device* device(size_t index) { return index == 0 ? &device_ : nullptr; }

   private:
    Device device_;
  };

  static const loom_plugin_info_t* info() {
    static const loom_loader_key_t kKey = {LOOM_LOADER_KEY_STRUCT_SIZE, "install-check", 1, 1};
    static const loom_loader_key_t* const kKeys[] = {&kKey};
    static const loom_plugin_info_t kInfo = {LOOM_PLUGIN_INFO_STRUCT_SIZE, "install-check",
                                             "Loom tests", "2.3.4", 1, kKeys, 0};
    return &kInfo;
  }
  static Status create(const loom::sdk::CreateContext&, std::unique_ptr<Plugin>* out) {
    *out = std::make_unique<Plugin>();
    return Status();
  }
};

}  // namespace

LOOM_SDK_DEFINE_ENTRY(InstallCheck)
