#include "lowering/staged.hpp"

#include <algorithm>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "program_file/function_layout.hpp"

namespace loom::lowering {
namespace {

ValueDef untyped_value(const std::string& name) {
  ValueDef v;
  v.name = name;
  v.dtype = DType::kInvalid;
  v.unranked = true;
  return v;
}

class Stager {
 public:
  Stager(EmittedProgram& out, const std::vector<std::string>& targets, bool all_variants, const EmitOptions& options)
      : out_(out), targets_(targets), all_variants_(all_variants), options_(options) {}

  // A staged function for `g`; `signature` gives the arguments of "main"
  // (null for a body, whose arguments take any type).
  Result<uint32_t> staged(const graph::Graph& g, const std::string& name, const OpenSignature* signature) {
    const uint32_t index = reserve(name);
    FunctionDef f;
    f.name = program().functions[index].name;
    f.staged = true;
    std::vector<int64_t> value_of(g.tensors.size(), -1);
    auto value = [&](int32_t t) -> Result<uint32_t> {
      if (value_of[static_cast<size_t>(t)] >= 0) return static_cast<uint32_t>(value_of[static_cast<size_t>(t)]);
      const graph::Tensor& tensor = g.tensors[static_cast<size_t>(t)];
      ValueDef v = untyped_value(tensor.name);
      if (tensor.is_constant()) {
        v.unranked = false;
        v.dtype = tensor.dtype;
        v.shape = tensor.shape;
        LOOM_ASSIGN_OR_RETURN(uint32_t p, add_parameter(out_, tensor, options_));
        v.parameter = static_cast<int32_t>(p);
      }
      value_of[static_cast<size_t>(t)] = static_cast<int64_t>(f.values.size());
      f.values.push_back(std::move(v));
      return static_cast<uint32_t>(f.values.size() - 1);
    };
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const int32_t t = g.inputs[i];
      value_of[static_cast<size_t>(t)] = static_cast<int64_t>(f.values.size());
      f.inputs.push_back(static_cast<uint32_t>(f.values.size()));
      f.values.push_back(signature != nullptr ? signature->inputs[i] : untyped_value(g.tensors[static_cast<size_t>(t)].name));
    }
    // Which node reads each tensor last, and whether a result is it.
    std::vector<int64_t> last_reader(g.tensors.size(), -1);
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      for (int32_t t : g.nodes[n].inputs) {
        if (t != graph::kNoTensor) last_reader[static_cast<size_t>(t)] = static_cast<int64_t>(n);
      }
    }
    std::vector<bool> is_result(g.tensors.size(), false);
    for (int32_t t : g.outputs) is_result[static_cast<size_t>(t)] = true;
    // Tensors that may hold a sequence or an optional: the function's inputs
    // of such a kind (a body's inputs, untyped, may), and what host steps
    // make. An Identity of one runs on the host too (a part takes tensors
    // only).
    std::vector<bool> maybe_value(g.tensors.size(), false);
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      maybe_value[static_cast<size_t>(g.inputs[i])] =
          signature == nullptr || signature->inputs[i].kind != ValueKind::kTensor;
    }
    auto on_host = [&](const graph::Node& node) {
      if (runs_on_host(node)) return true;
      return node.domain.empty() && node.op_type == "Identity" && node.inputs.size() == 1 &&
             node.inputs[0] != graph::kNoTensor && maybe_value[static_cast<size_t>(node.inputs[0])];
    };

    std::vector<size_t> pending;  // nodes of the part being gathered
    size_t parts = 0;
    auto flush = [&]() -> Status {
      if (pending.empty()) return Status();
      graph::Graph part;
      part.name = f.name + "/part" + std::to_string(parts);
      std::vector<int32_t> map(g.tensors.size(), -1);
      std::vector<int32_t> outer_inputs, outer_outputs;
      const size_t last = pending.back();
      for (size_t n : pending) {
        graph::Node node = g.nodes[n];
        for (int32_t& t : node.inputs) {
          if (t == graph::kNoTensor) continue;
          int32_t& m = map[static_cast<size_t>(t)];
          if (m < 0) {
            const graph::Tensor& source = g.tensors[static_cast<size_t>(t)];
            if (source.is_constant()) {
              m = part.add_tensor(source);
            } else {  // made before this part: an input of it
              m = part.add_tensor(graph::Tensor{source.name, DType::kInvalid, {}, nullptr});
              part.inputs.push_back(m);
              outer_inputs.push_back(t);
            }
          }
          t = m;
        }
        for (int32_t& t : node.outputs) {
          const graph::Tensor& source = g.tensors[static_cast<size_t>(t)];
          const int32_t m = part.add_tensor(graph::Tensor{source.name, DType::kInvalid, {}, nullptr});
          map[static_cast<size_t>(t)] = m;
          if (is_result[static_cast<size_t>(t)] || last_reader[static_cast<size_t>(t)] > static_cast<int64_t>(last)) {
            part.outputs.push_back(m);
            outer_outputs.push_back(t);
          }
          t = m;
        }
        part.nodes.push_back(std::move(node));
      }
      pending.clear();
      if (part.outputs.empty()) return Status();  // nothing reads it
      LOOM_ASSIGN_OR_RETURN(uint32_t callee, open_function(part, part.name));
      ++parts;
      InstructionDef ins;
      ins.op = OpCode::kCall;
      ins.functions = {callee};
      for (int32_t t : outer_inputs) {
        LOOM_ASSIGN_OR_RETURN(uint32_t v, value(t));
        ins.inputs.push_back(v);
      }
      for (int32_t t : outer_outputs) {
        LOOM_ASSIGN_OR_RETURN(uint32_t v, value(t));
        ins.outputs.push_back(v);
      }
      f.instructions.push_back(std::move(ins));
      return Status();
    };

    for (size_t n = 0; n < g.nodes.size(); ++n) {
      const graph::Node& node = g.nodes[n];
      if (!on_host(node)) {
        pending.push_back(n);
        continue;
      }
      for (int32_t t : node.outputs) maybe_value[static_cast<size_t>(t)] = true;
      LOOM_RETURN_IF_ERROR(flush());
      // The node's operator, attributes and operands, as values of `f`.
      LOOM_ASSIGN_OR_RETURN(InstructionDef ins, kernel_instruction(node, value));
      if (graph::has_bodies(node)) ins.op = OpCode::kControl;
      ins.captures = static_cast<uint32_t>(node.captures);
      if (!graph::has_bodies(node)) {  // a sequence operator, or one whose values size its outputs
        f.instructions.push_back(std::move(ins));
        continue;
      }
      // If: then_branch, else_branch; Loop and Scan: body.
      std::vector<const graph::Body*> bodies;
      for (const char* want : {"then_branch", "else_branch", "body"}) {
        for (const graph::Body& b : node.bodies) {
          if (b.attribute == want) bodies.push_back(&b);
        }
      }
      if (bodies.size() != node.bodies.size()) {
        return invalid_argument(graph::describe_node(g, n) + ": a body attribute other than then_branch, else_branch "
                                "or body");
      }
      for (const graph::Body* b : bodies) {
        const std::string body_name = f.name + "/" + node.name + "/" + b->attribute;
        Result<uint32_t> callee = has_control_flow(*b->graph) ? staged(*b->graph, body_name, nullptr)
                                                             : open_function(*b->graph, body_name);
        if (!callee.ok()) return callee.status().with_context(graph::describe_node(g, n) + " body '" + b->attribute + "'");
        ins.functions.push_back(*callee);
      }
      f.instructions.push_back(std::move(ins));
    }
    LOOM_RETURN_IF_ERROR(flush());
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      LOOM_ASSIGN_OR_RETURN(uint32_t v, value(g.outputs[i]));
      if (signature != nullptr && i < signature->outputs.size() && f.values[v].unranked &&
          std::find(f.inputs.begin(), f.inputs.end(), v) == f.inputs.end()) {
        // The model's statement of the result (its dtype and kind), for
        // reflection and the API.
        f.values[v].dtype = signature->outputs[i].dtype;
        f.values[v].kind = signature->outputs[i].kind;
      }
      f.outputs.push_back(v);
    }
    f.reflection = function_reflection(f);
    program().functions[index] = std::move(f);
    return index;
  }

  // An open-shape function for `g` (no control flow), whose arguments take
  // any dtype and rank.
  Result<uint32_t> open_function(const graph::Graph& g, const std::string& name) {
    graph::Graph stored = g;
    for (int32_t t : stored.inputs) {
      stored.tensors[static_cast<size_t>(t)].dtype = DType::kInvalid;
      stored.tensors[static_cast<size_t>(t)].shape.clear();
    }
    LOOM_ASSIGN_OR_RETURN(uint32_t artifact,
                          add_open_graph_artifact(out_, stored, {}, targets_, all_variants_, options_));
    const uint32_t index = reserve(name);
    program().artifacts[artifact].file_name = program().functions[index].name + ".graph";
    FunctionDef f;
    f.name = program().functions[index].name;
    f.graph_artifact = static_cast<int32_t>(artifact);
    for (int32_t t : g.inputs) {
      f.inputs.push_back(static_cast<uint32_t>(f.values.size()));
      f.values.push_back(untyped_value(g.tensors[static_cast<size_t>(t)].name));
    }
    for (int32_t t : g.outputs) {
      f.outputs.push_back(static_cast<uint32_t>(f.values.size()));
      f.values.push_back(untyped_value(g.tensors[static_cast<size_t>(t)].name));
    }
    f.reflection = function_reflection(f);
    program().functions[index] = std::move(f);
    return index;
  }

 private:
  ProgramDef& program() { return out_.writer.program(); }

  // A new function's index, under a name no other function has.
  uint32_t reserve(const std::string& name) {
    std::string unique = name;
    for (int k = 2; names_.count(unique) != 0; ++k) unique = name + "#" + std::to_string(k);
    names_.insert(unique);
    FunctionDef placeholder;
    placeholder.name = unique;
    program().functions.push_back(std::move(placeholder));
    return static_cast<uint32_t>(program().functions.size() - 1);
  }

  EmittedProgram& out_;
  const std::vector<std::string>& targets_;
  bool all_variants_;
  const EmitOptions& options_;
  std::set<std::string> names_;
};

}  // namespace

bool is_sequence_op(std::string_view op_type) {
  static constexpr std::string_view kOps[] = {"SequenceEmpty",  "SequenceConstruct", "SequenceInsert",
                                              "SequenceAt",     "SequenceErase",     "SequenceLength",
                                              "SplitToSequence", "ConcatFromSequence"};
  return std::find(std::begin(kOps), std::end(kOps), op_type) != std::end(kOps);
}

bool is_optional_op(std::string_view op_type) {
  return op_type == "Optional" || op_type == "OptionalHasElement" || op_type == "OptionalGetElement";
}

bool is_value_op(std::string_view op_type) { return is_optional_op(op_type) || op_type == "Identity"; }

bool is_value_shaped_op(std::string_view op_type) {
  return op_type == "NonZero" || op_type == "Compress" || op_type == "Unique" || op_type == "NonMaxSuppression";
}

bool runs_on_host(const graph::Node& node) {
  return graph::has_bodies(node) ||
         (node.domain.empty() &&
          (is_sequence_op(node.op_type) || is_optional_op(node.op_type) || is_value_shaped_op(node.op_type)));
}

bool has_control_flow(const graph::Graph& graph) {
  return std::any_of(graph.nodes.begin(), graph.nodes.end(), [](const graph::Node& n) { return runs_on_host(n); });
}

Result<EmittedProgram> emit_staged_program(const graph::Graph& graph, const OpenSignature& signature,
                                           std::span<const passes::DeclaredType> /*declared*/,
                                           const std::vector<std::string>& targets, bool all_variants,
                                           const EmitOptions& options) {
  if (signature.inputs.size() != graph.inputs.size() || signature.outputs.size() != graph.outputs.size()) {
    return internal_error("staged program: the signature does not match the graph's inputs and outputs");
  }
  EmittedProgram out = start_program(options);
  Stager stager(out, targets, all_variants, options);
  LOOM_RETURN_IF_ERROR(stager.staged(graph, "main", &signature).status());
  return out;
}

}  // namespace loom::lowering
