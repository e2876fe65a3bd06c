// vulkan-compute's fusion of the QDQ forms quantizers write
// (src/fuse_qdq.cpp), compiled by the device plugin and run on the first
// Vulkan device (lavapipe in CI): DequantizeLinear -> Conv / MatMul / Gemm
// -> QuantizeLinear as one qconv (with and without integer dot products),
// DequantizeLinear x 2 -> Add / Mul -> QuantizeLinear as one qbinary with
// ONNX Runtime's bytes, what stays f32 and the compile notes saying why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "../cpu_simd/fixtures/ort_qlinear_binary.hpp"
#include "vulkan_int8_harness.hpp"

namespace loom::vulkan::test {
namespace {

class VulkanQdq : public VulkanInt8Conv {};
INSTANTIATE_TEST_SUITE_P(Kernels, VulkanQdq, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "IntegerDot" : "PlainMultiplyAdd";
                         });
class VulkanQdqBinary : public VulkanInt8 {};

// The QDQ form quantizers write: DequantizeLinear of x, of per-channel s8
// weights and of an i32 bias at scale x_scale * w_scale -> Conv ->
// QuantizeLinear. The compile fuses it into one qconv dispatch (format 5)
// whose bytes are QLinearConv's over the same operands (the reference
// kernel) but for the order of rounding and adding the output zero point
// (QuantizeLinear's here), which only an exact tie with an odd zero point
// tells apart: the zero points here are even (tests/onnx/vulkan_int8's
// test_vulkan_int8_qdq_conv_fused has the ties). A bias of
// another scale, a Relu between Conv and QuantizeLinear, or a Conv output
// that is also a graph output keep the f32 steps. `open_batch`: the graph
// leaves the batch dimension open (-1) in x and every tensor after it.
class QdqConv {
 public:
  enum class Variant { kFused, kBiasScaleOff, kRelu, kConvOutputKept };
  QdqConv(Dims xs, Dims ws, int64_t group, Dims strides, Dims pads, loom_dtype_t xt, loom_dtype_t yt, uint32_t seed,
          Variant v = Variant::kFused, bool open_batch = false)
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
    auto open = [&](Dims d) {
      if (open_batch) d[0] = -1;
      return d;
    };
    std::vector<int> t;
    for (size_t i = 0; i < ops_.size(); ++i) {
      QOperand o = ops_[i];
      if (i == 0) o.shape = open(o.shape);
      t.push_back(add(o));
    }
    const int bs = add(qf32({m}, b_scales));
    const int xf = g_.tensor(open(xs)), wf = g_.tensor(ws), bf = g_.tensor({m}), yf = g_.tensor(open(out_));
    const int yq = g_.tensor(open(out_), static_cast<gfb::DType>(yt));
    g_.node("DequantizeLinear", {t[0], t[1], t[2]}, {xf});
    g_.node("DequantizeLinear", {t[3], t[4], t[5]}, {wf}, {attr_i("axis", 0)});
    g_.node("DequantizeLinear", {t[8], bs}, {bf}, {attr_i("axis", 0)});
    g_.node("Conv", {xf, wf, bf}, {yf}, attrs_);
    int q_in = yf;
    if (v == Variant::kRelu) {
      q_in = g_.tensor(open(out_));
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

TEST_P(VulkanQdq, DequantizeConvQuantizeIsOneQConvEqualToQLinearConv) {
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
    EXPECT_TRUE(noted_since(logged, "int8", "(Conv): one qconv with its DequantizeLinear inputs and QuantizeLinear"));
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
    EXPECT_TRUE(noted_since(logged, "f32", std::string("(Conv): between DequantizeLinear and QuantizeLinear: ") + why))
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

// Exporters leave the batch open: the QDQ convolution of an open-shape
// graph is claimed whole (the quantize and dequantizes too, not left to
// the reference kernels), compiled into one format-3 blob, and fused into
// one qconv at every binding, with the static program's bytes and notes.
TEST_P(VulkanQdq, AnOpenBatchFusesAtEveryBinding) {
  LOOM_VK_REQUIRE_INT8_DEVICE();
  auto conv = [](int64_t batch, bool open) {
    return QdqConv({batch, 8, 9, 9}, {16, 8, 3, 3}, 1, {1, 1}, {1, 1, 1, 1}, LOOM_DTYPE_U8, LOOM_DTYPE_I8, 66,
                   QdqConv::Variant::kFused, open);
  };
  const std::vector<uint8_t> graph = conv(1, true).graph().finish();
  std::vector<bool> flags;
  ASSERT_EQ(harness_.supported(plugin_, graph, 5, &flags), "ok");
  ASSERT_EQ(flags.size(), 5u);
  for (size_t n = 0; n < flags.size(); ++n) EXPECT_TRUE(flags[n]) << "node " << n;
  std::vector<uint8_t> blob;
  const size_t logged = harness_.recorder().logs().size();
  ASSERT_EQ(compile_with(plugin_, graph, &blob), "ok");
  EXPECT_EQ(blob_version(blob.data(), blob.size()), kOpenFormatVersion);
  EXPECT_TRUE(noted_since(logged, "int8", "(Conv): one qconv with its DequantizeLinear inputs and QuantizeLinear"));
  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const QdqConv c = conv(batch, false);
    Outcome r;
    r.format = kOpenFormatVersion;
    r.want = reference("QLinearConv", c.operands(), c.out_shape(), c.y_dtype(), c.attrs(), 13);
    run_on_device(blob, c.operands(), {0}, c.out_shape(), c.y_dtype(), &r);
    EXPECT_EQ(r.got, r.want);
    // One qconv (after its packing with dot products), nothing quantizing
    // or dequantizing on its own (the trace has a begin and an end each).
    const std::set<std::string> names(r.dispatches.begin(), r.dispatches.end());
    size_t named = 0;
    for (const std::string& name : names) {
      named += name.size() >= want_dispatch_.size() &&
               name.compare(name.size() - want_dispatch_.size(), want_dispatch_.size(), want_dispatch_) == 0;
      EXPECT_EQ(name.find("Quantize"), std::string::npos) << name;
    }
    EXPECT_EQ(named, 1u) << want_dispatch_ << ::testing::PrintToString(r.dispatches);
  }
}

// DequantizeLinear -> MatMul / Gemm -> QuantizeLinear, as quantizers write
// them, fused the same way: a MatMul of rank-3 A and a per-column s8 B is
// QLinearMatMul's bytes; a Gemm with transB and an i32 bias is a 1x1
// QLinearConv's (the same arithmetic, the reference kernel's). alpha 2
// keeps the f32 steps.
TEST_P(VulkanQdq, DequantizeMatMulQuantizeIsOneQConvEqualToTheReference) {
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
    EXPECT_TRUE(noted_since(logged, "int8", "(MatMul): one qconv"));
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
      EXPECT_TRUE(noted_since(logged, "f32", "(Gemm): between DequantizeLinear and QuantizeLinear: alpha or beta"));
      EXPECT_GT(prog.dispatches.size(), 1u);
      continue;
    }
    EXPECT_TRUE(noted_since(logged, "int8", "(Gemm): one qconv"));
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

// DequantizeLinear x 2 -> Add / Mul -> QuantizeLinear fused into one
// qbinary (format 5) gives ONNX Runtime's QLinearAdd / QLinearMul bytes:
// every pair of bytes, in the 63 cases of the frozen peer fixture cpu-simd's
// qadd is tested on (tests/unit/cpu_simd/fixtures: the outputs where ONNX
// Runtime differs from the unfused steps; the others are the reference
// kernels' unfused bytes), same shapes and broadcasts (vv, sb, sa).
TEST_F(VulkanQdqBinary, DequantizedAddAndMulAreOneQBinaryWithOnnxRuntimesBytes) {
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
    EXPECT_TRUE(noted_since(logged, "int8", std::string("one qbinary on the bytes (ONNX Runtime's QLinear") + c.op));
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

// DequantizeLinear (x), DequantizeLinear (s8 weights, per output channel
// on axis 1 or per tensor), DequantizeLinear (i32 bias at x_scale *
// w_scale) -> ConvTranspose -> QuantizeLinear: one transposed qconv (format
// 6) whose bytes are the exact integer sum over the taps that reach each
// output, requantized as the fused convolutions are (float(acc + bias) *
// multiplier, rounded half to even, then the zero point), which is what
// cpu-simd's int8 ConvTranspose computes; within 1 unit of the unfused f32
// steps on the reference kernels.
TEST_F(VulkanQdqBinary, DequantizeConvTransposeQuantizeIsOneTransposedQConv) {
  LOOM_VK_REQUIRE_DEVICE();
  struct Case {
    Dims xs, ws;  // x [N, C, H, W]; w [C, M / group, KH, KW]
    int64_t group;
    Dims strides, pads;
    loom_dtype_t xt, yt;
    bool per_channel;
  };
  const Case cases[] = {
      {{1, 6, 5, 5}, {6, 4, 4, 4}, 1, {2, 2}, {1, 1, 1, 1}, LOOM_DTYPE_U8, LOOM_DTYPE_I8, true},  // the detector's
      {{2, 4, 4, 3}, {4, 3, 3, 3}, 2, {2, 3}, {1, 0, 0, 1}, LOOM_DTYPE_I8, LOOM_DTYPE_U8, false},
  };
  uint32_t seed = 80;
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + std::to_string(seed - 80));
    const int64_t n = c.xs[0], ch = c.xs[1], h = c.xs[2], w = c.xs[3], mg = c.ws[1], kh = c.ws[2], kw = c.ws[3];
    const int64_t m = mg * c.group, cg = ch / c.group;
    const int64_t oh = (h - 1) * c.strides[0] - c.pads[0] - c.pads[2] + kh;
    const int64_t ow = (w - 1) * c.strides[1] - c.pads[1] - c.pads[3] + kw;
    const Dims ys = {n, m, oh, ow};
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> scale(0.002f, 0.02f);
    const float x_scale = 0.03f, y_scale = 0.07f;
    const int64_t xz = c.xt == LOOM_DTYPE_U8 ? 131 : -5, yz = c.yt == LOOM_DTYPE_U8 ? 119 : 3;
    std::vector<float> w_scales(c.per_channel ? static_cast<size_t>(m) : 1), b_scales(static_cast<size_t>(m));
    for (float& v : w_scales) v = scale(rng);
    std::vector<int64_t> bias(static_cast<size_t>(m));
    for (size_t k = 0; k < bias.size(); ++k) {
      b_scales[k] = x_scale * w_scales[c.per_channel ? k : 0];
      bias[k] = static_cast<int64_t>(rng() % 4001) - 2000;
    }
    const QOperand x = qrandom8(c.xs, c.xt, seed + 1), wq = qrandom8(c.ws, LOOM_DTYPE_I8, seed + 2, true);
    const Dims sd = c.per_channel ? Dims{m} : Dims{};
    const std::vector<QOperand> ops = {x, qf32({}, {x_scale}), qint({}, c.xt, {xz}), wq, qf32(sd, w_scales),
                                       qint(sd, LOOM_DTYPE_I8, std::vector<int64_t>(w_scales.size(), 0)),
                                       qint({m}, LOOM_DTYPE_I32, bias), qf32({m}, b_scales), qf32({}, {y_scale}),
                                       qint({}, c.yt, {yz})};
    const std::vector<Attr> attrs = conv_attrs(c.group, c.strides, {1, 1}, c.pads);
    GraphBuilder g;
    std::vector<int> t;
    for (const QOperand& o : ops) {
      const auto fb = static_cast<gfb::DType>(o.dtype);
      t.push_back(o.constant ? g.constant(o.shape, fb, o.bytes.data(), o.bytes.size()) : g.input(o.shape, fb));
    }
    const int xf = g.tensor(c.xs), wf = g.tensor(c.ws), bf = g.tensor({m}), yf = g.tensor(ys);
    const int yq = g.tensor(ys, static_cast<gfb::DType>(c.yt));
    g.node("DequantizeLinear", {t[0], t[1], t[2]}, {xf});
    g.node("DequantizeLinear", {t[3], t[4], t[5]}, {wf}, {attr_i("axis", 1)});
    g.node("DequantizeLinear", {t[6], t[7]}, {bf}, {attr_i("axis", 0)});
    g.node("ConvTranspose", {xf, wf, bf}, {yf}, attrs);
    g.node("QuantizeLinear", {yf, t[8], t[9]}, {yq});
    g.output(yq);
    std::vector<uint8_t> blob;
    const size_t logged = harness_.recorder().logs().size();
    ASSERT_EQ(compile_with(plugin_, g.finish(), &blob), "ok");
    EXPECT_TRUE(noted_since(logged, "int8", "(ConvTranspose): one transposed qconv with its DequantizeLinear inputs"));
    ASSERT_EQ(blob_version(blob.data(), blob.size()), kQDeconvFormatVersion);
    BlobProgram prog;
    std::string error;
    ASSERT_TRUE(decode(blob.data(), blob.size(), &prog, &error)) << error;
    ASSERT_EQ(prog.dispatches.size(), 1u);
    EXPECT_TRUE(qconv_transposed(prog.dispatches[0]));
    // The exact sum, requantized.
    auto value = [](const QOperand& o, size_t i) {
      return o.dtype == LOOM_DTYPE_U8 ? int64_t{o.bytes[i]} : int64_t{static_cast<int8_t>(o.bytes[i])};
    };
    Outcome r;
    r.want.assign(static_cast<size_t>(n * m * oh * ow), 0);
    for (int64_t in = 0; in < n; ++in) {
      for (int64_t oc = 0; oc < m; ++oc) {
        const int64_t grp = oc / mg, om = oc % mg;
        const float ws = w_scales[c.per_channel ? static_cast<size_t>(oc) : 0];
        const float multiplier = x_scale * ws / y_scale;
        for (int64_t y0 = 0; y0 < oh; ++y0) {
          for (int64_t x0 = 0; x0 < ow; ++x0) {
            int64_t acc = 0;
            for (int64_t a = 0; a < kh; ++a) {
              const int64_t hn = y0 + c.pads[0] - a;
              if (hn < 0 || hn % c.strides[0] != 0 || hn / c.strides[0] >= h) continue;
              for (int64_t b = 0; b < kw; ++b) {
                const int64_t wn = x0 + c.pads[1] - b;
                if (wn < 0 || wn % c.strides[1] != 0 || wn / c.strides[1] >= w) continue;
                for (int64_t k = 0; k < cg; ++k) {
                  const int64_t ic = grp * cg + k;
                  const auto xi = static_cast<size_t>(((in * ch + ic) * h + hn / c.strides[0]) * w + wn / c.strides[1]);
                  const auto wi = static_cast<size_t>(((ic * mg + om) * kh + a) * kw + b);
                  acc += (value(x, xi) - xz) * value(wq, wi);
                }
              }
            }
            const float scaled = static_cast<float>(static_cast<double>(acc + bias[static_cast<size_t>(oc)])) * multiplier;
            const int64_t lo = c.yt == LOOM_DTYPE_U8 ? 0 : -128, hi = c.yt == LOOM_DTYPE_U8 ? 255 : 127;
            const int64_t q = std::clamp(static_cast<int64_t>(std::nearbyint(scaled)) + yz, lo, hi);
            r.want[static_cast<size_t>(((in * m + oc) * oh + y0) * ow + x0)] = static_cast<uint8_t>(q & 255);
          }
        }
      }
    }
    r.format = kQDeconvFormatVersion;
    run_on_device(blob, ops, {0}, ys, c.yt, &r);
    EXPECT_EQ(r.got, r.want);
    const std::set<std::string> names(r.dispatches.begin(), r.dispatches.end());
    EXPECT_EQ(names, (std::set<std::string>{"dispatch #0 QConvTranspose"}));
    // The unfused f32 steps on the reference kernels: within 1 unit.
    auto f32_of = [](const Dims& shape, const std::vector<uint8_t>& bytes) {
      QOperand o{shape, LOOM_DTYPE_F32, bytes, false};
      return o;
    };
    const QOperand xd = f32_of(c.xs, reference("DequantizeLinear", {ops[0], ops[1], ops[2]}, c.xs, LOOM_DTYPE_F32, {}, 13));
    const QOperand wd =
        f32_of(c.ws, reference("DequantizeLinear", {ops[3], ops[4], ops[5]}, c.ws, LOOM_DTYPE_F32, {attr_i("axis", 1)}, 13));
    const QOperand bd = f32_of({m}, reference("DequantizeLinear", {ops[6], ops[7]}, {m}, LOOM_DTYPE_F32, {attr_i("axis", 0)}, 13));
    const QOperand yd = f32_of(ys, reference("ConvTranspose", {xd, wd, bd}, ys, LOOM_DTYPE_F32, attrs, 13));
    const std::vector<uint8_t> unfused = reference("QuantizeLinear", {yd, ops[8], ops[9]}, ys, c.yt, {}, 13);
    size_t differ = 0;
    for (size_t i = 0; i < unfused.size(); ++i) {
      const int a = c.yt == LOOM_DTYPE_U8 ? int{r.got[i]} : int{static_cast<int8_t>(r.got[i])};
      const int b = c.yt == LOOM_DTYPE_U8 ? int{unfused[i]} : int{static_cast<int8_t>(unfused[i])};
      EXPECT_LE(std::abs(a - b), 1) << "element " << i;
      differ += a != b;
    }
    EXPECT_LT(differ, unfused.size() / 10);
    ++seed;
  }
}

}  // namespace
}  // namespace loom::vulkan::test
