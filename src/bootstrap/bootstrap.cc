#include "src/bootstrap/bootstrap.h"

#include "src/bootstrap/wire.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "src/common/logging.h"
#include "src/common/params.h"

namespace braid {
namespace {

constexpr uint32_t kIdVersion = 0xB7A1D003;
struct PackedId {
  uint32_t version;
  uint32_t flags;  // bit 0: from NCCL_COMM_ID
  uint64_t magic;
  PackedAddr root;
  uint8_t nonce[kNonceBytes];  // random (zero for NCCL_COMM_ID): part of the job's key
};
static_assert(sizeof(PackedId) <= kUniqueIdBytes, "unique id overflow");

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
// When the ranks disagree on nranks, every rank that joined is told at once, and so is every later one: nobody
// waits for a rank count that can never be reached.
// Roots this process started with ncclGetUniqueId, by their id's magic: ncclCommInitRankScalable stops those it
// does not use. Never destroyed: a detached root thread may still unregister itself while the process exits. A
// child forked later inherits the entries but not the threads, so each entry says which process it belongs to.
struct LiveRoot {
  pid_t pid;
  std::shared_ptr<std::atomic<bool>> stop;
};
std::mutex& rootsMu() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}
std::map<uint64_t, LiveRoot>& liveRoots() {
  static auto* m = new std::map<uint64_t, LiveRoot>;
  return *m;
}

void rootLoop(const Socket& listener, const Digest256& key, double timeoutSec, const std::atomic<bool>& stop) {
  WaitContext wait = WaitContext::withTimeout(nullptr, timeoutSec);
  Handshakes handshakes(sizeof(RootHello));
  int nranks = -1;
  struct Joined {
    Socket socket;
    RootHello hello;
  };
  std::vector<Joined> joined;
  std::string error;  // the disagreement, once there is one
  int arrived = 0;    // ranks joined (before an error) or told the error
  int expected = 0;   // the largest nranks any rank named
  auto refuse = [&](Socket& s, const RootHello& h, const std::string& why) {
    BRAID_WARN("bootstrap root: refused %s: %s", s.peerName().c_str(), why.c_str());
    (void)sendRootReply(s, key, h.nonce, 1, why.data(), std::min<size_t>(why.size(), kMaxErrorText),
                        WaitContext::withTimeout(nullptr, 1.0));
  };
  while (nranks < 0 || arrived < std::max(nranks, expected)) {
    if (stop.load() && arrived == 0) return;  // its id is not used (ncclCommInitRankScalable chose another)
    if (wait.expired() && arrived == 0) {
      BRAID_INFO(kLogBootstrap, "bootstrap root: no rank used this unique id within BRAID_TIMEOUT=%g s; it stops",
                 timeoutSec);
      return;
    }
    if (wait.expired()) {
      // The ranks that came are told which did not, so every one of them names the missing ranks.
      std::string missing;
      for (int r = 0; error.empty() && r < nranks; ++r) {
        if (!joined[static_cast<size_t>(r)].socket.valid()) missing += strPrintf("%s%d", missing.empty() ? "" : ",", r);
      }
      const std::string why = strPrintf(
          "%d of %d ranks arrived at the root within BRAID_TIMEOUT=%g s; missing: rank%s %s (not started, "
          "stopped, or failed before init)",
          arrived, std::max(nranks, expected), timeoutSec, missing.find(',') == std::string::npos ? "" : "s",
          missing.c_str());
      BRAID_WARN("bootstrap root: %s", why.c_str());
      for (Joined& j : joined) {
        if (!j.socket.valid()) continue;
        (void)sendRootReply(j.socket, key, j.hello.nonce, 1, why.data(), std::min<size_t>(why.size(), kMaxErrorText),
                            WaitContext::withTimeout(nullptr, 1.0));
      }
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
      const HelloVerdict verdict = checkRootHello(key, a.nonce, hello);
      if (verdict == HelloVerdict::kKeyRefused) {
        BRAID_WARN(
            "bootstrap root: refused connection from %s: it did not prove the job's key (a stranger, or a rank "
            "of another job or with another BRAID_BOOTSTRAP_SECRET)",
            a.socket.peerName().c_str());
        // Said without a MAC (there is no shared key to make one): a rank with the wrong secret learns why at once.
        const int32_t keyRefused = kStatusKeyRefused;
        (void)a.socket.sendAll(&keyRefused, sizeof(keyRefused), WaitContext::withTimeout(nullptr, 1.0));
        continue;
      }
      if (verdict == HelloVerdict::kRanksRefused) {
        refuse(a.socket, hello,
               strPrintf("rank=%d nranks=%d is not a rank of a communicator braid can build (1..%d)", hello.rank,
                         hello.nranks, kMaxRanks));
        continue;
      }
      expected = std::max(expected, hello.nranks);
      if (nranks < 0) {
        nranks = hello.nranks;
        joined.resize(static_cast<size_t>(nranks));
      }
      if (error.empty() && hello.nranks != nranks) {
        error = strPrintf("rank %d called init with nranks=%d but another rank used nranks=%d", hello.rank,
                          hello.nranks, nranks);
        BRAID_WARN("bootstrap root: %s", error.c_str());
        for (Joined& j : joined) {
          if (!j.socket.valid()) continue;
          Status st =
              sendRootReply(j.socket, key, j.hello.nonce, 1, error.data(),
                            std::min<size_t>(error.size(), kMaxErrorText), WaitContext::withTimeout(nullptr, 1.0));
          if (!st.isOk()) BRAID_WARN("bootstrap root: %s", st.message().c_str());
          j.socket = Socket();
        }
      }
      if (!error.empty()) {
        refuse(a.socket, hello, error);
        ++arrived;
        continue;
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
  if (!error.empty()) return;  // every rank was told
  std::vector<RankEntry> table(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    const RootHello& h = joined[static_cast<size_t>(r)].hello;
    table[static_cast<size_t>(r)] = RankEntry{h.listen, h.pid, 0, h.hostHash};
  }
  for (Joined& j : joined) {
    Status st = sendRootReply(j.socket, key, j.hello.nonce, 0, table.data(), table.size() * sizeof(RankEntry), wait);
    if (!st.isOk()) BRAID_WARN("bootstrap root: %s", st.message().c_str());
  }
}

void rootMain(Socket listener, Digest256 key, double timeoutSec, uint64_t magic,
              std::shared_ptr<std::atomic<bool>> stop) {
  struct Unregister {
    uint64_t magic;
    ~Unregister() {
      std::lock_guard<std::mutex> lock(rootsMu());
      liveRoots().erase(magic);
    }
  } unregister{magic};
  // Nothing thrown may leave a detached thread (it would terminate the process).
  try {
    rootLoop(listener, key, timeoutSec, *stop);
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
  std::thread(rootMain, std::move(listener), keyFor(info), timeoutSeconds(), uint64_t{0},
              std::make_shared<std::atomic<bool>>(false))
      .detach();
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
  auto stop = std::make_shared<std::atomic<bool>>(false);
  {
    std::lock_guard<std::mutex> lock(rootsMu());
    liveRoots()[info.magic] = LiveRoot{getpid(), stop};
  }
  // Knobs are read here, not in the thread: a fork() while the thread held the registry lock would hang the child.
  std::thread(rootMain, std::move(listener), keyFor(info), timeoutSeconds(), info.magic, stop).detach();
  return info;
}

bool stopUnusedRoot(const UniqueIdInfo& info) {
  std::lock_guard<std::mutex> lock(rootsMu());
  auto it = liveRoots().find(info.magic);
  if (it == liveRoots().end() || info.fromEnv || it->second.pid != getpid()) return false;
  it->second.stop->store(true);
  return true;
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::create(const UniqueIdInfo& id, int rank, int nranks,
                                                     const std::atomic<bool>* abort, double timeoutSec,
                                                     uint64_t hostHash) {
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
  hello.pid = static_cast<int32_t>(getpid());
  hello.hostHash = hostHash;
  const Nonce mine = randomNonce();
  memcpy(hello.nonce, mine.data(), kNonceBytes);
  const Digest256 mac = rootHelloMac(b->key_, challenge, hello);
  memcpy(hello.mac, mac.data(), mac.size());
  BRAID_RETURN_IF_ERROR(root.sendAll(&hello, sizeof(hello), wait).withContext("bootstrap: sending hello to root"));
  // The root's own deadline (from its start, before any rank's) passes first, and it then tells every rank which
  // ranks never came: the rank waits a little longer than BRAID_TIMEOUT so that message, not its own timeout, ends
  // the wait.
  const WaitContext replyWait =
      WaitContext::withTimeout(abort, timeoutSec > 0 ? timeoutSec + std::max(1.0, 0.25 * timeoutSec) : timeoutSec);
  ByteReader fromRoot = [&](void* dst, size_t bytes) { return root.recvAll(dst, bytes, replyWait); };
  BRAID_ASSIGN_OR_RETURN(RootReply reply,
                         readRootReply(fromRoot, b->key_, hello.nonce, nranks, rank, id.root.toString()));
  b->localPids_.assign(static_cast<size_t>(nranks), 0);
  for (int r = 0; r < nranks; ++r) {
    const RankEntry& e = reply.table[static_cast<size_t>(r)];
    b->peers_.push_back(unpack(e.listen));
    if (r != rank && hostHash != 0 && e.hostHash == hostHash && e.pid > 0 && e.pid != getpid()) {
      b->localPids_[static_cast<size_t>(r)] = e.pid;
    }
  }
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
  WaitContext w = WaitContext::withTimeout(abort_, timeoutSec_);
  w.rank = rank_;
  w.localPids = localPids_.empty() ? nullptr : localPids_.data();
  w.nLocalPids = static_cast<int>(localPids_.size());
  return w;
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
        const char* why = checkPeerHello(key_, a.nonce, hello, nranks_);
        std::lock_guard<std::mutex> lock(inMu_);
        if (why == nullptr && in_[static_cast<size_t>(hello.rank)].valid()) why = "that rank is already connected";
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
  uint32_t tag = 0;
  std::vector<char> data;
  BRAID_RETURN_IF_ERROR(
      braid::readFrame([&](void* dst, size_t bytes) { return s.recvAll(dst, bytes, wait); }, peer, &tag, &data));
  unexpected_[{peer, tag}].push_back(std::move(data));
  return Status::ok();
}

Status Bootstrap::explain(const Status& st) const {
  if (st.isOk() || (abort_ != nullptr && abort_->load())) return st;
  std::string gone;
  for (int r = 0; r < nranks_; ++r) {
    const int32_t pid = localPids_.empty() ? 0 : localPids_[static_cast<size_t>(r)];
    if (pid > 0 && processGone(pid)) gone += strPrintf("%s rank %d (pid %d)", gone.empty() ? "" : ",", r, pid);
  }
  if (!gone.empty()) return Status(st.code(), st.message() + "; exited on this host:" + gone);
  WaitContext w = waitContext();
  const Status stopped = stoppedPeer(w);
  return stopped.isOk() ? st : Status(st.code(), st.message() + "; " + stopped.message());
}

void Bootstrap::tellPeersFailed(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string text = why.substr(0, kMaxErrorText);
  const WaitContext brief = WaitContext::withTimeout(nullptr, 0.2);
  for (int p = 0; p < nranks_; ++p) {
    const Socket& s = out_[static_cast<size_t>(p)];
    if (p == rank_ || !s.valid()) continue;
    const FrameHeader h{kTagFailed, 0, text.size()};
    if (s.sendAll(&h, sizeof(h), brief).isOk()) (void)s.sendAll(text.data(), text.size(), brief);
  }
}

Status Bootstrap::send(int peer, uint32_t tag, const void* data, size_t size) {
  return explain(sendImpl(peer, tag, data, size));
}

Status Bootstrap::sendImpl(int peer, uint32_t tag, const void* data, size_t size) {
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
  return explain(recvImpl(peer, tag, data, size));
}

Status Bootstrap::recvImpl(int peer, uint32_t tag, void* data, size_t size) {
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
    auto failed = unexpected_.find(std::make_pair(peer, kTagFailed));
    if (failed != unexpected_.end() && !failed->second.empty()) {
      const std::vector<char>& why = failed->second.front();
      return remoteError("bootstrap: rank %d failed: %s", peer, std::string(why.begin(), why.end()).c_str());
    }
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

Status Bootstrap::agreeAllOrNothing(const Status& mine, const char* context,
                                    const std::function<Status(int, const Status&)>& peerFailed) {
  struct Verdict {
    int32_t code;  // a Code
    char why[236];
  };
  std::vector<Verdict> all(static_cast<size_t>(nranks_));
  Verdict& me = all[static_cast<size_t>(rank_)];
  me = Verdict{};
  me.code = static_cast<int32_t>(mine.code());
  snprintf(me.why, sizeof(me.why), "%s", mine.message().c_str());
  BRAID_RETURN_IF_ERROR(allGather(all.data(), sizeof(Verdict)).withContext(context));
  if (!mine.isOk()) return mine;
  for (int q = 0; q < nranks_; ++q) {
    const Verdict& v = all[static_cast<size_t>(q)];
    if (v.code == 0) continue;
    return peerFailed(q, Status(static_cast<Code>(v.code), std::string(v.why, strnlen(v.why, sizeof(v.why)))));
  }
  return Status::ok();
}

}  // namespace braid
