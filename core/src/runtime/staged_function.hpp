// Staged functions at run time (format 1.5, docs/control-flow.md).
//
// A staged function runs on the host, step by step: a call step runs
// another function of the program (a part of the graph: an open-shape
// function, specialized and compiled for the target plugins at the shapes
// and dtypes its inputs have then, and cached); a control step runs If, Loop
// or Scan, whose bodies are functions of the program too, run through
// sessions of their own once per branch taken or per iteration. Values live
// in tensors the session owns, sized when their step has run.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel.hpp"
#include "loom/program.hpp"
#include "loom/runtime.hpp"
#include "loom/status.hpp"
#include "loom/tensor.hpp"
#include "loom/value.hpp"

namespace loom::runtime {

struct FunctionPlan;

struct StagedStep {
  OpCode op = OpCode::kCall;
  std::string kernel;  // kControl: "If", "Loop", "Scan"
  std::vector<AttributeDef> attributes;
  int32_t opset = 0;
  std::vector<std::string> functions;  // callee or bodies, by name
  uint32_t captures = 0;
  std::vector<uint32_t> inputs;   // value indices; kAbsentValue: left out
  std::vector<uint32_t> outputs;  // value indices
  std::string name;               // for messages: "step 2 (Loop 'Loop_0')"
};

struct StagedPlan {
  std::vector<ValueDef> values;
  std::vector<StagedStep> steps;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  // Values that are program parameters: their tensors, copied at load.
  std::vector<std::pair<uint32_t, Tensor>> constants;
};

// The plan of `def`, a staged function of `program`: instructions checked
// (kernels, operand counts), parameters copied from `parameter_bytes`.
Result<std::shared_ptr<const StagedPlan>> build_staged_plan(
    const ProgramDef& program, const FunctionDef& def, const kernels::KernelRegistry& kernels,
    const std::function<std::span<const std::byte>(uint32_t parameter)>& parameter_bytes);

class StagedSession {
 public:
  // `plan` belongs to a function of `program`.
  StagedSession(std::shared_ptr<Program::State> program, const FunctionPlan& plan);
  ~StagedSession();

  Status set_input(size_t index, const Tensor& tensor) { return set_input_value(index, Value::of(tensor)); }
  // A tensor, a sequence or none, as the input's kind allows (an input of no
  // declared type, a body's, takes any).
  Status set_input_value(size_t index, const Value& value);
  Status run();
  Status set_run_timeout(std::chrono::milliseconds timeout);
  size_t output_count() const { return outputs_.size(); }
  // A result that is not a tensor reads as an empty tensor here.
  const Tensor& output(size_t index) const { return outputs_[index]; }
  const Value& output_value(size_t index) const { return output_values_[index]; }

 private:
  struct Callee;
  Result<Session*> session_of(size_t step, size_t which);
  Status run_call(size_t step);
  Status run_if(size_t step);
  Status run_loop(size_t step);
  Status run_scan(size_t step);
  Status run_body(Session& body, const std::string& what);
  Status run_sequence_op(size_t step);
  // Identity of any value, Optional, OptionalHasElement, OptionalGetElement.
  Status run_value_op(size_t step);
  Status run_sequence_map(size_t step);
  // Checks a tensor against input `index`'s declared dtype, rank and sizes.
  Status check_tensor_input(size_t index, const Tensor& tensor) const;
  // Value `v` as a Value (a copy), and `v` set to `value`.
  Value value_of(uint32_t v) const;
  void put_value(uint32_t v, Value value);
  // A reference kernel on the host (NonZero, NonMaxSuppression, ...): its
  // outputs sized by its infer function from the operands' values.
  Status run_host_kernel(size_t step);
  // Value `v` as a tensor; an error when it holds a sequence.
  Result<const Tensor*> tensor_value(uint32_t v) const;
  Result<std::vector<Tensor>*> sequence_value(uint32_t v);

  std::shared_ptr<Program::State> program_;
  const FunctionPlan& plan_;
  const StagedPlan& staged_;
  std::vector<Tensor> values_;
  // A value that holds a sequence (of tensors): its elements; a value that
  // holds a tensor has none here (is_sequence_ false).
  std::vector<std::vector<Tensor>> sequences_;
  std::vector<bool> is_sequence_;
  // A value that holds an empty optional (none).
  std::vector<bool> is_none_;
  std::vector<bool> set_;
  std::vector<Tensor> outputs_;
  std::vector<Value> output_values_;
  // Per step, per callee or body: a session, made at the step's first run.
  std::vector<std::vector<std::unique_ptr<Session>>> sessions_;
  std::chrono::milliseconds run_timeout_{0};
};

}  // namespace loom::runtime
