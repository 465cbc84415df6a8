// tcp_pingpong: small-message round-trip latency of a plain TCP connection (TCP_NODELAY), the floor under any
// socket transport between two hosts. No braid code is involved.
//
//   tcp_pingpong -s [-p PORT] [-B ADDR]                 server: echoes every message back, one client, then exits
//   tcp_pingpong -c HOST [-p PORT] [-n ITERS] [-w WARMUP] [SIZE...]
//
// The client sends SIZE bytes, waits for the SIZE-byte echo, and repeats; it prints, per size, the median and the
// 1st-percentile round trip and half the median (the one-way latency), in microseconds. Default sizes 8 64 512 4096.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr uint32_t kDone = 0xFFFFFFFFu;

bool writeAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool readAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::recv(fd, p, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void noDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int fail(const char* what) {
  std::fprintf(stderr, "tcp_pingpong: %s: %s\n", what, std::strerror(errno));
  return 1;
}

// Protocol: the client announces each size (4 bytes) and the iteration count (4 bytes), then ping-pongs; kDone ends.
int serve(const char* bindAddr, int port) {
  const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) return fail("socket");
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, bindAddr, &addr.sin_addr) != 1) return fail("bad -B address");
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return fail("bind");
  if (::listen(lfd, 1) != 0) return fail("listen");
  std::printf("tcp_pingpong: listening on %s:%d\n", bindAddr, port);
  std::fflush(stdout);
  const int fd = ::accept(lfd, nullptr, nullptr);
  ::close(lfd);
  if (fd < 0) return fail("accept");
  noDelay(fd);
  std::vector<char> buf;
  while (true) {
    uint32_t header[2];
    if (!readAll(fd, header, sizeof(header))) return fail("reading a header");
    if (header[0] == kDone) break;
    buf.resize(std::max<size_t>(1, header[0]));
    for (uint32_t i = 0; i < header[1]; ++i) {
      if (!readAll(fd, buf.data(), header[0]) || !writeAll(fd, buf.data(), header[0])) return fail("echo");
    }
  }
  ::close(fd);
  return 0;
}

int connectTo(const char* host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string portText = std::to_string(port);
  if (getaddrinfo(host, portText.c_str(), &hints, &res) != 0 || res == nullptr) {
    std::fprintf(stderr, "tcp_pingpong: cannot resolve %s\n", host);
    return -1;
  }
  int fd = -1;
  // The server may still be starting: retry for up to 10 s.
  for (int attempt = 0; attempt < 1000 && fd < 0; ++attempt) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
      usleep(10000);
    }
  }
  freeaddrinfo(res);
  if (fd >= 0) noDelay(fd);
  return fd;
}

int client(const char* host, int port, int iters, int warmup, const std::vector<uint32_t>& sizes) {
  const int fd = connectTo(host, port);
  if (fd < 0) return fail("connect");
  std::printf("# TCP ping-pong to %s:%d, %d iterations (+%d warm-up), TCP_NODELAY\n", host, port, iters, warmup);
  std::printf("# %10s %14s %14s %14s\n", "size(B)", "rtt_med(us)", "rtt_p1(us)", "one_way(us)");
  std::vector<char> buf;
  for (const uint32_t size : sizes) {
    buf.assign(std::max<size_t>(1, size), 'x');
    const uint32_t header[2] = {size, static_cast<uint32_t>(iters + warmup)};
    if (!writeAll(fd, header, sizeof(header))) return fail("sending a header");
    std::vector<double> rtt;
    rtt.reserve(static_cast<size_t>(iters));
    for (int i = 0; i < iters + warmup; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      if (!writeAll(fd, buf.data(), size) || !readAll(fd, buf.data(), size)) return fail("ping-pong");
      const auto t1 = std::chrono::steady_clock::now();
      if (i >= warmup) rtt.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    std::sort(rtt.begin(), rtt.end());
    const double med = rtt[rtt.size() / 2];
    const double p1 = rtt[rtt.size() / 100];
    std::printf("  %10u %14.2f %14.2f %14.2f\n", size, med, p1, med / 2);
  }
  const uint32_t done[2] = {kDone, 0};
  writeAll(fd, done, sizeof(done));
  ::close(fd);
  return 0;
}

void usage() {
  std::fprintf(stderr,
               "usage: tcp_pingpong -s [-p PORT] [-B ADDR]\n"
               "       tcp_pingpong -c HOST [-p PORT] [-n ITERS] [-w WARMUP] [SIZE...]\n");
}

}  // namespace

int main(int argc, char** argv) {
  bool server = false;
  const char* host = nullptr;
  const char* bindAddr = "0.0.0.0";
  int port = 5299;
  int iters = 10000;
  int warmup = 200;
  std::vector<uint32_t> sizes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    if (a == "-s") {
      server = true;
    } else if (a == "-c" && hasValue) {
      host = argv[++i];
    } else if (a == "-B" && hasValue) {
      bindAddr = argv[++i];
    } else if (a == "-p" && hasValue) {
      port = std::atoi(argv[++i]);
    } else if (a == "-n" && hasValue) {
      iters = std::atoi(argv[++i]);
    } else if (a == "-w" && hasValue) {
      warmup = std::atoi(argv[++i]);
    } else if (!a.empty() && a[0] != '-') {
      const long v = std::strtol(a.c_str(), nullptr, 10);
      if (v < 0 || v > (64 << 20)) {
        usage();
        return 2;
      }
      sizes.push_back(static_cast<uint32_t>(v));
    } else {
      usage();
      return 2;
    }
  }
  if (port <= 0 || port > 65535 || iters < 1 || warmup < 0 || server == (host != nullptr)) {
    usage();
    return 2;
  }
  if (sizes.empty()) sizes = {8, 64, 512, 4096};
  return server ? serve(bindAddr, port) : client(host, port, iters, warmup, sizes);
}
