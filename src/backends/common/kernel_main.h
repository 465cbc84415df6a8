// One launch of the step engine as a kernel: CTA b runs channel b's queue (step_engine.h) from start to end, then
// leaves. Written once over the CTA concept and compiled by nvcc (src/backends/cuda/kernels/) and by g++ for the CTA
// emulator (src/backends/cuda/emu/). The CPU backend keeps its own loop (src/backends/cpu/executor.cc), which adds
// what only a host thread can do: network progress, futex sleeps, liveness of peer processes.
//
// Beyond step_engine.h's concept, the CTA here also has:
//   void relax() const;          back off while idle (__nanosleep / a yield)
//   uint64_t nowNs() const;      a monotonic clock in nanoseconds (%globaltimer / steady_clock)
//
// A kernel never traps: a trap kills the context and with it every later call of the process. It ends instead,
// with the reason in the DevStatus word the host reads (ncclCommGetAsyncError), when
//   - the host sets the abort word (ncclCommAbort): a CTA spinning for a dead peer stops;
//   - a peer marks a connector aborted (it failed or aborted): the reason travels on in the status;
//   - nothing moved for timeoutNs (BRAID_TIMEOUT): the status names the connector it waited on;
//   - the work is not this entry's (a protocol the launcher should have routed elsewhere).
// On each of these it marks its own ends of the unfinished items' connectors aborted, so its peers stop as well.
//
// State that outlives a launch (the connector cursors) is only ever reached through ConnSlot::cursor; the item
// states are reset here, in the prologue, so a captured graph replays the same work any number of times.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/backends/common/mem_order.h"
#include "src/backends/common/reduce_copy.h"
#include "src/backends/common/step_engine.h"
#include "src/backends/common/work.h"
#include "src/common/host_device.h"

namespace braid {

enum class DevStatusCode : uint32_t {
  kRunning = 0,  // nothing failed (so far)
  kAborted = 1,  // the abort word was set
  kPeerAborted = 2,
  kTimeout = 3,
  kBadWork = 4,
};

// Written by the first CTA that fails, read by the host after (or while) the kernel runs: the details first, then
// `code` with release. Lives where the host can read it without a copy (pinned, mapped host memory).
struct DevStatus {
  uint32_t claimed;  // the first CTA to fail takes it (0 -> 1); the others leave the status alone
  uint32_t code;     // DevStatusCode
  int32_t channel;   // the CTA's channel
  int32_t item;      // the unfinished item, -1 when none
  int32_t conn;      // the connector waited on or found aborted (index into the channel's conns), -1 when none
  uint32_t step;
  uint64_t tile;
};

BRAID_HOST_DEVICE inline void devStatusInit(DevStatus* s) {
  s->claimed = 0;
  s->code = static_cast<uint32_t>(DevStatusCode::kRunning);
  s->channel = -1;
  s->item = -1;
  s->conn = -1;
  s->step = 0;
  s->tile = 0;
}

// The kernel entries, one per protocol, by name: the same names in the fatbin (kernels/braid_kernel.cu) and in the
// emulator's host image (emu/emu_kernels.cc). Indexed by ProtoId.
// Threads per CTA at most (the entries' __launch_bounds__).
constexpr int kKernelMaxThreads = 512;
constexpr const char* kKernelNames[3] = {"braidKernelLL", "braidKernelLL128", "braidKernelSimple"};
BRAID_HOST_DEVICE constexpr const char* kernelName(ProtoId p) {
  return kKernelNames[static_cast<int>(p)];
}
// The NVLS-style (direct) entry (direct_kernel.h): KernelArgs::direct instead of channels, a CTA per lane.
constexpr const char* kDirectKernelName = "braidKernelDirect";

// A kernel's environment for the step engine: no transport to drive (a network connector's proxy thread sends and
// receives on its own), and the CTA-strided data loops of reduce_copy.h.
struct KernelEnv {
  // A P2P send slot may be the peer's memory: compute into the local output, then copy out (step_engine.h).
  static constexpr bool kComputeIntoSlot = false;
  static constexpr size_t kTwoDestinationPieceBytes = 0;  // the CTA's threads already split a step between them
  // Not yet measured on a GPU, where lock step costs less: many CTAs and channels hide one item's wait.
  static constexpr bool kRunAhead = false;
  BRAID_HOST_DEVICE void drive(const ConnSlot&) {}
  BRAID_HOST_DEVICE void released(const ConnSlot&) {}
  template <class Cta>
  BRAID_HOST_DEVICE void reduce(const Cta& cta, const ReduceOp& op, void* dst, const void* peer, const void* local,
                                size_t n, bool post, bool /*toOutput*/ = false) {
    ctaReduce(cta, op, dst, peer, local, n, post);
  }
  template <class Cta>
  BRAID_HOST_DEVICE void copyLocal(const Cta& cta, const ReduceOp& op, void* dst, const void* src, size_t n, bool post,
                                   bool /*toOutput*/ = false) {
    ctaCopyLocal(cta, op, dst, src, n, post);
  }
  template <class Cta>
  BRAID_HOST_DEVICE void reduceMany(const Cta& cta, const ReduceOp* ops, void* dst, const char* const* srcs, size_t at,
                                    int nsrc, size_t n, bool post) {
    ctaReduceMany(cta, ops, dst, srcs, at, nsrc, n, post);
  }
  template <class Cta>
  BRAID_HOST_DEVICE void copy(const Cta& cta, void* dst, const void* src, size_t bytes, bool /*toOutput*/ = false) {
    ctaCopy(cta, dst, src, bytes);
  }
};

struct DirectKernelWork;
struct RmaKernelWork;

struct KernelArgs {
  ChannelWorkDesc* channels = nullptr;       // one per CTA
  uint32_t nchannels = 0;                    // CTAs (the direct entry: lanes)
  const DirectKernelWork* direct = nullptr;  // the direct entry's work (channels is null then)
  const RmaKernelWork* rma = nullptr;        // the signal entry's work (rma_kernel.h; channels is null then)
  DevStatus* status = nullptr;
  const uint32_t* abortFlag = nullptr;  // non-zero: stop (the host's ncclCommAbort), may be null
  uint64_t timeoutNs = 0;               // no progress for this long fails the launch; 0: never
};

namespace kernel_detail {

constexpr int kAbortCheckRounds = 64;  // while making progress, look at the abort word this rarely

// The first unfinished item and the connector it is held up by (either may be -1).
BRAID_HOST_DEVICE inline void stuckAt(const ChannelWorkDesc& ch, int32_t* item, int32_t* conn) {
  *item = -1;
  *conn = -1;
  const ConnSlot* c = waitingOn(ch);
  if (c != nullptr) *conn = static_cast<int32_t>(c - ch.conns);
  for (uint32_t i = 0; i < ch.nitems; ++i) {
    if (!ch.states[i].done) {
      *item = static_cast<int32_t>(i);
      return;
    }
  }
}

// Thread 0: records why this CTA stops (unless another CTA already did) and marks the connectors of the
// unfinished items aborted.
BRAID_HOST_DEVICE inline void fail(const KernelArgs& a, uint32_t channel, DevStatusCode code, int32_t conn) {
  ChannelWorkDesc& ch = a.channels[channel];
  int32_t item = -1, waited = -1;
  stuckAt(ch, &item, &waited);
  if (conn < 0) conn = waited;
  for (uint32_t i = 0; i < ch.nitems; ++i) {
    if (ch.states[i].done) continue;
    const WorkDesc& w = ch.items[i];
    for (uint32_t s = 0; s < w.prog.nsteps; ++s) {
      if (w.sendConn[s] >= 0) ch.conns[w.sendConn[s]].view.markAborted();
      if (w.recvConn[s] >= 0) ch.conns[w.recvConn[s]].view.markAborted();
    }
  }
  if (a.status == nullptr || fetchAddRelease(&a.status->claimed, 1u) != 0) return;
  a.status->channel = static_cast<int32_t>(channel);
  a.status->item = item;
  a.status->conn = conn;
  if (item >= 0) {
    a.status->step = ch.states[item].step;
    a.status->tile = ch.states[item].tile;
  }
  storeRelease(&a.status->code, static_cast<uint32_t>(code));
}

// Thread 0, while idle: a connector whose peer aborted, or -1.
BRAID_HOST_DEVICE inline int32_t abortedPeer(const ChannelWorkDesc& ch) {
  for (uint32_t i = 0; i < ch.nconns; ++i) {
    if (ch.conns[i].view.peerAborted()) return static_cast<int32_t>(i);
  }
  return -1;
}

}  // namespace kernel_detail

// The whole kernel, for CTA `block` of the grid (which has a.nchannels CTAs).
template <class Stepper, class Cta, class Env>
BRAID_HOST_DEVICE void kernelMain(const Cta& cta, Env& env, const KernelArgs& a, uint32_t block) {
  if (block >= a.nchannels) return;
  ChannelWorkDesc& ch = a.channels[block];
  bool ok = true;
  if (cta.tid() == 0) {
    for (uint32_t i = 0; i < ch.nitems; ++i) {
      ch.states[i] = ItemState{};
      ok = ok && Stepper::accepts(ch.items[i].proto);
    }
    ch.remaining = ch.nitems;
    if (ok) announceDemand(ch);
  }
  if (!cta.syncAll(ok)) {
    if (cta.tid() == 0) kernel_detail::fail(a, block, DevStatusCode::kBadWork, -1);
    return;
  }
  uint64_t lastProgress = 0;  // thread 0's clock at the last progress; 0 until it first idles
  int rounds = 0;
  bool stop = false;
  // Thread 0 decides whether to go on; every thread leaves after the same barrier.
  while (cta.syncAll(cta.tid() != 0 || (ch.remaining != 0 && !stop))) {
    const bool moved = progressChannel<Cta, Env, Stepper>(cta, env, ch);
    if (cta.tid() != 0) continue;
    const bool idle = !moved && ch.remaining != 0;
    if (!idle) {
      lastProgress = 0;
      if (++rounds < kernel_detail::kAbortCheckRounds) continue;
    }
    rounds = 0;
    if (a.abortFlag != nullptr && loadAcquire(a.abortFlag) != 0) {
      kernel_detail::fail(a, block, DevStatusCode::kAborted, -1);
      stop = true;
      continue;
    }
    if (!idle) continue;
    const int32_t dead = kernel_detail::abortedPeer(ch);
    if (dead >= 0) {
      kernel_detail::fail(a, block, DevStatusCode::kPeerAborted, dead);
      stop = true;
      continue;
    }
    if (a.status != nullptr && loadAcquire(&a.status->code) != static_cast<uint32_t>(DevStatusCode::kRunning)) {
      // Another CTA of this launch failed; it already said why, and this one would wait for it forever.
      kernel_detail::fail(a, block, DevStatusCode::kAborted, -1);
      stop = true;
      continue;
    }
    const uint64_t now = cta.nowNs();
    if (lastProgress == 0) lastProgress = now;
    if (a.timeoutNs != 0 && now - lastProgress > a.timeoutNs) {
      kernel_detail::fail(a, block, DevStatusCode::kTimeout, -1);
      stop = true;
      continue;
    }
    cta.relax();
  }
}

}  // namespace braid
