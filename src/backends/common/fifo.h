// A connector's FIFO as plain memory, shared by every party that touches it: the CPU executor, a GPU kernel, the
// network proxy, and a peer process. One direction of one link: kFifoSlots slots owned by the receiver plus the
// control block below. The sender fills slot tail % kFifoSlots and publishes it by bumping tail (release); the
// receiver consumes slot head % kFifoSlots and returns it by bumping head (release). LL slots follow the Simple
// slots; an LL message carries its own flags (ll_ops.h) and needs neither counter.
//
// FifoView is the POD both backends execute against (pointers plus the sizes read once at connect), FifoCursor the
// one piece of per-end state (how many slots this end has moved). They are separate so a kernel can keep cursors in
// device memory across launches and graph replays while views stay constant. The owning host object is
// transports/transport.h's Connector.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/backends/common/ll_ops.h"
#include "src/backends/common/mem_order.h"
#include "src/common/host_device.h"

namespace braid {

constexpr int kFifoSlots = 8;  // NCCL_STEPS

// The control block at the start of every connector segment. Counters sit on their own cache lines. Its layout is
// shared across processes (shm) and with the network proxy, so the offsets are fixed below.
struct alignas(64) FifoCtrl {
  uint64_t tail;  // slots published by the sender
  char pad0[56];
  uint64_t head;  // slots released by the receiver
  char pad1[56];
  // Messages the receiving rank's schedules will consume, announced when each operation starts: a network
  // transport posts receives for these only, so it never waits for data a peer that finished will not send.
  uint64_t wanted;
  char pad2[56];
  uint32_t senderAborted;    // set when the sending rank aborts or fails
  uint32_t receiverAborted;  // set when the receiving rank aborts or fails
  uint64_t slotBytes;
  uint32_t nslots;
  uint64_t llSlotBytes;  // bytes of lines per LL slot (ll_ops.h)
  // Bytes of the message in each Simple slot, written by the sender before it publishes the slot: a network
  // transport sends that many (shared-memory receivers know sizes from their schedule and ignore it).
  uint64_t msgBytes[kFifoSlots];
  // Why the connection failed, set (NUL-terminated) before the *Aborted flag by whoever detected it: a network
  // transport's proxy thread names the network error here.
  char failure[192];
};
static_assert(offsetof(FifoCtrl, tail) == 0, "FifoCtrl layout is shared across processes");
static_assert(offsetof(FifoCtrl, head) == 64, "FifoCtrl layout is shared across processes");
static_assert(offsetof(FifoCtrl, wanted) == 128, "FifoCtrl layout is shared across processes");
static_assert(offsetof(FifoCtrl, senderAborted) == 192, "FifoCtrl layout is shared across processes");
static_assert(offsetof(FifoCtrl, receiverAborted) == 196, "FifoCtrl layout is shared across processes");
static_assert(offsetof(FifoCtrl, slotBytes) == 200, "FifoCtrl layout is shared across processes");
static_assert(offsetof(FifoCtrl, nslots) == 208, "FifoCtrl layout is shared across processes");
static_assert(offsetof(FifoCtrl, llSlotBytes) == 216, "FifoCtrl layout is shared across processes");
static_assert(offsetof(FifoCtrl, msgBytes) == 224, "FifoCtrl layout is shared across processes");
static_assert(offsetof(FifoCtrl, failure) == 288, "FifoCtrl layout is shared across processes");
static_assert(sizeof(FifoCtrl) == 512, "FifoCtrl layout is shared across processes");

// Sets up a control block in fresh memory (the receiver's, before it describes the FIFO to the sender).
BRAID_HOST_DEVICE inline void fifoCtrlInit(FifoCtrl* c, uint64_t slotBytes, uint64_t llSlotBytes) {
  c->tail = 0;
  c->head = 0;
  c->wanted = 0;
  c->senderAborted = 0;
  c->receiverAborted = 0;
  c->slotBytes = slotBytes;
  c->nslots = kFifoSlots;
  c->llSlotBytes = llSlotBytes;
  for (int i = 0; i < kFifoSlots; ++i) c->msgBytes[i] = 0;
  c->failure[0] = '\0';
}

struct FifoCursor {
  uint64_t step = 0;  // slots this end has published (sender) or consumed (receiver)
};

struct FifoView {
  FifoCtrl* ctrl = nullptr;
  char* slots = nullptr;  // kFifoSlots Simple slots, then kFifoSlots LL slots
  uint64_t slotBytes = 0;
  uint64_t llSlotBytes = 0;
  bool isSend = false;

  BRAID_HOST_DEVICE static FifoView of(FifoCtrl* ctrl, char* slots, bool isSend) {
    return make(ctrl, slots, ctrl->slotBytes, ctrl->llSlotBytes, isSend);
  }
  // Without reading the control block (a FIFO in GPU memory, which the host cannot read).
  BRAID_HOST_DEVICE static FifoView make(FifoCtrl* ctrl, char* slots, uint64_t slotBytes, uint64_t llSlotBytes,
                                         bool isSend) {
    FifoView v;
    v.ctrl = ctrl;
    v.slots = slots;
    v.slotBytes = slotBytes;
    v.llSlotBytes = llSlotBytes;
    v.isSend = isSend;
    return v;
  }

  // Sender side.
  BRAID_HOST_DEVICE bool sendReady(const FifoCursor& c) const { return loadAcquire(&ctrl->head) + kFifoSlots > c.step; }
  BRAID_HOST_DEVICE char* sendSlot(const FifoCursor& c) const { return slots + (c.step % kFifoSlots) * slotBytes; }
  BRAID_HOST_DEVICE void sendPost(FifoCursor& c, uint64_t msgBytes) const {
    // The size travels with the slot: the release on tail publishes it together with the data.
    ctrl->msgBytes[c.step % kFifoSlots] = msgBytes;
    storeRelease(&ctrl->tail, ++c.step);
  }

  // Receiver side.
  BRAID_HOST_DEVICE bool recvReady(const FifoCursor& c) const { return loadAcquire(&ctrl->tail) > c.step; }
  BRAID_HOST_DEVICE const char* recvSlot(const FifoCursor& c) const {
    return slots + (c.step % kFifoSlots) * slotBytes;
  }
  BRAID_HOST_DEVICE void recvPost(FifoCursor& c) const { storeRelease(&ctrl->head, ++c.step); }

  // LL protocol: the lines of the current step's slot and the flag its message carries. Each step's message has
  // its own flag, so neither end touches head or tail; the cursor still counts steps.
  BRAID_HOST_DEVICE LlLine* llSlot(const FifoCursor& c) const {
    return reinterpret_cast<LlLine*>(slots + kFifoSlots * slotBytes + (c.step % kFifoSlots) * llSlotBytes);
  }
  BRAID_HOST_DEVICE uint32_t llFlagNow(const FifoCursor& c) const { return llFlag(c.step); }

  // Receive demand for a network transport (FifoCtrl::wanted).
  BRAID_HOST_DEVICE void expectMessages(uint64_t n) const { fetchAddRelease(&ctrl->wanted, n); }

  // Failure signalling between the two ends.
  BRAID_HOST_DEVICE void markAborted() const {
    storeRelease(isSend ? &ctrl->senderAborted : &ctrl->receiverAborted, 1u);
  }
  BRAID_HOST_DEVICE bool peerAborted() const {
    return loadAcquire(isSend ? &ctrl->receiverAborted : &ctrl->senderAborted) != 0;
  }
};

}  // namespace braid
