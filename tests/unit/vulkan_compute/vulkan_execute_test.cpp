// vulkan-compute executables through the C ABI: blobs built with the
// format's own builders, loaded, executed on device buffers and compared with
// host arithmetic; malformed blobs rejected at check and load. Validation
// layer on: every test ends with zero validation messages.
#include <cmath>
#include <random>

#include "loom/vulkan_compute/kernels.hpp"
#include "vk_harness.hpp"

namespace loom::vulkan::test {
namespace {

using Dims = std::vector<int64_t>;

size_t count_of(const Dims& d) {
  size_t n = 1;
  for (int64_t v : d) n *= static_cast<size_t>(v);
  return n;
}

std::vector<float> random_values(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

uint32_t add_tensor(BlobProgram* p, TensorKind kind, Dims shape) {
  BlobTensor t;
  t.kind = kind;
  t.shape = std::move(shape);
  p->tensors.push_back(t);
  const uint32_t i = static_cast<uint32_t>(p->tensors.size() - 1);
  if (kind == TensorKind::kInput) p->inputs.push_back(i);
  if (kind == TensorKind::kOutput) p->outputs.push_back(i);
  return i;
}

uint32_t add_constant(BlobProgram* p, Dims shape, const std::vector<float>& values) {
  const uint32_t i = add_tensor(p, TensorKind::kConstant, std::move(shape));
  p->tensors[i].data_offset = p->data.size();
  const auto* bytes = reinterpret_cast<const uint8_t*>(values.data());
  p->data.insert(p->data.end(), bytes, bytes + values.size() * 4);
  return i;
}

// A device tensor: a buffer of the plugin plus its descriptor.
struct DeviceTensor {
  Dims shape;
  loom_buffer_t* buffer = nullptr;
  loom_tensor_t desc{};
};

class VulkanExecute : public VulkanTest {
 protected:
  void TearDown() override {
    for (loom_executable_t* e : executables_) api_->executable_destroy(e);
    for (DeviceTensor* t : tensors_) {
      api_->buffer_free(t->buffer);
      delete t;
    }
    VulkanTest::TearDown();
  }

  // Defined with the chain below.
  void run_chain_checks();

  std::string check(const std::vector<uint8_t>& blob) {
    return harness_.check(device_, kLoaderKey, kFormatVersion, blob.data(), blob.size());
  }
  loom_executable_t* load(const std::vector<uint8_t>& blob, std::string* error = nullptr) {
    loom_executable_t* exe = nullptr;
    std::string s = harness_.load(device_, kLoaderKey, kFormatVersion, blob.data(), blob.size(), &exe);
    if (error != nullptr) *error = s;
    if (exe != nullptr) executables_.push_back(exe);
    return exe;
  }
  DeviceTensor* tensor(Dims shape, const std::vector<float>* values = nullptr) {
    auto* t = new DeviceTensor;
    tensors_.push_back(t);
    t->shape = std::move(shape);
    const size_t bytes = count_of(t->shape) * 4;
    t->buffer = allocate(bytes);
    EXPECT_NE(t->buffer, nullptr);
    t->desc = ::loom::testing::buffer_tensor(LOOM_DTYPE_F32, t->shape, t->buffer, bytes);
    if (values != nullptr) {
      EXPECT_EQ(copy(t->buffer, 0, const_cast<float*>(values->data()), bytes, true), "ok");
    }
    return t;
  }
  std::vector<float> read(DeviceTensor* t) {
    std::vector<float> v(count_of(t->shape));
    EXPECT_EQ(copy(t->buffer, 0, v.data(), v.size() * 4, false), "ok");
    return v;
  }
  std::string execute(loom_executable_t* exe, std::vector<DeviceTensor*> in,
                      std::vector<DeviceTensor*> out, loom_fence_t* signal = nullptr) {
    std::vector<const loom_tensor_t*> ins, outs;
    for (auto* t : in) ins.push_back(&t->desc);
    for (auto* t : out) outs.push_back(&t->desc);
    return harness_.execute(exe, ins, outs, signal);
  }

  std::vector<loom_executable_t*> executables_;
  std::vector<DeviceTensor*> tensors_;
};

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                  double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << what << " element " << i;
  }
}

TEST_F(VulkanExecute, UnaryOpsMatchHostMath) {
  LOOM_VK_REQUIRE_DEVICE();
  struct Case { UnaryOp op; float alpha, beta; double (*f)(double, double, double); };
  const Case cases[] = {
      {UnaryOp::kRelu, 0, 0, [](double x, double, double) { return x > 0 ? x : 0; }},
      {UnaryOp::kSigmoid, 0, 0, [](double x, double, double) { return 1 / (1 + std::exp(-x)); }},
      {UnaryOp::kTanh, 0, 0, [](double x, double, double) { return std::tanh(x); }},
      {UnaryOp::kExp, 0, 0, [](double x, double, double) { return std::exp(x); }},
      {UnaryOp::kErf, 0, 0, [](double x, double, double) { return std::erf(x); }},
      {UnaryOp::kAbs, 0, 0, [](double x, double, double) { return std::fabs(x); }},
      {UnaryOp::kNeg, 0, 0, [](double x, double, double) { return -x; }},
      {UnaryOp::kClip, -0.5f, 0.7f, [](double x, double a, double b) { return std::min(std::max(x, a), b); }},
      {UnaryOp::kHardSigmoid, 0.2f, 0.5f, [](double x, double a, double b) { return std::clamp(a * x + b, 0.0, 1.0); }},
      {UnaryOp::kHardSwish, 0, 0, [](double x, double, double) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }},
      {UnaryOp::kLeakyRelu, 0.1f, 0, [](double x, double a, double) { return x >= 0 ? x : a * x; }},
      {UnaryOp::kElu, 1.5f, 0, [](double x, double a, double) { return x >= 0 ? x : a * (std::exp(x) - 1); }},
  };
  const Dims shape = {3, 5, 67};
  BlobProgram p;
  const uint32_t x = add_tensor(&p, TensorKind::kInput, shape);
  for (const Case& c : cases) {
    const uint32_t y = add_tensor(&p, TensorKind::kOutput, shape);
    p.dispatches.push_back(make_unary(c.op, x, y, count_of(shape), c.alpha, c.beta));
  }
  loom_executable_t* exe = load(encode(p));
  ASSERT_NE(exe, nullptr);
  const std::vector<float> values = random_values(count_of(shape), -3, 3, 1);
  DeviceTensor* in = tensor(shape, &values);
  std::vector<DeviceTensor*> outs;
  for (size_t i = 0; i < std::size(cases); ++i) outs.push_back(tensor(shape));
  ASSERT_EQ(execute(exe, {in}, outs), "ok");
  for (size_t i = 0; i < std::size(cases); ++i) {
    std::vector<double> want;
    for (float v : values) want.push_back(cases[i].f(v, cases[i].alpha, cases[i].beta));
    expect_close(read(outs[i]), want, 1e-5, 1e-6, "unary op " + std::to_string(static_cast<int>(cases[i].op)));
  }
}

TEST_F(VulkanExecute, BinaryOpsBroadcastLikeNumpy) {
  LOOM_VK_REQUIRE_DEVICE();
  // a [2,3,4] op b [3,1] -> [2,3,4]: b's strides are (0, 1, 0).
  const Dims out = {2, 3, 4};
  const std::vector<float> av = random_values(24, 0.5f, 2, 2), bv = random_values(3, -2, 2, 3);
  struct Case { BinaryOp op; double (*f)(double, double); };
  const Case cases[] = {
      {BinaryOp::kAdd, [](double a, double b) { return a + b; }},
      {BinaryOp::kSub, [](double a, double b) { return a - b; }},
      {BinaryOp::kMul, [](double a, double b) { return a * b; }},
      {BinaryOp::kDiv, [](double a, double b) { return a / b; }},
      {BinaryOp::kPow, [](double a, double b) { return std::pow(a, b); }},
      {BinaryOp::kMax, [](double a, double b) { return std::max(a, b); }},
      {BinaryOp::kMin, [](double a, double b) { return std::min(a, b); }},
  };
  BlobProgram p;
  const uint32_t a = add_tensor(&p, TensorKind::kInput, out);
  const uint32_t b = add_tensor(&p, TensorKind::kInput, {3, 1});
  for (const Case& c : cases) {
    const uint32_t y = add_tensor(&p, TensorKind::kOutput, out);
    p.dispatches.push_back(make_binary(c.op, a, b, y, out, {12, 4, 1}, {0, 1, 0}));
  }
  loom_executable_t* exe = load(encode(p));
  ASSERT_NE(exe, nullptr);
  DeviceTensor* ta = tensor(out, &av);
  DeviceTensor* tb = tensor({3, 1}, &bv);
  std::vector<DeviceTensor*> outs;
  for (size_t i = 0; i < std::size(cases); ++i) outs.push_back(tensor(out));
  ASSERT_EQ(execute(exe, {ta, tb}, outs), "ok");
  for (size_t i = 0; i < std::size(cases); ++i) {
    std::vector<double> want;
    for (size_t e = 0; e < 24; ++e) want.push_back(cases[i].f(av[e], bv[(e / 4) % 3]));
    expect_close(read(outs[i]), want, 1e-5, 1e-6, "binary op " + std::to_string(i));
  }
}


class VulkanMatMul : public VulkanExecute {
 public:
  void run(uint32_t m, uint32_t n, uint32_t k, uint32_t batch, bool ta, bool tb, bool bias,
           uint32_t act) {
    const std::vector<float> av = random_values(size_t{batch} * m * k, -1, 1, 4);
    const std::vector<float> bv = random_values(size_t{batch} * k * n, -1, 1, 5);
    const std::vector<float> cv = random_values(n, -1, 1, 6);
    MatMulParams mp;
    mp.m = m; mp.n = n; mp.k = k; mp.batch = batch;
    mp.a_stride = m * k; mp.b_stride = k * n;
    mp.trans_a = ta; mp.trans_b = tb; mp.bias = bias; mp.act = act;
    mp.alpha = 0.5f; mp.beta = 2.0f;
    mp.c_row = 0; mp.c_col = 1;  // C is a row vector [n]
    BlobProgram p;
    const Dims ashape = ta ? Dims{batch, k, m} : Dims{batch, m, k};
    const Dims bshape = tb ? Dims{batch, n, k} : Dims{batch, k, n};
    const uint32_t a = add_tensor(&p, TensorKind::kInput, ashape);
    const uint32_t b = add_tensor(&p, TensorKind::kInput, bshape);
    const uint32_t c = add_constant(&p, {n}, cv);
    const uint32_t y = add_tensor(&p, TensorKind::kOutput, {batch, m, n});
    p.dispatches.push_back(make_matmul(mp, a, b, c, y));
    loom_executable_t* exe = load(encode(p));
    ASSERT_NE(exe, nullptr);
    DeviceTensor* da = tensor(ashape, &av);
    DeviceTensor* db = tensor(bshape, &bv);
    DeviceTensor* dy = tensor({batch, m, n});
    ASSERT_EQ(execute(exe, {da, db}, {dy}), "ok");
    std::vector<double> want(size_t{batch} * m * n);
    for (uint32_t z = 0; z < batch; ++z) {
      for (uint32_t i = 0; i < m; ++i) {
        for (uint32_t j = 0; j < n; ++j) {
          double s = 0;
          for (uint32_t l = 0; l < k; ++l) {
            const double x = av[size_t{z} * m * k + (ta ? l * m + i : i * k + l)];
            const double w = bv[size_t{z} * k * n + (tb ? j * k + l : l * n + j)];
            s += x * w;
          }
          double v = 0.5 * s + (bias ? 2.0 * cv[j] : 0.0);
          if (act == 1) v = std::max(v, 0.0);
          want[(size_t{z} * m + i) * n + j] = v;
        }
      }
    }
    expect_close(read(dy), want, 1e-4, 1e-4, "matmul");
  }
};

TEST_F(VulkanMatMul, TiledMatchesReferenceOnRaggedSizes) {
  LOOM_VK_REQUIRE_DEVICE();
  run(70, 130, 33, 2, false, false, false, 0);
  // Past one 128 x 128 tile in both directions, K not a multiple of the
  // 16-deep slice, each operand layout.
  run(257, 131, 40, 1, false, true, true, 1);
  run(130, 259, 17, 2, true, false, false, 0);
}
TEST_F(VulkanMatMul, TransposedOperandsBiasAndReluFuse) {
  LOOM_VK_REQUIRE_DEVICE();
  run(65, 17, 100, 1, true, true, true, 1);
}
TEST_F(VulkanMatMul, TransposedAOnlyAndTinyShapes) {
  LOOM_VK_REQUIRE_DEVICE();
  run(1, 1, 1, 3, true, false, true, 0);
  run(5, 64, 16, 1, false, true, false, 0);
}

// x[4,6] -> MatMul W[6,8] -> (alias [2,16]) -> Add c[16] -> Relu -> y[2,16]
BlobProgram chain(std::vector<float>* w, std::vector<float>* c) {
  *w = random_values(48, -1, 1, 7);
  *c = random_values(16, -1, 1, 8);
  BlobProgram p;
  const uint32_t x = add_tensor(&p, TensorKind::kInput, {4, 6});
  const uint32_t wt = add_constant(&p, {6, 8}, *w);
  const uint32_t h = add_tensor(&p, TensorKind::kIntermediate, {4, 8});
  const uint32_t hr = add_tensor(&p, TensorKind::kAlias, {2, 16});
  p.tensors[hr].alias = h;
  const uint32_t ct = add_constant(&p, {16}, *c);
  const uint32_t s = add_tensor(&p, TensorKind::kIntermediate, {2, 16});
  const uint32_t y = add_tensor(&p, TensorKind::kOutput, {2, 16});
  MatMulParams mp;
  mp.m = 4; mp.n = 8; mp.k = 6; mp.a_stride = 24; mp.b_stride = 0;
  p.dispatches.push_back(make_matmul(mp, x, wt, 0, h));
  p.dispatches.push_back(make_binary(BinaryOp::kAdd, hr, ct, s, {2, 16}, {16, 1}, {0, 1}));
  p.dispatches.push_back(make_unary(UnaryOp::kRelu, s, y, 32));
  return p;
}

std::vector<double> chain_reference(const std::vector<float>& x, const std::vector<float>& w,
                                    const std::vector<float>& c) {
  std::vector<double> y(32);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 8; ++j) {
      double s = 0;
      for (int l = 0; l < 6; ++l) s += double(x[i * 6 + l]) * w[l * 8 + j];
      const int flat = i * 8 + j;
      y[flat] = std::max(0.0, s + c[flat % 16]);
    }
  }
  return y;
}

// The chain three times on the same buffers (one recorded command buffer),
// new data each time; then on other buffers (a second binding set),
// asynchronously, waited for through a fence.
void VulkanExecute::run_chain_checks() {
  std::vector<float> w, c;
  loom_executable_t* exe = load(encode(chain(&w, &c)));
  ASSERT_NE(exe, nullptr);
  DeviceTensor* x = tensor({4, 6});
  DeviceTensor* y = tensor({2, 16});
  for (uint32_t run = 0; run < 3; ++run) {
    std::vector<float> xv = random_values(24, -1, 1, 10 + run);
    ASSERT_EQ(copy(x->buffer, 0, xv.data(), 96, true), "ok");
    ASSERT_EQ(execute(exe, {x}, {y}), "ok");
    expect_close(read(y), chain_reference(xv, w, c), 1e-5, 1e-5, "run " + std::to_string(run));
  }
  std::vector<float> xv = random_values(24, -1, 1, 20);
  DeviceTensor* x2 = tensor({4, 6}, &xv);
  DeviceTensor* y2 = tensor({2, 16});
  loom_fence_t* f = nullptr;
  ASSERT_EQ(take(api_, api_->fence_create(device_, &f)), "ok");
  ASSERT_EQ(execute(exe, {x2}, {y2}, f), "ok");
  ASSERT_EQ(take(api_, api_->fence_wait(f, UINT64_MAX)), "ok");
  bool signaled = false;
  ASSERT_EQ(take(api_, api_->fence_query(f, &signaled)), "ok");
  EXPECT_TRUE(signaled);
  expect_close(read(y2), chain_reference(xv, w, c), 1e-5, 1e-5, "async run");
  api_->fence_destroy(f);
}

TEST_F(VulkanExecute, ChainWithConstantsAliasAndIntermediatesRunsRepeatedly) {
  LOOM_VK_REQUIRE_DEVICE();
  run_chain_checks();
}

// Every vulkan.wait mode finishes executions, synchronous and through a
// fence, and the device's name says which one it uses.
class VulkanWait : public VulkanExecute, public ::testing::WithParamInterface<const char*> {};

TEST_P(VulkanWait, ChainRunsRepeatedlyAndThroughAFence) {
  LOOM_VK_REQUIRE_DEVICE({"vulkan.wait", GetParam()});
  loom_device_info_t info{};
  info.struct_size = LOOM_DEVICE_INFO_STRUCT_SIZE;
  ASSERT_EQ(take(api_, api_->device_info(device_, &info)), "ok");
  EXPECT_NE(std::string(info.name).find(std::string(", wait ") + GetParam() + "]"),
            std::string::npos)
      << info.name;
  run_chain_checks();
}

INSTANTIATE_TEST_SUITE_P(Modes, VulkanWait, ::testing::Values("block", "spin", "timeline"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

TEST_F(VulkanExecute, WrongOperandsAreRejectedWithReasons) {
  LOOM_VK_REQUIRE_DEVICE();
  std::vector<float> w, c;
  loom_executable_t* exe = load(encode(chain(&w, &c)));
  ASSERT_NE(exe, nullptr);
  DeviceTensor* x = tensor({4, 6});
  DeviceTensor* y = tensor({2, 16});
  DeviceTensor* wrong = tensor({2, 12});
  std::string s = execute(exe, {wrong}, {y});
  EXPECT_TRUE(starts_with(s, code_prefix(LOOM_STATUS_INVALID_ARGUMENT))) << s;
  EXPECT_NE(s.find("[4x6]"), std::string::npos) << s;
  s = execute(exe, {x}, {});
  EXPECT_NE(s.find("takes 1 inputs and 1 outputs"), std::string::npos) << s;
  std::vector<float> host(24);
  x->desc.buffer = nullptr;
  x->desc.host_data = host.data();
  s = execute(exe, {x}, {y});
  EXPECT_NE(s.find("host memory"), std::string::npos) << s;
  x->desc.buffer = x->buffer;
  x->desc.host_data = nullptr;
  x->desc.offset = 4;
  s = execute(exe, {x}, {y});
  EXPECT_TRUE(starts_with(s, code_prefix(LOOM_STATUS_OUT_OF_RANGE))) << s;
}

// ---------------------------------------------------------- malformed blobs

TEST_F(VulkanExecute, TruncatedAndFlippedBlobsAreRejectedOrRunSafely) {
  LOOM_VK_REQUIRE_DEVICE();
  std::vector<float> w, c;
  const std::vector<uint8_t> good = encode(chain(&w, &c));
  ASSERT_EQ(check(good), "ok");
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<long>(n));
    const std::string s = check(cut);
    ASSERT_TRUE(starts_with(s, code_prefix(LOOM_STATUS_INCOMPATIBLE))) << "truncated to " << n << ": " << s;
    std::string error;
    ASSERT_EQ(load(cut, &error), nullptr) << n;
  }
  DeviceTensor* x = tensor({4, 6});
  DeviceTensor* y = tensor({2, 16});
  // Flip each byte of the records (not the float data): each blob is either
  // rejected, or it is valid and runs.
  const size_t records = good.size() - (48 + 16) * 4;
  size_t accepted = 0;
  for (size_t i = 0; i < records; ++i) {
    std::vector<uint8_t> bad = good;
    bad[i] ^= 0x5a;
    if (check(bad) != "ok") continue;
    ++accepted;
    std::string error;
    loom_executable_t* exe = load(bad, &error);
    if (exe == nullptr) continue;
    const std::string s = execute(exe, {x}, {y});
    EXPECT_TRUE(s == "ok" || starts_with(s, code_prefix(LOOM_STATUS_INVALID_ARGUMENT))) << i << ": " << s;
    api_->executable_destroy(exe);
    executables_.pop_back();
  }
  EXPECT_LT(accepted, records / 4);
}

TEST_F(VulkanExecute, OutOfRangeDispatchesAreNamed) {
  LOOM_VK_REQUIRE_DEVICE();
  std::vector<float> w, c;
  auto expect_rejected = [&](BlobProgram p, const std::string& needle) {
    const std::string s = check(encode(p));
    EXPECT_TRUE(starts_with(s, code_prefix(LOOM_STATUS_INCOMPATIBLE))) << s;
    EXPECT_NE(s.find(needle), std::string::npos) << needle << " not in: " << s;
  };
  BlobProgram p = chain(&w, &c);
  p.dispatches[2].groups[0] = 1000;
  expect_rejected(p, "workgroups (1000, 1, 1)");
  p = chain(&w, &c);
  p.dispatches[2].push[0] = 1u << 30;  // count past the tensors
  expect_rejected(p, "count 1073741824");
  p = chain(&w, &c);
  p.dispatches[1].push[3 + kBinaryMaxRank] = 17;  // a's stride reaches past a
  expect_rejected(p, "operand a reaches element");
  p = chain(&w, &c);
  p.dispatches[0].push[2] = 7;  // K past A and B
  expect_rejected(p, "operand A reaches element");
  p = chain(&w, &c);
  p.dispatches[0].bindings[1] = 99;
  expect_rejected(p, "binding 1 names tensor 99");
  p = chain(&w, &c);
  p.tensors[1].data_offset = 1000;
  expect_rejected(p, "exceed the data section");
  p = BlobProgram();
  const uint32_t x = add_tensor(&p, TensorKind::kInput, {4});
  add_tensor(&p, TensorKind::kOutput, {4});
  p.dispatches.push_back(make_unary(UnaryOp::kRelu, x, x, 4));  // writes its input
  expect_rejected(p, "which is an input or a constant");
  p = chain(&w, &c);
  p.dispatches[0].kernel = Kernel::kCount;
  expect_rejected(p, "unknown kernel");
}

}  // namespace
}  // namespace loom::vulkan::test
