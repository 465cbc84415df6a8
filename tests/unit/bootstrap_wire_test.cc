// What the bootstrap reads from its sockets (src/bootstrap/wire.h): bounds before allocation, MACs before trust.
#include "src/bootstrap/wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace braid {
namespace {

// Bytes as a socket that ends where they end.
struct Bytes {
  std::vector<uint8_t> data;
  size_t at = 0;
  template <class T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    data.insert(data.end(), p, p + sizeof(T));
  }
  void put(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    data.insert(data.end(), b, b + n);
  }
  ByteReader reader() {
    return [this](void* dst, size_t n) -> Status {
      if (n > data.size() - at) return remoteError("connection closed");
      memcpy(dst, data.data() + at, n);
      at += n;
      return Status::ok();
    };
  }
};

const Digest256 kKey = bootstrapKey("test", 42, Nonce{});
const uint8_t kRankNonce[kNonceBytes] = {1, 2, 3};

TEST(BootstrapWire, AFrameAnnouncingMuchAndSendingLittleCostsNoMemory) {
  // Regression (issue 17): a 16-byte header made a rank allocate the announced size before any byte arrived.
  Bytes b;
  b.put(FrameHeader{7, 0, uint64_t{1} << 30});
  b.put("0123456789", 10);
  uint32_t tag = 0;
  std::vector<char> body;
  const Status st = readFrame(b.reader(), 3, &tag, &body);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("rank 3"), std::string::npos) << st.message();
  EXPECT_LE(body.capacity(), size_t{64} << 10);

  Bytes big;
  big.put(FrameHeader{7, 0, (uint64_t{1} << 30) + 1});
  const Status tooBig = readFrame(big.reader(), 5, &tag, &body);
  EXPECT_EQ(tooBig.code(), Code::kRemoteError);
  EXPECT_NE(tooBig.message().find("rank 5 announced a message of 1073741825 bytes"), std::string::npos)
      << tooBig.message();
}

TEST(BootstrapWire, FramesArriveWhole) {
  Bytes b;
  std::vector<char> payload(200000);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7);
  b.put(FrameHeader{9, 0, payload.size()});
  b.put(payload.data(), payload.size());
  b.put(FrameHeader{10, 0, 0});
  ByteReader read = b.reader();
  uint32_t tag = 0;
  std::vector<char> body;
  ASSERT_TRUE(readFrame(read, 1, &tag, &body).isOk());
  EXPECT_EQ(tag, 9u);
  EXPECT_EQ(body, payload);
  ASSERT_TRUE(readFrame(read, 1, &tag, &body).isOk());
  EXPECT_EQ(tag, 10u);
  EXPECT_TRUE(body.empty());
}

TEST(BootstrapWire, RootRepliesAreCheckedBeforeUse) {
  // A table for 2 ranks under the right MAC.
  std::vector<RankEntry> table(2);
  table[1].pid = 77;
  Bytes ok;
  int32_t status = 0;
  ok.put(status);
  ok.put(table.data(), table.size() * sizeof(RankEntry));
  const Digest256 mac = rootReplyMac(kKey, kRankNonce, 0, table.data(), table.size() * sizeof(RankEntry));
  ok.put(mac.data(), mac.size());
  Result<RootReply> r = readRootReply(ok.reader(), kKey, kRankNonce, 2, 0, "root:1");
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r.value().table[1].pid, 77);

  // The same bytes under another key: a stranger answered.
  Bytes stranger = ok;
  stranger.at = 0;
  Result<RootReply> s =
      readRootReply(stranger.reader(), bootstrapKey("other", 42, Nonce{}), kRankNonce, 2, 0, "root:1");
  EXPECT_EQ(s.status().code(), Code::kRemoteError);
  EXPECT_NE(s.status().message().find("did not prove the job's key"), std::string::npos);

  // An error text longer than allowed is refused before anything is sized by it.
  Bytes longText;
  longText.put(int32_t{1});
  longText.put(uint32_t{0xffffffffu});
  Result<RootReply> l = readRootReply(longText.reader(), kKey, kRankNonce, 2, 0, "root:1");
  EXPECT_NE(l.status().message().find("error text of 4294967295 bytes"), std::string::npos) << l.status().message();

  // The root's refusal, quoted.
  const std::string why = "rank 1 called init with nranks=3 but another rank used nranks=2";
  Bytes refused;
  refused.put(int32_t{1});
  refused.put(static_cast<uint32_t>(why.size()));
  refused.put(why.data(), why.size());
  const Digest256 rmac = rootReplyMac(kKey, kRankNonce, 1, why.data(), why.size());
  refused.put(rmac.data(), rmac.size());
  Result<RootReply> q = readRootReply(refused.reader(), kKey, kRankNonce, 2, 0, "root:1");
  EXPECT_EQ(q.status().code(), Code::kInvalidUsage);
  EXPECT_NE(q.status().message().find(why), std::string::npos);

  Bytes keyRefused;
  keyRefused.put(kStatusKeyRefused);
  Result<RootReply> k = readRootReply(keyRefused.reader(), kKey, kRankNonce, 2, 1, "root:1");
  EXPECT_NE(k.status().message().find("BRAID_BOOTSTRAP_SECRET"), std::string::npos);
}

TEST(BootstrapWire, HellosAreJudgedByTheirMacFirst) {
  const Nonce challenge{9};
  RootHello h{};
  h.rank = 5;
  h.nranks = 4;  // out of range, but unsigned: refused for the key, not the ranks
  EXPECT_EQ(checkRootHello(kKey, challenge, h), HelloVerdict::kKeyRefused);
  const Digest256 mac = rootHelloMac(kKey, challenge, h);
  memcpy(h.mac, mac.data(), mac.size());
  EXPECT_EQ(checkRootHello(kKey, challenge, h), HelloVerdict::kRanksRefused);
  h.rank = 3;
  const Digest256 mac2 = rootHelloMac(kKey, challenge, h);
  memcpy(h.mac, mac2.data(), mac2.size());
  EXPECT_EQ(checkRootHello(kKey, challenge, h), HelloVerdict::kAccepted);

  PeerHello p{2, 0, {}};
  EXPECT_STREQ(checkPeerHello(kKey, challenge, p, 4), "it did not prove the job's key");
  const Digest256 pmac = peerHelloMac(kKey, challenge, p);
  memcpy(p.mac, pmac.data(), pmac.size());
  EXPECT_EQ(checkPeerHello(kKey, challenge, p, 4), nullptr);
  EXPECT_STREQ(checkPeerHello(kKey, challenge, p, 2), "it named a rank outside the communicator");
}

}  // namespace
}  // namespace braid
