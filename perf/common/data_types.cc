#include "perf/common/data_types.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace braid::perf {
namespace {

constexpr uint64_t kU64Max = ~uint64_t{0};

const TypeInfo kTypes[] = {
    {"int8", ncclInt8, 1, TypeKind::kSigned, 127, 6, 0, 0, false},
    {"uint8", ncclUint8, 1, TypeKind::kUnsigned, 255, 7, 0, 0, false},
    {"int32", ncclInt32, 4, TypeKind::kSigned, (uint64_t{1} << 31) - 1, 30, 0, 0, false},
    {"uint32", ncclUint32, 4, TypeKind::kUnsigned, (uint64_t{1} << 32) - 1, 31, 0, 0, false},
    {"int64", ncclInt64, 8, TypeKind::kSigned, (uint64_t{1} << 63) - 1, 62, 0, 0, false},
    {"uint64", ncclUint64, 8, TypeKind::kUnsigned, kU64Max, 63, 0, 0, false},
    {"half", ncclFloat16, 2, TypeKind::kFloat, 2048, 15, 5, 10, true},
    {"float", ncclFloat32, 4, TypeKind::kFloat, uint64_t{1} << 24, 127, 8, 23, true},
    {"double", ncclFloat64, 8, TypeKind::kFloat, uint64_t{1} << 53, 1023, 11, 52, true},
    {"bfloat16", ncclBfloat16, 2, TypeKind::kFloat, 256, 127, 8, 7, true},
    {"f8e4m3", ncclFloat8e4m3, 1, TypeKind::kFloat, 16, 8, 4, 3, false},
    {"f8e5m2", ncclFloat8e5m2, 1, TypeKind::kFloat, 8, 15, 5, 2, true},
};

const OpInfo kOps[] = {
    {"sum", ncclSum}, {"prod", ncclProd}, {"max", ncclMax}, {"min", ncclMin}, {"avg", ncclAvg}, {"mulsum", kMulSumOp},
};

// How values are drawn for one (type, op, nranks).
struct Pattern {
  enum Kind { kAdd, kMul, kRange } kind = kAdd;
  uint64_t window = 0;  // ranks that contribute a "live" value to each element (all when >= nranks)
  uint64_t maxMag = 0;  // kAdd / kRange: values lie in [-maxMag, maxMag] ([0, maxMag] unsigned)
};

Pattern patternFor(const DataSpec& spec) {
  const uint64_t n = static_cast<uint64_t>(spec.nranks > 0 ? spec.nranks : 1);
  const TypeInfo& t = *spec.type;
  Pattern p;
  switch (spec.op) {
    case ncclProd:
      p.kind = Pattern::kMul;
      p.window = n < static_cast<uint64_t>(t.maxPow2) ? n : static_cast<uint64_t>(t.maxPow2);
      break;
    case ncclMax:
    case ncclMin:
      p.kind = Pattern::kRange;
      p.window = n;
      p.maxMag = t.maxExactInt;
      break;
    case kMulSumOp: {  // additive, each live value scaled by up to 2: half the range
      const uint64_t half = t.maxExactInt / 2 > 0 ? t.maxExactInt / 2 : 1;
      p.kind = Pattern::kAdd;
      p.window = n < half ? n : half;
      p.maxMag = t.maxExactInt / (2 * p.window);
      break;
    }
    default:  // sum, avg, and anything else additive
      p.kind = Pattern::kAdd;
      p.window = n < t.maxExactInt ? n : t.maxExactInt;
      p.maxMag = t.maxExactInt / p.window;
      break;
  }
  return p;
}

inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t rankKey(uint64_t seed, int rank) {
  return mix64(seed * 0xD6E8FEB86659FD93ull + 0x632BE59BD9B4E019ull * (static_cast<uint64_t>(rank) + 1));
}

// The value of element i on the rank whose key is `key`, as a two's complement bit pattern (signed and floating
// types hold a signed integer, unsigned types an unsigned one). `live` says whether the rank is in the element's
// window.
inline uint64_t valueAt(const Pattern& p, TypeKind kind, uint64_t key, uint64_t i, bool live) {
  const uint64_t h = mix64(key + i * 0x9E3779B97F4A7C15ull);
  if (p.kind == Pattern::kMul) {
    const uint64_t mag = live && (h & 1) ? 2 : 1;
    const bool negative = kind != TypeKind::kUnsigned && (h & 2);
    return negative ? ~mag + 1 : mag;
  }
  if (!live) return 0;
  if (kind == TypeKind::kUnsigned) return p.maxMag == kU64Max ? h : h % (p.maxMag + 1);
  // [-maxMag, maxMag]; maxMag <= 2^63 - 1, so 2 * maxMag + 1 fits.
  return h % (2 * p.maxMag + 1) - p.maxMag;
}

inline bool isLive(const Pattern& p, uint64_t n, uint64_t rank, uint64_t i) {
  return p.window >= n || (rank + i % n) % n < p.window;
}

inline double asDouble(uint64_t raw) {
  return static_cast<double>(static_cast<int64_t>(raw));
}

// Stores element j: integer types take the low bytes of the two's complement pattern, floating types the value.
inline void storeInt(const TypeInfo& t, void* buf, size_t j, uint64_t raw) {
  char* out = static_cast<char*>(buf) + j * t.size;
  switch (t.size) {
    case 1: {
      const uint8_t v = static_cast<uint8_t>(raw);
      std::memcpy(out, &v, 1);
      break;
    }
    case 2: {
      const uint16_t v = static_cast<uint16_t>(raw);
      std::memcpy(out, &v, 2);
      break;
    }
    case 4: {
      const uint32_t v = static_cast<uint32_t>(raw);
      std::memcpy(out, &v, 4);
      break;
    }
    default:
      std::memcpy(out, &raw, 8);
      break;
  }
}

inline void storeFloat(const TypeInfo& t, void* buf, size_t j, double value) {
  char* out = static_cast<char*>(buf) + j * t.size;
  if (t.type == ncclFloat64) {
    std::memcpy(out, &value, 8);
  } else if (t.type == ncclFloat32) {
    const float f = static_cast<float>(value);
    std::memcpy(out, &f, 4);
  } else if (t.size == 2) {
    const uint16_t bits = static_cast<uint16_t>(encodeNarrowFloat(t, value));
    std::memcpy(out, &bits, 2);
  } else {
    const uint8_t bits = static_cast<uint8_t>(encodeNarrowFloat(t, value));
    std::memcpy(out, &bits, 1);
  }
}

inline void store(const TypeInfo& t, void* buf, size_t j, uint64_t raw) {
  if (t.kind == TypeKind::kFloat) {
    storeFloat(t, buf, j, asDouble(raw));
  } else {
    storeInt(t, buf, j, raw);
  }
}

template <typename Word>
size_t countWordMismatches(const void* got, const void* expected, size_t count) {
  size_t wrong = 0;
  const char* a = static_cast<const char*>(got);
  const char* b = static_cast<const char*>(expected);
  for (size_t i = 0; i < count; ++i) {
    Word x, y;
    std::memcpy(&x, a + i * sizeof(Word), sizeof(Word));
    std::memcpy(&y, b + i * sizeof(Word), sizeof(Word));
    wrong += x != y;
  }
  return wrong;
}

}  // namespace

const TypeInfo* allTypes(size_t* count) {
  *count = sizeof(kTypes) / sizeof(kTypes[0]);
  return kTypes;
}

const TypeInfo* findType(const char* name) {
  for (const TypeInfo& t : kTypes) {
    if (std::strcmp(t.name, name) == 0) return &t;
  }
  return nullptr;
}

const OpInfo* allOps(size_t* count) {
  *count = sizeof(kOps) / sizeof(kOps[0]);
  return kOps;
}

const OpInfo* findOp(const char* name) {
  for (const OpInfo& o : kOps) {
    if (std::strcmp(o.name, name) == 0) return &o;
  }
  return nullptr;
}

uint32_t encodeNarrowFloat(const TypeInfo& type, double x) {
  const int e = type.expBits;
  const int m = type.mantBits;
  const uint32_t signBit = std::signbit(x) ? 1u << (e + m) : 0u;
  const uint32_t expMask = (1u << e) - 1;
  // Largest finite magnitude's bit pattern: IEEE-like formats reserve the all-ones exponent; e4m3fn reserves only
  // the all-ones mantissa under it (NaN).
  const uint32_t maxFinite = type.ieeeLike ? (expMask << m) - 1 : (expMask << m) | ((1u << m) - 2);
  if (std::isnan(x)) return signBit | (expMask << m) | ((1u << m) - 1);
  const double a = std::fabs(x);
  if (a == 0) return signBit;
  if (std::isinf(a)) return signBit | (type.ieeeLike ? expMask << m : maxFinite);
  const int bias = (1 << (e - 1)) - 1;
  const int minNormalExp = 1 - bias;
  int frexpExp = 0;
  std::frexp(a, &frexpExp);
  const int unbiased = frexpExp - 1;                                      // a in [2^unbiased, 2^(unbiased+1))
  const int baseExp = unbiased > minNormalExp ? unbiased : minNormalExp;  // subnormals share the minimum exponent
  // Number of quanta (2^(baseExp - m)) in a, rounded to nearest even; exact scaling by a power of two.
  const double quanta = std::nearbyint(std::ldexp(a, m - baseExp));
  // Normal: bits = (biased - 1) << m plus quanta (which includes the implicit bit, and carries into the exponent
  // when rounding reaches 2^(m+1)). Subnormal: baseExp = minNormalExp gives biased - 1 = 0 and bits = quanta.
  const uint64_t bits = (static_cast<uint64_t>(baseExp + bias - 1) << m) + static_cast<uint64_t>(quanta);
  if (bits > maxFinite) return signBit | (type.ieeeLike ? expMask << m : maxFinite);
  return signBit | static_cast<uint32_t>(bits);
}

int premulScalar(int rank) {
  return 1 + (rank & 1);
}

void storeScalar(const TypeInfo& type, int64_t value, void* out) {
  store(type, out, 0, static_cast<uint64_t>(value));
}

void fillInput(const DataSpec& spec, int rank, size_t first, size_t count, void* buf) {
  const TypeInfo& t = *spec.type;
  const Pattern p = patternFor(spec);
  const uint64_t n = static_cast<uint64_t>(spec.nranks);
  const uint64_t key = rankKey(spec.seed, rank);
  for (size_t j = 0; j < count; ++j) {
    const uint64_t i = first + j;
    store(t, buf, j, valueAt(p, t.kind, key, i, isLive(p, n, static_cast<uint64_t>(rank), i)));
  }
}

void fillReduced(const DataSpec& spec, size_t first, size_t count, void* buf) {
  const TypeInfo& t = *spec.type;
  const Pattern p = patternFor(spec);
  const int nranks = spec.nranks;
  const uint64_t n = static_cast<uint64_t>(nranks);
  const bool isFloat = t.kind == TypeKind::kFloat;
  const bool isSigned = t.kind != TypeKind::kUnsigned;
  std::vector<uint64_t> keys(n);
  for (int r = 0; r < nranks; ++r) keys[r] = rankKey(spec.seed, r);

  for (size_t j = 0; j < count; ++j) {
    const uint64_t i = first + j;
    if (p.kind == Pattern::kRange) {
      uint64_t best = valueAt(p, t.kind, keys[0], i, true);
      for (uint64_t r = 1; r < n; ++r) {
        const uint64_t v = valueAt(p, t.kind, keys[r], i, true);
        const bool less = isSigned ? static_cast<int64_t>(v) < static_cast<int64_t>(best) : v < best;
        if (spec.op == ncclMax ? (!less && v != best) : less) best = v;
      }
      store(t, buf, j, best);
      continue;
    }
    // kAdd and kMul: only ranks in the element's window differ from the identity (0, or 1 / -1 for kMul, whose
    // signs still count: walk all ranks there).
    const uint64_t shift = (n - i % n) % n;
    const bool all = p.kind == Pattern::kMul || p.window >= n;
    const uint64_t walk = all ? n : p.window;
    uint64_t intAcc = p.kind == Pattern::kMul ? 1 : 0;
    double floatAcc = p.kind == Pattern::kMul ? 1.0 : 0.0;
    for (uint64_t k = 0; k < walk; ++k) {
      const uint64_t r = all ? k : (k + shift) % n;
      const uint64_t v = valueAt(p, t.kind, keys[r], i, all ? isLive(p, n, r, i) : true);
      if (p.kind == Pattern::kMul) {
        intAcc *= v;  // two's complement product modulo 2^64; exact by construction
        floatAcc *= asDouble(v);
      } else {
        const uint64_t scale = spec.op == kMulSumOp ? static_cast<uint64_t>(premulScalar(static_cast<int>(r))) : 1;
        intAcc += v * scale;
        floatAcc += asDouble(v) * static_cast<double>(scale);
      }
    }
    if (spec.op == ncclAvg) {
      if (isFloat) {
        storeFloat(t, buf, j, floatAcc / static_cast<double>(n));
      } else if (isSigned) {
        storeInt(t, buf, j, static_cast<uint64_t>(static_cast<int64_t>(intAcc) / static_cast<int64_t>(n)));
      } else {
        storeInt(t, buf, j, intAcc / n);
      }
    } else if (isFloat) {
      storeFloat(t, buf, j, floatAcc);
    } else {
      storeInt(t, buf, j, intAcc);
    }
  }
}

size_t countMismatches(const TypeInfo& type, const void* got, const void* expected, size_t count) {
  if (count == 0 || std::memcmp(got, expected, count * type.size) == 0) return 0;
  switch (type.size) {
    case 1:
      return countWordMismatches<uint8_t>(got, expected, count);
    case 2:
      return countWordMismatches<uint16_t>(got, expected, count);
    case 4:
      return countWordMismatches<uint32_t>(got, expected, count);
    default:
      return countWordMismatches<uint64_t>(got, expected, count);
  }
}

void poison(void* buf, size_t bytes) {
  std::memset(buf, 0xFF, bytes);
}

}  // namespace braid::perf
