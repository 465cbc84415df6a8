// What crosses the bootstrap's sockets, and the checks on everything read from them before it is trusted, sized or
// indexed. Readers take a ByteReader (a socket's recvAll in the bootstrap, a buffer in the fuzz target
// tests/fuzz/bootstrap_wire_fuzz.cc), so the code the wire reaches is the code that is fuzzed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "src/bootstrap/handshake.h"
#include "src/common/socket.h"
#include "src/common/status.h"

namespace braid {

constexpr int32_t kMaxRanks = 1 << 20;                  // a hello naming more is refused before anything is sized by it
constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 30;  // a frame header announcing more is an error, not a buffer
constexpr uint32_t kMaxErrorText = 4096;
constexpr int32_t kStatusKeyRefused = 2;  // the root's reply to a hello whose MAC did not check

// Address in a fixed wire form, independent of sockaddr_storage's size.
struct PackedAddr {
  uint16_t family;
  uint16_t port;
  uint8_t addr[16];
};
PackedAddr pack(const SocketAddress& a);
// A family other than IPv4 or IPv6 gives an address of length 0 (connecting to it fails with a named error).
SocketAddress unpack(const PackedAddr& p);

// A rank's answer to the root's challenge. mac covers the challenge, every field before it, and proves the key.
struct RootHello {
  int32_t rank;
  int32_t nranks;
  PackedAddr listen;
  int32_t pid;  // the rank's process and host (the communicator's host hash; 0: unknown), so a
  int32_t pad;  // rank whose peer stalls can see whether that peer, on its host, exited or stopped
  uint64_t hostHash;
  uint8_t nonce[kNonceBytes];  // the rank's own challenge to the root, answered by the reply's MAC
  uint8_t mac[32];
};

// One rank in the root's table.
struct RankEntry {
  PackedAddr listen;
  int32_t pid;
  int32_t pad;
  uint64_t hostHash;
};

// A rank's answer to a peer's challenge.
struct PeerHello {
  int32_t rank;
  int32_t pad;
  uint8_t mac[32];
};

struct FrameHeader {
  uint32_t tag;
  uint32_t pad;
  uint64_t size;
};

Digest256 rootHelloMac(const Digest256& key, const Nonce& challenge, const RootHello& h);
Digest256 peerHelloMac(const Digest256& key, const Nonce& challenge, const PeerHello& h);
// The root's reply: status, then the table (status 0) or an error text, then a MAC over the rank's nonce and all of
// it, so a rank knows the table came from a root that holds the key.
Digest256 rootReplyMac(const Digest256& key, const uint8_t* rankNonce, int32_t status, const void* body, size_t bytes);

// The root's verdict on a hello: its MAC first (nothing else in it is looked at otherwise), then rank and nranks.
enum class HelloVerdict { kAccepted, kKeyRefused, kRanksRefused };
HelloVerdict checkRootHello(const Digest256& key, const Nonce& challenge, const RootHello& h);

// A listener's verdict on a peer's hello: null when it may join, else why not (the caller still refuses a rank that
// is already connected).
const char* checkPeerHello(const Digest256& key, const Nonce& challenge, const PeerHello& h, int nranks);

// Reads n bytes or fails.
using ByteReader = std::function<Status(void* dst, size_t bytes)>;

// A rank reads the root's reply to its hello: an error text (at most kMaxErrorText bytes) or the table of `nranks`
// ranks (listener address, process, host), and the MAC that proves the key. `root` names the root in errors. Errors:
// the key refused (kInvalidUsage naming BRAID_BOOTSTRAP_SECRET), the root's refusal (kInvalidUsage with its text), a
// bad length or MAC (kRemoteError).
struct RootReply {
  std::vector<RankEntry> table;
};
Result<RootReply> readRootReply(const ByteReader& read, const Digest256& key, const uint8_t* rankNonce, int nranks,
                                int rank, const std::string& root);

// Reads one frame (header, then body) from rank `peer`. The header's size is bounded by kMaxFrameBytes, and the body
// grows with the bytes that arrive (at most twice what came), so a header announcing much and sending little costs
// no memory.
Status readFrame(const ByteReader& read, int peer, uint32_t* tag, std::vector<char>* body);

}  // namespace braid
