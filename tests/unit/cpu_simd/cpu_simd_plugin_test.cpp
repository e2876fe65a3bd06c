// The cpu-simd plugin through its C ABI only, checked against loom_kernels.
#include "cpu_simd_plugin_fixture.hpp"

namespace loom::cpu_simd {
namespace {

// ---------------------------------------------------------------- query

TEST(CpuSimdQuery, NegotiatesTheNewestCommonVersion) {
  ::loom::testing::PluginHarness lib(LOOM_CPU_SIMD_PLUGIN_PATH);
  ASSERT_NE(lib.query(), nullptr) << lib.error();
  char reason[128] = {};
  loom_plugin_query_t q = make_query(LOOM_ABI_VERSION(1, 0), LOOM_ABI_VERSION(1, 7), reason, sizeof reason);
  ASSERT_EQ(lib.query()(&q), LOOM_STATUS_OK) << reason;
  EXPECT_EQ(q.out_abi_version, LOOM_ABI_VERSION(1, 2));
  ASSERT_NE(q.out_api, nullptr);
  EXPECT_EQ(q.out_api->abi_version, LOOM_ABI_VERSION(1, 2));
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
  ::loom::testing::PluginHarness lib(LOOM_CPU_SIMD_PLUGIN_PATH);
  ASSERT_NE(lib.query(), nullptr) << lib.error();
  char reason[128] = {};
  loom_plugin_query_t q = make_query(LOOM_ABI_VERSION(2, 0), LOOM_ABI_VERSION(2, 3), reason, sizeof reason);
  EXPECT_EQ(lib.query()(&q), LOOM_STATUS_INCOMPATIBLE);
  EXPECT_STREQ(reason, "the host speaks ABI 2.0-2.3, the plugin speaks 1.0-1.2");
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
  EXPECT_EQ(info.dtype_mask, LOOM_DTYPE_BIT(LOOM_DTYPE_F32) | LOOM_DTYPE_BIT(LOOM_DTYPE_BOOL) |
                                 LOOM_DTYPE_BIT(LOOM_DTYPE_I32) | LOOM_DTYPE_BIT(LOOM_DTYPE_I64) |
                                 LOOM_DTYPE_BIT(LOOM_DTYPE_U8) | LOOM_DTYPE_BIT(LOOM_DTYPE_I8));
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
  destroy(zero);
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
  EXPECT_EQ(check(blob, "cpu-simd", 13),
            code_prefix(LOOM_STATUS_INCOMPATIBLE) +
                "cpu-simd reads blob formats 1 to 12, the program records format 13");
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

}  // namespace
}  // namespace loom::cpu_simd
