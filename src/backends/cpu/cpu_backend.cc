#include "src/backends/cpu/cpu_backend.h"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "src/backends/common/step_engine.h"
#include "src/backends/cpu/reduce.h"
#include "src/common/logging.h"
#include "src/common/numa.h"
#include "src/common/thread_scratch.h"

namespace braid {
namespace {

// More ranks on a host than CPUs: a waiting rank's spinning only delays the rank it waits for (measured on 2 cores
// with 4 ranks: an 8-byte all-reduce takes 370 us with 2000 spins, 11 us with 20), so it yields early.
constexpr int kOversubscribedSpinCount = 20;
// Waiting on the network, spinning keeps the kernel from delivering packets: on a busy core, the softirq that moves
// a packet through veth and bridge is deferred to ksoftirqd until the spinner yields (measured between two
// namespaces on 2 cores: an 8-byte send/receive took 770 us spinning 2000 times, 44 us spinning 20).
constexpr int kNetSpinCount = 20;
// A thread the scheduler keeps moving off its CPU is moved back at most this often: the scheduler may insist.
constexpr auto kHomeMoveInterval = std::chrono::milliseconds(1);

// Keeps the calling thread on its rank's CPU (BackendInitContext::homeCpu). The scheduler can keep two ranks'
// threads on one CPU for a whole run while the other idles: each waits for the other at every step (measured on 2
// cores, 2 processes, 64 KB all-reduce on heap buffers: 0.3 GB/s in such runs, 7 GB/s otherwise, about half the
// runs each). Checked at every launch (sched_getcpu reads the vDSO); a thread that drives ranks with different CPUs
// is left where it is.
void stayOnHomeCpu(int cpu) {
  if (cpu < 0) return;
  struct Placement {
    int home = -1;
    bool mixed = false;
    std::chrono::steady_clock::time_point lastMove{};
  };
  Placement& placement = threadScratch<Placement, Placement>();
  int& home = placement.home;
  std::chrono::steady_clock::time_point& lastMove = placement.lastMove;
  if (placement.mixed) return;
  if (home >= 0 && home != cpu) {
    placement.mixed = true;
    return;
  }
  home = cpu;
  if (sched_getcpu() == cpu) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - lastMove < kHomeMoveInterval) return;
  lastMove = now;
  (void)moveThisThreadTo(cpu);
}

}  // namespace

CpuBackend::~CpuBackend() {
  // Workers first: they may be driving work that points into the backend's staging.
  for (Channel& ch : channels_) ch.worker.reset();
}

Status CpuBackend::init(const BackendInitContext& ctx) {
  rank_ = ctx.rank;
  homeCpu_ = ctx.homeCpu;
  if (homeCpu_ >= 0) {
    BRAID_INFO(kLogInit,
               "rank %d: collectives run on CPU %d, one of its own among the host's %d ranks (BRAID_PLACE_THREADS=0 "
               "leaves them to the scheduler)",
               ctx.rank, homeCpu_, ctx.localRanks);
  }
  wait_ = ctx.wait;
  wait_.rank = ctx.rank;
  wait_.spinCount = std::max(1, wait_.spinCount);
  inlineBytes_ = ctx.inlineBytes;
  channels_.resize(static_cast<size_t>(ctx.nChannels));
  for (int c = 0; c < ctx.nChannels; ++c) {
    channels_[static_cast<size_t>(c)].worker = std::make_unique<ChannelWorker>(c, ctx.placeCpus);
  }
  if (ctx.localRanks > ctx.cpus && !ctx.spinCountSet) {
    wait_.spinCount = std::min(wait_.spinCount, kOversubscribedSpinCount);
    BRAID_INFO(kLogInit, "rank %d: %d local ranks on %d CPUs, spinning %d times before yielding (BRAID_SPIN_COUNT)",
               ctx.rank, ctx.localRanks, ctx.cpus, wait_.spinCount);
  }
  if (ctx.netPeers && !ctx.spinCountSet) wait_.spinCount = std::min(wait_.spinCount, kNetSpinCount);
  if (ctx.direct && !ctx.netPeers) {  // direct segments are shared memory: one host, shm allowed
    BRAID_ASSIGN_OR_RETURN(direct_, DirectGroup::create(ctx.allGather, *ctx.peers, ctx.rank, ctx.directStageBytes,
                                                        ctx.cma, ctx.localRanks <= ctx.cpus));
    if (direct_) {
      BRAID_INFO(kLogInit, "rank %d: direct (NVLS-style) collectives on, inputs up to %zu bytes staged", ctx.rank,
                 direct_->stageBytes());
    }
  }
  return Status::ok();
}

int CpuBackend::maxChannels(const std::vector<RankResources>& ranks) const {
  // A channel is a worker thread per rank: more threads than CPUs on any host only queue behind each other
  // (2 ranks on 2 cores: 1 channel moves 3.9 GB/s at 16 MB, 2 channels 2.4), so channels per rank are capped at
  // the CPUs of the most crowded host's ranks.
  int cap = INT_MAX;
  for (const RankResources& r : ranks) cap = std::min(cap, std::max(1, r.cpus / std::max(1, r.ranksOnHost)));
  return cap;
}

uint64_t CpuBackend::persistentBytes() const {
  return direct_ ? direct_->ownedBytes() : 0;
}

BackendCaps CpuBackend::caps() const {
  BackendCaps c;
  c.proto[static_cast<int>(ProtoId::kLL)] = true;
  c.proto[static_cast<int>(ProtoId::kSimple)] = true;
  c.streams = false;
  c.direct = direct_ != nullptr;
  c.directStageBytes = direct_ ? direct_->stageBytes() : 0;
  c.runsAlone = true;
  return c;
}

const std::vector<Transport*>& CpuBackend::transports() const {
  return hostTransports();
}

const void* CpuBackend::stageCopy(const void* src, size_t bytes) {
  staging_.push_back(std::make_unique<char[]>(bytes));
  std::memcpy(staging_.back().get(), src, bytes);
  return staging_.back().get();
}

void CpuBackend::releaseLaunchMemory() {
  staging_.clear();
}

void CpuBackend::markAborted(const std::string& why) {
  if (direct_) direct_->markAborted(why);
}

Result<WorkItem> plannedWorkItem(const PlannedWork& pw, const LinkLookup& link, int rank) {
  WorkItem w;
  w.prog = &pw.prog;
  w.input = static_cast<const char*>(pw.input);
  w.output = static_cast<char*>(pw.output);
  w.elemSize = pw.elemSize;
  w.op = pw.op;
  w.proto = pw.proto;
  const size_t n = w.prog->steps.size();
  w.sendConn.assign(n, nullptr);
  w.recvConn.assign(n, nullptr);
  for (size_t s = 0; s < n; ++s) {
    const Step& st = w.prog->steps[s];
    if (st.sendPeer >= 0) w.sendConn[s] = link(pw.channel, st.sendPeer, w.prog->lane, true);
    if (st.recvPeer >= 0) w.recvConn[s] = link(pw.channel, st.recvPeer, w.prog->lane, false);
    if ((st.sendPeer >= 0 && w.sendConn[s] == nullptr) || (st.recvPeer >= 0 && w.recvConn[s] == nullptr)) {
      return internalError("rank %d: channel %d step %zu has no connector", rank, pw.channel, s);
    }
  }
  return w;
}

Status CpuBackend::materialize(const FifoLaunch& launch) {
  for (Channel& ch : channels_) ch.work.items.clear();
  for (const PlannedWork& pw : *launch.works) {
    if (pw.channel < 0 || static_cast<size_t>(pw.channel) >= channels_.size()) {
      return internalError("rank %d: planned work on channel %d of %zu", rank_, pw.channel, channels_.size());
    }
    if (pw.proto != ProtoId::kLL && pw.proto != ProtoId::kSimple) {
      return invalidUsage("rank %d: the host backend runs LL and Simple, not %s", rank_, protoName(pw.proto));
    }
    BRAID_ASSIGN_OR_RETURN(WorkItem w, plannedWorkItem(pw, launch.link, rank_));
    if (pw.outputScratchBytes > 0) {
      staging_.push_back(std::make_unique<char[]>(pw.outputScratchBytes));
      w.output = staging_.back().get();
    }
    if (w.proto == ProtoId::kLL) {
      w.llRecv.resize(pw.llStagingBytes);
      w.llSend.resize(pw.llStagingBytes);
    }
    channels_[static_cast<size_t>(pw.channel)].work.items.push_back(std::move(w));
  }
  for (Channel& ch : channels_) {
    ch.work.prepare();
    announceDemand(ch.work.flat);
  }
  return Status::ok();
}

Status CpuBackend::launchFifo(const std::vector<FifoLaunch>& group) {
  stayOnHomeCpu(static_cast<CpuBackend*>(group.front().backend)->homeCpu_);
  bool useWorkers = false;
  std::vector<ChannelWork*> inlineWork;
  for (const FifoLaunch& l : group) {
    auto* b = static_cast<CpuBackend*>(l.backend);
    BRAID_RETURN_IF_ERROR(b->materialize(l));
    for (Channel& ch : b->channels_) {
      if (!ch.work.items.empty()) inlineWork.push_back(&ch.work);
    }
    if (l.totalBytes >= b->inlineBytes_ && b->channels_.size() > 1) useWorkers = true;
  }
  Status result;
  if (!useWorkers) {
    // Small groups: the caller drives everything (a hand-off to a worker would cost more than the work).
    result = runChannels(inlineWork, static_cast<CpuBackend*>(group.front().backend)->wait_);
  } else {
    for (const FifoLaunch& l : group) {
      auto* b = static_cast<CpuBackend*>(l.backend);
      for (Channel& ch : b->channels_) {
        if (!ch.work.items.empty()) ch.worker->post(&ch.work, b->wait_);
      }
    }
    for (const FifoLaunch& l : group) {
      for (Channel& ch : static_cast<CpuBackend*>(l.backend)->channels_) {
        if (ch.work.items.empty()) continue;
        Status st = ch.worker->wait();
        if (result.isOk() && !st.isOk()) result = st;
      }
    }
  }
  for (const FifoLaunch& l : group) {
    for (Channel& ch : static_cast<CpuBackend*>(l.backend)->channels_) ch.work.items.clear();
  }
  return result;
}

Status CpuBackend::runAlone(const ReduceOp& op, void* recv, const void* send, size_t count) {
  copyLocal(op, recv, send, count, true);
  return Status::ok();
}

Status CpuBackend::runDirectOne(CpuBackend* b, DirectOp& op) {
  const WaitContext ctx = b->wait_;
  BRAID_RETURN_IF_ERROR(b->direct_->post(op.req, ctx));
  BRAID_RETURN_IF_ERROR(b->direct_->execute(op.req, ctx, &op.ran));
  if (!op.ran) BRAID_RETURN_IF_ERROR(op.noFallback);
  b->direct_->finishPost();
  return b->direct_->finishWait(ctx);
}

Status CpuBackend::launchDirect(const std::vector<DirectBatch>& group) {
  stayOnHomeCpu(static_cast<CpuBackend*>(group.front().backend)->homeCpu_);
  for (const DirectBatch& d : group) {
    if (static_cast<CpuBackend*>(d.backend)->direct_ == nullptr) {
      return internalError("rank %d: direct operations queued without a direct segment", rank_);
    }
  }
  // The latency path: one communicator with one operation, no bookkeeping.
  if (group.size() == 1 && group[0].ops->size() == 1) {
    return runDirectOne(static_cast<CpuBackend*>(group[0].backend), group[0].ops->front());
  }
  size_t rounds = 0;
  for (const DirectBatch& d : group) rounds = std::max(rounds, d.ops->size());
  // Phase by phase across communicators: posts never block, so one thread may drive several ranks of a clique.
  // Executes run in whichever order the communicators become ready (a fixed order could wait on one whose peers
  // are busy with another communicator this thread drives), and each signals done at once.
  for (size_t k = 0; k < rounds; ++k) {
    for (const DirectBatch& d : group) {
      auto* b = static_cast<CpuBackend*>(d.backend);
      if (k < d.ops->size()) BRAID_RETURN_IF_ERROR(b->direct_->post((*d.ops)[k].req, b->wait_));
    }
    struct ExecutedTag {};  // which batches ran this round: kept per thread, so a warm group allocates nothing
    std::vector<char>& executed = threadScratch<std::vector<char>, ExecutedTag>();
    executed.assign(group.size(), 0);
    size_t left = 0;
    for (const DirectBatch& d : group) left += k < d.ops->size() ? 1 : 0;
    // The first communicator's knobs pace the loop; each group's check names its own peers.
    const WaitContext ctx = static_cast<CpuBackend*>(group[0].backend)->wait_;
    WaitLoop wait(ctx);
    auto check = [&](bool timedOut) -> Status {
      for (const DirectBatch& d : group) {
        auto* b = static_cast<CpuBackend*>(d.backend);
        BRAID_RETURN_IF_ERROR(b->direct_->checkStalled(b->wait_, timedOut));
      }
      return Status::ok();
    };
    auto yield = [](int) { std::this_thread::yield(); };
    while (left > 0) {
      bool progressed = false;
      for (size_t x = 0; x < group.size(); ++x) {
        const DirectBatch& d = group[x];
        auto* b = static_cast<CpuBackend*>(d.backend);
        if (k >= d.ops->size() || executed[x] != 0) continue;
        // With one communicator left there is nothing to interleave: its execute may block.
        if (left > 1 && !b->direct_->allPosted()) continue;
        DirectOp& op = (*d.ops)[k];
        BRAID_RETURN_IF_ERROR(b->direct_->execute(op.req, b->wait_, &op.ran));
        if (!op.ran) BRAID_RETURN_IF_ERROR(op.noFallback);
        b->direct_->finishPost();
        executed[x] = 1;
        --left;
        progressed = true;
      }
      if (progressed || left == 0) {
        wait.progressed();
        continue;
      }
      Status st = wait.idle(check, yield);
      if (!st.isOk()) {
        if (ctx.aborted()) {
          for (const DirectBatch& d : group) static_cast<CpuBackend*>(d.backend)->direct_->markAborted(st.message());
        }
        return st;
      }
    }
    for (const DirectBatch& d : group) {
      auto* b = static_cast<CpuBackend*>(d.backend);
      if (k < d.ops->size()) BRAID_RETURN_IF_ERROR(b->direct_->finishWait(b->wait_));
    }
  }
  return Status::ok();
}

Result<WindowDesc> CpuBackend::exportWindow(const void* base, size_t bytes, int otherProcesses) {
  WindowDesc d;
  d.mem = describeBuffer(base, bytes);
  if (d.mem.fd < 0 && otherProcesses > 0) {
    BRAID_INFO(kLogReg,
               "rank %d: window buffer %p is private memory: ranks of other processes cannot map it (ncclMemAlloc "
               "memory they can)",
               rank_, base);
  }
  return d;
}

WindowPeer CpuBackend::importWindow(const WindowDesc& mine, const WindowDesc& theirs) {
  WindowPeer p;
  if (theirs.hostHash != mine.hostHash) {
    p.why = "it is on another host";
  } else if (theirs.pid == mine.pid) {
    p.at = reinterpret_cast<char*>(theirs.addr);
  } else if (theirs.mem.fd < 0) {
    p.why = strPrintf("it is private memory of process %d (windows shared between processes need ncclMemAlloc memory)",
                      static_cast<int>(theirs.pid));
  } else {
    Result<void*> m = mapPeerFd(theirs.mem.pid, theirs.mem.fd, theirs.mem.ino, theirs.mem.allocBytes, true);
    if (m.isOk()) {
      const size_t len = theirs.mem.allocBytes;
      p.held = std::shared_ptr<void>(m.value(), [len](void* q) { munmap(q, len); });
      p.at = static_cast<char*>(m.value()) + theirs.mem.offset;
    } else {
      p.why = m.status().message();
    }
  }
  return p;
}

Result<void*> CpuBackend::allocWindowMemory(size_t bytes) {
  bool shareable = false;
  return allocShareable(bytes, &shareable);  // zeroed
}

void CpuBackend::freeWindowMemory(void* p) {
  (void)freeShareable(p);
}

Status CpuBackend::runRma(const std::vector<RmaStep>& steps, void* stream) {
  for (const RmaStep& s : steps) {
    if (s.via != nullptr && s.kind != RmaStep::Kind::kWait) {
      BRAID_RETURN_IF_ERROR(s.via->send(s));
      continue;
    }
    if (s.kind == RmaStep::Kind::kPut && s.bytes > 0) memcpy(s.dst, s.src, s.bytes);
    if (s.kind != RmaStep::Kind::kWait) {
      __atomic_store_n(s.word, s.value, __ATOMIC_RELEASE);  // after the data: a peer that sees it sees the data
      continue;
    }
    WaitLoop wait(wait_);
    auto sleep = [](int round) {
      if (round < 64) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(round < 1024 ? 20 : 500));
      }
    };
    auto check = [&](bool timedOut) -> Status {
      // The peer's end is seen after everything it sent was applied: the word is read again after seeing it, so
      // signals that came just before it still satisfy the wait.
      auto arrived = [&] { return __atomic_load_n(s.word, __ATOMIC_ACQUIRE) >= s.value; };
      const int32_t pid = s.peer < wait_.nLocalPids && wait_.localPids != nullptr ? wait_.localPids[s.peer] : 0;
      if (pid != 0 && processGone(pid)) {
        if (arrived()) return Status::ok();
        return remoteError("rank %d: waiting for signal %llu from rank %d, whose process %d has exited", rank_,
                           static_cast<unsigned long long>(s.value), s.peer, static_cast<int>(pid));
      }
      if (s.via != nullptr) {
        Status health = s.via->health(s.peer);
        if (!health.isOk() && !arrived()) return health;
      }
      if (!timedOut) return Status::ok();
      return remoteError("rank %d: rank %d sent %llu signals, not the %llu awaited, within BRAID_TIMEOUT=%g s", rank_,
                         s.peer, static_cast<unsigned long long>(__atomic_load_n(s.word, __ATOMIC_ACQUIRE)),
                         static_cast<unsigned long long>(s.value), wait_.timeoutSec);
    };
    while (__atomic_load_n(s.word, __ATOMIC_ACQUIRE) < s.value) BRAID_RETURN_IF_ERROR(wait.idle(check, sleep));
  }
  return Status::ok();
}

}  // namespace braid
