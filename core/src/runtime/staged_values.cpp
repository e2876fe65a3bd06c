// Values of a staged function that are not tensors (docs/control-flow.md):
// sequences and optionals as the function's inputs and results, passed to
// and from bodies, and the steps that make and read them (Identity of any
// value, Optional, OptionalHasElement, OptionalGetElement, SequenceMap).
#include <string>
#include <utility>

#include "lowering/staged.hpp"
#include "runtime/program_state.hpp"
#include "runtime/staged_function.hpp"
#include "runtime/staged_tensors.hpp"

namespace loom::runtime {
namespace {

// What a declared input takes, for messages: "a sequence of f32 tensors".
std::string declared_value_kind(const ValueDef& v) {
  const std::string of = v.dtype == DType::kInvalid ? "" : " of " + std::string(dtype_name(v.dtype)) + " tensors";
  switch (v.kind) {
    case ValueKind::kSequence: return "a sequence" + of;
    case ValueKind::kOptionalTensor:
      return "an optional tensor" + (v.dtype == DType::kInvalid ? "" : " (" + std::string(dtype_name(v.dtype)) + ")") +
             " or none";
    case ValueKind::kOptionalSequence: return "an optional sequence" + of + " or none";
    default: return "a tensor";
  }
}

// A staged function's input of no declared type (a body's): any value.
bool takes_any_value(const ValueDef& v) { return v.kind == ValueKind::kTensor && v.unranked && v.dtype == DType::kInvalid; }

}  // namespace

Value StagedSession::value_of(uint32_t v) const {
  if (is_none_[v]) return Value::none();
  if (is_sequence_[v]) return Value::sequence(sequences_[v]);
  return Value::of(values_[v]);
}

void StagedSession::put_value(uint32_t v, Value value) {
  is_none_[v] = value.is_none();
  is_sequence_[v] = value.is_sequence();
  sequences_[v] = std::move(value.elements);
  values_[v] = value.is_tensor() ? std::move(value.tensor) : Tensor();
}

Status StagedSession::set_input_value(size_t index, const Value& value) {
  const ValueDef& v = staged_.values[staged_.inputs[index]];
  const std::string input = "input '" + v.name + "' of function '" + plan_.info.name + "'";
  if (!takes_any_value(v)) {
    const bool fits = v.kind == ValueKind::kTensor             ? value.is_tensor()
                      : v.kind == ValueKind::kSequence         ? value.is_sequence()
                      : v.kind == ValueKind::kOptionalTensor   ? !value.is_sequence()
                      : v.kind == ValueKind::kOptionalSequence ? !value.is_tensor()
                                                               : false;
    if (!fits) return invalid_argument(input + " takes " + declared_value_kind(v) + ", got " + describe_value(value));
    if (value.is_tensor() && v.kind == ValueKind::kTensor) {
      LOOM_RETURN_IF_ERROR(check_tensor_input(index, value.tensor));
    } else if (v.dtype != DType::kInvalid) {
      const Tensor* wrong = value.is_tensor() && value.tensor.dtype() != v.dtype ? &value.tensor : nullptr;
      for (size_t i = 0; i < value.elements.size() && wrong == nullptr; ++i) {
        if (value.elements[i].dtype() != v.dtype) wrong = &value.elements[i];
      }
      if (wrong != nullptr) {
        return invalid_argument(input + " takes " + declared_value_kind(v) + ", got one of " +
                                std::string(dtype_name(wrong->dtype())));
      }
    }
  }
  // Copied (set_input's contract): the caller's tensors may be views of
  // memory that does not outlive the call.
  auto own = [](const Tensor& t) { return Tensor::copy_of(t.dtype(), t.shape(), t.bytes()); };
  Value copy = Value::none();
  if (value.is_tensor()) {
    LOOM_ASSIGN_OR_RETURN(Tensor t, own(value.tensor));
    copy = Value::of(std::move(t));
  } else if (value.is_sequence()) {
    copy = Value::sequence({});
    for (const Tensor& e : value.elements) {
      LOOM_ASSIGN_OR_RETURN(Tensor t, own(e));
      copy.elements.push_back(std::move(t));
    }
  }
  put_value(staged_.inputs[index], std::move(copy));
  set_[index] = true;
  return Status();
}

Status StagedSession::run_value_op(size_t s) {
  const StagedStep& step = staged_.steps[s];
  const std::string& op = step.kernel;
  if (step.outputs.size() != 1) return invalid_argument(op + " has " + std::to_string(step.outputs.size()) + " outputs, not 1");
  const bool has_input = !step.inputs.empty() && step.inputs[0] != kAbsentValue;
  if (op == "Optional") {
    put_value(step.outputs[0], has_input ? value_of(step.inputs[0]) : Value::none());
    return Status();
  }
  if (op == "OptionalHasElement") {
    LOOM_ASSIGN_OR_RETURN(Tensor has, Tensor::zeros(DType::kBool, {}));
    *has.data_as<uint8_t>() = has_input && !is_none_[step.inputs[0]] ? 1 : 0;
    put_value(step.outputs[0], Value::of(std::move(has)));
    return Status();
  }
  if (!has_input) return invalid_argument(op + " has no input");
  const uint32_t in = step.inputs[0];
  if (op == "OptionalGetElement" && is_none_[in]) {
    return invalid_argument("OptionalGetElement of '" + staged_.values[in].name +
                            "': the optional is empty (none); test it with OptionalHasElement first");
  }
  if (op == "OptionalGetElement" || op == "Identity") {
    put_value(step.outputs[0], value_of(in));
    return Status();
  }
  return unimplemented("no host step for operator '" + op + "'");
}

Status StagedSession::run_sequence_map(size_t s) {
  const StagedStep& step = staged_.steps[s];
  const size_t own = step.inputs.size() - step.captures;
  if (own < 1 || step.inputs[0] == kAbsentValue) return invalid_argument("SequenceMap has no input sequence");
  LOOM_ASSIGN_OR_RETURN(std::vector<Tensor> * first, sequence_value(step.inputs[0]));
  const size_t length = first->size();
  if (length > program_->max_loop_iterations) {
    return resource_exhausted("the sequence has " + std::to_string(length) + " tensors, over the limit of " +
                              std::to_string(program_->max_loop_iterations) +
                              " iterations (LoadOptions::max_loop_iterations)");
  }
  for (size_t k = 1; k < own; ++k) {
    const uint32_t v = step.inputs[k];
    if (v == kAbsentValue) return invalid_argument("SequenceMap: input " + std::to_string(k) + " is left out");
    if (is_none_[v]) return invalid_argument("SequenceMap: input '" + staged_.values[v].name + "' is none");
    if (is_sequence_[v] && sequences_[v].size() != length) {
      return invalid_argument("SequenceMap: input sequence '" + staged_.values[v].name + "' has " +
                              std::to_string(sequences_[v].size()) + " tensors, the first " + std::to_string(length));
    }
  }
  LOOM_ASSIGN_OR_RETURN(Session * body, session_of(s, 0));
  if (body->function().inputs.size() != own + step.captures) {
    return invalid_argument("its body takes " + std::to_string(body->function().inputs.size()) + " inputs, not " +
                            std::to_string(own + step.captures));
  }
  const size_t first_capture = step.inputs.size() - step.captures;
  for (size_t c = 0; c < step.captures; ++c) {
    LOOM_RETURN_IF_ERROR(body->set_input_value(own + c, value_of(step.inputs[first_capture + c])));
  }
  for (size_t k = 1; k < own; ++k) {  // a tensor goes to every iteration whole
    if (!is_sequence_[step.inputs[k]]) LOOM_RETURN_IF_ERROR(body->set_input(k, values_[step.inputs[k]]));
  }
  std::vector<std::vector<Tensor>> results(step.outputs.size());
  for (size_t i = 0; i < length; ++i) {
    for (size_t k = 0; k < own; ++k) {
      const uint32_t v = step.inputs[k];
      if (is_sequence_[v]) LOOM_RETURN_IF_ERROR(body->set_input(k, sequences_[v][i]));
    }
    Status st = body->run();
    if (!st.ok()) return st.with_context("body, element " + std::to_string(i));
    if (body->output_count() != step.outputs.size()) {
      return invalid_argument("its body returns " + std::to_string(body->output_count()) + " values for " +
                              std::to_string(step.outputs.size()) + " outputs");
    }
    for (size_t k = 0; k < step.outputs.size(); ++k) {
      LOOM_ASSIGN_OR_RETURN(Value out, body->output_value(k));
      if (!out.is_tensor()) {
        return invalid_argument("its body's result " + std::to_string(k) + " is " + describe_value(out) +
                                " for element " + std::to_string(i) + "; each result must be a tensor");
      }
      results[k].push_back(std::move(out.tensor));
    }
  }
  for (size_t k = 0; k < step.outputs.size(); ++k) put_value(step.outputs[k], Value::sequence(std::move(results[k])));
  return Status();
}

}  // namespace loom::runtime
