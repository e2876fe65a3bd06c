// The cpu-simd plugin: one CPU device running cpu-simd blobs (format 1) on
// host memory. The glue to the C ABI is loom/plugin.hpp.
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "objects.hpp"

#ifndef LOOM_CPU_SIMD_VERSION
#define LOOM_CPU_SIMD_VERSION "0.0.0"
#endif

namespace loom::cpu_simd {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    size_t start = line.find_first_not_of(" \t", colon + 1);
    if (start == std::string::npos) continue;
    return line.substr(start);
  }
  return "CPU";
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

Status check_blob(const sdk::Blob& blob, BlobGraph* graph) {
  if (std::string(blob.loader_key) != kLoaderKey) {
    return sdk::incompatible("cpu-simd serves loader key \"cpu-simd\", not \"" +
                             std::string(blob.loader_key) + "\"");
  }
  if (blob.format_version != 0 && blob.format_version != kFormatVersion) {
    return sdk::incompatible("cpu-simd reads blob format " + std::to_string(kFormatVersion) +
                             ", the program records format " + std::to_string(blob.format_version));
  }
  std::string error;
  if (!decode(blob.data, blob.size, graph, &error)) {
    return sdk::incompatible("cpu-simd blob rejected: " + error);
  }
  return Status();
}

}  // namespace

class CpuSimdPlugin;

class CpuSimdDevice {
 public:
  CpuSimdDevice(ThreadPool* pool, std::string name, uint64_t memory)
      : pool_(pool), name_(std::move(name)), memory_(memory) {}

  void info(loom_device_info_t* out) const {
    out->uri = "cpu-simd://0";
    out->name = name_.c_str();
    out->kind = LOOM_DEVICE_KIND_CPU;
    out->device_memory_bytes = memory_;
    out->host_visible_memory_bytes = memory_;
    out->capabilities = LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE | LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY;
    out->dtype_mask = LOOM_DTYPE_BIT(LOOM_DTYPE_F32);
  }

  Status check_executable(const sdk::Blob& blob) {
    BlobGraph graph;
    return check_blob(blob, &graph);
  }

  Status load_executable(const sdk::Blob& blob, const sdk::Options&,
                         std::unique_ptr<Executable>* out) {
    BlobGraph graph;
    LOOM_SDK_RETURN_IF_ERROR(check_blob(blob, &graph));
    *out = std::make_unique<Executable>(std::move(graph), pool_);
    return Status();
  }

  Status allocate_buffer(uint64_t size, uint64_t alignment, uint32_t flags,
                         std::unique_ptr<Buffer>* out) {
    if ((flags & ~static_cast<uint32_t>(LOOM_BUFFER_HOST_VISIBLE)) != 0) {
      return sdk::invalid_argument("buffer_allocate: unknown flags " + std::to_string(flags));
    }
    return Buffer::create(size, alignment, out);
  }

  Status create_fence(std::unique_ptr<Fence>* out) {
    *out = std::make_unique<Fence>();
    return Status();
  }

 private:
  ThreadPool* pool_;
  std::string name_;
  uint64_t memory_;
};

class CpuSimdPlugin {
 public:
  explicit CpuSimdPlugin(size_t threads)
      : pool_(threads), device_(&pool_, cpu_model_name(), physical_memory_bytes()) {}

  Status check_available() { return Status(); }
  size_t device_count() { return 1; }
  CpuSimdDevice* device(size_t index) { return index == 0 ? &device_ : nullptr; }

 private:
  ThreadPool pool_;  // declared first: the device and executables use it
  CpuSimdDevice device_;
};

struct CpuSimd {
  using Plugin = CpuSimdPlugin;
  using Device = CpuSimdDevice;
  using Executable = cpu_simd::Executable;
  using Buffer = cpu_simd::Buffer;
  using Fence = cpu_simd::Fence;

  static const loom_plugin_info_t* info() {
    static const loom_loader_key_t kKey = {LOOM_LOADER_KEY_STRUCT_SIZE, kLoaderKey, kFormatVersion,
                                           kFormatVersion};
    static const loom_loader_key_t* const kKeys[] = {&kKey};
    static const loom_plugin_info_t kInfo = {LOOM_PLUGIN_INFO_STRUCT_SIZE, "cpu-simd", "Loom",
                                             LOOM_CPU_SIMD_VERSION, 1, kKeys};
    return &kInfo;
  }

  static Status create(const sdk::CreateContext& ctx, std::unique_ptr<Plugin>* out) {
    uint64_t threads = 0;
    LOOM_SDK_RETURN_IF_ERROR(ctx.options.get_uint(LOOM_OPTION_THREADS, 0, 4096, &threads));
    if (threads == 0) threads = std::thread::hardware_concurrency();
    if (threads == 0) threads = 1;
    *out = std::make_unique<Plugin>(static_cast<size_t>(threads));
    return Status();
  }
};

}  // namespace loom::cpu_simd

LOOM_SDK_DEFINE_ENTRY(loom::cpu_simd::CpuSimd)
