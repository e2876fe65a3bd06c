// Session: the per-thread state of running one function. Everything a run
// touches was allocated and wired up when it was made (session_prepare.cpp);
// run() only calls kernels and delegates with prepared arguments.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>
#include <cstdlib>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LOOM_KEEP_FOR_PROCESS(p) __lsan_ignore_object(p)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/lsan_interface.h>
#define LOOM_KEEP_FOR_PROCESS(p) __lsan_ignore_object(p)
#endif
#endif
#ifndef LOOM_KEEP_FOR_PROCESS
#define LOOM_KEEP_FOR_PROCESS(p) (void)(p)
#endif

#include "host/isolation/log_channel.hpp"
#include "runtime/session_state.hpp"

namespace loom {

namespace {
Status run_session(Session::State& s);

// The index of input `name` of `info`; NOT_FOUND listing the inputs there are.
Result<size_t> input_index(const FunctionInfo& info, std::string_view name) {
  for (size_t i = 0; i < info.inputs.size(); ++i) {
    if (info.inputs[i].name == name) return i;
  }
  std::string names;
  for (const auto& in : info.inputs) names += (names.empty() ? "" : ", ") + in.name;
  return not_found("function '" + info.name + "' has no input '" + std::string(name) + "' (inputs: " +
                   (names.empty() ? "none" : names) + ")");
}
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
  // A run that timed out (or failed) may have left an execution running on
  // its device. Its buffers, fence, arena and executable are freed only once
  // it finished; a device that never finishes it (hung) keeps this state,
  // and with it the program and its plugins, for the rest of the process.
  // (Kept on purpose: the leak checker is told so.)
  if (state_ != nullptr && !runtime::drain_session(*state_)) LOOM_KEEP_FOR_PROCESS(state_.release());
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

std::shared_ptr<Program> Session::bound_program() const {
  return state_->open != nullptr ? state_->open->current_program() : nullptr;
}

size_t Session::output_count() const {
  if (state_->staged != nullptr) return state_->staged->output_count();
  return state_->open != nullptr ? state_->open->output_count() : state_->outputs.size();
}
const Tensor& Session::output(size_t index) const {
  if (state_->staged != nullptr) return state_->staged->output(index);
  return state_->open != nullptr ? state_->open->output(index) : state_->outputs[index];
}

Result<const Tensor*> Session::output(std::string_view name) const {
  const auto& outs = state_->plan->info.outputs;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].name != name) continue;
    if (state_->staged != nullptr && !state_->staged->output_value(i).is_tensor()) {
      return failed_precondition("result '" + outs[i].name + "' of function '" + state_->plan->info.name + "' is " +
                                 describe_value(state_->staged->output_value(i)) + "; read it with output_value");
    }
    return &output(i);
  }
  return not_found("function '" + state_->plan->info.name + "' has no result '" +
                   std::string(name) + "'");
}

Result<Value> Session::output_value(size_t index) const {
  if (index >= output_count()) {
    return out_of_range("result index " + std::to_string(index) + " out of range (function '" +
                        state_->plan->info.name + "' has " + std::to_string(output_count()) + " results)");
  }
  if (state_->staged != nullptr) return state_->staged->output_value(index);
  return Value::of(output(index));
}

Result<Value> Session::output_value(std::string_view name) const {
  const auto& outs = state_->plan->info.outputs;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].name == name) return output_value(i);
  }
  return not_found("function '" + state_->plan->info.name + "' has no result '" + std::string(name) + "'");
}

Status Session::set_input_value(std::string_view name, const Value& value) {
  LOOM_ASSIGN_OR_RETURN(size_t i, input_index(state_->plan->info, name));
  return set_input_value(i, value);
}

Status Session::set_input_value(size_t index, const Value& value) {
  const auto& inputs = state_->plan->info.inputs;
  if (index >= inputs.size()) {
    return out_of_range("input index " + std::to_string(index) + " out of range (function '" +
                        state_->plan->info.name + "' has " + std::to_string(inputs.size()) + " inputs)");
  }
  if (state_->staged != nullptr) return state_->staged->set_input_value(index, value);
  if (!value.is_tensor()) {
    return invalid_argument("input '" + inputs[index].name + "' of function '" + state_->plan->info.name +
                            "' takes a tensor, got " + describe_value(value));
  }
  return set_input(index, value.tensor);
}

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

  // Sizes the program declares are checked before they are allocated; an
  // allocation that fails anyway (the machine's memory is taken by others)
  // is a status, never an exception out of the API.
  try {
    LOOM_ASSIGN_OR_RETURN(auto s, runtime::make_session_state(state_, plan));
    return std::unique_ptr<Session>(new Session(std::move(s)));
  } catch (const std::bad_alloc&) {
    return resource_exhausted("out of memory creating a session of function '" +
                              plan->info.name + "'");
  }
}

Status Session::set_input(std::string_view name, const Tensor& tensor) {
  LOOM_ASSIGN_OR_RETURN(size_t i, input_index(state_->plan->info, name));
  return set_input(i, tensor);
}

Status Session::set_input(size_t index, const Tensor& tensor) {
  const auto& inputs = state_->plan->info.inputs;
  if (index >= inputs.size()) {
    return out_of_range("input index " + std::to_string(index) + " out of range (function '" +
                        state_->plan->info.name + "' has " + std::to_string(inputs.size()) +
                        " inputs)");
  }
  if (state_->open != nullptr) return state_->open->set_input(index, tensor);
  if (state_->staged != nullptr) return state_->staged->set_input(index, tensor);
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
  if (state_->open != nullptr || state_->staged != nullptr) {
    return failed_precondition("input '" + inputs[index].name + "' of function '" + state_->plan->info.name +
                               (state_->staged != nullptr ? "' belongs to a staged program (control flow)"
                                                          : "' has open dimensions") +
                               "; bind it with set_input, which carries its shape");
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
  if (s.open != nullptr) return s.open->run();
  if (s.staged != nullptr) return s.staged->run();
  if (s.program->placement_generation.load(std::memory_order_acquire) != s.generation) {
    LOOM_RETURN_IF_ERROR(runtime::refresh_calls(s));
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
    const runtime::DelegateCall& call = s.calls[static_cast<size_t>(failed)];
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
    LOOM_RETURN_IF_ERROR(runtime::refresh_calls(s));
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
  if (state_->open != nullptr) return state_->open->set_run_timeout(timeout);
  if (state_->staged != nullptr) return state_->staged->set_run_timeout(timeout);
  return Status();
}

namespace {

// A "loom.reference" delegate: its function's session reads the operands in
// place and its results are copied out.
Status run_reference(runtime::DelegateCall& call, Trace* trace) {
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
  runtime::DelegateCall& call = s.calls[index];
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
      // fail() names the function, instruction, delegate and device.
      st = deadline_exceeded("did not finish within the run timeout of " +
                             std::to_string(limit.count()) +
                             " ms (LoadOptions::run_timeout, Session::set_run_timeout; loom "
                             "run --timeout): " +
                             st.message());
    } else {
      call.in_flight = false;  // finished, or failed: the device is done with it
    }
    if (!st.ok()) return fail(st, "");
  }
  span(trace, d.device_uri, "delegate", d.name, call.submitted_ns);
  const uint64_t start = trace != nullptr ? now_ns() : 0;
  for (uint32_t t : call.stage_out) {
    Status out = call.buffers[t]->copy_to_host(0, call.host_pointers[t], call.prepared->byte_size(t));
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
        // An empty tensor may have no storage at all (null data).
        if (in.byte_size != 0) std::memmove(s.kernel_outputs[i][0].data, in.data, in.byte_size);
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
    runtime::DelegateCall& call = s.calls[s.step_call[i]];
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
    const int32_t index = s.step_call[i];
    const auto fail = [&](Status st, const std::string& what) {
      *failed_call = index;
      return st.with_context("function '" + plan.info.name + "' instruction " +
                             std::to_string(step.instruction) + ": delegate '" + d.name +
                             "' on " + d.device_uri + what);
    };
    // An execution an earlier run left running (it timed out there) still
    // uses the buffers and fence: wait for it before staging or executing.
    if (call.in_flight) {
      const auto limit = s.run_timeout;
      Status prev = call.fence->wait(limit.count() == 0
                                         ? UINT64_MAX
                                         : static_cast<uint64_t>(limit.count()) * 1'000'000);
      if (prev.code() == StatusCode::kDeadlineExceeded) {
        return fail(deadline_exceeded("its execution of an earlier run (which timed out) is still "
                                      "running after another run timeout of " +
                                      std::to_string(limit.count()) + " ms"),
                    "");
      }
      call.in_flight = false;  // that run's outcome was reported with it
    }
    for (uint32_t t : call.stage_in) {
      Status st = call.buffers[t]->copy_from_host(0, call.host_pointers[t],
                                                  call.prepared->byte_size(t));
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
    call.submitted_ns = start;
    Status st = call.prepared->execute(call.fence.get());
    if (!st.ok()) return fail(st, "");
    call.in_flight = call.fence != nullptr;
    // An asynchronous call is completed when a later step needs what it
    // touches, or at the end: calls on different devices overlap.
    if (call.fence == nullptr) LOOM_RETURN_IF_ERROR(complete(s, static_cast<size_t>(index), trace, failed_call));
  }
  for (uint32_t j : s.wait_before[plan.steps.size()]) {
    LOOM_RETURN_IF_ERROR(complete(s, j, trace, failed_call));
  }
  for (auto [k, v] : s.output_copies) {
    if (s.outputs[k].byte_size() == 0) continue;  // may have no storage
    std::memcpy(s.outputs[k].data(), s.value_data[v], s.outputs[k].byte_size());
  }
  return Status();
}

}  // namespace

namespace runtime {

bool drain_session(Session::State& s) {
  const auto limit = s.run_timeout;
  const uint64_t wait_ns =
      limit.count() == 0 ? UINT64_MAX : static_cast<uint64_t>(limit.count()) * 1'000'000;
  bool drained = true;
  const auto drain = [&](std::vector<DelegateCall>& calls) {
    for (DelegateCall& call : calls) {
      if (call.nested != nullptr && !drain_session(*call.nested)) drained = false;
      if (!call.in_flight || call.fence == nullptr) continue;
      // Any answer but "still running" means the device is done with it.
      if (call.fence->wait(wait_ns).code() == StatusCode::kDeadlineExceeded) {
        drained = false;
      } else {
        call.in_flight = false;
      }
    }
  };
  drain(s.calls);
  drain(s.retired);
  return drained;
}

}  // namespace runtime

}  // namespace loom
