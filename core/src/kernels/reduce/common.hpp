// Element conversions the reduce family's templates share: every arithmetic
// dtype goes through double (f16/bf16 via float) and back, with integer
// results clamped so that a conversion is never undefined behaviour.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/util.hpp"

namespace loom::kernels::reduce {

template <typename T>
inline double to_double(T x) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return static_cast<double>(to_float(x));
  } else {
    return static_cast<double>(x);
  }
}

template <typename T>
inline T from_double(double d) {
  if constexpr (std::is_same_v<T, Half>) {
    return to_half(static_cast<float>(d));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return to_bfloat16(static_cast<float>(d));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(d);
  } else {
    if (std::isnan(d)) return T{0};
    // Clamp in double first: converting an out-of-range double is UB.
    const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (d <= lo) return std::numeric_limits<T>::lowest();
    if (d >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(d);
  }
}

// A value comparable with < and > (f16/bf16 as float, others unchanged).
template <typename T>
inline auto comparable(T x) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return to_float(x);
  } else {
    return x;
  }
}

// Whether the reductions and Einsum take this dtype: every arithmetic one.
inline bool supported(DType d) { return d != DType::kBool && dtype_size(d) != 0; }

template <typename T>
inline constexpr bool kIsFloatLike = std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                                     std::is_same_v<T, BFloat16>;

}  // namespace loom::kernels::reduce
