#include "program_file/validate.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <string_view>

#include "program_file/format.hpp"

namespace loom::container {
namespace {

std::string at(std::string_view table, size_t index) {
  return std::string(table) + "[" + std::to_string(index) + "]";
}

Status check_index(const std::string& where, int64_t index, size_t count,
                   std::string_view what, const std::string& owner) {
  if (index < 0 || static_cast<uint64_t>(index) >= count) {
    return invalid_argument(where + ": " + std::string(what) + " " + std::to_string(index) +
                            " out of range (" + owner + " has " + std::to_string(count) +
                            " " + std::string(what) + "s)");
  }
  return Status();
}

bool is_sequence_or_optional(ValueKind kind) {
  return kind == ValueKind::kSequence || kind == ValueKind::kOptionalTensor || kind == ValueKind::kOptionalSequence;
}

Status check_dtype(const std::string& where, DType dtype) {
  if (static_cast<uint8_t>(dtype) > static_cast<uint8_t>(DType::kBool)) {
    return invalid_argument(where + ".dtype: unknown dtype " +
                            std::to_string(static_cast<unsigned>(dtype)));
  }
  return Status();
}

Status validate_value(const std::string& where, const ValueDef& v, size_t parameter_count) {
  if (static_cast<uint8_t>(v.kind) > static_cast<uint8_t>(ValueKind::kOptionalSequence)) {
    return invalid_argument(where + ".kind: unknown value kind " +
                            std::to_string(static_cast<unsigned>(v.kind)));
  }
  LOOM_RETURN_IF_ERROR(check_dtype(where, v.dtype));
  if (!v.dim_order.empty()) {
    if (v.dim_order.size() != v.shape.size()) {
      return invalid_argument(where + ".dim_order: " + std::to_string(v.dim_order.size()) +
                              " entries for a rank-" + std::to_string(v.shape.size()) +
                              " shape");
    }
    std::vector<bool> seen(v.shape.size(), false);
    for (size_t d = 0; d < v.dim_order.size(); ++d) {
      uint8_t dim = v.dim_order[d];
      if (dim >= seen.size() || seen[dim]) {
        return invalid_argument(where + ".dim_order[" + std::to_string(d) + "]: " +
                                std::to_string(dim) + " is not a permutation of 0.." +
                                std::to_string(v.shape.size() - 1));
      }
      seen[dim] = true;
    }
  }
  if (v.parameter != -1) {
    LOOM_RETURN_IF_ERROR(
        check_index(where + ".parameter", v.parameter, parameter_count, "parameter", "program"));
  }
  const auto per_dim = [&](std::string_view field, size_t size) -> Status {
    if (size != 0 && size != v.shape.size()) {
      return invalid_argument(where + "." + std::string(field) + ": " + std::to_string(size) +
                              " entries for a rank-" + std::to_string(v.shape.size()) + " shape");
    }
    return Status();
  };
  LOOM_RETURN_IF_ERROR(per_dim("dim_symbols", v.dim_symbols.size()));
  LOOM_RETURN_IF_ERROR(per_dim("dim_min", v.dim_min.size()));
  LOOM_RETURN_IF_ERROR(per_dim("dim_max", v.dim_max.size()));
  for (size_t d = 0; d < v.shape.size(); ++d) {
    const std::string dim = "[" + std::to_string(d) + "]";
    if (v.shape[d] < -1) {
      return invalid_argument(where + ".shape" + dim + ": " + std::to_string(v.shape[d]) +
                              " is neither a size nor -1 (open)");
    }
    const bool open = v.shape[d] == -1;
    if (!open && d < v.dim_symbols.size() && !v.dim_symbols[d].empty()) {
      return invalid_argument(where + ".dim_symbols" + dim + ": symbol '" + v.dim_symbols[d] +
                              "' on a fixed dimension (" + std::to_string(v.shape[d]) + ")");
    }
    const int64_t lo = d < v.dim_min.size() ? v.dim_min[d] : 0;
    const int64_t hi = d < v.dim_max.size() ? v.dim_max[d] : 0;
    if (lo < 0 || hi < 0 || (hi != 0 && lo > hi) || (!open && (lo != 0 || hi != 0))) {
      return invalid_argument(where + ".dim_min/dim_max" + dim + ": bounds " + std::to_string(lo) +
                              ".." + std::to_string(hi) +
                              (open ? " are not a range" : " on a fixed dimension"));
    }
  }
  return Status();
}

Status validate_value_list(const std::string& where, const std::vector<uint32_t>& list,
                           const FunctionDef& f) {
  for (size_t i = 0; i < list.size(); ++i) {
    LOOM_RETURN_IF_ERROR(check_index(where + "[" + std::to_string(i) + "]", list[i],
                                     f.values.size(), "value", "function '" + f.name + "'"));
  }
  return Status();
}

bool is_staged_op(OpCode op) { return op == OpCode::kCall || op == OpCode::kControl; }


Status validate_staged_instruction(const std::string& where, const InstructionDef& ins,
                                   size_t function_count) {
  for (size_t i = 0; i < ins.functions.size(); ++i) {
    LOOM_RETURN_IF_ERROR(check_index(where + ".functions[" + std::to_string(i) + "]", ins.functions[i],
                                     function_count, "function", "program"));
  }
  if (ins.op == OpCode::kCall) {
    if (ins.functions.size() != 1) {
      return invalid_argument(where + ".functions: a call names 1 function, this one " +
                              std::to_string(ins.functions.size()));
    }
    return Status();
  }
  const size_t bodies =
      ins.kernel == "If" ? 2 : (ins.kernel == "Loop" || ins.kernel == "Scan" || ins.kernel == "SequenceMap") ? 1 : 0;
  if (bodies == 0) {
    return invalid_argument(where + ".kernel: '" + ins.kernel +
                            "' is not a control-flow operator (If, Loop, Scan or SequenceMap)");
  }
  if (ins.functions.size() != bodies) {
    return invalid_argument(where + ".functions: " + ins.kernel + " has " + std::to_string(bodies) +
                            (bodies == 1 ? " body" : " bodies") + ", the instruction names " +
                            std::to_string(ins.functions.size()));
  }
  if (ins.captures > ins.inputs.size()) {
    return invalid_argument(where + ".captures: " + std::to_string(ins.captures) + " captures, but only " +
                            std::to_string(ins.inputs.size()) + " inputs");
  }
  return Status();
}

Status validate_instruction(const std::string& where, const InstructionDef& ins,
                            const FunctionDef& f, size_t delegate_count, size_t function_count) {
  if (static_cast<uint8_t>(ins.op) > static_cast<uint8_t>(OpCode::kControl)) {
    return invalid_argument(where + ".op: unknown opcode " +
                            std::to_string(static_cast<unsigned>(ins.op)));
  }
  if (is_staged_op(ins.op)) {
    LOOM_RETURN_IF_ERROR(validate_staged_instruction(where, ins, function_count));
  } else if (!ins.functions.empty() || ins.captures != 0) {
    return invalid_argument(where + ": only call and control instructions name functions or captures");
  }
  if (ins.op == OpCode::kDelegateCall || ins.delegate != -1) {
    LOOM_RETURN_IF_ERROR(
        check_index(where + ".delegate", ins.delegate, delegate_count, "delegate", "program"));
  }
  for (size_t a = 0; a < ins.attributes.size(); ++a) {
    const AttributeDef& attr = ins.attributes[a];
    const std::string at = where + ".attributes[" + std::to_string(a) + "]";
    if (static_cast<uint8_t>(attr.kind) > static_cast<uint8_t>(AttributeKind::kStrings)) {
      return invalid_argument(at + ".kind: unknown attribute kind " +
                              std::to_string(static_cast<unsigned>(attr.kind)));
    }
    if (attr.kind == AttributeKind::kTensor) {
      const size_t es = dtype_size(attr.t_dtype);
      if (es == 0) return invalid_argument(at + ".t_dtype: not a valid dtype");
      auto count = element_count(attr.t_shape);
      if (!count.ok()) return count.status().with_context(at + ".t_shape");
      if (*count > attr.t_data.size() / es || *count * es != attr.t_data.size()) {
        return invalid_argument(at + ".t_data: " + std::to_string(attr.t_data.size()) +
                                " bytes, but " + std::string(dtype_name(attr.t_dtype)) + " " +
                                shape_to_string(attr.t_shape) + " needs " +
                                std::to_string(*count) + " elements");
      }
    }
  }
  if (ins.opset < 0) {
    return invalid_argument(where + ".opset: negative opset " + std::to_string(ins.opset));
  }
  for (size_t i = 0; i < ins.inputs.size(); ++i) {
    if (ins.inputs[i] == kAbsentValue) {
      if (ins.op != OpCode::kKernelCall && ins.op != OpCode::kControl) {
        return invalid_argument(where + ".inputs[" + std::to_string(i) +
                                "]: only a kernel call or control flow may leave an operand out");
      }
      continue;
    }
    LOOM_RETURN_IF_ERROR(check_index(where + ".inputs[" + std::to_string(i) + "]",
                                     ins.inputs[i], f.values.size(), "value",
                                     "function '" + f.name + "'"));
  }
  return validate_value_list(where + ".outputs", ins.outputs, f);
}

Status validate_memory_plan(const std::string& where, const MemoryPlanDef& plan,
                            const FunctionDef& f) {
  if (!is_power_of_two(plan.alignment)) {
    return invalid_argument(where + ".alignment: " + std::to_string(plan.alignment) +
                            " is not a power of two");
  }
  uint64_t used = 0;  // where the last slot ends
  std::vector<int64_t> slot_of(f.values.size(), -1);
  for (size_t s = 0; s < plan.slots.size(); ++s) {
    const MemorySlotDef& slot = plan.slots[s];
    std::string here = where + ".slots[" + std::to_string(s) + "]";
    LOOM_RETURN_IF_ERROR(check_index(here + ".value", slot.value, f.values.size(), "value",
                                     "function '" + f.name + "'"));
    if (slot_of[slot.value] >= 0) {
      return invalid_argument(here + ".value: value " + std::to_string(slot.value) +
                              " already has slot " + std::to_string(slot_of[slot.value]));
    }
    slot_of[slot.value] = static_cast<int64_t>(s);
    uint64_t end = 0;
    if (!checked_add(slot.offset, slot.size, &end) || end > plan.arena_size) {
      return invalid_argument(here + ": offset " + std::to_string(slot.offset) + " + size " +
                              std::to_string(slot.size) + " runs past the arena (" +
                              std::to_string(plan.arena_size) + " bytes)");
    }
    used = std::max(used, end);
  }
  // The arena is allocated (and zeroed) at every session: a size its slots do
  // not justify would let a small file claim gigabytes. Rounding the end of
  // the last slot up to a page (or to the alignment, if larger) is allowed.
  const uint64_t granule = std::max<uint64_t>(plan.alignment, 4096);
  const uint64_t justified = used == 0 ? 0 : (used - 1) / granule * granule + granule;
  if (plan.arena_size > justified) {
    return invalid_argument(where + ".arena_size: " + std::to_string(plan.arena_size) +
                            " bytes, but its slots end at " + std::to_string(used) +
                            " (at most " + std::to_string(justified) + " bytes are allowed)");
  }
  return Status();
}

Status validate_function(const std::string& where, const FunctionDef& f,
                         const ProgramDef& program) {
  for (size_t v = 0; v < f.values.size(); ++v) {
    LOOM_RETURN_IF_ERROR(validate_value(where + "." + at("values", v), f.values[v],
                                        program.parameters.size()));
  }
  LOOM_RETURN_IF_ERROR(validate_value_list(where + ".inputs", f.inputs, f));
  LOOM_RETURN_IF_ERROR(validate_value_list(where + ".outputs", f.outputs, f));
  for (size_t i = 0; i < f.instructions.size(); ++i) {
    LOOM_RETURN_IF_ERROR(validate_instruction(where + "." + at("instructions", i), f.instructions[i], f,
                                              program.delegates.size(), program.functions.size()));
  }
  const bool staged = f.staged;
  for (size_t i = 0; i < f.instructions.size(); ++i) {
    if (!staged && is_staged_op(f.instructions[i].op)) {
      return invalid_argument(where + "." + at("instructions", i) +
                              ": a call or control instruction in a function that is not staged");
    }
  }
  if (staged && (f.graph_artifact != -1 || !f.memory_plan.slots.empty() || f.memory_plan.arena_size != 0)) {
    return invalid_argument(where + ": a staged function has neither "
                            "a graph_artifact nor a memory plan; its values are allocated as they are computed");
  }
  for (size_t v = 0; v < f.values.size(); ++v) {
    if (f.values[v].unranked && !f.values[v].shape.empty()) {
      return invalid_argument(where + "." + at("values", v) + ": unranked, but has a shape");
    }
    if (is_sequence_or_optional(f.values[v].kind) && (!staged || f.values[v].parameter != -1)) {
      return invalid_argument(where + "." + at("values", v) + ": a " + value_kind_name(f.values[v].kind) +
                              (staged ? ", which a parameter cannot be" : ", which only a staged function's value may be"));
    }
    if (f.values[v].unranked && !staged && f.graph_artifact == -1) {
      return invalid_argument(where + "." + at("values", v) +
                              ": unranked, which only a staged or open-shape function's value may be");
    }
  }
  if (staged) return Status();  // open (-1) dimensions are bound as values are computed
  if (f.graph_artifact != -1) {
    LOOM_RETURN_IF_ERROR(check_index(where + ".graph_artifact", f.graph_artifact,
                                     program.artifacts.size(), "artifact", "program"));
    const ArtifactDef& a = program.artifacts[static_cast<size_t>(f.graph_artifact)];
    if (a.loader_key != kGraphLoaderKey) {
      return invalid_argument(where + ".graph_artifact: artifact " +
                              std::to_string(f.graph_artifact) + " has loader key '" +
                              a.loader_key + "', not '" + std::string(kGraphLoaderKey) + "'");
    }
    // Format 1.4: it may have instructions (a native open-shape program),
    // never a memory plan: the runtime plans each binding.
    if (!f.memory_plan.slots.empty() || f.memory_plan.arena_size != 0) {
      return invalid_argument(where + ": an open-shape function (graph_artifact " +
                              std::to_string(f.graph_artifact) +
                              ") has no memory plan of its own; it is planned per binding");
    }
  } else {
    for (size_t v = 0; v < f.values.size(); ++v) {
      for (size_t d = 0; d < f.values[v].shape.size(); ++d) {
        if (f.values[v].shape[d] == -1) {
          return invalid_argument(where + "." + at("values", v) + ".shape[" + std::to_string(d) +
                                  "]: open (-1), but the function has no graph_artifact to "
                                  "bind its shapes");
        }
      }
    }
  }
  return validate_memory_plan(where + ".memory_plan", f.memory_plan, f);
}

// Calls and bodies must not recurse: a run would never end. Depth-first
// search with colors over the functions' call and control instructions.
Status validate_call_graph(const ProgramDef& program) {
  const size_t n = program.functions.size();
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the stack, 2 done
  for (size_t root = 0; root < n; ++root) {
    if (color[root] != 0) continue;
    struct Frame {
      size_t function;
      std::vector<uint32_t> callees;
      size_t next = 0;
    };
    auto callees_of = [&](size_t f) {
      std::vector<uint32_t> out;
      for (const InstructionDef& ins : program.functions[f].instructions) {
        if (is_staged_op(ins.op)) out.insert(out.end(), ins.functions.begin(), ins.functions.end());
      }
      return out;
    };
    std::vector<Frame> frames;
    frames.push_back({root, callees_of(root)});
    color[root] = 1;
    while (!frames.empty()) {
      Frame& top = frames.back();
      if (top.next == top.callees.size()) {
        color[top.function] = 2;
        frames.pop_back();
        continue;
      }
      const uint32_t callee = top.callees[top.next++];
      if (color[callee] == 1) {
        return invalid_argument(at("functions", top.function) + " ('" + program.functions[top.function].name +
                                "') calls function " + std::to_string(callee) + " ('" +
                                program.functions[callee].name + "'), which is running already: recursion");
      }
      if (color[callee] == 0) {
        color[callee] = 1;
        frames.push_back({callee, callees_of(callee)});
      }
    }
  }
  return Status();
}

// An archive path is resolved against the program's folder (or a folder the
// host names), so it must stay inside it: relative, without '..', and
// without bytes a file system would cut the name at.
Status check_archive_path(const std::string& where, const std::string& path) {
  if (path.find('\0') != std::string::npos) {
    return invalid_argument(where + ".archive: path contains a NUL byte");
  }
  if (path.front() == '/') {
    return invalid_argument(where + ".archive: '" + path +
                            "' is absolute; an archive path is relative to the program's "
                            "folder");
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (std::string_view(path).substr(start, end - start) == "..") {
      return invalid_argument(where + ".archive: '" + path +
                              "' contains '..'; an archive must lie in the program's folder "
                              "or below it");
    }
    start = end + 1;
  }
  if (path.back() == '/') {
    return invalid_argument(where + ".archive: '" + path + "' names a folder, not a file");
  }
  return Status();
}

// An external parameter has no bytes here: its size and type are all a
// loader can check the archive's entry against, so they must agree.
Status validate_external_parameter(const std::string& where, const ParameterDef& p) {
  if (p.name.empty()) {
    return invalid_argument(where + ".name: an external parameter needs the name of its "
                            "archive entry");
  }
  std::string label = where + " ('" + p.name + "')";
  if (p.segment != -1 || p.offset != 0) {
    return invalid_argument(label + ": external (archive '" + p.archive +
                            "') and inline (segment " + std::to_string(p.segment) +
                            ", offset " + std::to_string(p.offset) +
                            ") at once; a parameter is one or the other");
  }
  LOOM_RETURN_IF_ERROR(check_archive_path(where, p.archive));
  if (dtype_size(p.dtype) == 0) {
    return invalid_argument(label + ".dtype: an external parameter needs a dtype");
  }
  auto count = element_count(p.shape);
  if (!count.ok()) return count.status().with_context(label + ".shape");
  uint64_t bytes = 0;
  bool overflow = __builtin_mul_overflow(*count, dtype_size(p.dtype), &bytes);
  if (overflow || bytes != p.size) {
    return invalid_argument(label + ".size: " + std::to_string(p.size) + " bytes, but " +
                            std::string(dtype_name(p.dtype)) + " " + shape_to_string(p.shape) +
                            " takes " +
                            (overflow ? std::string("more than 2^64") : std::to_string(bytes)));
  }
  return Status();
}

Status validate_parameter(const std::string& where, const ParameterDef& p,
                          std::span<const uint64_t> segment_sizes) {
  LOOM_RETURN_IF_ERROR(check_dtype(where, p.dtype));
  if (!p.archive.empty()) return validate_external_parameter(where, p);
  LOOM_RETURN_IF_ERROR(
      check_index(where + ".segment", p.segment, segment_sizes.size(), "segment", "file"));
  uint64_t segment_size = segment_sizes[static_cast<size_t>(p.segment)];
  uint64_t end = 0;
  if (!checked_add(p.offset, p.size, &end) || end > segment_size) {
    return invalid_argument(where + " ('" + p.name + "'): offset " + std::to_string(p.offset) +
                            " + size " + std::to_string(p.size) + " runs past segment " +
                            std::to_string(p.segment) + " (" + std::to_string(segment_size) +
                            " bytes)");
  }
  return Status();
}

// A name given twice makes every later entry of that name unreachable.
// `key_of` gives an item's key (empty: unnamed, not checked) and the words
// that name it in an error.
template <class T, class KeyOf>
Status check_unique_names(std::string_view table, const std::vector<T>& items, KeyOf key_of) {
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < items.size(); ++i) {
    auto [key, label] = key_of(items[i]);
    if (key.empty()) continue;
    auto [it, added] = first.emplace(std::move(key), i);
    if (!added) {
      return invalid_argument(at(table, i) + ".name: " + label + " is already the name of " +
                              at(table, it->second));
    }
  }
  return Status();
}

}  // namespace

Status validate_program(const ProgramDef& program, std::span<const uint64_t> segment_sizes) {
  auto by_name = [](const auto& item) {
    return std::pair<std::string, std::string>(item.name, "'" + item.name + "'");
  };
  LOOM_RETURN_IF_ERROR(check_unique_names("functions", program.functions, by_name));
  LOOM_RETURN_IF_ERROR(check_unique_names("delegates", program.delegates, by_name));
  // Scopes are name spaces: 'w' may be in two archives, not twice in one.
  LOOM_RETURN_IF_ERROR(check_unique_names(
      "parameters", program.parameters, [](const ParameterDef& p) {
        std::string label = "'" + p.name + "'" + (p.scope.empty() ? "" : " in scope '" + p.scope + "'");
        return std::pair<std::string, std::string>(
            p.name.empty() ? std::string() : p.scope + '\0' + p.name, label);
      }));
  for (size_t a = 0; a < program.artifacts.size(); ++a) {
    int32_t segment = program.artifacts[a].content_segment;
    if (segment != -1) {
      LOOM_RETURN_IF_ERROR(check_index(at("artifacts", a) + ".content_segment", segment,
                                       segment_sizes.size(), "segment", "file"));
    }
  }
  for (size_t d = 0; d < program.delegates.size(); ++d) {
    const DelegateDef& del = program.delegates[d];
    for (size_t v = 0; v < del.variants.size(); ++v) {
      LOOM_RETURN_IF_ERROR(check_index(at("delegates", d) + ".variants[" + std::to_string(v) +
                                           "]",
                                       del.variants[v], program.artifacts.size(), "artifact",
                                       "program"));
    }
  }
  for (size_t f = 0; f < program.functions.size(); ++f) {
    LOOM_RETURN_IF_ERROR(validate_function(at("functions", f), program.functions[f], program));
  }
  LOOM_RETURN_IF_ERROR(validate_call_graph(program));
  for (size_t p = 0; p < program.parameters.size(); ++p) {
    LOOM_RETURN_IF_ERROR(
        validate_parameter(at("parameters", p), program.parameters[p], segment_sizes));
  }
  return Status();
}

}  // namespace loom::container

namespace loom {

const char* value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kTensor: return "tensor";
    case ValueKind::kScalarInt: return "integer scalar";
    case ValueKind::kScalarFloat: return "float scalar";
    case ValueKind::kIntList: return "list of integers";
    case ValueKind::kSequence: return "sequence";
    case ValueKind::kOptionalTensor: return "optional tensor";
    case ValueKind::kOptionalSequence: return "optional sequence";
  }
  return "value of unknown kind";
}

}  // namespace loom
