// The protocol's gRPC messages to and from the ModelServer's requests. Every
// size a client states is checked against the others and against the
// request limit before any tensor is allocated.
#include "grpc_convert.hpp"

#include <bit>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace loom::serve {
namespace {

static_assert(std::endian::native == std::endian::little,
              "raw contents are little-endian; a big-endian host would have to swap bytes");

// The field of InferTensorContents that carries a datatype's elements.
enum class ContentsField { kNone, kBool, kInt, kInt64, kUint, kUint64, kFp32, kFp64, kBytes };

constexpr ContentsField kAllContentsFields[] = {
    ContentsField::kBool, ContentsField::kInt,  ContentsField::kInt64, ContentsField::kUint,
    ContentsField::kUint64, ContentsField::kFp32, ContentsField::kFp64, ContentsField::kBytes};

// kNone for FP16 and BF16, which the protocol carries only raw.
ContentsField contents_field_of(DType dtype) {
  switch (dtype) {
    case DType::kBool: return ContentsField::kBool;
    case DType::kI8:
    case DType::kI16:
    case DType::kI32: return ContentsField::kInt;
    case DType::kI64: return ContentsField::kInt64;
    case DType::kU8:
    case DType::kU16:
    case DType::kU32: return ContentsField::kUint;
    case DType::kU64: return ContentsField::kUint64;
    case DType::kF32: return ContentsField::kFp32;
    case DType::kF64: return ContentsField::kFp64;
    default: return ContentsField::kNone;
  }
}

std::string_view contents_field_name(ContentsField field) {
  switch (field) {
    case ContentsField::kBool: return "bool_contents";
    case ContentsField::kInt: return "int_contents";
    case ContentsField::kInt64: return "int64_contents";
    case ContentsField::kUint: return "uint_contents";
    case ContentsField::kUint64: return "uint64_contents";
    case ContentsField::kFp32: return "fp32_contents";
    case ContentsField::kFp64: return "fp64_contents";
    case ContentsField::kBytes: return "bytes_contents";
    case ContentsField::kNone: break;
  }
  return "no contents field";
}

int contents_field_size(const inference::InferTensorContents& c, ContentsField field) {
  switch (field) {
    case ContentsField::kBool: return c.bool_contents_size();
    case ContentsField::kInt: return c.int_contents_size();
    case ContentsField::kInt64: return c.int64_contents_size();
    case ContentsField::kUint: return c.uint_contents_size();
    case ContentsField::kUint64: return c.uint64_contents_size();
    case ContentsField::kFp32: return c.fp32_contents_size();
    case ContentsField::kFp64: return c.fp64_contents_size();
    case ContentsField::kBytes: return c.bytes_contents_size();
    case ContentsField::kNone: break;
  }
  return 0;
}

// The first non-empty field of `c`, or kNone.
ContentsField first_filled_field(const inference::InferTensorContents& c, ContentsField skip) {
  for (ContentsField field : kAllContentsFields) {
    if (field != skip && contents_field_size(c, field) > 0) return field;
  }
  return ContentsField::kNone;
}

// "[2, -3]": the shape as the client sent it (shape_to_string shows -1 as
// an open dimension, which a request's shape never is).
std::string proto_shape_text(const google::protobuf::RepeatedField<int64_t>& shape) {
  std::string out = "[";
  for (int i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

// Shared-memory parameters (Triton's extension) name memory Loom cannot
// reach; the request would otherwise run on zero-filled or missing data.
Status refuse_shared_memory(const google::protobuf::Map<std::string, inference::InferParameter>& parameters,
                            const std::string& what) {
  for (const auto& entry : parameters) {
    if (std::string_view(entry.first).starts_with("shared_memory")) {
      return invalid_argument(what + " has parameter '" + entry.first +
                              "': loom serve has no shared-memory extension; send the data in the request");
    }
  }
  return Status();
}

// Copies integers into a narrower (or equal) element type, refusing values
// that do not fit.
template <typename T, typename Src>
Status copy_integers_checked(const google::protobuf::RepeatedField<Src>& src, Tensor* tensor, const std::string& what,
                             std::string_view datatype) {
  T* dst = tensor->data_as<T>();
  for (int i = 0; i < src.size(); ++i) {
    const Src v = src[i];
    if (!std::in_range<T>(v)) {
      return invalid_argument(what + " element " + std::to_string(i) + " is " + std::to_string(v) + ", outside " +
                              std::string(datatype) + "'s range");
    }
    dst[i] = static_cast<T>(v);
  }
  return Status();
}

template <typename T>
void copy_same(const google::protobuf::RepeatedField<T>& src, Tensor* tensor) {
  if (src.size() > 0) std::memcpy(tensor->data(), src.data(), sizeof(T) * static_cast<size_t>(src.size()));
}

// Fills `tensor` (already shaped, element count checked) from the typed
// field of its dtype.
Status fill_from_contents(const inference::InferTensorContents& c, Tensor* tensor, const std::string& what,
                          std::string_view datatype) {
  switch (tensor->dtype()) {
    case DType::kBool: {
      auto* dst = tensor->data_as<uint8_t>();
      for (int i = 0; i < c.bool_contents_size(); ++i) dst[i] = c.bool_contents(i) ? 1 : 0;
      return Status();
    }
    case DType::kI8: return copy_integers_checked<int8_t>(c.int_contents(), tensor, what, datatype);
    case DType::kI16: return copy_integers_checked<int16_t>(c.int_contents(), tensor, what, datatype);
    case DType::kI32: copy_same(c.int_contents(), tensor); return Status();
    case DType::kI64: copy_same(c.int64_contents(), tensor); return Status();
    case DType::kU8: return copy_integers_checked<uint8_t>(c.uint_contents(), tensor, what, datatype);
    case DType::kU16: return copy_integers_checked<uint16_t>(c.uint_contents(), tensor, what, datatype);
    case DType::kU32: copy_same(c.uint_contents(), tensor); return Status();
    case DType::kU64: copy_same(c.uint64_contents(), tensor); return Status();
    case DType::kF32: copy_same(c.fp32_contents(), tensor); return Status();
    case DType::kF64: copy_same(c.fp64_contents(), tensor); return Status();
    default: break;
  }
  return internal_error(what + " has dtype " + std::string(dtype_name(tensor->dtype())) + ", which has no contents field");
}

Result<InferTensor> input_from_proto(const inference::ModelInferRequest& m, int index, bool raw,
                                     uint64_t max_request_bytes, uint64_t* total_bytes) {
  const auto& in = m.inputs(index);
  if (in.name().empty()) return invalid_argument("input " + std::to_string(index) + " has no name");
  const std::string what = "input '" + in.name() + "'";
  const std::string& datatype = in.datatype();
  const DType dtype = dtype_from_kserve(datatype);
  if (dtype == DType::kInvalid) {
    if (datatype == "BYTES") {
      return invalid_argument(what + " has datatype BYTES, which loom serve does not take (no Loom program has strings)");
    }
    return invalid_argument(what + " has unknown datatype '" + datatype +
                            "' (FP32, FP64, FP16, BF16, INT8..INT64, UINT8..UINT64 or BOOL)");
  }
  LOOM_RETURN_IF_ERROR(refuse_shared_memory(in.parameters(), what));

  Shape shape(in.shape().begin(), in.shape().end());
  auto count = element_count(shape);
  if (!count.ok()) {
    return invalid_argument(what + " has shape " + proto_shape_text(in.shape()) + ": " + count.status().message());
  }
  const uint64_t elements = *count;
  const uint64_t element_bytes = dtype_size(dtype);
  if (elements > std::numeric_limits<uint64_t>::max() / element_bytes) {
    return resource_exhausted(what + " (" + datatype + " " + proto_shape_text(in.shape()) +
                              ") has more bytes than fit in 64 bits");
  }
  const uint64_t bytes = elements * element_bytes;
  if (bytes > max_request_bytes || *total_bytes > max_request_bytes - bytes) {
    return resource_exhausted(what + " (" + datatype + " " + proto_shape_text(in.shape()) + ", " +
                              std::to_string(bytes) + " bytes) brings the request's inputs to more than the limit of " +
                              std::to_string(max_request_bytes) + " bytes (" + std::to_string(*total_bytes) +
                              " bytes before it)");
  }
  *total_bytes += bytes;

  const ContentsField expected = contents_field_of(dtype);
  if (raw) {
    if (ContentsField filled = first_filled_field(in.contents(), ContentsField::kNone); filled != ContentsField::kNone) {
      return invalid_argument(what + " has " + std::string(contents_field_name(filled)) +
                              " and the request has raw_input_contents; a request uses one or the other");
    }
    const std::string& data = m.raw_input_contents(index);
    if (data.size() != bytes) {
      return invalid_argument(what + " (" + datatype + " " + proto_shape_text(in.shape()) + ") needs " +
                              std::to_string(bytes) + " bytes, its raw_input_contents entry has " +
                              std::to_string(data.size()));
    }
    if (dtype == DType::kBool) {
      for (size_t i = 0; i < data.size(); ++i) {
        if (static_cast<unsigned char>(data[i]) > 1) {
          return invalid_argument(what + " element " + std::to_string(i) + " is byte " +
                                  std::to_string(static_cast<unsigned char>(data[i])) +
                                  "; a raw BOOL element is 0 or 1");
        }
      }
    }
    LOOM_ASSIGN_OR_RETURN(Tensor tensor,
                          Tensor::copy_of(dtype, std::move(shape),
                                          std::as_bytes(std::span<const char>(data.data(), data.size()))));
    return InferTensor{in.name(), std::move(tensor), false};
  }

  if (ContentsField stray = first_filled_field(in.contents(), expected); stray != ContentsField::kNone) {
    if (expected == ContentsField::kNone) {
      return invalid_argument(what + " is " + datatype + ", which has no typed contents field, yet carries " +
                              std::string(contents_field_name(stray)) + "; send it in raw_input_contents");
    }
    return invalid_argument(what + " is " + datatype + " and carries " + std::string(contents_field_name(stray)) +
                            "; " + datatype + " takes " + std::string(contents_field_name(expected)));
  }
  const uint64_t given = static_cast<uint64_t>(contents_field_size(in.contents(), expected));
  if (given != elements) {
    if (expected == ContentsField::kNone) {
      return invalid_argument(what + " is " + datatype + " with shape " + proto_shape_text(in.shape()) + " (" +
                              std::to_string(elements) + " elements) but has no data; " + datatype +
                              " has no typed contents field: send it in raw_input_contents");
    }
    return invalid_argument(what + " has " + std::to_string(given) + " elements in " +
                            std::string(contents_field_name(expected)) + ", its shape " +
                            proto_shape_text(in.shape()) + " has " + std::to_string(elements));
  }
  LOOM_ASSIGN_OR_RETURN(Tensor tensor, Tensor::zeros(dtype, std::move(shape)));
  if (elements > 0) LOOM_RETURN_IF_ERROR(fill_from_contents(in.contents(), &tensor, what, datatype));
  return InferTensor{in.name(), std::move(tensor), false};
}

template <typename T, typename Dst>
void append_elements(const Tensor& t, google::protobuf::RepeatedField<Dst>* dst) {
  const T* src = t.data_as<T>();
  const uint64_t n = t.element_count();
  if (n <= static_cast<uint64_t>(std::numeric_limits<int>::max())) dst->Reserve(static_cast<int>(n));
  for (uint64_t i = 0; i < n; ++i) dst->Add(static_cast<Dst>(src[i]));
}

void output_contents(const Tensor& t, inference::InferTensorContents* c) {
  switch (t.dtype()) {
    case DType::kBool: {
      const auto* src = t.data_as<uint8_t>();
      auto* dst = c->mutable_bool_contents();
      for (uint64_t i = 0; i < t.element_count(); ++i) dst->Add(src[i] != 0);
      return;
    }
    case DType::kI8: return append_elements<int8_t>(t, c->mutable_int_contents());
    case DType::kI16: return append_elements<int16_t>(t, c->mutable_int_contents());
    case DType::kI32: return append_elements<int32_t>(t, c->mutable_int_contents());
    case DType::kI64: return append_elements<int64_t>(t, c->mutable_int64_contents());
    case DType::kU8: return append_elements<uint8_t>(t, c->mutable_uint_contents());
    case DType::kU16: return append_elements<uint16_t>(t, c->mutable_uint_contents());
    case DType::kU32: return append_elements<uint32_t>(t, c->mutable_uint_contents());
    case DType::kU64: return append_elements<uint64_t>(t, c->mutable_uint64_contents());
    case DType::kF32: return append_elements<float>(t, c->mutable_fp32_contents());
    case DType::kF64: return append_elements<double>(t, c->mutable_fp64_contents());
    default: return;  // raw only (infer_response_to_proto picks raw for these)
  }
}

}  // namespace

Result<InferRequest> infer_request_from_proto(const inference::ModelInferRequest& m, uint64_t max_request_bytes) {
  InferRequest request;
  request.model = m.model_name();
  request.version = m.model_version();
  request.id = m.id();
  const bool raw = m.raw_input_contents_size() > 0;
  if (raw && m.raw_input_contents_size() != m.inputs_size()) {
    return invalid_argument("raw_input_contents has " + std::to_string(m.raw_input_contents_size()) +
                            " entries, the request has " + std::to_string(m.inputs_size()) +
                            " inputs; a raw request has one entry per input");
  }
  uint64_t total_bytes = 0;
  request.inputs.reserve(static_cast<size_t>(m.inputs_size()));
  for (int i = 0; i < m.inputs_size(); ++i) {
    LOOM_ASSIGN_OR_RETURN(InferTensor input, input_from_proto(m, i, raw, max_request_bytes, &total_bytes));
    request.inputs.push_back(std::move(input));
  }
  request.outputs.reserve(static_cast<size_t>(m.outputs_size()));
  for (int i = 0; i < m.outputs_size(); ++i) {
    const auto& out = m.outputs(i);
    if (out.name().empty()) return invalid_argument("requested output " + std::to_string(i) + " has no name");
    LOOM_RETURN_IF_ERROR(refuse_shared_memory(out.parameters(), "requested output '" + out.name() + "'"));
    request.outputs.push_back(RequestedOutput{out.name(), false});
  }
  return request;
}

void infer_response_to_proto(const InferResponse& r, bool raw_outputs, inference::ModelInferResponse* out) {
  out->set_model_name(r.model);
  out->set_model_version(r.version);
  out->set_id(r.id);
  bool raw = raw_outputs;
  for (const InferTensor& o : r.outputs) {
    if (contents_field_of(o.tensor.dtype()) == ContentsField::kNone) raw = true;
  }
  for (const InferTensor& o : r.outputs) {
    auto* t = out->add_outputs();
    t->set_name(o.name);
    t->set_datatype(std::string(kserve_datatype(o.tensor.dtype())));
    for (int64_t d : o.tensor.shape()) t->add_shape(d);
    if (raw) {
      out->add_raw_output_contents(o.tensor.data(), o.tensor.byte_size());
    } else {
      output_contents(o.tensor, t->mutable_contents());
    }
  }
}

grpc::StatusCode grpc_status_code(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return grpc::StatusCode::OK;
    case StatusCode::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kUnimplemented: return grpc::StatusCode::UNIMPLEMENTED;
    case StatusCode::kIncompatible: return grpc::StatusCode::FAILED_PRECONDITION;
    case StatusCode::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kDeviceLost: return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kDeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kDataLoss: return grpc::StatusCode::DATA_LOSS;
    case StatusCode::kInternal: return grpc::StatusCode::INTERNAL;
    case StatusCode::kFailedPrecondition: return grpc::StatusCode::FAILED_PRECONDITION;
    case StatusCode::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kOutOfRange: return grpc::StatusCode::OUT_OF_RANGE;
    case StatusCode::kCancelled: return grpc::StatusCode::CANCELLED;
    case StatusCode::kAlreadyExists: return grpc::StatusCode::ALREADY_EXISTS;
  }
  return grpc::StatusCode::UNKNOWN;
}

}  // namespace loom::serve
