// The state behind a Session: session_prepare.cpp makes it (every buffer,
// staging plan, fence and operand address, once), session.cpp runs it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/aligned_bytes.hpp"
#include "runtime/open_function.hpp"
#include "runtime/program_state.hpp"
#include "runtime/staged_function.hpp"

namespace loom {
namespace runtime {

// The prepared arguments of one delegate call.
struct DelegateCall {
  std::shared_ptr<const runtime::LoadedDelegate> delegate;
  size_t step = 0;  // in the plan
  // The operands as the plugin sees them (inputs, then outputs), and the
  // execution itself; null for a "loom.reference" delegate.
  std::unique_ptr<host::PreparedCall> prepared;
  // Separate device memory: one buffer per tensor (null for a tensor in the
  // imported arena), staged in and out.
  std::vector<std::unique_ptr<host::DeviceBuffer>> buffers;
  std::vector<uint32_t> stage_in;   // tensor indices copied in before execute
  std::vector<uint32_t> stage_out;  // tensor indices copied out after
  std::vector<void*> host_pointers; // per tensor, for staging
  uint32_t imported = 0;  // tensors passed in the imported arena, not staged
  // A "loom.reference" delegate: the session of its function, run on the
  // operands' host pointers.
  std::unique_ptr<Session::State> nested;
  // An asynchronous device's execution of this run, until completed.
  std::unique_ptr<host::Fence> fence;
  // The fence is made once, with the session, and re-armed by each execute
  // (the plugin speaks ABI 1.1); otherwise each run makes a new one.
  bool fence_reused = false;
  // Executed with `fence` and not yet seen finished: a run that failed or
  // timed out may leave it running on the device, still using `buffers`,
  // the imported arena, the fence and the executable. Nothing it uses may be
  // freed, nor the fence handed to execute again, until it finished
  // (drain_session; plugin.h, "Lifetime of what an execution uses").
  bool in_flight = false;
  uint64_t submitted_ns = 0;  // for its trace span
};

}  // namespace runtime

struct Session::State {
  std::shared_ptr<Program::State> program;
  const runtime::FunctionPlan* plan = nullptr;
  // A session of an open-shape function: it runs sessions of the function's
  // specializations, and nothing below is used.
  std::unique_ptr<runtime::OpenSession> open;
  // A session of a staged function (control flow): it runs the steps, and
  // nothing below is used either.
  std::unique_ptr<runtime::StagedSession> staged;
  runtime::AlignedBytes arena;
  uint64_t arena_bytes = 0;  // allocated, a multiple of kArenaImportAlignment
  // The arena imported as a buffer of a device (buffer_import_host), made at
  // the first call on that device; a null buffer when the import failed.
  // Destroyed before the arena.
  struct ArenaImport {
    const host::LoadedPlugin* plugin = nullptr;
    size_t device = 0;
    std::unique_ptr<host::DeviceBuffer> buffer;
  };
  std::vector<ArenaImport> arena_imports;
  std::vector<runtime::AlignedBytes> owned;
  std::vector<Tensor> staging;  // one per input
  std::vector<Tensor> outputs;  // one per output
  std::vector<void*> value_data;  // current address of each value
  // Per step: kernel operands, or the index of the delegate call.
  std::vector<std::vector<kernels::TensorRef>> kernel_inputs;
  std::vector<std::vector<kernels::TensorRef>> kernel_outputs;
  std::vector<int32_t> step_call;  // index into calls, or -1
  std::vector<runtime::DelegateCall> calls;
  // For each function input: every place that holds its address, and the
  // address itself (staging, or caller memory from bind_input).
  std::vector<std::vector<void**>> input_users;
  std::vector<void*> input_address;
  // Program::State::placement_generation when the calls were prepared.
  uint64_t generation = 0;
  std::chrono::milliseconds run_timeout{0};
  // Calls replaced after a fallback: a hung device may still use their
  // buffers, so they live as long as the session.
  std::vector<runtime::DelegateCall> retired;
  // run_async's thread; made at the first call.
  std::shared_ptr<RunHandle::Runner> runner;
  // Per step (and one more for the end of the run): the asynchronous calls
  // to complete first, because the step touches memory they read or write.
  std::vector<std::vector<uint32_t>> wait_before;
  // Outputs whose value is not stored in the output tensor itself.
  std::vector<std::pair<uint32_t, uint32_t>> output_copies;  // (output, value)
};

namespace runtime {

// Everything a run of `plan` touches, allocated and wired up once.
Result<std::unique_ptr<Session::State>> make_session_state(std::shared_ptr<Program::State> program,
                                                           const FunctionPlan* plan);

// Waits for every execution a failed or timed-out run left in flight (of
// `s`, its retired calls and nested sessions), each up to the run timeout
// (no limit when it is 0). False when one is still running after that: the
// state must then be kept, never destroyed, since the device may still use
// its buffers, arena, fences and executables.
bool drain_session(Session::State& s);

// Re-prepares the calls whose delegate a fallback moved since they were
// prepared. The old calls are retired, not destroyed.
Status refresh_calls(Session::State& s);

}  // namespace runtime
}  // namespace loom
