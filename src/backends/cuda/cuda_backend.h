// The CUDA backend: runs plans as kernels (kernel_image.h) on device buffers and the user's streams.
//
// A communicator gets it when its creating thread has a current CUDA context (or BRAID_BACKEND=cuda); every
// driver call goes through the table of cu_api.h. Per communicator: one internal non-blocking stream, an abort
// word in pinned host memory, and each connector's cursor in device memory that outlives launches. A launch
// (launchFifo, at the outermost ncclGroupEnd) copies the flattened work into pinned memory (work_image.h), makes
// the internal stream wait for every user stream of the group, launches one kernel per protocol (a CTA per
// channel), and makes the user streams wait for the kernels; it returns at once. Finished launches are reclaimed
// by pollAsync (each launch and ncclCommGetAsyncError), which also turns a kernel's status word into the error
// ncclCommGetAsyncError reports.
//
// Under CUDA graph capture (every stream of the group captured into one graph) the launch goes into the graph
// instead: the first user stream runs it, the launch's memory lives as long as the graph (a user object), and every
// replay runs the same kernels on the same work (cursors live in device memory and demand in the FIFOs, never in the
// plan).
//
// Thread safety: pollAsync may run on any thread (ncclCommGetAsyncError from a watchdog) while the owner launches;
// the in-flight and captured lists and the first failure are guarded by one mutex.
//
// What it connects: the p2p transport (FIFOs in the receiver's GPU memory, device_memory.h) for the peers the
// communicator chose, else the host backend's transports with every FIFO in pinned, mapped host memory
// (in-process, shared memory between processes with the segments registered, the network through its proxy
// thread).
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/backends/backend.h"
#include "src/backends/cuda/connector_cursors.h"
#include "src/backends/cuda/cu_api.h"
#include "src/backends/cuda/cuda_direct.h"
#include "src/backends/cuda/cuda_windows.h"
#include "src/backends/cuda/device_memory.h"
#include "src/backends/cuda/launch_memory.h"
#include "src/backends/cuda/peer_watch.h"

namespace braid {

class CudaBackend final : public Backend {
 public:
  // On `ctx` (null: the calling thread's current context), or on `device`'s primary context when device >= 0 (held
  // retained while the backend lives); an error names what is missing (no driver, no context).
  // nvlsHostMode: BackendChoice's bits (NCCL 2.32's ncclConfig_t.nvlsHostMode).
  static Result<std::unique_ptr<Backend>> create(CUcontext ctx, int device = -1, int nvlsHostMode = 0);
  ~CudaBackend() override;

  BackendKind kind() const override { return BackendKind::kCuda; }
  int maxChannels(const std::vector<RankResources>& ranks) const override;
  Status init(const BackendInitContext& ctx) override;
  BackendCaps caps() const override;
  const std::vector<Transport*>& transports() const override;
  const FifoMemory& fifoMemory() const override;
  const void* stageCopy(const void* src, size_t bytes) override;
  void releaseLaunchMemory() override;
  Status launchFifo(const std::vector<FifoLaunch>& group) override;
  Status launchDirect(const std::vector<DirectBatch>& group) override;
  Status initDirect(const std::vector<PeerInfo>& peers, const std::vector<uint8_t>& p2pPeers) override;
  void markAborted(const std::string& why) override;
  // Refused while a CUDA graph that captured this communicator's work exists (its launches hold the FIFOs'
  // addresses); waits for launches in flight (BRAID_TIMEOUT).
  [[nodiscard]] Status quiesceLinks() override;
  // Its direct area (as mapped) and its launch memory's device blocks (work blocks, cursors, as allocated).
  uint64_t persistentBytes() const override;
  void linksReleased() override;
  Status checkBuffer(const void* p, size_t bytes, const char* what) const override;
  Status checkStream(void* stream) const override;
  Status recordUserEvent(void* event, void* stream) override;
  Result<uint64_t> bufferId(const void* p, size_t bytes, const char* what) const override;
  void registered(const void* handle, const void* base, size_t bytes) override {
    if (direct_) direct_->registry().add(handle, base, bytes);
  }
  void deregistered(const void* handle) override;
  // Windows of ncclMemAlloc memory (cuda_windows.h); one-sided steps on the stream: puts by the copy engine, then
  // the signal kernel (rma_kernel.h). Not inside a CUDA graph capture.
  Result<WindowDesc> exportWindow(const void* base, size_t bytes, int otherProcesses) override {
    return exportCudaWindow(api_, rank_, base, bytes, otherProcesses);
  }
  WindowPeer importWindow(const WindowDesc& mine, const WindowDesc& theirs) override {
    return importCudaWindow(*deviceMemory_, wait_.timeoutSec, mine, theirs);
  }
  void withdrawWindow(const WindowDesc& mine) override { withdrawCudaWindow(mine); }
  Result<WindowMulticast> bindWindowMulticast(void* base, size_t bindBytes, std::string* why) override {
    ScopedContext scope(api_, ctx_);
    return bindCudaWindowMulticast(*deviceMemory_, direct_.get(), rank_, base, bindBytes, allGather_,
                                   wait_.timeoutSec > 0 ? wait_.timeoutSec : 60, why);
  }
  Result<void*> allocWindowMemory(size_t bytes) override {
    ScopedContext scope(api_, ctx_);
    return allocCudaWindowMemory(*deviceMemory_, bytes);
  }
  void freeWindowMemory(void* p) override {
    ScopedContext scope(api_, ctx_);
    (void)cuMemFreeShareable(api_, p);
  }
  Result<void*> allocDeviceBlock(size_t bytes) override {
    ScopedContext scope(api_, ctx_);
    return allocCudaDeviceBlock(api_, bytes);
  }
  // These three also run on the one-sided proxies' threads, maybe while the user captures a graph on another.
  Status writeDeviceBlock(void* dst, const void* src, size_t bytes) override {
    ScopedContext scope(api_, ctx_);
    RelaxedCaptureMode relaxed(api_);
    return writeCudaDeviceBlock(*deviceMemory_, dst, src, bytes);
  }
  Result<void*> allocHostMapped(size_t bytes) override;
  void freeHostMapped(void* p) override;
  Status readDeviceBlock(void* dst, const void* src, size_t bytes) override {
    ScopedContext scope(api_, ctx_);
    RelaxedCaptureMode relaxed(api_);
    return writeCudaDeviceBlock(*deviceMemory_, dst, src, bytes);  // a copy between any two addresses (UVA)
  }
  Status storeSignal(uint64_t* word, uint64_t value) override {
    ScopedContext scope(api_, ctx_);
    RelaxedCaptureMode relaxed(api_);  // after the data: both by the one stream, each copy finished at return
    return writeCudaDeviceBlock(*deviceMemory_, word, &value, sizeof(value));
  }
  Status addSignal(uint64_t* word, uint64_t amount) override {
    ScopedContext scope(api_, ctx_);
    RelaxedCaptureMode relaxed(api_);
    std::lock_guard<std::mutex> lock(addMu_);
    if (addArea_ == nullptr) {
      BRAID_ASSIGN_OR_RETURN(void* area, allocHostMapped(kCudaAddAreaBytes));
      addArea_ = static_cast<char*>(area);
    }
    bool stuck = false;
    Status st = addCudaDeviceWord(*deviceMemory_, addArea_, abortWord_, wait_.timeoutSec, word, amount, &stuck);
    if (stuck) {
      addArea_ = nullptr;  // the queued kernel may still read it: left to it (a few hundred bytes, once)
      Status fresh = deviceMemory_->replaceStream();
      if (!fresh.isOk()) return Status(st.code(), st.message() + "; then " + fresh.message());
    }
    return st;
  }
  void freeDeviceBlock(void* p) override {
    ScopedContext scope(api_, ctx_);
    (void)api_->memFree(reinterpret_cast<CUdeviceptr>(p));
  }
  const uint32_t* deviceAbortWord() const override { return abortWord_; }
  Result<int> peerAtomics(uint64_t peerPciId) const override;
  Status runRma(const std::vector<RmaStep>& steps, void* stream) override;
  Status pollAsync() override;
  void abortWork() override;

  int cudaDevice() const override { return device_; }
  uint64_t gpuPciId() const override { return pciId_; }
  int residentCtas() const override { return smCount_; }
  uint64_t launchesIssued() const override { return issued_; }
  uint64_t launchesFinished() const override { return finished_.load(std::memory_order_acquire); }
  const DeviceMemory* deviceMemory() const override { return deviceMemory_.get(); }
  Status verifyP2p(const std::vector<PeerInfo>& peers, std::vector<uint8_t>* p2p) override;

 private:
  class PinnedFifos;
  struct Launch;  // one launchFifo's kernels and the memory they use
  struct Copy {
    CUdeviceptr dst;
    const void* src;
    size_t bytes;
  };

  struct Captured;  // a launch captured into a CUDA graph, alive as long as the graph
  struct CaptureState {
    CUgraph graph = nullptr;  // the graph the group's streams are being captured into (null: none)
    unsigned long long id = 0;
  };

  CudaBackend(const CuApi* api, CUcontext ctx, int device, std::shared_ptr<void> primary);
  // The capture state the group's streams share; an error when some are captured and others not (or into
  // different graphs), or a capture was invalidated.
  Result<CaptureState> captureOf(const std::vector<void*>& streams) const;
  // Hands a captured launch's memory to `graph` (a user object) and keeps it for status polls.
  Status keepWithGraph(std::unique_ptr<Launch> launch, CUgraph graph);
  static void onGraphReleased(void* held);  // the user object's destructor (a driver thread: no CUDA calls)
  // Releases a launch's memory when it goes out of scope still holding the launch (a failure before it was handed
  // to a stream or a graph).
  struct LaunchGuard {
    CudaBackend* backend;
    std::unique_ptr<Launch>* launch;
    ~LaunchGuard();
  };
  // Every launch's first step: reclaims finished work (an earlier asynchronous failure fails this launch) and finds
  // the capture state of the group's streams.
  Result<CaptureState> beginLaunch(const std::vector<void*>& streams);
  Status launchOne(const FifoLaunch& launch);
  Status launchDirectOne(const DirectBatch& batch);
  // One kernel on `streams`: a pinned work image of `workBytes` that `write` fills (returning the kernel's
  // arguments; the status, abort word and deadline are added here), launched by `run` on the stream that runs the
  // launch. `capturable` false: refused by name while the streams are being captured.
  Status launchPinned(const std::vector<void*>& streams, size_t workBytes, const char* what, bool capturable,
                      const std::function<KernelArgs(char*)>& write,
                      const std::function<Status(CUstream, const KernelArgs&)>& run);
  // Joins the user streams, runs the staged copies and then `kernels` on the stream that runs the launch, makes
  // the user streams wait for it, and keeps the launch (in flight, or with the capturing graph). On failure the
  // launch's memory is released.
  Status submit(std::unique_ptr<Launch> launch, const std::vector<void*>& streams, const CaptureState& cap,
                const std::function<Status(CUstream)>& kernels);
  Status statusOf(const Launch& l) const;  // what a launch's status words say (kernel_status.h)
  // Whether every launch in flight finished within BRAID_TIMEOUT (mu_ held).
  bool inflightDone() const;
  Status pollLocked();  // pollAsync with mu_ held
  void release(Launch& l);

  std::shared_ptr<void> primary_;  // a primary context braid retained (released last, after every member below)
  const CuApi* api_;
  CUcontext ctx_;
  int device_;
  int nvlsHostMode_ = 0;  // BackendChoice::nvlsHostMode
  uint64_t pciId_ = 0;
  int smCount_ = 0;
  int rank_ = 0;
  WaitContext wait_;
  AllGatherFn allGather_;  // the communicator's, from init
  int threads_ = 0;        // per CTA
  CUstream stream_ = nullptr;
  uint32_t* abortWord_ = nullptr;  // pinned
  std::mutex addMu_;               // one addSignal at a time: its arguments' area
  char* addArea_ = nullptr;        // pinned, made at the first addSignal
  std::unique_ptr<PinnedFifos> fifos_;
  std::unique_ptr<LaunchMemory> launchMemory_;  // launches' work images and device blocks, reused
  std::unique_ptr<CudaDeviceMemory> deviceMemory_;
  bool directWanted_ = false;                  // BRAID_DIRECT agreed, no network (init)
  int nChannels_ = 1;                          // the communicator's channels: a direct launch's lanes
  std::unique_ptr<CudaDirect> direct_;         // NVLS-style collectives' areas (initDirect), null when not set up
  std::unique_ptr<ConnectorCursors> cursors_;  // after launchMemory_: its blocks are the launch memory's
  std::vector<Copy> copies_;                   // staged by stageCopy, run after the next launch's stream join
  std::mutex mu_;                              // guards inflight_ and failed_
  std::deque<std::unique_ptr<Launch>> inflight_;
  std::vector<std::shared_ptr<Captured>> captured_;
  uint64_t issued_ = 0;                // launches made (the owner's thread)
  std::atomic<uint64_t> finished_{0};  // launches finished (launchesFinished)
  std::string peerGone_;               // "rank 1 (process 4242) exited", set by the watch (guarded by mu_)
  std::unique_ptr<PeerWatch> watch_;   // peers' processes on this host, while work is in flight
  Status failed_;                      // the first asynchronous failure: the communicator is unusable after it
};

}  // namespace braid
