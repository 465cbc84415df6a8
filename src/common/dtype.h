// Element datatypes and bit-exact scalar conversions between float and the narrow floating-point formats.
//
// DType's values equal ncclDataType_t's, so the API layer converts with a cast (after checking < kCount).
//
// Conversions (all inline and BRAID_HOST_DEVICE, so CUDA kernels can share them):
//   narrow -> float is exact for every finite value and infinity. NaN stays NaN with its sign; a signaling NaN comes
//   out quiet, the payload is kept (shifted into the float's top mantissa bits).
//   float -> narrow rounds the exact float value once, to nearest, ties to even (no double rounding through another
//   format), produces subnormals where the format has them, keeps the sign of zero and of NaN, and returns a quiet
//   NaN for any NaN input (the top payload bits are kept where the format has room for them).
// Overflow policy, float -> narrow:
//   half (IEEE binary16, max 65504), bf16 (max ~3.39e38) and fp8 e5m2 (max 57344, has inf and NaN like IEEE):
//     IEEE behaviour: a value that rounds beyond the largest finite number becomes +-inf; +-inf stays +-inf.
//   fp8 e4m3 (the "fn" variant: bias 7, no infinities, max 448, NaN is S.1111.111 only):
//     saturating, like CUDA's __NV_SATFINITE: a finite value that rounds beyond 448 becomes +-448, and +-inf also
//     becomes +-448. NaN becomes S.1111.111 with the input's sign. (RNE already sends [448, 464] to 448.)
// FP environment: FTZ/DAZ do not change any result. The float -> half/fp8 path rounds subnormal results with one FP
// addition, so it assumes the default round-to-nearest mode (always true on the device; on the host unless someone
// called fesetround). Everything else is integer arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "src/common/host_device.h"

namespace braid {

enum class DType : uint8_t {
  kInt8 = 0,
  kUint8,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kFloat16,
  kFloat32,
  kFloat64,
  kBfloat16,
  kFp8E4M3,
  kFp8E5M2,
  kCount
};

// Bytes per element; 0 for kCount or an out-of-range value.
BRAID_HOST_DEVICE constexpr size_t dtypeSize(DType t) {
  switch (t) {
    case DType::kInt8:
    case DType::kUint8:
    case DType::kFp8E4M3:
    case DType::kFp8E5M2:
      return 1;
    case DType::kFloat16:
    case DType::kBfloat16:
      return 2;
    case DType::kInt32:
    case DType::kUint32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kUint64:
    case DType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

// nccl-tests' names ("float", "half", "bfloat16", "f8e4m3", ...); "unknown" for an out-of-range value.
BRAID_HOST_DEVICE constexpr const char* dtypeName(DType t) {
  switch (t) {
    case DType::kInt8:
      return "int8";
    case DType::kUint8:
      return "uint8";
    case DType::kInt32:
      return "int32";
    case DType::kUint32:
      return "uint32";
    case DType::kInt64:
      return "int64";
    case DType::kUint64:
      return "uint64";
    case DType::kFloat16:
      return "half";
    case DType::kFloat32:
      return "float";
    case DType::kFloat64:
      return "double";
    case DType::kBfloat16:
      return "bfloat16";
    case DType::kFp8E4M3:
      return "f8e4m3";
    case DType::kFp8E5M2:
      return "f8e5m2";
    default:
      return "unknown";
  }
}

namespace detail {

BRAID_HOST_DEVICE BRAID_FORCE_INLINE uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

BRAID_HOST_DEVICE BRAID_FORCE_INLINE float bitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// All-ones when c, else zero; and a branch-free select built on it (compilers keep and/or as and/or, where a ?: on
// data-dependent conditions may come back as a mispredicting branch).
BRAID_HOST_DEVICE BRAID_FORCE_INLINE uint32_t maskIf(bool c) {
  return 0u - static_cast<uint32_t>(c);
}
BRAID_HOST_DEVICE BRAID_FORCE_INLINE uint32_t pick(bool c, uint32_t ifTrue, uint32_t ifFalse) {
  const uint32_t m = maskIf(c);
  return (ifTrue & m) | (ifFalse & ~m);
}

// float -> a binary format with kExp exponent bits and kMan stored mantissa bits (IEEE-style bias), returned in the
// low 1 + kExp + kMan bits. kFiniteOnly selects the e4m3fn encoding: no infinities, only all-ones is NaN, saturate.
// Branch-free: every path is computed and the result selected, which keeps element loops free of data-dependent
// branches and lets GCC vectorize them.
template <int kExp, int kMan, bool kFiniteOnly>
BRAID_HOST_DEVICE BRAID_FORCE_INLINE uint32_t floatToNarrow(float f) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr uint32_t kExpOnes = (1u << kExp) - 1;
  constexpr uint32_t kInfCode = kExpOnes << kMan;
  constexpr uint32_t kAllOnes = (1u << (kExp + kMan)) - 1;
  constexpr uint32_t kMaxFinite = kFiniteOnly ? kAllOnes - 1 : kInfCode - 1;
  constexpr uint32_t kOverflow = kFiniteOnly ? kMaxFinite : kInfCode;  // what a too-large finite value becomes
  constexpr int kShift = 23 - kMan;
  constexpr uint32_t kMinNormalField = 128 - kBias;  // float exponent field of the target's smallest normal

  const uint32_t u = floatBits(f);
  const uint32_t sign = (u >> 31) << (kExp + kMan);
  const uint32_t a = u & 0x7fffffffu;
  const uint32_t fieldExp = a >> 23;

  // Normal in the target: rebias, then round off kShift bits to nearest even. A mantissa carry bumps the exponent by
  // itself, and one out of the largest binade lands on kInfCode. (Wraps harmlessly when a is below the normal range.)
  uint32_t rn = a - (static_cast<uint32_t>(127 - kBias) << 23);
  rn = (rn + ((1u << (kShift - 1)) - 1) + ((rn >> kShift) & 1u)) >> kShift;
  rn = pick(rn > kMaxFinite, kOverflow, rn);

  // Subnormal or zero in the target: round |f| to a multiple of the target's subnormal unit U = 2^(1-kBias-kMan) by
  // adding C = 2^23 * U, whose float ulp is U, so the FPU's round-to-nearest-even does the rounding; the integer
  // difference of the encodings is then the target mantissa (2^kMan, a carry into the smallest normal, encodes
  // correctly as is). Every operand and result here is a normal float (|f| below float's normal range rounds to 0
  // either way), so FTZ/DAZ cannot change it; it does assume the default rounding mode, which device code always
  // uses. Chosen over a variable shift so loops of these conversions vectorize on plain SSE2. For bf16 (kBias 127)
  // the normal path already covers float subnormals (fieldExp 0) and this value is not used.
  constexpr uint32_t kRoundBits = static_cast<uint32_t>(kBias == 127 ? 127 : 24 - kBias - kMan + 127) << 23;
  const uint32_t rs = floatBits(bitsFloat(a) + bitsFloat(kRoundBits)) - kRoundBits;

  const uint32_t nanCode = kFiniteOnly ? kAllOnes : (kInfCode | (1u << (kMan - 1)) | ((a & 0x7fffffu) >> kShift));
  const uint32_t infCode = kFiniteOnly ? kMaxFinite : kInfCode;
  uint32_t r = kBias == 127 ? rn : pick(fieldExp >= kMinNormalField, rn, rs);
  r = pick(a >= 0x7f800000u, pick(a == 0x7f800000u, infCode, nanCode), r);
  return sign | r;
}

// The inverse of floatToNarrow, for formats whose subnormals are normal floats (half, fp8; not bf16). Exact.
template <int kExp, int kMan, bool kFiniteOnly>
BRAID_HOST_DEVICE BRAID_FORCE_INLINE float narrowToFloat(uint32_t h) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr uint32_t kExpOnes = (1u << kExp) - 1;
  constexpr uint32_t kManMask = (1u << kMan) - 1;
  constexpr int kShift = 23 - kMan;
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(1 - kBias + 127) << 23;  // 2^(1 - kBias) as a float
  static_assert(kBias < 127 - kMan, "subnormals of this format are not normal floats");

  const uint32_t sign = ((h >> (kExp + kMan)) & 1u) << 31;
  const uint32_t fieldExp = (h >> kMan) & kExpOnes;
  const uint32_t m = h & kManMask;

  // Normal (and, for e4m3fn, the top binade): rebias the exponent, widen the mantissa.
  const uint32_t normal = ((fieldExp + (127 - kBias)) << 23) | (m << kShift);
  // Subnormal: m * 2^(1 - kBias - kMan) = (2^(1-kBias) + m * 2^(1-kBias-kMan)) - 2^(1-kBias). Both operands and the
  // result are normal floats and the subtraction is exact, so neither rounding mode nor FTZ/DAZ can change it.
  const uint32_t sub = floatBits(bitsFloat(kMinNormalBits | (m << kShift)) - bitsFloat(kMinNormalBits));
  uint32_t r = pick(fieldExp == 0, sub, normal);
  if (kFiniteOnly) {
    r = pick(fieldExp == kExpOnes && m == kManMask, 0x7fc00000u, r);
  } else {
    r = pick(fieldExp == kExpOnes, 0x7f800000u | (maskIf(m != 0) & (0x00400000u | (m << kShift))), r);
  }
  return bitsFloat(sign | r);
}

}  // namespace detail

// IEEE binary16.
BRAID_HOST_DEVICE BRAID_FORCE_INLINE float halfToFloat(uint16_t h) {
  return detail::narrowToFloat<5, 10, false>(h);
}
BRAID_HOST_DEVICE BRAID_FORCE_INLINE uint16_t floatToHalf(float f) {
  return static_cast<uint16_t>(detail::floatToNarrow<5, 10, false>(f));
}

// bfloat16: the top half of a float (same exponent range, so float subnormals map onto bf16 subnormals).
BRAID_HOST_DEVICE BRAID_FORCE_INLINE float bf16ToFloat(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x00400000u;  // quiet a signaling NaN
  return detail::bitsFloat(u);
}
BRAID_HOST_DEVICE BRAID_FORCE_INLINE uint16_t floatToBf16(float f) {
  return static_cast<uint16_t>(detail::floatToNarrow<8, 7, false>(f));
}

// fp8 e4m3fn: bias 7, max 448, no inf, NaN = S.1111.111. Saturating (see the policy above).
BRAID_HOST_DEVICE BRAID_FORCE_INLINE float fp8e4m3ToFloat(uint8_t h) {
  return detail::narrowToFloat<4, 3, true>(h);
}
BRAID_HOST_DEVICE BRAID_FORCE_INLINE uint8_t floatToFp8e4m3(float f) {
  return static_cast<uint8_t>(detail::floatToNarrow<4, 3, true>(f));
}

// fp8 e5m2: bias 15, max 57344, IEEE-like inf and NaN.
BRAID_HOST_DEVICE BRAID_FORCE_INLINE float fp8e5m2ToFloat(uint8_t h) {
  return detail::narrowToFloat<5, 2, false>(h);
}
BRAID_HOST_DEVICE BRAID_FORCE_INLINE uint8_t floatToFp8e5m2(float f) {
  return static_cast<uint8_t>(detail::floatToNarrow<5, 2, false>(f));
}

}  // namespace braid
