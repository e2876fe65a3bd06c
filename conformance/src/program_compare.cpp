// compare_model on a program file (.loom). Without split_delegates the
// program runs as it is: a copy of it whose first function also returns
// every value its delegate and kernel calls write runs on the device, and a
// second copy with every delegate narrowed to its "loom.reference" variant
// (the delegate's nodes as reference-kernel calls, written by `loom compile
// --variants all`) runs on the reference kernels; the instructions are then
// compared in order. With split_delegates the first function is rebuilt as a
// graph, each delegate call replaced by its reference function's nodes, and
// compared as an ONNX model is (compare_source): every node a plugin takes
// compiled on its own.
#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "compiler/compile_graph_file.hpp"
#include "graph/graph.hpp"
#include "loom/artifacts.hpp"
#include "loom/file_type.hpp"
#include "loom/npy.hpp"
#include "loom/program.hpp"
#include "lowering/open_shapes.hpp"
#include "model_compare_detail.hpp"
#include "program_file/function_layout.hpp"
#include "runtime/parameter_store.hpp"
#include "runtime/tensor_limits.hpp"

namespace loom::conformance::model_compare_detail {

namespace fs = std::filesystem;

namespace {

// Where a program keeps its nodes' reference: the function named by a
// delegate's "loom.reference" variant, or -1 when it has none.
int32_t program_reference_function(const ProgramReader& reader, const DelegateDef& d) {
  const ProgramDef& def = reader.program();
  for (uint32_t a : d.variants) {
    if (a >= def.artifacts.size() || def.artifacts[a].loader_key != kReferenceLoaderKey) continue;
    auto content = reader.artifact_content(a);
    if (!content.ok()) continue;
    const std::string name(reinterpret_cast<const char*>(content->data()), content->size());
    for (size_t f = 0; f < def.functions.size(); ++f) {
      if (def.functions[f].name == name) return static_cast<int32_t>(f);
    }
  }
  return -1;
}

int32_t program_reference_artifact(const ProgramDef& def, const DelegateDef& d) {
  for (uint32_t a : d.variants) {
    if (a < def.artifacts.size() && def.artifacts[a].loader_key == kReferenceLoaderKey) {
      return static_cast<int32_t>(a);
    }
  }
  return -1;
}

// What a comparison of a program reads of it.
struct ProgramUnderTest {
  fs::path path;
  std::unique_ptr<ProgramReader> reader;
  ProgramDef def;  // the reader's, with the first function's value names made unique
  // The external archives, by scope, where the program records them
  // (relative to its folder): copies written elsewhere load them from there.
  ParameterArchives archives;
};

std::string program_value_name(const FunctionDef& f, uint32_t v) {
  return f.values[v].name.empty() ? "%" + std::to_string(v) : f.values[v].name;
}

Result<ProgramUnderTest> open_program_under_test(const fs::path& path) {
  ProgramUnderTest p;
  p.path = path;
  LOOM_RETURN_IF_ERROR(check_regular_file(path, "program"));
  auto reader = ProgramReader::open_file(path);
  if (!reader.ok()) {
    const std::string& m = reader.status().message();
    return m.rfind(path.string(), 0) == 0 ? reader.status() : reader.status().with_context(path.string());
  }
  p.reader = std::move(*reader);
  p.def = p.reader->program();
  if (p.def.functions.empty()) return invalid_argument(path.string() + ": the program has no functions");
  FunctionDef& main = p.def.functions.front();
  // Results are looked up by name: every tensor value gets one of its own
  // (inputs keep theirs, which the caller binds by).
  std::set<std::string> taken;
  for (uint32_t v : main.inputs) {
    if (v < main.values.size()) taken.insert(program_value_name(main, v));
  }
  for (uint32_t v = 0; v < main.values.size(); ++v) {
    if (std::find(main.inputs.begin(), main.inputs.end(), v) != main.inputs.end()) continue;
    std::string name = program_value_name(main, v);
    for (int k = 2; taken.count(name); ++k) name = program_value_name(main, v) + "#" + std::to_string(k);
    taken.insert(name);
    main.values[v].name = name;
  }
  const fs::path folder = path.parent_path();
  for (const ParameterDef& param : p.def.parameters) {
    if (param.archive.empty()) continue;
    const bool listed = std::any_of(p.archives.begin(), p.archives.end(),
                                    [&](const auto& a) { return a.first == param.scope; });
    if (!listed) p.archives.emplace_back(param.scope, folder / param.archive);
  }
  return p;
}

// Writes `def` with the segments of `reader` (same indices) to `out`.
Status write_program_copy(const ProgramReader& reader, const ProgramDef& def, const fs::path& out) {
  ProgramWriter writer;
  writer.program() = def;
  for (uint32_t s = 0; s < reader.segments().size(); ++s) {
    LOOM_ASSIGN_OR_RETURN(std::span<const std::byte> bytes, reader.segment_bytes(s));
    writer.add_segment(bytes, reader.segments()[s].alignment);
  }
  writer.set_features(reader.head().required_features, reader.head().optional_features);
  return writer.write_file(out).with_context("writing '" + out.string() + "'");
}

// The steps of the first function: its delegate and kernel calls, in order.
struct ProgramStep {
  compiler::SubgraphReport report;
  uint32_t instruction = 0;
};

std::vector<ProgramStep> program_steps(const ProgramUnderTest& p) {
  const FunctionDef& main = p.def.functions.front();
  std::vector<ProgramStep> steps;
  for (uint32_t n = 0; n < main.instructions.size(); ++n) {
    const InstructionDef& ins = main.instructions[n];
    if (ins.op != OpCode::kDelegateCall && ins.op != OpCode::kKernelCall) continue;
    ProgramStep step;
    step.instruction = n;
    compiler::SubgraphReport& r = step.report;
    if (ins.op == OpCode::kKernelCall) {
      r.nodes.push_back(ins.outputs.empty() ? ins.kernel : program_value_name(main, ins.outputs[0]));
      r.op_types.push_back(ins.kernel);
    } else {
      const DelegateDef& d = p.def.delegates[static_cast<size_t>(ins.delegate)];
      r.delegate = d.name;
      // A program keeps no node names: a node is named by the value it writes.
      const int32_t f = program_reference_function(*p.reader, d);
      if (f >= 0) {
        const FunctionDef& fn = p.def.functions[static_cast<size_t>(f)];
        for (const InstructionDef& k : fn.instructions) {
          if (k.op != OpCode::kKernelCall) continue;
          r.nodes.push_back(k.outputs.empty() ? k.kernel : program_value_name(fn, k.outputs[0]));
          r.op_types.push_back(k.kernel);
        }
      }
    }
    for (uint32_t v : ins.inputs) {
      if (v == kAbsentValue || main.values[v].parameter >= 0) continue;
      r.inputs.push_back(program_value_name(main, v));
    }
    for (uint32_t v : ins.outputs) r.outputs.push_back(program_value_name(main, v));
    steps.push_back(std::move(step));
  }
  return steps;
}

// Replaces the scratch copy's path with the program's in a message.
Status program_status(const Status& s, const fs::path& copy, const fs::path& program) {
  std::string m = s.message();
  const std::string from = copy.string();
  for (size_t at = m.find(from); at != std::string::npos; at = m.find(from, at)) {
    m.replace(at, from.size(), program.string());
    at += program.string().size();
  }
  return Status(s.code(), m);
}

// The program as it is: instruction by instruction, no compiling.
Result<ModelComparison> compare_program_as_is(Runtime& runtime, const ProgramUnderTest& p,
                                              std::span<const NamedTensor> inputs,
                                              const ModelCompareOptions& options, const fs::path& scratch) {
  const std::vector<ProgramStep> steps = program_steps(p);
  // Every value a call writes is a result of the observed copy.
  ProgramDef observed = p.def;
  FunctionDef& main = observed.functions.front();
  for (const InstructionDef& ins : main.instructions) {
    if (ins.op != OpCode::kDelegateCall && ins.op != OpCode::kKernelCall) continue;
    for (uint32_t v : ins.outputs) {
      if (main.values[v].kind != ValueKind::kTensor) continue;
      if (std::find(main.outputs.begin(), main.outputs.end(), v) == main.outputs.end()) main.outputs.push_back(v);
    }
  }
  main.reflection = function_reflection(main);
  // The reference: every delegate narrowed to its loom.reference variant.
  ProgramDef reference = observed;
  if (options.reference_device.empty()) {
    for (DelegateDef& d : reference.delegates) {
      const int32_t a = program_reference_artifact(reference, d);
      if (a < 0) {
        return failed_precondition(
            p.path.string() + ": delegate '" + d.name +
            "' has no reference variant (loom.reference) to compare it with: compile the program with "
            "--variants all (the default without --target), or give --reference DEVICE");
      }
      d.variants = {static_cast<uint32_t>(a)};
    }
  }
  const fs::path device_copy = scratch / "device.loom", reference_copy = scratch / "reference.loom";
  LOOM_RETURN_IF_ERROR(write_program_copy(*p.reader, observed, device_copy));
  LOOM_RETURN_IF_ERROR(write_program_copy(*p.reader, reference, reference_copy));
  auto got = run_compiled(runtime, device_copy, options.device, inputs, {}, options, "the device's run",
                          p.archives);
  if (!got.ok()) return program_status(got.status(), device_copy, p.path);
  auto expected = run_compiled(runtime, reference_copy, options.reference_device, inputs, {}, options,
                               "the reference run", p.archives);
  if (!expected.ok()) return program_status(expected.status(), reference_copy, p.path);

  ModelComparison out;
  out.device = options.device;
  out.reference = options.reference_device.empty() ? "reference kernels" : options.reference_device;
  out.tolerance = options.tolerance;
  out.program = true;
  for (const NamedTensor& in : inputs) out.reference_values.push_back(in);
  for (const NamedTensor& v : expected->values) {
    if (out.reference_value(v.name) == nullptr) out.reference_values.push_back(v);
  }
  std::set<std::string> outside;
  const ValueLookup got_value = [&](const std::string& v) { return got->find(v); };
  const ValueLookup expected_value = [&](const std::string& v) { return expected->find(v); };
  for (const ProgramStep& s : steps) {
    StepComparison c;
    c.step = s.report;
    c.instruction = static_cast<int>(s.instruction);
    c.ran_on = "reference kernels";
    for (const DelegatePlacement& pl : got->placements) {
      if (s.report.delegate.empty() || pl.delegate != s.report.delegate) continue;
      c.step.plugin = pl.loader_key;
      c.ran_on = pl.loader_key == kReferenceLoaderKey
                     ? "reference kernels (its loom.reference variant: no variant for the device)"
                     : pl.device;
    }
    LOOM_RETURN_IF_ERROR(append_step(out, std::move(c), got_value, expected_value, outside));
  }
  return out;
}

// The first function of a program as a graph: kernel calls are nodes, each
// delegate call is replaced by the nodes of its reference function, a move
// is an Identity node. A node is named by the first value it writes.
class ProgramGraphBuilder {
 public:
  ProgramGraphBuilder(const ProgramUnderTest& p, const runtime::ParameterStore& params)
      : p_(p), params_(params) {}

  Result<graph::Graph> build() {
    const FunctionDef& main = p_.def.functions.front();
    graph_.name = main.name;
    std::map<uint32_t, int32_t> local;
    for (uint32_t v : main.inputs) {
      LOOM_ASSIGN_OR_RETURN(int32_t t, tensor(main, v, local));
      graph_.inputs.push_back(t);
    }
    LOOM_RETURN_IF_ERROR(add_instructions(main, local, 0));
    for (uint32_t v : main.outputs) {
      LOOM_ASSIGN_OR_RETURN(int32_t t, tensor(main, v, local));
      if (std::find(graph_.outputs.begin(), graph_.outputs.end(), t) == graph_.outputs.end()) {
        graph_.outputs.push_back(t);
      }
    }
    return std::move(graph_);
  }

 private:
  // The graph tensor of value `v` of `fn`, made at its first use.
  Result<int32_t> tensor(const FunctionDef& fn, uint32_t v, std::map<uint32_t, int32_t>& local) {
    if (auto it = local.find(v); it != local.end()) return it->second;
    if (v >= fn.values.size()) {
      return invalid_argument("function '" + fn.name + "': value " + std::to_string(v) + " out of range");
    }
    const ValueDef& def = fn.values[v];
    if (def.kind != ValueKind::kTensor) {
      return unimplemented("function '" + fn.name + "': value '" + program_value_name(fn, v) +
                           "' is not a tensor, which a graph of the program cannot hold");
    }
    graph::Tensor t;
    t.name = program_value_name(fn, v);
    for (int k = 2; names_.count(t.name); ++k) t.name = program_value_name(fn, v) + "#" + std::to_string(k);
    names_.insert(t.name);
    t.dtype = def.dtype;
    t.shape = def.shape;
    if (def.parameter >= 0) {
      const std::span<const std::byte> bytes = params_.bytes(static_cast<uint32_t>(def.parameter));
      t.data = std::make_shared<const std::vector<std::byte>>(bytes.begin(), bytes.end());
    }
    const int32_t index = graph_.add_tensor(std::move(t));
    local.emplace(v, index);
    return index;
  }

  Status add_instructions(const FunctionDef& fn, std::map<uint32_t, int32_t>& local, int depth) {
    for (size_t n = 0; n < fn.instructions.size(); ++n) {
      const InstructionDef& ins = fn.instructions[n];
      const std::string where = "function '" + fn.name + "' instruction " + std::to_string(n);
      switch (ins.op) {
        case OpCode::kFree:
          break;
        case OpCode::kCall:
        case OpCode::kControl:
          return unimplemented(where + ": --split-delegates does not take staged programs (control flow) yet");
        case OpCode::kKernelCall:
        case OpCode::kMove: {
          graph::Node node;
          node.op_type = ins.op == OpCode::kMove ? std::string("Identity") : ins.kernel;
          node.opset = ins.op == OpCode::kMove ? 0 : ins.opset;
          node.attributes = ins.attributes;
          for (uint32_t v : ins.inputs) {
            if (v == kAbsentValue) {
              node.inputs.push_back(graph::kNoTensor);
              continue;
            }
            LOOM_ASSIGN_OR_RETURN(int32_t t, tensor(fn, v, local));
            node.inputs.push_back(t);
          }
          for (uint32_t v : ins.outputs) {
            LOOM_ASSIGN_OR_RETURN(int32_t t, tensor(fn, v, local));
            node.outputs.push_back(t);
          }
          if (!node.outputs.empty()) node.name = graph_.tensors[static_cast<size_t>(node.outputs[0])].name;
          graph_.nodes.push_back(std::move(node));
          break;
        }
        case OpCode::kDelegateCall: {
          if (ins.delegate < 0 || static_cast<size_t>(ins.delegate) >= p_.def.delegates.size()) {
            return invalid_argument(where + ": delegate index " + std::to_string(ins.delegate) + " out of range");
          }
          const DelegateDef& d = p_.def.delegates[static_cast<size_t>(ins.delegate)];
          const int32_t f = depth == 0 ? program_reference_function(*p_.reader, d) : -1;
          if (f < 0) {
            return failed_precondition(
                "--split-delegates: delegate '" + d.name + "' of " + p_.path.string() +
                " carries no graph of its nodes (no loom.reference variant): compile the program with "
                "--variants all (the default without --target)");
          }
          const FunctionDef& callee = p_.def.functions[static_cast<size_t>(f)];
          if (callee.inputs.size() != ins.inputs.size() || callee.outputs.size() != ins.outputs.size()) {
            return invalid_argument(where + ": delegate '" + d.name + "' takes " +
                                    std::to_string(ins.inputs.size()) + " operands and gives " +
                                    std::to_string(ins.outputs.size()) + " results, its reference function '" +
                                    callee.name + "' " + std::to_string(callee.inputs.size()) + " and " +
                                    std::to_string(callee.outputs.size()));
          }
          std::map<uint32_t, int32_t> inner;
          for (size_t k = 0; k < ins.inputs.size(); ++k) {
            LOOM_ASSIGN_OR_RETURN(int32_t t, tensor(fn, ins.inputs[k], local));
            inner.emplace(callee.inputs[k], t);
          }
          for (size_t k = 0; k < ins.outputs.size(); ++k) {
            LOOM_ASSIGN_OR_RETURN(int32_t t, tensor(fn, ins.outputs[k], local));
            if (!inner.emplace(callee.outputs[k], t).second) {
              return unimplemented(where + ": the reference function of delegate '" + d.name +
                                   "' returns one of its operands");
            }
          }
          LOOM_RETURN_IF_ERROR(add_instructions(callee, inner, depth + 1));
          break;
        }
      }
    }
    return Status();
  }

  const ProgramUnderTest& p_;
  const runtime::ParameterStore& params_;
  graph::Graph graph_;
  std::set<std::string> names_;
};

}  // namespace

namespace {

// A graph of the program compared as an ONNX model is: compiled anew for the
// device's plugins (node by node with split_delegates) and the reference.
// `frozen`: inputs the graph took as constants.
Result<ModelComparison> compare_program_graph(Runtime& runtime, const graph::Graph& whole,
                                              const std::vector<std::string>& frozen, bool bound,
                                              const fs::path& path,
                                              std::span<const NamedTensor> inputs,
                                              const ModelCompareOptions& options, const fs::path& scratch) {
  CompileSource source = [&](const std::vector<std::string>& observed, const fs::path& out,
                             const std::vector<std::string>& targets, bool split) -> Result<compiler::CompileReport> {
    graph::Graph g = whole;
    for (const std::string& name : observed) {
      for (size_t t = 0; t < g.tensors.size(); ++t) {
        const int32_t index = static_cast<int32_t>(t);
        if (g.tensors[t].name != name) continue;
        if (std::find(g.outputs.begin(), g.outputs.end(), index) == g.outputs.end()) g.outputs.push_back(index);
      }
    }
    compiler::CompileOptions compile;
    compile.targets = targets;
    compile.one_node_per_subgraph = split;
    auto report = compiler::compile_graph_file(runtime.plugin_host(), g, out, compile);
    if (report.ok()) report->frozen_inputs = frozen;
    return report;
  };
  LOOM_ASSIGN_OR_RETURN(ModelComparison out, compare_source(runtime, source, path.string(), inputs, options, scratch));
  out.program = true;
  out.bound_graph = bound;
  return out;
}

// An open-shape function: its graph artifact bound to the inputs' shapes
// (and values, where they decide shapes), as the runtime binds it per run.
Result<graph::Graph> bound_program_graph(const ProgramUnderTest& p, const runtime::ParameterStore& params,
                                         std::span<const NamedTensor> inputs, std::vector<std::string>* frozen) {
  const FunctionDef& main = p.def.functions.front();
  const ProgramDef& program = p.reader->program();
  const auto a = static_cast<uint32_t>(main.graph_artifact);
  if (a >= program.artifacts.size()) {
    return invalid_argument(p.path.string() + ": function '" + main.name + "': graph artifact " +
                            std::to_string(a) + " out of range");
  }
  auto parameter = [&](const std::string& name) -> Result<graph::ConstantBytes> {
    for (uint32_t i = 0; i < program.parameters.size(); ++i) {
      if (program.parameters[i].name != name) continue;
      const std::span<const std::byte> bytes = params.bytes(i);
      return std::make_shared<const std::vector<std::byte>>(bytes.begin(), bytes.end());
    }
    return invalid_argument("graph IR names parameter '" + name + "', which the program does not have");
  };
  LOOM_ASSIGN_OR_RETURN(std::span<const std::byte> bytes, p.reader->artifact_content(a));
  auto open = lowering::decode_open_graph(bytes, program.artifacts[a].metadata, main.inputs.size(), parameter);
  if (!open.ok()) return open.status().with_context(p.path.string() + ": function '" + main.name + "'");
  lowering::OpenSignature signature;
  std::vector<Shape> shapes;
  std::vector<std::span<const std::byte>> values;
  for (const NamedTensor& in : inputs) {
    if (std::none_of(main.inputs.begin(), main.inputs.end(),
                     [&](uint32_t v) { return v < main.values.size() && main.values[v].name == in.name; })) {
      return not_found("the program has no input '" + in.name + "'");
    }
  }
  for (uint32_t v : main.inputs) {
    const ValueDef& def = p.reader->program().functions.front().values[v];
    signature.inputs.push_back(def);
    auto it = std::find_if(inputs.begin(), inputs.end(), [&](const NamedTensor& in) { return in.name == def.name; });
    if (it == inputs.end()) {
      return invalid_argument("input '" + def.name + "' (" + std::string(dtype_name(def.dtype)) + ") is not given");
    }
    if (it->tensor.dtype() != def.dtype) {
      return invalid_argument("input '" + def.name + "' is " + std::string(dtype_name(it->tensor.dtype())) +
                              ", the program takes " + std::string(dtype_name(def.dtype)));
    }
    shapes.push_back(it->tensor.shape());
    values.push_back(it->tensor.bytes());
  }
  for (uint32_t v : main.outputs) signature.outputs.push_back(p.reader->program().functions.front().values[v]);
  LOOM_RETURN_IF_ERROR(lowering::check_binding(signature, shapes));
  const kernels::KernelRegistry kernels = kernels::KernelRegistry::reference();
  LOOM_ASSIGN_OR_RETURN(lowering::BoundGraph bound,
                        lowering::bind_open_graph(*open, shapes, kernels,
                                                  default_max_tensor_bytes(), values));
  for (size_t k : bound.frozen_inputs) frozen->push_back(signature.inputs[k].name);
  return std::move(bound.graph);
}

}  // namespace

Result<ModelComparison> compare_program(Runtime& runtime, const fs::path& path, std::span<const NamedTensor> inputs,
                                        const ModelCompareOptions& options, const fs::path& scratch) {
  LOOM_ASSIGN_OR_RETURN(ProgramUnderTest p, open_program_under_test(path));
  const bool open = p.def.functions.front().graph_artifact >= 0;
  if (!open && !options.split_delegates) return compare_program_as_is(runtime, p, inputs, options, scratch);
  auto params = runtime::ParameterStore::open(*p.reader, path.parent_path(), {});
  if (!params.ok()) return params.status().with_context(path.string());
  std::vector<std::string> frozen;
  graph::Graph whole;
  if (open) {
    LOOM_ASSIGN_OR_RETURN(whole, bound_program_graph(p, *params, inputs, &frozen));
  } else {
    LOOM_ASSIGN_OR_RETURN(whole, ProgramGraphBuilder(p, *params).build());
  }
  return compare_program_graph(runtime, whole, frozen, open, path, inputs, options, scratch);
}

Result<Reproducer> write_program_reproducer(const fs::path& path, const ModelComparison& comparison, size_t step,
                                            const fs::path& out_dir) {
  if (step >= comparison.steps.size()) {
    return invalid_argument("step " + std::to_string(step) + " of " + std::to_string(comparison.steps.size()));
  }
  const StepComparison& s = comparison.steps[step];
  if (s.instruction < 0 && comparison.bound_graph) {
    return failed_precondition(path.string() + " has open shapes: it is compiled per binding, so step " +
                               std::to_string(step) + " (" + s.describe() +
                               ") is no instruction of it to cut out; bisect the ONNX model");
  }
  if (s.instruction < 0) {
    return failed_precondition("step " + std::to_string(step) + " (" + s.describe() +
                               ") is a node of the program's rebuilt graph, not an instruction of " +
                               path.string() + ": bisect a comparison without --split-delegates");
  }
  LOOM_ASSIGN_OR_RETURN(ProgramUnderTest p, open_program_under_test(path));
  const FunctionDef& main = p.def.functions.front();
  if (static_cast<size_t>(s.instruction) >= main.instructions.size()) {
    return invalid_argument(path.string() + ": instruction " + std::to_string(s.instruction) + " out of range");
  }
  const InstructionDef& ins = main.instructions[static_cast<size_t>(s.instruction)];
  // The one instruction as the first function: what it reads (less
  // constants) in, what it writes out; every other function stays.
  ProgramDef def = p.def;
  FunctionDef& cut = def.functions.front();
  cut.instructions = {ins};
  cut.inputs.clear();
  cut.outputs.clear();
  cut.memory_plan = MemoryPlanDef{};
  for (uint32_t v : ins.inputs) {
    if (v == kAbsentValue || main.values[v].parameter >= 0) continue;
    if (std::find(cut.inputs.begin(), cut.inputs.end(), v) == cut.inputs.end()) cut.inputs.push_back(v);
  }
  for (uint32_t v : ins.outputs) {
    if (std::find(cut.outputs.begin(), cut.outputs.end(), v) == cut.outputs.end()) cut.outputs.push_back(v);
  }
  cut.reflection = function_reflection(cut);

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return unavailable("cannot create '" + out_dir.string() + "': " + ec.message());
  // Weights in an external archive go inline: the reproducer stands alone.
  ProgramWriter writer;
  for (uint32_t seg = 0; seg < p.reader->segments().size(); ++seg) {
    LOOM_ASSIGN_OR_RETURN(std::span<const std::byte> bytes, p.reader->segment_bytes(seg));
    writer.add_segment(bytes, p.reader->segments()[seg].alignment);
  }
  if (!p.archives.empty()) {
    auto params = runtime::ParameterStore::open(*p.reader, path.parent_path(), {});
    if (!params.ok()) return params.status().with_context(path.string());
    for (uint32_t i = 0; i < def.parameters.size(); ++i) {
      ParameterDef& param = def.parameters[i];
      if (param.archive.empty()) continue;
      param.segment = static_cast<int32_t>(writer.add_segment(params->bytes(i)));
      param.offset = 0;
      param.archive.clear();
      param.scope.clear();
    }
  }
  writer.program() = std::move(def);
  writer.set_features(p.reader->head().required_features, p.reader->head().optional_features);

  Reproducer r;
  r.nodes = std::max<size_t>(1, s.step.nodes.size());
  std::set<std::string> used;
  auto write_value = [&](const std::string& prefix, uint32_t v,
                         std::vector<std::pair<std::string, fs::path>>& files) -> Status {
    const std::string name = program_value_name(main, v);
    const Tensor* value = comparison.reference_value(name);
    if (value == nullptr) return internal_error("no reference value for '" + name + "'");
    std::string stem = prefix + io::npy_file_stem(name), file = stem;
    for (int k = 2; !used.insert(file).second; ++k) file = stem + "_" + std::to_string(k);
    const fs::path out = out_dir / (file + ".npy");
    LOOM_RETURN_IF_ERROR(io::write_npy(out, *value));
    files.emplace_back(name, out);
    return Status();
  };
  const FunctionDef& written = writer.program().functions.front();
  for (uint32_t v : written.inputs) LOOM_RETURN_IF_ERROR(write_value("", v, r.inputs));
  for (uint32_t v : written.outputs) LOOM_RETURN_IF_ERROR(write_value("expected_", v, r.expected));
  r.model = out_dir / "model.loom";
  LOOM_RETURN_IF_ERROR(writer.write_file(r.model).with_context("writing '" + r.model.string() + "'"));
  return r;
}

}  // namespace loom::conformance::model_compare_detail
