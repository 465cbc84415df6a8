/* braid's nccl_device/gin_barrier.h: barriers over GIN signals (nccl_device/gin.h), for teams whose members GIN
 * reaches: ranks of this rank's LSA team by load/store, and ranks of other hosts by proxy.
 *
 * A team of n ranks has, per barrier, n signals on every member: member m's arrivals count in signal
 * signal0 + index * n + m. Syncing adds one to this rank's signal on every other member and waits until each
 * member's signal here has reached this rank's count of syncs, which the signal's shadow keeps (so the count carries
 * over sessions and launches; resetting those signals or shadows resets the barrier). Every member runs the same
 * sequence of syncs on a barrier index, one group (Coop) at a time per index on each rank.
 *
 * The fence (NCCL's levels; Put | Get by default) is kept before this rank's arrivals: with Put, every put and value
 * this rank made toward other hosts (on any context, to any rank, member or not) has landed at its destination;
 * with Get, every get it made has landed here. Within the LSA team both hold when the call returns, so a device
 * communicator without GIN toward other hosts pays nothing; across hosts Put costs the proxy a round trip to each
 * peer it sent puts to since its last fence. None (Relaxed) only syncs. */
#ifndef NCCL_DEVICE_GIN_BARRIER_H_
#define NCCL_DEVICE_GIN_BARRIER_H_

#include "core.h"
#include "gin.h"

/* Fills *outReq with the GIN signals nBarriers barriers over `team` need (nBarriers * team.nRanks) and points it at
 * outHandle->signal0; chain *outReq into ncclDevCommRequirements::resourceRequirementsList (the device communicator
 * then needs GIN: see ncclDevCommCreate). Pure host computation, thread-safe. ncclInvalidArgument for an invalid
 * comm, nBarriers < 1, team.nRanks < 1 or a NULL pointer. */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team,
                                                                           int nBarriers,
                                                                           ncclGinBarrierHandle_t* outHandle,
                                                                           ncclDevResourceRequirements_t* outReq);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team,
                                                                            int nBarriers,
                                                                            ncclGinBarrierHandle_t* outHandle,
                                                                            ncclDevResourceRequirements_t* outReq);

#ifdef __cplusplus
/* What a barrier's sync makes visible of GIN operations (NCCL's bits; see the fence above). */
enum class ncclGinFenceLevel : uint32_t { None = 0, Put = 1u << 0, Get = 1u << 1, Relaxed = 0 };
NCCL_HOST_DEVICE_INLINE constexpr ncclGinFenceLevel operator|(ncclGinFenceLevel a, ncclGinFenceLevel b) {
  return static_cast<ncclGinFenceLevel>(static_cast<uint32_t>(a) | static_cast<uint32_t>(b));
}
NCCL_HOST_DEVICE_INLINE constexpr ncclGinFenceLevel operator&(ncclGinFenceLevel a, ncclGinFenceLevel b) {
  return static_cast<ncclGinFenceLevel>(static_cast<uint32_t>(a) & static_cast<uint32_t>(b));
}
#define NCCL_BRAID_GIN_FENCE_ALL_ (ncclGinFenceLevel::Put | ncclGinFenceLevel::Get)

/* In place of an ncclGin: a barrier whose fence covers every context (braid signals through context 0). */
struct ncclGinAllContexts {
  ncclDevComm const& comm;
  NCCL_HOST_DEVICE_INLINE constexpr ncclGinAllContexts(ncclDevComm const& c) : comm(c) {}
};
#endif

#if NCCL_DEVICE_HALF_
template <typename Coop>
struct ncclGinBarrierSession {
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGin net, ncclTeam team, ncclGinBarrierHandle handle,
                                           uint32_t index)
      : coop_(coop), net_(net), team_(team), signal_(handle.signal0 + index * static_cast<uint32_t>(team.nRanks)) {}
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGin net, ncclTeamTagRail, uint32_t index)
      : ncclGinBarrierSession(coop, net, ncclTeamRail(net.comm), net.comm.railGinBarrier, index) {}
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGin net, ncclTeamTagWorld, uint32_t index)
      : ncclGinBarrierSession(coop, net, ncclTeamWorld(net.comm), net.comm.worldGinBarrier, index) {}
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGinAllContexts all, ncclTeam team,
                                           ncclGinBarrierHandle handle, uint32_t index)
      : ncclGinBarrierSession(coop, ncclGin(all.comm, 0), team, handle, index) {}
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGinAllContexts all, ncclTeamTagRail tag, uint32_t index)
      : ncclGinBarrierSession(coop, ncclGin(all.comm, 0), tag, index) {}
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop coop, ncclGinAllContexts all, ncclTeamTagWorld tag, uint32_t index)
      : ncclGinBarrierSession(coop, ncclGin(all.comm, 0), tag, index) {}
  NCCL_DEVICE_INLINE ~ncclGinBarrierSession() {}
  ncclGinBarrierSession(ncclGinBarrierSession const&) = delete;
  ncclGinBarrierSession& operator=(ncclGinBarrierSession const&) = delete;

  NCCL_DEVICE_INLINE void sync(Coop, cuda::memory_order order, ncclGinFenceLevel fence = NCCL_BRAID_GIN_FENCE_ALL_) {
    (void)run(order, fence, false, 0);
  }
  /* ncclTimeout on every thread of the group when the fence or a member's arrival took longer than timeoutCycles,
   * ncclInProgress when the communicator was aborted; after either the barrier's counts no longer agree across
   * ranks. */
  NCCL_DEVICE_INLINE ncclResult_t sync(Coop, cuda::memory_order order, ncclGinFenceLevel fence,
                                       uint64_t timeoutCycles) {
    return run(order, fence, true, timeoutCycles);
  }

 private:
  /* Every arrival first, then every wait: a thread that waited for one peer before signalling the next would let a
   * group smaller than the team wait in a ring with its peers (each for the next's first signal). */
  NCCL_DEVICE_INLINE int peerOf(int i) const {
    const int peer = team_.rank + 1 + i; /* each member starts with a different peer */
    return peer >= team_.nRanks ? peer - team_.nRanks : peer;
  }
  NCCL_DEVICE_INLINE ncclResult_t run(cuda::memory_order order, ncclGinFenceLevel fence, bool timed,
                                      uint64_t timeoutCycles) {
    const uint64_t start = timed ? nccl_braid_::cycles() : 0;
    const bool puts = (fence & ncclGinFenceLevel::Put) != ncclGinFenceLevel::None;
    const bool gets = (fence & ncclGinFenceLevel::Get) != ncclGinFenceLevel::None;
    if (puts || gets) {
      const ncclResult_t fenced = net_.braidFence_(coop_, puts, gets, timed, timeoutCycles);
      if (fenced != ncclSuccess) return fenced;
    } else {
      coop_.sync(); /* the group's work before the barrier precedes every arrival */
    }
    for (int i = coop_.thread_rank(); i < team_.nRanks - 1; i += coop_.size()) {
      net_.signal(team_, peerOf(i), ncclGin_SignalInc{signal_ + static_cast<uint32_t>(team_.rank)}, ncclCoopThread());
      ++*net_.getSignalShadowPtr(signal_ + static_cast<uint32_t>(peerOf(i)));
    }
    ncclResult_t mine = ncclSuccess;
    for (int i = coop_.thread_rank(); i < team_.nRanks - 1 && mine == ncclSuccess; i += coop_.size()) {
      const uint32_t s = signal_ + static_cast<uint32_t>(peerOf(i));
      const uint64_t want = *net_.getSignalShadowPtr(s);
      if (timed) {
        const uint64_t spent = nccl_braid_::cycles() - start; /* one deadline for all of this thread's peers */
        mine = net_.waitSignal(ncclCoopThread(), s, want, 64, order, spent < timeoutCycles ? timeoutCycles - spent : 0);
      } else {
        net_.waitSignal(ncclCoopThread(), s, want, 64, order);
      }
    }
    const bool gone = nccl_braid_::coopAny(coop_, mine == ncclInProgress);
    const bool late = nccl_braid_::coopAny(coop_, mine == ncclTimeout);
    coop_.sync(); /* what each thread acquired is the group's (a warp's vote orders no memory) */
    return gone ? ncclInProgress : late ? ncclTimeout : ncclSuccess;
  }

  Coop coop_;
  ncclGin net_;
  ncclTeam team_;
  uint32_t signal_; /* the first of this barrier's team.nRanks signals */
};

/* One barrier, start to end. */
template <typename Coop>
NCCL_DEVICE_INLINE void ncclGinBarrier(Coop coop, ncclGin net, ncclTeam team, ncclGinBarrierHandle handle,
                                       uint32_t index, cuda::memory_order order = cuda::memory_order_acq_rel,
                                       ncclGinFenceLevel fence = NCCL_BRAID_GIN_FENCE_ALL_) {
  ncclGinBarrierSession<Coop>(coop, net, team, handle, index).sync(coop, order, fence);
}
template <typename Coop>
NCCL_DEVICE_INLINE void ncclGinBarrier(Coop coop, ncclGin net, ncclTeamTagRail tag, uint32_t index,
                                       cuda::memory_order order = cuda::memory_order_acq_rel,
                                       ncclGinFenceLevel fence = NCCL_BRAID_GIN_FENCE_ALL_) {
  ncclGinBarrierSession<Coop>(coop, net, tag, index).sync(coop, order, fence);
}
template <typename Coop>
NCCL_DEVICE_INLINE void ncclGinBarrier(Coop coop, ncclGin net, ncclTeamTagWorld tag, uint32_t index,
                                       cuda::memory_order order = cuda::memory_order_acq_rel,
                                       ncclGinFenceLevel fence = NCCL_BRAID_GIN_FENCE_ALL_) {
  ncclGinBarrierSession<Coop>(coop, net, tag, index).sync(coop, order, fence);
}
template <typename Coop>
NCCL_DEVICE_INLINE void ncclGinBarrier(Coop coop, ncclGinAllContexts all, ncclTeam team, ncclGinBarrierHandle handle,
                                       uint32_t index, cuda::memory_order order = cuda::memory_order_acq_rel,
                                       ncclGinFenceLevel fence = NCCL_BRAID_GIN_FENCE_ALL_) {
  ncclGinBarrierSession<Coop>(coop, all, team, handle, index).sync(coop, order, fence);
}
template <typename Coop>
NCCL_DEVICE_INLINE void ncclGinBarrier(Coop coop, ncclGinAllContexts all, ncclTeamTagRail tag, uint32_t index,
                                       cuda::memory_order order = cuda::memory_order_acq_rel,
                                       ncclGinFenceLevel fence = NCCL_BRAID_GIN_FENCE_ALL_) {
  ncclGinBarrierSession<Coop>(coop, all, tag, index).sync(coop, order, fence);
}
template <typename Coop>
NCCL_DEVICE_INLINE void ncclGinBarrier(Coop coop, ncclGinAllContexts all, ncclTeamTagWorld tag, uint32_t index,
                                       cuda::memory_order order = cuda::memory_order_acq_rel,
                                       ncclGinFenceLevel fence = NCCL_BRAID_GIN_FENCE_ALL_) {
  ncclGinBarrierSession<Coop>(coop, all, tag, index).sync(coop, order, fence);
}
#endif /* NCCL_DEVICE_HALF_ */

#endif /* NCCL_DEVICE_GIN_BARRIER_H_ */
