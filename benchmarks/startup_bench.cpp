// Start-up: Runtime::create followed by devices(), as `loom devices` and an
// application that lists devices pay at every start, with the plugins of
// the build tree (cpu-simd, vulkan-compute on whatever Vulkan driver is
// present, fpga-stub).
//
//   BM_Startup/probe:0    plugins loaded without a probe: the floor
//   BM_Startup/probe:1    every plugin probed in a child process, every time
//                         (RuntimeOptions::remember_probes off)
//   BM_Startup/probe:2    probe verdicts remembered (host/discovery/probe_cache.hpp),
//                         after a first start that took them (goal: 50 ms)
//   BM_StartupBesideAHangingPlugin
//                         the same, remembered, with the test fake plugin
//                         hanging while it loads (LOOM_FAKE_MISBEHAVE):
//                         its first probe costs the 20 s probe limit, once,
//                         before timing; every start after it is timed
//                         (goal: 1 s). Needs the build tree's test plugins.
//
// Each timed start uses a fresh Runtime; the remembered verdicts live in a
// temporary folder made here and removed at the end.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "loom/runtime.hpp"

namespace fs = std::filesystem;

namespace {

struct CacheFolder {
  CacheFolder() {
    path = fs::temp_directory_path() / ("loom-startup-bench-" + std::to_string(::getpid()));
    fs::remove_all(path);
  }
  ~CacheFolder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

loom::RuntimeOptions base_options(const fs::path& cache) {
  loom::RuntimeOptions options;
  options.use_user_folder = false;
  options.probe_cache_folder = cache;
  options.log_sink = [](loom::LogLevel, std::string_view) {};
  return options;
}

size_t start_once(const loom::RuntimeOptions& options, benchmark::State& state) {
  auto runtime = loom::Runtime::create(options);
  if (!runtime.ok()) {
    state.SkipWithError(runtime.status().to_string().c_str());
    return 0;
  }
  return (*runtime)->devices().size();
}

void BM_Startup(benchmark::State& state) {
  CacheFolder cache;
  loom::RuntimeOptions options = base_options(cache.path);
  options.probe_plugins = state.range(0) != 0;
  options.remember_probes = state.range(0) == 2;
  const size_t devices = start_once(options, state);  // takes the verdicts
  if (devices == 0) {
    state.SkipWithError("no devices: run from the build tree, beside its plugins");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(start_once(options, state));
  state.counters["devices"] = static_cast<double>(devices);
}
BENCHMARK(BM_Startup)->ArgName("probe")->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

void BM_StartupBesideAHangingPlugin(benchmark::State& state) {
#ifdef LOOM_TEST_PLUGIN_DIR
  CacheFolder cache;
  loom::RuntimeOptions options = base_options(cache.path);
  options.plugin_paths = {fs::path(LOOM_TEST_PLUGIN_DIR) / "fake"};
  ::setenv("LOOM_FAKE_MISBEHAVE", "query_hang", 1);
  const size_t devices = start_once(options, state);  // the hang, once
  for (auto _ : state) benchmark::DoNotOptimize(start_once(options, state));
  ::unsetenv("LOOM_FAKE_MISBEHAVE");
  state.counters["devices"] = static_cast<double>(devices);
#else
  state.SkipWithError("built without the test plugins");
#endif
}
BENCHMARK(BM_StartupBesideAHangingPlugin)->Unit(benchmark::kMillisecond)
    ->Iterations(20);

}  // namespace

BENCHMARK_MAIN();
