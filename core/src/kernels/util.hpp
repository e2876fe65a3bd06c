// Helpers every family of reference kernels shares: dtype dispatch, f16/bf16
// conversion, reading the integer operands that decide shapes, axis
// normalization. Header-only; nothing here allocates unless it returns a
// vector.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernels/kernel.hpp"

namespace loom::kernels {

// IEEE half and bfloat16 as distinct element types for templates; the bits
// are converted to float for arithmetic and back with round-to-nearest-even.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

inline float to_float(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1fu;
  uint32_t mant = h.bits & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: renormalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      out = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

inline Half to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return {static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u))};
  }
  if (abs >= 0x477ff000u) return {static_cast<uint16_t>(sign | 0x7c00u)};  // overflow to inf
  if (abs < 0x38800000u) {  // result is subnormal or zero
    if (abs < 0x33000000u) return {sign};
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14 + (113 - exp) - 1 ... shift into 10 bits
    const uint32_t half_mant = mant >> (shift - 0);
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    uint32_t r = half_mant;
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return {static_cast<uint16_t>(sign | r)};
  }
  uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  const uint32_t rem = r & 0x1fffu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return {static_cast<uint16_t>(sign | r)};
}

inline float to_float(BFloat16 b) {
  const uint32_t x = static_cast<uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

inline BFloat16 to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((x >> 16) | 0x40u)};
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return {static_cast<uint16_t>((x + rounding) >> 16)};
}

// The C++ element type of each DType.
template <DType D>
struct DTypeTraits;
#define LOOM_KERNELS_DTYPE(D, T)  \
  template <>                     \
  struct DTypeTraits<DType::D> {  \
    using type = T;               \
  };
LOOM_KERNELS_DTYPE(kF32, float)
LOOM_KERNELS_DTYPE(kF64, double)
LOOM_KERNELS_DTYPE(kF16, Half)
LOOM_KERNELS_DTYPE(kBF16, BFloat16)
LOOM_KERNELS_DTYPE(kI8, int8_t)
LOOM_KERNELS_DTYPE(kI16, int16_t)
LOOM_KERNELS_DTYPE(kI32, int32_t)
LOOM_KERNELS_DTYPE(kI64, int64_t)
LOOM_KERNELS_DTYPE(kU8, uint8_t)
LOOM_KERNELS_DTYPE(kU16, uint16_t)
LOOM_KERNELS_DTYPE(kU32, uint32_t)
LOOM_KERNELS_DTYPE(kU64, uint64_t)
LOOM_KERNELS_DTYPE(kBool, bool)
#undef LOOM_KERNELS_DTYPE

// Calls fn.template operator()<T>() with T the element type of `dtype` and
// returns its Status; an error naming `op` for kInvalid or unknown values.
// Families that support fewer types check the dtype first.
template <typename Fn>
Status visit_dtype(std::string_view op, DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: return fn.template operator()<float>();
    case DType::kF64: return fn.template operator()<double>();
    case DType::kF16: return fn.template operator()<Half>();
    case DType::kBF16: return fn.template operator()<BFloat16>();
    case DType::kI8: return fn.template operator()<int8_t>();
    case DType::kI16: return fn.template operator()<int16_t>();
    case DType::kI32: return fn.template operator()<int32_t>();
    case DType::kI64: return fn.template operator()<int64_t>();
    case DType::kU8: return fn.template operator()<uint8_t>();
    case DType::kU16: return fn.template operator()<uint16_t>();
    case DType::kU32: return fn.template operator()<uint32_t>();
    case DType::kU64: return fn.template operator()<uint64_t>();
    case DType::kBool: return fn.template operator()<bool>();
    case DType::kInvalid: break;
  }
  return invalid_argument(std::string(op) + ": unsupported element type " +
                          std::to_string(static_cast<unsigned>(dtype)));
}

inline bool is_float_dtype(DType d) {
  return d == DType::kF32 || d == DType::kF64 || d == DType::kF16 || d == DType::kBF16;
}
inline bool is_int_dtype(DType d) {
  return d == DType::kI8 || d == DType::kI16 || d == DType::kI32 || d == DType::kI64 ||
         d == DType::kU8 || d == DType::kU16 || d == DType::kU32 || d == DType::kU64;
}

// The integers of an i32 or i64 operand (Reshape's shape, Slice's starts,
// TopK's k, ...), with `name` and `op` in the error when the dtype is
// another one or the data is missing.
inline Result<std::vector<int64_t>> read_ints(std::string_view op, std::string_view name,
                                              const TensorRef& t) {
  const size_t es = dtype_size(t.dtype);
  if ((t.dtype != DType::kI64 && t.dtype != DType::kI32) || es == 0) {
    return invalid_argument(std::string(op) + ": operand '" + std::string(name) +
                            "' must be i32 or i64, got " + std::string(dtype_name(t.dtype)));
  }
  auto count = element_count(t.shape);
  if (!count.ok() || *count * es != t.byte_size || (t.data == nullptr && *count != 0)) {
    return invalid_argument(std::string(op) + ": operand '" + std::string(name) +
                            "' has no data matching its shape " + shape_to_string(t.shape));
  }
  std::vector<int64_t> out(*count);
  for (uint64_t i = 0; i < *count; ++i) {
    if (t.dtype == DType::kI64) {
      std::memcpy(&out[i], static_cast<const std::byte*>(t.data) + i * 8, 8);
    } else {
      int32_t v;
      std::memcpy(&v, static_cast<const std::byte*>(t.data) + i * 4, 4);
      out[i] = v;
    }
  }
  return out;
}

// The same, at infer time: needs_constant() when the operand's contents are
// not known.
inline Result<std::vector<int64_t>> constant_ints(std::string_view op, size_t index,
                                                  std::string_view name, const TensorType& t) {
  if (t.value == nullptr) return needs_constant(op, index, name);
  return read_ints(op, name, *t.value);
}

// `axis` in [-rank, rank) made non-negative; an error naming `op` otherwise.
inline Result<int64_t> normalize_axis(std::string_view op, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return invalid_argument(std::string(op) + ": axis " + std::to_string(axis) +
                            " out of range for rank " + std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

}  // namespace loom::kernels
