// The ONNX half of model_compare (model_compare_onnx.cpp): models written
// for a comparison.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "loom/status.hpp"

namespace loom::conformance {

// Writes `model` to `out` with each of `values` (node outputs) also a graph
// output, and its external initializers inline (so that `out` may live in
// another folder).
Status write_observing_model(const std::filesystem::path& model, const std::vector<std::string>& values,
                             const std::filesystem::path& out);

}  // namespace loom::conformance
