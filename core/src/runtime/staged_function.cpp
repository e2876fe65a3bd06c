#include "runtime/staged_function.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "host/isolation/log_channel.hpp"
#include "loom/trace.hpp"
#include "lowering/staged.hpp"
#include "runtime/program_state.hpp"
#include "runtime/session_state.hpp"
#include "runtime/staged_tensors.hpp"

namespace loom::runtime {
namespace {

std::string arg_list(const FunctionDef& def, const std::vector<uint32_t>& list) {
  std::string s;
  for (uint32_t v : list) s += (s.empty() ? "" : ", ") + (v < def.values.size() ? def.values[v].name : std::string("-"));
  return s;
}

}  // namespace

namespace staged {

int64_t int_attribute(const StagedStep& step, std::string_view name, int64_t fallback) {
  for (const AttributeDef& a : step.attributes) {
    if (a.name == name && a.kind == AttributeKind::kInt) return a.i;
  }
  return fallback;
}

std::vector<int64_t> ints_attribute(const StagedStep& step, std::string_view name) {
  for (const AttributeDef& a : step.attributes) {
    if (a.name == name && a.kind == AttributeKind::kInts) return a.ints;
  }
  return {};
}

uint64_t clock_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// The one element of a scalar-like tensor (any rank, one element) as an
// integer, or an error naming `what`.
Result<int64_t> scalar_of(const Tensor& t, const std::string& what) {
  if (t.element_count() != 1) {
    return invalid_argument(what + " must hold one element, it is " + std::string(dtype_name(t.dtype())) + " " +
                            shape_to_string(t.shape()));
  }
  switch (t.dtype()) {
    case DType::kBool: return *t.data_as<uint8_t>() != 0 ? 1 : 0;
    case DType::kI64: return *t.data_as<int64_t>();
    case DType::kI32: return *t.data_as<int32_t>();
    case DType::kU8: return *t.data_as<uint8_t>();
    default:
      return invalid_argument(what + " must be bool or an integer, it is " + std::string(dtype_name(t.dtype())));
  }
}

// Slice `index` of `t` along `axis`, without that axis.
Result<Tensor> take_slice(const Tensor& t, size_t axis, int64_t index) {
  Shape shape = t.shape();
  const int64_t length = shape[axis];
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(axis));
  uint64_t outer = 1, inner = dtype_size(t.dtype());
  for (size_t d = 0; d < axis; ++d) outer *= static_cast<uint64_t>(t.shape()[d]);
  for (size_t d = axis + 1; d < t.shape().size(); ++d) inner *= static_cast<uint64_t>(t.shape()[d]);
  LOOM_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(t.dtype(), shape));
  const auto* src = static_cast<const std::byte*>(t.data());
  auto* dst = static_cast<std::byte*>(out.data());
  for (uint64_t o = 0; o < outer; ++o) {
    if (inner != 0) {
      std::memcpy(dst + o * inner, src + (o * static_cast<uint64_t>(length) + static_cast<uint64_t>(index)) * inner,
                  inner);
    }
  }
  return out;
}

// Writes `part` as slice `index` of `out` along `axis`.
void put_slice(Tensor& out, size_t axis, int64_t index, const Tensor& part) {
  const int64_t length = out.shape()[axis];
  uint64_t outer = 1, inner = dtype_size(out.dtype());
  for (size_t d = 0; d < axis; ++d) outer *= static_cast<uint64_t>(out.shape()[d]);
  for (size_t d = axis + 1; d < out.shape().size(); ++d) inner *= static_cast<uint64_t>(out.shape()[d]);
  const auto* src = static_cast<const std::byte*>(part.data());
  auto* dst = static_cast<std::byte*>(out.data());
  for (uint64_t o = 0; o < outer; ++o) {
    if (inner != 0) {
      std::memcpy(dst + (o * static_cast<uint64_t>(length) + static_cast<uint64_t>(index)) * inner, src + o * inner,
                  inner);
    }
  }
}

// The values one output of a body took in successive iterations, stacked
// along `axis` (a new dimension), in reverse order when `reverse`.
Result<Tensor> stack(const std::vector<Tensor>& parts, int64_t axis, bool reverse, const std::string& what) {
  if (parts.empty()) return Tensor::zeros(DType::kF32, {0});
  const Tensor& first = parts.front();
  const int64_t rank = static_cast<int64_t>(first.shape().size()) + 1;
  if (axis < -rank || axis >= rank) {
    return invalid_argument(what + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  const size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  Shape shape = first.shape();
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(a), static_cast<int64_t>(parts.size()));
  LOOM_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(first.dtype(), shape));
  for (size_t i = 0; i < parts.size(); ++i) {
    const size_t at = reverse ? parts.size() - 1 - i : i;
    put_slice(out, a, static_cast<int64_t>(at), parts[i]);
  }
  return out;
}

// Checks that iteration `iteration`'s value of a scan output agrees with the
// first iteration's.
Status same_as_first(const std::vector<Tensor>& parts, const Tensor& next, const std::string& what, int64_t iteration) {
  if (parts.empty()) return Status();
  const Tensor& first = parts.front();
  if (first.dtype() != next.dtype() || first.shape() != next.shape()) {
    return invalid_argument(what + " is " + std::string(dtype_name(next.dtype())) + " " + shape_to_string(next.shape()) +
                            " in iteration " + std::to_string(iteration) + ", " + std::string(dtype_name(first.dtype())) +
                            " " + shape_to_string(first.shape()) + " in the first: a scan output keeps its type");
  }
  return Status();
}


}  // namespace staged


Result<std::shared_ptr<const StagedPlan>> build_staged_plan(
    const ProgramDef& program, const FunctionDef& def, const kernels::KernelRegistry& kernels,
    const std::function<std::span<const std::byte>(uint32_t parameter)>& parameter_bytes) {
  auto plan = std::make_shared<StagedPlan>();
  plan->values = def.values;
  plan->inputs = def.inputs;
  plan->outputs = def.outputs;
  const std::string in = "function '" + def.name + "'";
  for (size_t v = 0; v < def.values.size(); ++v) {
    const ValueDef& value = def.values[v];
    if (value.parameter < 0) continue;
    std::span<const std::byte> bytes = parameter_bytes(static_cast<uint32_t>(value.parameter));
    auto t = Tensor::copy_of(value.dtype, value.shape, bytes);
    if (!t.ok()) return t.status().with_context(in + ", value '" + value.name + "'");
    plan->constants.emplace_back(static_cast<uint32_t>(v), std::move(*t));
  }
  for (size_t i = 0; i < def.instructions.size(); ++i) {
    const InstructionDef& ins = def.instructions[i];
    StagedStep step;
    step.op = ins.op;
    step.kernel = ins.kernel;
    step.attributes = ins.attributes;
    step.opset = ins.opset;
    step.captures = ins.captures;
    step.inputs = ins.inputs;
    step.outputs = ins.outputs;
    for (uint32_t f : ins.functions) step.functions.push_back(program.functions[f].name);
    step.name = "instruction " + std::to_string(i) + " (" +
                (ins.op == OpCode::kCall ? "call '" + step.functions.front() + "'"
                                         : ins.kernel + " of " + arg_list(def, ins.inputs)) + ")";
    if (ins.op == OpCode::kKernelCall) {
      if (!lowering::is_sequence_op(ins.kernel) && !lowering::is_value_op(ins.kernel) &&
          kernels.find(ins.kernel) == nullptr) {
        return unimplemented(in + ": " + step.name + ": no reference kernel for operator '" + ins.kernel + "'");
      }
      step.name = "instruction " + std::to_string(i) + " (" + ins.kernel + " of " + arg_list(def, ins.inputs) + ")";
      plan->steps.push_back(std::move(step));
      continue;
    }
    if (ins.op != OpCode::kCall && ins.op != OpCode::kControl) {
      return unimplemented(in + ": " + step.name + ": a staged function runs calls, control flow and sequence "
                           "operators only");
    }
    const FunctionDef* first = &program.functions[ins.functions.front()];
    if (ins.op == OpCode::kCall &&
        (first->inputs.size() != ins.inputs.size() || first->outputs.size() != ins.outputs.size())) {
      return invalid_argument(in + ": " + step.name + " passes " + std::to_string(ins.inputs.size()) + " inputs and " +
                              std::to_string(ins.outputs.size()) + " results; the function takes " +
                              std::to_string(first->inputs.size()) + " and returns " +
                              std::to_string(first->outputs.size()));
    }
    for (uint32_t v : ins.inputs) {
      if (v == kAbsentValue && ins.op == OpCode::kCall) {
        return invalid_argument(in + ": " + step.name + " leaves an operand out");
      }
    }
    plan->steps.push_back(std::move(step));
  }
  return std::shared_ptr<const StagedPlan>(std::move(plan));
}

StagedSession::StagedSession(std::shared_ptr<Program::State> program, const FunctionPlan& plan)
    : program_(std::move(program)),
      plan_(plan),
      staged_(*plan.staged),
      values_(staged_.values.size()),
      sequences_(staged_.values.size()),
      is_sequence_(staged_.values.size(), false),
      is_none_(staged_.values.size(), false),
      set_(staged_.inputs.size(), false),
      outputs_(staged_.outputs.size()),
      output_values_(staged_.outputs.size()),
      sessions_(staged_.steps.size()),
      run_timeout_(program_->run_timeout) {
  for (const auto& [v, t] : staged_.constants) values_[v] = t;
}

StagedSession::~StagedSession() = default;

Status StagedSession::check_tensor_input(size_t index, const Tensor& tensor) const {
  const ValueDef& v = staged_.values[staged_.inputs[index]];
  if (v.dtype != DType::kInvalid && tensor.dtype() != v.dtype) {
    return invalid_argument("input '" + v.name + "' of function '" + plan_.info.name + "' must be " +
                            std::string(dtype_name(v.dtype)) + ", got " + std::string(dtype_name(tensor.dtype())));
  }
  if (!v.unranked) {
    // The declared rank, fixed sizes and bounds (as an open-shape input).
    if (tensor.shape().size() != v.shape.size()) {
      return invalid_argument("input '" + v.name + "' of function '" + plan_.info.name + "' must have rank " +
                              std::to_string(v.shape.size()) + " (" + shape_to_string(v.shape) + "), got " +
                              shape_to_string(tensor.shape()));
    }
    for (size_t d = 0; d < v.shape.size(); ++d) {
      const int64_t lo = d < v.dim_min.size() ? v.dim_min[d] : 0;
      const int64_t hi = d < v.dim_max.size() ? v.dim_max[d] : 0;
      const int64_t got = tensor.shape()[d];
      if ((v.shape[d] >= 0 && got != v.shape[d]) || (lo != 0 && got < lo) || (hi != 0 && got > hi)) {
        return invalid_argument("input '" + v.name + "' of function '" + plan_.info.name + "' dimension " +
                                std::to_string(d) + " is " + std::to_string(got) + ", the program allows " +
                                (v.shape[d] >= 0 ? std::to_string(v.shape[d])
                                                 : std::to_string(lo) + ".." + (hi != 0 ? std::to_string(hi) : "")));
      }
    }
  }
  return Status();
}

Status StagedSession::set_run_timeout(std::chrono::milliseconds timeout) {
  run_timeout_ = timeout;
  for (auto& per_step : sessions_) {
    for (auto& s : per_step) {
      if (s != nullptr) LOOM_RETURN_IF_ERROR(s->set_run_timeout(timeout));
    }
  }
  return Status();
}

Result<Session*> StagedSession::session_of(size_t step, size_t which) {
  auto& per_step = sessions_[step];
  if (per_step.size() <= which) per_step.resize(which + 1);
  if (per_step[which] != nullptr) return per_step[which].get();
  const std::string& name = staged_.steps[step].functions[which];
  const FunctionPlan* callee = nullptr;
  for (const FunctionPlan& f : program_->functions) {
    if (f.info.name == name) callee = &f;
  }
  if (callee == nullptr) return not_found("function '" + name + "' was not planned");
  LOOM_ASSIGN_OR_RETURN(auto state, make_session_state(program_, callee));
  per_step[which].reset(new Session(std::move(state)));
  LOOM_RETURN_IF_ERROR(per_step[which]->set_run_timeout(run_timeout_));
  return per_step[which].get();
}

Status StagedSession::run_body(Session& body, const std::string& what) {
  Status st = body.run();
  if (!st.ok()) return st.with_context(what);
  return Status();
}

Status StagedSession::run() {
  for (size_t i = 0; i < set_.size(); ++i) {
    if (!set_[i]) {
      return failed_precondition("input '" + staged_.values[staged_.inputs[i]].name + "' of function '" +
                                 plan_.info.name + "' was not set; set_input gives it with its shape");
    }
  }
  // Values made by steps start as tensors: a value may hold a sequence in
  // one run and none in the next (an If's result).
  std::vector<bool> is_input(staged_.values.size(), false);
  for (uint32_t v : staged_.inputs) is_input[v] = true;
  for (size_t v = 0; v < staged_.values.size(); ++v) {
    if (!is_input[v]) is_sequence_[v] = is_none_[v] = false;
  }
  for (size_t s = 0; s < staged_.steps.size(); ++s) {
    const StagedStep& step = staged_.steps[s];
    Status st;
    if (step.op == OpCode::kCall || step.kernel == "Scan") {  // tensors only
      for (uint32_t v : step.inputs) {
        if (v != kAbsentValue && !st.ok()) break;
        if (v != kAbsentValue) st = tensor_value(v).status();
      }
      if (!st.ok()) return st.with_context("function '" + plan_.info.name + "', " + step.name);
    }
    if (step.op == OpCode::kCall) {
      st = run_call(s);
    } else if (step.op == OpCode::kKernelCall) {
      st = lowering::is_sequence_op(step.kernel) ? run_sequence_op(s)
           : lowering::is_value_op(step.kernel)  ? run_value_op(s)
                                                 : run_host_kernel(s);
    } else if (step.kernel == "If") {
      st = run_if(s);
    } else if (step.kernel == "Loop") {
      st = run_loop(s);
    } else if (step.kernel == "Scan") {
      st = run_scan(s);
    } else if (step.kernel == "SequenceMap") {
      st = run_sequence_map(s);
    } else {
      st = unimplemented("unknown control-flow operator '" + step.kernel + "'");
    }
    if (!st.ok()) return st.with_context("function '" + plan_.info.name + "', " + step.name);
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const uint32_t v = staged_.outputs[i];
    output_values_[i] = value_of(v);
    outputs_[i] = output_values_[i].is_tensor() ? output_values_[i].tensor : Tensor();
  }
  return Status();
}

Status StagedSession::run_call(size_t s) {
  const StagedStep& step = staged_.steps[s];
  LOOM_ASSIGN_OR_RETURN(Session * callee, session_of(s, 0));
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    LOOM_RETURN_IF_ERROR(tensor_value(step.inputs[i]).status());
    LOOM_RETURN_IF_ERROR(callee->set_input(i, values_[step.inputs[i]]));
  }
  LOOM_RETURN_IF_ERROR(callee->run());
  for (size_t i = 0; i < step.outputs.size(); ++i) values_[step.outputs[i]] = callee->output(i);
  return Status();
}

Status StagedSession::run_if(size_t s) {
  const StagedStep& step = staged_.steps[s];
  if (step.inputs.empty() || step.inputs[0] == kAbsentValue) return invalid_argument("If has no condition");
  LOOM_ASSIGN_OR_RETURN(const Tensor* condition, tensor_value(step.inputs[0]));
  LOOM_ASSIGN_OR_RETURN(int64_t cond, staged::scalar_of(*condition, "the condition"));
  const size_t branch = cond != 0 ? 0 : 1;
  LOOM_ASSIGN_OR_RETURN(Session * body, session_of(s, branch));
  const size_t first_capture = step.inputs.size() - step.captures;
  for (size_t c = 0; c < step.captures; ++c) {
    LOOM_RETURN_IF_ERROR(body->set_input_value(c, value_of(step.inputs[first_capture + c])));
  }
  LOOM_RETURN_IF_ERROR(run_body(*body, branch == 0 ? "then_branch" : "else_branch"));
  if (body->output_count() != step.outputs.size()) {
    return invalid_argument(std::string(branch == 0 ? "then_branch" : "else_branch") + " returns " +
                            std::to_string(body->output_count()) + " values for " + std::to_string(step.outputs.size()) +
                            " outputs");
  }
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    LOOM_ASSIGN_OR_RETURN(Value out, body->output_value(i));
    put_value(step.outputs[i], std::move(out));
  }
  return Status();
}

Status StagedSession::run_loop(size_t s) {
  const StagedStep& step = staged_.steps[s];
  const size_t own = step.inputs.size() - step.captures;
  if (own < 2) return invalid_argument("Loop takes M, cond and the loop-carried values");
  const size_t carried = own - 2;
  const uint64_t limit = program_->max_loop_iterations;
  bool has_trip = step.inputs[0] != kAbsentValue;
  int64_t trip = 0;
  if (has_trip) {
    LOOM_ASSIGN_OR_RETURN(const Tensor* m, tensor_value(step.inputs[0]));
    LOOM_ASSIGN_OR_RETURN(trip, staged::scalar_of(*m, "the trip count M"));
    if (trip > 0 && static_cast<uint64_t>(trip) > limit) {
      return resource_exhausted("the trip count M is " + std::to_string(trip) + ", over the limit of " +
                                std::to_string(limit) + " iterations (LoadOptions::max_loop_iterations)");
    }
  }
  bool cond = true;
  if (step.inputs[1] != kAbsentValue) {
    LOOM_ASSIGN_OR_RETURN(const Tensor* first, tensor_value(step.inputs[1]));
    LOOM_ASSIGN_OR_RETURN(int64_t c, staged::scalar_of(*first, "the condition"));
    cond = c != 0;
  }
  LOOM_ASSIGN_OR_RETURN(Session * body, session_of(s, 0));
  const size_t scans = step.outputs.size() - carried;
  if (body->function().inputs.size() != own + step.captures) {
    return invalid_argument("its body takes " + std::to_string(body->function().inputs.size()) + " inputs, not " +
                            std::to_string(own + step.captures));
  }
  std::vector<Value> state(carried);
  for (size_t k = 0; k < carried; ++k) state[k] = value_of(step.inputs[2 + k]);
  std::vector<std::vector<Tensor>> scanned(scans);
  LOOM_ASSIGN_OR_RETURN(Tensor iteration, Tensor::zeros(DType::kI64, {}));
  LOOM_ASSIGN_OR_RETURN(Tensor condition, Tensor::zeros(DType::kBool, {}));
  const size_t first_capture = step.inputs.size() - step.captures;
  for (size_t c = 0; c < step.captures; ++c) {
    LOOM_RETURN_IF_ERROR(body->set_input_value(own + c, value_of(step.inputs[first_capture + c])));
  }
  std::shared_ptr<Trace> trace;
  if (program_->channel != nullptr && program_->channel->tracing()) trace = program_->channel->active_trace();
  int64_t i = 0;
  for (; (!has_trip || i < trip) && cond; ++i) {
    if (static_cast<uint64_t>(i) >= limit) {
      return resource_exhausted("still running after " + std::to_string(limit) +
                                " iterations, the limit (LoadOptions::max_loop_iterations)");
    }
    const uint64_t start = trace != nullptr ? staged::clock_ns() : 0;
    *iteration.data_as<int64_t>() = i;
    *condition.data_as<uint8_t>() = 1;
    LOOM_RETURN_IF_ERROR(body->set_input(0, iteration));
    LOOM_RETURN_IF_ERROR(body->set_input(1, condition));
    for (size_t k = 0; k < carried; ++k) LOOM_RETURN_IF_ERROR(body->set_input_value(2 + k, state[k]));
    LOOM_RETURN_IF_ERROR(run_body(*body, "body, iteration " + std::to_string(i)));
    if (body->output_count() != 1 + carried + scans) {
      return invalid_argument("its body returns " + std::to_string(body->output_count()) + " values, not " +
                              std::to_string(1 + carried + scans));
    }
    LOOM_ASSIGN_OR_RETURN(int64_t c, staged::scalar_of(body->output(0), "the body's condition"));
    cond = c != 0;
    for (size_t k = 0; k < carried; ++k) {
      LOOM_ASSIGN_OR_RETURN(Value next, body->output_value(1 + k));
      const bool tensors = next.is_tensor() && state[k].is_tensor();
      // An optional going in may come out as what it holds, and the reverse.
      const bool kinds_differ = next.is_tensor() != state[k].is_tensor() && !next.is_none() && !state[k].is_none();
      if (kinds_differ || (tensors && next.tensor.dtype() != state[k].tensor.dtype())) {
        auto type = [](const Value& v) {
          return v.is_tensor() ? std::string(dtype_name(v.tensor.dtype())) : describe_value(v);
        };
        return invalid_argument("loop-carried value '" + staged_.values[step.outputs[k]].name + "' is " +
                                type(state[k]) + " going into iteration " + std::to_string(i) + " and " +
                                type(next) + " out of it: a loop-carried value keeps its type");
      }
      state[k] = std::move(next);
    }
    for (size_t k = 0; k < scans; ++k) {
      const Tensor& next = body->output(1 + carried + k);
      if (!body->output_value(1 + carried + k)->is_tensor()) {
        return invalid_argument("scan output '" + staged_.values[step.outputs[carried + k]].name +
                                "' is not a tensor in iteration " + std::to_string(i));
      }
      LOOM_RETURN_IF_ERROR(staged::same_as_first(scanned[k], next, "scan output '" + staged_.values[step.outputs[carried + k]].name + "'", i));
      scanned[k].push_back(next);
    }
    if (trace != nullptr) {
      Trace::Event e;
      e.track = Trace::kHostTrack;
      e.category = "control";
      e.name = "Loop iteration " + std::to_string(i);
      e.timestamp_ns = start;
      e.duration_ns = staged::clock_ns() - start;
      trace->record(std::move(e));
    }
  }
  for (size_t k = 0; k < carried; ++k) put_value(step.outputs[k], std::move(state[k]));
  for (size_t k = 0; k < scans; ++k) {
    LOOM_ASSIGN_OR_RETURN(values_[step.outputs[carried + k]],
                          staged::stack(scanned[k], 0, false, "scan output '" + staged_.values[step.outputs[carried + k]].name + "'"));
  }
  return Status();
}

Status StagedSession::run_scan(size_t s) {
  const StagedStep& step = staged_.steps[s];
  const size_t own = step.inputs.size() - step.captures;
  const int64_t scan_count = staged::int_attribute(step, "num_scan_inputs", -1);
  const bool batched = step.opset > 0 && step.opset < 9;  // opset 8: a batch axis first, sequence_lens
  const size_t lengths = batched ? 1 : 0;
  if (scan_count < 1 || own < lengths + static_cast<size_t>(scan_count)) {
    return invalid_argument("Scan needs num_scan_inputs of at least 1 and as many inputs");
  }
  const size_t states = own - lengths - static_cast<size_t>(scan_count);
  const size_t scans_in = static_cast<size_t>(scan_count);
  const size_t scans_out = step.outputs.size() - states;
  LOOM_ASSIGN_OR_RETURN(Session * body, session_of(s, 0));
  const size_t first_capture = step.inputs.size() - step.captures;
  for (size_t c = 0; c < step.captures; ++c) {
    LOOM_RETURN_IF_ERROR(body->set_input_value(states + scans_in + c, value_of(step.inputs[first_capture + c])));
  }
  if (batched && step.inputs[0] != kAbsentValue) {
    return unimplemented("Scan (opset 8) with sequence_lens is not supported; leave the input out");
  }
  std::vector<int64_t> in_axes = staged::ints_attribute(step, "scan_input_axes");
  std::vector<int64_t> in_dirs = staged::ints_attribute(step, batched ? "directions" : "scan_input_directions");
  std::vector<int64_t> out_axes = staged::ints_attribute(step, "scan_output_axes");
  std::vector<int64_t> out_dirs = staged::ints_attribute(step, "scan_output_directions");

  // One batch (opset 8: each row of the batch axis; later: the whole input).
  auto run_one = [&](std::vector<Tensor> state, const std::vector<const Tensor*>& scans,
                     std::vector<Tensor>& results) -> Status {
    int64_t length = -1;
    std::vector<size_t> axes(scans_in);
    for (size_t k = 0; k < scans_in; ++k) {
      const Tensor& t = *scans[k];
      const int64_t rank = static_cast<int64_t>(t.shape().size());
      int64_t axis = k < in_axes.size() ? in_axes[k] : 0;
      if (axis < -rank || axis >= rank) {
        return invalid_argument("scan input " + std::to_string(k) + " has rank " + std::to_string(rank) +
                                "; its axis " + std::to_string(axis) + " is out of range");
      }
      axes[k] = static_cast<size_t>(axis < 0 ? axis + rank : axis);
      const int64_t here = t.shape()[axes[k]];
      if (length >= 0 && here != length) {
        return invalid_argument("scan inputs disagree on the sequence length: " + std::to_string(length) + " and " +
                                std::to_string(here));
      }
      length = here;
    }
    if (static_cast<uint64_t>(length) > program_->max_loop_iterations) {
      return resource_exhausted("the sequence length " + std::to_string(length) + " is over the limit of " +
                                std::to_string(program_->max_loop_iterations) +
                                " iterations (LoadOptions::max_loop_iterations)");
    }
    std::vector<std::vector<Tensor>> scanned(scans_out);
    for (int64_t t = 0; t < length; ++t) {
      for (size_t k = 0; k < states; ++k) LOOM_RETURN_IF_ERROR(body->set_input(k, state[k]));
      for (size_t k = 0; k < scans_in; ++k) {
        const bool reverse = k < in_dirs.size() && in_dirs[k] != 0;
        LOOM_ASSIGN_OR_RETURN(Tensor slice, staged::take_slice(*scans[k], axes[k], reverse ? length - 1 - t : t));
        LOOM_RETURN_IF_ERROR(body->set_input(states + k, slice));
      }
      LOOM_RETURN_IF_ERROR(run_body(*body, "body, iteration " + std::to_string(t)));
      if (body->output_count() != states + scans_out) {
        return invalid_argument("its body returns " + std::to_string(body->output_count()) + " values, not " +
                                std::to_string(states + scans_out));
      }
      for (size_t k = 0; k < states; ++k) {
        if (body->output(k).dtype() != state[k].dtype()) {
          return invalid_argument("state value " + std::to_string(k) + " changes type from " +
                                  std::string(dtype_name(state[k].dtype())) + " to " +
                                  std::string(dtype_name(body->output(k).dtype())) + " in iteration " + std::to_string(t));
        }
        state[k] = body->output(k);
      }
      for (size_t k = 0; k < scans_out; ++k) {
        const Tensor& next = body->output(states + k);
        LOOM_RETURN_IF_ERROR(staged::same_as_first(scanned[k], next, "scan output " + std::to_string(k), t));
        scanned[k].push_back(next);
      }
    }
    results.clear();
    for (size_t k = 0; k < states; ++k) results.push_back(std::move(state[k]));
    for (size_t k = 0; k < scans_out; ++k) {
      const bool reverse = k < out_dirs.size() && out_dirs[k] != 0;
      LOOM_ASSIGN_OR_RETURN(Tensor stacked,
                            staged::stack(scanned[k], k < out_axes.size() ? out_axes[k] : 0, reverse,
                                  "scan output " + std::to_string(k)));
      results.push_back(std::move(stacked));
    }
    return Status();
  };

  if (!batched) {
    std::vector<Tensor> state;
    std::vector<const Tensor*> scans;
    for (size_t k = 0; k < states; ++k) state.push_back(values_[step.inputs[k]]);
    for (size_t k = 0; k < scans_in; ++k) scans.push_back(&values_[step.inputs[states + k]]);
    std::vector<Tensor> results;
    LOOM_RETURN_IF_ERROR(run_one(std::move(state), scans, results));
    for (size_t i = 0; i < step.outputs.size(); ++i) values_[step.outputs[i]] = std::move(results[i]);
    return Status();
  }
  // Opset 8: dimension 0 of every state and scan input is the batch; the
  // scan axis is dimension 1 (0 once a row is taken).
  int64_t batch = -1;
  for (size_t k = 0; k < states + scans_in; ++k) {
    const Tensor& t = values_[step.inputs[1 + k]];
    if (t.shape().empty() || (batch >= 0 && t.shape()[0] != batch)) {
      return invalid_argument("Scan (opset 8): every state and scan input has the batch size as dimension 0");
    }
    batch = t.shape()[0];
  }
  in_axes.clear();
  std::vector<std::vector<Tensor>> per_row(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> state;
    std::vector<Tensor> rows;
    for (size_t k = 0; k < states; ++k) {
      LOOM_ASSIGN_OR_RETURN(Tensor row, staged::take_slice(values_[step.inputs[1 + k]], 0, b));
      state.push_back(std::move(row));
    }
    for (size_t k = 0; k < scans_in; ++k) {
      LOOM_ASSIGN_OR_RETURN(Tensor row, staged::take_slice(values_[step.inputs[1 + states + k]], 0, b));
      rows.push_back(std::move(row));
    }
    std::vector<const Tensor*> scans;
    for (const Tensor& r : rows) scans.push_back(&r);
    LOOM_RETURN_IF_ERROR(run_one(std::move(state), scans, per_row[static_cast<size_t>(b)]));
  }
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    std::vector<Tensor> rows;
    for (auto& r : per_row) rows.push_back(std::move(r[i]));
    LOOM_ASSIGN_OR_RETURN(values_[step.outputs[i]], staged::stack(rows, 0, false, "output " + std::to_string(i)));
  }
  return Status();
}

}  // namespace loom::runtime

