// Block conversions (the reduction kernels' fast path) against dtype.h's element conversions: every narrow code
// widens to the same float, and floats across the whole range (every exponent, rounding midpoints and their
// neighbours, subnormals, infinities, NaNs) narrow to the same code. Bit-exact, including NaN payloads.
#include "src/backends/cpu/narrow_convert.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace braid {
namespace {

uint32_t bits(float f) {
  return detail::floatBits(f);
}

float fromBits(uint32_t u) {
  return detail::bitsFloat(u);
}

uint32_t scalarNarrow(DType t, float f) {
  switch (t) {
    case DType::kFloat16:
      return floatToHalf(f);
    case DType::kBfloat16:
      return floatToBf16(f);
    case DType::kFp8E4M3:
      return floatToFp8e4m3(f);
    default:
      return floatToFp8e5m2(f);
  }
}

float scalarWiden(DType t, uint32_t code) {
  switch (t) {
    case DType::kFloat16:
      return halfToFloat(static_cast<uint16_t>(code));
    case DType::kBfloat16:
      return bf16ToFloat(static_cast<uint16_t>(code));
    case DType::kFp8E4M3:
      return fp8e4m3ToFloat(static_cast<uint8_t>(code));
    default:
      return fp8e5m2ToFloat(static_cast<uint8_t>(code));
  }
}

class NarrowConvert : public ::testing::TestWithParam<DType> {};

TEST_P(NarrowConvert, EveryCodeWidensLikeTheElementConversion) {
  const DType t = GetParam();
  const size_t es = dtypeSize(t);
  const size_t codes = size_t{1} << (8 * es);
  std::vector<unsigned char> in(codes * es);
  for (size_t c = 0; c < codes; ++c) std::memcpy(&in[c * es], &c, es);
  // Odd lengths and offsets reach the vector loops' tails.
  for (size_t offset : {size_t{0}, size_t{3}}) {
    const size_t n = codes - offset;
    std::vector<float> out(n);
    widenBlock(t, out.data(), in.data() + offset * es, n);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t code = static_cast<uint32_t>(i + offset);
      ASSERT_EQ(bits(out[i]), bits(scalarWiden(t, code))) << dtypeName(t) << " code 0x" << std::hex << code;
    }
  }
}

TEST_P(NarrowConvert, FloatsNarrowLikeTheElementConversion) {
  const DType t = GetParam();
  const size_t es = dtypeSize(t);
  std::vector<float> in;
  // Every float exponent with a spread of mantissas, plus each narrow code's value, its midpoints to the next
  // code and the floats next to those (where round-to-nearest-even decides).
  for (uint32_t e = 0; e < 256; ++e) {
    for (uint32_t m : {0u, 1u, 0x1000u, 0x7fffu, 0x8000u, 0x8001u, 0x400000u, 0x7fffffu, 0x123457u}) {
      for (uint32_t sign : {0u, 1u}) in.push_back(fromBits((sign << 31) | (e << 23) | m));
    }
  }
  const size_t codes = size_t{1} << (8 * es);
  for (uint32_t c = 0; c + 1 < codes; ++c) {
    const float a = scalarWiden(t, c), b = scalarWiden(t, c + 1);
    const float mid = a / 2 + b / 2;
    for (float f : {a, mid}) {
      for (int d = -2; d <= 2; ++d) in.push_back(fromBits(bits(f) + static_cast<uint32_t>(d)));
    }
  }
  // Around half's limits (fp8 from float goes through half): its largest finite value and overflow threshold,
  // its smallest subnormal, and float subnormals.
  for (float f :
       {65504.0f, 65519.0f, 65520.0f, 65536.0f, 61440.0f, 57344.0f, 5.9604645e-8f, 2.9802322e-8f, 1e-40f, 3e38f}) {
    for (int d = -3; d <= 3; ++d) {
      in.push_back(fromBits(bits(f) + static_cast<uint32_t>(d)));
      in.push_back(-fromBits(bits(f) + static_cast<uint32_t>(d)));
    }
  }
  std::mt19937 gen(7);
  for (int i = 0; i < 200000; ++i) in.push_back(fromBits(static_cast<uint32_t>(gen())));
  std::vector<unsigned char> out(in.size() * es);
  narrowBlock(t, out.data(), in.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    uint32_t got = 0;
    std::memcpy(&got, &out[i * es], es);
    ASSERT_EQ(got, scalarNarrow(t, in[i])) << dtypeName(t) << " float 0x" << std::hex << bits(in[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, NarrowConvert,
                         ::testing::Values(DType::kFloat16, DType::kBfloat16, DType::kFp8E4M3, DType::kFp8E5M2),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtypeName(i.param)); });

}  // namespace
}  // namespace braid
