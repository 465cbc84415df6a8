// 16-bit float formats for the working parameters and gradients: bfloat16 and IEEE binary16, both converted from
// fp32 with round-to-nearest-even (NaN stays NaN), and element-wise helpers over typed byte buffers.
#pragma once

#include <cstdint>
#include <cstring>

#include "tools/trainer/config.h"

namespace braid::trainer {

inline float bf16ToFloat(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float fp16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t u;
  if (exp == 0x1F) {
    u = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    u = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    u = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    u = sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((mant & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t floatToFp16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to infinity
  if (a < 0x38800000u) {                                               // subnormal or zero in binary16
    if (a < 0x33000000u) return sign;                                  // below half the smallest subnormal
    const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
    const int shift = 126 - static_cast<int>(a >> 23);  // 14..24
    const uint32_t half = 1u << (shift - 1);
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = ((a >> 13) - (112u << 10));
  const uint32_t rem = a & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

inline int precisionBytes(Precision p) {
  return p == Precision::kFp32 ? 4 : 2;
}

// Element i of a buffer of type p, as fp32.
inline float loadAs(Precision p, const uint8_t* buf, int64_t i) {
  if (p == Precision::kFp32) {
    float f;
    std::memcpy(&f, buf + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, buf + 2 * i, 2);
  return p == Precision::kBf16 ? bf16ToFloat(h) : fp16ToFloat(h);
}

inline void storeAs(Precision p, uint8_t* buf, int64_t i, float f) {
  if (p == Precision::kFp32) {
    std::memcpy(buf + 4 * i, &f, 4);
    return;
  }
  const uint16_t h = p == Precision::kBf16 ? floatToBf16(f) : floatToFp16(f);
  std::memcpy(buf + 2 * i, &h, 2);
}

// dst[i] = src[i] converted, n elements; same type is a plain copy.
inline void convertBuffer(Precision dstType, uint8_t* dst, Precision srcType, const uint8_t* src, int64_t n) {
  if (dstType == srcType) {
    std::memcpy(dst, src, static_cast<size_t>(n) * static_cast<size_t>(precisionBytes(dstType)));
    return;
  }
  for (int64_t i = 0; i < n; ++i) storeAs(dstType, dst, i, loadAs(srcType, src, i));
}

}  // namespace braid::trainer
