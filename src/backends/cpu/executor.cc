#include "src/backends/cpu/executor.h"

#include <sched.h>
#include <time.h>

#include <cstring>

#include "src/common/logging.h"
#include "src/common/numa.h"
#include "src/common/wait.h"

namespace braid {
namespace {

bool opIsPlainCopy(const ReduceOp& op) {
  return op.kind != OpKind::kPreMulSum && op.kind != OpKind::kAvg;
}

// The op for combining two partial results: no pre-multiplication (each side already had it); avg keeps its
// post-op (the division at the final step).
ReduceOp combineOnly(const ReduceOp& op) {
  ReduceOp c = op;
  if (c.kind == OpKind::kPreMulSum) c.kind = OpKind::kSum;
  return c;
}

// Executes the current step of `w` if its slots are ready. Returns true when it did.
bool tryStep(WorkItem& w) {
  const Step& s = w.prog.steps[w.step];
  Connector* rc = w.recvConn[w.step];
  Connector* sc = w.sendConn[w.step];
  if (sc != nullptr) sc->drive();
  if (rc != nullptr) rc->drive();
  if (sc != nullptr && !sc->sendReady()) return false;

  size_t inOff = 0, outOff = 0, n = 0;
  w.prog.blockRange(w.tile, s.block, 0, &inOff, &n);
  w.prog.blockRange(w.tile, s.block, 1, &outOff, &n);
  const size_t es = w.elemSize;
  const char* in = w.input ? w.input + inOff * es : nullptr;
  char* out = w.output ? w.output + outOff * es : nullptr;
  const size_t bytes = n * es;
  const bool packed = s.op == StepOp::kSendPack || s.op == StepOp::kRecvPack;
  const std::vector<PackEntry>* pack = packed ? &w.prog.packs[static_cast<size_t>(s.block)] : nullptr;
  const size_t msgBytes = packed ? bytes * pack->size() : bytes;
  const char* rs = nullptr;
  char* ss = nullptr;
  // LL over a connector whose messages arrive whole (the network) uses its Simple slot (Connector::wholeMessages).
  const bool recvLines = w.ll && rc != nullptr && !rc->wholeMessages();
  const bool sendLines = w.ll && sc != nullptr && !sc->wholeMessages();
  if (w.ll) {
    // The slot is complete when every line carries this step's flag; lines already copied are not read again.
    if (recvLines && !llTryReadMessage(rc->llSlot(), w.llRecv.data(), msgBytes, rc->llFlagNow(), &w.llLinesDone)) {
      return false;
    }
    if (rc != nullptr && !recvLines && !rc->recvReady()) return false;
    rs = recvLines ? w.llRecv.data() : rc ? rc->recvSlot() : nullptr;
    ss = sendLines ? w.llSend.data() : sc ? sc->sendSlot() : nullptr;
  } else {
    if (rc != nullptr && !rc->recvReady()) return false;
    rs = rc ? rc->recvSlot() : nullptr;
    ss = sc ? sc->sendSlot() : nullptr;
  }

  if (n > 0) {
    switch (s.op) {
      case StepOp::kSend:
        copyLocal(w.op, ss, in, n, false);
        break;
      case StepOp::kSendFromOutput:
        memcpy(ss, out, bytes);
        break;
      case StepOp::kCopySend:
        copyLocal(w.op, ss, in, n, false);
        if (out != in) memcpy(out, ss, bytes);
        break;
      case StepOp::kRecv:
        memcpy(out, rs, bytes);
        break;
      case StepOp::kRecvSend:
        memcpy(ss, rs, bytes);
        break;
      case StepOp::kRecvCopySend:
        memcpy(out, rs, bytes);
        memcpy(ss, rs, bytes);
        break;
      case StepOp::kRecvReduceSend:
        reduceInto(w.op, ss, rs, in, n, false);
        break;
      case StepOp::kRecvReduceCopy:
        reduceInto(w.op, out, rs, in, n, true);
        break;
      case StepOp::kRecvReduceCopySend:
        reduceInto(w.op, out, rs, in, n, true);
        memcpy(ss, out, bytes);
        break;
      case StepOp::kCopy:
        if (out != in || !opIsPlainCopy(w.op)) copyLocal(w.op, out, in, n, true);
        break;
      case StepOp::kRecvReducePartial:
        reduceInto(w.op, out, rs, in, n, false);
        break;
      case StepOp::kRecvAccumulateSend:
        // The output block already holds this rank's pre-multiplied input: combine only.
        reduceInto(combineOnly(w.op), ss, rs, out, n, false);
        break;
      case StepOp::kRecvAccumulateCopySend:
        reduceInto(combineOnly(w.op), out, rs, out, n, true);
        memcpy(ss, out, bytes);
        break;
      case StepOp::kRecvAccumulateCopy:
        reduceInto(combineOnly(w.op), out, rs, out, n, true);
        break;
      case StepOp::kRecvAccumulate:
        reduceInto(combineOnly(w.op), out, rs, out, n, false);
        break;
      case StepOp::kSendPack:
      case StepOp::kRecvPack:
        for (size_t i = 0; i < pack->size(); ++i) {
          const PackEntry& e = (*pack)[i];
          size_t off = 0, cnt = 0;
          w.prog.blockRange(w.tile, e.block, e.buf, &off, &cnt);
          if (s.op == StepOp::kSendPack) {
            memcpy(ss + i * bytes, (e.buf == 0 ? w.input : w.output) + off * es, bytes);
          } else {
            memcpy(w.output + off * es, rs + i * bytes, bytes);
          }
        }
        break;
    }
  }
  if (w.ll) {
    w.llLinesDone = 0;
    if (sendLines) llWriteMessage(sc->llSlot(), ss, msgBytes, sc->llFlagNow());
  }
  if (rc != nullptr) rc->recvPost();
  if (sc != nullptr) {
    sc->sendPost(msgBytes);
    sc->drive();  // a network connection sends the slot now, not when its progress thread next looks
  }
  if (++w.step == w.prog.steps.size()) {
    w.step = 0;
    ++w.tile;
  }
  return true;
}

// Progresses every runnable item of one channel; returns true when anything moved.
bool progressChannel(ChannelWork& cw) {
  bool progress = false;
  for (size_t i = 0; i < cw.items.size(); ++i) {
    WorkItem& w = cw.items[i];
    if (w.done) continue;
    bool blocked = false;
    for (size_t b : w.blockers) {
      if (!cw.items[b].done) blocked = true;
    }
    if (blocked) continue;
    // A bounded burst keeps one large item from starving the others in the queue.
    for (int burst = 0; burst < 64; ++burst) {
      if (w.tile >= w.prog.numTiles()) break;
      if (!tryStep(w)) break;
      progress = true;
    }
    if (w.tile >= w.prog.numTiles()) {
      w.done = true;
      --cw.remaining;
      progress = true;
      // Its sends may still be in flight while this thread waits on other connectors (a send/receive pair): the
      // transport's own thread finishes them from now on.
      for (Connector* c : w.sendConn) {
        if (c) c->release();
      }
    }
  }
  return progress;
}

// The connector an unfinished item is waiting on, for error messages and liveness checks.
Connector* waitingOn(const ChannelWork& cw) {
  for (const WorkItem& w : cw.items) {
    if (w.done || w.tile >= w.prog.numTiles()) continue;
    Connector* rc = w.recvConn[w.step];
    Connector* sc = w.sendConn[w.step];
    if (sc != nullptr && !sc->sendReady()) return sc;
    // A ready LL slot would have been consumed.
    if (rc != nullptr && ((w.ll && !rc->wholeMessages()) || !rc->recvReady())) return rc;
  }
  return nullptr;
}

void markAllAborted(const std::vector<ChannelWork*>& works) {
  for (ChannelWork* cw : works) {
    for (WorkItem& w : cw->items) {
      if (w.done) continue;
      for (Connector* c : w.recvConn) {
        if (c) c->markAborted();
      }
      for (Connector* c : w.sendConn) {
        if (c) c->markAborted();
      }
    }
  }
}

std::string describePeer(const Connector* c) {
  const PeerInfo& p = c->peer();
  return strPrintf("rank %d (host %s, pid %d)", p.rank, p.hostname, static_cast<int>(p.pid));
}

Status checkPeers(const std::vector<ChannelWork*>& works, const ExecContext& ctx, bool timedOut) {
  // A process that died without marking its connectors aborted is the root cause to report; a peer that aborted
  // (and may have exited since) was only reacting to a failure.
  for (int pass = 0; pass < 3; ++pass) {
    for (ChannelWork* cw : works) {
      for (const WorkItem& w : cw->items) {
        if (w.done) continue;
        for (size_t i = 0; i < w.recvConn.size(); ++i) {
          for (Connector* c : {w.recvConn[i], w.sendConn[i]}) {
            if (c == nullptr) continue;
            if (pass == 0 && !c->peerAborted() && !c->peerAlive()) {
              return remoteError("rank %d: peer %s exited (process no longer exists) during the operation", ctx.rank,
                                 describePeer(c).c_str());
            }
            if (pass == 1 && c->peerAborted()) {
              const std::string why = c->failureText();
              if (!why.empty()) {
                return remoteError("rank %d: connection %s %s failed: %s", ctx.rank, c->isSend() ? "to" : "from",
                                   describePeer(c).c_str(), why.c_str());
              }
              return remoteError("rank %d: peer %s aborted or failed during the operation", ctx.rank,
                                 describePeer(c).c_str());
            }
            if (pass == 2 && !c->peerAlive()) {
              return remoteError("rank %d: peer %s exited (process no longer exists) during the operation", ctx.rank,
                                 describePeer(c).c_str());
            }
          }
        }
      }
    }
  }
  if (timedOut) {
    for (ChannelWork* cw : works) {
      if (Connector* c = waitingOn(*cw)) {
        return remoteError("rank %d: no progress for %.0f s waiting %s %s (BRAID_TIMEOUT)", ctx.rank, ctx.timeoutSec,
                           c->isSend() ? "for FIFO space at" : "for data from", describePeer(c).c_str());
      }
    }
    return remoteError("rank %d: no progress for %.0f s (BRAID_TIMEOUT)", ctx.rank, ctx.timeoutSec);
  }
  return Status::ok();
}

}  // namespace

void ChannelWork::prepare() {
  remaining = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    WorkItem& w = items[i];
    // A network connector posts receives only for messages the schedule will consume: one per tile per step
    // that receives on it.
    const size_t tiles = w.prog.numTiles();
    for (Connector* c : w.recvConn) {
      if (c != nullptr && c->demandDriven()) c->expectMessages(tiles);
    }
    w.tile = 0;
    w.step = 0;
    w.done = false;
    w.llLinesDone = 0;
    w.blockers.clear();
    ++remaining;
    for (size_t j = 0; j < i; ++j) {
      const WorkItem& e = items[j];
      bool shares = false;
      for (Connector* a : w.sendConn) {
        for (Connector* b : e.sendConn) shares |= (a != nullptr && a == b);
      }
      for (Connector* a : w.recvConn) {
        for (Connector* b : e.recvConn) shares |= (a != nullptr && a == b);
      }
      if (shares) w.blockers.push_back(j);
    }
  }
}

Status runChannels(const std::vector<ChannelWork*>& works, const ExecContext& ctx) {
  auto lastProgress = Clock::now();
  auto lastCheck = lastProgress;
  int idle = 0;
  while (true) {
    bool progress = false;
    bool done = true;
    for (ChannelWork* cw : works) {
      if (cw->remaining == 0) continue;
      progress |= progressChannel(*cw);
      if (cw->remaining != 0) done = false;
    }
    if (done) return Status::ok();
    if (progress) {
      idle = 0;
      continue;
    }
    // Spin briefly, then yield, then sleep: more ranks than cores must still progress.
    ++idle;
    if (idle < ctx.spinCount) {
      cpuRelax();
      continue;
    }
    if ((idle & 63) == 0 || idle == ctx.spinCount) {
      auto now = Clock::now();
      if (idle == ctx.spinCount) lastProgress = now - std::chrono::microseconds(1);
      if (ctx.abort != nullptr && ctx.abort->load(std::memory_order_relaxed)) {
        markAllAborted(works);
        return invalidUsage("rank %d: operation interrupted by ncclCommAbort", ctx.rank);
      }
      if (now - lastCheck > std::chrono::milliseconds(50)) {
        lastCheck = now;
        bool timedOut = ctx.timeoutSec > 0 && now - lastProgress > std::chrono::duration<double>(ctx.timeoutSec);
        Status st = checkPeers(works, ctx, timedOut);
        if (!st.isOk()) {
          markAllAborted(works);
          return st;
        }
      }
    }
    if (idle < ctx.spinCount + 20000) {
      sched_yield();
    } else {
      timespec ts{0, 50000};
      nanosleep(&ts, nullptr);
    }
  }
}

ChannelWorker::ChannelWorker(int channel, std::vector<int> cpus)
    : channel_(channel), cpus_(std::move(cpus)), thread_([this] { loop(); }) {}

ChannelWorker::~ChannelWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ChannelWorker::post(ChannelWork* work, const ExecContext& ctx) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_ = work;
    ctx_ = ctx;
    finished_ = false;
  }
  cv_.notify_all();
}

Status ChannelWorker::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return finished_; });
  return result_;
}

void ChannelWorker::loop() {
  Status bound = bindThisThread(cpus_);
  if (!bound.isOk()) {
    BRAID_INFO(kLogInit, "channel %d worker stays unbound: %s", channel_, bound.message().c_str());
  }
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || work_ != nullptr; });
    if (stop_) return;
    ChannelWork* work = work_;
    ExecContext ctx = ctx_;
    lock.unlock();
    Status st = runChannels({work}, ctx);
    lock.lock();
    result_ = st;
    work_ = nullptr;
    finished_ = true;
    cv_.notify_all();
  }
}

}  // namespace braid
