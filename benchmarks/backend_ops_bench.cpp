// GEMM, Conv and elementwise throughput of vulkan-compute next to cpu-simd, in one
// run. Each case is one graph.fbs node compiled by the plugin's own compile
// entry, loaded on its device 0 and executed through the C ABI (no runtime in
// between): cpu-simd on host memory, vulkan-compute on its device buffers
// (the copies in and out are not timed: a model keeps its tensors there).
// Counters: GFLOP/s for GEMM (2·N³ per run) and Conv (2·MACs), GB/s for Add
// (12 bytes per element). A plugin with no device skips its cases with the reason.
// Inputs are pseudo-random; after timing, sampled outputs are checked against a
// double-precision host computation, and a case that computes wrong values
// fails (SkipWithError) instead of reporting a speed.
// LOOM_BENCH_CPU_SIMD_PLUGIN and LOOM_BENCH_VULKAN_PLUGIN override the plugin
// paths built in (to run a copied build on another machine).
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/graph/graph_generated.h"
#include "loom/plugin.h"

namespace {

namespace gfb = loom::graph::fb;
using Dims = std::vector<int64_t>;

void* host_allocate(void*, size_t size, size_t alignment) {
  return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}
void host_free(void*, void* p) { std::free(p); }
void host_log(void*, loom_log_level_t level, const char* message) {
  if (level >= LOOM_LOG_WARNING) std::fprintf(stderr, "plugin: %s\n", message);
}

// One loaded plugin with its device 0; `error` says why not.
struct Backend {
  void* handle = nullptr;
  const loom_plugin_api_t* api = nullptr;
  loom_plugin_t* plugin = nullptr;
  loom_device_t* device = nullptr;
  bool host_execute = false;
  std::string name;  // the device's name, for the report's context
  std::string error;
  loom_host_services_t host{};

  explicit Backend(const char* path) {
    host.struct_size = LOOM_HOST_SERVICES_STRUCT_SIZE;
    host.allocate = host_allocate;
    host.free = host_free;
    host.log = host_log;
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      error = dlerror();
      return;
    }
    auto query = reinterpret_cast<loom_plugin_query_fn_t>(dlsym(handle, LOOM_PLUGIN_ENTRY_POINT_NAME));
    loom_plugin_query_t q{};
    q.struct_size = LOOM_PLUGIN_QUERY_STRUCT_SIZE;
    q.host_abi_min = LOOM_ABI_VERSION(1, 0);
    q.host_abi_max = LOOM_ABI_CURRENT;
    q.host = &host;
    if (query == nullptr || query(&q) != LOOM_STATUS_OK) {
      error = "ABI query failed";
      return;
    }
    api = q.out_api;
    loom_plugin_create_args_t args{};
    args.struct_size = LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
    args.host = &host;
    if (!ok(api->plugin_create(&args))) return;
    plugin = args.out_plugin;
    if (loom_status_t* s = api->plugin_check_available(plugin); s != nullptr) {
      (void)ok(s);
      return;
    }
    if (!ok(api->device_get(plugin, 0, &device))) return;
    loom_device_info_t info{};
    info.struct_size = LOOM_DEVICE_INFO_STRUCT_SIZE;
    if (!ok(api->device_info(device, &info))) return;
    host_execute = (info.capabilities & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE) != 0;
    name = info.name != nullptr ? info.name : "";
  }
  ~Backend() {
    if (plugin != nullptr) api->plugin_destroy(plugin);
    if (handle != nullptr) dlclose(handle);
  }
  bool ok(loom_status_t* s) {
    if (s == nullptr) return true;
    error = api->status_message(s);
    api->status_destroy(s);
    device = nullptr;
    return false;
  }
};

const char* plugin_path(const char* variable, const char* built_in) {
  const char* v = std::getenv(variable);
  return v != nullptr && *v != '\0' ? v : built_in;
}
Backend& cpu_simd() {
  static Backend b(plugin_path("LOOM_BENCH_CPU_SIMD_PLUGIN", LOOM_CPU_SIMD_PLUGIN_PATH));
  return b;
}
Backend& vulkan() {
  static Backend b(plugin_path("LOOM_BENCH_VULKAN_PLUGIN", LOOM_VULKAN_PLUGIN_PATH));
  return b;
}

// A one-node graph: inputs of `in_shapes`, one output of `out_shape`;
// `group` and `pads` become attributes when set (Conv).
std::vector<uint8_t> one_node(const char* op, const std::vector<Dims>& in_shapes, const Dims& out_shape,
                              int64_t group = 0, const Dims& pads = {}) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<gfb::Attribute>> attrs;
  if (group != 0) attrs.push_back(gfb::CreateAttributeDirect(fbb, "group", gfb::AttributeKind::int_, group));
  if (!pads.empty()) {
    attrs.push_back(gfb::CreateAttributeDirect(fbb, "pads", gfb::AttributeKind::ints, 0, 0, &pads));
  }
  std::vector<flatbuffers::Offset<gfb::Tensor>> tensors;
  std::vector<int32_t> inputs;
  for (size_t i = 0; i < in_shapes.size(); ++i) {
    tensors.push_back(gfb::CreateTensorDirect(fbb, ("in" + std::to_string(i)).c_str(), gfb::DType::f32,
                                              &in_shapes[i]));
    inputs.push_back(static_cast<int32_t>(i));
  }
  tensors.push_back(gfb::CreateTensorDirect(fbb, "out", gfb::DType::f32, &out_shape));
  std::vector<int32_t> outputs = {static_cast<int32_t>(in_shapes.size())};
  std::vector<flatbuffers::Offset<gfb::Node>> nodes = {
      gfb::CreateNodeDirect(fbb, "n", op, "", 13, &attrs, &inputs, &outputs)};
  gfb::FinishGraphBuffer(fbb, gfb::CreateGraphDirect(fbb, "g", &tensors, &nodes, &inputs, &outputs));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

// Checks the output (last) against the inputs; returns what is wrong, or "".
using Check = std::function<std::string(const std::vector<std::vector<float>>&)>;

// Pseudo-random values in [-1, 1), the same for every run.
void fill(std::vector<float>& v, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 12345u;
  for (float& f : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    f = static_cast<float>(x >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
}

// "" when |got - want| is within a relative tolerance of the operands' scale.
std::string compare(const char* what, size_t index, float got, double want, double scale) {
  if (std::fabs(got - want) <= 1e-4 * scale + 1e-6) return "";
  return std::string(what) + "[" + std::to_string(index) + "] = " + std::to_string(got) +
         ", expected " + std::to_string(want);
}

// Compiles `graph` on `b`, loads it, runs it in the benchmark loop, then
// copies the output back and checks it.
void run_case(benchmark::State& state, Backend& b, const std::vector<uint8_t>& graph,
              const std::vector<Dims>& shapes, const Check& check) {
  if (b.device == nullptr) {
    state.SkipWithError(("no device: " + b.error).c_str());
    return;
  }
  loom_compile_args_t c{};
  c.struct_size = LOOM_COMPILE_ARGS_STRUCT_SIZE;
  c.plugin = b.plugin;
  c.graph = graph.data();
  c.graph_size = graph.size();
  if (!b.ok(b.api->compile(&c))) {
    state.SkipWithError(b.error.c_str());
    return;
  }
  loom_executable_load_args_t l{};
  l.struct_size = LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE;
  l.device = b.device;
  l.loader_key = c.out_loader_key;
  l.format_version = c.out_format_version;
  l.blob = c.out_blob;
  l.blob_size = c.out_blob_size;
  loom_status_t* s = b.api->executable_load(&l);
  if (s != nullptr) {
    state.SkipWithError(b.api->status_message(s));
    b.api->status_destroy(s);
    host_free(nullptr, c.out_blob);
    return;
  }
  std::vector<std::vector<float>> host(shapes.size());
  std::vector<loom_tensor_t> tensors(shapes.size());
  std::vector<loom_buffer_t*> buffers;
  std::vector<const loom_tensor_t*> ins, outs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    size_t n = 1;
    for (int64_t d : shapes[i]) n *= static_cast<size_t>(d);
    host[i].assign(n, 0.0f);
    fill(host[i], static_cast<uint32_t>(i + 1));
    loom_tensor_t& t = tensors[i];
    t.struct_size = LOOM_TENSOR_STRUCT_SIZE;
    t.dtype = LOOM_DTYPE_F32;
    t.rank = static_cast<uint32_t>(shapes[i].size());
    t.shape = shapes[i].data();
    t.byte_size = n * 4;
    if (b.host_execute) {
      t.host_data = host[i].data();
    } else {
      loom_buffer_allocate_args_t a{};
      a.struct_size = LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE;
      a.device = b.device;
      a.size = n * 4;
      (void)b.ok(b.api->buffer_allocate(&a));
      buffers.push_back(a.out_buffer);
      t.buffer = a.out_buffer;
      loom_buffer_copy_args_t cp{};
      cp.struct_size = LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE;
      cp.buffer = a.out_buffer;
      cp.host_pointer = host[i].data();
      cp.size = n * 4;
      if (a.out_buffer != nullptr) (void)b.ok(b.api->buffer_copy_from_host(&cp));
    }
    (i + 1 < shapes.size() ? ins : outs).push_back(&t);
  }
  loom_execute_args_t e{};
  e.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
  e.executable = l.out_executable;
  e.input_count = ins.size();
  e.inputs = ins.data();
  e.output_count = outs.size();
  e.outputs = outs.data();
  bool ran = true;
  for (auto _ : state) {
    if (!b.ok(b.api->execute(&e))) {
      state.SkipWithError(b.error.c_str());
      ran = false;
      break;
    }
  }
  if (ran) {
    std::fill(host.back().begin(), host.back().end(), std::nanf(""));
    if (!b.host_execute) {
      if (!b.ok(b.api->execute(&e))) {
        state.SkipWithError(b.error.c_str());
      } else {
        loom_buffer_copy_args_t cp{};
        cp.struct_size = LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE;
        cp.buffer = buffers.back();
        cp.host_pointer = host.back().data();
        cp.size = host.back().size() * 4;
        if (!b.ok(b.api->buffer_copy_to_host(&cp))) state.SkipWithError(b.error.c_str());
      }
    } else if (!b.ok(b.api->execute(&e))) {
      state.SkipWithError(b.error.c_str());
    }
    const std::string wrong = check(host);
    if (!wrong.empty()) state.SkipWithError(("wrong result: " + wrong).c_str());
  }
  b.api->executable_destroy(l.out_executable);
  for (loom_buffer_t* buf : buffers) b.api->buffer_free(buf);
  host_free(nullptr, c.out_blob);
}

// Samples of an [m, n] = [m, k] x [k, n] product, computed in double.
std::string check_gemm(const std::vector<std::vector<float>>& t, int64_t n) {
  for (int64_t s = 0; s < 64; ++s) {
    const int64_t i = (s * 7919) % n, j = (s * 104729 + 13) % n;
    double want = 0, scale = 0;
    for (int64_t k = 0; k < n; ++k) {
      want += static_cast<double>(t[0][i * n + k]) * t[1][k * n + j];
      scale += std::fabs(static_cast<double>(t[0][i * n + k]) * t[1][k * n + j]);
    }
    std::string e = compare("Y", static_cast<size_t>(i * n + j), t[2][i * n + j], want, scale);
    if (!e.empty()) return e;
  }
  return "";
}

void gemm(benchmark::State& state, Backend& b) {
  const int64_t n = state.range(0);
  run_case(state, b, one_node("MatMul", {{n, n}, {n, n}}, {n, n}), {{n, n}, {n, n}, {n, n}},
           [n](const auto& t) { return check_gemm(t, n); });
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}
void add(benchmark::State& state, Backend& b) {
  const int64_t n = state.range(0);
  run_case(state, b, one_node("Add", {{n}, {n}}, {n}), {{n}, {n}, {n}}, [n](const auto& t) {
    for (int64_t i = 0; i < n; ++i) {
      std::string e = compare("Y", static_cast<size_t>(i), t[2][i],
                              static_cast<double>(t[0][i]) + t[1][i], 2.0);
      if (!e.empty()) return e;
    }
    return std::string();
  });
  state.SetBytesProcessed(state.iterations() * n * 12);
}

// 3x3 convolution, pads 1, on [1, C, 56, 56]; depthwise when `depthwise`
// (group = C, one filter per channel). 2 * MACs FLOPs per run.
void conv(benchmark::State& state, Backend& b, bool depthwise) {
  const int64_t c = state.range(0), hw = 56;
  const int64_t group = depthwise ? c : 1, cg = c / group;
  const Dims x = {1, c, hw, hw}, w = {c, cg, 3, 3}, y = {1, c, hw, hw};
  run_case(state, b, one_node("Conv", {x, w}, y, group, {1, 1, 1, 1}), {x, w, y},
           [=](const auto& t) {
             for (int64_t s = 0; s < 64; ++s) {
               const int64_t oc = (s * 37) % c, oy = (s * 13) % hw, ox = (s * 29 + 5) % hw;
               const int64_t g = oc / (c / group);
               double want = 0, scale = 0;
               for (int64_t ic = 0; ic < cg; ++ic) {
                 for (int64_t ky = 0; ky < 3; ++ky) {
                   for (int64_t kx = 0; kx < 3; ++kx) {
                     const int64_t iy = oy + ky - 1, ix = ox + kx - 1;
                     if (iy < 0 || iy >= hw || ix < 0 || ix >= hw) continue;
                     const double p = static_cast<double>(
                                          t[0][((g * cg + ic) * hw + iy) * hw + ix]) *
                                      t[1][((oc * cg + ic) * 3 + ky) * 3 + kx];
                     want += p;
                     scale += std::fabs(p);
                   }
                 }
               }
               const size_t at = static_cast<size_t>((oc * hw + oy) * hw + ox);
               std::string e = compare("Y", at, t[2][at], want, scale);
               if (!e.empty()) return e;
             }
             return std::string();
           });
  const double flops = 2.0 * hw * hw * c * cg * 9;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}

void BM_Gemm_CpuSimd(benchmark::State& s) { gemm(s, cpu_simd()); }
void BM_Gemm_Vulkan(benchmark::State& s) { gemm(s, vulkan()); }
void BM_Add_CpuSimd(benchmark::State& s) { add(s, cpu_simd()); }
void BM_Add_Vulkan(benchmark::State& s) { add(s, vulkan()); }
void BM_Conv3x3_CpuSimd(benchmark::State& s) { conv(s, cpu_simd(), false); }
void BM_Conv3x3_Vulkan(benchmark::State& s) { conv(s, vulkan(), false); }
void BM_Depthwise3x3_CpuSimd(benchmark::State& s) { conv(s, cpu_simd(), true); }
void BM_Depthwise3x3_Vulkan(benchmark::State& s) { conv(s, vulkan(), true); }

BENCHMARK(BM_Gemm_CpuSimd)->RangeMultiplier(2)->Range(256, 2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gemm_Vulkan)->RangeMultiplier(2)->Range(256, 2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Add_CpuSimd)->Arg(1 << 22)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Add_Vulkan)->Arg(1 << 22)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Conv3x3_CpuSimd)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Conv3x3_Vulkan)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Depthwise3x3_CpuSimd)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Depthwise3x3_Vulkan)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  for (auto [label, backend] : {std::pair{"cpu-simd://0", &cpu_simd()}, std::pair{"vulkan-compute://0", &vulkan()}}) {
    benchmark::AddCustomContext(label, backend->device != nullptr ? backend->name : "no device: " + backend->error);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
