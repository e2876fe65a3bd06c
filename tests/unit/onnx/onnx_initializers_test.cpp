// loom/onnx_initializers.hpp, the public face of the initializer reader
// (what `loom params create --from-onnx` uses): the same values as
// read_initializers(), views that survive a move, errors that name the file.
#include "loom/onnx_initializers.hpp"

#include <cstring>

#include "onnx_test_util.hpp"

namespace loom::onnx_io::testing {
namespace {

using ::testing::HasSubstr;

TEST(OnnxInitializers, SampleModelMatchesWhatWasWrittenAndSurvivesAMove) {
  ScratchDir dir;
  auto expected = fx::write_sample_model(dir.path());
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  auto read = OnnxInitializers::read_file(dir.path() / "model.onnx");
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  const void* first_bytes = read->entries()[0].bytes.data();
  OnnxInitializers inits = std::move(read).value();  // the views move with it
  ASSERT_EQ(inits.entries().size(), expected->size());
  EXPECT_EQ(static_cast<const void*>(inits.entries()[0].bytes.data()), first_bytes);
  for (size_t i = 0; i < inits.entries().size(); ++i) {
    const OnnxInitializer& got = inits.entries()[i];
    const auto& [name, want] = (*expected)[i];
    SCOPED_TRACE(name);
    EXPECT_EQ(got.name, name);
    EXPECT_EQ(got.dtype, want.dtype());
    EXPECT_EQ(got.shape, want.shape());
    ASSERT_EQ(got.bytes.size(), want.byte_size());
    EXPECT_EQ(std::memcmp(got.bytes.data(), want.bytes().data(), want.byte_size()), 0);
  }
}

TEST(OnnxInitializers, ModelWithoutInitializersGivesNoEntries) {
  ScratchDir dir;
  ASSERT_TRUE(fx::write_model(fx::empty_model(), dir.path() / "empty.onnx").ok());
  auto inits = OnnxInitializers::read_file(dir.path() / "empty.onnx");
  ASSERT_TRUE(inits.ok()) << inits.status().to_string();
  EXPECT_TRUE(inits->entries().empty());
}

TEST(OnnxInitializers, ErrorsNameTheFile) {
  ScratchDir dir;
  const auto missing = dir.path() / "absent.onnx";
  auto none = OnnxInitializers::read_file(missing);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr(missing.string()));

  auto proto = fx::empty_model();
  fx::add_initializer(proto, "w", TP::FLOAT, {0});
  fx::add_initializer(proto, "w", TP::FLOAT, {0});
  const auto twice = dir.path() / "twice.onnx";
  ASSERT_TRUE(fx::write_model(proto, twice).ok());
  auto dup = OnnxInitializers::read_file(twice);
  EXPECT_THAT(dup.status(), IsError(StatusCode::kInvalidArgument, "'w' is used twice"));
  EXPECT_THAT(dup.status().message(), HasSubstr(twice.string()));
}

}  // namespace
}  // namespace loom::onnx_io::testing
