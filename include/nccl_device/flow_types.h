/* braid's nccl_device/flow_types.h: the types of NCCL 2.32's Flow device API (nccl_device/flow.h), NCCL's names,
 * constants and ncclFlowConnState layout (one cache line, allocated by the caller and zeroed).
 *
 * Flow moves data in pipelined steps through per-connection receive FIFOs: a FIFO of nSlots slots in the receiver's
 * window memory and one ncclFlowConnState per connection on each side. braid's protocol over them (the same for the
 * Simple, LL and LL128 formats; see flow.h):
 *   - state.signal[ncclFlowTypeRecv] on the receiver counts the slots its sender has filled (the sender stores it);
 *   - state.signal[ncclFlowTypeSend] on the sender counts the slots its receiver has drained (the receiver stores it);
 *   - state.step[type] is where this side's direction resumes at the next launch (saved by close()).
 * Over GIN (gin_flow.h) the two counts are GIN signals instead, and state.signalValue[type] is what this side has
 * added to its peer's signal so far, state.ginContextId_plus_1[type] the context it used. llStep is NCCL's LL field:
 * braid keeps its place and leaves it zero. */
#ifndef NCCL_DEVICE_FLOW_TYPES_H_
#define NCCL_DEVICE_FLOW_TYPES_H_

#include "core.h"

/* At most this many send peers and as many receive peers per part of a processor. */
#define NCCL_FLOW_MAX_PEERS 4
/* At most this many independently synchronised parts in one processor. */
#define NCCL_FLOW_MAX_PARTS 4
/* Signalling warps appended to each part's worker warps (NCCL's thread layout; LL128 shares one warp). */
#define NCCL_FLOW_SIGNAL_WARPS_PER_PART 2
#define NCCL_FLOW_LL128_SIGNAL_WARPS_PER_PART 1

/* NCCL's line sizes, which the LL and LL128 slot sizes must be multiples of. */
#ifndef NCCL_LL128_LINESIZE
#define NCCL_LL128_LINESIZE 128
#endif
#define NCCL_BRAID_LL_LINESIZE_ 16

#ifdef __cplusplus
struct alignas(64) ncclFlowConnState {
  uint64_t signal[2];
  uint64_t step[2];
  uint64_t signalValue[2];
  uint32_t ginContextId_plus_1[2];
  uint32_t llStep[2];
};
static_assert(sizeof(ncclFlowConnState) == 64, "ncclFlowConnState is one cache line");
#endif

#if NCCL_DEVICE_HALF_ && defined(__cplusplus)
#include "coop.h"
#include "ptr.h"

constexpr int ncclFlowTypeRecv = 0;
constexpr int ncclFlowTypeSend = 1;
constexpr int ncclFlowTypeNone = -1;

enum ncclFlowProtocol { ncclFlowProtocolSimple, ncclFlowProtocolLL, ncclFlowProtocolLL128, ncclFlowProtocolCount };

constexpr NCCL_HOST_DEVICE_INLINE int ncclFlowGetSignalWarpsPerPart(ncclFlowProtocol protocol) {
  return protocol == ncclFlowProtocolLL128 ? NCCL_FLOW_LL128_SIGNAL_WARPS_PER_PART : NCCL_FLOW_SIGNAL_WARPS_PER_PART;
}

/* Worker warps of `part`: partWorkerWarps[part], or an even split of nWorkerWarps. */
NCCL_HOST_DEVICE_INLINE int ncclFlowPartWorkerWarps(int nWorkerWarps, int nParts, int part,
                                                    int const* partWorkerWarps) {
  return partWorkerWarps == nullptr ? (part + 1) * nWorkerWarps / nParts - part * nWorkerWarps / nParts
                                    : partWorkerWarps[part];
}

/* The first warp of `part`: the parts before it, each its worker warps and its signalling warps. */
NCCL_HOST_DEVICE_INLINE int ncclFlowPartWorkerWarp0(int nWorkerWarps, int nParts, int part, int const* partWorkerWarps,
                                                    int signalWarpsPerPart = NCCL_FLOW_SIGNAL_WARPS_PER_PART) {
  int warp0 = part * signalWarpsPerPart;
  if (partWorkerWarps == nullptr) return warp0 + part * nWorkerWarps / nParts;
  for (int p = 0; p < part; ++p) warp0 += partWorkerWarps[p];
  return warp0;
}

/* CTA shared memory a processor is handed (NCCL's fields). braid's processor keeps what it needs per thread and
 * synchronises with named barriers, so it does not use it; declare it as NCCL's users do. */
struct ncclFlowPartShmem {
  void* sendBuf[NCCL_FLOW_MAX_PEERS];
  void* recvBuf[NCCL_FLOW_MAX_PEERS];
  uint64_t sendFlag[NCCL_FLOW_MAX_PEERS];
  uint64_t recvFlag[NCCL_FLOW_MAX_PEERS];
  bool sendUsesFifo[NCCL_FLOW_MAX_PEERS];
  bool recvUsesFifo[NCCL_FLOW_MAX_PEERS];
};
struct ncclFlowShmem {
  ncclFlowPartShmem parts[NCCL_FLOW_MAX_PARTS];
};

namespace nccl_braid_ {
/* Bytes of data one slot of `slotBytes` carries: all of it for Simple; LL's 16-byte lines carry 8 bytes of data and
 * LL128's 128-byte lines 120 in NCCL's formats, and braid's processor holds LL and LL128 transfers to those
 * capacities (its slots keep the data contiguous; the readiness is in the connection state). */
NCCL_HOST_DEVICE_INLINE size_t flowPayloadBytes(ncclFlowProtocol p, size_t slotBytes) {
  return p == ncclFlowProtocolLL      ? slotBytes / 2
         : p == ncclFlowProtocolLL128 ? slotBytes / NCCL_LL128_LINESIZE * (NCCL_LL128_LINESIZE - 8)
                                      : slotBytes;
}
/* The unit a slot size must be a multiple of (Simple: the element, checked at process()). */
NCCL_HOST_DEVICE_INLINE size_t flowLineBytes(ncclFlowProtocol p) {
  return p == ncclFlowProtocolLL ? NCCL_BRAID_LL_LINESIZE_ : p == ncclFlowProtocolLL128 ? NCCL_LL128_LINESIZE : 1;
}
}  // namespace nccl_braid_
#endif /* NCCL_DEVICE_HALF_ */
#endif /* NCCL_DEVICE_FLOW_TYPES_H_ */
