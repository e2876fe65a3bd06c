// The demo program: a small MLP assembled with the writer.
//
//   y = Softmax(Relu(x · W1 + b1) · W2 + b2)
//
// Function "main" runs it as one delegate (variants for every backend that
// has a blob encoder; cpu-simd today); function "reference" runs the same
// graph on the core's reference kernels. Weights are deterministic; they live
// inline, or in an IREE parameter archive beside the program.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/program.hpp"
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
};

// The demo program with the given weights (as mlp_weights() names and shapes
// them; anything else is invalid_argument).
Result<MlpProgram> build_mlp(const MlpShape& shape, const std::vector<NamedWeight>& weights,
                             const MlpOptions& options = {});

// The demo program's writer with inline weights mlp_weights(shape, seed).
Result<ProgramWriter> build_mlp_program(const MlpShape& shape = {}, uint64_t seed = 7,
                                        bool with_delegate = true);

// A deterministic input for the demo's "x".
Tensor mlp_input(const MlpShape& shape, uint64_t seed = 11);

// A program with one function "main" = one delegate call of one cpu-simd op
// on `n` f32 elements: y = Relu(x). Used to measure per-run overhead.
Result<ProgramWriter> build_single_op_program(int64_t n);

}  // namespace loom::tools
