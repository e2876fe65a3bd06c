// The cpu-simd plugin: one CPU device running cpu-simd blobs (formats 1 to
// 5) on host memory, and the compile entries that build blobs from graph.fbs,
// open-shape graphs included (ABI 1.2, LOOM_PLUGIN_CAP_OPEN_SHAPES: one
// format-5 blob for every binding). The glue to the C ABI is loom/plugin.hpp, which also fills the
// compile entries from CpuSimdPlugin's compile members.
#include <omp.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "compile.hpp"
#include "estimate.hpp"
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
  if (blob.format_version != 0 &&
      (blob.format_version < kMinFormatVersion || blob.format_version > kFormatVersion)) {
    return sdk::incompatible("cpu-simd reads blob formats " + std::to_string(kMinFormatVersion) +
                             " to " + std::to_string(kFormatVersion) +
                             ", the program records format " + std::to_string(blob.format_version));
  }
  std::string error;
  if (!decode(blob.data, blob.size, graph, &error)) {
    return sdk::incompatible("cpu-simd blob rejected: " + error);
  }
  return Status();
}

#ifdef LOOM_CPU_SIMD_FAULT
// The test-only cpu-simd-broken build (see CMakeLists.txt): every HardSigmoid
// whose alpha is not ONNX's default 0.2 runs with beta + 1/16, so its outputs
// are wrong by up to 0.0625 while everything else stays right.
void inject_fault(BlobGraph* graph) {
  for (BlobNode& node : graph->nodes) {
    if (node.op == Op::kHardSigmoid && node.alpha != 0.2f) node.beta += 0.0625f;
  }
}
#endif

}  // namespace

class CpuSimdPlugin;

class CpuSimdDevice {
 public:
  CpuSimdDevice(ThreadPool* pool, std::string name, uint64_t memory, bool onednn, Kernels kernels,
                const loom_host_services_t* host)
      : pool_(pool), name_(std::move(name)), memory_(memory), onednn_(onednn), kernels_(kernels),
        host_(host),
        cost_(pool, onednn, kernels, model_key(name_, pool->parallelism()),
              model_key(name_, pool->parallelism()) + " plugin cpu-simd " LOOM_CPU_SIMD_VERSION +
                  " model " + std::to_string(CostModel::kVersion)) {}

  void info(loom_device_info_t* out) const {
    out->uri = LOOM_CPU_SIMD_NAME "://0";
    out->name = name_.c_str();
    out->kind = LOOM_DEVICE_KIND_CPU;
    out->device_memory_bytes = memory_;
    out->host_visible_memory_bytes = memory_;
    out->capabilities = LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE | LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY |
                        LOOM_DEVICE_CAP_HOST_POINTER_IMPORT;
    // Blob format 4: Where, Equal and Cast read and write bool, i32 and i64.
    out->dtype_mask = LOOM_DTYPE_BIT(LOOM_DTYPE_F32) | LOOM_DTYPE_BIT(LOOM_DTYPE_BOOL) |
                      LOOM_DTYPE_BIT(LOOM_DTYPE_I32) | LOOM_DTYPE_BIT(LOOM_DTYPE_I64) |
                      LOOM_DTYPE_BIT(LOOM_DTYPE_U8) | LOOM_DTYPE_BIT(LOOM_DTYPE_I8);
  }

  Status check_executable(const sdk::Blob& blob) {
    BlobGraph graph;
    return check_blob(blob, &graph);
  }

  // ABI 1.1: the blob's work over the device's measured rates
  // (estimate.hpp); the rates are measured on the first call. Thread-safe.
  Status estimate_executable(const sdk::Blob& blob, uint64_t* out_time_ns) {
    BlobGraph graph;
    LOOM_SDK_RETURN_IF_ERROR(check_blob(blob, &graph));
    return cost_.estimate(graph, out_time_ns);
  }

  Status load_executable(const sdk::Blob& blob, const sdk::Options&,
                         std::unique_ptr<Executable>* out) {
    BlobGraph graph;
    LOOM_SDK_RETURN_IF_ERROR(check_blob(blob, &graph));
#ifdef LOOM_CPU_SIMD_FAULT
    inject_fault(&graph);
#endif
    LOOM_SDK_RETURN_IF_ERROR(Executable::create(std::move(graph), pool_, onednn_, kernels_, out));
    (*out)->report_packing_to(host_);
    return Status();
  }

  Status allocate_buffer(uint64_t size, uint64_t alignment, uint32_t flags,
                         std::unique_ptr<Buffer>* out) {
    if ((flags & ~static_cast<uint32_t>(LOOM_BUFFER_HOST_VISIBLE)) != 0) {
      return sdk::invalid_argument("buffer_allocate: unknown flags " + std::to_string(flags));
    }
    return Buffer::create(size, alignment, out);
  }

  // Host memory is this device's memory: an imported buffer is the caller's
  // bytes, used in place (any address and size; the caller keeps them valid).
  Status import_host(void* pointer, uint64_t size, std::unique_ptr<Buffer>* out) {
    return Buffer::wrap(pointer, size, out);
  }

  Status create_fence(std::unique_ptr<Fence>* out) {
    *out = std::make_unique<Fence>();
    return Status();
  }

 private:
  ThreadPool* pool_;
  std::string name_;
  uint64_t memory_;
  bool onednn_;
  Kernels kernels_;
  const loom_host_services_t* host_;  // may be NULL: packing goes unreported
  CostModel cost_;

  // What the cost model's numbers depend on: the CPU and kernels (the
  // device's name says both) and the thread count.
  static std::string model_key(const std::string& name, size_t threads) {
    return name + " threads " + std::to_string(threads);
  }
};

class CpuSimdPlugin {
 public:
  CpuSimdPlugin(size_t threads, const loom_host_services_t* host, bool onednn, Kernels kernels)
      : host_(host),
        pool_(threads),
        device_(&pool_,
                cpu_model_name() + " [kernels " + kernels.name +
                    (onednn ? ", oneDNN " + onednn_isa() : ", oneDNN off") + "]",
                physical_memory_bytes(), onednn, kernels, host) {}

  Status check_available() { return Status(); }
  size_t device_count() { return 1; }
  CpuSimdDevice* device(size_t index) { return index == 0 ? &device_ : nullptr; }

  // The compile side (compile.hpp); the SDK verifies the graph first and
  // copies the blob into memory from the host's allocator afterwards.
  // Thread-safe: both only read the graph.
  Status compile_supported(const sdk::GraphView& graph, sdk::Claims* claims) {
    // Why quantized nodes stay off cpu-simd, as info lines (`loom compile`
    // prints them).
    std::vector<std::string> notes;
    LOOM_SDK_RETURN_IF_ERROR(cpu_simd::compile_supported(graph, claims, &notes));
    for (const std::string& note : notes) sdk::log(host_, LOOM_LOG_INFO, ("compile: " + note).c_str());
    return Status();
  }
  Status compile(const sdk::GraphView& graph, const sdk::Options&, sdk::CompiledBlob* out) {
    BlobGraph blob;
    std::vector<std::string> notes;
    LOOM_SDK_RETURN_IF_ERROR(compile_graph(graph, &blob, &notes));
    // The compile notes: what became an int8 step and what stayed f32 and
    // why, as info lines (`loom compile` prints them).
    for (const std::string& note : notes) {
      sdk::log(host_, LOOM_LOG_INFO, ("compile: " + note).c_str());
    }
    // Format 5 only for a graph with open dimensions: static blobs stay
    // readable by plugins that know formats 1 to 4.
    const uint32_t version = format_version_for(blob);
    const std::vector<std::byte> bytes = encode(blob, version);
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    out->bytes.assign(p, p + bytes.size());
    out->loader_key = kLoaderKey;
    out->format_version = version;
    out->alignment = kDefaultAlignment;
    return Status();
  }

 private:
  const loom_host_services_t* host_;  // may be NULL: the compile notes go unlogged
  ThreadPool pool_;  // declared before the device: the device and executables use it
  CpuSimdDevice device_;
};

struct CpuSimd {
  using Plugin = CpuSimdPlugin;
  using Device = CpuSimdDevice;
  using Executable = cpu_simd::Executable;
  using Buffer = cpu_simd::Buffer;
  using Fence = cpu_simd::Fence;

  static const loom_plugin_info_t* info() {
    static const loom_loader_key_t kKey = {LOOM_LOADER_KEY_STRUCT_SIZE, kLoaderKey,
                                           kMinFormatVersion, kFormatVersion};
    static const loom_loader_key_t* const kKeys[] = {&kKey};
    static const loom_plugin_info_t kInfo = {LOOM_PLUGIN_INFO_STRUCT_SIZE, LOOM_CPU_SIMD_NAME, "Loom",
                                             LOOM_CPU_SIMD_VERSION, 1, kKeys,
                                             LOOM_PLUGIN_CAP_OPEN_SHAPES};
    return &kInfo;
  }

  static Status create(const sdk::CreateContext& ctx, std::unique_ptr<Plugin>* out) {
    keep_runtime_resident();
    uint64_t threads = 0;
    LOOM_SDK_RETURN_IF_ERROR(ctx.options.get_uint(LOOM_OPTION_THREADS, 0, 4096, &threads));
    if (threads == 0) threads = std::thread::hardware_concurrency();
    // OpenMP never runs more threads than OMP_THREAD_LIMIT, while oneDNN
    // plans a primitive for the thread count it is given and, handed fewer
    // threads, leaves part of the result uncomputed: the plugin's count must
    // not exceed the limit.
    const int limit = omp_get_thread_limit();
    if (limit > 0 && threads > static_cast<uint64_t>(limit)) threads = static_cast<uint64_t>(limit);
    if (threads == 0) threads = 1;
    uint64_t onednn = 1;
    LOOM_SDK_RETURN_IF_ERROR(ctx.options.get_uint("cpu.onednn", 1, 1, &onednn));
    KernelIsa cap = KernelIsa::kAvx512;
    if (const char* isa = ctx.options.find("cpu.isa")) LOOM_SDK_RETURN_IF_ERROR(limit_isa(isa, &cap));
    *out = std::make_unique<Plugin>(static_cast<size_t>(threads), ctx.host, onednn != 0,
                                    select_kernels(cap));
    return Status();
  }
};

}  // namespace loom::cpu_simd

LOOM_SDK_DEFINE_ENTRY(::loom::cpu_simd::CpuSimd)
