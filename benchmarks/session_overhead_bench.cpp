// Per-run overhead of the session API.
//
// BM_SessionRun runs a one-op program (a cpu-simd Relu over N floats) through
// Session::run; BM_DirectExecute calls the same executable through the plugin
// ABI with prepared arguments, in the same process. The difference between
// the two is what the runtime adds per run (target: <= 1 us).
//
// Isolation (core/src/host/isolation/remote_plugin.hpp): BM_BufferExecute calls
// execute on tensors in device buffers, with cpu-simd in this process
// (second argument 0) and in a loom-plugin-host process of its own (1); the
// difference is the round trip an isolated plugin adds per call (target:
// <= 20 us), and since tensors stay in shared memory it must not grow with
// the tensor's size. BM_SessionRun/N/1 is the whole run with cpu-simd
// isolated: the session then also copies inputs into and outputs out of the
// shared buffers.
//
// Recording (core/src/host/recording/capture_recorder.hpp): BM_SessionRun's
// third argument 1 runs the same session with RuntimeOptions::record_path
// set, so every execute goes through the recording table, which hashes the
// input and output bytes and appends a call record; the difference with
// third argument 0 is the recording overhead per execute. Fixed iteration
// counts keep the capture (written at the end, into the temporary folder)
// small.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "host/handles.hpp"
#include "host/plugin_host.hpp"
#include "loom/runtime.hpp"
#include "program_builder/demo_program.hpp"

namespace {

struct Fixture {
  std::unique_ptr<loom::Runtime> runtime;
  std::vector<std::byte> file;
  std::shared_ptr<loom::Program> program;
  std::unique_ptr<loom::Session> session;
  std::vector<float> input;
};

bool setup(Fixture& f, int64_t n, benchmark::State& state, bool isolated = false,
           bool recorded = false) {
  loom::RuntimeOptions options;
  if (isolated) options.isolated_plugins = {"cpu-simd"};
  if (recorded) {
    options.record_path = std::filesystem::temp_directory_path() / "loom_session_overhead.loomcap";
  }
  auto runtime = loom::Runtime::create(options);
  // Compiled by cpu-simd in this process, whichever way the timed runtime
  // loads it.
  auto compiler = loom::Runtime::create();
  auto writer = compiler.ok() ? loom::tools::build_single_op_program(**compiler, n)
                              : loom::Result<loom::ProgramWriter>(compiler.status());
  if (!runtime.ok() || !writer.ok()) {
    state.SkipWithError("cannot create the runtime or the program");
    return false;
  }
  f.runtime = std::move(*runtime);
  f.file = writer->write_buffer().value();
  auto program = f.runtime->load_program(f.file, {"cpu-simd://0"});
  if (!program.ok()) {
    state.SkipWithError(program.status().to_string().c_str());
    return false;
  }
  f.program = *program;
  f.session = f.program->create_session("main").value();
  f.input.assign(static_cast<size_t>(n), -0.5f);
  for (size_t i = 0; i < f.input.size(); i += 2) f.input[i] = 0.5f;
  (void)f.session->bind_input(0, f.input.data(), f.input.size() * sizeof(float));
  return true;
}

void BM_SessionRun(benchmark::State& state) {
  Fixture f;
  if (!setup(f, state.range(0), state, state.range(1) != 0, state.range(2) != 0)) return;
  for (auto _ : state) {
    loom::Status st = f.session->run();
    if (!st.ok()) {
      state.SkipWithError(st.to_string().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_DirectExecute(benchmark::State& state) {
  Fixture f;
  if (!setup(f, state.range(0), state)) return;
  auto plugin = f.runtime->plugin_host().plugin_for_key("cpu-simd");
  auto blob = f.program->reader().artifact_content(0);
  if (!plugin.ok() || !blob.ok()) {
    state.SkipWithError("cpu-simd plugin or blob missing");
    return;
  }
  auto exe = loom::host::Executable::load(*plugin, 0, "cpu-simd", 1, *blob, {});
  if (!exe.ok()) {
    state.SkipWithError(exe.status().to_string().c_str());
    return;
  }
  std::vector<float> output(f.input.size());
  int64_t shape[1] = {state.range(0)};
  loom_tensor_t in{}, out{};
  for (auto* t : {&in, &out}) {
    t->struct_size = LOOM_TENSOR_STRUCT_SIZE;
    t->dtype = LOOM_DTYPE_F32;
    t->rank = 1;
    t->shape = shape;
    t->byte_size = f.input.size() * sizeof(float);
  }
  in.host_data = f.input.data();
  out.host_data = output.data();
  const loom_tensor_t* ins[] = {&in};
  const loom_tensor_t* outs[] = {&out};
  loom_execute_args_t args{};
  args.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
  args.executable = (*exe)->handle();
  args.input_count = 1;
  args.inputs = ins;
  args.output_count = 1;
  args.outputs = outs;
  const loom_plugin_api_t& api = (*plugin)->api();
  for (auto _ : state) {
    loom_status_t* st = api.execute(&args);
    if (st != nullptr) {
      api.status_destroy(st);
      state.SkipWithError("execute failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_BufferExecute(benchmark::State& state) {
  Fixture f;
  const bool isolated = state.range(1) != 0;
  if (!setup(f, state.range(0), state, isolated)) return;
  auto plugin = f.runtime->plugin_host().plugin_for_key("cpu-simd");
  auto blob = f.program->reader().artifact_content(0);
  if (!plugin.ok() || !blob.ok() || (*plugin)->isolated() != isolated) {
    state.SkipWithError("cpu-simd plugin or blob missing, or not isolated as asked");
    return;
  }
  auto exe = loom::host::Executable::load(*plugin, 0, "cpu-simd", 1, *blob, {});
  const uint64_t bytes = f.input.size() * sizeof(float);
  auto in_buffer = loom::host::DeviceBuffer::allocate(*plugin, 0, bytes);
  auto out_buffer = loom::host::DeviceBuffer::allocate(*plugin, 0, bytes);
  if (!exe.ok() || !in_buffer.ok() || !out_buffer.ok() ||
      !(*in_buffer)->copy_from_host(0, f.input.data(), bytes).ok()) {
    state.SkipWithError("cannot load the executable or make its buffers");
    return;
  }
  int64_t shape[1] = {state.range(0)};
  loom_tensor_t in{}, out{};
  for (auto* t : {&in, &out}) {
    t->struct_size = LOOM_TENSOR_STRUCT_SIZE;
    t->dtype = LOOM_DTYPE_F32;
    t->rank = 1;
    t->shape = shape;
    t->byte_size = bytes;
  }
  in.buffer = (*in_buffer)->handle();
  out.buffer = (*out_buffer)->handle();
  const loom_tensor_t* ins[] = {&in};
  const loom_tensor_t* outs[] = {&out};
  loom_execute_args_t args{};
  args.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
  args.executable = (*exe)->handle();
  args.input_count = 1;
  args.inputs = ins;
  args.output_count = 1;
  args.outputs = outs;
  const loom_plugin_api_t& api = (*plugin)->api();
  for (auto _ : state) {
    loom_status_t* st = api.execute(&args);
    if (st != nullptr) {
      state.SkipWithError((*plugin)->take(st).to_string().c_str());
      break;
    }
  }
  std::vector<float> result(f.input.size());
  if (!(*out_buffer)->copy_to_host(0, result.data(), bytes).ok() || result[0] != 0.5f ||
      result[1] != 0.0f) {
    state.SkipWithError("wrong result");
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

BENCHMARK(BM_DirectExecute)->Arg(16)->Arg(4096);
BENCHMARK(BM_SessionRun)
    ->ArgNames({"n", "isolated", "recorded"})
    ->Args({16, 0, 0})
    ->Args({4096, 0, 0})
    ->Args({16, 1, 0})
    ->Args({4096, 1, 0});
BENCHMARK(BM_SessionRun)
    ->ArgNames({"n", "isolated", "recorded"})
    ->Args({16, 0, 0})
    ->Args({16, 0, 1})
    ->Args({4096, 0, 0})
    ->Args({4096, 0, 1})
    ->Args({1 << 20, 0, 0})
    ->Args({1 << 20, 0, 1})
    ->Iterations(5000);
BENCHMARK(BM_BufferExecute)
    ->ArgNames({"n", "isolated"})
    ->Args({16, 0})
    ->Args({16, 1})
    ->Args({1 << 20, 0})
    ->Args({1 << 20, 1});

}  // namespace

BENCHMARK_MAIN();
