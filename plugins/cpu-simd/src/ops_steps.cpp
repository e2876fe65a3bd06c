// Kernels of the schedule's own steps (schedule.cpp): the 256-byte table of
// a DequantizeLinear -> unary operators -> QuantizeLinear chain, the add of
// two dequantized tensors quantized again in one pass, and the global
// average pool of channels-last f32 data. Compiled once per instruction set
// like ops.cpp; select_kernels (schedule_isa.cpp) picks one. Built with
// -ffp-contract=off: quant_add must round each product and the sum as the
// unfused steps do, never as one fused multiply-add.
#include <cmath>
#include <cstring>
#include <limits>

#include "ops.hpp"

#ifndef LOOM_CPU_SIMD_ISA
#define LOOM_CPU_SIMD_ISA isa_baseline
#endif

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace loom::cpu_simd {
namespace LOOM_CPU_SIMD_ISA {

#if defined(__AVX512BW__)

// AVX-512 VBMI: vpermi2b looks up 64 bytes in a table of 128 (the index's
// low 7 bits), so two lookups and a blend on each byte's top bit cover the
// 256 entries. select_kernels hands this build's lookup_bytes out only when
// CPUID reports avx512vbmi; the target attribute adds it to this function.
namespace {

__attribute__((target("avx512vbmi"))) inline __m512i look_up_64(__m512i v, __m512i t0, __m512i t1, __m512i t2,
                                                               __m512i t3) {
  const __m512i low = _mm512_permutex2var_epi8(t0, v, t1);
  const __m512i high = _mm512_permutex2var_epi8(t2, v, t3);
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), low, high);
}

}  // namespace

__attribute__((target("avx512vbmi"))) void lookup_bytes(const uint8_t* x, uint8_t* y, size_t n,
                                                        const uint8_t* table) {
  const __m512i t0 = _mm512_loadu_si512(table);
  const __m512i t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128);
  const __m512i t3 = _mm512_loadu_si512(table + 192);
  size_t e = 0;
  for (; e + 64 <= n; e += 64) {
    _mm512_storeu_si512(y + e, look_up_64(_mm512_loadu_si512(x + e), t0, t1, t2, t3));
  }
  if (e < n) {
    const __mmask64 k = (uint64_t{1} << (n - e)) - 1;
    _mm512_mask_storeu_epi8(y + e, k, look_up_64(_mm512_maskz_loadu_epi8(k, x + e), t0, t1, t2, t3));
  }
}

#elif defined(__AVX2__)

// AVX2: vpshufb looks up 32 bytes in 16-entry rows by the low nibble; each
// of the 16 rows is kept where the high nibble names it.
void lookup_bytes(const uint8_t* x, uint8_t* y, size_t n, const uint8_t* table) {
  __m256i rows[16];
  for (int r = 0; r < 16; ++r) {
    rows[r] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table + 16 * r)));
  }
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  size_t e = 0;
  for (; e + 32 <= n; e += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + e));
    const __m256i low = _mm256_and_si256(v, nibble);
    const __m256i high = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
    __m256i out = _mm256_setzero_si256();
    for (int r = 0; r < 16; ++r) {
      const __m256i here = _mm256_cmpeq_epi8(high, _mm256_set1_epi8(static_cast<char>(r)));
      out = _mm256_blendv_epi8(out, _mm256_shuffle_epi8(rows[r], low), here);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + e), out);
  }
  for (; e < n; ++e) y[e] = table[x[e]];
}

#else

void lookup_bytes(const uint8_t* x, uint8_t* y, size_t n, const uint8_t* table) {
  // A local copy: a byte store through y may alias the table, which the
  // compiler would otherwise read again after every one.
  uint8_t local[256];
  std::memcpy(local, table, sizeof local);
  for (size_t e = 0; e < n; ++e) y[e] = local[x[e]];
}

#endif

void global_average_nhwc(const float* x, float* y, int64_t n, int64_t c, int64_t hw) {
  const float inv = 1.0f / static_cast<float>(hw);
  for (int64_t b = 0; b < n; ++b) {
    // Per channel the sum runs over the pixels in order, as the plain
    // kernel's does; the vectors run across channels.
    float* __restrict row = y + b * c;
    for (int64_t j = 0; j < c; ++j) row[j] = 0.0f;
    for (int64_t s = 0; s < hw; ++s) {
      const float* __restrict px = x + (b * hw + s) * c;
      for (int64_t j = 0; j < c; ++j) row[j] += px[j];
    }
    for (int64_t j = 0; j < c; ++j) row[j] *= inv;
  }
}

namespace {

// The unfused steps' arithmetic, element by element: each DequantizeLinear
// float(x - zero) * scale (schedule_int8.cpp), the f32 Add (or Mul), and the
// QuantizeLinear's quotient rounded half to even plus the zero point,
// saturated; NaN (an infinite product of huge scales times 0, or opposite
// infinities added) becomes 0, as the QuantizeLinear step makes it.
template <bool kMultiply, typename A, typename B, typename Y>
void quant_binary_run(const A* __restrict a, const B* __restrict b, Y* __restrict y, size_t n,
                      const QuantAddParams& q) {
  const float lo = static_cast<float>(std::numeric_limits<Y>::min());
  const float hi = static_cast<float>(std::numeric_limits<Y>::max());
  const float as = q.a_scale, bs = q.b_scale, ys = q.y_scale, yz = static_cast<float>(q.y_zero);
  const int32_t az = q.a_zero, bz = q.b_zero;
  for (size_t e = 0; e < n; ++e) {
    const float fa = static_cast<float>(static_cast<int32_t>(a[e]) - az) * as;
    const float fb = static_cast<float>(static_cast<int32_t>(b[e]) - bz) * bs;
    float v = std::nearbyint((kMultiply ? fa * fb : fa + fb) / ys) + yz;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    v = v == v ? v : 0.0f;
    y[e] = static_cast<Y>(static_cast<int32_t>(v));
  }
}

template <typename A, typename B, typename Y>
void quant_add_run(const A* __restrict a, const B* __restrict b, Y* __restrict y, size_t n,
                   const QuantAddParams& q) {
  if (q.multiply) {
    quant_binary_run<true>(a, b, y, n, q);
  } else {
    quant_binary_run<false>(a, b, y, n, q);
  }
}

template <typename A, typename B>
void quant_add_to(const A* a, const B* b, void* y, size_t n, const QuantAddParams& q) {
  if (q.y_unsigned) {
    quant_add_run(a, b, static_cast<uint8_t*>(y), n, q);
  } else {
    quant_add_run(a, b, static_cast<int8_t*>(y), n, q);
  }
}

template <typename A>
void quant_add_from(const A* a, const void* b, void* y, size_t n, const QuantAddParams& q) {
  if (q.b_unsigned) {
    quant_add_to(a, static_cast<const uint8_t*>(b), y, n, q);
  } else {
    quant_add_to(a, static_cast<const int8_t*>(b), y, n, q);
  }
}

}  // namespace

void quant_add(const void* a, const void* b, void* y, size_t n, const QuantAddParams& q) {
  if (q.a_unsigned) {
    quant_add_from(static_cast<const uint8_t*>(a), b, y, n, q);
  } else {
    quant_add_from(static_cast<const int8_t*>(a), b, y, n, q);
  }
}

}  // namespace LOOM_CPU_SIMD_ISA
}  // namespace loom::cpu_simd
