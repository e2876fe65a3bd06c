// Test helpers for the cpu-simd compile entries: a fixture on the shared
// plugin harness (tests/support/plugin_harness) that compiles graphs built
// with the shared GraphBuilder (tests/support/graph_builder) through the
// plugin's function table, loads the blob and executes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "graph_builder.hpp"
#include "loom/cpu_simd/blob_format.hpp"
#include "loom/plugin.h"
#include "plugin_harness.hpp"

namespace loom::cpu_simd::testing {

using ::loom::testing::Attr;
using ::loom::testing::attr_f;
using ::loom::testing::attr_i;
using ::loom::testing::attr_ints;
using ::loom::testing::attr_s;
using ::loom::testing::Dims;
using ::loom::testing::GraphBuilder;
namespace gfb = ::loom::graph::fb;

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
    ASSERT_NE(harness_.api(), nullptr) << harness_.error();
    api_ = harness_.api();
    ASSERT_NE(api_->compile_supported, nullptr);
    ASSERT_NE(api_->compile, nullptr);
    std::string s;
    plugin_ = harness_.create(options_, &s);
    ASSERT_EQ(s, "ok");
    ASSERT_EQ(harness_.device(plugin_, 0, &device_), "ok");
  }
  void TearDown() override {
    harness_.destroy_all();
    EXPECT_EQ(harness_.recorder().live_allocations(), 0);
  }

  std::string take(loom_status_t* s) { return ::loom::testing::take(api_, s); }

  // "ok" and `*out` filled, or the error.
  std::string supported(const std::vector<uint8_t>& graph, size_t node_count,
                        std::vector<bool>* out) {
    return harness_.supported(plugin_, graph, node_count, out);
  }
  std::vector<bool> supported(const GraphBuilder& b) {
    std::vector<bool> out;
    EXPECT_EQ(supported(b.finish(), b.node_count(), &out), "ok");
    return out;
  }

  std::string compile(const std::vector<uint8_t>& graph, std::vector<std::byte>* blob) {
    ::loom::testing::CompiledBlob compiled;
    std::string s = harness_.compile(plugin_, graph, &compiled);
    if (s == "ok") {
      EXPECT_EQ(compiled.loader_key, "cpu-simd");
      // The oldest format that holds the blob: 4, or 5 for an open graph.
      EXPECT_EQ(compiled.format_version,
                compiled.bytes.size() > 4 ? static_cast<uint32_t>(compiled.bytes[4]) : 0u);
      *blob = std::move(compiled.bytes);
    } else {
      EXPECT_FALSE(compiled.returned);
    }
    return s;
  }

  // Runs `exe` once on `descs`, the first `input_count` of them inputs.
  std::string execute_tensors(loom_executable_t* exe, const std::vector<loom_tensor_t>& descs,
                              size_t input_count) {
    std::vector<const loom_tensor_t*> ins, outs;
    for (size_t i = 0; i < descs.size(); ++i) (i < input_count ? ins : outs).push_back(&descs[i]);
    return harness_.execute(exe, ins, outs);
  }

  // Loads `blob` on `device` (format `version`), runs it once on `descs`
  // and destroys it; "load: ..." or "execute: ..." on failure.
  std::string load_and_execute(loom_device_t* device, const std::vector<std::byte>& blob, uint32_t version,
                               const std::vector<loom_tensor_t>& descs, size_t input_count) {
    loom_executable_t* exe = nullptr;
    std::string s = harness_.load(device, "cpu-simd", version, blob.data(), blob.size(), &exe);
    if (s != "ok") return "load: " + s;
    s = execute_tensors(exe, descs, input_count);
    api_->executable_destroy(exe);
    return s == "ok" ? s : "execute: " + s;
  }

  // Output data of `shapes`, filled with -12345 so unwritten elements show.
  static std::vector<std::vector<float>> output_data(const std::vector<Dims>& shapes) {
    std::vector<std::vector<float>> outs;
    for (const Dims& s : shapes) {
      size_t n = 1;
      for (int64_t d : s) n *= static_cast<size_t>(d);
      outs.emplace_back(n, -12345.0f);
    }
    return outs;
  }

  // f32 descriptors of `in`, then of `outs` shaped `output_shapes`, in host
  // memory; all three must outlive them.
  static std::vector<loom_tensor_t> f32_tensors(std::vector<HostTensor>& in, const std::vector<Dims>& output_shapes,
                                                std::vector<std::vector<float>>& outs) {
    std::vector<loom_tensor_t> descs;
    for (HostTensor& t : in) {
      descs.push_back(::loom::testing::host_tensor(LOOM_DTYPE_F32, t.shape, t.data.data(), t.data.size() * 4));
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      descs.push_back(
          ::loom::testing::host_tensor(LOOM_DTYPE_F32, output_shapes[i], outs[i].data(), outs[i].size() * 4));
    }
    return descs;
  }

  // Compiles, loads and runs `b`; outputs get the given shapes.
  std::vector<std::vector<float>> run(const GraphBuilder& b, const std::vector<HostTensor>& inputs,
                                      const std::vector<Dims>& output_shapes) {
    std::vector<std::byte> blob;
    const std::string c = compile(b.finish(), &blob);
    EXPECT_EQ(c, "ok");
    if (c != "ok") return {};
    std::vector<HostTensor> in = inputs;
    std::vector<std::vector<float>> outs = output_data(output_shapes);
    const std::string s = load_and_execute(device_, blob, 2, f32_tensors(in, output_shapes, outs), in.size());
    EXPECT_EQ(s, "ok");
    if (::loom::testing::starts_with(s, "load: ")) return {};
    return outs;
  }

  // Compiles, loads and runs `b` with typed tensors; `outputs` give each
  // output's shape and dtype and come back filled. "ok" or the first error.
  std::string run_typed(const GraphBuilder& b, const std::vector<TypedTensor>& inputs,
                        std::vector<TypedTensor>* outputs) {
    std::vector<std::byte> blob;
    std::string s = compile(b.finish(), &blob);
    if (s != "ok") return "compile: " + s;
    std::vector<TypedTensor> in = inputs;
    for (TypedTensor& o : *outputs) {
      size_t n = 1;
      for (int64_t d : o.shape) n *= static_cast<size_t>(d);
      o.bytes.assign(n * dtype_size(o.dtype), 0xa5);
    }
    std::vector<loom_tensor_t> descs;
    for (std::vector<TypedTensor>* list : {&in, outputs}) {
      for (TypedTensor& t : *list) {
        descs.push_back(::loom::testing::host_tensor(t.dtype, t.shape, t.bytes.data(), t.bytes.size()));
      }
    }
    return load_and_execute(device_, blob, kFormatVersion, descs, in.size());
  }

  // Options for plugin_create (key, value); set before SetUp.
  ::loom::testing::Options options_;
  ::loom::testing::PluginHarness harness_{LOOM_CPU_SIMD_PLUGIN_PATH};
  const loom_plugin_api_t* api_ = nullptr;
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
