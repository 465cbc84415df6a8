// How a step's slot travels, as policies the step engine (step_engine.h) is a template over:
//   Simple  the slot itself; the tail counter says it is there (release/acquire in fifo.h).
//   LL      8-byte lines of 4 data + 4 flag bytes in the FIFO's LL area (ll_ops.h); the flags say it is there. The
//           payload is gathered into the item's staging on receipt and packed from it on send, so the step's data
//           movement is the Simple one. Over a connector whose messages arrive whole (a network) LL uses the Simple
//           slot: the completed receive is the flag, and lines would only double the bytes on the wire.
//   LL128   128-byte lines of 120 data bytes and a flag word (ll128_ops.h). This is the reference form (release and
//           acquire per line, correct anywhere); the CPU backend never selects LL128, a GPU kernel relies on
//           128-byte store delivery instead.
// Each policy answers, for one step: is the slot ready (thread 0's cheap check), has this thread's part of the
// message arrived (every thread), where the received payload is, where the payload to send goes, and what to do
// to publish it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/backends/common/fifo.h"
#include "src/backends/common/ll128_ops.h"
#include "src/backends/common/ll_ops.h"
#include "src/backends/common/work.h"
#include "src/common/host_device.h"

namespace braid {

struct SimpleProto {
  BRAID_HOST_DEVICE static bool recvReady(const ConnSlot& rc) { return rc.view.recvReady(*rc.cursor); }
  template <class Cta>
  BRAID_HOST_DEVICE static bool recvArrived(const Cta&, const WorkDesc&, ItemState&, const ConnSlot&, size_t) {
    return true;
  }
  BRAID_HOST_DEVICE static const char* recvSrc(const WorkDesc&, const ConnSlot& rc) {
    return rc.view.recvSlot(*rc.cursor);
  }
  BRAID_HOST_DEVICE static char* sendDst(const WorkDesc&, const ConnSlot& sc) { return sc.view.sendSlot(*sc.cursor); }
  template <class Cta>
  BRAID_HOST_DEVICE static void sendPublish(const Cta&, const WorkDesc&, const ConnSlot&, size_t) {}
};

// What both line protocols share: the lines live in the FIFO's LL area and their payload in the item's staging,
// except over a connector whose messages arrive whole, where the Simple slot is the message.
struct LinesProtoBase {
  BRAID_HOST_DEVICE static bool recvReady(const ConnSlot& rc) {
    return !rc.wholeMessages || rc.view.recvReady(*rc.cursor);
  }
  BRAID_HOST_DEVICE static const char* recvSrc(const WorkDesc& w, const ConnSlot& rc) {
    return rc.wholeMessages ? rc.view.recvSlot(*rc.cursor) : w.llRecv;
  }
  BRAID_HOST_DEVICE static char* sendDst(const WorkDesc& w, const ConnSlot& sc) {
    return sc.wholeMessages ? sc.view.sendSlot(*sc.cursor) : w.llSend;
  }
};

struct LlProto : LinesProtoBase {
  template <class Cta>
  BRAID_HOST_DEVICE static bool recvArrived(const Cta& cta, const WorkDesc& w, ItemState& st, const ConnSlot& rc,
                                            size_t msgBytes) {
    if (rc.wholeMessages) return true;
    const LlLine* lines = rc.view.llSlot(*rc.cursor);
    const uint32_t flag = rc.view.llFlagNow(*rc.cursor);
    // A one-thread CTA resumes where it stopped and never reads a line twice.
    if constexpr (Cta::kSerial) return llTryReadMessage(lines, w.llRecv, msgBytes, flag, &st.llLinesDone);
    return llTryReadMessageLines(lines, w.llRecv, msgBytes, flag, static_cast<size_t>(cta.tid()),
                                 static_cast<size_t>(cta.nthreads()));
  }
  template <class Cta>
  BRAID_HOST_DEVICE static void sendPublish(const Cta& cta, const WorkDesc& w, const ConnSlot& sc, size_t msgBytes) {
    if (sc.wholeMessages) return;
    LlLine* lines = sc.view.llSlot(*sc.cursor);
    const uint32_t flag = sc.view.llFlagNow(*sc.cursor);
    if constexpr (Cta::kSerial) {
      llWriteMessage(lines, w.llSend, msgBytes, flag);
    } else {
      llWriteMessageLines(lines, w.llSend, msgBytes, flag, static_cast<size_t>(cta.tid()),
                          static_cast<size_t>(cta.nthreads()));
    }
  }
};

struct Ll128Proto : LinesProtoBase {
  template <class Cta>
  BRAID_HOST_DEVICE static bool recvArrived(const Cta& cta, const WorkDesc& w, ItemState&, const ConnSlot& rc,
                                            size_t msgBytes) {
    if (rc.wholeMessages) return true;
    return ll128TryReadMessageLines(reinterpret_cast<const Ll128Line*>(rc.view.llSlot(*rc.cursor)), w.llRecv, msgBytes,
                                    rc.view.llFlagNow(*rc.cursor), static_cast<size_t>(cta.tid()),
                                    static_cast<size_t>(cta.nthreads()));
  }
  template <class Cta>
  BRAID_HOST_DEVICE static void sendPublish(const Cta& cta, const WorkDesc& w, const ConnSlot& sc, size_t msgBytes) {
    if (sc.wholeMessages) return;
    ll128WriteMessageLines(reinterpret_cast<Ll128Line*>(sc.view.llSlot(*sc.cursor)), w.llSend, msgBytes,
                           sc.view.llFlagNow(*sc.cursor), static_cast<size_t>(cta.tid()),
                           static_cast<size_t>(cta.nthreads()));
  }
};

}  // namespace braid
