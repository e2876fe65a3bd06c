// Session: the per-thread state of running one function. Everything a run
// touches is allocated and wired up here, once; run() only calls kernels and
// delegates with prepared arguments.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cstdlib>
#include <cstring>

#include "host/log_channel.hpp"
#include "runtime/aligned_bytes.hpp"
#include "runtime/program_state.hpp"

namespace loom {
namespace {

using runtime::AlignedBytes;
using runtime::allocate_aligned;

// The prepared arguments of one delegate call.
struct DelegateCall {
  std::shared_ptr<const runtime::LoadedDelegate> delegate;
  size_t step = 0;  // in the plan
  std::vector<int64_t> shapes;  // all shapes, back to back
  std::vector<loom_tensor_t> tensors;
  std::vector<const loom_tensor_t*> input_ptrs;
  std::vector<const loom_tensor_t*> output_ptrs;
  // Separate device memory: one buffer per tensor (null for a tensor in the
  // imported arena), staged in and out.
  std::vector<std::unique_ptr<host::DeviceBuffer>> buffers;
  std::vector<uint32_t> stage_in;   // tensor indices copied in before execute
  std::vector<uint32_t> stage_out;  // tensor indices copied out after
  std::vector<void*> host_pointers; // per tensor, for staging
  uint32_t imported = 0;  // tensors passed in the imported arena, not staged
  loom_execute_args_t args{};
  // A "loom.reference" delegate: the session of its function, run on the
  // operands' host pointers.
  std::unique_ptr<Session::State> nested;
  // An asynchronous device's execution of this run, until completed.
  std::unique_ptr<host::Fence> fence;
  // The fence is made once, with the session, and re-armed by each execute
  // (the plugin speaks ABI 1.1); otherwise each run makes a new one.
  bool fence_reused = false;
  uint64_t submitted_ns = 0;  // for its trace span
};

}  // namespace

struct Session::State {
  std::shared_ptr<Program::State> program;
  const runtime::FunctionPlan* plan = nullptr;
  AlignedBytes arena;
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
  std::vector<AlignedBytes> owned;
  std::vector<Tensor> staging;  // one per input
  std::vector<Tensor> outputs;  // one per output
  std::vector<void*> value_data;  // current address of each value
  // Per step: kernel operands, or the index of the delegate call.
  std::vector<std::vector<kernels::TensorRef>> kernel_inputs;
  std::vector<std::vector<kernels::TensorRef>> kernel_outputs;
  std::vector<int32_t> step_call;  // index into calls, or -1
  std::vector<DelegateCall> calls;
  // For each function input: every place that holds its address, and the
  // address itself (staging, or caller memory from bind_input).
  std::vector<std::vector<void**>> input_users;
  std::vector<void*> input_address;
  // Program::State::placement_generation when the calls were prepared.
  uint64_t generation = 0;
  std::chrono::milliseconds run_timeout{0};
  // Calls replaced after a fallback: a hung device may still use their
  // buffers, so they live as long as the session.
  std::vector<DelegateCall> retired;
  // run_async's thread; made at the first call.
  std::shared_ptr<RunHandle::Runner> runner;
  // Per step (and one more for the end of the run): the asynchronous calls
  // to complete first, because the step touches memory they read or write.
  std::vector<std::vector<uint32_t>> wait_before;
  // Outputs whose value is not stored in the output tensor itself.
  std::vector<std::pair<uint32_t, uint32_t>> output_copies;  // (output, value)
};

namespace {
Result<std::unique_ptr<Session::State>> make_state(std::shared_ptr<Program::State> program,
                                                   const runtime::FunctionPlan* plan);
Status run_session(Session::State& s);
Status run_steps(Session::State& s, Trace* trace, int32_t* failed_call);
Status complete(Session::State& s, size_t index, Trace* trace, int32_t* failed_call);
}  // namespace

// The thread behind Session::run_async: runs one requested run at a time.
struct RunHandle::Runner {
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t requested = 0;  // runs asked for
  uint64_t finished = 0;   // runs done
  Status result;           // of run `finished`
  bool stop = false;
  std::thread thread;

  bool busy() {
    std::lock_guard<std::mutex> lock(mutex);
    return requested != finished;
  }
};

Session::Session(std::unique_ptr<State> state) : state_(std::move(state)) {}

Session::~Session() {
  if (state_ != nullptr && state_->runner != nullptr) {
    RunHandle::Runner& r = *state_->runner;
    {
      std::lock_guard<std::mutex> lock(r.mutex);
      r.stop = true;
    }
    r.cv.notify_all();
    r.thread.join();  // after the run in flight, if any
  }
}

Result<RunHandle> Session::run_async() {
  State& s = *state_;
  if (s.runner == nullptr) {
    s.runner = std::make_shared<RunHandle::Runner>();
    RunHandle::Runner* r = s.runner.get();
    State* state = &s;
    s.runner->thread = std::thread([r, state] {
      std::unique_lock<std::mutex> lock(r->mutex);
      while (true) {
        r->cv.wait(lock, [r] { return r->stop || r->requested != r->finished; });
        if (r->requested == r->finished) return;  // stopping, nothing asked
        lock.unlock();
        Status st = run_session(*state);
        lock.lock();
        r->result = std::move(st);
        r->finished = r->requested;
        r->cv.notify_all();
      }
    });
  }
  RunHandle::Runner& r = *s.runner;
  RunHandle handle;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.requested != r.finished) {
      return failed_precondition("session of function '" + s.plan->info.name +
                                 "': a run is in flight; wait for its handle first");
    }
    handle.run_ = ++r.requested;
  }
  handle.runner_ = s.runner;
  r.cv.notify_all();
  return handle;
}

Status RunHandle::wait(std::chrono::milliseconds timeout) const {
  if (runner_ == nullptr) return failed_precondition("RunHandle: not a run (default-constructed)");
  std::unique_lock<std::mutex> lock(runner_->mutex);
  const auto finished = [this] { return runner_->finished >= run_; };
  if (timeout == std::chrono::milliseconds::max()) {
    runner_->cv.wait(lock, finished);
  } else if (!runner_->cv.wait_for(lock, timeout, finished)) {
    return deadline_exceeded("the run is still going after " + std::to_string(timeout.count()) +
                             " ms");
  }
  return runner_->result;
}

bool RunHandle::done() const {
  if (runner_ == nullptr) return false;
  std::lock_guard<std::mutex> lock(runner_->mutex);
  return runner_->finished >= run_;
}

const FunctionInfo& Session::function() const { return state_->plan->info; }

std::vector<DelegateTransfers> Session::transfers() const {
  std::vector<DelegateTransfers> out;
  for (const DelegateCall& call : state_->calls) {
    DelegateTransfers t;
    t.delegate = call.delegate->name;
    t.device = call.delegate->device_uri;
    if (call.delegate->host_execute) {
      t.host_pointers = static_cast<uint32_t>(call.host_pointers.size());
    } else {
      t.imported = call.imported;
      t.staged_in = static_cast<uint32_t>(call.stage_in.size());
      t.staged_out = static_cast<uint32_t>(call.stage_out.size());
      t.constants = static_cast<uint32_t>(call.buffers.size()) - t.imported - t.staged_in -
                    t.staged_out;
    }
    out.push_back(std::move(t));
  }
  return out;
}
size_t Session::output_count() const { return state_->outputs.size(); }
const Tensor& Session::output(size_t index) const { return state_->outputs[index]; }

Result<const Tensor*> Session::output(std::string_view name) const {
  const auto& outs = state_->plan->info.outputs;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].name == name) return &state_->outputs[i];
  }
  return not_found("function '" + state_->plan->info.name + "' has no result '" +
                   std::string(name) + "'");
}

namespace {

// The arena's alignment and size granule, so that a device can import it
// whole: host-pointer imports ask for page-aligned address and size (Vulkan's
// minImportedHostPointerAlignment is 4096 on common drivers).
constexpr uint64_t kArenaImportAlignment = 4096;
// A value in an imported arena is handed to the device as an offset into it
// when the offset is a multiple of this: Vulkan's largest allowed
// minStorageBufferOffsetAlignment. (The compiler's memory plans align every
// slot to it; older files' slots may fall back to staging.)
constexpr uint64_t kImportedOffsetAlignment = 256;

// The arena as a buffer of the delegate's device, imported once per session
// and device; nullptr when the device cannot import it (the caller stages).
host::DeviceBuffer* imported_arena(Session::State& s, const runtime::LoadedDelegate& delegate) {
  for (auto& i : s.arena_imports) {
    if (i.plugin == delegate.plugin.get() && i.device == delegate.device_index) {
      return i.buffer.get();
    }
  }
  Session::State::ArenaImport made;
  made.plugin = delegate.plugin.get();
  made.device = delegate.device_index;
  auto buffer = host::DeviceBuffer::import_host(delegate.plugin, delegate.device_index,
                                                s.arena.get(), s.arena_bytes);
  if (buffer.ok()) {
    made.buffer = std::move(*buffer);
  } else {
    if (s.program->channel != nullptr) {
      s.program->channel->write(LOOM_LOG_DEBUG, "loom",
                                "the session's arena is staged through copies on " +
                                    delegate.device_uri + ": " + buffer.status().to_string());
    }
  }
  s.arena_imports.push_back(std::move(made));
  return s.arena_imports.back().buffer.get();
}

// Prepares the call of step `step` to `delegate`: tensors on host pointers,
// or device buffers with their staging (constants are copied in once, here).
Status prepare_call(Session::State& s, size_t step_index,
                    std::shared_ptr<const runtime::LoadedDelegate> delegate_ptr,
                    DelegateCall& call) {
  const runtime::FunctionPlan* plan = s.plan;
  const runtime::StepPlan& step = plan->steps[step_index];
  const runtime::LoadedDelegate& delegate = *delegate_ptr;
  call.delegate = std::move(delegate_ptr);
  call.step = step_index;
  size_t n = step.inputs.size() + step.outputs.size();
  if (delegate.reference_function >= 0) {
    const runtime::FunctionPlan& fn =
        s.program->functions[static_cast<size_t>(delegate.reference_function)];
    // Load checked this; a fallback to the reference variant is checked again.
    LOOM_RETURN_IF_ERROR(runtime::check_reference_call(*plan, step, fn, delegate.name));
    for (size_t t = 0; t < n; ++t) {
      const bool is_input = t < step.inputs.size();
      const uint32_t v = is_input ? step.inputs[t] : step.outputs[t - step.inputs.size()];
      call.host_pointers.push_back(s.value_data[v]);
    }
    LOOM_ASSIGN_OR_RETURN(call.nested, make_state(s.program, &fn));
    return Status();
  }
  size_t dims = 0;
  for (uint32_t v : step.inputs) dims += plan->values[v].shape.size();
  for (uint32_t v : step.outputs) dims += plan->values[v].shape.size();
  call.shapes.reserve(dims);
  call.tensors.resize(n);
  call.host_pointers.resize(n);
  for (size_t t = 0; t < n; ++t) {
    bool is_input = t < step.inputs.size();
    uint32_t v = is_input ? step.inputs[t] : step.outputs[t - step.inputs.size()];
    const runtime::ValuePlan& vp = plan->values[v];
    if (vp.shape.size() > LOOM_MAX_RANK) {
      return invalid_argument("delegate '" + delegate.name + "' operand '" + vp.name +
                              "' has rank " + std::to_string(vp.shape.size()) +
                              ", the ABI allows " + std::to_string(LOOM_MAX_RANK));
    }
    loom_tensor_t& lt = call.tensors[t];
    lt.struct_size = LOOM_TENSOR_STRUCT_SIZE;
    lt.dtype = static_cast<loom_dtype_t>(vp.dtype);
    lt.rank = static_cast<uint32_t>(vp.shape.size());
    lt.shape = call.shapes.data() + call.shapes.size();
    call.shapes.insert(call.shapes.end(), vp.shape.begin(), vp.shape.end());
    lt.byte_size = vp.bytes;
    call.host_pointers[t] = s.value_data[v];
    host::DeviceBuffer* imported = nullptr;
    if (!delegate.host_execute && delegate.host_import && vp.storage == runtime::Storage::kArena &&
        vp.arena_offset % kImportedOffsetAlignment == 0) {
      imported = imported_arena(s, delegate);
    }
    if (delegate.host_execute) {
      lt.host_data = s.value_data[v];
    } else if (imported != nullptr) {
      // Zero copy: the device reads and writes the arena where it is.
      lt.buffer = imported->handle();
      lt.offset = vp.arena_offset;
      ++call.imported;
      call.buffers.push_back(nullptr);  // buffers stay indexed by tensor
    } else {
      LOOM_ASSIGN_OR_RETURN(auto buffer,
                            host::DeviceBuffer::allocate(delegate.plugin, delegate.device_index,
                                                         vp.bytes));
      lt.buffer = buffer->handle();
      if (vp.storage == runtime::Storage::kParameter) {
        // Constants go to the device once, with the session.
        LOOM_RETURN_IF_ERROR(buffer->copy_from_host(0, vp.parameter, vp.bytes));
      } else if (is_input) {
        call.stage_in.push_back(static_cast<uint32_t>(t));
      } else {
        call.stage_out.push_back(static_cast<uint32_t>(t));
      }
      call.buffers.push_back(std::move(buffer));
    }
  }
  for (size_t t = 0; t < n; ++t) {
    (t < step.inputs.size() ? call.input_ptrs : call.output_ptrs).push_back(&call.tensors[t]);
  }
  if (delegate.async && delegate.plugin->abi_version() >= LOOM_ABI_VERSION(1, 1) &&
      delegate.plugin->abi_version() < LOOM_ABI_VERSION(2, 0)) {
    LOOM_ASSIGN_OR_RETURN(call.fence, host::Fence::create(delegate.plugin, delegate.device_index));
    call.fence_reused = true;
  }
  call.args.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
  call.args.executable = delegate.executable->handle();
  call.args.input_count = call.input_ptrs.size();
  call.args.inputs = call.input_ptrs.data();
  call.args.output_count = call.output_ptrs.size();
  call.args.outputs = call.output_ptrs.data();
  return Status();
}

// Records where each function input's address is held, so that bind_input
// can redirect every use at once, and points them all at the current address.
void wire_inputs(Session::State& s) {
  const runtime::FunctionPlan* plan = s.plan;
  for (auto& users : s.input_users) users.clear();
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const runtime::StepPlan& step = plan->steps[i];
    for (size_t k = 0; k < step.inputs.size(); ++k) {
      if (step.inputs[k] == kAbsentValue) continue;
      const runtime::ValuePlan& vp = plan->values[step.inputs[k]];
      if (vp.storage != runtime::Storage::kInput) continue;
      auto& users = s.input_users[vp.io_index];
      if (s.step_call[i] < 0) {
        users.push_back(&s.kernel_inputs[i][k].data);
      } else {
        DelegateCall& call = s.calls[s.step_call[i]];
        users.push_back(&call.host_pointers[k]);
        if (call.delegate->host_execute && call.nested == nullptr) {
          users.push_back(&call.tensors[k].host_data);
        }
      }
    }
  }
  for (size_t k = 0; k < s.input_users.size(); ++k) {
    for (void** user : s.input_users[k]) *user = s.input_address[k];
  }
}

// Plans which asynchronous delegate calls each step must wait for: those
// that write what the step reads or writes, or read what it writes (the same
// value, or overlapping arena bytes). Everything
// else runs on while they do, so delegates on different devices that do not
// depend on each other overlap.
void plan_overlap(Session::State& s) {
  const runtime::FunctionPlan& plan = *s.plan;
  const auto conflict = [&plan](uint32_t a, uint32_t b) {
    if (a == b) return true;
    const runtime::ValuePlan& x = plan.values[a];
    const runtime::ValuePlan& y = plan.values[b];
    return x.storage == runtime::Storage::kArena && y.storage == runtime::Storage::kArena &&
           x.arena_offset < y.arena_offset + y.bytes && y.arena_offset < x.arena_offset + x.bytes;
  };
  // Whether two steps must not overlap: one writes what the other reads or
  // writes (two readers may).
  const auto hazard = [&](const runtime::StepPlan& x, const runtime::StepPlan& y) {
    const auto any = [&](const std::vector<uint32_t>& p, const std::vector<uint32_t>& q) {
      for (uint32_t a : p) {
        for (uint32_t b : q) {
          if (a != kAbsentValue && b != kAbsentValue && conflict(a, b)) return true;
        }
      }
      return false;
    };
    return any(x.outputs, y.inputs) || any(x.outputs, y.outputs) || any(x.inputs, y.outputs);
  };
  s.wait_before.assign(plan.steps.size() + 1, {});
  std::vector<uint32_t> in_flight;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      if (hazard(plan.steps[s.calls[*it].step], plan.steps[i])) {
        s.wait_before[i].push_back(*it);
        it = in_flight.erase(it);
      } else {
        ++it;
      }
    }
    const int32_t call = s.step_call[i];
    if (call >= 0 && s.calls[call].nested == nullptr && s.calls[call].delegate->async) {
      in_flight.push_back(static_cast<uint32_t>(call));
    }
  }
  s.wait_before[plan.steps.size()] = std::move(in_flight);
}

// Re-prepares the calls whose delegate a fallback moved since they were
// prepared. The old calls are retired, not destroyed.
Status refresh_calls(Session::State& s) {
  const uint64_t generation = s.program->placement_generation.load(std::memory_order_acquire);
  for (DelegateCall& call : s.calls) {
    const int32_t index = s.plan->steps[call.step].delegate;
    std::shared_ptr<const runtime::LoadedDelegate> current = s.program->delegate(index);
    if (current == call.delegate) continue;
    const size_t step = call.step;
    s.retired.push_back(std::move(call));
    call = DelegateCall{};
    LOOM_RETURN_IF_ERROR(prepare_call(s, step, std::move(current), call)
                             .with_context("moving delegate '" + s.retired.back().delegate->name +
                                           "'"));
  }
  wire_inputs(s);
  plan_overlap(s);
  s.generation = generation;
  return Status();
}

}  // namespace

namespace {

// Everything a run of `plan` touches, allocated and wired up once.
Result<std::unique_ptr<Session::State>> make_state(std::shared_ptr<Program::State> program,
                                                   const runtime::FunctionPlan* plan) {
  auto s = std::make_unique<Session::State>();
  s->program = program;
  s->plan = plan;
  // Read before the delegates, so that a fallback in between is seen by run().
  s->generation = program->placement_generation.load(std::memory_order_acquire);
  const std::string of_function = " of function '" + plan->info.name + "'";
  const uint64_t arena_alignment = std::max<uint64_t>(plan->arena_alignment, kArenaImportAlignment);
  auto arena = allocate_aligned(plan->arena_size, arena_alignment);
  if (!arena.ok()) return arena.status().with_context("the arena" + of_function);
  s->arena = std::move(*arena);
  s->arena_bytes = (std::max<uint64_t>(plan->arena_size, 1) + arena_alignment - 1) /
                   arena_alignment * arena_alignment;
  for (const ArgumentInfo& a : plan->info.inputs) {
    auto t = Tensor::zeros(a.dtype, a.shape);
    if (!t.ok()) return t.status().with_context("input '" + a.name + "'" + of_function);
    s->staging.push_back(std::move(*t));
  }
  for (const ArgumentInfo& a : plan->info.outputs) {
    auto t = Tensor::zeros(a.dtype, a.shape);
    if (!t.ok()) return t.status().with_context("output '" + a.name + "'" + of_function);
    s->outputs.push_back(std::move(*t));
  }

  // Addresses of values.
  s->value_data.assign(plan->values.size(), nullptr);
  for (uint32_t v = 0; v < plan->values.size(); ++v) {
    const runtime::ValuePlan& vp = plan->values[v];
    switch (vp.storage) {
      case runtime::Storage::kInput: s->value_data[v] = s->staging[vp.io_index].data(); break;
      case runtime::Storage::kOutput: s->value_data[v] = s->outputs[vp.io_index].data(); break;
      case runtime::Storage::kParameter:
        s->value_data[v] = const_cast<std::byte*>(vp.parameter);  // read-only by plan
        break;
      case runtime::Storage::kArena: s->value_data[v] = s->arena.get() + vp.arena_offset; break;
      case runtime::Storage::kOwned: {
        LOOM_ASSIGN_OR_RETURN(auto bytes, allocate_aligned(vp.bytes, 64));
        s->value_data[v] = bytes.get();
        s->owned.push_back(std::move(bytes));
        break;
      }
      case runtime::Storage::kNone: break;
    }
  }
  for (uint32_t k = 0; k < plan->outputs.size(); ++k) {
    uint32_t v = plan->outputs[k];
    if (s->value_data[v] != s->outputs[k].data()) s->output_copies.emplace_back(k, v);
  }

  // Operands of every step.
  s->input_users.resize(plan->inputs.size());
  s->kernel_inputs.resize(plan->steps.size());
  s->kernel_outputs.resize(plan->steps.size());
  s->step_call.assign(plan->steps.size(), -1);
  size_t call_count = 0;
  for (const auto& step : plan->steps) call_count += step.op == OpCode::kDelegateCall;
  s->calls.reserve(call_count);  // addresses into calls must stay put
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const runtime::StepPlan& step = plan->steps[i];
    if (step.op == OpCode::kKernelCall || step.op == OpCode::kMove) {
      auto ref = [&](uint32_t v) {
        if (v == kAbsentValue) return kernels::TensorRef{};  // optional operand left out
        const runtime::ValuePlan& vp = plan->values[v];
        return kernels::TensorRef{vp.dtype, vp.shape, s->value_data[v], vp.bytes};
      };
      for (uint32_t v : step.inputs) s->kernel_inputs[i].push_back(ref(v));
      for (uint32_t v : step.outputs) s->kernel_outputs[i].push_back(ref(v));
      continue;
    }
    DelegateCall& call = s->calls.emplace_back();
    s->step_call[i] = static_cast<int32_t>(s->calls.size() - 1);
    LOOM_RETURN_IF_ERROR(prepare_call(*s, i, program->delegate(step.delegate), call));
  }

  s->input_address.resize(plan->inputs.size());
  for (size_t k = 0; k < plan->inputs.size(); ++k) s->input_address[k] = s->staging[k].data();
  wire_inputs(*s);
  plan_overlap(*s);
  s->run_timeout = program->run_timeout;
  return s;
}


}  // namespace

Result<std::unique_ptr<Session>> Program::create_session(std::string_view function) {
  const runtime::FunctionPlan* plan = nullptr;
  if (function.empty()) {
    if (state_->functions.empty()) return not_found("the program has no functions");
    plan = &state_->functions.front();
  } else {
    for (const auto& f : state_->functions) {
      if (f.info.name == function) plan = &f;
    }
    if (plan == nullptr) return this->function(function).status();
  }

  LOOM_ASSIGN_OR_RETURN(auto s, make_state(state_, plan));
  return std::unique_ptr<Session>(new Session(std::move(s)));
}

Status Session::set_input(std::string_view name, const Tensor& tensor) {
  const auto& inputs = state_->plan->info.inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].name == name) return set_input(i, tensor);
  }
  std::string names;
  for (const auto& in : inputs) names += (names.empty() ? "" : ", ") + in.name;
  return not_found("function '" + state_->plan->info.name + "' has no input '" +
                   std::string(name) + "' (inputs: " + (names.empty() ? "none" : names) + ")");
}

Status Session::set_input(size_t index, const Tensor& tensor) {
  const auto& inputs = state_->plan->info.inputs;
  if (index >= inputs.size()) {
    return out_of_range("input index " + std::to_string(index) + " out of range (function '" +
                        state_->plan->info.name + "' has " + std::to_string(inputs.size()) +
                        " inputs)");
  }
  const ArgumentInfo& a = inputs[index];
  if (tensor.dtype() != a.dtype || tensor.shape() != a.shape) {
    const bool dtype_differs = tensor.dtype() != a.dtype;
    const bool shape_differs = tensor.shape() != a.shape;
    const char* what = dtype_differs && shape_differs ? "dtype and shape differ"
                       : dtype_differs                ? "dtype differs"
                                                      : "shape differs";
    return invalid_argument("input '" + a.name + "' of function '" + state_->plan->info.name +
                            "' must be " + std::string(dtype_name(a.dtype)) + " " +
                            shape_to_string(a.shape) + ", got " +
                            std::string(dtype_name(tensor.dtype())) + " " +
                            shape_to_string(tensor.shape()) + " (" + what + ")");
  }
  Tensor& staging = state_->staging[index];
  if (staging.byte_size() != 0) std::memcpy(staging.data(), tensor.data(), staging.byte_size());
  state_->input_address[index] = staging.data();
  for (void** user : state_->input_users[index]) *user = staging.data();
  return Status();
}

Status Session::bind_input(size_t index, const void* data, size_t size) {
  const auto& inputs = state_->plan->info.inputs;
  if (index >= inputs.size()) {
    return out_of_range("input index " + std::to_string(index) + " out of range (function '" +
                        state_->plan->info.name + "' has " + std::to_string(inputs.size()) +
                        " inputs)");
  }
  if (size != state_->staging[index].byte_size() || (data == nullptr && size != 0)) {
    return invalid_argument("input '" + inputs[index].name + "' needs " +
                            std::to_string(state_->staging[index].byte_size()) +
                            " bytes, got " + std::to_string(size) +
                            (data == nullptr ? " at a null pointer" : ""));
  }
  state_->input_address[index] = const_cast<void*>(data);
  for (void** user : state_->input_users[index]) *user = const_cast<void*>(data);
  return Status();
}

namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Records a complete span from `start` to now, when tracing.
// `name` and `suffix` are joined only when tracing, so that a run without a
// trace builds no strings (run() allocates nothing).
void span(Trace* trace, const std::string& track, const char* category, std::string_view name,
          uint64_t start, std::string_view suffix = {}) {
  if (trace == nullptr) return;
  Trace::Event e;
  e.track = track;
  e.category = category;
  e.name.reserve(name.size() + suffix.size());
  e.name.append(name).append(suffix);
  e.timestamp_ns = start;
  e.duration_ns = now_ns() - start;
  trace->record(std::move(e));
}

constexpr const char* kHost = Trace::kHostTrack;

}  // namespace

Status Session::run() {
  if (state_->runner != nullptr && state_->runner->busy()) {
    return failed_precondition("session of function '" + state_->plan->info.name +
                               "': a run is in flight (run_async); wait for its handle first");
  }
  return run_session(*state_);
}

namespace {

Status run_session(Session::State& s) {
  if (s.program->placement_generation.load(std::memory_order_acquire) != s.generation) {
    LOOM_RETURN_IF_ERROR(refresh_calls(s));
  }
  std::shared_ptr<Trace> trace;
  const auto& channel = s.program->channel;
  if (channel != nullptr && channel->tracing()) trace = channel->active_trace();
  const uint64_t start = trace != nullptr ? now_ns() : 0;
  int32_t failed = -1;
  Status st = run_steps(s, trace.get(), &failed);
  const bool device_failed = st.code() == StatusCode::kDeviceLost ||
                             st.code() == StatusCode::kDeadlineExceeded;
  if (!st.ok() && failed >= 0 && device_failed && s.program->fallback) {
    // Run-time fallback: move the delegate off the failed device (unless
    // another session did already) and run once more.
    const DelegateCall& call = s.calls[static_cast<size_t>(failed)];
    const int32_t index = s.plan->steps[call.step].delegate;
    auto moved = s.program->fall_back(static_cast<size_t>(index), call.delegate.get(), st);
    if (!moved.ok()) {
      return Status(st.code(), st.message() + "; fallback: " + moved.status().message());
    }
    if (trace != nullptr) {
      Trace::Event e;
      e.track = kHost;
      e.category = "fallback";
      e.name = "delegate '" + (*moved)->name + "' -> " + (*moved)->device_uri;
      e.phase = Trace::Phase::kInstant;
      e.timestamp_ns = now_ns();
      trace->record(std::move(e));
    }
    LOOM_RETURN_IF_ERROR(refresh_calls(s));
    const Status first = st;
    st = run_steps(s, trace.get(), &failed);
    if (!st.ok()) {
      st = Status(st.code(), st.message() + " (retried after: " + first.message() + ")");
    }
  }
  if (trace != nullptr) span(trace.get(), kHost, "run", s.plan->info.name, start);
  return st;
}

}  // namespace

Status Session::set_run_timeout(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) {
    return invalid_argument("run timeout is negative (" + std::to_string(timeout.count()) + " ms)");
  }
  state_->run_timeout = timeout;
  return Status();
}

namespace {

// A "loom.reference" delegate: its function's session reads the operands in
// place and its results are copied out.
Status run_reference(DelegateCall& call, Trace* trace) {
  Session::State& n = *call.nested;
  const size_t inputs = n.plan->info.inputs.size();
  for (size_t k = 0; k < inputs; ++k) {
    n.input_address[k] = call.host_pointers[k];
    for (void** user : n.input_users[k]) *user = call.host_pointers[k];
  }
  int32_t failed = -1;
  LOOM_RETURN_IF_ERROR(run_steps(n, trace, &failed));
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    if (n.outputs[k].byte_size() != 0) {
      std::memcpy(call.host_pointers[inputs + k], n.outputs[k].data(), n.outputs[k].byte_size());
    }
  }
  return Status();
}

// Finishes delegate call `index`: waits for its fence (within the run
// timeout), then copies its results back from a device with its own memory.
Status complete(Session::State& s, size_t index, Trace* trace, int32_t* failed_call) {
  DelegateCall& call = s.calls[index];
  const runtime::LoadedDelegate& d = *call.delegate;
  const auto fail = [&](Status st, const std::string& what) {
    *failed_call = static_cast<int32_t>(index);
    return st.with_context("function '" + s.plan->info.name + "' instruction " +
                           std::to_string(s.plan->steps[call.step].instruction) +
                           ": delegate '" + d.name + "' on " + d.device_uri + what);
  };
  if (call.fence != nullptr) {
    const auto limit = s.run_timeout;
    Status st = call.fence->wait(limit.count() == 0
                                     ? UINT64_MAX
                                     : static_cast<uint64_t>(limit.count()) * 1'000'000);
    if (st.code() == StatusCode::kDeadlineExceeded) {
      st = deadline_exceeded("delegate '" + d.name + "' on " + d.device_uri +
                             " did not finish within the run timeout of " +
                             std::to_string(limit.count()) +
                             " ms (LoadOptions::run_timeout, Session::set_run_timeout; loom "
                             "run --timeout): " +
                             st.message());
    }
    if (!st.ok()) return fail(st, "");
  }
  span(trace, d.device_uri, "delegate", d.name, call.submitted_ns);
  const uint64_t start = trace != nullptr ? now_ns() : 0;
  for (uint32_t t : call.stage_out) {
    Status out = call.buffers[t]->copy_to_host(0, call.host_pointers[t], call.tensors[t].byte_size);
    if (!out.ok()) return fail(out, ": reading output");
  }
  if (!call.stage_out.empty()) span(trace, d.device_uri, "copy", "from device: ", start, d.name);
  return Status();
}

// One pass over the steps. `trace`: nullptr, or where spans go;
// `failed_call`: the delegate call that failed, or -1.
Status run_steps(Session::State& s, Trace* trace, int32_t* failed_call) {
  const runtime::FunctionPlan& plan = *s.plan;
  uint64_t start = 0;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const runtime::StepPlan& step = plan.steps[i];
    for (uint32_t j : s.wait_before[i]) LOOM_RETURN_IF_ERROR(complete(s, j, trace, failed_call));
    if (trace != nullptr) start = now_ns();
    if (s.step_call[i] < 0) {
      if (step.op == OpCode::kMove) {
        const auto& in = s.kernel_inputs[i][0];
        std::memmove(s.kernel_outputs[i][0].data, in.data, in.byte_size);
        span(trace, kHost, "kernel", "move", start);
        continue;
      }
      Status st = step.kernel->run(s.kernel_inputs[i], s.kernel_outputs[i], step.attributes);
      span(trace, kHost, "kernel", step.kernel->op, start);
      if (!st.ok()) {
        return st.with_context("function '" + plan.info.name + "' instruction " +
                               std::to_string(step.instruction) + " (" +
                               std::string(step.kernel->op) + ")");
      }
      continue;
    }
    DelegateCall& call = s.calls[s.step_call[i]];
    const runtime::LoadedDelegate& d = *call.delegate;
    if (call.nested != nullptr) {
      Status st = run_reference(call, trace);
      span(trace, kHost, "delegate", d.name, start, " (reference)");
      if (!st.ok()) {
        return st.with_context("function '" + plan.info.name + "' instruction " +
                               std::to_string(step.instruction) + ": delegate '" + d.name +
                               "' on the reference kernels");
      }
      continue;
    }
    const host::LoadedPlugin& plugin = *d.plugin;
    const int32_t index = s.step_call[i];
    const auto fail = [&](Status st, const std::string& what) {
      *failed_call = index;
      return st.with_context("function '" + plan.info.name + "' instruction " +
                             std::to_string(step.instruction) + ": delegate '" + d.name +
                             "' on " + d.device_uri + what);
    };
    for (uint32_t t : call.stage_in) {
      Status st = call.buffers[t]->copy_from_host(0, call.host_pointers[t],
                                                  call.tensors[t].byte_size);
      if (!st.ok()) return fail(st, ": staging input");
    }
    if (!call.stage_in.empty()) {
      span(trace, d.device_uri, "copy", "to device: ", start, d.name);
      if (trace != nullptr) start = now_ns();
    }
    // A 1.1 plugin re-arms the session's fence; under 1.0 a fence signals
    // once, so an asynchronous device gets a new one per run.
    if (!call.fence_reused) {
      call.fence.reset();
      if (d.async) {
        auto created = host::Fence::create(d.plugin, d.device_index);
        if (!created.ok()) return fail(created.status(), "");
        call.fence = std::move(*created);
      }
    }
    call.args.signal_fence = call.fence ? call.fence->handle() : nullptr;
    call.submitted_ns = start;
    Status st = plugin.take(plugin.api().execute(&call.args));
    if (!st.ok()) return fail(st, "");
    // An asynchronous call is completed when a later step needs what it
    // touches, or at the end: calls on different devices overlap.
    if (call.fence == nullptr) LOOM_RETURN_IF_ERROR(complete(s, static_cast<size_t>(index), trace, failed_call));
  }
  for (uint32_t j : s.wait_before[plan.steps.size()]) {
    LOOM_RETURN_IF_ERROR(complete(s, j, trace, failed_call));
  }
  for (auto [k, v] : s.output_copies) {
    std::memcpy(s.outputs[k].data(), s.value_data[v], s.outputs[k].byte_size());
  }
  return Status();
}

}  // namespace

}  // namespace loom
