// Open-shape bitstreams (format 2, ABI 1.2): one executable loaded once runs
// at several bindings with the results of a static bitstream per binding,
// its simulated kernel time follows the bound shapes, bindings that do not
// fit fail with one line naming the input, dimension and values, and the
// decoder refuses malformed open bitstreams.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>

#include "harness.hpp"

namespace loom::fpga_stub::testing {
namespace {

using Shape = std::vector<int64_t>;

// x[N,3,H,W] -> Conv(3x3, pad 1, 4 filters, bias) -> Relu -> MaxPool(2x2,
// stride 2) -> y. Open: N, H and W are -1; static: `x` as given.
Bitstream conv_relu_pool(const Shape& x) {
  const bool open = x[0] == -1;
  auto at = [&](int64_t c, int64_t h, int64_t w, bool pooled) {
    if (open) return Shape{-1, c, -1, -1};
    return Shape{x[0], c, pooled ? h / 2 : h, pooled ? w / 2 : w};
  };
  ProgramBuilder b;
  const uint32_t in = b.input(LOOM_DTYPE_F32, x);
  std::vector<float> w(4 * 3 * 3 * 3), bias{0.5f, -0.25f, 0.0f, 1.0f};
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.125f;
  const uint32_t wt = b.constant(LOOM_DTYPE_F32, {4, 3, 3, 3}, w);
  const uint32_t bt = b.constant(LOOM_DTYPE_F32, {4}, bias);
  auto scratch = [&](const Shape& s) {
    return open ? b.add(LOOM_DTYPE_F32, s, Storage::kScratch) : b.scratch(LOOM_DTYPE_F32, s);
  };
  const uint32_t conv = scratch(at(4, x[2], x[3], false));
  const uint32_t relu = scratch(at(4, x[2], x[3], false));
  const uint32_t out = b.output(LOOM_DTYPE_F32, at(4, x[2], x[3], true));
  if (open) {
    for (uint32_t t : {conv, relu, out}) b.bs.tensors[t].bytes = 0;
  }
  b.node(Op::kConv, {static_cast<int32_t>(in), static_cast<int32_t>(wt), static_cast<int32_t>(bt)}, conv,
         window(1, 3, 1, 1));
  b.node(Op::kRelu, {static_cast<int32_t>(conv)}, relu);
  b.node(Op::kMaxPool, {static_cast<int32_t>(relu)}, out, window(1, 2, 2, 0));
  return b.bs;
}

Bitstream open_program() {
  Bitstream bs = conv_relu_pool({-1, 3, -1, -1});
  bs.tensors[bs.inputs[0]].bytes = 0;
  return bs;
}

std::vector<float> input_values(const Shape& s) {
  std::vector<float> v(element_count(s));
  std::mt19937 gen(static_cast<uint32_t>(v.size()));
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  for (float& f : v) f = d(gen);
  return v;
}

class FpgaStubOpen : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(h_.api(), nullptr);
    // No fixed launch latency: the kernel spans are the timing model's work.
    ASSERT_EQ(h_.create({{"fpga.launch_ns", "0"}}), "ok");
    device_ = h_.device(0);
  }
  // Runs `exe` on x (values from input_values) with an output of `y`
  // shape; "ok" and the output, or the error.
  std::string run(loom_executable_t* exe, const Shape& x, const Shape& y, std::vector<float>* out) {
    DeviceTensor in = make_tensor(h_, device_, LOOM_DTYPE_F32, x);
    DeviceTensor res = make_tensor(h_, device_, LOOM_DTYPE_F32, y);
    const std::vector<float> v = input_values(x);
    EXPECT_EQ(h_.upload(in.buffer, v.data(), in.bytes()), "ok");
    std::string s = h_.execute(exe, {in.d()}, {res.d()});
    if (s == "ok" && out != nullptr) {
      out->assign(element_count(y), 0.0f);
      EXPECT_EQ(h_.download(res.buffer, out->data(), res.bytes()), "ok");
    }
    h_.api()->buffer_free(in.buffer);
    h_.api()->buffer_free(res.buffer);
    return s;
  }
  Harness h_;
  loom_device_t* device_ = nullptr;
};

TEST_F(FpgaStubOpen, OpenBitstreamIsFormat2AndStaticStaysFormat1) {
  const std::vector<std::byte> open = encode(open_program());
  const std::vector<std::byte> fixed = encode(conv_relu_pool({1, 3, 8, 8}));
  uint32_t v = 0;
  std::memcpy(&v, open.data() + 8, 4);
  EXPECT_EQ(v, kOpenFormatVersion);
  std::memcpy(&v, fixed.data() + 8, 4);
  EXPECT_EQ(v, kStaticFormatVersion);
  Bitstream back;
  ASSERT_TRUE(decode(open.data(), open.size(), &back).ok());
  EXPECT_TRUE(back.has_open_dims());
  ASSERT_TRUE(decode(fixed.data(), fixed.size(), &back).ok());
  EXPECT_FALSE(back.has_open_dims());
}

TEST_F(FpgaStubOpen, LoadedOnceRunsEveryBindingLikeAStaticBitstream) {
  loom_executable_t* open = nullptr;
  ASSERT_EQ(h_.load(device_, encode(open_program()), &open), "ok");
  for (const Shape& x : {Shape{1, 3, 8, 8}, Shape{2, 3, 6, 10}, Shape{3, 3, 4, 4}, Shape{1, 3, 8, 8}}) {
    SCOPED_TRACE(shape_label(x));
    const Shape y{x[0], 4, x[2] / 2, x[3] / 2};
    std::vector<float> got, want;
    ASSERT_EQ(run(open, x, y, &got), "ok");
    loom_executable_t* fixed = nullptr;
    ASSERT_EQ(h_.load(device_, encode(conv_relu_pool(x)), &fixed), "ok");
    ASSERT_EQ(run(fixed, x, y, &want), "ok");
    h_.api()->executable_destroy(fixed);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  }
  h_.api()->executable_destroy(open);
}

// Durations of the kernel spans traced on fpga-stub://0.
std::vector<uint64_t> kernel_spans(Harness& h) {
  std::vector<uint64_t> out;
  uint64_t begin = 0;
  for (const TraceEvent& e : h.recorder().events()) {
    if (e.category != "fpga-stub://0" || e.name.rfind("kernel #", 0) != 0) continue;
    if (e.phase == LOOM_TRACE_BEGIN) begin = e.ns;
    if (e.phase == LOOM_TRACE_END) out.push_back(e.ns - begin);
  }
  return out;
}

TEST_F(FpgaStubOpen, KernelTimeFollowsTheBinding) {
  loom_executable_t* open = nullptr;
  ASSERT_EQ(h_.load(device_, encode(open_program()), &open), "ok");
  ASSERT_EQ(run(open, {1, 3, 8, 8}, {1, 4, 4, 4}, nullptr), "ok");
  ASSERT_EQ(run(open, {4, 3, 16, 16}, {4, 4, 8, 8}, nullptr), "ok");
  ASSERT_EQ(run(open, {1, 3, 8, 8}, {1, 4, 4, 4}, nullptr), "ok");
  h_.api()->executable_destroy(open);
  const std::vector<uint64_t> ns = kernel_spans(h_);
  ASSERT_EQ(ns.size(), 3u);
  EXPECT_GT(ns[1], ns[0] * 12);  // 16x the work at the second binding
  EXPECT_EQ(ns[2], ns[0]);
}

TEST_F(FpgaStubOpen, BadBindingsFailWithOneLineNamingInputDimensionAndValues) {
  loom_executable_t* open = nullptr;
  ASSERT_EQ(h_.load(device_, encode(open_program()), &open), "ok");
  struct Case {
    Shape x, y;
    const char* says;
  };
  for (const Case& c : {Case{{1, 4, 8, 8}, {1, 4, 4, 4}, "input 0 dimension 1 is 4, the bitstream fixes it at 3"},
                        Case{{1, 3, 8}, {1, 4, 4}, "input 0 has rank 3 [1,3,8], the bitstream takes rank 4"},
                        Case{{1, 3, 1, 1}, {1, 4, 0, 0}, "does not fit input [1,4,1,1] at binding [1,3,1,1]"},
                        Case{{1, 3, 8, 8}, {1, 4, 8, 8}, "output 0 is f32 [1,4,8,8]"}}) {
    SCOPED_TRACE(shape_label(c.x));
    const std::string s = run(open, c.x, c.y, nullptr);
    EXPECT_NE(s.find(c.says), std::string::npos) << s;
    EXPECT_EQ(s.find('\n'), std::string::npos) << s;
  }
  // The executable still runs a good binding afterwards.
  EXPECT_EQ(run(open, {1, 3, 8, 8}, {1, 4, 4, 4}, nullptr), "ok");
  h_.api()->executable_destroy(open);
}

TEST_F(FpgaStubOpen, EstimateOfAnOpenBitstreamIsLeftToTheBinding) {
  const std::vector<std::byte> blob = encode(open_program());
  loom_executable_estimate_args_t a{};
  a.struct_size = LOOM_EXECUTABLE_ESTIMATE_ARGS_STRUCT_SIZE;
  a.device = device_;
  a.loader_key = kLoaderKey;
  a.format_version = kOpenFormatVersion;
  a.blob = blob.data();
  a.blob_size = blob.size();
  a.out_time_ns = 7;
  ASSERT_EQ(take(h_.api(), h_.api()->executable_estimate(&a)), "ok");
  EXPECT_EQ(a.out_time_ns, 0u);
}

// executable_estimate of a static bitstream under `options` ("ok" or the
// error in *error).
uint64_t estimate_with(const std::map<std::string, std::string>& options, const Bitstream& bs,
                       std::string* error) {
  Harness h;
  *error = h.create(options);
  if (*error != "ok") return 0;
  const std::vector<std::byte> blob = encode(bs);
  loom_executable_estimate_args_t a{};
  a.struct_size = LOOM_EXECUTABLE_ESTIMATE_ARGS_STRUCT_SIZE;
  a.device = h.device(0);
  a.loader_key = kLoaderKey;
  a.format_version = kStaticFormatVersion;
  a.blob = blob.data();
  a.blob_size = blob.size();
  *error = take(h.api(), h.api()->executable_estimate(&a));
  return a.out_time_ns;
}

// fpga.estimate=host (the default) answers what an execute costs on this
// host, the simulator's kernels measured once and cached; device answers
// the timing model; realtime spends both, so it estimates their sum.
TEST(FpgaStubEstimate, HostEstimateIsTheSimulatorsCostAndDeviceTheModel) {
  const std::string dir = ::testing::TempDir() + "fpga_stub_estimate_models";
  std::filesystem::remove_all(dir);
  ASSERT_EQ(setenv("LOOM_DEVICE_MODEL_DIR", dir.c_str(), 1), 0);
  const Bitstream small = conv_relu_pool({1, 3, 16, 16}), large = conv_relu_pool({1, 3, 64, 64});
  std::string error;
  const uint64_t host_small = estimate_with({}, small, &error);
  ASSERT_EQ(error, "ok");
  // Measured once, then kept under the host's CPU and the plugin version.
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].find("/fpga-stub-"), std::string::npos) << files[0];
  std::ifstream in(files[0]);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("plugin fpga-stub"), std::string::npos) << text;
  EXPECT_NE(text.find("conv_f32_ops_per_s "), std::string::npos) << text;

  const uint64_t host_large = estimate_with({{"fpga.estimate", "host"}}, large, &error);
  ASSERT_EQ(error, "ok");
  const uint64_t device_large = estimate_with({{"fpga.estimate", "device"}}, large, &error);
  ASSERT_EQ(error, "ok");
  const uint64_t realtime_large = estimate_with({{"fpga.realtime", "1"}}, large, &error);
  ASSERT_EQ(error, "ok");
  // 16 times the pixels: the host estimate follows the work.
  EXPECT_GT(host_large, 4 * host_small);
  // The simulator computes on the host, far slower than the 4096-MAC device
  // it models; the device estimate is the model alone.
  EXPECT_GT(host_large, device_large);
  EXPECT_EQ(device_large, estimate_with({{"fpga.estimate", "device"}, {"fpga.clock_mhz", "250"}}, large, &error));
  EXPECT_GT(estimate_with({{"fpga.estimate", "device"}, {"fpga.clock_mhz", "10"}}, large, &error), device_large);
  // From the cached model now: realtime adds the device's time exactly.
  const uint64_t host_again = estimate_with({}, large, &error);
  EXPECT_EQ(realtime_large, host_again + device_large);
  // The host estimate does not follow the simulated clock.
  EXPECT_EQ(estimate_with({{"fpga.clock_mhz", "10"}}, large, &error), host_again);

  estimate_with({{"fpga.estimate", "fast"}}, large, &error);
  EXPECT_NE(error.find("fpga.estimate=\"fast\" is not host or device"), std::string::npos) << error;
  unsetenv("LOOM_DEVICE_MODEL_DIR");
  std::filesystem::remove_all(dir);
}

// A blob re-encoded after `edit`; decode's verdict.
std::string decode_after(const std::function<void(Bitstream&)>& edit) {
  Bitstream bs = open_program();
  edit(bs);
  const std::vector<std::byte> blob = encode(bs);
  Bitstream out;
  Status s = decode(blob.data(), blob.size(), &out);
  return s.ok() ? "ok" : s.message();
}

TEST(FpgaStubOpenFormat, DecodeRefusesMalformedOpenBitstreams) {
  EXPECT_NE(decode_after([](Bitstream& bs) { bs.tensors[1].shape[0] = -1; }).find("is a constant with open shape"),
            std::string::npos);
  EXPECT_NE(decode_after([](Bitstream& bs) { bs.tensors[0].bytes = 12; }).find("records 12 bytes"), std::string::npos);
  EXPECT_NE(decode_after([](Bitstream& bs) { bs.tensors[0].shape[0] = -2; }).find("neither open (-1) nor a size"),
            std::string::npos);
  EXPECT_NE(decode_after([](Bitstream& bs) { bs.tensors[3].offset = 64; }).find("at offset 64"), std::string::npos);
  EXPECT_EQ(decode_after([](Bitstream&) {}), "ok");
}

TEST(FpgaStubOpenFormat, Format1HeaderWithOpenDimensionsIsRefused) {
  std::vector<std::byte> blob = encode(open_program());
  const uint32_t v1 = kStaticFormatVersion;
  std::memcpy(blob.data() + 8, &v1, 4);  // the header is outside the checksum
  Bitstream out;
  const Status s = decode(blob.data(), blob.size(), &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("format version 1 has no open dimensions"), std::string::npos) << s.message();
}

TEST(FpgaStubOpenFormat, TruncatedOrFlippedOpenBlobsNeverCrash) {
  const std::vector<std::byte> blob = encode(open_program());
  Bitstream out;
  for (size_t n = 0; n < blob.size(); ++n) EXPECT_FALSE(decode(blob.data(), n, &out).ok()) << n;
  for (size_t i = kHeaderSize; i < blob.size(); ++i) {
    std::vector<std::byte> bad = blob;
    bad[i] ^= std::byte{0x81};
    (void)decode(bad.data(), bad.size(), &out);  // the checksum stops most; none may crash
  }
}

}  // namespace
}  // namespace loom::fpga_stub::testing
