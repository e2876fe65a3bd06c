// Quantized steps in a chain: a QLinearConv of u8 x reads and writes
// channels-last (NHWC), and so do the per-tensor QuantizeLinear /
// DequantizeLinear and the f32 steps between two of them, so that no tensor
// between the convolutions passes through a reorder. The chain must give the
// reference kernels' bytes, run node by node on plain tensors, and the
// schedule the plugin logs must show the reorders only at the graph's edges.
// DequantizeLinear -> MaxPool -> QuantizeLinear with one scale and zero
// point is a MaxPool of the 8-bit values, exactly; DequantizeLinear -> f32
// operators of one input -> QuantizeLinear is a table of the 256 bytes.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "cpu_simd_int8_support.hpp"
#include "cpu_simd_plugin_fixture.hpp"
#include "graph_builder.hpp"

namespace loom::cpu_simd {
namespace {

using namespace int8_testing;  // NOLINT(build/namespaces)

class CpuSimdInt8Chain : public CpuSimdPlugin {};

// x -> QLinearConv (3x3, pads 1) -> DequantizeLinear -> Add(other) ->
// QuantizeLinear -> QLinearConv (3x3, stride 2) -> y, with the
// DequantizeLinear's output also a graph output. Weights with zero point 0
// and 7 bits (one oneDNN pass, as quantizers write them) and u8 weights with
// a zero point (the R term, summed over x in its channels-last layout).
TEST_F(CpuSimdInt8Chain, ConvolutionsAndTheStepsBetweenThemStayChannelsLastAndEqualTheReferenceKernels) {
  for (const loom_dtype_t wdt : {LOOM_DTYPE_I8, LOOM_DTYPE_U8}) {
    SCOPED_TRACE(::testing::Message() << "weights " << (wdt == LOOM_DTYPE_U8 ? "u8" : "i8"));
    std::mt19937 rng(wdt == LOOM_DTYPE_U8 ? 31 : 37);
    const Dims xs = {1, 6, 9, 8}, ts = {1, 8, 9, 8}, ys = {1, 4, 5, 4};
    std::vector<QTensor> v = {
        make(xs, LOOM_DTYPE_U8, rng),             // 0 x
        scales({}, rng),                          // 1 x scale
        make({}, LOOM_DTYPE_U8, rng),             // 2 x zero point
        make({8, 6, 3, 3}, wdt, rng),             // 3 w1
        scales({8}, rng),                         // 4 w1 scales
        make({8}, wdt, rng),                      // 5 w1 zero points
        scales({}, rng),                          // 6 t1 scale
        make({}, LOOM_DTYPE_U8, rng),             // 7 t1 zero point
        make(ts, LOOM_DTYPE_F32, rng),            // 8 other
        scales({}, rng),                          // 9 t2 scale
        make({}, LOOM_DTYPE_U8, rng),             // 10 t2 zero point
        make({4, 8, 3, 3}, wdt, rng),             // 11 w2
        scales({}, rng),                          // 12 w2 scale
        make({}, wdt, rng),                       // 13 w2 zero point
        scales({}, rng),                          // 14 y scale
        make({}, LOOM_DTYPE_U8, rng),             // 15 y zero point
        make({4}, LOOM_DTYPE_I32, rng, -500, 500) // 16 bias of conv 2
    };
    if (wdt == LOOM_DTYPE_I8) {
      // 7-bit weights with zero point 0.
      for (int w : {3, 11}) {
        for (uint8_t& b : v[static_cast<size_t>(w)].bytes) b = static_cast<uint8_t>(static_cast<int8_t>(b) / 2);
      }
      for (int z : {5, 13}) std::fill(v[static_cast<size_t>(z)].bytes.begin(), v[static_cast<size_t>(z)].bytes.end(), 0);
    }
    // Output scales that put most values inside the range.
    const float t1_scale = 0.5f, t2_scale = 1.0f, y_scale = 20.0f;
    std::memcpy(v[6].bytes.data(), &t1_scale, 4);
    std::memcpy(v[9].bytes.data(), &t2_scale, 4);
    std::memcpy(v[14].bytes.data(), &y_scale, 4);

    BlobGraph g;
    for (const QTensor& t : v) g.inputs.push_back(add_tensor(&g, t.dtype, t.shape));
    const uint32_t t1 = add_tensor(&g, LOOM_DTYPE_U8, ts), f1 = add_tensor(&g, LOOM_DTYPE_F32, ts), f2 = add_tensor(&g, LOOM_DTYPE_F32, ts);
    const uint32_t t2 = add_tensor(&g, LOOM_DTYPE_U8, ts), y = add_tensor(&g, LOOM_DTYPE_U8, ys);
    auto node = [&](Op op, BlobNode n, std::vector<uint32_t> ins, uint32_t out) {
      n.op = op;
      n.inputs = std::move(ins);
      n.outputs = {out};
      g.nodes.push_back(n);
    };
    node(Op::kQLinearConv, conv_attrs(1, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}), {0, 1, 2, 3, 4, 5, 6, 7}, t1);
    BlobNode dq;
    dq.axis = 1;
    node(Op::kDequantizeLinear, dq, {t1, 6, 7}, f1);
    node(Op::kAdd, BlobNode{}, {f1, 8}, f2);
    node(Op::kQuantizeLinear, dq, {f2, 9, 10}, t2);
    node(Op::kQLinearConv, conv_attrs(1, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}),
         {t2, 9, 10, 11, 12, 13, 14, 15, 16}, y);
    g.outputs = {y, f1};
    std::string error;
    ASSERT_TRUE(validate(g, &error)) << error;
    loom_executable_t* exe = load(encode(g), &error);
    ASSERT_NE(exe, nullptr) << error;

    // The reference: each node on loom_kernels, on plain tensors.
    auto run = [&](const char* kernel, std::vector<QTensor*> ins, QTensor* out,
                   const std::vector<AttributeDef>& attrs) { ASSERT_EQ(run_reference(kernel, ins, out, attrs), "ok"); };
    QTensor r1 = blank(LOOM_DTYPE_U8, ts), rf1 = blank(LOOM_DTYPE_F32, ts), rf2 = blank(LOOM_DTYPE_F32, ts);
    QTensor r2 = blank(LOOM_DTYPE_U8, ts), ry = blank(LOOM_DTYPE_U8, ys);
    run("QLinearConv", {&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]}, &r1,
        conv_kernel_attrs(1, {1, 1}, {1, 1}, {1, 1, 1, 1}));
    run("DequantizeLinear", {&r1, &v[6], &v[7]}, &rf1, {int_attr("axis", 1)});
    run("Add", {&rf1, &v[8]}, &rf2, {});
    run("QuantizeLinear", {&rf2, &v[9], &v[10]}, &r2, {int_attr("axis", 1)});
    run("QLinearConv", {&r2, &v[9], &v[10], &v[11], &v[12], &v[13], &v[14], &v[15], &v[16]}, &ry,
        conv_kernel_attrs(1, {2, 2}, {1, 1}, {1, 1, 1, 1}));
    if (HasFatalFailure()) return;

    std::vector<const loom_tensor_t*> descs;
    for (QTensor& t : v) {
      t.refresh();
      descs.push_back(&t.desc);
    }
    QTensor got_y = blank(LOOM_DTYPE_U8, ys), got_f1 = blank(LOOM_DTYPE_F32, ts);
    got_y.refresh();
    got_f1.refresh();
    ASSERT_EQ(execute(exe, descs, {&got_y.desc, &got_f1.desc}), "ok");
    EXPECT_EQ(got_f1.bytes, rf1.bytes) << "the first convolution, dequantized";
    EXPECT_EQ(got_y.bytes, ry.bytes) << "the second convolution";
    // The scales keep the output inside the range and spread out.
    EXPECT_GT(std::count_if(ry.bytes.begin(), ry.bytes.end(), [](uint8_t b) { return b != 0 && b != 255; }), 60);
    EXPECT_GT(*std::max_element(ry.bytes.begin(), ry.bytes.end()) - *std::min_element(ry.bytes.begin(), ry.bytes.end()),
              20);
    api_->executable_destroy(exe);

    // Reorders: x into channels-last before the first convolution, f1 and y
    // back to plain as graph outputs; none between the steps.
    const std::string want = "executable: schedule: reorder -> nhwc; int8 nodes 0 -> nhwc; int8 nodes 1 -> nhwc; "
                             "reorder -> plain; node nodes 2 -> nhwc; int8 nodes 3 -> nhwc; int8 nodes 4 -> nhwc; "
                             "reorder -> plain";
    const std::vector<std::string> log_lines = harness_.recorder().logs();
    EXPECT_NE(std::find(log_lines.begin(), log_lines.end(), want), log_lines.end())
        << (log_lines.empty() ? "no log lines" : log_lines.back());
  }
}

// DequantizeLinear -> MaxPool (3x3, stride 2, pads 1, as ResNets begin) ->
// QuantizeLinear: with the same scale and zero point one oneDNN pooling of
// the u8 / s8 values (x near the type's lowest value, so a padding that won
// would show); with a QuantizeLinear scale one bit apart the three steps
// stay. Both equal the reference kernels, node by node.
TEST_F(CpuSimdInt8Chain, MaxPoolBetweenADequantizeAndAQuantizeOfOneScaleIsAPoolOfTheBytes) {
  for (const loom_dtype_t type : {LOOM_DTYPE_U8, LOOM_DTYPE_I8}) {
    for (const bool same : {true, false}) {
      SCOPED_TRACE(::testing::Message() << (type == LOOM_DTYPE_U8 ? "u8" : "s8") << (same ? " same" : " other")
                                        << " scale");
      std::mt19937 rng(type == LOOM_DTYPE_U8 ? 41 : 43);
      const Dims xs = {1, 5, 9, 8}, ys = {1, 5, 5, 4};
      std::vector<QTensor> v = {make(xs, type, rng), scales({}, rng), make({}, type, rng)};
      // Values within 40 of the lowest (s8: half of them, the others within
      // 40 above 0, so that a max of the bytes as unsigned would differ).
      for (uint8_t& b : v[0].bytes) {
        const int low = type == LOOM_DTYPE_U8 || b % 2 == 0 ? 0 : -128;
        b = static_cast<uint8_t>(static_cast<int8_t>(low + b % 40));
      }
      QTensor q_scale = v[1];
      if (!same) {
        float f = 0;
        std::memcpy(&f, q_scale.bytes.data(), 4);
        f = std::nextafter(f, 1.0f);
        std::memcpy(q_scale.bytes.data(), &f, 4);
      }
      BlobGraph g;
      const uint32_t x = add_tensor(&g, type, xs);
      g.inputs = {x};
      const uint32_t s_dq = add_tensor(&g, LOOM_DTYPE_F32, {}, &v[1]), z = add_tensor(&g, type, {}, &v[2]);
      const uint32_t s_q = add_tensor(&g, LOOM_DTYPE_F32, {}, &q_scale);
      const uint32_t f = add_tensor(&g, LOOM_DTYPE_F32, xs), pooled = add_tensor(&g, LOOM_DTYPE_F32, ys);
      const uint32_t y = add_tensor(&g, type, ys);
      g.outputs = {y};
      BlobNode dq;
      dq.axis = 1;
      dq.op = Op::kDequantizeLinear;
      dq.inputs = {x, s_dq, z};
      dq.outputs = {f};
      BlobNode mp;
      mp.op = Op::kMaxPool;
      mp.ints = {2, 0, 0, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1};
      mp.inputs = {f};
      mp.outputs = {pooled};
      BlobNode q = dq;
      q.op = Op::kQuantizeLinear;
      q.inputs = {pooled, s_q, z};
      q.outputs = {y};
      g.nodes = {dq, mp, q};
      std::string error;
      ASSERT_TRUE(validate(g, &error)) << error;
      loom_executable_t* exe = load(encode(g), &error);
      ASSERT_NE(exe, nullptr) << error;
      QTensor rf = blank(LOOM_DTYPE_F32, xs), rp = blank(LOOM_DTYPE_F32, ys), ry = blank(type, ys);
      auto run = [&](const char* kernel, std::vector<QTensor*> ins, QTensor* out,
                   const std::vector<AttributeDef>& attrs) { ASSERT_EQ(run_reference(kernel, ins, out, attrs), "ok"); };
      AttributeDef kernel_shape, strides, pads;
      kernel_shape.name = "kernel_shape";
      strides.name = "strides";
      pads.name = "pads";
      kernel_shape.kind = strides.kind = pads.kind = AttributeKind::kInts;
      kernel_shape.ints = {3, 3};
      strides.ints = {2, 2};
      pads.ints = {1, 1, 1, 1};
      run("DequantizeLinear", {&v[0], &v[1], &v[2]}, &rf, {int_attr("axis", 1)});
      run("MaxPool", {&rf}, &rp, {kernel_shape, strides, pads});
      run("QuantizeLinear", {&rp, &q_scale, &v[2]}, &ry, {int_attr("axis", 1)});
      if (HasFatalFailure()) return;

      v[0].refresh();
      QTensor got = blank(type, ys);
      got.refresh();
      ASSERT_EQ(execute(exe, {&v[0].desc}, {&got.desc}), "ok");
      EXPECT_EQ(got.bytes, ry.bytes);
      api_->executable_destroy(exe);

      const std::string want = same ? "executable: schedule: reorder -> nhwc; pool nodes 0,1,2 -> nhwc; reorder -> plain"
                                    : "executable: schedule: int8 nodes 0 -> plain; reorder -> nhwc; pool nodes 1 -> nhwc; "
                                      "int8 nodes 2 -> nhwc; reorder -> plain";
      const std::vector<std::string> log_lines = harness_.recorder().logs();
      EXPECT_NE(std::find(log_lines.begin(), log_lines.end(), want), log_lines.end())
          << schedule_lines(log_lines);
    }
  }
}

// DequantizeLinear -> HardSwish -> Sigmoid -> QuantizeLinear (u8 in, s8
// out), DequantizeLinear -> QuantizeLinear (a requantization) and a chain
// whose HardSwish output is also a graph output (no table then): x holds
// every byte value, and each result equals the reference kernels node by
// node.
TEST_F(CpuSimdInt8Chain, DequantizeUnaryOperatorsQuantizeIsATableOfTheBytes) {
  struct Case {
    std::vector<Op> middle;
    loom_dtype_t x, y;
    bool middle_is_output;
    const char* schedule;
  };
  const std::vector<Case> cases = {
      {{Op::kHardSwish, Op::kSigmoid}, LOOM_DTYPE_U8, LOOM_DTYPE_I8, false,
       "executable: schedule: table nodes 0,1,2,3 -> plain"},
      {{}, LOOM_DTYPE_I8, LOOM_DTYPE_U8, false, "executable: schedule: table nodes 0,1 -> plain"},
      {{Op::kHardSwish}, LOOM_DTYPE_U8, LOOM_DTYPE_U8, true,
       "executable: schedule: int8 nodes 0 -> plain; node nodes 1 -> plain; int8 nodes 2 -> plain"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schedule);
    std::mt19937 rng(47);
    const Dims shape = {1, 3, 16, 16};
    QTensor x = make(shape, c.x, rng);
    for (size_t i = 0; i < x.bytes.size(); ++i) x.bytes[i] = static_cast<uint8_t>(i * 7 % 256);
    QTensor dq_scale = scales({}, rng), dq_zero = make({}, c.x, rng), q_scale = scales({}, rng);
    QTensor q_zero = make({}, c.y, rng);
    const float dq_s = 0.05f, q_s = c.middle.empty() ? 0.07f : 0.004f;
    std::memcpy(dq_scale.bytes.data(), &dq_s, 4);
    std::memcpy(q_scale.bytes.data(), &q_s, 4);
    BlobGraph g;
    const uint32_t xt = add_tensor(&g, c.x, shape);
    g.inputs = {xt};
    const uint32_t ds = add_tensor(&g, LOOM_DTYPE_F32, {}, &dq_scale), dz = add_tensor(&g, c.x, {}, &dq_zero);
    const uint32_t qs = add_tensor(&g, LOOM_DTYPE_F32, {}, &q_scale), qz = add_tensor(&g, c.y, {}, &q_zero);
    BlobNode dq;
    dq.axis = 1;
    dq.op = Op::kDequantizeLinear;
    dq.inputs = {xt, ds, dz};
    dq.outputs = {add_tensor(&g, LOOM_DTYPE_F32, shape)};
    g.nodes.push_back(dq);
    for (Op op : c.middle) {
      BlobNode n;
      n.op = op;
      n.inputs = {g.nodes.back().outputs[0]};
      n.outputs = {add_tensor(&g, LOOM_DTYPE_F32, shape)};
      g.nodes.push_back(n);
    }
    BlobNode q = dq;
    q.op = Op::kQuantizeLinear;
    q.inputs = {g.nodes.back().outputs[0], qs, qz};
    const uint32_t yt = add_tensor(&g, c.y, shape);
    q.outputs = {yt};
    g.nodes.push_back(q);
    g.outputs = {yt};
    if (c.middle_is_output) g.outputs.push_back(g.nodes[1].outputs[0]);
    std::string error;
    ASSERT_TRUE(validate(g, &error)) << error;
    loom_executable_t* exe = load(encode(g), &error);
    ASSERT_NE(exe, nullptr) << error;
    auto run = [&](const char* kernel, std::vector<QTensor*> ins, QTensor* out,
                   const std::vector<AttributeDef>& attrs) { ASSERT_EQ(run_reference(kernel, ins, out, attrs), "ok"); };
    std::vector<QTensor> f(c.middle.size() + 1, blank(LOOM_DTYPE_F32, shape));
    run("DequantizeLinear", {&x, &dq_scale, &dq_zero}, &f[0], {int_attr("axis", 1)});
    for (size_t k = 0; k < c.middle.size(); ++k) {
      run(c.middle[k] == Op::kHardSwish ? "HardSwish" : "Sigmoid", {&f[k]}, &f[k + 1], {});
    }
    QTensor want = blank(c.y, shape);
    run("QuantizeLinear", {&f.back(), &q_scale, &q_zero}, &want, {int_attr("axis", 1)});
    if (HasFatalFailure()) return;
    std::set<uint8_t> distinct(want.bytes.begin(), want.bytes.end());
    EXPECT_GT(distinct.size(), 30u) << "the scales should spread the outputs";

    x.refresh();
    QTensor got = blank(c.y, shape), got_mid = blank(LOOM_DTYPE_F32, shape);
    got.refresh();
    got_mid.refresh();
    std::vector<const loom_tensor_t*> outs = {&got.desc};
    if (c.middle_is_output) outs.push_back(&got_mid.desc);
    ASSERT_EQ(execute(exe, {&x.desc}, outs), "ok");
    EXPECT_EQ(got.bytes, want.bytes);
    api_->executable_destroy(exe);
    const std::vector<std::string> log_lines = harness_.recorder().logs();
    EXPECT_NE(std::find(log_lines.begin(), log_lines.end(), std::string(c.schedule)), log_lines.end())
        << schedule_lines(log_lines);
  }
}

// The table step's lookup has three builds: AVX-512 VBMI (64 bytes at a
// time, the tail under a mask), AVX2 (32 at a time, the tail one by one) and
// plain x86-64. Each must give the reference kernels' bytes at lengths that
// leave every kind of tail, and across the chunks of two threads. cpu.isa
// picks the build (the widest this CPU runs when unset) and holds for the
// whole process, so CTest runs this test once more per lower instruction
// set with LOOM_TEST_CPU_ISA, which the fixture hands over as cpu.isa.
TEST_F(CpuSimdInt8Chain, TheTableLooksUpEveryByteAlikeOnEachInstructionSetAndLength) {
  const std::vector<int64_t> lengths = {1, 31, 32, 33, 63, 64, 65, 200, 4129, 70001};
  {
    std::string error;
    for (int64_t n : lengths) {
      SCOPED_TRACE(std::to_string(n) + " bytes");
      const Dims shape = {1, 1, 1, n};
      std::mt19937 rng(5);
      QTensor x = make(shape, LOOM_DTYPE_U8, rng);
      // Every byte value, in an order that is not the table's.
      for (size_t i = 0; i < x.bytes.size(); ++i) x.bytes[i] = static_cast<uint8_t>((i * 7 + i / 256) % 256);
      QTensor dq_scale = scales({}, rng), dq_zero = make({}, LOOM_DTYPE_U8, rng), q_scale = scales({}, rng);
      QTensor q_zero = make({}, LOOM_DTYPE_U8, rng);
      const float dq_s = 0.05f, q_s = 0.03f;
      std::memcpy(dq_scale.bytes.data(), &dq_s, 4);
      std::memcpy(q_scale.bytes.data(), &q_s, 4);
      dq_zero.bytes[0] = 101;
      q_zero.bytes[0] = 20;
      BlobGraph g;
      const uint32_t xt = add_tensor(&g, LOOM_DTYPE_U8, shape);
      g.inputs = {xt};
      BlobNode dq;
      dq.axis = 1;
      dq.op = Op::kDequantizeLinear;
      dq.inputs = {xt, add_tensor(&g, LOOM_DTYPE_F32, {}, &dq_scale), add_tensor(&g, LOOM_DTYPE_U8, {}, &dq_zero)};
      dq.outputs = {add_tensor(&g, LOOM_DTYPE_F32, shape)};
      BlobNode swish;
      swish.op = Op::kHardSwish;
      swish.inputs = dq.outputs;
      swish.outputs = {add_tensor(&g, LOOM_DTYPE_F32, shape)};
      BlobNode q = dq;
      q.op = Op::kQuantizeLinear;
      q.inputs = {swish.outputs[0], add_tensor(&g, LOOM_DTYPE_F32, {}, &q_scale),
                  add_tensor(&g, LOOM_DTYPE_U8, {}, &q_zero)};
      q.outputs = {add_tensor(&g, LOOM_DTYPE_U8, shape)};
      g.nodes = {dq, swish, q};
      g.outputs = q.outputs;
      ASSERT_TRUE(validate(g, &error)) << error;
      QTensor f = blank(LOOM_DTYPE_F32, shape), h = blank(LOOM_DTYPE_F32, shape), want = blank(LOOM_DTYPE_U8, shape);
      ASSERT_EQ(run_reference("DequantizeLinear", {&x, &dq_scale, &dq_zero}, &f, {int_attr("axis", 1)}), "ok");
      ASSERT_EQ(run_reference("HardSwish", {&f}, &h, {}), "ok");
      ASSERT_EQ(run_reference("QuantizeLinear", {&h, &q_scale, &q_zero}, &want, {int_attr("axis", 1)}), "ok");
      if (n >= 256) {
        EXPECT_GT(std::set<uint8_t>(want.bytes.begin(), want.bytes.end()).size(), 100u);
      }
      const std::vector<std::byte> blob = encode(g);
      loom_executable_t* exe = load(blob, &error);
      ASSERT_NE(exe, nullptr) << error;
      x.refresh();
      QTensor got = blank(LOOM_DTYPE_U8, shape);
      got.refresh();
      ASSERT_EQ(execute(exe, {&x.desc}, {&got.desc}), "ok");
      api_->executable_destroy(exe);
      ASSERT_EQ(got.bytes, want.bytes);
    }
    const std::vector<std::string> log_lines = harness_.recorder().logs();
    EXPECT_NE(std::find(log_lines.begin(), log_lines.end(), "executable: schedule: table nodes 0,1,2 -> plain"),
              log_lines.end())
        << schedule_lines(log_lines);
  }
}

// Format 10's trans_a 1 (the steps compile fuses from QDQ groups): round
// half to even, then add the zero point; the QOperator form (trans_a 0)
// adds it first. Scales 1, 1 and 2 make every odd accumulator a tie
// (k + 0.5); with an odd zero point the two orders round ties apart, with
// an even one they agree. With every scale and zero point a constant the
// step requantizes inside oneDNN's convolution (Int8Step::fused_prim),
// except for the QOperator form with an odd zero point; with y's scale a
// graph input it takes the plugin's own loop. All must be exact.
TEST_F(CpuSimdInt8Chain, RoundingBeforeTheZeroPointOnTiesInOneDnnAndInTheLoop) {
  for (int variant = 0; variant < 16; ++variant) {
    const bool qop = (variant & 8) != 0, constants = (variant & 2) == 0, clamp = (variant & 1) != 0;
    const int32_t y_zero = (variant & 4) != 0 ? 100 : 101;
    SCOPED_TRACE(::testing::Message() << (qop ? "QOperator form" : "QDQ form") << ", y zero point " << y_zero
                                      << (constants ? ", constants" : ", y scale bound") << (clamp ? ", clamped" : ""));
    std::mt19937 rng(53);
    const Dims xs = {1, 8, 6, 5}, ws = {8, 8, 3, 3}, ys = {1, 8, 6, 5};
    QTensor x = make(xs, LOOM_DTYPE_U8, rng), w = make(ws, LOOM_DTYPE_I8, rng);
    for (uint8_t& b : x.bytes) b = static_cast<uint8_t>(b % 16);
    for (uint8_t& b : w.bytes) b = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(b % 9) - 4));
    const int32_t x_zero = 7;
    std::vector<int32_t> bias(8);
    for (int32_t& b : bias) b = static_cast<int32_t>(rng() % 41) - 20;
    BlobGraph g;
    auto f32 = [&](float v) {
      const uint32_t t = add_tensor(&g, LOOM_DTYPE_F32, {});
      g.tensors[t].constant = true;
      g.tensors[t].data = {v};
      return t;
    };
    auto bytes = [&](loom_dtype_t d, const Dims& s, const void* p, size_t n) {
      const uint32_t t = add_tensor(&g, d, s);
      g.tensors[t].constant = true;
      g.tensors[t].bytes.assign(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
      return t;
    };
    const uint32_t xt = add_tensor(&g, LOOM_DTYPE_U8, xs);
    g.inputs = {xt};
    const uint8_t xz8 = x_zero, yz8 = y_zero;
    const uint32_t x_scale = f32(1.0f), x_zp = bytes(LOOM_DTYPE_U8, {}, &xz8, 1);
    const uint32_t wt = bytes(LOOM_DTYPE_I8, ws, w.bytes.data(), w.bytes.size());
    const uint32_t w_scale = f32(1.0f);
    const int8_t wz8 = 0;
    const uint32_t w_zp = bytes(LOOM_DTYPE_I8, {}, &wz8, 1);
    uint32_t y_scale = 0;
    if (constants) {
      y_scale = f32(2.0f);
    } else {
      y_scale = add_tensor(&g, LOOM_DTYPE_F32, {});
      g.inputs.push_back(y_scale);
    }
    const uint32_t y_zp = bytes(LOOM_DTYPE_U8, {}, &yz8, 1);
    const uint32_t bt = bytes(LOOM_DTYPE_I32, {8}, bias.data(), bias.size() * 4);
    const uint32_t yt = add_tensor(&g, LOOM_DTYPE_U8, ys);
    g.outputs = {yt};
    BlobNode n = conv_attrs(1, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1});
    n.op = Op::kQLinearConv;
    n.trans_a = qop ? 0 : 1;
    if (clamp) n.floats = {95.0f, 110.0f};
    n.inputs = {xt, x_scale, x_zp, wt, w_scale, w_zp, y_scale, y_zp, bt};
    n.outputs = {yt};
    g.nodes = {n};
    std::string error;
    ASSERT_TRUE(validate(g, &error)) << error;
    ASSERT_EQ(format_version_for(g), qop ? (clamp ? 7u : 6u) : 10u);
    loom_executable_t* exe = load(encode(g), &error);
    ASSERT_NE(exe, nullptr) << error;

    // The exact result, and how many outputs were ties.
    std::vector<uint8_t> want(count_of(ys));
    size_t ties = 0, moved = 0;
    for (int64_t m = 0; m < 8; ++m) {
      for (int64_t oh = 0; oh < 6; ++oh) {
        for (int64_t ow = 0; ow < 5; ++ow) {
          int64_t acc = bias[static_cast<size_t>(m)];
          for (int64_t c = 0; c < 8; ++c) {
            for (int64_t kh = 0; kh < 3; ++kh) {
              for (int64_t kw = 0; kw < 3; ++kw) {
                const int64_t ih = oh - 1 + kh, iw = ow - 1 + kw;
                if (ih < 0 || ih >= 6 || iw < 0 || iw >= 5) continue;
                acc += (int64_t{x.bytes[static_cast<size_t>((c * 6 + ih) * 5 + iw)]} - x_zero) *
                       static_cast<int8_t>(w.bytes[static_cast<size_t>(((m * 8 + c) * 3 + kh) * 3 + kw)]);
              }
            }
          }
          const double scaled = static_cast<double>(acc) / 2.0;
          ties += (acc % 2) != 0;
          const double first = std::nearbyint(scaled) + y_zero, after = std::nearbyint(scaled + y_zero);
          moved += first != after;
          double r = qop ? after : first;
          r = std::clamp(r, clamp ? 95.0 : 0.0, clamp ? 110.0 : 255.0);
          want[static_cast<size_t>((m * 6 + oh) * 5 + ow)] = static_cast<uint8_t>(r);
        }
      }
    }
    if (y_zero % 2 != 0) {
      EXPECT_GT(moved, count_of(ys) / 8) << "ties where the order of rounding and zero point matters";
    } else {
      EXPECT_EQ(moved, 0u) << "an even zero point: both orders agree";
    }
    x.refresh();
    QTensor scale{{}, LOOM_DTYPE_F32, std::vector<uint8_t>(4)};
    const float two = 2.0f;
    std::memcpy(scale.bytes.data(), &two, 4);
    scale.refresh();
    QTensor got{ys, LOOM_DTYPE_U8, std::vector<uint8_t>(count_of(ys), 0)};
    got.refresh();
    std::vector<const loom_tensor_t*> ins = {&x.desc};
    if (!constants) ins.push_back(&scale.desc);
    for (int round = 0; round < 2; ++round) {
      ASSERT_EQ(execute(exe, ins, {&got.desc}), "ok");
      EXPECT_EQ(got.bytes, want) << ties << " ties; run " << round;
    }
    api_->executable_destroy(exe);
  }
}

// Two QDQ convolutions that requantize inside oneDNN, the second reading
// and writing channels-last between steps (then a DequantizeLinear), run
// from two threads at once, each with its own x: each step keeps a few sets
// of buffers with a oneDNN stream and memory objects made once, and a set
// serves whichever execution's arena takes it next, so every run must point
// them at its own tensors. Each thread's outputs equal one run alone.
TEST_F(CpuSimdInt8Chain, FusedStepsRunConcurrentlyEachOnItsOwnTensors) {
  std::mt19937 rng(61);
  const Dims xs = {1, 8, 10, 10}, ts = {1, 16, 10, 10}, ys = {1, 16, 10, 10};
  BlobGraph g;
  const uint32_t xt = add_tensor(&g, LOOM_DTYPE_U8, xs);
  g.inputs = {xt};
  auto constant = [&](QTensor t) { return add_tensor(&g, t.dtype, t.shape, &t); };
  auto weights = [&](Dims shape) {  // 7-bit, zero point 0: one exact oneDNN pass
    QTensor w = make(std::move(shape), LOOM_DTYPE_I8, rng);
    for (uint8_t& b : w.bytes) b = static_cast<uint8_t>(static_cast<int8_t>(b) / 2);
    return w;
  };
  const uint32_t s_in = constant(exact({}, LOOM_DTYPE_F32, {0.02f})), z_in = constant(exact({}, LOOM_DTYPE_U8, {3.0f}));
  const uint32_t s_w = constant(exact({}, LOOM_DTYPE_F32, {0.01f})), z_w = constant(exact({}, LOOM_DTYPE_I8, {0.0f}));
  const uint32_t s_t = constant(exact({}, LOOM_DTYPE_F32, {0.05f})), z_t = constant(exact({}, LOOM_DTYPE_U8, {9.0f}));
  const uint32_t s_y = constant(exact({}, LOOM_DTYPE_F32, {0.1f})), z_y = constant(exact({}, LOOM_DTYPE_U8, {11.0f}));
  const uint32_t w1 = constant(weights({16, 8, 3, 3})), w2 = constant(weights({16, 16, 3, 3}));
  const uint32_t t1 = add_tensor(&g, LOOM_DTYPE_U8, ts), t2 = add_tensor(&g, LOOM_DTYPE_U8, ys);
  const uint32_t y = add_tensor(&g, LOOM_DTYPE_F32, ys);
  auto conv = [&](std::vector<uint32_t> ins, uint32_t out) {
    BlobNode n = conv_attrs(1, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1});
    n.op = Op::kQLinearConv;
    n.trans_a = 1;  // as compile writes a QDQ group: oneDNN may requantize
    n.inputs = std::move(ins);
    n.outputs = {out};
    g.nodes.push_back(n);
  };
  conv({xt, s_in, z_in, w1, s_w, z_w, s_t, z_t}, t1);
  conv({t1, s_t, z_t, w2, s_w, z_w, s_y, z_y}, t2);
  BlobNode dq;
  dq.op = Op::kDequantizeLinear;
  dq.axis = 1;
  dq.inputs = {t2, s_y, z_y};
  dq.outputs = {y};
  g.nodes.push_back(dq);
  g.outputs = {y};
  std::string error;
  ASSERT_TRUE(validate(g, &error)) << error;
  loom_executable_t* exe = load(encode(g), &error);
  ASSERT_NE(exe, nullptr) << error;

  // Each thread's x and the outputs of one run alone.
  constexpr int kThreads = 2, kRuns = 150;
  std::vector<QTensor> x, want;
  for (int t = 0; t < kThreads; ++t) {
    x.push_back(make(xs, LOOM_DTYPE_U8, rng));
    x.back().refresh();
    want.push_back(blank(LOOM_DTYPE_F32, ys));
    want.back().refresh();
    ASSERT_EQ(execute(exe, {&x.back().desc}, {&want.back().desc}), "ok");
  }
  ASSERT_NE(want[0].bytes, want[1].bytes);
  std::vector<int> wrong(kThreads, 0), failed(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      QTensor got = blank(LOOM_DTYPE_F32, ys);
      got.refresh();
      for (int r = 0; r < kRuns; ++r) {
        std::fill(got.bytes.begin(), got.bytes.end(), 0);
        if (harness_.execute(exe, {&x[static_cast<size_t>(t)].desc}, {&got.desc}) != "ok") ++failed[static_cast<size_t>(t)];
        if (got.bytes != want[static_cast<size_t>(t)].bytes) ++wrong[static_cast<size_t>(t)];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failed[static_cast<size_t>(t)], 0) << "thread " << t;
    EXPECT_EQ(wrong[static_cast<size_t>(t)], 0) << "thread " << t << ": runs whose output is not its own x's";
  }
  const std::string schedule = schedule_lines(harness_.recorder().logs());
  EXPECT_NE(schedule.find("int8 nodes 1 -> nhwc"), std::string::npos) << schedule;
  api_->executable_destroy(exe);
}

// The compile notes (`loom compile` prints them) say that a MaxPool and a
// HardSwish between a DequantizeLinear and a QuantizeLinear run on the
// bytes, from the same matchers the schedule uses; a MaxPool whose
// QuantizeLinear has another scale still runs in f32 and says so.
TEST_F(CpuSimdInt8Chain, CompileNotesSayWhichOperatorsRunOnTheBytes) {
  using ::loom::testing::attr_ints;
  using Fb = ::loom::graph::fb::DType;
  for (const bool same : {true, false}) {
    ::loom::testing::GraphBuilder b;
    const Dims xs = {1, 4, 8, 8}, ps = {1, 4, 4, 4};
    const uint8_t zero = 3;
    const int x = b.input(xs, Fb::u8);
    auto scale = [&](float v) { return b.constant_f32({}, {v}); };
    auto zp = [&]() { return b.constant({}, Fb::u8, &zero, 1); };
    const int xf = b.tensor(xs), pf = b.tensor(ps), pq = b.tensor(ps, Fb::u8), pf2 = b.tensor(ps), hf = b.tensor(ps);
    const int y = b.tensor(ps, Fb::u8);
    b.node("DequantizeLinear", {x, scale(0.05f), zp()}, {xf});
    b.node("MaxPool", {xf}, {pf}, {attr_ints("kernel_shape", {2, 2}), attr_ints("strides", {2, 2})});
    b.node("QuantizeLinear", {pf, scale(same ? 0.05f : 0.06f), zp()}, {pq});
    b.node("DequantizeLinear", {pq, scale(0.05f), zp()}, {pf2});
    b.node("HardSwish", {pf2}, {hf}, {}, 14);
    b.node("QuantizeLinear", {hf, scale(0.02f), zp()}, {y});
    b.output(y);
    const size_t before = harness_.recorder().logs().size();
    ::loom::testing::CompiledBlob compiled;
    ASSERT_EQ(harness_.compile(plugin_, b.finish(), &compiled), "ok");
    std::vector<std::string> logs = harness_.recorder().logs(), notes;
    for (size_t i = before; i < logs.size(); ++i) {
      if (logs[i].rfind("compile: ", 0) == 0) notes.push_back(logs[i]);
    }
    const std::string pool = same ? "compile: int8: node n1 (MaxPool): pooled on the 8-bit values (its "
                                    "DequantizeLinear and QuantizeLinear share one scale and zero point)"
                                  : "compile: f32: node n1 (MaxPool) reads dequantized";
    const std::string swish = "compile: int8: node n4 (HardSwish): one lookup per value in a table of the 256 "
                              "8-bit values, with its DequantizeLinear and QuantizeLinear";
    ASSERT_EQ(notes.size(), 2u) << (notes.empty() ? std::string("no notes") : notes[0]);
    EXPECT_EQ(notes[0].rfind(pool, 0), 0u) << notes[0];
    EXPECT_EQ(notes[1], swish);
  }
}

}  // namespace
}  // namespace loom::cpu_simd
