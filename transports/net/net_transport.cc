#include "transports/net/net_transport.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "src/common/logging.h"
#include "transports/connect_blob.h"
#include "transports/net/net_plugin.h"

namespace braid {
namespace {

using Clock = std::chrono::steady_clock;

// A deadline `seconds` (BRAID_TIMEOUT, at least 1) from now.
Clock::time_point deadlineIn(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(1.0, seconds)));
}

std::string describe(const PeerInfo& p) {
  return strPrintf("rank %d (host %s)", p.rank, p.hostname);
}

struct NetConn;
bool progressConn(NetConn& c);

// One direction of one connection. Progress runs under `mu`, from the proxy thread or from an executor that
// waits on the connector (drive), whichever gets there.
struct NetConn : ConnectorDriver {
  void drive() override {
    lastDriveNs.store(nowNs(), std::memory_order_relaxed);
    // A blocking lock: when the progress thread was preempted holding it, waiting hands it the core.
    std::lock_guard<std::mutex> lock(mu);
    if (!closed) progressConn(*this);
  }
  void release() override;
  static int64_t nowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  }
  std::atomic<int64_t> lastDriveNs{0};  // when an executor last drove it: the progress thread leaves it alone
  std::mutex mu;
  bool closed = false;
  bool isSend = false;
  net::NetModule* net = nullptr;
  // The communicator's context in the network (v11+ plugins): kept until this connection has closed.
  std::shared_ptr<net::NetContext> context;
  int dev = 0;
  PeerInfo self, peer;
  FifoCtrl* ctrl = nullptr;
  char* slots = nullptr;
  size_t slotBytes = 0;
  net::NetHandle handle{};
  void* listenComm = nullptr;
  void* comm = nullptr;
  void* mhandle = nullptr;
  uint64_t posted = 0, done = 0;
  void* requests[kFifoSlots] = {};
  double timeoutSec = 60;  // the communicator's BRAID_TIMEOUT: bounds connecting and closing
  Clock::time_point connectDeadline;
  bool failed = false;
  bool closing = false;  // the connector is gone: finish the sends already published, then close
  Clock::time_point closeDeadline;
};

// The network connections use: the process's selection (net_plugin.h loads it once, as NCCL loads its plugin).
Result<net::NetModule*> chosenNetwork() {
  BRAID_ASSIGN_OR_RETURN(net::NetSelection * sel, net::processNetworks());
  return sel->chosen;
}

// Each device's NUMA node, read once per network from its sysfs device path (a network's devices are fixed for
// the process's life).
Result<const std::vector<int>*> deviceNumaNodes(net::NetModule* net) {
  static std::mutex mu;
  static std::map<net::NetModule*, std::vector<int>> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(net);
  if (it != known.end()) return &it->second;
  BRAID_ASSIGN_OR_RETURN(int n, net->devices());
  std::vector<int> numa;
  for (int d = 0; d < n; ++d) {
    BRAID_ASSIGN_OR_RETURN(net::NetProperties props, net->getProperties(d));
    int node = -1;
    if (!props.pciPath.empty()) {
      std::ifstream in(props.pciPath + "/numa_node");
      if (!(in >> node)) node = -1;
    }
    numa.push_back(node);
  }
  return &known.emplace(net, std::move(numa)).first->second;
}

bool readyToClose(const NetConn& c) {
  if (c.failed || !c.isSend || c.comm == nullptr) return true;
  if (loadAcquire(&c.ctrl->senderAborted) != 0) return true;  // this rank aborted
  const uint64_t tail = loadAcquire(&c.ctrl->tail);
  return c.done == tail || Clock::now() > c.closeDeadline;
}

void close(NetConn& c) {
  Status st;
  if (c.mhandle != nullptr) st = c.net->deregMr(c.comm, c.mhandle);
  if (c.comm != nullptr) st = c.isSend ? c.net->closeSend(c.comm) : c.net->closeRecv(c.comm);
  if (c.listenComm != nullptr) st = c.net->closeListen(c.listenComm);
  if (!st.isOk())
    BRAID_INFO(kLogNet, "closing the connection with %s: %s", describe(c.peer).c_str(), st.message().c_str());
}

// Records the failure where the executor looks (the connector's failure text, then the peer-failed flag).
void fail(NetConn& c, const Status& st) {
  c.failed = true;
  snprintf(c.ctrl->failure, sizeof(c.ctrl->failure), "%s", st.message().c_str());
  storeRelease(c.isSend ? &c.ctrl->receiverAborted : &c.ctrl->senderAborted, 1u);
  BRAID_INFO(kLogNet, "rank %d: network connection %s %s failed: %s", c.self.rank, c.isSend ? "to" : "from",
             describe(c.peer).c_str(), st.message().c_str());
}

Status connected(NetConn& c) {
  BRAID_RETURN_IF_ERROR(
      c.net->regMr(c.comm, c.slots, c.slotBytes * kFifoSlots, NCCL_PTR_HOST, &c.mhandle).withContext("regMr"));
  BRAID_INFO(kLogNet, "rank %d: connected %s %s via NET/%s/%d", c.self.rank, c.isSend ? "to" : "from",
             describe(c.peer).c_str(), c.net->name().c_str(), c.dev);
  return Status::ok();
}

Status notConnectedYet(const NetConn& c) {
  if (Clock::now() < c.connectDeadline) return Status::ok();
  return remoteError(
      "no network connection %s %s after %lld s (BRAID_TIMEOUT): is it running, and can this host "
      "reach it (NCCL_SOCKET_IFNAME)?",
      c.isSend ? "to" : "from", describe(c.peer).c_str(), static_cast<long long>(c.timeoutSec));
}

// Tests the requests in flight in order: a finished send frees its slot (the sender's credit), a finished
// receive publishes its slot to the executor.
Status completeInOrder(NetConn& c, bool* did) {
  while (c.done < c.posted) {
    bool finished = false;
    int size = 0;
    const size_t slot = c.done % kFifoSlots;
    BRAID_RETURN_IF_ERROR(
        c.net->test(c.requests[slot], &finished, &size).withContext(c.isSend ? "send test" : "receive test"));
    if (!finished) break;
    if (c.isSend) {
      storeRelease(&c.ctrl->head, ++c.done);
    } else {
      c.ctrl->msgBytes[slot] = static_cast<uint64_t>(size);
      storeRelease(&c.ctrl->tail, ++c.done);
    }
    *did = true;
  }
  return Status::ok();
}

Status progressSend(NetConn& c, bool* did) {
  if (c.comm == nullptr) {
    BRAID_RETURN_IF_ERROR(c.net->connect(c.context.get(), c.dev, &c.handle, &c.comm).withContext("connect"));
    if (c.comm == nullptr) return notConnectedYet(c);
    BRAID_RETURN_IF_ERROR(connected(c));
    *did = true;
  }
  const uint64_t tail = loadAcquire(&c.ctrl->tail);
  while (c.posted < tail && c.posted < c.done + kFifoSlots) {
    const size_t slot = c.posted % kFifoSlots;
    void* req = nullptr;
    BRAID_RETURN_IF_ERROR(c.net->isend(c.comm, c.slots + slot * c.slotBytes, c.ctrl->msgBytes[slot], 0, c.mhandle, &req)
                              .withContext("isend"));
    if (req == nullptr) break;
    c.requests[slot] = req;
    ++c.posted;
    *did = true;
  }
  return completeInOrder(c, did);
}

Status progressRecv(NetConn& c, bool* did) {
  if (c.comm == nullptr) {
    BRAID_RETURN_IF_ERROR(c.net->accept(c.listenComm, &c.comm).withContext("accept"));
    if (c.comm == nullptr) return notConnectedYet(c);
    Status st = c.net->closeListen(c.listenComm);
    c.listenComm = nullptr;
    BRAID_RETURN_IF_ERROR(st);
    BRAID_RETURN_IF_ERROR(connected(c));
    *did = true;
  }
  const uint64_t head = loadAcquire(&c.ctrl->head);
  const uint64_t wanted = loadAcquire(&c.ctrl->wanted);
  while (c.posted < head + kFifoSlots && c.posted < wanted) {
    const size_t slot = c.posted % kFifoSlots;
    void* data = c.slots + slot * c.slotBytes;
    size_t size = c.slotBytes;
    int tag = 0;
    void* req = nullptr;
    BRAID_RETURN_IF_ERROR(c.net->irecv(c.comm, 1, &data, &size, &tag, &c.mhandle, &req).withContext("irecv"));
    if (req == nullptr) break;
    c.requests[slot] = req;
    ++c.posted;
    *did = true;
  }
  return completeInOrder(c, did);
}

bool progressConn(NetConn& c) {
  if (c.failed) return false;
  bool did = false;
  Status st = c.isSend ? progressSend(c, &did) : progressRecv(c, &did);
  if (!st.isOk()) fail(c, st);
  return did;
}

class NetProxy {
 public:
  static NetProxy& get() {
    static auto* proxy = new NetProxy();  // never destroyed: it may be inside a network call at exit
    return *proxy;
  }

  void add(const std::shared_ptr<NetConn>& c) {
    std::lock_guard<std::mutex> lock(mu_);
    conns_.push_back(c);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    cv_.notify_all();
  }

  // Ends the progress thread's back-off: a connection needs it now (NetConn::release).
  void wake() { cv_.notify_all(); }

  // Called when the connector goes: a send connection first delivers what was published (an operation completes
  // on the sender when its last slot is published, not when the network has carried it).
  bool remove(NetConn* c) {
    std::unique_lock<std::mutex> lock(mu_);
    c->closing = true;
    c->closeDeadline = deadlineIn(c->timeoutSec);
    cv_.notify_all();
    // The progress thread closes it once its sends are out, or at closeDeadline; a network call that never
    // returns would hold it longer, so this wait has its own bound, after which the connection is left behind
    // (its memory stays mapped: the NetConn and the FIFO mapping it uses are not freed).
    const bool gone = doneCv_.wait_for(lock, std::chrono::duration<double>(std::max(1.0, c->timeoutSec) + 5), [&] {
      return std::none_of(conns_.begin(), conns_.end(),
                          [c](const std::shared_ptr<NetConn>& p) { return p.get() == c; });
    });
    if (!gone) {
      BRAID_WARN("rank %d: the network connection %s %s did not close within BRAID_TIMEOUT; leaving it open",
                 c->self.rank, c->isSend ? "to" : "from", describe(c->peer).c_str());
    }
    return gone;
  }

 private:
  void loop() {
    int idle = 0;
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      if (conns_.empty()) {
        cv_.wait(lock);
        idle = 0;
        continue;
      }
      bool progressed = false;
      for (size_t i = 0; i < conns_.size();) {
        NetConn& c = *conns_[i];
        bool closeNow = false;
        // An executor driving this connection does the work; competing with it costs the executor its core
        // (measured on 2 cores: an 8-byte all-reduce took 1.3 ms instead of 26 us when this thread woke every
        // 50 us to progress connections executors were driving).
        const bool driven = NetConn::nowNs() - c.lastDriveNs.load(std::memory_order_relaxed) < kDrivenNs;
        if (!driven || c.closing) {
          std::unique_lock<std::mutex> connLock(c.mu, std::try_to_lock);
          if (connLock.owns_lock()) {
            progressed = progressConn(c) || progressed;
            if (c.closing && readyToClose(c)) {
              close(c);
              c.closed = true;
              closeNow = true;
            }
          }
        }
        if (closeNow) {
          conns_.erase(conns_.begin() + static_cast<long>(i));
          doneCv_.notify_all();
          progressed = true;
        } else {
          ++i;
        }
      }
      idle = progressed ? 0 : idle + 1;
      // Executors drive their own connections while they wait (NetConn::drive), so this thread only covers
      // stragglers: connections being made, sends finishing after an operation returned, closes. It backs off
      // quickly; spinning here would take a core from the ranks (measured on 2 cores: 7.7 ms per 8-byte
      // all-reduce with a spinning proxy).
      if (idle > kYields) {
        cv_.wait_for(lock, std::chrono::microseconds(idle > kLongIdle ? 1000 : 200));
      } else if (idle > 0) {
        lock.unlock();
        sched_yield();
        lock.lock();
      }
    }
  }

  static constexpr int kYields = 20;
  static constexpr int64_t kDrivenNs = 500 * 1000;
  static constexpr int kLongIdle = 2000;

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable doneCv_;
  std::vector<std::shared_ptr<NetConn>> conns_;
  std::thread thread_;
};

// Without this the progress thread would leave a connection alone for kDrivenNs after its executor moved on, and
// a send the network completes only with the sender's help (libfabric's rendezvous above 16 KB on tcp) would wait
// that long while the executor waits on its receive: OFI-tcp 32 KB send/receive took 630-730 us, Socket 40.
void NetConn::release() {
  std::unique_lock<std::mutex> lock(mu, std::try_to_lock);
  if (!lock.owns_lock() || closed || done == posted) return;  // locked: someone is progressing it right now
  lastDriveNs.store(0, std::memory_order_relaxed);
  lock.unlock();
  NetProxy::get().wake();
}

// Ranks `self` and `peer` talk through the network: different hosts, or NCCL_SHM_DISABLE=1 between processes of
// one host.
bool needsNetwork(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer) {
  if (self.hostHash != peer.hostHash) return true;
  return self.pid != peer.pid && cfg.shmDisable;
}

// The bandwidth (GB/s) of the network device connections use, from its reported speed (10 Gb/s when it reports
// none). An error when no network can be loaded (NCCL_NET names none, say).
Result<double> netLinkGBps() {
  BRAID_ASSIGN_OR_RETURN(net::NetModule * net, chosenNetwork());
  BRAID_ASSIGN_OR_RETURN(net::NetProperties props, net->getProperties(0));
  return props.speedMbps > 0 ? props.speedMbps / 8e3 : 10000 / 8e3;
}

class NetTransport : public Transport {
 public:
  const char* name() const override { return "net"; }

  bool canConnect(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer) const override {
    return needsNetwork(cfg, self, peer);
  }
  bool isNetwork() const override { return true; }
  Result<double> linkGBps() const override { return netLinkGBps(); }

  Result<RecvSetup> setupRecv(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer, int channel,
                              size_t slotBytes, size_t llSlotBytes) override {
    BRAID_ASSIGN_OR_RETURN(std::shared_ptr<NetConn> c, newConn(cfg, false, self, peer, channel, slotBytes));
    BRAID_RETURN_IF_ERROR(c->net->listen(c->context.get(), c->dev, &c->handle, &c->listenComm).withContext("listen"));
    BRAID_ASSIGN_OR_RETURN(LocalFifo fifo, attach(cfg, c, llSlotBytes));
    RecvSetup setup;
    setup.connector = std::make_unique<Connector>(fifo.mem, fifo.ctrl, fifo.slots, false, peer, false);
    setup.connector->setDemandDriven();
    setup.connector->setWholeMessages();
    setup.connector->setDriver(c);
    NetBlob b{};
    strcpy(b.kind, "net");
    b.slotBytes = slotBytes;
    memcpy(b.handle, c->handle.data(), sizeof(b.handle));
    memcpy(setup.blob, &b, sizeof(b));
    NetProxy::get().add(c);
    return setup;
  }

  Result<std::unique_ptr<Connector>> connectSend(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer,
                                                 int channel, const char* blob) override {
    BRAID_ASSIGN_OR_RETURN(NetBlob b, decodeNetBlob(blob, peer));
    BRAID_ASSIGN_OR_RETURN(std::shared_ptr<NetConn> c,
                           newConn(cfg, true, self, peer, channel, static_cast<size_t>(b.slotBytes)));
    memcpy(c->handle.data(), b.handle, sizeof(b.handle));
    // The sender's LL slots are never used on a network connection (LL steps travel in the Simple slots); the
    // layout only needs a size.
    BRAID_ASSIGN_OR_RETURN(LocalFifo fifo, attach(cfg, c, 64));
    auto conn = std::make_unique<Connector>(fifo.mem, fifo.ctrl, fifo.slots, true, peer, false);
    conn->setDriver(c);
    conn->setWholeMessages();
    NetProxy::get().add(c);
    return conn;
  }

 private:
  // One direction of a connection; each end picks its own device (pickNetDevice).
  static Result<std::shared_ptr<NetConn>> newConn(const TransportConfig& cfg, bool isSend, const PeerInfo& self,
                                                  const PeerInfo& peer, int channel, size_t slotBytes) {
    auto net = chosenNetwork();
    if (!net.isOk()) return net.status().withContext("no network for ranks on other hosts");
    BRAID_ASSIGN_OR_RETURN(const std::vector<int>* devNuma, deviceNumaNodes(net.value()));
    auto c = std::make_shared<NetConn>();
    c->isSend = isSend;
    c->net = net.value();
    c->dev = pickNetDevice(*devNuma, self, channel);
    c->self = self;
    c->peer = peer;
    c->slotBytes = slotBytes;
    c->timeoutSec = cfg.timeoutSec;
    if (cfg.netComm != nullptr) {
      NetCommState& st = *cfg.netComm;
      std::lock_guard<std::mutex> lock(st.mu);
      if (st.context == nullptr) {
        BRAID_ASSIGN_OR_RETURN(
            st.context, c->net->openContext(st.commId, st.trafficClass, net::NetCommHints{st.nranks, st.nChannels}));
      }
      c->context = st.context;
    }
    return c;
  }

  // The connection's FIFO in this process's memory; when the connector goes, the proxy lets go of it first.
  static Result<LocalFifo> attach(const TransportConfig& cfg, const std::shared_ptr<NetConn>& c, size_t llSlotBytes) {
    NetConn* raw = c.get();
    BRAID_ASSIGN_OR_RETURN(LocalFifo fifo, cfg.memory->allocLocal(c->self, c->slotBytes, llSlotBytes,
                                                                  [raw] { return NetProxy::get().remove(raw); }));
    c->ctrl = fifo.ctrl;
    c->slots = fifo.slots;
    c->connectDeadline = deadlineIn(c->timeoutSec);
    return fifo;
  }
};

}  // namespace

int pickNetDevice(const std::vector<int>& devNuma, const PeerInfo& self, int channel) {
  if (devNuma.empty()) return 0;
  std::vector<int> near;
  for (size_t d = 0; d < devNuma.size(); ++d) {
    if (self.numa >= 0 && devNuma[d] == self.numa) near.push_back(static_cast<int>(d));
  }
  if (near.empty()) {
    for (size_t d = 0; d < devNuma.size(); ++d) near.push_back(static_cast<int>(d));
  }
  const int n = static_cast<int>(near.size());
  return near[static_cast<size_t>(((self.rail + channel) % n + n) % n)];
}

Transport* netTransport() {
  static auto* t = new NetTransport();
  return t;
}

}  // namespace braid
