// vulkan-compute's int8 kernels (blob format 4) through the compile entries,
// run on the first Vulkan device (lavapipe in CI) and compared byte for byte
// with the reference kernels (core/src/kernels) on edge values: rounding
// ties with odd zero points, saturation at both ends, NaN and infinities,
// per-axis / per-channel scales, padding, strides, groups, depthwise. And
// what is declined, with its reason: 16-bit zero points, blocked
// quantization, scales given at run time, a device without the features.
// The convolutions and matmuls run twice: with integer dot products
// (qconv_dot.comp, where the device has shaderIntegerDotProduct, as
// lavapipe does) and with that feature hidden (qconv.comp's plain
// multiply-adds); the device's trace names the kernel that ran.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../cpu_simd/fixtures/ort_qlinear_binary.hpp"
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

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Ties (x / scale exactly k + 0.5) with odd zero points, both saturation
// ends, NaN (to 0), infinities, and quotients that f32 division must round
// correctly (x / 0.1f).
std::vector<float> quantize_edges() {
  std::vector<float> v = {0.5f,   1.5f,   2.5f,   -0.5f, -1.5f,  -2.5f, 124.5f, 125.5f, 126.5f, 127.5f, -128.5f,
                          -129.5f, 250.5f, 251.5f, 252.5f, 253.5f, 254.5f, 255.5f, 300.f,  -300.f, kNaN,   kInf,
                          -kInf,  0.f,    -0.f,   1e-40f, 3.7f,  -3.7f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> any(-40.f, 40.f);
  while (v.size() < 64) v.push_back(any(rng));
  return v;
}

TEST_F(VulkanInt8, DeviceReportsTheInt8FeaturesAndDtypes) {
  LOOM_VK_REQUIRE_DEVICE();
  loom_device_info_t info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(take(api_, api_->device_info(device_, &info)), "ok");
  const std::string name = info.name;
  // lavapipe has shaderInt8, storageBuffer8BitAccess and shaderFloat64.
  EXPECT_NE(name.find(", int8 kernels"), std::string::npos) << name;
  EXPECT_NE(info.dtype_mask & LOOM_DTYPE_BIT(LOOM_DTYPE_U8), 0u);
  EXPECT_NE(info.dtype_mask & LOOM_DTYPE_BIT(LOOM_DTYPE_I8), 0u);
  EXPECT_NE(info.dtype_mask & LOOM_DTYPE_BIT(LOOM_DTYPE_I32), 0u);
}

TEST_F(VulkanInt8, QuantizeLinearPerTensorEqualsTheReferenceOnEdgeValues) {
  LOOM_VK_REQUIRE_DEVICE();
  const std::vector<float> x = quantize_edges();
  const Dims shape = {2, static_cast<int64_t>(x.size() / 2)};
  for (float scale : {1.0f, 0.5f, 0.1f}) {
    expect_equal("QuantizeLinear", {qf32(shape, x, false), qf32({}, {scale}), qint({}, LOOM_DTYPE_U8, {3})}, shape,
                 LOOM_DTYPE_U8);
    expect_equal("QuantizeLinear", {qf32(shape, x, false), qf32({}, {scale}), qint({}, LOOM_DTYPE_I8, {-3})}, shape,
                 LOOM_DTYPE_I8);
  }
  // No zero point: u8 with zero point 0 (opset 10's form).
  expect_equal("QuantizeLinear", {qf32(shape, x, false), qf32({}, {0.25f})}, shape, LOOM_DTYPE_U8, {}, 10);
}

TEST_F(VulkanInt8, QuantizeAndDequantizeLinearPerAxisEqualTheReference) {
  LOOM_VK_REQUIRE_DEVICE();
  const Dims shape = {2, 3, 2, 4};
  std::vector<float> x = quantize_edges();
  x.resize(48, 1.5f);
  const QOperand scales = qf32({3}, {0.5f, 1.0f, 0.03f});
  expect_equal("QuantizeLinear", {qf32(shape, x, false), scales, qint({3}, LOOM_DTYPE_I8, {-1, 5, 0})}, shape,
               LOOM_DTYPE_I8, {attr_i("axis", 1)});
  expect_equal("QuantizeLinear", {qf32(shape, x, false), qf32({4}, {0.5f, 1.0f, 2.0f, 0.2f}),
                                  qint({4}, LOOM_DTYPE_U8, {1, 3, 255, 0})},
               shape, LOOM_DTYPE_U8, {attr_i("axis", -1)});
  expect_equal("DequantizeLinear", {qrandom8(shape, LOOM_DTYPE_U8, 3), scales, qint({3}, LOOM_DTYPE_U8, {0, 128, 255})},
               shape, LOOM_DTYPE_F32, {attr_i("axis", 1)});
  expect_equal("DequantizeLinear", {qrandom8(shape, LOOM_DTYPE_I8, 4), qf32({}, {0.037f}), qint({}, LOOM_DTYPE_I8, {-7})},
               shape, LOOM_DTYPE_F32);
  // i32 (a bias), zero point 0: f32 conversion of large values rounds.
  expect_equal("DequantizeLinear",
               {qint({6}, LOOM_DTYPE_I32, {0, 1, -1, 16777217, -2147483647 - 1, 2147483647}, false), qf32({}, {0.5f})},
               {6}, LOOM_DTYPE_F32);
}

// QLinearConv's attributes and the reference's.
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

INSTANTIATE_TEST_SUITE_P(Kernels, VulkanInt8Conv, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "IntegerDot" : "PlainMultiplyAdd";
                         });

TEST_P(VulkanInt8Conv, QLinearConvEqualsTheReferenceOnTiesSaturationPaddingAndGroups) {
  LOOM_VK_REQUIRE_INT8_DEVICE();
  // Ties: a 1x1 convolution whose accumulators are x (w - w_zero_point = 1)
  // and -x (-1), times the multiplier 0.5: every odd x is a .5 tie, and the
  // odd y zero point, added before rounding as the reference does, sends
  // each the other way than rounding first would. A bias shifts channel 1.
  {
    std::vector<int64_t> x(32);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int64_t>(i);
    expect_equal("QLinearConv",
                 {qint({1, 1, 4, 8}, LOOM_DTYPE_U8, x, false), qf32({}, {0.5f}), qint({}, LOOM_DTYPE_U8, {0}),
                  qint({2, 1, 1, 1}, LOOM_DTYPE_U8, {129, 127}), qf32({}, {1.0f}), qint({}, LOOM_DTYPE_U8, {128}),
                  qf32({}, {1.0f}), qint({}, LOOM_DTYPE_U8, {33}), qint({2}, LOOM_DTYPE_I32, {0, 3})},
                 {1, 2, 4, 8}, LOOM_DTYPE_U8, conv_attrs(1, {1, 1}, {1, 1}, {0, 0, 0, 0}));
  }
  // u8 x and w, per tensor, padding, stride 2, a bias; a multiplier of
  // about 1e-3 keeps most outputs inside [0, 255], some saturate.
  {
    const Dims xs = {1, 3, 5, 5}, ws = {4, 3, 3, 3};
    expect_equal("QLinearConv",
                 {qrandom8(xs, LOOM_DTYPE_U8, 11), qf32({}, {0.02f}), qint({}, LOOM_DTYPE_U8, {131}),
                  qrandom8(ws, LOOM_DTYPE_U8, 12, true), qf32({}, {0.01f}), qint({}, LOOM_DTYPE_U8, {127}),
                  qf32({}, {0.2f}), qint({}, LOOM_DTYPE_U8, {129}), qint({4}, LOOM_DTYPE_I32, {-3, 0, 5, 30001})},
                 {1, 4, 3, 3}, LOOM_DTYPE_U8, conv_attrs(1, {2, 2}, {1, 1}, {1, 1, 1, 1}));
  }
  // i8 x and w, per-channel w scales and zero points, two groups, dilation
  // 2, asymmetric pads; channels of large multipliers saturate at -128 and
  // 127, the others stay inside.
  {
    const Dims xs = {2, 4, 6, 6}, ws = {6, 2, 2, 3};
    for (float y_scale : {2.0f, 0.0005f}) {
      expect_equal("QLinearConv",
                   {qrandom8(xs, LOOM_DTYPE_I8, 21), qf32({}, {0.05f}), qint({}, LOOM_DTYPE_I8, {-5}),
                    qrandom8(ws, LOOM_DTYPE_I8, 22, true), qf32({6}, {0.01f, 0.02f, 0.5f, 0.003f, 0.25f, 0.1f}),
                    qint({6}, LOOM_DTYPE_I8, {0, 1, -1, 3, -128, 127}), qf32({}, {y_scale}),
                    qint({}, LOOM_DTYPE_I8, {-3})},
                   {2, 6, 7, 3}, LOOM_DTYPE_I8, conv_attrs(2, {1, 2}, {2, 1}, {1, 0, 2, 1}));
    }
  }
  // Depthwise, u8 x and i8 w (mixed signedness), weights as a runtime
  // input, a per-tensor w scale with per-channel w zero points.
  {
    const Dims xs = {1, 4, 5, 4}, ws = {4, 1, 3, 3};
    expect_equal("QLinearConv",
                 {qrandom8(xs, LOOM_DTYPE_U8, 31), qf32({}, {0.02f}), qint({}, LOOM_DTYPE_U8, {128}),
                  qrandom8(ws, LOOM_DTYPE_I8, 32), qf32({}, {0.01f}),
                  qint({4}, LOOM_DTYPE_I8, {0, 5, -7, 0}), qf32({}, {1.0f}), qint({}, LOOM_DTYPE_U8, {120}),
                  qint({4}, LOOM_DTYPE_I32, {100, -100, 0, 7})},
                 {1, 4, 5, 4}, LOOM_DTYPE_U8, conv_attrs(4, {1, 1}, {1, 1}, {1, 1, 1, 1}));
  }
}

// The QDQ form quantizers write: DequantizeLinear of x, of per-channel s8
// weights and of an i32 bias at scale x_scale * w_scale -> Conv ->
// QuantizeLinear. The compile fuses it into one qconv dispatch (format 5)
// whose bytes are QLinearConv's over the same operands (the reference
// kernel) but for the order of rounding and adding the output zero point
// (QuantizeLinear's here), which only an exact tie with an odd zero point
// tells apart: the zero points here are even (tests/onnx/vulkan_int8's
// test_vulkan_int8_qdq_conv_fused has the ties). A bias of
// another scale, a Relu between Conv and QuantizeLinear, or a Conv output
// that is also a graph output keep the f32 steps.
class QdqConv {
 public:
  enum class Variant { kFused, kBiasScaleOff, kRelu, kConvOutputKept };
  QdqConv(Dims xs, Dims ws, int64_t group, Dims strides, Dims pads, loom_dtype_t xt, loom_dtype_t yt, uint32_t seed,
          Variant v = Variant::kFused)
      : xt_(xt), yt_(yt), attrs_(conv_attrs(group, std::move(strides), {1, 1}, std::move(pads))) {
    const int64_t m = ws[0];
    const Dims& st = attrs_[1].ints;  // conv_attrs: group, strides, dilations, pads
    const Dims& pd = attrs_[3].ints;
    out_ = {xs[0], m, (xs[2] + pd[0] + pd[2] - ws[2]) / st[0] + 1, (xs[3] + pd[1] + pd[3] - ws[3]) / st[1] + 1};
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> scale(0.002f, 0.02f);
    std::vector<float> w_scales(static_cast<size_t>(m)), b_scales(static_cast<size_t>(m));
    std::vector<int64_t> bias(static_cast<size_t>(m));
    const float x_scale = 0.03f;
    for (size_t c = 0; c < w_scales.size(); ++c) {
      w_scales[c] = scale(rng);
      b_scales[c] = x_scale * w_scales[c];
      bias[c] = static_cast<int64_t>(rng() % 4001) - 2000;
    }
    if (v == Variant::kBiasScaleOff) b_scales[0] = std::nextafter(b_scales[0], 1.0f);
    const bool xu = xt == LOOM_DTYPE_U8, yu = yt == LOOM_DTYPE_U8;
    // QLinearConv's operands.
    ops_ = {qrandom8(xs, xt, seed + 1), qf32({}, {x_scale}), qint({}, xt, {xu ? 131 : -5}),
            qrandom8(ws, LOOM_DTYPE_I8, seed + 2, true), qf32({m}, w_scales),
            qint({m}, LOOM_DTYPE_I8, std::vector<int64_t>(static_cast<size_t>(m), 0)), qf32({}, {0.4f}),
            qint({}, yt, {yu ? 120 : 6}), qint({m}, LOOM_DTYPE_I32, bias)};
    auto add = [&](const QOperand& o) {
      const auto fb = static_cast<gfb::DType>(o.dtype);
      return o.constant ? g_.constant(o.shape, fb, o.bytes.data(), o.bytes.size()) : g_.input(o.shape, fb);
    };
    std::vector<int> t;
    for (const QOperand& o : ops_) t.push_back(add(o));
    const int bs = add(qf32({m}, b_scales));
    const int xf = g_.tensor(xs), wf = g_.tensor(ws), bf = g_.tensor({m}), yf = g_.tensor(out_);
    const int yq = g_.tensor(out_, static_cast<gfb::DType>(yt));
    g_.node("DequantizeLinear", {t[0], t[1], t[2]}, {xf});
    g_.node("DequantizeLinear", {t[3], t[4], t[5]}, {wf}, {attr_i("axis", 0)});
    g_.node("DequantizeLinear", {t[8], bs}, {bf}, {attr_i("axis", 0)});
    g_.node("Conv", {xf, wf, bf}, {yf}, attrs_);
    int q_in = yf;
    if (v == Variant::kRelu) {
      q_in = g_.tensor(out_);
      g_.node("Relu", {yf}, {q_in});
    }
    g_.node("QuantizeLinear", {q_in, t[6], t[7]}, {yq});
    g_.output(yq);
    if (v == Variant::kConvOutputKept) g_.output(yf);
  }
  const GraphBuilder& graph() const { return g_; }
  const std::vector<QOperand>& operands() const { return ops_; }
  const std::vector<Attr>& attrs() const { return attrs_; }
  const Dims& out_shape() const { return out_; }
  loom_dtype_t y_dtype() const { return yt_; }

 private:
  loom_dtype_t xt_, yt_;
  std::vector<Attr> attrs_;
  Dims out_;
  std::vector<QOperand> ops_;
  GraphBuilder g_;
};

TEST_P(VulkanInt8Conv, DequantizeConvQuantizeIsOneQConvEqualToQLinearConv) {
  LOOM_VK_REQUIRE_INT8_DEVICE();
  const std::vector<QdqConv> cases = {
      QdqConv({1, 8, 9, 9}, {16, 8, 3, 3}, 1, {1, 1}, {1, 1, 1, 1}, LOOM_DTYPE_U8, LOOM_DTYPE_U8, 61),
      QdqConv({2, 6, 7, 8}, {6, 3, 3, 2}, 2, {2, 1}, {0, 1, 1, 0}, LOOM_DTYPE_I8, LOOM_DTYPE_I8, 62),
      QdqConv({1, 5, 6, 6}, {5, 1, 3, 3}, 5, {1, 1}, {1, 1, 1, 1}, LOOM_DTYPE_U8, LOOM_DTYPE_I8, 63),  // depthwise
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    const QdqConv& c = cases[k];
    SCOPED_TRACE("case " + std::to_string(k));
    std::vector<uint8_t> blob;
    const size_t logged = harness_.recorder().logs().size();
    ASSERT_EQ(compile_with(plugin_, c.graph().finish(), &blob), "ok");
    EXPECT_TRUE(logged_since(logged, "(Conv): int8 (one qconv with its DequantizeLinear inputs and QuantizeLinear)"));
    BlobProgram prog;
    std::string error;
    ASSERT_TRUE(decode(blob.data(), blob.size(), &prog, &error)) << error;
    ASSERT_EQ(prog.dispatches.size(), 1u);
    EXPECT_EQ(prog.dispatches[0].kernel, Kernel::kQConv);
    EXPECT_EQ(blob_version(blob.data(), blob.size()), kQdqFormatVersion);
    Outcome r;
    r.format = blob_version(blob.data(), blob.size());
    r.want = reference("QLinearConv", c.operands(), c.out_shape(), c.y_dtype(), c.attrs(), 13);
    run_on_device(blob, c.operands(), {0}, c.out_shape(), c.y_dtype(), &r);
    EXPECT_EQ(r.got, r.want);
    bool named = false;
    for (const std::string& name : r.dispatches) named |= name.find(want_dispatch_) != std::string::npos;
    EXPECT_TRUE(named) << want_dispatch_;
  }
  // Not QLinearConv's form: the f32 steps stay, and the compile says why.
  const std::pair<QdqConv::Variant, const char*> refused[] = {
      {QdqConv::Variant::kBiasScaleOff, "the bias's scale is not x_scale * w_scale"},
      {QdqConv::Variant::kRelu, "a Relu follows it before the QuantizeLinear"},
      {QdqConv::Variant::kConvOutputKept, "its output has readers other than one QuantizeLinear, or is a graph output"}};
  for (const auto& [v, why] : refused) {
    const QdqConv c({1, 8, 9, 9}, {16, 8, 3, 3}, 1, {1, 1}, {1, 1, 1, 1}, LOOM_DTYPE_U8, LOOM_DTYPE_U8, 61, v);
    std::vector<uint8_t> blob;
    const size_t logged = harness_.recorder().logs().size();
    ASSERT_EQ(compile_with(plugin_, c.graph().finish(), &blob), "ok");
    EXPECT_TRUE(logged_since(logged, std::string("(Conv): f32 between DequantizeLinear and QuantizeLinear: ") + why))
        << why;
    BlobProgram prog;
    std::string error;
    ASSERT_TRUE(decode(blob.data(), blob.size(), &prog, &error)) << error;
    size_t qconvs = 0, quantizes = 0;
    for (const BlobDispatch& d : prog.dispatches) {
      qconvs += d.kernel == Kernel::kQConv;
      quantizes += d.kernel == Kernel::kQuantize;
    }
    EXPECT_EQ(qconvs, 0u) << static_cast<int>(v);
    EXPECT_EQ(quantizes, 1u) << static_cast<int>(v);
  }
  // One dequantized x read by two convolutions, both fused: its
  // DequantizeLinear goes too.
  {
    GraphBuilder g;
    const QOperand x = qrandom8({1, 4, 5, 5}, LOOM_DTYPE_U8, 64);
    const int xq = g.input(x.shape, gfb::DType::u8);
    auto scalar = [&](const QOperand& o) { return g.constant(o.shape, static_cast<gfb::DType>(o.dtype), o.bytes.data(), o.bytes.size()); };
    const int xs = scalar(qf32({}, {0.02f})), xz = scalar(qint({}, LOOM_DTYPE_U8, {128}));
    const int xf = g.tensor(x.shape);
    g.node("DequantizeLinear", {xq, xs, xz}, {xf});
    for (uint32_t k = 0; k < 2; ++k) {
      const QOperand w = qrandom8({3, 4, 1, 1}, LOOM_DTYPE_I8, 65 + k, true);
      const int wq = scalar(w), ws = scalar(qf32({}, {0.01f})), wz = scalar(qint({}, LOOM_DTYPE_I8, {0}));
      const int wf = g.tensor(w.shape), yf = g.tensor({1, 3, 5, 5}), yq = g.tensor({1, 3, 5, 5}, gfb::DType::u8);
      g.node("DequantizeLinear", {wq, ws, wz}, {wf});
      g.node("Conv", {xf, wf}, {yf});
      g.node("QuantizeLinear", {yf, scalar(qf32({}, {0.1f})), scalar(qint({}, LOOM_DTYPE_U8, {100}))}, {yq});
      g.output(yq);
    }
    std::vector<uint8_t> blob;
    ASSERT_EQ(compile_with(plugin_, g.finish(), &blob), "ok");
    BlobProgram prog;
    std::string error;
    ASSERT_TRUE(decode(blob.data(), blob.size(), &prog, &error)) << error;
    ASSERT_EQ(prog.dispatches.size(), 2u);
    for (const BlobDispatch& d : prog.dispatches) EXPECT_EQ(d.kernel, Kernel::kQConv);
  }
}

// DequantizeLinear -> MatMul / Gemm -> QuantizeLinear, as quantizers write
// them, fused the same way: a MatMul of rank-3 A and a per-column s8 B is
// QLinearMatMul's bytes; a Gemm with transB and an i32 bias is a 1x1
// QLinearConv's (the same arithmetic, the reference kernel's). alpha 2
// keeps the f32 steps.
TEST_P(VulkanInt8Conv, DequantizeMatMulQuantizeIsOneQConvEqualToTheReference) {
  LOOM_VK_REQUIRE_INT8_DEVICE();
  const float a_scale = 0.03f;
  const std::vector<float> b_scales = {0.01f, 0.004f, 0.02f, 0.007f};
  auto add = [](GraphBuilder* g, const QOperand& o) {
    const auto fb = static_cast<gfb::DType>(o.dtype);
    return o.constant ? g->constant(o.shape, fb, o.bytes.data(), o.bytes.size()) : g->input(o.shape, fb);
  };
  // MatMul: A [2, 3, 6] u8, B [6, 4] i8 per column (axis 1).
  {
    const std::vector<QOperand> ops = {
        qrandom8({2, 3, 6}, LOOM_DTYPE_U8, 71), qf32({}, {a_scale}), qint({}, LOOM_DTYPE_U8, {129}),
        qrandom8({6, 4}, LOOM_DTYPE_I8, 72, true), qf32({4}, b_scales), qint({4}, LOOM_DTYPE_I8, {0, 0, 0, 0}),
        qf32({}, {0.1f}), qint({}, LOOM_DTYPE_U8, {126})};
    GraphBuilder g;
    std::vector<int> t;
    for (const QOperand& o : ops) t.push_back(add(&g, o));
    const int af = g.tensor({2, 3, 6}), bf = g.tensor({6, 4}), yf = g.tensor({2, 3, 4});
    const int yq = g.tensor({2, 3, 4}, gfb::DType::u8);
    g.node("DequantizeLinear", {t[0], t[1], t[2]}, {af});
    g.node("DequantizeLinear", {t[3], t[4], t[5]}, {bf}, {attr_i("axis", 1)});
    g.node("MatMul", {af, bf}, {yf});
    g.node("QuantizeLinear", {yf, t[6], t[7]}, {yq});
    g.output(yq);
    std::vector<uint8_t> blob;
    const size_t logged = harness_.recorder().logs().size();
    ASSERT_EQ(compile_with(plugin_, g.finish(), &blob), "ok");
    EXPECT_TRUE(logged_since(logged, "(MatMul): int8 (one qconv"));
    BlobProgram prog;
    std::string error;
    ASSERT_TRUE(decode(blob.data(), blob.size(), &prog, &error)) << error;
    ASSERT_EQ(prog.dispatches.size(), 1u);
    EXPECT_EQ(prog.dispatches[0].kernel, Kernel::kQConv);
    Outcome r;
    r.format = blob_version(blob.data(), blob.size());
    r.want = reference("QLinearMatMul", ops, {2, 3, 4}, LOOM_DTYPE_U8, {}, 13);
    run_on_device(blob, ops, {0}, {2, 3, 4}, LOOM_DTYPE_U8, &r);
    EXPECT_EQ(r.got, r.want);
  }
  // Gemm: A [5, 6] i8, B [4, 6] i8 with transB (per row, axis 0), an i32
  // bias at a_scale * b_scale; alpha 1 fuses, alpha 2 does not.
  for (float alpha : {1.0f, 2.0f}) {
    std::vector<float> bias_scales;
    for (float b : b_scales) bias_scales.push_back(a_scale * b);
    const QOperand a = qrandom8({5, 6}, LOOM_DTYPE_I8, 73), b = qrandom8({4, 6}, LOOM_DTYPE_I8, 74, true);
    const QOperand bias = qint({4}, LOOM_DTYPE_I32, {300, -1200, 0, 45});
    const std::vector<QOperand> ops = {a, qf32({}, {a_scale}), qint({}, LOOM_DTYPE_I8, {-3}), b, qf32({4}, b_scales),
                                       qint({4}, LOOM_DTYPE_I8, {0, 0, 0, 0}), qf32({}, {0.05f}),
                                       qint({}, LOOM_DTYPE_I8, {4}), bias};
    GraphBuilder g;
    std::vector<int> t;
    for (const QOperand& o : ops) t.push_back(add(&g, o));
    const int bs = add(&g, qf32({4}, bias_scales));
    const int af = g.tensor({5, 6}), bf = g.tensor({4, 6}), cf = g.tensor({4}), yf = g.tensor({5, 4});
    const int yq = g.tensor({5, 4}, gfb::DType::i8);
    g.node("DequantizeLinear", {t[0], t[1], t[2]}, {af});
    g.node("DequantizeLinear", {t[3], t[4], t[5]}, {bf}, {attr_i("axis", 0)});
    g.node("DequantizeLinear", {t[8], bs}, {cf}, {attr_i("axis", 0)});
    g.node("Gemm", {af, bf, cf}, {yf}, {attr_i("transB", 1), attr_f("alpha", alpha)});
    g.node("QuantizeLinear", {yf, t[6], t[7]}, {yq});
    g.output(yq);
    std::vector<uint8_t> blob;
    const size_t logged = harness_.recorder().logs().size();
    ASSERT_EQ(compile_with(plugin_, g.finish(), &blob), "ok");
    BlobProgram prog;
    std::string error;
    ASSERT_TRUE(decode(blob.data(), blob.size(), &prog, &error)) << error;
    if (alpha != 1.0f) {
      EXPECT_TRUE(logged_since(logged, "(Gemm): f32 between DequantizeLinear and QuantizeLinear: alpha or beta"));
      EXPECT_GT(prog.dispatches.size(), 1u);
      continue;
    }
    EXPECT_TRUE(logged_since(logged, "(Gemm): int8 (one qconv"));
    ASSERT_EQ(prog.dispatches.size(), 1u);
    EXPECT_EQ(prog.dispatches[0].kernel, Kernel::kQConv);
    // The reference: QLinearConv of A as [5, 6, 1, 1] and B as [4, 6, 1, 1].
    std::vector<QOperand> conv_ops = ops;
    conv_ops[0].shape = {5, 6, 1, 1};
    conv_ops[3].shape = {4, 6, 1, 1};
    Outcome r;
    r.format = blob_version(blob.data(), blob.size());
    r.want = reference("QLinearConv", conv_ops, {5, 4, 1, 1}, LOOM_DTYPE_I8, {}, 13);
    run_on_device(blob, ops, {0}, {5, 4}, LOOM_DTYPE_I8, &r);
    EXPECT_EQ(r.got, r.want);
  }
}

TEST_P(VulkanInt8Conv, ConvIntegerEqualsTheReference) {
  LOOM_VK_REQUIRE_INT8_DEVICE();
  expect_equal("ConvInteger",
               {qrandom8({1, 3, 5, 5}, LOOM_DTYPE_U8, 41), qrandom8({4, 3, 3, 3}, LOOM_DTYPE_U8, 42, true),
                qint({}, LOOM_DTYPE_U8, {77}), qint({4}, LOOM_DTYPE_U8, {0, 1, 128, 255})},
               {1, 4, 5, 5}, LOOM_DTYPE_I32, conv_attrs(1, {1, 1}, {1, 1}, {1, 1, 1, 1}), 10);
  expect_equal("ConvInteger", {qrandom8({1, 4, 4, 4}, LOOM_DTYPE_I8, 43), qrandom8({2, 2, 2, 2}, LOOM_DTYPE_I8, 44, true)},
               {1, 2, 2, 2}, LOOM_DTYPE_I32, conv_attrs(2, {2, 2}, {1, 1}, {0, 0, 0, 0}), 10);
}

TEST_P(VulkanInt8Conv, QLinearMatMulAndMatMulIntegerEqualTheReference) {
  LOOM_VK_REQUIRE_INT8_DEVICE();
  // A of rank 3 (rows flattened), a constant B, per-column b scales and
  // zero points, an odd y zero point; multipliers that keep part of the
  // outputs inside the range.
  expect_equal("QLinearMatMul",
               {qrandom8({2, 3, 6}, LOOM_DTYPE_U8, 51), qf32({}, {0.02f}), qint({}, LOOM_DTYPE_U8, {129}),
                qrandom8({6, 4}, LOOM_DTYPE_I8, 52, true), qf32({4}, {0.01f, 0.05f, 0.002f, 0.5f}),
                qint({4}, LOOM_DTYPE_I8, {0, 3, -2, 1}), qf32({}, {0.1f}), qint({}, LOOM_DTYPE_U8, {127})},
               {2, 3, 4}, LOOM_DTYPE_U8);
  // Ties: A's rows times B = [1; 0] and [-1; 0] with multiplier 0.5.
  std::vector<int64_t> a(24);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int64_t>(i) - 12;
  expect_equal("QLinearMatMul",
               {qint({12, 2}, LOOM_DTYPE_I8, a, false), qf32({}, {0.5f}), qint({}, LOOM_DTYPE_I8, {0}),
                qint({2, 2}, LOOM_DTYPE_I8, {1, -1, 0, 0}), qf32({}, {1.0f}), qint({}, LOOM_DTYPE_I8, {0}),
                qf32({}, {1.0f}), qint({}, LOOM_DTYPE_I8, {-7})},
               {12, 2}, LOOM_DTYPE_I8);
  expect_equal("MatMulInteger",
               {qrandom8({3, 7}, LOOM_DTYPE_I8, 53), qrandom8({7, 5}, LOOM_DTYPE_U8, 54, true),
                qint({}, LOOM_DTYPE_I8, {-4}), qint({5}, LOOM_DTYPE_U8, {0, 1, 128, 255, 9})},
               {3, 5}, LOOM_DTYPE_I32, {}, 10);
  // B given at run time, no zero points.
  expect_equal("MatMulInteger", {qrandom8({3, 7}, LOOM_DTYPE_I8, 55), qrandom8({7, 5}, LOOM_DTYPE_I8, 56)}, {3, 5},
               LOOM_DTYPE_I32, {}, 10);
  // A batched B is declined.
  const Outcome r = run_node("MatMulInteger",
                             {qrandom8({2, 3, 7}, LOOM_DTYPE_U8, 57), qrandom8({2, 7, 5}, LOOM_DTYPE_U8, 58, true)},
                             {2, 3, 5}, LOOM_DTYPE_I32, {}, 10);
  EXPECT_FALSE(r.claimed);
  EXPECT_NE(r.compile.find("vulkan-compute runs A of rank >= 2 with a 2-D B"), std::string::npos) << r.compile;
}

// DequantizeLinear x 2 -> Add / Mul -> QuantizeLinear fused into one
// qbinary (format 5) gives ONNX Runtime's QLinearAdd / QLinearMul bytes:
// every pair of bytes, in the 63 cases of the frozen peer fixture cpu-simd's
// qadd is tested on (tests/unit/cpu_simd/fixtures: the outputs where ONNX
// Runtime differs from the unfused steps; the others are the reference
// kernels' unfused bytes), same shapes and broadcasts (vv, sb, sa).
TEST_F(VulkanInt8, DequantizedAddAndMulAreOneQBinaryWithOnnxRuntimesBytes) {
  LOOM_VK_REQUIRE_DEVICE();
  const auto& cases = ::loom::cpu_simd::fixtures::ort_qlinear_binary_cases();
  ASSERT_EQ(cases.size(), 63u);
  std::vector<int64_t> rows(65536), cols(65536), col(256);
  for (size_t k = 0; k < 65536; ++k) {
    rows[k] = static_cast<int64_t>(k / 256);
    cols[k] = static_cast<int64_t>(k % 256);
  }
  for (size_t k = 0; k < 256; ++k) col[k] = static_cast<int64_t>(k);
  const QOperand full_i = qint({1, 256, 256}, LOOM_DTYPE_U8, rows, false);
  const QOperand full_j = qint({1, 256, 256}, LOOM_DTYPE_U8, cols, false);
  const QOperand column = qint({1, 256, 1}, LOOM_DTYPE_U8, col, false);
  const Dims ys = {1, 256, 256};
  size_t patched = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.op << " " << c.kind << " scales " << c.a_scale << " " << c.b_scale << " "
                                      << c.y_scale << " zero points " << c.a_zero << " " << c.b_zero << " "
                                      << c.y_zero);
    const std::string kind = c.kind;
    const QOperand& a = kind == "vv" ? full_i : kind == "sb" ? full_j : column;
    const QOperand& b = kind == "sb" ? column : full_j;
    const std::vector<QOperand> ops = {a, b, qf32({}, {c.a_scale}), qint({}, LOOM_DTYPE_U8, {c.a_zero}),
                                       qf32({}, {c.b_scale}), qint({}, LOOM_DTYPE_U8, {c.b_zero}),
                                       qf32({}, {c.y_scale}), qint({}, LOOM_DTYPE_U8, {c.y_zero})};
    GraphBuilder g;
    std::vector<int> t;
    for (const QOperand& o : ops) {
      const auto fb = static_cast<gfb::DType>(o.dtype);
      t.push_back(o.constant ? g.constant(o.shape, fb, o.bytes.data(), o.bytes.size()) : g.input(o.shape, fb));
    }
    const int af = g.tensor(a.shape), bf = g.tensor(b.shape), yf = g.tensor(ys), yq = g.tensor(ys, gfb::DType::u8);
    g.node("DequantizeLinear", {t[0], t[2], t[3]}, {af});
    g.node("DequantizeLinear", {t[1], t[4], t[5]}, {bf});
    g.node(c.op, {af, bf}, {yf});
    g.node("QuantizeLinear", {yf, t[6], t[7]}, {yq});
    g.output(yq);
    std::vector<uint8_t> blob;
    const size_t logged = harness_.recorder().logs().size();
    ASSERT_EQ(compile_with(plugin_, g.finish(), &blob), "ok");
    EXPECT_TRUE(logged_since(logged, std::string("int8 (one qbinary on the bytes, ONNX Runtime's QLinear") + c.op));
    BlobProgram prog;
    std::string error;
    ASSERT_TRUE(decode(blob.data(), blob.size(), &prog, &error)) << error;
    ASSERT_EQ(prog.dispatches.size(), 1u);
    EXPECT_EQ(prog.dispatches[0].kernel, Kernel::kQBinary);
    // The unfused steps on the reference kernels, then ONNX Runtime's bytes
    // where they differ.
    std::vector<uint8_t> ra = reference("DequantizeLinear", {a, ops[2], ops[3]}, a.shape, LOOM_DTYPE_F32, {}, 13);
    std::vector<uint8_t> rb = reference("DequantizeLinear", {b, ops[4], ops[5]}, b.shape, LOOM_DTYPE_F32, {}, 13);
    QOperand fa{a.shape, LOOM_DTYPE_F32, ra, false}, fb{b.shape, LOOM_DTYPE_F32, rb, false};
    std::vector<uint8_t> rs = reference(c.op, {fa, fb}, ys, LOOM_DTYPE_F32, {}, 13);
    Outcome r;
    r.format = blob_version(blob.data(), blob.size());
    r.want = reference("QuantizeLinear", {QOperand{ys, LOOM_DTYPE_F32, rs, false}, ops[6], ops[7]}, ys, LOOM_DTYPE_U8,
                       {}, 13);
    for (const auto& [index, value] : c.differs) {
      ASSERT_LT(index, r.want.size());
      r.want[index] = value;
    }
    patched += c.differs.size();
    run_on_device(blob, ops, {0, 1}, ys, LOOM_DTYPE_U8, &r);
    size_t wrong = 0;
    for (size_t k = 0; k < r.want.size(); ++k) {
      if (r.got[k] != r.want[k] && wrong++ < 4) {
        ADD_FAILURE() << "output (" << k / 256 << ", " << k % 256 << "): " << int(r.got[k]) << ", ONNX Runtime "
                      << int(r.want[k]);
      }
    }
    EXPECT_EQ(wrong, 0u);
  }
  EXPECT_EQ(patched, 835u);
}

TEST_F(VulkanInt8, UnsupportedQuantizationIsDeclinedWithItsReason) {
  LOOM_VK_REQUIRE_DEVICE();
  const Dims shape = {2, 4};
  const std::vector<float> x(8, 1.0f);
  auto declined = [&](const Outcome& r, const std::string& reason) {
    EXPECT_FALSE(r.claimed) << reason;
    EXPECT_NE(r.compile.find(reason), std::string::npos) << r.compile;
  };
  // A 16-bit zero point (ONNX opset 21 allows u16/i16).
  declined(run_node("QuantizeLinear", {qf32(shape, x, false), qf32({}, {1.0f}), qint({}, LOOM_DTYPE_U16, {3})},
                    shape, LOOM_DTYPE_U16, {}, 21),
           "the zero point is u16");
  // Blocked quantization.
  declined(run_node("QuantizeLinear",
                    {qf32(shape, x, false), qf32({2, 2}, {1.f, 1.f, 1.f, 1.f}), qint({2, 2}, LOOM_DTYPE_U8, {0, 0, 0, 0})},
                    shape, LOOM_DTYPE_U8, {attr_i("axis", 1), attr_i("block_size", 2)}, 21),
           "blocked quantization (block_size 2)");
  // A zero point of another shape than its scale (the reference kernels
  // refuse it).
  declined(run_node("QuantizeLinear",
                    {qf32(shape, x, false), qf32({4}, {1.f, 1.f, 1.f, 1.f}), qint({}, LOOM_DTYPE_U8, {0})}, shape,
                    LOOM_DTYPE_U8, {attr_i("axis", 1)}),
           "the zero point has shape [], the scale [4]");
  // A scale given at run time.
  declined(run_node("DequantizeLinear", {qint(shape, LOOM_DTYPE_U8, {1, 2, 3, 4, 5, 6, 7, 8}, false),
                                         qf32({}, {1.0f}, false)},
                    shape, LOOM_DTYPE_F32),
           "the scale is not an inline constant");
  // A plugin without devices (compile-only) cannot vouch for the features.
  declined(run_node("QuantizeLinear", {qf32(shape, x, false), qf32({}, {1.0f})}, shape, LOOM_DTYPE_U8, {}, 13,
                    compiler_),
           "no Vulkan device of this plugin runs the int8 kernels");
}

TEST_F(VulkanInt8, ADeviceWithoutTheFeaturesDeclinesAndRefusesInt8Blobs) {
  LOOM_VK_REQUIRE_DEVICE({"vulkan.hide_features", "shaderFloat64,storageBuffer8BitAccess"});
  loom_device_info_t info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(take(api_, api_->device_info(device_, &info)), "ok");
  EXPECT_EQ(std::string(info.name).find("int8 kernels"), std::string::npos) << info.name;
  EXPECT_EQ(info.dtype_mask, LOOM_DTYPE_BIT(LOOM_DTYPE_F32));
  const Dims shape = {4};
  const Outcome r = run_node("QuantizeLinear", {qf32(shape, {1, 2, 3, 4}, false), qf32({}, {1.0f})}, shape,
                             LOOM_DTYPE_U8);
  EXPECT_FALSE(r.claimed);
  EXPECT_NE(r.compile.find("lacks storageBuffer8BitAccess, shaderFloat64, which the int8 kernels need"),
            std::string::npos)
      << r.compile;
  // A format-4 blob from a device that has them is refused by name here.
  BlobProgram p;
  for (auto [kind, dtype] : {std::pair{TensorKind::kInput, DType::kF32}, std::pair{TensorKind::kConstant, DType::kF32},
                             std::pair{TensorKind::kOutput, DType::kU8}}) {
    BlobTensor t;
    t.kind = kind;
    t.dtype = dtype;
    t.shape = kind == TensorKind::kConstant ? std::vector<int64_t>{2} : std::vector<int64_t>{4};
    p.tensors.push_back(t);
  }
  p.data.assign(8, 0);
  p.inputs = {0};
  p.outputs = {2};
  p.dispatches.push_back(make_quantize(0, 1, 2, 4, 1, 1, false));
  const std::vector<uint8_t> blob = encode(p);
  ASSERT_EQ(blob_version(blob.data(), blob.size()), kInt8FormatVersion);
  EXPECT_EQ(harness_.check(device_, kLoaderKey, kInt8FormatVersion, blob.data(), blob.size()),
            code_prefix(LOOM_STATUS_INCOMPATIBLE) + "vulkan-compute://0 (" +
                std::string(info.name).substr(0, std::string(info.name).find(" [")) +
                ") lacks storageBuffer8BitAccess, shaderFloat64, which the blob's int8 kernels need");
  // And a newer format than this plugin reads is refused by its number.
  EXPECT_EQ(harness_.check(device_, kLoaderKey, kFormatVersion + 1, blob.data(), blob.size()),
            code_prefix(LOOM_STATUS_INCOMPATIBLE) + "vulkan-compute reads blob formats 1 to 5, the program records format 6");
}

TEST_F(VulkanInt8, HideFeaturesOptionIsChecked) {
  std::string error;
  EXPECT_EQ(create({{"vulkan.hide_features", "shaderInt8,fastMath"}}, &error), nullptr);
  EXPECT_NE(error.find("\"fastMath\" is not one of shaderInt8"), std::string::npos) << error;
}

}  // namespace
}  // namespace loom::vulkan::test
