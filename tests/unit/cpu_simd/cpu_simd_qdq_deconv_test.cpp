// A DequantizeLinear -> ConvTranspose -> (Relu / Clip) -> QuantizeLinear
// group compiled through the plugin's compile entries becomes one
// QLinearConvTranspose node (blob format 12) whose bytes equal the exact
// integer sum requantized as a QuantizeLinear does, on each of its paths
// (oneDNN requantizing, or s32 products in one or two passes and the
// plugin's loop; cpu_simd_plugin_test.int8_avx2 and _baseline run it again
// without VNNI, where full-range weights take two passes), and are within 1
// unit of the unfused f32 graph. What does not fuse says why in the compile
// notes; what a blob must hold is checked when it loads.
#include <algorithm>
#include <limits>

#include "cpu_simd_int8_support.hpp"
#include "cpu_simd_plugin_fixture.hpp"
#include "graph_builder.hpp"

namespace loom::cpu_simd {
namespace {

using namespace int8_testing;  // NOLINT(build/namespaces)

struct DeconvCase {
  const char* name;
  Dims x_shape, w_shape, y_shape;  // x [N, C, H, W], w [C, M / group, kH, kW]
  int64_t group;
  Dims strides, dilations, pads, output_padding;
  bool per_channel;
  int bias;      // 0 none, 1 f32 constant, 2 DequantizeLinear of i32 at x_scale * w_scale[m]
  int act;       // 0 none, 1 Relu, 2 Clip(-0.5, 2)
  int w_bits;    // 8: weights in [-127, 127]; 7: in [-64, 63]
  int32_t huge;  // added to channel 0's i32 bias (beyond 2^24: the s32 call); 0 none
};

float deconv_f32(const QTensor& t, size_t i) {
  float v;
  std::memcpy(&v, t.bytes.data() + 4 * i, 4);
  return v;
}

class CpuSimdQdqDeconv : public CpuSimdInt8 {
 protected:
  struct Data {
    QTensor xq, xs, xz, wq, ws, wz, ys, yz, bias_i32;
    std::vector<float> bias_f;
    int64_t m = 0, mg = 0;
  };

  static ::loom::graph::fb::DType fb(loom_dtype_t d) {
    using F = ::loom::graph::fb::DType;
    return d == LOOM_DTYPE_U8 ? F::u8 : d == LOOM_DTYPE_I8 ? F::i8 : d == LOOM_DTYPE_I32 ? F::i32 : F::f32;
  }

  Data make_data(const DeconvCase& c, std::mt19937& rng) {
    Data d;
    d.mg = c.w_shape[1];
    d.m = d.mg * c.group;
    d.xq = make(c.x_shape, LOOM_DTYPE_U8, rng);
    d.xs = exact({}, LOOM_DTYPE_F32, {0.02f});
    d.xz = exact({}, LOOM_DTYPE_U8, {121.0f});
    std::uniform_int_distribution<int> weight(c.w_bits == 8 ? -127 : -64, c.w_bits == 8 ? 127 : 63);
    std::vector<float> w(count_of(c.w_shape));
    for (float& v : w) v = static_cast<float>(weight(rng));
    d.wq = exact(c.w_shape, LOOM_DTYPE_I8, w);
    const Dims ch = c.per_channel ? Dims{d.mg} : Dims{};
    std::uniform_real_distribution<float> w_scale(0.002f, 0.01f);
    std::vector<float> ws(count_of(ch));
    for (float& v : ws) v = w_scale(rng);
    d.ws = exact(ch, LOOM_DTYPE_F32, ws);
    d.wz = exact(ch, LOOM_DTYPE_I8, std::vector<float>(count_of(ch), 0.0f));
    d.ys = exact({}, LOOM_DTYPE_F32, {0.05f});
    d.yz = exact({}, LOOM_DTYPE_U8, {100.0f});
    std::uniform_real_distribution<float> real(-1.0f, 1.0f);
    std::uniform_int_distribution<int32_t> wide(-5000, 5000);
    std::vector<int32_t> bi(static_cast<size_t>(d.m));
    for (int64_t m = 0; m < d.m; ++m) {
      const float acc_scale = deconv_f32(d.xs, 0) * deconv_f32(d.ws, c.per_channel ? static_cast<size_t>(m) : 0);
      if (c.bias == 1) {
        // The fusion's conversion: nearbyint(bias / acc_scale) in double.
        d.bias_f.push_back(real(rng));
        bi[static_cast<size_t>(m)] =
            static_cast<int32_t>(std::nearbyint(static_cast<double>(d.bias_f.back()) / acc_scale));
      } else {
        bi[static_cast<size_t>(m)] = wide(rng) + (m == 0 ? c.huge : 0);
      }
    }
    d.bias_i32 = QTensor{{d.m}, LOOM_DTYPE_I32, std::vector<uint8_t>(bi.size() * 4)};
    std::memcpy(d.bias_i32.bytes.data(), bi.data(), bi.size() * 4);
    return d;
  }

  // The QDQ graph; `unfusable` also makes the ConvTranspose's f32 output a
  // graph output, which keeps the group apart.
  // `w_parameter` / `bias_parameter`: the weight / the i32 bias is a
  // parameter (bound at each run, in that order after x) instead of a constant.
  ::loom::testing::GraphBuilder graph(const DeconvCase& c, const Data& d, bool unfusable, bool w_parameter = false,
                                      bool bias_parameter = false) {
    using ::loom::testing::attr_i;
    using ::loom::testing::attr_ints;
    ::loom::testing::GraphBuilder b;
    auto constant = [&](const QTensor& t) { return b.constant(t.shape, fb(t.dtype), t.bytes.data(), t.bytes.size()); };
    const int xq = b.input(c.x_shape, fb(LOOM_DTYPE_U8));
    int wq = 0;
    if (w_parameter) {
      wq = b.parameter(c.w_shape, "w");
      b.tensors[static_cast<size_t>(wq)].dtype = fb(LOOM_DTYPE_I8);
    } else {
      wq = constant(d.wq);
    }
    const int xf = b.tensor(c.x_shape), wf = b.tensor(c.w_shape), yf = b.tensor(c.y_shape);
    const int yq = b.tensor(c.y_shape, fb(LOOM_DTYPE_U8));
    b.node("DequantizeLinear", {xq, constant(d.xs), constant(d.xz)}, {xf});
    b.node("DequantizeLinear", {wq, constant(d.ws), constant(d.wz)}, {wf}, {attr_i("axis", 1)});
    std::vector<int32_t> core_in = {xf, wf};
    if (c.bias == 1) {
      core_in.push_back(b.constant_f32({d.m}, d.bias_f));
    } else if (c.bias == 2) {
      std::vector<float> sb;
      for (int64_t m = 0; m < d.m; ++m) {
        sb.push_back(deconv_f32(d.xs, 0) * deconv_f32(d.ws, c.per_channel ? static_cast<size_t>(m) : 0));
      }
      int bq = 0;
      if (bias_parameter) {
        bq = b.parameter({d.m}, "bias");
        b.tensors[static_cast<size_t>(bq)].dtype = fb(LOOM_DTYPE_I32);
      } else {
        bq = constant(d.bias_i32);
      }
      const int bf = b.tensor({d.m});
      b.node("DequantizeLinear",
             {bq, b.constant_f32(c.per_channel ? Dims{d.m} : Dims{}, c.per_channel ? sb : std::vector<float>{sb[0]})},
             {bf}, {attr_i("axis", 0)});
      core_in.push_back(bf);
    }
    const int cf = c.act != 0 ? b.tensor(c.y_shape) : yf;
    b.node("ConvTranspose", core_in, {cf},
           {attr_ints("strides", c.strides), attr_ints("dilations", c.dilations), attr_ints("pads", c.pads),
            attr_ints("output_padding", c.output_padding), attr_i("group", c.group)});
    if (c.act == 1) b.node("Relu", {cf}, {yf});
    if (c.act == 2) b.node("Clip", {cf, b.constant_f32({}, {-0.5f}), b.constant_f32({}, {2.0f})}, {yf});
    b.node("QuantizeLinear", {yf, constant(d.ys), constant(d.yz)}, {yq});
    b.output(yq);
    if (unfusable) b.output(cf);
    return b;
  }

  std::vector<uint8_t> compile_and_run(const DeconvCase& c, const Data& d, bool fused) {
    ::loom::testing::CompiledBlob compiled;
    const std::string s = harness_.compile(plugin_, graph(c, d, !fused).finish(), &compiled);
    EXPECT_EQ(s, "ok");
    if (s != "ok") return {};
    BlobGraph g;
    std::string error;
    EXPECT_TRUE(decode(compiled.bytes.data(), compiled.bytes.size(), &g, &error)) << error;
    size_t steps = 0;
    for (const BlobNode& n : g.nodes) steps += n.op == Op::kQLinearConvTranspose;
    if (fused) {
      EXPECT_EQ(g.nodes.size(), 1u);
      EXPECT_EQ(steps, 1u);
      if (g.nodes.empty()) return {};
      EXPECT_EQ(g.nodes[0].floats.size(), c.act != 0 ? 2u : 0u);
      EXPECT_EQ(g.nodes[0].trans_a, 1);
      EXPECT_EQ(compiled.format_version, 12u);
    } else {
      EXPECT_EQ(steps, 0u) << "the group's f32 result is a graph output: not fused";
    }
    loom_executable_t* exe = load(compiled.bytes, &error, compiled.format_version);
    EXPECT_NE(exe, nullptr) << error;
    if (exe == nullptr) return {};
    QTensor x = d.xq;
    x.refresh();
    QTensor y{c.y_shape, LOOM_DTYPE_U8, std::vector<uint8_t>(count_of(c.y_shape), 0x5a)};
    y.refresh();
    std::vector<float> core_out(count_of(c.y_shape));
    loom_tensor_t core_desc =
        ::loom::testing::host_tensor(LOOM_DTYPE_F32, c.y_shape, core_out.data(), core_out.size() * 4);
    std::vector<const loom_tensor_t*> outs = {&y.desc};
    if (!fused) outs.push_back(&core_desc);
    // Twice: the second run reuses the packed weights and kept buffers.
    for (int run = 0; run < 2; ++run) {
      std::fill(y.bytes.begin(), y.bytes.end(), uint8_t{0x5a});
      EXPECT_EQ(execute(exe, {&x.desc}, outs), "ok");
    }
    api_->executable_destroy(exe);
    return y.bytes;
  }

  // The exact sum of (x - x_zero) * w over every tap that reaches an
  // output, plus the bias, requantized as a QuantizeLinear does: the sum in
  // float times x_scale * w_scale / y_scale (float), rounded half to even,
  // the zero point added, clamped by the type and the activation.
  std::vector<uint8_t> exact_result(const DeconvCase& c, const Data& d) {
    const int64_t n_ = c.x_shape[0], cc = c.x_shape[1], h = c.x_shape[2], w = c.x_shape[3];
    const int64_t oh_ = c.y_shape[2], ow_ = c.y_shape[3], kh_ = c.w_shape[2], kw_ = c.w_shape[3];
    const int64_t cg = cc / c.group;
    std::vector<int64_t> acc(count_of(c.y_shape), 0);
    const int xz = d.xz.bytes[0];
    for (int64_t b = 0; b < n_; ++b) {
      for (int64_t ci = 0; ci < cc; ++ci) {
        const int64_t gi = ci / cg;
        for (int64_t ih = 0; ih < h; ++ih) {
          for (int64_t iw = 0; iw < w; ++iw) {
            const int64_t xv = int64_t{d.xq.bytes[static_cast<size_t>(((b * cc + ci) * h + ih) * w + iw)]} - xz;
            for (int64_t j = 0; j < d.mg; ++j) {
              for (int64_t kh = 0; kh < kh_; ++kh) {
                const int64_t oh = ih * c.strides[0] - c.pads[0] + kh * c.dilations[0];
                if (oh < 0 || oh >= oh_) continue;
                for (int64_t kw = 0; kw < kw_; ++kw) {
                  const int64_t ow = iw * c.strides[1] - c.pads[1] + kw * c.dilations[1];
                  if (ow < 0 || ow >= ow_) continue;
                  const int64_t wv =
                      static_cast<int8_t>(d.wq.bytes[static_cast<size_t>(((ci * d.mg + j) * kh_ + kh) * kw_ + kw)]);
                  const int64_t m = gi * d.mg + j;
                  acc[static_cast<size_t>(((b * d.m + m) * oh_ + oh) * ow_ + ow)] += xv * wv;
                }
              }
            }
          }
        }
      }
    }
    auto quantize = [&](float v) {
      const float r = std::nearbyint(v / deconv_f32(d.ys, 0)) + static_cast<float>(d.yz.bytes[0]);
      return static_cast<double>(std::clamp(r, 0.0f, 255.0f));
    };
    const double lo = c.act == 1 ? quantize(0.0f) : c.act == 2 ? quantize(-0.5f) : 0.0;
    const double hi = c.act == 2 ? quantize(2.0f) : 255.0;
    std::vector<uint8_t> y(acc.size());
    const size_t spatial = static_cast<size_t>(oh_ * ow_);
    for (size_t i = 0; i < acc.size(); ++i) {
      const size_t m = (i / spatial) % static_cast<size_t>(d.m);
      int32_t bias = 0;
      if (c.bias != 0) std::memcpy(&bias, d.bias_i32.bytes.data() + 4 * m, 4);
      const float mult = deconv_f32(d.xs, 0) *
                         deconv_f32(d.ws, c.per_channel ? m % static_cast<size_t>(d.mg) : 0) / deconv_f32(d.ys, 0);
      const double r = std::nearbyint(static_cast<double>(static_cast<float>(acc[i] + bias) * mult)) + d.yz.bytes[0];
      y[i] = static_cast<uint8_t>(std::clamp(r, lo, hi));
    }
    return y;
  }
};

TEST_F(CpuSimdQdqDeconv, AQdqConvTransposeIsOneInt8StepEqualToTheExactSumOnEveryPath) {
  std::mt19937 rng(41);
  const std::vector<DeconvCase> cases = {
      {"8-bit per-channel weights, i32 bias, Relu, stride 2 (the detector's form)", {1, 8, 5, 5}, {8, 12, 4, 4},
       {1, 12, 10, 10}, 1, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0, 0}, true, 2, 1, 8, 0},
      {"7-bit weights per tensor, two groups, dilation, output_padding, f32 bias, Clip, batch 2", {2, 6, 4, 5},
       {6, 3, 3, 3}, {2, 6, 11, 16}, 2, {2, 3}, {2, 1}, {1, 0, 0, 1}, {1, 2}, false, 1, 2, 7, 0},
      {"a bias beyond 2^24 (the s32 call and the plugin's loop), 5 channels, no activation", {1, 4, 3, 3},
       {4, 5, 3, 3}, {1, 5, 5, 5}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, {0, 0}, true, 2, 0, 8, 20000000},
      {"8-bit weights without a bias, 18 channels (a tail after 16)", {1, 3, 6, 6}, {3, 18, 2, 2}, {1, 18, 12, 12},
       1, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, false, 0, 0, 8, 0},
  };
  for (const DeconvCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Data d = make_data(c, rng);
    const std::vector<uint8_t> fused = compile_and_run(c, d, true);
    const std::vector<uint8_t> unfused = compile_and_run(c, d, false);
    const std::vector<uint8_t> want = exact_result(c, d);
    ASSERT_EQ(fused.size(), want.size());
    ASSERT_EQ(unfused.size(), want.size());
    size_t differ = 0, off_by_one = 0;
    std::vector<bool> seen(256, false);
    size_t distinct = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      differ += fused[i] != want[i];
      const int delta = std::abs(int{fused[i]} - int{unfused[i]});
      EXPECT_LE(delta, 1) << "element " << i;
      off_by_one += delta == 1;
      distinct += !seen[fused[i]];
      seen[fused[i]] = true;
    }
    EXPECT_EQ(differ, 0u) << differ << " of " << want.size() << " differ from the exact sum";
    EXPECT_GT(distinct, 20u);  // outputs that say something, not all clamped
    std::cout << c.name << ": " << off_by_one << " of " << want.size() << " outputs 1 unit from the unfused graph\n";
  }
}

TEST_F(CpuSimdQdqDeconv, CompileNotesNameTheStepAndWhyAGroupStaysF32) {
  std::mt19937 rng(42);
  DeconvCase c = {"", {1, 4, 3, 3}, {4, 4, 3, 3}, {1, 4, 5, 5}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, {0, 0}, true, 2, 1,
                  8, 0};
  Data d = make_data(c, rng);
  auto notes_of = [&](const Data& data) {
    const size_t before = harness_.recorder().logs().size();
    ::loom::testing::CompiledBlob compiled;
    EXPECT_EQ(harness_.compile(plugin_, graph(c, data, false).finish(), &compiled), "ok");
    std::vector<std::string> logs = harness_.recorder().logs(), notes;
    for (size_t i = before; i < logs.size(); ++i) {
      if (logs[i].rfind("compile: ", 0) == 0) notes.push_back(logs[i]);
    }
    return notes;
  };
  EXPECT_EQ(notes_of(d), std::vector<std::string>{"compile: int8: node n3 (ConvTranspose): one QLinearConvTranspose "
                                                  "step with its DequantizeLinear inputs and QuantizeLinear output"});
  // A weight zero point other than 0 keeps the group in f32, and says why.
  d.wz.bytes[1] = 3;
  const std::vector<std::string> unfused = notes_of(d);
  ASSERT_EQ(unfused.size(), 1u);
  EXPECT_EQ(unfused[0].rfind("compile: f32: node n3 (ConvTranspose) reads dequantized", 0), 0u) << unfused[0];
  EXPECT_NE(unfused[0].find("i8 weights of zero point 0"), std::string::npos) << unfused[0];
}

// Weights bound at run time (a parameter, as `--params-out` writes them)
// are packed where they are bound: the group is still one step, equal to
// the exact sum, also after the weight moves. An i32 bias bound at run time
// cannot be read when the step loads: the group stays f32, within 1 unit.
TEST_F(CpuSimdQdqDeconv, AParameterWeightIsPackedWhereBoundAndAParameterBiasKeepsTheGroupF32) {
  std::mt19937 rng(43);
  const DeconvCase c = {"", {1, 8, 5, 5}, {8, 12, 4, 4}, {1, 12, 10, 10}, 1, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0, 0},
                        true, 2, 1, 8, 0};
  const Data d = make_data(c, rng);
  const std::vector<uint8_t> want = exact_result(c, d);
  for (const bool bias_parameter : {false, true}) {
    SCOPED_TRACE(bias_parameter ? "bias parameter" : "weight parameter");
    ::loom::testing::CompiledBlob compiled;
    ASSERT_EQ(harness_.compile(plugin_, graph(c, d, false, !bias_parameter, bias_parameter).finish(), &compiled),
              "ok");
    BlobGraph g;
    std::string error;
    ASSERT_TRUE(decode(compiled.bytes.data(), compiled.bytes.size(), &g, &error)) << error;
    size_t steps = 0;
    for (const BlobNode& n : g.nodes) steps += n.op == Op::kQLinearConvTranspose;
    EXPECT_EQ(steps, bias_parameter ? 0u : 1u);
    loom_executable_t* exe = load(compiled.bytes, &error, compiled.format_version);
    ASSERT_NE(exe, nullptr) << error;
    for (int round = 0; round < 2; ++round) {
      // Fresh copies each round: the bound weight moves.
      QTensor x = d.xq, bound = bias_parameter ? d.bias_i32 : d.wq;
      x.refresh();
      bound.refresh();
      QTensor y{c.y_shape, LOOM_DTYPE_U8, std::vector<uint8_t>(count_of(c.y_shape), 0x5a)};
      y.refresh();
      ASSERT_EQ(execute(exe, {&x.desc, &bound.desc}, {&y.desc}), "ok");
      size_t differ = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const int delta = std::abs(int{y.bytes[i]} - int{want[i]});
        EXPECT_LE(delta, 1) << "element " << i;
        differ += delta != 0;
      }
      if (!bias_parameter) EXPECT_EQ(differ, 0u) << "the int8 step is exact";
    }
    api_->executable_destroy(exe);
  }
}

// A blob that breaks what the step reads when it loads: an error naming
// the node and the operand, never a wrong answer.
TEST_F(CpuSimdQdqDeconv, ABlobWhoseStepCannotBeReadAtLoadIsAnErrorNamingIt) {
  auto blob = [](bool scale_input, int w_zero) {
    BlobGraph g;
    auto add = [&](loom_dtype_t dt, Dims shape, std::vector<uint8_t> bytes, std::vector<float> data) {
      BlobTensor t;
      t.dtype = dt;
      t.shape = std::move(shape);
      t.constant = !bytes.empty() || !data.empty();
      t.bytes = std::move(bytes);
      t.data = std::move(data);
      g.tensors.push_back(t);
      return static_cast<uint32_t>(g.tensors.size() - 1);
    };
    const uint32_t x = add(LOOM_DTYPE_U8, {1, 2, 2, 2}, {}, {});
    const uint32_t xs = scale_input ? add(LOOM_DTYPE_F32, {}, {}, {}) : add(LOOM_DTYPE_F32, {}, {}, {0.5f});
    const uint32_t xz = add(LOOM_DTYPE_U8, {}, {3}, {});
    const uint32_t w = add(LOOM_DTYPE_I8, {2, 1, 2, 2}, std::vector<uint8_t>(8, 1), {});
    const uint32_t ws = add(LOOM_DTYPE_F32, {}, {}, {0.25f});
    const uint32_t wz = add(LOOM_DTYPE_I8, {}, {static_cast<uint8_t>(w_zero)}, {});
    const uint32_t ys = add(LOOM_DTYPE_F32, {}, {}, {1.0f});
    const uint32_t yz = add(LOOM_DTYPE_U8, {}, {7}, {});
    const uint32_t y = add(LOOM_DTYPE_U8, {1, 1, 3, 3}, {}, {});
    g.inputs = {x};
    if (scale_input) g.inputs.push_back(xs);
    g.outputs = {y};
    BlobNode n;
    n.op = Op::kQLinearConvTranspose;
    n.inputs = {x, xs, xz, w, ws, wz, ys, yz};
    n.outputs = {y};
    n.ints = {2, 1, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0};
    n.trans_a = 1;
    g.nodes = {n};
    return g;
  };
  std::string error;
  const BlobGraph good = blob(false, 0);
  ASSERT_TRUE(validate(good, &error)) << error;
  loom_executable_t* exe = load(encode(good), &error, 12);
  ASSERT_NE(exe, nullptr) << error;
  // x all 5: (5 - 3) * 1 summed over the taps that reach each output, times
  // 0.5 * 0.25, rounded, plus 7. Corners 1 tap per input channel (2 x 2 =
  // 4 -> 0.5 -> 0 (ties to even) -> 7), edges 2 taps (8 -> 1 -> 8), the
  // centre 4 (16 -> 2 -> 9).
  QTensor x{{1, 2, 2, 2}, LOOM_DTYPE_U8, std::vector<uint8_t>(8, 5)};
  x.refresh();
  QTensor y{{1, 1, 3, 3}, LOOM_DTYPE_U8, std::vector<uint8_t>(9, 0)};
  y.refresh();
  ASSERT_EQ(execute(exe, {&x.desc}, {&y.desc}), "ok");
  EXPECT_EQ(y.bytes, (std::vector<uint8_t>{7, 8, 7, 8, 9, 8, 7, 8, 7}));
  api_->executable_destroy(exe);

  const BlobGraph input_scale = blob(true, 0);
  ASSERT_TRUE(validate(input_scale, &error)) << error;
  EXPECT_EQ(load(encode(input_scale), &error, 12), nullptr);
  EXPECT_NE(error.find("node 0 (QLinearConvTranspose): x_scale must be a constant of the blob"), std::string::npos)
      << error;
  const BlobGraph zero_point = blob(false, 2);
  EXPECT_EQ(load(encode(zero_point), &error, 12), nullptr);
  EXPECT_NE(error.find("node 0 (QLinearConvTranspose): w_zero_point is 2; QLinearConvTranspose takes weights of zero "
                       "point 0"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace loom::cpu_simd
