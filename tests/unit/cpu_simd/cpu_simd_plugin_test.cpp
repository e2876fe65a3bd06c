// The cpu-simd plugin through its C ABI only, checked against loom_kernels.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fixtures/format1_blob.hpp"
#include "kernels/kernel.hpp"
#include "loom/cpu_simd/blob_format.hpp"
#include "loom/plugin.h"

namespace loom::cpu_simd {
namespace {

using Dims = std::vector<int64_t>;

// "ok" or "<code>: <message>"; releases the status.
std::string take(const loom_plugin_api_t* api, loom_status_t* s) {
  if (s == nullptr) return "ok";
  std::string out = std::to_string(api->status_code(s)) + ": " + api->status_message(s);
  api->status_destroy(s);
  return out;
}

std::string code_prefix(loom_status_code_t code) { return std::to_string(code) + ": "; }

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

class Library {
 public:
  Library() {
    handle_ = dlopen(LOOM_CPU_SIMD_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) {
      query_ = reinterpret_cast<loom_plugin_query_fn_t>(dlsym(handle_, LOOM_PLUGIN_ENTRY_POINT_NAME));
    }
  }
  ~Library() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  loom_plugin_query_fn_t query() const { return query_; }
  const char* error() const { return handle_ == nullptr ? dlerror() : ""; }

 private:
  void* handle_ = nullptr;
  loom_plugin_query_fn_t query_ = nullptr;
};

loom_plugin_query_t make_query(uint32_t lo, uint32_t hi, char* reason, size_t capacity) {
  loom_plugin_query_t q{};
  q.struct_size = LOOM_PLUGIN_QUERY_STRUCT_SIZE;
  q.host_abi_min = lo;
  q.host_abi_max = hi;
  q.reason = reason;
  q.reason_capacity = capacity;
  return q;
}

struct Tensor {
  Dims shape;
  std::vector<float> data;
  loom_tensor_t desc{};

  Tensor() = default;
  Tensor(Dims s, std::vector<float> d) : shape(std::move(s)), data(std::move(d)) { refresh(); }
  Tensor(const Tensor& o) : shape(o.shape), data(o.data) { refresh(); }
  Tensor& operator=(const Tensor& o) {
    shape = o.shape;
    data = o.data;
    refresh();
    return *this;
  }
  void refresh() {
    desc = {};
    desc.struct_size = LOOM_TENSOR_STRUCT_SIZE;
    desc.dtype = LOOM_DTYPE_F32;
    desc.rank = static_cast<uint32_t>(shape.size());
    desc.shape = shape.data();
    desc.host_data = data.data();
    desc.byte_size = data.size() * sizeof(float);
  }
  kernels::TensorRef ref() {
    return kernels::TensorRef{DType::kF32, shape, data.data(), data.size() * sizeof(float)};
  }
};

size_t count_of(const Dims& s) {
  size_t n = 1;
  for (int64_t d : s) n *= static_cast<size_t>(d);
  return n;
}

Tensor random_tensor(const Dims& s, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count_of(s));
  for (float& x : v) x = dist(rng);
  return Tensor(s, std::move(v));
}

Tensor zero_tensor(const Dims& s) { return Tensor(s, std::vector<float>(count_of(s), 0.0f)); }

void expect_close(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const float tol = 1e-5f * std::max(1.0f, std::fabs(want[i]));
    ASSERT_NEAR(got[i], want[i], tol) << "element " << i;
  }
}

class CpuSimdPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(lib_.query(), nullptr) << "cannot load " << LOOM_CPU_SIMD_PLUGIN_PATH << ": "
                                     << lib_.error();
    char reason[256] = {};
    loom_plugin_query_t q = make_query(LOOM_ABI_VERSION(1, 0), LOOM_ABI_CURRENT, reason, sizeof reason);
    ASSERT_EQ(lib_.query()(&q), LOOM_STATUS_OK) << reason;
    api_ = q.out_api;
    ASSERT_NE(api_, nullptr);
    plugin_ = create({{LOOM_OPTION_THREADS, "2"}});
    ASSERT_NE(plugin_, nullptr);
    ASSERT_EQ(take(api_, api_->device_get(plugin_, 0, &device_)), "ok");
  }
  void TearDown() override {
    if (api_ != nullptr) api_->plugin_destroy(plugin_);
  }

  loom_plugin_t* create(std::vector<std::pair<const char*, const char*>> options,
                        std::string* error = nullptr) {
    std::vector<loom_option_t> opts;
    for (auto& [k, v] : options) opts.push_back({LOOM_OPTION_STRUCT_SIZE, k, v});
    std::vector<const loom_option_t*> ptrs;
    for (auto& o : opts) ptrs.push_back(&o);
    loom_plugin_create_args_t args{};
    args.struct_size = LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
    args.option_count = ptrs.size();
    args.options = ptrs.data();
    std::string s = take(api_, api_->plugin_create(&args));
    if (error != nullptr) *error = s;
    return args.out_plugin;
  }

  std::string check(const std::vector<std::byte>& blob, const char* key = "cpu-simd",
                    uint32_t version = kFormatVersion) {
    loom_executable_check_args_t args{};
    args.struct_size = LOOM_EXECUTABLE_CHECK_ARGS_STRUCT_SIZE;
    args.device = device_;
    args.loader_key = key;
    args.format_version = version;
    args.blob = blob.data();
    args.blob_size = blob.size();
    return take(api_, api_->executable_check(&args));
  }

  loom_executable_t* load(const std::vector<std::byte>& blob, std::string* error = nullptr,
                          uint32_t format_version = kFormatVersion) {
    loom_executable_load_args_t args{};
    args.struct_size = LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE;
    args.device = device_;
    args.loader_key = "cpu-simd";
    args.format_version = format_version;
    args.blob = blob.data();
    args.blob_size = blob.size();
    std::string s = take(api_, api_->executable_load(&args));
    if (error != nullptr) *error = s;
    return args.out_executable;
  }

  std::string execute(loom_executable_t* exe, std::vector<const loom_tensor_t*> in,
                      std::vector<const loom_tensor_t*> out, loom_fence_t* signal = nullptr) {
    loom_execute_args_t args{};
    args.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
    args.executable = exe;
    args.input_count = in.size();
    args.inputs = in.data();
    args.output_count = out.size();
    args.outputs = out.data();
    args.signal_fence = signal;
    return take(api_, api_->execute(&args));
  }

  // Runs a one-node graph on the plugin and the same operator on loom_kernels.
  void compare_single_op(Op op, const std::vector<Tensor>& inputs, const Dims& out_shape,
                         const char* kernel, const BlobNode& attrs,
                         const std::vector<AttributeDef>& kernel_attrs) {
    BlobGraph g;
    for (const Tensor& t : inputs) {
      g.tensors.push_back({LOOM_DTYPE_F32, t.shape});
      g.inputs.push_back(static_cast<uint32_t>(g.tensors.size() - 1));
    }
    g.tensors.push_back({LOOM_DTYPE_F32, out_shape});
    const uint32_t out_index = static_cast<uint32_t>(g.tensors.size() - 1);
    g.outputs = {out_index};
    BlobNode node = attrs;
    node.op = op;
    node.inputs = g.inputs;
    node.outputs = {out_index};
    g.nodes = {node};
    std::string error;
    loom_executable_t* exe = load(encode(g), &error);
    ASSERT_NE(exe, nullptr) << error;
    std::vector<Tensor> ins = inputs;
    Tensor got = zero_tensor(out_shape);
    std::vector<const loom_tensor_t*> in_descs;
    for (Tensor& t : ins) in_descs.push_back(&t.desc);
    EXPECT_EQ(execute(exe, in_descs, {&got.desc}), "ok");
    api_->executable_destroy(exe);

    Tensor want = zero_tensor(out_shape);
    std::vector<kernels::TensorRef> refs;
    for (Tensor& t : ins) refs.push_back(t.ref());
    std::vector<kernels::TensorRef> outs = {want.ref()};
    const auto registry = kernels::KernelRegistry::reference();
    Status s = registry.find(kernel)->run(refs, outs, kernels::Attributes(kernel_attrs));
    ASSERT_TRUE(s.ok()) << s.to_string();
    expect_close(got.data, want.data);
  }

  Library lib_;
  const loom_plugin_api_t* api_ = nullptr;
  loom_plugin_t* plugin_ = nullptr;
  loom_device_t* device_ = nullptr;
};

AttributeDef int_attr(const char* name, int64_t v) {
  AttributeDef a;
  a.name = name;
  a.kind = AttributeKind::kInt;
  a.i = v;
  return a;
}
AttributeDef float_attr(const char* name, float v) {
  AttributeDef a;
  a.name = name;
  a.kind = AttributeKind::kFloat;
  a.f = v;
  return a;
}

// x[B,I] MatMul w1 Add b1 Relu MatMul w2 Add b2 Softmax -> y[B,O]
BlobGraph mlp_graph(int64_t b, int64_t i, int64_t h, int64_t o) {
  BlobGraph g;
  auto t = [&](Dims s) {
    g.tensors.push_back({LOOM_DTYPE_F32, std::move(s)});
    return static_cast<uint32_t>(g.tensors.size() - 1);
  };
  uint32_t x = t({b, i}), w1 = t({i, h}), b1 = t({h}), w2 = t({h, o}), b2 = t({o});
  uint32_t h0 = t({b, h}), h1 = t({b, h}), r = t({b, h}), z = t({b, o}), z1 = t({b, o}), y = t({b, o});
  g.inputs = {x, w1, b1, w2, b2};
  g.outputs = {y};
  auto node = [&](Op op, std::vector<uint32_t> in, uint32_t out) {
    BlobNode n;
    n.op = op;
    n.inputs = std::move(in);
    n.outputs = {out};
    g.nodes.push_back(n);
  };
  node(Op::kMatMul, {x, w1}, h0);
  node(Op::kAdd, {h0, b1}, h1);
  node(Op::kRelu, {h1}, r);
  node(Op::kMatMul, {r, w2}, z);
  node(Op::kAdd, {z, b2}, z1);
  node(Op::kSoftmax, {z1}, y);
  return g;
}

// ---------------------------------------------------------------- query

TEST(CpuSimdQuery, NegotiatesTheNewestCommonVersion) {
  Library lib;
  ASSERT_NE(lib.query(), nullptr) << lib.error();
  char reason[128] = {};
  loom_plugin_query_t q = make_query(LOOM_ABI_VERSION(1, 0), LOOM_ABI_VERSION(1, 7), reason, sizeof reason);
  ASSERT_EQ(lib.query()(&q), LOOM_STATUS_OK) << reason;
  EXPECT_EQ(q.out_abi_version, LOOM_ABI_VERSION(1, 1));
  ASSERT_NE(q.out_api, nullptr);
  EXPECT_EQ(q.out_api->abi_version, LOOM_ABI_VERSION(1, 1));
  EXPECT_GE(q.out_api->struct_size, LOOM_PLUGIN_API_V1_1_SIZE);
  EXPECT_NE(q.out_api->compile, nullptr);
  // A 1.0 host gets the 1.0 table, with the compile entries too.
  loom_plugin_query_t old = make_query(LOOM_ABI_VERSION(1, 0), LOOM_ABI_VERSION(1, 0), reason, sizeof reason);
  ASSERT_EQ(lib.query()(&old), LOOM_STATUS_OK) << reason;
  EXPECT_EQ(old.out_abi_version, LOOM_ABI_VERSION(1, 0));
  EXPECT_EQ(old.out_api->abi_version, LOOM_ABI_VERSION(1, 0));
  EXPECT_EQ(old.out_api->struct_size, LOOM_PLUGIN_API_V1_0_SIZE);
  EXPECT_NE(old.out_api->compile, nullptr);
  const loom_plugin_info_t* info = q.out_api->plugin_info();
  ASSERT_NE(info, nullptr);
  EXPECT_STREQ(info->name, "cpu-simd");
  ASSERT_EQ(info->loader_key_count, 1u);
  EXPECT_STREQ(info->loader_keys[0]->key, "cpu-simd");
  EXPECT_EQ(info->loader_keys[0]->format_version_min, kMinFormatVersion);
  EXPECT_EQ(info->loader_keys[0]->format_version_max, kFormatVersion);
}

TEST(CpuSimdQuery, RefusesAHostRangeItDoesNotSpeakWithAReason) {
  Library lib;
  ASSERT_NE(lib.query(), nullptr) << lib.error();
  char reason[128] = {};
  loom_plugin_query_t q = make_query(LOOM_ABI_VERSION(2, 0), LOOM_ABI_VERSION(2, 3), reason, sizeof reason);
  EXPECT_EQ(lib.query()(&q), LOOM_STATUS_INCOMPATIBLE);
  EXPECT_STREQ(reason, "the host speaks ABI 2.0-2.3, the plugin speaks 1.0-1.1");
  EXPECT_EQ(q.out_api, nullptr);

  loom_plugin_query_t inverted = make_query(LOOM_ABI_VERSION(1, 2), LOOM_ABI_VERSION(1, 0), reason, sizeof reason);
  EXPECT_EQ(lib.query()(&inverted), LOOM_STATUS_INCOMPATIBLE);
  EXPECT_STREQ(reason, "the host's ABI range 1.2-1.0 is empty");

  char tiny[8] = {};
  loom_plugin_query_t truncated = make_query(LOOM_ABI_VERSION(0, 1), LOOM_ABI_VERSION(0, 9), tiny, sizeof tiny);
  EXPECT_EQ(lib.query()(&truncated), LOOM_STATUS_INCOMPATIBLE);
  EXPECT_EQ(std::strlen(tiny), sizeof tiny - 1);  // cut, still terminated

  loom_plugin_query_t small = make_query(LOOM_ABI_VERSION(1, 0), LOOM_ABI_VERSION(1, 0), reason, sizeof reason);
  small.struct_size = 8;
  EXPECT_EQ(lib.query()(&small), LOOM_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(lib.query()(nullptr), LOOM_STATUS_INVALID_ARGUMENT);
}

// ---------------------------------------------------------------- instance and device

TEST_F(CpuSimdPlugin, DescribesOneCpuDevice) {
  size_t count = 0;
  ASSERT_EQ(take(api_, api_->device_count(plugin_, &count)), "ok");
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(take(api_, api_->plugin_check_available(plugin_)), "ok");
  loom_device_info_t info{};
  info.struct_size = LOOM_DEVICE_INFO_STRUCT_SIZE;
  ASSERT_EQ(take(api_, api_->device_info(device_, &info)), "ok");
  EXPECT_STREQ(info.uri, "cpu-simd://0");
  ASSERT_NE(info.name, nullptr);
  EXPECT_GT(std::strlen(info.name), 0u);
  EXPECT_EQ(info.kind, LOOM_DEVICE_KIND_CPU);
  EXPECT_GT(info.device_memory_bytes, 0u);
  EXPECT_EQ(info.capabilities, LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE | LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY |
                                   LOOM_DEVICE_CAP_HOST_POINTER_IMPORT);
  EXPECT_EQ(info.dtype_mask, LOOM_DTYPE_BIT(LOOM_DTYPE_F32));
  EXPECT_EQ(info.struct_size, LOOM_DEVICE_INFO_STRUCT_SIZE);
}

TEST_F(CpuSimdPlugin, DeviceInfoWritesOnlyWhatFitsAnOlderStruct) {
  loom_device_info_t info{};
  info.struct_size = LOOM_STRUCT_SIZE(loom_device_info_t, kind);
  info.device_memory_bytes = 12345;
  info.dtype_mask = 777;
  ASSERT_EQ(take(api_, api_->device_info(device_, &info)), "ok");
  EXPECT_STREQ(info.uri, "cpu-simd://0");
  EXPECT_EQ(info.device_memory_bytes, 12345u);
  EXPECT_EQ(info.dtype_mask, 777u);
  EXPECT_EQ(info.struct_size, LOOM_STRUCT_SIZE(loom_device_info_t, kind));
}

TEST_F(CpuSimdPlugin, MissingDeviceIsNotFound) {
  loom_device_t* d = reinterpret_cast<loom_device_t*>(this);
  std::string s = take(api_, api_->device_get(plugin_, 1, &d));
  EXPECT_EQ(s, code_prefix(LOOM_STATUS_NOT_FOUND) + "device_get: no device 1 (the plugin has 1)");
  EXPECT_EQ(d, nullptr);
}

TEST_F(CpuSimdPlugin, BadThreadsOptionIsRejected) {
  std::string error;
  EXPECT_EQ(create({{LOOM_OPTION_THREADS, "two"}}, &error), nullptr);
  EXPECT_EQ(error, code_prefix(LOOM_STATUS_INVALID_ARGUMENT) +
                       "option loom.threads=\"two\" is not a whole number from 0 to 4096");
  loom_plugin_t* zero = create({{LOOM_OPTION_THREADS, "0"}}, &error);
  EXPECT_NE(zero, nullptr) << error;
  api_->plugin_destroy(zero);
}

TEST_F(CpuSimdPlugin, CreateRejectsAnUndersizedArgsStruct) {
  loom_plugin_create_args_t args{};
  args.struct_size = 4;
  std::string s = take(api_, api_->plugin_create(&args));
  EXPECT_TRUE(starts_with(s, code_prefix(LOOM_STATUS_INVALID_ARGUMENT) +
                                 "plugin_create: loom_plugin_create_args_t.struct_size is 4"))
      << s;
}

// ---------------------------------------------------------------- check

TEST_F(CpuSimdPlugin, CheckAcceptsAGoodBlob) {
  EXPECT_EQ(check(encode(mlp_graph(2, 3, 4, 5))), "ok");
  EXPECT_EQ(check(encode(mlp_graph(2, 3, 4, 5)), "cpu-simd", 0), "ok");
}

TEST_F(CpuSimdPlugin, CheckRejectsGarbage) {
  std::vector<std::byte> junk(100, std::byte{0x42});
  EXPECT_EQ(check(junk), code_prefix(LOOM_STATUS_INCOMPATIBLE) +
                             "cpu-simd blob rejected: byte 0: bad magic, expected \"LCPU\"");
}

TEST_F(CpuSimdPlugin, CheckRejectsATruncatedBlob) {
  std::vector<std::byte> blob = encode(mlp_graph(2, 3, 4, 5));
  blob.resize(blob.size() / 2);
  std::string s = check(blob);
  EXPECT_TRUE(starts_with(s, code_prefix(LOOM_STATUS_INCOMPATIBLE) + "cpu-simd blob rejected: byte "))
      << s;
}

TEST_F(CpuSimdPlugin, CheckRejectsABadIndex) {
  BlobGraph g = mlp_graph(2, 3, 4, 5);
  g.nodes[2].inputs[0] = 40;
  EXPECT_EQ(check(encode(g)),
            code_prefix(LOOM_STATUS_INCOMPATIBLE) +
                "cpu-simd blob rejected: node 2 (Relu): input 0 tensor index 40 out of range (11 tensors)");
}

TEST_F(CpuSimdPlugin, CheckRejectsAForeignKeyOrVersion) {
  std::vector<std::byte> blob = encode(mlp_graph(2, 3, 4, 5));
  EXPECT_EQ(check(blob, "vulkan-compute"),
            code_prefix(LOOM_STATUS_INCOMPATIBLE) +
                "cpu-simd serves loader key \"cpu-simd\", not \"vulkan-compute\"");
  EXPECT_EQ(check(blob, "cpu-simd", 9),
            code_prefix(LOOM_STATUS_INCOMPATIBLE) +
                "cpu-simd reads blob formats 1 to 3, the program records format 9");
}

TEST_F(CpuSimdPlugin, LoadOfABadBlobFailsAndReturnsNoHandle) {
  std::vector<std::byte> junk(10, std::byte{0});
  std::string error;
  EXPECT_EQ(load(junk, &error), nullptr);
  EXPECT_TRUE(starts_with(error, code_prefix(LOOM_STATUS_INCOMPATIBLE))) << error;
}

// ---------------------------------------------------------------- ops vs kernels

TEST_F(CpuSimdPlugin, FrozenFormatOneBlobRunsToHandWorkedValues) {
  // fixtures/format1_blob.hpp: MatMul, Gemm, Add, Relu, Softmax, written by
  // the format-1 encoder; the values are worked out in its comment.
  const auto* p = reinterpret_cast<const std::byte*>(fixtures::kFormat1Blob);
  std::string error;
  loom_executable_t* exe =
      load(std::vector<std::byte>(p, p + sizeof fixtures::kFormat1Blob), &error, 1);
  ASSERT_NE(exe, nullptr) << error;
  Tensor x({2, 2}, {1, 2, 3, -4}), w({2, 2}, {1, 0, 2, -1}), b({2}, {1, -1});
  Tensor y({2, 2}, std::vector<float>(4)), r({2, 2}, std::vector<float>(4));
  EXPECT_EQ(execute(exe, {&x.desc, &w.desc, &b.desc}, {&y.desc, &r.desc}), "ok");
  api_->executable_destroy(exe);
  EXPECT_EQ(r.data, (std::vector<float>{5.5f, 6, 2.5f, 0}));
  const float e05 = std::exp(0.5f), e25 = std::exp(2.5f);
  expect_close(y.data, {1 / (1 + e05), e05 / (1 + e05), e25 / (1 + e25), 1 / (1 + e25)});
}

TEST_F(CpuSimdPlugin, MatMulMatchesKernels) {
  std::mt19937 rng(1);
  // Large enough to be split over the thread pool.
  compare_single_op(Op::kMatMul, {random_tensor({64, 96}, rng), random_tensor({96, 80}, rng)},
                    {64, 80}, "MatMul", {}, {});
  compare_single_op(Op::kMatMul, {random_tensor({2, 1, 5, 7}, rng), random_tensor({3, 7, 4}, rng)},
                    {2, 3, 5, 4}, "MatMul", {}, {});
  compare_single_op(Op::kMatMul, {random_tensor({7}, rng), random_tensor({2, 7, 3}, rng)}, {2, 3},
                    "MatMul", {}, {});
  compare_single_op(Op::kMatMul, {random_tensor({4, 300}, rng), random_tensor({300}, rng)}, {4},
                    "MatMul", {}, {});
}

TEST_F(CpuSimdPlugin, GemmMatchesKernels) {
  std::mt19937 rng(2);
  BlobNode attrs;
  attrs.trans_a = 1;
  attrs.trans_b = 1;
  attrs.alpha = 0.5f;
  attrs.beta = -1.5f;
  compare_single_op(Op::kGemm,
                    {random_tensor({40, 50}, rng), random_tensor({60, 40}, rng), random_tensor({60}, rng)},
                    {50, 60}, "Gemm", attrs,
                    {int_attr("transA", 1), int_attr("transB", 1), float_attr("alpha", 0.5f),
                     float_attr("beta", -1.5f)});
  compare_single_op(Op::kGemm,
                    {random_tensor({5, 3}, rng), random_tensor({3, 4}, rng), random_tensor({5, 1}, rng)},
                    {5, 4}, "Gemm", {}, {});
  compare_single_op(Op::kGemm, {random_tensor({5, 3}, rng), random_tensor({3, 4}, rng)}, {5, 4},
                    "Gemm", {}, {});
}

TEST_F(CpuSimdPlugin, AddMatchesKernels) {
  std::mt19937 rng(3);
  compare_single_op(Op::kAdd, {random_tensor({3, 1, 5}, rng), random_tensor({4, 1}, rng)}, {3, 4, 5},
                    "Add", {}, {});
  compare_single_op(Op::kAdd, {random_tensor({6, 7}, rng), random_tensor({6, 7}, rng)}, {6, 7}, "Add",
                    {}, {});
  compare_single_op(Op::kAdd, {random_tensor({}, rng), random_tensor({3}, rng)}, {3}, "Add", {}, {});
}

TEST_F(CpuSimdPlugin, ReluAndSoftmaxMatchKernels) {
  std::mt19937 rng(4);
  compare_single_op(Op::kRelu, {random_tensor({4, 9}, rng)}, {4, 9}, "Relu", {}, {});
  BlobNode axis1;
  axis1.axis = 1;
  compare_single_op(Op::kSoftmax, {random_tensor({3, 4, 5}, rng)}, {3, 4, 5}, "Softmax", axis1,
                    {int_attr("axis", 1)});
  compare_single_op(Op::kSoftmax, {random_tensor({3, 4, 5}, rng)}, {3, 4, 5}, "Softmax", {}, {});
}

// ---------------------------------------------------------------- graphs

struct MlpData {
  Tensor x, w1, b1, w2, b2;
  explicit MlpData(std::mt19937& rng, int64_t b = 8, int64_t i = 64, int64_t h = 128, int64_t o = 10)
      : x(random_tensor({b, i}, rng)), w1(random_tensor({i, h}, rng)), b1(random_tensor({h}, rng)),
        w2(random_tensor({h, o}, rng)), b2(random_tensor({o}, rng)) {}
  std::vector<const loom_tensor_t*> descs() const {
    return {&x.desc, &w1.desc, &b1.desc, &w2.desc, &b2.desc};
  }
};

std::vector<float> mlp_reference(MlpData& d) {
  const auto reg = kernels::KernelRegistry::reference();
  const int64_t b = d.x.shape[0], h = d.w1.shape[1], o = d.w2.shape[1];
  Tensor h0 = zero_tensor({b, h}), h1 = zero_tensor({b, h}), r = zero_tensor({b, h});
  Tensor z = zero_tensor({b, o}), z1 = zero_tensor({b, o}), y = zero_tensor({b, o});
  auto run = [&](const char* op, std::vector<kernels::TensorRef> in, kernels::TensorRef out) {
    std::vector<kernels::TensorRef> outs = {out};
    Status s = reg.find(op)->run(in, outs, kernels::Attributes());
    EXPECT_TRUE(s.ok()) << s.to_string();
  };
  run("MatMul", {d.x.ref(), d.w1.ref()}, h0.ref());
  run("Add", {h0.ref(), d.b1.ref()}, h1.ref());
  run("Relu", {h1.ref()}, r.ref());
  run("MatMul", {r.ref(), d.w2.ref()}, z.ref());
  run("Add", {z.ref(), d.b2.ref()}, z1.ref());
  run("Softmax", {z1.ref()}, y.ref());
  return y.data;
}

TEST_F(CpuSimdPlugin, MlpGraphMatchesKernels) {
  std::mt19937 rng(5);
  MlpData d(rng);
  std::string error;
  loom_executable_t* exe = load(encode(mlp_graph(8, 64, 128, 10)), &error);
  ASSERT_NE(exe, nullptr) << error;
  Tensor y = zero_tensor({8, 10});
  ASSERT_EQ(execute(exe, d.descs(), {&y.desc}), "ok");
  expect_close(y.data, mlp_reference(d));
  api_->executable_destroy(exe);
}

TEST_F(CpuSimdPlugin, FourThreadsOnOneExecutableGetIdenticalResults) {
  std::mt19937 rng(6);
  MlpData d(rng, 32, 64, 256, 10);
  loom_executable_t* exe = load(encode(mlp_graph(32, 64, 256, 10)));
  ASSERT_NE(exe, nullptr);
  Tensor expected = zero_tensor({32, 10});
  ASSERT_EQ(execute(exe, d.descs(), {&expected.desc}), "ok");
  std::vector<std::vector<float>> results(4);
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int iter = 0; iter < 10; ++iter) {
        Tensor y = zero_tensor({32, 10});
        std::string s = execute(exe, d.descs(), {&y.desc});
        if (s != "ok") errors[t] = s;
        if (iter == 0) {
          results[t] = y.data;
        } else if (y.data != results[t]) {
          errors[t] = "results differ between iterations";
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
    EXPECT_EQ(results[t], expected.data) << "thread " << t;
  }
  api_->executable_destroy(exe);
}

// ---------------------------------------------------------------- bad tensors

TEST_F(CpuSimdPlugin, BadTensorsAreInvalidArguments) {
  std::mt19937 rng(7);
  MlpData d(rng, 2, 3, 4, 5);
  loom_executable_t* exe = load(encode(mlp_graph(2, 3, 4, 5)));
  ASSERT_NE(exe, nullptr);
  Tensor y = zero_tensor({2, 5});
  const std::string bad = code_prefix(LOOM_STATUS_INVALID_ARGUMENT);
  auto descs = d.descs();

  EXPECT_EQ(execute(exe, {descs.begin(), descs.end() - 1}, {&y.desc}),
            bad + "execute: the executable takes 5 inputs and 1 outputs, got 4 and 1");

  Tensor wrong_shape = zero_tensor({3, 2});
  auto v = descs;
  v[0] = &wrong_shape.desc;
  EXPECT_EQ(execute(exe, v, {&y.desc}), bad + "execute: input 0 has shape [3, 2], expected [2, 3]");

  Tensor wrong_dtype = d.x;
  wrong_dtype.desc.dtype = LOOM_DTYPE_I32;
  v = descs;
  v[0] = &wrong_dtype.desc;
  EXPECT_EQ(execute(exe, v, {&y.desc}), bad + "execute: input 0 has dtype 7, expected f32 (1)");

  Tensor wrong_size = y;
  wrong_size.desc.byte_size = 3;
  EXPECT_EQ(execute(exe, descs, {&wrong_size.desc}),
            bad + "execute: output 0 has byte_size 3, expected 40");

  Tensor no_data = y;
  no_data.desc.host_data = nullptr;
  EXPECT_EQ(execute(exe, descs, {&no_data.desc}), bad + "execute: output 0 has neither buffer nor host_data");

  Tensor big_rank = y;
  big_rank.desc.rank = 9;
  EXPECT_EQ(execute(exe, descs, {&big_rank.desc}), bad + "execute: output 0 has rank 9, the ABI allows 8");

  Tensor old = y;
  old.desc.struct_size = 8;
  std::string s = execute(exe, descs, {&old.desc});
  EXPECT_TRUE(starts_with(s, bad + "execute: output 0: loom_tensor_t.struct_size is 8")) << s;

  v = descs;
  v[1] = nullptr;
  EXPECT_EQ(execute(exe, v, {&y.desc}), bad + "execute: input 1 is NULL");

  loom_execute_args_t args{};
  args.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
  EXPECT_EQ(take(api_, api_->execute(&args)), bad + "execute: executable is NULL");
  EXPECT_EQ(take(api_, api_->execute(nullptr)), bad + "execute: args is NULL");
  api_->executable_destroy(exe);
}

// ---------------------------------------------------------------- buffers and fences

// y = Relu(x) on f32[3, 4].
BlobGraph relu_3x4() {
  BlobGraph g;
  g.tensors = {{LOOM_DTYPE_F32, {3, 4}}, {LOOM_DTYPE_F32, {3, 4}}};
  g.inputs = {0};
  g.outputs = {1};
  BlobNode relu;
  relu.op = Op::kRelu;
  relu.inputs = {0};
  relu.outputs = {1};
  g.nodes = {relu};
  return g;
}

TEST_F(CpuSimdPlugin, ExecutesOnBuffersAndSignalsTheFence) {
  std::mt19937 rng(8);
  Tensor x = random_tensor({3, 4}, rng);
  loom_executable_t* exe = load(encode(relu_3x4()));
  ASSERT_NE(exe, nullptr);

  loom_buffer_allocate_args_t alloc{};
  alloc.struct_size = LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE;
  alloc.device = device_;
  alloc.size = 64 + 48;
  alloc.flags = LOOM_BUFFER_HOST_VISIBLE;
  ASSERT_EQ(take(api_, api_->buffer_allocate(&alloc)), "ok");
  loom_buffer_t* buf = alloc.out_buffer;
  loom_buffer_copy_args_t copy{};
  copy.struct_size = LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE;
  copy.buffer = buf;
  copy.buffer_offset = 64;
  copy.host_pointer = x.data.data();
  copy.size = 48;
  ASSERT_EQ(take(api_, api_->buffer_copy_from_host(&copy)), "ok");

  Tensor in = x;
  in.desc.host_data = nullptr;
  in.desc.buffer = buf;
  in.desc.offset = 64;
  Tensor out = zero_tensor({3, 4});
  out.desc.host_data = nullptr;
  out.desc.buffer = buf;  // in place: Relu reads and writes the same slot
  out.desc.offset = 64;

  loom_fence_t* fence = nullptr;
  ASSERT_EQ(take(api_, api_->fence_create(device_, &fence)), "ok");
  bool signaled = true;
  ASSERT_EQ(take(api_, api_->fence_query(fence, &signaled)), "ok");
  EXPECT_FALSE(signaled);
  EXPECT_EQ(take(api_, api_->fence_wait(fence, 1000)),
            code_prefix(LOOM_STATUS_DEADLINE_EXCEEDED) + "fence not signaled within 1000 ns");
  ASSERT_EQ(execute(exe, {&in.desc}, {&out.desc}, fence), "ok");
  ASSERT_EQ(take(api_, api_->fence_query(fence, &signaled)), "ok");
  EXPECT_TRUE(signaled);
  EXPECT_EQ(take(api_, api_->fence_wait(fence, UINT64_MAX)), "ok");

  void* mapped = nullptr;
  ASSERT_EQ(take(api_, api_->buffer_map(buf, &mapped)), "ok");
  const float* y = reinterpret_cast<const float*>(static_cast<const char*>(mapped) + 64);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(y[i], x.data[i] < 0 ? 0.0f : x.data[i]);
  api_->buffer_unmap(buf);

  Tensor past_end = x;
  past_end.desc.host_data = nullptr;
  past_end.desc.buffer = buf;
  past_end.desc.offset = 80;
  EXPECT_EQ(execute(exe, {&past_end.desc}, {&out.desc}),
            code_prefix(LOOM_STATUS_INVALID_ARGUMENT) +
                "execute: input 0 range [80, +48) exceeds its buffer of 112 bytes");

  copy.buffer_offset = 100;
  EXPECT_EQ(take(api_, api_->buffer_copy_to_host(&copy)),
            code_prefix(LOOM_STATUS_OUT_OF_RANGE) +
                "buffer_copy_to_host: range [100, +48) exceeds the buffer's 112 bytes");

  api_->fence_destroy(fence);
  api_->buffer_free(buf);
  api_->executable_destroy(exe);
  api_->fence_destroy(nullptr);
  api_->buffer_free(nullptr);
  api_->executable_destroy(nullptr);
}

TEST_F(CpuSimdPlugin, ImportedHostMemoryIsUsedInPlace) {
  ASSERT_NE(api_->buffer_import_host, nullptr);
  std::mt19937 rng(9);
  Tensor x = random_tensor({3, 4}, rng);
  loom_executable_t* exe = load(encode(relu_3x4()));
  ASSERT_NE(exe, nullptr);

  // The caller's memory: the input at byte 4 (an odd, unaligned place), the
  // output after it.
  std::vector<float> memory(1 + 12 + 12, -1.0f);
  std::memcpy(memory.data() + 1, x.data.data(), 48);
  loom_buffer_import_args_t import{};
  import.struct_size = LOOM_BUFFER_IMPORT_ARGS_STRUCT_SIZE;
  import.device = device_;
  import.host_pointer = memory.data();
  import.size = memory.size() * sizeof(float);
  ASSERT_EQ(take(api_, api_->buffer_import_host(&import)), "ok");
  loom_buffer_t* buf = import.out_buffer;
  ASSERT_NE(buf, nullptr);

  Tensor in = x;
  in.desc.host_data = nullptr;
  in.desc.buffer = buf;
  in.desc.offset = 4;
  Tensor out = zero_tensor({3, 4});
  out.desc.host_data = nullptr;
  out.desc.buffer = buf;
  out.desc.offset = 52;
  ASSERT_EQ(execute(exe, {&in.desc}, {&out.desc}), "ok");
  // The results are in the caller's memory, no copy asked for.
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(memory[13 + i], x.data[i] < 0 ? 0.0f : x.data[i]);
  // Mapping gives the caller's address back; copies read and write it.
  void* mapped = nullptr;
  ASSERT_EQ(take(api_, api_->buffer_map(buf, &mapped)), "ok");
  EXPECT_EQ(mapped, static_cast<void*>(memory.data()));
  api_->buffer_unmap(buf);
  const float seven = 7.0f;
  loom_buffer_copy_args_t copy{};
  copy.struct_size = LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE;
  copy.buffer = buf;
  copy.host_pointer = const_cast<float*>(&seven);
  copy.size = sizeof seven;
  ASSERT_EQ(take(api_, api_->buffer_copy_from_host(&copy)), "ok");
  EXPECT_EQ(memory[0], 7.0f);
  copy.buffer_offset = 100;
  EXPECT_EQ(take(api_, api_->buffer_copy_from_host(&copy)),
            code_prefix(LOOM_STATUS_OUT_OF_RANGE) +
                "buffer_copy_from_host: range [100, +4) exceeds the buffer's 100 bytes");
  // Freeing the buffer leaves the caller's memory alone (ASan would see a
  // free of memory the plugin does not own).
  api_->buffer_free(buf);
  EXPECT_EQ(memory[0], 7.0f);

  import.host_pointer = nullptr;
  EXPECT_EQ(take(api_, api_->buffer_import_host(&import)),
            code_prefix(LOOM_STATUS_INVALID_ARGUMENT) + "buffer_import_host: host_pointer is NULL");
  EXPECT_EQ(import.out_buffer, nullptr);
  import.struct_size = 8;
  EXPECT_TRUE(starts_with(take(api_, api_->buffer_import_host(&import)),
                          code_prefix(LOOM_STATUS_INVALID_ARGUMENT)));
  api_->executable_destroy(exe);
}

TEST_F(CpuSimdPlugin, HostSignaledFenceWakesAWaiter) {
  loom_fence_t* fence = nullptr;
  ASSERT_EQ(take(api_, api_->fence_create(device_, &fence)), "ok");
  std::thread waiter([&] { EXPECT_EQ(take(api_, api_->fence_wait(fence, UINT64_MAX)), "ok"); });
  EXPECT_EQ(take(api_, api_->fence_signal(fence)), "ok");
  waiter.join();
  api_->fence_destroy(fence);
}

TEST_F(CpuSimdPlugin, BadBufferRequestsAreRejected) {
  loom_buffer_allocate_args_t alloc{};
  alloc.struct_size = LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE;
  alloc.device = device_;
  alloc.size = 16;
  alloc.alignment = 48;
  EXPECT_EQ(take(api_, api_->buffer_allocate(&alloc)),
            code_prefix(LOOM_STATUS_INVALID_ARGUMENT) +
                "buffer_allocate: alignment 48 is not a power of two");
  alloc.alignment = 0;
  alloc.flags = 8;
  EXPECT_EQ(take(api_, api_->buffer_allocate(&alloc)),
            code_prefix(LOOM_STATUS_INVALID_ARGUMENT) + "buffer_allocate: unknown flags 8");
  alloc.flags = 0;
  alloc.size = UINT64_MAX;
  std::string s = take(api_, api_->buffer_allocate(&alloc));
  EXPECT_TRUE(starts_with(s, code_prefix(LOOM_STATUS_RESOURCE_EXHAUSTED))) << s;
  EXPECT_EQ(alloc.out_buffer, nullptr);
}

}  // namespace
}  // namespace loom::cpu_simd
