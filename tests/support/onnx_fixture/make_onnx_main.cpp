// loom-test-make-onnx DIR: writes the sample model of onnx_fixtures.hpp as
// DIR/model.onnx (+ DIR/model.weights), each initializer's expected value as
// DIR/expected_<i>.npy, and prints "<i> <name>" per initializer; also writes
// DIR/escape.onnx, whose external data names '../outside.bin'.
#include <cstdio>
#include <filesystem>

#include "io/npy.hpp"
#include "onnx_fixtures.hpp"

namespace fx = loom::testing::onnx_fixtures;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: loom-test-make-onnx DIR\n");
    return 2;
  }
  std::filesystem::path dir = argv[1];
  auto expected = fx::write_sample_model(dir);
  if (!expected.ok()) {
    std::fprintf(stderr, "%s\n", expected.status().to_string().c_str());
    return 1;
  }
  for (size_t i = 0; i < expected->size(); ++i) {
    const auto& [name, tensor] = (*expected)[i];
    auto path = dir / ("expected_" + std::to_string(i) + ".npy");
    loom::Status st = loom::io::write_npy(path, tensor);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.to_string().c_str());
      return 1;
    }
    std::printf("%zu %s\n", i, name.c_str());
  }
  auto escape = fx::empty_model();
  fx::set_external(fx::add_initializer(escape, "w", onnx::TensorProto::FLOAT, {2}),
                   "../outside.bin", "0", "8");
  loom::Status st = fx::write_model(escape, dir / "escape.onnx");
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}
