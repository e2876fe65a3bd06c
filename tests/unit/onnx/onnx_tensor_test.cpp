// Decoding initializers: every storage kind and dtype of the sample model,
// and each malformed tensor the reader must refuse with a clear error.
#include <cstring>
#include <limits>

#include "onnx_test_util.hpp"

namespace loom::onnx_io::testing {
namespace {

using ::testing::HasSubstr;

TEST(OnnxTensor, SampleModelInitializersMatchWhatWasWritten) {
  ScratchDir dir;
  auto expected = fx::write_sample_model(dir.path());
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  auto model = Model::load_file(dir.path() / "model.onnx");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto data = read_initializers(**model);
  ASSERT_TRUE(data.ok()) << data.status().to_string();
  ASSERT_EQ(data->size(), expected->size());
  for (size_t i = 0; i < data->size(); ++i) {
    const TensorData& got = (*data)[i];
    const auto& [name, want] = (*expected)[i];
    SCOPED_TRACE(name);
    EXPECT_EQ(got.info().name, name);
    EXPECT_EQ(got.info().dtype, want.dtype());
    EXPECT_EQ(got.info().shape, want.shape());
    EXPECT_EQ(got.info().byte_size, want.byte_size());
    ASSERT_EQ(got.bytes().size(), want.byte_size());
    EXPECT_EQ(std::memcmp(got.bytes().data(), want.bytes().data(), want.byte_size()), 0);
  }
  auto infos = list_initializers(**model);
  ASSERT_TRUE(infos.ok());
  EXPECT_EQ((*infos)[0].storage, Storage::kRaw);
  EXPECT_EQ((*infos)[1].storage, Storage::kTyped);
  EXPECT_EQ(infos->back().storage, Storage::kExternal);
  EXPECT_EQ(storage_name(Storage::kExternal), "external");
}

TEST(OnnxTensor, RawDataIsViewedInPlace) {
  auto proto = fx::empty_model();
  std::vector<int32_t> v = {1, 2, 3, 4};
  fx::set_raw(fx::add_initializer(proto, "v", TP::INT32, {2, 2}), fx::bytes_of(v));
  auto model = parse_or_die(proto);
  ASSERT_TRUE(model);
  auto data = read_tensor(*model, model->proto().graph().initializer(0));
  ASSERT_TRUE(data.ok()) << data.status().to_string();
  EXPECT_EQ(static_cast<const void*>(data->bytes().data()),
            static_cast<const void*>(model->proto().graph().initializer(0).raw_data().data()));
}

TEST(OnnxTensor, NarrowTypesInInt32DataAreRepacked) {
  auto proto = fx::empty_model();
  TP& i8 = fx::add_initializer(proto, "i8", TP::INT8, {3});
  for (int v : {-128, 0, 127}) i8.add_int32_data(v);
  TP& u16 = fx::add_initializer(proto, "u16", TP::UINT16, {2});
  for (int v : {0, 65535}) u16.add_int32_data(v);
  TP& u32 = fx::add_initializer(proto, "u32", TP::UINT32, {1});
  u32.add_uint64_data(4000000000u);
  auto model = parse_or_die(proto);
  auto data = read_initializers(*model);
  ASSERT_TRUE(data.ok()) << data.status().to_string();
  std::vector<int8_t> want_i8 = {-128, 0, 127};
  std::vector<uint16_t> want_u16 = {0, 65535};
  std::vector<uint32_t> want_u32 = {4000000000u};
  EXPECT_EQ(std::memcmp((*data)[0].bytes().data(), want_i8.data(), 3), 0);
  EXPECT_EQ(std::memcmp((*data)[1].bytes().data(), want_u16.data(), 4), 0);
  EXPECT_EQ(std::memcmp((*data)[2].bytes().data(), want_u32.data(), 4), 0);
}

TEST(OnnxTensor, EmptyTensorNeedsNoData) {
  auto proto = fx::empty_model();
  fx::add_initializer(proto, "nothing", TP::FLOAT, {0, 5});
  auto model = parse_or_die(proto);
  auto data = read_initializers(*model);
  ASSERT_TRUE(data.ok()) << data.status().to_string();
  EXPECT_EQ((*data)[0].info().storage, Storage::kEmpty);
  EXPECT_TRUE((*data)[0].bytes().empty());
}

TEST(OnnxTensor, RawDataOfTheWrongSizeIsRefused) {
  auto proto = fx::empty_model();
  std::vector<float> v(5);
  fx::set_raw(fx::add_initializer(proto, "w", TP::FLOAT, {2, 3}), fx::bytes_of(v));
  EXPECT_THAT(first_initializer_error(proto),
              IsError(StatusCode::kInvalidArgument, "tensor 'w': raw_data has 20 bytes"));
}

TEST(OnnxTensor, TypedValueCountMustMatchTheShape) {
  auto proto = fx::empty_model();
  TP& t = fx::add_initializer(proto, "b", TP::FLOAT, {4});
  t.add_float_data(1.0f);
  EXPECT_THAT(first_initializer_error(proto),
              IsError(StatusCode::kInvalidArgument, "float_data has 1 values"));
}

TEST(OnnxTensor, Int32DataOutOfRangeForTheDtypeIsRefused) {
  auto proto = fx::empty_model();
  fx::add_initializer(proto, "q", TP::INT8, {1}).add_int32_data(200);
  EXPECT_THAT(first_initializer_error(proto),
              IsError(StatusCode::kInvalidArgument, "int32_data[0] = 200 does not fit dtype i8"));
  auto proto2 = fx::empty_model();
  fx::add_initializer(proto2, "flag", TP::BOOL, {1}).add_int32_data(2);
  EXPECT_THAT(first_initializer_error(proto2),
              IsError(StatusCode::kInvalidArgument, "does not fit dtype i1"));
  auto proto3 = fx::empty_model();
  fx::add_initializer(proto3, "u", TP::UINT32, {1}).add_uint64_data(uint64_t{1} << 33);
  EXPECT_THAT(first_initializer_error(proto3),
              IsError(StatusCode::kInvalidArgument, "does not fit dtype u32"));
}

TEST(OnnxTensor, TypedFieldOfAnotherTypeIsRefused) {
  auto proto = fx::empty_model();
  fx::add_initializer(proto, "i", TP::INT64, {1}).add_float_data(1.0f);
  EXPECT_THAT(first_initializer_error(proto),
              IsError(StatusCode::kInvalidArgument, "float_data set, but data_type 7"));
}

TEST(OnnxTensor, DataGivenTwiceIsRefused) {
  auto proto = fx::empty_model();
  std::vector<float> v = {1.0f};
  TP& t = fx::add_initializer(proto, "w", TP::FLOAT, {1});
  fx::set_raw(t, fx::bytes_of(v));
  t.add_float_data(1.0f);
  EXPECT_THAT(first_initializer_error(proto),
              IsError(StatusCode::kInvalidArgument, "more than once"));
}

TEST(OnnxTensor, MissingDataIsRefused) {
  auto proto = fx::empty_model();
  fx::add_initializer(proto, "w", TP::FLOAT, {3});
  EXPECT_THAT(first_initializer_error(proto),
              IsError(StatusCode::kInvalidArgument, "has no data: 12 bytes expected"));
}

TEST(OnnxTensor, BadDimsAreRefused) {
  auto proto = fx::empty_model();
  fx::add_initializer(proto, "neg", TP::FLOAT, {2, -1});
  EXPECT_THAT(first_initializer_error(proto), IsError(StatusCode::kInvalidArgument, "'neg'"));

  auto big = fx::empty_model();
  int64_t huge = std::numeric_limits<int64_t>::max();
  fx::add_initializer(big, "huge", TP::FLOAT, {huge, huge});
  Status st = first_initializer_error(big);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("'huge'"));

  // Fits in the element count, overflows once multiplied by the width.
  auto wide = fx::empty_model();
  fx::add_initializer(wide, "wide", TP::DOUBLE, {int64_t{1} << 62});
  EXPECT_THAT(first_initializer_error(wide), IsError(StatusCode::kOutOfRange, "overflow"));
}

TEST(OnnxTensor, UnsupportedAndUnknownTypesAreRefused) {
  auto proto = fx::empty_model();
  fx::add_initializer(proto, "names", TP::STRING, {1}).add_string_data("a");
  EXPECT_THAT(first_initializer_error(proto),
              IsError(StatusCode::kUnimplemented, "tensor 'names': data_type 8 (string)"));
  auto proto2 = fx::empty_model();
  fx::add_initializer(proto2, "odd", 42, {1});
  EXPECT_THAT(first_initializer_error(proto2), IsError(StatusCode::kUnimplemented, "42"));
}

TEST(OnnxTensor, SegmentedTensorIsRefused) {
  auto proto = fx::empty_model();
  TP& t = fx::add_initializer(proto, "seg", TP::FLOAT, {1});
  t.add_float_data(1.0f);
  t.mutable_segment()->set_begin(0);
  EXPECT_THAT(first_initializer_error(proto), IsError(StatusCode::kUnimplemented, "segment"));
}

TEST(OnnxTensor, DuplicateOrEmptyNamesAreRefused) {
  auto proto = fx::empty_model();
  fx::add_initializer(proto, "w", TP::FLOAT, {0});
  fx::add_initializer(proto, "w", TP::FLOAT, {0});
  auto model = parse_or_die(proto);
  EXPECT_THAT(list_initializers(*model).status(),
              IsError(StatusCode::kInvalidArgument, "'w' is used twice"));

  auto unnamed = fx::empty_model();
  fx::add_initializer(unnamed, "", TP::FLOAT, {0});
  EXPECT_THAT(first_initializer_error(unnamed),
              IsError(StatusCode::kInvalidArgument, "initializer #0 has no name"));
}

TEST(OnnxTensor, SparseInitializersAreRefused) {
  auto proto = fx::empty_model();
  auto* sparse = proto.mutable_graph()->add_sparse_initializer();
  sparse->mutable_values()->set_name("sp");
  auto model = parse_or_die(proto);
  EXPECT_THAT(read_initializers(*model).status(),
              IsError(StatusCode::kUnimplemented, "sparse initializers (first 'sp')"));
}

}  // namespace
}  // namespace loom::onnx_io::testing
