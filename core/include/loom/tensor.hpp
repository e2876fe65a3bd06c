// Element types, shapes and host tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/status.hpp"

namespace loom {

// Element types; the values equal loom_dtype_t and the container's DType.
enum class DType : uint8_t {
  kInvalid = 0,
  kF32 = 1,
  kF16 = 2,
  kBF16 = 3,
  kF64 = 4,
  kI8 = 5,
  kI16 = 6,
  kI32 = 7,
  kI64 = 8,
  kU8 = 9,
  kU16 = 10,
  kU32 = 11,
  kU64 = 12,
  kBool = 13,
};

// Bytes per element; 0 for kInvalid or an unknown value.
size_t dtype_size(DType dtype);
// Short name as used in ABI reflection and .npy headers' spirit: "f32", "i64".
std::string_view dtype_name(DType dtype);
// Parses dtype_name()'s output; kInvalid when unknown.
DType dtype_from_name(std::string_view name);

using Shape = std::vector<int64_t>;

// Number of elements of `shape`, or an error when a dimension is negative or
// the product overflows.
Result<uint64_t> element_count(std::span<const int64_t> shape);
// "[1, 3, 224, 224]"; an open dimension (-1, in an open-shape signature) as "?".
std::string shape_to_string(std::span<const int64_t> shape);

// RESOURCE_EXHAUSTED, naming `what`, when `bytes` is more than this machine's
// physical memory: a size read from a file is checked before it is allocated,
// so that a declared 2^40-element tensor is an error, not an abort.
Status check_allocation(uint64_t bytes, std::string_view what);

// A dense, row-major tensor in host memory. It either owns its bytes or views
// bytes owned by someone else (a mapped program, a caller's array); a view
// must not outlive them. Copying a Tensor copies the bytes when it owns them
// and the pointer when it views them. Not thread-safe for concurrent writes.
class Tensor {
 public:
  Tensor() = default;

  // An owned, zero-filled tensor. Fails on a bad shape or dtype.
  static Result<Tensor> zeros(DType dtype, Shape shape);
  // An owned copy of `bytes`, which must hold exactly the tensor's bytes.
  static Result<Tensor> copy_of(DType dtype, Shape shape,
                                std::span<const std::byte> bytes);
  // A view of `data`; `size` must equal the tensor's byte size.
  static Result<Tensor> view(DType dtype, Shape shape, void* data,
                             size_t size);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  uint64_t element_count() const { return elements_; }
  size_t byte_size() const { return bytes_; }
  bool owns_data() const { return !owned_.empty() || (bytes_ == 0 && data_ == nullptr); }

  void* data() { return data_; }
  const void* data() const { return data_; }
  template <typename T>
  T* data_as() { return static_cast<T*>(data_); }
  template <typename T>
  const T* data_as() const { return static_cast<const T*>(data_); }
  std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(data_), bytes_};
  }

  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;

 private:
  DType dtype_ = DType::kInvalid;
  Shape shape_;
  uint64_t elements_ = 0;
  size_t bytes_ = 0;
  void* data_ = nullptr;
  std::vector<std::byte> owned_;  // empty for views
};

}  // namespace loom
