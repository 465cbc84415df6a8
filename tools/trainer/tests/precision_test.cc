// The 16-bit conversions against independent references: bf16 by picking the nearer of the two neighbouring bf16
// values in double arithmetic (ties to even), fp16 against the compiler's _Float16 where it has one, plus exhaustive
// round trips of every 16-bit pattern.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

#include "tools/trainer/precision.h"

using namespace braid::trainer;

namespace {

int failures = 0;

void expect(bool ok, const char* what, float f, unsigned got, unsigned want) {
  if (ok) return;
  if (++failures <= 20) std::fprintf(stderr, "%s(%a): got 0x%04x, want 0x%04x\n", what, f, got, want);
}

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t referenceBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  const uint32_t lo = u & 0xFFFF0000u;
  const uint32_t hi = lo + 0x10000u;  // next bf16 away from zero (may be infinity)
  const double dlo = std::fabs(static_cast<double>(f) - fromBits(lo));
  // Past the largest finite bf16, IEEE rounding acts as if 2^128 were representable: ties and above go to infinity.
  const double hiValue = std::isinf(fromBits(hi)) ? std::copysign(std::ldexp(1.0, 128), f) : fromBits(hi);
  const double dhi = std::fabs(hiValue - f);
  if (std::isinf(f)) return static_cast<uint16_t>(u >> 16);
  if (dlo < dhi || (dlo == dhi && ((lo >> 16) & 1u) == 0)) return static_cast<uint16_t>(lo >> 16);
  return static_cast<uint16_t>(hi >> 16);
}

uint64_t next(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

int main() {
  // Exhaustive: every bf16 and fp16 pattern converts to float and back unchanged (NaNs stay NaN).
  for (uint32_t h = 0; h < 65536; ++h) {
    const float b = bf16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(b)) {
      expect(std::isnan(bf16ToFloat(floatToBf16(b))), "bf16 NaN", b, floatToBf16(b), h);
    } else {
      expect(floatToBf16(b) == h, "bf16 round trip", b, floatToBf16(b), h);
    }
    const float f = fp16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      expect(std::isnan(fp16ToFloat(floatToFp16(f))), "fp16 NaN", f, floatToFp16(f), h);
    } else {
      expect(floatToFp16(f) == h, "fp16 round trip", f, floatToFp16(f), h);
    }
  }
  // Random bit patterns (every exponent, ties included via low-bit masks) against the references.
  uint64_t s = 12345;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = static_cast<uint32_t>(next(&s));
    if (i % 4 == 1) u = (u & 0xFFFF0000u) | 0x8000u;  // an exact bf16 tie
    if (i % 4 == 2) u = (u & 0xFFFFE000u) | 0x1000u;  // an exact fp16 tie (for normal fp16 exponents)
    const float f = fromBits(u);
    if (!std::isnan(f)) expect(floatToBf16(f) == referenceBf16(f), "floatToBf16", f, floatToBf16(f), referenceBf16(f));
#ifdef __FLT16_MAX__
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &ref, 2);
    if (!std::isnan(f)) expect(floatToFp16(f) == want, "floatToFp16", f, floatToFp16(f), want);
#endif
  }
#ifdef __FLT16_MAX__
  // Small magnitudes: the subnormal range of fp16, densely.
  for (int i = 0; i < 1000000; ++i) {
    const float f = std::ldexp(static_cast<float>(next(&s) % 100000) / 100000.f, -14 - static_cast<int>(i % 12));
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &ref, 2);
    expect(floatToFp16(f) == want, "floatToFp16 (small)", f, floatToFp16(f), want);
  }
#else
  std::printf("no _Float16 in this compiler: fp16 checked by round trips only\n");
#endif
  std::printf("%d conversion mismatches\n", failures);
  return failures == 0 ? 0 : 1;
}
