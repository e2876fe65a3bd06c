// The writer refuses a ProgramDef whose indices or ranges are wrong, naming
// the table, the item and the field, and writes nothing.
#include <gtest/gtest.h>

#include "container_test_support.hpp"

namespace loom {
namespace {

using testing::fails_with;

// Both write paths must refuse with the same error; the file path must not
// leave a file behind.
::testing::AssertionResult writer_refuses(const ProgramWriter& writer, std::string_view part) {
  auto buffer = writer.write_buffer();
  auto result = fails_with(buffer, StatusCode::kInvalidArgument, part);
  if (!result) return result;
  testing::TempPath path("refused.loom");
  result = fails_with(writer.write_file(path.path()), StatusCode::kInvalidArgument, part);
  if (!result) return result;
  if (std::filesystem::exists(path.path())) {
    return ::testing::AssertionFailure() << "a refused write left " << path.path();
  }
  return ::testing::AssertionSuccess();
}

TEST(ProgramWriterValidation, SmallProgramIsValid) {
  auto file = testing::make_small_program().write_buffer();
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_TRUE(ProgramReader::open_buffer(*file).ok());
}

TEST(ProgramWriterValidation, ArtifactContentSegmentOutOfRange) {
  ProgramWriter w = testing::make_small_program();
  w.program().artifacts[1].content_segment = 5;
  EXPECT_TRUE(writer_refuses(
      w, "artifacts[1].content_segment: segment 5 out of range (file has 3 segments)"));
  w.program().artifacts[1].content_segment = -2;
  EXPECT_TRUE(writer_refuses(w, "artifacts[1].content_segment: segment -2 out of range"));
}

TEST(ProgramWriterValidation, DelegateVariantOutOfRange) {
  ProgramWriter w = testing::make_small_program();
  w.program().delegates[0].variants = {0, 3};
  EXPECT_TRUE(writer_refuses(
      w, "delegates[0].variants[1]: artifact 3 out of range (program has 3 artifacts)"));
}

TEST(ProgramWriterValidation, FunctionInputOrOutputOutOfRange) {
  ProgramWriter w = testing::make_small_program();
  w.program().functions[0].inputs = {0, 3};
  EXPECT_TRUE(writer_refuses(
      w, "functions[0].inputs[1]: value 3 out of range (function 'main' has 3 values)"));
  w = testing::make_small_program();
  w.program().functions[0].outputs = {9};
  EXPECT_TRUE(writer_refuses(w, "functions[0].outputs[0]: value 9 out of range"));
}

TEST(ProgramWriterValidation, InstructionValueOutOfRange) {
  ProgramWriter w = testing::make_small_program();
  w.program().functions[0].instructions[0].outputs = {1, 7};
  EXPECT_TRUE(writer_refuses(w, "functions[0].instructions[0].outputs[1]: value 7 out of range"));
  w = testing::make_small_program();
  w.program().functions[0].instructions[0].inputs = {4};
  EXPECT_TRUE(writer_refuses(w, "functions[0].instructions[0].inputs[0]: value 4 out of range"));
}

TEST(ProgramWriterValidation, DelegateCallNeedsADelegate) {
  ProgramWriter w = testing::make_small_program();
  w.program().functions[0].instructions[0].op = OpCode::kDelegateCall;
  EXPECT_TRUE(writer_refuses(
      w, "functions[0].instructions[0].delegate: delegate -1 out of range (program has 1 "
         "delegates)"));
  w.program().functions[0].instructions[0].delegate = 1;
  EXPECT_TRUE(writer_refuses(w, "functions[0].instructions[0].delegate: delegate 1 out of range"));
}

TEST(ProgramWriterValidation, ValueParameterOutOfRange) {
  ProgramWriter w = testing::make_small_program();
  w.program().functions[0].values[2].parameter = 1;
  EXPECT_TRUE(writer_refuses(
      w, "functions[0].values[2].parameter: parameter 1 out of range (program has 1 "
         "parameters)"));
}

TEST(ProgramWriterValidation, DimOrderMustBeAPermutation) {
  ProgramWriter w = testing::make_small_program();
  w.program().functions[0].values[0].shape = {2, 3};
  w.program().functions[0].values[0].dim_order = {1, 1};
  EXPECT_TRUE(writer_refuses(w, "functions[0].values[0].dim_order[1]: 1 is not a permutation"));
  w.program().functions[0].values[0].dim_order = {0};
  EXPECT_TRUE(writer_refuses(w, "functions[0].values[0].dim_order: 1 entries for a rank-2 shape"));
}

TEST(ProgramWriterValidation, UnknownEnumValues) {
  ProgramWriter w = testing::make_small_program();
  w.program().functions[0].values[0].dtype = static_cast<DType>(99);
  EXPECT_TRUE(writer_refuses(w, "functions[0].values[0].dtype: unknown dtype 99"));
  w = testing::make_small_program();
  w.program().functions[0].values[0].kind = static_cast<ValueKind>(7);
  EXPECT_TRUE(writer_refuses(w, "functions[0].values[0].kind: unknown value kind 7"));
  // A sequence (format 1.6) only in a staged function.
  w = testing::make_small_program();
  w.program().functions[0].values[0].kind = ValueKind::kSequence;
  EXPECT_TRUE(writer_refuses(w, "functions[0].values[0]: a sequence, which only a staged function's value may be"));
  w = testing::make_small_program();
  w.program().functions[0].instructions[0].op = static_cast<OpCode>(6);
  EXPECT_TRUE(writer_refuses(w, "functions[0].instructions[0].op: unknown opcode 6"));
  w = testing::make_small_program();
  AttributeDef bad;
  bad.name = "x";
  bad.kind = static_cast<AttributeKind>(7);
  w.program().functions[0].instructions[0].attributes = {bad};
  EXPECT_TRUE(writer_refuses(w, "instructions[0].attributes[0].kind: unknown attribute kind 7"));
  w = testing::make_small_program();
  AttributeDef tensor;
  tensor.name = "value";
  tensor.kind = AttributeKind::kTensor;
  tensor.t_dtype = DType::kF32;
  tensor.t_shape = {2};
  tensor.t_data.resize(4);
  w.program().functions[0].instructions[0].attributes = {tensor};
  EXPECT_TRUE(writer_refuses(w, "instructions[0].attributes[0].t_data: 4 bytes, but f32 [2] needs 2 elements"));
  w = testing::make_small_program();
  w.program().functions[0].instructions[0].opset = -3;
  EXPECT_TRUE(writer_refuses(w, "instructions[0].opset: negative opset -3"));
  w = testing::make_small_program();
  w.program().parameters[0].dtype = static_cast<DType>(14);
  EXPECT_TRUE(writer_refuses(w, "parameters[0].dtype: unknown dtype 14"));
}

TEST(ProgramWriterValidation, ParameterOutsideItsSegment) {
  ProgramWriter w = testing::make_small_program();
  w.program().parameters[0].offset = 90;
  EXPECT_TRUE(writer_refuses(
      w, "parameters[0] ('w'): offset 90 + size 20 runs past segment 0 (100 bytes)"));
  w.program().parameters[0].offset = UINT64_MAX - 4;
  EXPECT_TRUE(writer_refuses(w, "parameters[0] ('w'): offset 18446744073709551611 + size 20"));
}

TEST(ProgramWriterValidation, InlineParameterNeedsASegment) {
  ProgramWriter w = testing::make_small_program();
  w.program().parameters[0].segment = -1;
  EXPECT_TRUE(writer_refuses(w, "parameters[0].segment: segment -1 out of range"));
  w.program().parameters[0].segment = 3;
  EXPECT_TRUE(writer_refuses(w, "parameters[0].segment: segment 3 out of range"));
}

TEST(ProgramWriterValidation, ExternalParameterNeedsNoSegment) {
  ProgramWriter w = testing::make_small_program();
  w.program().parameters[0].segment = -1;
  w.program().parameters[0].offset = 0;
  w.program().parameters[0].archive = "weights.irpa";
  EXPECT_TRUE(w.write_buffer().ok());
  w.program().parameters[0].offset = 16;  // an inline field on an external parameter
  EXPECT_TRUE(writer_refuses(w, "parameters[0] ('w'): external (archive 'weights.irpa') and "
                                "inline (segment -1, offset 16) at once"));
}

TEST(ProgramWriterValidation, WrongParameterChecksum) {
  ProgramWriter w = testing::make_small_program();
  w.program().parameters[0].checksum = 1234;
  EXPECT_TRUE(writer_refuses(w, "parameters[0] ('w').checksum: recorded 0x4d2"));
}

TEST(ProgramWriterValidation, MemorySlotOutsideArena) {
  ProgramWriter w = testing::make_small_program();
  w.program().functions[0].memory_plan.slots[0].offset = 240;
  EXPECT_TRUE(writer_refuses(
      w, "functions[0].memory_plan.slots[0]: offset 240 + size 20 runs past the arena (256 "
         "bytes)"));
  w.program().functions[0].memory_plan.slots[0] = {1, UINT64_MAX, 2};
  EXPECT_TRUE(writer_refuses(w, "functions[0].memory_plan.slots[0]: offset"));
  w.program().functions[0].memory_plan.slots[0] = {3, 0, 4};
  EXPECT_TRUE(writer_refuses(w, "functions[0].memory_plan.slots[0].value: value 3 out of range"));
}

TEST(ProgramWriterValidation, MemoryPlanAlignmentIsAPowerOfTwo) {
  ProgramWriter w = testing::make_small_program();
  w.program().functions[0].memory_plan.alignment = 48;
  EXPECT_TRUE(writer_refuses(w, "functions[0].memory_plan.alignment: 48 is not a power of two"));
}

TEST(ProgramWriterValidation, SegmentAlignmentIsAPowerOfTwo) {
  ProgramWriter w = testing::make_small_program();
  w.add_segment(testing::pattern(10, 1), 3000);
  EXPECT_TRUE(writer_refuses(w, "segment 3: alignment 3000 is not a power of two"));
}

TEST(ProgramWriterValidation, SegmentsPastTwoToTheSixtyFourAreRefused) {
  ProgramWriter w;
  w.add_zero_segment(UINT64_MAX - 100);
  EXPECT_TRUE(writer_refuses(w, "does not fit in 64-bit file offsets"));
}

TEST(ProgramWriterValidation, UnwritablePathIsReported) {
  ProgramWriter w = testing::make_small_program();
  EXPECT_TRUE(fails_with(w.write_file("/nonexistent/dir/out.loom"), StatusCode::kNotFound,
                         "cannot create /nonexistent/dir/out.loom"));
}

TEST(ProgramWriterValidation, ArenaLargerThanItsSlotsJustifyIsRefused) {
  ProgramWriter w = testing::make_small_program();
  // Slots end at 84: a page is allowed, not more.
  w.program().functions[0].memory_plan.arena_size = 4096;
  EXPECT_TRUE(w.write_buffer().ok());
  w.program().functions[0].memory_plan.arena_size = uint64_t{8} << 30;
  EXPECT_TRUE(writer_refuses(w, "functions[0].memory_plan.arena_size: 8589934592 bytes, but its "
                                "slots end at 84 (at most 4096 bytes are allowed)"));
  w.program().functions[0].memory_plan.arena_size = 4097;
  EXPECT_TRUE(writer_refuses(w, "functions[0].memory_plan.arena_size: 4097 bytes"));
  w.program().functions[0].memory_plan.slots.clear();
  w.program().functions[0].memory_plan.arena_size = 64;
  EXPECT_TRUE(writer_refuses(w, "but its slots end at 0 (at most 0 bytes"));
}

TEST(ProgramWriterValidation, DuplicateNamesAreRefused) {
  {
    ProgramWriter w = testing::make_small_program();
    w.program().functions.push_back(w.program().functions[0]);
    EXPECT_TRUE(writer_refuses(
        w, "functions[1].name: 'main' is already the name of functions[0]"));
  }
  {
    ProgramWriter w = testing::make_small_program();
    w.program().delegates.push_back(w.program().delegates[0]);
    EXPECT_TRUE(writer_refuses(w, "delegates[1].name: 'sub' is already the name of delegates[0]"));
  }
  {
    ProgramWriter w = testing::make_small_program();
    w.program().parameters.push_back(w.program().parameters[0]);
    EXPECT_TRUE(writer_refuses(w, "parameters[1].name: 'w' is already the name of parameters[0]"));
  }
  {
    ProgramWriter w = testing::make_small_program();
    auto& slots = w.program().functions[0].memory_plan.slots;
    slots.push_back({1, 128, 20});
    EXPECT_TRUE(writer_refuses(
        w, "functions[0].memory_plan.slots[1].value: value 1 already has slot 0"));
  }
}

// An open-shape function "open": x[?(batch), 4] -> y[?(batch), 4], its graph
// in a "loom.graph" artifact (the bytes do not matter to the container).
ProgramWriter with_open_function() {
  ProgramWriter w = testing::make_small_program();
  ProgramDef& p = w.program();
  ArtifactDef graph;
  graph.loader_key = std::string(kGraphLoaderKey);
  graph.content_segment = 0;
  p.artifacts.push_back(graph);
  FunctionDef f;
  f.name = "open";
  ValueDef x;
  x.name = "x";
  x.shape = {-1, 4};
  x.dim_symbols = {"batch", ""};
  x.dim_min = {1, 0};
  x.dim_max = {8, 0};
  ValueDef y = x;
  y.name = "y";
  y.dim_min.clear();
  y.dim_max.clear();
  f.values = {x, y};
  f.inputs = {0};
  f.outputs = {1};
  f.graph_artifact = static_cast<int32_t>(p.artifacts.size() - 1);
  p.functions.push_back(f);
  return w;
}

TEST(ProgramWriterValidation, OpenShapeFunctionRoundTripsAndSetsItsFeatureBit) {
  ProgramWriter w = with_open_function();
  auto file = w.write_buffer();
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto reader = ProgramReader::open_buffer(*file);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_NE((*reader)->head().required_features & kRequiredFeatureOpenShapes, 0u);
  EXPECT_TRUE((*reader)->program() == w.program());
}

// Format 1.4: an open-shape function with instructions of its own (a native
// open-shape program) sets required feature bit 2 as well, so that a 1.3
// reader refuses it; one without keeps to bit 1.
TEST(ProgramWriterValidation, NativeOpenFunctionSetsTheOpenExecutablesBit) {
  ProgramWriter plain = with_open_function();
  auto plain_file = plain.write_buffer();
  ASSERT_TRUE(plain_file.ok()) << plain_file.status().to_string();
  auto plain_reader = ProgramReader::open_buffer(*plain_file);
  ASSERT_TRUE(plain_reader.ok());
  EXPECT_EQ((*plain_reader)->head().required_features & kRequiredFeatureOpenExecutables, 0u);

  ProgramWriter w = with_open_function();
  FunctionDef& f = w.program().functions.back();
  InstructionDef relu;
  relu.op = OpCode::kKernelCall;
  relu.kernel = "Relu";
  relu.inputs = {0};
  relu.outputs = {1};
  f.instructions.push_back(relu);
  auto file = w.write_buffer();
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto reader = ProgramReader::open_buffer(*file);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_NE((*reader)->head().required_features & kRequiredFeatureOpenExecutables, 0u);
  EXPECT_NE((*reader)->head().required_features & kRequiredFeatureOpenShapes, 0u);
  EXPECT_EQ((*reader)->program().functions.back().instructions.size(), 1u);
}

TEST(ProgramWriterValidation, OpenShapeFieldsAreChecked) {
  ProgramWriter w = with_open_function();
  const size_t f = w.program().functions.size() - 1;
  const std::string at = "functions[" + std::to_string(f) + "]";
  w.program().functions[f].graph_artifact = 99;
  EXPECT_TRUE(writer_refuses(w, at + ".graph_artifact: artifact 99 out of range"));
  w = with_open_function();
  w.program().functions[f].graph_artifact = 0;
  EXPECT_TRUE(writer_refuses(w, at + ".graph_artifact: artifact 0 has loader key"));
  w = with_open_function();
  w.program().functions[f].memory_plan.arena_size = 64;
  EXPECT_TRUE(writer_refuses(w, "an open-shape function (graph_artifact 3) has no memory plan of its own"));
  w = with_open_function();
  w.program().functions[f].values[0].dim_symbols = {"batch"};
  EXPECT_TRUE(writer_refuses(w, at + ".values[0].dim_symbols: 1 entries for a rank-2 shape"));
  w = with_open_function();
  w.program().functions[f].values[0].dim_symbols = {"batch", "width"};
  EXPECT_TRUE(writer_refuses(w, at + ".values[0].dim_symbols[1]: symbol 'width' on a fixed dimension (4)"));
  w = with_open_function();
  w.program().functions[f].values[0].dim_min = {9, 0};
  EXPECT_TRUE(writer_refuses(w, at + ".values[0].dim_min/dim_max[0]: bounds 9..8 are not a range"));
  w = with_open_function();
  w.program().functions[f].values[0].shape = {-2, 4};
  EXPECT_TRUE(writer_refuses(w, at + ".values[0].shape[0]: -2 is neither a size nor -1 (open)"));
  // An ordinary function has no open dimension.
  w = with_open_function();
  w.program().functions[f].graph_artifact = -1;
  EXPECT_TRUE(writer_refuses(w, at + ".values[0].shape[0]: open (-1), but the function has no "
                                "graph_artifact to bind its shapes"));
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// A staged function (format 1.5) "outer" that calls main, appended to the
// small program.
ProgramWriter with_staged_function() {
  ProgramWriter w = testing::make_small_program();
  FunctionDef f;
  f.name = "outer";
  f.staged = true;
  ValueDef a;
  a.name = "a";
  a.dtype = DType::kInvalid;
  a.unranked = true;
  ValueDef b = a;
  b.name = "b";
  f.values = {a, b};
  f.inputs = {0};
  f.outputs = {1};
  InstructionDef call;
  call.op = OpCode::kCall;
  call.functions = {0};
  call.inputs = {0};
  call.outputs = {1};
  f.instructions.push_back(call);
  w.program().functions.push_back(std::move(f));
  return w;
}

TEST(ProgramWriterValidation, StagedFunctionsRoundTripAndSetTheirFeatureBit) {
  ProgramWriter w = with_staged_function();
  InstructionDef loop;
  loop.op = OpCode::kControl;
  loop.kernel = "Loop";
  loop.functions = {0};
  loop.captures = 1;
  loop.inputs = {kAbsentValue, 0, 0};
  loop.outputs = {1};
  w.program().functions[1].instructions.push_back(loop);
  auto file = w.write_buffer();
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto reader = ProgramReader::open_buffer(*file);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_NE((*reader)->head().required_features & kRequiredFeatureStaged, 0u);
  EXPECT_EQ((*reader)->program().functions[1], w.program().functions[1]);
  // Without staged functions the bit stays off.
  auto plain = testing::make_small_program().write_buffer().value();
  EXPECT_EQ(ProgramReader::open_buffer(plain).value()->head().required_features & kRequiredFeatureStaged, 0u);
}

TEST(ProgramWriterValidation, MalformedStagedInstructionsAreRefused) {
  ProgramWriter w = with_staged_function();
  w.program().functions[1].instructions[0].functions = {7};
  EXPECT_TRUE(writer_refuses(w, "functions[1].instructions[0].functions[0]: function 7 out of range"));
  w = with_staged_function();
  w.program().functions[1].instructions[0].functions = {0, 0};
  EXPECT_TRUE(writer_refuses(w, "a call names 1 function, this one 2"));
  w = with_staged_function();
  auto& ins = w.program().functions[1].instructions[0];
  ins.op = OpCode::kControl;
  ins.kernel = "While";
  EXPECT_TRUE(writer_refuses(w, "'While' is not a control-flow operator (If, Loop, Scan or SequenceMap)"));
  ins.kernel = "If";
  EXPECT_TRUE(writer_refuses(w, "If has 2 bodies, the instruction names 1"));
  ins.kernel = "Loop";
  ins.captures = 5;
  EXPECT_TRUE(writer_refuses(w, "5 captures, but only 1 inputs"));
  w = with_staged_function();
  w.program().functions[1].staged = false;
  EXPECT_TRUE(writer_refuses(w, "functions[1].instructions[0]: a call or control instruction in a function that is "
                                "not staged"));
  w = with_staged_function();
  w.program().functions[1].values[0].shape = {2};
  EXPECT_TRUE(writer_refuses(w, "functions[1].values[0]: unranked, but has a shape"));
  w = with_staged_function();
  w.program().functions[0].values[0].unranked = true;
  w.program().functions[0].values[0].shape.clear();
  EXPECT_TRUE(writer_refuses(w, "only a staged or open-shape function's value may be"));
  // A function that calls itself (through another) would never end.
  w = with_staged_function();
  w.program().functions[1].instructions[0].functions = {1};
  EXPECT_TRUE(writer_refuses(w, "functions[1] ('outer') calls function 1 ('outer'), which is running already"));
}

}  // namespace
}  // namespace loom
