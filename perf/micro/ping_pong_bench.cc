// Micro-benchmark: one-way latency of braid's host connectors, by ping-pong between two ranks that are threads of
// this process (inproc transport) or two processes (shm transport), both set up through the real transports.
//   Simple: the payload is copied into the FIFO slot and published by the tail counter; the receiver polls the
//           tail, copies the slot out and returns it through head (Connector's protocol).
//   LL:     the payload travels as LL lines (transports/ll.h) in the connector's first slot; the flag in each line
//           is the only signal, head and tail are never touched. Ping-pong needs no flow control: the reply to
//           message i tells the sender the slot is free for message i+1.
// Counters: one_way_ns = round trip / 2; GB/s = payload / one_way_ns (latency-bound, not streaming, bandwidth).
// Run: build/perf/micro/braid_micro_bench --benchmark_filter=PingPong
#include <benchmark/benchmark.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/common/status.h"
#include "src/common/wait.h"
#include "transports/ll.h"
#include "transports/transport.h"

namespace {

using braid::Connector;
using braid::cpuRelax;
using braid::PeerInfo;
using braid::Status;
using Clock = std::chrono::steady_clock;

constexpr size_t kPayloads[] = {8, 64, 512, 4 << 10, 32 << 10};
constexpr size_t kSlotBytes = braid::llBufferBytes(32 << 10);  // LL doubles the payload; Simple fits as well
constexpr auto kSpinTimeout = std::chrono::seconds(5);
// Reading the clock or probing the peer costs as much as a whole small transfer, so a wait does it only every so
// many spins (tens of microseconds), and a wait that succeeds before the first check reads no clock at all.
constexpr uint32_t kSpinsPerCheck = 1024;

enum class Proto { kSimple, kLl };
enum class Wait { kReady, kPeerGone, kTimeout };

// Spins until ready() returns true, the peer marks itself aborted or dies (kPeerGone: also the normal way the
// echoing side learns the benchmark is over), or kSpinTimeout passes.
template <typename Ready>
Wait spinUntil(const Connector& watch, Ready&& ready) {
  Clock::time_point deadline;
  for (uint32_t n = 1;; ++n) {
    if (ready()) return Wait::kReady;
    cpuRelax();
    if (n % kSpinsPerCheck == 0) {
      // Only reached when the peer is slow, which on a busy 2-core machine means it shares our CPU: yielding lets
      // it run now instead of at the end of our time slice (milliseconds). A quiet machine never gets here.
      sched_yield();
      if (watch.peerAborted() || !watch.peerAlive()) return Wait::kPeerGone;
      const Clock::time_point now = Clock::now();
      if (n == kSpinsPerCheck) {
        deadline = now + kSpinTimeout;
      } else if (now > deadline) {
        return Wait::kTimeout;
      }
    }
  }
}

// One rank's two connectors to the other rank, and the message counters both protocols need.
class Peer {
 public:
  Peer(Proto proto, size_t bytes, std::unique_ptr<Connector> send, std::unique_ptr<Connector> recv)
      : proto_(proto), bytes_(bytes), send_(std::move(send)), recv_(std::move(recv)) {}

  Wait send(const char* src) {
    if (proto_ == Proto::kLl) {
      // sendSlot() stays slot 0 since LL never posts; each message carries the next flag.
      braid::llWrite(reinterpret_cast<braid::LlLine*>(send_->sendSlot()), src, bytes_, braid::llFlag(sent_++));
      return Wait::kReady;
    }
    Wait w = spinUntil(*send_, [this] { return send_->sendReady(); });
    if (w != Wait::kReady) return w;
    memcpy(send_->sendSlot(), src, bytes_);
    send_->sendPost(bytes_);
    return Wait::kReady;
  }

  Wait recv(char* dst) {
    if (proto_ == Proto::kLl) {
      const auto* lines = reinterpret_cast<const braid::LlLine*>(recv_->recvSlot());
      const uint32_t flag = braid::llFlag(received_++);
      size_t done = 0;
      return spinUntil(*recv_, [&] { return braid::llTryReadFrom(lines, dst, bytes_, flag, &done); });
    }
    Wait w = spinUntil(*recv_, [this] { return recv_->recvReady(); });
    if (w != Wait::kReady) return w;
    memcpy(dst, recv_->recvSlot(), bytes_);
    recv_->recvPost();
    return Wait::kReady;
  }

  // Tells the other side to stop echoing (its next check sees senderAborted on the FIFO it receives from).
  void stop() { send_->markAborted(); }

 private:
  Proto proto_;
  size_t bytes_;
  std::unique_ptr<Connector> send_;
  std::unique_ptr<Connector> recv_;
  uint64_t sent_ = 0;
  uint64_t received_ = 0;
};

PeerInfo peerInfo(int rank, pid_t pid) {
  PeerInfo p;
  p.rank = rank;
  p.pid = pid;
  p.hostHash = 1;  // both ranks are on this host
  gethostname(p.hostname, sizeof(p.hostname) - 1);
  return p;
}

// The passive side: returns every message as soon as it has it, until the initiator stops.
Wait echo(Peer& peer, size_t bytes) {
  std::vector<char> buf(std::max<size_t>(bytes, 1));
  for (;;) {
    Wait w = peer.recv(buf.data());
    if (w == Wait::kReady) w = peer.send(buf.data());
    if (w != Wait::kReady) return w;
  }
}

const char* waitError(Wait w) {
  return w == Wait::kTimeout ? "timed out (5 s) waiting for the peer" : "the peer went away";
}

// The timed loop on the initiating side. Each ping carries its index in its first 8 bytes, so a reply that is
// stale or belongs to another message fails at once; the whole payload is compared once after the loop.
void initiate(benchmark::State& state, Peer& peer, size_t bytes) {
  std::vector<char> src(bytes), dst(bytes);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<char>(i * 131 + 7);
  uint64_t i = 0;
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    memcpy(src.data(), &i, sizeof(i));
    Wait w = peer.send(src.data());
    if (w == Wait::kReady) w = peer.recv(dst.data());
    if (w != Wait::kReady) {
      state.SkipWithError(waitError(w));
      break;
    }
    uint64_t echoed;
    memcpy(&echoed, dst.data(), sizeof(echoed));
    if (echoed != i) {
      state.SkipWithError("the reply carried the wrong message");
      break;
    }
    ++i;
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
  peer.stop();
  if (state.error_occurred() || i == 0) return;
  if (memcmp(src.data(), dst.data(), bytes) != 0) {
    state.SkipWithError("the echoed payload differs from the sent one");
    return;
  }
  const double oneWayNs = ns / (2.0 * static_cast<double>(i));
  state.counters["one_way_ns"] = oneWayNs;
  state.counters["GB/s"] = static_cast<double>(bytes) / oneWayNs;
}

// ---- ranks as threads (inproc) ----------------------------------------------------------------------------------

// Both ranks connect from this thread, in the two phases of Communicator::connect.
Status connectThreads(const PeerInfo& a, const PeerInfo& b, std::unique_ptr<Connector>* sendA,
                      std::unique_ptr<Connector>* recvA, std::unique_ptr<Connector>* sendB,
                      std::unique_ptr<Connector>* recvB, std::string* transportName) {
  const braid::TransportConfig cfg = braid::TransportConfig::fromParams();
  BRAID_ASSIGN_OR_RETURN(braid::Transport * t, braid::selectTransport(braid::hostTransports(), cfg, a, b));
  *transportName = t->name();
  BRAID_ASSIGN_OR_RETURN(braid::RecvSetup setupA, t->setupRecv(cfg, a, b, 0, kSlotBytes, 0));
  BRAID_ASSIGN_OR_RETURN(braid::RecvSetup setupB, t->setupRecv(cfg, b, a, 0, kSlotBytes, 0));
  *recvA = std::move(setupA.connector);
  *recvB = std::move(setupB.connector);
  BRAID_ASSIGN_OR_RETURN(*sendA, t->connectSend(cfg, a, b, 0, setupB.blob));
  BRAID_ASSIGN_OR_RETURN(*sendB, t->connectSend(cfg, b, a, 0, setupA.blob));
  return Status::ok();
}

void bmPingPongThreads(benchmark::State& state, Proto proto) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::unique_ptr<Connector> sendA, recvA, sendB, recvB;
  std::string name;
  Status st = connectThreads(peerInfo(0, getpid()), peerInfo(1, getpid()), &sendA, &recvA, &sendB, &recvB, &name);
  if (!st.isOk()) return state.SkipWithError(st.message().c_str());
  state.SetLabel(name);

  Peer initiator(proto, bytes, std::move(sendA), std::move(recvA));
  Peer echoer(proto, bytes, std::move(sendB), std::move(recvB));
  std::atomic<Wait> echoResult{Wait::kReady};
  std::thread thread([&] { echoResult.store(echo(echoer, bytes)); });
  initiate(state, initiator, bytes);
  thread.join();
  if (echoResult.load() == Wait::kTimeout && !state.error_occurred()) {
    state.SkipWithError("the echo thread timed out");
  }
}

// ---- ranks as processes (shm) -----------------------------------------------------------------------------------

// Sends our blob and receives the peer's over a socket, bounded by kSpinTimeout.
Status swapBlobs(int fd, const char* mine, char* theirs) {
  if (send(fd, mine, braid::kConnectBlobBytes, MSG_NOSIGNAL) != static_cast<ssize_t>(braid::kConnectBlobBytes)) {
    return braid::errnoError(errno, "sending the connect blob");
  }
  size_t got = 0;
  const int timeoutMs = static_cast<int>(std::chrono::milliseconds(kSpinTimeout).count());
  while (got < braid::kConnectBlobBytes) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeoutMs) != 1) return braid::systemError("timed out waiting for the peer's connect blob");
    ssize_t n = recv(fd, theirs + got, braid::kConnectBlobBytes - got, 0);
    if (n <= 0) return braid::systemError("the peer closed the socket before sending its connect blob");
    got += static_cast<size_t>(n);
  }
  return Status::ok();
}

// One rank's half of the two-phase connection of Communicator::connect: create the receive FIFO, swap blobs with
// the peer over the socket, attach to the peer's FIFO.
Status connectOverSocket(const PeerInfo& self, const PeerInfo& peer, int fd, std::unique_ptr<Connector>* send,
                         std::unique_ptr<Connector>* recv, std::string* transportName) {
  const braid::TransportConfig cfg = braid::TransportConfig::fromParams();
  BRAID_ASSIGN_OR_RETURN(braid::Transport * t, braid::selectTransport(braid::hostTransports(), cfg, self, peer));
  *transportName = t->name();
  BRAID_ASSIGN_OR_RETURN(braid::RecvSetup setup, t->setupRecv(cfg, self, peer, 0, kSlotBytes, 0));
  *recv = std::move(setup.connector);
  char peerBlob[braid::kConnectBlobBytes];
  BRAID_RETURN_IF_ERROR(swapBlobs(fd, setup.blob, peerBlob));
  BRAID_ASSIGN_OR_RETURN(*send, t->connectSend(cfg, self, peer, 0, peerBlob));
  return Status::ok();
}

// Exit codes of the echoing child.
constexpr int kChildOk = 0;
constexpr int kChildSetupFailed = 2;
constexpr int kChildTimedOut = 3;

int runEchoChild(Proto proto, size_t bytes, int fd, pid_t parent) {
  std::unique_ptr<Connector> send, recv;
  std::string name;
  Status st = connectOverSocket(peerInfo(1, getpid()), peerInfo(0, parent), fd, &send, &recv, &name);
  if (!st.isOk()) {
    fprintf(stderr, "ping-pong child: %s\n", st.message().c_str());
    return kChildSetupFailed;
  }
  Peer echoer(proto, bytes, std::move(send), std::move(recv));
  return echo(echoer, bytes) == Wait::kTimeout ? kChildTimedOut : kChildOk;
}

// The child leaves within one check interval of stop(); a stuck one is killed rather than waited for.
int reapChild(pid_t pid) {
  const Clock::time_point deadline = Clock::now() + kSpinTimeout;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return -1;
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return status;
    }
    usleep(1000);
  }
}

void bmPingPongProcesses(benchmark::State& state, Proto proto) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return state.SkipWithError("socketpair failed");
  const pid_t parent = getpid();
  fflush(nullptr);  // the child must not flush a copy of our buffered output
  const pid_t child = fork();
  if (child < 0) {
    close(sv[0]);
    close(sv[1]);
    return state.SkipWithError("fork failed");
  }
  if (child == 0) {
    close(sv[0]);
    _exit(runEchoChild(proto, bytes, sv[1], parent));
  }
  close(sv[1]);
  std::unique_ptr<Connector> send, recv;
  std::string name;
  Status st = connectOverSocket(peerInfo(0, parent), peerInfo(1, child), sv[0], &send, &recv, &name);
  close(sv[0]);  // also unblocks a child still waiting for our blob
  if (!st.isOk()) {
    // A child past its own setup stops when told; one still in setup is stopped the blunt way.
    if (send) {
      send->markAborted();
    } else {
      kill(child, SIGTERM);
    }
    reapChild(child);
    return state.SkipWithError(st.message().c_str());
  }
  state.SetLabel(name);
  {
    Peer initiator(proto, bytes, std::move(send), std::move(recv));
    initiate(state, initiator, bytes);
  }
  const int status = reapChild(child);
  if (state.error_occurred()) return;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != kChildOk) {
    state.SkipWithError(WIFEXITED(status) && WEXITSTATUS(status) == kChildTimedOut ? "the echo process timed out"
                                                                                   : "the echo process failed");
  }
}

// Names like PingPong/LL/processes/bytes:512, so --benchmark_filter=PingPong selects all of them.
bool registerPingPongs() {
  for (Proto proto : {Proto::kSimple, Proto::kLl}) {
    const std::string protoName = proto == Proto::kSimple ? "Simple" : "LL";
    auto* threads =
        benchmark::RegisterBenchmark(("PingPong/" + protoName + "/threads").c_str(), bmPingPongThreads, proto);
    auto* processes =
        benchmark::RegisterBenchmark(("PingPong/" + protoName + "/processes").c_str(), bmPingPongProcesses, proto);
    for (auto* b : {threads, processes}) {
      b->ArgName("bytes")->UseRealTime();
      for (size_t bytes : kPayloads) b->Arg(static_cast<int64_t>(bytes));
    }
  }
  return true;
}
const bool kRegistered = registerPingPongs();

}  // namespace
