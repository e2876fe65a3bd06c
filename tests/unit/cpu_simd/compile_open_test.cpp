// The cpu-simd compile entries on open graphs (ABI 1.2, LOOM_PLUGIN_CAP_OPEN_SHAPES):
// which nodes are claimed when dimensions are left open, the one format-5
// blob compiled for all bindings, and its runs matching a graph compiled for
// each binding.
#include <cmath>
#include <random>

#include "compile_support.hpp"

namespace loom::cpu_simd::testing {
namespace {

using CompileOpen = CompileFixture;

// x [n, 3, h, w] -> Conv 3x3 pad 1 (parameter weights) -> Relu ->
// GlobalAveragePool -> Flatten -> Reshape [0, 2, -1] -> y [n, 2, 2].
// n, h, w = -1 leaves them open, as the importer does.
GraphBuilder open_cnn(int64_t n, int64_t h, int64_t w) {
  GraphBuilder b;
  const int x = b.input({n, 3, h, w});
  const int wt = b.parameter({4, 3, 3, 3}, "conv.weight");
  const int bias = b.parameter({4}, "conv.bias");
  const int c = b.tensor({n, 4, h, w}), r = b.tensor({n, 4, h, w}), g = b.tensor({n, 4, 1, 1});
  const int f = b.tensor({n, 4}), shape = b.constant_i64({3}, {0, 2, -1}), y = b.tensor({n, 2, 2});
  b.node("Conv", {x, wt, bias}, {c}, {attr_ints("pads", {1, 1, 1, 1})}, 11);
  b.node("Relu", {c}, {r}, {}, 11);
  b.node("GlobalAveragePool", {r}, {g}, {}, 11);
  b.node("Flatten", {g}, {f}, {attr_i("axis", 1)}, 11);
  b.node("Reshape", {f, shape}, {y}, {}, 14);
  b.output(y);
  return b;
}

std::vector<float> random_values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST_F(CompileOpen, ClaimsEveryNodeAndCompilesOneFormatFiveBlob) {
  const GraphBuilder open = open_cnn(-1, -1, -1);
  EXPECT_EQ(supported(open), std::vector<bool>(5, true));
  std::vector<std::byte> blob;
  ASSERT_EQ(compile(open.finish(), &blob), "ok");
  ASSERT_GT(blob.size(), 4u);
  EXPECT_EQ(static_cast<uint8_t>(blob[4]), 5u);
  BlobGraph g;
  std::string error;
  ASSERT_TRUE(decode(blob.data(), blob.size(), &g, &error)) << error;
  EXPECT_TRUE(has_open_dims(g));

  std::mt19937 rng(41);
  const std::vector<float> wt = random_values(4 * 3 * 3 * 3, rng), bias = random_values(4, rng);
  for (const Dims& xs : {Dims{1, 3, 8, 8}, Dims{2, 3, 5, 9}, Dims{3, 3, 16, 4}}) {
    const int64_t n = xs[0];
    SCOPED_TRACE("batch " + std::to_string(n));
    std::vector<HostTensor> in = {{xs, random_values(static_cast<size_t>(n * 3 * xs[2] * xs[3]), rng)},
                                  {{4, 3, 3, 3}, wt},
                                  {{4}, bias}};
    const std::vector<Dims> out_shapes = {{n, 2, 2}};
    std::vector<std::vector<float>> got = output_data(out_shapes);
    ASSERT_EQ(load_and_execute(device_, blob, 5, f32_tensors(in, out_shapes, got), in.size()), "ok");
    const std::vector<std::vector<float>> want = run(open_cnn(n, xs[2], xs[3]), in, out_shapes);
    ASSERT_EQ(want.size(), 1u);
    expect_near(got[0], want[0]);
  }
}

TEST_F(CompileOpen, RefusesWhatABindingWouldDecide) {
  GraphBuilder b;
  const int x = b.input({-1, 4, -1});
  // Slice resolves its bounds against the input at compile time.
  const int s = b.tensor({-1, 2, -1});
  const int starts = b.constant_i64({1}, {0}), ends = b.constant_i64({1}, {2}), axes = b.constant_i64({1}, {1});
  b.node("Slice", {x, starts, ends, axes}, {s}, {}, 13);
  // SAME padding depends on the input's extent.
  const int wt = b.parameter({4, 4, 3}, "w");
  const int c = b.tensor({-1, 4, -1});
  b.node("Conv", {x, wt}, {c}, {attr_s("auto_pad", "SAME_UPPER")}, 11);
  // Flatten with open dimensions on both sides of its axis.
  const int f = b.tensor({-1, -1});
  b.node("Flatten", {x}, {f}, {attr_i("axis", 1)}, 11);
  // Squeeze without axes: which dimensions drop depends on the binding.
  const int q = b.tensor({-1, 4, -1});
  b.node("Squeeze", {x}, {q}, {}, 11);
  // Supported: Relu, and Flatten at axis 2 with a static inner side.
  const int r = b.tensor({-1, 4, -1});
  b.node("Relu", {x}, {r}, {}, 11);
  const int u = b.tensor({-1, 4, -1}), f2 = b.tensor({-1, -1});
  b.node("Relu", {x}, {u}, {}, 11);
  b.node("Transpose", {u}, {f2}, {attr_ints("perm", {0, 2, 1})}, 11);
  // ConvTranspose with explicit pads: its output extent follows per binding.
  const int wt2 = b.parameter({4, 2, 2}, "wt");
  const int up = b.tensor({-1, 2, -1});
  b.node("ConvTranspose", {x, wt2}, {up}, {attr_ints("strides", {2})}, 11);
  for (int t : {s, c, f, q, r, f2, up}) b.output(t);
  EXPECT_EQ(supported(b), (std::vector<bool>{false, false, false, false, true, true, false, true}));
}

// The quantized operators take open dimensions too (a QDQ model exported
// with an open batch): what they refuse is what a binding would decide, a
// per-channel axis left open and SAME padding.
TEST_F(CompileOpen, QuantizedOperatorsRefuseOnlyWhatABindingWouldDecide) {
  using F = gfb::DType;
  GraphBuilder b;
  const int x = b.input({-1, 4, -1});
  const uint8_t zero = 128, zeros4[4] = {128, 128, 128, 128}, zeros3[3] = {128, 128, 128};
  const int s = b.constant_f32({}, {0.05f}), z = b.constant({}, F::u8, &zero, 1);
  const int s4 = b.constant_f32({4}, {0.05f, 0.1f, 0.02f, 0.04f}), z4 = b.constant({4}, F::u8, zeros4, 4);
  const int s3 = b.constant_f32({3}, {0.05f, 0.1f, 0.02f}), z3 = b.constant({3}, F::u8, zeros3, 3);
  // Per tensor, and per channel along the fixed axis 1: claimed.
  const int q = b.tensor({-1, 4, -1}, F::u8), qc = b.tensor({-1, 4, -1}, F::u8);
  b.node("QuantizeLinear", {x, s, z}, {q}, {}, 13);
  b.node("QuantizeLinear", {x, s4, z4}, {qc}, {attr_i("axis", 1)}, 13);
  // Per channel along the open axis 2: its length is the binding's.
  const int qo = b.tensor({-1, 4, -1}, F::u8);
  b.node("QuantizeLinear", {x, s3, z3}, {qo}, {attr_i("axis", 2)}, 13);
  // QLinearConv with explicit pads: claimed; with SAME padding: refused.
  std::vector<int8_t> w(4 * 4 * 3, 1);
  const int8_t wzero = 0;
  const int wt = b.constant({4, 4, 3}, F::i8, w.data(), w.size()), wz = b.constant({}, F::i8, &wzero, 1);
  const int c = b.tensor({-1, 4, -1}, F::u8), cs = b.tensor({-1, 4, -1}, F::u8);
  b.node("QLinearConv", {q, s, z, wt, s, wz, s, z}, {c}, {attr_ints("pads", {1, 1})}, 10);
  b.node("QLinearConv", {q, s, z, wt, s, wz, s, z}, {cs}, {attr_s("auto_pad", "SAME_UPPER")}, 10);
  const int d = b.tensor({-1, 4, -1});
  b.node("DequantizeLinear", {c, s, z}, {d}, {}, 13);
  for (int t : {qc, qo, cs, d}) b.output(t);
  EXPECT_EQ(supported(b), (std::vector<bool>{true, true, false, true, false, true}));
}

TEST_F(CompileOpen, ConvTransposeFollowsTheBinding) {
  auto graph = [](int64_t n, int64_t l) {
    GraphBuilder b;
    const int x = b.input({n, 4, l});
    const int w = b.parameter({4, 2, 3}, "w");
    const int y = b.tensor({n, 2, l < 0 ? -1 : 2 * l + 1});
    b.node("ConvTranspose", {x, w}, {y}, {attr_ints("strides", {2})}, 11);
    b.output(y);
    return b;
  };
  std::vector<std::byte> blob;
  ASSERT_EQ(compile(graph(-1, -1).finish(), &blob), "ok");
  std::mt19937 rng(42);
  const std::vector<float> w = random_values(4 * 2 * 3, rng);
  for (const Dims& xs : {Dims{1, 4, 5}, Dims{3, 4, 2}}) {
    std::vector<HostTensor> in = {{xs, random_values(static_cast<size_t>(xs[0] * 4 * xs[2]), rng)}, {{4, 2, 3}, w}};
    const std::vector<Dims> out_shapes = {{xs[0], 2, 2 * xs[2] + 1}};
    std::vector<std::vector<float>> got = output_data(out_shapes);
    ASSERT_EQ(load_and_execute(device_, blob, 5, f32_tensors(in, out_shapes, got), in.size()), "ok");
    const std::vector<std::vector<float>> want = run(graph(xs[0], xs[2]), in, out_shapes);
    ASSERT_EQ(want.size(), 1u);
    expect_near(got[0], want[0]);
  }
}

// Resize by scales of an open input: the open form (format 8), whose taps
// bind_shapes makes per binding, against the graph compiled for each
// binding alone; nearest asymmetric/floor 2x (an FPN's upsampling) and
// linear half_pixel at 1.5 and 0.5.
GraphBuilder resize_graph(int64_t n, int64_t h, int64_t w) {
  GraphBuilder b;
  const int x = b.input({n, 2, h, w});
  const int roi = b.constant_f32({0}, {});
  const int up = b.constant_f32({4}, {1, 1, 2, 2}), odd = b.constant_f32({4}, {1, 1, 1.5f, 0.5f});
  auto scaled = [](int64_t d, double s) { return d < 0 ? -1 : static_cast<int64_t>(std::floor(static_cast<double>(d) * s)); };
  const int y1 = b.tensor({n, 2, scaled(h, 2), scaled(w, 2)});
  const int y2 = b.tensor({n, 2, scaled(h, 1.5), scaled(w, 0.5)});
  b.node("Resize", {x, roi, up}, {y1},
         {attr_s("mode", "nearest"), attr_s("coordinate_transformation_mode", "asymmetric"),
          attr_s("nearest_mode", "floor")}, 13);
  b.node("Resize", {x, roi, odd}, {y2}, {attr_s("mode", "linear")}, 13);
  b.output(y1);
  b.output(y2);
  return b;
}

TEST_F(CompileOpen, ResizeByScalesMakesItsTapsPerBinding) {
  const GraphBuilder open = resize_graph(-1, -1, -1);
  EXPECT_EQ(supported(open), std::vector<bool>(2, true));
  std::vector<std::byte> blob;
  ASSERT_EQ(compile(open.finish(), &blob), "ok");
  ASSERT_GT(blob.size(), 4u);
  EXPECT_EQ(static_cast<uint8_t>(blob[4]), 8u);
  std::mt19937 rng(43);
  for (const Dims& xs : {Dims{1, 2, 4, 6}, Dims{2, 2, 5, 3}, Dims{1, 2, 7, 2}}) {
    SCOPED_TRACE(std::to_string(xs[0]) + "x2x" + std::to_string(xs[2]) + "x" + std::to_string(xs[3]));
    const int64_t n = xs[0], h = xs[2], w = xs[3];
    std::vector<HostTensor> in = {{xs, random_values(static_cast<size_t>(n * 2 * h * w), rng)}};
    const std::vector<Dims> out_shapes = {{n, 2, 2 * h, 2 * w},
                                          {n, 2, static_cast<int64_t>(std::floor(1.5 * static_cast<double>(h))), w / 2}};
    std::vector<std::vector<float>> got = output_data(out_shapes);
    ASSERT_EQ(load_and_execute(device_, blob, 5, f32_tensors(in, out_shapes, got), in.size()), "ok");
    const std::vector<std::vector<float>> want = run(resize_graph(n, h, w), in, out_shapes);
    ASSERT_EQ(want.size(), 2u);
    EXPECT_EQ(got[0], want[0]);
    EXPECT_EQ(got[1], want[1]);
    // Nearest 2x asymmetric/floor: input pixel (r, c) fills a 2x2 block.
    EXPECT_EQ(got[0][static_cast<size_t>(2 * (2 * w) + 2)], in[0].data[static_cast<size_t>(w + 1)]);
  }
  // A binding the scale gives no output row: an error naming the Resize.
  std::vector<HostTensor> in = {{{1, 2, 4, 1}, std::vector<float>(8, 1.0f)}};
  const std::vector<Dims> out_shapes = {{1, 2, 8, 2}, {1, 2, 6, 0}};
  std::vector<std::vector<float>> got = output_data(out_shapes);
  const std::string s = load_and_execute(device_, blob, 5, f32_tensors(in, out_shapes, got), in.size());
  EXPECT_NE(s.find("Resize: scale 0.5"), std::string::npos) << s;
  // To sizes, an open input is refused: the sampling follows its extent.
  GraphBuilder b;
  const int x = b.input({-1, 2, -1, -1});
  const int roi = b.constant_f32({0}, {}), none = b.constant_f32({0}, {}), sizes = b.constant_i64({4}, {1, 2, 8, 8});
  const int y = b.tensor({1, 2, 8, 8});
  b.node("Resize", {x, roi, none, sizes}, {y}, {attr_s("mode", "nearest")}, 13);
  b.output(y);
  EXPECT_EQ(supported(b), std::vector<bool>{false});
}

TEST_F(CompileOpen, StaticGraphsStillCompileToFormatFour) {
  std::vector<std::byte> blob;
  ASSERT_EQ(compile(open_cnn(2, 6, 6).finish(), &blob), "ok");
  EXPECT_EQ(static_cast<uint8_t>(blob[4]), 4u);
}

}  // namespace
}  // namespace loom::cpu_simd::testing
