#include "src/bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>

#include "src/common/logging.h"
#include "src/common/params.h"

namespace braid {
namespace {

constexpr uint32_t kIdVersion = 0xB7A1D002;

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
};
static_assert(sizeof(PackedId) <= kUniqueIdBytes, "unique id overflow");

struct RootHello {
  uint64_t magic;
  int32_t rank;
  int32_t nranks;
  PackedAddr listen;
};

struct PeerHello {
  uint64_t magic;
  int32_t rank;
  int32_t pad;
};

struct FrameHeader {
  uint32_t tag;
  uint32_t pad;
  uint64_t size;
};

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
  uint64_t m = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (read(fd, &m, sizeof(m)) != sizeof(m)) m = 0;
    close(fd);
  }
  if (m == 0) m = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(getpid());
  return m;
}

uint64_t hashString(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h ^ 0x6272616964ull;
}

// The root: collects one hello per rank, then sends everyone the table of listener addresses.
void rootMain(Socket listener, uint64_t magic, double timeoutSec) {
  WaitContext wait = WaitContext::withTimeout(nullptr, timeoutSec);
  int nranks = -1;
  std::vector<Socket> conns;
  std::vector<PackedAddr> table;
  std::string error;
  int arrived = 0;
  while (nranks < 0 || arrived < nranks) {
    Result<Socket> c = listener.accept(wait);
    if (!c.isOk()) {
      BRAID_WARN("bootstrap root on %s: %s; %d of %d ranks arrived", "listener", c.status().message().c_str(), arrived,
                 nranks);
      return;
    }
    Socket s = c.take();
    RootHello hello{};
    // A short deadline per hello: a stray client that connects and says nothing must not stall the rendezvous.
    WaitContext helloWait = WaitContext::withTimeout(nullptr, 5.0);
    Status st = s.recvAll(&hello, sizeof(hello), helloWait);
    if (!st.isOk() || hello.magic != magic) {
      BRAID_WARN("bootstrap root: refused connection from %s: %s", s.peerName().c_str(),
                 st.isOk() ? "it did not present the unique id's magic" : st.message().c_str());
      continue;
    }
    if (nranks < 0) {
      nranks = hello.nranks;
      if (nranks <= 0) nranks = 1;
      conns.resize(static_cast<size_t>(nranks));
      table.resize(static_cast<size_t>(nranks));
    }
    if (hello.nranks != nranks && error.empty()) {
      error = strPrintf("rank %d called init with nranks=%d but another rank used nranks=%d", hello.rank, hello.nranks,
                        nranks);
    }
    if (hello.rank < 0 || hello.rank >= nranks) {
      if (error.empty()) error = strPrintf("rank %d is out of range for nranks=%d", hello.rank, nranks);
      continue;
    }
    if (conns[static_cast<size_t>(hello.rank)].valid()) {
      if (error.empty()) error = strPrintf("two processes called init as rank %d of the same unique id", hello.rank);
      continue;
    }
    table[static_cast<size_t>(hello.rank)] = hello.listen;
    conns[static_cast<size_t>(hello.rank)] = std::move(s);
    ++arrived;
  }
  int32_t status = error.empty() ? 0 : 1;
  for (auto& s : conns) {
    Status st = s.sendAll(&status, sizeof(status), wait);
    if (st.isOk() && status != 0) {
      uint32_t len = static_cast<uint32_t>(error.size());
      st = s.sendAll(&len, sizeof(len), wait);
      if (st.isOk()) st = s.sendAll(error.data(), len, wait);
    } else if (st.isOk()) {
      st = s.sendAll(table.data(), table.size() * sizeof(PackedAddr), wait);
    }
    if (!st.isOk()) BRAID_WARN("bootstrap root: %s", st.message().c_str());
  }
}

}  // namespace

void encodeUniqueId(const UniqueIdInfo& info, char out[kUniqueIdBytes]) {
  memset(out, 0, kUniqueIdBytes);
  PackedId p{};
  p.version = kIdVersion;
  p.flags = info.fromEnv ? 1u : 0u;
  p.magic = info.magic;
  p.root = pack(info.root);
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
  std::thread(rootMain, std::move(listener), info.magic, timeoutSeconds()).detach();
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
  BRAID_INFO(kLogBootstrap, "bootstrap root on %s listening on %s", ifName.c_str(), info.root.toString().c_str());
  // Knobs are read here, not in the thread: a fork() while the thread held the registry lock would hang the child.
  std::thread(rootMain, std::move(listener), info.magic, timeoutSeconds()).detach();
  return info;
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::create(const UniqueIdInfo& id, int rank, int nranks,
                                                     const std::atomic<bool>* abort, double timeoutSec) {
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->rank_ = rank;
  b->nranks_ = nranks;
  b->magic_ = id.magic;
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

  WaitContext wait = b->waitContext();
  BRAID_ASSIGN_OR_RETURN(Socket root, Socket::connect(id.root, wait));
  RootHello hello{id.magic, rank, nranks, pack(bound)};
  BRAID_RETURN_IF_ERROR(root.sendAll(&hello, sizeof(hello), wait).withContext("bootstrap: sending hello to root"));
  int32_t status = 0;
  BRAID_RETURN_IF_ERROR(
      root.recvAll(&status, sizeof(status), wait).withContext("bootstrap: waiting for all ranks at the root"));
  if (status != 0) {
    uint32_t len = 0;
    BRAID_RETURN_IF_ERROR(root.recvAll(&len, sizeof(len), wait));
    std::string text(len, '\0');
    BRAID_RETURN_IF_ERROR(root.recvAll(text.data(), len, wait));
    return invalidUsage("bootstrap root refused the rendezvous: %s", text.c_str());
  }
  std::vector<PackedAddr> table(static_cast<size_t>(nranks));
  BRAID_RETURN_IF_ERROR(root.recvAll(table.data(), table.size() * sizeof(PackedAddr), wait));
  for (const auto& p : table) b->peers_.push_back(unpack(p));
  BRAID_INFO(kLogBootstrap, "bootstrap: rank %d/%d listening on %s (%s)", rank, nranks, bound.toString().c_str(),
             ifName.c_str());
  return b;
}

Bootstrap::~Bootstrap() = default;

WaitContext Bootstrap::waitContext() const {
  return WaitContext::withTimeout(abort_, timeoutSec_);
}

Result<const Socket*> Bootstrap::outgoing(int peer) {
  Socket& s = out_[static_cast<size_t>(peer)];
  if (!s.valid()) {
    WaitContext wait = waitContext();
    BRAID_ASSIGN_OR_RETURN(s, Socket::connect(peers_[static_cast<size_t>(peer)], wait));
    PeerHello hello{magic_, rank_, 0};
    BRAID_RETURN_IF_ERROR(s.sendAll(&hello, sizeof(hello), wait));
  }
  return &s;
}

Status Bootstrap::acceptUntil(int peer, const WaitContext& wait) {
  while (!in_[static_cast<size_t>(peer)].valid()) {
    Result<Socket> c = listener_.accept(wait);
    if (!c.isOk()) return c.status().withContext(strPrintf("bootstrap: waiting for rank %d to connect", peer));
    Socket s = c.take();
    PeerHello hello{};
    Status st = s.recvAll(&hello, sizeof(hello), WaitContext::withTimeout(abort_, 5.0));
    if (!st.isOk() || hello.magic != magic_ || hello.rank < 0 || hello.rank >= nranks_ ||
        in_[static_cast<size_t>(hello.rank)].valid()) {
      BRAID_WARN("bootstrap rank %d: refused connection from %s: %s", rank_, s.peerName().c_str(),
                 st.isOk() ? "it did not present the unique id's magic" : st.message().c_str());
      continue;
    }
    in_[static_cast<size_t>(hello.rank)] = std::move(s);
  }
  return Status::ok();
}

Status Bootstrap::readFrame(int peer, const WaitContext& wait) {
  const Socket& s = in_[static_cast<size_t>(peer)];
  FrameHeader h{};
  BRAID_RETURN_IF_ERROR(
      s.recvAll(&h, sizeof(h), wait).withContext(strPrintf("bootstrap: receiving from rank %d", peer)));
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
