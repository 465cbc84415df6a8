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
#include <memory>
#include <mutex>
#include <thread>

#include "src/common/logging.h"

namespace braid {
namespace {

// A fetch's reply: a GrantHeader with the offer's descriptors attached, then its info; an error code with no
// descriptors. A service call's reply is a code, a length and that many bytes (the answer, or the error's message).
enum Reply : uint8_t { kGranted = 0, kUnknownToken = 1, kServiceFailed = 2 };
struct GrantHeader {
  uint8_t code;
  uint8_t pad[3];
  uint32_t fds;
  uint32_t infoBytes;
};

// A request's first 8 bytes are an offer's token (never 0) or kServiceCall, followed by a ServiceHeader and the
// request's bytes.
constexpr uint64_t kServiceCall = 0;
constexpr uint32_t kMaxServiceBytes = 4096;
struct ServiceHeader {
  uint64_t key;
  uint32_t bytes;
  uint32_t pad;
};

// Reads exactly `n` bytes from a connected socket within `ms` milliseconds in all; *closed (when given) says the
// other end closed the connection first.
bool recvExactly(int c, void* p, size_t n, int ms, bool* closed = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  size_t got = 0;
  while (got < n) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd pf{c, POLLIN, 0};
    if (left.count() <= 0 || poll(&pf, 1, static_cast<int>(left.count())) != 1) return false;
    const ssize_t r = recv(c, static_cast<char*>(p) + got, n - got, 0);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      if (closed != nullptr) *closed = true;
      return false;
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

bool sendExactly(int c, const void* p, size_t n) {
  size_t sent = 0;
  while (sent < n) {
    const ssize_t r = send(c, static_cast<const char*>(p) + sent, n - sent, MSG_NOSIGNAL);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return false;
    }
    sent += static_cast<size_t>(r);
  }
  return true;
}

void closeAll(const std::vector<int>& fds) {
  for (int fd : fds) close(fd);
}

// Sends `n` bytes (one message) with `fds` attached (none: a plain message).
bool sendWithFds(int c, const void* p, size_t n, const std::vector<int>& fds) {
  iovec iov{const_cast<void*>(p), n};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)] = {};
  if (fds.size() > kMaxFdsPerMessage) return false;
  if (!fds.empty()) {
    m.msg_control = ctl;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    memcpy(CMSG_DATA(cm), fds.data(), sizeof(int) * fds.size());
  }
  return sendmsg(c, &m, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}

// Receives exactly `n` bytes (one message, waiting at most `ms` for it to start) and the descriptors sent with them,
// if any (*fds: new close-on-exec descriptors, in order).
bool recvWithFds(int c, void* p, size_t n, std::vector<int>* fds, int ms) {
  fds->clear();
  pollfd pf{c, POLLIN, 0};
  if (poll(&pf, 1, ms) != 1) return false;
  iovec iov{p, n};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)] = {};
  m.msg_control = ctl;
  m.msg_controllen = sizeof(ctl);
  const ssize_t r = recvmsg(c, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  for (cmsghdr* cm = CMSG_FIRSTHDR(&m); cm != nullptr; cm = CMSG_NXTHDR(&m, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const size_t at = fds->size();
    fds->resize(at + count);
    memcpy(fds->data() + at, CMSG_DATA(cm), count * sizeof(int));
  }
  return r == static_cast<ssize_t>(n) && (m.msg_flags & MSG_CTRUNC) == 0;
}

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

  Result<FdTicket> offer(const std::vector<int>& fds, int fetches, const std::string& info) {
    std::vector<int> mine;
    for (int fd : fds) {
      const int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
      if (dup < 0) {
        const int e = errno;
        closeAll(mine);
        return errnoError(e, "offering descriptor %d to a peer process: fcntl(F_DUPFD_CLOEXEC)", fd);
      }
      mine.push_back(dup);
    }
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t token;
    do {
      token = randomWord();
    } while (token == 0 || offers_.count(token) != 0);
    offers_[token] = Offer{std::move(mine), info, std::max(1, fetches)};
    return FdTicket{pid_, nonce_, token};
  }

  void withdraw(uint64_t token) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = offers_.find(token);
    if (it == offers_.end()) return;
    closeAll(it->second.fds);
    offers_.erase(it);
  }

  size_t pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return offers_.size();
  }

  FdTicket serve(FdServiceFn fn) {
    auto svc = std::make_shared<Service>();
    svc->fn = std::move(fn);
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t key;
    do {
      key = randomWord();
    } while (key == kServiceCall || services_.count(key) != 0);
    services_[key] = std::move(svc);
    return FdTicket{pid_, nonce_, key};
  }

  void stop(uint64_t key) {
    std::shared_ptr<Service> svc;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = services_.find(key);
      if (it == services_.end()) return;
      svc = std::move(it->second);
      services_.erase(it);
    }
    std::lock_guard<std::mutex> calling(svc->calling);  // a call in progress ends first
    svc->live = false;
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
      std::vector<int> sent;
      // A request is small and its sender is already waiting: a short bound keeps a stuck client from blocking
      // the others.
      const bool ok = getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.uid == uid &&
                      recvWithFds(c, &token, sizeof(token), &sent, 1000);
      if (ok && token == kServiceCall) {
        answerService(c, sent);
      } else {
        closeAll(sent);
        if (ok) grant(c, token);
      }
      close(c);
    }
  }

  // Sends the descriptors and info `token` offers, or kUnknownToken.
  void grant(int c, uint64_t token) {
    std::vector<int> fds;
    std::string info;
    bool found = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = offers_.find(token);
      if (it != offers_.end()) {
        // Duplicates to send, unless this is the token's last fetch: a withdraw may close the offer's own
        // descriptors while this thread sends.
        found = true;
        info = it->second.info;
        if (--it->second.fetches == 0) {
          fds = std::move(it->second.fds);
          offers_.erase(it);
        } else {
          for (int fd : it->second.fds) fds.push_back(fcntl(fd, F_DUPFD_CLOEXEC, 0));
        }
      }
    }
    const bool whole = std::find(fds.begin(), fds.end(), -1) == fds.end();
    GrantHeader h{};
    h.code = found && whole ? kGranted : kUnknownToken;
    h.fds = h.code == kGranted ? static_cast<uint32_t>(fds.size()) : 0;
    h.infoBytes = h.code == kGranted ? static_cast<uint32_t>(info.size()) : 0;
    if (sendWithFds(c, &h, sizeof(h), h.code == kGranted ? fds : std::vector<int>{}) && h.infoBytes > 0) {
      (void)sendExactly(c, info.data(), info.size());
    }
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }

  // Runs a service call (its descriptors `fds`, closed here) and sends the answer.
  void answerService(int c, const std::vector<int>& fds) {
    ServiceHeader h{};
    std::string request;
    uint8_t code = kUnknownToken;
    std::string answer = "no such service";
    if (recvExactly(c, &h, sizeof(h), 1000) && h.bytes <= kMaxServiceBytes) {
      request.resize(h.bytes);
      if (h.bytes == 0 || recvExactly(c, &request[0], h.bytes, 1000)) {
        std::shared_ptr<Service> svc;
        {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = services_.find(h.key);
          if (it != services_.end()) svc = it->second;
        }
        if (svc) {
          std::lock_guard<std::mutex> calling(svc->calling);
          if (svc->live) {
            Result<std::string> r = svc->fn(fds, request);
            code = r.isOk() ? kGranted : kServiceFailed;
            answer = r.isOk() ? r.value() : r.status().message();
          }
        }
      }
    }
    closeAll(fds);
    const uint32_t len = static_cast<uint32_t>(std::min<size_t>(answer.size(), kMaxServiceBytes));
    if (sendExactly(c, &code, 1) && sendExactly(c, &len, sizeof(len))) (void)sendExactly(c, answer.data(), len);
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
    std::vector<int> fds;
    std::string info;
    int fetches;  // left
  };
  std::map<uint64_t, Offer> offers_;
  struct Service {
    FdServiceFn fn;
    std::mutex calling;  // held while fn runs
    bool live = true;    // false once stopped (under `calling`)
  };
  std::map<uint64_t, std::shared_ptr<Service>> services_;
};

// A socket connected to the server `t` names; errors start with `what` (" process <pid>: ...").
Result<int> connectTo(const FdTicket& t, const char* what) {
  const int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c < 0) return errnoError(errno, "%s process %d: socket(AF_UNIX)", what, t.pid);
  socklen_t len;
  sockaddr_un a = socketAddress(t.pid, t.server, &len);
  if (connect(c, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    const int e = errno;
    close(c);
    return errnoError(e,
                      "%s process %d: no descriptor server @braid-fd-%d-%u (the process exited, or runs in another "
                      "network namespace)",
                      what, t.pid, t.pid, t.server);
  }
  return c;
}

}  // namespace

Result<FdTicket> offerFds(const std::vector<int>& fds, int fetches, const std::string& info) {
  if (fds.empty() || fds.size() > kMaxFdsPerMessage) {
    return invalidArgument("an offer of %zu descriptors (1 to %zu)", fds.size(), kMaxFdsPerMessage);
  }
  if (info.size() > kMaxServiceBytes) {
    return invalidArgument("an offer with %zu bytes of info (at most %u)", info.size(), kMaxServiceBytes);
  }
  BRAID_ASSIGN_OR_RETURN(FdServer * s, FdServer::get());
  return s->offer(fds, fetches, info);
}

Result<FdTicket> offerFd(int fd, int fetches) {
  return offerFds({fd}, fetches);
}

void withdrawFd(const FdTicket& t) {
  if (t.pid != getpid()) return;
  if (FdServer* s = FdServer::running()) s->withdraw(t.token);
}

size_t pendingFdOffers() {
  FdServer* s = FdServer::running();
  return s != nullptr ? s->pending() : 0;
}

Result<std::vector<int>> fetchFds(const FdTicket& t, double timeoutSec, std::string* info) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSec);
  auto msLeft = [&] {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<int64_t>(0, left.count()));
  };
  BRAID_ASSIGN_OR_RETURN(int c, connectTo(t, "fetching a descriptor from"));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{c};
  if (send(c, &t.token, sizeof(t.token), MSG_NOSIGNAL) != sizeof(t.token)) {
    return errnoError(errno, "fetching a descriptor from process %d: send", t.pid);
  }
  pollfd p{c, POLLIN, 0};
  const int pr = poll(&p, 1, msLeft());
  if (pr == 0) {
    return remoteError("fetching a descriptor from process %d: no answer within %.0f s (BRAID_TIMEOUT)", t.pid,
                       timeoutSec);
  }
  GrantHeader h{};
  h.code = 0xff;
  std::vector<int> fds;
  if (pr < 0 || !recvWithFds(c, &h, sizeof(h), &fds, 0)) {
    const int e = errno;
    closeAll(fds);
    return errnoError(e, "fetching a descriptor from process %d: recvmsg", t.pid);
  }
  if (h.code != kGranted || fds.empty() || fds.size() != h.fds) {
    closeAll(fds);
    return internalError(
        "process %d has no descriptor for token %016llx (never offered, withdrawn, or already fetched)", t.pid,
        static_cast<unsigned long long>(t.token));
  }
  std::string got(h.infoBytes, '\0');
  if (h.infoBytes > kMaxServiceBytes || (h.infoBytes > 0 && !recvExactly(c, &got[0], h.infoBytes, msLeft()))) {
    closeAll(fds);
    return remoteError("fetching a descriptor from process %d: its info was cut short", t.pid);
  }
  if (info != nullptr) *info = std::move(got);
  return fds;
}

Result<int> fetchFd(const FdTicket& t, double timeoutSec) {
  BRAID_ASSIGN_OR_RETURN(std::vector<int> fds, fetchFds(t, timeoutSec));
  if (fds.size() != 1) {
    closeAll(fds);
    return internalError("process %d offered %zu descriptors for token %016llx where one was expected", t.pid,
                         fds.size(), static_cast<unsigned long long>(t.token));
  }
  return fds[0];
}

Result<FdTicket> serveFdService(FdServiceFn fn) {
  BRAID_ASSIGN_OR_RETURN(FdServer * s, FdServer::get());
  return s->serve(std::move(fn));
}

void stopFdService(const FdTicket& t) {
  if (t.pid != getpid()) return;
  if (FdServer* s = FdServer::running()) s->stop(t.token);
}

Result<std::string> callFdService(const FdTicket& t, const std::vector<int>& fds, const std::string& request,
                                  double timeoutSec, bool* absent) {
  if (absent != nullptr) *absent = false;
  if (request.size() > kMaxServiceBytes) {
    return invalidArgument("a service request of %zu bytes (at most %u)", request.size(), kMaxServiceBytes);
  }
  if (fds.size() > kMaxFdsPerMessage) {
    return invalidArgument("a service request with %zu descriptors (at most %zu)", fds.size(), kMaxFdsPerMessage);
  }
  const int ms = static_cast<int>(std::max(1.0, timeoutSec * 1000));
  Result<int> connected = connectTo(t, "calling a service of");
  if (!connected.isOk()) {
    if (absent != nullptr) *absent = true;
    return connected.status();
  }
  const int c = connected.value();
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{c};
  const uint64_t first = kServiceCall;
  const ServiceHeader h{t.token, static_cast<uint32_t>(request.size()), 0};
  if (!sendWithFds(c, &first, sizeof(first), fds) || !sendExactly(c, &h, sizeof(h)) ||
      !sendExactly(c, request.data(), request.size())) {
    return errnoError(errno, "calling a service of process %d: send", t.pid);
  }
  uint8_t code = 0xff;
  uint32_t len = 0;
  bool closed = false;  // the server always answers, unless its process is gone
  if (!recvExactly(c, &code, 1, ms, &closed) || !recvExactly(c, &len, sizeof(len), ms, &closed) ||
      len > kMaxServiceBytes) {
    if (closed && absent != nullptr) *absent = true;
    if (closed) return remoteError("calling a service of process %d: it closed the connection (exited?)", t.pid);
    return remoteError("calling a service of process %d: no answer within %.0f s (BRAID_TIMEOUT)", t.pid, timeoutSec);
  }
  std::string answer(len, '\0');
  if (len > 0 && !recvExactly(c, &answer[0], len, ms)) {
    return remoteError("calling a service of process %d: the answer was cut short", t.pid);
  }
  if (code == kGranted) return answer;
  if (code == kUnknownToken && absent != nullptr) *absent = true;
  if (code == kUnknownToken)
    return internalError("process %d has no service %016llx (never served, or stopped)", t.pid,
                         static_cast<unsigned long long>(t.token));
  return internalError("process %d: %s", t.pid, answer.c_str());
}

}  // namespace braid
