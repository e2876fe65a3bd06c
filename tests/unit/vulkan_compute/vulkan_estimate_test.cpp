// ABI 1.1 executable_estimate on vulkan-compute: argument checks (NULL
// args, a struct from before 1.1, no device, a foreign or damaged blob: a
// clear status each), estimates that include the submit round trip and grow
// with the work, and the per-device model cache (written on first use with
// the device's identity, read back by the next plugin instance, measured
// again when the identity differs or the file is damaged). The calibration
// runs with the validation layer on, which must report nothing. The cache
// lives in a scratch folder.
#include <fstream>
#include <sstream>

#include "loom/vulkan_compute/kernels.hpp"
#include "vk_harness.hpp"

namespace loom::vulkan::test {
namespace {

using ::loom::testing::ScratchModelCache;

// x [n] -> Relu -> y [n]
std::vector<uint8_t> relu_blob(int64_t n) {
  BlobProgram p;
  BlobTensor x, y;
  x.kind = TensorKind::kInput;
  x.shape = {n};
  y.kind = TensorKind::kOutput;
  y.shape = {n};
  p.tensors = {x, y};
  p.inputs = {0};
  p.outputs = {1};
  p.dispatches.push_back(make_unary(UnaryOp::kRelu, 0, 1, static_cast<uint64_t>(n)));
  return encode(p);
}

// a [m, k] x b [k, n] -> y [m, n]
std::vector<uint8_t> matmul_blob(uint32_t m, uint32_t k, uint32_t n) {
  BlobProgram p;
  BlobTensor a, b, y;
  a.kind = b.kind = TensorKind::kInput;
  a.shape = {m, k};
  b.shape = {k, n};
  y.kind = TensorKind::kOutput;
  y.shape = {m, n};
  p.tensors = {a, b, y};
  p.inputs = {0, 1};
  p.outputs = {2};
  MatMulParams mp;
  mp.m = m;
  mp.n = n;
  mp.k = k;
  mp.a_stride = m * k;
  mp.b_stride = k * n;
  p.dispatches.push_back(make_matmul(mp, 0, 1, 0, 2));
  return encode(p);
}

class VulkanEstimate : public VulkanTest {
 protected:
  std::string estimate(loom_device_t* d, const std::vector<uint8_t>& blob, uint64_t* out,
                       const char* key = "vulkan-compute") {
    return ::loom::testing::estimate(api_, d, key, kFormatVersion, blob.data(), blob.size(), out);
  }
  uint64_t estimate_ok(loom_device_t* d, const std::vector<uint8_t>& blob) {
    uint64_t ns = 0;
    EXPECT_EQ(estimate(d, blob, &ns), "ok");
    return ns;
  }
  loom_device_t* fresh_device() {
    std::string error;
    loom_plugin_t* p = create({{"vulkan.validation", "1"}}, &error);
    EXPECT_NE(p, nullptr) << error;
    loom_device_t* d = nullptr;
    EXPECT_EQ(harness_.device(p, 0, &d), "ok");
    return d;
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static double value(const std::string& text, const std::string& name) {
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
  }
  ScratchModelCache cache_;
};

TEST_F(VulkanEstimate, BadArgumentsAndBlobsAreClearErrors) {
  LOOM_VK_REQUIRE_DEVICE();
  EXPECT_TRUE(starts_with(take(api_, api_->executable_estimate(nullptr)), LOOM_STATUS_INVALID_ARGUMENT));
  const std::vector<uint8_t> blob = relu_blob(4);
  loom_executable_estimate_args_t args{};
  args.struct_size = sizeof(size_t);
  args.device = device_;
  args.loader_key = "vulkan-compute";
  args.blob = blob.data();
  args.blob_size = blob.size();
  std::string s = take(api_, api_->executable_estimate(&args));
  EXPECT_TRUE(starts_with(s, LOOM_STATUS_INVALID_ARGUMENT)) << s;
  uint64_t ns = 5;
  EXPECT_TRUE(starts_with(estimate(nullptr, blob, &ns), LOOM_STATUS_INVALID_ARGUMENT));
  s = estimate(device_, blob, &ns, "cpu-simd");
  EXPECT_TRUE(starts_with(s, LOOM_STATUS_INCOMPATIBLE)) << s;
  EXPECT_EQ(ns, 0u);
  std::vector<uint8_t> damaged(blob.begin(), blob.begin() + blob.size() / 2);
  s = estimate(device_, damaged, &ns);
  EXPECT_TRUE(starts_with(s, LOOM_STATUS_INCOMPATIBLE)) << s;
  damaged = blob;
  damaged[0] ^= 0xff;  // the magic
  s = estimate(device_, damaged, &ns);
  EXPECT_TRUE(starts_with(s, LOOM_STATUS_INCOMPATIBLE)) << s;
  EXPECT_TRUE(cache_.files().empty()) << "no measurement for a refused call";
}

TEST_F(VulkanEstimate, RoundTripIsInEveryEstimateAndWorkAddsToIt) {
  LOOM_VK_REQUIRE_DEVICE();
  const uint64_t tiny = estimate_ok(device_, relu_blob(4));
  const uint64_t big = estimate_ok(device_, matmul_blob(512, 512, 512));
  ASSERT_EQ(cache_.files().size(), 1u);
  const std::string text = read(cache_.files()[0]);
  const double round_trip = value(text, "round_trip_ns");
  ASSERT_GT(round_trip, 0) << text;
  EXPECT_GE(static_cast<double>(tiny), round_trip);
  EXPECT_GT(big, tiny * 4) << "tiny " << tiny << " ns, 512^3 matmul " << big << " ns";
}

TEST_F(VulkanEstimate, ModelIsCachedPerDeviceAndReusedByTheNextInstance) {
  LOOM_VK_REQUIRE_DEVICE();
  const std::vector<uint8_t> blob = relu_blob(4);
  const uint64_t first = estimate_ok(device_, blob);
  ASSERT_EQ(cache_.files().size(), 1u);
  const std::string path = cache_.files()[0];
  const std::string text = read(path);
  EXPECT_NE(text.find(" vendor "), std::string::npos) << text;
  EXPECT_NE(text.find(" driver "), std::string::npos) << text;
  EXPECT_NE(text.find(" plugin vulkan-compute "), std::string::npos) << text;
  // A round trip of one second in the file: the next instance reads it.
  const size_t at = text.find("\nround_trip_ns ");
  const size_t end = text.find('\n', at + 1);
  const std::string slow = text.substr(0, at) + "\nround_trip_ns 1000000000" + text.substr(end);
  std::ofstream(path, std::ios::trunc) << slow;
  EXPECT_GE(estimate_ok(fresh_device(), blob), uint64_t{1'000'000'000}) << "first " << first;
  // The same file under another driver version: measured again, rewritten.
  std::string other = slow;
  other.replace(other.find(" driver ") + 8, 0, "9");
  std::ofstream(path, std::ios::trunc) << other;
  EXPECT_LT(estimate_ok(fresh_device(), blob), uint64_t{1'000'000'000});
  EXPECT_EQ(read(path).substr(0, text.find("\n", text.find("identity"))),
            text.substr(0, text.find("\n", text.find("identity"))));
  // A damaged file: ignored, measured again, replaced.
  std::ofstream(path, std::ios::trunc) << "loom-device-model 1\nidentity";
  EXPECT_GT(estimate_ok(fresh_device(), blob), 0u);
  EXPECT_GT(value(read(path), "round_trip_ns"), 0);
}

}  // namespace
}  // namespace loom::vulkan::test
