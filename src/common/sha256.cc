#include "src/common/sha256.h"

#include <cmath>
#include <cstring>

namespace braid {
namespace {

// The round constants and initial hash values are the first 32 bits of the fractional parts of the cube roots of
// the first 64 primes and of the square roots of the first 8 (FIPS 180-4, 4.2.2 and 5.3.3), computed here rather
// than transcribed; the known-answer tests (tests/unit/sha256_test.cc) pin them.
struct Constants {
  uint32_t k[64];
  uint32_t h0[8];
  Constants() {
    int primes[64];
    int found = 0;
    for (int n = 2; found < 64; ++n) {
      bool prime = true;
      for (int d = 2; d * d <= n; ++d) prime = prime && n % d != 0;
      if (prime) primes[found++] = n;
    }
    auto frac32 = [](long double x) {
      const long double f = x - std::floor(x);
      return static_cast<uint32_t>(std::floor(f * 4294967296.0L));
    };
    for (int i = 0; i < 64; ++i) k[i] = frac32(std::cbrt(static_cast<long double>(primes[i])));
    for (int i = 0; i < 8; ++i) h0[i] = frac32(std::sqrt(static_cast<long double>(primes[i])));
  }
};

const Constants& constants() {
  static const Constants c;
  return c;
}

inline uint32_t rotr(uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

}  // namespace

Sha256::Sha256() {
  std::memcpy(h_, constants().h0, sizeof(h_));
}

void Sha256::block(const uint8_t* p) {
  const uint32_t* k = constants().k;
  uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = static_cast<uint32_t>(p[4 * i]) << 24 | static_cast<uint32_t>(p[4 * i + 1]) << 16 |
           static_cast<uint32_t>(p[4 * i + 2]) << 8 | static_cast<uint32_t>(p[4 * i + 3]);
  }
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h_[0] += a;
  h_[1] += b;
  h_[2] += c;
  h_[3] += d;
  h_[4] += e;
  h_[5] += f;
  h_[6] += g;
  h_[7] += h;
}

void Sha256::update(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  total_ += bytes;
  while (bytes > 0) {
    const size_t take = std::min(bytes, sizeof(buf_) - used_);
    std::memcpy(buf_ + used_, p, take);
    used_ += take;
    p += take;
    bytes -= take;
    if (used_ == sizeof(buf_)) {
      block(buf_);
      used_ = 0;
    }
  }
}

Digest256 Sha256::finish() {
  const uint64_t bits = total_ * 8;
  const uint8_t one = 0x80;
  update(&one, 1);
  const uint8_t zero = 0;
  while (used_ != 56) update(&zero, 1);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  update(len, 8);
  Digest256 out;
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) out[static_cast<size_t>(4 * i + j)] = static_cast<uint8_t>(h_[i] >> (24 - 8 * j));
  }
  return out;
}

Digest256 sha256(const void* data, size_t bytes) {
  Sha256 s;
  s.update(data, bytes);
  return s.finish();
}

Digest256 hmacSha256(const void* key, size_t keyBytes, const void* data, size_t bytes) {
  uint8_t k[64] = {};
  if (keyBytes > sizeof(k)) {
    const Digest256 d = sha256(key, keyBytes);
    std::memcpy(k, d.data(), d.size());
  } else {
    std::memcpy(k, key, keyBytes);
  }
  uint8_t pad[64];
  for (size_t i = 0; i < 64; ++i) pad[i] = k[i] ^ 0x36;
  Sha256 inner;
  inner.update(pad, sizeof(pad));
  inner.update(data, bytes);
  const Digest256 innerDigest = inner.finish();
  for (size_t i = 0; i < 64; ++i) pad[i] = k[i] ^ 0x5c;
  Sha256 outer;
  outer.update(pad, sizeof(pad));
  outer.update(innerDigest.data(), innerDigest.size());
  return outer.finish();
}

bool digestsEqual(const Digest256& a, const Digest256& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = static_cast<uint8_t>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

std::string digestHex(const Digest256& d) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

}  // namespace braid
