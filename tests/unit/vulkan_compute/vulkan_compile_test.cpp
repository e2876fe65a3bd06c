// The vulkan-compute compile entries through the C ABI: which nodes are
// claimed, what a graph compiles to (fusions, aliases), and that the compiled
// blob runs on the device and matches host arithmetic. Malformed graph.fbs
// buffers get INVALID_ARGUMENT.
#include <cmath>
#include <random>

#include "compile_harness.hpp"

namespace loom::vulkan::test {
namespace {

TEST_F(VulkanCompile, ClaimsOnlyWhatItComputes) {
  GraphBuilder g;
  const int x = g.input({2, 3, 4, 4});
  const int w = g.constant_f32({3, 3, 1, 1}, std::vector<float>(9, 1.0f));
  const int r = g.tensor({2, 3, 4, 4}), c = g.tensor({2, 3, 4, 4}), a = g.tensor({2, 3, 4, 4});
  const int s = g.tensor({2, 3, 4, 4}), f = g.tensor({2, 48}), gelu = g.tensor({2, 48});
  const int shape = g.constant_i64({2}, {2, 48});
  g.node("Relu", {x}, {r});
  g.node("Conv", {r, w}, {c});
  g.node("Add", {r, x}, {a});
  g.node("LRN", {a}, {s});
  g.node("Reshape", {a, shape}, {f});
  g.node("Relu", {f}, {gelu}, {}, 5);       // opset 5 Relu had consumed_inputs
  g.node("Relu", {f}, {g.tensor({2, 48})}, {attr_i("bogus", 1)});
  g.output(gelu);
  EXPECT_EQ(supported(g), (std::vector<bool>{true, true, true, false, true, false, false}));
}

TEST_F(VulkanCompile, GemmBiasReluFoldIntoOneDispatchAndMatch) {
  LOOM_VK_REQUIRE_DEVICE();
  const std::vector<float> wv = random_values(7 * 3, 1), bv = random_values(3, 2);
  GraphBuilder g;
  const int x = g.input({5, 7});
  const int w = g.constant_f32({7, 3}, wv);
  const int b = g.constant_f32({3}, bv);
  const int h = g.tensor({5, 3}), hb = g.tensor({5, 3}), y = g.tensor({5, 3});
  g.node("MatMul", {x, w}, {h});
  g.node("Add", {h, b}, {hb});
  g.node("Relu", {hb}, {y});
  g.output(y);
  std::vector<uint8_t> blob;
  ASSERT_EQ(compile(g.finish(), &blob), "ok");
  BlobProgram p;
  std::string error;
  ASSERT_TRUE(decode(blob.data(), blob.size(), &p, &error)) << error;
  ASSERT_EQ(p.dispatches.size(), 1u);
  EXPECT_EQ(p.dispatches[0].kernel, Kernel::kMatMul);
  EXPECT_EQ(p.dispatches[0].push[7], kMatMulBias | (1u << kMatMulActShift));
  const std::vector<float> xv = random_values(5 * 7, 3);
  auto out = run(blob, {{{5, 7}, xv}}, {{5, 3}});
  ASSERT_EQ(out.size(), 1u);
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 3; ++j) {
      double s = bv[j];
      for (int k = 0; k < 7; ++k) s += double(xv[i * 7 + k]) * wv[k * 3 + j];
      EXPECT_NEAR(out[0][i * 3 + j], std::max(0.0, s), 1e-5) << i << "," << j;
    }
  }
}

TEST_F(VulkanCompile, ReshapeIsAnAliasAndGraphOutputsGetTheirOwnBytes) {
  LOOM_VK_REQUIRE_DEVICE();
  GraphBuilder g;
  const int x = g.input({2, 6});
  const int shape = g.constant_i64({2}, {3, 4});
  const int r = g.tensor({3, 4}), s = g.tensor({3, 4}), back = g.tensor({12});
  const int flat = g.constant_i64({1}, {12});
  g.node("Reshape", {x, shape}, {r});
  g.node("Sigmoid", {r}, {s});
  g.node("Reshape", {r, flat}, {back});  // a graph output: copied
  g.output(s);
  g.output(back);
  std::vector<uint8_t> blob;
  ASSERT_EQ(compile(g.finish(), &blob), "ok");
  BlobProgram p;
  std::string error;
  ASSERT_TRUE(decode(blob.data(), blob.size(), &p, &error)) << error;
  size_t aliases = 0;
  for (const BlobTensor& t : p.tensors) aliases += t.kind == TensorKind::kAlias;
  EXPECT_EQ(aliases, 1u);
  EXPECT_EQ(p.dispatches.size(), 2u);
  const std::vector<float> xv = random_values(12, 4);
  auto out = run(blob, {{{2, 6}, xv}}, {{3, 4}, {12}});
  ASSERT_EQ(out.size(), 2u);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_NEAR(out[0][i], 1.0 / (1.0 + std::exp(-double(xv[i]))), 1e-6);
    EXPECT_EQ(out[1][i], xv[i]);
  }
}

// A Conv with bias and a Relu after it, compiled and run, against a direct
// host loop; `dispatches` is what the compiler should make of it and
// `splits` the split-K slices of its conv dispatch.
}  // namespace

void VulkanCompile::check_conv(const ConvCase& k, size_t dispatches, uint32_t splits,
                               Kernel kernel) {
  const int64_t N = k.N, C = k.C, H = k.H, W = k.W, M = k.M, G = k.G, KH = k.KH, KW = k.KW;
  const int64_t sh = k.sh, sw = k.sw, dh = k.dh, dw = k.dw, pt = k.pt, pl = k.pl;
  const int64_t OH = (H + pt + k.pb - ((KH - 1) * dh + 1)) / sh + 1;
  const int64_t OW = (W + pl + k.pr - ((KW - 1) * dw + 1)) / sw + 1;
  const std::vector<float> wv = random_values(M * (C / G) * KH * KW, 11), bv = random_values(M, 12);
  GraphBuilder g;
  const int x = g.input({N, C, H, W});
  const int w = g.constant_f32({M, C / G, KH, KW}, wv);
  const int b = g.constant_f32({M}, bv);
  const int c = g.tensor({N, M, OH, OW}), y = g.tensor({N, M, OH, OW});
  g.node("Conv", {x, w, b}, {c}, {attr_i("group", G), attr_ints("strides", {sh, sw}), attr_ints("dilations", {dh, dw}), attr_ints("pads", {pt, pl, k.pb, k.pr}), attr_ints("kernel_shape", {KH, KW})}, 11);
  g.node("Relu", {c}, {y});
  g.output(y);
  std::vector<uint8_t> blob;
  ASSERT_EQ(compile(g.finish(), &blob), "ok");
  BlobProgram p;
  std::string error;
  ASSERT_TRUE(decode(blob.data(), blob.size(), &p, &error)) << error;
  ASSERT_EQ(p.dispatches.size(), dispatches);
  ASSERT_EQ(p.dispatches[0].kernel, kernel);
  EXPECT_EQ(p.dispatches[0].push.size() == 18 ? p.dispatches[0].push[17] : 1u, splits);
  const std::vector<float> xv = random_values(N * C * H * W, 13);
  auto out = run(blob, {{{N, C, H, W}, xv}}, {{N, M, OH, OW}});
  ASSERT_EQ(out.size(), 1u);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      const int64_t grp = m / (M / G);
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = bv[m], scale = std::fabs(bv[m]);
          for (int64_t c2 = 0; c2 < C / G; ++c2) {
            for (int64_t kh = 0; kh < KH; ++kh) {
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
                if (ih < 0 || iw < 0 || ih >= H || iw >= W) continue;
                const double t = double(xv[((n * C + grp * (C / G) + c2) * H + ih) * W + iw]) *
                                 wv[((m * (C / G) + c2) * KH + kh) * KW + kw];
                s += t;
                scale += std::fabs(t);
              }
            }
          }
          const size_t e = static_cast<size_t>(((n * M + m) * OH + oh) * OW + ow);
          ASSERT_NEAR(out[0][e], std::max(0.0, s), 1e-6 * scale + 1e-6)
              << n << "," << m << "," << oh << "," << ow;
        }
      }
    }
  }
}

namespace {

// Grouped, strided, dilated, asymmetrically padded Conv with bias, Relu
// folded in: one dispatch; with 3 output channels per group it runs as
// direct_conv, with 16 as the implicit GEMM.
TEST_F(VulkanCompile, ConvWithGroupsStridesDilationsPadsMatches) {
  LOOM_VK_REQUIRE_DEVICE();
  check_conv({2, 4, 7, 6, 6, 2, 3, 3, 2, 1, 1, 2, 1, 0, 2, 1}, 1, 1, Kernel::kDirectConv);
  check_conv({2, 4, 7, 6, 32, 2, 3, 3, 2, 1, 1, 2, 1, 0, 2, 1}, 1, 1, Kernel::kConv);
  check_conv({1, 3, 9, 8, 5, 1, 3, 3, 1, 2, 2, 1, 0, 1, 1, 0}, 1, 1, Kernel::kConv);
}

// Depthwise convolutions (a group per channel, MobileNet's 3x3 and 5x5,
// strided) run as direct_conv: one invocation per output.
TEST_F(VulkanCompile, DepthwiseConvRunsDirectAndMatches) {
  LOOM_VK_REQUIRE_DEVICE();
  check_conv({1, 32, 15, 15, 32, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}, 1, 1, Kernel::kDirectConv);
  check_conv({2, 24, 14, 14, 24, 24, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2}, 1, 1, Kernel::kDirectConv);
  // Channel multiplier 2 (M = 2C): still direct.
  check_conv({1, 8, 10, 10, 16, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, 1, 1, Kernel::kDirectConv);
}

// A deep layer at a small spatial size (few 64 x 64 output tiles, a long
// reduction) is split along k: the conv writes partial results and a
// reduce dispatch sums them and applies the Relu. 900 = 57 steps of 16 in 3
// slices of 19; grouped, 2 slices; and one that stays whole (short k).
TEST_F(VulkanCompile, DeepConvAtSmallSpatialSizeIsSplitAlongKAndMatches) {
  LOOM_VK_REQUIRE_DEVICE();
  check_conv({1, 100, 7, 7, 40, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, 2, 3, Kernel::kConv);
  check_conv({2, 128, 5, 6, 32, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, 2, 2, Kernel::kConv);
  check_conv({1, 16, 7, 7, 40, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, 1, 1, Kernel::kConv);
}

// Host pooling over one NCHW tensor; mode 0 max, 1 average of the positions
// inside x, 2 average over the whole window.
std::vector<double> pool_reference(const std::vector<float>& x, int64_t planes, int64_t h, int64_t w,
                                   int64_t oh, int64_t ow, int64_t k, int64_t s, int64_t d,
                                   int64_t pad, int mode) {
  std::vector<double> y;
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        double acc = mode == 0 ? -INFINITY : 0.0;
        int count = 0;
        for (int64_t a = 0; a < k; ++a) {
          for (int64_t b = 0; b < k; ++b) {
            const int64_t ih = i * s + a * d - pad, iw = j * s + b * d - pad;
            if (ih < 0 || iw < 0 || ih >= h || iw >= w) continue;
            const double v = x[static_cast<size_t>((p * h + ih) * w + iw)];
            acc = mode == 0 ? std::max(acc, v) : acc + v;
            ++count;
          }
        }
        y.push_back(mode == 0 ? acc : mode == 1 ? acc / count : acc / double(k * k));
      }
    }
  }
  return y;
}

TEST_F(VulkanCompile, PoolsMatchHostLoops) {
  LOOM_VK_REQUIRE_DEVICE();
  const int64_t N = 2, C = 3, H = 9, W = 9;
  GraphBuilder g;
  const int x = g.input({N, C, H, W});
  // MaxPool k3 s2 d2 pads 1, ceil_mode: (9 + 2 - 5) / 2 -> ceil 3 + 1 = 4.
  const int mx = g.tensor({N, C, 4, 4});
  g.node("MaxPool", {x}, {mx}, {attr_i("ceil_mode", 1), attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 2}), attr_ints("dilations", {2, 2}), attr_ints("pads", {1, 1, 1, 1})}, 12);
  // AveragePool k3 s2 pads 1, with and without the padding counted: 5 x 5.
  const int ax = g.tensor({N, C, 5, 5}), ai = g.tensor({N, C, 5, 5});
  g.node("AveragePool", {x}, {ax}, {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 2}), attr_ints("pads", {1, 1, 1, 1})}, 11);
  g.node("AveragePool", {x}, {ai}, {attr_i("count_include_pad", 1), attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 2}), attr_ints("pads", {1, 1, 1, 1})}, 11);
  const int gp = g.tensor({N, C, 1, 1});
  g.node("GlobalAveragePool", {x}, {gp});
  for (int t : {mx, ax, ai, gp}) g.output(t);
  EXPECT_EQ(supported(g), (std::vector<bool>{true, true, true, true}));
  std::vector<uint8_t> blob;
  ASSERT_EQ(compile(g.finish(), &blob), "ok");
  const std::vector<float> xv = random_values(N * C * H * W, 21);
  auto out = run(blob, {{{N, C, H, W}, xv}}, {{N, C, 4, 4}, {N, C, 5, 5}, {N, C, 5, 5}, {N, C, 1, 1}});
  ASSERT_EQ(out.size(), 4u);
  const std::vector<std::vector<double>> want = {
      pool_reference(xv, N * C, H, W, 4, 4, 3, 2, 2, 1, 0),
      pool_reference(xv, N * C, H, W, 5, 5, 3, 2, 1, 1, 1),
      pool_reference(xv, N * C, H, W, 5, 5, 3, 2, 1, 1, 2),
      pool_reference(xv, N * C, H, W, 1, 1, 9, 1, 1, 0, 1)};
  for (size_t o = 0; o < 4; ++o) {
    ASSERT_EQ(out[o].size(), want[o].size()) << o;
    for (size_t e = 0; e < want[o].size(); ++e) ASSERT_NEAR(out[o][e], want[o][e], 1e-5) << o << " " << e;
  }
}

// ReduceMean over a middle run of axes (keepdims), ReduceSum with an axes
// input (opset 13, no keepdims), ReduceMax over everything; non-contiguous
// axes are refused.
TEST_F(VulkanCompile, ReductionsOverContiguousAxesMatch) {
  LOOM_VK_REQUIRE_DEVICE();
  GraphBuilder g;
  const int x = g.input({2, 3, 4, 5});
  const int mean = g.tensor({2, 1, 1, 5}), sum = g.tensor({2, 3, 4}), mx = g.tensor({1, 1, 1, 1});
  g.node("ReduceMean", {x}, {mean}, {attr_ints("axes", {1, 2})}, 13);
  g.node("ReduceSum", {x, g.constant_i64({1}, {-1})}, {sum}, {attr_i("keepdims", 0)}, 13);
  g.node("ReduceMax", {x}, {mx}, {}, 13);
  g.node("ReduceMean", {x}, {g.tensor({2, 1, 4, 1})}, {attr_ints("axes", {1, 3})}, 13);
  g.output(mean);
  g.output(sum);
  g.output(mx);
  EXPECT_EQ(supported(g), (std::vector<bool>{true, true, true, false}));
  GraphBuilder h;  // the same without the refused node
  const int hx = h.input({2, 3, 4, 5});
  const int hm = h.tensor({2, 1, 1, 5}), hs = h.tensor({2, 3, 4}), hmx = h.tensor({1, 1, 1, 1});
  h.node("ReduceMean", {hx}, {hm}, {attr_ints("axes", {1, 2})}, 13);
  h.node("ReduceSum", {hx, h.constant_i64({1}, {-1})}, {hs}, {attr_i("keepdims", 0)}, 13);
  h.node("ReduceMax", {hx}, {hmx}, {}, 13);
  h.output(hm);
  h.output(hs);
  h.output(hmx);
  std::vector<uint8_t> blob;
  ASSERT_EQ(compile(h.finish(), &blob), "ok");
  const std::vector<float> xv = random_values(120, 31);
  auto out = run(blob, {{{2, 3, 4, 5}, xv}}, {{2, 1, 1, 5}, {2, 3, 4}, {1, 1, 1, 1}});
  ASSERT_EQ(out.size(), 3u);
  double all_max = -INFINITY;
  for (float v : xv) all_max = std::max(all_max, double(v));
  EXPECT_EQ(out[2][0], static_cast<float>(all_max));
  for (int a = 0; a < 2; ++a) {
    for (int e = 0; e < 5; ++e) {
      double s = 0;
      for (int k = 0; k < 12; ++k) s += xv[a * 60 + k * 5 + e];
      EXPECT_NEAR(out[0][a * 5 + e], s / 12, 1e-5);
    }
    for (int r = 0; r < 12; ++r) {
      double s = 0;
      for (int e = 0; e < 5; ++e) s += xv[a * 60 + r * 5 + e];
      EXPECT_NEAR(out[1][a * 12 + r], s, 1e-5);
    }
  }
}

// Transpose and Expand as strided copies.
TEST_F(VulkanCompile, TransposeAndExpandCopyTheRightElements) {
  LOOM_VK_REQUIRE_DEVICE();
  GraphBuilder g;
  const int x = g.input({2, 3, 4});
  const int c = g.input({3, 1});
  const int t = g.tensor({4, 2, 3}), e = g.tensor({2, 3, 4});
  g.node("Transpose", {x}, {t}, {attr_ints("perm", {2, 0, 1})}, 13);
  g.node("Expand", {c, g.constant_i64({3}, {2, 1, 4})}, {e});
  g.output(t);
  g.output(e);
  std::vector<uint8_t> blob;
  ASSERT_EQ(compile(g.finish(), &blob), "ok");
  const std::vector<float> xv = random_values(24, 41), cv = random_values(3, 42);
  auto out = run(blob, {{{2, 3, 4}, xv}, {{3, 1}, cv}}, {{4, 2, 3}, {2, 3, 4}});
  ASSERT_EQ(out.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 4; ++k) {
        EXPECT_EQ(out[0][(k * 2 + i) * 3 + j], xv[(i * 3 + j) * 4 + k]);
        EXPECT_EQ(out[1][(i * 3 + j) * 4 + k], cv[j]);
      }
    }
  }
}

// Softmax over one axis (opset 13) and LogSoftmax over the flattened tail
// (opset 11), against host math.
TEST_F(VulkanCompile, SoftmaxAndLegacyLogSoftmaxMatch) {
  LOOM_VK_REQUIRE_DEVICE();
  GraphBuilder g;
  const int x = g.input({2, 3, 4});
  const int s = g.tensor({2, 3, 4}), ls = g.tensor({2, 3, 4});
  g.node("Softmax", {x}, {s}, {attr_i("axis", 1)}, 13);
  g.node("LogSoftmax", {x}, {ls}, {attr_i("axis", 1)}, 11);
  g.output(s);
  g.output(ls);
  std::vector<uint8_t> blob;
  ASSERT_EQ(compile(g.finish(), &blob), "ok");
  const std::vector<float> xv = random_values(24, 5);
  auto out = run(blob, {{{2, 3, 4}, xv}}, {{2, 3, 4}, {2, 3, 4}});
  ASSERT_EQ(out.size(), 2u);
  for (int o = 0; o < 2; ++o) {
    double all = 0;
    for (int k = 0; k < 12; ++k) all += std::exp(double(xv[o * 12 + k]));
    for (int i = 0; i < 4; ++i) {
      double sum = 0;
      for (int k = 0; k < 3; ++k) sum += std::exp(double(xv[o * 12 + k * 4 + i]));
      for (int k = 0; k < 3; ++k) {
        const int e = o * 12 + k * 4 + i;
        EXPECT_NEAR(out[0][e], std::exp(double(xv[e])) / sum, 1e-6) << e;
        EXPECT_NEAR(out[1][e], double(xv[e]) - std::log(all), 1e-5) << e;
      }
    }
  }
}

// y = (x - mean) / sqrt(var + 1e-5) * scale + bias over the last n
// elements of each row, in double.
std::vector<double> layernorm_reference(const std::vector<float>& x, size_t n, const std::vector<float>& scale,
                                        const std::vector<float>* bias) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double mean = 0, var = 0;
    for (size_t k = 0; k < n; ++k) mean += x[r * n + k];
    mean /= double(n);
    for (size_t k = 0; k < n; ++k) var += (x[r * n + k] - mean) * (x[r * n + k] - mean);
    var /= double(n);
    for (size_t k = 0; k < n; ++k) {
      y[r * n + k] = (x[r * n + k] - mean) / std::sqrt(var + 1e-5) * scale[k] + (bias ? (*bias)[k] : 0.0);
    }
  }
  return y;
}

TEST_F(VulkanCompile, LayerNormalizationMatchesAndClaimsOnlyFullScaleAndBias) {
  LOOM_VK_REQUIRE_DEVICE();
  GraphBuilder g;
  const int x = g.input({2, 3, 4, 5});
  const std::vector<float> s20 = random_values(20, 11), b20 = random_values(20, 12), s5 = random_values(5, 13);
  const int scale20 = g.constant_f32({4, 5}, s20), bias20 = g.constant_f32({1, 4, 5}, b20);
  const int scale5 = g.constant_f32({5}, s5);
  const int y2 = g.tensor({2, 3, 4, 5}), y3 = g.tensor({2, 3, 4, 5});
  g.node("LayerNormalization", {x, scale20, bias20}, {y2}, {attr_i("axis", 2)}, 17);
  g.node("LayerNormalization", {x, scale5}, {y3}, {}, 17);
  g.output(y2);
  g.output(y3);
  EXPECT_EQ(supported(g), (std::vector<bool>{true, true}));
  std::vector<uint8_t> blob;
  ASSERT_EQ(compile(g.finish(), &blob), "ok");
  const std::vector<float> xv = random_values(120, 14);
  auto out = run(blob, {{{2, 3, 4, 5}, xv}}, {{2, 3, 4, 5}, {2, 3, 4, 5}});
  ASSERT_EQ(out.size(), 2u);
  const std::vector<double> want2 = layernorm_reference(xv, 20, s20, &b20);
  const std::vector<double> want3 = layernorm_reference(xv, 5, s5, nullptr);
  for (size_t e = 0; e < 120; ++e) {
    EXPECT_NEAR(out[0][e], want2[e], 1e-5) << e;
    EXPECT_NEAR(out[1][e], want3[e], 1e-5) << e;
  }

  // A scale broadcast over the normalized shape, stash_type 0 and the Mean
  // output are refused, so the partitioner sends those nodes elsewhere.
  GraphBuilder r;
  const int rx = r.input({2, 3, 4, 5});
  const int rs = r.constant_f32({5}, s5);
  const int mean = r.tensor({2, 3, 1, 1});
  r.node("LayerNormalization", {rx, rs}, {r.tensor({2, 3, 4, 5})}, {attr_i("axis", 2)}, 17);
  r.node("LayerNormalization", {rx, rs}, {r.tensor({2, 3, 4, 5})}, {attr_i("stash_type", 0)}, 17);
  r.node("LayerNormalization", {rx, rs}, {r.tensor({2, 3, 4, 5}), mean}, {}, 17);
  r.output(mean);
  EXPECT_EQ(supported(r), (std::vector<bool>{false, false, false}));
}

TEST_F(VulkanCompile, SliceWithStepsAndConcatCopyTheRightElements) {
  LOOM_VK_REQUIRE_DEVICE();
  // x[3, 4, 5]: Slice axes (-1, 0, 1) from (4, 1, -10) to (-100, 3, 3) with
  // steps (-2, 1, 2): the last axis backwards from 4 to 0 in steps of 2 (4, 2,
  // 0), rows 1..2, columns 0 and 2 after clamping -10 to 0.
  GraphBuilder g;
  const int x = g.input({3, 4, 5});
  const int starts = g.constant_i64({3}, {4, 1, -10}), ends = g.constant_i64({3}, {-100, 3, 3});
  const int axes = g.constant_i64({3}, {-1, 0, 1}), steps = g.constant_i64({3}, {-2, 1, 2});
  const int sl = g.tensor({2, 2, 3});
  g.node("Slice", {x, starts, ends, axes, steps}, {sl}, {}, 13);
  // Concat of x[3, 4, 5], a constant [3, 2, 5] and x again along axis -2.
  const std::vector<float> cv = random_values(30, 21);
  const int c = g.constant_f32({3, 2, 5}, cv);
  const int cat = g.tensor({3, 10, 5});
  g.node("Concat", {x, c, x}, {cat}, {attr_i("axis", -2)}, 13);
  g.output(sl);
  g.output(cat);
  EXPECT_EQ(supported(g), (std::vector<bool>{true, true}));
  std::vector<uint8_t> blob;
  ASSERT_EQ(compile(g.finish(), &blob), "ok");
  const std::vector<float> xv = random_values(60, 22);
  auto out = run(blob, {{{3, 4, 5}, xv}}, {{2, 2, 3}, {3, 10, 5}});
  ASSERT_EQ(out.size(), 2u);
  const int rows[2] = {1, 2}, cols[2] = {0, 2}, lasts[3] = {4, 2, 0};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      for (int k = 0; k < 3; ++k) {
        EXPECT_EQ(out[0][(i * 2 + j) * 3 + k], xv[(rows[i] * 4 + cols[j]) * 5 + lasts[k]]) << i << j << k;
      }
    }
  }
  for (int a = 0; a < 3; ++a) {
    for (int r = 0; r < 10; ++r) {
      for (int e = 0; e < 5; ++e) {
        const float want = r < 4 ? xv[(a * 4 + r) * 5 + e]
                           : r < 6 ? cv[(a * 2 + r - 4) * 5 + e]
                                   : xv[(a * 4 + r - 6) * 5 + e];
        EXPECT_EQ(out[1][(a * 10 + r) * 5 + e], want) << a << " " << r << " " << e;
      }
    }
  }

  // Starts that arrive at run time, a zero step and an empty slice are not
  // claimed.
  GraphBuilder r;
  const int rx = r.input({3, 4, 5});
  const int rs = r.input({1});
  const int one = r.constant_i64({1}, {1}), three = r.constant_i64({1}, {3}), zero = r.constant_i64({1}, {0});
  r.node("Slice", {rx, rs, three}, {r.tensor({2, 4, 5})}, {}, 13);
  r.node("Slice", {rx, one, three, zero, zero}, {r.tensor({2, 4, 5})}, {}, 13);
  r.node("Slice", {rx, three, one}, {r.tensor({0, 4, 5})}, {}, 13);
  EXPECT_EQ(supported(r), (std::vector<bool>{false, false, false}));
}

TEST_F(VulkanCompile, MalformedGraphsAndUnsupportedNodesAreInvalidArguments) {
  GraphBuilder g;
  const int x = g.input({4});
  const int y = g.tensor({4});
  g.node("LRN", {x}, {y});
  g.output(y);
  std::vector<uint8_t> blob;
  std::string s = compile(g.finish(), &blob);
  EXPECT_TRUE(starts_with(s, code_prefix(LOOM_STATUS_INVALID_ARGUMENT))) << s;
  EXPECT_NE(s.find("node n0 (LRN)"), std::string::npos) << s;
  std::vector<uint8_t> bytes = g.finish();
  for (size_t n : {size_t{0}, size_t{7}, bytes.size() / 2, bytes.size() - 1}) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    s = compile(cut, &blob);
    EXPECT_TRUE(starts_with(s, code_prefix(LOOM_STATUS_INVALID_ARGUMENT))) << n << ": " << s;
  }
  std::vector<uint8_t> noise(256);
  std::mt19937 rng(9);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  noise[4] = 'L'; noise[5] = 'M'; noise[6] = 'G'; noise[7] = 'R';
  s = compile(noise, &blob);
  EXPECT_TRUE(starts_with(s, code_prefix(LOOM_STATUS_INVALID_ARGUMENT))) << s;
}

// Window attributes far beyond any real model (the vulkan_blob fuzzer's
// pads of 2^62 overflowed the shape rule: UB) are refused by name before
// any arithmetic, for Conv, the pools and ConvTranspose.
TEST_F(VulkanCompile, WindowAttributesBeyondThirtyTwoBitsAreRefusedByName) {
  const int64_t huge = int64_t{1} << 62;
  struct Case {
    const char* op;
    std::vector<Attr> attrs;
    const char* named;
  };
  const std::vector<Case> cases = {
      {"Conv", {attr_ints("pads", {0, 0, huge, huge})}, "attribute pads value 4611686018427387904"},
      {"Conv", {attr_ints("dilations", {huge, 1})}, "attribute dilations value"},
      {"Conv", {attr_i("group", huge)}, "attribute group value"},
      {"MaxPool",
       {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {1, -huge})},
       "attribute strides value"},
      {"AveragePool", {attr_ints("kernel_shape", {huge, 3})}, "attribute kernel_shape value"},
      {"ConvTranspose", {attr_ints("output_padding", {huge, 0})}, "attribute output_padding value"},
  };
  for (const Case& c : cases) {
    GraphBuilder g;
    const int x = g.input({1, 1, 4, 4});
    std::vector<int> in = {x};
    if (std::string(c.op).find("Conv") != std::string::npos)
      in.push_back(g.constant_f32({1, 1, 3, 3}, std::vector<float>(9, 1.f)));
    const int y = g.tensor({1, 1, 2, 2});
    g.node(c.op, in, {y}, c.attrs, 11);
    g.output(y);
    EXPECT_EQ(supported(g), std::vector<bool>{false}) << c.op;
    std::vector<uint8_t> blob;
    const std::string s = compile(g.finish(), &blob);
    EXPECT_TRUE(starts_with(s, code_prefix(LOOM_STATUS_INVALID_ARGUMENT))) << s;
    EXPECT_NE(s.find(c.named), std::string::npos) << c.op << ": " << s;
    EXPECT_NE(s.find("beyond the kernels' 32-bit indexing"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace loom::vulkan::test
