#include "src/backends/cpu/direct_exec.h"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

#include "src/backends/common/direct_engine.h"
#include "src/backends/cpu/host_cta.h"
#include "src/common/cma.h"
#include "src/common/logging.h"
#include "src/common/wait.h"

namespace braid {
namespace {

constexpr size_t kSlotBytes = 512;
// Inputs up to kLineStageBytes travel in lines that carry their own generation (StageLine): a reader polls every
// line of every peer in one pass, so the lines come over together, in the time of one cache-line transfer, where a
// counter followed by the data would take two in a row.
constexpr size_t kLineData = 56;
constexpr size_t kStageLines = 8;
constexpr size_t kLineStageBytes = kLineData * kStageLines;
constexpr size_t kTileBytes = 16 << 10;  // reductions accumulate a tile in L1, then store it to every destination
// With a peer's private memory in the operation, a tile costs a system call per remote source and destination:
// larger tiles (still in L2) keep the calls a small part of the time.
constexpr size_t kCmaTileBytes = 256 << 10;
constexpr int kYieldsBeforeSleep = 16;
constexpr int kPeerCheckMs = 10;                      // how often a stalled wait looks for dead or aborted peers
constexpr long kSleepNanoseconds = 10 * 1000 * 1000;  // a futex sleep is bounded, so aborts and deadlines are seen

void futexWait(uint32_t* word, uint32_t expected) {
  timespec ts{0, kSleepNanoseconds};
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futexWakeAll(uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Bytes of input each rank contributes: a reduce-scatter's is one block per rank.
size_t inputBytes(const DirectRequest& req, int nranks) {
  const size_t elems =
      req.coll == DirectCollective::kReduceScatter ? req.count * static_cast<size_t>(nranks) : req.count;
  return elems * dtypeSize(req.op.dtype);
}

size_t linesFor(size_t bytes) {
  return (bytes + kLineData - 1) / kLineData;
}

}  // namespace

struct StageLine {
  char data[kLineData];
  uint32_t gen;  // written after the data (release), read before it (acquire)
  uint32_t pad;
};
static_assert(sizeof(StageLine) == 64, "a stage line is one cache line");

// One rank's part of the control segment. Counters live on their own cache lines: peers poll them.
struct DirectGroup::Slot {
  uint32_t posted;  // the generation protocol's words (direct_engine.h's GenCounters), plain as a kernel's would be
  std::atomic<uint32_t> postedWaiters;
  std::atomic<uint32_t> aborted;
  uint32_t pad0;
  char pad2[64 - 16];
  uint32_t done;
  std::atomic<uint32_t> doneWaiters;
  char pad1[64 - 8];
  MemHandle send;
  MemHandle recv;
  // This rank's pre-multiplication scalar (ncclRedOpCreatePreMulSum is per rank), by generation parity: a staged
  // operation has no closing barrier, so a peer may still read the previous one's while this one is posted.
  uint64_t scalar[2];
  char failure[192];  // why this rank aborted (written before `aborted`), quoted by the peers it stops
};

Result<std::unique_ptr<DirectGroup>> DirectGroup::create(const AllGatherFn& allGather,
                                                         const std::vector<PeerInfo>& peers, int rank,
                                                         size_t stageBytes, bool cma, bool spinOnLines) {
  const int n = static_cast<int>(peers.size());
  // Every rank evaluates the same facts, so all return a group or all return none.
  bool oneHost = true;
  for (const PeerInfo& p : peers) oneHost = oneHost && p.hostHash == peers[0].hostHash;
  if (n < 2 || !oneHost) return std::unique_ptr<DirectGroup>();

  std::unique_ptr<DirectGroup> g(new DirectGroup());
  g->rank_ = rank;
  g->nranks_ = n;
  g->peers_ = peers;
  g->stageBytes_ = (stageBytes + 63) / 64 * 64;
  g->spinOnLines_ = spinOnLines;
  g->slotBytes_ = kSlotBytes;
  g->bytes_ = kSlotBytes * static_cast<size_t>(n) + 2 * g->stageBytes_ * static_cast<size_t>(n) +
              2 * kStageLines * sizeof(StageLine) * static_cast<size_t>(n);
  g->tile_.resize(kTileBytes);

  BRAID_ASSIGN_OR_RETURN(g->segment_, SharedSegment::create(allGather, rank, n, g->bytes_));
  if (!g->segment_) return std::unique_ptr<DirectGroup>();
  g->base_ = g->segment_->base();
  if (cma) BRAID_RETURN_IF_ERROR(g->probeCma(allGather));  // off (the default): no probe, no exchange
  return g;
}

Status DirectGroup::probeCma(const AllGatherFn& allGather) {
  // Each rank reads every other process's probe word; all agree on the outcome, so every rank takes the same
  // path for the same buffers.
  struct Probe {
    int32_t pid;
    int32_t ok;
    uint64_t addr;
    uint64_t value;
  };
  const int n = nranks_;
  probe_ = 0xB7A1D00000000000ull + static_cast<uint64_t>(rank_);
  std::vector<Probe> all(static_cast<size_t>(n));
  all[static_cast<size_t>(rank_)] =
      Probe{static_cast<int32_t>(getpid()), 1, reinterpret_cast<uint64_t>(&probe_), probe_};
  BRAID_RETURN_IF_ERROR(allGather(all.data(), sizeof(Probe)).withContext("cross-memory attach probe"));
  std::string why;
  for (int p = 0; p < n && why.empty(); ++p) {
    const Probe& q = all[static_cast<size_t>(p)];
    if (q.pid == static_cast<int32_t>(getpid())) continue;
    uint64_t v = 0;
    Status st = cmaRead(q.pid, &v, reinterpret_cast<const void*>(q.addr), sizeof(v));
    if (st.isOk() && v != q.value)
      st = internalError("read %llx, expected %llx", (unsigned long long)v, (unsigned long long)q.value);
    if (!st.isOk()) why = strPrintf("rank %d: %s", p, st.message().c_str());
  }
  all[static_cast<size_t>(rank_)].ok = why.empty() ? 1 : 0;
  BRAID_RETURN_IF_ERROR(allGather(all.data(), sizeof(Probe)).withContext("cross-memory attach probe"));
  cma_ = true;
  for (const Probe& q : all) cma_ = cma_ && q.ok != 0;
  if (!why.empty()) {
    BRAID_INFO(kLogInit | kLogShm,
               "rank %d: cross-memory attach unavailable (%s): private (malloc) buffers of other processes take the "
               "ring",
               rank_, why.c_str());
  } else if (!cma_) {
    BRAID_INFO(kLogInit | kLogShm,
               "rank %d: cross-memory attach refused to another rank: private (malloc) buffers of other processes "
               "take the ring",
               rank_);
  } else {
    BRAID_INFO(kLogInit | kLogShm, "rank %d: cross-memory attach to every process of the host (BRAID_CMA=1)", rank_);
  }
  return Status::ok();
}

DirectGroup::~DirectGroup() = default;

DirectGroup::Slot& DirectGroup::slot(int r) const {
  static_assert(sizeof(Slot) <= kSlotBytes, "slot too large");
  return *reinterpret_cast<Slot*>(base_ + kSlotBytes * static_cast<size_t>(r));
}

char* DirectGroup::stage(int r, uint32_t gen, size_t bytes) {
  // Two stages per rank, by generation parity: a rank writes stage g+2 only after every peer posted g+1, which
  // each does after it finished reading stage g. So staged operations need no closing barrier. (The same holds for
  // the lines: a rank reads every peer's lines of g+1 before it posts g+2.)
  static_assert(offsetof(Slot, done) == 64, "the posted and done counters on lines of their own");
  if (lined(bytes)) return lineCopy_.data() + static_cast<size_t>(r) * bytes;
  return base_ + kSlotBytes * static_cast<size_t>(nranks_) + (2 * static_cast<size_t>(r) + (gen & 1)) * stageBytes_;
}

bool DirectGroup::lined(size_t bytes) const {
  return bytes <= kLineStageBytes && bytes <= stageBytes_;
}

StageLine* DirectGroup::lines(int r, uint32_t gen) const {
  const size_t n = static_cast<size_t>(nranks_);
  char* at = base_ + kSlotBytes * n + 2 * stageBytes_ * n +
             (2 * static_cast<size_t>(r) + (gen & 1)) * kStageLines * sizeof(StageLine);
  return reinterpret_cast<StageLine*>(at);
}

Status DirectGroup::waitLines(uint32_t gen, size_t bytes, const WaitContext& ctx) {
  const size_t count = linesFor(bytes);
  // Where this rank has a CPU of its own, first every line of every peer in each pass: the loads are independent, so
  // a pass waits for one transfer.
  bool ready = false;
  for (int spin = 0; spinOnLines_ && spin < ctx.spinCount && !ready; ++spin) {
    ready = true;
    for (int p = 0; p < nranks_; ++p) {
      const StageLine* l = lines(p, gen);
      for (size_t i = 0; i < count; ++i) ready = (loadAcquire(&l[i].gen) == gen) & ready;
    }
    if (!ready) cpuRelax();
  }
  // Then (or at once) peer by peer, with waitAll's spin, yield and sleep, its deadline and failure checks.
  if (!ready) BRAID_RETURN_IF_ERROR(waitAll(false, gen, ctx, count));
  lineCopy_.resize(static_cast<size_t>(nranks_) * bytes);
  for (int p = 0; p < nranks_; ++p) {
    const StageLine* l = lines(p, gen);
    char* to = lineCopy_.data() + static_cast<size_t>(p) * bytes;
    for (size_t i = 0, at = 0; at < bytes; ++i, at += kLineData) {
      (void)loadAcquire(&l[i].gen);  // orders this read after the line's generation (seen above)
      std::memcpy(to + at, l[i].data, std::min(kLineData, bytes - at));
    }
  }
  return Status::ok();
}

bool DirectGroup::staged(const DirectRequest& req, int nranks) const {
  return inputBytes(req, nranks) <= stageBytes_;
}

Status DirectGroup::post(const DirectRequest& req, const WaitContext& /*ctx*/) {
  const uint32_t gen = ++gen_;
  const size_t es = dtypeSize(req.op.dtype);
  const size_t n = static_cast<size_t>(nranks_);
  const size_t sendBytes = inputBytes(req, nranks_);
  const size_t recvElems = req.coll == DirectCollective::kAllGather ? req.count * n : req.count;
  Slot& mine = slot(rank_);
  // Only PreMulSum has a scalar (every rank runs the same operator): other operations leave its line alone, so the
  // peers' reads of it do not put a second cache-line transfer on the latency path.
  if (req.op.kind == OpKind::kPreMulSum) mine.scalar[gen & 1] = req.op.scalar;
  if (lined(sendBytes)) {
    StageLine* l = lines(rank_, gen);
    const char* from = static_cast<const char*>(req.send);
    for (size_t i = 0, at = 0; at < sendBytes; ++i, at += kLineData) {
      std::memcpy(l[i].data, from + at, std::min(kLineData, sendBytes - at));
      storeRelease(&l[i].gen, gen);
    }
  } else if (staged(req, nranks_)) {
    std::memcpy(stage(rank_, gen, sendBytes), req.send, sendBytes);
  } else {
    mine.send = describeBuffer(req.send, sendBytes);
    mine.recv = describeBuffer(req.recv, recvElems * es);
  }
  publish(counters(false), mine.postedWaiters, gen);
  return Status::ok();
}

void DirectGroup::markAborted(const std::string& why) {
  Slot& mine = slot(rank_);
  if (mine.aborted.load(std::memory_order_acquire) == 0) {
    snprintf(mine.failure, sizeof(mine.failure), "%s", why.c_str());
  }
  mine.aborted.store(1, std::memory_order_seq_cst);
  // Wake sleepers on both counters: they re-check the aborted flags.
  futexWakeAll(&mine.posted);
  futexWakeAll(&mine.done);
}

Status DirectGroup::peerFailure(const WaitContext& ctx) const {
  // A peer that died without marking itself aborted is the cause; peers that failed because of it mark
  // themselves aborted before they exit, so report the silent death first.
  for (int q = 0; q < nranks_; ++q) {
    const pid_t pid = peers_[static_cast<size_t>(q)].pid;
    if (q == rank_ || pid == getpid() || slot(q).aborted.load(std::memory_order_acquire) != 0) continue;
    if (processGone(pid)) {
      return remoteError("rank %d: peer rank %d (pid %d on %s) died during a direct collective", ctx.rank, q,
                         static_cast<int>(pid), peers_[static_cast<size_t>(q)].hostname);
    }
  }
  for (int q = 0; q < nranks_; ++q) {
    if (q != rank_ && slot(q).aborted.load(std::memory_order_acquire) != 0) {
      const char* why = slot(q).failure;
      const std::string text(why, strnlen(why, sizeof(slot(q).failure)));
      return remoteError("rank %d: peer rank %d (%s) failed and abandoned the direct collective%s%s", ctx.rank, q,
                         peers_[static_cast<size_t>(q)].hostname, text.empty() ? "" : ": ", text.c_str());
    }
  }
  return Status::ok();
}

bool DirectGroup::allPosted() const {
  return counters(false).firstBehind(gen_) < 0;
}

GenCounters DirectGroup::counters(bool done) const {
  return GenCounters{base_ + (done ? offsetof(Slot, done) : offsetof(Slot, posted)), kSlotBytes, nranks_};
}

void DirectGroup::publish(const GenCounters& words, std::atomic<uint32_t>& waiters, uint32_t gen) const {
  // A sleeper adds itself to `waiters`, then re-reads the word: with both sides sequentially consistent, one of the
  // two sees the other's store.
  storeSeqCst(words.at(rank_), gen);
  if (waiters.load(std::memory_order_seq_cst) != 0) futexWakeAll(words.at(rank_));
}

Status DirectGroup::checkStalled(const WaitContext& ctx, bool timedOut) const {
  BRAID_RETURN_IF_ERROR(peerFailure(ctx));
  if (!timedOut) return Status::ok();
  return remoteError(
      "rank %d: peers did not reach this direct collective (direct-path generation %u) within BRAID_TIMEOUT=%g s",
      ctx.rank, gen_, ctx.timeoutSec);
}

Status DirectGroup::waitAll(bool done, uint32_t gen, const WaitContext& ctx, size_t lineCount) const {
  // Peer by peer; a peer that arrives is progress, so each gets the spin and yield budget anew and the stall clock
  // restarts (the per-peer policy this wait had before it ran on WaitLoop).
  WaitLoop wait(ctx, std::chrono::milliseconds(kPeerCheckMs));
  const GenCounters words = counters(done);
  for (int p = 0; p < nranks_; ++p) {
    Slot& s = slot(p);
    uint32_t* word = words.at(p);
    std::atomic<uint32_t>& waiters = done ? s.doneWaiters : s.postedWaiters;
    // Past the spin, yield a few times, then sleep on the counter's futex (bounded, so abort and deadline are
    // seen); the waiter count lets the poster skip the wake-up system call when nobody sleeps.
    auto sleep = [&](int round) {
      if (round < kYieldsBeforeSleep) {
        sched_yield();
        return;
      }
      waiters.fetch_add(1, std::memory_order_seq_cst);
      const uint32_t cur = loadSeqCst(word);
      if (!genReached(cur, gen)) futexWait(word, cur);
      waiters.fetch_sub(1, std::memory_order_seq_cst);
    };
    auto check = [&](bool timedOut) -> Status {
      BRAID_RETURN_IF_ERROR(peerFailure(ctx));
      if (!timedOut) return Status::ok();
      return remoteError(
          "rank %d: peer rank %d did not reach this direct collective (direct-path generation %u) within "
          "BRAID_TIMEOUT=%g s",
          ctx.rank, p, gen, ctx.timeoutSec);
    };
    // A peer's lines, where the operation's input travels in them: they come before its posted counter, and with
    // the data (the sleep above still waits on the counter, which follows them).
    const StageLine* l = lines(p, gen);
    auto arrived = [&] {
      if (lineCount == 0) return genReached(loadAcquire(word), gen);
      bool all = true;
      for (size_t i = 0; i < lineCount; ++i) all = (loadAcquire(&l[i].gen) == gen) & all;
      return all;
    };
    while (!arrived()) {
      Status st = wait.idle(check, sleep);
      if (!st.isOk()) {
        if (ctx.aborted()) slot(rank_).aborted.store(1, std::memory_order_release);
        return st;
      }
    }
    wait.progressed();
  }
  return Status::ok();
}

Status DirectGroup::execute(const DirectRequest& req, const WaitContext& ctx, bool* ran) {
  *ran = false;
  needEndWait_ = false;
  const uint32_t gen = gen_;
  const int n = nranks_;
  if (lined(inputBytes(req, n))) {
    BRAID_RETURN_IF_ERROR(waitLines(gen, inputBytes(req, n), ctx));
  } else {
    BRAID_RETURN_IF_ERROR(waitAll(false, gen, ctx));
  }
  if (staged(req, n) && req.coll != DirectCollective::kAllGather) {
    reduceStaged(req, gen);
    *ran = true;
    return Status::ok();
  }
  srcs_.assign(static_cast<size_t>(n), nullptr);
  dsts_.assign(static_cast<size_t>(n), nullptr);
  std::vector<const char*>& srcs = srcs_;
  std::vector<char*>& dsts = dsts_;
  std::vector<DirectStep>& steps = steps_;
  steps.clear();
  const char* what = req.coll == DirectCollective::kReduceScatter ? "reduce-scatter"
                     : req.coll == DirectCollective::kAllGather   ? "all-gather"
                                                                  : "one-shot all-reduce";
  srcPid_.assign(static_cast<size_t>(n), 0);
  dstPid_.assign(static_cast<size_t>(n), 0);
  int remote = 0;  // buffers in other processes' private memory
  if (staged(req, n)) {
    // Inputs are in the segment; each rank writes only its own output.
    const size_t sendBytes = inputBytes(req, n);
    for (int p = 0; p < n; ++p) srcs[static_cast<size_t>(p)] = stage(p, gen, sendBytes);
    dsts[static_cast<size_t>(rank_)] = static_cast<char*>(req.recv);
    if (req.coll == DirectCollective::kAllGather) {
      for (int p = 0; p < n; ++p) {
        steps.push_back(DirectStep{DirectKind::kCopy, p, 0, req.count, rank_, static_cast<size_t>(p) * req.count});
      }
    } else {
      const DirectCollective c =
          req.coll == DirectCollective::kReduceScatter ? req.coll : DirectCollective::kAllReduceOneShot;
      buildDirectProgram(c, n, rank_, req.count, &steps);
    }
  } else {
    // In place on the user's buffers: only when every rank can reach every other rank's (the same decision on
    // every rank, from the same published handles).
    bool samePid = true;
    bool shareable = true;
    for (int p = 0; p < n; ++p) {
      const Slot& s = slot(p);
      samePid = samePid && s.send.pid == slot(0).send.pid;
      shareable = shareable && s.send.fd >= 0 && s.recv.fd >= 0;
    }
    if (!samePid && !shareable && !cma_) {
      BRAID_INFO(kLogColl, "rank %d: op %u: buffers of some rank are private memory (not ncclMemAlloc): ring", rank_,
                 gen);
      // The caller runs the ring; finish() still follows, and waits: a peer may still be reading this rank's
      // published handles, which the next post would overwrite.
      needEndWait_ = true;
      return Status::ok();
    }
    ++epoch_;
    // A buffer this process reaches: its own, or mapped. Another process's private memory stays an address there
    // (its pid in *pid), reached with cross-memory attach.
    auto place = [&](const MemHandle& h, pid_t* pid) -> Result<char*> {
      if (h.fd >= 0 || h.pid == getpid()) return mappings_.resolve(h, epoch_);
      *pid = h.pid;
      ++remote;
      return reinterpret_cast<char*>(h.addr);
    };
    for (int p = 0; p < n; ++p) {
      BRAID_ASSIGN_OR_RETURN(srcs[static_cast<size_t>(p)], place(slot(p).send, &srcPid_[static_cast<size_t>(p)]));
      BRAID_ASSIGN_OR_RETURN(dsts[static_cast<size_t>(p)], place(slot(p).recv, &dstPid_[static_cast<size_t>(p)]));
    }
    const DirectCollective c =
        req.coll == DirectCollective::kAllReduceOneShot ? DirectCollective::kAllReduceTwoShot : req.coll;
    buildDirectProgram(c, n, rank_, req.count, &steps);
    if (c == DirectCollective::kAllReduceTwoShot) what = "two-shot all-reduce";
    needEndWait_ = true;
  }
  BRAID_INFO(
      kLogColl, "rank %d: op %u: direct %s of %zu elements, %s%s", rank_, gen, what, req.count,
      needEndWait_ ? "on the buffers" : "staged",
      remote > 0 ? strPrintf(" (%d in other processes' private memory: cross-memory attach)", remote).c_str() : "");
  BRAID_RETURN_IF_ERROR(runSteps(req, remote > 0));
  *ran = true;
  return Status::ok();
}

void DirectGroup::reduceStaged(const DirectRequest& req, uint32_t gen) {
  // The latency path: every input is in the segment, so the one step (every rank's stage, or its piece of them, in
  // rank order) reduces straight into the output, with no program, tile or per-peer bookkeeping.
  const int n = nranks_;
  const size_t es = dtypeSize(req.op.dtype);
  const size_t sendBytes = inputBytes(req, n);
  const size_t at = req.coll == DirectCollective::kReduceScatter ? static_cast<size_t>(rank_) * req.count * es : 0;
  ops_.resize(static_cast<size_t>(n));  // (element by element below: assign's generic fill costs more at 2 ranks)
  tileSrcs_.resize(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    ops_[static_cast<size_t>(p)] = req.op;
    if (req.op.kind == OpKind::kPreMulSum) ops_[static_cast<size_t>(p)].scalar = slot(p).scalar[gen & 1];
    tileSrcs_[static_cast<size_t>(p)] = stage(p, gen, sendBytes);
  }
  BRAID_INFO(kLogColl, "rank %d: op %u: direct %s of %zu elements, staged", rank_, gen,
             req.coll == DirectCollective::kReduceScatter ? "reduce-scatter" : "one-shot all-reduce", req.count);
  DirectTileArgs tile;
  tile.srcs = tileSrcs_.data();
  tile.ops = ops_.data();
  tile.nranks = n;
  tile.at = at;
  tile.len = req.count;
  tile.acc = static_cast<char*>(req.recv);
  HostDataOps env;
  directReduceTile(HostCta{}, env, tile);
}

Result<const char*> DirectGroup::source(int p, size_t at, size_t bytes) {
  const pid_t pid = srcPid_[static_cast<size_t>(p)];
  const char* src = srcs_[static_cast<size_t>(p)] + at;
  if (pid == 0) return src;
  std::vector<char>& buf = fetch_[static_cast<size_t>(p)];
  if (buf.size() < bytes) buf.resize(std::max(bytes, kCmaTileBytes));
  BRAID_RETURN_IF_ERROR(
      cmaRead(pid, buf.data(), src, bytes).withContext(strPrintf("rank %d: rank %d's input", rank_, p)));
  return static_cast<const char*>(buf.data());
}

Status DirectGroup::store(int d, char* dst, const char* from, size_t bytes, bool streaming, bool inPlace) {
  const pid_t pid = dstPid_[static_cast<size_t>(d)];
  if (pid != 0) {
    return cmaWrite(pid, dst, from, bytes).withContext(strPrintf("rank %d: rank %d's output", rank_, d));
  }
  // In place (the destination is the source just read, so it is cached) ordinary stores are cheaper.
  if (streaming && !inPlace) {
    streamCopy(dst, from, bytes);
  } else if (dst != from) {
    std::memcpy(dst, from, bytes);
  }
  return Status::ok();
}

Status DirectGroup::runSteps(const DirectRequest& req, bool remote) {
  const std::vector<DirectStep>& steps = steps_;
  const std::vector<const char*>& srcs = srcs_;
  const std::vector<char*>& dsts = dsts_;
  const size_t es = dtypeSize(req.op.dtype);
  const int n = nranks_;
  const size_t tileBytes = remote ? kCmaTileBytes : kTileBytes;
  const size_t tileElems = std::max<size_t>(1, tileBytes / es);
  if (tile_.size() < tileElems * es) tile_.resize(tileElems * es);
  if (remote && fetch_.size() < static_cast<size_t>(n)) fetch_.resize(static_cast<size_t>(n));
  std::vector<ReduceOp>& ops = ops_;
  ops.assign(static_cast<size_t>(n), req.op);
  if (req.op.kind == OpKind::kPreMulSum) {
    for (int p = 0; p < n; ++p) ops[static_cast<size_t>(p)].scalar = slot(p).scalar[gen_ & 1];
  }
  bool streaming = false;
  for (const DirectStep& s : steps) streaming = streaming || s.count * es >= kStreamingStoreBytes;
  tileSrcs_.assign(static_cast<size_t>(n), nullptr);
  for (const DirectStep& s : steps) {
    const int d0 = s.dstRank < 0 ? 0 : s.dstRank;
    const int d1 = s.dstRank < 0 ? n : s.dstRank + 1;
    if (s.kind == DirectKind::kCopy) {
      // A copy from another process's memory comes through this process, a tile at a time.
      const bool srcRemote = srcPid_[static_cast<size_t>(s.srcRank)] != 0;
      const size_t chunk = srcRemote ? tileElems : s.count;
      for (size_t t = 0; t < s.count; t += chunk) {
        const size_t len = std::min(chunk, s.count - t);
        BRAID_ASSIGN_OR_RETURN(const char* src, source(s.srcRank, (s.srcOffset + t) * es, len * es));
        for (int d = d0; d < d1; ++d) {
          char* dst = dsts[static_cast<size_t>(d)] + (s.dstOffset + t) * es;
          BRAID_RETURN_IF_ERROR(store(d, dst, src, len * es, false, true));
        }
      }
      continue;
    }
    for (size_t t = 0; t < s.count; t += tileElems) {
      const size_t len = std::min(tileElems, s.count - t);
      char* acc = tile_.data();
      const size_t at = (s.srcOffset + t) * es;
      for (int p = 0; p < n; ++p) {
        BRAID_ASSIGN_OR_RETURN(tileSrcs_[static_cast<size_t>(p)], source(p, at, len * es));
      }
      // Always rank order 0..n-1: the result is bitwise the same whichever rank computes it, at any tiling.
      DirectTileArgs tile;
      tile.srcs = tileSrcs_.data();
      tile.ops = ops.data();
      tile.nranks = n;
      tile.at = 0;
      tile.len = len;
      tile.acc = acc;
      HostDataOps env;
      directReduceTile(HostCta{}, env, tile);
      for (int d = d0; d < d1; ++d) {
        char* dst = dsts[static_cast<size_t>(d)] + (s.dstOffset + t) * es;
        const bool inPlace = dstPid_[static_cast<size_t>(d)] == 0 && dst == srcs[static_cast<size_t>(d)] + at;
        BRAID_RETURN_IF_ERROR(store(d, dst, acc, len * es, streaming, inPlace));
      }
    }
  }
  if (streaming) streamFence();
  return Status::ok();
}

void DirectGroup::finishPost() {
  Slot& mine = slot(rank_);
  publish(counters(true), mine.doneWaiters, gen_);
}

Status DirectGroup::finishWait(const WaitContext& ctx) {
  if (!needEndWait_) return Status::ok();
  needEndWait_ = false;
  return waitAll(true, gen_, ctx);
}

}  // namespace braid
