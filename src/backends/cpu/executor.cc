#include "src/backends/cpu/executor.h"

#include "src/backends/common/step_engine.h"
#include "src/backends/cpu/host_cta.h"

#include <sched.h>
#include <time.h>

#include <cstring>

#include "src/common/logging.h"
#include "src/common/numa.h"
#include "src/common/wait.h"

namespace braid {
namespace {

constexpr int kYieldRounds = 20000;            // idle rounds past the spin that yield before the loop sleeps
constexpr long kSleepNanoseconds = 50 * 1000;  // then each idle round sleeps this long

struct HostEnv : HostDataOps {
  static Connector* conn(const ConnSlot& c) { return static_cast<Connector*>(c.owner); }
  void drive(const ConnSlot& c) { conn(c)->drive(); }
  void released(const ConnSlot& c) { conn(c)->release(); }
};

void markAllAborted(const std::vector<ChannelWork*>& works, const std::string& why) {
  for (ChannelWork* cw : works) {
    for (size_t i = 0; i < cw->items.size(); ++i) {
      if (cw->states[i].done) continue;
      for (Connector* c : cw->items[i].recvConn) {
        if (c) c->markAborted(why);
      }
      for (Connector* c : cw->items[i].sendConn) {
        if (c) c->markAborted(why);
      }
    }
  }
}

std::string describePeer(const Connector* c) {
  const PeerInfo& p = c->peer();
  return strPrintf("rank %d (host %s, pid %d)", p.rank, p.hostname, static_cast<int>(p.pid));
}

Status checkPeers(const std::vector<ChannelWork*>& works, const WaitContext& ctx, bool timedOut) {
  // A process that died without marking its connectors aborted is the root cause to report; a peer that aborted
  // (and may have exited since) was only reacting to a failure.
  for (int pass = 0; pass < 3; ++pass) {
    for (ChannelWork* cw : works) {
      for (size_t k = 0; k < cw->items.size(); ++k) {
        const WorkItem& w = cw->items[k];
        if (cw->states[k].done) continue;
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
      if (const ConnSlot* slot = waitingOn(cw->flat)) {
        const Connector* c = HostEnv::conn(*slot);
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
  const size_t n = items.size();
  descs.assign(n, WorkDesc{});
  states.assign(n, ItemState{});
  conns.clear();
  connIdx.clear();
  blockers.clear();
  packOffsets.clear();
  packEntries.clear();
  // The arrays are sized first, so pointers into them taken below stay valid while they fill (every array is a
  // member: a launch reuses the last one's capacity).
  size_t steps = 0, packs = 0, entries = 0;
  for (const WorkItem& w : items) {
    steps += w.prog->steps.size();
    packs += w.prog->packs.empty() ? 0 : w.prog->packs.size() + 1;
    for (const std::vector<PackEntry>& pack : w.prog->packs) entries += pack.size();
  }
  connIdx.reserve(2 * steps);
  conns.reserve(2 * steps);
  blockers.reserve(n > 0 ? n * (n - 1) / 2 : 0);
  packOffsets.reserve(packs);
  packEntries.reserve(entries);
  // The connector table: each connector once, in order of first use.
  auto indexOf = [&](Connector* c) -> int32_t {
    if (c == nullptr) return -1;
    for (size_t k = 0; k < conns.size(); ++k) {
      if (conns[k].owner == c) return static_cast<int32_t>(k);
    }
    ConnSlot slot;
    slot.view = c->view();
    slot.cursor = &c->cursor();
    slot.wholeMessages = c->wholeMessages();
    slot.demandDriven = c->demandDriven();
    slot.owner = c;
    conns.push_back(slot);
    return static_cast<int32_t>(conns.size() - 1);
  };
  for (size_t i = 0; i < n; ++i) {
    WorkItem& w = items[i];
    WorkDesc& d = descs[i];
    d.prog = w.prog->desc();
    d.input = w.input;
    d.output = w.output;
    d.elemSize = static_cast<uint32_t>(w.elemSize);
    d.op = w.op;
    d.proto = w.proto;
    d.llRecv = w.llRecv.data();
    d.llSend = w.llSend.data();
    d.sendConn = connIdx.data() + connIdx.size();
    for (Connector* c : w.sendConn) connIdx.push_back(indexOf(c));
    d.recvConn = connIdx.data() + connIdx.size();
    for (Connector* c : w.recvConn) connIdx.push_back(indexOf(c));
    // Items that share a connector run in queue order.
    d.blockers = blockers.data() + blockers.size();
    for (size_t j = 0; j < i; ++j) {
      const WorkItem& e = items[j];
      bool shares = false;
      for (Connector* a : w.sendConn) {
        for (Connector* b : e.sendConn) shares |= (a != nullptr && a == b);
      }
      for (Connector* a : w.recvConn) {
        for (Connector* b : e.recvConn) shares |= (a != nullptr && a == b);
      }
      if (shares) blockers.push_back(static_cast<uint32_t>(j));
    }
    d.nblockers = static_cast<uint32_t>(blockers.data() + blockers.size() - d.blockers);
    if (!w.prog->packs.empty()) {
      d.prog.packOffsets = packOffsets.data() + packOffsets.size();
      d.prog.packEntries = packEntries.data();
      for (const std::vector<PackEntry>& pack : w.prog->packs) {
        packOffsets.push_back(static_cast<uint32_t>(packEntries.size()));
        packEntries.insert(packEntries.end(), pack.begin(), pack.end());
      }
      packOffsets.push_back(static_cast<uint32_t>(packEntries.size()));
    }
  }
  flat.items = descs.data();
  flat.states = states.data();
  flat.nitems = static_cast<uint32_t>(n);
  flat.remaining = static_cast<uint32_t>(n);
  flat.conns = conns.data();
  flat.nconns = static_cast<uint32_t>(conns.size());
}

Status runChannels(const std::vector<ChannelWork*>& works, const WaitContext& ctx) {
  const HostCta cta;
  HostEnv env;
  for (const ChannelWork* cw : works) {
    for (const WorkDesc& d : cw->descs) {
      env.streamOutputs = env.streamOutputs || (d.prog.end - d.prog.begin) * d.elemSize >= kStreamingStoreBytes;
    }
  }
  // Non-temporal output stores are ordered before the caller learns the operation is done.
  struct Fence {
    bool on;
    ~Fence() {
      if (on) streamFence();
    }
  } fence{env.streamOutputs};
  WaitLoop wait(ctx);
  // Past the spin, yield (more ranks than cores must still progress), then sleep a little.
  auto sleep = [](int round) {
    if (round < kYieldRounds) {
      sched_yield();
    } else {
      timespec ts{0, kSleepNanoseconds};
      nanosleep(&ts, nullptr);
    }
  };
  auto check = [&](bool timedOut) { return checkPeers(works, ctx, timedOut); };
  while (true) {
    bool progress = false;
    bool done = true;
    for (ChannelWork* cw : works) {
      if (cw->finished()) continue;
      progress |= progressChannel(cta, env, cw->flat);
      if (!cw->finished()) done = false;
    }
    if (done) return Status::ok();
    if (progress) {
      wait.progressed();
      continue;
    }
    Status st = wait.idle(check, sleep);
    if (!st.isOk()) {
      markAllAborted(works, st.message());
      return st;
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

void ChannelWorker::post(ChannelWork* work, const WaitContext& ctx) {
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
    WaitContext ctx = ctx_;
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
