// The gRPC front end's conversions (serve/grpc_convert.hpp) without a
// server: every refusal of infer_request_from_proto with its code and the
// values its message names, the typed and raw paths of every dtype, and
// the response's choice between typed and raw contents.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "grpc_convert.hpp"

namespace loom::serve {
namespace {

constexpr uint64_t kLimit = 1 << 20;

inference::ModelInferRequest::InferInputTensor* add_input(inference::ModelInferRequest* m, const std::string& name,
                                                          const std::string& datatype, std::vector<int64_t> shape) {
  auto* in = m->add_inputs();
  in->set_name(name);
  in->set_datatype(datatype);
  for (int64_t d : shape) in->add_shape(d);
  return in;
}

template <typename T>
std::string raw_bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// The refusal's code, and that its message holds every one of `parts`.
void expect_refusal(const inference::ModelInferRequest& m, StatusCode code, const std::vector<std::string>& parts,
                    uint64_t limit = kLimit) {
  auto r = infer_request_from_proto(m, limit);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  for (const std::string& part : parts) {
    EXPECT_NE(r.status().message().find(part), std::string::npos)
        << "'" << part << "' not in: " << r.status().message();
  }
}

TEST(GrpcConvert, TypedFp32InputConvertsWithModelIdAndOutputs) {
  inference::ModelInferRequest m;
  m.set_model_name("add");
  m.set_model_version("1");
  m.set_id("req-7");
  auto* in = add_input(&m, "x", "FP32", {2, 3});
  for (float v : {1.f, 2.f, 3.f, 4.f, 5.f, -6.5f}) in->mutable_contents()->add_fp32_contents(v);
  m.add_outputs()->set_name("y");
  auto r = infer_request_from_proto(m, kLimit);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->model, "add");
  EXPECT_EQ(r->version, "1");
  EXPECT_EQ(r->id, "req-7");
  ASSERT_EQ(r->inputs.size(), 1u);
  EXPECT_EQ(r->inputs[0].name, "x");
  EXPECT_EQ(r->inputs[0].tensor.dtype(), DType::kF32);
  EXPECT_EQ(r->inputs[0].tensor.shape(), (Shape{2, 3}));
  EXPECT_EQ(r->inputs[0].tensor.data_as<float>()[5], -6.5f);
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].name, "y");
}

// Each dtype through its typed field, read back through a typed response:
// the same values, in the same field.
TEST(GrpcConvert, EveryTypedDtypeRoundTripsThroughTypedResponse) {
  inference::ModelInferRequest m;
  auto* c = add_input(&m, "b", "BOOL", {3})->mutable_contents();
  for (bool v : {true, false, true}) c->add_bool_contents(v);
  for (const char* t : {"INT8", "INT16", "INT32"}) {
    c = add_input(&m, t, t, {2})->mutable_contents();
    c->add_int_contents(-100);
    c->add_int_contents(100);
  }
  c = add_input(&m, "INT64", "INT64", {2})->mutable_contents();
  c->add_int64_contents(-(int64_t{1} << 40));
  c->add_int64_contents(7);
  for (const char* t : {"UINT8", "UINT16", "UINT32"}) {
    c = add_input(&m, t, t, {2})->mutable_contents();
    c->add_uint_contents(0);
    c->add_uint_contents(200);
  }
  c = add_input(&m, "UINT64", "UINT64", {1})->mutable_contents();
  c->add_uint64_contents(uint64_t{1} << 63);
  c = add_input(&m, "FP64", "FP64", {1})->mutable_contents();
  c->add_fp64_contents(0.1);
  auto r = infer_request_from_proto(m, kLimit);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->inputs[1].tensor.dtype(), DType::kI8);
  EXPECT_EQ(r->inputs[1].tensor.data_as<int8_t>()[0], -100);
  EXPECT_EQ(r->inputs[5].tensor.dtype(), DType::kU8);
  EXPECT_EQ(r->inputs[5].tensor.data_as<uint8_t>()[1], 200);

  InferResponse response;
  response.model = "m";
  response.id = "i";
  for (const auto& in : r->inputs) response.outputs.push_back(in);
  inference::ModelInferResponse out;
  infer_response_to_proto(response, /*raw_outputs=*/false, &out);
  EXPECT_EQ(out.model_name(), "m");
  EXPECT_EQ(out.id(), "i");
  EXPECT_EQ(out.raw_output_contents_size(), 0);
  ASSERT_EQ(out.outputs_size(), m.inputs_size());
  for (int i = 0; i < m.inputs_size(); ++i) {
    EXPECT_EQ(out.outputs(i).name(), m.inputs(i).name());
    EXPECT_EQ(out.outputs(i).datatype(), m.inputs(i).datatype());
    EXPECT_EQ(out.outputs(i).shape_size(), 1);
    EXPECT_EQ(out.outputs(i).contents().SerializeAsString(), m.inputs(i).contents().SerializeAsString())
        << m.inputs(i).datatype();
  }
}

TEST(GrpcConvert, RawInputsCopiedAndRawResponseCarriesSameBytes) {
  inference::ModelInferRequest m;
  add_input(&m, "h", "FP16", {2});
  add_input(&m, "i", "INT32", {2, 2});
  m.add_raw_input_contents(raw_bytes(std::vector<uint16_t>{0x3c00, 0xc000}));
  m.add_raw_input_contents(raw_bytes(std::vector<int32_t>{1, -2, 3, -4}));
  auto r = infer_request_from_proto(m, kLimit);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->inputs[0].tensor.dtype(), DType::kF16);
  EXPECT_EQ(r->inputs[0].tensor.data_as<uint16_t>()[1], 0xc000);
  EXPECT_EQ(r->inputs[1].tensor.data_as<int32_t>()[3], -4);

  InferResponse response;
  for (const auto& in : r->inputs) response.outputs.push_back(in);
  inference::ModelInferResponse out;
  infer_response_to_proto(response, /*raw_outputs=*/true, &out);
  ASSERT_EQ(out.raw_output_contents_size(), 2);
  EXPECT_EQ(out.raw_output_contents(0), m.raw_input_contents(0));
  EXPECT_EQ(out.raw_output_contents(1), m.raw_input_contents(1));
  EXPECT_EQ(out.outputs(1).contents().int_contents_size(), 0);
}

// FP16 has no typed field, and the protocol does not mix raw and typed
// outputs in one response: one FP16 output makes the whole response raw.
TEST(GrpcConvert, Fp16OutputMakesTypedResponseRaw) {
  InferResponse response;
  response.outputs.push_back({"f", *Tensor::zeros(DType::kF32, {2}), false});
  response.outputs.push_back({"h", *Tensor::zeros(DType::kF16, {3}), false});
  inference::ModelInferResponse out;
  infer_response_to_proto(response, /*raw_outputs=*/false, &out);
  ASSERT_EQ(out.raw_output_contents_size(), 2);
  EXPECT_EQ(out.raw_output_contents(0).size(), 8u);
  EXPECT_EQ(out.raw_output_contents(1).size(), 6u);
  EXPECT_EQ(out.outputs(0).contents().fp32_contents_size(), 0);
  EXPECT_EQ(out.outputs(1).datatype(), "FP16");
}

TEST(GrpcConvert, UnknownDatatypeRefusedNamingInputAndDatatype) {
  inference::ModelInferRequest m;
  add_input(&m, "x", "FLOAT32", {1})->mutable_contents()->add_fp32_contents(1);
  expect_refusal(m, StatusCode::kInvalidArgument, {"input 'x'", "'FLOAT32'"});
}

TEST(GrpcConvert, BytesDatatypeRefused) {
  inference::ModelInferRequest m;
  add_input(&m, "s", "BYTES", {1})->mutable_contents()->add_bytes_contents("hi");
  expect_refusal(m, StatusCode::kInvalidArgument, {"input 's'", "BYTES"});
}

TEST(GrpcConvert, NegativeDimensionRefusedNamingShape) {
  inference::ModelInferRequest m;
  add_input(&m, "x", "FP32", {2, -3});
  expect_refusal(m, StatusCode::kInvalidArgument, {"input 'x'", "[2, -3]", "-3"});
}

TEST(GrpcConvert, OverflowingShapeRefused) {
  inference::ModelInferRequest m;
  add_input(&m, "x", "FP32", {int64_t{1} << 40, int64_t{1} << 40});
  expect_refusal(m, StatusCode::kInvalidArgument, {"input 'x'", "64 bits"});
  // Elements that fit 64 bits whose bytes do not.
  inference::ModelInferRequest m2;
  add_input(&m2, "y", "FP64", {int64_t{1} << 62});
  expect_refusal(m2, StatusCode::kResourceExhausted, {"input 'y'"});
}

TEST(GrpcConvert, ElementCountOtherThanShapeRefusedNamingBoth) {
  inference::ModelInferRequest m;
  auto* c = add_input(&m, "x", "FP32", {2, 3})->mutable_contents();
  for (int i = 0; i < 5; ++i) c->add_fp32_contents(1);
  expect_refusal(m, StatusCode::kInvalidArgument, {"input 'x'", "5 elements", "fp32_contents", "[2, 3]", "6"});
}

TEST(GrpcConvert, MissingContentsRefused) {
  inference::ModelInferRequest m;
  add_input(&m, "x", "INT64", {4});
  expect_refusal(m, StatusCode::kInvalidArgument, {"input 'x'", "0 elements", "int64_contents", "4"});
}

TEST(GrpcConvert, ContentsInAnotherDatatypesFieldRefused) {
  inference::ModelInferRequest m;
  add_input(&m, "x", "FP32", {1})->mutable_contents()->add_int_contents(1);
  expect_refusal(m, StatusCode::kInvalidArgument, {"input 'x'", "FP32", "int_contents", "fp32_contents"});
  // INT64 is not carried in int_contents.
  inference::ModelInferRequest m2;
  add_input(&m2, "y", "INT64", {1})->mutable_contents()->add_int_contents(1);
  expect_refusal(m2, StatusCode::kInvalidArgument, {"input 'y'", "int_contents", "int64_contents"});
}

TEST(GrpcConvert, Fp16AndBf16TypedContentsRefused) {
  for (const char* t : {"FP16", "BF16"}) {
    inference::ModelInferRequest m;
    add_input(&m, "h", t, {1})->mutable_contents()->add_fp32_contents(1);
    expect_refusal(m, StatusCode::kInvalidArgument, {"input 'h'", t, "raw_input_contents"});
    inference::ModelInferRequest empty;
    add_input(&empty, "h", t, {2});
    expect_refusal(empty, StatusCode::kInvalidArgument, {"input 'h'", "raw_input_contents"});
  }
}

TEST(GrpcConvert, IntegerOutsideDatatypeRangeRefusedNamingValue) {
  inference::ModelInferRequest m;
  auto* c = add_input(&m, "x", "INT8", {2})->mutable_contents();
  c->add_int_contents(127);
  c->add_int_contents(128);
  expect_refusal(m, StatusCode::kInvalidArgument, {"input 'x'", "element 1", "128", "INT8"});
  inference::ModelInferRequest m2;
  add_input(&m2, "u", "UINT16", {1})->mutable_contents()->add_uint_contents(70000);
  expect_refusal(m2, StatusCode::kInvalidArgument, {"input 'u'", "70000", "UINT16"});
}

TEST(GrpcConvert, TypedAndRawInOneRequestRefused) {
  inference::ModelInferRequest m;
  add_input(&m, "x", "FP32", {1})->mutable_contents()->add_fp32_contents(1);
  m.add_raw_input_contents(raw_bytes(std::vector<float>{1}));
  expect_refusal(m, StatusCode::kInvalidArgument, {"input 'x'", "fp32_contents", "raw_input_contents"});
}

TEST(GrpcConvert, RawEntryCountOtherThanInputCountRefused) {
  inference::ModelInferRequest m;
  add_input(&m, "x", "FP32", {1});
  add_input(&m, "y", "FP32", {1});
  m.add_raw_input_contents(raw_bytes(std::vector<float>{1}));
  expect_refusal(m, StatusCode::kInvalidArgument, {"1 entries", "2 inputs"});
}

TEST(GrpcConvert, RawByteSizeOtherThanShapeRefusedNamingBoth) {
  inference::ModelInferRequest m;
  add_input(&m, "x", "FP32", {2, 3});
  m.add_raw_input_contents(std::string(20, '\0'));
  expect_refusal(m, StatusCode::kInvalidArgument, {"input 'x'", "24 bytes", "has 20"});
}

TEST(GrpcConvert, RawBoolOtherThanZeroOrOneRefused) {
  inference::ModelInferRequest m;
  add_input(&m, "b", "BOOL", {3});
  m.add_raw_input_contents(std::string("\x01\x00\x07", 3));
  expect_refusal(m, StatusCode::kInvalidArgument, {"input 'b'", "element 2", "7"});
}

// A declared size is checked against the limit before any data is read or
// allocated: a huge shape without data is RESOURCE_EXHAUSTED, not a crash.
TEST(GrpcConvert, InputsOverLimitRefusedBeforeAllocation) {
  inference::ModelInferRequest m;
  add_input(&m, "x", "FP32", {int64_t{1} << 40});
  m.add_raw_input_contents("");
  expect_refusal(m, StatusCode::kResourceExhausted, {"input 'x'", "4398046511104 bytes", std::to_string(kLimit)});
  // Two inputs each under the limit, together over it.
  inference::ModelInferRequest m2;
  add_input(&m2, "a", "UINT8", {600 << 10});
  add_input(&m2, "b", "UINT8", {600 << 10});
  m2.add_raw_input_contents(std::string(600 << 10, '\0'));
  m2.add_raw_input_contents(std::string(600 << 10, '\0'));
  expect_refusal(m2, StatusCode::kResourceExhausted, {"input 'b'", "614400 bytes before it"});
  EXPECT_TRUE(infer_request_from_proto(m2, 2 * (600 << 10)).ok());
}

TEST(GrpcConvert, UnnamedInputOrOutputRefused) {
  inference::ModelInferRequest m;
  add_input(&m, "", "FP32", {0});
  expect_refusal(m, StatusCode::kInvalidArgument, {"input 0 has no name"});
  inference::ModelInferRequest m2;
  m2.add_outputs();
  expect_refusal(m2, StatusCode::kInvalidArgument, {"requested output 0 has no name"});
}

TEST(GrpcConvert, SharedMemoryParameterRefused) {
  inference::ModelInferRequest m;
  auto* in = add_input(&m, "x", "FP32", {0});
  (*in->mutable_parameters())["shared_memory_region"].set_string_param("r0");
  expect_refusal(m, StatusCode::kInvalidArgument, {"input 'x'", "shared_memory_region"});
  inference::ModelInferRequest m2;
  (*m2.add_outputs()->mutable_parameters())["shared_memory_byte_size"].set_int64_param(4);
  m2.mutable_outputs(0)->set_name("y");
  expect_refusal(m2, StatusCode::kInvalidArgument, {"output 'y'", "shared_memory_byte_size"});
}

TEST(GrpcConvert, ZeroElementInputWithoutContentsAccepted) {
  inference::ModelInferRequest m;
  add_input(&m, "x", "FP32", {0, 4});
  (*m.mutable_parameters())["priority"].set_int64_param(1);  // other parameters are ignored
  auto r = infer_request_from_proto(m, kLimit);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->inputs[0].tensor.element_count(), 0u);
}

TEST(GrpcConvert, StatusCodesMapToGrpcCodes) {
  EXPECT_EQ(grpc_status_code(StatusCode::kOk), grpc::StatusCode::OK);
  EXPECT_EQ(grpc_status_code(StatusCode::kInvalidArgument), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(grpc_status_code(StatusCode::kNotFound), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(grpc_status_code(StatusCode::kUnavailable), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(grpc_status_code(StatusCode::kResourceExhausted), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(grpc_status_code(StatusCode::kDeadlineExceeded), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(grpc_status_code(StatusCode::kFailedPrecondition), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(grpc_status_code(StatusCode::kIncompatible), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(grpc_status_code(StatusCode::kInternal), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(grpc_status_code(StatusCode::kUnimplemented), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(grpc_status_code(StatusCode::kDeviceLost), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(grpc_status_code(StatusCode::kCancelled), grpc::StatusCode::CANCELLED);
}

}  // namespace
}  // namespace loom::serve
