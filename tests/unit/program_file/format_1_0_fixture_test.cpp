// A program file of format 1.0, frozen: tests/fixtures/programs/format_1_0.loom
// was written once by the ProgramBuilder/ProgramWriter of commit 0e3c577,
// before format 1.1 existed (see tests/fixtures/README.md), so today's
// reader is checked against really old bytes, not today's writer with its
// minor field patched.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "loom/program.hpp"

namespace loom::testing {
namespace {

std::vector<std::byte> read_fixture() {
  std::ifstream in(std::string(LOOM_FIXTURE_DIR) + "/programs/format_1_0.loom", std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

TEST(Format10Fixture, OpensWithItsHeadAndProducer) {
  const std::vector<std::byte> bytes = read_fixture();
  ASSERT_FALSE(bytes.empty()) << "fixture not found under " << LOOM_FIXTURE_DIR;
  auto reader = ProgramReader::open_buffer(bytes);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ((*reader)->head().major, 1);
  EXPECT_EQ((*reader)->head().minor, 0);
  EXPECT_EQ((*reader)->head().required_features, 0u);
  EXPECT_EQ((*reader)->head().file_size, bytes.size());
  EXPECT_EQ((*reader)->program().producer, "loom format-1.0 fixture (writer of 0e3c577)");
}

TEST(Format10Fixture, FunctionsInstructionsAndAttributesAreRead) {
  const std::vector<std::byte> bytes = read_fixture();  // the reader borrows them
  auto reader = ProgramReader::open_buffer(bytes);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  const ProgramDef& p = (*reader)->program();
  ASSERT_EQ(p.functions.size(), 2u);
  const FunctionDef& main = p.functions[0];
  EXPECT_EQ(main.name, "main");
  EXPECT_EQ(p.functions[1].name, "square");
  std::vector<std::string> kernels;
  for (const InstructionDef& ins : main.instructions) {
    if (ins.op != OpCode::kKernelCall) continue;
    kernels.push_back(ins.kernel);
    EXPECT_EQ(ins.opset, 0) << ins.kernel << ": 1.0 files carry no opsets";
  }
  EXPECT_EQ(kernels, (std::vector<std::string>{"Add", "Relu", "Softmax"}));
  const InstructionDef* softmax = nullptr;
  for (const InstructionDef& ins : main.instructions) {
    if (ins.kernel == "Softmax") softmax = &ins;
  }
  ASSERT_NE(softmax, nullptr);
  ASSERT_EQ(softmax->attributes.size(), 1u);
  EXPECT_EQ(softmax->attributes[0].name, "axis");
  EXPECT_EQ(softmax->attributes[0].kind, AttributeKind::kInt);
  EXPECT_EQ(softmax->attributes[0].i, 1);
  ASSERT_EQ(main.inputs.size(), 1u);
  ASSERT_EQ(main.outputs.size(), 2u);
  EXPECT_EQ(main.values[main.inputs[0]].name, "x");
  EXPECT_EQ(main.values[main.inputs[0]].shape, (Shape{2, 3}));
  EXPECT_EQ(main.values[main.outputs[0]].name, "y");
  EXPECT_EQ(main.values[main.outputs[1]].name, "r");
  ASSERT_EQ(p.functions[1].instructions.size(), 1u);
  EXPECT_EQ(p.functions[1].instructions[0].kernel, "Mul");
}

TEST(Format10Fixture, InlineParameterBytesAreIntact) {
  const std::vector<std::byte> bytes = read_fixture();  // the reader borrows them
  auto reader = ProgramReader::open_buffer(bytes);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  const ProgramDef& p = (*reader)->program();
  ASSERT_EQ(p.parameters.size(), 1u);
  EXPECT_EQ(p.parameters[0].name, "w");
  EXPECT_EQ(p.parameters[0].shape, (Shape{2, 3}));
  auto w_bytes = (*reader)->parameter_bytes(0);
  ASSERT_TRUE(w_bytes.ok()) << w_bytes.status().to_string();
  ASSERT_EQ(w_bytes->size(), 6 * sizeof(float));
  float w[6];
  std::memcpy(w, w_bytes->data(), sizeof w);
  EXPECT_EQ(std::vector<float>(w, w + 6), (std::vector<float>{0.5f, -1, 2, -3, 0, 1}));
}

}  // namespace
}  // namespace loom::testing
