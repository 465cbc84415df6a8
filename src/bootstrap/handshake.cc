#include "src/bootstrap/handshake.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "src/common/logging.h"

namespace braid {
namespace {

constexpr uint32_t kChallengeVersion = 0xB7A1C001;

}  // namespace

Nonce randomNonce() {
  Nonce n{};
  bool filled = false;
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    filled = read(fd, n.data(), n.size()) == static_cast<ssize_t>(n.size());
    close(fd);
  }
  if (!filled) {
    std::random_device rd;
    for (uint8_t& b : n) b = static_cast<uint8_t>(rd());
  }
  return n;
}

Digest256 bootstrapKey(const std::string& secret, uint64_t magic, const Nonce& idNonce) {
  static const char kDomain[] = "braid bootstrap key v1";
  Sha256 h;
  h.update(kDomain, sizeof(kDomain));
  const uint64_t len = secret.size();
  h.update(&len, sizeof(len));
  h.update(secret.data(), secret.size());
  h.update(&magic, sizeof(magic));
  h.update(idNonce.data(), idNonce.size());
  return h.finish();
}

Digest256 bootstrapMac(const Digest256& key, const char* label, std::initializer_list<MacPiece> pieces) {
  std::vector<uint8_t> msg(label, label + std::strlen(label) + 1);
  for (const MacPiece& p : pieces) {
    const auto* b = static_cast<const uint8_t*>(p.data);
    msg.insert(msg.end(), b, b + p.bytes);
  }
  return hmacSha256(key.data(), key.size(), msg.data(), msg.size());
}

bool Handshakes::sendChallenge(Pending* p) {
  Challenge c{kChallengeVersion, 0, {}};
  std::memcpy(c.nonce, p->nonce.data(), kNonceBytes);
  // A fresh socket's buffer takes the challenge at once; one that does not is not worth waiting for.
  Result<size_t> n = p->socket.sendSome(&c, sizeof(c));
  p->challenged = n.isOk() && n.value() == sizeof(c);
  return p->challenged;
}

Result<std::vector<Answered>> Handshakes::step(const Socket& listener, int pollMs, const char* who) {
  std::vector<pollfd> fds;
  fds.push_back(pollfd{listener.fd(), POLLIN, 0});
  for (const Pending& p : pending_) fds.push_back(pollfd{p.socket.fd(), POLLIN, 0});
  if (::poll(fds.data(), fds.size(), pollMs) < 0 && errno != EINTR) {
    return errnoError(errno, "poll() on the bootstrap listener %s", who);
  }
  std::vector<Answered> done;
  const auto now = std::chrono::steady_clock::now();
  // Answers first (the indices in fds match pending_ until new connections are appended below).
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    const short ev = fds[i + 1].revents;
    bool drop = false;
    if (!p.challenged) {
      // Encrypted: the TLS handshake first (each step reads what the client sent), then the challenge.
      Result<bool> secured = p.socket.secureStep();
      if (!secured.isOk()) {
        BRAID_WARN("bootstrap %s: refused connection from %s: %s", who, p.socket.peerName().c_str(),
                   secured.status().message().c_str());
        drop = true;
      } else if (secured.value()) {
        drop = !sendChallenge(&p);
      }
    } else if ((ev & (POLLIN | POLLHUP | POLLERR)) != 0 || p.socket.encrypted()) {
      Result<size_t> n = p.socket.recvSome(p.answer.data() + p.got, answerBytes_ - p.got);
      if (!n.isOk()) {
        BRAID_INFO(kLogBootstrap, "bootstrap %s: %s left before answering the challenge", who,
                   p.socket.peerName().c_str());
        drop = true;
      } else {
        p.got += n.value();
      }
    }
    if (!drop && p.got == answerBytes_) {
      done.push_back(Answered{std::move(p.socket), p.nonce, std::move(p.answer)});
      drop = true;
    } else if (!drop && now >= p.deadline) {
      BRAID_WARN("bootstrap %s: refused connection from %s: %s within %lld s", who, p.socket.peerName().c_str(),
                 p.challenged ? "no answer to the challenge"
                              : "no TLS handshake (a process without this job's key, or not a braid rank)",
                 static_cast<long long>(kHandshakeDeadline.count()));
      drop = true;
    }
    if (drop) {
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    } else {
      ++i;
    }
  }
  if ((fds[0].revents & POLLIN) != 0) {
    while (true) {
      BRAID_ASSIGN_OR_RETURN(Socket s, listener.tryAccept());
      if (!s.valid()) break;
      Pending p;
      p.nonce = randomNonce();
      p.socket = std::move(s);
      if (!p.socket.encrypted() && !sendChallenge(&p)) continue;
      p.answer.resize(answerBytes_);
      p.deadline = now + kHandshakeDeadline;
      if (pending_.size() >= kMaxPendingHandshakes) {
        BRAID_WARN("bootstrap %s: %zu connections are silent; dropping the oldest, from %s", who, pending_.size(),
                   pending_.front().socket.peerName().c_str());
        pending_.pop_front();
      }
      pending_.push_back(std::move(p));
    }
  }
  return done;
}

Result<Nonce> readChallenge(const Socket& s, const WaitContext& wait) {
  Challenge c{};
  Status got = s.recvAll(&c, sizeof(c), wait);
  if (!got.isOk() && !s.encrypted()) {
    // A listener that wants TLS says nothing to a plain connection, then drops it.
    return Status(got.code(), got.message() +
                                  " (if the job's other processes use TLS, by ncclSetEncryption or "
                                  "BRAID_ENCRYPTION_KEY_FILE, this one has no key)");
  }
  BRAID_RETURN_IF_ERROR(got);
  if (c.version != kChallengeVersion) {
    return remoteError("%s is not a braid bootstrap listener of this version (it sent 0x%08x)", s.peerName().c_str(),
                       c.version);
  }
  Nonce n;
  std::memcpy(n.data(), c.nonce, kNonceBytes);
  return n;
}

}  // namespace braid
