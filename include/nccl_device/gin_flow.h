/* braid's nccl_device/gin_flow.h: one Flow connection over GIN (NCCL 2.32's ncclGinFlowConn), for peers this rank
 * cannot load and store (ranks of other hosts: ncclDevCommCanGetPeerPointer is false).
 *
 * The same stepping as ncclLsaFlowConn (lsa_flow.h), with GIN moving the data and the credits:
 *   - a send connection fills a slot of its own staging FIFO (`sendFifo`, window memory: ncclFlowConfig::ginBuffer
 *     in a processor), then postSend puts the slot into the peer's receive FIFO (`recvFifo`, the same offset there)
 *     with a strong signal that adds the steps filled since the last post to the peer's signal;
 *   - a receive connection waits on its signal for the slot, reads its own FIFO, and postRecv adds the steps drained
 *     to the sender's signal, each step at once. (NCCL batches these credits; in a ring where every rank waits for
 *     its send credit before it drains its next slot, a credit held back stalls every rank: braid does not batch.)
 * Signals: a connection with index i (the connection state's index in a processor) uses GIN signal signal0 + 2 * i +
 * type on each side (type: ncclFlowTypeRecv 0 counts filled slots, ncclFlowTypeSend 1 drained ones), NCCL's
 * numbering: a device communicator needs reqs->ginSignalCount >= signal0 + 2 * (connections). close() saves the
 * step and the signal value posted so far in the connection state (step[type], signalValue[type]), where the next
 * launch resumes (and ginContextId_plus_1[type], the context it used: recorded, not checked). The counts live in the
 * GIN signals, not the state: to start a connection over, zero its state and reset both signals (resetSignal). One
 * thread must drive a connection's posts (it holds the posted value); others may follow the steps with
 * advanceFifoSlot() or advanceStep(). A wait returns NULL once the communicator is aborted. Every protocol uses braid's
 * Flow slot format (data contiguous, readiness by the signal), so LL and LL128 differ from Simple only in the
 * capacities the processor gives them. postSendFrom and postSendDirect (a source or destination outside the FIFOs) are
 * not built: a kernel error names them. Device code only. */
#ifndef NCCL_DEVICE_GIN_FLOW_H_
#define NCCL_DEVICE_GIN_FLOW_H_

#include "flow_types.h"
#include "gin.h"

#if NCCL_DEVICE_HALF_ && defined(__cplusplus)
template <unsigned GinBackendMask = NCCL_GIN_BACKEND_MASK_ALL, ncclFlowProtocol Protocol = ncclFlowProtocolSimple>
struct ncclGinFlowConn {
  int nSlots = 0;
  size_t slotSize = 0;
  int type = ncclFlowTypeNone;
  ncclDevComm const* comm = nullptr;
  int contextId = 0;
  ncclTeam team{};
  int peer = -1;                      /* in `team` */
  ncclFlowConnState* state = nullptr; /* this side's */
  ncclSymPtr<char> fifo;              /* a send connection's staging FIFO; a receive connection's FIFO */
  ncclSymPtr<char> peerFifo;          /* a send connection's: the peer's receive FIFO */
  ncclGinSignal_t localSignal = 0;    /* what this side waits on */
  ncclGinSignal_t peerSignal = 0;     /* what it adds to on the peer */
  uint64_t step = 0;
  uint64_t signalValue = 0; /* the steps this side has posted to the peer's signal so far */

  ncclGinFlowConn() = default;

  /* recvFifo and connState name the same connection on every rank (signalIndex too); sendFifo is the sender's
   * staging FIFO (ignored for a receive connection). waitRole and recvPost are NCCL's role flags: braid's receive
   * connection posts its drained slots as it goes, and any thread may wait. */
  NCCL_DEVICE_INLINE ncclGinFlowConn(ncclDevComm const& comm_, int contextId_, ncclTeam team_, int peer_,
                                     ncclSymPtr<char> recvFifo, ncclSymPtr<char> sendFifo,
                                     ncclSymPtr<ncclFlowConnState> connState, ncclGinSignal_t signal0,
                                     size_t signalIndex, int nSlots_, size_t slotSize_, int type_, bool waitRole,
                                     bool /*recvPost*/)
      : nSlots(nSlots_),
        slotSize(slotSize_),
        type(type_),
        comm(&comm_),
        contextId(contextId_),
        team(team_),
        peer(peer_) {
    if (type != ncclFlowTypeSend && type != ncclFlowTypeRecv) return;
    (void)gin(); /* a context the device communicator lacks traps here, naming it */
    state = connState.localPtr();
    if (state == nullptr || recvFifo.window == nullptr || (type == ncclFlowTypeSend && sendFifo.window == nullptr)) {
      nccl_braid_::trap(
          "ncclGinFlowConn: the connection state, the receive FIFO and (to send) the staging FIFO must be window "
          "memory (ncclFlowConfig::ginBuffer in a processor)");
    }
    fifo = type == ncclFlowTypeSend ? sendFifo : recvFifo;
    peerFifo = recvFifo;
    localSignal = signal0 + static_cast<ncclGinSignal_t>(2 * signalIndex + static_cast<size_t>(type));
    peerSignal = signal0 + static_cast<ncclGinSignal_t>(2 * signalIndex + static_cast<size_t>(1 - type));
    step = state->step[type];
    signalValue = state->signalValue[type];
    (void)waitRole;
  }

  NCCL_DEVICE_INLINE void* waitSend() {
    return waitFor(step + 1 - static_cast<uint64_t>(nSlots)) ? advanceFifoSlot() : nullptr;
  }
  /* Puts the slot last taken (bytes of it; 0: the signal alone) into the peer's FIFO with its signal. */
  NCCL_DEVICE_INLINE void postSend(size_t bytes) {
    if (bytes > slotSize) nccl_braid_::trap("ncclGinFlowConn::postSend: more bytes than a slot holds");
    const size_t offset = static_cast<size_t>((step - 1) % static_cast<uint64_t>(nSlots)) * slotSize;
    const ncclGin_StrongSignalAdd add{peerSignal, step - signalValue};
    if (bytes != 0) {
      gin().put(team, peer, peerFifo + offset, fifo + offset, bytes, add);
    } else {
      gin().signal(team, peer, add);
    }
    signalValue = step;
  }
  NCCL_DEVICE_INLINE void postSendFrom(size_t, ncclSymPtr<char>) {
    nccl_braid_::trap("ncclGinFlowConn::postSendFrom is not built in braid: fill the slot and postSend");
  }
  NCCL_DEVICE_INLINE void postSendDirect(size_t, ncclSymPtr<char>, ncclSymPtr<char>) {
    nccl_braid_::trap("ncclGinFlowConn::postSendDirect is not built in braid: fill the slot and postSend");
  }
  NCCL_DEVICE_INLINE void* waitRecv() { return waitFor(step + 1) ? advanceFifoSlot() : nullptr; }
  NCCL_DEVICE_INLINE void postRecv() { signal(step); }
  /* Adds what the steps up to `value` are not yet counted for to the peer's signal. */
  NCCL_DEVICE_INLINE void signal(uint64_t value) {
    if (value == signalValue) return;
    gin().signal(team, peer, ncclGin_StrongSignalAdd{peerSignal, value - signalValue});
    signalValue = value;
  }
  NCCL_DEVICE_INLINE uint64_t advanceStep() { return step++; }
  NCCL_DEVICE_INLINE void* advanceFifoSlot() {
    char* slot = fifo.localPtr() + static_cast<size_t>(step % static_cast<uint64_t>(nSlots)) * slotSize;
    ++step;
    return slot;
  }
  NCCL_DEVICE_INLINE uint64_t stepFlag() const { return step; }
  NCCL_DEVICE_INLINE void close() {
    if (state == nullptr) return;
    state->step[type] = step;
    state->signalValue[type] = signalValue;
    state->ginContextId_plus_1[type] = static_cast<uint32_t>(contextId) + 1u;
  }

 private:
  NCCL_DEVICE_INLINE ncclGin_BackendMask<GinBackendMask> gin() const {
    return ncclGin_BackendMask<GinBackendMask>(*comm, contextId);
  }
  /* Until the local signal reaches `target` (a signed distance: the first nSlots sends need no credit); false once the
   * communicator is aborted. */
  NCCL_DEVICE_INLINE bool waitFor(uint64_t target) {
    /* The timed wait returns ncclInProgress after an abort; the timeout is out of reach. */
    return gin().waitSignal(ncclCoopThread{}, localSignal, target, 64, cuda::memory_order_acquire, ~0ull >> 1) ==
           ncclSuccess;
  }
};
#endif /* NCCL_DEVICE_HALF_ */
#endif /* NCCL_DEVICE_GIN_FLOW_H_ */
