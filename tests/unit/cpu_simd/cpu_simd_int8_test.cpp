// Format 6's quantized operators on the plugin against loom_kernels' reference
// kernels: QLinearConv, ConvInteger, QLinearMatMul, MatMulInteger,
// QuantizeLinear and DequantizeLinear must give the same bytes, for u8 and
// s8 activations and weights, per-tensor and per-channel scales and zero
// points, pads, strides, groups and biases; weights that are parameters are
// packed once and rebound at a new address; a bad scale bound at run time is
// an error naming the node.
#include "cpu_simd_plugin_fixture.hpp"

namespace loom::cpu_simd {
namespace {

// A tensor of any dtype, as bytes, with its plugin and kernel views.
struct QTensor {
  Dims shape;
  loom_dtype_t dtype = LOOM_DTYPE_U8;
  std::vector<uint8_t> bytes;
  loom_tensor_t desc{};

  void refresh() {
    desc = ::loom::testing::host_tensor(dtype, shape, bytes.data(), bytes.size());
  }
  kernels::TensorRef ref() {
    return kernels::TensorRef{static_cast<DType>(dtype), shape, bytes.data(), bytes.size()};
  }
};

QTensor make(Dims shape, loom_dtype_t dtype, std::mt19937& rng, int lo = -1000, int hi = 1000) {
  QTensor t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  const size_t n = count_of(t.shape);
  t.bytes.resize(n * dtype_size(dtype));
  std::uniform_int_distribution<int> any(0, 255);
  std::uniform_int_distribution<int> wide(lo, hi);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  std::uniform_real_distribution<float> real(-3.0f, 3.0f);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == LOOM_DTYPE_U8 || dtype == LOOM_DTYPE_I8) {
      t.bytes[i] = static_cast<uint8_t>(any(rng));
    } else if (dtype == LOOM_DTYPE_I32) {
      const int32_t v = wide(rng);
      std::memcpy(&t.bytes[i * 4], &v, 4);
    } else {
      const float v = lo == 1 ? scale(rng) : real(rng);
      std::memcpy(&t.bytes[i * 4], &v, 4);
    }
  }
  return t;
}

QTensor scales(Dims shape, std::mt19937& rng) { return make(std::move(shape), LOOM_DTYPE_F32, rng, 1, 1); }

class CpuSimdInt8 : public CpuSimdPlugin {
 protected:
  // Runs one node on the plugin (twice; inputs listed in `parameters` are
  // parameters, the second run binds them at a new address) and on the
  // reference kernel; the output bytes must be equal.
  void compare(Op op, const BlobNode& attrs, std::vector<QTensor> ins, const Dims& out_shape, loom_dtype_t out_dtype,
               const char* kernel, const std::vector<AttributeDef>& kernel_attrs, std::vector<int> blob_inputs = {},
               std::vector<int> parameters = {}) {
    if (blob_inputs.empty()) {
      for (size_t i = 0; i < ins.size(); ++i) blob_inputs.push_back(static_cast<int>(i));
    }
    BlobGraph g;
    for (int i : blob_inputs) {
      BlobTensor t;
      t.dtype = ins[static_cast<size_t>(i)].dtype;
      t.shape = ins[static_cast<size_t>(i)].shape;
      t.parameter = std::find(parameters.begin(), parameters.end(), i) != parameters.end();
      g.tensors.push_back(t);
      g.inputs.push_back(static_cast<uint32_t>(g.tensors.size() - 1));
    }
    BlobTensor o;
    o.dtype = out_dtype;
    o.shape = out_shape;
    g.tensors.push_back(o);
    const uint32_t y = static_cast<uint32_t>(g.tensors.size() - 1);
    g.outputs = {y};
    BlobNode node = attrs;
    node.op = op;
    node.inputs = g.inputs;
    node.outputs = {y};
    g.nodes = {node};
    std::string error;
    ASSERT_TRUE(validate(g, &error)) << error;
    ASSERT_EQ(format_version_for(g), 6u);
    loom_executable_t* exe = load(encode(g), &error);
    ASSERT_NE(exe, nullptr) << error;

    const size_t out_bytes = count_of(out_shape) * dtype_size(out_dtype);
    QTensor want{out_shape, out_dtype, std::vector<uint8_t>(out_bytes, 0x5a)};
    want.refresh();
    std::vector<kernels::TensorRef> refs;
    for (QTensor& t : ins) refs.push_back(t.ref());
    std::vector<kernels::TensorRef> outs = {want.ref()};
    const auto registry = kernels::KernelRegistry::reference();
    Status s = registry.find(kernel)->run(refs, outs, kernels::Attributes(kernel_attrs));
    ASSERT_TRUE(s.ok()) << s.to_string();

    for (int round = 0; round < 2; ++round) {
      // Round 1: fresh copies, so every input (parameters too) moves.
      std::vector<QTensor> run_ins;
      for (int i : blob_inputs) run_ins.push_back(ins[static_cast<size_t>(i)]);
      std::vector<const loom_tensor_t*> descs;
      for (QTensor& t : run_ins) {
        t.refresh();
        descs.push_back(&t.desc);
      }
      QTensor got{out_shape, out_dtype, std::vector<uint8_t>(out_bytes, 0xa5)};
      got.refresh();
      ASSERT_EQ(execute(exe, descs, {&got.desc}), "ok");
      ASSERT_EQ(got.bytes.size(), want.bytes.size());
      size_t differ = 0;
      for (size_t i = 0; i < got.bytes.size(); ++i) differ += got.bytes[i] != want.bytes[i];
      EXPECT_EQ(differ, 0u) << kernel << ": " << differ << " of " << got.bytes.size() << " bytes differ";
    }
    api_->executable_destroy(exe);
  }
};

BlobNode conv_attrs(int64_t group, Dims kernel, Dims strides, Dims dilations, Dims pads, int mask = 0) {
  BlobNode n;
  n.ints = {static_cast<int64_t>(kernel.size()), group};
  for (const Dims* v : {&kernel, &strides, &dilations, &pads}) n.ints.insert(n.ints.end(), v->begin(), v->end());
  n.trans_a = mask;
  return n;
}

std::vector<AttributeDef> conv_kernel_attrs(int64_t group, Dims strides, Dims dilations, Dims pads) {
  std::vector<AttributeDef> a = {int_attr("group", group)};
  auto ints = [](const char* name, Dims v) {
    AttributeDef d;
    d.name = name;
    d.kind = AttributeKind::kInts;
    d.ints = std::move(v);
    return d;
  };
  a.push_back(ints("strides", std::move(strides)));
  a.push_back(ints("dilations", std::move(dilations)));
  a.push_back(ints("pads", std::move(pads)));
  return a;
}

struct ConvCase {
  loom_dtype_t x, w, y;
  bool per_channel, bias;
  int64_t group;
  Dims x_shape, w_shape, out_shape, strides, dilations, pads;
};

TEST_F(CpuSimdInt8, QLinearConvEqualsTheReferenceKernel) {
  std::mt19937 rng(27);
  const std::vector<ConvCase> cases = {
      {LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_U8, false, true, 1, {1, 3, 7, 7}, {4, 3, 3, 3}, {1, 4, 7, 7}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {LOOM_DTYPE_U8, LOOM_DTYPE_U8, LOOM_DTYPE_U8, true, false, 1, {2, 4, 6, 5}, {6, 4, 2, 3}, {2, 6, 3, 2}, {2, 2}, {1, 1}, {0, 1, 1, 0}},
      {LOOM_DTYPE_I8, LOOM_DTYPE_I8, LOOM_DTYPE_I8, true, true, 2, {1, 4, 9, 9}, {6, 2, 3, 3}, {1, 6, 5, 5}, {2, 2}, {2, 2}, {2, 2, 2, 2}},
      {LOOM_DTYPE_I8, LOOM_DTYPE_U8, LOOM_DTYPE_U8, true, true, 4, {1, 4, 5, 5}, {4, 1, 3, 3}, {1, 4, 5, 5}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_I8, false, false, 1, {1, 2, 10}, {3, 2, 4}, {1, 3, 10}, {1}, {1}, {1, 2}},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "x " << c.x << " w " << c.w << " group " << c.group);
    const int64_t m = c.w_shape[0];
    const Dims ch = c.per_channel ? Dims{m} : Dims{};
    std::vector<QTensor> ins = {make(c.x_shape, c.x, rng), scales({}, rng), make({}, c.x, rng),
                                make(c.w_shape, c.w, rng), scales(ch, rng), make(ch, c.w, rng),
                                scales({}, rng),           make({}, c.y, rng)};
    // y_scale small enough that many outputs land inside the range.
    float y_scale = 0.5f;
    std::memcpy(ins[6].bytes.data(), &y_scale, 4);
    if (c.bias) ins.push_back(make({m}, LOOM_DTYPE_I32, rng, -20000, 20000));
    Dims kernel(c.w_shape.begin() + 2, c.w_shape.end());
    compare(Op::kQLinearConv, conv_attrs(c.group, kernel, c.strides, c.dilations, c.pads), ins, c.out_shape, c.y,
            "QLinearConv", conv_kernel_attrs(c.group, c.strides, c.dilations, c.pads), {}, {3, 5});
  }
}

TEST_F(CpuSimdInt8, ConvIntegerEqualsTheReferenceKernel) {
  std::mt19937 rng(28);
  for (int mask = 0; mask < 4; ++mask) {
    for (loom_dtype_t w : {LOOM_DTYPE_U8, LOOM_DTYPE_I8}) {
      SCOPED_TRACE(::testing::Message() << "mask " << mask << " w " << w);
      std::vector<QTensor> ins = {make({1, 3, 6, 6}, LOOM_DTYPE_U8, rng), make({5, 3, 3, 3}, w, rng),
                                  make({}, LOOM_DTYPE_U8, rng), make({5}, w, rng)};
      std::vector<int> blob_inputs = {0, 1};
      if (mask & 1) blob_inputs.push_back(2);
      if (mask & 2) blob_inputs.push_back(3);
      // The reference kernel takes absent optional inputs as kInvalid refs.
      std::vector<QTensor> kernel_ins = ins;
      if (!(mask & 1)) kernel_ins[2] = QTensor{{}, LOOM_DTYPE_U8, {0}};
      if (!(mask & 2)) kernel_ins[3] = QTensor{{}, w, {0}};
      compare(Op::kConvInteger, conv_attrs(1, {3, 3}, {1, 1}, {1, 1}, {1, 0, 0, 1}, mask), kernel_ins, {1, 5, 5, 5},
              LOOM_DTYPE_I32, "ConvInteger", conv_kernel_attrs(1, {1, 1}, {1, 1}, {1, 0, 0, 1}), blob_inputs, {1});
    }
  }
}

TEST_F(CpuSimdInt8, QLinearMatMulAndMatMulIntegerEqualTheReferenceKernels) {
  std::mt19937 rng(29);
  struct Case {
    Dims a, b, y;
    loom_dtype_t at, bt, yt;
    bool per_column;
  };
  const std::vector<Case> cases = {
      {{4, 17}, {17, 9}, {4, 9}, LOOM_DTYPE_U8, LOOM_DTYPE_I8, LOOM_DTYPE_U8, false},
      {{2, 3, 8}, {8, 5}, {2, 3, 5}, LOOM_DTYPE_I8, LOOM_DTYPE_U8, LOOM_DTYPE_I8, true},
      {{2, 3, 8}, {2, 8, 5}, {2, 3, 5}, LOOM_DTYPE_U8, LOOM_DTYPE_U8, LOOM_DTYPE_U8, true},
  };
  for (const Case& c : cases) {
    const Dims col = c.per_column ? Dims{c.b.back()} : Dims{};
    std::vector<QTensor> ins = {make(c.a, c.at, rng), scales({}, rng), make({}, c.at, rng), make(c.b, c.bt, rng),
                                scales(col, rng),     make(col, c.bt, rng), scales({}, rng), make({}, c.yt, rng)};
    float y_scale = 0.3f;
    std::memcpy(ins[6].bytes.data(), &y_scale, 4);
    compare(Op::kQLinearMatMul, BlobNode{}, ins, c.y, c.yt, "QLinearMatMul", {}, {}, {3});
    BlobNode integer;
    integer.trans_a = 3;
    compare(Op::kMatMulInteger, integer, {ins[0], ins[3], ins[2], ins[5]}, c.y, LOOM_DTYPE_I32, "MatMulInteger", {});
  }
}

TEST_F(CpuSimdInt8, QuantizeAndDequantizeEqualTheReferenceKernels) {
  std::mt19937 rng(30);
  for (loom_dtype_t q : {LOOM_DTYPE_U8, LOOM_DTYPE_I8}) {
    QTensor x = make({2, 3, 4}, LOOM_DTYPE_F32, rng);
    // Values on the .5 boundaries round half to even.
    const float halves[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 1000.0f, -1000.0f};
    std::memcpy(x.bytes.data(), halves, sizeof halves);
    QTensor one = scales({}, rng);
    const float unit = 1.0f;
    std::memcpy(one.bytes.data(), &unit, 4);
    compare(Op::kQuantizeLinear, BlobNode{}, {x, one, make({}, q, rng)}, {2, 3, 4}, q, "QuantizeLinear", {});
    BlobNode axis;
    axis.axis = 1;
    compare(Op::kQuantizeLinear, axis, {x, scales({3}, rng), make({3}, q, rng)}, {2, 3, 4}, q, "QuantizeLinear",
            {int_attr("axis", 1)});
    compare(Op::kDequantizeLinear, axis, {make({2, 3, 4}, q, rng), scales({3}, rng), make({3}, q, rng)}, {2, 3, 4},
            LOOM_DTYPE_F32, "DequantizeLinear", {int_attr("axis", 1)});
  }
  compare(Op::kDequantizeLinear, BlobNode{}, {make({5}, LOOM_DTYPE_I32, rng), scales({}, rng)}, {5}, LOOM_DTYPE_F32,
          "DequantizeLinear", {});
}

// A tensor of `dtype` holding exactly `values` (as bytes of that dtype).
QTensor exact(Dims shape, loom_dtype_t dtype, const std::vector<float>& values) {
  QTensor t;
  t.shape = std::move(shape);
  t.dtype = dtype;
  for (float v : values) {
    if (dtype == LOOM_DTYPE_F32) {
      uint8_t b[4];
      std::memcpy(b, &v, 4);
      t.bytes.insert(t.bytes.end(), b, b + 4);
    } else {
      // u8 and s8 alike: the value's low byte (two's complement for s8).
      t.bytes.push_back(static_cast<uint8_t>(static_cast<int>(v) & 0xff));
    }
  }
  return t;
}

// Requantization ties: every accumulator is odd and y_scale is 2, so each
// output is exactly k + 0.5 before rounding. ONNX rounds half to even
// (0.5 -> 0, 1.5 -> 2, 2.5 -> 2, 3.5 -> 4, -0.5 -> 0, -1.5 -> -2); rounding
// half away from zero (std::round) would give 1, 2, 3, 4, -1, -2. The
// plugin must equal the reference kernel, and the reference kernel the
// values above, for QLinearConv and QLinearMatMul, u8 and s8.
TEST_F(CpuSimdInt8, RequantizationTiesRoundHalfToEven) {
  struct Case {
    loom_dtype_t t;
    std::vector<float> x, want;
  };
  const std::vector<Case> cases = {
      {LOOM_DTYPE_U8, {1, 3, 5, 7}, {0, 2, 2, 4}},
      {LOOM_DTYPE_I8, {-1, -3, 5, 7}, {0, -2, 2, 4}},
  };
  const auto registry = kernels::KernelRegistry::reference();
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "dtype " << c.t);
    const QTensor one = exact({}, LOOM_DTYPE_F32, {1.0f}), two = exact({}, LOOM_DTYPE_F32, {2.0f});
    const QTensor zero = exact({}, c.t, {0}), unit_w = exact({1, 1, 1, 1}, c.t, {1});
    // QLinearConv: a 1x1 convolution with weight 1 over a 2x2 image.
    std::vector<QTensor> conv = {exact({1, 1, 2, 2}, c.t, c.x), one, zero, unit_w, one, zero, two, zero};
    compare(Op::kQLinearConv, conv_attrs(1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}), conv, {1, 1, 2, 2}, c.t,
            "QLinearConv", conv_kernel_attrs(1, {1, 1}, {1, 1}, {0, 0, 0, 0}), {}, {3});
    // QLinearMatMul: [4, 1] x [1, 1] with B = 1.
    std::vector<QTensor> mm = {exact({4, 1}, c.t, c.x), one, zero, exact({1, 1}, c.t, {1}), one, zero, two, zero};
    compare(Op::kQLinearMatMul, BlobNode{}, mm, {4, 1}, c.t, "QLinearMatMul", {}, {}, {3});
    // The reference kernel itself gives the half-to-even values.
    for (auto* ins : {&conv, &mm}) {
      const bool is_conv = ins == &conv;
      QTensor got{is_conv ? Dims{1, 1, 2, 2} : Dims{4, 1}, c.t, std::vector<uint8_t>(4, 0x5a)};
      std::vector<kernels::TensorRef> refs;
      for (QTensor& t : *ins) refs.push_back(t.ref());
      std::vector<kernels::TensorRef> outs = {got.ref()};
      Status s = registry.find(is_conv ? "QLinearConv" : "QLinearMatMul")
                     ->run(refs, outs,
                           kernels::Attributes(is_conv ? conv_kernel_attrs(1, {1, 1}, {1, 1}, {0, 0, 0, 0})
                                                       : std::vector<AttributeDef>{}));
      ASSERT_TRUE(s.ok()) << s.to_string();
      for (size_t i = 0; i < 4; ++i) {
        const int value = c.t == LOOM_DTYPE_I8 ? static_cast<int8_t>(got.bytes[i]) : got.bytes[i];
        EXPECT_EQ(value, static_cast<int>(c.want[i])) << (is_conv ? "QLinearConv" : "QLinearMatMul")
                                                      << " element " << i;
      }
    }
  }
}

TEST_F(CpuSimdInt8, AScaleBoundAtRunTimeThatIsNotPositiveIsAnErrorNamingTheNode) {
  BlobGraph g;
  g.tensors = {{LOOM_DTYPE_F32, {4}}, {LOOM_DTYPE_F32, {}}, {LOOM_DTYPE_U8, {4}}};
  g.inputs = {0, 1};
  g.outputs = {2};
  BlobNode n;
  n.op = Op::kQuantizeLinear;
  n.inputs = {0, 1};
  n.outputs = {2};
  g.nodes = {n};
  std::string error;
  loom_executable_t* exe = load(encode(g), &error);
  ASSERT_NE(exe, nullptr) << error;
  std::vector<float> x = {1, 2, 3, 4};
  float scale = 0.0f;
  std::vector<uint8_t> y(4);
  const Dims four = {4}, scalar = {};
  loom_tensor_t xd = ::loom::testing::host_tensor(LOOM_DTYPE_F32, four, x.data(), 16);
  loom_tensor_t sd = ::loom::testing::host_tensor(LOOM_DTYPE_F32, scalar, &scale, 4);
  loom_tensor_t yd = ::loom::testing::host_tensor(LOOM_DTYPE_U8, four, y.data(), 4);
  const std::string s = execute(exe, {&xd, &sd}, {&yd});
  EXPECT_NE(s.find("node 0 (QuantizeLinear): the scale is 0.000000; a scale must be positive and finite"),
            std::string::npos)
      << s;
  api_->executable_destroy(exe);
}

}  // namespace
}  // namespace loom::cpu_simd
