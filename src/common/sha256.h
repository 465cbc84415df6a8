// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the bootstrap's challenge-response authentication. Small and
// dependency-free: the library links no crypto library for this one use.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace braid {

using Digest256 = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  Digest256 finish();  // the object is spent afterwards

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;
};

Digest256 sha256(const void* data, size_t bytes);
// A 64-bit FNV-1a hash of text, for checks that ranks agree (no adversary: not for authentication).
inline uint64_t textHash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}
Digest256 hmacSha256(const void* key, size_t keyBytes, const void* data, size_t bytes);
// Equality in time independent of where the digests differ.
bool digestsEqual(const Digest256& a, const Digest256& b);
std::string digestHex(const Digest256& d);

}  // namespace braid
