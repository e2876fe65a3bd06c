// DequantizeLinear -> operators of one input -> QuantizeLinear is one table
// of the 256 bytes (plan_quant_table) also when the operators are Add, Sub,
// Mul, Div, Max or Min with a one-element f32 constant (either operand, as
// exporters write x + 3, x / 6, 2 - x or a learned scale a * x), and when
// the DequantizeLinear's output has another reader (x * HardSigmoid(x)
// patterns): the DequantizeLinear then stays a step of its own. Each result
// equals the reference kernels run node by node on every byte value; a
// constant of more than one element keeps the chain in f32.
#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "cpu_simd_int8_support.hpp"
#include "cpu_simd_plugin_fixture.hpp"

namespace loom::cpu_simd {
namespace {

using namespace int8_testing;  // NOLINT(build/namespaces)

class CpuSimdTable : public CpuSimdPlugin {};

// One operator of a chain: `op` reading the running value, with an f32
// constant `value` (shape `const_shape`) as operand 0 (`const_first`) or 1;
// no constant for Clip (alpha / beta: [0, 6]) and Relu.
struct ChainOp {
  Op op;
  const char* kernel;
  float value;
  bool const_first;
  Dims const_shape;
};

struct TableCase {
  const char* name;
  std::vector<ChainOp> ops;
  bool relu_reads_dq;  // a Relu of the DequantizeLinear's output, a graph output
  const char* schedule;
};

TEST_F(CpuSimdTable, ScalarConstantOperatorsAndASharedDequantizeAreOneTableOfTheBytes) {
  const Dims shape = {1, 4, 16, 16};
  const std::vector<TableCase> cases = {
      {"a learned scale and shift: Mul(a, x), Add(x, b)",
       {{Op::kMul, "Mul", 0.94316906f, true, {1}}, {Op::kAdd, "Add", 0.5042972f, false, {1}}},
       false,
       "executable: schedule: table nodes 0,1,2,3 -> plain"},
      {"operand order: Sub(2, x), Div(x, 6), Max(x, -0.1), Min(0.3, x)",
       {{Op::kSub, "Sub", 2.0f, true, {}},
        {Op::kDiv, "Div", 6.0f, false, {}},
        {Op::kMax, "Max", -0.1f, false, {}},
        {Op::kMin, "Min", 0.3f, true, {}}},
       false,
       "executable: schedule: table nodes 0,1,2,3,4,5 -> plain"},
      {"Add(x, 3), Clip(0, 6), Div(x, 6) with the DequantizeLinear also read by a Relu",
       {{Op::kAdd, "Add", 3.0f, false, {}}, {Op::kClip, "Clip", 0, false, {}}, {Op::kDiv, "Div", 6.0f, false, {}}},
       true,
       "executable: schedule: int8 nodes 0 -> plain; table nodes 1,2,3,4 -> plain; node nodes 5 -> plain"},
      {"a per-channel constant is no table",
       {{Op::kMul, "Mul", 0.5f, false, {4, 1, 1}}},
       false,
       "executable: schedule: int8 nodes 0 -> plain; node nodes 1 -> plain; int8 nodes 2 -> plain"},
  };
  for (const TableCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::mt19937 rng(48);
    QTensor x = make(shape, LOOM_DTYPE_U8, rng);
    for (size_t i = 0; i < x.bytes.size(); ++i) x.bytes[i] = static_cast<uint8_t>(i * 7 % 256);
    const QTensor dq_scale = exact({}, LOOM_DTYPE_F32, {0.05f}), dq_zero = exact({}, LOOM_DTYPE_U8, {121});
    const QTensor q_scale = exact({}, LOOM_DTYPE_F32, {0.0037f}), q_zero = exact({}, LOOM_DTYPE_U8, {90});
    BlobGraph g;
    const uint32_t xt = add_tensor(&g, LOOM_DTYPE_U8, shape);
    g.inputs = {xt};
    BlobNode dq;
    dq.op = Op::kDequantizeLinear;
    dq.inputs = {xt, add_tensor(&g, LOOM_DTYPE_F32, {}, &dq_scale), add_tensor(&g, LOOM_DTYPE_U8, {}, &dq_zero)};
    dq.outputs = {add_tensor(&g, LOOM_DTYPE_F32, shape)};
    g.nodes.push_back(dq);
    const uint32_t dq_out = dq.outputs[0];
    std::vector<QTensor> consts;
    consts.reserve(c.ops.size());
    for (const ChainOp& o : c.ops) {
      BlobNode n;
      n.op = o.op;
      const uint32_t cur = g.nodes.back().outputs[0];
      if (o.op == Op::kClip) {
        n.alpha = 0.0f;
        n.beta = 6.0f;
        n.inputs = {cur};
      } else {
        consts.push_back(exact(o.const_shape, LOOM_DTYPE_F32,
                               std::vector<float>(static_cast<size_t>(count_of(o.const_shape)), o.value)));
        const uint32_t k = add_tensor(&g, LOOM_DTYPE_F32, o.const_shape, &consts.back());
        n.inputs = o.const_first ? std::vector<uint32_t>{k, cur} : std::vector<uint32_t>{cur, k};
      }
      n.outputs = {add_tensor(&g, LOOM_DTYPE_F32, shape)};
      g.nodes.push_back(n);
    }
    BlobNode q;
    q.op = Op::kQuantizeLinear;
    q.inputs = {g.nodes.back().outputs[0], add_tensor(&g, LOOM_DTYPE_F32, {}, &q_scale),
                add_tensor(&g, LOOM_DTYPE_U8, {}, &q_zero)};
    const uint32_t yt = add_tensor(&g, LOOM_DTYPE_U8, shape);
    q.outputs = {yt};
    g.nodes.push_back(q);
    g.outputs = {yt};
    if (c.relu_reads_dq) {
      BlobNode relu;
      relu.op = Op::kRelu;
      relu.inputs = {dq_out};
      relu.outputs = {add_tensor(&g, LOOM_DTYPE_F32, shape)};
      g.nodes.push_back(relu);
      g.outputs.push_back(relu.outputs[0]);
    }
    std::string error;
    ASSERT_TRUE(validate(g, &error)) << error;
    loom_executable_t* exe = load(encode(g), &error);
    ASSERT_NE(exe, nullptr) << error;

    // The reference kernels, node by node.
    auto run = [&](const char* kernel, std::vector<QTensor*> ins, QTensor* out) {
      ASSERT_EQ(run_reference(kernel, ins, out, {}), "ok");
    };
    QTensor xs = x, dqs = dq_scale, dqz = dq_zero, qs = q_scale, qz = q_zero;
    QTensor clip_lo = exact({}, LOOM_DTYPE_F32, {0.0f}), clip_hi = exact({}, LOOM_DTYPE_F32, {6.0f});
    QTensor d = blank(LOOM_DTYPE_F32, shape);
    run("DequantizeLinear", {&xs, &dqs, &dqz}, &d);
    QTensor cur = d;
    for (size_t k = 0, ci = 0; k < c.ops.size(); ++k) {
      const ChainOp& o = c.ops[k];
      QTensor next = blank(LOOM_DTYPE_F32, shape);
      if (o.op == Op::kClip) {
        run("Clip", {&cur, &clip_lo, &clip_hi}, &next);
      } else {
        QTensor& k_t = consts[ci++];
        run(o.kernel, o.const_first ? std::vector<QTensor*>{&k_t, &cur} : std::vector<QTensor*>{&cur, &k_t}, &next);
      }
      cur = next;
    }
    QTensor want = blank(LOOM_DTYPE_U8, shape), want_relu = blank(LOOM_DTYPE_F32, shape);
    run("QuantizeLinear", {&cur, &qs, &qz}, &want);
    run("Relu", {&d}, &want_relu);
    if (HasFatalFailure()) return;
    std::set<uint8_t> distinct(want.bytes.begin(), want.bytes.end());
    EXPECT_GT(distinct.size(), 20u) << "the scales should spread the outputs";

    x.refresh();
    QTensor got = blank(LOOM_DTYPE_U8, shape), got_relu = blank(LOOM_DTYPE_F32, shape);
    got.refresh();
    got_relu.refresh();
    std::vector<const loom_tensor_t*> outs = {&got.desc};
    if (c.relu_reads_dq) outs.push_back(&got_relu.desc);
    ASSERT_EQ(execute(exe, {&x.desc}, outs), "ok");
    EXPECT_EQ(got.bytes, want.bytes);
    if (c.relu_reads_dq) {
      EXPECT_EQ(got_relu.bytes, want_relu.bytes);
    }
    api_->executable_destroy(exe);
    const std::vector<std::string> log_lines = harness_.recorder().logs();
    EXPECT_NE(std::find(log_lines.begin(), log_lines.end(), std::string(c.schedule)), log_lines.end())
        << schedule_lines(log_lines);
  }
}

// DequantizeLinear -> nearest Resize -> QuantizeLinear with one scale and
// zero point is a Resize of the bytes (the values pass through: quantizing
// a dequantized byte with the same parameters gives it back). x [1, 3, 5,
// 7] (u8, then i8) to [1, 3, 8, 12] by arbitrary nearest taps: the result
// must be the gather of x's bytes, and equal the unfused steps' (the same
// blob with the Resize's f32 output also a graph output); a QuantizeLinear
// of another scale keeps the f32 steps.
TEST_F(CpuSimdTable, ANearestResizeBetweenADequantizeAndAQuantizeOfOneScaleIsAResizeOfTheBytes) {
  const Dims in = {1, 3, 5, 7}, out = {1, 3, 8, 12};
  const std::vector<int64_t> taps_h = {0, 0, 1, 2, 2, 3, 4, 4}, taps_w = {0, 1, 1, 2, 3, 3, 4, 5, 5, 6, 6, 6};
  struct Case {
    loom_dtype_t type;
    bool resize_is_output;
    float q_scale;
    const char* schedule;
  };
  const std::vector<Case> cases = {
      {LOOM_DTYPE_U8, false, 0.05f, "executable: schedule: node nodes 0,1,2 -> plain"},
      {LOOM_DTYPE_I8, false, 0.05f, "executable: schedule: node nodes 0,1,2 -> plain"},
      {LOOM_DTYPE_U8, true, 0.05f, "executable: schedule: int8 nodes 0 -> plain; node nodes 1 -> plain; int8 nodes 2 -> plain"},
      {LOOM_DTYPE_U8, false, 0.07f, "executable: schedule: int8 nodes 0 -> plain; node nodes 1 -> plain; int8 nodes 2 -> plain"},
  };
  std::vector<std::vector<uint8_t>> results;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schedule);
    std::mt19937 rng(49);
    QTensor x = make(in, c.type, rng);
    const QTensor scale = exact({}, LOOM_DTYPE_F32, {0.05f}), zero = exact({}, c.type, {c.type == LOOM_DTYPE_U8 ? 9.0f : -3.0f});
    const QTensor q_scale = exact({}, LOOM_DTYPE_F32, {c.q_scale});
    BlobGraph g;
    const uint32_t xt = add_tensor(&g, c.type, in);
    g.inputs = {xt};
    BlobNode dq;
    dq.op = Op::kDequantizeLinear;
    dq.inputs = {xt, add_tensor(&g, LOOM_DTYPE_F32, {}, &scale), add_tensor(&g, c.type, {}, &zero)};
    dq.outputs = {add_tensor(&g, LOOM_DTYPE_F32, in)};
    BlobNode rs;
    rs.op = Op::kResize;
    rs.inputs = dq.outputs;
    rs.outputs = {add_tensor(&g, LOOM_DTYPE_F32, out)};
    rs.ints = {0, out[0], out[1], out[2], out[3]};
    for (int64_t ch : {int64_t{0}}) rs.ints.insert(rs.ints.end(), {ch, ch});
    for (int64_t ch = 0; ch < out[1]; ++ch) rs.ints.insert(rs.ints.end(), {ch, ch});
    for (int64_t t : taps_h) rs.ints.insert(rs.ints.end(), {t, t});
    for (int64_t t : taps_w) rs.ints.insert(rs.ints.end(), {t, t});
    BlobNode q;
    q.op = Op::kQuantizeLinear;
    q.inputs = {rs.outputs[0], add_tensor(&g, LOOM_DTYPE_F32, {}, &q_scale), dq.inputs[2]};
    const uint32_t yt = add_tensor(&g, c.type, out);
    q.outputs = {yt};
    g.nodes = {dq, rs, q};
    g.outputs = {yt};
    if (c.resize_is_output) g.outputs.push_back(rs.outputs[0]);
    std::string error;
    ASSERT_TRUE(validate(g, &error)) << error;
    loom_executable_t* exe = load(encode(g), &error);
    ASSERT_NE(exe, nullptr) << error;
    x.refresh();
    QTensor got = blank(c.type, out), got_f = blank(LOOM_DTYPE_F32, out);
    got.refresh();
    got_f.refresh();
    std::vector<const loom_tensor_t*> outs = {&got.desc};
    if (c.resize_is_output) outs.push_back(&got_f.desc);
    ASSERT_EQ(execute(exe, {&x.desc}, outs), "ok");
    api_->executable_destroy(exe);
    if (c.q_scale == 0.05f) {
      std::vector<uint8_t> want;
      for (int64_t ch = 0; ch < out[1]; ++ch) {
        for (int64_t h : taps_h) {
          for (int64_t w : taps_w) want.push_back(x.bytes[static_cast<size_t>((ch * in[2] + h) * in[3] + w)]);
        }
      }
      EXPECT_EQ(got.bytes, want);
    }
    results.push_back(got.bytes);
    const std::vector<std::string> log_lines = harness_.recorder().logs();
    EXPECT_NE(std::find(log_lines.begin(), log_lines.end(), std::string(c.schedule)), log_lines.end())
        << schedule_lines(log_lines);
  }
  EXPECT_EQ(results[0], results[2]) << "the byte Resize and the unfused steps agree";
}


// DequantizeLinear of each input -> Concat -> QuantizeLinear is one Concat
// of the bytes (plan_quant_concat): an input of the output's type, scale and
// zero point copied, the others through their tables of 256. Equal to the
// reference kernels node by node (DequantizeLinear per input, the f32
// Concat, QuantizeLinear). Cases: three plain inputs on the channel axis
// (the first copied, a second u8 and a third i8 with other parameters, one
// saturating); the last axis; the first input written channels-last by a
// QLinearConv, so the Concat runs channels-last; and a DequantizeLinear
// with another reader, which keeps the group in f32.
TEST_F(CpuSimdTable, DequantizedInputsConcatenatedAndQuantizedAreOneConcatOfTheBytes) {
  struct In {
    loom_dtype_t type;
    Dims shape;
    float scale;
    int zero;
  };
  struct Case {
    const char* name;
    std::vector<In> ins;
    int64_t axis;
    bool from_conv, dq_read_twice;
    const char* schedule;
  };
  const float y_scale = 0.05f;
  const int y_zero = 121;
  const std::vector<Case> cases = {
      {"channels, plain", {{LOOM_DTYPE_U8, {1, 2, 4, 5}, y_scale, y_zero}, {LOOM_DTYPE_U8, {1, 3, 4, 5}, 0.031f, 100},
                           {LOOM_DTYPE_I8, {1, 1, 4, 5}, 0.2f, -3}}, 1, false, false,
       "executable: schedule: table nodes 0,1,2,3,4 -> plain"},
      {"last axis", {{LOOM_DTYPE_U8, {2, 3, 7}, 0.07f, 9}, {LOOM_DTYPE_U8, {2, 3, 1}, y_scale, y_zero}}, -1, false, false,
       "executable: schedule: table nodes 0,1,2,3 -> plain"},
      {"channels-last from a QLinearConv", {{LOOM_DTYPE_U8, {1, 8, 9, 8}, 0.5f, 3}, {LOOM_DTYPE_U8, {1, 3, 9, 8}, 0.02f, 200}},
       1, true, false, "executable: schedule: reorder -> nhwc; int8 nodes 0 -> nhwc; reorder -> nhwc; table nodes 1,2,3,4 -> nhwc; reorder -> plain"},
      {"a DequantizeLinear read twice", {{LOOM_DTYPE_U8, {1, 2, 4, 5}, 0.03f, 7}, {LOOM_DTYPE_U8, {1, 3, 4, 5}, 0.031f, 100}},
       1, false, true, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::mt19937 rng(77);
    BlobGraph g;
    std::vector<QTensor> feeds, params;
    params.reserve(32);
    auto constant = [&](QTensor t) {
      params.push_back(std::move(t));
      return add_tensor(&g, params.back().dtype, params.back().shape, &params.back());
    };
    std::vector<QTensor> xs;  // each input's bytes (for the reference)
    std::vector<uint32_t> dq_outs;
    std::vector<QTensor> conv;
    for (size_t k = 0; k < c.ins.size(); ++k) {
      const In& in = c.ins[k];
      uint32_t x = 0;
      if (c.from_conv && k == 0) {
        const Dims cs = {1, 6, 9, 8};
        conv = {make(cs, LOOM_DTYPE_U8, rng), scales({}, rng), make({}, LOOM_DTYPE_U8, rng),
                make({8, 6, 3, 3}, LOOM_DTYPE_I8, rng), scales({8}, rng), blank(LOOM_DTYPE_I8, {8}),
                exact({}, LOOM_DTYPE_F32, {in.scale}), exact({}, LOOM_DTYPE_U8, {static_cast<float>(in.zero)})};
        for (uint8_t& w : conv[3].bytes) w = static_cast<uint8_t>(static_cast<int8_t>(w) / 2);
        std::vector<uint32_t> conv_in;
        for (QTensor& t : conv) {
          conv_in.push_back(add_tensor(&g, t.dtype, t.shape));
          g.inputs.push_back(conv_in.back());
          feeds.push_back(t);
        }
        x = add_tensor(&g, LOOM_DTYPE_U8, in.shape);
        BlobNode n = conv_attrs(1, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1});
        n.op = Op::kQLinearConv;
        n.inputs = conv_in;
        n.outputs = {x};
        g.nodes.push_back(n);
        QTensor r = blank(LOOM_DTYPE_U8, in.shape);
        ASSERT_EQ(run_reference("QLinearConv", {&conv[0], &conv[1], &conv[2], &conv[3], &conv[4], &conv[5], &conv[6], &conv[7]},
                                &r, conv_kernel_attrs(1, {1, 1}, {1, 1}, {1, 1, 1, 1})),
                  "ok");
        xs.push_back(r);
      } else {
        QTensor t = make(in.shape, in.type, rng);
        x = add_tensor(&g, in.type, in.shape);
        g.inputs.push_back(x);
        feeds.push_back(t);
        xs.push_back(t);
      }
      BlobNode dq;
      dq.op = Op::kDequantizeLinear;
      dq.axis = 1;
      dq.inputs = {x, constant(exact({}, LOOM_DTYPE_F32, {in.scale})),
                   constant(exact({}, in.type, {static_cast<float>(in.zero)}))};
      dq.outputs = {add_tensor(&g, LOOM_DTYPE_F32, in.shape)};
      g.nodes.push_back(dq);
      dq_outs.push_back(dq.outputs[0]);
    }
    Dims ys = c.ins[0].shape;
    const size_t axis = static_cast<size_t>(c.axis < 0 ? c.axis + static_cast<int64_t>(ys.size()) : c.axis);
    ys[axis] = 0;
    for (const In& in : c.ins) ys[axis] += in.shape[axis];
    BlobNode cat;
    cat.op = Op::kConcat;
    cat.axis = c.axis;
    cat.inputs = dq_outs;
    cat.outputs = {add_tensor(&g, LOOM_DTYPE_F32, ys)};
    g.nodes.push_back(cat);
    BlobNode q;
    q.op = Op::kQuantizeLinear;
    q.axis = 1;
    q.inputs = {cat.outputs[0], constant(exact({}, LOOM_DTYPE_F32, {y_scale})),
                constant(exact({}, LOOM_DTYPE_U8, {static_cast<float>(y_zero)}))};
    q.outputs = {add_tensor(&g, LOOM_DTYPE_U8, ys)};
    g.nodes.push_back(q);
    g.outputs = {q.outputs[0]};
    if (c.dq_read_twice) g.outputs.push_back(dq_outs[0]);
    std::string error;
    ASSERT_TRUE(validate(g, &error)) << error;
    const size_t logs_before = harness_.recorder().logs().size();
    loom_executable_t* exe = load(encode(g), &error);
    ASSERT_NE(exe, nullptr) << error;

    std::vector<QTensor> dqs;
    std::vector<QTensor*> cat_in;
    dqs.reserve(c.ins.size());
    for (size_t k = 0; k < c.ins.size(); ++k) {
      QTensor sc = exact({}, LOOM_DTYPE_F32, {c.ins[k].scale});
      QTensor zp = exact({}, c.ins[k].type, {static_cast<float>(c.ins[k].zero)});
      dqs.push_back(blank(LOOM_DTYPE_F32, c.ins[k].shape));
      ASSERT_EQ(run_reference("DequantizeLinear", {&xs[k], &sc, &zp}, &dqs.back(), {int_attr("axis", 1)}), "ok");
      cat_in.push_back(&dqs.back());
    }
    QTensor f = blank(LOOM_DTYPE_F32, ys), want = blank(LOOM_DTYPE_U8, ys);
    ASSERT_EQ(run_reference("Concat", cat_in, &f, {int_attr("axis", c.axis)}), "ok");
    QTensor qs = exact({}, LOOM_DTYPE_F32, {y_scale}), qz = exact({}, LOOM_DTYPE_U8, {static_cast<float>(y_zero)});
    ASSERT_EQ(run_reference("QuantizeLinear", {&f, &qs, &qz}, &want, {int_attr("axis", 1)}), "ok");

    std::vector<const loom_tensor_t*> in_descs;
    for (QTensor& t : feeds) {
      t.refresh();
      in_descs.push_back(&t.desc);
    }
    QTensor got = blank(LOOM_DTYPE_U8, ys), got_dq = blank(LOOM_DTYPE_F32, c.ins[0].shape);
    got.refresh();
    got_dq.refresh();
    std::vector<const loom_tensor_t*> outs = {&got.desc};
    if (c.dq_read_twice) outs.push_back(&got_dq.desc);
    ASSERT_EQ(execute(exe, in_descs, outs), "ok");
    api_->executable_destroy(exe);
    EXPECT_EQ(got.bytes, want.bytes);
    const std::set<uint8_t> distinct(want.bytes.begin(), want.bytes.end());
    EXPECT_GT(distinct.size(), 20u);
    std::vector<std::string> log_lines = harness_.recorder().logs();
    log_lines.erase(log_lines.begin(), log_lines.begin() + static_cast<std::ptrdiff_t>(logs_before));
    const bool fused = std::any_of(log_lines.begin(), log_lines.end(), [&](const std::string& l) {
      return l.find("schedule:") != std::string::npos && l.find("table nodes") != std::string::npos;
    });
    if (c.dq_read_twice) {
      EXPECT_FALSE(fused) << schedule_lines(log_lines);
    } else {
      EXPECT_NE(std::find(log_lines.begin(), log_lines.end(), std::string(c.schedule)), log_lines.end())
          << schedule_lines(log_lines);
    }
  }
}

}  // namespace
}  // namespace loom::cpu_simd
