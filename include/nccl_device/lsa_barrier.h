/* braid's nccl_device/lsa_barrier.h: barriers among the ranks of an LSA team, in kernels.
 *
 * A barrier's state lives in a resource buffer of the device communicator (ncclLsaBarrierCreateRequirement sizes
 * it; reqs->lsaBarrierCount makes the one in ncclDevComm::lsaBarrier): for each of its nBarriers barriers, this
 * rank's epoch (how many times it has passed that barrier) and an inbox with one word per team member, where member
 * m writes the epoch it has reached. Arriving writes epoch + 1 into every member's inbox (a store with the order
 * given: release makes this rank's earlier writes visible to whoever sees the arrival); waiting reads every word of
 * this rank's inbox until each member has arrived (acquire), so a sync is a full barrier among the team for that
 * barrier index. Each word has one writer: no read-modify-write crosses the link. With multimem (below) the arrival is
 * one multicast store that the switch writes into every member's inbox.
 *
 * Rules: every member of the team runs the same sequence of syncs on a barrier index; a barrier index is used by
 * one group (Coop) at a time on each rank (give each CTA its own index: index = blockIdx.x is the usual choice);
 * all threads of the group construct the session, call the same methods, and destroy it. The epoch is written back
 * when the session ends, so barriers carry on across sessions and kernel launches. */
#ifndef NCCL_DEVICE_LSA_BARRIER_H_
#define NCCL_DEVICE_LSA_BARRIER_H_

#include "core.h"

/* Fills *outReq with the resource buffer that nBarriers barriers over `team` need (described above) and points it at
 * outHandle->bufHandle; chain *outReq into ncclDevCommRequirements::resourceRequirementsList. Pure host computation,
 * thread-safe. ncclInvalidArgument for nBarriers < 1, team.nRanks < 1 or a NULL pointer. Layout: nBarriers epoch words
 * (rounded up to 128-byte lines), then nBarriers x team.nRanks inbox words (rounded up likewise). */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                                           ncclLsaBarrierHandle_t* outHandle,
                                                                           ncclDevResourceRequirements_t* outReq);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                                            ncclLsaBarrierHandle_t* outHandle,
                                                                            ncclDevResourceRequirements_t* outReq);

/* braid's layout of a barrier buffer: where the inboxes start (after the epoch words, on a 128-byte line), and the
 * whole buffer's size. */
NCCL_HOST_DEVICE_INLINE size_t ncclBraidLsaBarrierInboxOffset_(int nBarriers) {
  return ((size_t)nBarriers * 4u + 127u) / 128u * 128u;
}
NCCL_HOST_DEVICE_INLINE size_t ncclBraidLsaBarrierBytes_(int nBarriers, int nRanks) {
  return ncclBraidLsaBarrierInboxOffset_(nBarriers) + ((size_t)nBarriers * (size_t)nRanks * 4u + 127u) / 128u * 128u;
}

#if NCCL_DEVICE_HALF_
template <typename Coop>
struct ncclLsaBarrierSession {
  /* A session on barrier `index` of `handle`'s barriers over `team` (a team of ranks in this rank's LSA team).
   * multimem: arrive with one multicast store (NVLS) that writes this rank's word into every member's inbox at once,
   * where the barrier buffer has a multicast mapping through mmHandle (a device communicator made with lsaMultimem)
   * and `team` is the whole LSA team (a store through the switch reaches every LSA member); otherwise, and without
   * multimem, one store per member through LSA pointers. Waiting is the same either way. */
  NCCL_DEVICE_INLINE ncclLsaBarrierSession(Coop coop, ncclDevComm const& comm, ncclTeam team,
                                           ncclLsaBarrierHandle handle, uint32_t index, bool multimem = false,
                                           ncclMultimemHandle mmHandle = {})
      : coop_(coop), comm_(comm), team_(team), handle_(handle), index_(index) {
    epochWord_ = static_cast<uint32_t*>(ncclGetResourceBufferLocalPointer(comm, handle.bufHandle)) + index;
    epoch_ = *epochWord_;
    mcSlot_ = nullptr;
    if (multimem && team.nRanks == comm.lsaSize && team.rank == comm.lsaRank && team.stride == 1) {
      char* mc = static_cast<char*>(ncclGetResourceBufferMultimemPointer(comm, handle.bufHandle, mmHandle));
      if (mc != nullptr) {
        mcSlot_ = reinterpret_cast<uint32_t*>(mc + ncclBraidLsaBarrierInboxOffset_(handle.nBarriers)) +
                  static_cast<size_t>(index) * static_cast<size_t>(team.nRanks) + static_cast<size_t>(team.rank);
      }
    }
  }
  /* The LSA team's barriers of the device communicator (reqs->lsaBarrierCount), through its multicast handle. */
  NCCL_DEVICE_INLINE ncclLsaBarrierSession(Coop coop, ncclDevComm const& comm, ncclTeamTagLsa, uint32_t index,
                                           bool multimem = false)
      : ncclLsaBarrierSession(coop, comm, ncclTeamLsa(comm), comm.lsaBarrier, index, multimem, comm.lsaMultimem) {}
  NCCL_DEVICE_INLINE ~ncclLsaBarrierSession() {
    if (coop_.thread_rank() == 0) *epochWord_ = epoch_;
    coop_.sync(); /* a session that follows on this group reads the epoch written here */
  }
  ncclLsaBarrierSession(ncclLsaBarrierSession const&) = delete;
  ncclLsaBarrierSession& operator=(ncclLsaBarrierSession const&) = delete;

  /* Tells every member this rank has reached the barrier (after everything the group did before). */
  NCCL_DEVICE_INLINE void arrive(Coop, cuda::memory_order order) {
    coop_.sync();
    epoch_ += 1;
    if (mcSlot_ != nullptr) {
      if (coop_.thread_rank() == 0) nccl_braid_::mcStore32(mcSlot_, epoch_, order);
      return;
    }
    for (int m = coop_.thread_rank(); m < team_.nRanks; m += coop_.size()) {
      nccl_braid_::atomicStore(inbox(m) + team_.rank, epoch_, order);
    }
  }
  /* Waits until every member has arrived at this epoch; aborting the communicator ends the wait. */
  NCCL_DEVICE_INLINE void wait(Coop, cuda::memory_order order) { (void)waitUntil(order, false, 0); }
  NCCL_DEVICE_INLINE void sync(Coop coop, cuda::memory_order order) {
    arrive(coop, order);
    wait(coop, order);
  }
  /* The same, giving up after timeoutCycles (clock64 cycles; nanoseconds on braid's emulator): ncclTimeout on every
   * thread of the group when some member had not arrived by then, ncclInProgress when the communicator was aborted,
   * else ncclSuccess. After anything but ncclSuccess the barrier's epochs no longer agree across ranks: abort or
   * revoke the communicator. */
  NCCL_DEVICE_INLINE ncclResult_t wait(Coop, cuda::memory_order order, uint64_t timeoutCycles) {
    return waitUntil(order, true, timeoutCycles);
  }
  NCCL_DEVICE_INLINE ncclResult_t sync(Coop coop, cuda::memory_order order, uint64_t timeoutCycles) {
    arrive(coop, order);
    return wait(coop, order, timeoutCycles);
  }

 private:
  /* Member m's inbox for this barrier index (m's words from every member of the team). */
  NCCL_DEVICE_INLINE uint32_t* inbox(int m) {
    char* buf = static_cast<char*>(ncclGetResourceBufferPeerPointer(comm_, handle_.bufHandle, team_, m));
    return reinterpret_cast<uint32_t*>(buf + ncclBraidLsaBarrierInboxOffset_(handle_.nBarriers)) +
           static_cast<size_t>(index_) * static_cast<size_t>(team_.nRanks);
  }
  NCCL_DEVICE_INLINE ncclResult_t waitUntil(cuda::memory_order order, bool timed, uint64_t timeoutCycles) {
    const uint32_t* mine = inbox(team_.rank);
    const uint64_t start = timed ? nccl_braid_::cycles() : 0;
    bool timedOut = false, aborted = false;
    for (int m = coop_.thread_rank(); m < team_.nRanks && !timedOut && !aborted; m += coop_.size()) {
      for (uint32_t polls = 1; !nccl_braid_::reached(nccl_braid_::atomicLoad(mine + m, order), epoch_); ++polls) {
        if ((polls & 63u) != 0) continue;
        if (nccl_braid_::aborted(comm_)) {
          aborted = true;
          break;
        }
        if (timed && nccl_braid_::cycles() - start >= timeoutCycles) {
          timedOut = true;
          break;
        }
        nccl_braid_::backOff();
      }
    }
    /* The group's threads end together (each may have waited for different members) and agree on the result; the
     * last sync hands what each thread acquired to the whole group (a warp's vote orders no memory). */
    const bool failed = nccl_braid_::coopAny(coop_, aborted || timedOut);
    coop_.sync();
    if (!failed) return ncclSuccess;
    return nccl_braid_::coopAny(coop_, aborted) ? ncclInProgress : ncclTimeout;
  }

  Coop coop_;
  ncclDevComm const& comm_;
  ncclTeam team_;
  ncclLsaBarrierHandle handle_;
  uint32_t index_;
  uint32_t* epochWord_;
  uint32_t epoch_;
  uint32_t* mcSlot_; /* this rank's word of this barrier in every member's inbox, as one multicast address; or null */
};
#endif /* NCCL_DEVICE_HALF_ */

#endif /* NCCL_DEVICE_LSA_BARRIER_H_ */
