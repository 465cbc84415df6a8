// The bootstrap's authentication and its handshake server.
//
// Every connection to a bootstrap listener (the root's, and each rank's) starts with a challenge: the listener sends
// a fresh random nonce, and the connecting side answers with a fixed-size message whose MAC, HMAC-SHA256 under the
// job's key, covers that nonce and the message. The key is derived from the unique id's random words and, when set,
// BRAID_BOOTSTRAP_SECRET (braidrun sets a fresh one per job); it never crosses the wire, and a replayed answer fails
// against a new nonce. With NCCL_COMM_ID and no secret the id is derived from the address, so anyone who knows the
// address can compute the key: the bootstrap then says at INFO that it is unauthenticated.
//
// A listener serves handshakes concurrently: every pending connection has its own short deadline, and at most
// kMaxPendingHandshakes are pending (a newer connection displaces the oldest), so strangers who connect and say
// nothing cannot stall a rendezvous for longer than one handshake deadline.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string>
#include <vector>

#include "src/common/sha256.h"
#include "src/common/socket.h"
#include "src/common/status.h"

namespace braid {

constexpr size_t kNonceBytes = 16;
constexpr size_t kMaxPendingHandshakes = 64;
constexpr auto kHandshakeDeadline = std::chrono::seconds(5);

using Nonce = std::array<uint8_t, kNonceBytes>;
Nonce randomNonce();

// The job's key: SHA-256 over a domain string, the secret (may be empty) and the unique id's random words.
Digest256 bootstrapKey(const std::string& secret, uint64_t magic, const Nonce& idNonce);

// HMAC-SHA256 under `key` of a label and the given pieces, in order.
struct MacPiece {
  const void* data;
  size_t bytes;
};
Digest256 bootstrapMac(const Digest256& key, const char* label, std::initializer_list<MacPiece> pieces);

// What a listener sends first.
struct Challenge {
  uint32_t version;
  uint32_t pad;
  uint8_t nonce[kNonceBytes];
};

// A connection whose answer to the challenge has fully arrived.
struct Answered {
  Socket socket;
  Nonce nonce;
  std::vector<char> answer;
};

class Handshakes {
 public:
  explicit Handshakes(size_t answerBytes) : answerBytes_(answerBytes) {}

  // Waits up to pollMs for the listener or a pending connection, accepts every waiting connection (sending each a
  // challenge), reads what answers have arrived, and drops connections past their deadline (logged, with `who`
  // naming the listener). Returns the connections whose answer is complete; they are no longer pending.
  Result<std::vector<Answered>> step(const Socket& listener, int pollMs, const char* who);
  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    Socket socket;
    Nonce nonce;
    std::vector<char> answer;
    size_t got = 0;
    bool challenged = false;  // the challenge went out (after the TLS handshake, with encryption on)
    std::chrono::steady_clock::time_point deadline;
  };
  // Sends p's challenge; false (drop it) when the socket does not take it at once.
  static bool sendChallenge(Pending* p);
  size_t answerBytes_;
  std::deque<Pending> pending_;
};

// The connecting side: reads the listener's challenge (within `wait`).
Result<Nonce> readChallenge(const Socket& s, const WaitContext& wait);

}  // namespace braid
