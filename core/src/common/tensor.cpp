#include "loom/tensor.hpp"
#include "loom/value.hpp"

#include <unistd.h>

#include <new>
#include <stdexcept>

#include <cstring>

namespace loom {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: case DType::kI32: case DType::kU32: return 4;
    case DType::kF16: case DType::kBF16: case DType::kI16: case DType::kU16: return 2;
    case DType::kF64: case DType::kI64: case DType::kU64: return 8;
    case DType::kI8: case DType::kU8: case DType::kBool: return 1;
    case DType::kInvalid: return 0;
  }
  return 0;
}

namespace {
constexpr std::string_view kNames[] = {"invalid", "f32", "f16", "bf16", "f64",
                                       "i8",      "i16", "i32", "i64",  "u8",
                                       "u16",     "u32", "u64", "i1"};
}  // namespace

std::string_view dtype_name(DType dtype) {
  auto i = static_cast<size_t>(dtype);
  return i < std::size(kNames) ? kNames[i] : "invalid";
}

DType dtype_from_name(std::string_view name) {
  for (size_t i = 1; i < std::size(kNames); ++i) {
    if (kNames[i] == name) return static_cast<DType>(i);
  }
  if (name == "bool") return DType::kBool;
  return DType::kInvalid;
}

Result<uint64_t> element_count(std::span<const int64_t> shape) {
  uint64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return invalid_argument("dimension " + std::to_string(i) + " is " +
                              std::to_string(shape[i]) + ", must be >= 0");
    }
    uint64_t d = static_cast<uint64_t>(shape[i]);
    if (d != 0 && count > UINT64_MAX / d) {
      return invalid_argument("shape " + shape_to_string(shape) +
                              " has more elements than fit in 64 bits");
    }
    count *= d;
  }
  return count;
}

std::string shape_to_string(std::span<const int64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += shape[i] == -1 ? std::string("?") : std::to_string(shape[i]);  // an open dimension
  }
  return out + "]";
}

Status check_allocation(uint64_t bytes, std::string_view what) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return Status();
  const uint64_t memory = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  if (bytes > memory) {
    return resource_exhausted(std::string(what) + " needs " + std::to_string(bytes) +
                              " bytes, more than this machine's memory (" +
                              std::to_string(memory) + " bytes)");
  }
  return Status();
}

namespace {
Result<uint64_t> checked_bytes(DType dtype, const Shape& shape) {
  size_t es = dtype_size(dtype);
  if (es == 0) {
    return invalid_argument("invalid dtype " +
                            std::to_string(static_cast<int>(dtype)));
  }
  LOOM_ASSIGN_OR_RETURN(uint64_t n, element_count(shape));
  if (n > SIZE_MAX / es) {
    return invalid_argument("tensor of shape " + shape_to_string(shape) +
                            " is too large");
  }
  return n * es;
}
}  // namespace

Result<Tensor> Tensor::zeros(DType dtype, Shape shape) {
  LOOM_ASSIGN_OR_RETURN(uint64_t bytes, checked_bytes(dtype, shape));
  const std::string what = std::string(dtype_name(dtype)) + shape_to_string(shape);
  LOOM_RETURN_IF_ERROR(check_allocation(bytes, what));
  Tensor t;
  t.dtype_ = dtype;
  t.elements_ = bytes / dtype_size(dtype);
  t.shape_ = std::move(shape);
  t.bytes_ = bytes;
  try {
    t.owned_.assign(bytes, std::byte{0});
  } catch (const std::bad_alloc&) {
    return resource_exhausted("cannot allocate " + std::to_string(bytes) + " bytes for a " +
                              what + " tensor");
  } catch (const std::length_error&) {
    return resource_exhausted("cannot allocate " + std::to_string(bytes) + " bytes for a " +
                              what + " tensor");
  }
  t.data_ = t.owned_.data();
  return t;
}

Result<Tensor> Tensor::copy_of(DType dtype, Shape shape,
                               std::span<const std::byte> bytes) {
  LOOM_ASSIGN_OR_RETURN(Tensor t, zeros(dtype, std::move(shape)));
  if (bytes.size() != t.bytes_) {
    return invalid_argument("tensor " + shape_to_string(t.shape_) + " " +
                            std::string(dtype_name(dtype)) + " needs " +
                            std::to_string(t.bytes_) + " bytes, got " +
                            std::to_string(bytes.size()));
  }
  if (!bytes.empty()) std::memcpy(t.data_, bytes.data(), bytes.size());
  return t;
}

Result<Tensor> Tensor::view(DType dtype, Shape shape, void* data, size_t size) {
  LOOM_ASSIGN_OR_RETURN(uint64_t bytes, checked_bytes(dtype, shape));
  if (bytes != size) {
    return invalid_argument("tensor " + shape_to_string(shape) + " " +
                            std::string(dtype_name(dtype)) + " needs " +
                            std::to_string(bytes) + " bytes, got " +
                            std::to_string(size));
  }
  if (data == nullptr && size != 0) {
    return invalid_argument("tensor view of a null pointer");
  }
  Tensor t;
  t.dtype_ = dtype;
  t.elements_ = bytes / dtype_size(dtype);
  t.shape_ = std::move(shape);
  t.bytes_ = bytes;
  t.data_ = data;
  return t;
}

Tensor::Tensor(const Tensor& o)
    : dtype_(o.dtype_), shape_(o.shape_), elements_(o.elements_),
      bytes_(o.bytes_), data_(o.data_), owned_(o.owned_) {
  if (!owned_.empty()) data_ = owned_.data();
}

Tensor& Tensor::operator=(const Tensor& o) {
  if (this != &o) {
    Tensor copy(o);
    *this = std::move(copy);
  }
  return *this;
}

Tensor::Tensor(Tensor&& o) noexcept
    : dtype_(o.dtype_), shape_(std::move(o.shape_)), elements_(o.elements_),
      bytes_(o.bytes_), data_(o.data_), owned_(std::move(o.owned_)) {
  o.data_ = nullptr;
  o.bytes_ = 0;
  o.elements_ = 0;
}

Tensor& Tensor::operator=(Tensor&& o) noexcept {
  dtype_ = o.dtype_;
  shape_ = std::move(o.shape_);
  elements_ = o.elements_;
  bytes_ = o.bytes_;
  data_ = o.data_;
  owned_ = std::move(o.owned_);
  o.data_ = nullptr;
  o.bytes_ = 0;
  o.elements_ = 0;
  return *this;
}

std::string describe_value(const Value& value) {
  switch (value.kind) {
    case Value::Kind::kNone: return "none (an empty optional)";
    case Value::Kind::kTensor:
      return "a tensor (" + std::string(dtype_name(value.tensor.dtype())) + " " + shape_to_string(value.tensor.shape()) +
             ")";
    case Value::Kind::kSequence:
      return "a sequence of " + std::to_string(value.elements.size()) +
             (value.elements.size() == 1 ? " tensor" : " tensors");
  }
  return "a value of unknown kind";
}

}  // namespace loom
