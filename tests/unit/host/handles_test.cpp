// check_blob, Executable, PreparedCall, DeviceBuffer and Fence against the fake plugin in
// its synchronous, asynchronous, separate-memory and failing modes.
#include <chrono>
#include <thread>

#include "host/handles.hpp"
#include "host_test_util.hpp"

namespace loom::host::testing {
namespace {

// A plugin host over the fake, with `options` handed to the plugin.
struct FakeFixture {
  explicit FakeFixture(std::initializer_list<std::pair<std::string, std::string>> plugin_options = {}) {
    HostOptions options = isolated_options({variant_dir("fake")});
    options.plugin_options = plugin_options;
    options.log_sink = log->sink();
    host = make_host(options);
    auto p = host->load("fake");
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    if (p.ok()) plugin = *p;
  }
  std::shared_ptr<LogCapture> log = std::make_shared<LogCapture>();
  std::unique_ptr<PluginHost> host;
  std::shared_ptr<LoadedPlugin> plugin;
};

std::unique_ptr<Executable> load_blob(const std::shared_ptr<LoadedPlugin>& plugin,
                                      std::string_view blob, size_t device = 0) {
  auto exe = Executable::load(plugin, device, "fake", 1, bytes_of(blob), {});
  EXPECT_TRUE(exe.ok()) << exe.status().to_string();
  return exe.ok() ? std::move(*exe) : nullptr;
}

// Tensor descriptors of one execution; host memory or buffers.
struct Call {
  std::vector<int64_t> shape;
  std::vector<loom_tensor_t> tensors;
  std::vector<const loom_tensor_t*> inputs, outputs;
  loom_execute_args_t args{};

  Call(loom_executable_t* exe, std::vector<int64_t> shape_in, size_t input_count)
      : shape(std::move(shape_in)), tensors(input_count + 1) {
    uint64_t elements = 1;
    for (int64_t d : shape) elements *= static_cast<uint64_t>(d);
    for (auto& t : tensors) {
      t.struct_size = LOOM_TENSOR_STRUCT_SIZE;
      t.dtype = LOOM_DTYPE_F32;
      t.rank = static_cast<uint32_t>(shape.size());
      t.shape = shape.data();
      t.byte_size = elements * 4;
    }
    for (size_t i = 0; i < input_count; ++i) inputs.push_back(&tensors[i]);
    outputs.push_back(&tensors[input_count]);
    args.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
    args.executable = exe;
    args.input_count = inputs.size();
    args.inputs = inputs.data();
    args.output_count = outputs.size();
    args.outputs = outputs.data();
  }
  void host(size_t i, void* data) { tensors[i].host_data = data; }
  void buffer(size_t i, const DeviceBuffer& b) { tensors[i].buffer = b.handle(); }
  Status run(const LoadedPlugin& plugin, Fence* fence = nullptr) {
    args.signal_fence = fence ? fence->handle() : nullptr;
    return plugin.take(plugin.api().execute(&args));
  }
};

TEST(CheckBlob, KnownBlobsPass) {
  FakeFixture f;
  EXPECT_TRUE(check_blob(*f.plugin, 0, "fake", 1, bytes_of("fake:add")).ok());
  EXPECT_TRUE(check_blob(*f.plugin, 0, "fake", 0, bytes_of("fake:copy")).ok());
}

TEST(CheckBlob, UnknownBlobIsIncompatibleWithContext) {
  FakeFixture f;
  Status st = check_blob(*f.plugin, 0, "fake", 1, bytes_of("garbage"));
  EXPECT_EQ(st.code(), StatusCode::kIncompatible);
  EXPECT_EQ(st.message(),
            "fake://0 cannot load a 'fake' blob of 7 bytes: fake: unknown fake blob (7 bytes)");
}

TEST(CheckBlob, WrongKeyAndVersionAreIncompatible) {
  FakeFixture f;
  Status st = check_blob(*f.plugin, 0, "cpu-simd", 1, bytes_of("fake:add"));
  EXPECT_EQ(st.code(), StatusCode::kIncompatible);
  EXPECT_NE(st.message().find("loader key 'cpu-simd' is not served"), std::string::npos);
  st = check_blob(*f.plugin, 0, "fake", 9, bytes_of("fake:add"));
  EXPECT_NE(st.message().find("format version 9"), std::string::npos);
}

TEST(CheckBlob, DeviceIndexOutOfRange) {
  FakeFixture f;
  Status st = check_blob(*f.plugin, 1, "fake", 1, bytes_of("fake:add"));
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("plugin 'fake' has 1 devices"), std::string::npos);
}

TEST(ExecutableTest, AddOnHostPointers) {
  FakeFixture f;
  auto exe = load_blob(f.plugin, "fake:add");
  ASSERT_NE(exe, nullptr);
  EXPECT_EQ(&exe->plugin(), f.plugin.get());
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {10, 20, 30, 40, 50, 60}, out[6] = {};
  Call call(exe->handle(), {2, 3}, 2);
  call.host(0, a);
  call.host(1, b);
  call.host(2, out);
  ASSERT_TRUE(call.run(*f.plugin).ok());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], a[i] + b[i]);
}

TEST(ExecutableTest, LoadFailureNamesBlobAndDevice) {
  FakeFixture f;
  auto exe = Executable::load(f.plugin, 0, "fake", 1, bytes_of("nope"), {{"k", "v"}});
  EXPECT_EQ(exe.status().code(), StatusCode::kIncompatible);
  EXPECT_EQ(exe.status().message(),
            "loading a 'fake' blob on fake://0: fake: unknown fake blob (4 bytes)");
}

TEST(ExecutableTest, NullPluginAndBadDeviceAreErrors) {
  FakeFixture f;
  EXPECT_EQ(Executable::load(nullptr, 0, "fake", 1, bytes_of("fake:add"), {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Executable::load(f.plugin, 3, "fake", 1, bytes_of("fake:add"), {}).status().code(),
            StatusCode::kOutOfRange);
}

TEST(ExecutableTest, KeepsBlobOwnerAliveUntilDestroyed) {
  FakeFixture f;
  auto blob = std::make_shared<std::string>("fake:copy");
  std::weak_ptr<std::string> watch = blob;
  auto exe = Executable::load(f.plugin, 0, "fake", 1, bytes_of(*blob), {{"spec", "1"}}, blob);
  ASSERT_TRUE(exe.ok());
  blob.reset();
  EXPECT_FALSE(watch.expired());
  exe->reset();
  EXPECT_TRUE(watch.expired());
}

TEST(ExecutableTest, RunsOnTheChosenDevice) {
  FakeFixture f({{"fake.devices", "2"}});
  auto exe = load_blob(f.plugin, "fake:copy", 1);
  ASSERT_NE(exe, nullptr);
  EXPECT_EQ(exe->device_index(), 1u);
  float in[2] = {7, 8}, out[2] = {};
  Call call(exe->handle(), {2}, 1);
  call.host(0, in);
  call.host(1, out);
  ASSERT_TRUE(call.run(*f.plugin).ok());
  EXPECT_EQ(out[1], 8);
}

TEST(ExecutableTest, BadArgumentsAreNamed) {
  FakeFixture f;
  auto exe = load_blob(f.plugin, "fake:add");
  float a[4] = {}, out[4] = {};
  {
    Call call(exe->handle(), {4}, 1);  // add takes two inputs
    call.host(0, a);
    call.host(1, out);
    Status st = call.run(*f.plugin);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("input_count is 1"), std::string::npos) << st.message();
  }
  {
    Call call(exe->handle(), {4}, 2);
    call.host(0, a);
    call.host(1, a);
    call.host(2, out);
    call.tensors[1].byte_size = 12;
    EXPECT_NE(call.run(*f.plugin).message().find("inputs[1].byte_size is 12, the shape needs 16"),
              std::string::npos);
    call.tensors[1].byte_size = 16;
    call.tensors[2].rank = LOOM_MAX_RANK + 1;
    // Rank and struct_size are checked by plugin.hpp's execute thunk, in its words.
    EXPECT_NE(call.run(*f.plugin).message().find("output 0 has rank 9, the ABI allows 8"),
              std::string::npos);
    call.tensors[2].rank = 1;
    call.tensors[0].struct_size = 8;
    EXPECT_NE(call.run(*f.plugin).message().find("input 0: loom_tensor_t.struct_size is 8"),
              std::string::npos);
    call.tensors[0].struct_size = LOOM_TENSOR_STRUCT_SIZE;
    call.tensors[0].host_data = nullptr;
    EXPECT_NE(call.run(*f.plugin).message().find("exactly one of buffer and host_data"),
              std::string::npos);
    call.tensors[0].host_data = a;
    call.tensors[0].dtype = LOOM_DTYPE_I32;
    EXPECT_NE(call.run(*f.plugin).message().find("inputs[0].dtype must be f32"), std::string::npos);
  }
}

TEST(ExecutableTest, SyncFailExecuteReturnsTheError) {
  FakeFixture f({{"fake.fail_execute", "1"}});
  auto exe = load_blob(f.plugin, "fake:copy");
  float in[1] = {1}, out[1] = {};
  Call call(exe->handle(), {1}, 1);
  call.host(0, in);
  call.host(1, out);
  Status st = call.run(*f.plugin);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("fake.fail_execute=1"), std::string::npos);
}

TEST(ExecutableTest, ConcurrentExecutesOnOneExecutable) {
  FakeFixture f;
  auto exe = load_blob(f.plugin, "fake:add");
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        float a[3] = {float(t), 1, 2}, b[3] = {float(i), 3, 4}, out[3] = {};
        Call call(exe->handle(), {3}, 2);
        call.host(0, a);
        call.host(1, b);
        call.host(2, out);
        if (!call.run(*f.plugin).ok() || out[0] != float(t + i) || out[2] != 6) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(DeviceBufferTest, RoundTripAndBounds) {
  FakeFixture f;
  auto buffer = DeviceBuffer::allocate(f.plugin, 0, 16);
  ASSERT_TRUE(buffer.ok()) << buffer.status().to_string();
  EXPECT_EQ((*buffer)->size(), 16u);
  const char text[9] = "abcdefgh";
  char back[9] = {};
  ASSERT_TRUE((*buffer)->copy_from_host(8, text, 8).ok());
  ASSERT_TRUE((*buffer)->copy_to_host(8, back, 8).ok());
  EXPECT_STREQ(back, "abcdefgh");
  Status st = (*buffer)->copy_from_host(10, text, 8);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(st.message(),
            "copy to the device of 8 bytes at offset 10 does not fit a buffer of 16 bytes");
  EXPECT_EQ((*buffer)->copy_to_host(UINT64_MAX, back, 2).code(), StatusCode::kOutOfRange);
  EXPECT_EQ((*buffer)->copy_to_host(2, back, UINT64_MAX).code(), StatusCode::kOutOfRange);
  EXPECT_EQ((*buffer)->copy_from_host(0, nullptr, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*buffer)->copy_to_host(16, nullptr, 0).ok());
}

TEST(DeviceBufferTest, TooLargeIsResourceExhausted) {
  FakeFixture f;
  auto buffer = DeviceBuffer::allocate(f.plugin, 0, uint64_t{1} << 40);
  EXPECT_EQ(buffer.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(buffer.status().message().find("on fake://0"), std::string::npos);
}

TEST(SeparateMemory, HostPointersAreRefusedBuffersWork) {
  FakeFixture f({{"fake.separate_memory", "1"}});
  ASSERT_FALSE(f.plugin->devices()[0].capabilities & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE);
  auto exe = load_blob(f.plugin, "fake:add");
  float a[4] = {1, 2, 3, 4}, b[4] = {4, 3, 2, 1}, out[4] = {};
  {
    Call call(exe->handle(), {4}, 2);
    call.host(0, a);
    call.host(1, b);
    call.host(2, out);
    Status st = call.run(*f.plugin);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("inputs[0].host_data is set but the device needs buffers"),
              std::string::npos)
        << st.message();
  }
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  for (int i = 0; i < 3; ++i) {
    auto b = DeviceBuffer::allocate(f.plugin, 0, 16);
    ASSERT_TRUE(b.ok());
    buffers.push_back(std::move(*b));
  }
  ASSERT_TRUE(buffers[0]->copy_from_host(0, a, 16).ok());
  ASSERT_TRUE(buffers[1]->copy_from_host(0, b, 16).ok());
  Call call(exe->handle(), {4}, 2);
  for (int i = 0; i < 3; ++i) call.buffer(i, *buffers[i]);
  ASSERT_TRUE(call.run(*f.plugin).ok());
  ASSERT_TRUE(buffers[2]->copy_to_host(0, out, 16).ok());
  for (float v : out) EXPECT_EQ(v, 5);
  // A tensor past the end of its buffer is refused.
  call.tensors[2].offset = 4;
  EXPECT_NE(call.run(*f.plugin).message().find("exceeds its buffer of 16 bytes"), std::string::npos);
}

// PreparedCall: the one path the runtime takes into execute.
std::unique_ptr<PreparedCall> prepare(const Executable& exe, std::span<const int64_t> shape,
                                      size_t inputs, size_t outputs = 1) {
  uint64_t bytes = 4;
  for (int64_t d : shape) bytes *= static_cast<uint64_t>(d);
  std::vector<PreparedCall::Operand> operands(inputs + outputs,
                                              {"x", DType::kF32, shape, bytes});
  auto call = PreparedCall::make(exe, operands, inputs);
  EXPECT_TRUE(call.ok()) << call.status().to_string();
  return call.ok() ? std::move(*call) : nullptr;
}

TEST(PreparedCallTest, RunsOnHostMemoryAndFollowsAMovedInput) {
  FakeFixture f;
  auto exe = load_blob(f.plugin, "fake:add");
  ASSERT_NE(exe, nullptr);
  const int64_t shape[] = {2, 2};
  auto call = prepare(*exe, shape, 2);
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->operand_count(), 3u);
  EXPECT_EQ(call->byte_size(2), 16u);
  float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, c[4] = {100, 200, 300, 400}, out[4] = {};
  call->place_on_host(0, a);
  call->place_on_host(1, b);
  call->place_on_host(2, out);
  ASSERT_TRUE(call->execute(nullptr).ok());
  EXPECT_EQ(out[0], 11);
  EXPECT_EQ(out[3], 44);
  // A session redirects an input through its slot, without preparing again.
  *call->host_data_slot(1) = c;
  ASSERT_TRUE(call->execute(nullptr).ok());
  EXPECT_EQ(out[0], 101);
  EXPECT_EQ(out[3], 404);
}

TEST(PreparedCallTest, RunsOnDeviceBuffersAtTheirOffsets) {
  FakeFixture f({{"fake.separate_memory", "1"}});
  auto exe = load_blob(f.plugin, "fake:add");
  ASSERT_NE(exe, nullptr);
  const int64_t shape[] = {4};
  auto call = prepare(*exe, shape, 2);
  ASSERT_NE(call, nullptr);
  // Both inputs in one buffer, the second at offset 16.
  auto in = DeviceBuffer::allocate(f.plugin, 0, 32);
  auto out = DeviceBuffer::allocate(f.plugin, 0, 16);
  ASSERT_TRUE(in.ok() && out.ok());
  const float ab[8] = {1, 2, 3, 4, 4, 3, 2, 1};
  ASSERT_TRUE((*in)->copy_from_host(0, ab, 32).ok());
  call->place_in_buffer(0, **in);
  call->place_in_buffer(1, **in, 16);
  call->place_in_buffer(2, **out);
  ASSERT_TRUE(call->execute(nullptr).ok());
  float result[4] = {};
  ASSERT_TRUE((*out)->copy_to_host(0, result, 16).ok());
  for (float v : result) EXPECT_EQ(v, 5);
  // Host memory is refused by this device: the plugin's own check, unchanged.
  float host[4] = {};
  call->place_on_host(2, host);
  EXPECT_NE(call->execute(nullptr).message().find("outputs[0].host_data is set but the device needs buffers"),
            std::string::npos);
}

TEST(PreparedCallTest, AnAsynchronousCallSignalsTheFenceItIsGiven) {
  FakeFixture f({{"fake.async", "1"}});
  auto exe = load_blob(f.plugin, "fake:copy");
  ASSERT_NE(exe, nullptr);
  EXPECT_TRUE(f.plugin->rearms_fences());
  const int64_t shape[] = {3};
  auto call = prepare(*exe, shape, 1);
  ASSERT_NE(call, nullptr);
  auto fence = Fence::create(f.plugin, 0);
  ASSERT_TRUE(fence.ok());
  float in[3] = {5, 6, 7}, out[3] = {};
  call->place_on_host(0, in);
  call->place_on_host(1, out);
  for (int run = 0; run < 2; ++run) {
    in[0] = static_cast<float>(run);
    ASSERT_TRUE(call->execute(fence->get()).ok());
    ASSERT_TRUE((*fence)->wait(UINT64_MAX).ok());
    EXPECT_EQ(out[0], static_cast<float>(run));
    EXPECT_EQ(out[2], 7);
  }
}

TEST(PreparedCallTest, ARankTheAbiCannotCarryAndMoreInputsThanOperandsAreErrors) {
  FakeFixture f;
  auto exe = load_blob(f.plugin, "fake:copy");
  ASSERT_NE(exe, nullptr);
  const std::vector<int64_t> deep(LOOM_MAX_RANK + 1, 1);
  const int64_t flat[] = {1};
  std::vector<PreparedCall::Operand> operands = {{"x", DType::kF32, flat, 4},
                                                 {"y", DType::kF32, deep, 4}};
  auto call = PreparedCall::make(*exe, operands, 1);
  ASSERT_FALSE(call.ok());
  EXPECT_EQ(call.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(call.status().message(), "operand 'y' has rank 9, the plugin ABI allows 8");
  operands[1].shape = flat;
  auto inputs = PreparedCall::make(*exe, operands, 3);
  ASSERT_FALSE(inputs.ok());
  EXPECT_EQ(inputs.status().message(), "a call with 3 inputs among 2 operands");
  EXPECT_TRUE(PreparedCall::make(*exe, operands, 1).ok());
}

TEST(FenceTest, SignalQueryWait) {
  FakeFixture f;
  auto fence = Fence::create(f.plugin, 0);
  ASSERT_TRUE(fence.ok());
  auto q = (*fence)->query();
  ASSERT_TRUE(q.ok());
  EXPECT_FALSE(*q);
  Status st = (*fence)->wait(1000000);  // 1 ms
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded);
  ASSERT_TRUE((*fence)->signal().ok());
  EXPECT_TRUE(*(*fence)->query());
  EXPECT_TRUE((*fence)->wait(UINT64_MAX).ok());
  EXPECT_EQ(Fence::create(f.plugin, 5).status().code(), StatusCode::kOutOfRange);
}

TEST(FenceTest, SyncDeviceSignalsBeforeReturning) {
  FakeFixture f;
  auto exe = load_blob(f.plugin, "fake:copy");
  auto fence = Fence::create(f.plugin, 0);
  float in[1] = {3}, out[1] = {};
  Call call(exe->handle(), {1}, 1);
  call.host(0, in);
  call.host(1, out);
  ASSERT_TRUE(call.run(*f.plugin, fence->get()).ok());
  EXPECT_TRUE(*(*fence)->query());
  EXPECT_EQ(out[0], 3);
}

TEST(AsyncMode, CompletesLaterAndSignalsTheFence) {
  // The worker holds executions until two are queued: the second submission
  // is the latch this test releases, so "not yet done" is certain.
  FakeFixture f({{"fake.async", "1"}, {"fake.async_hold", "2"}});
  ASSERT_TRUE(f.plugin->devices()[0].capabilities & LOOM_DEVICE_CAP_ASYNC);
  auto exe = load_blob(f.plugin, "fake:add");
  auto fence = Fence::create(f.plugin, 0);
  auto latch = Fence::create(f.plugin, 0);
  ASSERT_TRUE(fence.ok() && latch.ok());
  float a[2] = {1, 2}, b[2] = {3, 4}, out[2] = {}, unused[2] = {};
  Call call(exe->handle(), {2}, 2);
  call.host(0, a);
  call.host(1, b);
  call.host(2, out);
  ASSERT_TRUE(call.run(*f.plugin, fence->get()).ok());
  EXPECT_FALSE(*(*fence)->query());
  EXPECT_EQ((*fence)->wait(1000).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(out[0], 0);  // nothing ran yet
  Call release(exe->handle(), {2}, 2);
  release.host(0, a);
  release.host(1, a);
  release.host(2, unused);
  ASSERT_TRUE(release.run(*f.plugin, latch->get()).ok());
  ASSERT_TRUE((*fence)->wait(UINT64_MAX).ok());
  EXPECT_TRUE(*(*fence)->query());
  EXPECT_EQ(out[0], 4);
  EXPECT_EQ(out[1], 6);
  ASSERT_TRUE((*latch)->wait(UINT64_MAX).ok());
  EXPECT_EQ(unused[1], 4);
}

TEST(AsyncMode, WithoutFenceRunsInline) {
  FakeFixture f({{"fake.async", "1"}, {"fake.async_delay_ms", "1000"}});
  auto exe = load_blob(f.plugin, "fake:copy");
  float in[1] = {9}, out[1] = {};
  Call call(exe->handle(), {1}, 1);
  call.host(0, in);
  call.host(1, out);
  ASSERT_TRUE(call.run(*f.plugin).ok());
  EXPECT_EQ(out[0], 9);
}

TEST(AsyncMode, FailureIsReportedByTheFence) {
  FakeFixture f({{"fake.async", "1"}, {"fake.fail_execute", "1"}});
  auto exe = load_blob(f.plugin, "fake:copy");
  auto fence = Fence::create(f.plugin, 0);
  float in[1] = {1}, out[1] = {};
  Call call(exe->handle(), {1}, 1);
  call.host(0, in);
  call.host(1, out);
  ASSERT_TRUE(call.run(*f.plugin, fence->get()).ok());
  Status st = (*fence)->wait(UINT64_MAX);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("fake.fail_execute=1"), std::string::npos);
  EXPECT_EQ((*fence)->query().status().code(), StatusCode::kInternal);
}

// The host does not order executions: PluginHost and Executable hand
// execute straight to the plugin, and the runtime waits for each execution's
// fence before it starts the next (core/src/runtime/session.cpp). Ordering
// by wait fences is the plugin's side of the ABI ("Fences to wait for before
// starting", plugin.h); these check that the fake, which the host and
// runtime tests stand on, keeps that contract even when its worker would run
// executions out of order.

// Two executions queued at once, "first" then "second", both copying into
// `out`; returns what the worker left there (the value of the one it ran last).
float last_writer_with_order(const char* order) {
  FakeFixture f({{"fake.async", "1"}, {"fake.async_hold", "2"}, {"fake.async_order", order}});
  auto exe = load_blob(f.plugin, "fake:copy");
  auto one_done = Fence::create(f.plugin, 0);
  auto two_done = Fence::create(f.plugin, 0);
  float first[1] = {1}, second[1] = {2}, out[1] = {};
  Call one(exe->handle(), {1}, 1);
  one.host(0, first);
  one.host(1, out);
  Call two(exe->handle(), {1}, 1);
  two.host(0, second);
  two.host(1, out);
  EXPECT_TRUE(one.run(*f.plugin, one_done->get()).ok());
  EXPECT_TRUE(two.run(*f.plugin, two_done->get()).ok());
  EXPECT_TRUE((*one_done)->wait(UINT64_MAX).ok());
  EXPECT_TRUE((*two_done)->wait(UINT64_MAX).ok());
  return out[0];
}

TEST(AsyncMode, TheFakesWorkerReallyRunsOutOfOrderWhenAsked) {
  EXPECT_EQ(last_writer_with_order("fifo"), 2);
  EXPECT_EQ(last_writer_with_order("lifo"), 1);
}

TEST(AsyncMode, SecondExecutionWaitsForTheFirstsFenceThoughTheWorkerRunsNewestFirst) {
  for (const char* order : {"fifo", "lifo"}) {
    SCOPED_TRACE(order);
    FakeFixture f({{"fake.async", "1"}, {"fake.async_hold", "2"}, {"fake.async_order", order}});
    auto exe = load_blob(f.plugin, "fake:copy");
    auto first = Fence::create(f.plugin, 0);
    auto second = Fence::create(f.plugin, 0);
    float in[1] = {5}, mid[1] = {}, out[1] = {-1};
    Call one(exe->handle(), {1}, 1);
    one.host(0, in);
    one.host(1, mid);
    ASSERT_TRUE(one.run(*f.plugin, first->get()).ok());
    Call two(exe->handle(), {1}, 1);
    two.host(0, mid);
    two.host(1, out);
    loom_fence_t* waits[] = {(*first)->handle()};
    two.args.wait_fence_count = 1;
    two.args.wait_fences = waits;
    ASSERT_TRUE(two.run(*f.plugin, second->get()).ok());
    ASSERT_TRUE((*second)->wait(UINT64_MAX).ok());
    // Run before the first, the second would copy mid's 0.
    EXPECT_EQ(out[0], 5);
    EXPECT_TRUE(*(*first)->query());
  }
}

TEST(AsyncMode, AWaitFenceTheHostSignalsReleasesTheExecution) {
  FakeFixture f({{"fake.async", "1"}});
  auto exe = load_blob(f.plugin, "fake:copy");
  auto gate = Fence::create(f.plugin, 0);
  auto done = Fence::create(f.plugin, 0);
  float in[1] = {7}, out[1] = {};
  Call call(exe->handle(), {1}, 1);
  call.host(0, in);
  call.host(1, out);
  loom_fence_t* waits[] = {(*gate)->handle()};
  call.args.wait_fence_count = 1;
  call.args.wait_fences = waits;
  ASSERT_TRUE(call.run(*f.plugin, done->get()).ok());
  EXPECT_EQ((*done)->wait(1000000).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(out[0], 0);
  ASSERT_TRUE((*gate)->signal().ok());
  ASSERT_TRUE((*done)->wait(UINT64_MAX).ok());
  EXPECT_EQ(out[0], 7);
}

TEST(AsyncMode, ExecutionStillWaitingAtPluginDestroyDoesNotHangIt) {
  auto log = std::make_shared<LogCapture>();
  float in[1] = {7}, out[1] = {};
  {
    HostOptions options = isolated_options({variant_dir("fake")});
    options.log_sink = log->sink();
    options.plugin_options = {{"fake.async", "1"}};
    auto host = make_host(options);
    auto plugin = host->load("fake");
    ASSERT_TRUE(plugin.ok());
    // Raw fences, leaked on purpose so that plugin_destroy finds the
    // execution still waiting for a gate nobody signals.
    const loom_plugin_api_t& api = (*plugin)->api();
    loom_fence_t* gate = nullptr;
    loom_fence_t* done = nullptr;
    ASSERT_TRUE((*plugin)->take(api.fence_create((*plugin)->device_handle(0), &gate)).ok());
    ASSERT_TRUE((*plugin)->take(api.fence_create((*plugin)->device_handle(0), &done)).ok());
    auto exe = load_blob(*plugin, "fake:copy");
    Call call(exe->handle(), {1}, 1);
    call.host(0, in);
    call.host(1, out);
    loom_fence_t* waits[] = {gate};
    call.args.wait_fence_count = 1;
    call.args.wait_fences = waits;
    call.args.signal_fence = done;
    ASSERT_TRUE((*plugin)->take(api.execute(&call.args)).ok());
  }  // plugin_destroy: the worker gives up on the execution instead of waiting
  EXPECT_TRUE(log->contains("fake: leaked 2 fences"));
  EXPECT_EQ(out[0], 0);
}

// ---- lifetime ----------------------------------------------------------------

TEST(Lifetime, PluginOutlivesTheHost) {
  auto log = std::make_shared<LogCapture>();
  std::unique_ptr<Executable> exe;
  std::unique_ptr<DeviceBuffer> buffer;
  {
    HostOptions options = isolated_options({variant_dir("fake")});
    options.log_sink = log->sink();
    auto host = make_host(options);
    auto plugin = host->plugin_for_key("fake");
    ASSERT_TRUE(plugin.ok());
    exe = load_blob(*plugin, "fake:copy");
    auto b = DeviceBuffer::allocate(*plugin, 0, 4);
    ASSERT_TRUE(b.ok());
    buffer = std::move(*b);
  }  // the host and every shared_ptr but those in the handles are gone
  float in[1] = {42}, out[1] = {};
  Call call(exe->handle(), {1}, 1);
  call.host(0, in);
  call.buffer(1, *buffer);
  ASSERT_TRUE(call.run(exe->plugin()).ok());
  ASSERT_TRUE(buffer->copy_to_host(0, out, 4).ok());
  EXPECT_EQ(out[0], 42);
  exe.reset();
  buffer.reset();  // the last owner: plugin_destroy, then dlclose
  EXPECT_FALSE(log->contains("leaked"));
}

TEST(Lifetime, NoLeaksReportedAfterAFullRun) {
  auto log = std::make_shared<LogCapture>();
  {
    HostOptions options = isolated_options({variant_dir("fake")});
    options.log_sink = log->sink();
    options.plugin_options = {{"fake.async", "1"}, {"fake.separate_memory", "1"}};
    auto host = make_host(options);
    auto plugin = host->load("fake");
    ASSERT_TRUE(plugin.ok());
    auto exe = load_blob(*plugin, "fake:copy");
    auto in = DeviceBuffer::allocate(*plugin, 0, 4);
    auto out = DeviceBuffer::allocate(*plugin, 0, 4);
    auto fence = Fence::create(*plugin, 0);
    Call call(exe->handle(), {1}, 1);
    call.buffer(0, **in);
    call.buffer(1, **out);
    ASSERT_TRUE(call.run(**plugin, fence->get()).ok());
    ASSERT_TRUE((*fence)->wait(UINT64_MAX).ok());
  }
  EXPECT_FALSE(log->contains("leaked"));
}

TEST(Lifetime, LeakedObjectsAreReportedAtPluginDestroy) {
  auto log = std::make_shared<LogCapture>();
  {
    HostOptions options = isolated_options({variant_dir("fake")});
    options.log_sink = log->sink();
    auto host = make_host(options);
    auto plugin = host->load("fake");
    ASSERT_TRUE(plugin.ok());
    // Bypass the RAII owners on purpose: the fake reports and frees these.
    const loom_plugin_api_t& api = (*plugin)->api();
    for (int i = 0; i < 2; ++i) {
      loom_buffer_allocate_args_t args{};
      args.struct_size = LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE;
      args.device = (*plugin)->device_handle(0);
      args.size = 8;
      ASSERT_TRUE((*plugin)->take(api.buffer_allocate(&args)).ok());
    }
  }
  EXPECT_TRUE(log->contains("fake: leaked 2 buffers"));
}

TEST(Lifetime, CheckAvailableAfterLoad) {
  FakeFixture f;
  EXPECT_TRUE(f.plugin->check_available().ok());
  EXPECT_EQ(f.plugin->unavailable_reason(), "");
}

}  // namespace
}  // namespace loom::host::testing
