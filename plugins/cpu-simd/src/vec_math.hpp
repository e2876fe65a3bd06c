// exp for the plain kernels, written so that the compiler vectorizes the
// loops that call it (no calls, no branches, no errno): std::exp is a libm
// call per element, which keeps Sigmoid and Softmax an order of magnitude
// below memory bandwidth.
//
// Method: e^x = 2^n * e^r with n = round(x / ln 2) and r = x - n ln 2 in
// [-ln2/2, ln2/2] (ln 2 split in two parts so that r is exact), e^r by its
// Taylor polynomial to degree 7 (truncation below 2^-26 relative), 2^n built
// in the exponent bits in two halves so that n down to -150 gives the
// subnormal results. Measured against double-precision exp in
// tests/unit/cpu_simd/vec_math_test.cpp: within 2 ulp over the whole float
// range; +inf above 88.72, 0 below -103.97, NaN stays NaN.
#pragma once

#include <cstdint>
#include <cstring>

namespace loom::cpu_simd {

inline float bits_to_float(int32_t i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}

// e^r * 2^-n for a finite x, where n = round(x / ln 2) (returned in *n) and
// r = x - n ln 2 in [-ln2/2, ln2/2]: the part vexp and vexp_nonpositive
// share.
inline float exp_reduced(float x, float* n_out) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;       // 12 significant bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.428606765330187045e-06f;  // ln 2 - kLn2Hi
  // Round to nearest by adding and taking away 1.5 * 2^23 (no call, so it
  // vectorizes on every instruction set).
  constexpr float kRound = 12582912.0f;
  const float n = (x * kLog2e + kRound) - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  // e^r, Horner form of sum r^k / k!, k <= 7.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  *n_out = n;
  return p;
}

inline float vexp(float x) {
  // Clamp so that n fits the two exponent halves; the clamped ends still
  // round to +inf and 0.
  const float xc = x > 89.0f ? 89.0f : (x < -104.0f ? -104.0f : x);
  float n;
  const float p = exp_reduced(xc, &n);
  // 2^n = 2^a * 2^b with a = n / 2, b = n - a, each a normal float.
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t a = ni / 2;
  const int32_t b = ni - a;
  const float result = p * bits_to_float((a + 127) << 23) * bits_to_float((b + 127) << 23);
  return x != x ? x : result;
}

// e^x for x <= 0 whose result need not go below the smallest normal float:
// vexp with 2^n built in one step. x below -87.33 gives 2^-126 (about
// 1.2e-38) instead of a subnormal or 0, which Softmax (e^(x - max) beside a
// sum of at least 1) and Sigmoid (exp(-|x|)) cannot tell apart from the
// exact value in f32 arithmetic beyond an absolute 1.2e-38. Within 2 ulp of
// exp above -87.33 (vec_math_test); NaN stays NaN.
inline float vexp_nonpositive(float x) {
  constexpr float kLowest = -87.3365478515625f;  // just above ln(2^-126)
  const float xc = x < kLowest ? kLowest : (x > 0.0f ? 0.0f : x);
  float n;
  const float p = exp_reduced(xc, &n);
  const float result = p * bits_to_float((static_cast<int32_t>(n) + 127) << 23);
  return x != x ? x : result;
}

// erf, vectorizable like vexp. |x| < 1: the Maclaurin series of erf to
// x^23 (the first term left out is below 2^-33 of the result there). Above:
// erf = 1 - erfc, with erfc(a) = t (a1 + t (a2 + t (a3 + t (a4 + t a5))))
// e^(-a^2), t = 1 / (1 + p a), the rational approximation 7.1.26 of
// Abramowitz and Stegun (absolute error below 1.5e-7). Both branches are
// computed and one is selected, so the loop has no branch. Measured against
// double-precision erf in vec_math_test: within 1.5e-7 + 2^-22 relative.
inline float verf(float x) {
  const float a = x < 0.0f ? -x : x;
  // Series: erf(x) = 2/sqrt(pi) * x * sum (-1)^k x^2k / (k! (2k + 1)).
  const float z = x * x;
  float s = -1.0f / 918086400.0f;
  s = s * z + 1.0f / 76204800.0f;
  s = s * z - 1.0f / 6894720.0f;
  s = s * z + 1.0f / 685440.0f;
  s = s * z - 1.0f / 75600.0f;
  s = s * z + 1.0f / 9360.0f;
  s = s * z - 1.0f / 1320.0f;
  s = s * z + 1.0f / 216.0f;
  s = s * z - 1.0f / 42.0f;
  s = s * z + 1.0f / 10.0f;
  s = s * z - 1.0f / 3.0f;
  s = s * z + 1.0f;
  const float small = 1.1283791670955126f * x * s;
  // Rational approximation for a >= 1 (a clamped so that the unused lane
  // of a huge or infinite x stays finite).
  const float ac = a > 10.0f ? 10.0f : a;
  const float t = 1.0f / (1.0f + 0.3275911f * ac);
  float q = 1.061405429f;
  q = q * t - 1.453152027f;
  q = q * t + 1.421413741f;
  q = q * t - 0.284496736f;
  q = q * t + 0.254829592f;
  const float erfc = q * t * vexp(-ac * ac);
  const float large = x < 0.0f ? erfc - 1.0f : 1.0f - erfc;
  const float result = a < 1.0f ? small : large;
  return x != x ? x : result;
}

}  // namespace loom::cpu_simd
