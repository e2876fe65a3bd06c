// Finding where a device's results leave the reference: `loom compare` is a
// front end to this.
//
// compare_model compiles an ONNX model for the device under test, makes every
// value that crosses from one step of the program to the next (a delegate's
// outputs, a reference-kernel node's outputs) an output of the model, runs
// that model on the device and on the reference (the core's reference
// kernels, or a second device), and compares the values step by step in
// execution order. A delegate is compared at its own outputs: what a plugin
// fused inside it is not observed, unless `split_delegates` compiles every
// node a plugin takes as a delegate of its own. The first divergent step is
// the first whose outputs leave the tolerance while every value it reads is
// still within it.
//
// On a program file (.loom) with fixed shapes the steps are the
// instructions of its first function, delegate calls and kernel calls, and
// the program runs as it is: a copy that also returns every value those
// instructions write runs on the device, and on the reference a copy whose
// delegates are narrowed to their "loom.reference" variant (their nodes as
// reference-kernel calls, which `loom compile --variants all` writes), or on
// a second device. A delegate without one, with no reference device, is
// FAILED_PRECONDITION naming it and `--variants all`. A program keeps no
// node names: a node is named by the first value it writes. With
// split_delegates the function is rebuilt as a graph from the reference
// variants (the same precondition) and compiled node by node as an ONNX
// model is. A function with open shapes ("loom.graph" artifact) is compared
// as a run specializes it: its graph bound to the inputs' shapes, compiled
// for the device's plugins and for the reference like an ONNX model (a
// native open-shape program, format 1.4, runs its own blobs instead: it is
// compared through its graph all the same).
//
// write_reproducer cuts that step out of the ONNX model as a model of its own
// (its inputs are the values the step read, taken from the reference run),
// with the inputs and the reference's outputs as .npy files beside it, for
// `loom run` and a bug report; on a program, the step's instruction as a
// program of its own (a comparison of the program as it is).
//
// Library: loom_conformance (links the runtime and the compiler).
#pragma once

#include <chrono>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/compiler.hpp"
#include "loom/conformance/onnx_cases.hpp"
#include "loom/runtime.hpp"
#include "loom/status.hpp"

namespace loom::conformance {

struct ModelCompareOptions {
  // The device under test: a selector (loom run --device); required.
  std::string device;
  // What it is compared against: empty for the reference kernels, else a
  // second device's selector.
  std::string reference_device;
  // Intermediate values pass through long chains of float arithmetic, so
  // the default absolute tolerance is looser than the conformance suite's.
  Tolerance tolerance{1e-3, 1e-4};
  // Compile every node a plugin takes as a delegate of its own
  // (compiler::CompileOptions::one_node_per_subgraph), to look inside fused
  // delegates.
  bool split_delegates = false;
  std::chrono::milliseconds run_timeout{60'000};
};

// One value a step produced, on both sides.
struct ValueComparison {
  std::string value;
  TensorDifference difference;
  std::string detail;  // describe_difference()
};

// One step of the program compiled for the device, compared.
struct StepComparison {
  // On a program run as it is, `plugin` is the loader key of the variant
  // that ran, `nodes` and `op_types` those of its reference function (empty
  // without one).
  compiler::SubgraphReport step;
  // The instruction of the program's first function (a program run as it
  // is); -1 otherwise.
  int instruction = -1;
  std::string ran_on;  // the device URI of its delegate, or "reference kernels"
  std::vector<ValueComparison> outputs;
  // Every value it reads (model inputs, earlier steps' outputs) is within
  // the tolerance.
  bool inputs_within = true;
  bool within() const;
  // "node 'hs' (HardSigmoid)", "delegate cpu-simd_0 (3 nodes: a (Conv), ...)"
  // or, without nodes known, "delegate cpu-simd_0".
  std::string describe() const;
};

struct ModelComparison {
  std::string device;     // as given
  std::string reference;  // the reference's name: "reference kernels" or its selector
  Tolerance tolerance;
  bool split_delegates = false;
  bool program = false;  // the source was a program file (.loom)
  // A program with open shapes: its graph artifact bound to the inputs'
  // shapes and compiled anew for the device, as a run specializes it.
  bool bound_graph = false;
  std::vector<StepComparison> steps;  // in execution order
  // Index into `steps` of the first divergent step; -1: every value is within.
  int first_divergent = -1;
  // Every value of the comparison on the reference side (model inputs
  // included), for write_reproducer.
  std::vector<NamedTensor> reference_values;
  const Tensor* reference_value(std::string_view name) const;
};

// Compares `model` (an ONNX file, or a program file when is_program_path)
// run on options.device with the reference, on `inputs` (by the model's
// input names; they also bind an ONNX model's dimensions).
// `scratch` is a folder it may write its programs into. Errors name the
// model, the input or the device.
Result<ModelComparison> compare_model(Runtime& runtime, const std::filesystem::path& model,
                                      std::span<const NamedTensor> inputs,
                                      const ModelCompareOptions& options,
                                      const std::filesystem::path& scratch);

// Whether compare_model takes `path` for a program file: its extension is
// ".loom".
bool is_program_path(const std::filesystem::path& path);

// The plugins of the devices `selector` picks, in its order, each once: the
// targets to compile a model for so that it runs there. An empty selector
// gives no targets (the reference kernels).
Result<std::vector<std::string>> compile_targets_for(Runtime& runtime, std::string_view selector);

// What write_reproducer wrote.
struct Reproducer {
  std::filesystem::path model;                                   // OUT/model.onnx or OUT/model.loom
  std::vector<std::pair<std::string, std::filesystem::path>> inputs;    // (value, .npy)
  std::vector<std::pair<std::string, std::filesystem::path>> expected;  // (value, .npy)
  size_t nodes = 0;  // nodes in the written model
};

// Writes step `step` of `comparison` as OUT/model.onnx: the nodes of `model`
// that compute the step's outputs from the values it reads (and from
// initializers and Constant nodes); those values become the model's
// inputs, written as OUT/<value>.npy from the reference run, and the step's
// outputs its outputs, the reference's values written as
// OUT/expected_<value>.npy. Initializers stored as external data are
// written inline. Characters of value names other than letters, digits,
// '.', '-', '_' become '_' in file names. For a program file
// (is_program_path): OUT/model.loom, the program with the step's instruction
// as its first function (its other functions and every variant of the
// delegate kept, external weights inline); FAILED_PRECONDITION for a step
// that is no instruction (split_delegates, or an open-shape program).
Result<Reproducer> write_reproducer(const std::filesystem::path& model,
                                    const ModelComparison& comparison, size_t step,
                                    const std::filesystem::path& out_dir);

}  // namespace loom::conformance
