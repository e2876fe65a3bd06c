// Format 6's quantized operators on the plugin against loom_kernels' reference
// kernels: QLinearConv, ConvInteger, QLinearMatMul, MatMulInteger,
// QuantizeLinear and DequantizeLinear must give the same bytes, for u8 and
// s8 activations and weights, per-tensor and per-channel scales and zero
// points, pads, strides, groups and biases; weights that are parameters are
// packed once and rebound at a new address; a bad scale bound at run time is
// an error naming the node. (QDQ groups: cpu_simd_qdq_test.cpp.)
#include <algorithm>
#include <limits>

#include "cpu_simd_int8_support.hpp"
#include "cpu_simd_plugin_fixture.hpp"
#include "graph_builder.hpp"

namespace loom::cpu_simd {
namespace {

using namespace int8_testing;  // NOLINT(build/namespaces)

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

// QuantizeLinear rounds x / scale (the quotient in f32) half to even:
// values on, just below and just above every half k + 0.5 (k in [-300,
// 300]) for scales whose reciprocal is inexact (x * (1 / scale) would round
// some of them the other way), and random values, must give the reference
// kernel's bytes, eight at a time and in the tail, for u8 and i8 and an odd
// zero point.
TEST_F(CpuSimdInt8, QuantizeEqualsTheReferenceKernelNextToEveryHalf) {
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> any(-400.0f, 400.0f);
  for (float scale : {0.1f, 0.0373f, 3.3e-3f, 1.0f / 3.0f, 7.77f}) {
    std::vector<float> values;
    for (int k = -300; k <= 300; ++k) {
      const float at = (static_cast<float>(k) + 0.5f) * scale;
      values.push_back(at);
      float below = at, above = at;
      for (int step = 0; step < 3; ++step) {
        below = std::nextafter(below, -std::numeric_limits<float>::infinity());
        above = std::nextafter(above, std::numeric_limits<float>::infinity());
        values.push_back(below);
        values.push_back(above);
      }
    }
    for (int i = 0; i < 2000; ++i) values.push_back(any(rng) * scale);
    values.resize(values.size() / 8 * 8 + 5);  // a tail for the scalar loop too
    const int64_t n = static_cast<int64_t>(values.size());
    for (loom_dtype_t q : {LOOM_DTYPE_U8, LOOM_DTYPE_I8}) {
      SCOPED_TRACE("scale " + std::to_string(scale) + (q == LOOM_DTYPE_U8 ? ", u8" : ", i8"));
      compare(Op::kQuantizeLinear, BlobNode{}, {exact({n}, LOOM_DTYPE_F32, values), exact({}, LOOM_DTYPE_F32, {scale}),
                                                exact({}, q, {q == LOOM_DTYPE_U8 ? 131.0f : -7.0f})},
              {n}, q, "QuantizeLinear", {});
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

// QLinearMatMul on ties, in both forms: a QDQ group's (format 10's
// trans_a 1: round half to even, then add the zero point) and the QOperator
// form's (the zero point added first). Scales 1, 1 and 2 make every odd
// accumulator a tie. With every scale and zero point a constant oneDNN's
// matmul requantizes (Int8Step::fused_prim), except for the QOperator form
// with an odd zero point, where the two orders differ on ties; with y's
// scale a graph input the plugin's loop does. All must be exact.
TEST_F(CpuSimdInt8, FusedMatMulRoundsTiesAsEachFormDoes) {
  for (int variant = 0; variant < 16; ++variant) {
    const bool qop = (variant & 8) != 0, constants = (variant & 2) == 0, clamp = (variant & 1) != 0;
    const int32_t y_zero = (variant & 4) != 0 ? 100 : 101;
    SCOPED_TRACE(::testing::Message() << (qop ? "QOperator form" : "QDQ form") << ", y zero point " << y_zero
                                      << (constants ? ", constants" : ", y scale bound") << (clamp ? ", clamped" : ""));
    std::mt19937 rng(71);
    const int64_t rows = 3, k = 24, n = 20;
    QTensor x = make({rows, k}, LOOM_DTYPE_U8, rng), w = make({k, n}, LOOM_DTYPE_I8, rng);
    for (uint8_t& b : x.bytes) b = static_cast<uint8_t>(b % 16);
    for (uint8_t& b : w.bytes) b = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(b % 9) - 4));
    QTensor bias{{n}, LOOM_DTYPE_I32, std::vector<uint8_t>(static_cast<size_t>(n) * 4)};
    std::vector<int32_t> bv(static_cast<size_t>(n));
    for (int32_t& b : bv) b = static_cast<int32_t>(rng() % 41) - 20;
    std::memcpy(bias.bytes.data(), bv.data(), bias.bytes.size());
    const int32_t x_zero = 7;
    BlobGraph g;
    const uint32_t xt = add_tensor(&g, LOOM_DTYPE_U8, {rows, k});
    g.inputs = {xt};
    const QTensor ones = exact({n}, LOOM_DTYPE_F32, std::vector<float>(static_cast<size_t>(n), 1.0f));
    const QTensor w_zero = exact({n}, LOOM_DTYPE_I8, std::vector<float>(static_cast<size_t>(n), 0.0f));
    const QTensor one = exact({}, LOOM_DTYPE_F32, {1.0f}), two = exact({}, LOOM_DTYPE_F32, {2.0f});
    const QTensor xz8 = exact({}, LOOM_DTYPE_U8, {static_cast<float>(x_zero)});
    const uint32_t xs = add_tensor(&g, LOOM_DTYPE_F32, {}, &one), xz = add_tensor(&g, LOOM_DTYPE_U8, {}, &xz8);
    const uint32_t wt = add_tensor(&g, LOOM_DTYPE_I8, {k, n}, &w), ws = add_tensor(&g, LOOM_DTYPE_F32, {n}, &ones);
    const uint32_t wz = add_tensor(&g, LOOM_DTYPE_I8, {n}, &w_zero);
    uint32_t ys = 0;
    if (constants) {
      ys = add_tensor(&g, LOOM_DTYPE_F32, {}, &two);
    } else {
      ys = add_tensor(&g, LOOM_DTYPE_F32, {});
      g.inputs.push_back(ys);
    }
    const QTensor yz8 = exact({}, LOOM_DTYPE_U8, {static_cast<float>(y_zero)});
    const uint32_t yz = add_tensor(&g, LOOM_DTYPE_U8, {}, &yz8), bt = add_tensor(&g, LOOM_DTYPE_I32, {n}, &bias);
    const uint32_t yt = add_tensor(&g, LOOM_DTYPE_U8, {rows, n});
    g.outputs = {yt};
    BlobNode node;
    node.op = Op::kQLinearMatMul;
    node.trans_a = qop ? 0 : 1;
    if (clamp) node.floats = {95.0f, 110.0f};
    node.inputs = {xt, xs, xz, wt, ws, wz, ys, yz, bt};
    node.outputs = {yt};
    g.nodes = {node};
    std::string error;
    ASSERT_TRUE(validate(g, &error)) << error;
    loom_executable_t* exe = load(encode(g), &error);
    ASSERT_NE(exe, nullptr) << error;
    std::vector<uint8_t> want(static_cast<size_t>(rows * n));
    size_t moved = 0;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        int64_t acc = bv[static_cast<size_t>(j)];
        for (int64_t q = 0; q < k; ++q) {
          acc += (int64_t{x.bytes[static_cast<size_t>(i * k + q)]} - x_zero) *
                 static_cast<int8_t>(w.bytes[static_cast<size_t>(q * n + j)]);
        }
        const double first = std::nearbyint(static_cast<double>(acc) / 2.0) + y_zero;
        const double after = std::nearbyint(static_cast<double>(acc) / 2.0 + y_zero);
        moved += first != after;
        double r = qop ? after : first;
        r = std::clamp(r, clamp ? 95.0 : 0.0, clamp ? 110.0 : 255.0);
        want[static_cast<size_t>(i * n + j)] = static_cast<uint8_t>(r);
      }
    }
    if (y_zero % 2 != 0) {
      EXPECT_GT(moved, want.size() / 8) << "ties where the order of rounding and zero point matters";
    } else {
      EXPECT_EQ(moved, 0u) << "an even zero point: both orders agree";
    }
    x.refresh();
    QTensor scale = two;
    scale.refresh();
    QTensor got{{rows, n}, LOOM_DTYPE_U8, std::vector<uint8_t>(want.size(), 0)};
    got.refresh();
    std::vector<const loom_tensor_t*> ins = {&x.desc};
    if (!constants) ins.push_back(&scale.desc);
    for (int round = 0; round < 2; ++round) {
      ASSERT_EQ(execute(exe, ins, {&got.desc}), "ok");
      EXPECT_EQ(got.bytes, want) << "run " << round;
    }
    api_->executable_destroy(exe);
  }
}

// A QDQ group's QLinearMatMul whose weight is a parameter: weights whose
// sums are exact in f32 requantize inside oneDNN, weights whose sums are not
// (|w| >= 110 over 600 rows) take the s32 product and the plugin's pass.
// Binding one and then the other and back switches the step between its
// two oneDNN calls, whose kept memory objects differ (the requantizing call
// also reads the bias); each run must equal the reference kernel (an even y
// zero point, where both forms agree).
TEST_F(CpuSimdInt8, AParameterWeightRepackedIntoTheOtherCallRunsIt) {
  std::mt19937 rng(83);
  const int64_t rows = 2, k = 600, n = 16;
  std::vector<QTensor> ins = {make({rows, k}, LOOM_DTYPE_U8, rng), exact({}, LOOM_DTYPE_F32, {0.01f}),
                              exact({}, LOOM_DTYPE_U8, {128}),     make({k, n}, LOOM_DTYPE_I8, rng),
                              exact({n}, LOOM_DTYPE_F32, std::vector<float>(n, 0.01f)),
                              exact({n}, LOOM_DTYPE_I8, std::vector<float>(n, 0.0f)),
                              exact({}, LOOM_DTYPE_F32, {0.5f}),   exact({}, LOOM_DTYPE_U8, {100}),
                              make({n}, LOOM_DTYPE_I32, rng, -3000, 3000)};
  BlobGraph g;
  for (size_t i = 0; i < ins.size(); ++i) {
    // x and w are inputs (w a parameter); the scales and zero points are
    // constants, as oneDNN's requantization needs.
    const bool input = i == 0 || i == 3;
    const uint32_t t = add_tensor(&g, ins[i].dtype, ins[i].shape, input ? nullptr : &ins[i]);
    if (i == 3) g.tensors[t].parameter = true;
    if (input) g.inputs.push_back(t);
  }
  const uint32_t y = add_tensor(&g, LOOM_DTYPE_U8, {rows, n});
  g.outputs = {y};
  BlobNode node;
  node.op = Op::kQLinearMatMul;
  node.trans_a = 1;
  node.inputs = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  node.outputs = {y};
  g.nodes = {node};
  std::string error;
  ASSERT_TRUE(validate(g, &error)) << error;
  loom_executable_t* exe = load(encode(g), &error);
  ASSERT_NE(exe, nullptr) << error;
  std::vector<uint8_t> previous;
  // Every round's weights stay alive, each at an address of its own: the
  // step packs a parameter once per address.
  std::vector<QTensor> weights(4, ins[3]);
  for (int round = 0; round < 4; ++round) {
    const bool large = round % 2 == 0;
    SCOPED_TRACE(::testing::Message() << "round " << round << (large ? ", large weights" : ", small weights"));
    QTensor& w = weights[static_cast<size_t>(round)];
    for (uint8_t& b : w.bytes) {
      const int v = static_cast<int>(rng() % (large ? 18 : 3));  // |w| in [110, 127] or [-1, 1]
      const int sign = rng() % 2 ? 1 : -1;
      b = static_cast<uint8_t>(static_cast<int8_t>(large ? sign * (110 + v) : v - 1));
    }
    QTensor x = ins[0];
    x.refresh();
    w.refresh();
    QTensor got = blank(LOOM_DTYPE_U8, {rows, n});
    got.refresh();
    ASSERT_EQ(execute(exe, {&x.desc, &w.desc}, {&got.desc}), "ok");
    // The exact accumulator with the bias, times x_scale * w_scale / y_scale
    // in f32 as ONNX's QLinearMatMul computes it, rounded half to even, plus
    // the zero point (even: both forms' order).
    std::vector<uint8_t> want(static_cast<size_t>(rows * n));
    const float mult = 0.01f * 0.01f / 0.5f;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        int32_t acc;
        std::memcpy(&acc, ins[8].bytes.data() + 4 * j, 4);
        int64_t sum = acc;
        for (int64_t q = 0; q < k; ++q) {
          sum += (int64_t{x.bytes[static_cast<size_t>(r * k + q)]} - 128) *
                 static_cast<int8_t>(w.bytes[static_cast<size_t>(q * n + j)]);
        }
        const double v = std::nearbyint(static_cast<double>(static_cast<float>(sum) * mult)) + 100.0;
        want[static_cast<size_t>(r * n + j)] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
    EXPECT_EQ(got.bytes, want);
    EXPECT_GT(std::count_if(want.begin(), want.end(), [](uint8_t b) { return b != 0 && b != 255 && b != 100; }), 4);
    EXPECT_NE(got.bytes, previous);
    previous = got.bytes;
  }
  api_->executable_destroy(exe);
}

}  // namespace
}  // namespace loom::cpu_simd
