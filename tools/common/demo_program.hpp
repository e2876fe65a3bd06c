// The demo program: a small MLP assembled with the writer.
//
//   y = Softmax(Relu(x · W1 + b1) · W2 + b2)
//
// Function "main" runs it as one delegate (variants for every backend that
// has a blob encoder; cpu-simd today); function "reference" runs the same
// graph on the core's reference kernels. Weights are deterministic.
#pragma once

#include <cstdint>

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

// The demo program's writer (metadata and weights filled in). Without
// `with_delegate` the program has only the "reference" function, so it loads
// where no plugin is present.
Result<ProgramWriter> build_mlp_program(const MlpShape& shape = {}, uint64_t seed = 7,
                                        bool with_delegate = true);

// A deterministic input for the demo's "x".
Tensor mlp_input(const MlpShape& shape, uint64_t seed = 11);

// A program with one function "main" = one delegate call of one cpu-simd op
// on `n` f32 elements: y = Relu(x). Used to measure per-run overhead.
Result<ProgramWriter> build_single_op_program(int64_t n);

}  // namespace loom::tools
