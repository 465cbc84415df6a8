// tun_delay: a delaying IPv4 switch between network namespaces, made of TUN devices. It stands in for
// `tc qdisc ... netem delay` on kernels without sch_netem (tests/multihost/netns_lib.sh starts it).
//
//   tun_delay --delay D [--realtime] [--mtu M] [--speed MBPS] [--queue-packets N] [--queue-bytes B]
//             --host NS:IFNAME:ADDR --host ...
//
// For each --host it enters network namespace NS (a name under /var/run/netns, or a path), creates the TUN
// interface IFNAME there (IFF_TUN | IFF_NO_PI; it lives as long as this process), sets its MTU and the link speed
// it reports (/sys/class/net/IFNAME/speed, 10 Mb/s by default for TUN, which a library would take as the network's
// bandwidth), brings it up and returns to its own namespace. The caller then gives IFNAME its address ADDR with a
// prefix covering every host (`ip addr add ADDR/24 dev IFNAME`), so every other host is routed through IFNAME.
// Once every interface is up it prints "tun_delay: ready ..." on stdout.
//
// Every IPv4 packet read from a host's interface goes to the host whose ADDR is its destination, written to that
// host's interface D after it was read: a one-way delay of D, a round trip of 2 x D (as netem D on every host's
// interface). Packets keep their order. Packets to no host, packets other than IPv4 (IPv6 neighbour discovery)
// and packets beyond the queue's bounds are dropped and counted. The process sleeps in ppoll() until a packet
// arrives or the next one is due (timer slack 1 us), so it costs no CPU while idle. With --realtime it runs as
// SCHED_FIFO (priority 1): on a machine whose CPUs the ranks keep busy, a packet then leaves on time (measured with
// 2 hosts x 2 ranks on 2 cores and 1 ms: 54 us late on average instead of 577 us at nice -5, the default; the
// counters count a packet late until its write returns, which also runs the receiving host's TCP stack).
// Defaults: MTU 65000 (TCP then sends few, large packets), speed 10000 Mb/s (as a veth), queue 65536 packets or
// 64 MiB.
//
// SIGTERM, SIGINT and SIGHUP end it, as does its parent's exit or the deletion of a host's namespace; on exit it
// prints its counters on stderr (per host: packets and bytes in and out; the drops; the deepest queue; how late
// packets went out) and the interfaces disappear with it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/if_tun.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace {

constexpr size_t kReadBytes = 65536;  // the largest IPv4 packet
constexpr int kReadBatch = 64;        // packets read from one interface before looking at the others
constexpr int kMinMtu = 576;
constexpr int kMaxMtu = 65000;  // TUN allows 65535; big packets keep the packet rate (our CPU) low
constexpr int64_t kMaxDelayNs = 10'000'000'000;

volatile sig_atomic_t gStopSignal = 0;

void onSignal(int sig) {
  gStopSignal = sig;
}

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct Host {
  std::string ns;
  std::string ifname;
  uint32_t addr = 0;  // network order
  int fd = -1;
  uint64_t inPackets = 0, inBytes = 0, outPackets = 0, outBytes = 0;
};

struct Packet {
  int64_t dueNs;
  int to;
  std::vector<char> data;
};

struct Options {
  int64_t delayNs = -1;
  int mtu = kMaxMtu;
  int speedMbps = 10000;
  bool realtime = false;
  size_t queuePackets = 65536;
  size_t queueBytes = 64u << 20;
  std::vector<Host> hosts;
};

struct Counters {
  uint64_t dropFull = 0, dropNoRoute = 0, dropNotIpv4 = 0, writeErrors = 0;
  size_t maxPackets = 0, maxBytes = 0;
  int64_t maxLateNs = 0;
  double sumLateNs = 0;
  uint64_t delivered = 0;
};

void usage() {
  std::fprintf(
      stderr,
      "usage: tun_delay --delay D [--realtime] [--mtu M] [--speed MBPS] [--queue-packets N] [--queue-bytes B]\n"
      "                 --host NETNS:IFNAME:ADDR --host ...   (D: e.g. 2ms, 500us, 0us; at least 2 hosts)\n");
}

// "2ms", "500us", "1.5ms", "0.002s" -> nanoseconds; -1 when malformed. The unit is required (tc would read a bare
// number as microseconds, a reader as milliseconds).
int64_t parseDelay(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(v >= 0)) return -1;
  const std::string unit(end);
  double scale;
  if (unit == "us") {
    scale = 1e3;
  } else if (unit == "ms") {
    scale = 1e6;
  } else if (unit == "s") {
    scale = 1e9;
  } else {
    return -1;
  }
  const double ns = v * scale;
  return ns > static_cast<double>(kMaxDelayNs) ? -1 : static_cast<int64_t>(ns + 0.5);
}

bool parseHost(const std::string& text, Host* out) {
  const size_t a = text.find(':');
  const size_t b = a == std::string::npos ? a : text.find(':', a + 1);
  if (b == std::string::npos) return false;
  out->ns = text.substr(0, a);
  out->ifname = text.substr(a + 1, b - a - 1);
  in_addr addr{};
  if (out->ns.empty() || out->ifname.empty() || out->ifname.size() >= IFNAMSIZ ||
      inet_pton(AF_INET, text.substr(b + 1).c_str(), &addr) != 1) {
    return false;
  }
  out->addr = addr.s_addr;
  return true;
}

bool parseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--realtime") {
      o->realtime = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (a == "--delay") {
      o->delayNs = parseDelay(v);
      if (o->delayNs < 0) return false;
    } else if (a == "--mtu") {
      o->mtu = std::atoi(v.c_str());
      if (o->mtu < kMinMtu || o->mtu > kMaxMtu) return false;
    } else if (a == "--speed") {
      o->speedMbps = std::atoi(v.c_str());
      if (o->speedMbps < 1) return false;
    } else if (a == "--queue-packets") {
      o->queuePackets = std::strtoull(v.c_str(), nullptr, 10);
      if (o->queuePackets < 1) return false;
    } else if (a == "--queue-bytes") {
      o->queueBytes = std::strtoull(v.c_str(), nullptr, 10);
      if (o->queueBytes < kReadBytes) return false;
    } else if (a == "--host") {
      Host h;
      if (!parseHost(v, &h)) return false;
      o->hosts.push_back(h);
    } else {
      return false;
    }
  }
  if (o->delayNs < 0 || o->hosts.size() < 2) return false;
  for (size_t i = 0; i < o->hosts.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (o->hosts[i].addr == o->hosts[j].addr) return false;
    }
  }
  return true;
}

bool failErrno(const std::string& what) {
  std::fprintf(stderr, "tun_delay: %s: %s\n", what.c_str(), std::strerror(errno));
  return false;
}

// In the host's namespace: the interface, its MTU and reported speed, up. Leaves this process in `home`.
bool createInterface(Host* h, int home, const Options& o) {
  const std::string path = h->ns.find('/') == std::string::npos ? "/var/run/netns/" + h->ns : h->ns;
  const int nsFd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (nsFd < 0) return failErrno("opening namespace " + path);
  const bool entered = setns(nsFd, CLONE_NEWNET) == 0;
  close(nsFd);
  if (!entered) return failErrno("entering namespace " + path);
  bool ok = false;
  int sock = -1;
  do {
    h->fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (h->fd < 0) {
      failErrno("opening /dev/net/tun");
      break;
    }
    ifreq ifr{};
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", h->ifname.c_str());
    if (ioctl(h->fd, TUNSETIFF, &ifr) != 0) {
      failErrno("creating TUN interface " + h->ifname + " in " + h->ns);
      break;
    }
    sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0) {
      failErrno("socket");
      break;
    }
    ifr.ifr_mtu = o.mtu;
    if (ioctl(sock, SIOCSIFMTU, &ifr) != 0) {
      failErrno("setting the MTU of " + h->ifname);
      break;
    }
    // The legacy ethtool call is enough: TUN keeps whatever it is given.
    ethtool_cmd ecmd{};
    ecmd.cmd = ETHTOOL_GSET;
    ifr.ifr_data = reinterpret_cast<char*>(&ecmd);
    if (ioctl(sock, SIOCETHTOOL, &ifr) == 0) {
      ethtool_cmd_speed_set(&ecmd, static_cast<uint32_t>(o.speedMbps));
      ecmd.cmd = ETHTOOL_SSET;
    }
    if (ecmd.cmd != ETHTOOL_SSET || ioctl(sock, SIOCETHTOOL, &ifr) != 0) {
      std::fprintf(stderr, "tun_delay: warning: cannot set the speed of %s (%s); it reports the TUN default\n",
                   h->ifname.c_str(), std::strerror(errno));
    }
    if (ioctl(sock, SIOCGIFFLAGS, &ifr) != 0) {
      failErrno("reading the flags of " + h->ifname);
      break;
    }
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(sock, SIOCSIFFLAGS, &ifr) != 0) {
      failErrno("bringing " + h->ifname + " up");
      break;
    }
    ok = true;
  } while (false);
  if (sock >= 0) close(sock);
  if (setns(home, CLONE_NEWNET) != 0) return failErrno("returning to the own namespace");
  return ok;
}

// The host whose address is the IPv4 packet's destination, or -1.
int route(const std::vector<Host>& hosts, const char* pkt) {
  uint32_t dst;
  std::memcpy(&dst, pkt + 16, sizeof(dst));
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (hosts[i].addr == dst) return static_cast<int>(i);
  }
  return -1;
}

void printCounters(const Options& o, const Counters& c, size_t queued) {
  for (const Host& h : o.hosts) {
    std::fprintf(stderr, "tun_delay: %s (%s): in %llu packets %llu bytes, out %llu packets %llu bytes\n",
                 h.ifname.c_str(), h.ns.c_str(), static_cast<unsigned long long>(h.inPackets),
                 static_cast<unsigned long long>(h.inBytes), static_cast<unsigned long long>(h.outPackets),
                 static_cast<unsigned long long>(h.outBytes));
  }
  std::fprintf(stderr,
               "tun_delay: dropped: %llu queue full, %llu to no host, %llu not IPv4, %llu write errors, %zu "
               "queued at exit; deepest queue %zu packets %zu bytes; sent late by %.1f us on average, %.1f us at "
               "most\n",
               static_cast<unsigned long long>(c.dropFull), static_cast<unsigned long long>(c.dropNoRoute),
               static_cast<unsigned long long>(c.dropNotIpv4), static_cast<unsigned long long>(c.writeErrors), queued,
               c.maxPackets, c.maxBytes, c.delivered > 0 ? c.sumLateNs / static_cast<double>(c.delivered) / 1e3 : 0.0,
               static_cast<double>(c.maxLateNs) / 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parseArgs(argc, argv, &o)) {
    usage();
    return 2;
  }
  // Signals are blocked except inside ppoll(), so one cannot slip in between the check and the wait.
  sigset_t block, waitMask;
  sigemptyset(&block);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&block, s);
  sigprocmask(SIG_BLOCK, &block, &waitMask);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) {
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigaction(s, &sa, nullptr);
  }
  signal(SIGPIPE, SIG_IGN);
  const pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) return 0;  // the parent is already gone
  prctl(PR_SET_TIMERSLACK, 1000UL);   // wake within ~1 us of the due time, not the default 50 us
  if (o.realtime) {
    // SCHED_FIFO at the lowest priority: a packet that falls due preempts the ranks' spinning threads at once
    // instead of waiting for a time slice. It only runs while packets flow, and those come from the ranks.
    sched_param sp{};
    sp.sched_priority = 1;
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) failErrno("warning: SCHED_FIFO");
  } else {
    setpriority(PRIO_PROCESS, 0, -5);  // ahead of the ranks it serves when the CPUs are busy (root only)
  }

  const int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0) {
    failErrno("opening /proc/self/ns/net");
    return 1;
  }
  for (Host& h : o.hosts) {
    if (!createInterface(&h, home, o)) return 1;
  }
  close(home);
  std::printf("tun_delay: ready: %zu interfaces, %.1f us one way, MTU %d, %d Mb/s\n", o.hosts.size(),
              static_cast<double>(o.delayNs) / 1e3, o.mtu, o.speedMbps);
  std::fflush(stdout);

  std::vector<pollfd> fds(o.hosts.size());
  for (size_t i = 0; i < o.hosts.size(); ++i) fds[i] = pollfd{o.hosts[i].fd, POLLIN, 0};
  // Every packet waits the same time, so the queue is ordered by due time as it is by arrival.
  std::deque<Packet> queue;
  size_t queuedBytes = 0;
  Counters c;
  std::vector<char> buf(kReadBytes);
  int status = 0;
  while (gStopSignal == 0 && status == 0) {
    int64_t now = nowNs();
    while (!queue.empty() && queue.front().dueNs <= now) {
      Packet& p = queue.front();
      Host& to = o.hosts[static_cast<size_t>(p.to)];
      const ssize_t w = write(to.fd, p.data.data(), p.data.size());
      if (w == static_cast<ssize_t>(p.data.size())) {
        ++to.outPackets;
        to.outBytes += p.data.size();
        const int64_t late = nowNs() - p.dueNs;  // after the write, which runs the receiver's stack
        c.maxLateNs = std::max(c.maxLateNs, late);
        c.sumLateNs += static_cast<double>(late);
        ++c.delivered;
      } else {
        ++c.writeErrors;
      }
      queuedBytes -= p.data.size();
      queue.pop_front();
    }
    timespec wait{};
    timespec* waitPtr = nullptr;
    if (!queue.empty()) {
      const int64_t ns = queue.front().dueNs - now;
      wait.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
      wait.tv_nsec = static_cast<long>(ns % 1'000'000'000);
      waitPtr = &wait;
    }
    const int r = ppoll(fds.data(), fds.size(), waitPtr, &waitMask);
    if (r < 0) {
      if (errno == EINTR) continue;
      failErrno("ppoll");
      status = 1;
      break;
    }
    for (size_t i = 0; i < fds.size() && r > 0; ++i) {
      Host& from = o.hosts[i];
      if ((fds[i].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
        std::fprintf(stderr, "tun_delay: %s in %s is gone (namespace deleted?); stopping\n", from.ifname.c_str(),
                     from.ns.c_str());
        status = 3;
        break;
      }
      if ((fds[i].revents & POLLIN) == 0) continue;
      for (int k = 0; k < kReadBatch; ++k) {
        const ssize_t n = read(from.fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // EAGAIN: drained
        now = nowNs();
        ++from.inPackets;
        from.inBytes += static_cast<uint64_t>(n);
        const size_t size = static_cast<size_t>(n);
        if (size < 20 || (static_cast<unsigned char>(buf[0]) >> 4) != 4) {
          ++c.dropNotIpv4;
          continue;
        }
        const int to = route(o.hosts, buf.data());
        if (to < 0) {
          ++c.dropNoRoute;
          continue;
        }
        if (queue.size() >= o.queuePackets || queuedBytes + size > o.queueBytes) {
          ++c.dropFull;
          continue;
        }
        queue.push_back(Packet{now + o.delayNs, to, std::vector<char>(buf.data(), buf.data() + size)});
        queuedBytes += size;
        c.maxPackets = std::max(c.maxPackets, queue.size());
        c.maxBytes = std::max(c.maxBytes, queuedBytes);
      }
    }
  }
  if (gStopSignal != 0) std::fprintf(stderr, "tun_delay: signal %d: stopping\n", static_cast<int>(gStopSignal));
  printCounters(o, c, queue.size());
  return status;
}
