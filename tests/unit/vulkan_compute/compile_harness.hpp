// The harness of the vulkan-compute compile tests: a small graph.fbs
// builder and a fixture that asks the plugin which nodes it claims, compiles
// a graph through the C ABI and runs the blob on the first Vulkan device.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "loom/graph/graph_generated.h"
#include "loom/vulkan_compute/kernels.hpp"
#include "vk_harness.hpp"

namespace loom::vulkan::test {

namespace gfb = loom::graph::fb;
using Dims = std::vector<int64_t>;

// A small graph.fbs builder.
class Graph {
 public:
  int input(Dims shape) {
    const int t = tensor(std::move(shape));
    inputs_.push_back(t);
    return t;
  }
  int tensor(Dims shape, gfb::DType dtype = gfb::DType::f32) {
    tensors_.push_back({"t" + std::to_string(tensors_.size()), dtype, std::move(shape), {}, false});
    return static_cast<int>(tensors_.size() - 1);
  }
  int constant_f32(Dims shape, const std::vector<float>& v) {
    const int t = tensor(std::move(shape));
    tensors_[t].has_data = true;
    tensors_[t].data.assign(reinterpret_cast<const uint8_t*>(v.data()),
                            reinterpret_cast<const uint8_t*>(v.data()) + v.size() * 4);
    return t;
  }
  int constant_i64(Dims shape, const std::vector<int64_t>& v) {
    const int t = tensor(std::move(shape), gfb::DType::i64);
    tensors_[t].has_data = true;
    tensors_[t].data.assign(reinterpret_cast<const uint8_t*>(v.data()),
                            reinterpret_cast<const uint8_t*>(v.data()) + v.size() * 8);
    return t;
  }
  void node(std::string op, std::vector<int32_t> in, std::vector<int32_t> out,
            std::vector<std::pair<std::string, int64_t>> int_attrs = {}, int64_t opset = 13,
            std::vector<std::pair<std::string, Dims>> ints_attrs = {},
            std::vector<std::pair<std::string, std::string>> string_attrs = {}) {
    nodes_.push_back({std::move(op), std::move(in), std::move(out), std::move(int_attrs), opset,
                      std::move(ints_attrs), std::move(string_attrs)});
  }
  void output(int t) { outputs_.push_back(t); }
  size_t node_count() const { return nodes_.size(); }

  std::vector<uint8_t> finish() const {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<gfb::Tensor>> ts;
    for (const T& t : tensors_) {
      ts.push_back(gfb::CreateTensorDirect(fbb, t.name.c_str(), t.dtype, &t.shape,
                                           t.has_data ? &t.data : nullptr, nullptr));
    }
    std::vector<flatbuffers::Offset<gfb::Node>> ns;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const N& n = nodes_[i];
      std::vector<flatbuffers::Offset<gfb::Attribute>> as;
      for (const auto& [name, v] : n.attrs) {
        as.push_back(gfb::CreateAttributeDirect(fbb, name.c_str(), gfb::AttributeKind::int_, v));
      }
      for (const auto& [name, v] : n.ints_attrs) {
        as.push_back(gfb::CreateAttributeDirect(fbb, name.c_str(), gfb::AttributeKind::ints, 0, 0, &v));
      }
      for (const auto& [name, v] : n.string_attrs) {
        as.push_back(gfb::CreateAttributeDirect(fbb, name.c_str(), gfb::AttributeKind::string, 0, 0, nullptr,
                                                nullptr, v.c_str()));
      }
      const std::string name = "n" + std::to_string(i);
      ns.push_back(gfb::CreateNodeDirect(fbb, name.c_str(), n.op.c_str(), "", n.opset, &as, &n.in,
                                         &n.out));
    }
    auto g = gfb::CreateGraphDirect(fbb, "g", &ts, &ns, &inputs_, &outputs_);
    gfb::FinishGraphBuffer(fbb, g);
    return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  }

 private:
  struct T {
    std::string name;
    gfb::DType dtype;
    Dims shape;
    std::vector<uint8_t> data;
    bool has_data;
  };
  struct N {
    std::string op;
    std::vector<int32_t> in, out;
    std::vector<std::pair<std::string, int64_t>> attrs;
    int64_t opset;
    std::vector<std::pair<std::string, Dims>> ints_attrs;
    std::vector<std::pair<std::string, std::string>> string_attrs;
  };
  std::vector<T> tensors_;
  std::vector<N> nodes_;
  std::vector<int32_t> inputs_, outputs_;
};

inline std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

class VulkanCompile : public VulkanTest {
 protected:
  void SetUp() override {
    VulkanTest::SetUp();
    ASSERT_NE(api_->compile_supported, nullptr);
    ASSERT_NE(api_->compile, nullptr);
    // The compile entries need no device: a plugin without Vulkan compiles.
    compiler_ = create({{"vulkan.loader", "libloom-no-such-vulkan.so.1"}});
    ASSERT_NE(compiler_, nullptr);
  }

  std::vector<bool> supported(const Graph& g) {
    const std::vector<uint8_t> bytes = g.finish();
    std::unique_ptr<bool[]> out(new bool[g.node_count()]);
    loom_compile_supported_args_t args{};
    args.struct_size = LOOM_COMPILE_SUPPORTED_ARGS_STRUCT_SIZE;
    args.plugin = compiler_;
    args.graph = bytes.data();
    args.graph_size = bytes.size();
    args.node_count = g.node_count();
    args.out_supported = out.get();
    EXPECT_EQ(take(api_, api_->compile_supported(&args)), "ok");
    return std::vector<bool>(out.get(), out.get() + g.node_count());
  }
  std::string compile(const std::vector<uint8_t>& graph, std::vector<uint8_t>* blob) {
    loom_compile_args_t args{};
    args.struct_size = LOOM_COMPILE_ARGS_STRUCT_SIZE;
    args.plugin = compiler_;
    args.graph = graph.data();
    args.graph_size = graph.size();
    std::string s = take(api_, api_->compile(&args));
    if (args.out_blob != nullptr) {
      EXPECT_STREQ(args.out_loader_key, kLoaderKey);
      EXPECT_EQ(args.out_format_version, kFormatVersion);
      const auto* p = static_cast<const uint8_t*>(args.out_blob);
      blob->assign(p, p + args.out_blob_size);
      log_.services.free(log_.services.user_data, args.out_blob);
    }
    return s;
  }
  // Loads `blob` on the device, runs it on `inputs` and returns the outputs.
  std::vector<std::vector<float>> run(const std::vector<uint8_t>& blob,
                                      const std::vector<std::pair<Dims, std::vector<float>>>& inputs,
                                      const std::vector<Dims>& outputs) {
    loom_executable_load_args_t load{};
    load.struct_size = LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE;
    load.device = device_;
    load.loader_key = kLoaderKey;
    load.format_version = kFormatVersion;
    load.blob = blob.data();
    load.blob_size = blob.size();
    EXPECT_EQ(take(api_, api_->executable_load(&load)), "ok");
    if (load.out_executable == nullptr) return {};
    std::vector<loom_buffer_t*> buffers;
    std::vector<loom_tensor_t> descs(inputs.size() + outputs.size());
    std::vector<const loom_tensor_t*> ins, outs;
    for (size_t i = 0; i < descs.size(); ++i) {
      const bool in = i < inputs.size();
      const Dims& shape = in ? inputs[i].first : outputs[i - inputs.size()];
      size_t n = 1;
      for (int64_t d : shape) n *= static_cast<size_t>(d);
      buffers.push_back(allocate(n * 4));
      loom_tensor_t& t = descs[i];
      t.struct_size = LOOM_TENSOR_STRUCT_SIZE;
      t.dtype = LOOM_DTYPE_F32;
      t.rank = static_cast<uint32_t>(shape.size());
      t.shape = shape.data();
      t.buffer = buffers.back();
      t.byte_size = n * 4;
      if (in) {
        EXPECT_EQ(copy(t.buffer, 0, const_cast<float*>(inputs[i].second.data()), n * 4, true), "ok");
        ins.push_back(&t);
      } else {
        outs.push_back(&t);
      }
    }
    loom_execute_args_t args{};
    args.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
    args.executable = load.out_executable;
    args.input_count = ins.size();
    args.inputs = ins.data();
    args.output_count = outs.size();
    args.outputs = outs.data();
    EXPECT_EQ(take(api_, api_->execute(&args)), "ok");
    std::vector<std::vector<float>> results;
    for (size_t i = 0; i < outs.size(); ++i) {
      results.emplace_back(outs[i]->byte_size / 4);
      EXPECT_EQ(copy(outs[i]->buffer, 0, results.back().data(), outs[i]->byte_size, false), "ok");
    }
    api_->executable_destroy(load.out_executable);
    for (loom_buffer_t* b : buffers) api_->buffer_free(b);
    return results;
  }

  loom_plugin_t* compiler_ = nullptr;
};

}  // namespace loom::vulkan::test
