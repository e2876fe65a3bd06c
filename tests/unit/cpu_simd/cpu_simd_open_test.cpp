// Open-shape executables (blob format 5, ABI 1.2) through the plugin's C ABI:
// one executable run at several bindings matches a static blob built for
// each, outputs whose shapes disagree are refused, the binding cache evicts
// its least recently used entry, weight packs are shared between bindings,
// and two threads run two bindings at once.
#include <thread>

#include "cpu_simd_plugin_fixture.hpp"

namespace loom::cpu_simd {
namespace {

class CpuSimdOpen : public CpuSimdPlugin {};

// x [n, 3, h, w] -> Conv 3x3 pad 1 (w [8, 3, 3, 3], b [8]) -> Relu ->
// MaxPool 2x2 stride 2 -> GlobalAveragePool -> Flatten (Copy) -> Gemm
// (w2 [8, 5], c2 [5]) -> y [n, 5]. n, h, w < 0: open (-1), with the Copy
// carrying its shape spec. Weights are parameters, as the compiler marks them.
BlobGraph small_cnn(int64_t n, int64_t h, int64_t w) {
  const int64_t ph = h < 0 ? -1 : h / 2, pw = w < 0 ? -1 : w / 2;
  BlobGraph g;
  auto t = [&](Dims s) {
    g.tensors.push_back({LOOM_DTYPE_F32, std::move(s)});
    return static_cast<uint32_t>(g.tensors.size() - 1);
  };
  const uint32_t x = t({n, 3, h, w}), wt = t({8, 3, 3, 3}), b = t({8}), w2 = t({8, 5}), c2 = t({5});
  const uint32_t c = t({n, 8, h, w}), r = t({n, 8, h, w}), p = t({n, 8, ph, pw});
  const uint32_t gap = t({n, 8, 1, 1}), f = t({n, 8}), y = t({n, 5});
  for (uint32_t i : {wt, b, w2, c2}) g.tensors[i].parameter = true;
  g.inputs = {x, wt, b, w2, c2};
  g.outputs = {y};
  auto node = [&](Op op, std::vector<uint32_t> in, uint32_t out) -> BlobNode& {
    BlobNode nd;
    nd.op = op;
    nd.inputs = std::move(in);
    nd.outputs = {out};
    g.nodes.push_back(nd);
    return g.nodes.back();
  };
  node(Op::kConv, {x, wt, b}, c).ints = {2, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  node(Op::kRelu, {c}, r);
  node(Op::kMaxPool, {r}, p).ints = {2, 0, 0, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0};
  node(Op::kGlobalAveragePool, {p}, gap);
  BlobNode& flat = node(Op::kCopy, {gap}, f);
  if (n < 0) flat.ints = {-2, -1};
  node(Op::kGemm, {f, w2, c2}, y);
  return g;
}

struct CnnWeights {
  Tensor w, b, w2, c2;
  explicit CnnWeights(std::mt19937& rng)
      : w(random_tensor({8, 3, 3, 3}, rng)), b(random_tensor({8}, rng)), w2(random_tensor({8, 5}, rng)),
        c2(random_tensor({5}, rng)) {}
  std::vector<const loom_tensor_t*> with(const Tensor& x) const { return {&x.desc, &w.desc, &b.desc, &w2.desc, &c2.desc}; }
};

// Lines the executable logged when it prepared a binding.
size_t prepared_lines(const std::vector<std::string>& logs, std::string* last = nullptr) {
  size_t n = 0;
  for (const std::string& l : logs) {
    if (l.find("executable: prepared binding") == std::string::npos) continue;
    ++n;
    if (last != nullptr) *last = l;
  }
  return n;
}

TEST_F(CpuSimdOpen, OneExecutableMatchesStaticBlobsAtEachBinding) {
  std::mt19937 rng(31);
  const CnnWeights wts(rng);
  const std::vector<std::byte> blob = encode(small_cnn(-1, -1, -1));
  ASSERT_EQ(static_cast<uint8_t>(blob[4]), 5u);
  EXPECT_EQ(check(blob), "ok");
  std::string error;
  loom_executable_t* open = load(blob, &error);
  ASSERT_NE(open, nullptr) << error;
  const std::vector<std::array<int64_t, 3>> bindings = {{1, 16, 16}, {2, 20, 12}, {4, 9, 11}, {1, 16, 16}};
  for (const auto& [n, h, w] : bindings) {
    SCOPED_TRACE("binding n " + std::to_string(n) + " h " + std::to_string(h) + " w " + std::to_string(w));
    const Tensor x = random_tensor({n, 3, h, w}, rng);
    loom_executable_t* fixed = load(encode(small_cnn(n, h, w)), &error);
    ASSERT_NE(fixed, nullptr) << error;
    Tensor want = zero_tensor({n, 5}), got = zero_tensor({n, 5});
    ASSERT_EQ(execute(fixed, wts.with(x), {&want.desc}), "ok");
    ASSERT_EQ(execute(open, wts.with(x), {&got.desc}), "ok");
    expect_close(got.data, want.data);
    api_->executable_destroy(fixed);
  }
  // Three distinct bindings, the fourth a repeat; the conv's weights were
  // packed for the first and reused by the others wherever oneDNN chose the
  // same layout.
  std::string last;
  EXPECT_EQ(prepared_lines(harness_.recorder().logs(), &last), 3u);
  EXPECT_EQ(last.find(" 0 reused"), std::string::npos) << last;
  api_->executable_destroy(open);
}

TEST_F(CpuSimdOpen, OutputsWhoseShapesDisagreeAreInvalidArguments) {
  std::mt19937 rng(32);
  const CnnWeights wts(rng);
  loom_executable_t* open = load(encode(small_cnn(-1, -1, -1)));
  ASSERT_NE(open, nullptr);
  const Tensor x = random_tensor({1, 3, 8, 8}, rng);
  Tensor y = zero_tensor({2, 5});
  const std::string bad = code_prefix(LOOM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(execute(open, wts.with(x), {&y.desc}), bad + "execute: output 0 has shape [2, 5], expected [1, 5]");
  // An input that the declared shape rules out.
  const Tensor x4 = random_tensor({1, 4, 8, 8}, rng);
  Tensor y1 = zero_tensor({1, 5});
  EXPECT_EQ(execute(open, wts.with(x4), {&y1.desc}),
            bad + "execute: the input shapes do not fit the executable: input 0 has shape [1, 4, 8, 8], "
                  "which does not fit the declared [-1, 3, -1, -1]");
  // A binding whose shape rules fail (a 2x2 pool over a 1x1 map).
  const Tensor tiny = random_tensor({1, 3, 1, 1}, rng);
  const std::string error = execute(open, wts.with(tiny), {&y1.desc});
  EXPECT_EQ(error.rfind(bad + "execute: the input shapes do not fit the executable: node 2 (MaxPool)", 0), 0u)
      << error;
  api_->executable_destroy(open);
}

TEST_F(CpuSimdOpen, TheBindingCacheEvictsTheLeastRecentlyUsed) {
  std::mt19937 rng(33);
  const CnnWeights wts(rng);
  loom_executable_t* open = load(encode(small_cnn(-1, -1, -1)));
  ASSERT_NE(open, nullptr);
  auto run = [&](int64_t n) {
    const Tensor x = random_tensor({n, 3, 4, 4}, rng);
    Tensor y = zero_tensor({n, 5});
    EXPECT_EQ(execute(open, wts.with(x), {&y.desc}), "ok") << "n " << n;
  };
  for (int64_t n = 1; n <= 8; ++n) run(n);
  EXPECT_EQ(prepared_lines(harness_.recorder().logs()), 8u);
  run(1);  // kept: n = 2 is now the least recently used
  EXPECT_EQ(prepared_lines(harness_.recorder().logs()), 8u);
  run(9);  // evicts n = 2
  EXPECT_EQ(prepared_lines(harness_.recorder().logs()), 9u);
  run(1);
  run(3);
  EXPECT_EQ(prepared_lines(harness_.recorder().logs()), 9u);
  run(2);  // prepared again
  EXPECT_EQ(prepared_lines(harness_.recorder().logs()), 10u);
  api_->executable_destroy(open);
}

TEST_F(CpuSimdOpen, TwoThreadsRunTwoBindingsAtOnce) {
  std::mt19937 rng(34);
  const CnnWeights wts(rng);
  loom_executable_t* open = load(encode(small_cnn(-1, -1, -1)));
  ASSERT_NE(open, nullptr);
  const std::array<Dims, 2> shapes = {Dims{1, 3, 12, 12}, Dims{3, 3, 10, 14}};
  std::array<Tensor, 2> xs = {random_tensor(shapes[0], rng), random_tensor(shapes[1], rng)};
  std::array<std::vector<float>, 2> want;
  for (int i = 0; i < 2; ++i) {
    loom_executable_t* fixed = load(encode(small_cnn(shapes[i][0], shapes[i][2], shapes[i][3])));
    ASSERT_NE(fixed, nullptr);
    Tensor y = zero_tensor({shapes[i][0], 5});
    ASSERT_EQ(execute(fixed, wts.with(xs[i]), {&y.desc}), "ok");
    want[i] = y.data;
    api_->executable_destroy(fixed);
  }
  std::array<std::string, 2> errors;
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      for (int iter = 0; iter < 10; ++iter) {
        Tensor y = zero_tensor({shapes[i][0], 5});
        const std::string s = execute(open, wts.with(xs[i]), {&y.desc});
        if (s != "ok") errors[i] = s;
        for (size_t k = 0; k < y.data.size() && errors[i].empty(); ++k) {
          if (std::abs(y.data[k] - want[i][k]) > 1e-4f * (1.0f + std::abs(want[i][k]))) {
            errors[i] = "element " + std::to_string(k) + " differs at iteration " + std::to_string(iter);
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  api_->executable_destroy(open);
}

}  // namespace
}  // namespace loom::cpu_simd
