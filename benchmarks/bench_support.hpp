// What the plugin benchmarks share: a plugin loaded from its path with its
// device 0, one-node graphs built in graph.fbs, and a case runner that
// compiles through the plugin's compile entry, loads, runs in the benchmark
// loop and then checks the output.
#pragma once

#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loom/graph/graph_generated.h"
#include "loom/plugin.h"

namespace loom::bench {

namespace gfb = loom::graph::fb;
using Dims = std::vector<int64_t>;

inline void* host_allocate(void*, size_t size, size_t alignment) {
  return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}
inline void host_free(void*, void* p) { std::free(p); }
inline void host_log(void*, loom_log_level_t level, const char* message) {
  if (level >= LOOM_LOG_WARNING) std::fprintf(stderr, "plugin: %s\n", message);
}

// One loaded plugin with its device 0; `error` says why not. `options` are
// handed to plugin_create (key, value).
struct Backend {
  void* handle = nullptr;
  const loom_plugin_api_t* api = nullptr;
  loom_plugin_t* plugin = nullptr;
  loom_device_t* device = nullptr;
  bool host_execute = false;
  std::string name;  // the device's name, for the report's context
  std::string error;
  loom_host_services_t host{};

  explicit Backend(const char* path, const std::vector<std::pair<std::string, std::string>>& options = {}) {
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
    std::vector<loom_option_t> opts;
    for (const auto& [k, v] : options) opts.push_back({LOOM_OPTION_STRUCT_SIZE, k.c_str(), v.c_str()});
    std::vector<const loom_option_t*> opt_ptrs;
    for (const loom_option_t& o : opts) opt_ptrs.push_back(&o);
    loom_plugin_create_args_t args{};
    args.struct_size = LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
    args.host = &host;
    args.options = opt_ptrs.data();
    args.option_count = opt_ptrs.size();
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
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  // While setting up: an error leaves the backend without a device.
  bool ok(loom_status_t* s) {
    if (s == nullptr) return true;
    error = api->status_message(s);
    api->status_destroy(s);
    device = nullptr;
    return false;
  }
  // For one case: an error is that case's (in `error`), the device stays.
  bool case_ok(loom_status_t* s) {
    if (s == nullptr) return true;
    error = api->status_message(s);
    api->status_destroy(s);
    return false;
  }
};

inline const char* plugin_path(const char* variable, const char* built_in) {
  const char* v = std::getenv(variable);
  return v != nullptr && *v != '\0' ? v : built_in;
}

// An attribute of a one-node graph: an int, or a list of ints.
struct IntAttr {
  std::string name;
  Dims values;
  bool list = true;
};
inline IntAttr attr_int(std::string name, int64_t v) { return {std::move(name), {v}, false}; }
inline IntAttr attr_ints(std::string name, Dims v) { return {std::move(name), std::move(v), true}; }

// A one-node graph: inputs of `in_shapes` (those with `parameter[i]` set are
// program parameters, the same on every run), one output of `out_shape`.
inline std::vector<uint8_t> one_node(const char* op, const std::vector<Dims>& in_shapes,
                                     const Dims& out_shape, const std::vector<IntAttr>& attrs = {},
                                     const std::vector<bool>& parameter = {}, int64_t opset = 13) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<gfb::Attribute>> as;
  for (const IntAttr& a : attrs) {
    if (a.list) {
      as.push_back(gfb::CreateAttributeDirect(fbb, a.name.c_str(), gfb::AttributeKind::ints, 0, 0, &a.values));
    } else {
      as.push_back(gfb::CreateAttributeDirect(fbb, a.name.c_str(), gfb::AttributeKind::int_, a.values[0]));
    }
  }
  std::vector<flatbuffers::Offset<gfb::Tensor>> tensors;
  std::vector<int32_t> inputs;
  for (size_t i = 0; i < in_shapes.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    const bool param = i < parameter.size() && parameter[i];
    tensors.push_back(gfb::CreateTensorDirect(fbb, name.c_str(), gfb::DType::f32, &in_shapes[i], nullptr,
                                              param ? name.c_str() : nullptr));
    inputs.push_back(static_cast<int32_t>(i));
  }
  tensors.push_back(gfb::CreateTensorDirect(fbb, "out", gfb::DType::f32, &out_shape));
  std::vector<int32_t> outputs = {static_cast<int32_t>(in_shapes.size())};
  std::vector<flatbuffers::Offset<gfb::Node>> nodes = {
      gfb::CreateNodeDirect(fbb, "n", op, "", opset, &as, &inputs, &outputs)};
  gfb::FinishGraphBuffer(fbb, gfb::CreateGraphDirect(fbb, "g", &tensors, &nodes, &inputs, &outputs));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
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
// copies the output back and checks it.
inline void run_case(benchmark::State& state, Backend& b, const std::vector<uint8_t>& graph,
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
  if (!b.case_ok(b.api->compile(&c))) {
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
      (void)b.case_ok(b.api->buffer_allocate(&a));
      buffers.push_back(a.out_buffer);
      t.buffer = a.out_buffer;
      loom_buffer_copy_args_t cp{};
      cp.struct_size = LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE;
      cp.buffer = a.out_buffer;
      cp.host_pointer = host[i].data();
      cp.size = n * 4;
      if (a.out_buffer != nullptr) (void)b.case_ok(b.api->buffer_copy_from_host(&cp));
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
    if (!b.case_ok(b.api->execute(&e))) {
      state.SkipWithError(b.error.c_str());
      ran = false;
      break;
    }
  }
  if (ran) {
    std::fill(host.back().begin(), host.back().end(), std::nanf(""));
    if (!b.host_execute) {
      if (!b.case_ok(b.api->execute(&e))) {
        state.SkipWithError(b.error.c_str());
      } else {
        loom_buffer_copy_args_t cp{};
        cp.struct_size = LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE;
        cp.buffer = buffers.back();
        cp.host_pointer = host.back().data();
        cp.size = host.back().size() * 4;
        if (!b.case_ok(b.api->buffer_copy_to_host(&cp))) state.SkipWithError(b.error.c_str());
      }
    } else if (!b.case_ok(b.api->execute(&e))) {
      state.SkipWithError(b.error.c_str());
    }
    const std::string wrong = check(host);
    if (!wrong.empty()) state.SkipWithError(("wrong result: " + wrong).c_str());
  }
  b.api->executable_destroy(l.out_executable);
  for (loom_buffer_t* buf : buffers) b.api->buffer_free(buf);
  host_free(nullptr, c.out_blob);
}


}  // namespace loom::bench
