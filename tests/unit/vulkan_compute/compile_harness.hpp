// The harness of the vulkan-compute compile tests: a fixture that asks the
// plugin which nodes it claims, compiles a graph (built with the shared
// GraphBuilder, tests/support/graph_builder) through the C ABI and runs the
// blob on the first Vulkan device.
#pragma once

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "graph_builder.hpp"
#include "loom/vulkan_compute/kernels.hpp"
#include "vk_harness.hpp"

namespace loom::vulkan::test {

using ::loom::testing::attr_f;
using ::loom::testing::attr_i;
using ::loom::testing::attr_ints;
using ::loom::testing::attr_s;
using ::loom::testing::Attr;
using ::loom::testing::Dims;
using ::loom::testing::GraphBuilder;
namespace gfb = ::loom::graph::fb;

inline std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A convolution's shape: batch, channels, size, output channels, groups,
// kernel, strides, dilations, pads (top, left, bottom, right).
struct ConvCase {
  int64_t N, C, H, W, M, G, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr;
};

class VulkanCompile : public VulkanTest {
 protected:
  // vulkan_compile_test.cpp: a Conv + Relu case against a host loop.
  void check_conv(const ConvCase& k, size_t dispatches, uint32_t splits, Kernel kernel);

  void SetUp() override {
    VulkanTest::SetUp();
    ASSERT_NE(api_->compile_supported, nullptr);
    ASSERT_NE(api_->compile, nullptr);
    // The compile entries need no device: a plugin without Vulkan compiles.
    compiler_ = create({{"vulkan.loader", "libloom-no-such-vulkan.so.1"}});
    ASSERT_NE(compiler_, nullptr);
  }

  std::vector<bool> supported(const GraphBuilder& g) {
    std::vector<bool> out;
    EXPECT_EQ(harness_.supported(compiler_, g.finish(), g.node_count(), &out), "ok");
    return out;
  }
  std::string compile(const std::vector<uint8_t>& graph, std::vector<uint8_t>* blob) {
    ::loom::testing::CompiledBlob compiled;
    std::string s = harness_.compile(compiler_, graph, &compiled);
    if (compiled.returned) {
      EXPECT_EQ(compiled.loader_key, kLoaderKey);
      const auto* p = reinterpret_cast<const uint8_t*>(compiled.bytes.data());
      blob->assign(p, p + compiled.bytes.size());
      // Format 3 (an open graph) only for a graph with open dimensions.
      EXPECT_EQ(compiled.format_version, blob_version(blob->data(), blob->size()));
    }
    return s;
  }
  // Loads `blob` on the device, runs it on `inputs` and returns the outputs.
  std::vector<std::vector<float>> run(const std::vector<uint8_t>& blob,
                                      const std::vector<std::pair<Dims, std::vector<float>>>& inputs,
                                      const std::vector<Dims>& outputs) {
    loom_executable_t* exe = nullptr;
    EXPECT_EQ(harness_.load(device_, kLoaderKey, blob_version(blob.data(), blob.size()), blob.data(), blob.size(), &exe),
              "ok");
    if (exe == nullptr) return {};
    std::vector<loom_buffer_t*> buffers;
    std::vector<loom_tensor_t> descs;
    descs.reserve(inputs.size() + outputs.size());
    std::vector<const loom_tensor_t*> ins, outs;
    for (size_t i = 0; i < inputs.size() + outputs.size(); ++i) {
      const bool in = i < inputs.size();
      const Dims& shape = in ? inputs[i].first : outputs[i - inputs.size()];
      size_t n = 1;
      for (int64_t d : shape) n *= static_cast<size_t>(d);
      buffers.push_back(allocate(n * 4));
      descs.push_back(::loom::testing::buffer_tensor(LOOM_DTYPE_F32, shape, buffers.back(), n * 4));
      if (in) {
        EXPECT_EQ(copy(buffers.back(), 0, const_cast<float*>(inputs[i].second.data()), n * 4, true), "ok");
        ins.push_back(&descs.back());
      } else {
        outs.push_back(&descs.back());
      }
    }
    EXPECT_EQ(harness_.execute(exe, ins, outs), "ok");
    std::vector<std::vector<float>> results;
    for (size_t i = 0; i < outs.size(); ++i) {
      results.emplace_back(outs[i]->byte_size / 4);
      EXPECT_EQ(copy(outs[i]->buffer, 0, results.back().data(), outs[i]->byte_size, false), "ok");
    }
    api_->executable_destroy(exe);
    for (loom_buffer_t* b : buffers) api_->buffer_free(b);
    return results;
  }

  loom_plugin_t* compiler_ = nullptr;
};

}  // namespace loom::vulkan::test
