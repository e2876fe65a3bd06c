// Open-shape functions at run time (docs/dynamic-shapes.md).
//
// OpenFunction belongs to the loaded Program: the function's graph, read from
// its "loom.graph" artifact, and the programs specialized from it, one per
// binding of the open dimensions, at most LoadOptions::shape_cache of them
// (least recently used dropped first). A specialization is the graph bound to
// the binding's shapes, partitioned and compiled through the target plugins'
// compile entries (lowering/open_shapes.hpp), and loaded like any program
// file, with the program's own LoadOptions (selector, timeouts, fallback).
//
// OpenSession belongs to a Session of such a function: the inputs as set
// (bytes and shapes, kept in buffers that only grow), and a session of a
// specialization per recent binding, so that a run at a binding seen before
// does no work and allocates nothing beyond the run itself.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "host/plugin_host.hpp"
#include "kernels/kernel.hpp"
#include "loom/runtime.hpp"
#include "lowering/open_shapes.hpp"
#include "runtime/parameter_store.hpp"

namespace loom::runtime {

struct FunctionPlan;

// One binding's program.
struct Specialized {
  std::vector<Shape> shapes;        // the binding: one shape per input
  // Per input, for a function whose inputs take any dtype (a staged
  // program's parts, docs/control-flow.md); empty otherwise.
  std::vector<DType> dtypes;
  // Inputs whose values decide shapes, and those values: part of the binding
  // (lowering::BoundGraph::frozen_inputs). The program has no such inputs.
  std::vector<size_t> frozen_inputs;
  std::vector<std::vector<std::byte>> frozen_values;
  std::vector<std::byte> bytes;     // the program file in memory; outlives `program`
  std::shared_ptr<Program> program;
  // A native open-shape function's binding (format 1.4): the function's own
  // instructions with this binding's shapes and memory plan, run on the
  // program's delegates; `program` is then null.
  std::unique_ptr<FunctionPlan> plan;
  std::unique_ptr<FunctionDef> def;  // what `plan` points into (attributes)
  std::vector<std::string> skipped_targets;  // see lowering::Specialization
  ~Specialized();  // `program` before `bytes`

  // Whether a run with these input shapes and bytes is this binding.
  bool matches(std::span<const Shape> input_shapes, std::span<const std::vector<std::byte>> inputs,
               std::span<const DType> input_dtypes = {}) const;
};

// Loads a specialization's program file (Runtime::prepare with the
// program's options and its host).
using ProgramLoader = std::function<Result<std::shared_ptr<Program>>(std::span<const std::byte>)>;

class OpenFunction {
 public:
  // `def` is an open-shape function of `reader`'s program; its artifact's
  // parameters come from `parameters`.
  static Result<std::shared_ptr<OpenFunction>> create(const ProgramReader& reader,
                                                      const ParameterStore& parameters,
                                                      std::span<const std::byte> artifact,
                                                      const FunctionDef& def,
                                                      std::shared_ptr<host::PluginHost> host,
                                                      ProgramLoader load, size_t cache_size,
                                                      uint64_t max_tensor_bytes,
                                                      std::shared_ptr<host::LogChannel> channel);

  // A native open-shape function (format 1.4: `def` has instructions):
  // bindings whose graph has the structure the program was compiled for
  // (lowering::compare_bindings against the first probe binding) get a plan
  // of `def` at their shapes instead of a program compiled for them.
  // `reader`, `parameters` and `kernels` belong to the program and outlive
  // this function.
  Status enable_native(const ProgramReader& reader, const ParameterStore& parameters,
                       const FunctionDef& def, const kernels::KernelRegistry& kernels, size_t delegate_count);
  bool native() const { return native_ != nullptr; }

  const lowering::OpenSignature& signature() const { return signature_; }
  size_t cache_size() const { return capacity_; }

  // The specialization for `shapes` and, where values decide shapes, the
  // bytes of `inputs` (checked against the signature): from the cache, or
  // made now. Thread-safe; sessions of the program share it.
  // `dtypes`: one per input, for a function whose inputs take any dtype
  // (ValueDef::dtype kInvalid); empty otherwise.
  Result<std::shared_ptr<const Specialized>> specialization(std::span<const Shape> shapes,
                                                            std::span<const std::vector<std::byte>> inputs,
                                                            std::span<const DType> dtypes = {});
  // Some input takes its dtype from each run (ValueDef::dtype kInvalid).
  bool untyped() const { return untyped_; }
  // How many specializations were made since load (cache misses).
  uint64_t specializations_made() const;
  // The trace being recorded, or null (cheap when not tracing).
  std::shared_ptr<Trace> active_trace() const;

 private:
  OpenFunction() = default;
  lowering::OpenSignature signature_;
  lowering::OpenGraph graph_;
  bool untyped_ = false;
  std::string name_;
  std::shared_ptr<host::PluginHost> host_;
  ProgramLoader load_;
  kernels::KernelRegistry kernels_;
  uint64_t max_tensor_bytes_ = 0;
  size_t capacity_ = 1;
  std::shared_ptr<host::LogChannel> channel_;
  struct Native {
    FunctionDef def;
    const ProgramReader* reader = nullptr;
    const ParameterStore* parameters = nullptr;
    const kernels::KernelRegistry* kernels = nullptr;
    size_t delegate_count = 0;
    graph::Graph reference;  // the graph bound at the first probe binding
  };
  std::unique_ptr<Native> native_;
  // The native plan for this binding, or an error saying why the binding
  // needs a program of its own (then the caller compiles one).
  Status native_plan(std::span<const Shape> shapes, Specialized* out) const;

  mutable std::mutex mutex_;
  struct Entry {
    std::shared_ptr<const Specialized> value;
    uint64_t used = 0;
  };
  std::vector<Entry> cache_;
  uint64_t clock_ = 0;
  uint64_t made_ = 0;
};

// The plan of an open-shape function: its FunctionInfo only (it has no
// instructions of its own).
FunctionPlan open_function_plan(const FunctionDef& def);

class OpenSession {
 public:
  // `program` is the program of `function`: native bindings run sessions of
  // it.
  OpenSession(std::shared_ptr<Program::State> program, std::shared_ptr<OpenFunction> function,
              const FunctionInfo& info, std::chrono::milliseconds run_timeout);

  Status set_input(size_t index, const Tensor& tensor);
  Status run();
  Status set_run_timeout(std::chrono::milliseconds timeout);
  // The session of the last run's binding; null before the first run.
  Session* current() const { return current_; }
  // The specialization of the last run's binding; null before the first run.
  std::shared_ptr<Program> current_program() const {
    return current_bound_ != nullptr ? current_bound_->specialized->program : nullptr;
  }
  size_t output_count() const { return info_.outputs.size(); }
  const Tensor& output(size_t index) const;

 private:
  std::shared_ptr<Program::State> program_;
  std::shared_ptr<OpenFunction> function_;
  const FunctionInfo& info_;
  std::chrono::milliseconds run_timeout_;
  std::vector<std::vector<std::byte>> staging_;  // per input; grows only
  std::vector<Shape> shapes_;                    // per input, as set
  std::vector<DType> dtypes_;                    // per input, as set (untyped functions)
  std::vector<bool> set_;
  struct Bound {
    std::shared_ptr<const Specialized> specialized;
    std::unique_ptr<Session> session;
    // Per input of the function: its index among the session's inputs, or
    // -1 for an input the specialization froze.
    std::vector<int32_t> slot;
    uint64_t used = 0;
  };
  std::vector<Bound> bound_;
  uint64_t clock_ = 0;
  Session* current_ = nullptr;
  const Bound* current_bound_ = nullptr;
  Tensor empty_;
};

}  // namespace loom::runtime
