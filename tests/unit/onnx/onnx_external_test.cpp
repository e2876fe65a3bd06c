// External data: a byte range of a file beside the model. Paths may not
// leave the model's folder, and ranges are checked against the file.
#include <unistd.h>

#include "onnx_test_util.hpp"

namespace loom::onnx_io::testing {
namespace {

namespace fs = std::filesystem;

// A model whose one initializer "w" (f32[4], 16 bytes) is external.
::onnx::ModelProto external_model(const std::string& location, std::optional<std::string> offset,
                                  std::optional<std::string> length) {
  auto proto = fx::empty_model();
  fx::set_external(fx::add_initializer(proto, "w", TP::FLOAT, {4}), location, std::move(offset),
                   std::move(length));
  return proto;
}

class OnnxExternal : public ::testing::Test {
 protected:
  void SetUp() override {
    model_dir_ = dir_.path() / "model";
    fs::create_directories(model_dir_ / "sub");
    std::vector<float> v = {9, 1, 2, 3, 4, 9};  // the tensor is v[1..4], at offset 4
    ASSERT_TRUE(fx::write_bytes(model_dir_ / "sub" / "w.bin", fx::bytes_of(v)).ok());
    ASSERT_TRUE(fx::write_bytes(dir_.path() / "outside.bin", fx::bytes_of(v)).ok());
  }
  Status error_of(const ::onnx::ModelProto& proto) {
    return first_initializer_error(proto, model_dir_);
  }

  ScratchDir dir_;
  fs::path model_dir_;
};

TEST_F(OnnxExternal, RangeInASubfolderIsRead) {
  auto model = parse_or_die(external_model("sub/w.bin", "4", "16"), model_dir_);
  auto data = read_initializers(*model);
  ASSERT_TRUE(data.ok()) << data.status().to_string();
  std::vector<float> want = {1, 2, 3, 4};
  ASSERT_EQ((*data)[0].bytes().size(), 16u);
  EXPECT_EQ(std::memcmp((*data)[0].bytes().data(), want.data(), 16), 0);
  EXPECT_EQ((*data)[0].info().storage, Storage::kExternal);
}

TEST_F(OnnxExternal, MissingLengthMeansTheRestOfTheFile) {
  EXPECT_TRUE(error_of(external_model("sub/w.bin", "8", std::nullopt)).ok());
  EXPECT_THAT(error_of(external_model("sub/w.bin", std::nullopt, std::nullopt)),
              IsError(StatusCode::kInvalidArgument,
                      "the rest of the file, 24 bytes, does not match the tensor's 16 bytes"));
}

TEST_F(OnnxExternal, AbsolutePathIsRefused) {
  std::string abs = (dir_.path() / "outside.bin").string();
  EXPECT_THAT(error_of(external_model(abs, "4", "16")),
              IsError(StatusCode::kInvalidArgument, "is absolute"));
}

TEST_F(OnnxExternal, DotDotIsRefused) {
  EXPECT_THAT(error_of(external_model("../outside.bin", "4", "16")),
              IsError(StatusCode::kInvalidArgument, "tensor 'w': external_data location "
                                                    "'../outside.bin' contains '..'"));
  EXPECT_THAT(error_of(external_model("sub/../../outside.bin", "4", "16")),
              IsError(StatusCode::kInvalidArgument, "contains '..'"));
}

TEST_F(OnnxExternal, SymlinkLeavingTheFolderIsRefused) {
  fs::create_symlink(dir_.path() / "outside.bin", model_dir_ / "link.bin");
  EXPECT_THAT(error_of(external_model("link.bin", "4", "16")),
              IsError(StatusCode::kInvalidArgument, "leaves the model's folder"));
  fs::create_directory_symlink(dir_.path(), model_dir_ / "up");
  EXPECT_THAT(error_of(external_model("up/outside.bin", "4", "16")),
              IsError(StatusCode::kInvalidArgument, "leaves the model's folder"));
}

TEST_F(OnnxExternal, SymlinkInsideTheFolderIsFollowed) {
  fs::create_symlink(model_dir_ / "sub" / "w.bin", model_dir_ / "alias.bin");
  EXPECT_TRUE(error_of(external_model("alias.bin", "4", "16")).ok());
}

TEST_F(OnnxExternal, MissingFileIsNotFound) {
  EXPECT_THAT(error_of(external_model("nope.bin", "0", "16")),
              IsError(StatusCode::kNotFound, "'nope.bin'"));
}

TEST_F(OnnxExternal, FolderIsNotAFile) {
  EXPECT_THAT(error_of(external_model("sub", "0", "16")),
              IsError(StatusCode::kInvalidArgument, "not a regular file"));
}

TEST_F(OnnxExternal, RangesPastTheEndAreRefused) {
  EXPECT_THAT(error_of(external_model("sub/w.bin", "25", "16")),
              IsError(StatusCode::kOutOfRange, "offset 25 is past its end (24 bytes)"));
  EXPECT_THAT(error_of(external_model("sub/w.bin", "16", "16")),
              IsError(StatusCode::kOutOfRange, "runs past its end"));
  EXPECT_THAT(error_of(external_model("sub/w.bin", "8", "18446744073709551615")),
              IsError(StatusCode::kOutOfRange, "runs past its end"));
}

TEST_F(OnnxExternal, LengthOtherThanTheTensorsSizeIsRefused) {
  EXPECT_THAT(error_of(external_model("sub/w.bin", "0", "12")),
              IsError(StatusCode::kInvalidArgument, "length 12 bytes, does not match"));
}

TEST_F(OnnxExternal, MalformedKeysAreRefused) {
  EXPECT_THAT(error_of(external_model("sub/w.bin", "4x", "16")),
              IsError(StatusCode::kInvalidArgument, "'offset' is '4x'"));
  EXPECT_THAT(error_of(external_model("sub/w.bin", "-1", "16")),
              IsError(StatusCode::kInvalidArgument, "'offset' is '-1'"));
  EXPECT_THAT(error_of(external_model("sub/w.bin", "0", "")),
              IsError(StatusCode::kInvalidArgument, "'length' is ''"));
  EXPECT_THAT(error_of(external_model("sub/w.bin", "0", "99999999999999999999")),
              IsError(StatusCode::kInvalidArgument, "not a decimal number below 2^64"));
  EXPECT_THAT(error_of(external_model("", "0", "16")),
              IsError(StatusCode::kInvalidArgument, "location is empty"));
  EXPECT_THAT(error_of(external_model(std::string("sub/w.bin\0x", 11), "0", "16")),
              IsError(StatusCode::kInvalidArgument, "NUL byte"));

  auto no_location = fx::empty_model();
  TP& t = fx::add_initializer(no_location, "w", TP::FLOAT, {4});
  t.set_data_location(TP::EXTERNAL);
  EXPECT_THAT(error_of(no_location), IsError(StatusCode::kInvalidArgument, "no 'location' key"));

  auto twice = external_model("sub/w.bin", "4", "16");
  auto* kv = twice.mutable_graph()->mutable_initializer(0)->add_external_data();
  kv->set_key("offset");
  kv->set_value("0");
  EXPECT_THAT(error_of(twice), IsError(StatusCode::kInvalidArgument, "two 'offset' keys"));
}

TEST_F(OnnxExternal, UnknownKeysAreIgnored) {
  auto proto = external_model("sub/w.bin", "4", "16");
  auto* kv = proto.mutable_graph()->mutable_initializer(0)->add_external_data();
  kv->set_key("checksum");
  kv->set_value("abc");
  EXPECT_TRUE(error_of(proto).ok());
}

TEST_F(OnnxExternal, ExternalDataWithoutExternalLocationIsRefused) {
  auto proto = external_model("sub/w.bin", "4", "16");
  proto.mutable_graph()->mutable_initializer(0)->set_data_location(TP::DEFAULT);
  EXPECT_THAT(error_of(proto), IsError(StatusCode::kInvalidArgument, "data_location is not"));
}

TEST_F(OnnxExternal, ExternalPlusRawDataIsRefused) {
  auto proto = external_model("sub/w.bin", "4", "16");
  std::vector<float> v(4);
  fx::set_raw(*proto.mutable_graph()->mutable_initializer(0), fx::bytes_of(v));
  EXPECT_THAT(error_of(proto), IsError(StatusCode::kInvalidArgument, "more than once"));
}

TEST_F(OnnxExternal, ModelFromABufferHasNoFolder) {
  EXPECT_THAT(first_initializer_error(external_model("sub/w.bin", "4", "16")),
              IsError(StatusCode::kFailedPrecondition, "not read from a file"));
}

}  // namespace
}  // namespace loom::onnx_io::testing
