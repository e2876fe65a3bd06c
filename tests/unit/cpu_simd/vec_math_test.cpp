// cpu-simd's vectorizable exp and erf (plugins/cpu-simd/src/vec_math.hpp)
// against double precision over the float range they serve.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "vec_math.hpp"

namespace loom::cpu_simd {
namespace {

int32_t ordered(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i < 0 ? INT32_MIN - i : i;
}

// Distance in units in the last place between two finite floats.
int64_t ulps(float a, float b) { return std::llabs(static_cast<int64_t>(ordered(a)) - ordered(b)); }

// The largest ulp distance of f from double-precision exp over every
// step-th float in [lo, hi]; *checked gets how many were compared.
template <typename F>
int64_t worst_exp_ulps(F f, float lo, float hi, int32_t step, float* worst_x, size_t* checked) {
  int64_t worst = 0;
  *checked = 0;
  for (int64_t k = ordered(lo); k <= ordered(hi); k += step) {
    int32_t bits = static_cast<int32_t>(k < 0 ? INT32_MIN - k : k);
    float x;
    std::memcpy(&x, &bits, sizeof x);
    const int64_t d = ulps(f(x), static_cast<float>(std::exp(static_cast<double>(x))));
    if (d > worst) {
      worst = d;
      *worst_x = x;
    }
    ++*checked;
  }
  return worst;
}

TEST(VecMath, ExpIsWithinTwoUlpsOverTheFloatRange) {
  float worst_x = 0;
  size_t checked = 0;
  // Every 127th float from -104 up to 88.7 (about 17 million values).
  const int64_t worst = worst_exp_ulps(vexp, -104.0f, 88.7f, 127, &worst_x, &checked);
  EXPECT_GT(checked, 1000000u);
  EXPECT_LE(worst, 2) << "at x = " << worst_x << ": " << vexp(worst_x) << " vs "
                      << std::exp(static_cast<double>(worst_x));
}

TEST(VecMath, ExpEdges) {
  EXPECT_EQ(vexp(0.0f), 1.0f);
  EXPECT_EQ(vexp(-0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(vexp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(vexp(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(vexp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(vexp(88.8f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(vexp(1000.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(vexp(-1000.0f), 0.0f);
  // Subnormal results: e^-100 = 3.72e-44, 27 times the smallest subnormal.
  EXPECT_NEAR(vexp(-100.0f), 3.720075976020836e-44, 1.5e-45);
  EXPECT_GT(vexp(-87.5f), 0.0f);
}

// The Softmax / Sigmoid variant: within 2 ulp for x in [-87.33, 0]; below,
// the smallest normal float; NaN stays NaN.
TEST(VecMath, ExpOfNonPositiveIsWithinTwoUlpsDownToTheSmallestNormal) {
  float worst_x = 0;
  size_t checked = 0;
  const int64_t worst = worst_exp_ulps(vexp_nonpositive, -87.33f, 0.0f, 61, &worst_x, &checked);
  EXPECT_GT(checked, 1000000u);
  EXPECT_LE(worst, 2) << "at x = " << worst_x;
  const float smallest_normal = std::numeric_limits<float>::min();
  for (float x : {-87.34f, -90.0f, -103.9f, -1000.0f, -std::numeric_limits<float>::infinity()}) {
    EXPECT_GE(vexp_nonpositive(x), smallest_normal * 0.999f) << x;
    EXPECT_LE(vexp_nonpositive(x), smallest_normal * 1.001f) << x;
  }
  EXPECT_EQ(vexp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(vexp_nonpositive(-0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(vexp_nonpositive(std::numeric_limits<float>::quiet_NaN())));
}

// Within 1.5e-7 (the rational approximation's bound) plus 2^-22 of the
// value: a few ulp near 1, and a few ulp relative for small |x|, where the
// series serves (plus two subnormal steps for subnormal x).
TEST(VecMath, ErfIsCloseOverTheFloatRange) {
  double worst = 0;
  float worst_x = 0;
  size_t checked = 0;
  const int32_t lo = ordered(-6.0f), hi = ordered(6.0f);
  for (int64_t k = lo; k <= hi; k += 1999) {
    int32_t bits = static_cast<int32_t>(k < 0 ? INT32_MIN - k : k);
    float x;
    std::memcpy(&x, &bits, sizeof x);
    const double want = std::erf(static_cast<double>(x));
    const double err = std::fabs(static_cast<double>(verf(x)) - want);
    const double bound = (std::fabs(x) < 1.0f ? 3e-45 : 1.5e-7) + std::fabs(want) * 0x1p-22;
    if (err / bound > worst) {
      worst = err / bound;
      worst_x = x;
    }
    ++checked;
  }
  EXPECT_GT(checked, 1000000u);
  EXPECT_LE(worst, 1.0) << "at x = " << worst_x << ": " << verf(worst_x) << " vs "
                        << std::erf(static_cast<double>(worst_x));
}

TEST(VecMath, ErfEdges) {
  EXPECT_EQ(verf(0.0f), 0.0f);
  EXPECT_NEAR(verf(1e-30f), 1.1283791670955126e-30, 1.2e-30 * 0x1p-22);
  EXPECT_EQ(verf(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(verf(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_EQ(verf(1000.0f), 1.0f);
  EXPECT_TRUE(std::isnan(verf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(verf(-0.3f), -verf(0.3f));
  EXPECT_EQ(verf(-2.0f), -verf(2.0f));
}

}  // namespace
}  // namespace loom::cpu_simd
