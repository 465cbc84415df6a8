#include "src/bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "src/common/logging.h"
#include "src/common/params.h"

namespace braid {
namespace {

constexpr uint32_t kIdVersion = 0xB7A1D003;
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

struct PackedId {
  uint32_t version;
  uint32_t flags;  // bit 0: from NCCL_COMM_ID
  uint64_t magic;
  PackedAddr root;
  uint8_t nonce[kNonceBytes];  // random (zero for NCCL_COMM_ID): part of the job's key
};
static_assert(sizeof(PackedId) <= kUniqueIdBytes, "unique id overflow");

// A rank's answer to the root's challenge. mac covers the challenge, every field before it, and proves the key.
struct RootHello {
  int32_t rank;
  int32_t nranks;
  PackedAddr listen;
  uint8_t nonce[kNonceBytes];  // the rank's own challenge to the root, answered by the reply's MAC
  uint8_t mac[32];
};

// A rank's answer to a peer's challenge.
struct PeerHello {
  int32_t rank;
  int32_t pad;
  uint8_t mac[32];
};

static_assert(sizeof(PeerHello) == sizeof(int32_t) * 2 + 32, "Bootstrap::inbound_ reads answers of this size");

struct FrameHeader {
  uint32_t tag;
  uint32_t pad;
  uint64_t size;
};

Digest256 toDigest(const uint8_t* p) {
  Digest256 d;
  memcpy(d.data(), p, d.size());
  return d;
}

Digest256 rootHelloMac(const Digest256& key, const Nonce& challenge, const RootHello& h) {
  return bootstrapMac(key, "root hello", {{challenge.data(), challenge.size()}, {&h, offsetof(RootHello, mac)}});
}

Digest256 peerHelloMac(const Digest256& key, const Nonce& challenge, const PeerHello& h) {
  return bootstrapMac(key, "peer hello", {{challenge.data(), challenge.size()}, {&h, offsetof(PeerHello, mac)}});
}

// The root's reply: status, then the table (status 0) or an error text, then a MAC over the rank's nonce and all
// of it, so a rank knows the table came from a root that holds the key.
Digest256 rootReplyMac(const Digest256& key, const uint8_t* rankNonce, int32_t status, const void* body, size_t bytes) {
  return bootstrapMac(key, "root reply", {{rankNonce, kNonceBytes}, {&status, sizeof(status)}, {body, bytes}});
}

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
  } else if (p.family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.storage);
    s->sin6_family = AF_INET6;
    memcpy(&s->sin6_addr, p.addr, 16);
    a.len = sizeof(sockaddr_in6);
  }
  a.setPort(p.port);
  return a;
}

double timeoutSeconds() {
  return static_cast<double>(params::Timeout());
}

uint64_t randomMagic() {
  const Nonce n = randomNonce();  // /dev/urandom (std::random_device where it cannot be read)
  uint64_t m = 0;
  memcpy(&m, n.data(), sizeof(m));
  return m;
}

uint64_t hashString(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h ^ 0x6272616964ull;
}

// The root's reply to one rank: the status, the body (an error text, preceded by its length, when the status is
// not 0; the table otherwise), and the MAC over them and the rank's nonce (rootReplyMac).
Status sendRootReply(const Socket& s, const Digest256& key, const uint8_t* rankNonce, int32_t status, const void* body,
                     size_t bytes, const WaitContext& wait) {
  const Digest256 mac = rootReplyMac(key, rankNonce, status, body, bytes);
  BRAID_RETURN_IF_ERROR(s.sendAll(&status, sizeof(status), wait));
  if (status != 0) {
    const uint32_t len = static_cast<uint32_t>(bytes);
    BRAID_RETURN_IF_ERROR(s.sendAll(&len, sizeof(len), wait));
  }
  BRAID_RETURN_IF_ERROR(s.sendAll(body, bytes, wait));
  return s.sendAll(mac.data(), mac.size(), wait);
}

// The root: collects one authenticated hello per rank, then sends everyone the table of listener addresses.
// Connections are handshaken concurrently (handshake.h); nothing a stranger sends is trusted before its MAC checks.
void rootLoop(const Socket& listener, const Digest256& key, double timeoutSec) {
  WaitContext wait = WaitContext::withTimeout(nullptr, timeoutSec);
  Handshakes handshakes(sizeof(RootHello));
  int nranks = -1;
  struct Joined {
    Socket socket;
    RootHello hello;
  };
  std::vector<Joined> joined;
  std::string error;
  int arrived = 0;
  auto refuse = [&](Socket& s, const RootHello& h, const std::string& why) {
    BRAID_WARN("bootstrap root: refused %s: %s", s.peerName().c_str(), why.c_str());
    (void)sendRootReply(s, key, h.nonce, 1, why.data(), std::min<size_t>(why.size(), kMaxErrorText),
                        WaitContext::withTimeout(nullptr, 1.0));
  };
  while (nranks < 0 || arrived < nranks) {
    if (wait.expired()) {
      BRAID_WARN("bootstrap root: %d of %d ranks arrived before the deadline (BRAID_TIMEOUT)", arrived, nranks);
      return;
    }
    Result<std::vector<Answered>> answered = handshakes.step(listener, wait.pollMs(100), "root");
    if (!answered.isOk()) {
      BRAID_WARN("bootstrap root: %s", answered.status().message().c_str());
      return;
    }
    for (Answered& a : answered.value()) {
      RootHello hello;
      memcpy(&hello, a.answer.data(), sizeof(hello));
      if (!digestsEqual(toDigest(hello.mac), rootHelloMac(key, a.nonce, hello))) {
        BRAID_WARN(
            "bootstrap root: refused connection from %s: it did not prove the job's key (a stranger, or a rank "
            "of another job or with another BRAID_BOOTSTRAP_SECRET)",
            a.socket.peerName().c_str());
        // Said without a MAC (there is no shared key to make one): a rank with the wrong secret learns why at once.
        const int32_t keyRefused = kStatusKeyRefused;
        (void)a.socket.sendAll(&keyRefused, sizeof(keyRefused), WaitContext::withTimeout(nullptr, 1.0));
        continue;
      }
      if (hello.nranks < 1 || hello.nranks > kMaxRanks || hello.rank < 0 || hello.rank >= hello.nranks) {
        refuse(a.socket, hello,
               strPrintf("rank=%d nranks=%d is not a rank of a communicator braid can build (1..%d)", hello.rank,
                         hello.nranks, kMaxRanks));
        continue;
      }
      if (nranks < 0) {
        nranks = hello.nranks;
        joined.resize(static_cast<size_t>(nranks));
      }
      if (hello.nranks != nranks) {
        if (error.empty()) {
          error = strPrintf("rank %d called init with nranks=%d but another rank used nranks=%d", hello.rank,
                            hello.nranks, nranks);
        }
        if (hello.rank >= nranks) continue;
      }
      Joined& j = joined[static_cast<size_t>(hello.rank)];
      if (j.socket.valid()) {
        refuse(a.socket, hello,
               strPrintf("rank %d has already joined this unique id's rendezvous from %s; two processes called init "
                         "as rank %d",
                         hello.rank, j.socket.peerName().c_str(), hello.rank));
        continue;
      }
      j.socket = std::move(a.socket);
      j.hello = hello;
      ++arrived;
    }
  }
  const int32_t status = error.empty() ? 0 : 1;
  std::vector<PackedAddr> table(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) table[static_cast<size_t>(r)] = joined[static_cast<size_t>(r)].hello.listen;
  for (Joined& j : joined) {
    Status st = status != 0 ? sendRootReply(j.socket, key, j.hello.nonce, status, error.data(),
                                            std::min<size_t>(error.size(), kMaxErrorText), wait)
                            : sendRootReply(j.socket, key, j.hello.nonce, status, table.data(),
                                            table.size() * sizeof(PackedAddr), wait);
    if (!st.isOk()) BRAID_WARN("bootstrap root: %s", st.message().c_str());
  }
}

void rootMain(Socket listener, Digest256 key, double timeoutSec) {
  // Nothing thrown may leave a detached thread (it would terminate the process).
  try {
    rootLoop(listener, key, timeoutSec);
  } catch (const std::exception& e) {
    BRAID_WARN("bootstrap root: stopped by an exception: %s", e.what());
  } catch (...) {
    BRAID_WARN("bootstrap root: stopped by an unknown exception");
  }
}

// The job's key from the id and BRAID_BOOTSTRAP_SECRET (read at each init and root start, not later).
Digest256 keyFor(const UniqueIdInfo& id) {
  const std::string secret = params::BootstrapSecret();
  if (id.fromEnv && secret.empty()) {
    BRAID_INFO(kLogBootstrap | kLogEnv,
               "bootstrap is unauthenticated: NCCL_COMM_ID without BRAID_BOOTSTRAP_SECRET, so anyone who can reach "
               "the address can join; set the same BRAID_BOOTSTRAP_SECRET on every rank (braidrun sets one)");
  }
  return bootstrapKey(secret, id.magic, id.nonce);
}

}  // namespace

void encodeUniqueId(const UniqueIdInfo& info, char out[kUniqueIdBytes]) {
  memset(out, 0, kUniqueIdBytes);
  PackedId p{};
  p.version = kIdVersion;
  p.flags = info.fromEnv ? 1u : 0u;
  p.magic = info.magic;
  p.root = pack(info.root);
  memcpy(p.nonce, info.nonce.data(), kNonceBytes);
  memcpy(out, &p, sizeof(p));
}

Result<UniqueIdInfo> decodeUniqueId(const char in[kUniqueIdBytes]) {
  PackedId p;
  memcpy(&p, in, sizeof(p));
  if (p.version != kIdVersion) {
    return invalidArgument("commId is not a unique id made by ncclGetUniqueId (version word 0x%08x)", p.version);
  }
  UniqueIdInfo info;
  info.magic = p.magic;
  memcpy(info.nonce.data(), p.nonce, kNonceBytes);
  info.fromEnv = (p.flags & 1u) != 0;
  info.root = unpack(p.root);
  if (info.root.len == 0) return invalidArgument("commId holds no root address");
  return info;
}

Status startRoot(const UniqueIdInfo& info) {
  SocketAddress bound;
  BRAID_ASSIGN_OR_RETURN(Socket listener, Socket::listen(info.root, &bound));
  BRAID_INFO(kLogBootstrap, "bootstrap root listening on %s", bound.toString().c_str());
  // Knobs are read here, not in the thread: a fork() while the thread held the registry lock would hang the child.
  std::thread(rootMain, std::move(listener), keyFor(info), timeoutSeconds()).detach();
  return Status::ok();
}

Result<UniqueIdInfo> createUniqueId(bool useEnv) {
  UniqueIdInfo info;
  std::string commId = useEnv ? params::CommId() : std::string();
  if (!commId.empty()) {
    BRAID_ASSIGN_OR_RETURN(info.root, parseSocketAddress(commId));
    info.magic = hashString(commId);
    info.fromEnv = true;
    BRAID_INFO(kLogBootstrap | kLogEnv, "NCCL_COMM_ID set by environment to %s", commId.c_str());
    return info;
  }
  std::string ifName;
  BRAID_ASSIGN_OR_RETURN(SocketAddress addr, findBootstrapInterface(&ifName));
  BRAID_ASSIGN_OR_RETURN(Socket listener, Socket::listen(addr, &info.root));
  info.magic = randomMagic();
  info.nonce = randomNonce();
  BRAID_INFO(kLogBootstrap, "bootstrap root on %s listening on %s", ifName.c_str(), info.root.toString().c_str());
  // Knobs are read here, not in the thread: a fork() while the thread held the registry lock would hang the child.
  std::thread(rootMain, std::move(listener), keyFor(info), timeoutSeconds()).detach();
  return info;
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::create(const UniqueIdInfo& id, int rank, int nranks,
                                                     const std::atomic<bool>* abort, double timeoutSec) {
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->rank_ = rank;
  b->nranks_ = nranks;
  b->key_ = keyFor(id);
  b->abort_ = abort;
  b->timeoutSec_ = timeoutSec;
  b->out_.resize(static_cast<size_t>(nranks));
  b->in_.resize(static_cast<size_t>(nranks));

  // Our listener goes on an interface of the same family as the root's address; a loopback root means loopback.
  SocketAddress local;
  std::string ifName = "lo";
  const bool rootIsLoopback =
      (id.root.family() == AF_INET &&
       (ntohl(reinterpret_cast<const sockaddr_in*>(&id.root.storage)->sin_addr.s_addr) >> 24) == 127) ||
      (id.root.family() == AF_INET6 &&
       IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&id.root.storage)->sin6_addr));
  if (rootIsLoopback) {
    local = id.root;
    local.setPort(0);
  } else {
    BRAID_ASSIGN_OR_RETURN(local, findBootstrapInterface(&ifName, &id.root));
    noteBootstrapInterface(ifName);
  }
  SocketAddress bound;
  BRAID_ASSIGN_OR_RETURN(b->listener_, Socket::listen(local, &bound));
  Bootstrap* raw = b.get();
  b->acceptor_ = std::thread([raw] { raw->acceptLoop(); });

  WaitContext wait = b->waitContext();
  BRAID_ASSIGN_OR_RETURN(Socket root, Socket::connect(id.root, wait));
  Result<Nonce> challenged = readChallenge(root, wait);
  if (!challenged.isOk()) return challenged.status().withContext("bootstrap: waiting for the root's challenge");
  const Nonce challenge = challenged.value();
  RootHello hello{};
  hello.rank = rank;
  hello.nranks = nranks;
  hello.listen = pack(bound);
  const Nonce mine = randomNonce();
  memcpy(hello.nonce, mine.data(), kNonceBytes);
  const Digest256 mac = rootHelloMac(b->key_, challenge, hello);
  memcpy(hello.mac, mac.data(), mac.size());
  BRAID_RETURN_IF_ERROR(root.sendAll(&hello, sizeof(hello), wait).withContext("bootstrap: sending hello to root"));
  int32_t status = 0;
  BRAID_RETURN_IF_ERROR(
      root.recvAll(&status, sizeof(status), wait).withContext("bootstrap: waiting for all ranks at the root"));
  if (status == kStatusKeyRefused) {
    return invalidUsage(
        "bootstrap root %s refused rank %d: its key differs from this rank's (the ranks have different "
        "BRAID_BOOTSTRAP_SECRET values, or this unique id belongs to another job)",
        id.root.toString().c_str(), rank);
  }
  std::vector<char> body;
  if (status != 0) {
    uint32_t len = 0;
    BRAID_RETURN_IF_ERROR(root.recvAll(&len, sizeof(len), wait));
    if (len > kMaxErrorText) return remoteError("bootstrap root sent an error text of %u bytes", len);
    body.resize(len);
  } else {
    body.resize(static_cast<size_t>(nranks) * sizeof(PackedAddr));
  }
  BRAID_RETURN_IF_ERROR(root.recvAll(body.data(), body.size(), wait));
  uint8_t replyMac[32];
  BRAID_RETURN_IF_ERROR(root.recvAll(replyMac, sizeof(replyMac), wait));
  if (!digestsEqual(toDigest(replyMac), rootReplyMac(b->key_, hello.nonce, status, body.data(), body.size()))) {
    return remoteError(
        "bootstrap root %s did not prove the job's key: a stranger answered at that address, or the ranks have "
        "different BRAID_BOOTSTRAP_SECRET values",
        id.root.toString().c_str());
  }
  if (status != 0) {
    return invalidUsage("bootstrap root refused the rendezvous: %s", std::string(body.begin(), body.end()).c_str());
  }
  std::vector<PackedAddr> table(static_cast<size_t>(nranks));
  memcpy(table.data(), body.data(), body.size());
  for (const auto& p : table) b->peers_.push_back(unpack(p));
  BRAID_INFO(kLogBootstrap, "bootstrap: rank %d/%d listening on %s (%s)", rank, nranks, bound.toString().c_str(),
             ifName.c_str());
  return b;
}

Bootstrap::~Bootstrap() {
  stop_.store(true);
  // Wakes the acceptor's poll() at once (a shut-down listener reports a hang-up), so destroy never waits for it.
  if (listener_.valid()) ::shutdown(listener_.fd(), SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
}

WaitContext Bootstrap::waitContext() const {
  return WaitContext::withTimeout(abort_, timeoutSec_);
}

Result<const Socket*> Bootstrap::outgoing(int peer) {
  Socket& s = out_[static_cast<size_t>(peer)];
  if (!s.valid()) {
    WaitContext wait = waitContext();
    BRAID_ASSIGN_OR_RETURN(s, Socket::connect(peers_[static_cast<size_t>(peer)], wait));
    BRAID_ASSIGN_OR_RETURN(Nonce challenge, readChallenge(s, wait));
    PeerHello hello{rank_, 0, {}};
    const Digest256 mac = peerHelloMac(key_, challenge, hello);
    memcpy(hello.mac, mac.data(), mac.size());
    BRAID_RETURN_IF_ERROR(s.sendAll(&hello, sizeof(hello), wait));
  }
  return &s;
}

// The listener's own thread: a peer that connects (to send) must get its challenge answered whatever this rank is
// doing, since two ranks may each be sending to the other before either receives.
void Bootstrap::acceptLoop() {
  try {
    const std::string who = strPrintf("rank %d", rank_);
    while (!stop_.load(std::memory_order_relaxed)) {
      // Asleep until a connection comes (the destructor wakes it by shutting the listener down); a pending
      // handshake's deadline needs a bounded wait.
      Result<std::vector<Answered>> answered = inbound_.step(listener_, inbound_.pending() > 0 ? 100 : -1, who.c_str());
      if (stop_.load(std::memory_order_relaxed)) break;
      if (!answered.isOk()) {
        BRAID_WARN("bootstrap %s: %s", who.c_str(), answered.status().message().c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      for (Answered& a : answered.value()) {
        PeerHello hello;
        memcpy(&hello, a.answer.data(), sizeof(hello));
        const char* why = nullptr;
        std::lock_guard<std::mutex> lock(inMu_);
        if (!digestsEqual(toDigest(hello.mac), peerHelloMac(key_, a.nonce, hello))) {
          why = "it did not prove the job's key";
        } else if (hello.rank < 0 || hello.rank >= nranks_) {
          why = "it named a rank outside the communicator";
        } else if (in_[static_cast<size_t>(hello.rank)].valid()) {
          why = "that rank is already connected";
        }
        if (why != nullptr) {
          BRAID_WARN("bootstrap %s: refused connection from %s (as rank %d): %s", who.c_str(),
                     a.socket.peerName().c_str(), hello.rank, why);
          continue;
        }
        in_[static_cast<size_t>(hello.rank)] = std::move(a.socket);
        inCv_.notify_all();
      }
    }
  } catch (const std::exception& e) {
    BRAID_WARN("bootstrap rank %d: listener stopped by an exception: %s", rank_, e.what());
  } catch (...) {
    BRAID_WARN("bootstrap rank %d: listener stopped by an unknown exception", rank_);
  }
}

Status Bootstrap::acceptUntil(int peer, const WaitContext& wait) {
  std::unique_lock<std::mutex> lock(inMu_);
  while (!in_[static_cast<size_t>(peer)].valid()) {
    if (wait.aborted()) return invalidUsage("bootstrap: waiting for rank %d aborted by ncclCommAbort", peer);
    if (wait.expired()) {
      return remoteError("bootstrap: rank %d did not connect before the deadline (BRAID_TIMEOUT)", peer);
    }
    inCv_.wait_for(lock, std::chrono::milliseconds(wait.pollMs(100)));
  }
  return Status::ok();
}

Status Bootstrap::readFrame(int peer, const WaitContext& wait) {
  const Socket& s = in_[static_cast<size_t>(peer)];
  FrameHeader h{};
  BRAID_RETURN_IF_ERROR(
      s.recvAll(&h, sizeof(h), wait).withContext(strPrintf("bootstrap: receiving from rank %d", peer)));
  if (h.size > kMaxFrameBytes) {
    return remoteError("bootstrap: rank %d announced a message of %llu bytes (tag %u); at most %llu are accepted", peer,
                       static_cast<unsigned long long>(h.size), h.tag, static_cast<unsigned long long>(kMaxFrameBytes));
  }
  std::vector<char> data(h.size);
  BRAID_RETURN_IF_ERROR(s.recvAll(data.data(), h.size, wait));
  unexpected_[{peer, h.tag}].push_back(std::move(data));
  return Status::ok();
}

Status Bootstrap::send(int peer, uint32_t tag, const void* data, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  if (peer == rank_) {
    const char* p = static_cast<const char*>(data);
    unexpected_[{peer, tag}].emplace_back(p, p + size);
    return Status::ok();
  }
  Result<const Socket*> out = outgoing(peer);
  if (!out.isOk()) return out.status().withContext(strPrintf("bootstrap: connecting to rank %d", peer));
  const Socket* s = out.take();
  WaitContext wait = waitContext();
  FrameHeader h{tag, 0, size};
  BRAID_RETURN_IF_ERROR(s->sendAll(&h, sizeof(h), wait).withContext(strPrintf("bootstrap: sending to rank %d", peer)));
  return s->sendAll(data, size, wait).withContext(strPrintf("bootstrap: sending to rank %d", peer));
}

Status Bootstrap::recv(int peer, uint32_t tag, void* data, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  WaitContext wait = waitContext();
  auto key = std::make_pair(peer, tag);
  while (true) {
    auto it = unexpected_.find(key);
    if (it != unexpected_.end() && !it->second.empty()) {
      std::vector<char> msg = std::move(it->second.front());
      it->second.pop_front();
      if (msg.size() != size) {
        return internalError("bootstrap: message from rank %d tag %u has %zu bytes, expected %zu", peer, tag,
                             msg.size(), size);
      }
      memcpy(data, msg.data(), size);
      return Status::ok();
    }
    if (peer == rank_) return internalError("bootstrap: receive from self with no matching send (tag %u)", tag);
    BRAID_RETURN_IF_ERROR(acceptUntil(peer, wait));
    BRAID_RETURN_IF_ERROR(readFrame(peer, wait));
  }
}

Status Bootstrap::allGather(void* data, size_t bytes) {
  uint32_t tag = 0x80000000u | (collTag_++ & 0x7fffffffu);
  char* base = static_cast<char*>(data);
  int next = (rank_ + 1) % nranks_;
  int prev = (rank_ + nranks_ - 1) % nranks_;
  for (int i = 0; i < nranks_ - 1; ++i) {
    int sendSlot = (rank_ - i + nranks_) % nranks_;
    int recvSlot = (rank_ - i - 1 + nranks_) % nranks_;
    BRAID_RETURN_IF_ERROR(send(next, tag, base + static_cast<size_t>(sendSlot) * bytes, bytes));
    BRAID_RETURN_IF_ERROR(recv(prev, tag, base + static_cast<size_t>(recvSlot) * bytes, bytes));
  }
  return Status::ok();
}

Status Bootstrap::barrier() {
  std::vector<char> dummy(static_cast<size_t>(nranks_));
  return allGather(dummy.data(), 1);
}

}  // namespace braid
