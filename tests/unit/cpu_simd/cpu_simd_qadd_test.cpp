// The quantized Add / Mul pass (plan::QuantAdd, a `qadd` step):
// DequantizeLinear(a), DequantizeLinear(b) -> Add or Mul -> QuantizeLinear
// with per-tensor constant parameters computes as ONNX Runtime's QLinearAdd /
// QLinearMul kernels do (plugins/cpu-simd/README.md, "Quantized Add and
// Mul"): checked against those formulas written out here, against ONNX
// Runtime's own bytes on every pair of byte values (a frozen fixture,
// fixtures/ort_qlinear_binary.hpp), and within 1 unit of the unfused steps.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "cpu_simd_int8_support.hpp"
#include "cpu_simd_plugin_fixture.hpp"
#include "fixtures/ort_qlinear_binary.hpp"

namespace loom::cpu_simd {
namespace {

using namespace int8_testing;  // NOLINT(build/namespaces)

class CpuSimdQuantAdd : public CpuSimdPlugin {};

// DequantizeLinear(a), DequantizeLinear(b) -> Add or Mul -> QuantizeLinear
// over u8 graph inputs a and b, y of type `yt`: the scales and zero points
// are constants (QTensors of one element).
BlobGraph binary_graph(const Dims& a_shape, const Dims& b_shape, const Dims& y_shape, bool multiply,
                       loom_dtype_t yt, const std::array<const QTensor*, 6>& params) {
  BlobGraph g;
  const uint32_t ta = add_tensor(&g, LOOM_DTYPE_U8, a_shape), tb = add_tensor(&g, LOOM_DTYPE_U8, b_shape);
  g.inputs = {ta, tb};
  const uint32_t fa = add_tensor(&g, LOOM_DTYPE_F32, a_shape), fb = add_tensor(&g, LOOM_DTYPE_F32, b_shape);
  const uint32_t fy = add_tensor(&g, LOOM_DTYPE_F32, y_shape), y = add_tensor(&g, yt, y_shape);
  auto node = [&](Op op, std::vector<uint32_t> in, uint32_t out) {
    BlobNode n;
    n.op = op;
    n.axis = op == Op::kAdd || op == Op::kMul ? 0 : 1;
    n.inputs = std::move(in);
    n.outputs = {out};
    g.nodes.push_back(n);
  };
  auto constant = [&](size_t k) { return add_tensor(&g, params[k]->dtype, {}, params[k]); };
  node(Op::kDequantizeLinear, {ta, constant(0), constant(1)}, fa);
  node(Op::kDequantizeLinear, {tb, constant(2), constant(3)}, fb);
  node(multiply ? Op::kMul : Op::kAdd, {fa, fb}, fy);
  node(Op::kQuantizeLinear, {fy, constant(4), constant(5)}, y);
  g.outputs = {y};
  return g;
}

// DequantizeLinear(a), DequantizeLinear(b) -> Add (or Mul) -> QuantizeLinear
// with constant per-tensor parameters is one pass over the bytes (a qadd
// step) with ONNX Runtime's QLinearAdd / QLinearMul arithmetic, written out
// here as its kernels compute it (`ort_add`, `ort_mul`), and within 1 unit
// of the unfused steps (the reference kernels). Scales 0.5, 0.25 and 0.5
// make every odd b - zero point a tie (round half to even); others
// saturate y. Cases: u8 + i8 -> u8 and i8 + u8 -> i8 in plain layout at a
// length with a tail; a written by a QLinearConv (channels-last), so the
// step runs channels-last and reorders the plain b; a DequantizeLinear
// output that is also a graph output (that DequantizeLinear stays a step,
// the qadd reads its bytes); a Mul of the two (0.0625 * 0.03125-scaled
// products); and broadcasts: the per-channel gate of a squeeze-and-
// excitation block on channels-last data, b or a constant along the last
// dimension (ONNX Runtime's run with a scalar: b or a is then the second
// term), and a broadcast over channels. The per-instruction-set runs
// (LOOM_TEST_CPU_ISA) take this test too.
TEST_F(CpuSimdQuantAdd, TwoDequantizedTensorsAddedAndQuantizedAreOnePassOverTheBytes) {
  struct Case {
    loom_dtype_t a, b, y;
    Dims shape;
    std::array<float, 3> scales;  // a, b, y
    bool a_from_conv, dq_is_output;
    const char* schedule;
    bool multiply = false;
    Dims a_shape = {}, b_shape = {};  // empty: `shape`
    bool saturates = true;            // some outputs reach the type's bounds
  };
  const std::vector<Case> cases = {
      {LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_U8, {1, 3, 16, 16}, {0.5f, 0.25f, 0.5f}, false, false,
       "executable: schedule: qadd nodes 0,1,2,3 -> plain"},
      {LOOM_DTYPE_I8, LOOM_DTYPE_U8, LOOM_DTYPE_I8, {1, 1, 1, 1237}, {0.031f, 0.047f, 0.02f}, false, false,
       "executable: schedule: qadd nodes 0,1,2,3 -> plain"},
      {LOOM_DTYPE_U8, LOOM_DTYPE_U8, LOOM_DTYPE_U8, {1, 8, 9, 8}, {0.5f, 0.25f, 0.5f}, true, false,
       "executable: schedule: reorder -> nhwc; int8 nodes 0 -> nhwc; reorder -> nhwc; qadd nodes 1,2,3,4 -> nhwc; "
       "reorder -> plain"},
      {LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_U8, {1, 3, 16, 16}, {0.5f, 0.25f, 0.5f}, false, true,
       "executable: schedule: int8 nodes 0 -> plain; qadd nodes 1,2,3 -> plain"},
      {LOOM_DTYPE_U8, LOOM_DTYPE_U8, LOOM_DTYPE_U8, {1, 4, 16, 16}, {0.0625f, 0.03125f, 0.0078125f}, false, false,
       "executable: schedule: qadd nodes 0,1,2,3 -> plain", true},
      {LOOM_DTYPE_U8, LOOM_DTYPE_U8, LOOM_DTYPE_U8, {1, 8, 9, 8}, {0.043f, 0.0039f, 0.011f}, true, false,
       "executable: schedule: reorder -> nhwc; int8 nodes 0 -> nhwc; qadd nodes 1,2,3,4 -> nhwc; reorder -> plain",
       true, {}, {1, 8, 1, 1}},
      {LOOM_DTYPE_U8, LOOM_DTYPE_U8, LOOM_DTYPE_U8, {1, 3, 16, 16}, {0.031f, 0.047f, 0.02f}, false, false,
       "executable: schedule: qadd nodes 0,1,2,3 -> plain", false, {}, {1, 3, 1, 1}},
      {LOOM_DTYPE_U8, LOOM_DTYPE_U8, LOOM_DTYPE_U8, {1, 4, 256, 256}, {10.023955f, 0.003921569f, 9.989977f}, false,
       false, "executable: schedule: qadd nodes 0,1,2,3 -> plain", true, {}, {}, false},
      {LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_U8, {1, 4, 128, 128}, {0.031f, 0.047f, 0.02f}, false, false,
       "executable: schedule: qadd nodes 0,1,2,3 -> plain", false, {1, 4, 128, 1}, {}},
      {LOOM_DTYPE_U8, LOOM_DTYPE_U8, LOOM_DTYPE_U8, {1, 3, 16, 16}, {0.031f, 0.047f, 0.02f}, false, false,
       "executable: schedule: qadd nodes 0,1,2,3 -> plain", false, {1, 1, 16, 16}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schedule);
    const Dims a_shape = c.a_shape.empty() ? c.shape : c.a_shape;
    const Dims b_shape = c.b_shape.empty() ? c.shape : c.b_shape;
    std::mt19937 rng(61);
    BlobGraph g;
    std::vector<QTensor> ins;  // the graph inputs, in order
    std::vector<QTensor> params;
    auto constant = [&](loom_dtype_t t, float scale_or_zero) {
      QTensor q = blank(t, {});
      if (t == LOOM_DTYPE_F32) {
        std::memcpy(q.bytes.data(), &scale_or_zero, 4);
      } else {
        q.bytes[0] = static_cast<uint8_t>(static_cast<int>(scale_or_zero));
      }
      params.push_back(q);
      return add_tensor(&g, t, {}, &params.back());
    };
    params.reserve(16);
    auto node = [&](Op op, BlobNode n, std::vector<uint32_t> in, uint32_t out) {
      n.op = op;
      n.inputs = std::move(in);
      n.outputs = {out};
      g.nodes.push_back(n);
    };
    // a: a graph input, or the output of a QLinearConv (3x3, pads 1) of
    // graph inputs, which writes channels-last.
    uint32_t a = 0;
    QTensor ra = make(a_shape, c.a, rng);
    std::vector<QTensor> conv;
    if (c.a_from_conv) {
      const Dims xs = {1, 6, 9, 8};
      conv = {make(xs, LOOM_DTYPE_U8, rng), scales({}, rng),          make({}, LOOM_DTYPE_U8, rng),
              make({8, 6, 3, 3}, LOOM_DTYPE_I8, rng), scales({8}, rng), blank(LOOM_DTYPE_I8, {8}),
              scales({}, rng),                    make({}, LOOM_DTYPE_U8, rng)};
      for (uint8_t& w : conv[3].bytes) w = static_cast<uint8_t>(static_cast<int8_t>(w) / 2);
      const float t_scale = 0.5f;
      std::memcpy(conv[6].bytes.data(), &t_scale, 4);
      std::vector<uint32_t> conv_in;
      for (const QTensor& t : conv) {
        conv_in.push_back(add_tensor(&g, t.dtype, t.shape));
        g.inputs.push_back(conv_in.back());
        ins.push_back(t);
      }
      a = add_tensor(&g, LOOM_DTYPE_U8, c.shape);
      node(Op::kQLinearConv, conv_attrs(1, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}), conv_in, a);
      ra = blank(LOOM_DTYPE_U8, c.shape);
      ASSERT_EQ(run_reference("QLinearConv", {&conv[0], &conv[1], &conv[2], &conv[3], &conv[4], &conv[5], &conv[6], &conv[7]},
                              &ra, conv_kernel_attrs(1, {1, 1}, {1, 1}, {1, 1, 1, 1})),
                "ok");
    } else {
      a = add_tensor(&g, c.a, a_shape);
      g.inputs.push_back(a);
      ins.push_back(ra);
    }
    QTensor rb = make(b_shape, c.b, rng);
    const uint32_t b = add_tensor(&g, c.b, b_shape);
    g.inputs.push_back(b);
    ins.push_back(rb);
    const int a_zero = c.a == LOOM_DTYPE_U8 ? 131 : -3, b_zero = c.b == LOOM_DTYPE_U8 ? 120 : 5;
    const int y_zero = c.y == LOOM_DTYPE_U8 ? 129 : -7;  // odd: ties show the rounding's place
    BlobNode dq;
    dq.axis = 1;
    const uint32_t fa = add_tensor(&g, LOOM_DTYPE_F32, a_shape), fb = add_tensor(&g, LOOM_DTYPE_F32, b_shape);
    const uint32_t sum = add_tensor(&g, LOOM_DTYPE_F32, c.shape), y = add_tensor(&g, c.y, c.shape);
    node(Op::kDequantizeLinear, dq, {a, constant(LOOM_DTYPE_F32, c.scales[0]), constant(c.a, a_zero)}, fa);
    node(Op::kDequantizeLinear, dq, {b, constant(LOOM_DTYPE_F32, c.scales[1]), constant(c.b, b_zero)}, fb);
    node(c.multiply ? Op::kMul : Op::kAdd, BlobNode{}, {fa, fb}, sum);
    node(Op::kQuantizeLinear, dq, {sum, constant(LOOM_DTYPE_F32, c.scales[2]), constant(c.y, y_zero)}, y);
    g.outputs = {y};
    if (c.dq_is_output) g.outputs.push_back(fa);
    std::string error;
    ASSERT_TRUE(validate(g, &error)) << error;
    loom_executable_t* exe = load(encode(g), &error);
    ASSERT_NE(exe, nullptr) << error;

    // The reference: the four nodes on loom_kernels.
    auto scalar = [](loom_dtype_t t, float v) {
      QTensor q = blank(t, {});
      if (t == LOOM_DTYPE_F32) {
        std::memcpy(q.bytes.data(), &v, 4);
      } else {
        q.bytes[0] = static_cast<uint8_t>(static_cast<int>(v));
      }
      return q;
    };
    QTensor as = scalar(LOOM_DTYPE_F32, c.scales[0]), az = scalar(c.a, static_cast<float>(a_zero));
    QTensor bs = scalar(LOOM_DTYPE_F32, c.scales[1]), bz = scalar(c.b, static_cast<float>(b_zero));
    QTensor ys = scalar(LOOM_DTYPE_F32, c.scales[2]), yz = scalar(c.y, static_cast<float>(y_zero));
    QTensor rfa = blank(LOOM_DTYPE_F32, a_shape), rfb = blank(LOOM_DTYPE_F32, b_shape);
    QTensor rsum = blank(LOOM_DTYPE_F32, c.shape), unfused = blank(c.y, c.shape);
    ASSERT_EQ(run_reference("DequantizeLinear", {&ra, &as, &az}, &rfa, {int_attr("axis", 1)}), "ok");
    ASSERT_EQ(run_reference("DequantizeLinear", {&rb, &bs, &bz}, &rfb, {int_attr("axis", 1)}), "ok");
    ASSERT_EQ(run_reference(c.multiply ? "Mul" : "Add", {&rfa, &rfb}, &rsum, {}), "ok");
    ASSERT_EQ(run_reference("QuantizeLinear", {&rsum, &ys, &yz}, &unfused, {int_attr("axis", 1)}), "ok");

    // ONNX Runtime's kernels (MLAS QLinearAdd on AVX2, QLinearMul): ratios
    // of scales in f32; Add: u the operand varying along the last dimension
    // (a unless a is constant there), w the other, fixed = y_zero -
    // fma(r_u, u_zero, r_w * w_zero), y = fma(u, r_u, fma(w, r_w, fixed)) on
    // the raw values; Mul: float((a - a_zero) * (b - b_zero)) * ratio +
    // y_zero; rounded half to even, saturated.
    const bool swap = a_shape[3] == 1 && b_shape[3] != 1;
    const float ra_ = c.scales[0] / c.scales[2], rb_ = c.scales[1] / c.scales[2];
    const float ratio = c.scales[0] * c.scales[1] / c.scales[2];
    auto value = [](const QTensor& t, size_t i) {
      return t.dtype == LOOM_DTYPE_U8 ? static_cast<int>(t.bytes[i]) : static_cast<int>(static_cast<int8_t>(t.bytes[i]));
    };
    const float ru = swap ? rb_ : ra_, rw = swap ? ra_ : rb_;
    const float uz = static_cast<float>(swap ? b_zero : a_zero), wz = static_cast<float>(swap ? a_zero : b_zero);
    const float w_term = rw * wz;
    const float fixed = static_cast<float>(y_zero) - std::fma(ru, uz, w_term);
    QTensor want = blank(c.y, c.shape);
    size_t o = 0;
    for (int64_t n0 = 0; n0 < c.shape[0]; ++n0) {
      for (int64_t n1 = 0; n1 < c.shape[1]; ++n1) {
        for (int64_t n2 = 0; n2 < c.shape[2]; ++n2) {
          for (int64_t n3 = 0; n3 < c.shape[3]; ++n3, ++o) {
            auto at = [&](const Dims& s) {
              const int64_t i[4] = {s[0] == 1 ? 0 : n0, s[1] == 1 ? 0 : n1, s[2] == 1 ? 0 : n2, s[3] == 1 ? 0 : n3};
              return static_cast<size_t>(((i[0] * s[1] + i[1]) * s[2] + i[2]) * s[3] + i[3]);
            };
            const int va = value(ra, at(a_shape)), vb = value(rb, at(b_shape));
            float v = 0;
            if (c.multiply) {
              const float product = static_cast<float>((va - a_zero) * (vb - b_zero)) * ratio;
              v = product + static_cast<float>(y_zero);
            } else {
              const float u = static_cast<float>(swap ? vb : va), w = static_cast<float>(swap ? va : vb);
              v = std::fma(u, ru, std::fma(w, rw, fixed));
            }
            const float lo = c.y == LOOM_DTYPE_U8 ? 0.0f : -128.0f, hi = c.y == LOOM_DTYPE_U8 ? 255.0f : 127.0f;
            v = std::min(std::max(std::nearbyint(v), lo), hi);
            want.bytes[o] = static_cast<uint8_t>(static_cast<int>(v));
          }
        }
      }
    }
    size_t near = 0, off = 0;
    for (size_t i = 0; i < want.bytes.size(); ++i) {
      const int d = std::abs(value(want, i) - value(unfused, i));
      near += d == 1 ? 1 : 0;
      off += d > 1 ? 1 : 0;
    }
    EXPECT_EQ(off, 0u) << "ONNX Runtime's arithmetic is within 1 unit of the unfused steps";
    const std::set<uint8_t> distinct(want.bytes.begin(), want.bytes.end());
    EXPECT_GT(distinct.size(), 30u) << "the scales should spread the outputs";
    EXPECT_TRUE(!c.saturates || distinct.count(c.y == LOOM_DTYPE_U8 ? 255 : 127) ||
                distinct.count(c.y == LOOM_DTYPE_U8 ? 0 : 128))
        << "some values should saturate";

    std::vector<const loom_tensor_t*> in_descs;
    for (QTensor& t : ins) {
      t.refresh();
      in_descs.push_back(&t.desc);
    }
    QTensor got = blank(c.y, c.shape), got_fa = blank(LOOM_DTYPE_F32, a_shape);
    got.refresh();
    got_fa.refresh();
    std::vector<const loom_tensor_t*> outs = {&got.desc};
    if (c.dq_is_output) outs.push_back(&got_fa.desc);
    ASSERT_EQ(execute(exe, in_descs, outs), "ok");
    api_->executable_destroy(exe);
    EXPECT_EQ(got.bytes, want.bytes) << near << " of " << want.bytes.size()
                                     << " values are 1 unit from the unfused steps'";
    if (c.dq_is_output) {
      EXPECT_EQ(got_fa.bytes, rfa.bytes);
    }
    const std::vector<std::string> log_lines = harness_.recorder().logs();
    EXPECT_NE(std::find(log_lines.begin(), log_lines.end(), std::string(c.schedule)), log_lines.end())
        << schedule_lines(log_lines);
  }
}


// ONNX Runtime 1.30's bytes (fixtures/ort_qlinear_binary.hpp, made by the
// script beside it) for 63 cases of u8 scales and zero points, Add and Mul,
// same-shape (vv) and broadcast with b (sb) or a (sa) constant along the
// last dimension, each on all 65536 pairs of byte values: the fixture
// keeps the 835 outputs where ONNX Runtime's bytes differ from the unfused
// steps (here the reference kernels), so the plugin must give the unfused
// bytes patched with those.
TEST_F(CpuSimdQuantAdd, EqualsOnnxRuntimeOnEveryPairOfBytes) {
  const auto& cases = fixtures::ort_qlinear_binary_cases();
  ASSERT_EQ(cases.size(), 63u);
  QTensor full_i = blank(LOOM_DTYPE_U8, {1, 256, 256}), full_j = blank(LOOM_DTYPE_U8, {1, 256, 256});
  QTensor col = blank(LOOM_DTYPE_U8, {1, 256, 1});
  for (size_t k = 0; k < 65536; ++k) {
    full_i.bytes[k] = static_cast<uint8_t>(k / 256);
    full_j.bytes[k] = static_cast<uint8_t>(k % 256);
  }
  for (size_t k = 0; k < 256; ++k) col.bytes[k] = static_cast<uint8_t>(k);
  size_t patched = 0;
  auto qadd_steps = [&] {
    const std::vector<std::string> logs = harness_.recorder().logs();
    return std::count(logs.begin(), logs.end(), std::string("executable: schedule: qadd nodes 0,1,2,3 -> plain"));
  };
  for (const fixtures::OrtQLinearBinaryCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.op << " " << c.kind << " scales " << c.a_scale << " " << c.b_scale << " "
                                      << c.y_scale << " zero points " << c.a_zero << " " << c.b_zero << " "
                                      << c.y_zero);
    const std::string kind = c.kind;
    QTensor a = kind == "vv" ? full_i : kind == "sb" ? full_j : col;
    QTensor b = kind == "sb" ? col : full_j;
    const bool multiply = std::string(c.op) == "Mul";
    const Dims ys = {1, 256, 256};
    QTensor as = exact({}, LOOM_DTYPE_F32, {c.a_scale}), az = exact({}, LOOM_DTYPE_U8, {static_cast<float>(c.a_zero)});
    QTensor bs = exact({}, LOOM_DTYPE_F32, {c.b_scale}), bz = exact({}, LOOM_DTYPE_U8, {static_cast<float>(c.b_zero)});
    QTensor ysc = exact({}, LOOM_DTYPE_F32, {c.y_scale}), yz = exact({}, LOOM_DTYPE_U8, {static_cast<float>(c.y_zero)});
    const BlobGraph g = binary_graph(a.shape, b.shape, ys, multiply, LOOM_DTYPE_U8, {&as, &az, &bs, &bz, &ysc, &yz});
    std::string error;
    ASSERT_TRUE(validate(g, &error)) << error;
    const auto steps_before = qadd_steps();
    loom_executable_t* exe = load(encode(g), &error);
    ASSERT_NE(exe, nullptr) << error;
    EXPECT_EQ(qadd_steps(), steps_before + 1) << "one qadd step";
    QTensor got = blank(LOOM_DTYPE_U8, ys);
    a.refresh();
    b.refresh();
    got.refresh();
    ASSERT_EQ(execute(exe, {&a.desc, &b.desc}, {&got.desc}), "ok");
    api_->executable_destroy(exe);

    QTensor ra = blank(LOOM_DTYPE_F32, a.shape), rb = blank(LOOM_DTYPE_F32, b.shape), rs = blank(LOOM_DTYPE_F32, ys);
    QTensor want = blank(LOOM_DTYPE_U8, ys);
    ASSERT_EQ(run_reference("DequantizeLinear", {&a, &as, &az}, &ra, {int_attr("axis", 1)}), "ok");
    ASSERT_EQ(run_reference("DequantizeLinear", {&b, &bs, &bz}, &rb, {int_attr("axis", 1)}), "ok");
    ASSERT_EQ(run_reference(c.op, {&ra, &rb}, &rs, {}), "ok");
    ASSERT_EQ(run_reference("QuantizeLinear", {&rs, &ysc, &yz}, &want, {int_attr("axis", 1)}), "ok");
    for (const auto& [index, value] : c.differs) {
      ASSERT_LT(index, want.bytes.size());
      ASSERT_NE(want.bytes[index], value) << "the fixture lists only outputs that differ from the unfused steps";
      want.bytes[index] = value;
    }
    patched += c.differs.size();
    size_t wrong = 0;
    for (size_t k = 0; k < want.bytes.size(); ++k) {
      if (got.bytes[k] != want.bytes[k] && wrong++ < 4) {
        ADD_FAILURE() << "output (" << k / 256 << ", " << k % 256 << "): " << int(got.bytes[k]) << ", ONNX Runtime "
                      << int(want.bytes[k]);
      }
    }
    EXPECT_EQ(wrong, 0u);
  }
  EXPECT_EQ(patched, 835u);
}


// Scale ratios beyond f32's range: a Mul whose ratio a_scale * b_scale /
// y_scale is infinite gives inf * 0 = NaN where a product is 0, which the
// QuantizeLinear arithmetic turns into 0, and saturates the others (255 for
// a positive product, 0 for a negative one); an Add whose ratios are
// infinite is NaN, so 0, everywhere. On every path (the vector loops, the scalar tail, and
// per instruction set in the table_* runs): 1000 values.
TEST_F(CpuSimdQuantAdd, InfiniteRatiosSaturateAndNaNBecomesZero) {
  for (const int variant : {0, 1, 2, 3}) {
    const bool multiply = (variant & 1) == 0;
    const loom_dtype_t yt = variant < 2 ? LOOM_DTYPE_U8 : LOOM_DTYPE_I8;
    SCOPED_TRACE(::testing::Message() << (multiply ? "Mul" : "Add") << (yt == LOOM_DTYPE_U8 ? " -> u8" : " -> i8"));
    const Dims shape = {1, 1, 1, 1000};
    std::mt19937 rng(5);
    QTensor a = make(shape, LOOM_DTYPE_U8, rng), b = make(shape, LOOM_DTYPE_U8, rng);
    for (size_t k = 0; k < 40; ++k) b.bytes[k * 25] = 128;  // products of 0
    QTensor as = exact({}, LOOM_DTYPE_F32, {3e38f}), az = exact({}, LOOM_DTYPE_U8, {128});
    QTensor bs = exact({}, LOOM_DTYPE_F32, {3e38f}), bz = exact({}, LOOM_DTYPE_U8, {128});
    QTensor ysc = exact({}, LOOM_DTYPE_F32, {1e-30f}), yz = exact({}, yt, {7});
    const BlobGraph g = binary_graph(shape, shape, shape, multiply, yt, {&as, &az, &bs, &bz, &ysc, &yz});
    std::string error;
    ASSERT_TRUE(validate(g, &error)) << error;
    loom_executable_t* exe = load(encode(g), &error);
    ASSERT_NE(exe, nullptr) << error;
    QTensor got = blank(yt, shape);
    a.refresh();
    b.refresh();
    got.refresh();
    ASSERT_EQ(execute(exe, {&a.desc, &b.desc}, {&got.desc}), "ok");
    api_->executable_destroy(exe);
    size_t nan = 0;
    for (size_t k = 0; k < got.bytes.size(); ++k) {
      const int da = a.bytes[k] - 128, db = b.bytes[k] - 128;
      // Add: fixed = 7 - fma(inf, 128, inf * 128) = -inf, and the inner
      // fma(b, inf, -inf) is inf - inf or 0 * inf: NaN for every output.
      int want = 0;
      const int top = yt == LOOM_DTYPE_U8 ? 255 : 127, bottom = yt == LOOM_DTYPE_U8 ? 0 : -128;
      if (multiply) {
        want = da * db > 0 ? top : da * db < 0 ? bottom : 0;
        nan += da * db == 0 ? 1 : 0;
      } else {
        nan += 1;
      }
      const int value = yt == LOOM_DTYPE_U8 ? int(got.bytes[k]) : int(static_cast<int8_t>(got.bytes[k]));
      ASSERT_EQ(value, want) << "output " << k << ": a " << int(a.bytes[k]) << ", b " << int(b.bytes[k]);
    }
    EXPECT_GE(nan, 40u) << "some outputs should come from NaN";
  }
}


// x * HardSigmoid(x) as a quantizer writes it: DequantizeLinear(x) ->
// HardSigmoid -> QuantizeLinear (a table of x), and DequantizeLinear(x) *
// DequantizeLinear(that) -> QuantizeLinear (a qadd of x and the table's
// bytes): every output byte depends on one byte of x, so the two steps are
// one table of x (compose_quant_add). Its bytes must be the two steps'
// (the same graph with the table's output also a graph output, which keeps
// them apart) and within 1 unit of the reference kernels' unfused steps;
// u8 and i8 x, with the Mul's operands in either order.
TEST_F(CpuSimdQuantAdd, ATensorTimesATableOfItIsOneTable) {
  for (const int variant : {0, 1, 2}) {
    const loom_dtype_t xt = variant == 1 ? LOOM_DTYPE_I8 : LOOM_DTYPE_U8;
    const bool x_second = variant == 2;
    SCOPED_TRACE(::testing::Message() << "variant " << variant);
    std::vector<std::vector<uint8_t>> results;
    std::vector<std::string> schedules;
    for (const bool apart : {false, true}) {
      const Dims shape = {1, 4, 8, 8};
      std::mt19937 rng(17);
      QTensor x = make(shape, xt, rng);
      for (size_t k = 0; k < x.bytes.size(); ++k) x.bytes[k] = static_cast<uint8_t>(k * 5 % 256);
      QTensor xs = exact({}, LOOM_DTYPE_F32, {0.047f}), xz = exact({}, xt, {xt == LOOM_DTYPE_U8 ? 131.0f : 3.0f});
      QTensor ts = exact({}, LOOM_DTYPE_F32, {1.0f / 255}), tz = exact({}, LOOM_DTYPE_U8, {0.0f});
      QTensor ys = exact({}, LOOM_DTYPE_F32, {0.029f}), yz = exact({}, LOOM_DTYPE_U8, {97.0f});
      BlobGraph g;
      const uint32_t xin = add_tensor(&g, xt, shape);
      g.inputs = {xin};
      auto node = [&](Op op, std::vector<uint32_t> in, loom_dtype_t out_type) {
        BlobNode n;
        n.op = op;
        n.axis = op == Op::kMul || op == Op::kHardSigmoid ? 0 : 1;
        n.alpha = 1.0f / 6;
        n.beta = 0.5f;
        n.inputs = std::move(in);
        n.outputs = {add_tensor(&g, out_type, shape)};
        g.nodes.push_back(n);
        return n.outputs[0];
      };
      const uint32_t dx = node(Op::kDequantizeLinear, {xin, add_tensor(&g, LOOM_DTYPE_F32, {}, &xs), add_tensor(&g, xt, {}, &xz)}, LOOM_DTYPE_F32);
      const uint32_t hs = node(Op::kHardSigmoid, {dx}, LOOM_DTYPE_F32);
      const uint32_t tq = node(Op::kQuantizeLinear, {hs, add_tensor(&g, LOOM_DTYPE_F32, {}, &ts), add_tensor(&g, LOOM_DTYPE_U8, {}, &tz)}, LOOM_DTYPE_U8);
      const uint32_t td = node(Op::kDequantizeLinear, {tq, add_tensor(&g, LOOM_DTYPE_F32, {}, &ts), add_tensor(&g, LOOM_DTYPE_U8, {}, &tz)}, LOOM_DTYPE_F32);
      const uint32_t m = node(Op::kMul, x_second ? std::vector<uint32_t>{td, dx} : std::vector<uint32_t>{dx, td}, LOOM_DTYPE_F32);
      const uint32_t y = node(Op::kQuantizeLinear, {m, add_tensor(&g, LOOM_DTYPE_F32, {}, &ys), add_tensor(&g, LOOM_DTYPE_U8, {}, &yz)}, LOOM_DTYPE_U8);
      g.outputs = {y};
      if (apart) g.outputs.push_back(tq);
      std::string error;
      ASSERT_TRUE(validate(g, &error)) << error;
      const size_t logs_before = harness_.recorder().logs().size();
      loom_executable_t* exe = load(encode(g), &error);
      ASSERT_NE(exe, nullptr) << error;
      QTensor got = blank(LOOM_DTYPE_U8, shape), got_t = blank(LOOM_DTYPE_U8, shape);
      x.refresh();
      got.refresh();
      got_t.refresh();
      std::vector<const loom_tensor_t*> outs = {&got.desc};
      if (apart) outs.push_back(&got_t.desc);
      ASSERT_EQ(execute(exe, {&x.desc}, outs), "ok");
      api_->executable_destroy(exe);
      results.push_back(got.bytes);
      const std::vector<std::string> logs = harness_.recorder().logs();
      for (size_t k = logs_before; k < logs.size(); ++k) {
        if (logs[k].find("executable: schedule:") == 0) schedules.push_back(logs[k]);
      }
      if (apart) continue;
      // The reference kernels, node by node.
      QTensor fdx = blank(LOOM_DTYPE_F32, shape), fhs = blank(LOOM_DTYPE_F32, shape), btq = blank(LOOM_DTYPE_U8, shape);
      QTensor ftd = blank(LOOM_DTYPE_F32, shape), fm = blank(LOOM_DTYPE_F32, shape), want = blank(LOOM_DTYPE_U8, shape);
      ASSERT_EQ(run_reference("DequantizeLinear", {&x, &xs, &xz}, &fdx, {int_attr("axis", 1)}), "ok");
      ASSERT_EQ(run_reference("HardSigmoid", {&fdx}, &fhs, {float_attr("alpha", 1.0f / 6), float_attr("beta", 0.5f)}),
                "ok");
      ASSERT_EQ(run_reference("QuantizeLinear", {&fhs, &ts, &tz}, &btq, {int_attr("axis", 1)}), "ok");
      ASSERT_EQ(run_reference("DequantizeLinear", {&btq, &ts, &tz}, &ftd, {int_attr("axis", 1)}), "ok");
      ASSERT_EQ(run_reference("Mul", x_second ? std::vector<QTensor*>{&ftd, &fdx} : std::vector<QTensor*>{&fdx, &ftd}, &fm, {}), "ok");
      ASSERT_EQ(run_reference("QuantizeLinear", {&fm, &ys, &yz}, &want, {int_attr("axis", 1)}), "ok");
      size_t off = 0;
      for (size_t k = 0; k < want.bytes.size(); ++k) off += std::abs(int(want.bytes[k]) - int(got.bytes[k])) > 1 ? 1 : 0;
      EXPECT_EQ(off, 0u);
      EXPECT_GT(std::set<uint8_t>(want.bytes.begin(), want.bytes.end()).size(), 40u);
    }
    ASSERT_EQ(schedules.size(), 2u);
    // One step; x's DequantizeLinear (node 0), whose readers both read its
    // bytes, is not run at all.
    EXPECT_EQ(schedules[0], "executable: schedule: table nodes 1,2,3,4,5 -> plain");
    EXPECT_NE(schedules[1].find("qadd"), std::string::npos) << schedules[1];
    EXPECT_EQ(results[0], results[1]) << "one table gives the two steps' bytes";
  }
}

}  // namespace
}  // namespace loom::cpu_simd
