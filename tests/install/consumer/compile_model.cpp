// An installed host application that compiles an ONNX model itself
// (Loom::compiler, libloom-compiler.so) and runs the program it wrote
// (Loom::runtime): compile_model MODEL.onnx OUT.loom prints the first
// output's values for an input of -2, -1, 0, 1, ... .
#include <cstdio>
#include <iostream>

#include "loom/compiler.hpp"
#include "loom/runtime.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: compile_model MODEL.onnx OUT.loom\n";
    return 2;
  }
  auto runtime = loom::Runtime::create();
  if (!runtime.ok()) {
    std::cerr << runtime.status().to_string() << "\n";
    return 1;
  }
  loom::compiler::CompileOptions options;
  options.targets = {"cpu-simd"};
  auto report = loom::compiler::compile_onnx_file((*runtime)->plugin_host(), argv[1], argv[2], options);
  if (!report.ok()) {
    std::cerr << report.status().to_string() << "\n";
    return 1;
  }
  std::cout << "nodes " << report->model_nodes << " on cpu-simd " << report->targets[0].nodes << "\n";
  auto program = (*runtime)->load_program(argv[2]);
  if (!program.ok()) {
    std::cerr << program.status().to_string() << "\n";
    return 1;
  }
  auto session = (*program)->create_session();
  if (!session.ok()) return 1;
  const loom::ArgumentInfo& in = (*session)->function().inputs[0];
  loom::Tensor x = loom::Tensor::zeros(in.dtype, in.shape).value();
  for (uint64_t i = 0; i < x.element_count(); ++i) x.data_as<float>()[i] = static_cast<float>(i) - 2.0f;
  if (!(*session)->set_input(in.name, x).ok() || !(*session)->run().ok()) return 1;
  const loom::Tensor& y = (*session)->output(0);
  for (uint64_t i = 0; i < 4 && i < y.element_count(); ++i) std::cout << y.data_as<float>()[i] << (i < 3 ? " " : "\n");
  return 0;
}
