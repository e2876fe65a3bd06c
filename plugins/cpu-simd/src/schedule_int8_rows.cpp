// The eight-wide AVX2 loops of the quantized steps (schedule_int8.cpp):
// the requantization of channels-last QLinearConv rows and per-tensor
// QuantizeLinear / DequantizeLinear of 8-bit values, each bit for bit the
// scalar loops' arithmetic there.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "schedule_int8_step.hpp"

namespace loom::cpu_simd {


// One output position of a channels-last QLinearConv without the R term:
// y[m] = the requantized (acc[m] - xz * tw[m]) wrapped to i32, as bytes
// (u8 or s8), exactly as the scalar loop in run_int8_step: acc is first
// (acc << low_shift) + low where the product took two passes (low not
// null); the
// wrapped sum plus the bias is exact in double, rounded once to float (as
// the int64 -> float conversion), multiplied in float, widened, offset by
// the zero point, bounded (NaN to lo - 1), rounded half to even and clamped.
__attribute__((target("avx2"))) void requantize_row_avx2(const RequantRow& q, const int32_t* acc,
                                                         const int32_t* low, const int32_t* tw, bool y_unsigned,
                                                         uint8_t* y) {
  const __m128i xz = _mm_set1_epi32(q.xz);
  const __m128i shift = _mm_cvtsi32_si128(q.low_shift);
  const __m256d zero = _mm256_set1_pd(q.y_zero);
  const __m256d below = _mm256_set1_pd(q.lo - 1.0), above = _mm256_set1_pd(q.hi + 1.0);
  const __m256d lo = _mm256_set1_pd(q.lo), hi = _mm256_set1_pd(q.hi);
  int64_t m = 0;
  // Eight channels at a time in f32 and i32, exactly the arithmetic below:
  // wrapped + bias in i32 (a block where that overflows takes the loop
  // below), converted to float once (the int64 -> float rounding of the same
  // integer), times the multiplier; then s = scaled bounded to [lo - 1 -
  // y_zero, hi + 1 - y_zero] (NaN to the low bound, as below), r = s rounded
  // half to even and y = r + y_zero, except where s is a tie (s - r = +-0.5)
  // and y_zero is odd: s + y_zero's even neighbour is then r + y_zero + 2 (s
  // - r). The same value as rounding s + y_zero half to even in double.
  const __m256i xz8 = _mm256_set1_epi32(q.xz), yz8 = _mm256_set1_epi32(q.y_zero_i);
  const __m256 lo8 = _mm256_set1_ps(static_cast<float>(q.lo - 1.0 - q.y_zero));
  const __m256 hi8 = _mm256_set1_ps(static_cast<float>(q.hi + 1.0 - q.y_zero));
  const __m256i lo8i = _mm256_set1_epi32(static_cast<int32_t>(q.lo)), hi8i = _mm256_set1_epi32(static_cast<int32_t>(q.hi));
  const __m256 half = _mm256_set1_ps(0.5f), sign = _mm256_set1_ps(-0.0f);
  // Rounding first leaves nothing to correct: r + y_zero is the result.
  const bool odd_zero = (q.y_zero_i & 1) != 0 && !q.round_first;
  for (; m + 8 <= q.channels; m += 8) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + m));
    if (low != nullptr) {
      a = _mm256_add_epi32(_mm256_sll_epi32(a, shift), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(low + m)));
    }
    const __m256i t = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tw + m));
    const __m256i wrapped = _mm256_sub_epi32(a, _mm256_mullo_epi32(t, xz8));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.bias32 + m));
    const __m256i sum = _mm256_add_epi32(wrapped, b);
    const __m256i over = _mm256_and_si256(_mm256_xor_si256(wrapped, sum), _mm256_xor_si256(b, sum));
    if (_mm256_movemask_ps(_mm256_castsi256_ps(over)) != 0) break;  // the rest in the loop below
    __m256 sc = _mm256_mul_ps(_mm256_cvtepi32_ps(sum), _mm256_loadu_ps(q.mult + m));
    sc = _mm256_min_ps(_mm256_max_ps(sc, lo8), hi8);  // max_ps gives lo8 for NaN
    const __m256 r = _mm256_round_ps(sc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i y8 = _mm256_add_epi32(_mm256_cvtps_epi32(r), yz8);
    if (odd_zero) {
      const __m256 frac = _mm256_sub_ps(sc, r);  // exact
      const __m256 tie = _mm256_cmp_ps(_mm256_andnot_ps(sign, frac), half, _CMP_EQ_OQ);
      const __m256 step = _mm256_and_ps(tie, _mm256_add_ps(frac, frac));  // +-1 on ties, else 0
      y8 = _mm256_add_epi32(y8, _mm256_cvtps_epi32(step));
    }
    y8 = _mm256_min_epi32(_mm256_max_epi32(y8, lo8i), hi8i);
    const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(y8), _mm256_extracti128_si256(y8, 1));
    const __m128i bytes = y_unsigned ? _mm_packus_epi16(words, words) : _mm_packs_epi16(words, words);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + m), bytes);
  }
  for (; m < q.channels; m += 4) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(acc + m));
    if (low != nullptr) {
      a = _mm_add_epi32(_mm_sll_epi32(a, shift), _mm_loadu_si128(reinterpret_cast<const __m128i*>(low + m)));
    }
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(tw + m));
    const __m128i wrapped = _mm_sub_epi32(a, _mm_mullo_epi32(t, xz));
    const __m256d with_bias = _mm256_add_pd(_mm256_cvtepi32_pd(wrapped), _mm256_loadu_pd(q.bias + m));
    const __m128 scaled = _mm_mul_ps(_mm256_cvtpd_ps(with_bias), _mm_loadu_ps(q.mult + m));
    __m256d v = _mm256_cvtps_pd(scaled);
    if (q.round_first) {
      // Bounded first (NaN to `below` - zero), so that the rounding is exact.
      v = _mm256_min_pd(_mm256_max_pd(v, _mm256_sub_pd(below, zero)), _mm256_sub_pd(above, zero));
      v = _mm256_add_pd(_mm256_round_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zero);
    } else {
      v = _mm256_add_pd(v, zero);
      v = _mm256_min_pd(_mm256_max_pd(v, below), above);  // max_pd gives `below` for NaN
      v = _mm256_round_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    v = _mm256_min_pd(_mm256_max_pd(v, lo), hi);
    const __m128i r = _mm256_cvtpd_epi32(v);  // within [lo, hi], so the packs below do not saturate
    const __m128i bytes =
        y_unsigned ? _mm_packus_epi16(_mm_packus_epi32(r, r), r) : _mm_packs_epi16(_mm_packs_epi32(r, r), r);
    const int32_t four = _mm_cvtsi128_si32(bytes);
    std::memcpy(y + m, &four, 4);
  }
}

// Per-tensor QuantizeLinear of x[0, count), count a multiple of 8, eight at a
// time: the same arithmetic as quantize_loop (the quotient in f32, rounded
// half to even, plus the zero point, clamped, NaN to 0), bit for bit.
__attribute__((target("avx2"))) void quantize_rows_avx2(const float* x, int64_t count, float scale, float zero,
                                                        bool is_unsigned, uint8_t* y) {
  const __m256 sc = _mm256_set1_ps(scale), z = _mm256_set1_ps(zero);
  const __m256 lo = _mm256_set1_ps(is_unsigned ? 0.0f : -128.0f), hi = _mm256_set1_ps(is_unsigned ? 255.0f : 127.0f);
  for (int64_t i = 0; i < count; i += 8) {
    __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), sc);
    v = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    v = _mm256_andnot_ps(nan, v);  // NaN to 0
    const __m256i r = _mm256_cvtps_epi32(v);  // whole numbers within the type's range
    const __m128i a = _mm256_castsi256_si128(r), b = _mm256_extracti128_si256(r, 1);
    const __m128i words = _mm_packs_epi32(a, b);
    const __m128i bytes = is_unsigned ? _mm_packus_epi16(words, words) : _mm_packs_epi16(words, words);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), bytes);
  }
}

// Per-tensor DequantizeLinear of 8-bit x[0, count), count a multiple of 8,
// eight at a time: float(x - zero) * scale as the scalar loop, bit for bit.
__attribute__((target("avx2"))) void dequantize_rows_avx2(const void* x, int64_t count, float scale, int32_t zero,
                                                          bool is_unsigned, float* y) {
  const __m256 sc = _mm256_set1_ps(scale);
  const __m256i z = _mm256_set1_epi32(zero);
  const auto* bytes = static_cast<const uint8_t*>(x);
  for (int64_t i = 0; i < count; i += 8) {
    const __m128i eight = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes + i));
    const __m256i wide = is_unsigned ? _mm256_cvtepu8_epi32(eight) : _mm256_cvtepi8_epi32(eight);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(wide, z)), sc));
  }
}

}  // namespace loom::cpu_simd
