// Picking a TCP port for a rendezvous that another process will bind a moment later (braidrun's MASTER_PORT, tests
// that set NCCL_COMM_ID). Header-only and free of braid's internals so that braidrun, which links nothing of braid,
// can use it too.
//
// Why not "bind port 0, read it back, close": the kernel draws that port from its ephemeral range, the same range
// every outgoing connect() on the machine draws its local port from. Between the close and the rank's bind any
// connection elsewhere (a parallel test, a browser) can take it, and the rank fails with EADDRINUSE; CI saw exactly
// that. Ports below the ephemeral range are never handed out implicitly, so only a process that asks for that very
// number can collide, and the draw is random so two launchers rarely ask for the same one.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <random>

namespace braid {

// The kernel's ephemeral range (net.ipv4.ip_local_port_range); Linux's default when it cannot be read.
inline void ephemeralPortRange(int* lo, int* hi) {
  *lo = 32768;
  *hi = 60999;
  FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f == nullptr) return;
  int a = 0, b = 0;
  if (std::fscanf(f, "%d %d", &a, &b) == 2 && a > 0 && b >= a && b <= 65535) {
    *lo = a;
    *hi = b;
  }
  std::fclose(f);
}

// Whether `port` (and, with `pair`, port + 1 too) can be bound on the IPv4 address `ip` right now.
inline bool portBindable(const char* ip, int port, bool pair) {
  for (int p = port; p <= port + (pair ? 1 : 0); ++p) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // as the rendezvous will: TIME_WAIT is no obstacle
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(p));
    const bool ok =
        inet_pton(AF_INET, ip, &addr.sin_addr) == 1 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (!ok) return false;
  }
  return true;
}

// A port nothing is bound to on `ip` now, outside the ephemeral range (see above); with `pair`, port + 1 is free too
// (torchrun's store on MASTER_PORT, braid's rendezvous on the next). Returns -1 with errno set when none is found.
inline int pickRendezvousPort(const char* ip, bool pair = false) {
  int lo = 0, hi = 0;
  ephemeralPortRange(&lo, &hi);
  // Below the ephemeral range when there is room there, else above it. 10000 keeps clear of most fixed services.
  int first = 10000, last = lo - 2;
  if (last - first < 1000) {
    first = hi + 1;
    last = 65534;
  }
  if (last - first >= 1000) {
    std::random_device seed;
    std::mt19937 gen(seed());
    std::uniform_int_distribution<int> draw(first, last);
    for (int attempt = 0; attempt < 200; ++attempt) {
      const int port = draw(gen);
      if (port >= 29400 && port <= 29501) continue;  // torchrun's and PyTorch's defaults: a user's job may use them
      if (portBindable(ip, port, pair)) return port;
    }
  }
  errno = EADDRINUSE;
  return -1;
}

}  // namespace braid
