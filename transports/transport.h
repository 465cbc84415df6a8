// Transports set up connectors; they never know the algorithm.
//
// A connector is one direction of one (channel, peer) link: a FIFO of kFifoSlots slots owned by the receiver, plus
// head/tail counters (Simple protocol). The sender fills slot tail % kFifoSlots and publishes it by bumping tail
// (release); the receiver consumes slot head % kFifoSlots and returns it by bumping head. The same memory layout
// serves ranks that are threads of one process (heap memory, no kernel involvement) and ranks that are processes
// on one host (a /dev/shm segment), so the executor above is one piece of code.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/backends/common/fifo.h"
#include "src/common/status.h"
#include "transports/ll.h"

namespace braid {

constexpr size_t kConnectBlobBytes = 256;  // like NCCL's CONNECT_SIZE

// Who is on the other end, for transport choice and for naming a dead or failed peer in errors.
struct PeerInfo {
  int rank = -1;
  uint64_t hostHash = 0;
  pid_t pid = 0;
  char hostname[64] = {};
  int numa = -1;     // NUMA node this rank's memory and threads go on (-1: not placed; set after the topology stage)
  int rail = 0;      // the network device this rank's channel 0 uses, modulo the device count: its local rank (on
                     // NVLSTree's cross-host communicator, its local rank on the parent, so both ends share a rail)
  int cudaDev = -1;  // a CUDA rank's device ordinal in its own process (-1: a host rank)
  uint64_t gpuPciId = 0;  // its GPU (Backend::gpuPciId; 0: a host rank), which other processes can match
};

// A transport whose connector needs work done between the executor's checks (a network connection: posting
// sends and receives, testing them) supplies a driver. The executor calls it while it waits on the connector and
// right after it publishes a slot, so the work happens on the thread that wants it, without a thread hand-off;
// the transport's own progress thread covers the time no executor is waiting. Must be callable from any thread.
class ConnectorDriver {
 public:
  virtual ~ConnectorDriver() = default;
  virtual void drive() = 0;
  // The executor stopped driving the connector (the work item that used it is done): what is still in flight (a
  // large send the network finishes after the sender's last slot was published) is the transport's own thread's.
  virtual void release() {}
};

// The owning host form of one connector end: the mapping that keeps the FIFO alive, the peer, the transport's
// driver, and the plain FifoView and FifoCursor that the executor (and later a kernel) runs on.
class Connector {
 public:
  Connector(std::shared_ptr<void> mem, FifoCtrl* ctrl, char* slots, bool isSend, const PeerInfo& peer,
            bool crossProcess)
      : mem_(std::move(mem)), view_(FifoView::of(ctrl, slots, isSend)), peer_(peer), crossProcess_(crossProcess) {}
  // A FIFO in GPU memory (the p2p transport's): the host never touches it, so the view is built from the sizes
  // the connection agreed, and the host-side failure signalling below does nothing (a kernel stopped by its abort
  // word marks the connectors it runs on itself).
  Connector(std::shared_ptr<void> mem, const FifoView& deviceView, const PeerInfo& peer, bool crossProcess)
      : mem_(std::move(mem)), view_(deviceView), peer_(peer), crossProcess_(crossProcess), hostVisible_(false) {}
  // Whether host threads may read and write the FIFO (false for GPU memory).
  bool hostVisible() const { return hostVisible_; }

  size_t slotBytes() const { return view_.slotBytes; }
  const PeerInfo& peer() const { return peer_; }
  bool isSend() const { return view_.isSend; }
  const FifoView& view() const { return view_; }
  FifoCursor& cursor() { return cursor_; }

  // Sender side.
  bool sendReady() const { return view_.sendReady(cursor_); }
  char* sendSlot() const { return view_.sendSlot(cursor_); }
  void sendPost(size_t msgBytes) { view_.sendPost(cursor_, msgBytes); }

  // Receiver side.
  bool recvReady() const { return view_.recvReady(cursor_); }
  const char* recvSlot() const { return view_.recvSlot(cursor_); }
  void recvPost() { view_.recvPost(cursor_); }

  // LL protocol: the lines of the current step's slot and the flag its message carries.
  size_t llSlotBytes() const { return view_.llSlotBytes; }
  LlLine* llSlot() const { return view_.llSlot(cursor_); }
  uint32_t llFlagNow() const { return view_.llFlagNow(cursor_); }

  void setDriver(std::shared_ptr<ConnectorDriver> d) { driver_ = std::move(d); }
  void drive() const {
    if (driver_) driver_->drive();
  }
  void release() const {
    if (driver_) driver_->release();
  }

  // A transport whose messages arrive whole (a network: a receive completes only with all of its bytes) carries
  // an LL step's chunk in the Simple slot: the message's completion is the flag, and lines would only double the
  // bytes on the wire. Both ends of such a connection say so.
  bool wholeMessages() const { return wholeMessages_; }
  void setWholeMessages() { wholeMessages_ = true; }

  // Bytes of memory this end allocated for its FIFO, as mapped (a device FIFO rounded up to the driver's
  // granularity), when the transport says; 0: the FIFO layout's size applies (ncclCommMemStats).
  size_t ownedBytes() const { return ownedBytes_; }
  void setOwnedBytes(size_t bytes) { ownedBytes_ = bytes; }

  // Receive demand (FifoCtrl::wanted), announced only for connectors whose transport asks for it.
  bool demandDriven() const { return demandDriven_; }
  void setDemandDriven() { demandDriven_ = true; }
  void expectMessages(uint64_t n) { view_.expectMessages(n); }

  // Failure signalling between the two ends: `why` (when this end has said nothing yet) is what the other end
  // quotes, so a rank stopped by a neighbour's failure names its cause.
  void markAborted(const std::string& why = std::string());
  bool peerAborted() const { return hostVisible_ && view_.peerAborted(); }
  // For a peer in another process: false once that process no longer exists.
  bool peerAlive() const;
  // What the transport said about a failure (empty when it said nothing).
  std::string failureText() const {
    if (!hostVisible_) return std::string();
    const char* f = view_.ctrl->failure;
    return std::string(f, strnlen(f, sizeof(view_.ctrl->failure)));
  }

 private:
  std::shared_ptr<void> mem_;  // keeps the segment mapped while this end uses it
  FifoView view_;
  FifoCursor cursor_;
  PeerInfo peer_;
  bool crossProcess_;
  bool hostVisible_ = true;
  bool demandDriven_ = false;
  size_t ownedBytes_ = 0;
  bool wholeMessages_ = false;
  std::shared_ptr<ConnectorDriver> driver_;
};

// The receiver's half of a connection under construction: its connector plus the blob the sender attaches with.
struct RecvSetup {
  std::unique_ptr<Connector> connector;
  char blob[kConnectBlobBytes] = {};
};

class FifoMemory;
const FifoMemory& hostFifoMemory();

// A FIFO in GPU memory, as the backend that owns the GPU hands it out (DeviceMemory).
struct DeviceFifoMem {
  std::shared_ptr<void> owner;  // unmaps (and frees) the memory when the last reference goes
  char* base = nullptr;         // its device address (unified addressing: the same in every context of the process)
  size_t bytes = 0;             // as mapped: the size asked for, rounded up to the driver's granularity
  int exportFd = -1;            // alloc(exportable): a descriptor for another process; the caller closes it
};

// GPU memory for the p2p transport's FIFOs, supplied by a CUDA backend (TransportConfig::device; null on host
// backends). Every call is made on the communicator's thread during connection set-up.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual int device() const = 0;  // the backend's CUDA device ordinal
  // Kernels on this device can load and store memory of `peerDevice` (an ordinal of this process).
  virtual bool canAccessPeer(int peerDevice) const = 0;
  // `bytes` of this device's memory, rounded up to the driver's granularity: `head` at the start, zeros after,
  // written before this returns. Accessible to this device and to `peerDevices` (ordinals of this process);
  // exportable: also a descriptor another process can import.
  [[nodiscard]] virtual Result<DeviceFifoMem> alloc(size_t bytes, const void* head, size_t headBytes,
                                                    const std::vector<int>& peerDevices, bool exportable) const = 0;
  // Maps, for this device, memory another process exported (`fd`, `bytes` as that process mapped it). The caller
  // keeps and closes `fd`.
  [[nodiscard]] virtual Result<DeviceFifoMem> import(int fd, size_t bytes) const = 0;
};

// The knobs every transport obeys. The communicator reads them once at init (fromParams) and passes them to
// each call below; a transport never reads them from the parameter registry itself. (The networks behind
// include/nccl_net.h, which the plugin ABI gives no way to hand anything, read their own knobs once at their
// init, as NCCL's plugins do.)
namespace net {
class NetContext;
}

// A communicator as the networks see it (transports/net/net_plugin.h opens the context).
struct NetCommState {
  uint64_t commId = 0;    // the same on every rank (NCCL's commHash)
  int trafficClass = -1;  // ncclConfig_t.trafficClass, or NCCL_NET_TRAFFIC_CLASS_UNDEF
  int nranks = 1;
  int nChannels = 1;
  std::mutex mu;  // guards `context`
  std::shared_ptr<net::NetContext> context;
};

struct TransportConfig {
  double timeoutSec = 60;           // BRAID_TIMEOUT: bounds a connection's set-up and its close
  bool shmDisable = false;          // NCCL_SHM_DISABLE=1: processes of one host talk through the network
  std::string shmDir = "/dev/shm";  // BRAID_SHM_DIR: where shared-memory FIFOs are created
  // Where FIFOs one process owns come from: the backend's policy (Backend::fifoMemory).
  const FifoMemory* memory = &hostFifoMemory();
  // GPU memory for FIFOs (a CUDA backend's), and which peers (by rank) this rank reaches over P2P: the
  // communicator decides that once from the topology and NCCL_P2P_LEVEL / NCCL_P2P_DISABLE (both ends alike).
  const DeviceMemory* device = nullptr;
  std::vector<uint8_t> p2pPeers;
  // Which communicator the connections serve, for networks that keep a context per communicator (net plugin ABI
  // v11+): opened at the communicator's first network connection, released when its last connection has closed.
  std::shared_ptr<NetCommState> netComm;

  static TransportConfig fromParams();
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual bool canConnect(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer) const = 0;
  // Receiver: allocates the FIFO (slotBytes per Simple slot, llSlotBytes per LL slot) and describes it in blob.
  // `channel` is the communicator channel the connection serves (a network spreads channels over its devices).
  virtual Result<RecvSetup> setupRecv(const TransportConfig& cfg, const PeerInfo& self, const PeerInfo& peer,
                                      int channel, size_t slotBytes, size_t llSlotBytes) = 0;
  // Sender: attaches to the receiver's FIFO.
  virtual Result<std::unique_ptr<Connector>> connectSend(const TransportConfig& cfg, const PeerInfo& self,
                                                         const PeerInfo& peer, int channel, const char* blob) = 0;
  // A network (messages cross hosts through a device and a proxy thread), as opposed to memory both ends map.
  virtual bool isNetwork() const { return false; }
  // A network's link bandwidth (GB/s) for the cost model; an error for a transport that is not a network or whose
  // devices cannot be loaded.
  virtual Result<double> linkGBps() const { return invalidUsage("%s is not a network transport", name()); }
};

// A FIFO in this process's own memory (an anonymous mapping placed on self's NUMA node): the control block, then
// the Simple and LL slots. The in-process and network transports use it. `beforeUnmap` runs when the last
// reference goes, before the memory does (a network connection stops using it there); false keeps it mapped.
struct LocalFifo {
  std::shared_ptr<void> mem;
  FifoCtrl* ctrl = nullptr;
  char* slots = nullptr;
};
Result<LocalFifo> allocLocalFifo(const PeerInfo& self, size_t slotBytes, size_t llSlotBytes,
                                 std::function<bool()> beforeUnmap = nullptr);
// The same layout in memory another allocator gave (a backend's FifoMemory): localFifoBytes says how much,
// placeLocalFifo initialises the control block in it and keeps `mem` as the owner.
size_t localFifoBytes(size_t slotBytes, size_t llSlotBytes);
LocalFifo placeLocalFifo(std::shared_ptr<void> mem, size_t slotBytes, size_t llSlotBytes);

// Where the FIFOs that one process owns live (the in-process and network transports'; FIFOs that processes share
// are /dev/shm files by nature, the shm transport's own). A backend supplies its policy through
// TransportConfig::memory: the host backend's, hostFifoMemory(), is allocLocalFifo's process memory; a CUDA
// backend's will be pinned host or device memory, which a kernel and a network proxy can both reach.
class FifoMemory {
 public:
  virtual ~FifoMemory() = default;
  [[nodiscard]] virtual Result<LocalFifo> allocLocal(const PeerInfo& self, size_t slotBytes, size_t llSlotBytes,
                                                     std::function<bool()> beforeUnmap) const = 0;
  // Memory another process shares with this one (the shm transport's segments, both ends): made reachable by
  // whatever runs the schedules here (a CUDA backend pins and maps it). Returns what undoes that, to run before
  // the memory is unmapped (empty when there is nothing to undo); it must not refer to this object.
  [[nodiscard]] virtual Result<std::function<void()>> pinShared(void* base, size_t bytes) const {
    return std::function<void()>();
  }
};

// A FIFO's (or another shared mapping's) owner handed from its owner to peers that are threads of the same process
// (the inproc and p2p transports, the CUDA direct areas): the owner puts it under an id it sends to them, each takes
// it once, `takes` takes in all. Thread safety: any thread.
class FifoHandoff {
 public:
  uint64_t put(std::shared_ptr<void> owner, int takes = 1);
  // Errors (kInternalError) name the transport, the id and the peer that sent it.
  Result<std::shared_ptr<void>> take(uint64_t id, const char* transport, int peerRank);
  // Drops what is left of an offer (peers that will not take it).
  void withdraw(uint64_t id);

 private:
  struct Pending {
    std::shared_ptr<void> owner;
    int takes = 1;
  };
  std::mutex mu_;
  uint64_t nextId_ = 0;
  std::map<uint64_t, Pending> pending_;
};

// The transports (transports/shm, transports/net). Each is one object for the process.
Transport* p2pTransport();     // CUDA ranks of one host whose GPUs reach each other (transports/p2p)
Transport* inprocTransport();  // ranks that are threads of one process
Transport* shmTransport();     // ranks that are processes of one host (/dev/shm)
Transport* netTransport();     // ranks on other hosts (transports/net)

// The registry (transports/transport.cc): the host backend's transports in the order they are tried for each peer.
const std::vector<Transport*>& hostTransports();

// The first of `transports` that can connect self and peer, or an error that says why none can.
Result<Transport*> selectTransport(const std::vector<Transport*>& transports, const TransportConfig& cfg,
                                   const PeerInfo& self, const PeerInfo& peer);

}  // namespace braid
