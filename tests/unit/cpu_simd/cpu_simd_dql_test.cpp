// Format 10's DynamicQuantizeLinear (three nodes: scale, zero point, y) and
// Round on the plugin against loom_kernels' reference kernels, byte for
// byte.
#include <cstring>
#include <limits>
#include <random>

#include "cpu_simd_int8_support.hpp"
#include "cpu_simd_plugin_fixture.hpp"

namespace loom::cpu_simd {
namespace {

using namespace int8_testing;  // NOLINT(build/namespaces)

class CpuSimdDql : public CpuSimdPlugin {};

// A blob graph built tensor by tensor and node by node.
struct Int8BlobBuilder {
  BlobGraph g;
  uint32_t t(Dims shape, loom_dtype_t dtype = LOOM_DTYPE_F32) {
    BlobTensor bt;
    bt.dtype = dtype;
    bt.shape = std::move(shape);
    g.tensors.push_back(std::move(bt));
    return static_cast<uint32_t>(g.tensors.size() - 1);
  }
  void node(Op op, std::vector<uint32_t> in, uint32_t out) {
    BlobNode n;
    n.op = op;
    n.inputs = std::move(in);
    n.outputs = {out};
    g.nodes.push_back(std::move(n));
  }
};

// DynamicQuantizeLinear (format 10: three nodes) on the plugin and on the
// reference kernel: y, y_scale and y_zero_point byte for byte. The values
// reach ties (x / scale and -min / scale at .5), all-equal, all-zero (scale
// 0), negative-only, positive-only and NaN inputs.
TEST_F(CpuSimdDql, DynamicQuantizeLinearEqualsTheReferenceKernel) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(29);
  std::vector<std::vector<float>> cases = {
      {0.0f, 0.5f, 1.5f, 2.5f, 3.5f, 127.5f, 128.5f, 254.5f, 255.0f},  // positive: scale 1, ties
      {-255.0f, -0.5f, -1.5f, -2.5f, -3.5f, -100.5f},                  // negative: scale 1, zp 255
      {-126.5f, 128.5f, 0.5f, -0.5f, 1.5f, 2.5f},                      // zp = round(126.5) = 126 (even)
      {2.0f, 2.0f, 2.0f, 2.0f},                                        // all equal
      {-0.75f, -0.75f, -0.75f},                                        // all equal, negative
      {0.0f, 0.0f, 0.0f, 0.0f, -0.0f},                                 // all zero: scale 0
      {nan, 1.0f, -1.0f, nan, 0.25f},                                  // NaN skipped, quantized to 0
      {1e-30f, -3e-31f, 7e-30f},                                       // tiny range
  };
  std::uniform_real_distribution<float> real(-3.0f, 5.0f);
  std::vector<float> random(2 * 3 * 37);
  for (float& v : random) v = real(rng);
  cases.push_back(random);
  for (const std::vector<float>& values : cases) {
    SCOPED_TRACE(::testing::Message() << "first value " << values[0] << ", " << values.size() << " values");
    const Dims shape = values.size() == random.size() ? Dims{2, 3, 37} : Dims{static_cast<int64_t>(values.size())};
    Int8BlobBuilder b;
    const uint32_t x = b.t(shape), s = b.t({}), z = b.t({}, LOOM_DTYPE_U8), y = b.t(shape, LOOM_DTYPE_U8);
    b.g.inputs = {x};
    b.g.outputs = {y, s, z};
    b.node(Op::kDynamicQuantizeScale, {x}, s);
    b.node(Op::kDynamicQuantizeZeroPoint, {x}, z);
    b.node(Op::kDynamicQuantize, {x, s, z}, y);
    std::string error;
    ASSERT_TRUE(validate(b.g, &error)) << error;
    loom_executable_t* exe = load(encode(b.g), &error);
    ASSERT_NE(exe, nullptr) << error;

    QTensor in{shape, LOOM_DTYPE_F32, std::vector<uint8_t>(values.size() * 4)};
    std::memcpy(in.bytes.data(), values.data(), in.bytes.size());
    in.refresh();
    auto fresh = [&](Dims d, loom_dtype_t t, uint8_t fill) {
      QTensor q{d, t, std::vector<uint8_t>(count_of(d) * dtype_size(t), fill)};
      q.refresh();
      return q;
    };
    QTensor want_y = fresh(shape, LOOM_DTYPE_U8, 0x5a), want_s = fresh({}, LOOM_DTYPE_F32, 0x5a),
            want_z = fresh({}, LOOM_DTYPE_U8, 0x5a);
    std::vector<kernels::TensorRef> refs = {in.ref()};
    std::vector<kernels::TensorRef> outs = {want_y.ref(), want_s.ref(), want_z.ref()};
    const auto registry = kernels::KernelRegistry::reference();
    Status st = registry.find("DynamicQuantizeLinear")->run(refs, outs, kernels::Attributes(std::vector<AttributeDef>{}));
    ASSERT_TRUE(st.ok()) << st.to_string();

    QTensor got_y = fresh(shape, LOOM_DTYPE_U8, 0xa5), got_s = fresh({}, LOOM_DTYPE_F32, 0xa5),
            got_z = fresh({}, LOOM_DTYPE_U8, 0xa5);
    ASSERT_EQ(execute(exe, {&in.desc}, {&got_y.desc, &got_s.desc, &got_z.desc}), "ok");
    EXPECT_EQ(got_s.bytes, want_s.bytes);
    EXPECT_EQ(got_z.bytes, want_z.bytes);
    EXPECT_EQ(got_y.bytes, want_y.bytes);
    api_->executable_destroy(exe);
  }
}

// Round (format 10) against the reference kernel: ties go to even.
TEST_F(CpuSimdDql, RoundEqualsTheReferenceKernel) {
  const std::vector<float> values = {0.5f,  1.5f,  2.5f,    -0.5f,    -1.5f, -2.5f, 2.4999998f, 1e9f + 64.0f,
                                     -0.0f, 3.7f,  -3.7f,   8388609.0f, std::numeric_limits<float>::infinity(),
                                     std::numeric_limits<float>::quiet_NaN()};
  const Dims shape = {static_cast<int64_t>(values.size())};
  Int8BlobBuilder b;
  const uint32_t x = b.t(shape), y = b.t(shape);
  b.g.inputs = {x};
  b.g.outputs = {y};
  b.node(Op::kRound, {x}, y);
  std::string error;
  loom_executable_t* exe = load(encode(b.g), &error);
  ASSERT_NE(exe, nullptr) << error;
  QTensor in{shape, LOOM_DTYPE_F32, std::vector<uint8_t>(values.size() * 4)};
  std::memcpy(in.bytes.data(), values.data(), in.bytes.size());
  in.refresh();
  QTensor want{shape, LOOM_DTYPE_F32, std::vector<uint8_t>(in.bytes.size(), 0x5a)};
  QTensor got{shape, LOOM_DTYPE_F32, std::vector<uint8_t>(in.bytes.size(), 0xa5)};
  want.refresh();
  got.refresh();
  std::vector<kernels::TensorRef> refs = {in.ref()};
  std::vector<kernels::TensorRef> outs = {want.ref()};
  Status st = kernels::KernelRegistry::reference().find("Round")->run(refs, outs, kernels::Attributes(std::vector<AttributeDef>{}));
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(execute(exe, {&in.desc}, {&got.desc}), "ok");
  EXPECT_EQ(got.bytes, want.bytes);
  api_->executable_destroy(exe);
}

}  // namespace
}  // namespace loom::cpu_simd
