#include "src/backends/cuda/cuda_backend.h"
#include "src/backends/cuda/p2p_selftest.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "src/backends/common/rma_kernel.h"
#include "src/backends/cpu/cpu_backend.h"
#include "src/backends/cuda/cuda_direct.h"
#include "src/backends/cuda/kernel_image.h"
#include "src/backends/cuda/kernel_status.h"
#include "src/backends/cuda/launch_memory.h"
#include "src/backends/cuda/rma_post.h"
#include "src/backends/cuda/work_image.h"
#include "src/common/logging.h"
#include "src/common/params.h"

namespace braid {
namespace {

constexpr int kEmulatorThreads = 32;  // the emulator runs a thread per GPU thread: fewer on a CPU-only machine
constexpr uint64_t kNsPerSec = 1000ull * 1000 * 1000;

}  // namespace

// FIFOs in pinned, mapped host memory: the kernels of both ends reach them, and so does a network proxy. Shared
// segments (the shm transport's, both ends) are registered the same way. Every call runs in the backend's context,
// whichever thread connects.
class CudaBackend::PinnedFifos final : public FifoMemory {
 public:
  PinnedFifos(const CuApi* api, CUcontext ctx) : api_(api), ctx_(ctx) {}
  Result<LocalFifo> allocLocal(const PeerInfo& self, size_t slotBytes, size_t llSlotBytes,
                               std::function<bool()> beforeUnmap) const override {
    ScopedContext scope(api_, ctx_);
    RelaxedCaptureMode relaxed(api_);  // connections are made at first use, maybe while the user captures
    const size_t bytes = localFifoBytes(slotBytes, llSlotBytes);
    BRAID_ASSIGN_OR_RETURN(void* p, cuPinnedAlloc(api_, bytes, "a FIFO"));
    const CuApi* api = api_;
    std::shared_ptr<void> mem(p, [api, beforeUnmap](void* q) {
      if (beforeUnmap && !beforeUnmap()) return;
      RelaxedCaptureMode relaxed(api);
      (void)api->memFreeHost(q);
    });
    return placeLocalFifo(std::move(mem), slotBytes, llSlotBytes);
  }
  Result<std::function<void()>> pinShared(void* base, size_t bytes) const override {
    ScopedContext scope(api_, ctx_);
    RelaxedCaptureMode relaxed(api_);
    BRAID_RETURN_IF_ERROR(
        api_->check(api_->memHostRegister(base, bytes, kCuMemHostAllocPortable | kCuMemHostAllocDeviceMap),
                    strPrintf("cuMemHostRegister(a shared-memory FIFO of %zu bytes)", bytes).c_str()));
    Status mapped = cuMappedAtSameAddress(api_, base, "a registered shared-memory FIFO");
    if (!mapped.isOk()) {
      (void)api_->memHostUnregister(base);
      return mapped;
    }
    const CuApi* api = api_;
    CUcontext ctx = ctx_;
    return std::function<void()>([api, ctx, base] {
      ScopedContext undo(api, ctx);
      RelaxedCaptureMode relaxed(api);
      (void)api->memHostUnregister(base);
    });
  }

 private:
  const CuApi* api_;
  CUcontext ctx_;
};

struct CudaBackend::Launch {
  std::vector<void*> images;               // pinned: work, status words
  std::vector<const DevStatus*> statuses;  // one per kernel, inside the images
  // For error messages: each kernel's arguments (inside the images), and how far the host's copy of its work lies
  // from where the kernel reads it (work copied to device memory is read back through the pinned original).
  struct KernelRecord {
    const KernelArgs* args;
    ProtoId proto;
    ptrdiff_t toHost;
  };
  std::vector<KernelRecord> kernels;
  std::vector<CUdeviceptr> device;  // LL staging, scratch, staged copies
  std::vector<CUevent> events;      // joins and the end
  CUevent done = nullptr;
};

// A launch captured into a CUDA graph: its memory lives as long as the graph (and every executable graph made
// from it), which holds a user object whose destructor sets graphGone. The backend polls its status words (a
// replay that fails says so) and frees the memory on its own thread once the graph is gone: the destructor runs on
// a driver thread, where CUDA calls are not allowed.
struct CudaBackend::Captured {
  std::unique_ptr<Launch> launch;
  std::atomic<bool> graphGone{false};
};

void CudaBackend::onGraphReleased(void* p) {
  auto* held = static_cast<std::shared_ptr<Captured>*>(p);
  (*held)->graphGone.store(true);
  delete held;
}

Result<std::unique_ptr<Backend>> CudaBackend::create(CUcontext ctx, int device, int nvlsHostMode) {
  BRAID_ASSIGN_OR_RETURN(const CuApi* api, cuApi());
  std::shared_ptr<void> primary;
  if (device >= 0) {
    BRAID_RETURN_IF_ERROR(api->check(api->devicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain")
                              .withContext(strPrintf("device %d (ncclCommInitAll's devlist)", device)));
    primary = std::shared_ptr<void>(ctx, [api, device](void*) { (void)api->devicePrimaryCtxRelease(device); });
  }
  if (ctx == nullptr) BRAID_RETURN_IF_ERROR(api->check(api->ctxGetCurrent(&ctx), "cuCtxGetCurrent"));
  if (ctx == nullptr) {
    return invalidUsage(
        "a CUDA communicator needs a current CUDA context on the thread that calls ncclCommInitRank: call "
        "cudaSetDevice (or cuCtxSetCurrent) first, or set %s=host for host memory",
        params::kBackend.name);
  }
  CUdevice dev = -1;
  {
    ScopedContext scope(api, ctx);
    BRAID_RETURN_IF_ERROR(api->check(api->ctxGetDevice(&dev), "cuCtxGetDevice"));
  }
  std::unique_ptr<CudaBackend> b(new CudaBackend(api, ctx, dev, std::move(primary)));
  b->nvlsHostMode_ = nvlsHostMode;
  return std::unique_ptr<Backend>(std::move(b));
}

CudaBackend::CudaBackend(const CuApi* api, CUcontext ctx, int device, std::shared_ptr<void> primary)
    : primary_(std::move(primary)),
      api_(api),
      ctx_(ctx),
      device_(device),
      fifos_(std::make_unique<PinnedFifos>(api, ctx)),
      launchMemory_(std::make_unique<LaunchMemory>(api, ctx)),
      cursors_(std::make_unique<ConnectorCursors>(api, launchMemory_.get())) {
  pciId_ = gpuPciIdOf(api_, device);
  if (api_->deviceGetAttribute(&smCount_, static_cast<int>(CuDeviceAttr::kSmCount), device) != kCuSuccess) {
    smCount_ = 0;
  }
}

bool CudaBackend::inflightDone() const {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_.timeoutSec > 0 ? wait_.timeoutSec : 60);
  while (true) {
    bool running = false;
    for (const auto& l : inflight_) running = running || api_->eventQuery(l->done) == kCuErrorNotReady;
    if (!running) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void CudaBackend::deregistered(const void* handle) {
  if (!direct_) return;
  {
    // Peers unmap the buffer: the kernels that read it (which end after their readers) must be done first.
    ScopedContext scope(api_, ctx_);
    std::lock_guard<std::mutex> lock(mu_);
    if (!inflightDone()) {
      BRAID_WARN(
          "rank %d: ncclCommDeregister(%p) while collectives on this communicator still run after %.0f s: "
          "its peers unmap it anyway",
          rank_, handle, wait_.timeoutSec);
    }
  }
  direct_->registry().remove(handle);
}

CudaBackend::~CudaBackend() {
  watch_.reset();  // its callbacks use what follows
  ScopedContext scope(api_, ctx_);
  std::lock_guard<std::mutex> lock(mu_);
  // Work still running: wait for it within the deadline, then stop it through the abort word (its kernels poll
  // it), so destroying a communicator never hangs on a kernel waiting for a peer that is gone.
  if (!inflightDone()) {
    BRAID_WARN("rank %d: CUDA work still running at ncclCommDestroy after %.0f s: aborting it", rank_,
               wait_.timeoutSec);
    abortWork();
    (void)api_->streamSynchronize(stream_);
  }
  for (auto& l : inflight_) release(*l);
  inflight_.clear();
  for (auto& c : captured_) {
    if (c->graphGone.load()) {
      release(*c->launch);
    } else {
      // Its memory stays (a replay would use it); replaying a graph of a destroyed communicator is not allowed.
      (void)launchMemory_.release();
      BRAID_WARN(
          "rank %d: ncclCommDestroy while a CUDA graph that captured its collectives still exists: the graph "
          "must not be launched again",
          rank_);
    }
  }
  captured_.clear();
  for (const Copy& c : copies_) launchMemory_->give(c.dst);
  if (stream_ != nullptr) (void)api_->streamDestroy(stream_);
  if (abortWord_ != nullptr) (void)api_->memFreeHost(abortWord_);
  if (addArea_ != nullptr) (void)api_->memFreeHost(addArea_);
}

Result<int> CudaBackend::peerAtomics(uint64_t peerPciId) const {
  if (peerPciId == pciId_) return 1;
  // The peer's GPU as an ordinal of this process (another process's ordinals are its own).
  int count = 0;
  BRAID_RETURN_IF_ERROR(api_->check(api_->deviceGetCount(&count), "cuDeviceGetCount"));
  int device = -1;
  for (int d = 0; d < count && device < 0; ++d) {
    if (peerPciId != 0 && gpuPciIdOf(api_, d) == peerPciId) device = d;
  }
  if (device < 0) return -1;
  constexpr int kNativeAtomicSupported = 3;  // CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED
  int native = 0;
  BRAID_RETURN_IF_ERROR(api_->check(api_->deviceGetP2PAttribute(&native, kNativeAtomicSupported, device_, device),
                                    "cuDeviceGetP2PAttribute(NATIVE_ATOMIC_SUPPORTED)"));
  return native != 0 ? 1 : 0;
}

Status CudaBackend::verifyP2p(const std::vector<PeerInfo>& peers, std::vector<uint8_t>* p2p) {
  P2pTestContext c;
  c.api = api_;
  c.ctx = ctx_;
  c.memory = deviceMemory_.get();
  c.rank = rank_;
  c.peers = &peers;
  c.allGather = allGather_;
  c.timeoutSec = wait_.timeoutSec > 0 ? wait_.timeoutSec : 60;
  return selfTestP2p(c, p2p);
}

int CudaBackend::maxChannels(const std::vector<RankResources>&) const {
  return INT_MAX;  // a channel is a CTA, not a CPU thread
}

Status CudaBackend::init(const BackendInitContext& ctx) {
  rank_ = ctx.rank;
  wait_ = ctx.wait;
  allGather_ = ctx.allGather;
  wait_.rank = ctx.rank;
  ScopedContext scope(api_, ctx_);
  BRAID_ASSIGN_OR_RETURN(const KernelLibrary* lib, kernelLibrary(*api_));
  const bool emulated = lib->source.find("emulator") != std::string::npos;
  BRAID_ASSIGN_OR_RETURN(int64_t threads, getIntParam(params::kCudaThreads));
  if (threads == 0) threads = emulated ? kEmulatorThreads : kKernelMaxThreads;
  if (threads < 1 || threads > kKernelMaxThreads) {
    return invalidArgument("%s=%lld: use 1 to %d threads per CTA (0: the default)", params::kCudaThreads.name,
                           static_cast<long long>(threads), kKernelMaxThreads);
  }
  threads_ = static_cast<int>(threads);
  directWanted_ = ctx.direct;
  nChannels_ = ctx.nChannels;
  BRAID_RETURN_IF_ERROR(api_->check(api_->streamCreate(&stream_, kCuStreamNonBlocking), "cuStreamCreate"));
  BRAID_ASSIGN_OR_RETURN(deviceMemory_, CudaDeviceMemory::create(api_, ctx_, device_));
  BRAID_ASSIGN_OR_RETURN(void* word, cuPinnedAlloc(api_, sizeof(uint32_t), "the abort word"));
  abortWord_ = static_cast<uint32_t*>(word);
  storeRelease(abortWord_, 0u);
  // Peers in other processes of this host: a kill -9 stops this rank's kernels a few seconds later (PeerWatch's
  // grace) rather than at their deadline.
  std::vector<std::pair<int, pid_t>> local;
  for (const PeerInfo& p : *ctx.peers) {
    if (p.rank != rank_ && p.hostHash == (*ctx.peers)[static_cast<size_t>(rank_)].hostHash && p.pid != getpid()) {
      local.emplace_back(p.rank, p.pid);
    }
  }
  watch_ = std::make_unique<PeerWatch>(
      std::move(local),
      [this] {
        // Launches not known finished (a captured graph's replays are the user's: not counted).
        std::lock_guard<std::mutex> lock(mu_);
        return !inflight_.empty();
      },
      [this](int rank, pid_t pid) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          peerGone_ = strPrintf("rank %d (process %d on this host) exited while this rank's kernels waited", rank,
                                static_cast<int>(pid));
        }
        BRAID_WARN("rank %d: %s: stopping them", rank_, peerGone_.c_str());
        abortWork();
      });
  BRAID_INFO(kLogInit, "rank %d: CUDA communicator on device %d, kernels from %s, %d threads per CTA", rank_, device_,
             lib->source.c_str(), threads_);
  return Status::ok();
}

BackendCaps CudaBackend::caps() const {
  BackendCaps c;
  c.direct = direct_ != nullptr;
  c.multicast = direct_ != nullptr && direct_->multicast();
  c.proto[static_cast<int>(ProtoId::kLL)] = true;
  c.proto[static_cast<int>(ProtoId::kLL128)] = true;  // chosen only when NCCL_PROTO asks (not run on a GPU yet)
  c.proto[static_cast<int>(ProtoId::kSimple)] = true;
  c.streams = true;
  return c;
}

const std::vector<Transport*>& CudaBackend::transports() const {
  // P2P first (FIFOs in the receiver's GPU memory, for the peers the communicator chose), then the host backend's
  // transports with FIFOs in pinned memory (fifoMemory): in-process pointers, shared memory between processes
  // (segments registered with the driver), the network through its proxy thread.
  static const std::vector<Transport*> t = {p2pTransport(), inprocTransport(), shmTransport(), netTransport()};
  return t;
}

const FifoMemory& CudaBackend::fifoMemory() const {
  return *fifos_;
}

const void* CudaBackend::stageCopy(const void* src, size_t bytes) {
  // The copy is made on the internal stream after the next launch's join, so it sees what the user's stream
  // wrote before the call; a failed allocation leaves the snapshot null, which the launch reports.
  ScopedContext scope(api_, ctx_);
  RelaxedCaptureMode relaxed(api_);  // the caller's stream may be being captured
  Result<CUdeviceptr> got = launchMemory_->takeDevice(bytes, "a staged copy");
  if (!got.isOk()) {
    BRAID_WARN("rank %d: %s", rank_, got.status().message().c_str());
    copies_.push_back(Copy{0, src, bytes});
    return nullptr;
  }
  const CUdeviceptr dst = got.value();
  copies_.push_back(Copy{dst, src, bytes});
  return reinterpret_cast<const void*>(dst);
}

void CudaBackend::releaseLaunchMemory() {
  // Copies a launch took over are its own now; these were never launched (a group that failed before).
  ScopedContext scope(api_, ctx_);
  RelaxedCaptureMode relaxed(api_);
  for (const Copy& c : copies_) {
    if (c.dst != 0) launchMemory_->give(c.dst);
  }
  copies_.clear();
}

Status CudaBackend::launchFifo(const std::vector<FifoLaunch>& group) {
  for (const FifoLaunch& l : group) BRAID_RETURN_IF_ERROR(static_cast<CudaBackend*>(l.backend)->launchOne(l));
  return Status::ok();
}

Status CudaBackend::launchOne(const FifoLaunch& fl) {
  ScopedContext scope(api_, ctx_);
  // Allocations below must not disturb a capture of the user's streams (nor be refused by it).
  RelaxedCaptureMode relaxed(api_);
  BRAID_ASSIGN_OR_RETURN(const CaptureState cap, beginLaunch(fl.streams));
  auto launch = std::make_unique<Launch>();
  Launch& l = *launch;
  // On any failure below, what was made so far goes (nothing of it reached a stream unless the join did).
  LaunchGuard cleanup{this, &launch};
  auto deviceAlloc = [&](size_t bytes, const char* what) -> Result<char*> {
    BRAID_ASSIGN_OR_RETURN(const CUdeviceptr p, launchMemory_->takeDevice(bytes, what));
    l.device.push_back(p);
    return reinterpret_cast<char*>(p);
  };
  // One queue per (protocol, channel): each protocol's kernel runs its items, in plan order.
  std::map<ProtoId, std::map<int, ChannelWork>> queues;
  std::map<ProtoId, std::map<int, std::vector<const PlannedWork*>>> planned;
  for (const PlannedWork& pw : *fl.works) {
    BRAID_ASSIGN_OR_RETURN(WorkItem w, plannedWorkItem(pw, fl.link, rank_));
    if (pw.outputScratchBytes > 0) {
      BRAID_ASSIGN_OR_RETURN(w.output, deviceAlloc(pw.outputScratchBytes, "cuMemAlloc(scratch)"));
    }
    queues[pw.proto][pw.channel].items.push_back(std::move(w));
    planned[pw.proto][pw.channel].push_back(&pw);
  }
  for (const Copy& c : copies_) {
    if (c.dst == 0) return Status(Code::kCudaError, strPrintf("rank %d: a staged copy could not be allocated", rank_));
  }
  // One kernel per protocol, with its work: written in pinned memory, copied to device memory on the run stream.
  struct KernelWork {
    KernelArgs args;
    ProtoId proto;
    char* deviceWork;
    const char* hostWork;
    size_t bytes;
  };
  std::vector<KernelWork> kernels;
  for (auto& [proto, channels] : queues) {
    std::vector<const ChannelWork*> ptrs;
    for (auto& [channel, cw] : channels) {
      cw.prepare();
      if (proto == ProtoId::kLL || proto == ProtoId::kLL128) {
        // LL and LL128 staging in device memory, one slot's payload each way per item.
        const std::vector<const PlannedWork*>& pws = planned[proto][channel];
        for (size_t i = 0; i < cw.descs.size(); ++i) {
          BRAID_ASSIGN_OR_RETURN(cw.descs[i].llRecv, deviceAlloc(pws[i]->llStagingBytes, "cuMemAlloc(LL staging)"));
          BRAID_ASSIGN_OR_RETURN(cw.descs[i].llSend, deviceAlloc(pws[i]->llStagingBytes, "cuMemAlloc(LL staging)"));
        }
      }
      ptrs.push_back(&cw);
    }
    for (const ChannelWork* cw : ptrs) {
      for (const ConnSlot& c : cw->conns) {
        if (cursors_->cursorFor(c.owner, deviceMemory_->stream()) == nullptr) {
          return Status(
              Code::kCudaError,
              strPrintf("rank %d: no device memory for connector cursors (or their first copy failed)", rank_));
        }
      }
    }
    // The work is written into pinned memory with the addresses of its device copy, which the run stream makes just
    // before the kernel (and again at every graph replay); error messages read the pinned original.
    const size_t workBytes = workImageBytes(ptrs);
    const size_t argsAt = (workBytes + 63) / 64 * 64;
    const size_t statusAt = argsAt + (sizeof(KernelArgs) + 63) / 64 * 64;
    BRAID_ASSIGN_OR_RETURN(void* block, launchMemory_->takePinned(statusAt + sizeof(DevStatus), "a launch's work"));
    l.images.push_back(block);
    char* image = static_cast<char*>(block);
    BRAID_ASSIGN_OR_RETURN(char* deviceWork, deviceAlloc(workBytes, "a launch's work"));
    KernelArgs args = writeWorkImage(ptrs, image, deviceWork,
                                     [this](void* o) { return cursors_->cursorFor(o, deviceMemory_->stream()); });
    auto* status = reinterpret_cast<DevStatus*>(image + statusAt);
    devStatusInit(status);
    args.status = status;
    args.abortFlag = abortWord_;
    args.timeoutNs = static_cast<uint64_t>(std::max(0.0, wait_.timeoutSec) * static_cast<double>(kNsPerSec));
    auto* kept = reinterpret_cast<KernelArgs*>(image + argsAt);
    *kept = args;
    l.statuses.push_back(status);
    l.kernels.push_back(Launch::KernelRecord{kept, proto, image - deviceWork});
    kernels.push_back(KernelWork{args, proto, deviceWork, image, workBytes});
  }
  return submit(std::move(launch), fl.streams, cap, [&](CUstream run) -> Status {
    for (const KernelWork& k : kernels) {
      BRAID_RETURN_IF_ERROR(api_->check(api_->memcpyAsync(reinterpret_cast<CUdeviceptr>(k.deviceWork),
                                                          reinterpret_cast<CUdeviceptr>(k.hostWork), k.bytes, run),
                                        "cuMemcpyAsync(a launch's work to the device)"));
      BRAID_RETURN_IF_ERROR(launchKernel(*api_, k.proto, k.args, threads_, run));
    }
    return Status::ok();
  });
}

Status CudaBackend::submit(std::unique_ptr<Launch> launch, const std::vector<void*>& streams, const CaptureState& cap,
                           const std::function<Status(CUstream)>& kernels) {
  Launch& l = *launch;
  // On a failure below, what the launch holds goes (nothing of it reached a stream unless the join did).
  LaunchGuard cleanup{this, &launch};
  // The internal stream waits for every user stream of the group, then runs the staged copies and the kernels;
  // the user streams wait for it. Under capture the first user stream plays the internal stream's part, so the
  // work joins the user's graph and nothing of braid's own stream is captured.
  const CUstream run = cap.graph != nullptr ? static_cast<CUstream>(streams.front()) : stream_;
  std::vector<void*> joined;
  for (void* s : streams) {
    if (static_cast<CUstream>(s) != run) joined.push_back(s);
  }
  auto newEvent = [&]() -> Result<CUevent> {
    CUevent e = nullptr;
    BRAID_RETURN_IF_ERROR(api_->check(api_->eventCreate(&e, kCuEventDisableTiming), "cuEventCreate"));
    l.events.push_back(e);
    return e;
  };
  for (void* s : joined) {
    BRAID_ASSIGN_OR_RETURN(CUevent e, newEvent());
    BRAID_RETURN_IF_ERROR(api_->check(api_->eventRecord(e, static_cast<CUstream>(s)), "cuEventRecord(user stream)")
                              .withContext(strPrintf("stream=%p", s)));
    BRAID_RETURN_IF_ERROR(api_->check(api_->streamWaitEvent(run, e, 0), "cuStreamWaitEvent"));
  }
  for (const Copy& c : copies_) {
    BRAID_RETURN_IF_ERROR(api_->check(api_->memcpyAsync(c.dst, reinterpret_cast<CUdeviceptr>(c.src), c.bytes, run),
                                      "cuMemcpyAsync(staging)"));
    l.device.push_back(c.dst);
  }
  copies_.clear();
  BRAID_RETURN_IF_ERROR(kernels(run));
  BRAID_ASSIGN_OR_RETURN(CUevent end, newEvent());
  BRAID_RETURN_IF_ERROR(api_->check(api_->eventRecord(end, run), "cuEventRecord(done)"));
  for (void* s : joined) {
    BRAID_RETURN_IF_ERROR(
        api_->check(api_->streamWaitEvent(static_cast<CUstream>(s), end, 0), "cuStreamWaitEvent(user stream)")
            .withContext(strPrintf("stream=%p", s)));
  }
  ++issued_;
  if (cap.graph != nullptr) {
    finished_.fetch_add(1, std::memory_order_release);  // its work runs when the graph is launched
    return keepWithGraph(std::move(launch), cap.graph);
  }
  l.done = end;
  std::lock_guard<std::mutex> lock(mu_);
  inflight_.push_back(std::move(launch));
  return Status::ok();
}

CudaBackend::LaunchGuard::~LaunchGuard() {
  if (*launch) backend->release(**launch);
}

Result<CudaBackend::CaptureState> CudaBackend::beginLaunch(const std::vector<void*>& streams) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    BRAID_RETURN_IF_ERROR(pollLocked());  // an earlier launch's failure is this call's
  }
  return captureOf(streams);
}

Result<CudaBackend::CaptureState> CudaBackend::captureOf(const std::vector<void*>& streams) const {
  CaptureState out;
  bool first = true;
  for (void* s : streams) {
    int status = kCuCaptureStatusNone;
    unsigned long long id = 0;
    CUgraph graph = nullptr;
    BRAID_RETURN_IF_ERROR(
        api_->check(api_->streamGetCaptureInfo(static_cast<CUstream>(s), &status, &id, &graph, nullptr, nullptr),
                    "cuStreamGetCaptureInfo")
            .withContext(strPrintf("stream=%p", s)));
    if (status == kCuCaptureStatusInvalidated) {
      return invalidUsage("stream=%p: its CUDA graph capture was invalidated before this group's launch", s);
    }
    if (!first && (id != out.id || (status == kCuCaptureStatusActive) != (out.graph != nullptr))) {
      return invalidUsage(
          "the streams of one group (%p and %p) are not captured together: capture every stream of a group into "
          "the same CUDA graph, or none",
          streams.front(), s);
    }
    if (first && status == kCuCaptureStatusActive) {
      out.graph = graph;
      out.id = id;
    }
    first = false;
  }
  return out;
}

Status CudaBackend::keepWithGraph(std::unique_ptr<Launch> launch, CUgraph graph) {
  auto c = std::make_shared<Captured>();
  c->launch = std::move(launch);
  auto* held = new std::shared_ptr<Captured>(c);
  CUuserObject obj = nullptr;
  Status st =
      api_->check(api_->userObjectCreate(&obj, held, &CudaBackend::onGraphReleased, 1, kCuUserObjectNoDestructorSync),
                  "cuUserObjectCreate");
  if (!st.isOk()) {
    delete held;
    release(*c->launch);
    return st;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    captured_.push_back(c);
  }
  // The graph takes the only reference: when it and its executable graphs are gone, onGraphReleased runs.
  st = api_->check(api_->graphRetainUserObject(graph, obj, 1, kCuGraphUserObjectMove), "cuGraphRetainUserObject");
  if (!st.isOk()) (void)api_->userObjectRelease(obj, 1);  // released at once: freed at the next poll
  return st;
}

void CudaBackend::release(Launch& l) {
  RelaxedCaptureMode relaxed(api_);  // frees may happen while a user's stream is being captured
  for (CUdeviceptr p : l.device) launchMemory_->give(p);
  for (void* p : l.images) launchMemory_->give(p);
  for (CUevent e : l.events) (void)api_->eventDestroy(e);
  l.device.clear();
  l.images.clear();
  l.events.clear();
}

Status CudaBackend::statusOf(const Launch& l) const {
  const KernelFailureContext ctx{rank_, wait_.timeoutSec, &peerGone_};
  for (size_t k = 0; k < l.statuses.size(); ++k) {
    const DevStatus& s = *l.statuses[k];
    if (loadAcquire(&s.code) == static_cast<uint32_t>(DevStatusCode::kRunning)) continue;
    const Launch::KernelRecord& rec = l.kernels[k];
    return kernelFailure(s, *rec.args, rec.proto, rec.toHost, ctx);
  }
  return Status::ok();
}

Status CudaBackend::pollAsync() {
  ScopedContext scope(api_, ctx_);
  std::lock_guard<std::mutex> lock(mu_);
  return pollLocked();
}

Status CudaBackend::pollLocked() {
  for (auto it = captured_.begin(); it != captured_.end();) {
    Captured& c = **it;
    if (failed_.isOk()) {
      Status st = statusOf(*c.launch);  // a replay that failed
      if (!st.isOk()) failed_ = st;
    }
    if (c.graphGone.load()) {
      release(*c.launch);
      it = captured_.erase(it);
    } else {
      ++it;
    }
  }
  while (!inflight_.empty() && failed_.isOk()) {
    Launch& l = *inflight_.front();
    Status st = statusOf(l);  // a failed kernel says so while its launch may still be ending
    if (!st.isOk()) {
      failed_ = st;
      break;
    }
    const CUresult r = api_->eventQuery(l.done);
    if (r == kCuErrorNotReady) break;
    if (r != kCuSuccess) {
      failed_ = api_->check(r, "cuEventQuery(kernels done)").withContext(strPrintf("rank %d", rank_));
      break;
    }
    st = statusOf(l);
    if (!st.isOk()) {
      failed_ = st;
      break;
    }
    release(l);
    inflight_.pop_front();
    finished_.fetch_add(1, std::memory_order_release);
  }
  return failed_;
}

void CudaBackend::abortWork() {
  if (abortWord_ != nullptr) storeRelease(abortWord_, 1u);
}

Status CudaBackend::quiesceLinks() {
  ScopedContext scope(api_, ctx_);
  // Half of BRAID_TIMEOUT: the peers wait in the verdict's all-gather meanwhile, and a refusal should reach them
  // before their own deadline fails the communicator.
  const WaitContext until = WaitContext::withTimeout(nullptr, wait_.timeoutSec / 2);
  // A graph the program just destroyed lets go of its launches when the driver runs the graph's user-object
  // destructors, a moment later (on a thread of the driver's): a live graph is only believed after this grace.
  const WaitContext graphGrace =
      WaitContext::withTimeout(nullptr, std::min(2.0, wait_.timeoutSec > 0 ? wait_.timeoutSec : 2.0));
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      BRAID_RETURN_IF_ERROR(pollLocked());  // also forgets the launches of graphs destroyed since
      if (!captured_.empty() && graphGrace.expired()) {
        return invalidUsage(
            "ncclCommSuspend: %zu CUDA graph(s) that captured this communicator's collectives still exist (or a "
            "replay of one destroyed is still running), and their launches keep the FIFOs' addresses: destroy them "
            "(cudaGraphExecDestroy and cudaGraphDestroy) and let their work finish before suspending",
            captured_.size());
      }
      if (inflight_.empty() && captured_.empty()) return Status::ok();
    }
    if (until.expired()) {
      return Status(Code::kRemoteError,
                    strPrintf("ncclCommSuspend: rank %d's collectives did not finish within half of BRAID_TIMEOUT=%g s",
                              rank_, wait_.timeoutSec));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Result<void*> CudaBackend::allocHostMapped(size_t bytes) {
  ScopedContext scope(api_, ctx_);
  RelaxedCaptureMode relaxed(api_);
  BRAID_ASSIGN_OR_RETURN(void* p, cuPinnedAlloc(api_, bytes, "host memory kernels reach"));
  std::memset(p, 0, bytes);
  return p;
}

void CudaBackend::freeHostMapped(void* p) {
  ScopedContext scope(api_, ctx_);
  RelaxedCaptureMode relaxed(api_);
  (void)api_->memFreeHost(p);
}

uint64_t CudaBackend::persistentBytes() const {
  uint64_t total = direct_ ? direct_->areaBytes() : 0;
  if (launchMemory_) total += launchMemory_->deviceBytesHeld();  // GPU memory: its pinned host blocks are not
  return total;
}

void CudaBackend::linksReleased() {
  cursors_->forgetAll();  // they belonged to the released connectors
}

void CudaBackend::markAborted(const std::string&) {
  abortWork();
}

Status CudaBackend::initDirect(const std::vector<PeerInfo>& peers, const std::vector<uint8_t>& p2pPeers) {
  if (!directWanted_) return Status::ok();
  ScopedContext scope(api_, ctx_);
  std::string why;
  BRAID_ASSIGN_OR_RETURN(direct_,
                         CudaDirect::create(*deviceMemory_, peers, rank_, nChannels_, p2pPeers, allGather_,
                                            wait_.timeoutSec > 0 ? wait_.timeoutSec : 60, &why, nvlsHostMode_));
  if (direct_) {
    BRAID_INFO(kLogInit | kLogP2p, "rank %d: NVLS-style collectives over peer pointers: %u lanes, %zu-byte areas",
               rank_, direct_->layout().nlanes, direct_->layout().bytes());
  } else {
    BRAID_INFO(kLogInit | kLogP2p, "rank %d: no NVLS-style collectives on this communicator: %s", rank_, why.c_str());
  }
  return Status::ok();
}

Status CudaBackend::launchDirect(const std::vector<DirectBatch>& group) {
  for (const DirectBatch& b : group) BRAID_RETURN_IF_ERROR(static_cast<CudaBackend*>(b.backend)->launchDirectOne(b));
  return Status::ok();
}

Status CudaBackend::launchDirectOne(const DirectBatch& b) {
  if (!direct_) return internalError("rank %d: a direct launch on a communicator without direct areas", rank_);
  BRAID_RETURN_IF_ERROR(launchPinned(
      b.streams, direct_->imageBytes(b.ops->size()), "a direct launch's work", true,
      [&](char* image) { return direct_->writeImage(*b.ops, image); },
      [&](CUstream run, const KernelArgs& args) { return launchDirectKernel(*api_, args, threads_, run); }));
  for (DirectOp& op : *b.ops) op.ran = true;
  return Status::ok();
}

Status CudaBackend::runRma(const std::vector<RmaStep>& steps, void* stream) {
  std::vector<RmaKernelStep> signals;
  std::vector<const RmaStep*> posted;  // toward ranks of other hosts: messages, handed over when the stream gets there
  for (const RmaStep& s : steps) {
    if (s.via != nullptr && s.kind != RmaStep::Kind::kWait) {
      // An earlier put to that peer failed, or its messages stopped: said now rather than later. Not for a wait: a
      // peer that ended its communicator after sending every awaited signal stopped too, and its signals count (a
      // wait on a dead peer ends at the kernel's deadline or ncclCommAbort).
      BRAID_RETURN_IF_ERROR(s.via->health(s.peer));
      posted.push_back(&s);
      continue;
    }
    signals.push_back(
        RmaKernelStep{s.word, s.value, s.peer, s.kind == RmaStep::Kind::kWait ? kRmaStepWait : kRmaStepStore});
  }
  const size_t stepsAt = (sizeof(RmaKernelWork) + 63) / 64 * 64;
  return launchPinned(
      std::vector<void*>{stream}, stepsAt + sizeof(RmaKernelStep) * signals.size(), "one-sided work", false,
      [&](char* image) {
        auto* work = reinterpret_cast<RmaKernelWork*>(image);
        auto* at = reinterpret_cast<RmaKernelStep*>(image + stepsAt);
        for (size_t i = 0; i < signals.size(); ++i) at[i] = signals[i];
        work->steps = at;
        work->nsteps = static_cast<uint32_t>(signals.size());
        KernelArgs args;
        args.rma = work;
        args.nchannels = 1;
        return args;
      },
      [&](CUstream run, const KernelArgs& args) -> Status {
        // Puts toward other hosts first: a group's operations are not ordered among themselves (as in NCCL), and a
        // wait of this group must not hold back a put a peer's wait needs.
        for (const RmaStep* s : posted)
          BRAID_RETURN_IF_ERROR(postRmaOnStream(api_, launchMemory_.get(), *s, run, wait_));
        // The data by the copy engine, in stream order before the kernel that raises the signals.
        for (const RmaStep& s : steps) {
          if (s.kind != RmaStep::Kind::kPut || s.bytes == 0 || s.via != nullptr) continue;
          BRAID_RETURN_IF_ERROR(api_->check(api_->memcpyAsync(reinterpret_cast<CUdeviceptr>(s.dst),
                                                              reinterpret_cast<CUdeviceptr>(s.src), s.bytes, run),
                                            "cuMemcpyAsync (ncclPutSignal)"));
        }
        return launchRmaKernel(*api_, args, run);
      });
}

Status CudaBackend::launchPinned(const std::vector<void*>& streams, size_t workBytes, const char* what, bool capturable,
                                 const std::function<KernelArgs(char*)>& write,
                                 const std::function<Status(CUstream, const KernelArgs&)>& run) {
  ScopedContext scope(api_, ctx_);
  RelaxedCaptureMode relaxed(api_);
  BRAID_ASSIGN_OR_RETURN(const CaptureState cap, beginLaunch(streams));
  if (!capturable && cap.graph != nullptr) {
    return invalidUsage(
        "stream=%p is being captured into a CUDA graph: %s cannot be captured (nor can NCCL's "
        "one-sided operations in 2.29-2.31); issue it outside the capture",
        streams.empty() ? nullptr : streams[0], what);
  }
  auto launch = std::make_unique<Launch>();
  const size_t argsAt = (workBytes + 63) / 64 * 64;
  const size_t statusAt = argsAt + (sizeof(KernelArgs) + 63) / 64 * 64;
  BRAID_ASSIGN_OR_RETURN(void* image, launchMemory_->takePinned(statusAt + sizeof(DevStatus), what));
  launch->images.push_back(image);
  KernelArgs args = write(static_cast<char*>(image));
  auto* status = reinterpret_cast<DevStatus*>(static_cast<char*>(image) + statusAt);
  devStatusInit(status);
  args.status = status;
  args.abortFlag = abortWord_;
  args.timeoutNs = static_cast<uint64_t>(std::max(0.0, wait_.timeoutSec) * static_cast<double>(kNsPerSec));
  auto* kept = reinterpret_cast<KernelArgs*>(static_cast<char*>(image) + argsAt);
  *kept = args;
  launch->statuses.push_back(status);
  launch->kernels.push_back(Launch::KernelRecord{kept, ProtoId::kSimple, 0});  // read where it is
  return submit(std::move(launch), streams, cap, [&](CUstream stream) { return run(stream, args); });
}

Status CudaBackend::recordUserEvent(void* event, void* stream) {
  BRAID_RETURN_IF_ERROR(checkStream(stream));
  return api_->check(api_->eventRecord(static_cast<CUevent>(event), static_cast<CUstream>(stream)),
                     "cuEventRecord(config->launchCompletionEvent)");
}

Status CudaBackend::checkStream(void* stream) const {
  if (stream == nullptr) return Status::ok();  // the legacy stream of this communicator's context, at launch
  CUcontext ctx = nullptr;
  if (api_->streamGetCtx(static_cast<CUstream>(stream), &ctx) != kCuSuccess) {
    return invalidArgument("stream=%p is not a CUDA stream the driver knows (destroyed, or not a stream)", stream);
  }
  if (ctx == ctx_) {
    int capture = 0;
    if (api_->streamIsCapturing(static_cast<CUstream>(stream), &capture) == kCuSuccess &&
        capture == kCuCaptureStatusInvalidated) {
      return invalidUsage("stream=%p: its CUDA graph capture was invalidated (a synchronising call during capture?)",
                          stream);
    }
    return Status::ok();
  }
  CUdevice dev = -1;
  {
    ScopedContext scope(api_, ctx);
    if (api_->ctxGetDevice(&dev) != kCuSuccess) dev = -1;
  }
  return invalidArgument(
      "stream=%p belongs to device %d; this communicator runs on device %d (use a stream created with that device "
      "current)",
      stream, static_cast<int>(dev), device_);
}

Status CudaBackend::checkBuffer(const void* p, size_t bytes, const char* what) const {
  if (p == nullptr || bytes == 0) return Status::ok();
  const auto at = reinterpret_cast<CUdeviceptr>(p);
  unsigned type = 0;
  if (api_->pointerGetAttribute(&type, static_cast<int>(CuPointerAttr::kMemoryType), at) != kCuSuccess) {
    return invalidArgument(
        "%s=%p is not memory the CUDA driver knows (pageable host memory?): a CUDA communicator reads and writes "
        "device memory (cudaMalloc, ncclMemAlloc) or pinned host memory (cudaHostAlloc)",
        what, p);
  }
  // A buffer may run over several cuMem mappings back to back (PyTorch's expandable segments map theirs so): each
  // must be memory the driver knows, of this device.
  const CUdeviceptr end = at + bytes;
  for (CUdeviceptr cur = at;;) {
    int ordinal = -1;
    if (type == kCuMemoryTypeDevice &&
        api_->pointerGetAttribute(&ordinal, static_cast<int>(CuPointerAttr::kDeviceOrdinal), cur) == kCuSuccess &&
        ordinal != device_) {
      return invalidArgument("%s=%p is memory of device %d%s; this communicator runs on device %d", what, p, ordinal,
                             cur == at ? "" : strPrintf(" from byte %zu", static_cast<size_t>(cur - at)).c_str(),
                             device_);
    }
    CUdeviceptr start = 0;
    size_t size = 0;
    if (api_->pointerGetAttribute(&start, static_cast<int>(CuPointerAttr::kRangeStart), cur) != kCuSuccess ||
        api_->pointerGetAttribute(&size, static_cast<int>(CuPointerAttr::kRangeSize), cur) != kCuSuccess ||
        end <= start + size) {
      return Status::ok();
    }
    const CUdeviceptr next = start + size;
    unsigned nextType = 0;
    if (api_->pointerGetAttribute(&nextType, static_cast<int>(CuPointerAttr::kMemoryType), next) != kCuSuccess ||
        nextType != type) {
      return invalidArgument("%s=%p: %zu bytes run past the end of its allocation, %zu bytes in", what, p, bytes,
                             static_cast<size_t>(next - at));
    }
    cur = next;
  }
}

}  // namespace braid

namespace braid {

Result<uint64_t> CudaBackend::bufferId(const void* p, size_t bytes, const char* what) const {
  BRAID_RETURN_IF_ERROR(checkBuffer(p, bytes, what));
  unsigned long long id = 0;
  BRAID_RETURN_IF_ERROR(api_->check(api_->pointerGetAttribute(&id, static_cast<int>(CuPointerAttr::kBufferId),
                                                              reinterpret_cast<CUdeviceptr>(p)),
                                    "cuPointerGetAttribute(BUFFER_ID)")
                            .withContext(strPrintf("%s=%p", what, p)));
  return static_cast<uint64_t>(id);
}

}  // namespace braid
