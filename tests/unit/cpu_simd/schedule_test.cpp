// cpu-simd's oneDNN schedule (src/schedule.cpp): fused Conv chains, fused
// MatMul / Gemm, channels-last activations with reorders at their edges,
// packed weights and the lifetime-planned arena. Each graph is compiled
// once and run on two plugin instances, the default one (oneDNN) and one
// with cpu.onednn=0 (the plain kernels, which the ONNX conformance suite
// checks), and the results must agree; a few are also checked by hand.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "compile_support.hpp"

namespace loom::cpu_simd::testing {
namespace {

using F = std::vector<float>;

std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

size_t elements(const Dims& d) {
  size_t n = 1;
  for (int64_t x : d) n *= static_cast<size_t>(x);
  return n;
}

// LOOM_TEST_CPU_ISA (set by CTest for the per-ISA runs) is handed to both
// instances as cpu.isa.
class Schedule : public CompileFixture {
 protected:
  void SetUp() override {
    const char* isa = std::getenv("LOOM_TEST_CPU_ISA");
    if (isa != nullptr && *isa != '\0') options_ = {{"cpu.isa", isa}};
    CompileFixture::SetUp();
    if (HasFatalFailure()) return;
    ::loom::testing::Options plain = {{"cpu.onednn", "0"}};
    if (!options_.empty()) plain.emplace_back("cpu.isa", isa);
    std::string s;
    plain_plugin_ = harness_.create(plain, &s);
    ASSERT_EQ(s, "ok");
    ASSERT_EQ(harness_.device(plain_plugin_, 0, &plain_device_), "ok");
  }

  loom_executable_t* load(loom_device_t* device, const std::vector<std::byte>& blob) {
    loom_executable_t* exe = nullptr;
    EXPECT_EQ(harness_.load(device, "cpu-simd", kFormatVersion, blob.data(), blob.size(), &exe), "ok");
    return exe;
  }

  // Executes once; inputs are used in place (their addresses are what a
  // parameter is keyed by).
  std::vector<F> execute(loom_executable_t* exe, std::vector<HostTensor>& in,
                         const std::vector<Dims>& output_shapes) {
    std::vector<F> outs = output_data(output_shapes);
    EXPECT_EQ(execute_tensors(exe, f32_tensors(in, output_shapes, outs), in.size()), "ok");
    return outs;
  }

  // Runs the graph on both instances with random inputs (one seed per
  // input) and expects the same outputs within `tol` of their range.
  std::vector<F> expect_same(const GraphBuilder& b, const std::vector<Dims>& inputs,
                             const std::vector<Dims>& outputs, float tol = 1e-5f) {
    std::vector<std::byte> blob;
    EXPECT_EQ(compile(b.finish(), &blob), "ok");
    std::vector<HostTensor> in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      in.push_back({inputs[i], random_values(elements(inputs[i]), static_cast<uint32_t>(7 + i))});
    }
    loom_executable_t* fast = load(device_, blob);
    loom_executable_t* plain = load(plain_device_, blob);
    if (fast == nullptr || plain == nullptr) return {};
    std::vector<F> got = execute(fast, in, outputs);
    std::vector<F> want = execute(plain, in, outputs);
    // A second run of the same executable gives the same answer (packed
    // weights reused, arena reused).
    std::vector<F> again = execute(fast, in, outputs);
    api_->executable_destroy(fast);
    api_->executable_destroy(plain);
    for (size_t o = 0; o < outputs.size(); ++o) {
      float lo = want[o].empty() ? 0 : want[o][0], hi = lo;
      for (float v : want[o]) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      const float scale = std::max(1.0f, hi - lo);
      for (size_t i = 0; i < want[o].size(); ++i) {
        EXPECT_NEAR(got[o][i], want[o][i], tol * scale) << "output " << o << " element " << i;
        EXPECT_EQ(again[o][i], got[o][i]) << "output " << o << " element " << i << " (second run)";
      }
    }
    return got;
  }

  loom_plugin_t* plain_plugin_ = nullptr;
  loom_device_t* plain_device_ = nullptr;
};

Attr pads1() { return attr_ints("pads", {1, 1, 1, 1}); }

// conv -> BN -> Relu -> conv -> BN -> Add(x) -> Relu, then
// GlobalAveragePool -> Flatten -> Gemm: a ResNet basic block and head.
TEST_F(Schedule, ResidualBlockWithBatchNormMatchesThePlainKernels) {
  GraphBuilder b;
  const int c = 8;
  const int x = b.input({1, c, 9, 7});
  const int w1 = b.parameter({c, c, 3, 3}, "w1");
  const int w2 = b.parameter({c, c, 3, 3}, "w2");
  const int fc = b.parameter({5, c}, "fc");
  auto bn_consts = [&](uint32_t seed) {
    std::vector<int> t;
    t.push_back(b.constant_f32({c}, random_values(c, seed, 0.5f, 1.5f)));      // scale
    t.push_back(b.constant_f32({c}, random_values(c, seed + 1)));              // B
    t.push_back(b.constant_f32({c}, random_values(c, seed + 2)));              // mean
    t.push_back(b.constant_f32({c}, random_values(c, seed + 3, 0.5f, 2.0f)));  // var
    return t;
  };
  const auto bn1 = bn_consts(100), bn2 = bn_consts(200);
  const int t1 = b.tensor({1, c, 9, 7}), t2 = b.tensor({1, c, 9, 7}), t3 = b.tensor({1, c, 9, 7});
  const int t4 = b.tensor({1, c, 9, 7}), t5 = b.tensor({1, c, 9, 7}), t6 = b.tensor({1, c, 9, 7});
  const int t7 = b.tensor({1, c, 9, 7});
  b.node("Conv", {x, w1}, {t1}, {pads1()}, 11);
  b.node("BatchNormalization", {t1, bn1[0], bn1[1], bn1[2], bn1[3]}, {t2}, {attr_f("epsilon", 1e-3f)}, 9);
  b.node("Relu", {t2}, {t3});
  b.node("Conv", {t3, w2}, {t4}, {pads1()}, 11);
  b.node("BatchNormalization", {t4, bn2[0], bn2[1], bn2[2], bn2[3]}, {t5}, {}, 9);
  b.node("Add", {t5, x}, {t6});
  b.node("Relu", {t6}, {t7});
  const int pooled = b.tensor({1, c, 1, 1}), flat = b.tensor({1, c}), y = b.tensor({1, 5});
  const int bias = b.constant_f32({5}, {1, 2, 3, 4, 5});
  b.node("GlobalAveragePool", {t7}, {pooled}, {}, 1);
  b.node("Flatten", {pooled}, {flat}, {}, 13);
  b.node("Gemm", {flat, fc, bias}, {y}, {attr_i("transB", 1)}, 13);
  b.output(y);
  b.output(t7);  // an NHWC intermediate that is also a graph output
  expect_same(b, {{1, c, 9, 7}, {c, c, 3, 3}, {c, c, 3, 3}, {5, c}}, {{1, 5}, {1, c, 9, 7}});
}

// MobileNetV3 pieces: depthwise 5x5 stride 2 + HardSwish, squeeze-excite
// (GlobalAveragePool, 1x1 convs, Relu, HardSigmoid, Mul broadcast over the
// channels), a projection, and Concat along channels of two branches.
TEST_F(Schedule, DepthwiseSqueezeExciteAndConcatMatchThePlainKernels) {
  GraphBuilder b;
  const int c = 16;
  const int x = b.input({1, c, 12, 11});
  const int dw = b.constant_f32({c, 1, 5, 5}, random_values(c * 25, 3));
  const int se1 = b.parameter({4, c, 1, 1}, "se1");
  const int se2 = b.parameter({c, 4, 1, 1}, "se2");
  const int proj = b.parameter({6, c, 1, 1}, "proj");
  const int t1 = b.tensor({1, c, 6, 6}), t2 = b.tensor({1, c, 6, 6});
  b.node("Conv", {x, dw}, {t1},
         {attr_i("group", c), attr_ints("strides", {2, 2}), attr_ints("pads", {2, 2, 2, 2})}, 11);
  b.node("HardSwish", {t1}, {t2}, {}, 14);
  const int p = b.tensor({1, c, 1, 1}), s1 = b.tensor({1, 4, 1, 1}), s2 = b.tensor({1, 4, 1, 1});
  const int s3 = b.tensor({1, c, 1, 1}), s4 = b.tensor({1, c, 1, 1}), t3 = b.tensor({1, c, 6, 6});
  b.node("GlobalAveragePool", {t2}, {p}, {}, 1);
  b.node("Conv", {p, se1}, {s1}, {}, 11);
  b.node("Relu", {s1}, {s2});
  b.node("Conv", {s2, se2}, {s3}, {}, 11);
  b.node("HardSigmoid", {s3}, {s4}, {attr_f("alpha", 1.0f / 6)}, 6);
  b.node("Mul", {t2, s4}, {t3});
  const int t4 = b.tensor({1, 6, 6, 6}), t5 = b.tensor({1, 6, 6, 6});
  b.node("Conv", {t3, proj}, {t4}, {}, 11);
  b.node("Clip", {t4}, {t5}, {attr_f("min", 0.0f), attr_f("max", 6.0f)}, 6);
  const int pool = b.tensor({1, c, 6, 6}), y = b.tensor({1, c + 6, 6, 6});
  b.node("MaxPool", {t3}, {pool}, {attr_ints("kernel_shape", {3, 3}), pads1()}, 12);
  b.node("Concat", {pool, t5}, {y}, {attr_i("axis", 1)}, 13);
  const int z = b.tensor({1, c + 6, 6, 6});
  b.node("Sigmoid", {y}, {z});
  b.output(z);
  expect_same(b, {{1, c, 12, 11}, {4, c, 1, 1}, {c, 4, 1, 1}, {6, c, 1, 1}}, {{1, c + 6, 6, 6}});
}

// A channels-last tensor read by an operator that needs the plain layout
// (Transpose) and by an elementwise op with a plain operand of full shape.
TEST_F(Schedule, LayoutEdgesReorderWhereNeeded) {
  GraphBuilder b;
  const int x = b.input({1, 3, 5, 6});
  const int other = b.input({1, 4, 5, 6});
  const int w = b.constant_f32({4, 3, 3, 3}, random_values(4 * 27, 11));
  const int t1 = b.tensor({1, 4, 5, 6}), t2 = b.tensor({1, 4, 5, 6}), t3 = b.tensor({1, 5, 6, 4});
  const int t4 = b.tensor({1, 4, 5, 6});
  b.node("Conv", {x, w}, {t1}, {pads1()}, 11);
  b.node("Sub", {t1, other}, {t2});
  b.node("Transpose", {t1}, {t3}, {attr_ints("perm", {0, 2, 3, 1})});
  b.node("AveragePool", {t2}, {t4}, {attr_ints("kernel_shape", {3, 3}), pads1()}, 11);
  b.output(t4);
  b.output(t3);
  expect_same(b, {{1, 3, 5, 6}, {1, 4, 5, 6}}, {{1, 4, 5, 6}, {1, 5, 6, 4}});
}

// MatMul with packed weights, bias Add and Relu fused; a batched MatMul of
// two computed operands with broadcast batch dimensions; Gemm transposes.
TEST_F(Schedule, MatMulsMatchThePlainKernels) {
  GraphBuilder b;
  const int a = b.input({2, 5, 6});
  const int w = b.parameter({6, 7}, "w");
  const int bias = b.constant_f32({7}, random_values(7, 5));
  const int t1 = b.tensor({2, 5, 7}), t2 = b.tensor({2, 5, 7}), t3 = b.tensor({2, 5, 7});
  b.node("MatMul", {a, w}, {t1});
  b.node("Add", {t1, bias}, {t2});
  b.node("Relu", {t2}, {t3});
  const int q = b.input({2, 1, 4, 5}), k = b.input({1, 3, 5, 2});
  const int att = b.tensor({2, 3, 4, 2});
  b.node("MatMul", {q, k}, {att});
  const int g_a = b.input({6, 3});
  const int g_b = b.parameter({4, 6}, "gb");
  const int g_c = b.constant_f32({1, 4}, {0.5f, -0.5f, 1.5f, 2});
  const int g_y = b.tensor({3, 4});
  b.node("Gemm", {g_a, g_b, g_c}, {g_y}, {attr_i("transA", 1), attr_i("transB", 1), attr_f("beta", 0.5f)}, 13);
  b.output(t3);
  b.output(att);
  b.output(g_y);
  expect_same(b, {{2, 5, 6}, {6, 7}, {2, 1, 4, 5}, {1, 3, 5, 2}, {6, 3}, {4, 6}},
              {{2, 5, 7}, {2, 3, 4, 2}, {3, 4}});
}

// Attention as exporters write it: heads split by Transposes feeding the
// batched MatMuls (q: 0,2,1,3; k: 0,2,3,1) and the context transposed back
// (0,2,1,3). The schedule folds them into strided oneDNN views (no copies):
// fewer steps, and the same results as the plain kernels.
TEST_F(Schedule, TransposesFoldIntoBatchedMatMuls) {
  GraphBuilder b;
  const int64_t t = 7, h = 3, d = 5;
  const int xq = b.input({1, t, h, d}), xk = b.input({1, t, h, d}), xv = b.input({1, t, h, d});
  const int q = b.tensor({1, h, t, d}), k = b.tensor({1, h, d, t}), v = b.tensor({1, h, t, d});
  b.node("Transpose", {xq}, {q}, {attr_ints("perm", {0, 2, 1, 3})}, 13);
  b.node("Transpose", {xk}, {k}, {attr_ints("perm", {0, 2, 3, 1})}, 13);
  b.node("Transpose", {xv}, {v}, {attr_ints("perm", {0, 2, 1, 3})}, 13);
  const int att = b.tensor({1, h, t, t}), sm = b.tensor({1, h, t, t});
  b.node("MatMul", {q, k}, {att});
  b.node("Softmax", {att}, {sm}, {}, 13);
  const int ctx = b.tensor({1, h, t, d}), out = b.tensor({1, t, h, d});
  b.node("MatMul", {sm, v}, {ctx});
  b.node("Transpose", {ctx}, {out}, {attr_ints("perm", {0, 2, 1, 3})}, 13);
  b.output(out);
  expect_same(b, {{1, t, h, d}, {1, t, h, d}, {1, t, h, d}}, {{1, t, h, d}});
  // The executable logs its schedule at DEBUG: matmul(q, k) with both
  // transposes, softmax, matmul(sm, v) with v's transpose and the result's.
  const std::string want = "executable: schedule: matmul nodes 0,1,3 -> plain; node nodes 4 -> plain; "
                           "matmul nodes 2,5,6 -> plain";
  const std::vector<std::string> log_lines = harness_.recorder().logs();
  EXPECT_NE(std::find(log_lines.begin(), log_lines.end(), want), log_lines.end())
      << (log_lines.empty() ? "no log lines" : log_lines.back());
}

// The exporters' Erf GELU after a MatMul + bias, in both orders of its
// final multiplications and with x / sqrt 2 written as a Div or a Mul, is
// one oneDNN matmul with a gelu_erf post-op; a near miss (x / 1.41) is not
// fused and still matches.
TEST_F(Schedule, GeluAfterMatMulMatchesThePlainKernels) {
  GraphBuilder b;
  const int x = b.input({2, 9, 16});
  int next = x;
  const float sqrt2 = 1.41421356f;
  for (int form = 0; form < 3; ++form) {
    const int w = b.parameter({16, 16}, "w" + std::to_string(form));
    const int bias = b.constant_f32({16}, random_values(16, 40 + form));
    const int mm = b.tensor({2, 9, 16}), h = b.tensor({2, 9, 16}), d = b.tensor({2, 9, 16});
    const int e = b.tensor({2, 9, 16}), a = b.tensor({2, 9, 16}), m1 = b.tensor({2, 9, 16});
    const int y = b.tensor({2, 9, 16});
    b.node("MatMul", {next, w}, {mm});
    b.node("Add", {mm, bias}, {h});
    if (form == 1) {
      b.node("Mul", {b.constant_f32({}, {0.70710678f}), h}, {d});
    } else {
      b.node("Div", {h, b.constant_f32({}, {form == 2 ? 1.41f : sqrt2})}, {d});
    }
    b.node("Erf", {d}, {e}, {}, 13);
    b.node("Add", {b.constant_f32({}, {1.0f}), e}, {a});
    if (form == 0) {
      b.node("Mul", {h, a}, {m1});
      b.node("Mul", {m1, b.constant_f32({}, {0.5f})}, {y});
    } else {
      b.node("Mul", {b.constant_f32({1}, {0.5f}), h}, {m1});
      b.node("Mul", {a, m1}, {y});
    }
    next = y;
  }
  b.output(next);
  expect_same(b, {{2, 9, 16}, {16, 16}, {16, 16}, {16, 16}}, {{2, 9, 16}}, 2e-5f);
}

// The exporters' LayerNorm (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt,
// Div, Mul, Add) is one fused step: with gamma and beta as parameters, with
// Mul(d, d) for the square and no affine part, and a variant over the first
// axis that is not fused; all match the plain kernels node by node.
TEST_F(Schedule, LayerNormPatternMatchesThePlainKernels) {
  GraphBuilder b;
  const int x = b.input({3, 37, 40});
  const int gamma = b.parameter({40}, "gamma");
  const int beta = b.parameter({40}, "beta");
  const auto layer_norm = [&](int in, bool square_by_mul, bool affine, int64_t axis) {
    Dims reduced = {3, 37, 40};
    reduced[static_cast<size_t>(axis < 0 ? axis + 3 : axis)] = 1;
    const int m = b.tensor(reduced), d = b.tensor({3, 37, 40}), q = b.tensor({3, 37, 40});
    const int v = b.tensor(reduced), ve = b.tensor(reduced), sd = b.tensor(reduced);
    const int y = b.tensor({3, 37, 40});
    b.node("ReduceMean", {in}, {m}, {attr_ints("axes", {axis})}, 13);
    b.node("Sub", {in, m}, {d});
    if (square_by_mul) {
      b.node("Mul", {d, d}, {q});
    } else {
      b.node("Pow", {d, b.constant_f32({}, {2.0f})}, {q});
    }
    b.node("ReduceMean", {q}, {v}, {attr_ints("axes", {axis})}, 13);
    b.node("Add", {v, b.constant_f32({}, {1e-5f})}, {ve});
    b.node("Sqrt", {ve}, {sd});
    b.node("Div", {d, sd}, {y});
    if (!affine) return y;
    const int g = b.tensor({3, 37, 40}), z = b.tensor({3, 37, 40});
    b.node("Mul", {y, gamma}, {g});
    b.node("Add", {beta, g}, {z});
    return z;
  };
  const int a = layer_norm(x, false, true, -1);
  const int c = layer_norm(a, true, false, 2);
  const int e = layer_norm(c, false, true, 0);
  b.output(a);
  b.output(e);
  const auto out = expect_same(b, {{3, 37, 40}, {40}, {40}}, {{3, 37, 40}, {3, 37, 40}}, 2e-5f);
  ASSERT_EQ(out.size(), 2u);
}

// By hand: ONNX's LayerNormalization operator (opset 17, over the last axis
// and, with axis 1, over the last two), with and without B, against the
// formula in double precision. (The ONNX test data's cases ask for the Mean
// and InvStdDev outputs as well, which cpu-simd leaves to the reference
// kernels, so this is where the operator is checked.)
TEST_F(Schedule, LayerNormalizationOperatorByHand) {
  GraphBuilder b;
  const int x = b.input({2, 2, 4});
  const int g4 = b.constant_f32({4}, {1, 1, 2, 2}), b4 = b.constant_f32({4}, {0, 0, 0, 1});
  const int g24 = b.constant_f32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  const int y1 = b.tensor({2, 2, 4}), y2 = b.tensor({2, 2, 4});
  b.node("LayerNormalization", {x, g4, b4}, {y1}, {attr_f("epsilon", 0.25f)}, 17);
  b.node("LayerNormalization", {x, g24}, {y2}, {attr_i("axis", 1)}, 17);
  b.output(y1);
  b.output(y2);
  const std::vector<float> in = {1, 2, 3, 4, 2, 2, 2, 2, -1, 0, 5, 0, 3, 1, 4, 1};
  auto out = run(b, {{{2, 2, 4}, in}}, {{2, 2, 4}, {2, 2, 4}});
  ASSERT_EQ(out.size(), 2u);
  const auto normalize = [&](size_t begin, size_t n, double eps, size_t i) {
    double mean = 0, var = 0;
    for (size_t k = 0; k < n; ++k) mean += in[begin + k];
    mean /= static_cast<double>(n);
    for (size_t k = 0; k < n; ++k) var += (in[begin + k] - mean) * (in[begin + k] - mean);
    var /= static_cast<double>(n);
    return (in[begin + i] - mean) / std::sqrt(var + eps);
  };
  std::vector<float> want1, want2;
  const float gamma4[] = {1, 1, 2, 2}, beta4[] = {0, 0, 0, 1};
  for (size_t r = 0; r < 4; ++r) {
    for (size_t i = 0; i < 4; ++i) {
      want1.push_back(static_cast<float>(normalize(4 * r, 4, 0.25, i) * gamma4[i] + beta4[i]));
    }
  }
  for (size_t r = 0; r < 2; ++r) {
    for (size_t i = 0; i < 8; ++i) {
      want2.push_back(static_cast<float>(normalize(8 * r, 8, 1e-5, i) * static_cast<double>(i + 1)));
    }
  }
  expect_near(out[0], want1);
  expect_near(out[1], want2);
}

// Packed weights follow the parameter: bound at a new address with new
// values, the next run uses them.
TEST_F(Schedule, ParameterAtANewAddressIsPackedAgain) {
  GraphBuilder b;
  const int x = b.input({1, 1, 2, 2});
  const int w = b.parameter({2, 1, 1, 1}, "w");
  const int y = b.tensor({1, 2, 2, 2});
  b.node("Conv", {x, w}, {y}, {}, 11);
  b.output(y);
  std::vector<std::byte> blob;
  ASSERT_EQ(compile(b.finish(), &blob), "ok");
  loom_executable_t* exe = load(device_, blob);
  ASSERT_NE(exe, nullptr);
  std::vector<HostTensor> in = {{{1, 1, 2, 2}, {1, 2, 3, 4}}, {{2, 1, 1, 1}, {2, -1}}};
  auto out = execute(exe, in, {{1, 2, 2, 2}});
  expect_near(out[0], {2, 4, 6, 8, -1, -2, -3, -4});
  std::vector<HostTensor> moved = {in[0], {{2, 1, 1, 1}, {10, 0.5f}}};
  out = execute(exe, moved, {{1, 2, 2, 2}});
  expect_near(out[0], {10, 20, 30, 40, 0.5f, 1, 1.5f, 2});
  api_->executable_destroy(exe);
}

// By hand: Conv 1x1 + BatchNormalization + Relu folded into one step.
TEST_F(Schedule, FoldedBatchNormByHand) {
  GraphBuilder b;
  const int x = b.input({1, 2, 1, 2});
  const int w = b.constant_f32({2, 2, 1, 1}, {1, 0, 1, 1});
  const int bias = b.constant_f32({2}, {0, 1});
  const int scale = b.constant_f32({2}, {2, 1}), beta = b.constant_f32({2}, {1, -10});
  const int mean = b.constant_f32({2}, {1, 0}), var = b.constant_f32({2}, {3, 0});
  const int t1 = b.tensor({1, 2, 1, 2}), t2 = b.tensor({1, 2, 1, 2}), y = b.tensor({1, 2, 1, 2});
  b.node("Conv", {x, w, bias}, {t1}, {}, 11);
  b.node("BatchNormalization", {t1, scale, beta, mean, var}, {t2}, {attr_f("epsilon", 1.0f)}, 9);
  b.node("Relu", {t2}, {y});
  b.output(y);
  // x = [[1, 2], [3, 4]] (channel-major): conv ch0 = x0 = [1, 2];
  // ch1 = x0 + x1 + 1 = [5, 7]. BN ch0: (v - 1) * 2 / 2 + 1 = [1, 2];
  // ch1: v / 1 - 10 = [-5, -3] -> Relu [0, 0].
  auto out = run(b, {{{1, 2, 1, 2}, {1, 2, 3, 4}}}, {{1, 2, 1, 2}});
  ASSERT_EQ(out.size(), 1u);
  expect_near(out[0], {1, 2, 0, 0});
}

// An FPN top-down path: ConvTranspose (oneDNN deconvolution; its residual
// Add and the Relu after it are steps of their own, as a sum post-op slows
// oneDNN's deconvolution down several times) next to a grouped one with output_padding, Resize
// nearest and linear, ReduceMean over the last axis and Gather with
// constant indices; the plain kernels run the same graph.
TEST_F(Schedule, UpsamplingReductionsAndGatherMatchThePlainKernels) {
  GraphBuilder b;
  const int x = b.input({1, 8, 6, 5});
  const int other = b.input({1, 4, 12, 10});
  const int up_w = b.parameter({8, 4, 4, 4}, "up_w");
  const int up_b = b.constant_f32({4}, {0.5f, -0.5f, 0.25f, 0});
  const int grouped_w = b.constant_f32({8, 2, 3, 3}, random_values(8 * 2 * 9, 21));
  const int t1 = b.tensor({1, 4, 12, 10}), t2 = b.tensor({1, 4, 12, 10}), t3 = b.tensor({1, 4, 12, 10});
  b.node("ConvTranspose", {x, up_w, up_b}, {t1},
         {attr_ints("strides", {2, 2}), attr_ints("pads", {1, 1, 1, 1})}, 11);
  b.node("Add", {t1, other}, {t2});
  b.node("Relu", {t2}, {t3});
  // Grouped: 8 -> 4 channels in 2 groups, stride 2, output_padding 1:
  // (6 - 1) * 2 + 1 + 3 - 2 = 12 rows, (5 - 1) * 2 + 1 + 3 - 2 = 10 columns.
  const int g1 = b.tensor({1, 4, 12, 10});
  b.node("ConvTranspose", {x, grouped_w}, {g1},
         {attr_i("group", 2), attr_ints("strides", {2, 2}), attr_ints("pads", {1, 1, 1, 1}),
          attr_ints("output_padding", {1, 1})}, 11);
  const int roi = b.constant_f32({0}, {});
  const int scales = b.constant_f32({4}, {1, 1, 2, 2});
  const int near = b.tensor({1, 4, 24, 20});
  b.node("Resize", {t3, roi, scales}, {near},
         {attr_s("mode", "nearest"), attr_s("coordinate_transformation_mode", "asymmetric"),
          attr_s("nearest_mode", "floor")}, 13);
  const int no_scales = b.constant_f32({0}, {});
  const int sizes = b.constant_i64({4}, {1, 4, 17, 13});
  const int lin = b.tensor({1, 4, 17, 13});
  b.node("Resize", {g1, roi, no_scales, sizes}, {lin}, {attr_s("mode", "linear")}, 13);
  const int mean = b.tensor({1, 4, 17, 1});
  b.node("ReduceMean", {lin}, {mean}, {attr_ints("axes", {-1})}, 13);
  const int idx = b.constant_i64({2}, {2, -4});
  const int picked = b.tensor({1, 2, 17, 1});
  b.node("Gather", {mean, idx}, {picked}, {attr_i("axis", 1)}, 13);
  const int maxed = b.tensor({4, 17});
  b.node("ReduceMax", {lin}, {maxed}, {attr_ints("axes", {0, 3}), attr_i("keepdims", 0)}, 13);
  b.output(near);
  b.output(picked);
  b.output(maxed);
  const auto out = expect_same(b, {{1, 8, 6, 5}, {1, 4, 12, 10}, {8, 4, 4, 4}},
                               {{1, 4, 24, 20}, {1, 2, 17, 1}, {4, 17}});
  ASSERT_EQ(out.size(), 3u);
  // Nearest 2x asymmetric/floor: each input pixel fills a 2x2 block.
  for (int r = 0; r < 24; r += 2) {
    for (int c = 0; c < 20; c += 2) {
      const float v = out[0][r * 20 + c];
      EXPECT_EQ(out[0][r * 20 + c + 1], v);
      EXPECT_EQ(out[0][(r + 1) * 20 + c], v);
    }
  }
}

// By hand: Gather with constant i32 indices (one negative) along the middle
// axis, then ReduceSum and ReduceMin over two axes (opset 13: ReduceSum's
// axes are an input); the ONNX test data gives Gather its indices as a graph
// input, so this is where the constant-index kernel is checked.
TEST_F(Schedule, GatherAndReductionsByHand) {
  GraphBuilder b;
  const int x = b.input({2, 3, 2});
  const int idx = b.constant_i32({2, 1}, {2, -3});
  const int g = b.tensor({2, 2, 1, 2});
  b.node("Gather", {x, idx}, {g}, {attr_i("axis", 1)}, 13);
  const int axes = b.constant_i64({2}, {0, 3});
  const int sum = b.tensor({2, 1}), mn = b.tensor({1, 2, 1, 1});
  b.node("ReduceSum", {g, axes}, {sum}, {attr_i("keepdims", 0)}, 13);
  b.node("ReduceMin", {g}, {mn}, {attr_ints("axes", {0, 3})}, 13);
  b.output(g);
  b.output(sum);
  b.output(mn);
  // x[n][c][w] = 6n + 2c + w: rows c = 2 then c = 0 of each n.
  auto out = run(b, {{{2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}},
                 {{2, 2, 1, 2}, {2, 1}, {1, 2, 1, 1}});
  ASSERT_EQ(out.size(), 3u);
  expect_near(out[0], {4, 5, 0, 1, 10, 11, 6, 7});
  expect_near(out[1], {4 + 5 + 10 + 11, 0 + 1 + 6 + 7});
  expect_near(out[2], {4, 0});
}

// Transposes checked element by element on both instances: the tiled 2-D
// path (8 x 8 tiles, edges of odd size, batches, split over the pool when
// large), axes of 1 and merged neighbours, and the row-copy path.
TEST_F(Schedule, TransposesByHand) {
  struct Case {
    Dims shape;
    std::vector<int64_t> perm;
  };
  const Case cases[] = {
      {{37, 70}, {1, 0}},          {{3, 301, 170}, {0, 2, 1}},   {{2, 19, 5, 33}, {0, 3, 1, 2}},
      {{4, 9, 17, 8}, {2, 0, 3, 1}}, {{1, 16, 1, 24}, {3, 1, 2, 0}}, {{6, 5, 4, 3}, {1, 0, 2, 3}},
      {{2, 3, 8, 8, 3}, {4, 1, 2, 0, 3}}, {{64, 8}, {1, 0}}};
  for (const Case& c : cases) {
    std::string label = "perm";
    for (int64_t d : c.perm) label += " " + std::to_string(d);
    SCOPED_TRACE(label + " of " + std::to_string(c.shape.size()) + "-D " + std::to_string(elements(c.shape)));
    Dims out_shape;
    for (int64_t d : c.perm) out_shape.push_back(c.shape[static_cast<size_t>(d)]);
    GraphBuilder b;
    const int x = b.input(c.shape);
    const int y = b.tensor(out_shape);
    b.node("Transpose", {x}, {y}, {attr_ints("perm", c.perm)}, 13);
    b.output(y);
    const size_t n = elements(c.shape), rank = c.shape.size();
    F data(n);
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>(i);
    // want[j]: the input element at the output index j's permuted position.
    F want(n);
    std::vector<int64_t> in_strides(rank, 1);
    for (size_t d = rank - 1; d-- > 0;) in_strides[d] = in_strides[d + 1] * c.shape[d + 1];
    for (size_t j = 0; j < n; ++j) {
      size_t rest = j;
      int64_t src = 0;
      for (size_t d = rank; d-- > 0;) {
        const int64_t i = static_cast<int64_t>(rest % static_cast<size_t>(out_shape[d]));
        rest /= static_cast<size_t>(out_shape[d]);
        src += i * in_strides[static_cast<size_t>(c.perm[d])];
      }
      want[j] = static_cast<float>(src);
    }
    std::vector<std::byte> blob;
    ASSERT_EQ(compile(b.finish(), &blob), "ok");
    for (loom_device_t* device : {device_, plain_device_}) {
      std::vector<HostTensor> in = {{c.shape, data}};
      loom_executable_t* exe = load(device, blob);
      ASSERT_NE(exe, nullptr);
      const std::vector<F> got = execute(exe, in, {out_shape});
      api_->executable_destroy(exe);
      ASSERT_EQ(got.size(), 1u);
      size_t wrong = 0, first = n;
      for (size_t j = 0; j < n; ++j) {
        if (got[0][j] != want[j]) {
          ++wrong;
          first = std::min(first, j);
        }
      }
      EXPECT_EQ(wrong, 0u) << (device == device_ ? "default" : "plain") << " instance; first at "
                           << first;
    }
  }
}

// Rows long enough for the 16-lane body and a tail (37 and 70), with a
// spread of values (-40 to 40, so some terms underflow far below 1e-9 of
// the sum): Softmax and LogSoftmax against double precision.
TEST_F(Schedule, SoftmaxAndLogSoftmaxOnLongRowsMatchDoublePrecision) {
  for (int64_t n : {37, 70}) {
    SCOPED_TRACE("rows of " + std::to_string(n));
    GraphBuilder b;
    const int in = b.input({3, n});
    const int y = b.tensor({3, n}), ly = b.tensor({3, n});
    b.node("Softmax", {in}, {y}, {}, 13);
    b.node("LogSoftmax", {in}, {ly}, {}, 13);
    b.output(y);
    b.output(ly);
    std::vector<float> x(static_cast<size_t>(3 * n));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 81) - 40.0f;
    auto out = run(b, {{{3, n}, x}}, {{3, n}, {3, n}});
    ASSERT_EQ(out.size(), 2u);
    std::vector<float> want(x.size()), want_log(x.size());
    for (int64_t r = 0; r < 3; ++r) {
      double mx = -1e30, sum = 0;
      for (int64_t j = 0; j < n; ++j) mx = std::max(mx, static_cast<double>(x[r * n + j]));
      for (int64_t j = 0; j < n; ++j) sum += std::exp(x[r * n + j] - mx);
      for (int64_t j = 0; j < n; ++j) {
        want[r * n + j] = static_cast<float>(std::exp(x[r * n + j] - mx) / sum);
        want_log[r * n + j] = static_cast<float>(x[r * n + j] - mx - std::log(sum));
      }
    }
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(out[0][i], want[i], 2e-6f * std::max(want[i], 1e-30f) + 1e-37f) << i;
      EXPECT_NEAR(out[1][i], want_log[i], 1e-5f * std::max(1.0f, std::fabs(want_log[i]))) << i;
    }
  }
}

// MaxPool 2 x 2 stride 2 on a plain (graph input) tensor takes the plain
// kernels' 2 x 2 loop on both instances: odd heights and widths drop the
// last row and column, a NaN in a window wins, and a large input is split
// over the pool.
TEST_F(Schedule, PlainMaxPool2x2ByHand) {
  for (const Dims& shape : {Dims{2, 3, 9, 13}, Dims{1, 4, 130, 260}}) {
    SCOPED_TRACE(std::to_string(elements(shape)) + " elements");
    const int64_t h = shape[2], w = shape[3], oh = h / 2, ow = w / 2;
    const Dims out_shape = {shape[0], shape[1], oh, ow};
    GraphBuilder b;
    const int x = b.input(shape);
    const int y = b.tensor(out_shape);
    b.node("MaxPool", {x}, {y}, {attr_ints("kernel_shape", {2, 2}), attr_ints("strides", {2, 2})}, 12);
    b.output(y);
    F data = random_values(elements(shape), 5, -3.0f, 3.0f);
    data[1] = std::numeric_limits<float>::quiet_NaN();  // window (0, 0) of plane 0
    F want(elements(out_shape));
    for (int64_t p = 0; p < shape[0] * shape[1]; ++p) {
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t c = 0; c < ow; ++c) {
          float m = -std::numeric_limits<float>::infinity();
          for (int64_t dy = 0; dy < 2; ++dy) {
            for (int64_t dx = 0; dx < 2; ++dx) {
              const float v = data[static_cast<size_t>((p * h + 2 * r + dy) * w + 2 * c + dx)];
              if (v > m || v != v) m = v;
            }
          }
          want[static_cast<size_t>((p * oh + r) * ow + c)] = m;
        }
      }
    }
    std::vector<std::byte> blob;
    ASSERT_EQ(compile(b.finish(), &blob), "ok");
    for (loom_device_t* device : {device_, plain_device_}) {
      std::vector<HostTensor> in = {{shape, data}};
      loom_executable_t* exe = load(device, blob);
      ASSERT_NE(exe, nullptr);
      const std::vector<F> got = execute(exe, in, {out_shape});
      api_->executable_destroy(exe);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_TRUE(std::isnan(got[0][0]));
      for (size_t i = 1; i < want.size(); ++i) {
        ASSERT_EQ(got[0][i], want[i]) << (device == device_ ? "default" : "plain") << " at " << i;
      }
    }
  }
}

// An unknown or mistimed ISA request is refused with a reason.
TEST_F(Schedule, IsaOptionIsValidated) {
  loom_option_t opt{LOOM_OPTION_STRUCT_SIZE, "cpu.isa", "avx9000"};
  const loom_option_t* opts[] = {&opt};
  loom_plugin_create_args_t args{};
  args.struct_size = LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
  args.host = harness_.services();
  args.options = opts;
  args.option_count = 1;
  const std::string s = take(api_->plugin_create(&args));
  EXPECT_NE(s.find("option cpu.isa=\"avx9000\" is not one of"), std::string::npos) << s;
  loom_option_t bad{LOOM_OPTION_STRUCT_SIZE, "cpu.onednn", "2"};
  opts[0] = &bad;
  const std::string s2 = take(api_->plugin_create(&args));
  EXPECT_NE(s2.find("cpu.onednn"), std::string::npos) << s2;
}

}  // namespace
}  // namespace loom::cpu_simd::testing
