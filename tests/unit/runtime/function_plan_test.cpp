// Programs that verify as containers but cannot run: each is refused at load
// with an error naming the function, the instruction and the problem.
#include <gtest/gtest.h>

#include <cstring>

#include "program_builder/program_builder.hpp"
#include "loom/runtime.hpp"

namespace loom {
namespace {

class FunctionPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    RuntimeOptions options;
    options.use_environment = false;
    options.use_default_folder = false;  // the reference kernels only
    options.use_user_folder = false;
    runtime_ = Runtime::create(options).value();
  }

  // Loads the program and returns the error message ("" when it loaded).
  std::string load_error(tools::ProgramBuilder& builder) {
    auto writer = builder.finish();
    if (!writer.ok()) return "builder: " + writer.status().message();
    auto bytes = writer->write_buffer();
    if (!bytes.ok()) return "writer: " + bytes.status().message();
    bytes_ = *bytes;
    auto program = runtime_->load_program(bytes_);
    return program.ok() ? "" : program.status().message();
  }

  std::unique_ptr<Runtime> runtime_;
  std::vector<std::byte> bytes_;
};

TEST_F(FunctionPlan, ReferenceKernelsRunAReluFunction) {
  tools::ProgramBuilder b;
  auto f = b.add_function("main");
  uint32_t x = f.input("x", DType::kF32, {4});
  uint32_t y = f.value("y", DType::kF32, {4});
  f.kernel_call("Relu", {x}, {y});
  f.output(y);
  ASSERT_EQ(load_error(b), "");
  auto program = runtime_->load_program(bytes_).value();
  Tensor in = Tensor::zeros(DType::kF32, {4}).value();
  float values[] = {-1, 2, -3, 4};
  std::memcpy(in.data(), values, sizeof values);
  NamedTensor arg{"x", in};
  auto out = program->run("main", {&arg, 1});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const float* y_data = (*out)[0].tensor.data_as<float>();
  EXPECT_EQ(y_data[0], 0.0f);
  EXPECT_EQ(y_data[1], 2.0f);
  EXPECT_EQ(y_data[2], 0.0f);
  EXPECT_EQ(y_data[3], 4.0f);
}

TEST_F(FunctionPlan, UnknownOperatorIsNamedWithTheAvailableOnes) {
  tools::ProgramBuilder b;
  auto f = b.add_function("main");
  uint32_t x = f.input("x", DType::kF32, {4});
  uint32_t y = f.value("y", DType::kF32, {4});
  f.kernel_call("Frobnicate", {x}, {y});
  f.output(y);
  std::string error = load_error(b);
  EXPECT_NE(error.find("function 'main' instruction 0"), std::string::npos) << error;
  EXPECT_NE(error.find("'Frobnicate'"), std::string::npos) << error;
  EXPECT_NE(error.find("Relu"), std::string::npos) << error;
}

TEST_F(FunctionPlan, DeclaredShapeThatDisagreesWithTheOperatorIsRefused) {
  tools::ProgramBuilder b;
  auto f = b.add_function("main");
  uint32_t a = f.input("a", DType::kF32, {2, 3});
  uint32_t w = f.input("w", DType::kF32, {3, 5});
  uint32_t y = f.value("y", DType::kF32, {2, 4});
  f.kernel_call("MatMul", {a, w}, {y});
  f.output(y);
  std::string error = load_error(b);
  EXPECT_NE(error.find("[2, 4]"), std::string::npos) << error;
  EXPECT_NE(error.find("[2, 5]"), std::string::npos) << error;
}

TEST_F(FunctionPlan, ValueReadBeforeWrittenIsRefused) {
  tools::ProgramBuilder b;
  auto f = b.add_function("main");
  uint32_t t = f.value("t", DType::kF32, {4});
  uint32_t y = f.value("y", DType::kF32, {4});
  f.kernel_call("Relu", {t}, {y});
  f.output(y);
  std::string error = load_error(b);
  EXPECT_NE(error.find("before anything writes it"), std::string::npos) << error;
}

TEST_F(FunctionPlan, WritingAnInputIsRefused) {
  tools::ProgramBuilder b;
  auto f = b.add_function("main");
  uint32_t x = f.input("x", DType::kF32, {4});
  uint32_t z = f.input("z", DType::kF32, {4});
  f.kernel_call("Relu", {x}, {z});
  f.output(z);
  std::string error = load_error(b);
  EXPECT_NE(error.find("read-only input"), std::string::npos) << error;
}

TEST_F(FunctionPlan, ResultNeverWrittenIsRefused) {
  tools::ProgramBuilder b;
  auto f = b.add_function("main");
  f.input("x", DType::kF32, {4});
  uint32_t y = f.value("y", DType::kF32, {4});
  f.output(y);
  std::string error = load_error(b);
  EXPECT_NE(error.find("never written"), std::string::npos) << error;
}

TEST_F(FunctionPlan, DelegateWithoutAnyServingPluginNamesItsVariants) {
  tools::ProgramBuilder b;
  std::byte blob[4] = {};
  uint32_t art = b.add_artifact("no-such-backend", 1, "x.bin", blob);
  uint32_t d = b.add_delegate("sub0", {art});
  auto f = b.add_function("main");
  uint32_t x = f.input("x", DType::kF32, {4});
  uint32_t y = f.value("y", DType::kF32, {4});
  f.delegate_call(d, {x}, {y});
  f.output(y);
  std::string error = load_error(b);
  EXPECT_NE(error.find("delegate 'sub0'"), std::string::npos) << error;
  EXPECT_NE(error.find("no-such-backend"), std::string::npos) << error;
}

}  // namespace
}  // namespace loom
