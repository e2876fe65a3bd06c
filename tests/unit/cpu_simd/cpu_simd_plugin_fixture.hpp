// What the cpu-simd plugin tests share: the library loaded through its C
// ABI by the shared plugin harness (tests/support/plugin_harness), a created
// plugin and device (CpuSimdPlugin), tensors and blob graphs.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fixtures/format1_blob.hpp"
#include "kernels/kernel.hpp"
#include "loom/cpu_simd/blob_format.hpp"
#include "loom/plugin.h"
#include "plugin_harness.hpp"

namespace loom::cpu_simd {
namespace {

using Dims = std::vector<int64_t>;

using ::loom::testing::code_prefix;
using ::loom::testing::make_query;
using ::loom::testing::starts_with;
using ::loom::testing::take;

struct Tensor {
  Dims shape;
  std::vector<float> data;
  loom_tensor_t desc{};

  Tensor() = default;
  Tensor(Dims s, std::vector<float> d) : shape(std::move(s)), data(std::move(d)) { refresh(); }
  Tensor(const Tensor& o) : shape(o.shape), data(o.data) { refresh(); }
  Tensor& operator=(const Tensor& o) {
    shape = o.shape;
    data = o.data;
    refresh();
    return *this;
  }
  void refresh() {
    desc = {};
    desc.struct_size = LOOM_TENSOR_STRUCT_SIZE;
    desc.dtype = LOOM_DTYPE_F32;
    desc.rank = static_cast<uint32_t>(shape.size());
    desc.shape = shape.data();
    desc.host_data = data.data();
    desc.byte_size = data.size() * sizeof(float);
  }
  kernels::TensorRef ref() {
    return kernels::TensorRef{DType::kF32, shape, data.data(), data.size() * sizeof(float)};
  }
};

inline size_t count_of(const Dims& s) {
  size_t n = 1;
  for (int64_t d : s) n *= static_cast<size_t>(d);
  return n;
}

inline Tensor random_tensor(const Dims& s, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count_of(s));
  for (float& x : v) x = dist(rng);
  return Tensor(s, std::move(v));
}

Tensor zero_tensor(const Dims& s) { return Tensor(s, std::vector<float>(count_of(s), 0.0f)); }

inline void expect_close(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const float tol = 1e-5f * std::max(1.0f, std::fabs(want[i]));
    ASSERT_NEAR(got[i], want[i], tol) << "element " << i;
  }
}

class CpuSimdPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(harness_.api(), nullptr) << harness_.error();
    api_ = harness_.api();
    std::string error;
    // LOOM_TEST_CPU_ISA (set by CTest for the runs per instruction set)
    // becomes cpu.isa, which holds for the whole process.
    std::vector<std::pair<const char*, const char*>> options = {{LOOM_OPTION_THREADS, "2"}};
    const char* isa = std::getenv("LOOM_TEST_CPU_ISA");
    if (isa != nullptr && *isa != '\0') options.emplace_back("cpu.isa", isa);
    plugin_ = create(options, &error);
    ASSERT_NE(plugin_, nullptr) << error;
    ASSERT_EQ(harness_.device(plugin_, 0, &device_), "ok");
  }

  // A plugin owned by the harness (destroy() ends it early).
  loom_plugin_t* create(std::vector<std::pair<const char*, const char*>> options,
                        std::string* error = nullptr) {
    return harness_.create(::loom::testing::Options(options.begin(), options.end()), error);
  }
  void destroy(loom_plugin_t* plugin) { harness_.destroy(plugin); }

  std::string check(const std::vector<std::byte>& blob, const char* key = "cpu-simd",
                    uint32_t version = kFormatVersion) {
    return harness_.check(device_, key, version, blob.data(), blob.size());
  }

  loom_executable_t* load(const std::vector<std::byte>& blob, std::string* error = nullptr,
                          uint32_t format_version = kFormatVersion) {
    loom_executable_t* exe = nullptr;
    std::string s = harness_.load(device_, "cpu-simd", format_version, blob.data(), blob.size(), &exe);
    if (error != nullptr) *error = s;
    return exe;
  }

  std::string execute(loom_executable_t* exe, std::vector<const loom_tensor_t*> in,
                      std::vector<const loom_tensor_t*> out, loom_fence_t* signal = nullptr) {
    return harness_.execute(exe, in, out, signal);
  }

  // Runs a one-node graph on the plugin and the same operator on loom_kernels.
  void compare_single_op(Op op, const std::vector<Tensor>& inputs, const Dims& out_shape,
                         const char* kernel, const BlobNode& attrs,
                         const std::vector<AttributeDef>& kernel_attrs) {
    BlobGraph g;
    for (const Tensor& t : inputs) {
      g.tensors.push_back({LOOM_DTYPE_F32, t.shape});
      g.inputs.push_back(static_cast<uint32_t>(g.tensors.size() - 1));
    }
    g.tensors.push_back({LOOM_DTYPE_F32, out_shape});
    const uint32_t out_index = static_cast<uint32_t>(g.tensors.size() - 1);
    g.outputs = {out_index};
    BlobNode node = attrs;
    node.op = op;
    node.inputs = g.inputs;
    node.outputs = {out_index};
    g.nodes = {node};
    std::string error;
    loom_executable_t* exe = load(encode(g), &error);
    ASSERT_NE(exe, nullptr) << error;
    std::vector<Tensor> ins = inputs;
    Tensor got = zero_tensor(out_shape);
    std::vector<const loom_tensor_t*> in_descs;
    for (Tensor& t : ins) in_descs.push_back(&t.desc);
    EXPECT_EQ(execute(exe, in_descs, {&got.desc}), "ok");
    api_->executable_destroy(exe);

    Tensor want = zero_tensor(out_shape);
    std::vector<kernels::TensorRef> refs;
    for (Tensor& t : ins) refs.push_back(t.ref());
    std::vector<kernels::TensorRef> outs = {want.ref()};
    const auto registry = kernels::KernelRegistry::reference();
    Status s = registry.find(kernel)->run(refs, outs, kernels::Attributes(kernel_attrs));
    ASSERT_TRUE(s.ok()) << s.to_string();
    expect_close(got.data, want.data);
  }

  ::loom::testing::PluginHarness harness_{LOOM_CPU_SIMD_PLUGIN_PATH};
  const loom_plugin_api_t* api_ = nullptr;
  loom_plugin_t* plugin_ = nullptr;
  loom_device_t* device_ = nullptr;
};

inline AttributeDef int_attr(const char* name, int64_t v) {
  AttributeDef a;
  a.name = name;
  a.kind = AttributeKind::kInt;
  a.i = v;
  return a;
}
inline AttributeDef float_attr(const char* name, float v) {
  AttributeDef a;
  a.name = name;
  a.kind = AttributeKind::kFloat;
  a.f = v;
  return a;
}

// x[B,I] MatMul w1 Add b1 Relu MatMul w2 Add b2 Softmax -> y[B,O]
inline BlobGraph mlp_graph(int64_t b, int64_t i, int64_t h, int64_t o) {
  BlobGraph g;
  auto t = [&](Dims s) {
    g.tensors.push_back({LOOM_DTYPE_F32, std::move(s)});
    return static_cast<uint32_t>(g.tensors.size() - 1);
  };
  uint32_t x = t({b, i}), w1 = t({i, h}), b1 = t({h}), w2 = t({h, o}), b2 = t({o});
  uint32_t h0 = t({b, h}), h1 = t({b, h}), r = t({b, h}), z = t({b, o}), z1 = t({b, o}), y = t({b, o});
  g.inputs = {x, w1, b1, w2, b2};
  g.outputs = {y};
  auto node = [&](Op op, std::vector<uint32_t> in, uint32_t out) {
    BlobNode n;
    n.op = op;
    n.inputs = std::move(in);
    n.outputs = {out};
    g.nodes.push_back(n);
  };
  node(Op::kMatMul, {x, w1}, h0);
  node(Op::kAdd, {h0, b1}, h1);
  node(Op::kRelu, {h1}, r);
  node(Op::kMatMul, {r, w2}, z);
  node(Op::kAdd, {z, b2}, z1);
  node(Op::kSoftmax, {z1}, y);
  return g;
}

}  // namespace
}  // namespace loom::cpu_simd
