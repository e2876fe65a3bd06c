#include <bit>
#include <cstring>
#include <limits>
#include <set>

#include "onnx/external_data.hpp"
#include "onnx/onnx_model.hpp"
#include "onnx/onnx_pb.h"

namespace loom::onnx_io {

// ONNX stores raw_data and external data little-endian; Loom's tensors are in
// host order, and every supported host is little-endian.
static_assert(std::endian::native == std::endian::little, "loom_onnx assumes a little-endian host");

namespace {

using TP = ::onnx::TensorProto;

std::string tensor_label(const TP& tensor) {
  return "tensor '" + tensor.name() + "'";
}

// Which typed field a data type uses (ONNX's TensorProto comments).
enum class TypedField { kFloat, kDouble, kInt32, kInt64, kUInt64 };

TypedField typed_field_of(int32_t data_type) {
  switch (data_type) {
    case TP::FLOAT: return TypedField::kFloat;
    case TP::DOUBLE: return TypedField::kDouble;
    case TP::INT64: return TypedField::kInt64;
    case TP::UINT32:
    case TP::UINT64: return TypedField::kUInt64;
    default: return TypedField::kInt32;  // 8/16/32-bit integers, bool, f16, bf16
  }
}

const char* typed_field_name(TypedField field) {
  switch (field) {
    case TypedField::kFloat: return "float_data";
    case TypedField::kDouble: return "double_data";
    case TypedField::kInt32: return "int32_data";
    case TypedField::kInt64: return "int64_data";
    case TypedField::kUInt64: return "uint64_data";
  }
  return "?";
}

int typed_count(const TP& t, TypedField field) {
  switch (field) {
    case TypedField::kFloat: return t.float_data_size();
    case TypedField::kDouble: return t.double_data_size();
    case TypedField::kInt32: return t.int32_data_size();
    case TypedField::kInt64: return t.int64_data_size();
    case TypedField::kUInt64: return t.uint64_data_size();
  }
  return 0;
}

// The typed fields other than `field` that hold values (there must be none).
std::string stray_typed_fields(const TP& t, TypedField field) {
  std::string out;
  for (TypedField f : {TypedField::kFloat, TypedField::kDouble, TypedField::kInt32,
                       TypedField::kInt64, TypedField::kUInt64}) {
    if (f != field && typed_count(t, f) > 0) out += std::string(out.empty() ? "" : ", ") +
                                                    typed_field_name(f);
  }
  if (t.string_data_size() > 0) out += std::string(out.empty() ? "" : ", ") + "string_data";
  return out;
}

template <typename T>
void put(std::vector<std::byte>& out, size_t index, T value) {
  std::memcpy(out.data() + index * sizeof(T), &value, sizeof(T));
}

// int32_data carries narrower types one value per element; a value that does
// not fit the element type is a malformed model, not something to truncate.
Status convert_int32_data(const TP& t, DType dtype, std::vector<std::byte>& out) {
  int64_t lo = 0, hi = 0;
  switch (dtype) {
    case DType::kI32: lo = std::numeric_limits<int32_t>::min(); hi = std::numeric_limits<int32_t>::max(); break;
    case DType::kI16: lo = -32768; hi = 32767; break;
    case DType::kI8: lo = -128; hi = 127; break;
    case DType::kU16:
    case DType::kF16:
    case DType::kBF16: lo = 0; hi = 65535; break;
    case DType::kU8: lo = 0; hi = 255; break;
    case DType::kBool: lo = 0; hi = 1; break;
    default:
      return internal_error("int32_data used for dtype " + std::string(dtype_name(dtype)));
  }
  size_t width = dtype_size(dtype);
  for (int i = 0; i < t.int32_data_size(); ++i) {
    int32_t v = t.int32_data(i);
    if (v < lo || v > hi) {
      return invalid_argument("int32_data[" + std::to_string(i) + "] = " + std::to_string(v) +
                              " does not fit dtype " + std::string(dtype_name(dtype)));
    }
    auto idx = static_cast<size_t>(i);
    if (width == 4) put<int32_t>(out, idx, v);
    else if (width == 2) put<uint16_t>(out, idx, static_cast<uint16_t>(v));
    else put<uint8_t>(out, idx, static_cast<uint8_t>(v));
  }
  return Status();
}

Status convert_typed(const TP& t, DType dtype, TypedField field, std::vector<std::byte>& out) {
  switch (field) {
    case TypedField::kFloat:
      for (int i = 0; i < t.float_data_size(); ++i) put<float>(out, i, t.float_data(i));
      return Status();
    case TypedField::kDouble:
      for (int i = 0; i < t.double_data_size(); ++i) put<double>(out, i, t.double_data(i));
      return Status();
    case TypedField::kInt64:
      for (int i = 0; i < t.int64_data_size(); ++i) put<int64_t>(out, i, t.int64_data(i));
      return Status();
    case TypedField::kUInt64:
      for (int i = 0; i < t.uint64_data_size(); ++i) {
        uint64_t v = t.uint64_data(i);
        if (dtype == DType::kU32) {
          if (v > std::numeric_limits<uint32_t>::max()) {
            return invalid_argument("uint64_data[" + std::to_string(i) + "] = " +
                                    std::to_string(v) + " does not fit dtype u32");
          }
          put<uint32_t>(out, i, static_cast<uint32_t>(v));
        } else {
          put<uint64_t>(out, i, v);
        }
      }
      return Status();
    case TypedField::kInt32:
      return convert_int32_data(t, dtype, out);
  }
  return internal_error("unknown typed field");
}

}  // namespace

std::string_view storage_name(Storage storage) {
  switch (storage) {
    case Storage::kRaw: return "raw_data";
    case Storage::kTyped: return "typed";
    case Storage::kExternal: return "external";
    case Storage::kEmpty: return "empty";
  }
  return "?";
}

Result<DType> dtype_from_onnx(int32_t data_type) {
  switch (data_type) {
    case TP::FLOAT: return DType::kF32;
    case TP::UINT8: return DType::kU8;
    case TP::INT8: return DType::kI8;
    case TP::UINT16: return DType::kU16;
    case TP::INT16: return DType::kI16;
    case TP::INT32: return DType::kI32;
    case TP::INT64: return DType::kI64;
    case TP::BOOL: return DType::kBool;
    case TP::FLOAT16: return DType::kF16;
    case TP::DOUBLE: return DType::kF64;
    case TP::UINT32: return DType::kU32;
    case TP::UINT64: return DType::kU64;
    case TP::BFLOAT16: return DType::kBF16;
    case TP::STRING: return unimplemented("data_type 8 (string) is not supported");
    case TP::COMPLEX64: return unimplemented("data_type 14 (complex64) is not supported");
    case TP::COMPLEX128: return unimplemented("data_type 15 (complex128) is not supported");
    case TP::UNDEFINED: return invalid_argument("data_type is 0 (undefined)");
    default:
      return unimplemented("data_type " + std::to_string(data_type) + " is unknown to Loom");
  }
}

Result<TensorInfo> describe_tensor(const TP& t) {
  auto context = [&](const Status& s) { return s.with_context(tensor_label(t)); };
  TensorInfo info;
  info.name = t.name();
  auto dtype = dtype_from_onnx(t.data_type());
  if (!dtype.ok()) return context(dtype.status());
  info.dtype = *dtype;
  info.shape.assign(t.dims().begin(), t.dims().end());
  auto count = element_count(info.shape);
  if (!count.ok()) return context(count.status().with_context("dims"));
  uint64_t width = dtype_size(info.dtype);
  if (*count > std::numeric_limits<uint64_t>::max() / width) {
    return context(out_of_range("dims " + shape_to_string(info.shape) + " overflow 64 bits"));
  }
  info.byte_size = *count * width;
  if (t.has_segment()) {
    return context(unimplemented("'segment' (a tensor split over several protos) is not "
                                 "supported"));
  }
  TypedField field = typed_field_of(t.data_type());
  std::string stray = stray_typed_fields(t, field);
  if (!stray.empty()) {
    return context(invalid_argument(stray + " set, but data_type " +
                                    std::to_string(t.data_type()) + " keeps values in " +
                                    typed_field_name(field)));
  }
  bool external = t.data_location() == TP::EXTERNAL;
  bool has_typed = typed_count(t, field) > 0;
  int sources = int(external) + int(t.has_raw_data()) + int(has_typed);
  if (sources > 1) {
    return context(invalid_argument(
        std::string("data is given more than once (") + (external ? "external data " : "") +
        (t.has_raw_data() ? "raw_data " : "") + (has_typed ? typed_field_name(field) : "") + ")"));
  }
  if (!external && t.external_data_size() > 0) {
    return context(invalid_argument("external_data is set but data_location is not EXTERNAL"));
  }
  if (external) info.storage = Storage::kExternal;
  else if (t.has_raw_data()) info.storage = Storage::kRaw;
  else if (has_typed) info.storage = Storage::kTyped;
  else if (info.byte_size != 0) {
    return context(invalid_argument("has no data: " + std::to_string(info.byte_size) +
                                    " bytes expected for " + std::string(dtype_name(info.dtype)) +
                                    shape_to_string(info.shape)));
  }

  if (info.storage == Storage::kRaw && t.raw_data().size() != info.byte_size) {
    return context(invalid_argument("raw_data has " + std::to_string(t.raw_data().size()) +
                                    " bytes, dtype " + std::string(dtype_name(info.dtype)) +
                                    " and dims " + shape_to_string(info.shape) + " need " +
                                    std::to_string(info.byte_size)));
  }
  if (info.storage == Storage::kTyped &&
      static_cast<uint64_t>(typed_count(t, field)) != *count) {
    return context(invalid_argument(std::string(typed_field_name(field)) + " has " +
                                    std::to_string(typed_count(t, field)) + " values, dims " +
                                    shape_to_string(info.shape) + " need " +
                                    std::to_string(*count)));
  }
  return info;
}

Result<TensorData> read_tensor(const Model& model, const TP& t) {
  LOOM_ASSIGN_OR_RETURN(TensorInfo info, describe_tensor(t));
  auto context = [&](const Status& s) { return s.with_context(tensor_label(t)); };
  TensorData out;
  switch (info.storage) {
    case Storage::kEmpty:
      break;
    case Storage::kRaw:
      out.view_ = std::as_bytes(std::span(t.raw_data().data(), t.raw_data().size()));
      break;
    case Storage::kTyped: {
      // describe_tensor matched the value count to the shape, so this is
      // bounded by what the model already holds.
      out.owned_ = true;
      out.storage_.resize(static_cast<size_t>(info.byte_size));
      Status st = convert_typed(t, info.dtype, typed_field_of(t.data_type()), out.storage_);
      if (!st.ok()) return context(st);
      break;
    }
    case Storage::kExternal: {
      auto ref = detail::parse_external_ref(t);
      if (!ref.ok()) return context(ref.status());
      auto bytes = detail::read_external(model.base_dir(), *ref, info.byte_size);
      if (!bytes.ok()) return context(bytes.status());
      out.owned_ = true;
      out.storage_ = std::move(bytes).value();
      break;
    }
  }
  out.info_ = std::move(info);
  return out;
}

namespace {

Status check_initializer_names(const Model& model) {
  const auto& graph = model.proto().graph();
  if (graph.sparse_initializer_size() > 0) {
    return unimplemented("graph has " + std::to_string(graph.sparse_initializer_size()) +
                         " sparse initializers (first '" +
                         graph.sparse_initializer(0).values().name() + "'); they are not "
                         "supported");
  }
  std::set<std::string_view> seen;
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const std::string& name = graph.initializer(i).name();
    if (name.empty()) return invalid_argument("initializer #" + std::to_string(i) + " has no name");
    if (!seen.insert(name).second) {
      return invalid_argument("initializer name '" + name + "' is used twice");
    }
  }
  return Status();
}

}  // namespace

Result<std::vector<TensorInfo>> list_initializers(const Model& model) {
  Status st = check_initializer_names(model);
  if (!st.ok()) return st.with_context(model.source());
  std::vector<TensorInfo> out;
  for (const TP& t : model.proto().graph().initializer()) {
    auto info = describe_tensor(t);
    if (!info.ok()) return info.status().with_context(model.source());
    out.push_back(std::move(info).value());
  }
  return out;
}

Result<std::vector<TensorData>> read_initializers(const Model& model) {
  Status st = check_initializer_names(model);
  if (!st.ok()) return st.with_context(model.source());
  std::vector<TensorData> out;
  for (const TP& t : model.proto().graph().initializer()) {
    auto data = read_tensor(model, t);
    if (!data.ok()) return data.status().with_context(model.source());
    out.push_back(std::move(data).value());
  }
  return out;
}

}  // namespace loom::onnx_io
