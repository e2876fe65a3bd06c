// What the two sources of a comparison share (model_compare.cpp): an ONNX
// model compiled anew, or a program file (program_compare.cpp), which is
// either run as it is, instruction by instruction, or rebuilt into a graph
// and compiled anew node by node (--split-delegates).
#pragma once

#include <filesystem>
#include <functional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "loom/compiler.hpp"
#include "loom/conformance/model_compare.hpp"
#include "loom/runtime.hpp"
#include "loom/status.hpp"

namespace loom::conformance::model_compare_detail {

using ParameterArchives = std::vector<std::pair<std::string, std::filesystem::path>>;

// The outputs of one program's first function after a run, by name.
struct RunValues {
  std::vector<NamedTensor> values;
  std::vector<DelegatePlacement> placements;
  const Tensor* find(std::string_view name) const {
    for (const NamedTensor& v : values) {
      if (v.name == name) return &v.tensor;
    }
    return nullptr;
  }
};

// Loads `program_path` on `device` (a selector; empty: each delegate's first
// variant that loads), sets `inputs` by name (names in `frozen` may be
// absent from the function), runs it once and copies out every result.
// `side` names the run in errors ("the device's run").
Result<RunValues> run_compiled(Runtime& runtime, const std::filesystem::path& program_path,
                               const std::string& device, std::span<const NamedTensor> inputs,
                               const std::vector<std::string>& frozen, const ModelCompareOptions& options,
                               std::string_view side, const ParameterArchives& archives);

// Compiles the comparison's source into the program file `out` for
// `targets` (none: the reference kernels), every node a plugin takes on its
// own when `split`, with each value named in `observed` also an output of
// its function (none: the source as it is).
using CompileSource = std::function<Result<compiler::CompileReport>(
    const std::vector<std::string>& observed, const std::filesystem::path& out,
    const std::vector<std::string>& targets, bool split)>;

// compare_model's steps for a source compiled anew: for the device's
// plugins (compile_targets_for) and for the reference. `what` names the
// source in errors.
Result<ModelComparison> compare_source(Runtime& runtime, const CompileSource& source, const std::string& what,
                                       std::span<const NamedTensor> inputs, const ModelCompareOptions& options,
                                       const std::filesystem::path& scratch);

// A value of one side's results by name; null when it has none.
using ValueLookup = std::function<const Tensor*(const std::string&)>;

// Compares step `c` (c.step filled in) output by output, marks whether its
// inputs were within (none of them in `outside`), adds the outputs found
// outside the tolerance to `outside`, sets out.first_divergent when it is
// the first divergent step, and appends it to out.steps.
Status append_step(ModelComparison& out, StepComparison c, const ValueLookup& got, const ValueLookup& expected,
                   std::set<std::string>& outside);

// compare_model for a program file (.loom): see model_compare.hpp.
Result<ModelComparison> compare_program(Runtime& runtime, const std::filesystem::path& program,
                                        std::span<const NamedTensor> inputs, const ModelCompareOptions& options,
                                        const std::filesystem::path& scratch);

// write_reproducer for a program file: step `step` (an instruction of a
// comparison of the program as it is) as OUT/model.loom.
Result<Reproducer> write_program_reproducer(const std::filesystem::path& program,
                                            const ModelComparison& comparison, size_t step,
                                            const std::filesystem::path& out_dir);

}  // namespace loom::conformance::model_compare_detail
