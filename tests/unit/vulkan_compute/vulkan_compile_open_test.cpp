// Open-shape graphs (ABI 1.2, LOOM_PLUGIN_CAP_OPEN_SHAPES) through
// vulkan-compute's compile entries: what an open graph claims, the one
// format-3 blob compile returns for every binding, executions at several
// bindings against the same graph compiled static per binding, the errors
// an execution gets when its shapes disagree with the plugin's rules, and
// the bounded binding cache. Static graphs keep their format-2 blob.
#include <cmath>

#include "compile_harness.hpp"

namespace loom::vulkan::test {
namespace {

// A small CNN over x [n, 3, h, w] (-1 where open): Conv 3x3 pad 1 (+ Relu,
// folded), MaxPool 2x2 stride 2, Transpose there and back, Reshape [0, 4, -1],
// ReduceMean over the last axis, Flatten, Gemm to 5 classes, Softmax.
GraphBuilder open_cnn(int64_t n, int64_t h, int64_t w) {
  auto half = [](int64_t d) { return d < 0 ? d : d / 2; };
  GraphBuilder g;
  const int x = g.input({n, 3, h, w});
  const int wc = g.constant_f32({4, 3, 3, 3}, random_values(4 * 27, 11));
  const int bc = g.constant_f32({4}, random_values(4, 12));
  const int c = g.tensor({n, 4, h, w}), r = g.tensor({n, 4, h, w});
  const int p = g.tensor({n, 4, half(h), half(w)});
  const int t = g.tensor({n, half(h), half(w), 4}), tb = g.tensor({n, 4, half(h), half(w)});
  const int target = g.constant_i64({3}, {0, 4, -1});
  const int flat = g.tensor({n, 4, h < 0 || w < 0 ? -1 : half(h) * half(w)});
  const int m = g.tensor({n, 4, 1}), f = g.tensor({n, 4});
  const int wg = g.constant_f32({4, 5}, random_values(20, 13)), bg = g.constant_f32({5}, random_values(5, 14));
  const int logits = g.tensor({n, 5}), y = g.tensor({n, 5});
  g.node("Conv", {x, wc, bc}, {c}, {attr_ints("pads", {1, 1, 1, 1}), attr_ints("kernel_shape", {3, 3})});
  g.node("Relu", {c}, {r});
  g.node("MaxPool", {r}, {p}, {attr_ints("kernel_shape", {2, 2}), attr_ints("strides", {2, 2})});
  g.node("Transpose", {p}, {t}, {attr_ints("perm", {0, 2, 3, 1})});
  g.node("Transpose", {t}, {tb}, {attr_ints("perm", {0, 3, 1, 2})});
  g.node("Reshape", {tb, target}, {flat});
  g.node("ReduceMean", {flat}, {m}, {attr_ints("axes", {2})}, 13);
  g.node("Flatten", {m}, {f});
  g.node("Gemm", {f, wg, bg}, {logits});
  g.node("Softmax", {logits}, {y}, {}, 13);
  g.output(y);
  return g;
}

class VulkanOpen : public VulkanCompile {
 protected:
  // Compiles `g`, expecting the format its shapes call for.
  std::vector<uint8_t> compile_ok(const GraphBuilder& g, uint32_t version) {
    std::vector<uint8_t> blob;
    EXPECT_EQ(compile(g.finish(), &blob), "ok");
    EXPECT_EQ(blob_version(blob.data(), blob.size()), version);
    return blob;
  }
  loom_executable_t* load(const std::vector<uint8_t>& blob) {
    loom_executable_t* exe = nullptr;
    EXPECT_EQ(harness_.load(device_, kLoaderKey, blob_version(blob.data(), blob.size()), blob.data(), blob.size(),
                            &exe),
              "ok");
    return exe;
  }
  // One execution of `exe` on x (shape `xs`, values from `seed`) with an
  // output of shape `ys`: "ok" or the error, the output in *y.
  std::string execute(loom_executable_t* exe, const Dims& xs, const Dims& ys, uint32_t seed,
                      std::vector<float>* y = nullptr) {
    uint64_t nx = 1, ny = 1;
    for (int64_t d : xs) nx *= static_cast<uint64_t>(d);
    for (int64_t d : ys) ny *= static_cast<uint64_t>(d);
    // A shape too large to allocate gets a small buffer: the shape is
    // refused before the buffer is looked at.
    const bool huge = nx > (uint64_t{1} << 26);
    loom_buffer_t* bx = allocate(huge ? 64 : nx * 4);
    loom_buffer_t* by = allocate(ny * 4);
    if (!huge) {
      std::vector<float> xv = random_values(nx, seed);
      EXPECT_EQ(copy(bx, 0, xv.data(), nx * 4, true), "ok");
    }
    const loom_tensor_t tx = ::loom::testing::buffer_tensor(LOOM_DTYPE_F32, xs, bx, nx * 4);
    const loom_tensor_t ty = ::loom::testing::buffer_tensor(LOOM_DTYPE_F32, ys, by, ny * 4);
    std::string s = harness_.execute(exe, {&tx}, {&ty});
    if (s == "ok" && y != nullptr) {
      y->assign(ny, 0);
      EXPECT_EQ(copy(by, 0, y->data(), ny * 4, false), "ok");
    }
    api_->buffer_free(bx);
    api_->buffer_free(by);
    return s;
  }
  size_t prepared() {
    size_t n = 0;
    for (const std::string& l : harness_.recorder().logs()) {
      n += l.find("open executable: prepared binding") != std::string::npos ? 1 : 0;
    }
    return n;
  }
};

TEST_F(VulkanOpen, AnOpenGraphIsClaimedWhereItsRulesHoldAtEveryBinding) {
  GraphBuilder g = open_cnn(-1, -1, -1);
  EXPECT_EQ(supported(g), std::vector<bool>(10, true));
  // A Reshape whose target is computed (not a constant) cannot be bound per
  // execution; a pool window larger than the probe's open extent fails its
  // rule at compile time, not at execute; a ConvTranspose with SAME padding
  // over an open map is even at some bindings only (odd padding is
  // declined), so it is declined too, while over a fixed map it is claimed.
  GraphBuilder h;
  const int x = h.input({-1, 8});
  const int shape = h.input({2}, gfb::DType::i64);
  const int r = h.tensor({-1, -1}), q = h.input({1, 1, -1, -1}), pooled = h.tensor({1, 1, -1, -1});
  h.node("Reshape", {x, shape}, {r});
  h.node("MaxPool", {q}, {pooled}, {attr_ints("kernel_shape", {100, 1})});
  h.node("Relu", {x}, {h.tensor({-1, 8})});
  const int wt = h.constant_f32({1, 1, 3, 3}, random_values(9, 15));
  const int fixed = h.input({-1, 1, 4, 4});
  h.node("ConvTranspose", {q, wt}, {h.tensor({1, 1, -1, -1})},
         {attr_s("auto_pad", "SAME_UPPER"), attr_ints("strides", {2, 2})});
  const int wt4 = h.constant_f32({1, 1, 4, 4}, random_values(16, 16));  // padding 2: even
  h.node("ConvTranspose", {fixed, wt4}, {h.tensor({-1, 1, 8, 8})},
         {attr_s("auto_pad", "SAME_UPPER"), attr_ints("strides", {2, 2})});
  h.output(r);
  h.output(pooled);
  EXPECT_EQ(supported(h), (std::vector<bool>{false, false, true, false, true}));
}

TEST_F(VulkanOpen, CompiledOnceRunsThreeBindingsLikeTheStaticCompile) {
  LOOM_VK_REQUIRE_DEVICE();
  loom_executable_t* open = load(compile_ok(open_cnn(-1, -1, -1), kOpenFormatVersion));
  ASSERT_NE(open, nullptr);
  uint32_t seed = 20;
  for (const Dims& xs : {Dims{1, 3, 8, 8}, Dims{2, 3, 6, 10}, Dims{3, 3, 12, 4}, Dims{1, 3, 8, 8}}) {
    const Dims ys = {xs[0], 5};
    std::vector<float> got, want;
    ASSERT_EQ(execute(open, xs, ys, seed, &got), "ok") << xs[0] << "x3x" << xs[2] << "x" << xs[3];
    // The oracle: the same graph compiled static for this binding.
    loom_executable_t* fixed = load(compile_ok(open_cnn(xs[0], xs[2], xs[3]), kStaticFormatVersion));
    ASSERT_NE(fixed, nullptr);
    ASSERT_EQ(execute(fixed, xs, ys, seed, &want), "ok");
    api_->executable_destroy(fixed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
    // Softmax rows: each sums to 1, so the numbers are not all zero.
    double sum = 0;
    for (int64_t j = 0; j < 5; ++j) sum += got[static_cast<size_t>(j)];
    EXPECT_NEAR(sum, 1.0, 1e-5);
    ++seed;
  }
  EXPECT_EQ(prepared(), 3u);  // the fourth execution reused the first binding
  api_->executable_destroy(open);
}

TEST_F(VulkanOpen, ShapesThatContradictTheRulesAreOneLineErrors) {
  LOOM_VK_REQUIRE_DEVICE();
  const GraphBuilder g = open_cnn(-1, -1, -1);
  const std::string y = "t" + std::to_string(g.outputs[0]);
  loom_executable_t* open = load(compile_ok(g, kOpenFormatVersion));
  ASSERT_NE(open, nullptr);
  const std::string bad = code_prefix(LOOM_STATUS_INVALID_ARGUMENT);
  // The host's output shape disagrees with the rules: named, both shapes.
  EXPECT_EQ(execute(open, {2, 3, 8, 8}, {2, 6}, 1),
            bad + "execute: output 0 (" + y + ") has shape [2,6], but vulkan-compute's shape rules give [2,5] at "
                  "binding t0=[2,3,8,8]");
  // An input the declared shape rules out.
  EXPECT_EQ(execute(open, {1, 4, 8, 8}, {1, 5}, 1),
            bad + "execute: input 0 (t0) has shape [1,4,8,8], which does not fit the declared [-1,3,-1,-1] "
                  "(-1: open)");
  // A binding where a rule fails: a 2x2 pool over a 1x1 map.
  const std::string tiny = execute(open, {1, 3, 1, 1}, {1, 5}, 1);
  EXPECT_EQ(tiny.rfind(bad + "execute: at binding t0=[1,3,1,1]: node", 0), 0u) << tiny;
  EXPECT_NE(tiny.find("(MaxPool) cannot run at this binding: the window is larger than the padded input"),
            std::string::npos)
      << tiny;
  // Beyond the kernels' limits.
  const std::string huge = execute(open, {1, 3, 40000, 40000}, {1, 5}, 1);
  EXPECT_EQ(huge.rfind(bad + "execute: at binding t0=[1,3,40000,40000]: node", 0), 0u) << huge;
  EXPECT_NE(huge.find("beyond vulkan-compute's limits"), std::string::npos) << huge;
  EXPECT_EQ(huge.find('\n'), std::string::npos);
  // Still usable afterwards.
  EXPECT_EQ(execute(open, {2, 3, 8, 8}, {2, 5}, 1), "ok");
  api_->executable_destroy(open);
}

TEST_F(VulkanOpen, TheBindingCacheKeepsTheEightMostRecentlyUsed) {
  LOOM_VK_REQUIRE_DEVICE();
  loom_executable_t* open = load(compile_ok(open_cnn(-1, 3, 4), kOpenFormatVersion));
  ASSERT_NE(open, nullptr);
  auto run = [&](int64_t n) { EXPECT_EQ(execute(open, {n, 3, 3, 4}, {n, 5}, 7), "ok") << "n " << n; };
  for (int64_t n = 1; n <= 8; ++n) run(n);
  EXPECT_EQ(prepared(), 8u);
  run(1);  // kept: n = 2 is now the least recently used
  EXPECT_EQ(prepared(), 8u);
  run(9);  // evicts n = 2
  EXPECT_EQ(prepared(), 9u);
  run(1);
  run(3);
  EXPECT_EQ(prepared(), 9u);
  run(2);  // prepared again
  EXPECT_EQ(prepared(), 10u);
  std::string last;
  for (const std::string& l : harness_.recorder().logs()) {
    if (l.find("prepared binding") != std::string::npos) last = l;
  }
  EXPECT_NE(last.find("8 of 8 kept, 10 prepared in all"), std::string::npos) << last;
  api_->executable_destroy(open);
}

TEST_F(VulkanOpen, AStaticGraphKeepsItsFormatTwoBlob) {
  const std::vector<uint8_t> blob = compile_ok(open_cnn(2, 8, 8), kStaticFormatVersion);
  BlobProgram p;
  std::string error;
  ASSERT_TRUE(decode(blob.data(), blob.size(), &p, &error)) << error;
  p.data.assign(p.data_view, p.data_view + p.data_size);
  EXPECT_EQ(encode(p), blob);  // written by encode(), format 2, nothing else
  uint8_t version[4] = {};
  std::memcpy(version, blob.data() + 4, 4);
  EXPECT_EQ(version[0], 2u);
  // And the open form is no program: decode() says what it is.
  const std::vector<uint8_t> open = compile_ok(open_cnn(-1, 8, 8), kOpenFormatVersion);
  EXPECT_FALSE(decode(open.data(), open.size(), &p, &error));
  EXPECT_EQ(error, "format version 3 carries an open graph, not a program (decode_open reads it)");
}

TEST_F(VulkanOpen, AMalformedOpenBlobIsRefusedAtCheck) {
  LOOM_VK_REQUIRE_DEVICE();
  std::vector<uint8_t> blob = compile_ok(open_cnn(-1, -1, -1), kOpenFormatVersion);
  std::vector<uint8_t> cut(blob.begin(), blob.end() - 8);
  const std::string inc = code_prefix(LOOM_STATUS_INCOMPATIBLE);
  EXPECT_EQ(harness_.check(device_, kLoaderKey, kOpenFormatVersion, cut.data(), cut.size()),
            inc + "vulkan-compute open blob rejected: format-3 blob of " + std::to_string(cut.size()) +
                " bytes: its head names a graph of " + std::to_string(blob.size() - 16) + " bytes (want " +
                std::to_string(cut.size() - 16) + ", at least 1)");
  std::vector<uint8_t> garbled = blob;
  garbled[20] ^= 0xff;  // inside the graph's file identifier area
  const std::string s = harness_.check(device_, kLoaderKey, kOpenFormatVersion, garbled.data(), garbled.size());
  EXPECT_EQ(s.rfind(inc + "vulkan-compute open blob rejected: graph.fbs", 0), 0u) << s;
  EXPECT_EQ(harness_.check(device_, kLoaderKey, kOpenFormatVersion, blob.data(), blob.size()), "ok");
}

}  // namespace
}  // namespace loom::vulkan::test
