#include "perf/baselines/tcp_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <stdexcept>
#include <thread>

namespace braid::perf {
namespace {

// Requests: 'S' key value -> 'K'; 'G' key -> 'V' value once the key exists.
// Strings travel as a 4-byte length and the bytes.
constexpr char kSet = 'S';
constexpr char kGet = 'G';
constexpr uint32_t kMaxField = 64u << 20;

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("TcpStore: " + what);
}

void writeAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail(std::string("send: ") + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Reads exactly n bytes; false on a clean end of stream before the first byte.
bool readAll(int fd, void* data, size_t n, int timeoutMs) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < n) {
    pollfd pfd{fd, POLLIN, 0};
    const int pr = ::poll(&pfd, 1, timeoutMs);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) fail("timed out waiting for the store (is rank 0 alive?)");
    const ssize_t r = ::recv(fd, p + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 && got == 0) return false;
    if (r <= 0) fail("connection to the store lost");
    got += static_cast<size_t>(r);
  }
  return true;
}

void writeField(int fd, const char* data, size_t n) {
  const uint32_t len = htonl(static_cast<uint32_t>(n));
  writeAll(fd, &len, sizeof(len));
  writeAll(fd, data, n);
}

bool readField(int fd, std::string* out, int timeoutMs) {
  uint32_t len = 0;
  if (!readAll(fd, &len, sizeof(len), timeoutMs)) return false;
  len = ntohl(len);
  if (len > kMaxField) fail("oversized field");
  out->resize(len);
  return len == 0 || readAll(fd, &(*out)[0], len, timeoutMs);
}

}  // namespace

// The server: one thread, poll() over the listener and the clients; pending gets are answered when their key
// is set. Requests are small, so a client's request is read whole once poll says it is readable.
struct TcpStore::Server {
  int listenFd = -1;
  int nclients = 0;
  int timeoutMs = 0;
  std::thread thread;

  void run() {
    std::vector<int> clients;
    std::map<std::string, std::string> values;
    std::multimap<std::string, int> pending;
    int accepted = 0;
    for (;;) {
      std::vector<pollfd> fds;
      if (accepted < nclients) fds.push_back({listenFd, POLLIN, 0});
      for (int c : clients) fds.push_back({c, POLLIN, 0});
      if (fds.empty()) break;  // every client has come and gone
      const int pr = ::poll(fds.data(), fds.size(), timeoutMs);
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) break;  // nobody talked for the whole timeout: give up rather than linger
      for (const pollfd& p : fds) {
        if ((p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        if (p.fd == listenFd) {
          const int c = ::accept(listenFd, nullptr, nullptr);
          if (c >= 0) {
            clients.push_back(c);
            ++accepted;
          }
          continue;
        }
        bool keep = true;
        try {
          char op = 0;
          if (!readAll(p.fd, &op, 1, timeoutMs)) {
            keep = false;
          } else {
            std::string key;
            readField(p.fd, &key, timeoutMs);
            if (op == kSet) {
              std::string value;
              readField(p.fd, &value, timeoutMs);
              values[key] = value;
              writeAll(p.fd, "K", 1);
              auto range = pending.equal_range(key);
              for (auto it = range.first; it != range.second; ++it) {
                writeAll(it->second, "V", 1);
                writeField(it->second, value.data(), value.size());
              }
              pending.erase(range.first, range.second);
            } else if (op == kGet) {
              auto it = values.find(key);
              if (it == values.end()) {
                pending.emplace(key, p.fd);
              } else {
                writeAll(p.fd, "V", 1);
                writeField(p.fd, it->second.data(), it->second.size());
              }
            } else {
              keep = false;
            }
          }
        } catch (const std::exception&) {
          keep = false;
        }
        if (!keep) {
          ::close(p.fd);
          for (auto it = pending.begin(); it != pending.end();) it = it->second == p.fd ? pending.erase(it) : ++it;
          clients.erase(std::find(clients.begin(), clients.end(), p.fd));
        }
      }
    }
    for (int c : clients) ::close(c);
    ::close(listenFd);
  }
};

TcpStore::TcpStore(const std::string& host, int port, bool isServer, int nclients, std::chrono::milliseconds timeout)
    : timeout_(timeout) {
  if (isServer) {
    server_ = std::make_shared<Server>();
    server_->nclients = nclients;
    server_->timeoutMs = static_cast<int>(timeout.count());
    const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0) fail(std::string("socket: ") + std::strerror(errno));
    const int on = 1, off = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 1024) != 0) {
      const int e = errno;
      ::close(fd);
      fail("cannot listen on port " + std::to_string(port) + ": " + std::strerror(e) + " (set MASTER_PORT)");
    }
    server_->listenFd = fd;
    std::shared_ptr<Server> s = server_;
    server_->thread = std::thread([s]() { s->run(); });
    server_->thread.detach();
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    fail("cannot resolve MASTER_ADDR '" + host + "': " + gai_strerror(rc));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (fd_ < 0) {
    for (addrinfo* ai = res; ai != nullptr && fd_ < 0; ai = ai->ai_next) {
      const int fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        fd_ = fd;
      } else {
        ::close(fd);
      }
    }
    if (fd_ >= 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::freeaddrinfo(res);
      fail("cannot reach rank 0's store at " + host + ":" + service + " within the timeout");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::freeaddrinfo(res);
  const int on = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
  writeAll(fd_, &kSet, 1);
  writeField(fd_, key.data(), key.size());
  writeField(fd_, data.data(), data.size());
  char ack = 0;
  if (!readAll(fd_, &ack, 1, static_cast<int>(timeout_.count())) || ack != 'K') fail("set('" + key + "') refused");
}

std::vector<char> TcpStore::get(const std::string& key) {
  writeAll(fd_, &kGet, 1);
  writeField(fd_, key.data(), key.size());
  char tag = 0;
  std::string value;
  if (!readAll(fd_, &tag, 1, static_cast<int>(timeout_.count())) || tag != 'V' ||
      !readField(fd_, &value, static_cast<int>(timeout_.count()))) {
    fail("get('" + key + "') failed");
  }
  return std::vector<char>(value.begin(), value.end());
}

void TcpStore::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) {
  for (const std::string& k : keys) (void)get(k);
}

}  // namespace braid::perf
