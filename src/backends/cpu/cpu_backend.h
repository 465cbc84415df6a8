// The host-memory backend: runs plans with the step engine on CPU threads (the calling thread for small groups,
// a worker thread per channel for large ones), NVLS-style collectives through a shared-memory segment of the local
// ranks (direct_exec.h), and connects over the in-process, shared-memory and network transports.
#pragma once

#include <memory>
#include <vector>

#include "src/backends/backend.h"
#include "src/backends/cpu/direct_exec.h"
#include "src/backends/cpu/executor.h"

namespace braid {

// The host form of one planned work's item: program, buffers, op, protocol and each step's connectors; no staging
// or scratch (each backend gives its own). Shared by the CPU and CUDA backends.
Result<WorkItem> plannedWorkItem(const PlannedWork& pw, const LinkLookup& link, int rank);

class CpuBackend final : public Backend {
 public:
  CpuBackend() = default;
  ~CpuBackend() override;

  BackendKind kind() const override { return BackendKind::kHost; }
  int maxChannels(const std::vector<RankResources>& ranks) const override;
  uint64_t persistentBytes() const override;
  Status init(const BackendInitContext& ctx) override;
  BackendCaps caps() const override;
  const std::vector<Transport*>& transports() const override;
  const FifoMemory& fifoMemory() const override { return hostFifoMemory(); }
  const void* stageCopy(const void* src, size_t bytes) override;
  void releaseLaunchMemory() override;
  Status launchFifo(const std::vector<FifoLaunch>& group) override;
  Status launchDirect(const std::vector<DirectBatch>& group) override;
  Status runAlone(const ReduceOp& op, void* recv, const void* send, size_t count) override;
  void markAborted(const std::string& why) override;
  // Windows on host memory: ncclMemAlloc's memfd reaches the processes of this host; other memory only this
  // process's ranks. One-sided steps run on the calling thread.
  Result<WindowDesc> exportWindow(const void* base, size_t bytes, int otherProcesses) override;
  WindowPeer importWindow(const WindowDesc& mine, const WindowDesc& theirs) override;
  Result<void*> allocWindowMemory(size_t bytes) override;
  void freeWindowMemory(void* p) override;
  Status runRma(const std::vector<RmaStep>& steps, void* stream) override;

 private:
  struct Channel {
    std::unique_ptr<ChannelWorker> worker;
    ChannelWork work;
  };
  // Turns this communicator's planned works into its channels' work queues (connectors resolved, scratch given).
  Status materialize(const FifoLaunch& launch);
  static Status runDirectOne(CpuBackend* b, DirectOp& op);

  int rank_ = 0;
  int homeCpu_ = -1;  // the CPU this rank's collectives run on; -1: wherever the scheduler puts them
  WaitContext wait_;  // the communicator's deadline context, with the spin count this backend settled on
  size_t inlineBytes_ = 0;
  std::vector<Channel> channels_;
  std::unique_ptr<DirectGroup> direct_;  // null when the ranks cannot share memory or BRAID_DIRECT=0
  std::vector<std::unique_ptr<char[]>> staging_;
};

}  // namespace braid
