// The communicator: who the ranks are, how to reach them (lazily connected FIFOs per channel and peer), the channel
// workers, user-created reduction ops, and the lifecycle flags (initialising, finalized, aborted).
//
// Deliberately narrow: algorithms see RingParams, the planner a PlanShape, the backend (src/backends/backend.h) plans
// and links, transports PeerInfo. Nothing below src/core takes a Communicator.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "algorithms/selector/selector.h"
#include "src/backends/backend.h"
#include "src/bootstrap/bootstrap.h"
#include "src/common/dtype.h"
#include "src/common/status.h"
#include "src/core/comm_topo.h"
#include "src/core/flight_recorder.h"
#include "src/core/planner.h"
#include "src/core/red_ops.h"
#include "src/core/registrations.h"
#include "transports/transport.h"

namespace braid {

struct CommConfig {
  int blocking = 1;
  int minChannels = -1;  // config.minCTAs
  int maxChannels = -1;  // config.maxCTAs
  int splitShare = 0;
  std::string commName;
  int trafficClass = -1;  // config.trafficClass (NCCL_NET_TRAFFIC_CLASS_UNDEF: unset), handed to v11+ net plugins
  // One-sided operations (NCCL 2.31): contexts (0 turns them off), signals per context, and whether their signal
  // area is set up at init (1) or at the first window registration (0). Resolved against NCCL_NUM_RMA_CTX and
  // NCCL_RMA_EAGER_INIT at init (resolveRmaConfig), then agreed by every rank.
  int numRmaCtx = 1;
  int numRmaSig = 1;
  int rmaEagerInit = 0;
  bool checkCalls = false;  // BRAID_CHECK_CALLS, agreed at init (src/core/call_check.h)
  int nvlsHostMode = 0;     // ncclConfig_t.nvlsHostMode as kNvlsHost* bits (CUDA communicators' multicast)
  bool internal = false;    // a communicator braid made for itself (NVLSTree's): no tuner or profiler plugin
  // The backend, chosen on the thread that called ncclCommInitRank (chooseBackend), or the parent's for a split.
  BackendChoice backend;
};

class NvlsTree;
class CommProfiler;
class Windows;
class DevComms;

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
  // The transports' settings, for connections outside the channels (rma_net.h).
  const TransportConfig& transportConfig() const { return links_.transport; }
  const WaitContext& waitContext() const { return wait_; }
  const Selector& selector() const { return selector_; }

  // Lifecycle.
  std::atomic<bool>& abortFlag() { return health_.abort; }
  // ncclCommAbort: sets the abort flag (every wait in this communicator returns within milliseconds) and writes the
  // flight recorder's dump (BRAID_FLIGHT_RECORDER_FILE).
  void abort();
  // The last operations queued here (flight_recorder.h); never null.
  FlightRecorder& flight() { return *observe_.flight; }
  CommProfiler* profiler() { return observe_.profiler.get(); }
  std::atomic<int>& asyncError() { return health_.asyncError; }  // an ncclResult_t value
  // Work a streams backend still runs: records its first failure in asyncError (and the log) and returns it.
  Status pollAsync();
  // pollAsync on the owner's thread (enqueue): also ends, in the flight recorder, the calls whose launches finished
  // (a streams backend's calls return before their work ends), or fails them with the error.
  Status pollOwned();
  Backend& backend() { return *backend_; }
  const Backend& backend() const { return *backend_; }
  // ncclCommSuspend / ncclCommResume (suspend.cc). Collective: every rank calls them, outside a group, with no work
  // of the communicator in flight. Suspending with NCCL_SUSPEND_MEM releases every link's FIFO (this communicator's
  // and its NVLSTree communicators'), which the first operation after the resume connects anew; until then
  // operations are refused. A CUDA communicator waits for its launches first, and refuses while a CUDA graph that
  // captured its collectives exists (the graph keeps the FIFOs' addresses); the ranks agree, so none releases unless
  // all do. Errors: kInvalidArgument (unknown flag bits), kInvalidUsage (suspended twice, resumed while not
  // suspended, inside a group, a live captured graph on some rank), kRemoteError (a rank that does not come, or
  // launches that do not finish, by BRAID_TIMEOUT).
  Status suspend(int flags);
  Status resume();
  bool suspended() const { return health_.suspended.load(); }
  // FIFO bytes this rank allocated for its links (what suspending releases); while suspended, what it released.
  uint64_t suspendableBytes() const;
  // What this rank allocated that suspending keeps: the backend's (direct segment or areas, launch memory), its
  // NVLSTree communicators' included. Small host structures (plans, tables, the bootstrap's buffers) are not counted.
  uint64_t persistentBytes() const;
  // `st`, after marking the communicator failed when it is an error (suspend.cc).
  Status failIfNot(const Status& st);
  std::atomic<bool> finalized{false};
  std::atomic<bool> revoked{false};  // ncclCommRevoke (elastic.h): no collective from then on
  // ncclCommGetUniqueId's id, until an ncclCommGrow uses it (elastic.h).
  struct GrowId {
    std::mutex mu;
    bool pending = false;
    char id[kUniqueIdBytes] = {};
  };
  GrowId grow;
  std::thread initThread;  // non-blocking or grouped init runs here

  // Group support: ops queued since the outermost ncclGroupStart.
  std::vector<PendingOp>& pending() { return pending_; }

  // A snapshot of `bytes` bytes at `src` that lives until the group's operations complete (or are dropped): lets
  // an operation read a buffer it also overwrites, as an in-place all-to-all does.
  const void* stageCopy(const void* src, size_t bytes);
  // Drops the queued ops and their staging copies.
  void clearPending();
  // ncclGroupSimulateEnd: the predicted time (us) of the queued ops, run one after another, each priced on the path
  // the selector would give it (said at INFO, with the algorithm, protocol and channels); then drops them, run or
  // not. Send and receive are not priced.
  double simulatePending();

  // Whether an all-to-all of `bytesPerPeer` runs the log-step (Bruck) schedule as one queued collective (else it
  // is queued as sends and receives). The same answer on every rank.
  bool useBruck(size_t bytesPerPeer) const { return selector_.useBruck(bytesPerPeer); }

  // Whether NCCL_ALGO / NCCL_PROTO leave an algorithm and protocol braid implements for `kind` on this
  // communicator; an error names the setting and what is missing. Send/receive always pass.
  Status checkAlgorithms(CollKind kind) const { return selector_.checkAlgorithms(kind); }
  // Who chooses `op`'s algorithm: its call's ncclCollConfig_t.algSelection, else the communicator's selector.
  const Selector& selectorFor(const PendingOp& op) const { return op.selector != nullptr ? *op.selector : selector_; }

  // Plans and executes the pending ops of several communicators together (the work of ncclGroupEnd). `queuedNow`:
  // they were queued just now, by the call that launches them (their flight records start when they were queued).
  static Status launch(const std::vector<Communicator*>& comms, bool queuedNow = false);
  // launch({this}, true) for one ungrouped call (the latency path). A host communicator's lone collective that the
  // direct (NVLS-style) path takes, without a profiler, a tuner or BRAID_CHECK_CALLS, goes straight to the backend:
  // the same flight records, choice, fallback and failure handling without the group's bookkeeping.
  Status launchLone();

  // Reduction operators.
  Result<ReduceOp> resolveOp(int op, DType dtype) const;
  Result<int> createPreMulSum(const void* scalar, DType dtype, bool immediate);
  Status destroyOp(int op);
  // ncclCommRegister / ncclCommDeregister (registrations.h): `bytes` at `buff` must be memory this communicator's
  // backend reaches; errors name the argument.
  Result<void*> registerBuffer(const void* buff, size_t bytes);
  Status deregisterBuffer(void* handle);
  // A buffer an operation uses (`what` names the argument) that lies in a registration whose allocation is gone: an
  // error naming both. Called at enqueue.
  Status checkRegistered(const void* p, size_t bytes, const char* what) const;

  // ncclCommWindowRegister's windows and the one-sided operations on them (windows.h).
  Windows& windows() { return *user_.windows; }
  // ncclDevCommCreate's device communicators (dev_comms.h).
  DevComms& devComms() { return *user_.devComms; }

  // Memory this communicator may map for receive FIFOs (an upper bound): (NCCL_BUFFSIZE + NCCL_LL_BUFFSIZE) x
  // channels x (nranks + 3).
  size_t fifoMemoryBound() const;
  // One receive FIFO: its Simple and LL slots.
  size_t connectorBytes() const;

  // Split: collective over this communicator.
  Status split(int color, int key, const CommConfig& config, std::unique_ptr<Communicator>* out);

 private:
  friend class NvlsTree;
  // A connector is one direction of one (channel, peer, lane) link. Lanes let two programs of one channel use the
  // same peer independently (tree 1 of the double binary tree runs on lane 1 beside tree 0).
  using LinkKey = std::pair<int, int>;  // (peer rank, lane)
  struct Channel {
    std::map<LinkKey, std::unique_ptr<Connector>> send;
    std::map<LinkKey, std::unique_ptr<Connector>> recv;
  };

  Status initImpl(const UniqueIdInfo& id, int nranks, int rank, const CommConfig& config, int device);
  // The FIFO-path plan of the pending operations, with only the links that do not exist yet.
  Status buildPlan(Plan* plan);
  Connector* link(int channel, int peer, int lane, bool send) const;
  static Status launchImpl(const std::vector<Communicator*>& comms);
  // The end of every launch: the flight records end (or, on streams, wait for their launch), a failure is reported
  // and leaves each communicator unusable, and the queues are dropped. Returns `result`.
  static Status endLaunch(const std::vector<Communicator*>& comms, Status result);
  // NVLSTree, then direct, then FIFO work, one after the other.
  static Status launchInOrder(const std::vector<Communicator*>& comms);
  // Whether `op` takes the direct (NVLS-style) path, or NVLSTree.
  bool takesDirect(const PendingOp& op) const;
  bool takesNvlsTree(const PendingOp& op) const;
  // Whether a queued operation takes either (both wait for every peer before returning).
  bool hasDirectWork() const;
  // Runs the queued operations the direct (NVLS-style) path takes and removes them from pending_.
  static Status launchDirect(const std::vector<Communicator*>& comms);
  // `op` as the direct path runs it; the choice is logged and noted (flight recorder, profiler) unless `noted` says
  // the caller noted it.
  DirectOp directOpOf(const PendingOp& op, bool noted = false);
  // One-rank host communicators: their collectives are copies, run at once on the calling thread (no program).
  static Status launchAlone(const std::vector<Communicator*>& comms);
  // Runs the all-reduces NVLSTree takes (nvls_tree.h) and removes them from pending_.
  static Status launchHierarchical(const std::vector<Communicator*>& comms);
  Status connect(const std::vector<Link>& sendNeeds, const std::vector<Link>& recvNeeds, int phase);
  // BRAID_CHECK_CALLS: the ranks of each communicator compare their queued collectives (call_check.h). Two phases
  // over all of `comms` (send, then receive), so one thread may drive several ranks of one communicator.
  static Status checkCalls(const std::vector<Communicator*>& comms);
  // Sets topo_.netPeers; with network peers, LL leaves the protocol filter when its chunks do not fit the network's
  // Simple slots (an error if a collective would be left without Simple).
  Status checkLlOverNetwork();
  // NCCL_TUNER_PLUGIN and NCCL_PROFILER_PLUGIN: the tuner, if any, into the selector (tuner_plugin.h); the
  // profiler's context for this communicator (profiler_plugin.h). Neither for internal communicators.
  Status loadPlugins(const CommTopology& topo);
  // A CUDA communicator priced by NCCL's GPU model whose NVLS-style path is set up: the selector learns the path's
  // lanes and whether the model may take it (BRAID_GPU_DIRECT_AUTO, agreed; sym_model.h), and INFO says whether and
  // how it is priced.
  void priceDirectOnGpu(int lanes, bool byModel);
  // The planner chose `op`'s algorithm and protocol: the flight recorder and the profiler hear of it.
  void noteChoice(const PendingOp& op, AlgoId algo, ProtoId proto);
  // The profiler (if any) hears that the group launches (sends and receives start), and that it is done.
  void profileLaunch();
  void profileStop(const PendingOp& op);  // `op` ran (and leaves the queue)
  void profileDone();

  int rank_ = 0;
  int nranks_ = 0;
  int device_ = -1;
  CommConfig config_;
  WaitContext wait_;  // abort flag, BRAID_TIMEOUT, BRAID_SPIN_COUNT: what every wait below obeys
  // What the links are made with: the FIFOs' sizes, and the transports' knobs (BRAID_TIMEOUT, NCCL_SHM_DISABLE,
  // BRAID_SHM_DIR).
  struct LinkSettings {
    FifoSizes fifo;
    TransportConfig transport;
  };
  LinkSettings links_;
  std::vector<PeerInfo> peers_;
  std::unique_ptr<Bootstrap> bootstrap_;
  std::vector<Channel> channels_;
  CommTopology topo_;                   // hosts, local ranks, NUMA placement, the search's channels (comm_topo.h)
  CommSchedules sched_;                 // the rings and trees the schedules follow
  Selector selector_;                   // algorithm and protocol choice (algorithms/selector/selector.h)
  std::unique_ptr<NvlsTree> nvlsTree_;  // null when NVLSTree cannot run (nvls_tree.h)
  std::vector<PendingOp> pending_;
  std::unique_ptr<Backend> backend_;  // executes plans: CpuBackend on host memory (src/backends)
  // What users create on the communicator: reduction operators, buffer registrations, windows.
  struct UserObjects {
    RedOpTable redOps;
    Registrations buffers;
    std::unique_ptr<Windows> windows;    // released before the backend (destructor)
    std::unique_ptr<DevComms> devComms;  // released before the windows it registered
  };
  UserObjects user_;
  struct Health {
    std::atomic<bool> abort{false};      // ncclCommAbort, and revocation while it stops the work
    std::atomic<int> asyncError{0};      // an ncclResult_t value
    std::atomic<bool> suspended{false};  // ncclCommSuspend(NCCL_SUSPEND_MEM) until ncclCommResume
    uint64_t releasedBytes = 0;          // what that suspend released
  };
  Health health_;
  // Who watches the operations: the flight recorder (always there) and a profiler plugin's context (or null).
  struct Observers {
    std::unique_ptr<FlightRecorder> flight;
    std::unique_ptr<CommProfiler> profiler;
  };
  Observers observe_;
};

// Host identity: the hash of topology's localHostId() (NCCL_HOSTID, else host name and boot id).
uint64_t localHostHash();

}  // namespace braid
