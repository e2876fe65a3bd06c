// Sizes a program declares for a session's buffers (function inputs and
// outputs, the arena) are checked against LoadOptions::max_tensor_bytes
// before anything is allocated: a small file cannot claim the machine's
// memory, and a refusal is a RESOURCE_EXHAUSTED status naming the tensor and
// both sizes, never an exception. No test here allocates what it refuses.
#include <gtest/gtest.h>

#include <array>
#include <span>

#include "program_builder/program_builder.hpp"
#include "loom/runtime.hpp"

namespace loom {
namespace {

class SessionLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    RuntimeOptions options;
    options.use_environment = false;
    options.use_default_folder = false;  // the reference kernels only
    options.use_user_folder = false;
    runtime_ = Runtime::create(options).value();
  }

  // x -> Relu -> t1 -> Relu -> t2 -> Relu -> y, every tensor f32 `shape`:
  // t1 and t2 are alive at once, so the arena holds both.
  std::vector<std::byte> relu_chain(Shape shape) {
    tools::ProgramBuilder b;
    auto f = b.add_function("main");
    uint32_t x = f.input("x", DType::kF32, shape);
    uint32_t t1 = f.value("t1", DType::kF32, shape);
    uint32_t t2 = f.value("t2", DType::kF32, shape);
    uint32_t y = f.value("y", DType::kF32, shape);
    f.kernel_call("Relu", {x}, {t1});
    f.kernel_call("Relu", {t1}, {t2});
    f.kernel_call("Relu", {t2}, {y});
    f.output(y);
    auto writer = b.finish();
    EXPECT_TRUE(writer.ok()) << writer.status().to_string();
    arena_size_ = writer->program().functions[0].memory_plan.arena_size;
    auto bytes = writer->write_buffer();
    EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
    return bytes.ok() ? *bytes : std::vector<std::byte>{};
  }

  // The status of creating a session of "main" with `cap`.
  Status session_status(std::span<const std::byte> bytes, uint64_t cap) {
    LoadOptions options;
    options.max_tensor_bytes = cap;
    auto program = runtime_->load_program(bytes, options);
    if (!program.ok()) return program.status();
    auto session = (*program)->create_session("main");
    return session.ok() ? Status() : session.status();
  }

  std::unique_ptr<Runtime> runtime_;
  uint64_t arena_size_ = 0;
};

TEST_F(SessionLimits, HugeDeclaredInputIsRefusedBeforeAllocationWithTheDefaultCap) {
  // 2^40 f32 elements (4 TiB) from a file of a few hundred bytes.
  auto bytes = relu_chain({int64_t{1} << 20, int64_t{1} << 20});
  Status status = session_status(bytes, 0);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted) << status.to_string();
  EXPECT_NE(status.message().find("input 'x' (f32 [1048576, 1048576]) of function 'main' takes "
                                  "4398046511104 bytes, more than the limit of "),
            std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("(LoadOptions::max_tensor_bytes; loom run: --max-tensor-bytes)"),
            std::string::npos)
      << status.message();
  EXPECT_EQ(status.message().find('\n'), std::string::npos);
}

TEST_F(SessionLimits, InputOverTheCapIsRefusedAndUnderItRuns) {
  auto bytes = relu_chain({256});  // 1024 bytes per tensor
  Status status = session_status(bytes, 1023);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(),
            "input 'x' (f32 [256]) of function 'main' takes 1024 bytes, more than the limit of "
            "1023 bytes per tensor (LoadOptions::max_tensor_bytes; loom run: "
            "--max-tensor-bytes)");
  EXPECT_TRUE(session_status(bytes, uint64_t{1} << 20).ok());
}

TEST_F(SessionLimits, OutputOverTheCapIsNamed) {
  // A 16-byte input expanded to a 1024-byte output.
  const std::array<int64_t, 2> dims = {4, 64};
  Tensor shape = Tensor::copy_of(DType::kI64, {2}, std::as_bytes(std::span(dims))).value();
  tools::ProgramBuilder b;
  uint32_t shape_parameter = b.add_parameter("shape", shape);
  auto f = b.add_function("main");
  uint32_t x = f.input("x", DType::kF32, {4, 1});
  uint32_t y = f.value("y", DType::kF32, {4, 64});
  f.kernel_call("Expand", {x, f.constant(shape_parameter)}, {y});
  f.output(y);
  auto writer = b.finish();
  ASSERT_TRUE(writer.ok()) << writer.status().to_string();
  auto bytes = writer->write_buffer().value();
  Status status = session_status(bytes, 512);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted) << status.to_string();
  EXPECT_NE(status.message().find("output 'y' (f32 [4, 64]) of function 'main' takes 1024 "
                                  "bytes, more than the limit of 512 bytes"),
            std::string::npos)
      << status.message();
}

TEST_F(SessionLimits, ArenaOverTheCapIsRefusedThoughEachTensorFits) {
  auto bytes = relu_chain({256});
  ASSERT_GT(arena_size_, 1024u);  // t1 and t2 side by side
  Status status = session_status(bytes, arena_size_ - 1);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message().rfind("the arena of function 'main' takes " +
                                       std::to_string(arena_size_) + " bytes, more than the limit",
                                   0),
            0u)
      << status.message();
  EXPECT_TRUE(session_status(bytes, arena_size_).ok());
}

}  // namespace
}  // namespace loom
