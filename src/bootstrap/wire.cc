#include "src/bootstrap/wire.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace braid {
namespace {

Digest256 toDigest(const uint8_t* p) {
  Digest256 d;
  memcpy(d.data(), p, d.size());
  return d;
}

constexpr size_t kFrameChunk = size_t{64} << 10;

}  // namespace

PackedAddr pack(const SocketAddress& a) {
  PackedAddr p{};
  p.family = static_cast<uint16_t>(a.family());
  p.port = a.port();
  if (a.family() == AF_INET) {
    memcpy(p.addr, &reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr, 4);
  } else if (a.family() == AF_INET6) {
    memcpy(p.addr, &reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr, 16);
  }
  return p;
}

SocketAddress unpack(const PackedAddr& p) {
  SocketAddress a;
  if (p.family == AF_INET) {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.storage);
    s->sin_family = AF_INET;
    memcpy(&s->sin_addr, p.addr, 4);
    a.len = sizeof(sockaddr_in);
    a.setPort(p.port);
  } else if (p.family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.storage);
    s->sin6_family = AF_INET6;
    memcpy(&s->sin6_addr, p.addr, 16);
    a.len = sizeof(sockaddr_in6);
    a.setPort(p.port);
  }
  return a;
}

Digest256 rootHelloMac(const Digest256& key, const Nonce& challenge, const RootHello& h) {
  return bootstrapMac(key, "root hello", {{challenge.data(), challenge.size()}, {&h, offsetof(RootHello, mac)}});
}

Digest256 peerHelloMac(const Digest256& key, const Nonce& challenge, const PeerHello& h) {
  return bootstrapMac(key, "peer hello", {{challenge.data(), challenge.size()}, {&h, offsetof(PeerHello, mac)}});
}

Digest256 rootReplyMac(const Digest256& key, const uint8_t* rankNonce, int32_t status, const void* body, size_t bytes) {
  return bootstrapMac(key, "root reply", {{rankNonce, kNonceBytes}, {&status, sizeof(status)}, {body, bytes}});
}

HelloVerdict checkRootHello(const Digest256& key, const Nonce& challenge, const RootHello& h) {
  if (!digestsEqual(toDigest(h.mac), rootHelloMac(key, challenge, h))) return HelloVerdict::kKeyRefused;
  if (h.nranks < 1 || h.nranks > kMaxRanks || h.rank < 0 || h.rank >= h.nranks) return HelloVerdict::kRanksRefused;
  return HelloVerdict::kAccepted;
}

const char* checkPeerHello(const Digest256& key, const Nonce& challenge, const PeerHello& h, int nranks) {
  if (!digestsEqual(toDigest(h.mac), peerHelloMac(key, challenge, h))) return "it did not prove the job's key";
  if (h.rank < 0 || h.rank >= nranks) return "it named a rank outside the communicator";
  return nullptr;
}

Result<RootReply> readRootReply(const ByteReader& read, const Digest256& key, const uint8_t* rankNonce, int nranks,
                                int rank, const std::string& root) {
  if (nranks < 1 || nranks > kMaxRanks) return invalidArgument("nranks=%d is out of range (1..%d)", nranks, kMaxRanks);
  int32_t status = 0;
  BRAID_RETURN_IF_ERROR(read(&status, sizeof(status)).withContext("bootstrap: waiting for all ranks at the root"));
  if (status == kStatusKeyRefused) {
    return invalidUsage(
        "bootstrap root %s refused rank %d: its key differs from this rank's (the ranks have different "
        "BRAID_BOOTSTRAP_SECRET values, or this unique id belongs to another job)",
        root.c_str(), rank);
  }
  std::vector<char> body;
  if (status != 0) {
    uint32_t len = 0;
    BRAID_RETURN_IF_ERROR(read(&len, sizeof(len)));
    if (len > kMaxErrorText) {
      return remoteError("bootstrap root %s sent an error text of %u bytes (at most %u)", root.c_str(), len,
                         kMaxErrorText);
    }
    body.resize(len);
  } else {
    body.resize(static_cast<size_t>(nranks) * sizeof(RankEntry));
  }
  BRAID_RETURN_IF_ERROR(read(body.data(), body.size()));
  uint8_t mac[32];
  BRAID_RETURN_IF_ERROR(read(mac, sizeof(mac)));
  if (!digestsEqual(toDigest(mac), rootReplyMac(key, rankNonce, status, body.data(), body.size()))) {
    return remoteError(
        "bootstrap root %s did not prove the job's key: a stranger answered at that address, or the ranks have "
        "different BRAID_BOOTSTRAP_SECRET values",
        root.c_str());
  }
  if (status != 0) {
    return invalidUsage("bootstrap root refused the rendezvous: %s", std::string(body.begin(), body.end()).c_str());
  }
  RootReply reply;
  reply.table.resize(static_cast<size_t>(nranks));
  memcpy(reply.table.data(), body.data(), body.size());
  return reply;
}

Status readFrame(const ByteReader& read, int peer, uint32_t* tag, std::vector<char>* body) {
  FrameHeader h{};
  BRAID_RETURN_IF_ERROR(read(&h, sizeof(h)).withContext(strPrintf("bootstrap: receiving from rank %d", peer)));
  if (h.size > kMaxFrameBytes) {
    return remoteError("bootstrap: rank %d announced a message of %llu bytes (tag %u); at most %llu are accepted", peer,
                       static_cast<unsigned long long>(h.size), h.tag, static_cast<unsigned long long>(kMaxFrameBytes));
  }
  body->clear();
  size_t got = 0;
  while (got < h.size) {
    const size_t chunk = std::min<size_t>(h.size - got, std::max(kFrameChunk, got));
    body->resize(got + chunk);
    BRAID_RETURN_IF_ERROR(
        read(body->data() + got, chunk).withContext(strPrintf("bootstrap: receiving from rank %d", peer)));
    got += chunk;
  }
  *tag = h.tag;
  return Status::ok();
}

}  // namespace braid
