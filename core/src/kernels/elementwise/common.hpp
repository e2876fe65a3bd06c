// Shared pieces of the elementwise family: operand checks for any dtype, the
// arithmetic type each element type computes in, a saturating conversion
// between element types (Cast, Pow's mixed dtypes, QuantizeLinear), and a
// broadcast over up to three operands (Where, the variadic ops).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernels/broadcast.hpp"
#include "kernels/kernel.hpp"
#include "kernels/util.hpp"

namespace loom::kernels::elementwise {

// The registration of each source file of the family; elementwise/registry.cpp
// calls them all.
void register_unary(KernelRegistry& r);
void register_binary(KernelRegistry& r);
void register_misc(KernelRegistry& r);

// `t` has dtype `want` (or any dtype when `want` is kInvalid), a byte_size
// matching its shape and data when it is not empty.
Status check_operand(std::string_view op, std::string_view name, const TensorRef& t,
                     DType want = DType::kInvalid);
// `t` has exactly the dtype `want` (infer time).
Status check_dtype(std::string_view op, std::string_view name, DType got, DType want);
// The error for an element type the op does not implement (kUnimplemented).
Status unsupported_dtype(std::string_view op, std::string_view name, DType dtype);
// The element count of a checked operand.
inline size_t count_of(const TensorRef& t) {
  const size_t es = dtype_size(t.dtype);
  return es == 0 ? 0 : t.byte_size / es;
}
// "Y is [2], expected [3]" when `actual` differs from `expected`.
Status check_shape(std::string_view op, std::string_view name,
                   std::span<const int64_t> actual, std::span<const int64_t> expected);
// Element-count check of an infer-time shape (negative dims, overflow).
Status check_infer_shape(std::string_view op, std::string_view name,
                         std::span<const int64_t> shape);

// f16/bf16 compute in float; every other type in itself.
template <typename T>
struct ComputeOf {
  using type = T;
};
template <>
struct ComputeOf<Half> {
  using type = float;
};
template <>
struct ComputeOf<BFloat16> {
  using type = float;
};
template <typename T>
using compute_t = typename ComputeOf<T>::type;

template <typename T>
inline constexpr bool is_half_like = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <typename T>
inline constexpr bool is_floating = std::is_floating_point_v<T> || is_half_like<T>;
template <typename T>
inline constexpr bool is_integer = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <typename T>
inline compute_t<T> load(T v) {
  if constexpr (is_half_like<T>) {
    return to_float(v);
  } else {
    return v;
  }
}

// Converts between element types the way Cast does: floats to integers
// truncate toward zero, NaN becomes 0 and out-of-range values saturate (the
// C++ conversion would be undefined); integers wrap; anything to bool is
// `!= 0`.
template <typename To, typename From>
inline To convert(From from) {
  if constexpr (std::is_same_v<To, From>) {
    return from;
  } else if constexpr (is_half_like<From>) {
    return convert<To>(to_float(from));
  } else if constexpr (std::is_same_v<To, Half>) {
    return to_half(static_cast<float>(from));
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return to_bfloat16(static_cast<float>(from));
  } else if constexpr (std::is_same_v<To, bool>) {
    return from != From{0};
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    const double d = static_cast<double>(from);
    if (std::isnan(d)) return To{0};
    // Limits as doubles: max() of 64-bit types rounds up to 2^63/2^64, so
    // compare with >= against that bound.
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::lowest());
    constexpr double hi = static_cast<double>(std::numeric_limits<To>::max());
    if (d <= lo) return std::numeric_limits<To>::lowest();
    if (d >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(d);
  } else {
    return static_cast<To>(from);
  }
}

template <typename T, typename C>
inline T store(C v) {
  if constexpr (std::is_same_v<T, Half>) {
    return to_half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return to_bfloat16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Broadcast of up to kMaxOperands shapes into one output shape; for each
// output element the element offset into every operand.
inline constexpr size_t kMaxOperands = 3;
struct NaryPlan {
  size_t rank = 0;
  size_t operands = 0;
  std::array<int64_t, kMaxKernelRank> dims{};
  std::array<std::array<int64_t, kMaxKernelRank>, kMaxOperands> strides{};
  int64_t count() const {
    int64_t n = 1;
    for (size_t d = 0; d < rank; ++d) n *= dims[d];
    return n;
  }
  std::span<const int64_t> shape() const { return {dims.data(), rank}; }
};

// Broadcasts the shapes (numpy rules); the error names `op` and the operand
// names in `names`.
Status plan_nary(std::string_view op, std::span<const std::span<const int64_t>> shapes,
                 std::span<const std::string_view> names, NaryPlan* plan);
// The broadcast shape at infer time.
Result<Shape> nary_shape(std::string_view op, std::span<const Shape> shapes,
                         std::span<const std::string_view> names);

// Calls fn(out, std::array offsets) for every output element in order.
template <typename Fn>
void for_each_nary(const NaryPlan& plan, Fn&& fn) {
  const int64_t total = plan.count();
  if (total == 0) return;
  std::array<int64_t, kMaxOperands> base{};
  if (plan.rank == 0) {
    fn(int64_t{0}, base);
    return;
  }
  std::array<int64_t, kMaxKernelRank> index{};
  const size_t last = plan.rank - 1;
  for (int64_t out = 0; out < total;) {
    std::array<int64_t, kMaxOperands> off = base;
    for (int64_t j = 0; j < plan.dims[last]; ++j, ++out) {
      fn(out, off);
      for (size_t k = 0; k < plan.operands; ++k) off[k] += plan.strides[k][last];
    }
    for (size_t d = last; d-- > 0;) {
      ++index[d];
      for (size_t k = 0; k < plan.operands; ++k) base[k] += plan.strides[k][d];
      if (index[d] < plan.dims[d]) break;
      for (size_t k = 0; k < plan.operands; ++k) base[k] -= plan.strides[k][d] * index[d];
      index[d] = 0;
    }
  }
}

}  // namespace loom::kernels::elementwise
