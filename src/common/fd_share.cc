#include "src/common/fd_share.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "src/common/logging.h"

namespace braid {
namespace {

// A reply: 0 and a descriptor, or an error code and none.
enum Reply : uint8_t { kGranted = 0, kUnknownToken = 1 };

sockaddr_un socketAddress(int32_t pid, uint32_t server, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  // Abstract namespace: the name starts with a NUL byte and is not NUL-terminated.
  const int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "braid-fd-%d-%u", pid, server);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

uint64_t randomWord() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != static_cast<ssize_t>(sizeof(v))) {
    v = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) * 0x9E3779B97F4A7C15ull;
  }
  return v;
}

class FdServer {
 public:
  // The process's server, (re)started for this process (a forked child gets a new one).
  static Result<FdServer*> get() {
    std::lock_guard<std::mutex> lock(mu());
    if (server() == nullptr || server()->pid_ != getpid()) {
      auto* s = new FdServer();  // lives for the process: its thread serves until exit
      BRAID_RETURN_IF_ERROR(s->start());
      server() = s;
    }
    return server();
  }
  // The server if this process started one (never starts it).
  static FdServer* running() {
    std::lock_guard<std::mutex> lock(mu());
    return server() != nullptr && server()->pid_ == getpid() ? server() : nullptr;
  }

  Result<FdTicket> offer(int fd, int fetches) {
    const int mine = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (mine < 0) return errnoError(errno, "offering descriptor %d to a peer process: fcntl(F_DUPFD_CLOEXEC)", fd);
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t token;
    do {
      token = randomWord();
    } while (token == 0 || offers_.count(token) != 0);
    offers_[token] = Offer{mine, std::max(1, fetches)};
    return FdTicket{pid_, nonce_, token};
  }

  void withdraw(uint64_t token) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = offers_.find(token);
    if (it == offers_.end()) return;
    close(it->second.fd);
    offers_.erase(it);
  }

  size_t pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return offers_.size();
  }

 private:
  Status start() {
    pid_ = getpid();
    nonce_ = static_cast<uint32_t>(randomWord());
    listen_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_ < 0) return errnoError(errno, "descriptor server: socket(AF_UNIX)");
    socklen_t len;
    sockaddr_un a = socketAddress(pid_, nonce_, &len);
    if (bind(listen_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(listen_, 64) != 0) {
      const int e = errno;
      close(listen_);
      return errnoError(e, "descriptor server: bind/listen on @braid-fd-%d-%u", pid_, nonce_);
    }
    std::thread([this] { serve(); }).detach();
    return Status::ok();
  }

  void serve() {
    const uid_t uid = getuid();
    for (;;) {
      const int c = accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        BRAID_WARN("descriptor server of process %d stopped: accept: %s", pid_, strerror(errno));
        return;
      }
      ucred cred{};
      socklen_t cl = sizeof(cred);
      uint64_t token = 0;
      // A request is small and its sender is already waiting: a short bound keeps a stuck client from blocking
      // the others.
      pollfd p{c, POLLIN, 0};
      const bool ok = getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.uid == uid &&
                      poll(&p, 1, 1000) == 1 && recv(c, &token, sizeof(token), MSG_WAITALL) == sizeof(token);
      int fd = -1;
      bool last = false;
      if (ok) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = offers_.find(token);
        if (it != offers_.end()) {
          // A duplicate to send, unless this is the token's last fetch: a withdraw may close the offer's own
          // descriptor while this thread sends.
          last = --it->second.fetches == 0;
          fd = last ? it->second.fd : fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
          if (last) offers_.erase(it);
        }
      }
      uint8_t reply = fd >= 0 ? kGranted : kUnknownToken;
      iovec iov{&reply, 1};
      msghdr m{};
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
      if (fd >= 0) {
        m.msg_control = ctl;
        m.msg_controllen = sizeof(ctl);
        cmsghdr* cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
      }
      (void)sendmsg(c, &m, MSG_NOSIGNAL);
      if (fd >= 0) close(fd);
      close(c);
    }
  }

  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static FdServer*& server() {
    static FdServer* s = nullptr;
    return s;
  }

  int32_t pid_ = 0;
  uint32_t nonce_ = 0;
  int listen_ = -1;
  std::mutex mu_;
  struct Offer {
    int fd;
    int fetches;  // left
  };
  std::map<uint64_t, Offer> offers_;
};

}  // namespace

Result<FdTicket> offerFd(int fd, int fetches) {
  BRAID_ASSIGN_OR_RETURN(FdServer * s, FdServer::get());
  return s->offer(fd, fetches);
}

void withdrawFd(const FdTicket& t) {
  if (t.pid != getpid()) return;
  if (FdServer* s = FdServer::running()) s->withdraw(t.token);
}

size_t pendingFdOffers() {
  FdServer* s = FdServer::running();
  return s != nullptr ? s->pending() : 0;
}

Result<int> fetchFd(const FdTicket& t, double timeoutSec) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSec);
  auto msLeft = [&] {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<int64_t>(0, left.count()));
  };
  const int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c < 0) return errnoError(errno, "fetching a descriptor from process %d: socket(AF_UNIX)", t.pid);
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{c};
  socklen_t len;
  sockaddr_un a = socketAddress(t.pid, t.server, &len);
  if (connect(c, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    return errnoError(errno,
                      "fetching a descriptor from process %d: no descriptor server @braid-fd-%d-%u (the process "
                      "exited, or runs in another network namespace)",
                      t.pid, t.pid, t.server);
  }
  if (send(c, &t.token, sizeof(t.token), MSG_NOSIGNAL) != sizeof(t.token)) {
    return errnoError(errno, "fetching a descriptor from process %d: send", t.pid);
  }
  pollfd p{c, POLLIN, 0};
  const int pr = poll(&p, 1, msLeft());
  if (pr == 0) {
    return remoteError("fetching a descriptor from process %d: no answer within %.0f s (BRAID_TIMEOUT)", t.pid,
                       timeoutSec);
  }
  uint8_t reply = 0xff;
  iovec iov{&reply, 1};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  m.msg_control = ctl;
  m.msg_controllen = sizeof(ctl);
  if (pr < 0 || recvmsg(c, &m, MSG_CMSG_CLOEXEC) != 1) {
    return errnoError(errno, "fetching a descriptor from process %d: recvmsg", t.pid);
  }
  int fd = -1;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&m); cm != nullptr; cm = CMSG_NXTHDR(&m, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) memcpy(&fd, CMSG_DATA(cm), sizeof(int));
  }
  if (reply != kGranted || fd < 0) {
    if (fd >= 0) close(fd);
    return internalError(
        "process %d has no descriptor for token %016llx (never offered, withdrawn, or already fetched)", t.pid,
        static_cast<unsigned long long>(t.token));
  }
  return fd;
}

}  // namespace braid
