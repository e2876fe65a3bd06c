// Loading models: files, buffers, size bounds, and inputs that are not
// ONNX models at all.
#include <fstream>
#include <random>

#include "onnx_test_util.hpp"

namespace loom::onnx_io::testing {
namespace {

using ::testing::HasSubstr;

TEST(OnnxModel, SampleModelLoadsWithItsFolderAsBaseDir) {
  ScratchDir dir;
  auto expected = fx::write_sample_model(dir.path());
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  auto model = Model::load_file(dir.path() / "model.onnx");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ((*model)->base_dir(), dir.path());
  EXPECT_EQ((*model)->source(), (dir.path() / "model.onnx").string());
  EXPECT_EQ((*model)->proto().graph().initializer_size(), static_cast<int>(expected->size()));
}

TEST(OnnxModel, MissingFileIsNotFoundAndNamesThePath) {
  auto model = Model::load_file("/nonexistent/dir/model.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status(), IsError(StatusCode::kNotFound, "/nonexistent/dir/model.onnx"));
}

TEST(OnnxModel, DirectoryIsRefused) {
  ScratchDir dir;
  auto model = Model::load_file(dir.path());
  EXPECT_THAT(model.status(), IsError(StatusCode::kInvalidArgument, "not a regular file"));
}

TEST(OnnxModel, EmptyFileIsNotAModel) {
  ScratchDir dir;
  ASSERT_TRUE(fx::write_bytes(dir.path() / "empty.onnx", {}).ok());
  auto model = Model::load_file(dir.path() / "empty.onnx");
  EXPECT_THAT(model.status(), IsError(StatusCode::kInvalidArgument, "empty"));
}

TEST(OnnxModel, RandomBytesAreNotAModel) {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::byte> bytes(1 + rng() % 512);
    for (auto& b : bytes) b = static_cast<std::byte>(rng());
    auto model = Model::parse(bytes, {}, "random");
    EXPECT_FALSE(model.ok()) << "round " << round;
    if (!model.ok()) {
      EXPECT_THAT(model.status().message(), HasSubstr("random: not an ONNX model"));
    }
  }
}

TEST(OnnxModel, TextFileIsNotAModel) {
  std::string text = "ir_version: 8\ngraph { name: \"g\" }\n";
  auto model = Model::parse(std::as_bytes(std::span(text)), {}, "model.txt");
  EXPECT_THAT(model.status(), IsError(StatusCode::kInvalidArgument, "not an ONNX model"));
}

TEST(OnnxModel, EveryTruncationFailsOrParsesWithoutCrashing) {
  auto proto = fx::empty_model();
  std::vector<float> w(8, 1.0f);
  fx::set_raw(fx::add_initializer(proto, "w", TP::FLOAT, {8}), fx::bytes_of(w));
  auto bytes = fx::serialize(proto);
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto model = Model::parse(std::span(bytes).first(n), {}, "cut");
    if (model.ok()) (void)read_initializers(**model);
  }
  auto cut = Model::parse(std::span(bytes).first(bytes.size() - 1), {}, "cut");
  EXPECT_THAT(cut.status(), IsError(StatusCode::kInvalidArgument, "not a valid ModelProto"));
}

TEST(OnnxModel, MissingIrVersionOrGraphIsRefused) {
  auto no_version = fx::empty_model();
  no_version.clear_ir_version();
  auto bytes = fx::serialize(no_version);
  EXPECT_THAT(Model::parse(bytes).status(), IsError(StatusCode::kInvalidArgument, "ir_version"));

  auto no_graph = fx::empty_model();
  no_graph.clear_graph();
  bytes = fx::serialize(no_graph);
  EXPECT_THAT(Model::parse(bytes).status(), IsError(StatusCode::kInvalidArgument, "no graph"));
}

TEST(OnnxModel, SizeBoundIsEnforcedBeforeReading) {
  ScratchDir dir;
  auto expected = fx::write_sample_model(dir.path());
  ASSERT_TRUE(expected.ok());
  LoadOptions small{.max_model_bytes = 16};
  auto model = Model::load_file(dir.path() / "model.onnx", small);
  EXPECT_THAT(model.status(), IsError(StatusCode::kResourceExhausted, "16-byte limit"));
}

TEST(OnnxModel, DtypeMappingCoversLoomTypesAndRefusesOthers) {
  EXPECT_EQ(*dtype_from_onnx(TP::FLOAT), DType::kF32);
  EXPECT_EQ(*dtype_from_onnx(TP::FLOAT16), DType::kF16);
  EXPECT_EQ(*dtype_from_onnx(TP::BFLOAT16), DType::kBF16);
  EXPECT_EQ(*dtype_from_onnx(TP::DOUBLE), DType::kF64);
  EXPECT_EQ(*dtype_from_onnx(TP::INT8), DType::kI8);
  EXPECT_EQ(*dtype_from_onnx(TP::INT16), DType::kI16);
  EXPECT_EQ(*dtype_from_onnx(TP::INT32), DType::kI32);
  EXPECT_EQ(*dtype_from_onnx(TP::INT64), DType::kI64);
  EXPECT_EQ(*dtype_from_onnx(TP::UINT8), DType::kU8);
  EXPECT_EQ(*dtype_from_onnx(TP::UINT16), DType::kU16);
  EXPECT_EQ(*dtype_from_onnx(TP::UINT32), DType::kU32);
  EXPECT_EQ(*dtype_from_onnx(TP::UINT64), DType::kU64);
  EXPECT_EQ(*dtype_from_onnx(TP::BOOL), DType::kBool);
  EXPECT_THAT(dtype_from_onnx(TP::STRING).status(), IsError(StatusCode::kUnimplemented, "string"));
  EXPECT_THAT(dtype_from_onnx(TP::COMPLEX64).status(),
              IsError(StatusCode::kUnimplemented, "complex64"));
  EXPECT_THAT(dtype_from_onnx(0).status(), IsError(StatusCode::kInvalidArgument, "undefined"));
  EXPECT_THAT(dtype_from_onnx(99).status(), IsError(StatusCode::kUnimplemented, "99"));
  EXPECT_THAT(dtype_from_onnx(-3).status(), IsError(StatusCode::kUnimplemented, "-3"));
}

}  // namespace
}  // namespace loom::onnx_io::testing
