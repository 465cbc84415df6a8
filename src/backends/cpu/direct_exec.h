// The CPU backend's NVLS-style ("direct") collectives: the local ranks of a communicator share one control
// segment, publish their buffers there, and each rank loads from and stores to its peers' buffers directly
// (algorithms/direct builds the steps). Small operations stage their inputs in the segment, so they work on any
// buffers; larger ones work in place on the user's buffers when every rank can reach every other rank's: threads
// of one process, ncclMemAlloc memory across processes (mapped), or private memory of another process through
// cross-memory attach (src/common/cma.h: one copy per tile read or written; only with BRAID_CMA=1 on every rank,
// and when every pair of processes may use it, probed at create), and otherwise fall back to the ring.
//
// One operation = post (publish buffers; non-blocking), execute (wait for every rank's post, then run this rank's
// steps), finish (signal done; then, for operations on the buffers themselves or falling back, wait until every
// rank is done, so no peer still reads a buffer or handle its owner may reuse; staged operations alternate stages
// by parity and need no wait; the smallest inputs travel in lines that carry their generation, so a peer's input
// and its arrival come over together). Posts never block, so one thread can drive several ranks of one communicator
// phase by phase.
// Waits spin briefly, then yield, then sleep on a futex; each checks abort, the deadline and peers' liveness.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "algorithms/direct/direct.h"
#include "src/backends/backend.h"
#include "src/backends/common/direct_engine.h"
#include "src/backends/cpu/executor.h"
#include "src/backends/cpu/reduce.h"
#include "src/common/shareable_mem.h"
#include "src/common/status.h"
#include "src/common/wait.h"
#include "transports/shm/shared_segment.h"
#include "transports/transport.h"

namespace braid {

struct StageLine;

class DirectGroup {
 public:
  // Collective over the communicator's ranks (allGather): rank 0 creates the segment, every rank maps it. Returns
  // nullptr (not an error) when the ranks cannot share memory (not all on one host, or /proc/<pid>/fd is not
  // reachable). cma: every rank set BRAID_CMA=1 (agreed at init); then create() probes cross-memory attach too.
  // spinOnLines: this rank waits for small inputs by polling their lines (one transfer); false where it shares its
  // CPU with other ranks, whose waits are the scheduler's: it waits on the posted counters, which yield sooner.
  static Result<std::unique_ptr<DirectGroup>> create(const AllGatherFn& allGather, const std::vector<PeerInfo>& peers,
                                                     int rank, size_t stageBytes, bool cma, bool spinOnLines = true);
  ~DirectGroup();

  // Phases of one operation (see the file comment). execute() sets *ran = false when the buffers turned out not
  // to be reachable by every rank; the caller then runs the operation another way (finish() is still required).
  Status post(const DirectRequest& req, const WaitContext& ctx);
  Status execute(const DirectRequest& req, const WaitContext& ctx, bool* ran);
  void finishPost();
  Status finishWait(const WaitContext& ctx);

  // Whether every rank has posted the current operation (execute() would not wait).
  bool allPosted() const;
  // The failure check of a caller polling several groups in its own WaitLoop: an error when a peer died or
  // aborted, or when the loop timed out (naming the operation).
  Status checkStalled(const WaitContext& ctx, bool timedOut) const;

  // Tells the peers this rank gave up on the communicator (an operation failed, `why`), so their waits end at once
  // and their errors quote it.
  void markAborted(const std::string& why);

  // Bytes of input a rank may stage in the segment (the small-operation path).
  size_t stageBytes() const { return stageBytes_; }
  // Bytes of the segment this rank created (rank 0 creates it, the others map it): ncclCommMemStats.
  size_t ownedBytes() const { return rank_ == 0 ? bytes_ : 0; }
  // Whether `req` takes the staged path (decided from sizes only, so every rank agrees).
  bool staged(const DirectRequest& req, int nranks) const;

 private:
  struct Slot;
  DirectGroup() = default;
  Slot& slot(int r) const;
  // Where rank r's staged `bytes` of input for generation gen are read (the same answer on every rank): its stage in
  // the segment, or, for inputs that travel in lines, this rank's copy of them (after waitLines).
  char* stage(int r, uint32_t gen, size_t bytes);
  // Whether an input of `bytes` travels in lines (StageLine): small enough, and staging is on.
  bool lined(size_t bytes) const;
  // Rank r's lines for generation gen (by parity, as the stages).
  StageLine* lines(int r, uint32_t gen) const;
  // Waits until every rank's lines of generation gen hold their input, then copies them to lineCopy_ (rank by
  // rank). Errors: waitAll's.
  Status waitLines(uint32_t gen, size_t bytes, const WaitContext& ctx);
  // The ranks' posted (done = false) or done generation words, and this rank's publication of one of them (waking
  // sleepers registered in `waiters`).
  GenCounters counters(bool done) const;
  void publish(const GenCounters& words, std::atomic<uint32_t>& waiters, uint32_t gen) const;
  // Until every rank's posted (done = false) or done counter reached gen; lineCount > 0: until every rank's first
  // lineCount lines of generation gen hold their input (posted only).
  Status waitAll(bool done, uint32_t gen, const WaitContext& ctx, size_t lineCount = 0) const;
  Status peerFailure(const WaitContext& ctx) const;
  // remote: some buffer of the operation is in another process's private memory (srcPid_ / dstPid_).
  Status runSteps(const DirectRequest& req, bool remote);
  // A staged all-reduce or reduce-scatter of generation gen, reduced in one pass into req.recv.
  void reduceStaged(const DirectRequest& req, uint32_t gen);
  // The cross-memory attach probe of create() when BRAID_CMA=1: every pair of processes can read each other's
  // memory.
  Status probeCma(const AllGatherFn& allGather);
  // The tile of rank p's source at byte offset `at` (its own memory, or read into fetch_[p]).
  Result<const char*> source(int p, size_t at, size_t bytes);
  // Stores `bytes` of `from` at rank d's destination `dst` (read from this process, or written into d's).
  Status store(int d, char* dst, const char* from, size_t bytes, bool streaming, bool inPlace);

  int rank_ = 0;
  int nranks_ = 0;
  std::vector<PeerInfo> peers_;
  size_t stageBytes_ = 0;
  size_t slotBytes_ = 0;
  std::unique_ptr<SharedSegment> segment_;  // the control segment every local rank maps (transports/shm)
  char* base_ = nullptr;                    // segment_->base()
  size_t bytes_ = 0;
  uint32_t gen_ = 0;
  uint64_t epoch_ = 0;  // operations that resolved peers' buffers (ages the mapping cache)
  bool needEndWait_ = false;
  bool spinOnLines_ = true;  // see create()
  PeerMappings mappings_;
  std::vector<char> tile_;
  std::vector<char> lineCopy_;  // every rank's input of a lined operation (waitLines)
  // Reused on every operation: the latency path allocates nothing.
  std::vector<const char*> srcs_;
  std::vector<char*> dsts_;
  std::vector<DirectStep> steps_;
  std::vector<ReduceOp> ops_;
  // Cross-memory attach: agreed at create; per operation, the process whose private memory srcs_[p] / dsts_[p]
  // name (0: an address of this process), and a tile buffer per rank to read remote sources into.
  bool cma_ = false;
  uint64_t probe_ = 0;
  std::vector<pid_t> srcPid_;
  std::vector<pid_t> dstPid_;
  std::vector<std::vector<char>> fetch_;
  std::vector<const char*> tileSrcs_;
};

}  // namespace braid
