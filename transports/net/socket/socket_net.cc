// The built-in Socket network (ncclNet_v8_t "Socket"): TCP over the interfaces NCCL_SOCKET_IFNAME selects.
// Connection setup lives here; the data path is socket_comm.{h,cc}.
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "src/common/params.h"
#include "src/common/socket.h"
#include "src/common/wait.h"
#include "transports/net/net_common.h"
#include "transports/net/net_plugin.h"
#include "transports/net/socket/socket_comm.h"

namespace braid {
namespace net {
namespace socket {
namespace {

constexpr uint64_t kHandleMagic = 0x62726169642d534bULL;  // listen handle
constexpr uint64_t kHelloMagic = 0x62726169642d4843ULL;   // first bytes on every new socket
constexpr int kMaxDevices = 16;
constexpr int kMaxThreads = 16;
constexpr int kMaxSocks = 64;

struct Device {
  std::string name;
  SocketAddress addr;
  std::string pciPath;
  int speedMbps = 10000;
};

std::mutex gMu;
std::vector<Device> gDevices;

// The listen handle. connect() keeps its progress in `stage`/`pending` (the ABI lets it use the handle as scratch).
struct Handle {
  uint64_t magic;
  union {
    sockaddr sa;
    sockaddr_in in;
    sockaddr_in6 in6;
  } addr;
  uint32_t nSocks;
  uint32_t nThreads;
  uint32_t stage;  // 0: not started; 1: connecting (pending is set)
  uint32_t reserved;
  void* pending;
};
static_assert(sizeof(Handle) <= NCCL_NET_HANDLE_MAXSIZE, "socket handle must fit NCCL_NET_HANDLE_MAXSIZE");

struct Hello {
  uint64_t magic;
  uint64_t commId;  // random, groups a connection's sockets at the listener
  uint32_t index;   // 0: control socket; 1..nSocks: data sockets
  uint32_t nSocks;
};

struct ListenComm {
  int fd = -1;
  uint32_t nSocks = 1;
  uint32_t nThreads = 1;
  std::string addr;
  struct Conn {
    int fd;
    Hello hello;
    size_t got;
    std::string peer;
    std::unique_ptr<TlsStream> tls;  // with encryption on: the hello comes after its handshake
  };
  std::vector<Conn> pending;
  struct Group {
    std::vector<int> fds;
    std::vector<std::unique_ptr<TlsStream>> tls;  // with encryption on, one per socket
    uint32_t count = 0;
    std::string peer;
  };
  std::map<uint64_t, Group> groups;
};

struct PendingConnect {
  SocketAddress addr;
  uint32_t nSocks = 1;
  uint32_t nThreads = 1;
  std::vector<int> fds;
  std::vector<bool> connected;
  std::vector<size_t> sent;
  std::vector<std::unique_ptr<TlsStream>> tls;  // with encryption on, one per socket (made once connected)
  bool secure = false;
  Hello hello{};
  WaitContext wait;
  ~PendingConnect() {
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
  }
};

std::string peerOf(int fd) {
  SocketAddress a;
  a.len = sizeof(a.storage);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.len) != 0) return "<unknown peer>";
  return a.toString();
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Result<std::vector<Device>> findDevices() {
  std::string spec = params::SocketIfname();
  std::string fam = params::SocketFamily();
  int want = fam == "AF_INET" ? AF_INET : fam == "AF_INET6" ? AF_INET6 : AF_UNSPEC;
  if (!fam.empty() && want == AF_UNSPEC) {
    return invalidArgument("NCCL_SOCKET_FAMILY=\"%s\" is not AF_INET or AF_INET6", fam.c_str());
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return errnoError(errno, "NET/Socket : getifaddrs failed");
  std::vector<Device> found;
  std::vector<Device> loop;
  for (int pass = 0; pass < 2; ++pass) {  // IPv4 first, as NCCL
    int f = pass == 0 ? AF_INET : AF_INET6;
    if (want != AF_UNSPEC && want != f) continue;
    for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
      if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != f || (it->ifa_flags & IFF_UP) == 0) continue;
      if (f == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(it->ifa_addr)->sin6_addr)) continue;
      std::string name = it->ifa_name;
      bool isLoop = (it->ifa_flags & IFF_LOOPBACK) != 0;
      bool ok = spec.empty() ? (!isLoop && !matchInterfaceSpec("docker", name)) : matchInterfaceSpec(spec, name);
      Device d;
      d.name = name;
      d.addr.len = f == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
      memcpy(&d.addr.storage, it->ifa_addr, d.addr.len);
      d.addr.setPort(0);
      bool dup = false;
      for (const Device& e : found) dup = dup || e.name == name;  // one address per interface
      if (ok && !dup && found.size() < kMaxDevices) found.push_back(d);
      if (spec.empty() && isLoop && loop.empty()) loop.push_back(d);
    }
  }
  freeifaddrs(list);
  if (found.empty()) found = loop;  // nothing else: loopback, as NCCL does
  // Unset NCCL_SOCKET_IFNAME: only the bootstrap's interface (the one routed to the root) when it is among them.
  // The others may not reach the other hosts at all, and connections are spread over every device
  // (pickNetDevice); NCCL_SOCKET_IFNAME lists interfaces to use several.
  const std::string boot = bootstrapInterface();
  if (spec.empty() && !boot.empty()) {
    const auto it = std::find_if(found.begin(), found.end(), [&](const Device& d) { return d.name == boot; });
    if (it != found.end()) found = {*it};
  }
  for (Device& d : found) {
    std::ifstream speed("/sys/class/net/" + d.name + "/speed");
    int mbps = 0;
    if (speed >> mbps && mbps > 0) d.speedMbps = mbps;
    char real[PATH_MAX];
    std::string dev = "/sys/class/net/" + d.name + "/device";
    if (realpath(dev.c_str(), real) != nullptr) d.pciPath = real;
  }
  return found;
}

// NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD, checked.
Status readThreadConfig(uint32_t* nThreads, uint32_t* nSocks) {
  int64_t t = params::SocketNthreads();
  int64_t s = params::NsocksPerthread();
  if (t < 1 || t > kMaxThreads) {
    return invalidArgument("NCCL_SOCKET_NTHREADS=%lld is out of range (1..%d)", static_cast<long long>(t), kMaxThreads);
  }
  if (s < 1 || s > kMaxSocks) {
    return invalidArgument("NCCL_NSOCKS_PERTHREAD=%lld is out of range (1..%d)", static_cast<long long>(s), kMaxSocks);
  }
  if (t * s > kMaxSocks) {
    return invalidArgument(
        "NCCL_SOCKET_NTHREADS=%lld x NCCL_NSOCKS_PERTHREAD=%lld = %lld sockets per connection "
        "exceeds %d",
        static_cast<long long>(t), static_cast<long long>(s), static_cast<long long>(t * s), kMaxSocks);
  }
  *nThreads = static_cast<uint32_t>(t);
  *nSocks = static_cast<uint32_t>(t * s);
  return Status::ok();
}

Status checkDev(int dev) {
  std::lock_guard<std::mutex> lk(gMu);
  if (dev < 0 || dev >= static_cast<int>(gDevices.size())) {
    return invalidArgument("NET/Socket : device %d does not exist (%zu devices)", dev, gDevices.size());
  }
  return Status::ok();
}

// ---- ABI functions ----

ncclResult_t socketInit(ncclDebugLogger_t logFn) {
  initBuiltin(logFn);
  auto devs = findDevices();
  if (!devs.isOk()) return BRAID_NET_RESULT(devs.status());
  std::lock_guard<std::mutex> lk(gMu);
  gDevices = devs.take();
  std::string list;
  for (size_t i = 0; i < gDevices.size(); ++i) {
    list += " [" + std::to_string(i) + "]" + gDevices[i].name + ":" + gDevices[i].addr.toString();
  }
  BRAID_NET_INFO("NET/Socket : Using%s", list.c_str());
  return ncclSuccess;
}

ncclResult_t socketDevices(int* ndev) {
  if (ndev == nullptr) return BRAID_NET_RESULT(invalidArgument("NET/Socket : devices: ndev is null"));
  std::lock_guard<std::mutex> lk(gMu);
  *ndev = static_cast<int>(gDevices.size());
  return ncclSuccess;
}

ncclResult_t socketGetProperties(int dev, ncclNetProperties_v8_t* props) {
  if (props == nullptr) return BRAID_NET_RESULT(invalidArgument("NET/Socket : getProperties: props is null"));
  Status s = checkDev(dev);
  if (!s.isOk()) return BRAID_NET_RESULT(s);
  std::lock_guard<std::mutex> lk(gMu);
  Device& d = gDevices[dev];
  *props = ncclNetProperties_v8_t{};
  props->name = const_cast<char*>(d.name.c_str());
  props->pciPath = d.pciPath.empty() ? nullptr : const_cast<char*>(d.pciPath.c_str());
  props->guid = static_cast<uint64_t>(dev);
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 1;
  props->speed = d.speedMbps;
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = kMaxGroup;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  return ncclSuccess;
}

ncclResult_t socketListen(int dev, void* opaqueHandle, void** listenComm) {
  if (opaqueHandle == nullptr || listenComm == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/Socket : listen: handle or listenComm is null"));
  }
  *listenComm = nullptr;
  Status s = checkDev(dev);
  if (!s.isOk()) return BRAID_NET_RESULT(s);
  uint32_t nThreads = 1;
  uint32_t nSocks = 1;
  s = readThreadConfig(&nThreads, &nSocks);
  if (!s.isOk()) return BRAID_NET_RESULT(s);
  SocketAddress addr;
  {
    std::lock_guard<std::mutex> lk(gMu);
    addr = gDevices[dev].addr;
  }
  SocketAddress bound;
  auto sock = Socket::listen(addr, &bound);
  if (!sock.isOk()) return BRAID_NET_RESULT(sock.status().withContext("NET/Socket : listen"));
  auto* lc = new ListenComm();
  lc->fd = ::dup(sock.value().fd());
  fcntl(lc->fd, F_SETFL, fcntl(lc->fd, F_GETFL) | O_NONBLOCK);
  fcntl(lc->fd, F_SETFD, FD_CLOEXEC);
  lc->nSocks = nSocks;
  lc->nThreads = nThreads;
  lc->addr = bound.toString();
  auto* h = static_cast<Handle*>(opaqueHandle);
  memset(h, 0, sizeof(*h));
  h->magic = kHandleMagic;
  memcpy(&h->addr, &bound.storage, std::min<size_t>(bound.len, sizeof(h->addr)));
  h->nSocks = nSocks;
  h->nThreads = nThreads;
  *listenComm = lc;
  return ncclSuccess;
}

// Connections in progress: a handle's `pending` is trusted only when it is one of these.
std::mutex gPendingMu;
std::set<void*> gPending;

void forgetPending(Handle* h) {
  {
    std::lock_guard<std::mutex> lk(gPendingMu);
    if (gPending.erase(h->pending) == 0) return;  // not ours: leave it alone
  }
  delete static_cast<PendingConnect*>(h->pending);
  h->pending = nullptr;
  h->stage = 0;
}

Status connectProgress(Handle* h, void** sendComm) {
  if (h->magic != kHandleMagic) {
    return invalidArgument("NET/Socket : connect: the handle is not a Socket-network listen handle (magic %#llx)",
                           static_cast<unsigned long long>(h->magic));
  }
  if (h->stage == 1) {
    std::lock_guard<std::mutex> lk(gPendingMu);
    if (gPending.count(h->pending) == 0) {
      return invalidArgument(
          "NET/Socket : connect: the handle's pending-connection state is not ours (copied "
          "mid-connection? pass the same handle buffer on every call)");
    }
  } else if (h->stage != 0) {
    return invalidArgument("NET/Socket : connect: the handle's stage %u is not 0 or 1", h->stage);
  }
  if (h->stage == 0) {
    BRAID_RETURN_IF_ERROR(socketEncryptionFromEnv());
    if (h->nSocks < 1 || h->nSocks > static_cast<uint32_t>(kMaxSocks) || h->nThreads < 1) {
      return invalidArgument("NET/Socket : connect: handle asks for %u sockets, %u threads", h->nSocks, h->nThreads);
    }
    auto* pc = new PendingConnect();
    pc->addr.len = h->addr.sa.sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    memcpy(&pc->addr.storage, &h->addr, pc->addr.len);
    pc->nSocks = h->nSocks;
    pc->nThreads = h->nThreads;
    pc->wait = WaitContext::withTimeout(nullptr, builtinTimeoutSec().load());
    pc->secure = socketEncryptionOn();
    if (pc->secure) pc->tls.resize(pc->nSocks + 1);
    std::random_device rd;
    pc->hello = Hello{kHelloMagic, (static_cast<uint64_t>(rd()) << 32) ^ rd(), 0, pc->nSocks};
    {
      std::lock_guard<std::mutex> lk(gPendingMu);
      gPending.insert(pc);
    }
    h->pending = pc;
    h->stage = 1;
    for (uint32_t i = 0; i <= pc->nSocks; ++i) {
      int fd = ::socket(pc->addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) return errnoError(errno, "NET/Socket : socket() to connect to %s", pc->addr.toString().c_str());
      setNoDelay(fd);
      pc->fds.push_back(fd);
      pc->connected.push_back(false);
      pc->sent.push_back(0);
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&pc->addr.storage), pc->addr.len) != 0 &&
          errno != EINPROGRESS) {
        return errnoError(errno, "NET/Socket : connect() to %s", pc->addr.toString().c_str());
      }
    }
  }
  auto* pc = static_cast<PendingConnect*>(h->pending);
  bool all = true;
  for (size_t i = 0; i < pc->fds.size(); ++i) {
    int fd = pc->fds[i];
    if (!pc->connected[i]) {
      pollfd pf{fd, POLLOUT, 0};
      if (::poll(&pf, 1, 0) <= 0) {
        all = false;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        return errnoError(err, "NET/Socket : connecting to %s (is the listener still open?)",
                          pc->addr.toString().c_str());
      }
      pc->connected[i] = true;
      if (pc->secure) {
        BRAID_ASSIGN_OR_RETURN(pc->tls[i], TlsStream::start(fd, false, pc->addr.toString()));
      }
    }
    TlsStream* tls = pc->secure ? pc->tls[i].get() : nullptr;
    if (tls != nullptr) {
      BRAID_ASSIGN_OR_RETURN(bool secured, tls->handshakeStep());
      if (!secured) {
        all = false;
        continue;
      }
    }
    Hello hello = pc->hello;
    hello.index = static_cast<uint32_t>(i);
    while (pc->sent[i] < sizeof(hello)) {
      char* at = reinterpret_cast<char*>(&hello) + pc->sent[i];
      const size_t left = sizeof(hello) - pc->sent[i];
      ssize_t n = tls != nullptr ? tls->send(at, left) : ::send(fd, at, left, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        pc->sent[i] += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      return errnoError(errno, "NET/Socket : sending the connection hello to %s", pc->addr.toString().c_str());
    }
    if (pc->sent[i] < sizeof(hello)) all = false;
  }
  if (!all) {
    if (pc->wait.expired()) {
      return remoteError("NET/Socket : could not connect to %s within BRAID_TIMEOUT=%llds", pc->addr.toString().c_str(),
                         static_cast<long long>(builtinTimeoutSec().load()));
    }
    return Status::ok();
  }
  std::vector<int> data(pc->fds.begin() + 1, pc->fds.end());
  if (pc->secure) {
    BRAID_NET_INFO("NET/Socket : connected to %s over TLS 1.3 (%zu sockets)", pc->addr.toString().c_str(),
                   pc->fds.size());
  }
  *sendComm = new SocketComm(true, pc->fds[0], std::move(data), static_cast<int>(pc->nThreads), pc->addr.toString(),
                             std::move(pc->tls));
  pc->fds.clear();  // now owned by the comm
  forgetPending(h);
  return Status::ok();
}

ncclResult_t socketConnect(int dev, void* opaqueHandle, void** sendComm, ncclNetDeviceHandle_v8_t** /*devComm*/) {
  if (opaqueHandle == nullptr || sendComm == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/Socket : connect: handle or sendComm is null"));
  }
  *sendComm = nullptr;
  auto* h = static_cast<Handle*>(opaqueHandle);
  Status s = connectProgress(h, sendComm);
  if (!s.isOk() && h->magic == kHandleMagic && h->stage == 1) forgetPending(h);
  return BRAID_NET_RESULT(s);
}

Status acceptProgress(ListenComm* lc, void** recvComm) {
  while (true) {
    int fd = ::accept4(lc->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) break;
      return errnoError(errno, "NET/Socket : accept() on %s", lc->addr.c_str());
    }
    setNoDelay(fd);
    ListenComm::Conn c{fd, Hello{}, 0, peerOf(fd), nullptr};
    if (socketEncryptionOn()) {
      Result<std::unique_ptr<TlsStream>> tls = TlsStream::start(fd, true, c.peer);
      if (!tls.isOk()) {  // this connection only: the listener goes on
        BRAID_NET_WARN("NET/Socket : dropping a connection from %s to %s: %s", c.peer.c_str(), lc->addr.c_str(),
                       tls.status().message().c_str());
        ::close(fd);
        continue;
      }
      c.tls = std::move(tls.value());
    }
    lc->pending.push_back(std::move(c));
  }
  for (size_t i = 0; i < lc->pending.size();) {
    ListenComm::Conn& c = lc->pending[i];
    bool drop = false;
    ssize_t n = -1;
    errno = EAGAIN;
    if (c.tls != nullptr && !c.tls->handshakeDone()) {
      // Whoever cannot finish the handshake (no key, another key, not TLS) is dropped, not an error of the listener.
      Result<bool> secured = c.tls->handshakeStep();
      if (!secured.isOk()) {
        BRAID_NET_WARN("NET/Socket : dropping a connection from %s to %s: %s", c.peer.c_str(), lc->addr.c_str(),
                       secured.status().message().c_str());
        drop = true;
      }
    }
    if (!drop && (c.tls == nullptr || c.tls->handshakeDone())) {
      char* at = reinterpret_cast<char*>(&c.hello) + c.got;
      const size_t left = sizeof(c.hello) - c.got;
      n = c.tls != nullptr ? c.tls->recv(at, left) : ::recv(c.fd, at, left, MSG_DONTWAIT);
      if (n > 0) c.got += static_cast<size_t>(n);
      drop = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    if (c.got == sizeof(c.hello) &&
        (c.hello.magic != kHelloMagic || c.hello.nSocks != lc->nSocks || c.hello.index > lc->nSocks)) {
      BRAID_NET_INFO("NET/Socket : dropping a connection from %s to %s: not a braid Socket-network peer",
                     c.peer.c_str(), lc->addr.c_str());
      drop = true;
    }
    if (drop) {
      ::close(c.fd);
      lc->pending.erase(lc->pending.begin() + static_cast<long>(i));
      continue;
    }
    if (c.got < sizeof(c.hello)) {
      ++i;
      continue;
    }
    ListenComm::Group& g = lc->groups[c.hello.commId];
    if (g.fds.empty()) {
      g.fds.assign(lc->nSocks + 1, -1);
      g.tls.resize(lc->nSocks + 1);
    }
    if (g.fds[c.hello.index] >= 0)
      ::close(g.fds[c.hello.index]);  // duplicate index: keep the newest
    else
      g.count++;
    g.fds[c.hello.index] = c.fd;
    g.tls[c.hello.index] = std::move(c.tls);
    if (c.hello.index == 0) g.peer = c.peer;
    lc->pending.erase(lc->pending.begin() + static_cast<long>(i));
  }
  for (auto it = lc->groups.begin(); it != lc->groups.end(); ++it) {
    if (it->second.count == lc->nSocks + 1) {
      std::vector<int> fds = std::move(it->second.fds);
      std::vector<std::unique_ptr<TlsStream>> tls = std::move(it->second.tls);
      std::string peer = it->second.peer;
      lc->groups.erase(it);
      std::vector<int> data(fds.begin() + 1, fds.end());
      const auto plain = std::count(tls.begin(), tls.end(), nullptr);
      if (plain == static_cast<long>(tls.size())) {
        tls.clear();
      } else if (plain != 0) {  // ncclSetEncryption changed while this connection's sockets came in: drop it
        BRAID_NET_WARN(
            "NET/Socket : dropping a connection from %s to %s: TLS on some of its sockets only (was "
            "ncclSetEncryption called while it connected?)",
            peer.c_str(), lc->addr.c_str());
        for (int fd : fds) ::close(fd);
        return Status::ok();
      }
      if (!tls.empty()) BRAID_NET_INFO("NET/Socket : accepted %s over TLS 1.3 (%zu sockets)", peer.c_str(), fds.size());
      *recvComm = new SocketComm(false, fds[0], std::move(data), static_cast<int>(lc->nThreads), peer, std::move(tls));
      return Status::ok();
    }
  }
  return Status::ok();
}

ncclResult_t socketAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t** /*devComm*/) {
  if (listenComm == nullptr || recvComm == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/Socket : accept: listenComm or recvComm is null"));
  }
  *recvComm = nullptr;
  return BRAID_NET_RESULT(acceptProgress(static_cast<ListenComm*>(listenComm), recvComm));
}

ncclResult_t socketRegMr(void* comm, void* /*data*/, size_t /*size*/, int type, void** mhandle) {
  if (comm == nullptr || mhandle == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/Socket : regMr: comm or mhandle is null"));
  }
  *mhandle = nullptr;
  if (type != NCCL_PTR_HOST) {
    return BRAID_NET_RESULT(
        invalidArgument("NET/Socket : regMr: memory type %d is not supported (host memory only)", type));
  }
  return ncclSuccess;
}

ncclResult_t socketRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) {
  return BRAID_NET_RESULT(internalError("NET/Socket : regMrDmaBuf: DMA-BUF is not supported (host memory only)"));
}

ncclResult_t socketDeregMr(void*, void*) {
  return ncclSuccess;
}

ncclResult_t socketIsend(void* sendComm, void* data, int size, int tag, void* /*mhandle*/, void** request) {
  if (sendComm == nullptr || request == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/Socket : isend: sendComm or request is null"));
  }
  if (size < 0) return BRAID_NET_RESULT(invalidArgument("NET/Socket : isend: size=%d is negative", size));
  return BRAID_NET_RESULT(static_cast<SocketComm*>(sendComm)->isend(data, static_cast<size_t>(size), tag, request));
}

ncclResult_t socketIrecv(void* recvComm, int n, void** data, int* sizes, int* tags, void** /*mhandles*/,
                         void** request) {
  if (recvComm == nullptr || request == nullptr || sizes == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/Socket : irecv: recvComm, sizes or request is null"));
  }
  size_t sz[kMaxGroup];
  for (int i = 0; i < n && i < kMaxGroup; ++i) {
    if (sizes[i] < 0) return BRAID_NET_RESULT(invalidArgument("NET/Socket : irecv: sizes[%d]=%d", i, sizes[i]));
    sz[i] = static_cast<size_t>(sizes[i]);
  }
  return BRAID_NET_RESULT(static_cast<SocketComm*>(recvComm)->irecv(n, data, sz, tags, request));
}

ncclResult_t socketIflush(void*, int, void**, int*, void**, void** request) {
  // Host memory is coherent: nothing to flush.
  if (request != nullptr) *request = nullptr;
  return ncclSuccess;
}

ncclResult_t socketTest(void* request, int* done, int* sizes) {
  if (request == nullptr || done == nullptr) {
    return BRAID_NET_RESULT(invalidArgument("NET/Socket : test: request or done is null"));
  }
  auto* req = static_cast<SocketRequest*>(request);
  return BRAID_NET_RESULT(req->comm->test(req, done, sizes));
}

ncclResult_t socketCloseComm(void* comm) {
  delete static_cast<SocketComm*>(comm);
  return ncclSuccess;
}

ncclResult_t socketCloseListen(void* listenComm) {
  auto* lc = static_cast<ListenComm*>(listenComm);
  if (lc == nullptr) return ncclSuccess;
  for (auto& c : lc->pending) ::close(c.fd);
  for (auto& g : lc->groups) {
    for (int fd : g.second.fds) {
      if (fd >= 0) ::close(fd);
    }
  }
  ::close(lc->fd);
  delete lc;
  return ncclSuccess;
}

ncclResult_t socketGetDeviceMr(void*, void*, void**) {
  return BRAID_NET_RESULT(internalError("NET/Socket : getDeviceMr: the Socket network has no device offload"));
}

ncclResult_t socketIrecvConsumed(void*, int, void*) {
  return ncclSuccess;
}

const ncclNet_v8_t kSocketNet = {
    "Socket",        socketInit,        socketDevices,     socketGetProperties, socketListen,
    socketConnect,   socketAccept,      socketRegMr,       socketRegMrDmaBuf,   socketDeregMr,
    socketIsend,     socketIrecv,       socketIflush,      socketTest,          socketCloseComm,
    socketCloseComm, socketCloseListen, socketGetDeviceMr, socketIrecvConsumed,
};

}  // namespace
}  // namespace socket

const ncclNet_v8_t* socketNetTable() {
  return &socket::kSocketNet;
}

}  // namespace net
}  // namespace braid
