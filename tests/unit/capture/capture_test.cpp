// Captures of plugin calls (issue 29): recording (in process and isolated),
// the frozen v1 fixture, replay (each execution, or every call in order).
// The reader and the comparison: capture_reader_test.cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "fake_sum_program.hpp"
#include "host/handles.hpp"
#include "host/recording/capture_model.hpp"
#include "host/recording/capture_recorder.hpp"
#include "loom/capture.hpp"
#include "loom/runtime.hpp"

namespace loom {
namespace {

namespace fs = std::filesystem;
namespace hc = host::capture;

fs::path capture_scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("loom_capture_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

fs::path relu_program() {
  // tests/fixtures/README.md: Relu on f32[3, 4, 5], a cpu-simd variant.
  return fs::path(LOOM_FIXTURE_DIR) / "programs" / "format_1_1_variants.loom";
}

NamedTensor relu_input(float shift) {
  std::vector<float> values(60);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - shift;
  return {"x", Tensor::copy_of(DType::kF32, {3, 4, 5},
                               std::as_bytes(std::span<const float>(values)))
                   .value()};
}

// Runs the Relu program on cpu-simd with recording on: two inputs, the
// first one twice.
void record_relu_runs(const fs::path& capture, bool isolated) {
  RuntimeOptions options;
  options.record_path = capture;
  if (isolated) options.isolated_plugins = {"cpu-simd"};
  auto runtime = Runtime::create(options);
  ASSERT_TRUE(runtime.ok()) << runtime.status().to_string();
  LoadOptions load;
  load.device = "cpu-simd";
  auto program = (*runtime)->load_program(relu_program(), load);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  for (float shift : {30.5f, 30.5f, 10.25f}) {
    NamedTensor x = relu_input(shift);
    auto out = (*program)->run("main", {&x, 1});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
  }
}

const hc::CallRecord* first_call(const hc::Capture& c, hc::CallKind kind, size_t* index = nullptr) {
  for (size_t i = 0; i < c.calls.size(); ++i) {
    if (c.calls[i].kind == kind) {
      if (index != nullptr) *index = i;
      return &c.calls[i];
    }
  }
  return nullptr;
}

std::vector<const hc::CallRecord*> calls_of(const hc::Capture& c, hc::CallKind kind) {
  std::vector<const hc::CallRecord*> out;
  for (const auto& r : c.calls) {
    if (r.kind == kind) out.push_back(&r);
  }
  return out;
}

// The recorded bytes of each execution are the ones sent and the Relu of
// them; handles are ids; equal inputs are stored once.
void expect_relu_capture(const hc::Capture& c, bool isolated) {
  ASSERT_FALSE(c.plugins.empty());
  size_t cpu = c.plugins.size();
  for (size_t i = 0; i < c.plugins.size(); ++i) {
    if (c.plugins[i].name == "cpu-simd") cpu = i;
  }
  ASSERT_LT(cpu, c.plugins.size());
  EXPECT_EQ(c.plugins[cpu].isolated, isolated);
  const hc::CallRecord* load = first_call(c, hc::CallKind::kExecutableLoad);
  ASSERT_NE(load, nullptr);
  EXPECT_EQ(load->loader_key, "cpu-simd");
  EXPECT_GE(load->object, 0);
  ASSERT_GE(load->payload, 0);
  EXPECT_FALSE(c.payloads[load->payload].bytes.empty());
  const auto executions = calls_of(c, hc::CallKind::kExecute);
  ASSERT_EQ(executions.size(), 3u);
  for (size_t run = 0; run < 3; ++run) {
    const hc::CallRecord& e = *executions[run];
    EXPECT_EQ(e.object, load->object);
    EXPECT_EQ(e.status_code, 0u);
    ASSERT_EQ(e.inputs.size(), 1u);
    ASSERT_EQ(e.outputs.size(), 1u);
    EXPECT_EQ(e.inputs[0].shape, (std::vector<int64_t>{3, 4, 5}));
    EXPECT_EQ(e.inputs[0].in_buffer, isolated);
    ASSERT_GE(e.inputs[0].payload, 0);
    ASSERT_GE(e.outputs[0].payload, 0);
    const float shift = run == 2 ? 10.25f : 30.5f;
    std::vector<float> in(60), out(60);
    std::memcpy(in.data(), c.payloads[e.inputs[0].payload].bytes.data(), 240);
    std::memcpy(out.data(), c.payloads[e.outputs[0].payload].bytes.data(), 240);
    for (size_t i = 0; i < 60; ++i) {
      EXPECT_EQ(in[i], static_cast<float>(i) - shift) << "run " << run << " element " << i;
      EXPECT_EQ(out[i], std::max(0.0f, in[i])) << "run " << run << " element " << i;
    }
  }
  EXPECT_EQ(executions[0]->inputs[0].payload, executions[1]->inputs[0].payload)
      << "equal inputs are one payload";
  EXPECT_NE(executions[0]->inputs[0].payload, executions[2]->inputs[0].payload);
  EXPECT_NE(first_call(c, hc::CallKind::kExecutableDestroy), nullptr);
  const hc::CallRecord* negotiate = first_call(c, hc::CallKind::kNegotiate);
  ASSERT_NE(negotiate, nullptr);
  EXPECT_EQ(negotiate->abi_min, 0x10000u);  // 1.0
  EXPECT_GE(negotiate->abi_max, negotiate->value);
  EXPECT_GE(negotiate->value, negotiate->abi_min);
}

TEST(CaptureRecording, InProcessRecordsLoadsAndExecutionsWithTheirBytes) {
  const fs::path path = capture_scratch("in_process.loomcap");
  record_relu_runs(path, false);
  auto capture = hc::read_capture_file(path);
  ASSERT_TRUE(capture.ok()) << capture.status().to_string();
  expect_relu_capture(*capture, false);
}

TEST(CaptureRecording, IsolatedPluginRecordsTensorsInItsBuffers) {
  const fs::path path = capture_scratch("isolated.loomcap");
  record_relu_runs(path, true);
  auto capture = hc::read_capture_file(path);
  ASSERT_TRUE(capture.ok()) << capture.status().to_string();
  expect_relu_capture(*capture, true);
  // The session copied the input into a buffer: that copy is recorded too.
  const hc::CallRecord* copy = first_call(*capture, hc::CallKind::kCopyFromHost);
  ASSERT_NE(copy, nullptr);
  EXPECT_GE(copy->payload, 0);
}

TEST(CaptureReplay, SamePluginReplaysEveryExecutionExactly) {
  const fs::path path = capture_scratch("replay_same.loomcap");
  record_relu_runs(path, false);
  for (bool isolate : {false, true}) {
    ReplayOptions options;
    options.isolate = isolate;
    auto report = replay_capture(path, options);
    ASSERT_TRUE(report.ok()) << report.status().to_string();
    EXPECT_EQ(report->plugin, "cpu-simd");
    EXPECT_EQ(report->device, "cpu-simd://0");
    EXPECT_EQ(report->executions, 3u);
    EXPECT_EQ(report->matched, 3u);
    EXPECT_TRUE(report->passed());
    EXPECT_FALSE(report->first_difference.has_value());
  }
}

// Rewrites one recorded output element, as a plugin that once computed
// something else would have recorded it.
void tamper_output(const fs::path& path, size_t execution, size_t element, float value) {
  auto capture = hc::read_capture_file(path);
  ASSERT_TRUE(capture.ok()) << capture.status().to_string();
  auto executions = calls_of(*capture, hc::CallKind::kExecute);
  ASSERT_GT(executions.size(), execution);
  ASSERT_GE(executions[execution]->outputs.size(), 1u);
  ASSERT_GE(executions[execution]->outputs[0].payload, 0);
  // A payload of its own, so that other executions keep theirs.
  hc::Payload p = capture->payloads[executions[execution]->outputs[0].payload];
  std::memcpy(p.bytes.data() + element * 4, &value, 4);
  p.hash = hc::payload_hash(p.bytes);
  capture->payloads.push_back(std::move(p));
  const_cast<hc::CallRecord*>(executions[execution])->outputs[0].payload =
      static_cast<int64_t>(capture->payloads.size() - 1);
  ASSERT_TRUE(hc::write_capture_file(*capture, path).ok());
}

TEST(CaptureReplay, ReportNamesTheFirstDifferingCallTensorAndWorstElement) {
  const fs::path path = capture_scratch("replay_differs.loomcap");
  record_relu_runs(path, false);
  // Execution 2's input is i - 10.25: element 17 is 6.75, element 40 is 29.75.
  tamper_output(path, 2, 17, 6.5f);
  tamper_output(path, 2, 40, 30.75f);
  ReplayOptions options;
  options.isolate = false;
  auto report = replay_capture(path, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->matched, 2u);
  EXPECT_EQ(report->differed, 1u);
  EXPECT_FALSE(report->passed());
  ASSERT_TRUE(report->first_difference.has_value());
  const ReplayedCall& call = report->calls[*report->first_difference];
  auto capture = hc::read_capture_file(path).value();
  size_t index = 0;
  size_t seen = 0;
  for (size_t i = 0; i < capture.calls.size(); ++i) {
    if (capture.calls[i].kind == hc::CallKind::kExecute && seen++ == 2) index = i;
  }
  EXPECT_EQ(call.call, index);
  EXPECT_EQ(call.outcome, "differs");
  ASSERT_TRUE(call.difference.has_value());
  EXPECT_EQ(call.difference->output, 0u);
  EXPECT_EQ(call.difference->index, 40u);  // |diff| 1 beats 0.25
  EXPECT_EQ(call.difference->elements_differing, 2u);
  EXPECT_EQ(call.difference->recorded, 30.75);
  EXPECT_EQ(call.difference->replayed, 29.75);
  // Within a tolerance that covers both, it passes.
  options.tolerances[DType::kF32] = FloatTolerance{0, 0.05, 0};
  auto loose = replay_capture(path, options);
  ASSERT_TRUE(loose.ok());
  EXPECT_TRUE(loose->passed()) << replay_report_json(*loose);
  EXPECT_NE(replay_report_junit(*report).find("<failure message=\"output 0"), std::string::npos);
}

TEST(CaptureReplay, AnExecutionWithoutRecordedOutputsIsSkippedNotMatched) {
  const fs::path path = capture_scratch("replay_no_outputs.loomcap");
  record_relu_runs(path, false);
  auto capture = hc::read_capture_file(path).value();
  for (auto& r : capture.calls) {
    if (r.kind == hc::CallKind::kExecute) r.outputs[0].payload = -1;
  }
  ASSERT_TRUE(hc::write_capture_file(capture, path).ok());
  ReplayOptions options;
  options.isolate = false;
  auto report = replay_capture(path, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->matched, 0u);
  EXPECT_EQ(report->skipped, 3u);
  EXPECT_FALSE(report->passed());
}

TEST(CaptureReplay, AnotherPluginCompilesTheRecordedGraphWhenTheCaptureHasIt) {
  // The frozen fixture recorded ONNX's pytorch-converted/test_Conv2d
  // compiled for cpu-simd (tests/fixtures/README.md).
  const fs::path path = fs::path(LOOM_FIXTURE_DIR) / "capture" / "v1.loomcap";
  ReplayOptions options;
  options.isolate = false;
  options.plugin = "fpga-stub";
  options.tolerances[DType::kF32] = FloatTolerance{0, 1e-4, 1e-6};
  auto report = replay_capture(path, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->device, "fpga-stub://0");
  EXPECT_EQ(report->matched, 1u) << replay_report_json(*report);
}

TEST(CaptureFixture, FrozenV1CaptureStillReads) {
  // Written by the v1 recorder (tests/fixtures/README.md); never regenerate.
  const fs::path path = fs::path(LOOM_FIXTURE_DIR) / "capture" / "v1.loomcap";
  auto capture = hc::read_capture_file(path);
  ASSERT_TRUE(capture.ok()) << capture.status().to_string();
  EXPECT_EQ(capture->schema_version, 1u);
  EXPECT_EQ(capture->calls.size(), 18u);
  size_t load_index = 0;
  const hc::CallRecord* load = first_call(*capture, hc::CallKind::kExecutableLoad, &load_index);
  ASSERT_NE(load, nullptr);
  EXPECT_EQ(load_index, 12u);
  EXPECT_EQ(capture->plugins[load->plugin].name, "cpu-simd");
  const hc::CallRecord* compile = first_call(*capture, hc::CallKind::kCompile);
  ASSERT_NE(compile, nullptr);
  EXPECT_EQ(capture->payloads[compile->result_payload].hash, capture->payloads[load->payload].hash);
  const hc::CallRecord* execute = first_call(*capture, hc::CallKind::kExecute);
  ASSERT_NE(execute, nullptr);
  ASSERT_EQ(execute->inputs.size(), 1u);
  EXPECT_EQ(execute->inputs[0].shape, (std::vector<int64_t>{2, 3, 7, 5}));
  EXPECT_EQ(execute->outputs[0].shape, (std::vector<int64_t>{2, 4, 5, 4}));
  EXPECT_EQ(capture->payloads[execute->outputs[0].payload].hash,
            "xxh3-128:df7e3e8b9a7d91d64e4ed378ebc31919");
  auto summary = summarize_capture(path);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->executions, 1u);
  std::ostringstream dump;
  ASSERT_TRUE(dump_capture(path, dump).ok());
  size_t lines = 0;
  for (char ch : dump.str()) lines += ch == '\n';
  EXPECT_EQ(lines, 19u);  // the header, then one line per call
}

// The fake plugin's sum program (a + b on f32[2, 3]) recorded on the fake
// plugin with `options`, run once with a = 1..6, b = 10.
fs::path record_fake_sum(const std::string& name,
                         std::vector<std::pair<std::string, std::string>> options) {
  const fs::path path = capture_scratch(name);
  RuntimeOptions o;
  o.plugin_paths = {fs::path(LOOM_TEST_PLUGIN_DIR) / "fake"};
  o.use_environment = false;
  o.use_default_folder = false;
  o.use_user_folder = false;
  o.plugin_options = std::move(options);
  o.record_path = path;
  auto runtime = Runtime::create(o);
  EXPECT_TRUE(runtime.ok()) << runtime.status().to_string();
  if (!runtime.ok()) return path;
  const auto bytes = testing::sum_program({{"fake", "fake:add"}});
  auto program = (*runtime)->load_program(bytes);
  EXPECT_TRUE(program.ok()) << program.status().to_string();
  if (!program.ok()) return path;
  auto session = (*program)->create_session("main").value();
  Tensor a = Tensor::zeros(DType::kF32, {2, 3}).value(), b = a;
  for (int i = 0; i < 6; ++i) {
    a.data_as<float>()[i] = 1.0f + static_cast<float>(i);
    b.data_as<float>()[i] = 10.0f;
  }
  EXPECT_TRUE(session->set_input(0, a).ok());
  EXPECT_TRUE(session->set_input(1, b).ok());
  Status st = session->run();
  EXPECT_TRUE(st.ok()) << st.to_string();
  return path;
}

TEST(CaptureRecording, AsynchronousExecutionIsRecordedWhenItsFenceCompletes) {
  const fs::path path = record_fake_sum("async.loomcap", {{"fake.async", "1"},
                                                         {"fake.separate_memory", "1"},
                                                         {"fake.async_delay_ms", "20"}});
  auto c = hc::read_capture_file(path);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  size_t execute_index = 0, wait_index = 0;
  const hc::CallRecord* e = first_call(*c, hc::CallKind::kExecute, &execute_index);
  ASSERT_NE(e, nullptr);
  ASSERT_NE(first_call(*c, hc::CallKind::kFenceWait, &wait_index), nullptr);
  EXPECT_GE(e->signal_fence, 0);
  // Outputs read after the 20 ms the device took: a + b, not the buffer's
  // state at submission.
  ASSERT_EQ(e->outputs.size(), 1u);
  ASSERT_GE(e->outputs[0].payload, 0);
  EXPECT_TRUE(e->outputs[0].in_buffer);
  std::vector<float> y(6);
  std::memcpy(y.data(), c->payloads[e->outputs[0].payload].bytes.data(), 24);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], 11.0f + static_cast<float>(i)) << i;
  // Recorded when the wait saw it complete, just before the wait itself,
  // with the device's 20 ms in its duration.
  EXPECT_EQ(execute_index + 1, wait_index);
  EXPECT_GE(e->duration_ns, 20'000'000u);
}

// Records on the fake plugin (asynchronous, separate memory, 30 ms per
// execution): add (a + b -> sum) signals f1; copy (sum -> out) waits for f1
// and signals f2; the host waits for f2 only, then reads out.
void record_chained(const fs::path& path) {
  {
    host::HostOptions options;
    options.search_paths = {fs::path(LOOM_TEST_PLUGIN_DIR) / "fake"};
    options.use_environment = false;
    options.use_default_folder = false;
    options.use_user_folder = false;
    options.plugin_options = {{"fake.async", "1"}, {"fake.separate_memory", "1"},
                              {"fake.async_delay_ms", "30"}};
    options.recorder = host::CaptureRecorder::create(path).value();
    auto plugin_host = host::PluginHost::create(options).value();
    auto plugin = plugin_host->load("fake").value();
    auto blob = [](std::string_view text) {
      return std::as_bytes(std::span<const char>(text.data(), text.size()));
    };
    auto add = host::Executable::load(plugin, 0, "fake", 1, blob("fake:add"), {}).value();
    auto copy = host::Executable::load(plugin, 0, "fake", 1, blob("fake:copy"), {}).value();
    std::vector<std::unique_ptr<host::DeviceBuffer>> buffers;
    for (int i = 0; i < 4; ++i) buffers.push_back(host::DeviceBuffer::allocate(plugin, 0, 24).value());
    const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {10, 10, 10, 10, 10, 10};
    ASSERT_TRUE(buffers[0]->copy_from_host(0, a, 24).ok());
    ASSERT_TRUE(buffers[1]->copy_from_host(0, b, 24).ok());
    auto f1 = host::Fence::create(plugin, 0).value();
    auto f2 = host::Fence::create(plugin, 0).value();
    const int64_t shape[2] = {2, 3};
    auto tensor = [&](const host::DeviceBuffer& buffer) {
      loom_tensor_t t{};
      t.struct_size = LOOM_TENSOR_STRUCT_SIZE;
      t.dtype = LOOM_DTYPE_F32;
      t.rank = 2;
      t.shape = shape;
      t.buffer = buffer.handle();
      t.byte_size = 24;
      return t;
    };
    loom_tensor_t ta = tensor(*buffers[0]), tb = tensor(*buffers[1]), tsum = tensor(*buffers[2]),
                  tout = tensor(*buffers[3]);
    const loom_tensor_t* add_in[] = {&ta, &tb};
    const loom_tensor_t* add_out[] = {&tsum};
    const loom_tensor_t* copy_in[] = {&tsum};
    const loom_tensor_t* copy_out[] = {&tout};
    loom_fence_t* waits[] = {f1->handle()};
    loom_execute_args_t first{};
    first.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
    first.executable = add->handle();
    first.input_count = 2;
    first.inputs = add_in;
    first.output_count = 1;
    first.outputs = add_out;
    first.signal_fence = f1->handle();
    ASSERT_TRUE(plugin->take(plugin->api().execute(&first)).ok());
    loom_execute_args_t second = first;
    second.executable = copy->handle();
    second.input_count = 1;
    second.inputs = copy_in;
    second.outputs = copy_out;
    second.wait_fence_count = 1;
    second.wait_fences = waits;
    second.signal_fence = f2->handle();
    ASSERT_TRUE(plugin->take(plugin->api().execute(&second)).ok());
    ASSERT_TRUE(f2->wait(UINT64_MAX).ok());
    float out[6] = {};
    ASSERT_TRUE(buffers[3]->copy_to_host(0, out, 24).ok());
    EXPECT_EQ(out[5], 16.0f);
  }
}

TEST(CaptureRecording, InputsBehindAWaitFenceAreRecordedOnceWritten) {
  // The copy's recorded input must be the sum, not the buffer as it was
  // when copy was submitted.
  const fs::path path = capture_scratch("chained.loomcap");
  record_chained(path);
  auto c = hc::read_capture_file(path);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto executions = calls_of(*c, hc::CallKind::kExecute);
  ASSERT_EQ(executions.size(), 2u);
  // Records appear as executions complete: add first, then copy.
  const hc::CallRecord& add_call = *executions[0];
  const hc::CallRecord& copy_call = *executions[1];
  ASSERT_EQ(add_call.outputs.size(), 1u);
  ASSERT_GE(add_call.outputs[0].payload, 0) << "add's outputs are read when copy waits for them";
  ASSERT_EQ(copy_call.inputs.size(), 1u);
  ASSERT_GE(copy_call.inputs[0].payload, 0);
  EXPECT_EQ(copy_call.inputs[0].payload, add_call.outputs[0].payload);
  std::vector<float> sum(6);
  std::memcpy(sum.data(), c->payloads[copy_call.inputs[0].payload].bytes.data(), 24);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(sum[i], 11.0f + static_cast<float>(i)) << i;
  EXPECT_EQ(copy_call.wait_fences, (std::vector<int64_t>{add_call.signal_fence}));
}

TEST(CaptureReplay, ACrashInTheReplayedPluginIsReportedAgainstItsCall) {
  const fs::path path = record_fake_sum("crash.loomcap", {});
  // Two executions: the capture's one, and a copy of it, so that the
  // second shows the replay going on in a fresh process after the crash.
  {
    auto twice = hc::read_capture_file(path).value();
    size_t at = 0;
    ASSERT_NE(first_call(twice, hc::CallKind::kExecute, &at), nullptr);
    twice.calls.insert(twice.calls.begin() + static_cast<std::ptrdiff_t>(at) + 1, twice.calls[at]);
    ASSERT_TRUE(hc::write_capture_file(twice, path).ok());
  }
  auto c = hc::read_capture_file(path).value();
  size_t execute_index = 0;
  ASSERT_NE(first_call(c, hc::CallKind::kExecute, &execute_index), nullptr);
  ReplayOptions options;
  options.runtime.plugin_paths = {fs::path(LOOM_TEST_PLUGIN_DIR) / "fake"};
  options.runtime.use_environment = false;
  options.runtime.use_default_folder = false;
  options.runtime.use_user_folder = false;
  auto good = replay_capture(path, options);
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_TRUE(good->passed()) << replay_report_json(*good);
  options.runtime.plugin_options = {{"fake.misbehave", "execute_segv"}};
  auto report = replay_capture(path, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_TRUE(report->first_difference.has_value());
  const ReplayedCall& call = report->calls[*report->first_difference];
  EXPECT_EQ(call.outcome, "crashed") << call.detail;
  EXPECT_EQ(call.call, execute_index);
  EXPECT_FALSE(report->passed());
  // The next execution ran in a fresh process (which crashed again: the
  // option is the plugin's), reported against its own call.
  ASSERT_EQ(report->calls.size(), 2u);
  EXPECT_EQ(report->calls[1].call, execute_index + 1);
  EXPECT_EQ(report->calls[1].outcome, "crashed") << report->calls[1].detail;
}

// ---- the calls mode: every recorded call again, in order ----

ReplayOptions fake_calls_options(bool isolate) {
  ReplayOptions options;
  options.runtime.plugin_paths = {fs::path(LOOM_TEST_PLUGIN_DIR) / "fake"};
  options.runtime.use_environment = false;
  options.runtime.use_default_folder = false;
  options.runtime.use_user_folder = false;
  options.isolate = isolate;
  options.all_calls = true;
  return options;
}

// The replayed calls of a kind, from a calls-mode report.
std::vector<const ReplayedCall*> replayed_of(const ReplayReport& report, std::string_view kind) {
  std::vector<const ReplayedCall*> out;
  for (const ReplayedCall& c : report.calls) {
    if (c.kind == kind) out.push_back(&c);
  }
  return out;
}

// The fake sum program staged through buffers on an asynchronous device:
// allocations, copies in and out, a fence, an execution on the buffers.
fs::path record_staged_sum(const std::string& name) {
  return record_fake_sum(name, {{"fake.async", "1"},
                                {"fake.separate_memory", "1"},
                                {"fake.async_delay_ms", "5"}});
}

TEST(CaptureReplayCalls, EveryCallOfAStagedAsynchronousRunMatches) {
  const fs::path path = record_staged_sum("calls_staged.loomcap");
  const hc::Capture c = hc::read_capture_file(path).value();
  size_t replayable = 0;
  for (const auto& r : c.calls) {
    switch (r.kind) {
      case hc::CallKind::kExecutableLoad: case hc::CallKind::kExecutableDestroy:
      case hc::CallKind::kExecute: case hc::CallKind::kBufferAllocate:
      case hc::CallKind::kBufferImport: case hc::CallKind::kBufferFree:
      case hc::CallKind::kCopyFromHost: case hc::CallKind::kCopyToHost:
      case hc::CallKind::kBufferMap: case hc::CallKind::kBufferUnmap:
      case hc::CallKind::kFenceCreate: case hc::CallKind::kFenceDestroy:
      case hc::CallKind::kFenceSignal: case hc::CallKind::kFenceWait:
      case hc::CallKind::kFenceQuery:
        ++replayable;
        break;
      default:
        break;
    }
  }
  for (bool isolate : {false, true}) {
    auto report = replay_capture(path, fake_calls_options(isolate));
    ASSERT_TRUE(report.ok()) << report.status().to_string();
    EXPECT_TRUE(report->all_calls);
    EXPECT_TRUE(report->passed()) << replay_report_json(*report);
    EXPECT_EQ(report->executions, 1u);
    EXPECT_EQ(report->replayed_calls, replayable);
    EXPECT_EQ(report->calls.size(), replayable);
    for (const char* kind : {"buffer_allocate", "buffer_copy_from_host", "fence_create", "execute",
                             "fence_wait", "buffer_copy_to_host", "buffer_free"}) {
      const auto calls = replayed_of(*report, kind);
      ASSERT_FALSE(calls.empty()) << kind << " is not replayed: " << replay_report_json(*report);
      for (const ReplayedCall* call : calls) EXPECT_EQ(call->outcome, "match") << kind;
    }
    // The execution ran on the replay's buffers: its outputs were compared.
    EXPECT_GE(replayed_of(*report, "execute")[0]->object, 0);
  }
}

// Gives call `index` (a copy to the host) a payload of its own with f32
// element `element` changed by `delta`.
void tamper_copy(const fs::path& path, size_t index, size_t element, float delta) {
  auto c = hc::read_capture_file(path).value();
  hc::CallRecord& r = c.calls[index];
  ASSERT_EQ(r.kind, hc::CallKind::kCopyToHost);
  ASSERT_GE(r.payload, 0);
  hc::Payload p = c.payloads[r.payload];
  float v = 0;
  std::memcpy(&v, p.bytes.data() + element * 4, 4);
  v += delta;
  std::memcpy(p.bytes.data() + element * 4, &v, 4);
  p.hash = hc::payload_hash(p.bytes);
  c.payloads.push_back(std::move(p));
  r.payload = static_cast<int64_t>(c.payloads.size() - 1);
  ASSERT_TRUE(hc::write_capture_file(c, path).ok());
}

TEST(CaptureReplayCalls, ACorruptedCopyToTheHostIsCaughtAtThatCall) {
  const fs::path path = record_staged_sum("calls_tampered.loomcap");
  size_t copy_index = 0;
  const hc::Capture c = hc::read_capture_file(path).value();
  ASSERT_NE(first_call(c, hc::CallKind::kCopyToHost, &copy_index), nullptr);
  tamper_copy(path, copy_index, 4, 0.5f);  // 15 recorded as 15.5
  auto report = replay_capture(path, fake_calls_options(false));
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_FALSE(report->passed());
  EXPECT_EQ(report->differed, 1u);
  ASSERT_TRUE(report->first_difference.has_value());
  const ReplayedCall& call = report->calls[*report->first_difference];
  EXPECT_EQ(call.call, copy_index);
  EXPECT_EQ(call.kind, "buffer_copy_to_host");
  EXPECT_EQ(call.outcome, "differs");
  // Compared as the f32 output that wrote those bytes, not as bytes.
  EXPECT_EQ(call.dtype, "f32");
  EXPECT_NE(call.detail.find(", output 0 of call "), std::string::npos) << call.detail;
  ASSERT_TRUE(call.difference.has_value());
  EXPECT_EQ(call.difference->index, 4u);
  EXPECT_EQ(call.difference->recorded, 15.5);
  EXPECT_EQ(call.difference->replayed, 15.0);
  for (const ReplayedCall* e : replayed_of(*report, "execute")) EXPECT_EQ(e->outcome, "match");
  // The output's dtype brings its tolerance with it.
  ReplayOptions loose = fake_calls_options(false);
  loose.tolerances[DType::kF32] = FloatTolerance{0, 0, 0.75};
  auto within = replay_capture(path, loose);
  ASSERT_TRUE(within.ok());
  EXPECT_TRUE(within->passed()) << replay_report_json(*within);
  EXPECT_NE(replay_report_junit(*report).find("buffer_copy_to_host buffer "), std::string::npos);
}

// A recording host on the fake plugin with `plugin_options`, the add
// executable loaded; `body` makes the calls.
void record_on_fake(const fs::path& path,
                    std::vector<std::pair<std::string, std::string>> plugin_options,
                    const std::function<void(const std::shared_ptr<host::LoadedPlugin>&,
                                             const host::Executable&)>& body) {
  host::HostOptions options;
  options.search_paths = {fs::path(LOOM_TEST_PLUGIN_DIR) / "fake"};
  options.use_environment = false;
  options.use_default_folder = false;
  options.use_user_folder = false;
  options.plugin_options = std::move(plugin_options);
  options.recorder = host::CaptureRecorder::create(path).value();
  auto plugin_host = host::PluginHost::create(options).value();
  auto plugin = plugin_host->load("fake").value();
  const std::string_view text = "fake:add";
  auto add = host::Executable::load(plugin, 0, "fake", 1,
                                    std::as_bytes(std::span<const char>(text.data(), text.size())),
                                    {})
                 .value();
  body(plugin, *add);
}

TEST(CaptureReplayCalls, AnImportIsReplayedOverOwnMemoryOrAnAllocationWhenIsolated) {
  // The host imports a page, writes a and b into it, runs add (a + b at
  // offsets 0, 24 -> sum at 48) asynchronously and reads the sum from the
  // page: only the execution's recorded tensors hold those bytes.
  const fs::path path = capture_scratch("calls_import.loomcap");
  record_on_fake(path, {{"fake.import", "1"}, {"fake.separate_memory", "1"}, {"fake.async", "1"}},
                 [](const auto& plugin, const host::Executable& add) {
    auto page = static_cast<float*>(std::aligned_alloc(4096, 4096));
    ASSERT_NE(page, nullptr);
    for (int k = 0; k < 12; ++k) page[k] = static_cast<float>(k);
    {
      auto buffer = host::DeviceBuffer::import_host(plugin, 0, page, 4096);
      ASSERT_TRUE(buffer.ok()) << buffer.status().to_string();
      auto fence = host::Fence::create(plugin, 0).value();
      const int64_t shape[2] = {2, 3};
      std::vector<host::PreparedCall::Operand> operands(3, {"t", DType::kF32, shape, 24});
      auto call = host::PreparedCall::make(add, operands, 2).value();
      for (size_t i = 0; i < 3; ++i) call->place_in_buffer(i, **buffer, 24 * i);
      ASSERT_TRUE(call->execute(fence.get()).ok());
      ASSERT_TRUE(fence->wait(UINT64_MAX).ok());
      EXPECT_EQ(page[12 + 5], 5.0f + 11.0f);
    }
    std::free(page);
  });
  const hc::Capture c = hc::read_capture_file(path).value();
  ASSERT_NE(first_call(c, hc::CallKind::kBufferImport), nullptr);
  for (bool isolate : {false, true}) {
    ReplayOptions options = fake_calls_options(isolate);
    options.runtime.plugin_options = {{"fake.import", "1"}, {"fake.separate_memory", "1"},
                                      {"fake.async", "1"}};
    auto report = replay_capture(path, options);
    ASSERT_TRUE(report.ok()) << report.status().to_string();
    // The recorded inputs, written into the imported memory before the
    // execution, make the output match: the host's writes were no calls.
    EXPECT_TRUE(report->passed()) << replay_report_json(*report);
    const auto imports = replayed_of(*report, "buffer_import_host");
    ASSERT_EQ(imports.size(), 1u);
    EXPECT_EQ(imports[0]->outcome, "match");
    EXPECT_EQ(imports[0]->detail.find("replayed as buffer_allocate") != std::string::npos, isolate)
        << imports[0]->detail;
    EXPECT_EQ(replayed_of(*report, "execute").size(), 1u);
  }
  // A plugin in this process that cannot import fails the import; the
  // calls on the buffer it was to make are skipped, saying why.
  auto refused = replay_capture(path, fake_calls_options(false));
  ASSERT_TRUE(refused.ok()) << refused.status().to_string();
  EXPECT_FALSE(refused->passed());
  ASSERT_TRUE(refused->first_difference.has_value());
  const ReplayedCall& import = refused->calls[*refused->first_difference];
  EXPECT_EQ(import.kind, "buffer_import_host");
  EXPECT_EQ(import.outcome, "failed");
  EXPECT_NE(import.detail.find("recorded ok, replayed unimplemented"), std::string::npos)
      << import.detail;
  const auto executions = replayed_of(*refused, "execute");
  ASSERT_EQ(executions.size(), 1u);
  EXPECT_EQ(executions[0]->outcome, "skipped");
  EXPECT_EQ(executions[0]->detail, "input 0: buffer 0 does not exist on the replayed plugin: making "
                                   "it (call " + std::to_string(import.call) + ") failed");
  const auto waits = replayed_of(*refused, "fence_wait");
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0]->outcome, "skipped");
  EXPECT_NE(waits[0]->detail.find("was not submitted"), std::string::npos) << waits[0]->detail;
}

TEST(CaptureReplayCalls, MappedBuffersAndChainedFencesReplay) {
  // The host writes a and b through maps, runs add synchronously, reads
  // the sum with a copy.
  const fs::path mapped = capture_scratch("calls_mapped.loomcap");
  record_on_fake(mapped, {},  // host-visible memory
                 [](const auto& plugin, const host::Executable& add) {
    std::vector<std::unique_ptr<host::DeviceBuffer>> buffers;
    for (int i = 0; i < 3; ++i) {
      buffers.push_back(host::DeviceBuffer::allocate(plugin, 0, 24, LOOM_BUFFER_HOST_VISIBLE).value());
    }
    for (int i = 0; i < 2; ++i) {
      auto p = buffers[i]->map();
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      for (int k = 0; k < 6; ++k) static_cast<float*>(*p)[k] = static_cast<float>(i * 10 + k);
      buffers[i]->unmap();
    }
    const int64_t shape[2] = {2, 3};
    std::vector<host::PreparedCall::Operand> operands(3, {"t", DType::kF32, shape, 24});
    auto call = host::PreparedCall::make(add, operands, 2).value();
    for (size_t i = 0; i < 3; ++i) call->place_in_buffer(i, *buffers[i]);
    ASSERT_TRUE(call->execute(nullptr).ok());
    float sum[6] = {};
    ASSERT_TRUE(buffers[2]->copy_to_host(0, sum, 24).ok());
    EXPECT_EQ(sum[5], 20.0f);
  });
  auto report = replay_capture(mapped, fake_calls_options(false));
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_TRUE(report->passed()) << replay_report_json(*report);
  EXPECT_EQ(replayed_of(*report, "buffer_map").size(), 2u);
  EXPECT_EQ(replayed_of(*report, "buffer_unmap").size(), 2u);
  EXPECT_EQ(replayed_of(*report, "buffer_copy_to_host").size(), 1u);

  // add signals f1, copy waits for f1: replayed in the capture's order.
  const fs::path chained = capture_scratch("calls_chained.loomcap");
  record_chained(chained);
  ReplayOptions options = fake_calls_options(true);
  options.runtime.plugin_options = {{"fake.async", "1"}, {"fake.separate_memory", "1"}};
  auto again = replay_capture(chained, options);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_TRUE(again->passed()) << replay_report_json(*again);
  EXPECT_EQ(again->executions, 2u);
  EXPECT_EQ(replayed_of(*again, "fence_wait").size(), 1u);
}

TEST(CaptureReplayCalls, BadCallsAreOneLineErrorsNamingTheCall) {
  const fs::path path = record_staged_sum("calls_bad.loomcap");
  const hc::Capture good = hc::read_capture_file(path).value();
  size_t copy = 0, execute = 0;
  ASSERT_NE(first_call(good, hc::CallKind::kCopyFromHost, &copy), nullptr);
  ASSERT_NE(first_call(good, hc::CallKind::kExecute, &execute), nullptr);
  auto expect_error = [&](const hc::Capture& c, const std::string& name, const std::string& text) {
    const fs::path bad = capture_scratch(name);
    ASSERT_TRUE(hc::write_capture_file(c, bad).ok());
    auto report = replay_capture(bad, fake_calls_options(false));
    ASSERT_FALSE(report.ok()) << name;
    const std::string message = report.status().to_string();
    EXPECT_NE(message.find(text), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    // The executions mode does not read those calls.
    ReplayOptions executions = fake_calls_options(false);
    executions.all_calls = false;
    EXPECT_TRUE(replay_capture(bad, executions).ok()) << name;
  };
  {
    hc::Capture c = good;
    c.calls[copy].offset = 8;  // 24 bytes at 8 of a 24-byte buffer
    expect_error(c, "calls_bad_range.loomcap",
                 "call " + std::to_string(copy) + " (buffer_copy_from_host): copies 24 bytes at offset 8 "
                 "of buffer " + std::to_string(c.calls[copy].object) + ", which has 24 bytes");
  }
  {
    hc::Capture c = good;
    c.calls[copy].object = 99;
    expect_error(c, "calls_bad_id.loomcap",
                 "(buffer_copy_from_host): buffer 99 was not made by an earlier call, or was freed");
  }
  {
    hc::Capture c = good;
    c.calls[execute].inputs[0].offset = 1;
    expect_error(c, "calls_bad_tensor.loomcap",
                 "call " + std::to_string(execute) + " (execute): input 0 (24 bytes at offset 1) "
                 "lies outside buffer");
  }
  {
    hc::Capture c = good;
    c.calls[execute].signal_fence = 7;
    expect_error(c, "calls_bad_fence.loomcap", "(execute): fence 7 was not made by an earlier call");
  }
}

TEST(CaptureReplayCalls, AfterACrashTheLostBuffersAreSkippedWithTheReason) {
  const fs::path path = record_fake_sum("calls_crash.loomcap", {{"fake.separate_memory", "1"}});
  const hc::Capture c = hc::read_capture_file(path).value();
  size_t execute = 0, copy_out = 0;
  ASSERT_NE(first_call(c, hc::CallKind::kExecute, &execute), nullptr);
  ASSERT_NE(first_call(c, hc::CallKind::kCopyToHost, &copy_out), nullptr);
  ASSERT_GT(copy_out, execute);
  ReplayOptions options = fake_calls_options(true);
  options.runtime.plugin_options = {{"fake.misbehave", "execute_segv"}};
  auto report = replay_capture(path, options);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_FALSE(report->passed());
  ASSERT_TRUE(report->first_difference.has_value());
  const ReplayedCall& crashed = report->calls[*report->first_difference];
  EXPECT_EQ(crashed.call, execute);
  EXPECT_EQ(crashed.outcome, "crashed") << crashed.detail;
  // The fresh process has none of the old buffers: the copy out is skipped.
  const auto copies = replayed_of(*report, "buffer_copy_to_host");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0]->call, copy_out);
  EXPECT_EQ(copies[0]->outcome, "skipped");
  EXPECT_NE(copies[0]->detail.find("the plugin was lost at call " + std::to_string(execute) +
                                   ": its contents are gone"),
            std::string::npos)
      << copies[0]->detail;
}

}  // namespace
}  // namespace loom
