// Session: the per-thread state of running one function. Everything a run
// touches is allocated and wired up here, once; run() only calls kernels and
// delegates with prepared arguments.
#include <chrono>
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
  const runtime::LoadedDelegate* delegate = nullptr;
  std::vector<int64_t> shapes;  // all shapes, back to back
  std::vector<loom_tensor_t> tensors;
  std::vector<const loom_tensor_t*> input_ptrs;
  std::vector<const loom_tensor_t*> output_ptrs;
  // Separate device memory: one buffer per tensor, staged in and out.
  std::vector<std::unique_ptr<host::DeviceBuffer>> buffers;
  std::vector<uint32_t> stage_in;   // tensor indices copied in before execute
  std::vector<uint32_t> stage_out;  // tensor indices copied out after
  std::vector<void*> host_pointers; // per tensor, for staging
  loom_execute_args_t args{};
};

}  // namespace

struct Session::State {
  std::shared_ptr<Program::State> program;
  const runtime::FunctionPlan* plan = nullptr;
  AlignedBytes arena;
  std::vector<AlignedBytes> owned;
  std::vector<Tensor> staging;  // one per input
  std::vector<Tensor> outputs;  // one per output
  std::vector<void*> value_data;  // current address of each value
  // Per step: kernel operands, or the index of the delegate call.
  std::vector<std::vector<kernels::TensorRef>> kernel_inputs;
  std::vector<std::vector<kernels::TensorRef>> kernel_outputs;
  std::vector<int32_t> step_call;  // index into calls, or -1
  std::vector<DelegateCall> calls;
  // For each function input: every place that holds its address.
  std::vector<std::vector<void**>> input_users;
  // Outputs whose value is not stored in the output tensor itself.
  std::vector<std::pair<uint32_t, uint32_t>> output_copies;  // (output, value)
};

Session::Session(std::unique_ptr<State> state) : state_(std::move(state)) {}
Session::~Session() = default;

const FunctionInfo& Session::function() const { return state_->plan->info; }
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

  auto s = std::make_unique<Session::State>();
  s->program = state_;
  s->plan = plan;
  const std::string of_function = " of function '" + plan->info.name + "'";
  auto arena = allocate_aligned(plan->arena_size, plan->arena_alignment);
  if (!arena.ok()) return arena.status().with_context("the arena" + of_function);
  s->arena = std::move(*arena);
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
    const runtime::LoadedDelegate& delegate = state_->delegates[step.delegate];
    DelegateCall& call = s->calls.emplace_back();
    s->step_call[i] = static_cast<int32_t>(s->calls.size() - 1);
    call.delegate = &delegate;
    size_t n = step.inputs.size() + step.outputs.size();
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
      call.host_pointers[t] = s->value_data[v];
      if (delegate.host_execute) {
        lt.host_data = s->value_data[v];
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
    call.args.struct_size = LOOM_EXECUTE_ARGS_STRUCT_SIZE;
    call.args.executable = delegate.executable->handle();
    call.args.input_count = call.input_ptrs.size();
    call.args.inputs = call.input_ptrs.data();
    call.args.output_count = call.output_ptrs.size();
    call.args.outputs = call.output_ptrs.data();
  }

  // Record where each function input's address is held, so bind_input can
  // redirect every use at once.
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const runtime::StepPlan& step = plan->steps[i];
    for (size_t k = 0; k < step.inputs.size(); ++k) {
      if (step.inputs[k] == kAbsentValue) continue;
      const runtime::ValuePlan& vp = plan->values[step.inputs[k]];
      if (vp.storage != runtime::Storage::kInput) continue;
      auto& users = s->input_users[vp.io_index];
      if (s->step_call[i] < 0) {
        users.push_back(&s->kernel_inputs[i][k].data);
      } else {
        DelegateCall& call = s->calls[s->step_call[i]];
        users.push_back(&call.host_pointers[k]);
        if (call.delegate->host_execute) users.push_back(&call.tensors[k].host_data);
      }
    }
  }
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
void span(Trace* trace, const std::string& track, const char* category, std::string name,
          uint64_t start) {
  if (trace == nullptr) return;
  Trace::Event e;
  e.track = track;
  e.category = category;
  e.name = std::move(name);
  e.timestamp_ns = start;
  e.duration_ns = now_ns() - start;
  trace->record(std::move(e));
}

const std::string kHost = Trace::kHostTrack;

}  // namespace

Status Session::run() {
  const auto& channel = state_->program->channel;
  if (channel != nullptr && channel->tracing()) {
    if (std::shared_ptr<Trace> trace = channel->active_trace()) {
      const uint64_t start = now_ns();
      Status st = run_steps(trace.get());
      span(trace.get(), kHost, "run", state_->plan->info.name, start);
      return st;
    }
  }
  return run_steps(nullptr);
}

Status Session::run_steps(Trace* trace) {
  State& s = *state_;
  const runtime::FunctionPlan& plan = *s.plan;
  uint64_t start = 0;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const runtime::StepPlan& step = plan.steps[i];
    if (trace != nullptr) start = now_ns();
    if (s.step_call[i] < 0) {
      if (step.op == OpCode::kMove) {
        const auto& in = s.kernel_inputs[i][0];
        std::memmove(s.kernel_outputs[i][0].data, in.data, in.byte_size);
        span(trace, kHost, "kernel", "move", start);
        continue;
      }
      Status st = step.kernel->run(s.kernel_inputs[i], s.kernel_outputs[i], step.attributes);
      span(trace, kHost, "kernel", std::string(step.kernel->op), start);
      if (!st.ok()) {
        return st.with_context("function '" + plan.info.name + "' instruction " +
                               std::to_string(step.instruction) + " (" +
                               std::string(step.kernel->op) + ")");
      }
      continue;
    }
    DelegateCall& call = s.calls[s.step_call[i]];
    const runtime::LoadedDelegate& d = *call.delegate;
    const host::LoadedPlugin& plugin = *d.plugin;
    for (uint32_t t : call.stage_in) {
      Status st = call.buffers[t]->copy_from_host(0, call.host_pointers[t],
                                                  call.tensors[t].byte_size);
      if (!st.ok()) return st.with_context("delegate '" + d.name + "': staging input");
    }
    if (!call.stage_in.empty()) {
      span(trace, d.device_uri, "copy", "to device: " + d.name, start);
      if (trace != nullptr) start = now_ns();
    }
    // Fences signal once, so an asynchronous device gets a new one per run.
    std::unique_ptr<host::Fence> fence;
    if (d.async) {
      auto created = host::Fence::create(d.plugin, d.device_index);
      if (!created.ok()) return created.status().with_context("delegate '" + d.name + "'");
      fence = std::move(*created);
    }
    call.args.signal_fence = fence ? fence->handle() : nullptr;
    Status st = plugin.take(plugin.api().execute(&call.args));
    if (st.ok() && fence) {
      const auto limit = s.program->run_timeout;
      st = fence->wait(limit.count() == 0 ? UINT64_MAX
                                          : static_cast<uint64_t>(limit.count()) * 1'000'000);
      if (st.code() == StatusCode::kDeadlineExceeded) {
        st = deadline_exceeded("delegate '" + d.name + "' on " + d.device_uri +
                               " did not finish within the run timeout of " +
                               std::to_string(limit.count()) +
                               " ms (LoadOptions::run_timeout; loom run --timeout): " +
                               st.message());
      }
    }
    span(trace, d.device_uri, "delegate", d.name, start);
    if (!st.ok()) {
      return st.with_context("function '" + plan.info.name + "' instruction " +
                             std::to_string(step.instruction) + ": delegate '" + d.name +
                             "' on " + d.device_uri);
    }
    if (trace != nullptr) start = now_ns();
    for (uint32_t t : call.stage_out) {
      Status out = call.buffers[t]->copy_to_host(0, call.host_pointers[t],
                                                 call.tensors[t].byte_size);
      if (!out.ok()) return out.with_context("delegate '" + d.name + "': reading output");
    }
    if (!call.stage_out.empty()) span(trace, d.device_uri, "copy", "from device: " + d.name, start);
  }
  for (auto [k, v] : s.output_copies) {
    std::memcpy(s.outputs[k].data(), s.value_data[v], s.outputs[k].byte_size());
  }
  return Status();
}

}  // namespace loom
