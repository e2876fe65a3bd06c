#include "compiler/emit.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common/hash.hpp"
#include "io/tensor_metadata.hpp"

namespace loom::compiler {

namespace {

constexpr uint64_t kArenaAlignment = 64;

nlohmann::json type_record(const ValueDef& v) {
  nlohmann::json r = nlohmann::json::array({"ndarray", std::string(dtype_name(v.dtype)), v.shape.size()});
  for (int64_t d : v.shape) r.push_back(d);
  return r;
}

std::string reflection(const FunctionDef& f) {
  nlohmann::json args = nlohmann::json::array(), results = nlohmann::json::array();
  nlohmann::json in_names = nlohmann::json::array(), out_names = nlohmann::json::array();
  for (uint32_t v : f.inputs) {
    args.push_back(type_record(f.values[v]));
    in_names.push_back(f.values[v].name);
  }
  for (uint32_t v : f.outputs) {
    results.push_back(type_record(f.values[v]));
    out_names.push_back(f.values[v].name);
  }
  return nlohmann::json{{"v", 1}, {"a", args}, {"r", results}, {"names", {{"a", in_names}, {"r", out_names}}}}
      .dump();
}

// Builds main's values and parameters as instructions ask for them.
class Emitter {
 public:
  Emitter(const graph::Graph& graph, const EmitOptions& options, EmittedProgram& out)
      : graph_(graph), options_(options), out_(out), value_of_(graph.tensors.size(), -1) {
    out_.writer.program().producer = options.producer;
    out_.writer.program().functions.emplace_back();
    f().name = "main";
    if (!options.archive_path.empty()) out_.archive = std::make_unique<io::irpa::ArchiveBuilder>();
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
      auto p = add_parameter(tensor);
      if (!p.ok()) return p.status();
      f().values[v].parameter = static_cast<int32_t>(*p);
    }
    value_of_[t] = static_cast<int64_t>(v);
    return v;
  }

  Result<uint32_t> add_parameter(const graph::Tensor& t) {
    ProgramDef& program = out_.writer.program();
    ParameterDef p;
    p.name = t.name;
    p.dtype = t.dtype;
    p.shape = t.shape;
    p.size = t.data->size();
    p.checksum = xxh3_64(*t.data);
    if (out_.archive != nullptr) {
      LOOM_RETURN_IF_ERROR(out_.archive->add_data(t.name, *t.data, io::encode_tensor_metadata(t.dtype, t.shape))
                               .with_context("parameter '" + t.name + "'"));
      out_.archive_bytes.push_back(t.data);
      p.scope = options_.params_scope;
      p.archive = options_.archive_path;
      out_.params_bytes += t.data->size();
    } else {
      p.segment = static_cast<int32_t>(out_.writer.add_segment(*t.data, 64));
    }
    program.parameters.push_back(std::move(p));
    return static_cast<uint32_t>(program.parameters.size() - 1);
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
    plan_function_memory(f());
    f().reflection = reflection(f());
    return Status();
  }

 private:
  Status kernel_call(size_t n) {
    const graph::Node& node = graph_.nodes[n];
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
      auto v = value(t);
      if (!v.ok()) return v.status().with_context(graph::describe_node(graph_, n));
      ins.inputs.push_back(*v);
    }
    for (int32_t t : node.outputs) {
      auto v = value(t);
      if (!v.ok()) return v.status();
      ins.outputs.push_back(*v);
    }
    f().instructions.push_back(std::move(ins));
    return Status();
  }

  Status delegate_call(const CompiledGroup& c) {
    ProgramDef& program = out_.writer.program();
    ArtifactDef a;
    a.codegen_id = c.plugin;
    a.loader_key = c.blob.loader_key;
    a.format_version = c.blob.format_version;
    a.file_name = c.subgraph.graph.name + ".bin";
    a.content_segment = static_cast<int32_t>(out_.writer.add_segment(c.blob.bytes));
    program.artifacts.push_back(std::move(a));
    DelegateDef d;
    d.name = c.subgraph.graph.name;
    d.variants = {static_cast<uint32_t>(program.artifacts.size() - 1)};
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

  const graph::Graph& graph_;
  const EmitOptions& options_;
  EmittedProgram& out_;
  std::vector<int64_t> value_of_;
};

}  // namespace

void plan_function_memory(FunctionDef& fn) {
  const size_t n = fn.values.size();
  // Inputs, results and constants have storage of their own.
  std::vector<bool> placed(n, false);
  for (uint32_t v : fn.inputs) placed[v] = true;
  for (uint32_t v : fn.outputs) placed[v] = true;
  for (size_t v = 0; v < n; ++v) placed[v] = placed[v] || fn.values[v].parameter >= 0;
  std::vector<int64_t> last_read(n, -1);
  for (size_t i = 0; i < fn.instructions.size(); ++i) {
    for (uint32_t v : fn.instructions[i].inputs) {
      if (v != kAbsentValue && v < n) last_read[v] = static_cast<int64_t>(i);
    }
  }
  struct Slot {
    uint64_t offset, size;
    int64_t busy_until;  // the last instruction that reads what it holds
  };
  std::vector<Slot> slots;  // sorted by offset
  uint64_t arena = 0;
  fn.memory_plan = MemoryPlanDef{};
  fn.memory_plan.alignment = kArenaAlignment;
  for (size_t i = 0; i < fn.instructions.size(); ++i) {
    const auto now = static_cast<int64_t>(i);
    for (uint32_t v : fn.instructions[i].outputs) {
      if (v >= n || placed[v]) continue;
      placed[v] = true;
      uint64_t bytes = dtype_size(fn.values[v].dtype);
      for (int64_t d : fn.values[v].shape) bytes *= static_cast<uint64_t>(d);
      const uint64_t size = (std::max<uint64_t>(bytes, 1) + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
      // A value nobody reads still needs room while its writer runs.
      const int64_t until = std::max(last_read[v], now);
      auto fit = std::find_if(slots.begin(), slots.end(),
                              [&](const Slot& s) { return s.busy_until < now && s.size >= size; });
      uint64_t offset;
      if (fit != slots.end()) {
        offset = fit->offset;
        // Split off what the value does not need, so a later one can use it.
        if (fit->size > size) {
          Slot rest{fit->offset + size, fit->size - size, fit->busy_until};
          fit->size = size;
          fit->busy_until = until;
          slots.insert(fit + 1, rest);
        } else {
          fit->busy_until = until;
        }
      } else {
        offset = arena;
        arena += size;
        slots.push_back({offset, size, until});
      }
      fn.memory_plan.slots.push_back({v, offset, size});
    }
  }
  fn.memory_plan.arena_size = arena;
}

Result<EmittedProgram> emit_program(const graph::Graph& graph, const Partition& partition,
                                    const std::vector<std::optional<CompiledGroup>>& compiled,
                                    const EmitOptions& options) {
  EmittedProgram out;
  Emitter emitter(graph, options, out);
  LOOM_RETURN_IF_ERROR(emitter.run(partition, compiled));
  return out;
}

}  // namespace loom::compiler
