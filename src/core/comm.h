// The communicator: who the ranks are, how to reach them (lazily connected FIFOs per channel and peer), the channel
// workers, user-created reduction ops, and the lifecycle flags (initialising, finalized, aborted).
//
// Deliberately narrow: algorithms see RingParams, the planner a PlanShape, the backend (src/backends/backend.h) plans
// and links, transports PeerInfo. Nothing below src/core takes a Communicator.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "algorithms/ring/ring.h"
#include "algorithms/selector/algo_filter.h"
#include "algorithms/selector/cost_model.h"
#include "algorithms/tree/tree.h"
#include "src/backends/backend.h"
#include "src/bootstrap/bootstrap.h"
#include "src/common/dtype.h"
#include "src/common/status.h"
#include "src/core/planner.h"
#include "transports/transport.h"

namespace braid {

struct CommConfig {
  int blocking = 1;
  int minChannels = -1;  // config.minCTAs
  int maxChannels = -1;  // config.maxCTAs
  int splitShare = 0;
  std::string commName;
};

// A user-created reduction operator (ncclRedOpCreatePreMulSum).
struct UserRedOp {
  bool live = false;
  DType dtype = DType::kFloat32;
  bool immediate = true;            // ncclScalarHostImmediate: scalar captured at creation
  uint64_t scalarBits = 0;          // immediate value
  const void* scalarPtr = nullptr;  // ncclScalarDevice: read at each launch (host memory on host comms)
};

class Communicator {
 public:
  Communicator();
  ~Communicator();

  // Collective over nranks ranks sharing `id`. Blocks until the rendezvous completes, fails, or abort is set.
  Status init(const UniqueIdInfo& id, int nranks, int rank, const CommConfig& config, int device);

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  int device() const { return device_; }
  int nChannels() const { return static_cast<int>(channels_.size()); }
  const CommConfig& config() const { return config_; }
  const PeerInfo& peer(int r) const { return peers_[static_cast<size_t>(r)]; }
  Bootstrap* bootstrap() { return bootstrap_.get(); }

  // Lifecycle.
  std::atomic<bool>& abortFlag() { return abort_; }
  std::atomic<int>& asyncError() { return asyncError_; }  // an ncclResult_t value
  std::atomic<bool> finalized{false};
  std::thread initThread;  // non-blocking or grouped init runs here

  // Group support: ops queued since the outermost ncclGroupStart.
  std::vector<PendingOp>& pending() { return pending_; }

  // A snapshot of `bytes` bytes at `src` that lives until the group's operations complete (or are dropped): lets
  // an operation read a buffer it also overwrites, as an in-place all-to-all does.
  const void* stageCopy(const void* src, size_t bytes);
  // Drops the queued ops and their staging copies.
  void clearPending();

  // Whether an all-to-all of `bytesPerPeer` runs the log-step (Bruck) schedule as one queued collective (else it
  // is queued as sends and receives). The same answer on every rank.
  bool useBruck(size_t bytesPerPeer) const;

  // Whether NCCL_ALGO / NCCL_PROTO leave an algorithm and protocol braid implements for `kind` on this
  // communicator; an error names the setting and what is missing. Send/receive always pass.
  Status checkAlgorithms(CollKind kind) const;

  // Plans and executes the pending ops of several communicators together (the work of ncclGroupEnd).
  static Status launch(const std::vector<Communicator*>& comms);

  // Reduction operators.
  Result<ReduceOp> resolveOp(int op, DType dtype) const;
  Result<int> createPreMulSum(const void* scalar, DType dtype, bool immediate);
  Status destroyOp(int op);

  // Memory this communicator may map for receive FIFOs (an upper bound): (NCCL_BUFFSIZE + NCCL_LL_BUFFSIZE) x
  // channels x (nranks + 3).
  size_t fifoMemoryBound() const;
  // One receive FIFO: its Simple and LL slots.
  size_t connectorBytes() const;

  // Split: collective over this communicator.
  Status split(int color, int key, const CommConfig& config, std::unique_ptr<Communicator>* out);

 private:
  // A connector is one direction of one (channel, peer, lane) link. Lanes let two programs of one channel use the
  // same peer independently (tree 1 of the double binary tree runs on lane 1 beside tree 0).
  using LinkKey = std::pair<int, int>;  // (peer rank, lane)
  struct Channel {
    std::map<LinkKey, std::unique_ptr<Connector>> send;
    std::map<LinkKey, std::unique_ptr<Connector>> recv;
  };

  // The FIFO-path plan of the pending operations, with only the links that do not exist yet.
  Status buildPlan(Plan* plan);
  Connector* link(int channel, int peer, int lane, bool send) const;
  // The FIFO path's algorithm and protocol for `op` (send/recv: the protocol only), with its predicted time.
  FifoChoice chooseFifo(const PendingOp& op) const;
  struct Decision {
    bool valid = false;
    CollKind kind = CollKind::kAllReduce;
    size_t bytes = 0;
    FifoChoice fifo;
    bool direct = false;    // NVLS; for an all-to-all entry, the log-step schedule
    bool nvlsTree = false;  // across hosts: NVLS-style inside each host, the network between (comm_hier.cc)
  };
  static constexpr size_t kDecisionCacheSize = 16;
  Decision& decisionFor(const PendingOp& op) const;
  FifoChoice computeFifoChoice(const PendingOp& op) const;
  bool computeDirectWanted(const PendingOp& op, const FifoChoice& fifo) const;
  bool computeUseBruck(size_t bytesPerPeer) const;
  bool directWanted(const PendingOp& op) const;
  // The cost model's prediction for this communicator (across hosts: the network model).
  double predictUs(FilterColl fc, AlgoId a, ProtoId p, size_t bytes) const;
  // NCCL_DEBUG_SUBSYS=TUNING: the predicted time of every allowed algorithm and the choice.
  void logTuning(const PendingOp& op, AlgoId chosen, ProtoId proto) const;
  // Whether NCCL_ALGO leaves an algorithm on the FIFO path (ring, or tree for all-reduce) for `kind`.
  bool fifoPathAllowed(CollKind kind) const;
  static Status launchImpl(const std::vector<Communicator*>& comms);
  // NVLSTree, then direct, then FIFO work, one after the other.
  static Status launchInOrder(const std::vector<Communicator*>& comms);
  // Whether `op` takes the direct (NVLS-style) path, or NVLSTree.
  bool takesDirect(const PendingOp& op) const;
  bool takesNvlsTree(const PendingOp& op) const;
  // Whether a queued operation takes either (both wait for every peer before returning).
  bool hasDirectWork() const;
  // Runs the queued operations the direct (NVLS-style) path takes and removes them from pending_.
  static Status launchDirect(const std::vector<Communicator*>& comms);
  // NVLSTree (comm_hier.cc): at init, the host and cross-host sub-communicators when it can run; per operation,
  // whether the model (or NCCL_ALGO) takes it; at launch, the all-reduces it takes, removed from pending_.
  Status setupHierarchy();
  bool computeNvlsTreeWanted(const PendingOp& op, const FifoChoice& fifo) const;
  double predictNvlsTreeUs(size_t bytes) const;
  static Status launchHierarchical(const std::vector<Communicator*>& comms);
  Status runNvlsTree(const PendingOp& op);
  Status connect(const std::vector<Link>& sendNeeds, const std::vector<Link>& recvNeeds, int phase);
  // Sets netPeers_; with network peers, LL is taken out of protoFilter_ when its chunks do not fit the network's
  // Simple slots (an error if a collective would be left without Simple).
  Status checkLlOverNetwork();

  int rank_ = 0;
  int nranks_ = 0;
  int device_ = -1;
  CommConfig config_;
  size_t slotBytes_ = 0;
  size_t llSlotBytes_ = 0;
  size_t p2pLlThreshold_ = 0;  // NCCL_P2P_LL_THRESHOLD
  double timeoutSec_ = 60;
  std::vector<PeerInfo> peers_;
  std::unique_ptr<Bootstrap> bootstrap_;
  std::vector<Channel> channels_;
  std::vector<std::vector<int>> rings_;  // [channel] ranks in ring order, from the topology search
  std::vector<int> treeOrder_;           // trees are built over positions: position i is rank treeOrder_[i]
  std::vector<int> treePos_;             // [rank] its position
  int nNodes_ = 1;
  std::vector<int> nodeOf_;      // [rank] its host (numbered by first rank), from the topology stage
  std::vector<int> ranksOn_;     // [host] its rank count
  int localRank_ = 0;            // this rank's index among its host's ranks
  bool hostsShareCpus_ = false;  // several hosts on one machine's CPUs (BRAID_HOSTS_SHARE_CPUS)
  bool hostTrees_ = false;       // several hosts: the all-reduce trees are NCCL's (chains in hosts, binary across)
  TreeNode myTree_[2];           // this rank's place in those two trees
  bool netPeers_ = false;        // some peer is reached through the network transport
  NetShape net_;                 // hosts and the network between them (nNodes_ > 1)
  // NVLSTree's sub-communicators: this rank's host (NVLS-style inside it) and the ranks with its local index on
  // every host (the network between them). Null when it cannot run (see setupHierarchy).
  std::unique_ptr<Communicator> hostComm_, crossComm_;
  std::vector<PendingOp> pending_;
  std::unique_ptr<Backend> backend_;  // executes plans: CpuBackend on host memory (src/backends)
  Filter algoFilter_;                 // NCCL_ALGO
  CostModel costs_;                   // BRAID_TUNING_FILE, or built-in figures
  int cpus_ = 1;
  bool deterministic_ = false;                      // BRAID_DETERMINISTIC
  Filter protoFilter_;                              // NCCL_PROTO
  mutable Decision decisions_[kDecisionCacheSize];  // chooseFifo / directWanted by (collective, bytes)
  int alltoAllForced_ = -1;                         // BRAID_ALLTOALL_ALGO as an AlltoAllAlgo; -1: the cost model
  std::vector<UserRedOp> userOps_;
  mutable std::mutex opsMu_;
  std::atomic<bool> abort_{false};
  std::atomic<int> asyncError_{0};
  uint32_t connectTag_ = 0;
};

// Host identity: the hash of topology's localHostId() (NCCL_HOSTID, else host name and boot id).
uint64_t localHostHash();

}  // namespace braid
