// The demo program: a small MLP assembled with the writer.
//
//   y = Softmax(Relu(x · W1 + b1) · W2 + b2)
//
// Function "main" runs it as one delegate, compiled by plugins through their
// compile entries (one variant per plugin, as `loom compile` would make);
// function "reference" runs the same graph on the core's reference kernels.
// Weights are deterministic; they live inline, or in an IREE parameter
// archive beside the program. The plugins come from the Runtime given.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "loom/program.hpp"
#include "loom/runtime.hpp"
#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom::tools {

struct MlpShape {
  int64_t batch = 4;
  int64_t in = 64;
  int64_t hidden = 128;
  int64_t out = 10;
};

// One weight of the demo MLP.
struct NamedWeight {
  std::string name;
  Tensor tensor;
};

// The demo's weights w1 [in, hidden], b1 [hidden], w2 [hidden, out], b2 [out],
// deterministic in `seed`.
std::vector<NamedWeight> mlp_weights(const MlpShape& shape, uint64_t seed = 7);

struct MlpOptions {
  // Without the delegate the program has only the "reference" function, so
  // it loads where no plugin is present.
  bool with_delegate = true;
  // The plugins that compile the delegate, one variant each, in this order;
  // each must take every node. Empty: every plugin of the runtime that
  // takes every node (MlpProgram::compiled_for lists them).
  std::vector<std::string> targets = {"cpu-simd"};
  // Weights in an .irpa archive (entries w1, b1, w2, b2 in `scope`, found at
  // `archive` relative to the program file) instead of inline.
  bool external_weights = false;
  std::string scope = "mlp";
  std::string archive = "weights.irpa";
  // External weights: record each weight's xxh3 checksum in the program
  // (the loader then checks the archive's bytes against it).
  bool record_checksums = true;
};

struct MlpProgram {
  ProgramWriter writer;
  // External weights: the archive file's bytes, every weight a DATA entry
  // with metadata {"dtype":..,"shape":[..]}. Empty for inline weights.
  std::vector<std::byte> archive;
  // The plugins that compiled a variant of the delegate, in order.
  std::vector<std::string> compiled_for;
  // MlpOptions::targets empty: each other plugin found, with why it did not
  // compile the MLP (rejected, no compile entries, a node it does not take).
  std::vector<std::pair<std::string, std::string>> declined;
};

// The demo program with the given weights (as mlp_weights() names and shapes
// them; anything else is invalid_argument), its delegate compiled by the
// plugins of `runtime` (MlpOptions::targets; a target that is missing,
// cannot compile or does not take a node is an error naming it).
Result<MlpProgram> build_mlp(Runtime& runtime, const MlpShape& shape,
                             const std::vector<NamedWeight>& weights,
                             const MlpOptions& options = {});

// The demo program's writer with inline weights mlp_weights(shape, seed),
// compiled for cpu-simd.
Result<ProgramWriter> build_mlp_program(Runtime& runtime, const MlpShape& shape = {},
                                        uint64_t seed = 7, bool with_delegate = true);

// A deterministic input for the demo's "x".
Tensor mlp_input(const MlpShape& shape, uint64_t seed = 11);

// A program with one function "main" = one delegate call of one op on `n`
// f32 elements, y = Relu(x), compiled by the plugin `target` of `runtime`.
// Used to measure per-run overhead.
Result<ProgramWriter> build_single_op_program(Runtime& runtime, int64_t n,
                                              const std::string& target = "cpu-simd");

}  // namespace loom::tools
