// The operator sweep's table and the one-node models built from its cases.
// Private to the suite.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "loom/conformance/operator_sweep.hpp"
#include "loom/runtime.hpp"  // NamedTensor

namespace loom::conformance::sweep {

// One row of the table (sweep_table.cpp says the notation): every
// (input set, attribute set, dtype) is a case.
struct SweepRow {
  const char* op;
  int opset;
  const char* dtypes;  // space-separated dtype names: "f32 i32"
  double low, high;    // the range of seeded data values
  int outputs;         // how many outputs the node has
  std::vector<const char*> inputs;
  std::vector<const char*> attributes;
};

const std::vector<SweepRow>& table();
std::vector<std::string> operator_names();  // sorted, unique

// A case made concrete: the serialized one-node ONNX model and the seeded
// values of its graph inputs.
struct BuiltCase {
  std::string model;  // ModelProto bytes
  std::vector<NamedTensor> inputs;
  int outputs = 1;
};

// Builds `c` (of `row`), inputs seeded by `seed`. Errors name the token of
// the table that is wrong.
Result<BuiltCase> build_case(const SweepRow& row, const SweepCase& c, uint64_t seed);

}  // namespace loom::conformance::sweep
