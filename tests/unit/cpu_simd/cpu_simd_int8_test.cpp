// Format 6's quantized operators on the plugin against loom_kernels' reference
// kernels: QLinearConv, ConvInteger, QLinearMatMul, MatMulInteger,
// QuantizeLinear and DequantizeLinear must give the same bytes, for u8 and
// s8 activations and weights, per-tensor and per-channel scales and zero
// points, pads, strides, groups and biases; weights that are parameters are
// packed once and rebound at a new address; a bad scale bound at run time is
// an error naming the node. QDQ groups (DequantizeLinear -> Conv / MatMul /
// Gemm -> Relu / Clip -> QuantizeLinear) compiled through the plugin's
// compile entries become one quantized step that equals the QLinear form on
// the reference kernels exactly and the unfused graph within 1 unit.
#include <algorithm>
#include <limits>

#include "cpu_simd_int8_support.hpp"
#include "cpu_simd_plugin_fixture.hpp"
#include "graph_builder.hpp"

namespace loom::cpu_simd {
namespace {

using namespace int8_testing;  // NOLINT(build/namespaces)

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
    compare(Op::kDequantizeLinear, BlobNode{}, {make({2, 3, 7}, q, rng), scales({}, rng), make({}, q, rng)},
            {2, 3, 7}, LOOM_DTYPE_F32, "DequantizeLinear", {});
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

// Per-tensor QuantizeLinear and DequantizeLinear of 8-bit values run eight
// at a time on AVX2 (quantize_rows_avx2, dequantize_rows_avx2) and the
// remainder in the scalar loop; both must give the reference kernels'
// bytes on the edges: ties (half to even, before the zero point), values
// past the type's range, infinities, NaN (0, also for s8), -0, and a
// length that leaves a tail (19 = 16 + 3).
TEST_F(CpuSimdInt8, PerTensorQuantizeAndDequantizeEqualTheReferenceKernelsOnEdgeValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 127.5f, -128.5f, nan, inf,
                                     -inf, -0.0f, 300.0f, -300.0f, 0.49999997f, 7.0f, nan, 2.5f, -3.5f};
  for (loom_dtype_t q : {LOOM_DTYPE_U8, LOOM_DTYPE_I8}) {
    for (float zero : {0.0f, 3.0f}) {
      QTensor x = exact({19}, LOOM_DTYPE_F32, values);
      QTensor scale = exact({}, LOOM_DTYPE_F32, {1.0f});
      QTensor zp = exact({}, q, {zero});
      compare(Op::kQuantizeLinear, BlobNode{}, {x, scale, zp}, {19}, q, "QuantizeLinear", {});
      QTensor quarter = exact({}, LOOM_DTYPE_F32, {0.25f});
      compare(Op::kQuantizeLinear, BlobNode{}, {x, quarter, zp}, {19}, q, "QuantizeLinear", {});
      std::vector<float> bytes;
      for (int v = 0; v < 19; ++v) {
        bytes.push_back(static_cast<float>(q == LOOM_DTYPE_U8 ? v * 13 % 256 : v * 13 % 256 - 128));
      }
      compare(Op::kDequantizeLinear, BlobNode{}, {exact({19}, q, bytes), quarter, zp}, {19}, LOOM_DTYPE_F32,
              "DequantizeLinear", {});
    }
  }
}

// Where oneDNN lacks VNNI (this CPU without AVX-512 VNNI / AVX-VNNI, or
// cpu.isa capped below it) a u8 x s8 product saturates when two weights of
// one output channel paired by vpmaddubsw sum to more than 128 in
// magnitude. Weights whose two largest magnitudes per output channel stay
// within 128 (7-bit weights) take one oneDNN pass; others keep an exact
// two-pass split: the even-channel split where its residual cannot
// saturate either (8-bit weights as quantizers write them, an even number
// of input channels), else the 7 + 1 bit split (the +-127 weights). All
// must equal the reference kernel bit for bit, with x near 255 so that any
// saturating pair would show. s8 weights with zero
// point 0 take the vectorized requantization (AVX2) on full groups of 4
// channels, the scalar loop on the rest (14 channels: 12 + 2; 16: all
// four at a time, the two passes summed there too, on enough output
// positions that the requantization is split among the threads).
TEST_F(CpuSimdInt8, SevenBitAndFullRangeWeightsEqualTheReferenceKernelNearSaturation) {
  std::mt19937 rng(271);
  for (int variant = 0; variant < 5; ++variant) {
    // Variant 4: 8-bit weights as a quantizer writes them (normal, the
    // largest of each output channel 127), 16 input channels: the
    // even-channel split.
    const bool normal = variant == 4;
    const int full_range = normal ? 1 : variant % 2;
    // 16 channels on 24 x 24: 576 output positions, split among threads.
    const int64_t m = variant < 2 ? 14 : 16, c = normal ? 16 : 6, side = variant < 2 ? 8 : normal ? 12 : 24;
    const char* kind = normal ? "8-bit weights, " : full_range ? "full-range weights, " : "7-bit weights, ";
    SCOPED_TRACE(::testing::Message() << kind << m << " channels");
    QTensor x = make({1, c, side, side}, LOOM_DTYPE_U8, rng);
    std::uniform_int_distribution<int> high(230, 255);
    for (uint8_t& v : x.bytes) v = static_cast<uint8_t>(high(rng));
    QTensor w = make({m, c, 3, 3}, LOOM_DTYPE_I8, rng);
    std::uniform_int_distribution<int> seven(-64, 64);
    std::normal_distribution<double> spread(0.0, 41.0);
    for (size_t i = 0; i < w.bytes.size(); ++i) {
      if (normal) {
        const int drawn = std::clamp(static_cast<int>(std::lround(spread(rng))), -127, 127);
        const int v = i % static_cast<size_t>(c * 9) == 0 ? 127 : drawn;
        w.bytes[i] = static_cast<uint8_t>(v & 0xff);
        continue;
      }
      // Full range: +127 on even taps, -128 on odd ones (every pair of
      // channels oneDNN can pair saturates, both ways, at x = 255); 7-bit:
      // random in [-64, 64] with the extremes present.
      int v = full_range ? (i % 9 % 2 == 0 ? 127 : -128) : seven(rng);
      if (!full_range && i % 17 == 0) v = (i / 17) % 2 ? 64 : -64;
      w.bytes[i] = static_cast<uint8_t>(v & 0xff);
    }
    QTensor ws = scales({m}, rng);
    for (int64_t j = 0; j < m; ++j) {
      const float v = 0.0005f + 0.00005f * static_cast<float>(j);
      std::memcpy(ws.bytes.data() + 4 * j, &v, 4);
    }
    std::vector<QTensor> ins = {x, exact({}, LOOM_DTYPE_F32, {1.0f}), exact({}, LOOM_DTYPE_U8, {3}), w, ws,
                                exact({m}, LOOM_DTYPE_I8, std::vector<float>(static_cast<size_t>(m), 0.0f)),
                                exact({}, LOOM_DTYPE_F32, {full_range ? 2.0f : 1.0f}), exact({}, LOOM_DTYPE_U8, {128}),
                                make({m}, LOOM_DTYPE_I32, rng, -20000, 20000)};
    compare(Op::kQLinearConv, conv_attrs(1, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}), ins, {1, m, side, side},
            LOOM_DTYPE_U8, "QLinearConv", conv_kernel_attrs(1, {1, 1}, {1, 1}, {1, 1, 1, 1}), {}, {3});
    // Without requantization: the raw i32 sums.
    compare(Op::kConvInteger, conv_attrs(1, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 3),
            {ins[0], ins[3], ins[2], ins[5]}, {1, m, side, side}, LOOM_DTYPE_I32, "ConvInteger",
            conv_kernel_attrs(1, {1, 1}, {1, 1}, {1, 1, 1, 1}), {}, {1});
  }
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

// The channels-last requantization takes eight channels at a time in f32 and
// i32 (requantize_row_avx2's first loop), then four in double, then one;
// all must equal the reference kernel. With y_scale 2 over unit scales every
// odd accumulator is a .5 tie; an odd output zero point moves the tie's even
// neighbour (round(s + zp) is not round(s) + zp there), an even one does
// not; biases at the i32 limits overflow the eight-wide sum both ways,
// whose block and the rest then take the four-wide loop. 28 channels:
// 3 x 8 + 4.
TEST_F(CpuSimdInt8, EightWideRequantizationEqualsTheReferenceKernelOnTiesOddZeroPointsAndOverflow) {
  std::mt19937 rng(41);
  std::uniform_int_distribution<int> xv(8, 40), wv(-2, 2), bv(-50, 50);
  const int64_t m = 28;
  std::vector<float> x(2 * 3 * 3), w(static_cast<size_t>(m) * 2), bias(static_cast<size_t>(m));
  for (float& v : x) v = static_cast<float>(xv(rng));
  for (float& v : w) v = static_cast<float>(wv(rng));
  for (float& v : bias) v = static_cast<float>(bv(rng));
  // x - 7 > 0, so channel 17's accumulator is positive and 18's negative:
  // with the biases i32 max and min their sums leave i32 both ways.
  w[34] = w[35] = 2.0f;
  w[36] = w[37] = -2.0f;
  for (loom_dtype_t yt : {LOOM_DTYPE_U8, LOOM_DTYPE_I8}) {
    for (float yz : {4.0f, 5.0f, -3.0f}) {
      if (yt == LOOM_DTYPE_U8 && yz < 0) continue;
      for (bool overflow : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "y " << yt << ", zero point " << yz << ", overflow " << overflow);
        QTensor b = exact({m}, LOOM_DTYPE_I32, {});
        for (int64_t i = 0; i < m; ++i) {
          int32_t v = static_cast<int32_t>(bias[static_cast<size_t>(i)]);
          if (overflow && (i == 17 || i == 18)) {
            v = i == 17 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min();
          }
          uint8_t bytes[4];
          std::memcpy(bytes, &v, 4);
          b.bytes.insert(b.bytes.end(), bytes, bytes + 4);
        }
        std::vector<QTensor> ins = {exact({1, 2, 3, 3}, LOOM_DTYPE_U8, x), exact({}, LOOM_DTYPE_F32, {1.0f}),
                                    exact({}, LOOM_DTYPE_U8, {7}), exact({m, 2, 1, 1}, LOOM_DTYPE_I8, w),
                                    exact({}, LOOM_DTYPE_F32, {1.0f}), exact({}, LOOM_DTYPE_I8, {0}),
                                    exact({}, LOOM_DTYPE_F32, {2.0f}), exact({}, yt, {yz}), b};
        compare(Op::kQLinearConv, conv_attrs(1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}), ins, {1, m, 3, 3}, yt,
                "QLinearConv", conv_kernel_attrs(1, {1, 1}, {1, 1}, {0, 0, 0, 0}), {}, {3});
      }
    }
  }
}

// QLinearMatMul with s8 weights of zero point 0 (as quantizers write them:
// no row-sum term) requantizes its rows four and eight columns at a time
// (requantize_row_avx2), the rest of a row and the other cases one by one,
// rows split among the threads: 1003 columns leave a tail of 3, 70 rows
// pass the threshold for threads. Scales 1, per-column 1 and 64 make every
// accumulator that is 32 mod 64 a tie, where the odd output zero point
// decides the direction; large sums saturate.
TEST_F(CpuSimdInt8, QLinearMatMulRowsOfSevenBitWeightsEqualTheReferenceKernelOnTiesAndSaturation) {
  std::mt19937 rng(43);
  std::uniform_int_distribution<int> xv(0, 255), wv(-3, 3);
  const int64_t k = 37, n = 1003;
  for (int64_t rows : {1, 3, 70}) {
    for (loom_dtype_t xt : {LOOM_DTYPE_U8, LOOM_DTYPE_I8}) {
      for (loom_dtype_t yt : {LOOM_DTYPE_U8, LOOM_DTYPE_I8}) {
        SCOPED_TRACE(::testing::Message() << rows << " rows, x " << xt << ", y " << yt);
        std::vector<float> x(static_cast<size_t>(rows * k)), w(static_cast<size_t>(k * n));
        for (float& v : x) v = static_cast<float>(xt == LOOM_DTYPE_U8 ? xv(rng) : xv(rng) - 128);
        for (float& v : w) v = static_cast<float>(wv(rng));
        std::vector<QTensor> ins = {exact({rows, k}, xt, x),
                                    exact({}, LOOM_DTYPE_F32, {1.0f}),
                                    exact({}, xt, {7}),
                                    exact({k, n}, LOOM_DTYPE_I8, w),
                                    exact({n}, LOOM_DTYPE_F32, std::vector<float>(static_cast<size_t>(n), 1.0f)),
                                    exact({n}, LOOM_DTYPE_I8, std::vector<float>(static_cast<size_t>(n), 0.0f)),
                                    exact({}, LOOM_DTYPE_F32, {64.0f}),
                                    exact({}, yt, {yt == LOOM_DTYPE_U8 ? 129.0f : -3.0f})};
        compare(Op::kQLinearMatMul, BlobNode{}, ins, {rows, n}, yt, "QLinearMatMul", {}, {}, {3});
      }
    }
  }
}

// Scales that are parameters (fixed) have their multipliers worked out once
// per set of addresses: bound again elsewhere with other values, the step
// must use the new ones, and a bad one there is still an error.
TEST_F(CpuSimdInt8, ParameterScalesBoundAgainWithOtherValuesAreReadAgain) {
  std::mt19937 rng(47);
  const int64_t k = 16, n = 24;
  std::vector<QTensor> ins = {make({2, k}, LOOM_DTYPE_U8, rng), exact({}, LOOM_DTYPE_F32, {0.5f}),
                              exact({}, LOOM_DTYPE_U8, {3}),     make({k, n}, LOOM_DTYPE_I8, rng),
                              scales({n}, rng),                   exact({n}, LOOM_DTYPE_I8, std::vector<float>(n, 0.0f)),
                              exact({}, LOOM_DTYPE_F32, {0.7f}),  exact({}, LOOM_DTYPE_U8, {101})};
  for (uint8_t& w : ins[3].bytes) w = static_cast<uint8_t>(static_cast<int8_t>(w) / 2);
  BlobGraph g;
  for (const QTensor& t : ins) {
    BlobTensor bt;
    bt.dtype = t.dtype;
    bt.shape = t.shape;
    bt.parameter = &t != &ins[0];
    g.tensors.push_back(bt);
    g.inputs.push_back(static_cast<uint32_t>(g.tensors.size() - 1));
  }
  g.tensors.push_back({LOOM_DTYPE_U8, {2, n}});
  const uint32_t y = static_cast<uint32_t>(g.tensors.size() - 1);
  g.outputs = {y};
  BlobNode node;
  node.op = Op::kQLinearMatMul;
  node.inputs = g.inputs;
  node.outputs = {y};
  g.nodes = {node};
  std::string error;
  ASSERT_TRUE(validate(g, &error)) << error;
  loom_executable_t* exe = load(encode(g), &error);
  ASSERT_NE(exe, nullptr) << error;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    std::vector<QTensor> run_ins = ins;  // fresh copies: every input at a new address
    const float x_scale = round == 0 ? 0.5f : 2.0f;
    std::memcpy(run_ins[1].bytes.data(), &x_scale, 4);
    if (round == 2) {
      const float bad = 0.0f;
      std::memcpy(run_ins[4].bytes.data() + 4 * 5, &bad, 4);
    }
    std::vector<const loom_tensor_t*> descs;
    for (QTensor& t : run_ins) {
      t.refresh();
      descs.push_back(&t.desc);
    }
    QTensor got = blank(LOOM_DTYPE_U8, {2, n});
    got.refresh();
    const std::string status = execute(exe, descs, {&got.desc});
    if (round == 2) {
      EXPECT_NE(status.find("w_scale entry 5 is 0.000000"), std::string::npos) << status;
      continue;
    }
    ASSERT_EQ(status, "ok");
    QTensor want = blank(LOOM_DTYPE_U8, {2, n});
    std::vector<QTensor*> ptrs;
    for (QTensor& t : run_ins) ptrs.push_back(&t);
    ASSERT_EQ(run_reference("QLinearMatMul", ptrs, &want, {}), "ok");
    EXPECT_EQ(got.bytes, want.bytes);
  }
  api_->executable_destroy(exe);
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

}  // namespace
}  // namespace loom::cpu_simd
