// Kernels of the schedule's own steps (schedule.cpp): the 256-byte table of
// a DequantizeLinear -> unary operators -> QuantizeLinear chain, the add of
// two dequantized tensors quantized again in one pass, and the global
// average pool of channels-last f32 data. Compiled once per instruction set
// like ops.cpp; select_kernels (schedule_isa.cpp) picks one. Built with
// -ffp-contract=off: quant_add fuses a multiply and an add only where it
// calls std::fma (QuantAddParams), never where the compiler would choose.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

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

template <typename Y>
inline Y saturate(float v) {
  const float lo = static_cast<float>(std::numeric_limits<Y>::min());
  const float hi = static_cast<float>(std::numeric_limits<Y>::max());
  v = std::nearbyint(v);
  v = v < lo ? lo : v;
  v = v > hi ? hi : v;
  v = v == v ? v : 0.0f;
  return static_cast<Y>(static_cast<int32_t>(v));
}

// One run of n outputs; a and b advance by sa and sb (0: the same value
// throughout the run, 1: the next value). QuantAddParams gives the
// arithmetic: explicit std::fma where it fuses, every other product and
// sum rounded on its own (-ffp-contract=off).
#if defined(__AVX2__)

// The same arithmetic eight (AVX2) or sixteen (AVX-512) outputs at a time:
// each 8-bit value widened to i32 and converted to f32 exactly, the fused
// multiply-adds as _mm*_fmadd_ps, every other product and sum on its own;
// the result clamped to the output type's range in f32 (NaN to 0, as the
// scalar saturate does), then converted, which rounds half to even in the
// default rounding mode as nearbyint does. Returns how many outputs it
// wrote (a multiple of the width); the caller's loop takes the rest.
#if defined(__AVX512F__)
constexpr int64_t kQuantWidth = 16;
// All lanes: the masked forms of the intrinsics, whose unmasked forms start
// from _mm512_undefined_*, which GCC 12 reports as maybe uninitialized.
constexpr __mmask16 kAll16 = 0xFFFF;
using QVec = __m512;
using QInt = __m512i;
template <typename T>
inline QInt q_widen(const T* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (std::is_signed_v<T>) return _mm512_maskz_cvtepi8_epi32(kAll16, v);
  return _mm512_maskz_cvtepu8_epi32(kAll16, v);
}
inline QVec q_float(QInt v) { return _mm512_maskz_cvtepi32_ps(kAll16, v); }
inline QVec q_set(float v) { return _mm512_set1_ps(v); }
inline QInt q_set_i(int32_t v) { return _mm512_set1_epi32(v); }
inline QInt q_sub(QInt a, QInt b) { return _mm512_sub_epi32(a, b); }
inline QInt q_mul_i(QInt a, QInt b) { return _mm512_mullo_epi32(a, b); }
inline QVec q_mul(QVec a, QVec b) { return _mm512_mul_ps(a, b); }
inline QVec q_add(QVec a, QVec b) { return _mm512_add_ps(a, b); }
inline QVec q_fma(QVec a, QVec b, QVec c) { return _mm512_fmadd_ps(a, b, c); }
template <typename Y>
inline void q_store(QVec v, float lo, float hi, Y* y) {
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  v = _mm512_maskz_min_ps(kAll16, _mm512_maskz_max_ps(kAll16, v, _mm512_set1_ps(lo)), _mm512_set1_ps(hi));
  const QInt i = _mm512_maskz_cvtps_epi32(static_cast<__mmask16>(~nan), v);
  _mm512_mask_cvtepi32_storeu_epi8(y, kAll16, i);
}
#else
constexpr int64_t kQuantWidth = 8;
using QVec = __m256;
using QInt = __m256i;
template <typename T>
inline QInt q_widen(const T* p) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  if constexpr (std::is_signed_v<T>) return _mm256_cvtepi8_epi32(v);
  return _mm256_cvtepu8_epi32(v);
}
inline QVec q_float(QInt v) { return _mm256_cvtepi32_ps(v); }
inline QVec q_set(float v) { return _mm256_set1_ps(v); }
inline QInt q_set_i(int32_t v) { return _mm256_set1_epi32(v); }
inline QInt q_sub(QInt a, QInt b) { return _mm256_sub_epi32(a, b); }
inline QInt q_mul_i(QInt a, QInt b) { return _mm256_mullo_epi32(a, b); }
inline QVec q_mul(QVec a, QVec b) { return _mm256_mul_ps(a, b); }
inline QVec q_add(QVec a, QVec b) { return _mm256_add_ps(a, b); }
inline QVec q_fma(QVec a, QVec b, QVec c) { return _mm256_fmadd_ps(a, b, c); }
template <typename Y>
inline void q_store(QVec v, float lo, float hi, Y* y) {
  const __m256 ordered = _mm256_cmp_ps(v, v, _CMP_ORD_Q);
  v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(lo)), _mm256_set1_ps(hi));
  const QInt i = _mm256_cvtps_epi32(_mm256_and_ps(v, ordered));
  // i32 within the type's range: pack to 16 then 8 bits without saturating
  // anything, and keep the low eight bytes.
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
  const __m128i b = std::is_signed_v<Y> ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(y), b);
}
#endif

template <int kSa, int kSb, typename A, typename B, typename Y>
int64_t quant_binary_vec(const A* __restrict a, const B* __restrict b, Y* __restrict y, int64_t n,
                         const QuantAddParams& q) {
  const float lo = static_cast<float>(std::numeric_limits<Y>::min());
  const float hi = static_cast<float>(std::numeric_limits<Y>::max());
  const int64_t whole = n / kQuantWidth * kQuantWidth;
  auto load_a = [&](int64_t e) { return kSa == 0 ? q_set_i(static_cast<int32_t>(a[0])) : q_widen(a + e); };
  auto load_b = [&](int64_t e) { return kSb == 0 ? q_set_i(static_cast<int32_t>(b[0])) : q_widen(b + e); };
  if (q.multiply) {
    const QVec ratio = q_set(q.ratio), yz = q_set(static_cast<float>(q.y_zero));
    const QInt az = q_set_i(q.a_zero), bz = q_set_i(q.b_zero);
    for (int64_t e = 0; e < whole; e += kQuantWidth) {
      const QInt p = q_mul_i(q_sub(load_a(e), az), q_sub(load_b(e), bz));
      q_store(q_add(q_mul(q_float(p), ratio), yz), lo, hi, y + e);
    }
    return whole;
  }
  const QVec ru = q_set(q.u_ratio), rw = q_set(q.w_ratio), fixed = q_set(q.fixed);
  for (int64_t e = 0; e < whole; e += kQuantWidth) {
    const QVec fa = q_float(load_a(e)), fb = q_float(load_b(e));
    const QVec u = q.swap ? fb : fa, w = q.swap ? fa : fb;
    q_store(q_fma(u, ru, q_fma(w, rw, fixed)), lo, hi, y + e);
  }
  return whole;
}

#endif  // __AVX2__

template <int kSa, int kSb, typename A, typename B, typename Y>
void quant_binary_run(const A* __restrict a, int64_t sa, const B* __restrict b, int64_t sb, Y* __restrict y,
                      int64_t n, const QuantAddParams& q) {
  // kSa, kSb: the steps when known at compile time (0 or 1), else -1.
  if constexpr (kSa >= 0) sa = kSa;
  if constexpr (kSb >= 0) sb = kSb;
#if defined(__AVX2__)
  if constexpr (kSa >= 0 && kSb >= 0) {
    const int64_t done = quant_binary_vec<kSa, kSb>(a, b, y, n, q);
    a += done * sa;
    b += done * sb;
    y += done;
    n -= done;
  }
#endif
  if (q.multiply) {
    const float ratio = q.ratio, yz = static_cast<float>(q.y_zero);
    const int32_t az = q.a_zero, bz = q.b_zero;
    for (int64_t e = 0; e < n; ++e) {
      const int32_t p = (static_cast<int32_t>(a[e * sa]) - az) * (static_cast<int32_t>(b[e * sb]) - bz);
      y[e] = saturate<Y>(static_cast<float>(p) * ratio + yz);
    }
    return;
  }
  const float ru = q.u_ratio, rw = q.w_ratio, fixed = q.fixed;
  if (q.swap) {
    for (int64_t e = 0; e < n; ++e) {
      const float u = static_cast<float>(b[e * sb]), w = static_cast<float>(a[e * sa]);
      y[e] = saturate<Y>(std::fma(u, ru, std::fma(w, rw, fixed)));
    }
  } else {
    for (int64_t e = 0; e < n; ++e) {
      const float u = static_cast<float>(a[e * sa]), w = static_cast<float>(b[e * sb]);
      y[e] = saturate<Y>(std::fma(u, ru, std::fma(w, rw, fixed)));
    }
  }
}

// Outputs [begin, end) of the geometry's walk (y contiguous in it), run by
// run along its last dimension; the common steps (1 or 0) get their own
// instantiation so that the loop vectorizes.
template <typename A, typename B, typename Y>
void quant_binary_walk(const A* a, const B* b, Y* y, const BroadcastGeometry& g, int64_t begin, int64_t end,
                       const QuantAddParams& q) {
  const size_t rank = g.rank == 0 ? 1 : g.rank;
  const int64_t inner = g.rank == 0 ? 1 : g.dims[rank - 1];
  const int64_t sa = g.rank == 0 ? 0 : g.a_strides[rank - 1], sb = g.rank == 0 ? 0 : g.b_strides[rank - 1];
  int64_t at = begin;
  while (at < end) {
    // Offsets of output `at` in a and b.
    int64_t rest = at / inner, oa = (at % inner) * sa, ob = (at % inner) * sb;
    for (size_t d = rank - 1; d-- > 0;) {
      const int64_t i = rest % g.dims[d];
      rest /= g.dims[d];
      oa += i * g.a_strides[d];
      ob += i * g.b_strides[d];
    }
    const int64_t n = std::min(end - at, inner - at % inner);
    if (sa == 1 && sb == 1) {
      quant_binary_run<1, 1>(a + oa, sa, b + ob, sb, y + at, n, q);
    } else if (sa == 1 && sb == 0) {
      quant_binary_run<1, 0>(a + oa, sa, b + ob, sb, y + at, n, q);
    } else if (sa == 0 && sb == 1) {
      quant_binary_run<0, 1>(a + oa, sa, b + ob, sb, y + at, n, q);
    } else {
      quant_binary_run<-1, -1>(a + oa, sa, b + ob, sb, y + at, n, q);
    }
    at += n;
  }
}

template <typename A, typename B>
void quant_add_to(const A* a, const B* b, void* y, const BroadcastGeometry& g, int64_t begin, int64_t end,
                  const QuantAddParams& q) {
  if (q.y_unsigned) {
    quant_binary_walk(a, b, static_cast<uint8_t*>(y), g, begin, end, q);
  } else {
    quant_binary_walk(a, b, static_cast<int8_t*>(y), g, begin, end, q);
  }
}

template <typename A>
void quant_add_from(const A* a, const void* b, void* y, const BroadcastGeometry& g, int64_t begin, int64_t end,
                    const QuantAddParams& q) {
  if (q.b_unsigned) {
    quant_add_to(a, static_cast<const uint8_t*>(b), y, g, begin, end, q);
  } else {
    quant_add_to(a, static_cast<const int8_t*>(b), y, g, begin, end, q);
  }
}

}  // namespace

void quant_add(const void* a, const void* b, void* y, const BroadcastGeometry& g, int64_t begin, int64_t end,
               const QuantAddParams& q) {
  if (q.a_unsigned) {
    quant_add_from(static_cast<const uint8_t*>(a), b, y, g, begin, end, q);
  } else {
    quant_add_from(static_cast<const int8_t*>(a), b, y, g, begin, end, q);
  }
}

}  // namespace LOOM_CPU_SIMD_ISA
}  // namespace loom::cpu_simd
