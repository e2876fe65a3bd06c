// Making a Session: where every value lives, how each delegate call gets its
// operands (host pointers, the imported arena, or staged buffers), the
// fences, and which asynchronous calls each step waits for. Nothing here
// runs per run.
#include <algorithm>
#include <cstring>

#include "host/isolation/log_channel.hpp"
#include "runtime/session_state.hpp"

namespace loom {

std::vector<DelegateTransfers> Session::transfers() const {
  if (state_->open != nullptr) {  // the last run's binding
    return state_->open->current() != nullptr ? state_->open->current()->transfers()
                                              : std::vector<DelegateTransfers>{};
  }
  std::vector<DelegateTransfers> out;
  for (const runtime::DelegateCall& call : state_->calls) {
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

namespace runtime {
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
    LOOM_ASSIGN_OR_RETURN(call.nested, make_session_state(s.program, &fn));
    return Status();
  }
  std::vector<host::PreparedCall::Operand> operands(n);
  for (size_t t = 0; t < n; ++t) {
    const uint32_t v = t < step.inputs.size() ? step.inputs[t] : step.outputs[t - step.inputs.size()];
    const runtime::ValuePlan& vp = plan->values[v];
    operands[t] = {vp.name, vp.dtype, vp.shape, vp.bytes};
  }
  auto prepared = host::PreparedCall::make(*delegate.executable, operands, step.inputs.size());
  if (!prepared.ok()) return prepared.status().with_context("delegate '" + delegate.name + "'");
  call.prepared = std::move(*prepared);
  call.host_pointers.resize(n);
  for (size_t t = 0; t < n; ++t) {
    bool is_input = t < step.inputs.size();
    uint32_t v = is_input ? step.inputs[t] : step.outputs[t - step.inputs.size()];
    const runtime::ValuePlan& vp = plan->values[v];
    call.host_pointers[t] = s.value_data[v];
    host::DeviceBuffer* imported = nullptr;
    if (!delegate.host_execute && delegate.host_import && vp.storage == runtime::Storage::kArena &&
        vp.arena_offset % kImportedOffsetAlignment == 0) {
      imported = imported_arena(s, delegate);
    }
    if (delegate.host_execute) {
      call.prepared->place_on_host(t, s.value_data[v]);
    } else if (imported != nullptr) {
      // Zero copy: the device reads and writes the arena where it is.
      call.prepared->place_in_buffer(t, *imported, vp.arena_offset);
      ++call.imported;
      call.buffers.push_back(nullptr);  // buffers stay indexed by tensor
    } else {
      LOOM_ASSIGN_OR_RETURN(auto buffer,
                            host::DeviceBuffer::allocate(delegate.plugin, delegate.device_index,
                                                         vp.bytes));
      call.prepared->place_in_buffer(t, *buffer);
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
  if (delegate.async && delegate.plugin->rearms_fences()) {
    LOOM_ASSIGN_OR_RETURN(call.fence, host::Fence::create(delegate.plugin, delegate.device_index));
    call.fence_reused = true;
  }
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
          users.push_back(call.prepared->host_data_slot(k));
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

// Every buffer a session allocates has a size the program declares; each is
// checked against LoadOptions::max_tensor_bytes before the first allocation,
// so that a small file cannot make a session claim (and zero) more memory
// than the host allows.
Status check_declared_sizes(const FunctionPlan& plan, uint64_t cap) {
  const std::string of_function = " of function '" + plan.info.name + "'";
  const auto refuse = [&](const std::string& what, uint64_t bytes) {
    return resource_exhausted(what + of_function + " takes " + std::to_string(bytes) +
                              " bytes, more than the limit of " + std::to_string(cap) +
                              " bytes per tensor (LoadOptions::max_tensor_bytes; loom run: "
                              "--max-tensor-bytes)");
  };
  // Tensors first, so that the message names the one at fault; the arena,
  // which holds several, last.
  for (const runtime::ValuePlan& v : plan.values) {
    if (v.bytes <= cap) continue;
    const std::string type = " (" + std::string(dtype_name(v.dtype)) + " " +
                             shape_to_string(v.shape) + ")";
    switch (v.storage) {
      case runtime::Storage::kInput: return refuse("input '" + v.name + "'" + type, v.bytes);
      case runtime::Storage::kOutput: return refuse("output '" + v.name + "'" + type, v.bytes);
      case runtime::Storage::kArena:
      case runtime::Storage::kOwned: return refuse("value '" + v.name + "'" + type, v.bytes);
      case runtime::Storage::kParameter:  // in memory already, with the program
      case runtime::Storage::kNone: break;
    }
  }
  if (plan.arena_size > cap) return refuse("the arena", plan.arena_size);
  return Status();
}

}  // namespace

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

Result<std::unique_ptr<Session::State>> make_session_state(std::shared_ptr<Program::State> program,
                                                           const FunctionPlan* plan) {
  if (plan->staged != nullptr) {
    auto s = std::make_unique<Session::State>();
    s->program = program;
    s->plan = plan;
    s->run_timeout = program->run_timeout;
    s->staged = std::make_unique<StagedSession>(program, *plan);
    return s;
  }
  if (plan->open != nullptr) {
    auto s = std::make_unique<Session::State>();
    s->program = program;
    s->plan = plan;
    s->run_timeout = program->run_timeout;
    s->open = std::make_unique<OpenSession>(program, plan->open, plan->info, program->run_timeout);
    return s;
  }
  LOOM_RETURN_IF_ERROR(check_declared_sizes(*plan, program->max_tensor_bytes));
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

}  // namespace runtime
}  // namespace loom
