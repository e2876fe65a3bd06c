// Helpers shared by the open-shape test files of compiler_driver_test
// (open_shapes_test.cpp, open_shapes_targets_test.cpp): a scratch folder,
// a runtime, deterministic inputs, output comparison and open signatures.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "loom/runtime.hpp"
#include "lowering/open_shapes.hpp"

namespace loom::compiler::testing::open_shapes_util {

namespace fs = std::filesystem;

// A folder of this process's own under the test temp folder: ctest runs
// this file's cases in parallel processes, which must not overwrite each
// other's models and programs.
inline fs::path scratch() {
  const fs::path dir = fs::path(::testing::TempDir()) / ("loom-open-shapes-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

inline std::unique_ptr<Runtime> make_runtime(std::vector<std::pair<std::string, std::string>> options = {}) {
  RuntimeOptions o;
  o.plugin_options = std::move(options);
  auto runtime = Runtime::create(o);
  EXPECT_TRUE(runtime.ok()) << runtime.status().message();
  return runtime.ok() ? std::move(*runtime) : nullptr;
}

// Deterministic values in [-2, 2) with both signs.
inline Tensor pattern(Shape shape, int seed) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(shape)).value();
  float* p = t.data_as<float>();
  for (uint64_t i = 0; i < t.element_count(); ++i) {
    p[i] = static_cast<float>(static_cast<int>((i * 7 + static_cast<uint64_t>(seed) * 13) % 16) - 8) / 4.0f;
  }
  return t;
}

inline float max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape()) return INFINITY;
  float m = 0;
  for (uint64_t i = 0; i < a.element_count(); ++i) {
    m = std::max(m, std::fabs(a.data_as<float>()[i] - b.data_as<float>()[i]));
  }
  return m;
}

inline ValueDef open_value(std::string name, Shape shape, std::vector<std::string> symbols) {
  ValueDef v;
  v.name = std::move(name);
  v.shape = std::move(shape);
  v.dim_symbols = std::move(symbols);
  return v;
}

}  // namespace loom::compiler::testing::open_shapes_util
