// QDQ groups (DequantizeLinear -> Conv / MatMul / Gemm -> Relu / Clip ->
// QuantizeLinear) compiled through the plugin's compile entries become one
// quantized step that equals the QLinear form on the reference kernels
// exactly and the unfused graph within 1 unit; a bad scale is one compile
// error naming the node; the compile notes say which groups ran int8; an
// open batch keeps the fusion.
#include <algorithm>
#include <limits>

#include "cpu_simd_int8_support.hpp"
#include "cpu_simd_plugin_fixture.hpp"
#include "graph_builder.hpp"

namespace loom::cpu_simd {
namespace {

using namespace int8_testing;  // NOLINT(build/namespaces)

// --- QDQ fusion ---

struct QdqCase {
  const char* name;
  int core;  // 0 Conv, 1 MatMul, 2 Gemm with transB
  loom_dtype_t x, w, y;
  bool per_channel;
  int bias;  // 0 none, 1 f32 constant, 2 DequantizeLinear of i32 at x_scale * w_scale[m]
  int act;   // 0 none, 1 Relu, 2 Clip(-0.5, 2)
  bool w_parameter;
  Dims x_shape, w_shape, y_shape;
  Dims strides, pads;
};

::loom::graph::fb::DType qdq_fb(loom_dtype_t d) {
  using F = ::loom::graph::fb::DType;
  return d == LOOM_DTYPE_U8 ? F::u8 : d == LOOM_DTYPE_I8 ? F::i8 : d == LOOM_DTYPE_I32 ? F::i32 : F::f32;
}

int qdq_value(const QTensor& t, size_t i) {
  return t.dtype == LOOM_DTYPE_I8 ? static_cast<int8_t>(t.bytes[i]) : t.bytes[i];
}

class CpuSimdQdq : public CpuSimdInt8 {
 protected:
  // The quantized values and scales of one case.
  struct Data {
    QTensor xq, xs, xz, wq, ws, wz, ys, yz, bias_i32;  // bias_i32: accumulator units
    std::vector<float> bias_f;
    int64_t channels = 0;
  };

  static float f32_at(const QTensor& t, size_t i) {
    float v;
    std::memcpy(&v, t.bytes.data() + 4 * i, 4);
    return v;
  }

  Data make_data(const QdqCase& c, std::mt19937& rng) {
    Data d;
    d.channels = c.core == 1 ? c.w_shape[1] : c.w_shape[0];
    const Dims ch = c.per_channel ? Dims{d.channels} : Dims{};
    d.xq = make(c.x_shape, c.x, rng);
    d.xs = exact({}, LOOM_DTYPE_F32, {0.02f});
    d.xz = exact({}, c.x, {c.x == LOOM_DTYPE_U8 ? 121.0f : -3.0f});
    d.wq = make(c.w_shape, c.w, rng);
    std::uniform_real_distribution<float> w_scale(0.002f, 0.01f);
    std::vector<float> ws(count_of(ch));
    for (float& v : ws) v = w_scale(rng);
    d.ws = exact(ch, LOOM_DTYPE_F32, ws);
    d.wz = exact(ch, c.w, std::vector<float>(count_of(ch), c.w == LOOM_DTYPE_U8 ? 130.0f : 0.0f));
    d.ys = exact({}, LOOM_DTYPE_F32, {0.05f});
    d.yz = exact({}, c.y, {c.y == LOOM_DTYPE_U8 ? 100.0f : -10.0f});
    std::uniform_real_distribution<float> real(-1.0f, 1.0f);
    std::uniform_int_distribution<int32_t> wide(-5000, 5000);
    std::vector<int32_t> bi(static_cast<size_t>(d.channels));
    for (int64_t m = 0; m < d.channels; ++m) {
      const float acc_scale = f32_at(d.xs, 0) * f32_at(d.ws, c.per_channel ? static_cast<size_t>(m) : 0);
      if (c.bias == 1) {
        d.bias_f.push_back(real(rng));
        bi[static_cast<size_t>(m)] =
            static_cast<int32_t>(std::nearbyint(static_cast<double>(d.bias_f.back()) / acc_scale));
      } else {
        bi[static_cast<size_t>(m)] = wide(rng);
      }
    }
    d.bias_i32 = QTensor{{d.channels}, LOOM_DTYPE_I32, std::vector<uint8_t>(bi.size() * 4)};
    std::memcpy(d.bias_i32.bytes.data(), bi.data(), bi.size() * 4);
    return d;
  }

  // The QDQ graph of `c`; `unfusable` also makes the core's f32 output a graph
  // output, which keeps the group apart.
  ::loom::testing::GraphBuilder graph(const QdqCase& c, const Data& d, bool unfusable) {
    using ::loom::testing::attr_i;
    using ::loom::testing::attr_ints;
    ::loom::testing::GraphBuilder b;
    const int xq = b.input(c.x_shape, qdq_fb(c.x));
    int wq;
    if (c.w_parameter) {
      wq = b.parameter(c.w_shape, "w");
      b.tensors[static_cast<size_t>(wq)].dtype = qdq_fb(c.w);
    } else {
      wq = b.constant(c.w_shape, qdq_fb(c.w), d.wq.bytes.data(), d.wq.bytes.size());
    }
    auto constant = [&](const QTensor& t) { return b.constant(t.shape, qdq_fb(t.dtype), t.bytes.data(), t.bytes.size()); };
    const int xf = b.tensor(c.x_shape), wf = b.tensor(c.w_shape), yf = b.tensor(c.y_shape);
    const int yq = b.tensor(c.y_shape, qdq_fb(c.y));
    b.node("DequantizeLinear", {xq, constant(d.xs), constant(d.xz)}, {xf});
    b.node("DequantizeLinear", {wq, constant(d.ws), constant(d.wz)}, {wf},
           {attr_i("axis", c.core == 1 ? 1 : 0)});
    std::vector<int32_t> core_in = {xf, wf};
    if (c.bias == 1) {
      core_in.push_back(b.constant_f32({d.channels}, d.bias_f));
    } else if (c.bias == 2) {
      // The quantizer's form: scale x_scale * w_scale[m] in f32, zero point 0.
      std::vector<float> sb;
      for (int64_t m = 0; m < d.channels; ++m) {
        sb.push_back(f32_at(d.xs, 0) * f32_at(d.ws, c.per_channel ? static_cast<size_t>(m) : 0));
      }
      const int bq = constant(d.bias_i32), bf = b.tensor({d.channels});
      b.node("DequantizeLinear", {bq, b.constant_f32(c.per_channel ? Dims{d.channels} : Dims{}, c.per_channel ? sb : std::vector<float>{sb[0]})}, {bf},
             {attr_i("axis", 0)});
      core_in.push_back(bf);
    }
    const int cf = c.act != 0 ? b.tensor(c.y_shape) : yf;
    if (c.core == 0) {
      b.node("Conv", core_in, {cf}, {attr_ints("strides", c.strides), attr_ints("pads", c.pads)});
    } else if (c.core == 1) {
      b.node("MatMul", core_in, {cf});
    } else {
      b.node("Gemm", core_in, {cf}, {attr_i("transB", 1)});
    }
    if (c.act == 1) b.node("Relu", {cf}, {yf});
    if (c.act == 2) b.node("Clip", {cf, b.constant_f32({}, {-0.5f}), b.constant_f32({}, {2.0f})}, {yf});
    b.node("QuantizeLinear", {yf, constant(d.ys), constant(d.yz)}, {yq});
    b.output(yq);
    if (unfusable) b.output(cf);
    return b;
  }

  // Compiles `b`, checks the blob's nodes, runs it on the inputs; the first
  // output's bytes.
  std::vector<uint8_t> compile_and_run(const QdqCase& c, const Data& d, const ::loom::testing::GraphBuilder& b,
                                       bool fused) {
    ::loom::testing::CompiledBlob compiled;
    const std::string s = harness_.compile(plugin_, b.finish(), &compiled);
    EXPECT_EQ(s, "ok");
    if (s != "ok") return {};
    BlobGraph g;
    std::string error;
    EXPECT_TRUE(decode(compiled.bytes.data(), compiled.bytes.size(), &g, &error)) << error;
    if (fused) {
      // One node: the QLinear form, with the activation as its clamp,
      // requantizing as the QuantizeLinear does (format 10's trans_a 1).
      EXPECT_EQ(g.nodes.size(), 1u);
      if (g.nodes.empty()) return {};
      EXPECT_EQ(g.nodes[0].op, c.core == 0 ? Op::kQLinearConv : Op::kQLinearMatMul);
      EXPECT_EQ(g.nodes[0].floats.size(), c.act != 0 ? 2u : 0u);
      EXPECT_EQ(g.nodes[0].trans_a, 1);
      EXPECT_EQ(compiled.format_version, 10u);
    } else {
      size_t quant = 0, dequantize = 0;
      for (const BlobNode& n : g.nodes) {
        quant += n.op == Op::kQLinearConv || n.op == Op::kQLinearMatMul;
        dequantize += n.op == Op::kDequantizeLinear;
      }
      EXPECT_EQ(quant, 0u) << "the group's f32 result is a graph output: not fused";
      // The DequantizeLinear of a constant weight or bias that did not fuse
      // is folded into an f32 constant; x's (and a parameter weight's) stay.
      EXPECT_EQ(dequantize, c.w_parameter ? 2u : 1u);
    }
    loom_executable_t* exe = load(compiled.bytes, &error, compiled.format_version);
    EXPECT_NE(exe, nullptr) << error;
    if (exe == nullptr) return {};
    QTensor x = d.xq, w = d.wq;
    x.refresh();
    w.refresh();
    std::vector<const loom_tensor_t*> ins = {&x.desc};
    if (c.w_parameter) ins.push_back(&w.desc);
    QTensor y{c.y_shape, c.y, std::vector<uint8_t>(count_of(c.y_shape), 0x5a)};
    y.refresh();
    std::vector<float> core_out(count_of(c.y_shape));
    loom_tensor_t core_desc = ::loom::testing::host_tensor(LOOM_DTYPE_F32, c.y_shape, core_out.data(), core_out.size() * 4);
    std::vector<const loom_tensor_t*> outs = {&y.desc};
    if (!fused) outs.push_back(&core_desc);
    EXPECT_EQ(execute(exe, ins, outs), "ok");
    api_->executable_destroy(exe);
    return y.bytes;
  }

  // The accumulators on the reference kernels (ConvInteger, MatMulInteger),
  // requantized as the QuantizeLinear does (format 10's trans_a 1: rounded
  // half to even, then the zero point added), then the activation's clamp.
  std::vector<uint8_t> reference(const QdqCase& c, Data d) {
    const auto registry = kernels::KernelRegistry::reference();
    QTensor y{c.y_shape, c.y, std::vector<uint8_t>(count_of(c.y_shape), 0x5a)};
    Status st;
    QTensor w_kn = d.wq;  // B as [K, N]
    if (c.core == 2) {
      const int64_t n = c.w_shape[0], k = c.w_shape[1];
      w_kn.shape = {k, n};
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t kk = 0; kk < k; ++kk) w_kn.bytes[static_cast<size_t>(kk * n + j)] = d.wq.bytes[static_cast<size_t>(j * k + kk)];
      }
    }
    QTensor acc{c.y_shape, LOOM_DTYPE_I32, std::vector<uint8_t>(count_of(c.y_shape) * 4)};
    std::vector<kernels::TensorRef> acc_out = {acc.ref()};
    if (c.core == 0) {
      std::vector<kernels::TensorRef> refs = {d.xq.ref(), d.wq.ref(), d.xz.ref(), d.wz.ref()};
      st = registry.find("ConvInteger")->run(refs, acc_out, kernels::Attributes(conv_kernel_attrs(1, c.strides, {1, 1}, c.pads)));
    } else {
      std::vector<kernels::TensorRef> refs = {d.xq.ref(), w_kn.ref(), d.xz.ref(), d.wz.ref()};
      st = registry.find("MatMulInteger")->run(refs, acc_out, kernels::Attributes(std::vector<AttributeDef>{}));
    }
    const double yz = qdq_value(d.yz, 0);
    const size_t spatial = c.core == 0 ? static_cast<size_t>(c.y_shape[2] * c.y_shape[3]) : 1;
    for (size_t i = 0; i < count_of(c.y_shape); ++i) {
      const size_t m = (i / spatial) % static_cast<size_t>(d.channels);
      int32_t a, bias = 0;
      std::memcpy(&a, acc.bytes.data() + 4 * i, 4);
      if (c.bias != 0) std::memcpy(&bias, d.bias_i32.bytes.data() + 4 * m, 4);
      const float mult = f32_at(d.xs, 0) * f32_at(d.ws, c.per_channel ? m : 0) / f32_at(d.ys, 0);
      double r = std::nearbyint(static_cast<double>(static_cast<float>(int64_t{a} + bias) * mult)) + yz;
      r = std::clamp(r, c.y == LOOM_DTYPE_U8 ? 0.0 : -128.0, c.y == LOOM_DTYPE_U8 ? 255.0 : 127.0);
      y.bytes[i] = static_cast<uint8_t>(static_cast<int>(r) & 0xff);
    }
    EXPECT_TRUE(st.ok()) << st.to_string();
    // Relu / Clip, quantized with QuantizeLinear's formula.
    const int tmin = c.y == LOOM_DTYPE_U8 ? 0 : -128, tmax = c.y == LOOM_DTYPE_U8 ? 255 : 127;
    auto quantize = [&](float v) {
      const float r = std::nearbyint(v / f32_at(d.ys, 0)) + static_cast<float>(qdq_value(d.yz, 0));
      return static_cast<int>(std::clamp(r, static_cast<float>(tmin), static_cast<float>(tmax)));
    };
    const int lo = c.act == 1 ? quantize(0.0f) : c.act == 2 ? quantize(-0.5f) : tmin;
    const int hi = c.act == 2 ? quantize(2.0f) : tmax;
    for (size_t i = 0; i < y.bytes.size(); ++i) {
      const int v = std::clamp(qdq_value(y, i), lo, hi);
      y.bytes[i] = static_cast<uint8_t>(v & 0xff);
    }
    return y.bytes;
  }
};

TEST_F(CpuSimdQdq, QdqGroupsFuseIntoOneStepEqualToTheQLinearFormAndWithinOneUnitOfTheUnfusedGraph) {
  std::mt19937 rng(31);
  const std::vector<QdqCase> cases = {
      {"conv u8 x, per-channel i8 w, f32 bias, Relu", 0, LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_U8, true, 1, 1, false,
       {1, 3, 8, 8}, {6, 3, 3, 3}, {1, 6, 8, 8}, {1, 1}, {1, 1, 1, 1}},
      {"conv i8 x, per-tensor i8 w parameter, i32 bias, Clip", 0, LOOM_DTYPE_I8, LOOM_DTYPE_I8, LOOM_DTYPE_I8, false, 2, 2,
       true, {2, 4, 9, 9}, {5, 4, 3, 3}, {2, 5, 4, 4}, {2, 2}, {0, 0, 0, 0}},
      {"conv u8 x, u8 w, no bias, no activation", 0, LOOM_DTYPE_U8, LOOM_DTYPE_U8, LOOM_DTYPE_U8, true, 0, 0, false,
       {1, 2, 5, 5}, {3, 2, 1, 1}, {1, 3, 5, 5}, {1, 1}, {0, 0, 0, 0}},
      {"matmul u8 a, per-column i8 b", 1, LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_U8, true, 0, 0, false,
       {3, 16}, {16, 8}, {3, 8}, {}, {}},
      {"gemm transB, f32 bias, Relu", 2, LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_U8, true, 1, 1, true,
       {2, 24}, {10, 24}, {2, 10}, {}, {}},
      {"gemm transB, i32 bias, Clip, i8 out", 2, LOOM_DTYPE_I8, LOOM_DTYPE_I8, LOOM_DTYPE_I8, false, 2, 2, false,
       {4, 12}, {6, 12}, {4, 6}, {}, {}},
  };
  for (const QdqCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Data d = make_data(c, rng);
    const std::vector<uint8_t> fused = compile_and_run(c, d, graph(c, d, false), true);
    const std::vector<uint8_t> unfused = compile_and_run(c, d, graph(c, d, true), false);
    const std::vector<uint8_t> want = reference(c, d);
    ASSERT_EQ(fused.size(), want.size());
    ASSERT_EQ(unfused.size(), want.size());
    QTensor f{c.y_shape, c.y, fused}, u{c.y_shape, c.y, unfused};
    size_t differ = 0, off_by_one = 0, distinct = 0;
    std::vector<bool> seen(256, false);
    for (size_t i = 0; i < want.size(); ++i) {
      differ += fused[i] != want[i];
      const int delta = std::abs(qdq_value(f, i) - qdq_value(u, i));
      EXPECT_LE(delta, 1) << "element " << i;
      off_by_one += delta == 1;
      distinct += !seen[fused[i]];
      seen[fused[i]] = true;
    }
    EXPECT_EQ(differ, 0u) << differ << " of " << want.size() << " differ from the QLinear form rounding first";
    // Outputs that say something: many distinct values, not all clamped.
    EXPECT_GT(distinct, std::min<size_t>(want.size() / 4, 20u));
    std::cout << c.name << ": " << off_by_one << " of " << want.size() << " outputs 1 unit from the unfused graph\n";
  }
}

// A model exported with an open batch (x [N, 3, 8, 8]) compiles once: the
// group is still one QLinearConv node, in an open blob, and every batch
// runs it with the bytes of the QLinear form on the reference kernels.
TEST_F(CpuSimdQdq, AQdqGroupWithAnOpenBatchIsOneQLinearStepAtEveryBatch) {
  std::mt19937 rng(34);
  const QdqCase fixed = {"", 0, LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_U8, true, 1, 1, false,
                         {3, 3, 8, 8}, {6, 3, 3, 3}, {3, 6, 8, 8}, {1, 1}, {1, 1, 1, 1}};
  QdqCase open = fixed;
  open.x_shape[0] = -1;
  open.y_shape[0] = -1;
  const Data d = make_data(fixed, rng);
  ::loom::testing::CompiledBlob compiled;
  ASSERT_EQ(harness_.compile(plugin_, graph(open, d, false).finish(), &compiled), "ok");
  BlobGraph g;
  std::string error;
  ASSERT_TRUE(decode(compiled.bytes.data(), compiled.bytes.size(), &g, &error)) << error;
  EXPECT_TRUE(has_open_dims(g));
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op, Op::kQLinearConv);
  EXPECT_EQ(g.nodes[0].trans_a, 1);
  loom_executable_t* exe = load(compiled.bytes, &error, compiled.format_version);
  ASSERT_NE(exe, nullptr) << error;
  const std::vector<uint8_t> want = reference(fixed, d);
  const size_t per_image_in = count_of(fixed.x_shape) / 3, per_image_out = want.size() / 3;
  for (int64_t n : {3, 1, 2, 3, 1}) {
    SCOPED_TRACE("batch " + std::to_string(n));
    QTensor x{{n, 3, 8, 8}, fixed.x,
              std::vector<uint8_t>(d.xq.bytes.begin(), d.xq.bytes.begin() + static_cast<ptrdiff_t>(n * per_image_in))};
    x.refresh();
    QTensor y{{n, 6, 8, 8}, fixed.y, std::vector<uint8_t>(static_cast<size_t>(n) * per_image_out, 0x5a)};
    y.refresh();
    ASSERT_EQ(execute(exe, {&x.desc}, {&y.desc}), "ok");
    EXPECT_TRUE(std::equal(y.bytes.begin(), y.bytes.end(), want.begin()));
  }
  // Three bindings (batches 3, 1 and 2); the weights were packed at the
  // first one's run and reused by the other two (the log line of a binding
  // counts the packs before its own first run).
  std::vector<std::string> prepared;
  for (const std::string& l : harness_.recorder().logs()) {
    if (l.find("executable: prepared binding") != std::string::npos) prepared.push_back(l);
  }
  ASSERT_EQ(prepared.size(), 3u);
  EXPECT_NE(prepared[2].find("weight packs so far: 1 made, 1 reused"), std::string::npos) << prepared[2];
  api_->executable_destroy(exe);
}

TEST_F(CpuSimdQdq, ABadScaleInAQdqGroupIsStillOneCompileErrorNamingTheNode) {
  std::mt19937 rng(32);
  const QdqCase c = {"", 0, LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_U8, true, 1, 1, false,
                     {1, 3, 8, 8}, {6, 3, 3, 3}, {1, 6, 8, 8}, {1, 1}, {1, 1, 1, 1}};
  Data d = make_data(c, rng);
  const float zero = 0.0f;
  std::memcpy(d.ws.bytes.data() + 8, &zero, 4);
  ::loom::testing::CompiledBlob compiled;
  const std::string s = harness_.compile(plugin_, graph(c, d, false).finish(), &compiled);
  EXPECT_NE(s.find("node n1 (DequantizeLinear) is not supported by cpu-simd: the scale entry 2 is 0.000000; a scale "
                   "must be positive and finite"),
            std::string::npos)
      << s;
}

TEST_F(CpuSimdQdq, CompileNotesSayWhichGroupsRunInt8AndWhyTheOthersStayF32) {
  // The notes compile logs at info level (`loom compile` prints them): the
  // fused group is an int8 step named by its core node; the same group with
  // the Conv's f32 output also a graph output stays f32, and says why.
  std::mt19937 rng(33);
  const QdqCase c = {"", 0, LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_U8, true, 1, 1, false,
                     {1, 3, 8, 8}, {6, 3, 3, 3}, {1, 6, 8, 8}, {1, 1}, {1, 1, 1, 1}};
  const Data d = make_data(c, rng);
  auto notes_of = [&](bool unfusable) {  // the "compile: " lines this compile logged
    const size_t before = harness_.recorder().logs().size();
    ::loom::testing::CompiledBlob compiled;
    EXPECT_EQ(harness_.compile(plugin_, graph(c, d, unfusable).finish(), &compiled), "ok");
    std::vector<std::string> logs = harness_.recorder().logs(), notes;
    for (size_t i = before; i < logs.size(); ++i) {
      if (logs[i].rfind("compile: ", 0) == 0) notes.push_back(logs[i]);
    }
    return notes;
  };
  EXPECT_EQ(notes_of(false), std::vector<std::string>{"compile: int8: node n2 (Conv): one QLinearConv step with its "
                                                      "DequantizeLinear inputs and QuantizeLinear output"});
  const std::vector<std::string> unfused = notes_of(true);
  ASSERT_EQ(unfused.size(), 1u);
  EXPECT_EQ(unfused[0].rfind("compile: f32: node n2 (Conv) reads dequantized", 0), 0u) << unfused[0];
  EXPECT_NE(unfused[0].find("its output is read by 1 node and is a graph output; the fusion needs one "
                            "QuantizeLinear as its only reader"), std::string::npos) << unfused[0];
}

// Issue 27's "a Q/DQ pair between two int8 steps disappears": two groups in
// a row, the second reading the first's QuantizeLinear through a
// DequantizeLinear of the same parameters (as quantizers write a chain),
// compile to two QLinearConv steps and nothing between them; the bytes are
// the two groups' exact requantizations one after the other.
TEST_F(CpuSimdQdq, TwoGroupsInARowAreTwoInt8StepsWithNoQuantizeOrDequantizeBetween) {
  using ::loom::testing::attr_i;
  using ::loom::testing::attr_ints;
  std::mt19937 rng(34);
  const QdqCase c1 = {"", 0, LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_U8, true, 2, 0, false,
                      {1, 3, 8, 8}, {6, 3, 3, 3}, {1, 6, 8, 8}, {1, 1}, {1, 1, 1, 1}};
  const QdqCase c2 = {"", 0, LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_U8, true, 2, 0, false,
                      {1, 6, 8, 8}, {4, 6, 1, 1}, {1, 4, 8, 8}, {1, 1}, {0, 0, 0, 0}};
  const Data d1 = make_data(c1, rng);
  Data d2 = make_data(c2, rng);
  d2.xs = d1.ys;  // the pair between the groups: one scale and zero point
  d2.xz = d1.yz;
  d2.ys = exact({}, LOOM_DTYPE_F32, {0.08f});
  ::loom::testing::GraphBuilder b;
  auto constant = [&](const QTensor& t) { return b.constant(t.shape, qdq_fb(t.dtype), t.bytes.data(), t.bytes.size()); };
  int x = b.input(c1.x_shape, qdq_fb(c1.x));
  const QdqCase* cs[2] = {&c1, &c2};
  const Data* ds[2] = {&d1, &d2};
  for (int k = 0; k < 2; ++k) {
    const QdqCase& c = *cs[k];
    const Data& d = *ds[k];
    std::vector<float> sb;
    for (int64_t m = 0; m < d.channels; ++m) sb.push_back(f32_at(d.xs, 0) * f32_at(d.ws, static_cast<size_t>(m)));
    const int xf = b.tensor(c.x_shape), wf = b.tensor(c.w_shape), bf = b.tensor({d.channels}), yf = b.tensor(c.y_shape);
    const int yq = b.tensor(c.y_shape, qdq_fb(c.y));
    b.node("DequantizeLinear", {x, constant(d.xs), constant(d.xz)}, {xf});
    b.node("DequantizeLinear", {constant(d.wq), constant(d.ws), constant(d.wz)}, {wf}, {attr_i("axis", 0)});
    b.node("DequantizeLinear", {constant(d.bias_i32), b.constant_f32({d.channels}, sb)}, {bf}, {attr_i("axis", 0)});
    b.node("Conv", {xf, wf, bf}, {yf}, {attr_ints("strides", c.strides), attr_ints("pads", c.pads)});
    b.node("QuantizeLinear", {yf, constant(d.ys), constant(d.yz)}, {yq});
    x = yq;
  }
  b.output(x);
  ::loom::testing::CompiledBlob compiled;
  ASSERT_EQ(harness_.compile(plugin_, b.finish(), &compiled), "ok");
  BlobGraph g;
  std::string error;
  ASSERT_TRUE(decode(compiled.bytes.data(), compiled.bytes.size(), &g, &error)) << error;
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op, Op::kQLinearConv);
  EXPECT_EQ(g.nodes[1].op, Op::kQLinearConv);
  EXPECT_EQ(g.nodes[1].inputs[0], g.nodes[0].outputs[0]) << "the second step reads the first's bytes";
  loom_executable_t* exe = load(compiled.bytes, &error, compiled.format_version);
  ASSERT_NE(exe, nullptr) << error;
  QTensor xin = d1.xq;
  xin.refresh();
  QTensor y{c2.y_shape, c2.y, std::vector<uint8_t>(count_of(c2.y_shape), 0x5a)};
  y.refresh();
  EXPECT_EQ(execute(exe, {&xin.desc}, {&y.desc}), "ok");
  api_->executable_destroy(exe);
  Data second = d2;
  second.xq = QTensor{c1.y_shape, c1.y, reference(c1, d1)};
  EXPECT_EQ(y.bytes, reference(c2, second));
}

}  // namespace
}  // namespace loom::cpu_simd
