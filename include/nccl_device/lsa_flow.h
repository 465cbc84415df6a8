/* braid's nccl_device/lsa_flow.h: one Flow connection over load/store access (NCCL 2.32's ncclLsaFlowConn).
 *
 * A send connection writes into its peer's receive FIFO through LSA pointers; a receive connection reads its own.
 * The FIFO is nSlots slots of slotSize bytes in window memory (a ncclSymPtr, the same offset on both ranks), and
 * `state` is the connection's ncclFlowConnState on each side (flow_types.h says what each field holds). One thread
 * drives a connection's waits and posts; any thread may hold a copy and follow the step with advanceStep() to find
 * the current slot (slotPtr()), which is how ncclFlowProcessor spreads a slot's data over its threads.
 *
 * Sequence per slot: waitSend() (the receiver has drained the slot nSlots steps back) -> write -> postSend();
 * waitRecv() (the sender has filled this step's slot) -> read -> postRecv(). close() saves the step in the local
 * state, where the next launch's connection resumes. A wait returns NULL once the communicator is aborted.
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
      nccl_braid_::trap("ncclLsaFlowConn: the peer is not LSA-accessible (braid's Flow moves data over LSA only)");
    }
    step = state->step[type];
    localSignal = &state->signal[type];
    peerSignal = &peerState->signal[type == ncclFlowTypeSend ? ncclFlowTypeRecv : ncclFlowTypeSend];
  }

  /* The slot of the current step (no wait). */
  NCCL_DEVICE_INLINE char* slotPtr() const {
    return fifo + static_cast<size_t>(step % static_cast<uint64_t>(nSlots)) * slotSize;
  }
  NCCL_DEVICE_INLINE void* waitSend() {
    return waitFor(step + 1 - static_cast<uint64_t>(nSlots)) ? slotPtr() : nullptr;
  }
  NCCL_DEVICE_INLINE void postSend(size_t /*bytes*/ = 0) { post(); }
  NCCL_DEVICE_INLINE void* waitRecv() { return waitFor(step + 1) ? slotPtr() : nullptr; }
  NCCL_DEVICE_INLINE void postRecv() { post(); }
  /* Mirrors a post in a thread that holds a copy of the connection. */
  NCCL_DEVICE_INLINE uint64_t advanceStep() { return ++step; }
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
  NCCL_DEVICE_INLINE void post() {
    ++step;
    nccl_braid_::atomicStore64(peerSignal, step, cuda::memory_order_release);
  }
};
#endif /* NCCL_DEVICE_HALF_ */
#endif /* NCCL_DEVICE_LSA_FLOW_H_ */
