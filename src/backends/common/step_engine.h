// The step engine: runs a channel's work items (work.h) step by step over their connectors. Written once, as
// templates over a CTA and an environment, and compiled three ways: by g++ for the CPU backend (a one-thread CTA,
// src/backends/cpu/executor.cc), by g++ for a multi-threaded CTA (tests/unit/step_engine_test.cc; the CUDA
// backend's emulator), and by nvcc for the kernel.
//
// The CTA concept (a template parameter, so the device pays no indirection):
//   static constexpr bool kSerial;   one thread: barriers are no-ops and thread 0 is everyone
//   int tid() const; int nthreads() const;
//   void sync() const;               all threads arrive (__syncthreads)
//   bool syncAll(bool) const;        all threads arrive; true when every thread's value was true (__syncthreads_and)
// The environment concept (what is the backend's own):
//   void drive(const ConnSlot&);     host: let a network connector's transport make progress; device: nothing
//   void released(const ConnSlot&);  an item that sent on it is done (its transport finishes what is in flight)
//   reduce / copyLocal / copy        the data movement (cpu: SIMD paths; device: reduce_copy.h), each told the CTA
//                                    and whether its destination is the operation's output
//   static constexpr bool kComputeIntoSlot
//                                    a step with both destinations computes into the send slot first (the host:
//                                    its output stores may bypass the caches) or into the output first (a kernel)
//   static constexpr bool kRunAhead  while an item's step waits for a peer, steps of its next tile that use other
//                                    connectors run (runAhead); off in kernels until measured on a GPU
//   static constexpr size_t kTwoDestinationPieceBytes
//                                    a step that reduces into both destinations runs a piece of this many bytes at
//                                    a time, reducing then copying each piece (0: the whole step at once). The host:
//                                    its copy of a piece to the output, while the piece is cached, overlaps the
//                                    reads of the next piece (docs/perf.md, night of 2026-12-07)
//
// Every item is a resumable state machine (tile, step, and the steps of tile + 1 already run ahead): tryStep moves
// one slot if it is ready and returns, so one CTA drives many items, and items on different connectors (the sends
// and receives of a grouped all-to-all) progress together; grouped send/recv never deadlocks. Items that share a
// connector run in queue order.
//
// Per step, on a CTA of several threads: thread 0 checks readiness and all threads learn it in one barrier; each
// thread gathers its LL lines (a second barrier says whether all are in); every thread moves its share of the data;
// a barrier orders all data before thread 0 publishes; thread 0 advances the item's state; a last barrier makes the
// new state visible. On one thread all of it collapses to the sequence the CPU executor always ran.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/backends/common/protocols.h"
#include "src/backends/common/step_shape.h"
#include "src/backends/common/work.h"
#include "src/common/host_device.h"

namespace braid {

// The op for combining two partial results: no pre-multiplication (each side already had it); avg keeps its
// post-op (the division at the final step).
BRAID_HOST_DEVICE inline ReduceOp combineOnly(const ReduceOp& op) {
  ReduceOp c = op;
  if (c.kind == OpKind::kPreMulSum) c.kind = OpKind::kSum;
  return c;
}

// The data movement of a range of one (non-packed) step's elements: result = recv (+) local, or whichever of the
// two the step has, into the first destination, then copied to the second.
template <class Cta, class Env>
BRAID_HOST_DEVICE void runStepRange(const Cta& cta, Env& env, const StepShape& sh, const WorkDesc& w, const char* rs,
                                    char* ss, const char* in, char* out, size_t n) {
  const size_t bytes = n * w.elemSize;
  const char* local = sh.local == Local::kInput ? in : sh.local == Local::kOutput ? out : nullptr;
  const bool toOut = sh.writesOutput;
  const bool toSend = sh.send;
  char* first = (toSend && (sh.sendFirst || !toOut || Env::kComputeIntoSlot)) ? ss : out;
  char* second = (toOut && toSend) ? (first == ss ? out : ss) : nullptr;
  const bool firstIsOut = first == out;
  if (rs != nullptr && local != nullptr) {
    env.reduce(cta, sh.local == Local::kOutput ? combineOnly(w.op) : w.op, first, rs, local, n, sh.isFinal, firstIsOut);
  } else if (sh.local == Local::kInput) {
    env.copyLocal(cta, w.op, first, local, n, sh.isFinal, firstIsOut);
  } else {
    env.copy(cta, first, rs != nullptr ? rs : local, bytes, firstIsOut);
  }
  // An in-place copySend (output is the input) already has its data in place; a step that received has a new result
  // even in place.
  if (second != nullptr && (second != local || rs != nullptr)) {
    cta.sync();  // every thread's share of `first` is written before any thread reads it
    env.copy(cta, second, first, bytes, !firstIsOut && second != local);  // in place the output is cached
  }
}

// runStepRange over the whole step, or piece by piece where the environment asks for it (kTwoDestinationPieceBytes)
// and the step reduces into both destinations. Every element's result depends only on the same element of the
// sources, so the pieces give the same bits. The pieces are below reduce.h's striping threshold, and still measured
// faster; copies to two destinations (a broadcast's, an all-gather's) measured slower in pieces, and stay whole.
template <class Cta, class Env>
BRAID_HOST_DEVICE void runStepData(const Cta& cta, Env& env, const StepShape& sh, const WorkDesc& w, const char* rs,
                                   char* ss, const char* in, char* out, size_t n) {
  constexpr size_t kPiece = Env::kTwoDestinationPieceBytes;
  static_assert(kPiece == 0 || kPiece >= 8, "a piece holds at least one element of every type");
  if constexpr (kPiece > 0) {
    if (sh.reduces() && sh.send && sh.writesOutput && n * w.elemSize > kPiece) {
      const size_t per = kPiece / w.elemSize;  // every element size divides the piece
      const size_t es = w.elemSize;
      for (size_t at = 0; at < n; at += per) {
        const size_t m = n - at < per ? n - at : per;
        const size_t b = at * es;
        runStepRange(cta, env, sh, w, rs + b, ss + b, in != nullptr ? in + b : nullptr,
                     out != nullptr ? out + b : nullptr, m);
      }
      return;
    }
  }
  runStepRange(cta, env, sh, w, rs, ss, in, out, n);
}

template <class Cta, class Env>
BRAID_HOST_DEVICE void runPackData(const Cta& cta, Env& env, const Step& s, const WorkDesc& w, size_t tile,
                                   const char* rs, char* ss, size_t bytes) {
  const uint32_t np = w.prog.packSize(s.block);
  for (uint32_t i = 0; i < np; ++i) {
    const PackEntry& e = w.prog.packEntry(s.block, i);
    size_t off = 0, cnt = 0;
    w.prog.blockRange(tile, e.block, e.buf, &off, &cnt);
    if (s.op == StepOp::kSendPack) {
      env.copy(cta, ss + i * bytes, (e.buf == 0 ? w.input : w.output) + off * w.elemSize, bytes);
    } else {
      env.copy(cta, w.output + off * w.elemSize, rs + i * bytes, bytes, true);
    }
  }
}

// Executes step `step` of tile `tile` of item `w` if its slots are ready; returns true when it did. The caller
// advances the item's state.
template <class Proto, class Cta, class Env>
BRAID_HOST_DEVICE bool runStepAt(const Cta& cta, Env& env, ChannelWorkDesc& ch, const WorkDesc& w, ItemState& st,
                                 size_t tile, uint32_t step) {
  const Step& s = w.prog.steps[step];
  const int32_t ri = w.recvConn[step];
  const int32_t si = w.sendConn[step];
  ConnSlot* rc = ri >= 0 ? &ch.conns[ri] : nullptr;
  ConnSlot* sc = si >= 0 ? &ch.conns[si] : nullptr;
  // Readiness first: a step polled many times before its slots are there computes nothing else.
  bool ready = true;
  if (cta.tid() == 0) {
    if (sc != nullptr) env.drive(*sc);
    if (rc != nullptr) env.drive(*rc);
    ready = (sc == nullptr || sc->view.sendReady(*sc->cursor)) && (rc == nullptr || Proto::recvReady(*rc));
  }
  if (!cta.syncAll(ready)) return false;

  const StepShape sh = stepShape(s.op);
  size_t inOff = 0, outOff = 0, n = 0;
  w.prog.blockRange(tile, s.block, 0, &inOff, &n);
  w.prog.blockRange(tile, s.block, 1, &outOff, &n);
  const size_t bytes = n * w.elemSize;
  const size_t msgBytes = sh.packed ? bytes * w.prog.packSize(s.block) : bytes;
  if (rc != nullptr && !cta.syncAll(Proto::recvArrived(cta, w, st, *rc, msgBytes))) return false;

  const char* rs = rc != nullptr ? Proto::recvSrc(w, *rc) : nullptr;
  char* ss = sc != nullptr ? Proto::sendDst(w, *sc) : nullptr;
  if (n > 0) {
    if (sh.packed) {
      runPackData(cta, env, s, w, tile, rs, ss, bytes);
    } else {
      const char* in = w.input != nullptr ? w.input + inOff * w.elemSize : nullptr;
      char* out = w.output != nullptr ? w.output + outOff * w.elemSize : nullptr;
      runStepData(cta, env, sh, w, rs, ss, in, out, n);
    }
  }
  cta.sync();  // all data is in place before the slot is published or returned
  if (sc != nullptr) {
    Proto::sendPublish(cta, w, *sc, msgBytes);
    cta.sync();
  }
  if (cta.tid() == 0) {
    if (rc != nullptr) rc->view.recvPost(*rc->cursor);
    if (sc != nullptr) {
      sc->view.sendPost(*sc->cursor, msgBytes);
      env.drive(*sc);  // a network connection sends the slot now, not when its progress thread next looks
    }
  }
  return true;
}

// Executes the current step of item `w` if its slots are ready, and moves the item on. Returns true when it did.
template <class Proto, class Cta, class Env>
BRAID_HOST_DEVICE bool tryStep(const Cta& cta, Env& env, ChannelWorkDesc& ch, const WorkDesc& w, ItemState& st) {
  if (!runStepAt<Proto>(cta, env, ch, w, st, st.tile, st.step)) return false;
  if (cta.tid() == 0) {
    st.llLinesDone = 0;
    if (++st.step == w.prog.nsteps) {
      // The next tile starts where its steps run ahead stopped (runAhead).
      st.step = st.ahead;
      st.ahead = 0;
      ++st.tile;
      if (st.step == w.prog.nsteps) {
        st.step = 0;
        ++st.tile;
      }
    }
  }
  cta.sync();
  return true;
}

// Whether step `a` of the next tile may run before the rest of the current tile (steps st.step onwards): no step
// still to come in this tile uses one of its connectors, so every connector still sees its slots in the program's
// order. Tiles cover disjoint elements, so the next tile's data never meets this one's.
BRAID_HOST_DEVICE inline bool mayRunAhead(const WorkDesc& w, const ItemState& st, uint32_t a) {
  const int32_t si = w.sendConn[a];
  const int32_t ri = w.recvConn[a];
  for (uint32_t s = st.step; s < w.prog.nsteps; ++s) {
    if (si >= 0 && w.sendConn[s] == si) return false;
    if (ri >= 0 && w.recvConn[s] == ri) return false;
  }
  return true;
}

// Runs steps of the next tile while the current one waits for a peer (a ring's last step waits for the data the
// peer sends last; meanwhile the next tile's first send can go out), so two ranks stop running in lock step. Simple
// protocol only: a line protocol's staging and resume point belong to the current step. Returns true when it ran
// a step.
template <class Proto, class Cta, class Env>
BRAID_HOST_DEVICE bool runAhead(const Cta& cta, Env& env, ChannelWorkDesc& ch, const WorkDesc& w, ItemState& st) {
  if (w.proto != ProtoId::kSimple || st.tile + 1 >= w.prog.numTiles()) return false;
  bool ran = false;
  while (st.ahead < w.prog.nsteps && mayRunAhead(w, st, st.ahead)) {
    if (!runStepAt<Proto>(cta, env, ch, w, st, st.tile + 1, st.ahead)) break;
    if (cta.tid() == 0) ++st.ahead;
    cta.sync();
    ran = true;
  }
  return ran;
}

// How progressChannel picks the protocol of a step: AnyProto dispatches on each item's protocol at run time (the CPU
// backend); OnlyProto<P> compiles one protocol's code only (a kernel entry per protocol, whose launcher never gives
// it an item of another: kernelMain checks).
struct AnyProto {
  template <class Cta, class Env>
  BRAID_HOST_DEVICE static bool step(const Cta& cta, Env& env, ChannelWorkDesc& ch, const WorkDesc& w, ItemState& st) {
    switch (w.proto) {
      case ProtoId::kLL:
        return tryStep<LlProto>(cta, env, ch, w, st);
      case ProtoId::kLL128:
        return tryStep<Ll128Proto>(cta, env, ch, w, st);
      default:
        return tryStep<SimpleProto>(cta, env, ch, w, st);
    }
  }
  template <class Cta, class Env>
  BRAID_HOST_DEVICE static bool ahead(const Cta& cta, Env& env, ChannelWorkDesc& ch, const WorkDesc& w, ItemState& st) {
    return w.proto == ProtoId::kSimple && runAhead<SimpleProto>(cta, env, ch, w, st);
  }
  BRAID_HOST_DEVICE static bool accepts(ProtoId) { return true; }
};

template <ProtoId kProto>
struct OnlyProto {
  template <class Cta, class Env>
  BRAID_HOST_DEVICE static bool step(const Cta& cta, Env& env, ChannelWorkDesc& ch, const WorkDesc& w, ItemState& st) {
    if constexpr (kProto == ProtoId::kLL) {
      return tryStep<LlProto>(cta, env, ch, w, st);
    } else if constexpr (kProto == ProtoId::kLL128) {
      return tryStep<Ll128Proto>(cta, env, ch, w, st);
    } else {
      return tryStep<SimpleProto>(cta, env, ch, w, st);
    }
  }
  template <class Cta, class Env>
  BRAID_HOST_DEVICE static bool ahead(const Cta& cta, Env& env, ChannelWorkDesc& ch, const WorkDesc& w, ItemState& st) {
    if constexpr (kProto == ProtoId::kSimple) {
      return runAhead<SimpleProto>(cta, env, ch, w, st);
    } else {
      return false;
    }
  }
  BRAID_HOST_DEVICE static bool accepts(ProtoId p) { return p == kProto; }
};

// The prologue of a launch: a demand-driven (network) connector is told how many messages this launch's schedules
// will consume on it, one per tile per step that receives on it, so it never posts a receive for data a peer that
// finished will not send. Thread 0 only.
BRAID_HOST_DEVICE inline void announceDemand(const ChannelWorkDesc& ch) {
  for (uint32_t i = 0; i < ch.nitems; ++i) {
    const WorkDesc& w = ch.items[i];
    const size_t tiles = w.prog.numTiles();
    for (uint32_t s = 0; s < w.prog.nsteps; ++s) {
      const int32_t ri = w.recvConn[s];
      if (ri >= 0 && ch.conns[ri].demandDriven) ch.conns[ri].view.expectMessages(tiles);
    }
  }
}

// Progresses every runnable item of one channel; returns true when anything moved.
template <class Cta, class Env, class Stepper = AnyProto>
BRAID_HOST_DEVICE bool progressChannel(const Cta& cta, Env& env, ChannelWorkDesc& ch) {
  bool progress = false;
  for (uint32_t i = 0; i < ch.nitems; ++i) {
    const WorkDesc& w = ch.items[i];
    ItemState& st = ch.states[i];
    if (st.done) continue;
    bool blocked = false;
    for (uint32_t b = 0; b < w.nblockers; ++b) {
      if (!ch.states[w.blockers[b]].done) blocked = true;
    }
    if (blocked) continue;
    const size_t tiles = w.prog.numTiles();
    // A bounded burst keeps one large item from starving the others in the queue.
    for (int burst = 0; burst < 64; ++burst) {
      if (st.tile >= tiles) break;
      if (!Stepper::step(cta, env, ch, w, st)) {
        if constexpr (Env::kRunAhead) progress |= Stepper::ahead(cta, env, ch, w, st);
        break;
      }
      progress = true;
    }
    if (st.tile >= tiles) {
      // Every thread saw the same tile count (the last barrier of tryStep); thread 0 records the end. First a
      // barrier: an item with no tiles passes no barrier above, so a slower thread may not yet have read st.done
      // for it, and would skip the item (and its barriers) if thread 0 set it now.
      cta.sync();
      if (cta.tid() == 0) {
        st.done = true;
        --ch.remaining;
        // Its sends may still be in flight while this CTA waits on other connectors (a send/receive pair): the
        // transport's own thread finishes them from now on.
        for (uint32_t s = 0; s < w.prog.nsteps; ++s) {
          if (w.sendConn[s] >= 0) env.released(ch.conns[w.sendConn[s]]);
        }
      }
      cta.sync();
      progress = true;
    }
  }
  return progress;
}

// The connector an unfinished item is waiting on (for error messages), or null. Host only in practice.
BRAID_HOST_DEVICE inline const ConnSlot* waitingOn(const ChannelWorkDesc& ch) {
  for (uint32_t i = 0; i < ch.nitems; ++i) {
    const WorkDesc& w = ch.items[i];
    const ItemState& st = ch.states[i];
    if (st.done || st.tile >= w.prog.numTiles()) continue;
    const ConnSlot* rc = w.recvConn[st.step] >= 0 ? &ch.conns[w.recvConn[st.step]] : nullptr;
    const ConnSlot* sc = w.sendConn[st.step] >= 0 ? &ch.conns[w.sendConn[st.step]] : nullptr;
    if (sc != nullptr && !sc->view.sendReady(*sc->cursor)) return sc;
    // A ready LL slot would have been consumed.
    const bool lines = w.proto != ProtoId::kSimple && rc != nullptr && !rc->wholeMessages;
    if (rc != nullptr && (lines || !rc->view.recvReady(*rc->cursor))) return rc;
  }
  return nullptr;
}

}  // namespace braid
