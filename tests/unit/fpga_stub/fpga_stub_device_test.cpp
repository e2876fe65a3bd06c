// The fpga-stub plugin through its C ABI: devices, device memory, DMA,
// fences, the timing model, handle misuse and malformed bitstreams.
#include <chrono>
#include <cstring>
#include <thread>

#include "harness.hpp"

namespace loom::fpga_stub::testing {
namespace {

// Relu over `n` f32 values: input -> output.
std::vector<std::byte> relu_blob(int64_t n) {
  ProgramBuilder b;
  const uint32_t x = b.input(LOOM_DTYPE_F32, {n});
  const uint32_t y = b.output(LOOM_DTYPE_F32, {n});
  b.node(Op::kRelu, {static_cast<int32_t>(x)}, y);
  return encode(b.bs);
}

std::string execute(Harness& h, loom_executable_t* exe, DeviceTensor& in, DeviceTensor& out,
                    loom_fence_t* fence = nullptr, loom_fence_t* wait = nullptr) {
  std::vector<loom_fence_t*> waits;
  if (wait != nullptr) waits.push_back(wait);
  return h.execute(exe, {in.d()}, {out.d()}, fence, std::move(waits));
}

TEST(FpgaStubDevices, EnumeratesConfiguredDevicesAsNonHostVisibleAccelerators) {
  Harness h;
  ASSERT_NE(h.api(), nullptr);
  ASSERT_EQ(h.create({{"fpga.devices", "3"}, {"fpga.memory_mb", "16"}}), "ok");
  size_t count = 0;
  ASSERT_EQ(take(h.api(), h.api()->device_count(h.plugin(), &count)), "ok");
  ASSERT_EQ(count, 3u);
  for (size_t i = 0; i < count; ++i) {
    loom_device_info_t info{};
    info.struct_size = LOOM_DEVICE_INFO_STRUCT_SIZE;
    ASSERT_EQ(take(h.api(), h.api()->device_info(h.device(i), &info)), "ok");
    EXPECT_EQ(std::string(info.uri), "fpga-stub://" + std::to_string(i));
    EXPECT_EQ(info.kind, LOOM_DEVICE_KIND_ACCELERATOR);
    EXPECT_EQ(info.device_memory_bytes, uint64_t{16} << 20);
    EXPECT_EQ(info.host_visible_memory_bytes, 0u);
    EXPECT_EQ(info.capabilities, LOOM_DEVICE_CAP_ASYNC);
    EXPECT_TRUE(info.dtype_mask & LOOM_DTYPE_BIT(LOOM_DTYPE_I8));
  }
  loom_device_t* none = nullptr;
  EXPECT_TRUE(starts_with(take(h.api(), h.api()->device_get(h.plugin(), 3, &none)), LOOM_STATUS_NOT_FOUND));
}

TEST(FpgaStubOptions, UnknownOrMalformedOptionsAreRejectedByName) {
  Harness h;
  const std::string unknown = h.create({{"fpga.devcies", "2"}});
  EXPECT_TRUE(starts_with(unknown, LOOM_STATUS_INVALID_ARGUMENT)) << unknown;
  EXPECT_NE(unknown.find("fpga.devcies"), std::string::npos) << unknown;
  Harness h2;
  const std::string zero = h2.create({{"fpga.devices", "0"}});
  EXPECT_NE(zero.find("fpga.devices must be at least 1"), std::string::npos) << zero;
  Harness h3;
  const std::string text = h3.create({{"fpga.memory_mb", "lots"}});
  EXPECT_NE(text.find("fpga.memory_mb"), std::string::npos) << text;
  Harness h4;
  EXPECT_EQ(h4.create({{"loom.threads", "2"}}), "ok");  // other plugins' keys are ignored
}

TEST(FpgaStubMemory, CopiesRoundTripThroughDeviceMemory) {
  Harness h;
  ASSERT_EQ(h.create(), "ok");
  loom_buffer_t* b = nullptr;
  ASSERT_EQ(h.allocate(h.device(0), 1000, &b), "ok");
  std::vector<uint8_t> src(1000), dst(1000, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7);
  ASSERT_EQ(h.upload(b, src.data(), 1000), "ok");
  ASSERT_EQ(h.download(b, dst.data(), 1000), "ok");
  EXPECT_EQ(src, dst);
  // A partial write at an offset keeps the rest.
  const uint8_t patch[4] = {1, 2, 3, 4};
  ASSERT_EQ(h.upload(b, patch, 4, 500), "ok");
  ASSERT_EQ(h.download(b, dst.data(), 1000), "ok");
  EXPECT_EQ(dst[500], 1);
  EXPECT_EQ(dst[503], 4);
  EXPECT_EQ(dst[504], src[504]);
  h.api()->buffer_free(b);
}

TEST(FpgaStubMemory, DeviceMemoryIsNotHostVisible) {
  Harness h;
  ASSERT_EQ(h.create(), "ok");
  loom_buffer_t* b = nullptr;
  const std::string visible = h.allocate(h.device(0), 64, &b, LOOM_BUFFER_HOST_VISIBLE);
  EXPECT_NE(visible.find("not host-visible"), std::string::npos) << visible;
  EXPECT_EQ(b, nullptr);
  ASSERT_EQ(h.allocate(h.device(0), 64, &b), "ok");
  void* p = reinterpret_cast<void*>(1);
  const std::string map = take(h.api(), h.api()->buffer_map(b, &p));
  EXPECT_TRUE(starts_with(map, LOOM_STATUS_FAILED_PRECONDITION)) << map;
  EXPECT_EQ(p, nullptr);
  h.api()->buffer_free(b);
}

TEST(FpgaStubMemory, DmaOutsideTheBufferIsOutOfRange) {
  Harness h;
  ASSERT_EQ(h.create(), "ok");
  loom_buffer_t* b = nullptr;
  ASSERT_EQ(h.allocate(h.device(0), 100, &b), "ok");
  std::vector<uint8_t> data(200);
  const std::string up = h.upload(b, data.data(), 101);
  EXPECT_TRUE(starts_with(up, LOOM_STATUS_OUT_OF_RANGE)) << up;
  EXPECT_NE(up.find("fpga-stub://0: buffer_copy_from_host"), std::string::npos) << up;
  const std::string down = h.download(b, data.data(), 8, UINT64_MAX - 4);
  EXPECT_TRUE(starts_with(down, LOOM_STATUS_OUT_OF_RANGE)) << down;
  EXPECT_EQ(h.upload(b, data.data(), 100), "ok");
  h.api()->buffer_free(b);
}

TEST(FpgaStubMemory, ExhaustedArenaIsResourceExhaustedAndFreedMemoryIsReused) {
  Harness h;
  ASSERT_EQ(h.create({{"fpga.memory_mb", "1"}}), "ok");
  loom_buffer_t* a = nullptr;
  loom_buffer_t* b = nullptr;
  ASSERT_EQ(h.allocate(h.device(0), 700 << 10, &a), "ok");
  const std::string full = h.allocate(h.device(0), 400 << 10, &b);
  EXPECT_TRUE(starts_with(full, LOOM_STATUS_RESOURCE_EXHAUSTED)) << full;
  EXPECT_NE(full.find("device memory exhausted"), std::string::npos) << full;
  EXPECT_EQ(b, nullptr);
  const std::string huge = h.allocate(h.device(0), uint64_t{1} << 40, &b);
  EXPECT_TRUE(starts_with(huge, LOOM_STATUS_RESOURCE_EXHAUSTED)) << huge;
  h.api()->buffer_free(a);
  ASSERT_EQ(h.allocate(h.device(0), 1 << 20, &b), "ok");  // coalesced back into one block
  h.api()->buffer_free(b);
}

TEST(FpgaStubHandles, DoubleDestroyAndUseAfterDestroyGiveClearErrors) {
  Harness h;
  ASSERT_EQ(h.create(), "ok");
  loom_device_t* d = h.device(0);
  loom_buffer_t* b = nullptr;
  ASSERT_EQ(h.allocate(d, 64, &b), "ok");
  h.api()->buffer_free(b);
  h.api()->buffer_free(b);  // double destroy: logged, no crash
  const auto logs = h.recorder().logs();
  ASSERT_FALSE(logs.empty());
  EXPECT_NE(logs.back().find("buffer_free: the buffer handle was already destroyed"), std::string::npos)
      << logs.back();
  uint8_t byte = 0;
  const std::string after = h.upload(b, &byte, 1);
  EXPECT_TRUE(starts_with(after, LOOM_STATUS_FAILED_PRECONDITION)) << after;
  EXPECT_NE(after.find("already destroyed"), std::string::npos) << after;

  // A recycled slot does not revive the stale handle.
  loom_buffer_t* b2 = nullptr;
  ASSERT_EQ(h.allocate(d, 64, &b2), "ok");
  EXPECT_NE(b2, b);
  EXPECT_TRUE(starts_with(h.upload(b, &byte, 1), LOOM_STATUS_FAILED_PRECONDITION));
  EXPECT_EQ(h.upload(b2, &byte, 1), "ok");
  h.api()->buffer_free(b2);

  loom_fence_t* f = nullptr;
  ASSERT_EQ(take(h.api(), h.api()->fence_create(d, &f)), "ok");
  h.api()->fence_destroy(f);
  h.api()->fence_destroy(f);
  EXPECT_TRUE(starts_with(take(h.api(), h.api()->fence_wait(f, 0)), LOOM_STATUS_FAILED_PRECONDITION));
  bool signaled = true;
  EXPECT_TRUE(starts_with(take(h.api(), h.api()->fence_query(f, &signaled)), LOOM_STATUS_FAILED_PRECONDITION));

  loom_executable_t* exe = nullptr;
  ASSERT_EQ(h.load(d, relu_blob(4), &exe), "ok");
  h.api()->executable_destroy(exe);
  h.api()->executable_destroy(exe);
  DeviceTensor in = make_tensor(h, d, LOOM_DTYPE_F32, {4});
  DeviceTensor out = make_tensor(h, d, LOOM_DTYPE_F32, {4});
  const std::string run = execute(h, exe, in, out);
  EXPECT_TRUE(starts_with(run, LOOM_STATUS_FAILED_PRECONDITION)) << run;
  // A handle of the wrong kind is named as such.
  const std::string wrong = execute(h, reinterpret_cast<loom_executable_t*>(in.buffer), in, out);
  EXPECT_NE(wrong.find("is a buffer, not a executable"), std::string::npos) << wrong;
  h.api()->buffer_free(in.buffer);
  h.api()->buffer_free(out.buffer);
}

TEST(FpgaStubExecute, RunsOnDeviceBuffersAndRefusesHostPointers) {
  Harness h;
  ASSERT_EQ(h.create(), "ok");
  loom_device_t* d = h.device(0);
  loom_executable_t* exe = nullptr;
  ASSERT_EQ(h.load(d, relu_blob(4), &exe), "ok");
  DeviceTensor in = make_tensor(h, d, LOOM_DTYPE_F32, {4});
  DeviceTensor out = make_tensor(h, d, LOOM_DTYPE_F32, {4});
  const float x[4] = {-1.0f, 2.0f, -3.0f, 4.0f};
  ASSERT_EQ(h.upload(in.buffer, x, sizeof x), "ok");
  ASSERT_EQ(execute(h, exe, in, out), "ok");
  float y[4] = {};
  ASSERT_EQ(h.download(out.buffer, y, sizeof y), "ok");
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 2.0f);
  EXPECT_EQ(y[3], 4.0f);

  float host[4] = {};
  DeviceTensor host_in = in;
  host_in.desc.buffer = nullptr;
  host_in.desc.host_data = host;
  const std::string refused = execute(h, exe, host_in, out);
  EXPECT_NE(refused.find("cannot read host memory"), std::string::npos) << refused;
  DeviceTensor wrong = in;
  wrong.desc.dtype = LOOM_DTYPE_I8;
  EXPECT_NE(execute(h, exe, wrong, out).find("the bitstream expects f32 [4]"), std::string::npos);
  h.api()->executable_destroy(exe);
  h.api()->buffer_free(in.buffer);
  h.api()->buffer_free(out.buffer);
}

TEST(FpgaStubExecute, ExecuteReturnsAtOnceAndTheFenceSignalsLater) {
  Harness h;
  // 300 ms per kernel launch, realised as wall time.
  ASSERT_EQ(h.create({{"fpga.realtime", "1"}, {"fpga.launch_ns", "300000000"}}), "ok");
  loom_device_t* d = h.device(0);
  loom_executable_t* exe = nullptr;
  ASSERT_EQ(h.load(d, relu_blob(4), &exe), "ok");
  DeviceTensor in = make_tensor(h, d, LOOM_DTYPE_F32, {4});
  DeviceTensor out = make_tensor(h, d, LOOM_DTYPE_F32, {4});
  loom_fence_t* f = nullptr;
  loom_fence_t* gate = nullptr;
  ASSERT_EQ(take(h.api(), h.api()->fence_create(d, &f)), "ok");
  ASSERT_EQ(take(h.api(), h.api()->fence_create(d, &gate)), "ok");
  // The execution waits on a gate this test opens: until then "not yet
  // signaled" is certain, however slow the machine, and execute has
  // returned without running the kernel.
  ASSERT_EQ(execute(h, exe, in, out, f, gate), "ok");
  bool signaled = true;
  EXPECT_EQ(take(h.api(), h.api()->fence_query(f, &signaled)), "ok");
  EXPECT_FALSE(signaled);
  const std::string early = take(h.api(), h.api()->fence_wait(f, 1'000'000));
  EXPECT_TRUE(starts_with(early, LOOM_STATUS_DEADLINE_EXCEEDED)) << early;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(take(h.api(), h.api()->fence_signal(gate)), "ok");
  EXPECT_EQ(take(h.api(), h.api()->fence_wait(f, 60'000'000'000)), "ok");
  // The launch's 300 ms pass after the gate opens.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(290));
  h.api()->fence_destroy(f);
  h.api()->fence_destroy(gate);
  h.api()->executable_destroy(exe);
  h.api()->buffer_free(in.buffer);
  h.api()->buffer_free(out.buffer);
}

// Durations of the spans traced on fpga-stub://0, by name prefix.
std::vector<uint64_t> spans(Harness& h, const std::string& prefix) {
  std::vector<uint64_t> out;
  uint64_t begin = 0;
  for (const TraceEvent& e : h.recorder().events()) {
    if (e.category != "fpga-stub://0" || e.name.rfind(prefix, 0) != 0) continue;
    if (e.phase == LOOM_TRACE_BEGIN) begin = e.ns;
    if (e.phase == LOOM_TRACE_END) out.push_back(e.ns - begin);
  }
  return out;
}

void run_timing_workload(Harness& h) {
  loom_device_t* d = h.device(0);
  loom_executable_t* exe = nullptr;
  ASSERT_EQ(h.load(d, relu_blob(4096), &exe), "ok");
  DeviceTensor in = make_tensor(h, d, LOOM_DTYPE_F32, {4096});
  DeviceTensor out = make_tensor(h, d, LOOM_DTYPE_F32, {4096});
  std::vector<float> x(4096, 1.0f);
  ASSERT_EQ(h.upload(in.buffer, x.data(), 8000), "ok");
  ASSERT_EQ(execute(h, exe, in, out), "ok");
  h.api()->executable_destroy(exe);
  h.api()->buffer_free(in.buffer);
  h.api()->buffer_free(out.buffer);
}

TEST(FpgaStubTiming, TraceSpansFollowTheTimingModel) {
  Harness h;
  ASSERT_EQ(h.create(), "ok");
  run_timing_workload(h);
  // 8000 bytes at 8000 MB/s = 1 us, plus 2 us latency.
  const auto dma = spans(h, "dma h2d");
  ASSERT_EQ(dma.size(), 2u);  // the (empty) weights upload, then the input
  EXPECT_EQ(dma[1], 3000u);
  // 4096 f32 ops on 4096 / 4 lanes = 4 cycles at 250 MHz = 16 ns, plus 1 us launch.
  const auto kernel = spans(h, "kernel");
  ASSERT_EQ(kernel.size(), 1u);
  EXPECT_EQ(kernel[0], 1016u);
}

TEST(FpgaStubTiming, SlowDeviceFaultMultipliesEveryDuration) {
  Harness h;
  ASSERT_EQ(h.create({{"fpga.fault.slow", "5"}}), "ok");
  run_timing_workload(h);
  EXPECT_EQ(spans(h, "dma h2d").at(1), 15000u);
  EXPECT_EQ(spans(h, "kernel").at(0), 5080u);
}

// --------------------------------------------------------------- malformed bitstreams

TEST(FpgaStubBitstream, MalformedBlobsAreIncompatibleWithTheReason) {
  Harness h;
  ASSERT_EQ(h.create({{"fpga.memory_mb", "1"}}), "ok");
  loom_device_t* d = h.device(0);
  const std::vector<std::byte> good = relu_blob(8);
  ASSERT_EQ(h.check(d, good.data(), good.size()), "ok");
  auto expect = [&](const std::vector<std::byte>& blob, const std::string& needle) {
    const std::string s = h.check(d, blob.data(), blob.size());
    EXPECT_TRUE(starts_with(s, LOOM_STATUS_INCOMPATIBLE)) << s;
    EXPECT_NE(s.find(needle), std::string::npos) << s;
    loom_executable_t* exe = nullptr;
    EXPECT_TRUE(starts_with(h.load(d, blob, &exe), LOOM_STATUS_INCOMPATIBLE));
    EXPECT_EQ(exe, nullptr);
  };
  expect(std::vector<std::byte>(good.begin(), good.begin() + 10), "the header alone needs 64");
  auto magic = good;
  magic[0] = std::byte{'X'};
  expect(magic, "magic");
  auto version = good;
  version[8] = std::byte{9};
  expect(version, "format version 9");
  auto truncated = good;
  truncated.pop_back();
  expect(truncated, "the header records");
  auto flipped = good;
  flipped[70] ^= std::byte{1};
  expect(flipped, "checksum mismatch");
  EXPECT_NE(h.check(d, good.data(), good.size(), "cpu-simd").find("not \"cpu-simd\""), std::string::npos);

  // Well-formed bytes describing an impossible program: re-encoded, so the
  // checksum holds and validation must catch it.
  ProgramBuilder bad_index;
  const uint32_t x = bad_index.input(LOOM_DTYPE_F32, {8});
  const uint32_t y = bad_index.output(LOOM_DTYPE_F32, {8});
  bad_index.node(Op::kRelu, {42}, y);
  (void)x;
  expect(encode(bad_index.bs), "names tensor 42");
  ProgramBuilder bad_shape;
  const uint32_t a = bad_shape.input(LOOM_DTYPE_F32, {2, 3});
  const uint32_t bm = bad_shape.input(LOOM_DTYPE_F32, {4, 5});
  const uint32_t out = bad_shape.output(LOOM_DTYPE_F32, {2, 5});
  bad_shape.node(Op::kMatMul, {static_cast<int32_t>(a), static_cast<int32_t>(bm)}, out);
  expect(encode(bad_shape.bs), "do not multiply");
  ProgramBuilder bad_output;
  const uint32_t c = bad_output.input(LOOM_DTYPE_F32, {1, 1, 4, 4});
  const uint32_t p = bad_output.output(LOOM_DTYPE_F32, {1, 1, 4, 4});
  bad_output.node(Op::kMaxPool, {static_cast<int32_t>(c)}, p, window(1, 2, 2, 0));
  expect(encode(bad_output.bs), "the operator computes f32 [1,1,2,2]");
  ProgramBuilder unknown;
  const uint32_t u = unknown.input(LOOM_DTYPE_F32, {8});
  const uint32_t v = unknown.output(LOOM_DTYPE_F32, {8});
  unknown.node(static_cast<Op>(999), {static_cast<int32_t>(u)}, v);
  expect(encode(unknown.bs), "unknown op code 999");
  ProgramBuilder big;
  const uint32_t i = big.input(LOOM_DTYPE_F32, {8});
  const uint32_t s = big.scratch(LOOM_DTYPE_F32, {8});
  const uint32_t o = big.output(LOOM_DTYPE_F32, {8});
  big.node(Op::kRelu, {static_cast<int32_t>(i)}, s);
  big.node(Op::kRelu, {static_cast<int32_t>(s)}, o);
  big.bs.activation_bytes = uint64_t{2} << 20;
  expect(encode(big.bs), "needs 2097152 bytes of device memory");
  ProgramBuilder outside;
  const uint32_t i2 = outside.input(LOOM_DTYPE_F32, {8});
  const uint32_t s2 = outside.scratch(LOOM_DTYPE_F32, {8});
  const uint32_t o2 = outside.output(LOOM_DTYPE_F32, {8});
  outside.node(Op::kRelu, {static_cast<int32_t>(i2)}, s2);
  outside.node(Op::kRelu, {static_cast<int32_t>(s2)}, o2);
  outside.bs.tensors[s2].offset = 1000;
  expect(encode(outside.bs), "exceeds its region");
}

// Found by tests/fuzz (fpga_blob): a tensor's dtype byte past loom_dtype_t's
// range was converted to the enum and then read (UBSan: "load of value 247,
// which is not a valid value for type 'loom_dtype_t'"). Now refused by
// decode, naming the tensor, the code and the byte offset.
TEST(FpgaStubBitstream, DtypeCodesOutsideTheEnumAreRefusedByName) {
  for (uint8_t code : {uint8_t{2}, uint8_t{16}, uint8_t{247}, uint8_t{255}}) {
    std::vector<std::byte> blob = relu_blob(8);
    blob[kHeaderSize] = std::byte{code};  // tensor 0's dtype, the first byte after the header
    uint64_t h = 0xcbf29ce484222325ull;   // the header's FNV-1a 64 of the bytes after it
    for (size_t i = kHeaderSize; i < blob.size(); ++i) h = (h ^ static_cast<uint8_t>(blob[i])) * 0x100000001b3ull;
    std::memcpy(blob.data() + 56, &h, 8);
    Bitstream bs;
    const Status s = decode(blob.data(), blob.size(), &bs);
    EXPECT_EQ(s.code(), LOOM_STATUS_INCOMPATIBLE);
    EXPECT_NE(s.message().find("tensor 0 has dtype " + std::to_string(code) + ", not f32/i32/i8/u8 (at byte 64)"),
              std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace loom::fpga_stub::testing
