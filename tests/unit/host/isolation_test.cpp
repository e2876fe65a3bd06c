// Plugin isolation: probing plugins in a child process before loading them
// (a plugin that crashes, hangs or exits while loading is rejected and this
// process lives on), plugins run in a process of their own (calls forwarded,
// buffers in shared memory, a crash or hang losing only the plugin), and the
// wire's bounds checks.
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <sys/socket.h>
#include <unistd.h>

#include "host/handles.hpp"
#include "host/isolation/isolation_wire.hpp"
#include "host_test_util.hpp"
#include "loom/conformance/time_scale.hpp"

namespace loom::host::testing {
namespace {

// Sets $LOOM_FAKE_MISBEHAVE for the life of the object (children inherit
// it). Under LeakSanitizer a child that calls exit() mid-load would report
// what loading had allocated and change its exit code, so the children's
// leak check is off meanwhile.
struct Misbehave {
  explicit Misbehave(const char* what) {
    ::setenv("LOOM_FAKE_MISBEHAVE", what, 1);
    const char* asan = std::getenv("ASAN_OPTIONS");
    saved_ = asan != nullptr ? asan : "";
    had_ = asan != nullptr;
    ::setenv("ASAN_OPTIONS", (saved_ + (saved_.empty() ? "" : ":") + "detect_leaks=0").c_str(), 1);
  }
  ~Misbehave() {
    ::unsetenv("LOOM_FAKE_MISBEHAVE");
    if (had_) {
      ::setenv("ASAN_OPTIONS", saved_.c_str(), 1);
    } else {
      ::unsetenv("ASAN_OPTIONS");
    }
  }
  std::string saved_;
  bool had_ = false;
};

PluginRecord load_fake(HostOptions options, Status* out_status = nullptr) {
  options.search_paths = {variant_dir("fake")};
  options.use_environment = false;
  options.use_default_folder = false;
  options.use_user_folder = false;
  auto host = make_host(std::move(options));
  if (!host) return {};
  auto loaded = host->load("fake");
  if (out_status != nullptr) *out_status = loaded.status();
  auto records = host->plugins();
  return records.empty() ? PluginRecord{} : records[0];
}

void expect_rejected(const PluginRecord& record, std::initializer_list<const char*> needles) {
  EXPECT_EQ(record.state, PluginState::kRejected) << record.reason;
  for (const char* needle : needles) {
    EXPECT_NE(record.reason.find(needle), std::string::npos) << "reason: " << record.reason;
  }
}

TEST(PluginProbe, AWellBehavedPluginPassesTheProbeAndLoads) {
  const PluginRecord record = load_fake({});
  EXPECT_EQ(record.state, PluginState::kLoaded) << record.reason;
  EXPECT_FALSE(record.isolated);
  ASSERT_EQ(record.devices.size(), 1u);
  // In process, the device keeps its own capabilities.
  EXPECT_NE(record.devices[0].capabilities & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE, 0u);
}

TEST(PluginProbe, SegfaultInTheQueryIsRejectedWithTheSignal) {
  Misbehave fault("query_segv");
  expect_rejected(load_fake({}), {"probe process", "signal 11 (SIGSEGV)", "while loading"});
}

TEST(PluginProbe, AbortInALibraryConstructorIsRejected) {
  Misbehave fault("constructor_abort");
  expect_rejected(load_fake({}), {"probe process", "SIGABRT"});
}

TEST(PluginProbe, ExitZeroInTheQueryIsRejected) {
  Misbehave fault("query_exit0");
  expect_rejected(load_fake({}), {"probe process", "exited with code 0", "before it reported"});
}

TEST(PluginProbe, WritingPastTheReasonBufferIsRejected) {
  // The reason buffer ends at an inaccessible page: the write faults in the
  // probe, never in this process. (Under AddressSanitizer its SEGV handler
  // reports the fault and exits, so the signal is not named here.)
  Misbehave fault("reason_overflow");
  expect_rejected(load_fake({}), {"probe process", "while loading the plugin"});
}

TEST(PluginProbe, AHangInTheQueryIsRejectedAfterTheTimeout) {
  Misbehave fault("query_hang");
  HostOptions options;
  options.probe_timeout = std::chrono::milliseconds(500);
  expect_rejected(load_fake(options), {"probe process", "within 500 ms", "killed"});
}

TEST(PluginProbe, CrashesAndHangsInPluginCreateAreRejected) {
  for (const char* what : {"create_segv", "create_abort", "create_exit0", "create_hang"}) {
    SCOPED_TRACE(what);
    Misbehave no_leak_check("");
    HostOptions options;
    options.plugin_options = {{"fake.misbehave", what}};
    options.probe_timeout = std::chrono::milliseconds(1000);
    const PluginRecord record = load_fake(options);
    EXPECT_EQ(record.state, PluginState::kRejected);
    EXPECT_NE(record.reason.find("probe process"), std::string::npos) << record.reason;
  }
}

TEST(PluginProbe, ThePluginsOwnErrorIsReportedAsIs) {
  HostOptions options;
  options.plugin_options = {{"fake.fail_create", "1"}};
  expect_rejected(load_fake(options), {"plugin_create fails (fake.fail_create=1)"});
}

TEST(PluginProbe, AMissingPluginHostProgramSkipsTheProbeWithAWarning) {
  auto log = std::make_shared<LogCapture>();
  HostOptions options;
  options.plugin_host_program = "/nonexistent/loom-plugin-host";
  options.log_sink = log->sink();
  EXPECT_EQ(load_fake(options).state, PluginState::kLoaded);
  EXPECT_TRUE(log->contains("plugins are loaded without a probe")) << "no warning";
}

// ---- isolated plugins ----

using Opts = std::vector<std::pair<std::string, std::string>>;

struct IsolatedFake {
  explicit IsolatedFake(std::vector<std::pair<std::string, std::string>> plugin_options = {},
                        std::chrono::milliseconds call_timeout = std::chrono::milliseconds(60'000)) {
    HostOptions options = isolated_options({variant_dir("fake")});
    options.plugin_options = std::move(plugin_options);
    options.isolated_plugins = {"fake"};
    options.isolated_call_timeout = call_timeout;
    options.log_sink = log->sink();
    host = make_host(options);
    auto p = host->load("fake");
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    if (p.ok()) plugin = *p;
  }

  // out = a + b through buffers; returns the plugin's status.
  Status add(const std::vector<float>& a, const std::vector<float>& b, std::vector<float>* out,
             bool async = false) {
    auto exe = Executable::load(plugin, 0, "fake", 1, bytes_of("fake:add"), {});
    if (!exe.ok()) return exe.status();
    const uint64_t bytes = a.size() * sizeof(float);
    std::unique_ptr<DeviceBuffer> buffers[3];
    for (auto& buffer : buffers) {
      auto made = DeviceBuffer::allocate(plugin, 0, bytes);
      if (!made.ok()) return made.status();
      buffer = std::move(*made);
    }
    LOOM_RETURN_IF_ERROR(buffers[0]->copy_from_host(0, a.data(), bytes));
    LOOM_RETURN_IF_ERROR(buffers[1]->copy_from_host(0, b.data(), bytes));
    int64_t shape[1] = {static_cast<int64_t>(a.size())};
    loom_tensor_t tensors[3] = {};
    const loom_tensor_t* pointers[3];
    for (int i = 0; i < 3; ++i) {
      tensors[i] = {LOOM_TENSOR_STRUCT_SIZE, LOOM_DTYPE_F32, 1, shape, buffers[i]->handle(), nullptr, 0, bytes};
      pointers[i] = &tensors[i];
    }
    std::unique_ptr<Fence> fence;
    if (async) {
      auto made = Fence::create(plugin, 0);
      if (!made.ok()) return made.status();
      fence = std::move(*made);
    }
    loom_execute_args_t args{};
    args.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
    args.executable = (*exe)->handle();
    args.input_count = 2;
    args.inputs = pointers;
    args.output_count = 1;
    args.outputs = pointers + 2;
    args.signal_fence = fence ? fence->handle() : nullptr;
    LOOM_RETURN_IF_ERROR(plugin->take(plugin->api().execute(&args)));
    if (fence) LOOM_RETURN_IF_ERROR(fence->wait(5'000'000'000ull));
    out->resize(a.size());
    return buffers[2]->copy_to_host(0, out->data(), bytes);
  }

  std::shared_ptr<LogCapture> log = std::make_shared<LogCapture>();
  std::unique_ptr<PluginHost> host;
  std::shared_ptr<LoadedPlugin> plugin;
};

TEST(IsolatedPlugin, LoadsInItsOwnProcessWithBufferOnlyDevices) {
  IsolatedFake fake(Opts{{"fake.devices", "2"}});
  ASSERT_TRUE(fake.plugin);
  EXPECT_TRUE(fake.plugin->isolated());
  EXPECT_GT(fake.plugin->process_id(), 0);
  EXPECT_NE(fake.plugin->process_id(), ::getpid());
  ASSERT_EQ(fake.plugin->devices().size(), 2u);
  EXPECT_EQ(fake.plugin->devices()[1].uri, "fake://1");
  const uint64_t caps = fake.plugin->devices()[0].capabilities;
  EXPECT_EQ(caps & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE, 0u);
  EXPECT_EQ(caps & LOOM_DEVICE_CAP_HOST_POINTER_IMPORT, 0u);
  EXPECT_NE(caps & LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY, 0u);
  EXPECT_TRUE(fake.host->plugins()[0].isolated);
  // The child's log lines reach this host's sink.
  EXPECT_TRUE(fake.log->contains("fake: created with 2 devices"));
}

TEST(IsolatedPlugin, ExecutesThroughSharedMemory) {
  IsolatedFake fake;
  ASSERT_TRUE(fake.plugin);
  std::vector<float> out;
  ASSERT_TRUE(fake.add({1, 2, 3}, {10, 20, 30.5f}, &out).ok());
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33.5f}));
}

TEST(IsolatedPlugin, ExecutesOnADeviceWithItsOwnMemory) {
  // The child mirrors each buffer in the plugin's own memory and copies on
  // the host's copies.
  IsolatedFake fake(Opts{{"fake.separate_memory", "1"}});
  ASSERT_TRUE(fake.plugin);
  std::vector<float> out;
  ASSERT_TRUE(fake.add({1, 2}, {3, 4}, &out).ok());
  EXPECT_EQ(out, (std::vector<float>{4, 6}));
}

TEST(IsolatedPlugin, AsynchronousExecutionSignalsItsFence) {
  IsolatedFake fake(Opts{{"fake.async", "1"}, {"fake.async_delay_ms", "20"}});
  ASSERT_TRUE(fake.plugin);
  std::vector<float> out;
  Status status = fake.add({5}, {6}, &out, /*async=*/true);
  ASSERT_TRUE(status.ok()) << status.to_string();
  EXPECT_EQ(out, (std::vector<float>{11}));
}

TEST(IsolatedPlugin, ThePluginsErrorsComeBackAsIs) {
  IsolatedFake fake;
  ASSERT_TRUE(fake.plugin);
  Status check = check_blob(*fake.plugin, 0, "fake", 1, bytes_of("fake:nonsense"));
  EXPECT_EQ(check.code(), StatusCode::kIncompatible) << check.to_string();
  auto buffer = DeviceBuffer::allocate(fake.plugin, 0, 16);
  ASSERT_TRUE(buffer.ok());
  float four[4] = {};
  EXPECT_EQ((*buffer)->copy_from_host(8, four, 16).code(), StatusCode::kOutOfRange);
}

TEST(IsolatedPlugin, ACrashInExecuteLosesThePluginNotThisProcess) {
  IsolatedFake fake(Opts{{"fake.misbehave", "execute_segv"}});
  ASSERT_TRUE(fake.plugin);
  std::vector<float> out;
  Status status = fake.add({1}, {2}, &out);
  EXPECT_EQ(status.code(), StatusCode::kDeviceLost) << status.to_string();
  EXPECT_NE(status.message().find("signal 11 (SIGSEGV) during execute"), std::string::npos)
      << status.to_string();
  // Every later call says the same, without a process to ask.
  Status again = fake.plugin->check_available();
  EXPECT_EQ(again.code(), StatusCode::kDeviceLost);
  EXPECT_NE(again.message().find("SIGSEGV"), std::string::npos) << again.to_string();
  auto buffer = DeviceBuffer::allocate(fake.plugin, 0, 16);
  EXPECT_EQ(buffer.status().code(), StatusCode::kDeviceLost);
}

TEST(IsolatedPlugin, AHangInExecuteIsADeadlineThenTheDeviceIsLost) {
  // The limit bounds every call, the loads and copies before the hanging
  // execute too: 2 s (stretched on a sanitized build), which the hang costs
  // once.
  const auto limit = conformance::scaled(std::chrono::milliseconds(2000));
  IsolatedFake fake(Opts{{"fake.misbehave", "execute_hang"}}, limit);
  ASSERT_TRUE(fake.plugin);
  std::vector<float> out;
  Status status = fake.add({1}, {2}, &out);
  EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded) << status.to_string();
  EXPECT_NE(status.message().find("did not answer execute within " +
                                  std::to_string(limit.count()) + " ms and was killed"),
            std::string::npos)
      << status.to_string();
  EXPECT_EQ(fake.plugin->check_available().code(), StatusCode::kDeviceLost);
}

TEST(IsolatedPlugin, AManifestCanAskForIsolation) {
  TempDir dir;
  const fs::path manifest = dir.copy_variant("fake");
  std::string text = read_text(manifest);
  text.insert(text.rfind('}'), ", \"isolation\": \"process\"");
  write_text(manifest, text);
  auto host = make_host(isolated_options({dir.path()}));
  auto plugin = host->load("fake");
  ASSERT_TRUE(plugin.ok()) << plugin.status().to_string();
  EXPECT_TRUE((*plugin)->isolated());
}

TEST(IsolatedPlugin, ABadIsolationFieldIsNamed) {
  TempDir dir;
  const fs::path manifest = dir.copy_variant("fake");
  std::string text = read_text(manifest);
  text.insert(text.rfind('}'), ", \"isolation\": \"sandbox\"");
  write_text(manifest, text);
  auto parsed = parse_manifest(manifest);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("isolation"), std::string::npos);
}

TEST(IsolatedPlugin, AMisspeltNameToIsolateIsAnError) {
  HostOptions options = isolated_options({variant_dir("fake")});
  options.isolated_plugins = {"fkae"};
  auto host = PluginHost::create(options);
  ASSERT_FALSE(host.ok());
  EXPECT_EQ(host.status().code(), StatusCode::kNotFound);
  EXPECT_NE(host.status().message().find("plugin 'fkae' is to be isolated, but no plugin of that "
                                         "name was found; found: fake"),
            std::string::npos)
      << host.status().to_string();
}

TEST(IsolatedPlugin, ACrashWhileLoadingIsARejection) {
  Misbehave fault("query_segv");
  HostOptions options;
  options.isolated_plugins = {"*"};
  expect_rejected(load_fake(options), {"isolated plugin process", "SIGSEGV"});
}

// ---- the wire ----

TEST(IsolationWire, ReadsWhatWasWritten) {
  wire::WireWriter w;
  w.u32(7);
  w.str("key");
  w.u64(UINT64_MAX);
  wire::WireReader r(w.view());
  EXPECT_EQ(r.u32("a"), 7u);
  EXPECT_EQ(r.str("b"), "key");
  EXPECT_EQ(r.u64("c"), UINT64_MAX);
  EXPECT_TRUE(r.finish("test").ok());
}

TEST(IsolationWire, ShortAndOversizedFieldsAreErrorsNamingTheField) {
  wire::WireWriter w;
  w.u64(1000);  // a string length with no bytes behind it
  wire::WireReader r(w.view());
  EXPECT_EQ(r.str("device name"), "");
  Status status = r.finish("reply");
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("device name claims 1000 bytes"), std::string::npos)
      << status.to_string();

  wire::WireWriter c;
  c.u64(uint64_t{1} << 40);  // a count no message could hold
  wire::WireReader rc(c.view());
  EXPECT_EQ(rc.count("device count", 1024, 8), 0u);
  EXPECT_NE(rc.finish("reply").message().find("device count is 1099511627776"), std::string::npos);

  wire::WireWriter t;
  t.u32(1);
  t.u32(2);
  wire::WireReader rt(t.view());
  rt.u32("a");
  EXPECT_NE(rt.finish("reply").message().find("4 unexpected bytes"), std::string::npos);
}

TEST(IsolationWire, LargeMessagesTravelInSharedMemory) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  std::vector<std::byte> big(3 * wire::kInlineMessageBytes + 5);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::byte>(i * 31);
  ASSERT_TRUE(wire::send_message(pair[0], big).ok());
  auto got = wire::receive_message(pair[1], 1000);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->bytes, big);
  // A cap below the size is refused before the copy.
  ASSERT_TRUE(wire::send_message(pair[0], big).ok());
  auto capped = wire::receive_message(pair[1], 1000, 1024);
  EXPECT_EQ(capped.status().code(), StatusCode::kResourceExhausted);
  ::close(pair[0]);
  auto closed = wire::receive_message(pair[1], 1000);
  EXPECT_EQ(closed.status().code(), StatusCode::kUnavailable);
  ::close(pair[1]);
}

}  // namespace
}  // namespace loom::host::testing
