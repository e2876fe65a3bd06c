// What the plugin benchmarks share: a plugin loaded from its path with its
// device 0 (through the tests' plugin harness), one-node graphs (built with
// the tests' GraphBuilder), and a case runner that compiles through the
// plugin's compile entry, loads, runs in the benchmark loop and then checks
// the output.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "graph_builder.hpp"
#include "loom/plugin.h"
#include "plugin_harness.hpp"

namespace loom::bench {

using ::loom::testing::Attr;
using ::loom::testing::attr_i;
using ::loom::testing::attr_ints;
using ::loom::testing::Dims;

// One loaded plugin with its device 0; `error` says why not. The host
// services record nothing and offer no trace service (a timed run does no
// host work), and echo the plugin's warnings to stderr.
struct Backend {
  explicit Backend(const char* path, const ::loom::testing::Options& options = {})
      : harness(path, {.record_logs = false, .trace = false, .echo_from = LOOM_LOG_WARNING}) {
    if (harness.api() == nullptr) {
      error = harness.error();
      return;
    }
    plugin = harness.create(options, &error);
    loom_device_t* d = nullptr;
    loom_device_info_t info{};
    if (plugin == nullptr || (error = harness.check_available(plugin)) != "ok" ||
        (error = harness.device(plugin, 0, &d)) != "ok" ||
        (error = harness.device_info(d, &info)) != "ok") {
      return;
    }
    device = d;
    host_execute = (info.capabilities & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE) != 0;
    name = info.name != nullptr ? info.name : "";
  }

  ::loom::testing::PluginHarness harness;
  loom_plugin_t* plugin = nullptr;  // owned by `harness`
  loom_device_t* device = nullptr;  // NULL when setting up failed
  bool host_execute = false;
  std::string name;  // the device's name, for the report's context
  std::string error;
};

inline const char* plugin_path(const char* variable, const char* built_in) {
  const char* v = std::getenv(variable);
  return v != nullptr && *v != '\0' ? v : built_in;
}

// A one-node graph: inputs of `in_shapes` (those with `parameter[i]` set are
// program parameters, the same on every run), one output of `out_shape`.
inline std::vector<uint8_t> one_node(const char* op, const std::vector<Dims>& in_shapes,
                                     const Dims& out_shape, std::vector<Attr> attrs = {},
                                     const std::vector<bool>& parameter = {}, int64_t opset = 13) {
  ::loom::testing::GraphBuilder g;
  std::vector<int32_t> inputs;
  for (size_t i = 0; i < in_shapes.size(); ++i) {
    const bool param = i < parameter.size() && parameter[i];
    inputs.push_back(param ? g.parameter(in_shapes[i], "p" + std::to_string(i))
                           : g.input(in_shapes[i]));
  }
  const int out = g.tensor(out_shape);
  g.node(op, std::move(inputs), {out}, std::move(attrs), opset);
  g.output(out);
  return g.finish();
}

// Checks the output (last) against the inputs; returns what is wrong, or "".
using Check = std::function<std::string(const std::vector<std::vector<float>>&)>;

// Pseudo-random values in [-1, 1), the same for every run.
inline void fill(std::vector<float>& v, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 12345u;
  for (float& f : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    f = static_cast<float>(x >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
}

// "" when |got - want| is within a relative tolerance of the operands' scale.
inline std::string compare(const char* what, size_t index, float got, double want, double scale) {
  if (std::fabs(got - want) <= 1e-4 * scale + 1e-6) return "";
  return std::string(what) + "[" + std::to_string(index) + "] = " + std::to_string(got) +
         ", expected " + std::to_string(want);
}

// Compiles `graph` on `b`, loads it, runs it in the benchmark loop, then
// copies the output back and checks it. Only the plugin's execute entry is
// timed: its arguments are built once, before the loop.
inline void run_case(benchmark::State& state, Backend& b, const std::vector<uint8_t>& graph,
                     const std::vector<Dims>& shapes, const Check& check) {
  if (b.device == nullptr) {
    state.SkipWithError(("no device: " + b.error).c_str());
    return;
  }
  const ::loom::testing::PluginHarness& h = b.harness;
  ::loom::testing::CompiledBlob blob;
  std::string s = h.compile(b.plugin, graph, &blob);
  loom_executable_t* executable = nullptr;
  if (s == "ok") {
    s = h.load(b.device, blob.loader_key.c_str(), blob.format_version, blob.bytes.data(),
               blob.bytes.size(), &executable);
  }
  if (s != "ok") {
    state.SkipWithError(s.c_str());
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
    if (b.host_execute) {
      tensors[i] = ::loom::testing::host_tensor(LOOM_DTYPE_F32, shapes[i], host[i].data(), n * 4);
    } else {
      loom_buffer_t* buffer = nullptr;
      if (s == "ok") s = h.allocate(b.device, n * 4, 0, &buffer);
      if (buffer != nullptr) buffers.push_back(buffer);
      if (s == "ok") s = h.copy_from_host(buffer, 0, host[i].data(), n * 4);
      tensors[i] = ::loom::testing::buffer_tensor(LOOM_DTYPE_F32, shapes[i], buffer, n * 4);
    }
    (i + 1 < shapes.size() ? ins : outs).push_back(&tensors[i]);
  }
  loom_execute_args_t e = ::loom::testing::execute_args(executable, ins, outs);
  const loom_plugin_api_t* api = h.api();
  if (s != "ok") {
    state.SkipWithError(s.c_str());
  } else {
    for (auto _ : state) {
      if (loom_status_t* failed = api->execute(&e); failed != nullptr) {
        s = ::loom::testing::take(api, failed);
        break;
      }
    }
    if (s != "ok") state.SkipWithError(s.c_str());
  }
  if (s == "ok") {
    std::fill(host.back().begin(), host.back().end(), std::nanf(""));
    s = ::loom::testing::take(api, api->execute(&e));
    if (s == "ok" && !b.host_execute) {
      s = h.copy_to_host(buffers.back(), 0, host.back().data(), host.back().size() * 4);
    }
    if (s != "ok") {
      state.SkipWithError(s.c_str());
    } else if (const std::string wrong = check(host); !wrong.empty()) {
      state.SkipWithError(("wrong result: " + wrong).c_str());
    }
  }
  api->executable_destroy(executable);
  for (loom_buffer_t* buffer : buffers) api->buffer_free(buffer);
}

}  // namespace loom::bench
