/* braid's nccl_device/lsa_flow.h: one Flow connection over load/store access (NCCL 2.32's ncclLsaFlowConn).
 *
 * A send connection writes into its peer's receive FIFO through LSA pointers; a receive connection reads its own.
 * The FIFO is nSlots slots of slotSize bytes in window memory (a ncclSymPtr, the same offset on both ranks), and
 * `state` is the connection's ncclFlowConnState on each side (flow_types.h says what each field holds). One thread
 * drives a connection's waits and posts; other threads may hold copies and follow the steps with advanceFifoSlot()
 * (the slot, without waiting) or advanceStep(), which is how ncclFlowProcessor spreads a slot's data over its threads.
 *
 * Sequence per slot (NCCL's): waitSend() (the receiver has drained the slot nSlots steps back; returns it and moves
 * on) -> write -> postSend(bytes); waitRecv() (the sender has filled the slot) -> read -> postRecv(). close() saves
 * the step in the local state, where the next launch's connection resumes. A wait returns NULL once the communicator
 * is aborted.
 * Device code only. */
#ifndef NCCL_DEVICE_LSA_FLOW_H_
#define NCCL_DEVICE_LSA_FLOW_H_

#include "flow_types.h"

#if NCCL_DEVICE_HALF_ && defined(__cplusplus)
template <ncclFlowProtocol Protocol = ncclFlowProtocolSimple>
struct ncclLsaFlowConn {
  int nSlots = 0;
  size_t slotSize = 0;
  int type = ncclFlowTypeNone;
  const uint32_t* abortFlag = nullptr;
  ncclFlowConnState* state = nullptr; /* this side's */
  char* fifo = nullptr;               /* a send connection's: the peer's FIFO; a receive connection's: its own */
  uint64_t step = 0;
  uint64_t* localSignal = nullptr; /* what this side waits on */
  uint64_t* peerSignal = nullptr;  /* what it posts to */

  ncclLsaFlowConn() = default;

  /* recvFifo and state name the same connection on every rank; peer is a world rank this one has LSA access to
   * (ncclGetPeerPointer): a kernel error otherwise. recvPost is NCCL's role flag; braid's receive connection always
   * posts its drained slots to the sender. */
  NCCL_DEVICE_INLINE ncclLsaFlowConn(ncclDevComm const& comm, ncclSymPtr<char> recvFifo,
                                     ncclSymPtr<ncclFlowConnState> connState, int peer, int nSlots_, size_t slotSize_,
                                     int type_, bool /*recvPost*/)
      : nSlots(nSlots_), slotSize(slotSize_), type(type_), abortFlag(comm.abortFlag) {
    state = connState.localPtr();
    ncclFlowConnState* peerState = connState.peerPtr(peer);
    fifo = type == ncclFlowTypeSend ? recvFifo.peerPtr(peer) : recvFifo.localPtr();
    if (state == nullptr || peerState == nullptr || fifo == nullptr) {
      nccl_braid_::trap("ncclLsaFlowConn: the peer is not LSA-accessible (ncclGinFlowConn reaches it over GIN)");
    }
    step = state->step[type];
    localSignal = &state->signal[type];
    peerSignal = &peerState->signal[type == ncclFlowTypeSend ? ncclFlowTypeRecv : ncclFlowTypeSend];
  }

  /* NCCL's stepping: a wait returns the current step's slot and moves past it; a post publishes what the steps so
   * far filled (postSend) or drained (postRecv) without moving. A thread in a post role that did not wait mirrors
   * the wait with advanceStep(); a thread that only needs the slot takes it with advanceFifoSlot(). */
  NCCL_DEVICE_INLINE void* waitSend() {
    return waitFor(step + 1 - static_cast<uint64_t>(nSlots)) ? advanceFifoSlot() : nullptr;
  }
  NCCL_DEVICE_INLINE void postSend(size_t /*bytes*/) { post(); }
  NCCL_DEVICE_INLINE void* waitRecv() { return waitFor(step + 1) ? advanceFifoSlot() : nullptr; }
  NCCL_DEVICE_INLINE void postRecv() { post(); }
  /* Moves one step on; returns the step it was at. */
  NCCL_DEVICE_INLINE uint64_t advanceStep() { return step++; }
  /* The current step's slot (no wait), moving past it. */
  NCCL_DEVICE_INLINE void* advanceFifoSlot() {
    char* slot = fifo + static_cast<size_t>(step % static_cast<uint64_t>(nSlots)) * slotSize;
    ++step;
    return slot;
  }
  /* What a post now publishes: the steps this side has completed. */
  NCCL_DEVICE_INLINE uint64_t stepFlag() const { return step; }
  NCCL_DEVICE_INLINE void close() {
    if (state != nullptr) state->step[type] = step;
  }

 private:
  /* Until the local signal reaches `target` (as a signed distance: the first nSlots sends need no credit); false once
   * the communicator is aborted. */
  NCCL_DEVICE_INLINE bool waitFor(uint64_t target) {
    for (uint32_t polls = 1;; ++polls) {
      const uint64_t v = nccl_braid_::atomicLoad64(localSignal, cuda::memory_order_acquire);
      if (static_cast<int64_t>(v - target) >= 0) return true;
      if ((polls & 63u) != 0) continue;
      if (abortFlag != nullptr && nccl_braid_::atomicLoad(abortFlag, cuda::memory_order_relaxed) != 0) return false;
      nccl_braid_::backOff();
    }
  }
  NCCL_DEVICE_INLINE void post() { nccl_braid_::atomicStore64(peerSignal, step, cuda::memory_order_release); }
};
#endif /* NCCL_DEVICE_HALF_ */
#endif /* NCCL_DEVICE_LSA_FLOW_H_ */
