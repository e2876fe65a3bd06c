// The fixture of vulkan-compute's int8 tests (vulkan_compile_int8_test.cpp,
// vulkan_compile_qdq_test.cpp): operands, the reference kernels, a graph
// compiled by the device plugin and run on its first device, and the
// parameterized form that runs each case with and without integer dot
// products. Each test file gets its own copy (an unnamed namespace), so
// each names its fixtures apart.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compile_harness.hpp"
#include "kernels/kernel.hpp"
#include "loom/program.hpp"

namespace loom::vulkan::test {
namespace {

size_t int8_test_elem_size(loom_dtype_t d) {
  if (d == LOOM_DTYPE_U8 || d == LOOM_DTYPE_I8) return 1;
  return d == LOOM_DTYPE_U16 || d == LOOM_DTYPE_I16 ? 2 : 4;
}

// A tensor of any dtype as bytes; a graph input, an inline constant or
// absent (an optional operand left out).
struct QOperand {
  Dims shape;
  loom_dtype_t dtype = LOOM_DTYPE_F32;
  std::vector<uint8_t> bytes;
  bool constant = true;
  bool absent = false;
};

QOperand qf32(Dims shape, const std::vector<float>& v, bool constant = true) {
  QOperand t{std::move(shape), LOOM_DTYPE_F32, std::vector<uint8_t>(v.size() * 4), constant};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}
QOperand qint(Dims shape, loom_dtype_t dtype, const std::vector<int64_t>& v, bool constant = true) {
  QOperand t{std::move(shape), dtype, std::vector<uint8_t>(v.size() * int8_test_elem_size(dtype)), constant};
  for (size_t i = 0; i < v.size(); ++i) {
    if (int8_test_elem_size(dtype) == 1) {
      t.bytes[i] = static_cast<uint8_t>(v[i] & 255);
    } else if (int8_test_elem_size(dtype) == 2) {
      const uint16_t x = static_cast<uint16_t>(v[i]);
      std::memcpy(&t.bytes[i * 2], &x, 2);
    } else {
      const int32_t x = static_cast<int32_t>(v[i]);
      std::memcpy(&t.bytes[i * 4], &x, 4);
    }
  }
  return t;
}
// n random bytes (u8 or i8).
QOperand qrandom8(Dims shape, loom_dtype_t dtype, uint32_t seed, bool constant = false) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> any(0, 255);
  std::vector<int64_t> v(n);
  for (int64_t& x : v) x = any(rng);
  return qint(std::move(shape), dtype, v, constant);
}

std::vector<AttributeDef> ref_attrs(const std::vector<Attr>& attrs) {
  std::vector<AttributeDef> out;
  for (const Attr& a : attrs) {
    AttributeDef d;
    d.name = a.name;
    if (a.kind == gfb::AttributeKind::ints) {
      d.kind = AttributeKind::kInts;
      d.ints = a.ints;
    } else if (a.kind == gfb::AttributeKind::string) {
      d.kind = AttributeKind::kString;
      d.s = a.s;
    } else {
      d.kind = AttributeKind::kInt;
      d.i = a.i;
    }
    out.push_back(d);
  }
  return out;
}

class VulkanInt8 : public VulkanCompile {
 protected:
  struct Outcome {
    bool claimed = false;
    std::string compile;  // the compile entry's answer ("ok" or the error)
    uint32_t format = 0;
    std::vector<uint8_t> got, want;
    std::vector<std::string> dispatches;  // the device's trace events of the run
  };

  // Set by a test: how the trace must name the node's dispatch (its end,
  // for example " QConv (int8 dot)"); empty: not checked.
  std::string want_dispatch_;

  // The device as `dot` says: with integer dot products (false when it
  // lacks them) or with shaderIntegerDotProduct hidden; *why on failure.
  bool open_int8_device(bool dot, std::string* why) {
    if (!dot) {
      want_dispatch_ = " QConv";
      return open_device(why, {{"vulkan.hide_features", "shaderIntegerDotProduct"}});
    }
    if (!open_device(why)) return false;
    loom_device_info_t info{};
    info.struct_size = sizeof info;
    if (take(api_, api_->device_info(device_, &info)) != "ok" || std::string(info.name).find(", int8 dot") == std::string::npos) {
      *why = "the device has no shaderIntegerDotProduct";
      return false;
    }
    want_dispatch_ = " QConv (int8 dot)";
    return true;
  }

  // Whether a log line after the first `from` contains `text`.
  bool logged_since(size_t from, const std::string& text) {
    const std::vector<std::string> lines = harness_.recorder().logs();
    for (size_t i = from; i < lines.size(); ++i) {
      if (lines[i].find(text) != std::string::npos) return true;
    }
    return false;
  }
  // A compile note of `kind` ("int8" or "f32", the prefix `loom compile`
  // counts) logged since `from`, holding `text` after the prefix.
  bool noted_since(size_t from, const std::string& kind, const std::string& text) {
    const std::vector<std::string> lines = harness_.recorder().logs();
    const std::string prefix = "compile: " + kind + ": ";
    for (size_t i = from; i < lines.size(); ++i) {
      const size_t at = lines[i].find(prefix);
      if (at != std::string::npos && lines[i].find(text, at + prefix.size()) != std::string::npos) return true;
    }
    return false;
  }

  // Compiles `graph` with `compiler` into *blob: "ok" or the error.
  std::string compile_with(loom_plugin_t* compiler, const std::vector<uint8_t>& graph, std::vector<uint8_t>* blob) {
    ::loom::testing::CompiledBlob compiled;
    const std::string s = harness_.compile(compiler, graph, &compiled);
    const auto* p = reinterpret_cast<const uint8_t*>(compiled.bytes.data());
    blob->assign(p, p + compiled.bytes.size());
    return s;
  }

  // The reference kernel of `op` over `ops`: its output bytes.
  static std::vector<uint8_t> reference(const std::string& op, const std::vector<QOperand>& ops, const Dims& out_shape,
                                        loom_dtype_t out_dtype, const std::vector<Attr>& attrs, int64_t opset) {
    size_t out_count = 1;
    for (int64_t d : out_shape) out_count *= static_cast<size_t>(d);
    std::vector<uint8_t> want(out_count * int8_test_elem_size(out_dtype), 0x5a);
    std::vector<QOperand> copies = ops;
    std::vector<kernels::TensorRef> refs;
    for (QOperand& o : copies) {
      refs.push_back(o.absent ? kernels::TensorRef{}
                              : kernels::TensorRef{static_cast<::loom::DType>(o.dtype), o.shape, o.bytes.data(), o.bytes.size()});
    }
    std::vector<kernels::TensorRef> outs = {{static_cast<::loom::DType>(out_dtype), out_shape, want.data(), want.size()}};
    const std::vector<AttributeDef> defs = ref_attrs(attrs);
    const auto registry = kernels::KernelRegistry::reference();
    const auto s = registry.find(op)->run(refs, outs, kernels::Attributes(defs, static_cast<int32_t>(opset)));
    EXPECT_TRUE(s.ok()) << s.to_string();
    return want;
  }

  // Loads `blob` (of format r->format) on the device, feeds the operands
  // `runtime` names as inputs, runs it and fills r->got (r->want's size)
  // and r->dispatches.
  void run_on_device(const std::vector<uint8_t>& blob, const std::vector<QOperand>& ops,
                     const std::vector<size_t>& runtime, const Dims& out_shape, loom_dtype_t out_dtype, Outcome* r) {
    loom_executable_t* exe = nullptr;
    EXPECT_EQ(harness_.load(device_, kLoaderKey, r->format, blob.data(), blob.size(), &exe), "ok");
    if (exe == nullptr) return;
    std::vector<loom_buffer_t*> buffers;
    std::vector<loom_tensor_t> descs;
    descs.reserve(runtime.size() + 1);
    std::vector<const loom_tensor_t*> in_descs, out_descs;
    for (size_t i : runtime) {
      const QOperand& o = ops[i];
      buffers.push_back(allocate(o.bytes.size()));
      descs.push_back(::loom::testing::buffer_tensor(o.dtype, o.shape, buffers.back(), o.bytes.size()));
      std::vector<uint8_t> tmp = o.bytes;
      EXPECT_EQ(copy(buffers.back(), 0, tmp.data(), tmp.size(), true), "ok");
      in_descs.push_back(&descs.back());
    }
    buffers.push_back(allocate(r->want.size()));
    std::vector<uint8_t> fill(r->want.size(), 0xa5);  // not what the kernel writes
    EXPECT_EQ(copy(buffers.back(), 0, fill.data(), fill.size(), true), "ok");
    descs.push_back(::loom::testing::buffer_tensor(out_dtype, out_shape, buffers.back(), r->want.size()));
    out_descs.push_back(&descs.back());
    const size_t events_before = harness_.recorder().events().size();
    EXPECT_EQ(harness_.execute(exe, in_descs, out_descs), "ok");
    const std::vector<::loom::testing::TraceEvent> events = harness_.recorder().events();
    for (size_t e = events_before; e < events.size(); ++e) r->dispatches.push_back(events[e].name);
    r->got.assign(r->want.size(), 0);
    EXPECT_EQ(copy(buffers.back(), 0, r->got.data(), r->got.size(), false), "ok");
    api_->executable_destroy(exe);
    for (loom_buffer_t* b : buffers) api_->buffer_free(b);
  }

  // One `op` node over `ops`, claimed and compiled by `compiler` (the device
  // plugin unless given), run on the device and by the reference kernel.
  Outcome run_node(const std::string& op, const std::vector<QOperand>& ops, const Dims& out_shape,
                   loom_dtype_t out_dtype, const std::vector<Attr>& attrs = {}, int64_t opset = 13,
                   loom_plugin_t* compiler = nullptr) {
    Outcome r;
    if (compiler == nullptr) compiler = plugin_;
    GraphBuilder g;
    std::vector<int32_t> ins;
    std::vector<size_t> runtime;  // operands that are graph inputs
    for (size_t i = 0; i < ops.size(); ++i) {
      const QOperand& o = ops[i];
      const auto fb = static_cast<gfb::DType>(o.dtype);
      if (o.absent) {
        ins.push_back(-1);
      } else if (o.constant) {
        ins.push_back(g.constant(o.shape, fb, o.bytes.data(), o.bytes.size()));
      } else {
        ins.push_back(g.input(o.shape, fb));
        runtime.push_back(i);
      }
    }
    const int y = g.tensor(out_shape, static_cast<gfb::DType>(out_dtype));
    g.node(op, ins, {y}, attrs, opset);
    g.output(y);
    const std::vector<uint8_t> graph = g.finish();
    std::vector<bool> flags;
    EXPECT_EQ(harness_.supported(compiler, graph, 1, &flags), "ok");
    r.claimed = !flags.empty() && flags[0];
    ::loom::testing::CompiledBlob compiled;
    r.compile = harness_.compile(compiler, graph, &compiled);
    if (r.compile != "ok") return r;
    r.format = compiled.format_version;
    const auto* p = reinterpret_cast<const uint8_t*>(compiled.bytes.data());
    const std::vector<uint8_t> blob(p, p + compiled.bytes.size());
    EXPECT_EQ(r.format, blob_version(blob.data(), blob.size()));

    r.want = reference(op, ops, out_shape, out_dtype, attrs, opset);
    run_on_device(blob, ops, runtime, out_shape, out_dtype, &r);
    return r;
  }

  // run_node, expecting the node claimed, a format-4 blob and the device's
  // bytes equal to the reference kernel's.
  void expect_equal(const std::string& op, const std::vector<QOperand>& ops, const Dims& out_shape,
                    loom_dtype_t out_dtype, const std::vector<Attr>& attrs = {}, int64_t opset = 13) {
    const Outcome r = run_node(op, ops, out_shape, out_dtype, attrs, opset);
    EXPECT_TRUE(r.claimed) << op;
    ASSERT_EQ(r.compile, "ok") << op;
    EXPECT_EQ(r.format, kInt8FormatVersion);
    if (!want_dispatch_.empty()) {
      // Weights given at run time stay on the plain kernel (packed at load
      // only when they are constants of the blob).
      const size_t wi = op == "QLinearConv" || op == "QLinearMatMul" ? 3 : 1;
      const std::string want = ops[wi].constant ? want_dispatch_ : " QConv";
      bool ran = false;
      for (const std::string& name : r.dispatches) {
        ran |= name.size() >= want.size() && name.compare(name.size() - want.size(), want.size(), want) == 0;
      }
      EXPECT_TRUE(ran) << op << ": no dispatch named \"..." << want << "\" in the device's trace";
    }
    ASSERT_EQ(r.got.size(), r.want.size());
    const size_t es = int8_test_elem_size(out_dtype);
    for (size_t i = 0; i < r.want.size(); i += es) {
      EXPECT_EQ(std::vector<uint8_t>(r.got.begin() + static_cast<long>(i), r.got.begin() + static_cast<long>(i + es)),
                std::vector<uint8_t>(r.want.begin() + static_cast<long>(i), r.want.begin() + static_cast<long>(i + es)))
          << op << " element " << i / es;
    }
  }
};


std::vector<Attr> conv_attrs(int64_t group, Dims strides, Dims dilations, Dims pads) {
  return {attr_i("group", group), attr_ints("strides", std::move(strides)), attr_ints("dilations", std::move(dilations)),
          attr_ints("pads", std::move(pads))};
}

// The convolution tests, with integer dot products (true) and without.
class VulkanInt8Conv : public VulkanInt8, public ::testing::WithParamInterface<bool> {};

#define LOOM_VK_REQUIRE_INT8_DEVICE()                                                          \
  do {                                                                                         \
    std::string why_;                                                                          \
    if (!open_int8_device(GetParam(), &why_)) {                                                \
      const char* required_ = std::getenv("LOOM_REQUIRE_ALL_SUITES");                          \
      if (!GetParam() && required_ != nullptr && std::string(required_) == "1") FAIL() << why_; \
      GTEST_SKIP() << why_;                                                                    \
    }                                                                                          \
  } while (0)

}  // namespace
}  // namespace loom::vulkan::test
