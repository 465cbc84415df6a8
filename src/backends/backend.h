// The seam between the backend-neutral core (src/core: communicators, groups, selection, planning, links) and what
// executes plans on a kind of memory. A backend owns execution: its workers or streams, its wait and spin policy,
// scratch and staging memory, its NVLS-style (direct) machinery, and the transports it connects over. The core
// owns what every backend shares: the ranks, the topology, the algorithm choice, the plans (pure data:
// algorithms/schedule.h Programs) and the links (connectors made by the backend's transports).
//
// A collective's path: src/api validates -> src/core queues it (PendingOp) -> at the outermost ncclGroupEnd the
// selector picks algorithm and protocol -> the planner turns each operation into channel Programs (PlannedWork) and
// the links they need -> the core connects missing links over backend->transports() -> backend->launchFifo runs
// the Programs over the links (the CPU backend: the step engine on the calling thread or channel workers; the CUDA
// backend: a kernel per channel on the user's stream). NVLS-style operations go to backend->launchDirect instead.
//
// Thread safety: a backend is used by its communicator's calling thread (and its own internal threads); a group
// launch is handed all communicators of the group at once, on one thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/direct/direct.h"
#include "algorithms/schedule.h"
#include "src/common/coll_types.h"
#include "src/common/fd_share.h"
#include "src/common/shareable_mem.h"
#include "src/common/status.h"
#include "src/common/wait.h"
#include "transports/shm/shared_segment.h"  // AllGatherFn
#include "transports/transport.h"

namespace braid {

enum class BackendKind : uint8_t { kHost, kCuda };
const char* backendKindName(BackendKind kind);

struct BackendCaps {
  bool proto[kProtos] = {};     // the protocols its executor runs
  bool streams = false;         // operations enqueue on the caller's stream and return at once
  bool direct = false;          // NVLS-style collectives are set up on this communicator (after init)
  size_t directStageBytes = 0;  // inputs up to this size are staged in the direct segment (any buffer works)
  bool runsAlone = false;       // runAlone works: a one-rank communicator's collectives are copies at the call
  bool multicast = false;       // NVLS multicast is set up (the direct areas'; windows may get their own)
};

// What a communicator tells its backend at init (after the ranks agreed on the settings).
struct BackendInitContext {
  int rank = 0;
  int nranks = 0;
  int nChannels = 1;
  const std::vector<PeerInfo>* peers = nullptr;
  AllGatherFn allGather;        // for the backend's collective setup (the direct segment)
  WaitContext wait;             // abort flag, BRAID_TIMEOUT, BRAID_SPIN_COUNT, rank: every wait's
  bool spinCountSet = false;    // the user chose BRAID_SPIN_COUNT: no automatic lowering
  size_t inlineBytes = 0;       // BRAID_INLINE_BYTES
  int localRanks = 1;           // ranks of this communicator on this host
  int cpus = 1;                 // CPUs this process may use
  bool netPeers = false;        // some peer is reached over the network
  bool direct = false;          // NVLS-style collectives wanted (agreed BRAID_DIRECT, no network)
  bool cma = false;             // cross-memory attach wanted for private buffers (agreed BRAID_CMA)
  size_t directStageBytes = 0;  // agreed BRAID_DIRECT_STAGE_BYTES
  std::vector<int> placeCpus;   // where worker threads run (this rank's NUMA node); empty: anywhere
  int homeCpu = -1;             // the CPU this rank's collectives run on (BRAID_PLACE_THREADS); -1: anywhere
};

// One operation's program on one channel, from the planner (src/core/planner.h): pure data plus buffers.
struct PlannedWork {
  int channel = 0;
  Program prog;
  const void* input = nullptr;
  void* output = nullptr;
  size_t elemSize = 1;
  ReduceOp op;
  ProtoId proto = ProtoId::kSimple;
  // Scratch the backend provides for the launch: a tree reduce's interior rank accumulates in an output NCCL does
  // not give it (outputScratchBytes replaces `output`), and LL and LL128 stage one slot's payload each way.
  size_t outputScratchBytes = 0;
  size_t llStagingBytes = 0;
};

// The connector a step uses: (channel, peer, lane) in one direction; null when there is none.
using LinkLookup = std::function<Connector*(int channel, int peer, int lane, bool send)>;

class Backend;

// One communicator's part of a group launch on the FIFO path.
struct FifoLaunch {
  Backend* backend = nullptr;
  const std::vector<PlannedWork>* works = nullptr;
  LinkLookup link;
  size_t totalBytes = 0;  // bytes the operations move (small groups run on the calling thread)
  // The user streams the group's operations were issued on (distinct, in issue order; a CUDA stream handle, null
  // for the legacy default stream). A streams backend orders its work after them and them after its work.
  std::vector<void*> streams;
};

// One NVLS-style operation.
struct DirectRequest {
  DirectCollective coll = DirectCollective::kAllReduceTwoShot;  // all-reduce (shot chosen by the backend), RS or AG
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // NCCL's count: all-reduce elements, RS/AG per-rank elements
  ReduceOp op;
  int lanes = 0;  // CTAs of a kernel that runs it, at most (ncclCollConfig_t.nvlsCTAs); 0: all; hosts have none
};

struct DirectOp {
  DirectRequest req;
  // What to return when the backend cannot run it directly (buffers some rank cannot reach) and the FIFO path is
  // not allowed either (NCCL_ALGO forces NVLS); ok when the FIFO path may run it instead.
  Status noFallback;
  bool ran = false;  // set by launchDirect: false means the FIFO path must run it
};

// One communicator's NVLS-style operations of a group, in queue order (the same on every rank).
struct DirectBatch {
  Backend* backend = nullptr;
  std::vector<DirectOp>* ops = nullptr;
  // The user streams of these operations (distinct, in issue order), as FifoLaunch::streams.
  std::vector<void*> streams;
};

// One rank's resources as the init exchange reports them, for decisions every rank must make alike.
struct RankResources {
  int cpus = 1;         // CPUs its process may use
  int ranksOnHost = 1;  // ranks of the communicator on its host
  uint64_t hostHash = 0;
  uint64_t gpuPciId = 0;  // its GPU (Backend::gpuPciId), 0 for host memory
  int residentCtas = 0;   // Backend::residentCtas of its backend
};

// The most channels every rank can run so that all CTAs of the communicator's kernels on one GPU are resident at
// once (a CTA per channel; CTAs of ranks that share a GPU wait for each other, so one that cannot be scheduled
// would leave the others spinning): the smallest residentCtas / (ranks on that GPU) over the ranks, at least 1.
// INT_MAX when no rank has a GPU. The same on every rank (it reads only the exchanged resources).
int coResidentChannelCap(const std::vector<RankResources>& ranks);

// Streams each CUDA rank keeps busy at once: the user's, braid's internal one, and the one that initialises FIFOs.
constexpr int kStreamsPerCudaRank = 3;
// Why `rank`'s GPU may serialise the kernels of the ranks sharing it, for the lowest of those ranks to say (empty
// otherwise): more streams than the GPU's hardware queues (`connections`, CUDA_DEVICE_MAX_CONNECTIONS). Streams
// sharing a queue start their work in issue order, so a rank's stream waiting for its kernel can hold back the
// kernel of another rank that this one waits for.
std::string sharedQueueWarning(const std::vector<RankResources>& ranks, int rank, int64_t connections);

// One rank's buffer of a window (ncclCommWindowRegister), as its peers learn it: plain data, all-gathered.
struct WindowDesc {
  int32_t pid = 0;
  int32_t device = -1;  // a CUDA rank's device ordinal in its process (-1: host memory)
  uint64_t hostHash = 0;
  uint64_t addr = 0;        // the buffer in the owner's process
  uint64_t bytes = 0;       // its size (ranks may register different sizes)
  MemHandle mem;            // host memory: the memfd holding it (fd -1: private memory)
  FdTicket ticket;          // CUDA memory: where other processes fetch its allocation's descriptor (token 0: none)
  uint64_t allocBytes = 0;  // CUDA memory: its allocation's mapped size,
  uint64_t offset = 0;      // and the buffer's offset in it
  uint64_t accessMask = 0;  // CUDA memory: devices of the owner's process with access (bit per ordinal < 64)
};

// Where one rank reaches another's window buffer: its address in this process, or null and why not.
struct WindowPeer {
  char* at = nullptr;
  std::shared_ptr<void> held;  // a mapping this rank made (unmapped when the last holder lets go)
  std::string why;
};

// A window's multicast mapping (NVLS): an offset of `base` reads as the reduction of every rank's window buffer there
// (multimem.ld_reduce) and a store to it lands in every rank's buffer (multimem.st). Null base: none.
struct WindowMulticast {
  char* base = nullptr;
  std::shared_ptr<void> held;  // the object, unbound, unmapped and released when the last holder lets go
};

// One step of one-sided work (ncclPutSignal, ncclSignal, ncclWaitSignal) on mapped window memory, in issue order.
struct RmaStep;
class RmaPosts;  // src/backends/rma_posts.h
// Carries puts and signals to a peer whose memory this rank cannot map (src/core/rma_net.h): RmaStep::via.
class RmaMessenger {
 public:
  virtual ~RmaMessenger() = default;
  // Sends s now, on the calling thread (a host backend's ncclPutSignal), returning once its messages are queued.
  [[nodiscard]] virtual Status send(const RmaStep& s) = 0;
  // Where a stream hands its puts over when it reaches them (a CUDA backend): sent in order by the messenger's own
  // thread. Errors of such puts are reported by health() of their peer. Null once the messenger's end began (if it
  // made none before).
  virtual std::shared_ptr<RmaPosts> posts() = 0;
  // An error naming why messages from `peer` stopped arriving (its connection failed), else ok: a wait on its
  // signals ends with it.
  [[nodiscard]] virtual Status health(int peer) const = 0;
};

struct RmaStep {
  enum class Kind : uint8_t { kPut, kSignal, kWait };
  Kind kind = Kind::kSignal;
  const void* src = nullptr;  // kPut: the local data,
  void* dst = nullptr;        // written to the peer's window here,
  size_t bytes = 0;
  uint64_t* word = nullptr;  // kPut, kSignal: the peer's signal word for this rank, set to `value` after the data;
                             // kWait: this rank's word for the peer, awaited until it reaches `value`
  uint64_t value = 0;
  uint32_t slot = 0;  // which of the sender's signal words (ctx x numRmaSig + sigIdx): messages name it
  int peer = -1;      // for messages
  // kPut, kSignal toward a peer out of reach: the messenger runs it (dst and word are null), the data going to the
  // window registered `window`-th on the peer, at `offset`. kWait on such a peer: the messenger says whether its
  // messages still come.
  RmaMessenger* via = nullptr;
  static constexpr uint32_t kNoWindow = ~uint32_t{0};  // a message that lands no data (a GIN fence's)
  uint32_t window = 0;
  uint64_t offset = 0;
  // A step of a GIN operation toward another host (src/api/gin_net.h) of the peer's device communicator whose
  // resource window is registration `ginTarget` (kNoGinTarget: not GIN). On the operation's last step (ginLast),
  // after the data, `ginAmount` is added to its signal `ginSignal` (kNoGinSignal: none).
  static constexpr uint32_t kNoGinTarget = ~uint32_t{0};
  static constexpr uint32_t kNoGinSignal = ~uint32_t{0};
  uint32_t ginTarget = kNoGinTarget;
  uint32_t ginSignal = kNoGinSignal;
  uint64_t ginAmount = 0;
  bool ginLast = false;
  // GIN gets toward another host: kRequest asks the peer (its data a GinGetRequest, rma_net.h) for part of its window
  // `window` at `offset`; kReply steps carry the answer into the asker's window, the last (ginLast) ending get
  // `ginAmount`, with ginFailed when the peer could not read it.
  enum class GinGet : uint8_t { kNone, kRequest, kReply };
  GinGet ginGet = GinGet::kNone;
  bool ginFailed = false;
  // A GIN VA signal (kPut of no data, ginLast): `ginAmount` is added to the 64-bit word at `offset` of the peer's
  // window `window`, unless a message of the operation before it was dropped.
  bool ginVa = false;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  // The most channels this backend runs well, from every rank's resources (so every rank gets the same answer);
  // applied unless the user pinned a channel count. Called before init.
  virtual int maxChannels(const std::vector<RankResources>& ranks) const = 0;
  // Collective over the communicator's ranks when it sets up shared state (the direct segment).
  [[nodiscard]] virtual Status init(const BackendInitContext& ctx) = 0;
  virtual BackendCaps caps() const = 0;
  // The transports tried in order for each peer, and where their FIFOs live (TransportConfig::memory).
  virtual const std::vector<Transport*>& transports() const = 0;
  virtual const FifoMemory& fifoMemory() const = 0;

  // Memory that lives until releaseLaunchMemory (the group's operations are complete or dropped): a snapshot of a
  // buffer an operation also overwrites (an in-place all-to-all).
  virtual const void* stageCopy(const void* src, size_t bytes) = 0;
  virtual void releaseLaunchMemory() = 0;

  // Runs the FIFO-path work of every communicator in `group` together (one thread may drive several ranks). Every
  // entry's backend is of this backend's kind. Blocks until done on a host backend.
  [[nodiscard]] virtual Status launchFifo(const std::vector<FifoLaunch>& group) = 0;
  // Runs NVLS-style operations of every communicator in `group`, phase by phase across communicators, and says per
  // operation whether it ran. Requires caps().direct on every entry.
  [[nodiscard]] virtual Status launchDirect(const std::vector<DirectBatch>& group) = 0;
  // A collective of a one-rank communicator, run on the calling thread before the call returns: recv =
  // pre/post(send) over count elements by op (op.kind kSum for the collectives that do not reduce: a copy; in place
  // when recv == send). Offered where caps().runsAlone; the others leave one rank to the FIFO path.
  [[nodiscard]] virtual Status runAlone(const ReduceOp& op, void* recv, const void* send, size_t count) {
    return invalidUsage("this backend has no one-rank path (op of %zu elements)", count);
  }
  // Collective over the communicator's ranks, after the P2P decisions (p2pPeers[r]: this rank reaches rank r's GPU
  // memory; a CUDA backend's): sets up what NVLS-style collectives need where init could not yet.
  [[nodiscard]] virtual Status initDirect(const std::vector<PeerInfo>& peers, const std::vector<uint8_t>& p2pPeers) {
    return Status::ok();
  }

  // The communicator failed or was aborted (`why`: the error, which peers quote so every rank names the cause):
  // peers waiting on this rank fail at once instead of at their deadline.
  virtual void markAborted(const std::string& why) = 0;
  // Bytes of memory this rank allocated for the communicator that suspending does not release (the direct segment
  // or areas, launch memory): ncclCommMemStats' GpuMemPersist.
  virtual uint64_t persistentBytes() const { return 0; }
  // ncclCommSuspend: whether this rank's links may be released now (the backend's work on them finished; an error
  // names what holds them), and then that they were (what the backend kept per connector goes too).
  [[nodiscard]] virtual Status quiesceLinks() { return Status::ok(); }
  virtual void linksReleased() {}

  // A buffer an operation reads or writes (`what` names the argument): ok when this backend's executor can reach
  // it, else an error that names the argument, the pointer and the remedy. Called at enqueue.
  [[nodiscard]] virtual Status checkBuffer(const void* p, size_t bytes, const char* what) const { return Status::ok(); }
  // The identity of the allocation holding [p, p + bytes) (CUDA's buffer id, unique per allocation of the process;
  // 0 for host memory, which has none), for registrations; an error as checkBuffer's when the backend cannot
  // reach the range.
  [[nodiscard]] virtual Result<uint64_t> bufferId(const void* p, size_t bytes, const char* what) const {
    BRAID_RETURN_IF_ERROR(checkBuffer(p, bytes, what));
    return uint64_t{0};
  }
  // ncclCommRegister of [base, base + bytes) as `handle` (after the communicator recorded it) and its
  // ncclCommDeregister: what the backend keeps for it (the CUDA backend: its peers' mappings, for collectives that
  // read it in place). Never fails: a registration the backend cannot use is still a registration.
  virtual void registered(const void* handle, const void* base, size_t bytes) {}
  virtual void deregistered(const void* handle) {}
  // The stream an operation was issued on (null: the legacy default stream): ok when this backend can order its
  // work after it, else an error naming the stream and why. Called at enqueue for a non-null stream.
  [[nodiscard]] virtual Status checkStream(void* stream) const { return Status::ok(); }
  // Records the caller's CUDA event on `stream` (ncclCollConfig_t.launchCompletionEvent). Host backends have no
  // events: kInvalidUsage.
  [[nodiscard]] virtual Status recordUserEvent(void* event, void* stream) {
    return invalidUsage(
        "config->launchCompletionEvent=%p is a CUDA event, and a host communicator launches no kernel "
        "(pass NULL)",
        event);
  }
  // Work still running after launchFifo returned (a streams backend): the first failure it reported, or ok. Frees
  // what finished work held. Called by ncclCommGetAsyncError and before each launch.
  [[nodiscard]] virtual Status pollAsync() { return Status::ok(); }
  // A streams backend: launchFifo calls made so far, and how many of them have finished (in order; a launch
  // captured into a CUDA graph counts as finished). Host backends finish every launch before it returns.
  virtual uint64_t launchesIssued() const { return 0; }
  virtual uint64_t launchesFinished() const { return 0; }
  // ncclCommAbort: work still running stops (a kernel polls an abort word; host backends poll the communicator's
  // abort flag already).
  virtual void abortWork() {}
  // The CUDA device the backend runs on, -1 for host memory; and its PCI address (domain << 32 | bus << 8 | device),
  // which ranks compare to find two on one GPU; 0 for host memory.
  virtual int cudaDevice() const { return -1; }
  virtual uint64_t gpuPciId() const { return 0; }
  // CTAs of this backend's kernels its GPU holds resident at once (one per SM, the launch policy's assumption); 0
  // for host memory.
  virtual int residentCtas() const { return 0; }
  // GPU memory for the p2p transport's FIFOs (a CUDA backend's, after init); null for host memory.
  virtual const DeviceMemory* deviceMemory() const { return nullptr; }
  // Windows (src/core/windows.h). exportWindow describes [base, base + bytes) for the peers (`otherProcesses`: ranks
  // of other processes of this host, which may map it); errors name `base` when this backend cannot offer it (CUDA:
  // memory that is not ncclMemAlloc's). importWindow maps a peer's, or says why it cannot (never an error: a peer
  // out of reach is a window without that peer). withdrawWindow ends the offer once every peer imported.
  [[nodiscard]] virtual Result<WindowDesc> exportWindow(const void* base, size_t bytes, int otherProcesses) {
    return invalidUsage("this backend has no windows");
  }
  virtual WindowPeer importWindow(const WindowDesc& mine, const WindowDesc& theirs) { return WindowPeer{}; }
  virtual void withdrawWindow(const WindowDesc& mine) {}
  // Collective over the communicator (every rank calls it for the same window, in the same order): binds every
  // rank's window buffer at `base` to one multicast object of at least `bindBytes` and maps it. A window without
  // multicast (no NVLS on this communicator, any rank's failure) is not an error: a null base, and *why says why,
  // the same on every rank.
  [[nodiscard]] virtual Result<WindowMulticast> bindWindowMulticast(void* base, size_t bindBytes, std::string* why) {
    *why = "host memory has no multicast";
    return WindowMulticast{};
  }
  // Memory for the communicator's own windows (the signal words of one-sided operations): `bytes` zeroed, of the
  // kind exportWindow offers; freed with freeWindowMemory.
  [[nodiscard]] virtual Result<void*> allocWindowMemory(size_t bytes) { return invalidUsage("no window memory"); }
  virtual void freeWindowMemory(void* p) {}
  // Small blocks that device code reads (a window's descriptor, ncclWindow_t; the device API's tables): `bytes` of
  // memory this backend's kernels load from, filled from host memory by writeDeviceBlock (synchronous), freed by
  // freeDeviceBlock. Host memory on a host backend, device memory on a CUDA one. Errors name the driver call.
  [[nodiscard]] virtual Result<void*> allocDeviceBlock(size_t bytes);
  [[nodiscard]] virtual Status writeDeviceBlock(void* dst, const void* src, size_t bytes);
  virtual void freeDeviceBlock(void* p);
  // Host memory that device code reads and writes too (pinned and mapped at the same address on a CUDA backend):
  // `bytes` zeroed; freed with freeHostMapped. Errors name the driver call.
  [[nodiscard]] virtual Result<void*> allocHostMapped(size_t bytes);
  virtual void freeHostMapped(void* p);
  // Copies `bytes` from memory of this backend (device memory) into host memory, complete at return.
  [[nodiscard]] virtual Status readDeviceBlock(void* dst, const void* src, size_t bytes);
  // Sets a signal word of this rank's window memory (allocWindowMemory) from a host thread, after everything that
  // thread wrote there before by writeDeviceBlock: a kernel or thread that sees the value sees that data.
  [[nodiscard]] virtual Status storeSignal(uint64_t* word, uint64_t value);
  // Adds `amount` to a 64-bit word of this rank's window memory from a host thread, atomically with what kernels
  // (this GPU's, or LSA peers' by atomics) add to it, after everything that thread wrote there before by
  // writeDeviceBlock; complete at return. A GIN VA signal from a rank of another host.
  [[nodiscard]] virtual Status addSignal(uint64_t* word, uint64_t amount);
  // The word the backend's kernels read to stop waiting once the communicator is aborted (non-zero), at an address
  // device code can load; null on a host backend (its waits check the communicator's abort flag themselves).
  virtual const uint32_t* deviceAbortWord() const { return nullptr; }
  // Whether kernels on this rank's GPU may do atomic read-modify-writes on the memory of the GPU whose gpuPciId is
  // `peerPciId` (any process's): 1 for the same GPU or a link with native peer atomics (cuDeviceGetP2PAttribute), 0
  // for one without, -1 when this process does not see that GPU (nothing to ask the driver about). 0 on a host
  // backend. Errors name the driver call.
  [[nodiscard]] virtual Result<int> peerAtomics(uint64_t peerPciId) const { return 0; }
  // Runs one-sided steps on `stream` (a streams backend: in stream order, returning at once; a host backend: before
  // returning). A wait obeys the communicator's deadline and abort flag.
  [[nodiscard]] virtual Status runRma(const std::vector<RmaStep>& steps, void* stream) {
    return invalidUsage("this backend has no one-sided operations");
  }
  // Collective (every rank, once, after init): checks that the P2P pairs in `p2p` (by rank, as the communicator
  // decided) really carry writes both ways, and clears the pairs that do not (a WARN names them). Errors: a failed
  // driver call or exchange, never a failed pair.
  [[nodiscard]] virtual Status verifyP2p(const std::vector<PeerInfo>& peers, std::vector<uint8_t>* p2p) {
    return Status::ok();
  }
};

// Which backend a communicator gets, decided on the thread that calls ncclCommInitRank (its init may run on
// another thread): BRAID_BACKEND=host or cuda, or (unset) cuda when the CUDA driver is already loaded in this
// process and this thread has a current context, host otherwise. The automatic choice never loads the driver, so
// host-only programs never initialise CUDA (which would not survive their fork()).
struct BackendChoice {
  BackendKind kind = BackendKind::kHost;
  void* cudaContext = nullptr;  // the caller's current context (a CUcontext), for kCuda
  int cudaDevice = -1;          // kCuda on this device's primary context instead (ncclCommInitAll's devlist)
  // ncclConfig_t.nvlsHostMode (NCCL 2.32's host NVLS components a communicator may not use), as kNvlsHost* bits.
  int nvlsHostMode = 0;
};
constexpr int kNvlsHostNoTransport = 1;          // no multicast for the NVLS-style collectives (nor windows)
constexpr int kNvlsHostNoSymmetricMultimem = 2;  // no multicast rounds on registered windows
// `device` >= 0: a CUDA communicator goes on that device (ncclCommInitAll's devlist, as NCCL sets each device
// current), whichever the calling thread's context is.
Result<BackendChoice> chooseBackend(int device = -1);

// The backend of that choice; an error names what is missing (no driver, no context).
Result<std::unique_ptr<Backend>> createBackend(const BackendChoice& choice);

// ncclMemAlloc / ncclMemFree on a thread with a current CUDA context: device memory of that context's device
// (null when the thread has none: the caller allocates host memory). cudaFreeIfDevice frees p when it is device
// memory and says whether it was; it never loads the driver.
Result<void*> cudaAllocIfCurrent(size_t bytes);
Result<bool> cudaFreeIfDevice(void* p);

}  // namespace braid
