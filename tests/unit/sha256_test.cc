// SHA-256 and HMAC-SHA256 against published known answers (FIPS 180-2 appendix examples, RFC 4231 test cases).
#include "src/common/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace braid {
namespace {

std::string hexOf(const std::string& s) {
  return digestHex(sha256(s.data(), s.size()));
}

TEST(Sha256, KnownAnswers) {
  EXPECT_EQ(hexOf("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hexOf(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hexOf("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // A million 'a's, fed in uneven pieces across block boundaries.
  Sha256 s;
  const std::string piece(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    const size_t n = std::min(left, piece.size());
    s.update(piece.data(), n);
    left -= n;
  }
  EXPECT_EQ(digestHex(s.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(HmacSha256, Rfc4231) {
  const std::string key1(20, '\x0b');
  const std::string data1 = "Hi There";
  EXPECT_EQ(digestHex(hmacSha256(key1.data(), key1.size(), data1.data(), data1.size())),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  const std::string key2 = "Jefe";
  const std::string data2 = "what do ya want for nothing?";
  EXPECT_EQ(digestHex(hmacSha256(key2.data(), key2.size(), data2.data(), data2.size())),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than the block is hashed first (test case 6).
  const std::string key6(131, '\xaa');
  const std::string data6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  EXPECT_EQ(digestHex(hmacSha256(key6.data(), key6.size(), data6.data(), data6.size())),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(HmacSha256, DigestsEqualComparesEveryByte) {
  Digest256 a{}, b{};
  EXPECT_TRUE(digestsEqual(a, b));
  b[31] = 1;
  EXPECT_FALSE(digestsEqual(a, b));
  b[31] = 0;
  b[0] = 0x80;
  EXPECT_FALSE(digestsEqual(a, b));
}

}  // namespace
}  // namespace braid
