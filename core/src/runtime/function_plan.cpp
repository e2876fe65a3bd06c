// Turns a function of the program into an execution plan: where each value
// lives, which kernel or delegate each instruction calls, checked up front so
// that a run has nothing left to validate.
#include <algorithm>
#include <string>

#include "runtime/program_state.hpp"

namespace loom::runtime {
namespace {

std::string where(const FunctionDef& def, size_t instruction) {
  return "function '" + def.name + "' instruction " + std::to_string(instruction);
}

std::string value_label(const FunctionDef& def, uint32_t index) {
  std::string label = "value " + std::to_string(index);
  if (index < def.values.size() && !def.values[index].name.empty()) {
    label += " ('" + def.values[index].name + "')";
  }
  return label;
}

Status check_value_index(const FunctionDef& def, size_t instruction,
                         uint32_t index, const char* role) {
  if (index >= def.values.size()) {
    return invalid_argument(where(def, instruction) + ": " + role + " value index " +
                            std::to_string(index) + " out of range (function has " +
                            std::to_string(def.values.size()) + " values)");
  }
  if (def.values[index].kind != ValueKind::kTensor) {
    return unimplemented(where(def, instruction) + ": " + role + " " +
                         value_label(def, index) +
                         " is not a tensor; only tensor operands are supported");
  }
  return Status();
}

// Checks the declared output types of a kernel call against the kernel's own
// shape inference.
Status check_inferred(const FunctionDef& def, size_t instruction,
                      const kernels::KernelInfo& kernel,
                      const kernels::Attributes& attributes,
                      const std::vector<ValuePlan>& values, const StepPlan& step) {
  if (kernel.infer == nullptr) return Status();
  std::vector<kernels::TensorType> in;
  std::vector<kernels::TensorRef> constants(step.inputs.size());
  in.reserve(step.inputs.size());
  for (size_t k = 0; k < step.inputs.size(); ++k) {
    const uint32_t v = step.inputs[k];
    if (v == kAbsentValue) {
      in.push_back({});
      continue;
    }
    kernels::TensorType t{values[v].dtype, values[v].shape};
    if (values[v].storage == Storage::kParameter) {
      // Operators whose output shape depends on an operand's contents read
      // the parameter here.
      constants[k] = {values[v].dtype, values[v].shape,
                      const_cast<std::byte*>(values[v].parameter), values[v].bytes};
      t.value = &constants[k];
    }
    in.push_back(std::move(t));
  }
  auto inferred = kernel.infer(in, attributes);
  if (!inferred.ok()) {
    return inferred.status().with_context(where(def, instruction) + " (" +
                                          std::string(kernel.op) + ")");
  }
  // Trailing optional outputs (MaxPool's Indices, Dropout's mask, ...) may be
  // left out: infer() lists every output the operator can give.
  if (inferred->size() < step.outputs.size()) {
    return invalid_argument(where(def, instruction) + " (" + std::string(kernel.op) +
                            "): declares " + std::to_string(step.outputs.size()) +
                            " outputs, the operator produces at most " +
                            std::to_string(inferred->size()));
  }
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    const ValuePlan& out = values[step.outputs[i]];
    const kernels::TensorType& t = (*inferred)[i];
    if (t.dtype != out.dtype || t.shape != out.shape) {
      return invalid_argument(
          where(def, instruction) + " (" + std::string(kernel.op) + "): output " +
          std::to_string(i) + " " + value_label(def, step.outputs[i]) +
          " is declared " + std::string(dtype_name(out.dtype)) + " " +
          shape_to_string(out.shape) + " but the operator produces " +
          std::string(dtype_name(t.dtype)) + " " + shape_to_string(t.shape));
    }
  }
  return Status();
}

}  // namespace

Result<FunctionPlan> build_function_plan(const ProgramReader& reader,
                                         const ParameterStore& parameters,
                                         const FunctionDef& def,
                                         const kernels::KernelRegistry& kernels,
                                         size_t delegate_count) {
  FunctionPlan plan;
  plan.info.name = def.name;
  plan.info.reflection = def.reflection;
  plan.inputs = def.inputs;
  plan.outputs = def.outputs;
  plan.arena_size = def.memory_plan.arena_size;
  plan.arena_alignment = std::max<uint32_t>(64, def.memory_plan.alignment);
  if ((plan.arena_alignment & (plan.arena_alignment - 1)) != 0) {
    return invalid_argument("function '" + def.name + "': memory plan alignment " +
                            std::to_string(plan.arena_alignment) +
                            " is not a power of two");
  }

  // Types and sizes of every value.
  plan.values.resize(def.values.size());
  for (uint32_t i = 0; i < def.values.size(); ++i) {
    const ValueDef& vd = def.values[i];
    ValuePlan& v = plan.values[i];
    v.name = vd.name.empty() ? "%" + std::to_string(i) : vd.name;
    v.dtype = vd.dtype;
    v.shape = vd.shape;
    if (vd.kind != ValueKind::kTensor) continue;
    size_t es = dtype_size(vd.dtype);
    if (es == 0) {
      return invalid_argument("function '" + def.name + "' " + value_label(def, i) +
                              ": invalid dtype");
    }
    auto count = element_count(vd.shape);
    if (!count.ok()) {
      return count.status().with_context("function '" + def.name + "' " +
                                         value_label(def, i));
    }
    if (*count > (uint64_t{1} << 46) / es) {
      return invalid_argument("function '" + def.name + "' " + value_label(def, i) +
                              ": tensor of shape " + shape_to_string(vd.shape) +
                              " is too large");
    }
    v.bytes = *count * es;
  }

  // Arguments and results.
  auto add_args = [&](const std::vector<uint32_t>& indices, Storage storage,
                      std::vector<ArgumentInfo>& out, const char* role) -> Status {
    for (uint32_t k = 0; k < indices.size(); ++k) {
      uint32_t v = indices[k];
      if (v >= def.values.size() || def.values[v].kind != ValueKind::kTensor) {
        return invalid_argument("function '" + def.name + "': " + role + " " +
                                std::to_string(k) + " is not a tensor value");
      }
      ValuePlan& vp = plan.values[v];
      if (vp.storage == Storage::kNone) {
        vp.storage = storage;
        vp.io_index = k;
      }
      out.push_back({vp.name, vp.dtype, vp.shape, {}, {}, {}});
    }
    return Status();
  };
  LOOM_RETURN_IF_ERROR(add_args(def.inputs, Storage::kInput, plan.info.inputs, "input"));
  LOOM_RETURN_IF_ERROR(add_args(def.outputs, Storage::kOutput, plan.info.outputs, "output"));
  for (size_t a = 0; a < plan.info.inputs.size(); ++a) {
    for (size_t b = a + 1; b < plan.info.inputs.size(); ++b) {
      if (plan.info.inputs[a].name == plan.info.inputs[b].name) {
        return invalid_argument("function '" + def.name + "': two inputs are named '" +
                                plan.info.inputs[a].name + "'");
      }
    }
  }

  // Constants.
  for (uint32_t i = 0; i < def.values.size(); ++i) {
    const ValueDef& vd = def.values[i];
    if (vd.parameter < 0) continue;
    ValuePlan& v = plan.values[i];
    if (v.storage != Storage::kNone) {
      return invalid_argument("function '" + def.name + "' " + value_label(def, i) +
                              " is both an argument and a parameter");
    }
    const auto& params = reader.program().parameters;
    if (static_cast<size_t>(vd.parameter) >= params.size()) {
      return invalid_argument("function '" + def.name + "' " + value_label(def, i) +
                              ": parameter index " + std::to_string(vd.parameter) +
                              " out of range (program has " +
                              std::to_string(params.size()) + ")");
    }
    const ParameterDef& p = params[vd.parameter];
    std::span<const std::byte> bytes = parameters.bytes(static_cast<uint32_t>(vd.parameter));
    if (bytes.size() != v.bytes || p.dtype != v.dtype) {
      return invalid_argument("function '" + def.name + "' " + value_label(def, i) +
                              " is " + std::string(dtype_name(v.dtype)) + " " +
                              shape_to_string(v.shape) + " (" + std::to_string(v.bytes) +
                              " bytes) but parameter '" + p.name + "' is " +
                              std::string(dtype_name(p.dtype)) + " with " +
                              std::to_string(bytes.size()) + " bytes");
    }
    v.storage = Storage::kParameter;
    v.parameter = bytes.data();
  }

  // Memory plan.
  for (const MemorySlotDef& slot : def.memory_plan.slots) {
    if (slot.value >= plan.values.size()) {
      return invalid_argument("function '" + def.name + "': memory plan slot for value " +
                              std::to_string(slot.value) + " out of range");
    }
    ValuePlan& v = plan.values[slot.value];
    if (v.storage != Storage::kNone) continue;  // arguments and constants keep theirs
    uint64_t end = 0;
    if (__builtin_add_overflow(slot.offset, slot.size, &end) || end > plan.arena_size ||
        slot.size < v.bytes) {
      return invalid_argument("function '" + def.name + "': memory plan slot of " +
                              value_label(def, slot.value) + " [" +
                              std::to_string(slot.offset) + ", +" +
                              std::to_string(slot.size) + ") does not hold its " +
                              std::to_string(v.bytes) + " bytes inside the arena of " +
                              std::to_string(plan.arena_size));
    }
    if (slot.offset % plan.arena_alignment != 0) {
      return invalid_argument("function '" + def.name + "': memory plan slot of " +
                              value_label(def, slot.value) + " at offset " +
                              std::to_string(slot.offset) + " is not aligned to " +
                              std::to_string(plan.arena_alignment));
    }
    v.storage = Storage::kArena;
    v.arena_offset = slot.offset;
  }

  // Instructions.
  for (uint32_t n = 0; n < def.instructions.size(); ++n) {
    const InstructionDef& ins = def.instructions[n];
    StepPlan step;
    step.op = ins.op;
    step.instruction = n;
    step.inputs = ins.inputs;
    step.outputs = ins.outputs;
    for (uint32_t v : ins.inputs) {
      if (v == kAbsentValue && ins.op == OpCode::kKernelCall) continue;  // optional operand left out
      LOOM_RETURN_IF_ERROR(check_value_index(def, n, v, "input"));
    }
    for (uint32_t v : ins.outputs) {
      LOOM_RETURN_IF_ERROR(check_value_index(def, n, v, "output"));
      Storage s = plan.values[v].storage;
      if (s == Storage::kParameter || s == Storage::kInput) {
        return invalid_argument(where(def, n) + " writes " + value_label(def, v) +
                                ", which is a read-only " +
                                (s == Storage::kInput ? "input" : "parameter"));
      }
      if (s == Storage::kNone) plan.values[v].storage = Storage::kOwned;
    }
    switch (ins.op) {
      case OpCode::kCall:
      case OpCode::kControl:
        return internal_error(where(def, n) + ": a call or control instruction outside a staged function");
      case OpCode::kKernelCall: {
        step.kernel = kernels.find(ins.kernel);
        if (step.kernel == nullptr) {
          std::string known;
          for (auto op : kernels.ops()) known += (known.empty() ? "" : ", ") + std::string(op);
          return unimplemented(where(def, n) + ": no reference kernel for operator '" +
                               ins.kernel + "' (available: " + known + ")");
        }
        step.attributes = kernels::Attributes(ins.attributes, ins.opset);
        LOOM_RETURN_IF_ERROR(check_inferred(def, n, *step.kernel, step.attributes,
                                            plan.values, step));
        break;
      }
      case OpCode::kDelegateCall:
        if (ins.delegate < 0 || static_cast<size_t>(ins.delegate) >= delegate_count) {
          return invalid_argument(where(def, n) + ": delegate index " +
                                  std::to_string(ins.delegate) + " out of range (program has " +
                                  std::to_string(delegate_count) + " delegates)");
        }
        step.delegate = ins.delegate;
        break;
      case OpCode::kMove:
        if (ins.inputs.size() != 1 || ins.outputs.size() != 1) {
          return invalid_argument(where(def, n) + ": move needs one input and one output");
        }
        if (plan.values[ins.inputs[0]].bytes != plan.values[ins.outputs[0]].bytes) {
          return invalid_argument(where(def, n) + ": move from " +
                                  value_label(def, ins.inputs[0]) + " to " +
                                  value_label(def, ins.outputs[0]) +
                                  " between tensors of different sizes");
        }
        break;
      case OpCode::kFree:
        break;  // storage is planned up front; nothing to do at run time
    }
    if (ins.op != OpCode::kFree) plan.steps.push_back(std::move(step));
  }

  // Every value a step reads must be produced by something.
  std::vector<bool> defined(plan.values.size(), false);
  for (uint32_t v = 0; v < plan.values.size(); ++v) {
    Storage s = plan.values[v].storage;
    defined[v] = s == Storage::kInput || s == Storage::kParameter;
  }
  for (const StepPlan& step : plan.steps) {
    for (uint32_t v : step.inputs) {
      if (v == kAbsentValue) continue;
      if (!defined[v]) {
        return invalid_argument(where(def, step.instruction) + " reads " +
                                value_label(def, v) + " before anything writes it");
      }
    }
    for (uint32_t v : step.outputs) defined[v] = true;
  }
  for (uint32_t v : plan.outputs) {
    if (!defined[v]) {
      return invalid_argument("function '" + def.name + "': result " +
                              value_label(def, v) + " is never written");
    }
  }
  return plan;
}

Status check_reference_call(const FunctionPlan& caller, const StepPlan& step,
                            const FunctionPlan& fn, const std::string& delegate) {
  const auto mismatch = [&](const std::string& what) {
    return invalid_argument("delegate '" + delegate + "': the reference function '" +
                            fn.info.name + "' does not match the call in function '" +
                            caller.info.name + "' (" + what + ")");
  };
  if (fn.info.inputs.size() != step.inputs.size()) {
    return mismatch("it takes " + std::to_string(fn.info.inputs.size()) + " inputs, the call passes " +
                    std::to_string(step.inputs.size()));
  }
  if (fn.info.outputs.size() != step.outputs.size()) {
    return mismatch("it returns " + std::to_string(fn.info.outputs.size()) +
                    " results, the call expects " + std::to_string(step.outputs.size()));
  }
  for (size_t t = 0; t < step.inputs.size() + step.outputs.size(); ++t) {
    const bool is_input = t < step.inputs.size();
    const uint32_t v = is_input ? step.inputs[t] : step.outputs[t - step.inputs.size()];
    const ArgumentInfo& arg =
        is_input ? fn.info.inputs[t] : fn.info.outputs[t - step.inputs.size()];
    if (v == kAbsentValue) return mismatch("operand '" + arg.name + "' is left out");
    const ValuePlan& value = caller.values[v];
    if (arg.dtype != value.dtype || arg.shape != value.shape) {
      return mismatch(std::string(is_input ? "input" : "result") + " '" + arg.name + "' is " +
                      std::string(dtype_name(arg.dtype)) + shape_to_string(arg.shape) +
                      ", the call's is " + std::string(dtype_name(value.dtype)) +
                      shape_to_string(value.shape));
    }
  }
  return Status();
}

}  // namespace loom::runtime
