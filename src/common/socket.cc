#include "src/common/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "src/common/logging.h"
#include "src/common/params.h"

namespace braid {

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SocketAddress::setPort(uint16_t p) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(p);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(p);
}

std::string SocketAddress::toString() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(port());
  }
  return "<unset>";
}

Result<SocketAddress> parseSocketAddress(const std::string& text) {
  std::string host;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return invalidArgument("address \"%s\" is not of the form [ipv6]:port", text.c_str());
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) {
      return invalidArgument("address \"%s\" has no port (expected ip:port, [ipv6]:port or host:port)", text.c_str());
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  long p = strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p <= 0 || p > 65535) {
    return invalidArgument("address \"%s\": port \"%s\" is not a number in 1..65535", text.c_str(), port.c_str());
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return invalidArgument("address \"%s\": cannot resolve host \"%s\" (%s)", text.c_str(), host.c_str(),
                           gai_strerror(rc));
  }
  SocketAddress a;
  memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
  a.len = res->ai_addrlen;
  freeaddrinfo(res);
  a.setPort(static_cast<uint16_t>(p));
  return a;
}

bool matchInterfaceSpec(const std::string& specIn, const std::string& name) {
  std::string spec = specIn;
  bool exclude = !spec.empty() && spec[0] == '^';
  if (exclude) spec = spec.substr(1);
  bool exact = !spec.empty() && spec[0] == '=';
  if (exact) spec = spec.substr(1);
  bool matched = false;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string tok = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!tok.empty()) {
      if (exact ? name == tok : name.compare(0, tok.size(), tok) == 0) matched = true;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return exclude ? !matched : matched;
}

static bool sameHost(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return IN6_ARE_ADDR_EQUAL(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                              &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr);
  }
  return false;
}

Result<SocketAddress> findRouteSource(const SocketAddress& remote, std::string* ifName) {
  // connect() on a UDP socket only selects the route and the source address.
  int fd = ::socket(remote.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errnoError(errno, "socket() to find the route to %s", remote.toString().c_str());
  SocketAddress target = remote;
  if (target.port() == 0) target.setPort(9);  // any port: nothing is sent
  SocketAddress local;
  local.len = sizeof(local.storage);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&target.storage), target.len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&local.storage), &local.len) != 0) {
    const int err = errno;
    ::close(fd);
    return errnoError(err, "no route to %s", remote.toString().c_str());
  }
  ::close(fd);
  local.setPort(0);
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return errnoError(errno, "getifaddrs failed");
  std::string name;
  for (ifaddrs* it = list; it != nullptr && name.empty(); it = it->ifa_next) {
    if (it->ifa_addr != nullptr && sameHost(it->ifa_addr, reinterpret_cast<const sockaddr*>(&local.storage))) {
      name = it->ifa_name;
    }
  }
  freeifaddrs(list);
  if (name.empty()) {
    return invalidArgument("route to %s leaves from %s, which no interface holds", remote.toString().c_str(),
                           local.toString().c_str());
  }
  if (ifName != nullptr) *ifName = name;
  return local;
}

namespace {
std::mutex gBootstrapIfMu;
std::string gBootstrapIf;
}  // namespace

void noteBootstrapInterface(const std::string& ifName) {
  std::lock_guard<std::mutex> lock(gBootstrapIfMu);
  gBootstrapIf = ifName;
}

std::string bootstrapInterface() {
  std::lock_guard<std::mutex> lock(gBootstrapIfMu);
  return gBootstrapIf;
}

Result<SocketAddress> findBootstrapInterface(std::string* ifName, const SocketAddress* toward) {
  std::string spec = params::SocketIfname();
  std::string familyText = params::SocketFamily();
  int wantFamily = AF_UNSPEC;
  if (familyText == "AF_INET") wantFamily = AF_INET;
  if (familyText == "AF_INET6") wantFamily = AF_INET6;
  if (spec.empty() && toward != nullptr && (wantFamily == AF_UNSPEC || wantFamily == toward->family())) {
    Result<SocketAddress> routed = findRouteSource(*toward, ifName);
    if (routed.isOk()) return routed;
    // No route yet (an interface still coming up): the usual choice, and connect() retries until the deadline.
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return errnoError(errno, "getifaddrs failed");
  SocketAddress found;
  SocketAddress loopback;
  std::string foundName;
  // Two passes: IPv4 first (what NCCL prefers by default), then IPv6.
  for (int pass = 0; pass < 2 && found.len == 0; ++pass) {
    int fam = pass == 0 ? AF_INET : AF_INET6;
    if (wantFamily != AF_UNSPEC && wantFamily != fam) continue;
    for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
      if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != fam) continue;
      if ((it->ifa_flags & IFF_UP) == 0) continue;
      std::string name = it->ifa_name;
      if (fam == AF_INET6) {
        auto* a6 = reinterpret_cast<sockaddr_in6*>(it->ifa_addr);
        if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;
      }
      bool isLoop = (it->ifa_flags & IFF_LOOPBACK) != 0;
      bool ok;
      if (!spec.empty()) {
        ok = matchInterfaceSpec(spec, name);
      } else {
        ok = !isLoop && !matchInterfaceSpec("docker,veth-unused", name);
      }
      SocketAddress a;
      a.len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
      memcpy(&a.storage, it->ifa_addr, a.len);
      a.setPort(0);
      if (ok) {
        found = a;
        foundName = name;
        break;
      }
      if (isLoop && loopback.len == 0 && spec.empty()) {
        loopback = a;
      }
    }
  }
  freeifaddrs(list);
  if (found.len == 0 && loopback.len != 0) {
    found = loopback;
    foundName = "lo";
  }
  if (found.len == 0) {
    return invalidArgument("no network interface matches NCCL_SOCKET_IFNAME=\"%s\" NCCL_SOCKET_FAMILY=\"%s\"",
                           spec.c_str(), familyText.c_str());
  }
  if (ifName != nullptr) *ifName = foundName;
  return found;
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    peer_ = std::move(o.peer_);
    tls_ = std::move(o.tls_);
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  tls_.reset();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status Socket::startTls(bool server) {
  BRAID_ASSIGN_OR_RETURN(tls_, TlsStream::start(fd_, server, peer_));
  return Status::ok();
}

Result<bool> Socket::secureStep() {
  if (!tls_) return true;
  return tls_->handshakeStep();
}

ssize_t Socket::rawSend(const void* data, size_t size) const {
  return tls_ ? tls_->send(data, size) : ::send(fd_, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
}

ssize_t Socket::rawRecv(void* data, size_t size) const {
  return tls_ ? tls_->recv(data, size) : ::recv(fd_, data, size, MSG_DONTWAIT);
}

std::string Socket::ioError(const char* what) const {
  if (errno == EPROTO && tls_) return tls_->lastError();
  return strPrintf("%s %s: %s", what, peer_.c_str(), strerror(errno));
}

static void setCommonOptions(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(fd, F_SETFD, FD_CLOEXEC);
}

Result<Socket> Socket::listen(const SocketAddress& addr, SocketAddress* bound) {
  BRAID_RETURN_IF_ERROR(socketEncryptionFromEnv());
  int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return errnoError(errno, "socket() for listening on %s", addr.toString().c_str());
  Socket s(fd);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) != 0) {
    return errnoError(errno, "cannot bind bootstrap socket to %s", addr.toString().c_str());
  }
  if (::listen(fd, 16384) != 0) return errnoError(errno, "listen() on %s", addr.toString().c_str());
  if (bound != nullptr) {
    bound->len = sizeof(bound->storage);
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound->storage), &bound->len);
  }
  return s;
}

Result<Socket> Socket::accept(const WaitContext& wait) const {
  while (true) {
    if (wait.aborted()) return invalidUsage("accept() on bootstrap socket aborted by ncclCommAbort");
    if (wait.expired()) return remoteError("timed out waiting for a bootstrap connection (BRAID_TIMEOUT)");
    pollfd p{fd_, POLLIN, 0};
    int rc = ::poll(&p, 1, wait.pollMs(100));
    if (rc < 0 && errno != EINTR) return errnoError(errno, "poll() on bootstrap listener");
    if (rc <= 0) continue;
    SocketAddress peer;
    peer.len = sizeof(peer.storage);
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&peer.storage), &peer.len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      return errnoError(errno, "accept() on bootstrap listener");
    }
    setCommonOptions(fd);
    Socket s(fd);
    s.peer_ = peer.toString();
    if (socketEncryptionOn()) {
      BRAID_RETURN_IF_ERROR(s.startTls(true));
      BRAID_RETURN_IF_ERROR(s.tls_->handshake(wait));
    }
    return s;
  }
}

Result<Socket> Socket::tryAccept() const {
  while (true) {
    // Listeners are non-blocking (listen()), so this returns at once when nobody is waiting.
    SocketAddress peer;
    peer.len = sizeof(peer.storage);
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&peer.storage), &peer.len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Socket();
      return errnoError(errno, "accept() on bootstrap listener");
    }
    // Non-blocking from birth, so a stranger's socket can never block this thread; the rest of the class only
    // uses MSG_DONTWAIT calls anyway.
    setCommonOptions(fd);
    Socket s(fd);
    s.peer_ = peer.toString();
    if (socketEncryptionOn()) {
      Status secured = s.startTls(true);
      if (!secured.isOk()) {  // this connection only: the listener goes on
        BRAID_WARN("dropping a connection from %s: %s", s.peer_.c_str(), secured.message().c_str());
        continue;
      }
    }
    return s;
  }
}

Result<Socket> Socket::connect(const SocketAddress& addr, const WaitContext& wait) {
  BRAID_RETURN_IF_ERROR(socketEncryptionFromEnv());
  int delayMs = 1;
  while (true) {
    int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errnoError(errno, "socket() for connecting to %s", addr.toString().c_str());
    setCommonOptions(fd);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) == 0) {
      Socket s(fd);
      s.peer_ = addr.toString();
      if (socketEncryptionOn()) {
        BRAID_RETURN_IF_ERROR(s.startTls(false));
        BRAID_RETURN_IF_ERROR(s.tls_->handshake(wait));
      }
      return s;
    }
    int err = errno;
    ::close(fd);
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != EINTR && err != EAGAIN && err != ENETUNREACH) {
      return errnoError(err, "connect() to %s", addr.toString().c_str());
    }
    if (wait.aborted()) return invalidUsage("connect() to %s aborted by ncclCommAbort", addr.toString().c_str());
    if (wait.expired()) {
      return remoteError("could not connect to %s before the deadline (BRAID_TIMEOUT): %s", addr.toString().c_str(),
                         strerror(err));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    delayMs = delayMs < 100 ? delayMs * 2 : 100;
  }
}

Status Socket::sendAll(const void* data, size_t size, const WaitContext& wait) const {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = rawSend(p, size);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      return remoteError("connection to %s lost: the peer exited, failed or aborted", peer_.c_str());
    }
    if (n < 0 && errno == EPROTO) return remoteError("%s", ioError("send() to").c_str());
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return errnoError(errno, "send() to %s", peer_.c_str());
    }
    if (wait.aborted()) return invalidUsage("send() to %s aborted by ncclCommAbort", peer_.c_str());
    if (wait.expired()) return remoteError("timed out sending to %s (BRAID_TIMEOUT)", peer_.c_str());
    pollfd pf{fd_, POLLOUT, 0};
    ::poll(&pf, 1, wait.pollMs(100));
  }
  return Status::ok();
}

Status Socket::recvAll(void* data, size_t size, const WaitContext& wait) const {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = rawRecv(p, size);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return remoteError("connection closed by %s (the peer exited or failed)", peer_.c_str());
    if (errno == ECONNRESET) {
      return remoteError("connection to %s lost: the peer exited, failed or aborted", peer_.c_str());
    }
    if (errno == EPROTO) return remoteError("%s", ioError("recv() from").c_str());
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return errnoError(errno, "recv() from %s", peer_.c_str());
    }
    if (wait.aborted()) return invalidUsage("recv() from %s aborted by ncclCommAbort", peer_.c_str());
    if (wait.expired()) return remoteError("timed out receiving from %s (BRAID_TIMEOUT)", peer_.c_str());
    pollfd pf{fd_, POLLIN, 0};
    ::poll(&pf, 1, wait.pollMs(100));
  }
  return Status::ok();
}

Result<size_t> Socket::recvSome(void* data, size_t size) const {
  while (true) {
    ssize_t n = rawRecv(data, size);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) return remoteError("connection closed by %s", peer_.c_str());
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    if (errno == EPROTO) return remoteError("%s", ioError("recv() from").c_str());
    return errnoError(errno, "recv() from %s", peer_.c_str());
  }
}

Result<size_t> Socket::sendSome(const void* data, size_t size) const {
  while (true) {
    ssize_t n = rawSend(data, size);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    if (errno == EPROTO) return remoteError("%s", ioError("send() to").c_str());
    return errnoError(errno, "send() to %s", peer_.c_str());
  }
}

Result<bool> Socket::pollReadable(int timeoutMs) const {
  if (tls_ && tls_->buffered()) return true;
  pollfd pf{fd_, POLLIN, 0};
  int rc = ::poll(&pf, 1, timeoutMs);
  if (rc < 0 && errno != EINTR) return errnoError(errno, "poll() on %s", peer_.c_str());
  return rc > 0;
}

}  // namespace braid
