// Every injected fault of fpga-stub as the host sees it: the status code, a
// message naming the device and the command, and a plugin (and other
// devices) that keep working. Workload under ASan/LSan, nothing leaks.
#include "harness.hpp"

namespace loom::fpga_stub::testing {
namespace {

std::vector<std::byte> relu_blob() {
  ProgramBuilder b;
  const uint32_t x = b.input(LOOM_DTYPE_F32, {4});
  const uint32_t y = b.output(LOOM_DTYPE_F32, {4});
  b.node(Op::kRelu, {static_cast<int32_t>(x)}, y);
  return encode(b.bs);
}

// A Relu program loaded on one device with its input and output buffers.
struct Workload {
  Harness* h = nullptr;
  loom_device_t* device = nullptr;
  loom_executable_t* exe = nullptr;
  DeviceTensor in, out;

  Workload(Harness& harness, size_t index) : h(&harness), device(harness.device(index)) {
    EXPECT_EQ(h->load(device, relu_blob(), &exe), "ok");
    in = make_tensor(*h, device, LOOM_DTYPE_F32, {4});
    out = make_tensor(*h, device, LOOM_DTYPE_F32, {4});
  }
  ~Workload() {
    h->api()->executable_destroy(exe);
    h->api()->buffer_free(in.buffer);
    h->api()->buffer_free(out.buffer);
  }
  // Uploads, executes (async when `timeout_ns` is set, waiting that long) and
  // checks the result; "ok" or the first error.
  std::string go(uint64_t timeout_ns = 0) {
    const float x[4] = {-1.0f, 1.0f, -2.0f, 2.0f};
    std::string s = h->upload(in.buffer, x, sizeof x);
    if (s != "ok") return s;
    loom_fence_t* fence = nullptr;
    if (timeout_ns != 0) {
      s = take(h->api(), h->api()->fence_create(device, &fence));
      if (s != "ok") return s;
    }
    s = h->execute(exe, {in.d()}, {out.d()}, fence);
    if (s == "ok" && fence != nullptr) s = take(h->api(), h->api()->fence_wait(fence, timeout_ns));
    h->api()->fence_destroy(fence);
    if (s != "ok") return s;
    float y[4] = {};
    s = h->download(out.buffer, y, sizeof y);
    if (s != "ok") return s;
    return y[0] == 0.0f && y[1] == 1.0f && y[3] == 2.0f ? "ok" : "wrong result";
  }
};

void expect_error(const std::string& s, loom_status_code_t code, std::initializer_list<const char*> needles) {
  EXPECT_TRUE(starts_with(s, code)) << s;
  for (const char* n : needles) EXPECT_NE(s.find(n), std::string::npos) << "'" << n << "' not in: " << s;
}

TEST(FpgaStubFaults, InitFailureRefusesPluginCreate) {
  Harness h;
  expect_error(h.create({{"fpga.fault.init", "1"}}), LOOM_STATUS_UNAVAILABLE,
               {"plugin_create", "failed to initialize", "fpga.fault.init=1"});
  EXPECT_EQ(h.plugin(), nullptr);
  Harness again;  // the library itself is fine
  EXPECT_EQ(again.create(), "ok");
}

TEST(FpgaStubFaults, EnumerationFailureIsReported) {
  Harness h;
  ASSERT_EQ(h.create({{"fpga.fault.enumerate", "1"}}), "ok");
  size_t count = 7;
  expect_error(take(h.api(), h.api()->device_count(h.plugin(), &count)), LOOM_STATUS_UNAVAILABLE,
               {"device_count", "enumeration failed", "fpga.fault.enumerate=1"});
  EXPECT_EQ(count, 0u);
  loom_device_t* d = nullptr;
  expect_error(take(h.api(), h.api()->device_get(h.plugin(), 0, &d)), LOOM_STATUS_UNAVAILABLE, {"device_get"});
}

TEST(FpgaStubFaults, RejectedBlobIsIncompatibleOnTheFaultyDeviceOnly) {
  Harness h;
  ASSERT_EQ(h.create({{"fpga.devices", "2"}, {"fpga.fault.reject_blob", "1"}}), "ok");
  const auto blob = relu_blob();
  loom_executable_t* exe = nullptr;
  expect_error(h.load(h.device(0), blob, &exe), LOOM_STATUS_INCOMPATIBLE,
               {"fpga-stub://0", "executable_load", "fpga.fault.reject_blob=1"});
  EXPECT_EQ(exe, nullptr);
  Workload other(h, 1);
  EXPECT_EQ(other.go(), "ok");
}

TEST(FpgaStubFaults, NthAllocationFails) {
  Harness h;
  ASSERT_EQ(h.create({{"fpga.devices", "2"}, {"fpga.fault.alloc", "2"}}), "ok");
  loom_buffer_t* a = nullptr;
  loom_buffer_t* b = nullptr;
  loom_buffer_t* c = nullptr;
  ASSERT_EQ(h.allocate(h.device(0), 64, &a), "ok");
  expect_error(h.allocate(h.device(0), 64, &b), LOOM_STATUS_RESOURCE_EXHAUSTED,
               {"fpga-stub://0", "buffer_allocate", "allocation #2", "fpga.fault.alloc=2"});
  EXPECT_EQ(b, nullptr);
  ASSERT_EQ(h.allocate(h.device(0), 64, &c), "ok");
  h.api()->buffer_free(a);
  h.api()->buffer_free(c);
  Workload other(h, 1);
  EXPECT_EQ(other.go(), "ok");
  Workload same(h, 0);
  EXPECT_EQ(same.go(), "ok");
}

TEST(FpgaStubFaults, NthDmaFailsWithDataLoss) {
  Harness h;
  // DMA #1 uploads the weights at load, #2 is the input upload.
  ASSERT_EQ(h.create({{"fpga.devices", "2"}, {"fpga.fault.dma", "2"}}), "ok");
  Workload run(h, 0);
  expect_error(run.go(), LOOM_STATUS_DATA_LOSS,
               {"fpga-stub://0", "buffer_copy_from_host", "DMA host->device #2", "fpga.fault.dma=2"});
  EXPECT_EQ(run.go(), "ok");  // the next DMA works
  Workload other(h, 1);
  EXPECT_EQ(other.go(), "ok");
}

TEST(FpgaStubFaults, FlippedBitIsDetectedByChecksum) {
  Harness h;
  ASSERT_EQ(h.create({{"fpga.devices", "2"}, {"fpga.fault.bit_flip", "2"}}), "ok");
  Workload run(h, 0);
  // Upload #2 (the input) is corrupted after it lands: the kernel refuses it.
  expect_error(run.go(), LOOM_STATUS_DATA_LOSS,
               {"fpga-stub://0", "execute", "kernel launch #1", "input 0", "fails its checksum"});
  EXPECT_EQ(run.go(), "ok");  // rewritten, the buffer is whole again
  Workload other(h, 1);
  EXPECT_EQ(other.go(), "ok");

  Harness h2;
  ASSERT_EQ(h2.create({{"fpga.fault.bit_flip", "1"}}), "ok");
  loom_buffer_t* b = nullptr;
  ASSERT_EQ(h2.allocate(h2.device(0), 16, &b), "ok");
  uint8_t data[16] = {};
  ASSERT_EQ(h2.upload(b, data, 16), "ok");
  expect_error(h2.download(b, data, 16), LOOM_STATUS_DATA_LOSS,
               {"fpga-stub://0", "buffer_copy_to_host", "DMA device->host #2", "a bit flipped"});
  h2.api()->buffer_free(b);
}

TEST(FpgaStubFaults, HungKernelTimesOutAndOtherDevicesWork) {
  Harness h;
  // The synchronous limit is plugin-wide: it also bounds device 1's real
  // uploads, so it is long (2 s, costed once by the stalled upload below).
  ASSERT_EQ(h.create({{"fpga.devices", "2"}, {"fpga.fault.hang", "1"}, {"fpga.sync_timeout_ms", "2000"}}), "ok");
  {
    Workload run(h, 0);
    expect_error(run.go(100'000'000), LOOM_STATUS_DEADLINE_EXCEEDED,
                 {"fpga-stub://0", "fence_wait", "did not complete within 100 ms"});
    // The queue is stalled behind the hung kernel: synchronous work times out too.
    const float x[4] = {};
    expect_error(h.upload(run.in.buffer, x, sizeof x), LOOM_STATUS_DEADLINE_EXCEEDED,
                 {"fpga-stub://0", "buffer_copy_from_host", "fpga.sync_timeout_ms"});
    Workload other(h, 1);
    EXPECT_EQ(other.go(10'000'000'000), "ok");  // real work: a generous limit
  }
  // Destroying the plugin with the hung work queued returns (and frees it).
  h.destroy_plugin();
}

TEST(FpgaStubFaults, LostDeviceFailsEveryLaterCall) {
  Harness h;
  ASSERT_EQ(h.create({{"fpga.devices", "2"}, {"fpga.fault.lost", "1"}}), "ok");
  {
    Workload run(h, 0);
    expect_error(run.go(1'000'000'000), LOOM_STATUS_DEVICE_LOST,
                 {"fpga-stub://0", "execute", "kernel launch #1", "fpga.fault.lost=1"});
    const float x[4] = {};
    expect_error(h.upload(run.in.buffer, x, sizeof x), LOOM_STATUS_DEVICE_LOST,
                 {"fpga-stub://0", "buffer_copy_from_host", "the device is lost"});
    loom_buffer_t* b = nullptr;
    expect_error(h.allocate(run.device, 64, &b), LOOM_STATUS_DEVICE_LOST, {"buffer_allocate"});
    loom_executable_t* exe = nullptr;
    expect_error(h.load(run.device, relu_blob(), &exe), LOOM_STATUS_DEVICE_LOST, {"executable_load"});
    loom_fence_t* f = nullptr;
    expect_error(take(h.api(), h.api()->fence_create(run.device, &f)), LOOM_STATUS_DEVICE_LOST, {"fence_create"});
    expect_error(run.go(1'000'000'000), LOOM_STATUS_DEVICE_LOST, {"the device is lost"});
    Workload other(h, 1);
    EXPECT_EQ(other.go(10'000'000'000), "ok");  // real work: a generous limit
  }
  h.destroy_plugin();
}

}  // namespace
}  // namespace loom::fpga_stub::testing
