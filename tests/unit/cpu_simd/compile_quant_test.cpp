// The quantized operators through the plugin's compile entries: claimed and
// run on cpu-simd; bad scales, zero points and per-channel lengths are one
// compile error naming the node (claimed, so that no other kernel answers
// wrongly); legal ONNX that cpu-simd does not run is declined with why.
#include <cstdint>

#include "compile_support.hpp"

namespace loom::cpu_simd::testing {
namespace {

using TT = TypedTensor;

// y = QLinearMatMul(a [2, 3] u8, 0.5, 1, b [3, 2] i8, b_scale, b_zp, 0.25, 3) with
// inline constants; a per-column b scale of `b_scales` entries.
GraphBuilder qlinear_matmul(const std::vector<float>& a_scale, const std::vector<float>& b_scales,
                            gfb::DType b_zp_dtype = gfb::DType::i8) {
  GraphBuilder b;
  const int a = b.input({2, 3}, gfb::DType::u8), w = b.input({3, 2}, gfb::DType::i8);
  const uint8_t one = 1, three = 3;
  const std::vector<int8_t> zeros(b_scales.size(), 0);
  const int as = b.constant_f32(a_scale.size() == 1 ? Dims{} : Dims{static_cast<int64_t>(a_scale.size())}, a_scale);
  const int az = b.constant({}, gfb::DType::u8, &one, 1);
  const int bs = b.constant_f32(b_scales.size() == 1 ? Dims{} : Dims{static_cast<int64_t>(b_scales.size())}, b_scales);
  const int bz = b.constant(b_scales.size() == 1 ? Dims{} : Dims{static_cast<int64_t>(b_scales.size())}, b_zp_dtype,
                            zeros.data(), zeros.size());
  const int ys = b.constant_f32({}, {0.25f});
  const int yz = b.constant({}, gfb::DType::u8, &three, 1);
  const int y = b.tensor({2, 2}, gfb::DType::u8);
  b.node("QLinearMatMul", {a, as, az, w, bs, bz, ys, yz}, {y}, {}, 10);
  b.output(y);
  return b;
}

class CompileQuant : public CompileFixture {};

TEST_F(CompileQuant, QLinearMatMulWithInlineParametersRunsOnCpuSimd) {
  const GraphBuilder b = qlinear_matmul({0.5f}, {0.25f, 0.5f});
  EXPECT_EQ(supported(b), std::vector<bool>{true});
  std::vector<TT> out = {TT::out({2, 2}, LOOM_DTYPE_U8)};
  ASSERT_EQ(run_typed(b,
                      {TT::of<uint8_t>({2, 3}, LOOM_DTYPE_U8, {1, 2, 3, 4, 5, 6}),
                       TT::of<int8_t>({3, 2}, LOOM_DTYPE_I8, {1, -1, 2, -2, 3, 4})},
                      &out),
            "ok");
  // (a - 1) = [[0 1 2] [3 4 5]]; products [[8 6] [26 9]]; scales 0.5 x {0.25, 0.5} / 0.25
  // = {0.5, 1}: [[4 6] [13 9]] + 3.
  EXPECT_EQ(out[0].as<uint8_t>(), (std::vector<uint8_t>{7, 9, 16, 12}));
}

TEST_F(CompileQuant, BadScalesAndZeroPointsAreOneCompileErrorNamingTheNode) {
  auto compile_error = [&](const GraphBuilder& b) {
    std::vector<bool> flags;
    EXPECT_EQ(supported(b.finish(), b.node_count(), &flags), "ok");
    EXPECT_EQ(flags, std::vector<bool>{true}) << "claimed, so that compile reports it";
    std::vector<std::byte> blob;
    return compile(b.finish(), &blob);
  };
  std::string s = compile_error(qlinear_matmul({0.0f}, {0.25f}));
  EXPECT_NE(s.find("node n0 (QLinearMatMul) is not supported by cpu-simd: x_scale is 0.000000; a scale must be "
                   "positive and finite"), std::string::npos) << s;
  s = compile_error(qlinear_matmul({0.5f}, {0.25f, -1.0f}));
  EXPECT_NE(s.find("w_scale entry 1 is -1.000000; a scale must be positive and finite"), std::string::npos) << s;
  s = compile_error(qlinear_matmul({0.5f}, {0.25f, 0.5f, 1.0f}));
  EXPECT_NE(s.find("w_scale has 3 entries, the channel count is 2"), std::string::npos) << s;
  s = compile_error(qlinear_matmul({0.5f}, {0.25f}, gfb::DType::u8));
  EXPECT_NE(s.find("w_zero_point is u8 but its data is i8; ONNX requires one type"), std::string::npos) << s;
}

TEST_F(CompileQuant, PerRowScalesOfAAreLeftToTheReferenceKernels) {
  const GraphBuilder b = qlinear_matmul({0.5f, 0.25f}, {0.25f});
  const size_t logged = harness_.recorder().logs().size();
  EXPECT_EQ(supported(b), std::vector<bool>{false});
  // The decline is a compile note with the reason (`loom compile` prints it).
  const std::vector<std::string> logs = harness_.recorder().logs();
  ASSERT_EQ(logs.size(), logged + 1);
  EXPECT_EQ(logs.back().rfind("compile: declined: node ", 0), 0u) << logs.back();
  EXPECT_NE(logs.back().find("(QLinearMatMul): x_scale [2] is per row or per channel, which cpu-simd does not run here"),
            std::string::npos)
      << logs.back();
  std::vector<std::byte> blob;
  const std::string s = compile(b.finish(), &blob);
  EXPECT_NE(s.find("x_scale [2] is per row or per channel, which cpu-simd does not run here"), std::string::npos) << s;
}

}  // namespace
}  // namespace loom::cpu_simd::testing
