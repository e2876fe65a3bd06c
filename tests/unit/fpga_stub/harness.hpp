// The fpga-stub plugin's tests on the shared plugin harness
// (tests/support/plugin_harness): one plugin instance created with
// KEY=VALUE options, the entries called with the fpga-stub loader key, and
// bitstreams built with the plugin's own format code.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "bitstream.hpp"
#include "loom/plugin.h"
#include "plugin_harness.hpp"

namespace loom::fpga_stub::testing {

using ::loom::testing::starts_with;
using ::loom::testing::take;
using ::loom::testing::TraceEvent;

// The fpga-stub library and at most one plugin instance of it.
class Harness {
 public:
  Harness() : base_(LOOM_FPGA_STUB_PLUGIN_PATH) {}

  const loom_plugin_api_t* api() const { return base_.api(); }
  ::loom::testing::HostRecorder& recorder() { return base_.recorder(); }
  loom_plugin_t* plugin() const { return plugin_; }

  // Creates the instance with KEY=VALUE options; "ok" or the error.
  std::string create(const std::map<std::string, std::string>& options = {}) {
    std::string s;
    plugin_ = base_.create(::loom::testing::Options(options.begin(), options.end()), &s);
    return s;
  }
  void destroy_plugin() {
    base_.destroy(plugin_);
    plugin_ = nullptr;
  }

  loom_device_t* device(size_t i) {
    loom_device_t* d = nullptr;
    EXPECT_EQ(base_.device(plugin_, i, &d), "ok");
    return d;
  }

  std::string allocate(loom_device_t* d, uint64_t size, loom_buffer_t** out, uint32_t flags = 0) {
    return base_.allocate(d, size, flags, out);
  }
  std::string upload(loom_buffer_t* b, const void* src, uint64_t size, uint64_t offset = 0) {
    return base_.copy_from_host(b, offset, src, size);
  }
  std::string download(loom_buffer_t* b, void* dst, uint64_t size, uint64_t offset = 0) {
    return base_.copy_to_host(b, offset, dst, size);
  }

  std::string load(loom_device_t* d, const std::vector<std::byte>& blob, loom_executable_t** out) {
    return base_.load(d, "fpga-stub", kFormatVersion, blob.data(), blob.size(), out);
  }
  std::string check(loom_device_t* d, const void* blob, size_t size, const char* key = "fpga-stub") {
    return base_.check(d, key, 0, blob, size);
  }
  std::string execute(loom_executable_t* exe, const std::vector<const loom_tensor_t*>& inputs,
                      const std::vector<const loom_tensor_t*>& outputs, loom_fence_t* signal = nullptr,
                      std::vector<loom_fence_t*> waits = {}) {
    return base_.execute(exe, inputs, outputs, signal, std::move(waits));
  }

 private:
  ::loom::testing::PluginHarness base_;
  loom_plugin_t* plugin_ = nullptr;
};

// A tensor on the device: its descriptor bound to a buffer of exactly its size.
struct DeviceTensor {
  std::vector<int64_t> shape;
  loom_dtype_t dtype = LOOM_DTYPE_F32;
  loom_buffer_t* buffer = nullptr;
  loom_tensor_t desc{};
  uint64_t bytes() const { return desc.byte_size; }
  // The descriptor, its shape pointing at this object's `shape`.
  const loom_tensor_t* d() {
    desc.shape = shape.data();
    return &desc;
  }
};

inline DeviceTensor make_tensor(Harness& h, loom_device_t* d, loom_dtype_t dtype, std::vector<int64_t> shape) {
  DeviceTensor t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  uint64_t n = 1;
  for (int64_t s : t.shape) n *= static_cast<uint64_t>(s);
  const uint64_t bytes = n * dtype_size(dtype);
  EXPECT_EQ(h.allocate(d, bytes, &t.buffer), "ok");
  t.desc.struct_size = LOOM_TENSOR_STRUCT_SIZE;
  t.desc.dtype = dtype;
  t.desc.rank = static_cast<uint32_t>(t.shape.size());
  t.desc.buffer = t.buffer;
  t.desc.byte_size = bytes;
  return t;
}

// A one-node bitstream: `inputs` (dtype, shape) are I/O inputs, then one
// output; consts are appended to the weights and named by index after the
// inputs.
struct ProgramBuilder {
  Bitstream bs;
  uint32_t input(loom_dtype_t dtype, std::vector<int64_t> shape) {
    const uint32_t t = add(dtype, std::move(shape), Storage::kIo);
    bs.inputs.push_back(t);
    return t;
  }
  template <typename T>
  uint32_t constant(loom_dtype_t dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
    const uint32_t t = add(dtype, std::move(shape), Storage::kConst);
    bs.tensors[t].offset = bs.weights.size();
    const auto* p = reinterpret_cast<const std::byte*>(values.data());
    bs.weights.insert(bs.weights.end(), p, p + values.size() * sizeof(T));
    bs.weights.resize((bs.weights.size() + 63) / 64 * 64);
    return t;
  }
  uint32_t scratch(loom_dtype_t dtype, std::vector<int64_t> shape) {
    const uint32_t t = add(dtype, std::move(shape), Storage::kScratch);
    bs.tensors[t].offset = bs.activation_bytes;
    bs.activation_bytes += (bs.tensors[t].bytes + 63) / 64 * 64;
    return t;
  }
  uint32_t output(loom_dtype_t dtype, std::vector<int64_t> shape) {
    const uint32_t t = add(dtype, std::move(shape), Storage::kIo);
    bs.outputs.push_back(t);
    return t;
  }
  void node(Op op, std::vector<int32_t> inputs, uint32_t out, std::vector<int64_t> params = {}) {
    bs.nodes.push_back({op, std::move(inputs), static_cast<int32_t>(out), std::move(params)});
  }
  uint32_t add(loom_dtype_t dtype, std::vector<int64_t> shape, Storage storage) {
    BsTensor t;
    t.dtype = dtype;
    t.storage = storage;
    t.bytes = element_count(shape) * dtype_size(dtype);
    t.shape = std::move(shape);
    bs.tensors.push_back(std::move(t));
    return static_cast<uint32_t>(bs.tensors.size() - 1);
  }
};

// Window parameters (WindowParam order) for a conv or pool.
inline std::vector<int64_t> window(int64_t group, int64_t k, int64_t stride, int64_t pad, int64_t include_pad = 0,
                                   int64_t ceil = 0, int64_t dilation = 1) {
  return {group, k, k, stride, stride, dilation, dilation, pad, pad, pad, pad, include_pad, ceil};
}

}  // namespace loom::fpga_stub::testing
