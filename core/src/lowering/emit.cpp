#include "lowering/emit.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "common/hash.hpp"
#include "program_file/function_layout.hpp"
#include "loom/tensor_metadata.hpp"
#include "kernels/kernel.hpp"

namespace loom::lowering {

namespace {

// Builds main's values and parameters as instructions ask for them.
class Emitter {
 public:
  Emitter(const graph::Graph& graph, const EmitOptions& options, EmittedProgram& out)
      : graph_(graph), options_(options), out_(out), value_of_(graph.tensors.size(), -1) {
    out_ = start_program(options);
    out_.writer.program().functions.emplace_back();
    f().name = "main";
  }

  FunctionDef& f() { return out_.writer.program().functions.back(); }

  uint32_t new_value(const graph::Tensor& t) {
    ValueDef v;
    v.name = t.name;
    v.dtype = t.dtype;
    v.shape = t.shape;
    f().values.push_back(std::move(v));
    return static_cast<uint32_t>(f().values.size() - 1);
  }

  // The value of graph tensor `t`, made (and its parameter added) on first use.
  Result<uint32_t> value(int32_t t) {
    if (value_of_[t] >= 0) return static_cast<uint32_t>(value_of_[t]);
    const graph::Tensor& tensor = graph_.tensors[t];
    uint32_t v = new_value(tensor);
    if (tensor.is_constant()) {
      auto p = parameter(t);
      if (!p.ok()) return p.status();
      f().values[v].parameter = static_cast<int32_t>(*p);
    }
    value_of_[t] = static_cast<int64_t>(v);
    return v;
  }

  // The parameter of constant graph tensor `t`, shared by every function
  // that reads it.
  Result<uint32_t> parameter(int32_t t) {
    auto it = parameter_of_.find(t);
    if (it != parameter_of_.end()) return it->second;
    LOOM_ASSIGN_OR_RETURN(uint32_t p, add_parameter(graph_.tensors[t]));
    parameter_of_.emplace(t, p);
    return p;
  }

  Result<uint32_t> add_parameter(const graph::Tensor& t) {
    return lowering::add_parameter(out_, t, options_);
  }

  Status run(const Partition& partition, const std::vector<std::optional<CompiledGroup>>& compiled) {
    for (int32_t t : graph_.inputs) {
      uint32_t v = new_value(graph_.tensors[t]);
      value_of_[t] = v;
      f().inputs.push_back(v);
    }
    for (size_t g = 0; g < partition.groups.size(); ++g) {
      const Group& group = partition.groups[g];
      if (group.target == kReferenceTarget) {
        for (size_t n : group.nodes) LOOM_RETURN_IF_ERROR(kernel_call(n));
        continue;
      }
      if (g >= compiled.size() || !compiled[g].has_value()) {
        return Status(StatusCode::kInternal, "emit: group " + std::to_string(g) + " was not compiled");
      }
      LOOM_RETURN_IF_ERROR(delegate_call(*compiled[g]));
    }
    std::vector<bool> is_result(f().values.size(), false);
    for (int32_t t : graph_.outputs) {
      auto v = value(t);
      if (!v.ok()) return v.status();
      const ValueDef& def = f().values[*v];
      const bool is_input = std::find(f().inputs.begin(), f().inputs.end(), *v) != f().inputs.end();
      if (def.parameter >= 0 || is_input || is_result[*v]) {
        uint32_t copy = new_value(graph_.tensors[t]);
        InstructionDef move;
        move.op = OpCode::kMove;
        move.inputs = {*v};
        move.outputs = {copy};
        f().instructions.push_back(std::move(move));
        f().outputs.push_back(copy);
        is_result.resize(f().values.size(), false);
        is_result[copy] = true;
      } else {
        f().outputs.push_back(*v);
        is_result[*v] = true;
      }
    }
    // A function with open dimensions (a native open-shape program) has no
    // memory plan: the runtime plans it per binding.
    const bool open = std::any_of(f().values.begin(), f().values.end(), [](const ValueDef& v) {
      return std::any_of(v.shape.begin(), v.shape.end(), [](int64_t d) { return d < 0; });
    });
    if (!open) plan_function_memory(f());
    f().reflection = function_reflection(f());
    for (const CompiledGroup* c : reference_pending_) LOOM_RETURN_IF_ERROR(reference_function(*c));
    return Status();
  }

 private:

  Status kernel_call(size_t n) {
    auto ins = kernel_instruction(graph_.nodes[n], [this](int32_t t) { return value(t); });
    if (!ins.ok()) return ins.status().with_context(graph::describe_node(graph_, n));
    f().instructions.push_back(std::move(*ins));
    return Status();
  }

  uint32_t add_artifact(const std::string& plugin, const host::CompiledBlob& blob,
                        const std::string& file_name) {
    ProgramDef& program = out_.writer.program();
    ArtifactDef a;
    a.codegen_id = plugin;
    a.loader_key = blob.loader_key;
    a.format_version = blob.format_version;
    a.file_name = file_name;
    a.content_segment = static_cast<int32_t>(out_.writer.add_segment(blob.bytes));
    program.artifacts.push_back(std::move(a));
    return static_cast<uint32_t>(program.artifacts.size() - 1);
  }

  static bool has_open_tensor(const graph::Graph& g) {
    return std::any_of(g.tensors.begin(), g.tensors.end(), [](const graph::Tensor& t) {
      return std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 0; });
    });
  }

  // Whether the reference kernels have every op of the subgraph.
  bool reference_runs(const Subgraph& sub) const {
    for (const graph::Node& node : sub.graph.nodes) {
      if (reference_kernels_.find(node.op_type) == nullptr) return false;
    }
    return true;
  }

  Status delegate_call(const CompiledGroup& c) {
    ProgramDef& program = out_.writer.program();
    DelegateDef d;
    d.name = c.subgraph.graph.name;
    d.variants = {add_artifact(c.plugin, c.blob, d.name + ".bin")};
    for (const auto& [plugin, blob] : c.alternatives) {
      d.variants.push_back(add_artifact(plugin, blob, d.name + "." + plugin + ".bin"));
    }
    // No reference variant for a subgraph with open dimensions: its function
    // would need shapes bound per run of its own.
    if (options_.all_variants && reference_runs(c.subgraph) && !has_open_tensor(c.subgraph.graph)) {
      host::CompiledBlob reference;
      reference.loader_key = std::string(kReferenceLoaderKey);
      reference.format_version = 1;
      const std::string function = d.name + ".reference";
      reference.bytes.resize(function.size());
      std::memcpy(reference.bytes.data(), function.data(), function.size());
      d.variants.push_back(add_artifact("loom", reference, function));
      reference_pending_.push_back(&c);
      ++out_.reference_variants;
    }
    program.delegates.push_back(std::move(d));
    InstructionDef ins;
    ins.op = OpCode::kDelegateCall;
    ins.delegate = static_cast<int32_t>(program.delegates.size() - 1);
    for (int32_t t : c.subgraph.call_inputs) {
      auto v = value(t);
      if (!v.ok()) return v.status().with_context("delegate '" + d.name + "'");
      ins.inputs.push_back(*v);
    }
    for (int32_t t : c.subgraph.call_outputs) {
      auto v = value(t);
      if (!v.ok()) return v.status();
      ins.outputs.push_back(*v);
    }
    f().instructions.push_back(std::move(ins));
    return Status();
  }

  // The function "<delegate>.reference": the subgraph's nodes as kernel
  // calls, taking the delegate call's operands (inputs, then parameter
  // constants) and giving its results, in the same order.
  Status reference_function(const CompiledGroup& c) {
    const Subgraph& sub = c.subgraph;
    ProgramDef& program = out_.writer.program();
    FunctionDef fn;
    fn.name = sub.graph.name + ".reference";
    std::vector<int64_t> value_of(sub.graph.tensors.size(), -1);
    const auto add_value = [&fn](const graph::Tensor& t) {
      ValueDef v;
      v.name = t.name;
      v.dtype = t.dtype;
      v.shape = t.shape;
      fn.values.push_back(std::move(v));
      return static_cast<uint32_t>(fn.values.size() - 1);
    };
    const auto local = [&](int32_t whole) -> int32_t {
      for (size_t i = 0; i < sub.tensor_origin.size(); ++i) {
        if (sub.tensor_origin[i] == whole) return static_cast<int32_t>(i);
      }
      return -1;
    };
    for (int32_t whole : sub.call_inputs) {
      const int32_t t = local(whole);
      if (t < 0) return internal_error("reference function of '" + sub.graph.name + "': operand lost");
      const uint32_t v = add_value(sub.graph.tensors[t]);
      value_of[t] = v;
      fn.inputs.push_back(v);
    }
    const auto value = [&](int32_t t) -> Result<uint32_t> {
      if (value_of[t] >= 0) return static_cast<uint32_t>(value_of[t]);
      const uint32_t v = add_value(sub.graph.tensors[t]);
      if (sub.graph.tensors[t].is_constant()) {
        LOOM_ASSIGN_OR_RETURN(uint32_t p, parameter(sub.tensor_origin[t]));
        fn.values[v].parameter = static_cast<int32_t>(p);
      }
      value_of[t] = v;
      return v;
    };
    for (const graph::Node& node : sub.graph.nodes) {
      LOOM_ASSIGN_OR_RETURN(InstructionDef ins, kernel_instruction(node, value));
      fn.instructions.push_back(std::move(ins));
    }
    for (int32_t whole : sub.call_outputs) {
      const int32_t t = local(whole);
      if (t < 0 || value_of[t] < 0) {
        return internal_error("reference function of '" + sub.graph.name + "': result lost");
      }
      fn.outputs.push_back(static_cast<uint32_t>(value_of[t]));
    }
    plan_function_memory(fn);
    fn.reflection = function_reflection(fn);
    program.functions.push_back(std::move(fn));
    return Status();
  }

  const graph::Graph& graph_;
  const EmitOptions& options_;
  EmittedProgram& out_;
  std::vector<int64_t> value_of_;
  std::unordered_map<int32_t, uint32_t> parameter_of_;
  std::vector<const CompiledGroup*> reference_pending_;
  const kernels::KernelRegistry reference_kernels_ = kernels::KernelRegistry::reference();
};

}  // namespace

EmittedProgram start_program(const EmitOptions& options) {
  EmittedProgram out;
  out.writer.program().producer = options.producer;
  if (!options.archive_path.empty()) out.archive = std::make_unique<io::irpa::ArchiveBuilder>();
  return out;
}

Result<uint32_t> add_parameter(EmittedProgram& out, const graph::Tensor& t, const EmitOptions& options) {
  ProgramDef& program = out.writer.program();
  ParameterDef p;
  p.name = t.name;
  p.dtype = t.dtype;
  p.shape = t.shape;
  p.size = t.data->size();
  p.checksum = xxh3_64(*t.data);
  // One parameter per name: a native open-shape program's function and its
  // graph artifact read the same weights.
  for (size_t i = 0; i < program.parameters.size(); ++i) {
    const ParameterDef& q = program.parameters[i];
    if (q.name != p.name) continue;
    if (q.size != p.size || q.checksum != p.checksum || q.dtype != p.dtype || q.shape != p.shape) {
      return internal_error("parameter '" + p.name + "' is added twice with different contents");
    }
    return static_cast<uint32_t>(i);
  }
  if (out.archive != nullptr) {
    LOOM_RETURN_IF_ERROR(out.archive->add_data(t.name, *t.data, io::encode_tensor_metadata(t.dtype, t.shape))
                             .with_context("parameter '" + t.name + "'"));
    out.archive_bytes.push_back(t.data);
    p.scope = options.params_scope;
    p.archive = options.archive_path;
    out.params_bytes += t.data->size();
  } else {
    p.segment = static_cast<int32_t>(out.writer.add_segment(*t.data, 64));
  }
  program.parameters.push_back(std::move(p));
  return static_cast<uint32_t>(program.parameters.size() - 1);
}

Result<EmittedProgram> emit_program(const graph::Graph& graph, const Partition& partition,
                                    const std::vector<std::optional<CompiledGroup>>& compiled,
                                    const EmitOptions& options) {
  EmittedProgram out;
  Emitter emitter(graph, options, out);
  LOOM_RETURN_IF_ERROR(emitter.run(partition, compiled));
  return out;
}

Result<InstructionDef> kernel_instruction(const graph::Node& node,
                                          const std::function<Result<uint32_t>(int32_t)>& value) {
  InstructionDef ins;
  ins.op = OpCode::kKernelCall;
  ins.kernel = node.op_type;
  ins.attributes = node.attributes;
  ins.opset = static_cast<int32_t>(node.opset);
  for (int32_t t : node.inputs) {
    if (t == graph::kNoTensor) {
      ins.inputs.push_back(kAbsentValue);
      continue;
    }
    LOOM_ASSIGN_OR_RETURN(uint32_t v, value(t));
    ins.inputs.push_back(v);
  }
  for (int32_t t : node.outputs) {
    LOOM_ASSIGN_OR_RETURN(uint32_t v, value(t));
    ins.outputs.push_back(v);
  }
  return ins;
}

}  // namespace loom::lowering
