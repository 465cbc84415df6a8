/* braid's nccl_device/ll_a2a.h: the LL all-to-all, small values exchanged among a team's ranks without barriers.
 *
 * A session is one block of an LL buffer (ncclLLA2ACreateRequirement) shared by a group (Coop): the group sends
 * values of any trivially copyable type T into slots of peers' buffers and receives the values peers sent into its
 * own, epoch after epoch. Each slot is a 16-byte line of two 8-byte words, each word carrying 4 bytes of the value
 * and the epoch that wrote it, stored and loaded as single atomic words: a receiver that sees the epoch in both words
 * has the value, with no fence or flag between (the LL protocol). A value of T takes ceil(sizeof(T) / 8) slots,
 * `maxElts` apart (the session's pitch). Each block holds a header line (the epoch to resume at) and two halves of
 * nSlots lines: epochs alternate between them, so a slot is written again only two epochs later.
 *
 * Rules (NCCL's): within an epoch each slot of a receiver is written by at most one sender, once; before endEpoch,
 * the group must have sent to every member of the team and received from every member at least once (that is what
 * makes reusing the other half safe); a session ends after endEpoch, and the next session on the block resumes the
 * epochs. All threads of the group construct and end the session; send, bcast and recv are per thread. With multimem,
 * bcast stores each word once through the NVLS switch (see the constructor). */
#ifndef NCCL_DEVICE_LL_A2A_H_
#define NCCL_DEVICE_LL_A2A_H_

#include <string.h>

#include "core.h"

struct ncclLLA2AHandle {
  ncclDevResourceHandle_t bufHandle; /* written at ncclDevCommCreate */
  uint32_t nSlots;
};

/* Slots one block needs to send maxElts elements of up to maxEltSize bytes each: a slot is one 16-byte LL line
 * carrying 8 bytes of data and 8 of flags. -1 for a negative count or a size outside [1, 2^20]. */
NCCL_EXTERN_C NCCL_HOST_ONLY_ int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
NCCL_EXTERN_C NCCL_HOST_ONLY_ int pncclLLA2ACalcSlots(int maxElts, int maxEltSize);

/* Fills *outReq with the resource buffer of nBlocks blocks of nSlots slots each (a header line and two halves of
 * nSlots 16-byte lines per block) and points it at outHandle->bufHandle. ncclInvalidArgument for nBlocks < 1, nSlots <
 * 1 or a NULL pointer. */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots,
                                                                      ncclLLA2AHandle_t* outHandle,
                                                                      ncclDevResourceRequirements_t* outReq);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots,
                                                                       ncclLLA2AHandle_t* outHandle,
                                                                       ncclDevResourceRequirements_t* outReq);

#if NCCL_DEVICE_HALF_
template <typename Coop>
struct ncclLLA2ASession {
  /* Block `block` of `handle`'s buffer over `team` (members of this rank's LSA team), for values of up to
   * ncclLLA2ACalcSlots(maxElts, size) / maxElts slots each. multimem: bcast stores each word once through the switch
   * (NVLS), which writes it into every member's slot, where the buffer has a multicast mapping through mmHandle (a
   * device communicator made with lsaMultimem) and `team` is the whole LSA team; otherwise, and without multimem, it
   * stores into each member's slot through LSA pointers. send and recv are the same either way. */
  NCCL_DEVICE_INLINE ncclLLA2ASession(Coop coop, ncclDevComm const& comm, ncclTeam team, ncclLLA2AHandle handle,
                                      uint32_t block, int maxElts, bool multimem = false,
                                      ncclMultimemHandle mmHandle = {})
      : coop_(coop), comm_(comm), team_(team), handle_(handle), block_(block), pitch_(maxElts) {
    epoch_ = *header();
    if (epoch_ < kFirstEpoch) epoch_ = kFirstEpoch; /* a fresh (zeroed) buffer */
    mcBase_ = nullptr;
    if (multimem && team.nRanks == comm.lsaSize && team.rank == comm.lsaRank && team.stride == 1) {
      mcBase_ = static_cast<char*>(ncclGetResourceBufferMultimemPointer(comm, handle.bufHandle, mmHandle));
    }
  }
  NCCL_DEVICE_INLINE ~ncclLLA2ASession() {
    if (coop_.thread_rank() == 0) *header() = epoch_;
    coop_.sync(); /* a session that follows on this group reads the epoch written here */
  }
  ncclLLA2ASession(ncclLLA2ASession const&) = delete;
  ncclLLA2ASession& operator=(ncclLLA2ASession const&) = delete;

  /* Writes `data` into slot `elt` of team member `peer`'s buffer, for this epoch. */
  template <typename T>
  NCCL_DEVICE_INLINE void send(int peer, int elt, T data) {
    uint32_t words[kParts<T>() * 2];
    pack(data, words);
    uint64_t* line = lines(static_cast<char*>(ncclGetResourceBufferPeerPointer(comm_, handle_.bufHandle, team_, peer)));
    storeValue<T>(line + 2 * static_cast<size_t>(elt), words);
  }
  /* send to every member of the team (this rank too). */
  template <typename T>
  NCCL_DEVICE_INLINE void bcast(int elt, T data) {
    uint32_t words[kParts<T>() * 2];
    pack(data, words);
    /* The slot is at the same offset in every member's buffer: one store through the switch. */
    if (mcBase_ != nullptr) {
      storeValue<T>(lines(mcBase_) + 2 * static_cast<size_t>(elt), words, true);
      return;
    }
    for (int i = 0; i < team_.nRanks; ++i) {
      const int peer = (team_.rank + i) % team_.nRanks; /* starting at different members spreads the traffic */
      uint64_t* line =
          lines(static_cast<char*>(ncclGetResourceBufferPeerPointer(comm_, handle_.bufHandle, team_, peer)));
      storeValue<T>(line + 2 * static_cast<size_t>(elt), words);
    }
  }
  /* Waits for this epoch's value in slot `elt` of this rank's buffer, and returns it. A wait ends (with whatever the
   * slot holds) when the communicator is aborted. */
  template <typename T>
  NCCL_DEVICE_INLINE T recv(int elt) {
    T v[1];
    recvUnrolled<1, 1>(elt, 1, 0, v);
    return v[0];
  }
  /* Receives eltCount values (MinEltCount <= eltCount <= MaxEltCount) from slots eltStart, eltStart + eltStride, ...
   * into vals[0..eltCount), polling them together. */
  template <int MinEltCount, int MaxEltCount, typename T>
  NCCL_DEVICE_INLINE void recvUnrolled(int eltStart, int eltCount, int eltStride, T (&vals)[MaxEltCount]) {
    uint64_t* line = lines(static_cast<char*>(ncclGetResourceBufferLocalPointer(comm_, handle_.bufHandle)));
    for (int u = 0; u < MaxEltCount; ++u) {
      if (u >= MinEltCount && u >= eltCount) break;
      vals[u] = loadValue<T>(line + 2 * static_cast<size_t>(eltStart + u * eltStride));
    }
  }
  /* Receives eltCount values as recvUnrolled does (Unroll at a time) and folds them: red(...red(acc(v0), acc(v1))...),
   * in slot order. */
  template <int Unroll, typename Elt, typename EltToAcc, typename Reduce>
  NCCL_DEVICE_INLINE auto recvReduce(int eltStart, int eltCount, int eltStride, EltToAcc eltToAcc, Reduce red)
      -> decltype(eltToAcc(nccl_braid_::declval<Elt>())) {
    decltype(eltToAcc(nccl_braid_::declval<Elt>())) acc{};
    for (int i = 0; i < eltCount; i += Unroll) {
      Elt got[Unroll];
      const int n = eltCount - i < Unroll ? eltCount - i : Unroll;
      recvUnrolled<1, Unroll>(eltStart + i * eltStride, n, eltStride, got);
      for (int j = 0; j < n; ++j) acc = (i == 0 && j == 0) ? eltToAcc(got[0]) : red(acc, eltToAcc(got[j]));
    }
    return acc;
  }
  /* Ends this epoch (see the rules above); the next uses the other half of the buffer. */
  NCCL_DEVICE_INLINE void endEpoch(Coop) {
    if (epoch_ >= kWrapAt) {
      /* Near the end of the 32-bit epochs: clear the half just consumed (its next writers are two epochs away, and
       * the fence orders the clearing before anything this rank sends next), so no stale line of an old cycle can
       * match an epoch of the next one, which starts over at kFirstEpoch + 1 (same parity sequence). */
      coop_.sync();
      uint64_t* line = lines(static_cast<char*>(ncclGetResourceBufferLocalPointer(comm_, handle_.bufHandle)));
      for (uint32_t i = static_cast<uint32_t>(coop_.thread_rank()); i < 2 * handle_.nSlots;
           i += static_cast<uint32_t>(coop_.size())) {
        nccl_braid_::atomicStore64(line + i, 0, cuda::memory_order_relaxed);
      }
    }
    /* A peer's writes into a half this rank cleared come after what it received from this rank since: the fences
     * on both sides of the wrap (and the cycle's first epochs) make the clearing happen before them. */
    if (epoch_ >= kWrapAt || epoch_ <= kFirstEpoch + 1) {
      __threadfence_system();
      /* Peers' next writes into the cleared half come through the switch: order the unicast clearing against them. */
      if (mcBase_ != nullptr) nccl_braid_::mcFence();
    }
    coop_.sync();
    epoch_ = epoch_ == 0xffffffffu ? kFirstEpoch + 1 : epoch_ + 1;
  }

 private:
  static constexpr uint32_t kFirstEpoch = 1;       /* 0 is what a zeroed line holds: never an epoch */
  static constexpr uint32_t kWrapAt = 0xfffffffeu; /* the last two epochs of a cycle clear their halves */
  template <typename T>
  NCCL_HOST_DEVICE_INLINE static constexpr int kParts() {
    return static_cast<int>((sizeof(T) + 7) / 8);
  }
  /* The header line's epoch word of this block. */
  NCCL_DEVICE_INLINE uint32_t* header() {
    char* base = static_cast<char*>(ncclGetResourceBufferLocalPointer(comm_, handle_.bufHandle));
    return reinterpret_cast<uint32_t*>(base + static_cast<size_t>(block_) * (1u + 2u * handle_.nSlots) * 16u);
  }
  /* This epoch's half of the block in the buffer at `base`, as 8-byte words (two per line). */
  NCCL_DEVICE_INLINE uint64_t* lines(char* base) {
    const size_t line = static_cast<size_t>(block_) * (1u + 2u * handle_.nSlots) + 1u + (epoch_ & 1u) * handle_.nSlots;
    return reinterpret_cast<uint64_t*>(base + line * 16u);
  }
  template <typename T>
  NCCL_DEVICE_INLINE static void pack(const T& data, uint32_t* words) {
    for (int i = 0; i < kParts<T>() * 2; ++i) words[i] = 0;
    memcpy(words, &data, sizeof(T));
  }
  /* Each 8-byte word is one store (through the switch when `multicast`: `at` is then a multicast address). */
  template <typename T>
  NCCL_DEVICE_INLINE void storeValue(uint64_t* at, const uint32_t* words, bool multicast = false) {
    for (int u = 0; u < kParts<T>(); ++u) {
      uint64_t* w = at + 2 * static_cast<size_t>(u) * static_cast<size_t>(pitch_);
      const uint64_t tag = static_cast<uint64_t>(epoch_) << 32;
      for (int k = 0; k < 2; ++k) {
        if (multicast) {
          nccl_braid_::mcStoreWord(w + k, tag | words[2 * u + k], 8);
        } else {
          nccl_braid_::atomicStore64(w + k, tag | words[2 * u + k], cuda::memory_order_relaxed);
        }
      }
    }
  }
  template <typename T>
  NCCL_DEVICE_INLINE T loadValue(const uint64_t* at) {
    uint32_t words[kParts<T>() * 2];
    for (int u = 0; u < kParts<T>(); ++u) {
      const uint64_t* w = at + 2 * static_cast<size_t>(u) * static_cast<size_t>(pitch_);
      for (int k = 0; k < 2; ++k) {
        uint64_t v;
        for (uint32_t polls = 1;; ++polls) {
          v = nccl_braid_::atomicLoad64(w + k, cuda::memory_order_relaxed);
          if (static_cast<uint32_t>(v >> 32) == epoch_) break;
          if ((polls & 63u) == 0) {
            if (nccl_braid_::aborted(comm_)) break;
            nccl_braid_::backOff();
          }
        }
        words[2 * u + k] = static_cast<uint32_t>(v);
      }
    }
    T out;
    memcpy(&out, words, sizeof(T));
    return out;
  }

  Coop coop_;
  ncclDevComm const& comm_;
  ncclTeam team_;
  ncclLLA2AHandle handle_;
  uint32_t block_;
  int pitch_;
  uint32_t epoch_;
  char* mcBase_; /* the buffer as one multicast address (bcast through the switch), or null */
};
#endif /* NCCL_DEVICE_HALF_ */

#endif /* NCCL_DEVICE_LL_A2A_H_ */
