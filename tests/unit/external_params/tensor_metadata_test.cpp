// The {"dtype":..,"shape":[..]} metadata of archive entries: what Loom
// writes, what a loader checks, and what it leaves alone.
#include <gtest/gtest.h>

#include "loom/tensor_metadata.hpp"

namespace loom::io {
namespace {

const Shape kShape = {2, 3};

TEST(TensorMetadata, EncodesDtypeAndShapeCompactly) {
  EXPECT_EQ(encode_tensor_metadata(DType::kF32, kShape), R"({"dtype":"f32","shape":[2,3]})");
  EXPECT_EQ(encode_tensor_metadata(DType::kBF16, {}), R"({"dtype":"bf16","shape":[]})");
}

TEST(TensorMetadata, WhatLoomWritesPassesItsOwnCheck) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kI64, DType::kBool, DType::kU8}) {
    EXPECT_TRUE(check_tensor_metadata(encode_tensor_metadata(dtype, kShape), dtype, kShape).ok());
  }
}

TEST(TensorMetadata, MetadataRecordingNothingPasses) {
  for (const char* text : {"", "not json", "{", "[1,2,3]", "{\"other\":1}", "{}", "null",
                           "{\"dtype\":", "\xff\xfe{"}) {
    EXPECT_TRUE(check_tensor_metadata(text, DType::kF32, kShape).ok()) << text;
  }
}

TEST(TensorMetadata, OnlyTheRecordedFieldsAreChecked) {
  EXPECT_TRUE(check_tensor_metadata(R"({"dtype":"f32"})", DType::kF32, kShape).ok());
  EXPECT_TRUE(check_tensor_metadata(R"({"shape":[2,3]})", DType::kI8, kShape).ok());
}

TEST(TensorMetadata, DisagreeingDtypeIsNamed) {
  Status st = check_tensor_metadata(R"({"dtype":"f16","shape":[2,3]})", DType::kF32, kShape);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "archive records dtype 'f16', expected f32");
  st = check_tensor_metadata(R"({"dtype":"float4000"})", DType::kF32, kShape);
  EXPECT_EQ(st.message(), "archive records dtype 'float4000', expected f32");
  st = check_tensor_metadata(R"({"dtype":["f32"]})", DType::kF32, kShape);
  EXPECT_EQ(st.message(), "archive records a dtype that is not a string, expected f32");
}

TEST(TensorMetadata, DisagreeingShapeIsNamed) {
  Status st = check_tensor_metadata(R"({"shape":[3,2]})", DType::kF32, kShape);
  EXPECT_EQ(st.message(), "archive records shape [3, 2], expected [2, 3]");
  st = check_tensor_metadata(R"({"shape":[2,3,1]})", DType::kF32, kShape);
  EXPECT_EQ(st.message(), "archive records shape [2, 3, 1], expected [2, 3]");
  for (const char* bad : {R"({"shape":"2x3"})", R"({"shape":[2,3.5]})", R"({"shape":[2,-3]})",
                          R"({"shape":[2,18446744073709551615]})", R"({"shape":[[2],[3]]})"}) {
    st = check_tensor_metadata(bad, DType::kF32, kShape);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
  }
  st = check_tensor_metadata(R"({"shape":{"a":1}})", DType::kF32, kShape);
  EXPECT_EQ(st.message(), "archive records shape a value that is not a shape, expected [2, 3]");
}

TEST(TensorMetadata, DeeplyNestedOrHugeMetadataNeverCrashes) {
  std::string nested = "{\"shape\":" + std::string(20000, '[') + std::string(20000, ']') + "}";
  EXPECT_FALSE(check_tensor_metadata(nested, DType::kF32, kShape).ok());
  std::string huge = "{\"dtype\":\"f16\",\"pad\":\"" + std::string(70000, 'x') + "\"}";
  EXPECT_TRUE(check_tensor_metadata(huge, DType::kF32, kShape).ok());  // not parsed
}

TEST(TensorMetadata, DecodeReturnsWhatEncodeWrote) {
  auto d = decode_tensor_metadata(encode_tensor_metadata(DType::kI64, kShape));
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_TRUE(d->has_value());
  EXPECT_EQ((*d)->dtype, DType::kI64);
  EXPECT_EQ((*d)->shape, kShape);
}

TEST(TensorMetadata, DecodeIgnoresOtherToolsMetadata) {
  for (const char* other : {"", "raw bytes", "[1,2]", R"({"shape":[2]})", "{not json"}) {
    auto d = decode_tensor_metadata(other);
    ASSERT_TRUE(d.ok()) << other;
    EXPECT_FALSE(d->has_value()) << other;
  }
}

TEST(TensorMetadata, DecodeNamesWhatIsWrong) {
  EXPECT_EQ(decode_tensor_metadata(R"({"dtype":"float4000","shape":[1]})").status().message(),
            "tensor metadata: dtype 'float4000' is not one Loom knows");
  EXPECT_EQ(decode_tensor_metadata(R"({"dtype":7,"shape":[1]})").status().message(),
            "tensor metadata: \"dtype\" is not a string");
  EXPECT_EQ(decode_tensor_metadata(R"({"dtype":"f32"})").status().message(),
            "tensor metadata: no \"shape\"");
  EXPECT_EQ(decode_tensor_metadata(R"({"dtype":"f32","shape":"2x3"})").status().message(),
            "tensor metadata: \"shape\" is a value that is not a shape");
  EXPECT_EQ(decode_tensor_metadata(R"({"dtype":"f32","shape":[2,-3]})").status().message(),
            "tensor metadata: shape [2, -3] has a negative dimension");
}

}  // namespace
}  // namespace loom::io
