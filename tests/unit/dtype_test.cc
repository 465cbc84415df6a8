// Exhaustive and randomized checks of the narrow float conversions in src/common/dtype.h against an independent
// table-based reference (decode with ldexp, encode by nearest-value search with ties to the even code), plus
// GCC's _Float16 for half where the compiler has it.
#include "src/common/dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace braid {
namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// A narrow format described by its parameters, with the library's conversions attached.
struct Format {
  const char* name;
  int expBits;
  int manBits;
  bool finiteOnly;  // e4m3fn: no inf, only S.1111.111 is NaN, saturating
  float (*toFloat)(uint32_t);
  uint32_t (*fromFloat)(float);

  int bias() const { return (1 << (expBits - 1)) - 1; }
  int width() const { return 1 + expBits + manBits; }
  uint32_t signBit() const { return 1u << (expBits + manBits); }
  uint32_t codeCount() const { return 1u << width(); }
  uint32_t expOnes() const { return (1u << expBits) - 1; }
  uint32_t manMask() const { return (1u << manBits) - 1; }
  uint32_t infCode() const { return expOnes() << manBits; }  // IEEE formats only

  bool isNan(uint32_t c) const {
    const uint32_t e = (c >> manBits) & expOnes(), m = c & manMask();
    if (finiteOnly) return e == expOnes() && m == manMask();
    return e == expOnes() && m != 0;
  }
  bool isInf(uint32_t c) const {
    return !finiteOnly && ((c >> manBits) & expOnes()) == expOnes() && (c & manMask()) == 0;
  }

  // Independent decode of a non-NaN code.
  double decode(uint32_t c) const {
    const double s = (c & signBit()) ? -1.0 : 1.0;
    const int e = static_cast<int>((c >> manBits) & expOnes());
    const int m = static_cast<int>(c & manMask());
    if (isInf(c)) return s * std::numeric_limits<double>::infinity();
    if (e == 0) return s * std::ldexp(static_cast<double>(m), 1 - bias() - manBits);
    return s * std::ldexp(static_cast<double>((1 << manBits) + m), e - bias() - manBits);
  }
};

float halfTo(uint32_t c) {
  return halfToFloat(static_cast<uint16_t>(c));
}
uint32_t halfFrom(float f) {
  return floatToHalf(f);
}
float bf16To(uint32_t c) {
  return bf16ToFloat(static_cast<uint16_t>(c));
}
uint32_t bf16From(float f) {
  return floatToBf16(f);
}
float e4m3To(uint32_t c) {
  return fp8e4m3ToFloat(static_cast<uint8_t>(c));
}
uint32_t e4m3From(float f) {
  return floatToFp8e4m3(f);
}
float e5m2To(uint32_t c) {
  return fp8e5m2ToFloat(static_cast<uint8_t>(c));
}
uint32_t e5m2From(float f) {
  return floatToFp8e5m2(f);
}

const Format kHalf{"half", 5, 10, false, halfTo, halfFrom};
const Format kBf16{"bf16", 8, 7, false, bf16To, bf16From};
const Format kE4m3{"e4m3", 4, 3, true, e4m3To, e4m3From};
const Format kE5m2{"e5m2", 5, 2, false, e5m2To, e5m2From};

// Reference encoder: nearest finite value by search over the sorted non-negative finite values; ties go to the even
// code; beyond the largest finite value the format's overflow policy applies.
class RefEncoder {
 public:
  explicit RefEncoder(const Format& f) : f_(f) {
    for (uint32_t c = 0; c < f.signBit(); ++c) {
      if (f.isNan(c) || f.isInf(c)) continue;
      values_.push_back(f.decode(c));
      codes_.push_back(c);
    }
    // Codes of non-negative finite values increase with the value, so the table is sorted already.
    maxFinite_ = values_.back();
    halfUlpAtMax_ = (values_.back() - values_[values_.size() - 2]) / 2;
  }

  uint32_t encode(float x) const {
    const uint32_t sign = std::signbit(x) ? f_.signBit() : 0;
    if (std::isnan(x))
      return sign | (f_.finiteOnly ? (f_.codeCount() / 2 - 1) : f_.infCode() | (1u << (f_.manBits - 1)));
    const double a = std::fabs(static_cast<double>(x));
    if (a > maxFinite_) {
      if (f_.finiteOnly) return sign | codes_.back();
      // IEEE: a tie between max (odd mantissa) and 2^(emax+1) goes to the even one, which is infinity.
      return sign | (a < maxFinite_ + halfUlpAtMax_ ? codes_.back() : f_.infCode());
    }
    const size_t k = std::lower_bound(values_.begin(), values_.end(), a) - values_.begin();
    if (values_[k] == a) return sign | codes_[k];
    const double dlo = a - values_[k - 1], dhi = values_[k] - a;
    if (dlo < dhi) return sign | codes_[k - 1];
    if (dhi < dlo) return sign | codes_[k];
    return sign | ((codes_[k] & 1) == 0 ? codes_[k] : codes_[k - 1]);
  }

  const std::vector<double>& values() const { return values_; }

 private:
  const Format& f_;
  std::vector<double> values_;
  std::vector<uint32_t> codes_;
  double maxFinite_ = 0;
  double halfUlpAtMax_ = 0;
};

// Whether fromFloat's output matches the reference, treating any NaN with the right sign as a match for NaN.
::testing::AssertionResult encodesLike(const Format& f, const RefEncoder& ref, float x) {
  const uint32_t got = f.fromFloat(x), want = ref.encode(x);
  if (got == want) return ::testing::AssertionSuccess();
  // NaN payloads may be kept where the format has room: any NaN with the right sign matches.
  if (std::isnan(x) && f.isNan(got) && (got & f.signBit()) == (want & f.signBit())) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << f.name << ": float bits 0x" << std::hex << bitsOf(x) << " (" << x
                                       << ") encoded as 0x" << got << ", want 0x" << want;
}

class FormatTest : public ::testing::TestWithParam<const Format*> {};

TEST_P(FormatTest, DecodeMatchesReferenceForEveryCode) {
  const Format& f = *GetParam();
  for (uint32_t c = 0; c < f.codeCount(); ++c) {
    const float v = f.toFloat(c);
    if (f.isNan(c)) {
      ASSERT_TRUE(std::isnan(v)) << f.name << " code 0x" << std::hex << c;
      ASSERT_EQ(std::signbit(v), (c & f.signBit()) != 0) << f.name << " code 0x" << std::hex << c;
      ASSERT_NE(bitsOf(v) & 0x00400000u, 0u) << "NaN must come out quiet, code 0x" << std::hex << c;
      continue;
    }
    ASSERT_EQ(static_cast<double>(v), f.decode(c)) << f.name << " code 0x" << std::hex << c;
    ASSERT_EQ(std::signbit(v), (c & f.signBit()) != 0) << f.name << " code 0x" << std::hex << c;
  }
}

TEST_P(FormatTest, EveryCodeRoundTrips) {
  const Format& f = *GetParam();
  for (uint32_t c = 0; c < f.codeCount(); ++c) {
    const uint32_t back = f.fromFloat(f.toFloat(c));
    if (f.isNan(c)) {
      // NaN stays NaN with its sign; quiet NaNs keep their payload, signaling ones come back quieted.
      ASSERT_TRUE(f.isNan(back)) << f.name << " code 0x" << std::hex << c << " -> 0x" << back;
      ASSERT_EQ(back & f.signBit(), c & f.signBit());
      if (!f.finiteOnly) {
        ASSERT_EQ(back, c | (1u << (f.manBits - 1))) << f.name << " code 0x" << std::hex << c;
      }
      continue;
    }
    ASSERT_EQ(back, c) << f.name << " code 0x" << std::hex << c;
  }
}

TEST_P(FormatTest, AllMidpointsAndNeighboursRoundToNearestEven) {
  const Format& f = *GetParam();
  const RefEncoder ref(f);
  const auto& v = ref.values();
  std::vector<double> points;
  for (size_t i = 0; i + 1 < v.size(); ++i) points.push_back((v[i] + v[i + 1]) / 2);
  points.push_back(v.back() + (v.back() - v[v.size() - 2]) / 2);  // the midpoint above the largest finite value
  for (double mid : points) {
    const float m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid) << "midpoint not exact in float";
    for (float x : {m, std::nextafter(m, 0.0f), std::nextafter(m, std::numeric_limits<float>::infinity())}) {
      ASSERT_TRUE(encodesLike(f, ref, x));
      ASSERT_TRUE(encodesLike(f, ref, -x));
    }
  }
}

TEST_P(FormatTest, RandomFloatsMatchReference) {
  const Format& f = *GetParam();
  const RefEncoder ref(f);
  std::mt19937 rng(12345);
  // Random bit patterns, mostly with exponents around the format's range (subnormals through overflow).
  const int lo = std::max(0, 127 - f.bias() - f.manBits - 3), hi = std::min(255, 127 + f.bias() + 3);
  std::uniform_int_distribution<int> expDist(lo, hi);
  const int kCount = f.width() == 16 ? 1500000 : 400000;
  for (int i = 0; i < kCount; ++i) {
    uint32_t u = rng();
    if (i % 8 != 0) u = (u & 0x807fffffu) | (static_cast<uint32_t>(expDist(rng)) << 23);
    ASSERT_TRUE(encodesLike(f, ref, floatOf(u)));
  }
  // Float subnormals and the specials.
  for (uint32_t u : {0x00000000u, 0x00000001u, 0x00400000u, 0x007fffffu, 0x7f7fffffu, 0x7f800000u, 0x7fc00000u,
                     0x7f800001u, 0x7fffffffu}) {
    ASSERT_TRUE(encodesLike(f, ref, floatOf(u)));
    ASSERT_TRUE(encodesLike(f, ref, floatOf(u | 0x80000000u)));
  }
}

TEST_P(FormatTest, SignedZeroAndNan) {
  const Format& f = *GetParam();
  EXPECT_EQ(f.fromFloat(0.0f), 0u);
  EXPECT_EQ(f.fromFloat(-0.0f), f.signBit());
  EXPECT_EQ(bitsOf(f.toFloat(0)), 0u);
  EXPECT_EQ(bitsOf(f.toFloat(f.signBit())), 0x80000000u);
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  const float snan = std::numeric_limits<float>::signaling_NaN();
  for (float n : {qnan, -qnan, snan, -snan}) {
    const uint32_t c = f.fromFloat(n);
    EXPECT_TRUE(f.isNan(c)) << f.name;
    EXPECT_EQ((c & f.signBit()) != 0, std::signbit(n)) << f.name;
    if (!f.finiteOnly) {
      EXPECT_NE(c & (1u << (f.manBits - 1)), 0u) << "quiet bit, " << f.name;
    }
  }
  // Tiny values underflow to a zero of the right sign.
  EXPECT_EQ(f.fromFloat(std::ldexp(1.0f, -140)), 0u);
  EXPECT_EQ(f.fromFloat(-std::ldexp(1.0f, -140)), f.signBit());
  EXPECT_EQ(f.fromFloat(-std::numeric_limits<float>::denorm_min()), f.signBit());
}

INSTANTIATE_TEST_SUITE_P(Formats, FormatTest, ::testing::Values(&kHalf, &kBf16, &kE4m3, &kE5m2),
                         [](const ::testing::TestParamInfo<const Format*>& info) { return info.param->name; });

// ---- Hand-picked values per format. ----

TEST(DType, SizesAndNames) {
  EXPECT_EQ(static_cast<int>(DType::kFloat16), 6);
  EXPECT_EQ(static_cast<int>(DType::kBfloat16), 9);
  EXPECT_EQ(static_cast<int>(DType::kFp8E5M2), 11);
  EXPECT_EQ(static_cast<int>(DType::kCount), 12);
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  const char* names[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                         "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  for (int i = 0; i < static_cast<int>(DType::kCount); ++i) {
    EXPECT_EQ(dtypeSize(static_cast<DType>(i)), sizes[i]);
    EXPECT_STREQ(dtypeName(static_cast<DType>(i)), names[i]);
  }
  EXPECT_EQ(dtypeSize(DType::kCount), 0u);
  static_assert(dtypeSize(DType::kFloat64) == 8, "constexpr");
}

TEST(DType, HalfKnownValues) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.996f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);                          // tie above max rounds to even = inf
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even (down)
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);             // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);             // tie with zero -> zero
  EXPECT_EQ(floatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -26)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002);     // 1.5 units: tie -> even (2)
  EXPECT_EQ(floatToHalf(std::ldexp(1023.5f, -24)), 0x0400);  // rounds up from the top subnormal to min normal
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(halfToFloat(0xfc00)) && halfToFloat(0xfc00) < 0);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::quiet_NaN()), 0x7e00);
}

TEST(DType, Bf16KnownValues) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);        // tie -> even
  EXPECT_EQ(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);    // tie -> even
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80);  // overflows to inf
  EXPECT_EQ(floatToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::denorm_min()), 0x0000);  // 2^-149 < half of 2^-133
  EXPECT_EQ(floatToBf16(floatOf(0x00010000u)), 0x0001);                      // bf16's smallest subnormal
  EXPECT_EQ(floatToBf16(floatOf(0x00018000u)), 0x0002);                      // tie -> even
  EXPECT_EQ(bf16ToFloat(0x0001), floatOf(0x00010000u));
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::quiet_NaN()), 0x7fc0);
}

TEST(DType, Fp8E4m3KnownValuesAndSaturation) {
  EXPECT_EQ(floatToFp8e4m3(1.0f), 0x38);
  EXPECT_EQ(floatToFp8e4m3(448.0f), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(464.0f), 0x7e);  // RNE tie
  EXPECT_EQ(floatToFp8e4m3(465.0f), 0x7e);  // saturated
  EXPECT_EQ(floatToFp8e4m3(-1e30f), 0xfe);
  EXPECT_EQ(floatToFp8e4m3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(floatToFp8e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(floatToFp8e4m3(-std::numeric_limits<float>::quiet_NaN()), 0xff);
  EXPECT_EQ(floatToFp8e4m3(std::ldexp(1.0f, -9)), 0x01);   // smallest subnormal
  EXPECT_EQ(floatToFp8e4m3(std::ldexp(1.0f, -10)), 0x00);  // tie -> zero
  EXPECT_EQ(floatToFp8e4m3(std::ldexp(3.0f, -10)), 0x02);  // tie -> even
  EXPECT_EQ(fp8e4m3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(fp8e4m3ToFloat(0x78), 256.0f);  // exponent all ones is an ordinary binade in e4m3fn
  EXPECT_EQ(fp8e4m3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0x7f)));
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0xff)));
}

TEST(DType, Fp8E5m2KnownValues) {
  EXPECT_EQ(floatToFp8e5m2(1.0f), 0x3c);
  EXPECT_EQ(floatToFp8e5m2(57344.0f), 0x7b);
  EXPECT_EQ(floatToFp8e5m2(61439.0f), 0x7b);
  EXPECT_EQ(floatToFp8e5m2(61440.0f), 0x7c);  // tie above max -> inf
  EXPECT_EQ(floatToFp8e5m2(-1e30f), 0xfc);
  EXPECT_EQ(floatToFp8e5m2(std::numeric_limits<float>::quiet_NaN()), 0x7e);
  EXPECT_EQ(floatToFp8e5m2(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(floatToFp8e5m2(std::ldexp(1.0f, -17)), 0x00);
  EXPECT_EQ(floatToFp8e5m2(1.125f), 0x3c);  // tie -> even
  EXPECT_EQ(floatToFp8e5m2(1.375f), 0x3e);  // tie -> even
  EXPECT_EQ(fp8e5m2ToFloat(0x7b), 57344.0f);
  EXPECT_TRUE(std::isinf(fp8e5m2ToFloat(0x7c)));
  EXPECT_TRUE(std::isnan(fp8e5m2ToFloat(0x7d)));
}

// e5m2 is the top byte of a half; an RNE conversion through half would double-round. Check a value that exposes it:
// just above the e5m2 midpoint 1.125 but rounding to exactly 1.125 in half.
TEST(DType, Fp8RoundsTheExactFloatValue) {
  const float x = 1.125f + std::ldexp(1.0f, -14);  // below half's resolution at 1.125 (2^-10)
  EXPECT_EQ(floatToHalf(x), floatToHalf(1.125f));
  EXPECT_EQ(floatToFp8e5m2(x), 0x3d);               // nearest e5m2 is 1.25, not the tie-to-even 1.0
  const float y = 1.0625f + std::ldexp(1.0f, -20);  // just above the e4m3 midpoint between 1.0 and 1.125
  EXPECT_EQ(floatToFp8e4m3(y), 0x39);
}

#if defined(__FLT16_MAX__)
TEST(DType, HalfMatchesCompilerFloat16) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    _Float16 h;
    const uint16_t c16 = static_cast<uint16_t>(c);
    std::memcpy(&h, &c16, sizeof(h));
    const float want = static_cast<float>(h), got = halfToFloat(c16);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got));
    } else {
      ASSERT_EQ(bitsOf(got), bitsOf(want)) << std::hex << c;
    }
  }
  auto check = [](float x) {
    const _Float16 h = static_cast<_Float16>(x);
    uint16_t want;
    std::memcpy(&want, &h, sizeof(want));
    const uint16_t got = floatToHalf(x);
    if (std::isnan(x)) return (got & 0x7c00) == 0x7c00 && (got & 0x3ff) != 0;
    return got == want;
  };
  std::mt19937 rng(777);
  std::uniform_int_distribution<int> expDist(127 - 30, 127 + 17);
  for (int i = 0; i < 3000000; ++i) {
    uint32_t u = rng();
    if (i % 4 != 0) u = (u & 0x807fffffu) | (static_cast<uint32_t>(expDist(rng)) << 23);
    ASSERT_TRUE(check(floatOf(u))) << std::hex << u;
  }
  for (uint32_t c = 0; c < 0x7c00; ++c) {  // every halfway point between adjacent finite halves, both signs
    const double lo = halfToFloat(static_cast<uint16_t>(c)), hi = halfToFloat(static_cast<uint16_t>(c + 1));
    const float mid = static_cast<float>((lo + hi) / 2);
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      ASSERT_TRUE(check(x)) << std::hex << bitsOf(x);
      ASSERT_TRUE(check(-x)) << std::hex << bitsOf(x);
    }
  }
}
#else
TEST(DType, HalfMatchesCompilerFloat16) {
  GTEST_SKIP() << "compiler has no _Float16";
}
#endif

}  // namespace
}  // namespace braid
