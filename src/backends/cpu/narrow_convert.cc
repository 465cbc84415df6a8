#include "src/backends/cpu/narrow_convert.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define BRAID_X86 1
#endif

namespace braid {
namespace {

// bf16 from float: round the low 16 bits off to nearest even; a NaN keeps its top payload bits and is quieted.
// The same function as floatToBf16 (the general narrowing reduces to this for bf16), in a form that vectorizes to
// a handful of integer operations.
inline uint16_t fastFloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet = (u >> 16) | 0x40u;
  const uint32_t m = 0u - static_cast<uint32_t>((u & 0x7fffffffu) > 0x7f800000u);
  return static_cast<uint16_t>((quiet & m) | (rounded & ~m));
}

struct Fp8Tables {
  float e4m3[256];
  float e5m2[256];
  Fp8Tables() {
    for (int i = 0; i < 256; ++i) {
      e4m3[i] = fp8e4m3ToFloat(static_cast<uint8_t>(i));
      e5m2[i] = fp8e5m2ToFloat(static_cast<uint8_t>(i));
    }
  }
};

const Fp8Tables& fp8Tables() {
  static const Fp8Tables tables;
  return tables;
}

#if BRAID_X86
__attribute__((target("avx,f16c"))) void widenHalfF16c(float* dst, const unsigned char* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, sizeof(h));
    dst[i] = halfToFloat(h);
  }
}

__attribute__((target("avx,f16c"))) void narrowHalfF16c(unsigned char* dst, const float* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), h);
  }
  for (; i < n; ++i) {
    const uint16_t h = floatToHalf(src[i]);
    std::memcpy(dst + 2 * i, &h, sizeof(h));
  }
}

// bf16 with SSE2 (every x86-64 CPU): widening is an interleave with zeros; narrowing rounds in 32-bit lanes and packs
// (shift left then arithmetic right turns the 16-bit results into values packs_epi32 keeps exactly).
void widenBf16Sse2(float* dst, const unsigned char* src, size_t n) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i absMask = _mm_set1_epi32(0x7fffffff);
  const __m128i inf = _mm_set1_epi32(0x7f800000);
  const __m128i quiet = _mm_set1_epi32(0x00400000);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    for (int half = 0; half < 2; ++half) {
      __m128i u = half == 0 ? _mm_unpacklo_epi16(zero, h) : _mm_unpackhi_epi16(zero, h);
      const __m128i nan = _mm_cmpgt_epi32(_mm_and_si128(u, absMask), inf);  // signed compare: operands < 2^31
      u = _mm_or_si128(u, _mm_and_si128(nan, quiet));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 4 * half), u);
    }
  }
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, sizeof(h));
    dst[i] = bf16ToFloat(h);
  }
}

BRAID_FORCE_INLINE __m128i narrowBf16Lanes(__m128i u) {
  const __m128i absMask = _mm_set1_epi32(0x7fffffff);
  const __m128i inf = _mm_set1_epi32(0x7f800000);
  const __m128i one = _mm_set1_epi32(1);
  const __m128i bias = _mm_set1_epi32(0x7fff);
  const __m128i rounded =
      _mm_srli_epi32(_mm_add_epi32(_mm_add_epi32(u, bias), _mm_and_si128(_mm_srli_epi32(u, 16), one)), 16);
  const __m128i quieted = _mm_or_si128(_mm_srli_epi32(u, 16), _mm_set1_epi32(0x40));
  const __m128i nan = _mm_cmpgt_epi32(_mm_and_si128(u, absMask), inf);
  const __m128i r = _mm_or_si128(_mm_and_si128(nan, quieted), _mm_andnot_si128(nan, rounded));
  return _mm_srai_epi32(_mm_slli_epi32(r, 16), 16);  // sign-extended 16-bit values: packs keeps them exactly
}

void narrowBf16Sse2(unsigned char* dst, const float* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i lo = narrowBf16Lanes(_mm_castps_si128(_mm_loadu_ps(src + i)));
    const __m128i hi = narrowBf16Lanes(_mm_castps_si128(_mm_loadu_ps(src + i + 4)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), _mm_packs_epi32(lo, hi));
  }
  for (; i < n; ++i) {
    const uint16_t h = fastFloatToBf16(src[i]);
    std::memcpy(dst + 2 * i, &h, sizeof(h));
  }
}

// fp8 from float through half: F16C truncates to half, and an inexact result gets its lowest bit set (rounding to
// odd), which keeps the information round-to-nearest-even needs; a 64 Ki-entry table then rounds the half to fp8.
// Correct because half has at least two more significant bits than fp8 wherever fp8 is not already subnormal, and
// finer absolute steps where it is. Beyond half's range, truncation gives half's largest finite value, which every
// fp8 format rounds to its own overflow result (inf for e5m2, 448 for e4m3fn), as the float would.
struct Fp8FromHalf {
  uint8_t e4m3[65536];
  uint8_t e5m2[65536];
  Fp8FromHalf() {
    for (uint32_t h = 0; h < 65536; ++h) {
      const float f = halfToFloat(static_cast<uint16_t>(h));
      e4m3[h] = floatToFp8e4m3(f);
      e5m2[h] = floatToFp8e5m2(f);
    }
  }
};

const Fp8FromHalf& fp8FromHalf() {
  static const Fp8FromHalf tables;
  return tables;
}

__attribute__((target("avx,f16c"))) void narrowFp8F16c(const uint8_t* table, unsigned char* dst, const float* src,
                                                       size_t n) {
  size_t i = 0;
  alignas(16) uint16_t h[8];
  for (; i + 8 <= n; i += 8) {
    const __m256 f = _mm256_loadu_ps(src + i);
    const __m128i t = _mm256_cvtps_ph(f, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 exact = _mm256_cmp_ps(_mm256_cvtph_ps(t), f, _CMP_EQ_OQ);  // false for NaN: harmless
    const __m128i exact16 = _mm_packs_epi32(_mm_castps_si128(_mm256_castps256_ps128(exact)),
                                            _mm_castps_si128(_mm256_extractf128_ps(exact, 1)));
    _mm_store_si128(reinterpret_cast<__m128i*>(h), _mm_or_si128(t, _mm_andnot_si128(exact16, _mm_set1_epi16(1))));
    for (int k = 0; k < 8; ++k) dst[i + static_cast<size_t>(k)] = table[h[k]];
  }
  for (; i < n; ++i) dst[i] = table == fp8FromHalf().e4m3 ? floatToFp8e4m3(src[i]) : floatToFp8e5m2(src[i]);
}

// CPUID leaf 1 (ECX: bit 27 OSXSAVE, 28 AVX, 29 F16C) and XGETBV (the OS saves the XMM and YMM state), read
// directly: clang 14's __builtin_cpu_supports does not know "f16c".
bool detectF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool osxsave = (ecx >> 27) & 1u, avx = (ecx >> 28) & 1u, f16c = (ecx >> 29) & 1u;
  if (!osxsave || !avx || !f16c) return false;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 0x6u) == 0x6u;
}
#else
bool detectF16c() {
  return false;
}
#endif

template <typename S, float (*kToF)(S)>
void widenGeneric(float* dst, const unsigned char* src, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    S v;
    std::memcpy(&v, src + i * sizeof(S), sizeof(S));
    dst[i] = kToF(v);
  }
}

template <typename S, S (*kFromF)(float)>
void narrowGeneric(unsigned char* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const S v = kFromF(src[i]);
    std::memcpy(dst + i * sizeof(S), &v, sizeof(S));
  }
}

}  // namespace

bool halfUsesF16c() {
  static const bool has = detectF16c();
  return has;
}

bool isNarrowFloatType(DType t) {
  return t == DType::kFloat16 || t == DType::kBfloat16 || t == DType::kFp8E4M3 || t == DType::kFp8E5M2;
}

void widenBlock(DType t, float* dst, const unsigned char* src, size_t n) {
  switch (t) {
    case DType::kFloat16:
#if BRAID_X86
      if (halfUsesF16c()) return widenHalfF16c(dst, src, n);
#endif
      return widenGeneric<uint16_t, halfToFloat>(dst, src, n);
    case DType::kBfloat16:
#if BRAID_X86
      return widenBf16Sse2(dst, src, n);
#else
      return widenGeneric<uint16_t, bf16ToFloat>(dst, src, n);
#endif
    case DType::kFp8E4M3:
    case DType::kFp8E5M2: {
      const float* table = t == DType::kFp8E4M3 ? fp8Tables().e4m3 : fp8Tables().e5m2;
      for (size_t i = 0; i < n; ++i) dst[i] = table[src[i]];
      return;
    }
    default:
      return;
  }
}

void narrowBlock(DType t, unsigned char* dst, const float* src, size_t n) {
  switch (t) {
    case DType::kFloat16:
#if BRAID_X86
      if (halfUsesF16c()) return narrowHalfF16c(dst, src, n);
#endif
      return narrowGeneric<uint16_t, floatToHalf>(dst, src, n);
    case DType::kBfloat16:
#if BRAID_X86
      return narrowBf16Sse2(dst, src, n);
#else
      return narrowGeneric<uint16_t, fastFloatToBf16>(dst, src, n);
#endif
    case DType::kFp8E4M3:
#if BRAID_X86
      if (halfUsesF16c()) return narrowFp8F16c(fp8FromHalf().e4m3, dst, src, n);
#endif
      return narrowGeneric<uint8_t, floatToFp8e4m3>(dst, src, n);
    case DType::kFp8E5M2:
#if BRAID_X86
      if (halfUsesF16c()) return narrowFp8F16c(fp8FromHalf().e5m2, dst, src, n);
#endif
      return narrowGeneric<uint8_t, floatToFp8e5m2>(dst, src, n);
    default:
      return;
  }
}

}  // namespace braid
