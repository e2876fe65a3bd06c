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
#include "bench_support.hpp"

namespace {

using namespace loom::bench;

Backend& cpu_simd() {
  static Backend b(plugin_path("LOOM_BENCH_CPU_SIMD_PLUGIN", LOOM_CPU_SIMD_PLUGIN_PATH));
  return b;
}
Backend& vulkan() {
  static Backend b(plugin_path("LOOM_BENCH_VULKAN_PLUGIN", LOOM_VULKAN_PLUGIN_PATH));
  return b;
}
// vulkan-compute with one vulkan.wait mode (a plugin instance of its own).
Backend& vulkan_wait(const char* mode) {
  const auto make = [](const char* m) {
    const std::vector<std::pair<const char*, const char*>> options = {{"vulkan.wait", m}};
    return ::loom::testing::Options(options.begin(), options.end());
  };
  static Backend block(plugin_path("LOOM_BENCH_VULKAN_PLUGIN", LOOM_VULKAN_PLUGIN_PATH), make("block"));
  static Backend spin(plugin_path("LOOM_BENCH_VULKAN_PLUGIN", LOOM_VULKAN_PLUGIN_PATH), make("spin"));
  static Backend timeline(plugin_path("LOOM_BENCH_VULKAN_PLUGIN", LOOM_VULKAN_PLUGIN_PATH), make("timeline"));
  const std::string m = mode;
  return m == "block" ? block : m == "spin" ? spin : timeline;
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
  run_case(state, b,
           one_node("Conv", {x, w}, y, {attr_i("group", group), attr_ints("pads", {1, 1, 1, 1})}),
           {x, w, y}, [=](const auto& t) {
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
// One call's round trip (a 256-element Add: submission, a tiny dispatch and
// the wait) and GEMM under each vulkan.wait mode.
void BM_RoundTrip_Vulkan_Block(benchmark::State& s) { add(s, vulkan_wait("block")); }
void BM_RoundTrip_Vulkan_Spin(benchmark::State& s) { add(s, vulkan_wait("spin")); }
void BM_RoundTrip_Vulkan_Timeline(benchmark::State& s) { add(s, vulkan_wait("timeline")); }
void BM_Gemm_Vulkan_Block(benchmark::State& s) { gemm(s, vulkan_wait("block")); }
void BM_Gemm_Vulkan_Spin(benchmark::State& s) { gemm(s, vulkan_wait("spin")); }
void BM_Gemm_Vulkan_Timeline(benchmark::State& s) { gemm(s, vulkan_wait("timeline")); }

BENCHMARK(BM_Gemm_CpuSimd)->RangeMultiplier(2)->Range(256, 2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gemm_Vulkan)->RangeMultiplier(2)->Range(256, 2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Add_CpuSimd)->Arg(1 << 22)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Add_Vulkan)->Arg(1 << 22)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Conv3x3_CpuSimd)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Conv3x3_Vulkan)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Depthwise3x3_CpuSimd)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Depthwise3x3_Vulkan)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RoundTrip_Vulkan_Block)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_RoundTrip_Vulkan_Spin)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_RoundTrip_Vulkan_Timeline)->Arg(256)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Gemm_Vulkan_Block)->Arg(256)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gemm_Vulkan_Spin)->Arg(256)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gemm_Vulkan_Timeline)->Arg(256)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

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
