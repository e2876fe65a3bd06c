// ABI 1.1 executable_estimate on cpu-simd: argument checks (NULL args, a
// struct from before 1.1, no device, a foreign or damaged blob: each a clear
// status, never a crash), estimates that follow the work, no estimate for an
// open-shape blob, and the device-model cache (written on first use, read
// back by the next plugin instance, measured again when the identity or
// version differs or the file is damaged; concurrent first calls measure
// once). Every test points the cache at a scratch folder.
#include <fstream>
#include <sstream>
#include <thread>

#include "cpu_simd_plugin_fixture.hpp"

namespace loom::cpu_simd {
namespace {

using ::loom::testing::ScratchModelCache;

class CpuSimdEstimate : public CpuSimdPlugin {
 protected:
  std::string estimate(loom_device_t* device, const std::vector<std::byte>& blob, uint64_t* out,
                       const char* key = "cpu-simd", uint32_t version = kFormatVersion) {
    return ::loom::testing::estimate(api_, device, key, version, blob.data(), blob.size(), out);
  }
  uint64_t estimate_ok(loom_device_t* device, const std::vector<std::byte>& blob) {
    uint64_t ns = 0;
    EXPECT_EQ(estimate(device, blob, &ns), "ok");
    return ns;
  }
  // A fresh plugin instance (its own, not yet measured, model) and its device.
  loom_device_t* fresh_device() {
    std::string error;
    loom_plugin_t* p = create({{LOOM_OPTION_THREADS, "2"}}, &error);
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
  static void write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::trunc) << text;
  }

  ScratchModelCache cache_;
};

TEST_F(CpuSimdEstimate, NullArgsAndOldStructAreInvalidArgument) {
  EXPECT_TRUE(starts_with(take(api_, api_->executable_estimate(nullptr)), LOOM_STATUS_INVALID_ARGUMENT));
  const std::vector<std::byte> blob = encode(mlp_graph(1, 4, 8, 3));
  loom_executable_estimate_args_t args{};
  args.struct_size = sizeof(size_t);  // older than 1.1
  args.device = device_;
  args.loader_key = "cpu-simd";
  args.blob = blob.data();
  args.blob_size = blob.size();
  const std::string s = take(api_, api_->executable_estimate(&args));
  EXPECT_TRUE(starts_with(s, LOOM_STATUS_INVALID_ARGUMENT)) << s;
  EXPECT_NE(s.find("loom_executable_estimate_args_t"), std::string::npos) << s;
  uint64_t ns = 0;
  EXPECT_TRUE(starts_with(estimate(nullptr, blob, &ns), LOOM_STATUS_INVALID_ARGUMENT));
  EXPECT_TRUE(starts_with(::loom::testing::estimate(api_, device_, nullptr, kFormatVersion,
                                                     blob.data(), blob.size(), &ns),
                          LOOM_STATUS_INVALID_ARGUMENT));
  EXPECT_TRUE(starts_with(::loom::testing::estimate(api_, device_, "cpu-simd", kFormatVersion,
                                                     nullptr, 16, &ns),
                          LOOM_STATUS_INVALID_ARGUMENT));
  EXPECT_TRUE(cache_.files().empty()) << "no measurement for a refused call";
}

TEST_F(CpuSimdEstimate, ForeignOrDamagedBlobIsIncompatibleWithTheReason) {
  const std::vector<std::byte> blob = encode(mlp_graph(1, 4, 8, 3));
  uint64_t ns = 7;
  std::string s = estimate(device_, blob, &ns, "vulkan-compute");
  EXPECT_TRUE(starts_with(s, LOOM_STATUS_INCOMPATIBLE)) << s;
  EXPECT_NE(s.find("loader key"), std::string::npos) << s;
  EXPECT_EQ(ns, 0u);
  std::vector<std::byte> truncated(blob.begin(), blob.begin() + blob.size() / 2);
  s = estimate(device_, truncated, &ns);
  EXPECT_TRUE(starts_with(s, LOOM_STATUS_INCOMPATIBLE)) << s;
  EXPECT_NE(s.find("blob rejected"), std::string::npos) << s;
  std::vector<std::byte> garbage(64, std::byte{0x5a});
  s = estimate(device_, garbage, &ns);
  EXPECT_TRUE(starts_with(s, LOOM_STATUS_INCOMPATIBLE)) << s;
  s = estimate(device_, {}, &ns);
  EXPECT_TRUE(starts_with(s, LOOM_STATUS_INCOMPATIBLE)) << s;
  s = estimate(device_, blob, &ns, "cpu-simd", kFormatVersion + 1);
  EXPECT_TRUE(starts_with(s, LOOM_STATUS_INCOMPATIBLE)) << s;
}

TEST_F(CpuSimdEstimate, EstimateGrowsWithTheWork) {
  const uint64_t small = estimate_ok(device_, encode(mlp_graph(1, 16, 16, 4)));
  const uint64_t large = estimate_ok(device_, encode(mlp_graph(64, 1024, 1024, 256)));
  EXPECT_GT(small, 0u);
  EXPECT_GT(large, small * 4) << "small " << small << " ns, large " << large << " ns";
}

TEST_F(CpuSimdEstimate, OpenShapeBlobHasNoEstimate) {
  BlobGraph g;
  g.tensors = {{LOOM_DTYPE_F32, {-1, 4}}, {LOOM_DTYPE_F32, {-1, 4}}};
  g.inputs = {0};
  g.outputs = {1};
  BlobNode n;
  n.op = Op::kRelu;
  n.inputs = {0};
  n.outputs = {1};
  g.nodes = {n};
  uint64_t ns = 1;
  EXPECT_EQ(estimate(device_, encode(g), &ns, "cpu-simd", format_version_for(g)), "ok");
  EXPECT_EQ(ns, 0u);
}

// The thread count a model file records (its `threads N` line), "" if none.
std::string model_threads(const std::string& text) {
  const size_t at = text.find("\nthreads ");
  if (at == std::string::npos) return "";
  const size_t begin = at + 9, end = text.find('\n', begin);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

TEST_F(CpuSimdEstimate, FirstEstimateWritesTheModelAndTheNextInstanceReusesIt) {
  const std::vector<std::byte> blob = encode(mlp_graph(8, 256, 256, 10));
  const uint64_t measured = estimate_ok(device_, blob);
  const std::vector<std::string> files = cache_.files();
  ASSERT_EQ(files.size(), 1u);
  const std::string text = read(files[0]);
  EXPECT_EQ(text.rfind("loom-device-model 1\nidentity ", 0), 0u) << text;
  EXPECT_NE(text.find("plugin cpu-simd "), std::string::npos) << text;
  // Rates at the thread count the device runs (2 here, 1 under ThreadSanitizer).
  EXPECT_NE(text.find("\nmatmul_flops_t" + model_threads(text) + " "), std::string::npos) << text;
  // Make the device 1000 times slower in the file (rates down, overheads
  // up): a new instance that reads it, instead of measuring, estimates far
  // more.
  std::istringstream lines(text);
  std::string line, slowed;
  while (std::getline(lines, line)) {
    const size_t space = line.find(' ');
    const std::string name = line.substr(0, space);
    const bool overhead = name.find("_ns") != std::string::npos;
    const bool rate = name.find("flops") != std::string::npos || name.find("bandwidth") == 0;
    if (name != "identity" && (overhead || rate)) {
      const double v = std::stod(line.substr(space + 1));
      slowed += name + " " + std::to_string(overhead ? v * 1000 : v / 1000) + "\n";
    } else {
      slowed += line + "\n";
    }
  }
  write(files[0], slowed);
  const uint64_t reused = estimate_ok(fresh_device(), blob);
  EXPECT_GT(reused, measured * 100) << "measured " << measured << " ns, from the file " << reused;
  EXPECT_EQ(read(files[0]), slowed) << "a model read back is not rewritten";
}

TEST_F(CpuSimdEstimate, OtherIdentityOrVersionIsMeasuredAgain) {
  const std::vector<std::byte> blob = encode(mlp_graph(8, 256, 256, 10));
  estimate_ok(device_, blob);
  ASSERT_EQ(cache_.files().size(), 1u);
  const std::string path = cache_.files()[0];
  const std::string good = read(path);
  const std::string threads = model_threads(good);
  ASSERT_FALSE(threads.empty()) << good;
  for (const std::string& from : {std::string("plugin cpu-simd "), "threads " + threads}) {
    std::string other = good;
    const size_t at = other.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    // Another plugin version, another thread count: same file, other identity.
    other.insert(at + from.size(), "9");
    // A complete model, but with rates that, were they used, would make the
    // estimate absurd.
    for (const std::string& rate : {std::string("\nmatmul_flops_t1 "), "\nmatmul_flops_t" + threads + " "}) {
      const size_t start = other.find(rate);
      ASSERT_NE(start, std::string::npos) << rate;
      const size_t end = other.find('\n', start + 1);
      other.replace(start, end - start, rate + "1");
    }
    write(path, other);
    const uint64_t ns = estimate_ok(fresh_device(), blob);
    EXPECT_LT(ns, uint64_t{1'000'000'000}) << from;
    EXPECT_EQ(read(path).find("identity"), good.find("identity"));
    EXPECT_EQ(read(path).substr(0, good.find('\n', good.find("identity"))),
              good.substr(0, good.find('\n', good.find("identity"))))
        << "measured again and rewritten under this plugin's identity";
  }
}

TEST_F(CpuSimdEstimate, DamagedModelFileIsIgnoredAndReplaced) {
  const std::vector<std::byte> blob = encode(mlp_graph(8, 256, 256, 10));
  estimate_ok(device_, blob);
  ASSERT_EQ(cache_.files().size(), 1u);
  const std::string path = cache_.files()[0];
  for (const std::string& damaged :
       {std::string("\x01\x02garbage"), std::string("loom-device-model 1\n"),
        read(path).substr(0, read(path).size() / 2) + "nan\n"}) {
    write(path, damaged);
    EXPECT_GT(estimate_ok(fresh_device(), blob), 0u);
    EXPECT_EQ(read(path).rfind("loom-device-model 1\nidentity ", 0), 0u);
  }
}

TEST_F(CpuSimdEstimate, ConcurrentFirstEstimatesMeasureOnceAndAgree) {
  const std::vector<std::byte> blob = encode(mlp_graph(8, 256, 256, 10));
  std::vector<uint64_t> got(4, 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      uint64_t ns = 0;
      if (estimate(device_, blob, &ns) == "ok") got[i] = ns;
    });
  }
  for (std::thread& t : threads) t.join();
  for (uint64_t ns : got) EXPECT_EQ(ns, got[0]);
  EXPECT_GT(got[0], 0u);
  EXPECT_EQ(cache_.files().size(), 1u);
}

}  // namespace
}  // namespace loom::cpu_simd
