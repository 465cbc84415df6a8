// Comparing reduction results bit by bit, where two NaNs count as equal: which NaN a NaN operand produces is not
// part of the contract (x86 propagates one operand's payload and the compiler may order the operands either way;
// GPUs return a canonical NaN).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "src/common/dtype.h"

namespace braid {
namespace testing_elem {

inline double asDouble(DType t, const unsigned char* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, dtypeSize(t));
  switch (t) {
    case DType::kFloat16:
      return halfToFloat(static_cast<uint16_t>(v));
    case DType::kBfloat16:
      return bf16ToFloat(static_cast<uint16_t>(v));
    case DType::kFp8E4M3:
      return fp8e4m3ToFloat(static_cast<uint8_t>(v));
    case DType::kFp8E5M2:
      return fp8e5m2ToFloat(static_cast<uint8_t>(v));
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    default:
      return 0;  // integers: compared by bits only
  }
}

// The index of the first of n elements whose bits differ (NaN == NaN), or n.
inline size_t firstDifference(DType t, const unsigned char* a, const unsigned char* b, size_t n) {
  const size_t es = dtypeSize(t);
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(a + i * es, b + i * es, es) == 0) continue;
    if (std::isnan(asDouble(t, a + i * es)) && std::isnan(asDouble(t, b + i * es))) continue;
    return i;
  }
  return n;
}
inline size_t firstDifference(DType t, const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
                              size_t n) {
  return firstDifference(t, a.data(), b.data(), n);
}

}  // namespace testing_elem
}  // namespace braid
