// Fuzz target for what the bootstrap reads from its sockets (src/bootstrap/wire.h): the root's reply as a rank reads
// it (raw, and well-formed with a valid MAC so the paths past the MAC run too), peers' message frames, and the
// hellos the root and each rank's listener check. Any bytes give a value or an error, never a crash, an
// out-of-bounds read or an allocation the bytes did not pay for. Corpus: tests/fixtures/fuzz/bootstrap_wire.
//
// Input: byte 0 picks what is fuzzed, byte 1 is a parameter, the rest is the payload.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "src/bootstrap/wire.h"

namespace {

using namespace braid;

// The payload as a socket: reads fail once it is used up.
class Stream {
 public:
  Stream(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  ByteReader reader() {
    return [this](void* dst, size_t bytes) -> Status {
      if (bytes > n_ - at_) return remoteError("stream ended");
      memcpy(dst, p_ + at_, bytes);
      at_ += bytes;
      return Status::ok();
    };
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t at_ = 0;
};

const Digest256& key() {
  static const Digest256 k = bootstrapKey("fuzz", 0x1234, Nonce{});
  return k;
}

template <class T>
T fromBytes(const uint8_t* p, size_t n) {
  T v{};
  memcpy(&v, p, n < sizeof(v) ? n : sizeof(v));
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0] % 5;
  const uint8_t param = data[1];
  const uint8_t* p = data + 2;
  const size_t n = size - 2;
  const uint8_t rankNonce[kNonceBytes] = {7};
  const int nranks = 1 + param % 16;
  switch (mode) {
    case 0: {  // the root's reply, raw
      Stream s(p, n);
      Result<RootReply> r = readRootReply(s.reader(), key(), rankNonce, nranks, 0, "fuzz");
      if (r.isOk()) {
        for (const RankEntry& e : r.value().table) (void)unpack(e.listen).toString();
      }
      break;
    }
    case 1: {  // the root's reply, well-formed and signed: status, then an error text or the table
      const int32_t status = fromBytes<int32_t>(p, n);
      const size_t off = n < 4 ? n : 4;
      std::vector<uint8_t> body(p + off, p + n);
      if (status == 0) body.resize(static_cast<size_t>(nranks) * sizeof(RankEntry));
      std::vector<uint8_t> wire(sizeof(status));
      memcpy(wire.data(), &status, sizeof(status));
      if (status != 0) {
        const uint32_t len = static_cast<uint32_t>(body.size());
        wire.insert(wire.end(), reinterpret_cast<const uint8_t*>(&len), reinterpret_cast<const uint8_t*>(&len) + 4);
      }
      wire.insert(wire.end(), body.begin(), body.end());
      const Digest256 mac = rootReplyMac(key(), rankNonce, status, body.data(), body.size());
      wire.insert(wire.end(), mac.begin(), mac.end());
      Stream s(wire.data(), wire.size());
      Result<RootReply> r = readRootReply(s.reader(), key(), rankNonce, nranks, 0, "fuzz");
      if (r.isOk()) {
        for (const RankEntry& e : r.value().table) (void)unpack(e.listen).toString();
      }
      break;
    }
    case 2: {  // a peer's frames, until the stream ends or one is refused
      Stream s(p, n);
      ByteReader read = s.reader();
      for (int i = 0; i < 16; ++i) {
        uint32_t tag = 0;
        std::vector<char> body;
        if (!readFrame(read, 1, &tag, &body).isOk()) break;
      }
      break;
    }
    case 3: {  // a hello at the root (signed when param is odd, so the rank and nranks checks run)
      RootHello h = fromBytes<RootHello>(p, n);
      const Nonce challenge{};
      if (param & 1) {
        const Digest256 mac = rootHelloMac(key(), challenge, h);
        memcpy(h.mac, mac.data(), mac.size());
      }
      (void)checkRootHello(key(), challenge, h);
      (void)unpack(h.listen).toString();
      break;
    }
    case 4: {  // a hello at a rank's listener
      PeerHello h = fromBytes<PeerHello>(p, n);
      const Nonce challenge{};
      if (param & 1) {
        const Digest256 mac = peerHelloMac(key(), challenge, h);
        memcpy(h.mac, mac.data(), mac.size());
      }
      (void)checkPeerHello(key(), challenge, h, nranks);
      break;
    }
  }
  return 0;
}
