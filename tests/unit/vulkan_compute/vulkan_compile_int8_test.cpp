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
// multiply-adds); the device's trace names the kernel that ran. The fused
// QDQ forms are in vulkan_compile_qdq_test.cpp; the fixture in
// vulkan_int8_harness.hpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "vulkan_int8_harness.hpp"

namespace loom::vulkan::test {
namespace {

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

TEST_F(VulkanInt8, UnsupportedQuantizationIsDeclinedWithItsReason) {
  LOOM_VK_REQUIRE_DEVICE();
  const Dims shape = {2, 4};
  const std::vector<float> x(8, 1.0f);
  // Each decline is also a compile note with its reason (`loom compile`
  // prints them), logged by compile_supported.
  size_t logged = harness_.recorder().logs().size();
  auto declined = [&](const Outcome& r, const std::string& reason) {
    EXPECT_FALSE(r.claimed) << reason;
    EXPECT_NE(r.compile.find(reason), std::string::npos) << r.compile;
    EXPECT_TRUE(noted_since(logged, "declined", "Linear): " + reason)) << reason;
    logged = harness_.recorder().logs().size();
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
  // So is an open-shape blob (format 3, the graph itself) with a quantized
  // node: its nodes lower only where the device runs the int8 kernels.
  {
    GraphBuilder g;
    const int x = g.input({-1, 4});
    const int scale = g.constant_f32({}, {0.5f});
    const int y = g.tensor({-1, 4}, gfb::DType::u8);
    g.node("QuantizeLinear", {x, scale}, {y}, {}, 13);
    g.output(y);
    const std::vector<uint8_t> graph = g.finish();
    const std::vector<uint8_t> open = encode_open(graph.data(), graph.size());
    const std::string refused = harness_.check(device_, kLoaderKey, kOpenFormatVersion, open.data(), open.size());
    EXPECT_EQ(refused.rfind(code_prefix(LOOM_STATUS_INCOMPATIBLE) + "vulkan-compute open blob rejected: ", 0), 0u)
        << refused;
    EXPECT_NE(refused.find("(QuantizeLinear) is not supported by vulkan-compute: vulkan-compute://0 ("), std::string::npos)
        << refused;
    EXPECT_NE(refused.find("lacks storageBuffer8BitAccess, shaderFloat64, which the int8 kernels need"),
              std::string::npos)
        << refused;
  }
  // And a newer format than this plugin reads is refused by its number.
  EXPECT_EQ(harness_.check(device_, kLoaderKey, kFormatVersion + 1, blob.data(), blob.size()),
            code_prefix(LOOM_STATUS_INCOMPATIBLE) + "vulkan-compute reads blob formats 1 to 6, the program records format 7");
}

TEST_F(VulkanInt8, HideFeaturesOptionIsChecked) {
  std::string error;
  EXPECT_EQ(create({{"vulkan.hide_features", "shaderInt8,fastMath"}}, &error), nullptr);
  EXPECT_NE(error.find("\"fastMath\" is not one of shaderInt8"), std::string::npos) << error;
}

}  // namespace
}  // namespace loom::vulkan::test
