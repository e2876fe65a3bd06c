// Test helpers for the cpu-simd compile entries: a small graph.fbs builder
// (the generated flatbuffers API) and a fixture that loads the plugin with
// dlopen, compiles through its function table, loads the blob and executes.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "loom/cpu_simd/blob_format.hpp"
#include "loom/graph/graph_generated.h"
#include "loom/plugin.h"

namespace loom::cpu_simd::testing {

namespace gfb = loom::graph::fb;
using Dims = std::vector<int64_t>;

struct Attr {
  std::string name;
  gfb::AttributeKind kind = gfb::AttributeKind::int_;
  int64_t i = 0;
  float f = 0;
  std::vector<int64_t> ints;
  std::string s;
};
inline Attr attr_i(std::string n, int64_t v) {
  Attr a;
  a.name = std::move(n);
  a.i = v;
  return a;
}
inline Attr attr_f(std::string n, float v) {
  Attr a;
  a.name = std::move(n);
  a.kind = gfb::AttributeKind::float_;
  a.f = v;
  return a;
}
inline Attr attr_ints(std::string n, std::vector<int64_t> v) {
  Attr a;
  a.name = std::move(n);
  a.kind = gfb::AttributeKind::ints;
  a.ints = std::move(v);
  return a;
}
inline Attr attr_s(std::string n, std::string v) {
  Attr a;
  a.name = std::move(n);
  a.kind = gfb::AttributeKind::string;
  a.s = std::move(v);
  return a;
}

class GraphBuilder {
 public:
  int input(Dims shape, gfb::DType dtype = gfb::DType::f32) {
    const int t = tensor(std::move(shape), dtype);
    inputs_.push_back(t);
    return t;
  }
  // A weight bound at execute time: a parameter that is also a graph input.
  int parameter(Dims shape, std::string name) {
    const int t = input(std::move(shape));
    tensors_[t].parameter = std::move(name);
    return t;
  }
  int tensor(Dims shape, gfb::DType dtype = gfb::DType::f32) {
    T t;
    t.name = "t" + std::to_string(tensors_.size());
    t.dtype = dtype;
    t.shape = std::move(shape);
    tensors_.push_back(std::move(t));
    return static_cast<int>(tensors_.size() - 1);
  }
  int constant_f32(Dims shape, const std::vector<float>& v) {
    return constant(std::move(shape), gfb::DType::f32, v.data(), v.size() * 4);
  }
  int constant_i64(Dims shape, const std::vector<int64_t>& v) {
    return constant(std::move(shape), gfb::DType::i64, v.data(), v.size() * 8);
  }
  int constant_i32(Dims shape, const std::vector<int32_t>& v) {
    return constant(std::move(shape), gfb::DType::i32, v.data(), v.size() * 4);
  }
  int constant_bool(bool b) {
    const uint8_t v = b ? 1 : 0;
    return constant({}, gfb::DType::bool_, &v, 1);
  }
  void node(std::string op, std::vector<int32_t> in, std::vector<int32_t> out,
            std::vector<Attr> attrs = {}, int64_t opset = 13, std::string domain = "") {
    nodes_.push_back({std::move(op), std::move(in), std::move(out), std::move(attrs), opset,
                      std::move(domain)});
  }
  void output(int t) { outputs_.push_back(t); }
  size_t node_count() const { return nodes_.size(); }

  std::vector<uint8_t> finish() const {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<gfb::Tensor>> ts;
    for (const T& t : tensors_) {
      ts.push_back(gfb::CreateTensorDirect(fbb, t.name.c_str(), t.dtype, &t.shape,
                                           t.has_data ? &t.data : nullptr,
                                           t.parameter.empty() ? nullptr : t.parameter.c_str()));
    }
    std::vector<flatbuffers::Offset<gfb::Node>> ns;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const N& n = nodes_[i];
      std::vector<flatbuffers::Offset<gfb::Attribute>> as;
      for (const Attr& a : n.attrs) {
        as.push_back(gfb::CreateAttributeDirect(fbb, a.name.c_str(), a.kind, a.i, a.f, &a.ints,
                                                nullptr, a.s.c_str()));
      }
      const std::string name = "n" + std::to_string(i);
      ns.push_back(gfb::CreateNodeDirect(fbb, name.c_str(), n.op.c_str(), n.domain.c_str(),
                                         n.opset, &as, &n.in, &n.out));
    }
    auto g = gfb::CreateGraphDirect(fbb, "g", &ts, &ns, &inputs_, &outputs_);
    gfb::FinishGraphBuffer(fbb, g);
    return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  }

 private:
  struct T {
    std::string name;
    gfb::DType dtype = gfb::DType::f32;
    Dims shape;
    bool has_data = false;
    std::vector<uint8_t> data;
    std::string parameter;
  };
  struct N {
    std::string op;
    std::vector<int32_t> in, out;
    std::vector<Attr> attrs;
    int64_t opset;
    std::string domain;
  };
  int constant(Dims shape, gfb::DType dtype, const void* p, size_t bytes) {
    const int t = tensor(std::move(shape), dtype);
    tensors_[t].has_data = true;
    tensors_[t].data.assign(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + bytes);
    return t;
  }

  std::vector<T> tensors_;
  std::vector<N> nodes_;
  std::vector<int32_t> inputs_, outputs_;
};

struct HostTensor {
  Dims shape;
  std::vector<float> data;
};

// A tensor of any blob dtype as raw bytes (format 4's bool, i32, i64).
struct TypedTensor {
  Dims shape;
  loom_dtype_t dtype = LOOM_DTYPE_F32;
  std::vector<uint8_t> bytes;

  template <typename T>
  static TypedTensor of(Dims shape, loom_dtype_t dtype, const std::vector<T>& values) {
    TypedTensor t{std::move(shape), dtype, {}};
    t.bytes.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    return t;
  }
  static TypedTensor f32(Dims s, const std::vector<float>& v) { return of(std::move(s), LOOM_DTYPE_F32, v); }
  static TypedTensor i32(Dims s, const std::vector<int32_t>& v) { return of(std::move(s), LOOM_DTYPE_I32, v); }
  static TypedTensor i64(Dims s, const std::vector<int64_t>& v) { return of(std::move(s), LOOM_DTYPE_I64, v); }
  static TypedTensor boolean(Dims s, const std::vector<uint8_t>& v) { return of(std::move(s), LOOM_DTYPE_BOOL, v); }
  // An output of `shape` and `dtype` (filled with 0xa5 bytes before the run).
  static TypedTensor out(Dims shape, loom_dtype_t dtype) { return {std::move(shape), dtype, {}}; }

  template <typename T>
  std::vector<T> as() const {
    std::vector<T> v(bytes.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
};

class CompileFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlopen(LOOM_CPU_SIMD_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    auto query = reinterpret_cast<loom_plugin_query_fn_t>(dlsym(handle_, LOOM_PLUGIN_ENTRY_POINT_NAME));
    ASSERT_NE(query, nullptr);
    host_.struct_size = LOOM_HOST_SERVICES_STRUCT_SIZE;
    host_.user_data = &host_state_;
    host_.allocate = [](void* user, size_t size, size_t alignment) -> void* {
      ++static_cast<HostState*>(user)->live_allocations;
      return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
    };
    host_.log = [](void* user, loom_log_level_t, const char* message) {
      static_cast<HostState*>(user)->log_lines.emplace_back(message);
    };
    host_.free = [](void* user, void* p) {
      if (p != nullptr) --static_cast<HostState*>(user)->live_allocations;
      std::free(p);
    };
    char reason[256] = {};
    loom_plugin_query_t q{};
    q.struct_size = LOOM_PLUGIN_QUERY_STRUCT_SIZE;
    q.host_abi_min = LOOM_ABI_VERSION(1, 0);
    q.host_abi_max = LOOM_ABI_CURRENT;
    q.host = &host_;
    q.reason = reason;
    q.reason_capacity = sizeof reason;
    ASSERT_EQ(query(&q), LOOM_STATUS_OK) << reason;
    api_ = q.out_api;
    ASSERT_NE(api_->compile_supported, nullptr);
    ASSERT_NE(api_->compile, nullptr);
    std::vector<loom_option_t> opts;
    for (const auto& [k, v] : options_) opts.push_back({LOOM_OPTION_STRUCT_SIZE, k.c_str(), v.c_str()});
    std::vector<const loom_option_t*> opt_ptrs;
    for (const loom_option_t& o : opts) opt_ptrs.push_back(&o);
    loom_plugin_create_args_t args{};
    args.struct_size = LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
    args.host = &host_;
    args.options = opt_ptrs.data();
    args.option_count = opt_ptrs.size();
    ASSERT_EQ(take(api_->plugin_create(&args)), "ok");
    plugin_ = args.out_plugin;
    ASSERT_EQ(take(api_->device_get(plugin_, 0, &device_)), "ok");
  }
  void TearDown() override {
    if (plugin_ != nullptr) api_->plugin_destroy(plugin_);
    EXPECT_EQ(host_state_.live_allocations, 0);
    if (handle_ != nullptr) dlclose(handle_);
  }

  std::string take(loom_status_t* s) {
    if (s == nullptr) return "ok";
    std::string out = std::to_string(api_->status_code(s)) + ": " + api_->status_message(s);
    api_->status_destroy(s);
    return out;
  }

  // "ok" and `*out` filled, or the error.
  std::string supported(const std::vector<uint8_t>& graph, size_t node_count,
                        std::vector<bool>* out) {
    std::unique_ptr<bool[]> flags(new bool[node_count + 1]());
    loom_compile_supported_args_t args{};
    args.struct_size = LOOM_COMPILE_SUPPORTED_ARGS_STRUCT_SIZE;
    args.plugin = plugin_;
    args.graph = graph.data();
    args.graph_size = graph.size();
    args.node_count = node_count;
    args.out_supported = flags.get();
    std::string s = take(api_->compile_supported(&args));
    out->assign(flags.get(), flags.get() + node_count);
    return s;
  }
  std::vector<bool> supported(const GraphBuilder& b) {
    std::vector<bool> out;
    EXPECT_EQ(supported(b.finish(), b.node_count(), &out), "ok");
    return out;
  }

  std::string compile(const std::vector<uint8_t>& graph, std::vector<std::byte>* blob) {
    loom_compile_args_t args{};
    args.struct_size = LOOM_COMPILE_ARGS_STRUCT_SIZE;
    args.plugin = plugin_;
    args.graph = graph.data();
    args.graph_size = graph.size();
    std::string s = take(api_->compile(&args));
    if (s == "ok") {
      EXPECT_STREQ(args.out_loader_key, "cpu-simd");
      EXPECT_EQ(args.out_format_version, loom::cpu_simd::kFormatVersion);
      const auto* p = static_cast<const std::byte*>(args.out_blob);
      blob->assign(p, p + args.out_blob_size);
      host_.free(host_.user_data, args.out_blob);
    } else {
      EXPECT_EQ(args.out_blob, nullptr);
    }
    return s;
  }

  // Compiles, loads and runs `b`; outputs get the given shapes.
  std::vector<std::vector<float>> run(const GraphBuilder& b, const std::vector<HostTensor>& inputs,
                                      const std::vector<Dims>& output_shapes) {
    std::vector<std::byte> blob;
    const std::string c = compile(b.finish(), &blob);
    EXPECT_EQ(c, "ok");
    if (c != "ok") return {};
    loom_executable_load_args_t load{};
    load.struct_size = LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE;
    load.device = device_;
    load.loader_key = "cpu-simd";
    load.format_version = 2;
    load.blob = blob.data();
    load.blob_size = blob.size();
    const std::string l = take(api_->executable_load(&load));
    EXPECT_EQ(l, "ok");
    if (l != "ok") return {};
    std::vector<HostTensor> in = inputs;
    std::vector<std::vector<float>> outs;
    for (const Dims& s : output_shapes) {
      size_t n = 1;
      for (int64_t d : s) n *= static_cast<size_t>(d);
      outs.emplace_back(n, -12345.0f);
    }
    std::vector<loom_tensor_t> descs(in.size() + outs.size());
    std::vector<const loom_tensor_t*> in_ptrs, out_ptrs;
    for (size_t i = 0; i < descs.size(); ++i) {
      loom_tensor_t& d = descs[i];
      d.struct_size = LOOM_TENSOR_STRUCT_SIZE;
      d.dtype = LOOM_DTYPE_F32;
      const bool is_in = i < in.size();
      const Dims& shape = is_in ? in[i].shape : output_shapes[i - in.size()];
      std::vector<float>& data = is_in ? in[i].data : outs[i - in.size()];
      d.rank = static_cast<uint32_t>(shape.size());
      d.shape = shape.data();
      d.host_data = data.data();
      d.byte_size = data.size() * sizeof(float);
      (is_in ? in_ptrs : out_ptrs).push_back(&d);
    }
    loom_execute_args_t exec{};
    exec.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
    exec.executable = load.out_executable;
    exec.input_count = in_ptrs.size();
    exec.inputs = in_ptrs.data();
    exec.output_count = out_ptrs.size();
    exec.outputs = out_ptrs.data();
    EXPECT_EQ(take(api_->execute(&exec)), "ok");
    api_->executable_destroy(load.out_executable);
    return outs;
  }

  // Compiles, loads and runs `b` with typed tensors; `outputs` give each
  // output's shape and dtype and come back filled. "ok" or the first error.
  std::string run_typed(const GraphBuilder& b, const std::vector<TypedTensor>& inputs,
                        std::vector<TypedTensor>* outputs) {
    std::vector<std::byte> blob;
    std::string s = compile(b.finish(), &blob);
    if (s != "ok") return "compile: " + s;
    loom_executable_load_args_t load{};
    load.struct_size = LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE;
    load.device = device_;
    load.loader_key = "cpu-simd";
    load.format_version = kFormatVersion;
    load.blob = blob.data();
    load.blob_size = blob.size();
    s = take(api_->executable_load(&load));
    if (s != "ok") return "load: " + s;
    std::vector<TypedTensor> in = inputs;
    for (TypedTensor& o : *outputs) {
      size_t n = 1;
      for (int64_t d : o.shape) n *= static_cast<size_t>(d);
      o.bytes.assign(n * dtype_size(o.dtype), 0xa5);
    }
    std::vector<loom_tensor_t> descs(in.size() + outputs->size());
    std::vector<const loom_tensor_t*> in_ptrs, out_ptrs;
    for (size_t i = 0; i < descs.size(); ++i) {
      const bool is_in = i < in.size();
      TypedTensor& t = is_in ? in[i] : (*outputs)[i - in.size()];
      loom_tensor_t& d = descs[i];
      d.struct_size = LOOM_TENSOR_STRUCT_SIZE;
      d.dtype = t.dtype;
      d.rank = static_cast<uint32_t>(t.shape.size());
      d.shape = t.shape.data();
      d.host_data = t.bytes.data();
      d.byte_size = t.bytes.size();
      (is_in ? in_ptrs : out_ptrs).push_back(&d);
    }
    loom_execute_args_t exec{};
    exec.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
    exec.executable = load.out_executable;
    exec.input_count = in_ptrs.size();
    exec.inputs = in_ptrs.data();
    exec.output_count = out_ptrs.size();
    exec.outputs = out_ptrs.data();
    s = take(api_->execute(&exec));
    api_->executable_destroy(load.out_executable);
    return s == "ok" ? s : "execute: " + s;
  }

  // Options for plugin_create (key, value); set before SetUp.
  std::vector<std::pair<std::string, std::string>> options_;
  void* handle_ = nullptr;
  const loom_plugin_api_t* api_ = nullptr;
  loom_host_services_t host_{};
  // What the host services record: blobs allocated and not freed, log lines
  // (the plugin logs from the calling thread in these tests).
  struct HostState {
    int live_allocations = 0;
    std::vector<std::string> log_lines;
  };
  HostState host_state_;
  loom_plugin_t* plugin_ = nullptr;
  loom_device_t* device_ = nullptr;
};

inline void expect_near(const std::vector<float>& got, const std::vector<float>& want,
                        float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << "element " << i;
  }
}

// start, start + 1, ... (n values).
inline std::vector<float> iota(size_t n, float start = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

}  // namespace loom::cpu_simd::testing
