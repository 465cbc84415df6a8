/* braid's nccl_device/flow.h: NCCL 2.32's Flow device API (experimental in NCCL too), over LSA and GIN.
 *
 * A Flow processor combines a CTA's local inputs with data its world-rank peers sent, and writes the result to local
 * outputs and on to other peers, one pipelined step at a time through persistent receive FIFOs: the building block of
 * ring and tree kernels written with the device API. Use as NCCL documents it:
 *   - persistent, zeroed, window-backed resources (a device communicator's resource buffers, say): a receive FIFO of
 *     nChannels * channelSize bytes, channelSize = nParts * MaxPeers * nSlots * slotBytes, and nChannels *
 *     connStatesPerChannel ncclFlowConnState, connStatesPerChannel >= nParts * MaxPeers;
 *   - an ncclFlowConfig filled with them; every thread of the CTA constructs one ncclFlowProcessor, calls process()
 *     for each transfer (all threads of a part alike) and close() before the kernel ends;
 *   - launch 32 * (nWorkerWarps + nParts * ncclFlowGetSignalWarpsPerPart(Protocol)) threads, with at least 2 * nParts
 *     worker warps; ncclFlowThreadPart tells a thread its part.
 * Communicating ranks agree on the reciprocal channel, part, peer slot and nSlots: rank a's send slot s of part q on
 * channel c is its peer's receive slot s of part q on channel c.
 *
 * What braid does differently (the API is NCCL's; the machinery is braid's):
 *   - A peer this rank can load and store (ncclDevCommCanGetPeerPointer) is reached over LSA (lsa_flow.h); any other
 *     (a rank of another host) over GIN (gin_flow.h), as in NCCL: the processor needs a GIN backend mask, config's
 *     ginTeam holding the peer, ginBuffer (the senders' staging FIFOs: a connection's at the same offset in it as its
 *     receive FIFO in one channel's recvBuffer, NCCL's layout, so give each channel its own), ginSignal0 and
 *     ginContextIndex (modulo the device communicator's ginContextCount); connection state i of the config uses GIN
 *     signals ginSignal0 + 2 * i and + 2 * i + 1. ncclLsaFlowProcessor (mask 0) with such a peer is a kernel error
 *     naming it. A direct send or receive with a peer over GIN is not built (a kernel error): pass false.
 *   - The three protocols share braid's slot format: data contiguous, readiness counted in the connection state
 *     (over GIN: in the GIN signals above, so starting a GIN connection over needs both signals reset too). LL and
 *     LL128 keep NCCL's rules (slot sizes a multiple of 16 and 128 bytes, SlotsPerProcess = 1) and capacities (8 of
 *     every 16 bytes, 120 of every 128), so a kernel that fits NCCL's FIFO fits braid's.
 *   - Each part's threads synchronise on named barrier 1 + part (bar.sync 1..nParts; a kernel's own named barriers
 *     must use others), and the shmem argument is not used.
 *   - One step of a part: the part's first thread waits for the send peers' credits, thread 32 + j for receive
 *     peer j's data; the whole part reduces and copies; those threads then post. Reductions apply redOp in T over
 *     the explicit sources first, then the receive FIFOs in peer order (the same bits on every rank).
 *   - Misuse NCCL asserts on (counts, parts, slots, sizes, a transfer larger than SlotsPerProcess slots, a launch of
 *     another shape) is a kernel error naming the rule. An aborted communicator ends every wait, and the processor
 *     then moves no more data.
 * Device code only (nvcc, or braid's CTA emulator). */
#ifndef NCCL_DEVICE_FLOW_H_
#define NCCL_DEVICE_FLOW_H_

#include "flow_types.h"
#include "gin_flow.h"
#include "lsa_flow.h"

#if NCCL_DEVICE_HALF_ && defined(__cplusplus)

/* This thread's part (nWorkerWarps split over nParts as the processor splits them). */
NCCL_DEVICE_INLINE int ncclFlowThreadPart(int nWorkerWarps, int nParts, int const* partWorkerWarps = nullptr,
                                          int signalWarpsPerPart = NCCL_FLOW_SIGNAL_WARPS_PER_PART) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  for (int part = 0; part < nParts; ++part) {
    const int end = ncclFlowPartWorkerWarp0(nWorkerWarps, nParts, part, partWorkerWarps, signalWarpsPerPart) +
                    ncclFlowPartWorkerWarps(nWorkerWarps, nParts, part, partWorkerWarps) + signalWarpsPerPart;
    if (warp < end) return part;
  }
  return nParts - 1;
}

/* An empty source or destination list. */
template <typename T>
struct ncclFlowNullPtrFn {
  NCCL_DEVICE_INLINE T* operator()(int) const { return nullptr; }
};

/* Whether a process() call sends (receives), and whether directly: a direct send writes the peer's output itself
 * (the remote output pointer among the explicit destinations) and a direct receive finds its data already in its
 * output, both still synchronised through the connection; `false` at construction falls back to the FIFO. */
template <bool Send, bool Direct = false>
struct ncclFlowSendTag {
  static_assert(Send || !Direct, "A disabled Flow send cannot be direct");
  bool direct;
  NCCL_HOST_DEVICE_INLINE constexpr ncclFlowSendTag(bool direct_ = Direct) : direct(Direct && direct_) {}
};
using ncclFlowSend = ncclFlowSendTag<true>;
using ncclFlowDirectSend = ncclFlowSendTag<true, true>;
using ncclFlowNoSend = ncclFlowSendTag<false>;

template <bool Recv, bool Direct = false>
struct ncclFlowRecvTag {
  static_assert(Recv || !Direct, "A disabled Flow receive cannot be direct");
  bool direct;
  NCCL_HOST_DEVICE_INLINE constexpr ncclFlowRecvTag(bool direct_ = Direct) : direct(Direct && direct_) {}
};
using ncclFlowRecv = ncclFlowRecvTag<true>;
using ncclFlowDirectRecv = ncclFlowRecvTag<true, true>;
using ncclFlowNoRecv = ncclFlowRecvTag<false>;

template <unsigned GinBackendMask>
struct ncclFlowConfig {
  ncclSymPtr<char> recvBuffer;             /* the receive FIFOs */
  ncclSymPtr<ncclFlowConnState> connState; /* the connection states */
  size_t channelSize;                      /* receive-FIFO bytes per channel */
  int nSlots;                              /* FIFO depth per peer slot */
  int connStatesPerChannel;                /* stride in connection states between channels */
  ncclTeam ginTeam;                        /* the team GIN peers are named in (the world, say) */
  ncclGinSignal_t ginSignal0;              /* connection state i uses signals ginSignal0 + 2 * i and + 2 * i + 1 */
  ncclSymPtr<char> ginBuffer;              /* the senders' staging FIFOs toward GIN peers (channelSize bytes) */
  int ginContextIndex;                     /* the GIN context, modulo ncclDevComm::ginContextCount */
};
template <>
struct ncclFlowConfig<0> {
  ncclSymPtr<char> recvBuffer;
  ncclSymPtr<ncclFlowConnState> connState;
  size_t channelSize;
  int nSlots;
  int connStatesPerChannel;
};

namespace nccl_braid_ {
/* One of a processor's connections: over LSA, or over GIN toward a peer out of load/store reach (mask 0: LSA only,
 * below, so an ncclLsaFlowProcessor carries no GIN connection). */
template <unsigned GinBackendMask, ncclFlowProtocol Protocol>
struct FlowConn {
  ncclLsaFlowConn<Protocol> lsa;
  ncclGinFlowConn<GinBackendMask, Protocol> gin;
  bool useGin = false;
  NCCL_DEVICE_INLINE void* waitSend() { return useGin ? gin.waitSend() : lsa.waitSend(); }
  NCCL_DEVICE_INLINE void* waitRecv() { return useGin ? gin.waitRecv() : lsa.waitRecv(); }
  NCCL_DEVICE_INLINE void* advanceFifoSlot() { return useGin ? gin.advanceFifoSlot() : lsa.advanceFifoSlot(); }
  NCCL_DEVICE_INLINE void postSend(size_t bytes) {
    if (useGin) {
      gin.postSend(bytes);
    } else {
      lsa.postSend(bytes);
    }
  }
  NCCL_DEVICE_INLINE void postRecv() {
    if (useGin) {
      gin.postRecv();
    } else {
      lsa.postRecv();
    }
  }
  NCCL_DEVICE_INLINE void close() {
    if (useGin) {
      gin.close();
    } else {
      lsa.close();
    }
  }
};
template <ncclFlowProtocol Protocol>
struct FlowConn<0, Protocol> {
  ncclLsaFlowConn<Protocol> lsa;
  static constexpr bool useGin = false;
  NCCL_DEVICE_INLINE void* waitSend() { return lsa.waitSend(); }
  NCCL_DEVICE_INLINE void* waitRecv() { return lsa.waitRecv(); }
  NCCL_DEVICE_INLINE void* advanceFifoSlot() { return lsa.advanceFifoSlot(); }
  NCCL_DEVICE_INLINE void postSend(size_t bytes) { lsa.postSend(bytes); }
  NCCL_DEVICE_INLINE void postRecv() { lsa.postRecv(); }
  NCCL_DEVICE_INLINE void close() { lsa.close(); }
};
}  // namespace nccl_braid_

template <unsigned GinBackendMask, int SlotsPerProcess = 1, int MaxPeers = 1,
          ncclFlowProtocol FlowProtocol = ncclFlowProtocolSimple>
struct ncclFlowProcessor {
  static_assert(SlotsPerProcess > 0, "ncclFlowProcessor must process at least one slot");
  static_assert(MaxPeers > 0 && MaxPeers <= NCCL_FLOW_MAX_PEERS, "ncclFlowProcessor: MaxPeers is out of range");
  static_assert(FlowProtocol == ncclFlowProtocolSimple || SlotsPerProcess == 1,
                "LL and LL128 need SlotsPerProcess = 1");
  static constexpr ncclFlowProtocol Protocol = FlowProtocol;

  /* Every thread of the CTA constructs one. sendPeers/recvPeers: world ranks (each count at most MaxPeers); entry i
   * uses connection slot sendSlots[i] (recvSlots[i]), or i; sendPart/recvPart pick the parts of the connection
   * states and FIFOs; channelId the instance of config's resources. */
  NCCL_DEVICE_INLINE ncclFlowProcessor(ncclDevComm const& comm, ncclFlowConfig<GinBackendMask> const& config,
                                       int const* sendPeers, int nSendPeers, int const* recvPeers, int nRecvPeers,
                                       int channelId, int nWorkerWarps, ncclFlowShmem& /*shmem*/, int nParts = 1,
                                       int sendPart = 0, int recvPart = 0, int const* sendSlots = nullptr,
                                       int const* recvSlots = nullptr, int const* partWorkerWarps = nullptr)
      : group_(0, 1, 0), nSend_(nSendPeers), nRecv_(nRecvPeers) {
    constexpr int kSignal = ncclFlowGetSignalWarpsPerPart(Protocol);
    if (nParts < 1 || nParts > NCCL_FLOW_MAX_PARTS || sendPart < 0 || sendPart >= nParts || recvPart < 0 ||
        recvPart >= nParts) {
      nccl_braid_::trap("ncclFlowProcessor: nParts must be 1..4 and sendPart, recvPart below it");
    }
    if (nSendPeers < 0 || nSendPeers > MaxPeers || nRecvPeers < 0 || nRecvPeers > MaxPeers) {
      nccl_braid_::trap("ncclFlowProcessor: nSendPeers and nRecvPeers must be 0..MaxPeers");
    }
    if (nWorkerWarps < 2 * nParts || static_cast<int>(blockDim.x) != 32 * (nWorkerWarps + nParts * kSignal)) {
      nccl_braid_::trap(
          "ncclFlowProcessor: launch 32 * (nWorkerWarps + nParts * ncclFlowGetSignalWarpsPerPart(Protocol)) threads, "
          "with nWorkerWarps at least 2 * nParts");
    }
    const size_t perChannel = static_cast<size_t>(config.nSlots) * static_cast<size_t>(nParts) * MaxPeers;
    if (config.nSlots < SlotsPerProcess || config.channelSize % perChannel != 0 ||
        config.connStatesPerChannel < nParts * MaxPeers) {
      nccl_braid_::trap(
          "ncclFlowProcessor: config needs nSlots >= SlotsPerProcess, channelSize a multiple of nSlots * nParts * "
          "MaxPeers and connStatesPerChannel >= nParts * MaxPeers");
    }
    slotBytes_ = config.channelSize / perChannel;
    if (slotBytes_ == 0 || slotBytes_ % nccl_braid_::flowLineBytes(Protocol) != 0) {
      nccl_braid_::trap("ncclFlowProcessor: a slot must be a whole number of the protocol's lines (LL 16, LL128 128)");
    }
    if (partWorkerWarps != nullptr) {
      int sum = 0;
      bool each = true;
      for (int p = 0; p < nParts; ++p) {
        sum += partWorkerWarps[p];
        each = each && partWorkerWarps[p] >= 2;
      }
      if (!each || sum != nWorkerWarps) {
        nccl_braid_::trap(
            "ncclFlowProcessor: partWorkerWarps must give each part at least 2 warps and sum to "
            "nWorkerWarps");
      }
    }
    const int part = ncclFlowThreadPart(nWorkerWarps, nParts, partWorkerWarps, kSignal);
    group_ = ncclCoopWarpSpan(ncclFlowPartWorkerWarp0(nWorkerWarps, nParts, part, partWorkerWarps, kSignal),
                              ncclFlowPartWorkerWarps(nWorkerWarps, nParts, part, partWorkerWarps) + kSignal, part);
    for (int i = 0; i < nSendPeers; ++i) {
      send_[i] =
          connect(comm, config, channelId, sendPart, sendSlots ? sendSlots[i] : i, sendPeers[i], ncclFlowTypeSend);
    }
    for (int j = 0; j < nRecvPeers; ++j) {
      recv_[j] =
          connect(comm, config, channelId, recvPart, recvSlots ? recvSlots[j] : j, recvPeers[j], ncclFlowTypeRecv);
    }
    group_.sync();  // every thread has read the saved steps before a close() of this part may write them
  }

  /* Reduces nElts elements of every source (src(0..nSrc-1), then each receive FIFO unless the receive is direct)
   * with redOp and stores the result to every destination (dst(0..nDst-1), then each send peer's FIFO unless the
   * send is direct), in ceil(bytes / slot payload) steps of at most SlotsPerProcess. All threads of the part call
   * it alike; nElts == 0 moves nothing and uses no slot. input and output are NCCL's window metadata for direct
   * transfers over GIN: braid does not need them. */
  template <bool Send, bool DirectSend, bool Recv, bool DirectRecv, typename T, typename SrcLambda, typename DstLambda,
            typename RedOp>
  NCCL_DEVICE_INLINE void process(ncclFlowSendTag<Send, DirectSend> send, ncclFlowRecvTag<Recv, DirectRecv> recv,
                                  ncclSymPtr<T> /*input*/, ncclSymPtr<T> /*output*/, SrcLambda src, int nSrc,
                                  DstLambda dst, int nDst, RedOp const& redOp, size_t nElts) {
    if (nElts == 0 || aborted_) return;
    const int nSend = Send ? nSend_ : 0, nRecv = Recv ? nRecv_ : 0;
    const bool fifoOut = !(Send && send.direct), fifoIn = !(Recv && recv.direct);
    const size_t perSlot = nccl_braid_::flowPayloadBytes(Protocol, slotBytes_) / sizeof(T);
    if ((Protocol == ncclFlowProtocolSimple && slotBytes_ % sizeof(T) != 0) || perSlot == 0) {
      nccl_braid_::trap("ncclFlowProcessor::process: the slot size is not a multiple of sizeof(T)");
    }
    if (nElts > perSlot * SlotsPerProcess) {
      nccl_braid_::trap("ncclFlowProcessor::process: nElts does not fit in SlotsPerProcess slots");
    }
    const bool writes = nDst + (fifoOut ? nSend : 0) > 0;  // (a direct receive with nothing to write only syncs)
    if (writes && nSrc + (fifoIn ? nRecv : 0) == 0) {
      nccl_braid_::trap("ncclFlowProcessor::process: destinations but no source to read");
    }
    if ((Send && send.direct && anyGin(send_, nSend)) || (Recv && recv.direct && anyGin(recv_, nRecv))) {
      nccl_braid_::trap(
          "ncclFlowProcessor::process: a direct send or receive with a peer over GIN is not built in braid (pass "
          "false: the FIFO)");
    }
    const int tid = group_.thread_rank();
    for (size_t off = 0; off < nElts; off += perSlot) {
      const size_t n = nElts - off < perSlot ? nElts - off : perSlot;
      /* Thread i waits for send peer i's credit and thread 32 + j for receive peer j's data; every other thread
       * takes the same slots without waiting. */
      bool lost = false;
      char* sendSlot[MaxPeers] = {};
      const char* recvSlot[MaxPeers] = {};
      for (int i = 0; i < nSend; ++i) {
        sendSlot[i] = static_cast<char*>(tid == i ? send_[i].waitSend() : send_[i].advanceFifoSlot());
        lost = lost || sendSlot[i] == nullptr;
      }
      for (int j = 0; j < nRecv; ++j) {
        recvSlot[j] = static_cast<const char*>(tid == 32 + j ? recv_[j].waitRecv() : recv_[j].advanceFifoSlot());
        lost = lost || recvSlot[j] == nullptr;
      }
      /* The waiting threads' acquires reach the whole part through the barrier. */
      if (nccl_braid_::coopAny(group_, lost)) {
        aborted_ = true;
        return;
      }
      for (size_t e = static_cast<size_t>(tid); writes && e < n; e += static_cast<size_t>(group_.size())) {
        T acc{};
        bool have = false;
        auto take = [&](T v) {
          acc = have ? static_cast<T>(redOp(acc, v)) : v;
          have = true;
        };
        for (int k = 0; k < nSrc; ++k) take(src(k)[off + e]);
        for (int j = 0; fifoIn && j < nRecv; ++j) take(reinterpret_cast<const T*>(recvSlot[j])[e]);
        for (int k = 0; k < nDst; ++k) dst(k)[off + e] = acc;
        for (int i = 0; fifoOut && i < nSend; ++i) reinterpret_cast<T*>(sendSlot[i])[e] = acc;
      }
      group_.sync();  // every thread's stores and loads of the slots are done
      if (tid >= 0 && tid < nSend && tid < MaxPeers) send_[tid].postSend(n * sizeof(T));
      const int recvRole = tid - 32;
      if (recvRole >= 0 && recvRole < nRecv && recvRole < MaxPeers) recv_[recvRole].postRecv();
    }
  }

  /* After the last process(): the connections' steps are saved where the next launch resumes (by the threads that
   * posted them; every thread may call it). Nothing is saved after an abort. */
  NCCL_DEVICE_INLINE void close() {
    if (aborted_) return;
    const int tid = group_.thread_rank();
    if (tid >= 0 && tid < nSend_ && tid < MaxPeers) send_[tid].close();
    const int recvRole = tid - 32;
    if (recvRole >= 0 && recvRole < nRecv_ && recvRole < MaxPeers) recv_[recvRole].close();
  }

 private:
  using Conn = nccl_braid_::FlowConn<GinBackendMask, FlowProtocol>;

  NCCL_DEVICE_INLINE static bool anyGin(const Conn* conns, int n) {
    bool any = false;
    for (int i = 0; i < n && i < MaxPeers; ++i) any = any || conns[i].useGin;
    return any;
  }

  NCCL_DEVICE_INLINE Conn connect(ncclDevComm const& comm, ncclFlowConfig<GinBackendMask> const& config, int channelId,
                                  int part, int slot, int peer, int type) {
    if (slot < 0 || slot >= MaxPeers || peer < 0 || peer >= comm.nRanks) {
      nccl_braid_::trap("ncclFlowProcessor: a peer slot is outside 0..MaxPeers-1 or a peer outside the world team");
    }
    const size_t conn = static_cast<size_t>(part) * MaxPeers + static_cast<size_t>(slot);
    const size_t connOffset = conn * static_cast<size_t>(config.nSlots) * slotBytes_;
    const size_t channel = static_cast<size_t>(channelId);
    const size_t stateIndex = channel * static_cast<size_t>(config.connStatesPerChannel) + conn;
    const ncclSymPtr<char> fifo = config.recvBuffer + (channel * config.channelSize + connOffset);
    const ncclSymPtr<ncclFlowConnState> state = config.connState + stateIndex;
    Conn c;
    if (ncclDevCommCanGetPeerPointer(comm, peer)) {
      c.lsa = ncclLsaFlowConn<FlowProtocol>(comm, fifo, state, peer, config.nSlots, slotBytes_, type, true);
      return c;
    }
    connectGin(comm, config, peer, fifo, connOffset, state, stateIndex, type, &c);
    return c;
  }

  /* A peer out of load/store reach (NCCL's GIN connection). */
  NCCL_DEVICE_INLINE void connectGin(ncclDevComm const& comm, ncclFlowConfig<GinBackendMask> const& config, int peer,
                                     ncclSymPtr<char> fifo, size_t connOffset, ncclSymPtr<ncclFlowConnState> state,
                                     size_t stateIndex, int type, Conn* c) {
    if constexpr (GinBackendMask == 0) {
      (void)config, (void)fifo, (void)connOffset, (void)state, (void)stateIndex, (void)type, (void)c, (void)peer;
      nccl_braid_::trap(
          "ncclFlowProcessor: a peer is out of load/store reach and the processor has no GIN backend mask "
          "(ncclLsaFlowProcessor): use ncclFlowProcessor<NCCL_GIN_BACKEND_MASK_ALL> with the config's GIN fields");
    } else {
      const ncclTeam world = ncclTeamWorld(comm);
      if (!ncclTeamRankIsMember(config.ginTeam, world, peer)) {
        nccl_braid_::trap("ncclFlowProcessor: a peer out of load/store reach is not a member of config.ginTeam");
      }
      if (comm.ginContextCount == 0) {
        nccl_braid_::trap(
            "ncclFlowProcessor: a peer is out of load/store reach and the device communicator has no GIN contexts "
            "(ask ncclDevCommCreate for GIN signals: ginSignalCount >= ginSignal0 + 2 * connection states)");
      }
      const ncclSymPtr<char> sendFifo = type == ncclFlowTypeSend ? config.ginBuffer + connOffset : ncclSymPtr<char>();
      const int context = config.ginContextIndex % static_cast<int>(comm.ginContextCount);
      c->gin = ncclGinFlowConn<GinBackendMask, FlowProtocol>(
          comm, context, config.ginTeam, ncclTeamRankToTeam(config.ginTeam, world, peer), fifo, sendFifo, state,
          config.ginSignal0, stateIndex, config.nSlots, slotBytes_, type, true, true);
      c->useGin = true;
    }
  }

  ncclCoopWarpSpan group_;
  int nSend_, nRecv_;
  size_t slotBytes_ = 0;
  bool aborted_ = false;
  Conn send_[MaxPeers];
  Conn recv_[MaxPeers];
};

template <int SlotsPerProcess = 1, int MaxPeers = 1, ncclFlowProtocol Protocol = ncclFlowProtocolSimple>
using ncclLsaFlowProcessor = ncclFlowProcessor<0, SlotsPerProcess, MaxPeers, Protocol>;

namespace nccl {
namespace utility {
/* NCCL's sum operator for the Flow processor and the reduce building blocks: a + b in T. */
template <typename T>
struct OpSum {
  using EltType = T;
  NCCL_DEVICE_INLINE T operator()(const T& a, const T& b) const { return a + b; }
};
}  // namespace utility
}  // namespace nccl

#endif /* NCCL_DEVICE_HALF_ */
#endif /* NCCL_DEVICE_FLOW_H_ */
