/* braid's nccl_device/barrier.h: ncclBarrierSession, a barrier over an inner LSA team and an outer GIN team (NCCL's
 * hybrid barrier): the inner team syncs by LSA barrier, then the outer team by GIN barrier, then the inner team once
 * more, so every rank of every inner team has arrived when it returns. Either half may be absent (the LSA-only and
 * rail-only forms). The world form (barrierCount) works on one host, where the rail team has one member and the GIN
 * half returns at once, and across hosts, where GIN reaches the rail team by proxy. The GIN half keeps the fence
 * (nccl_device/gin_barrier.h): with Put, when the world form returns every rank's puts toward other hosts made before
 * it have landed, wherever they went, since each rank's fence precedes its arrival and every rank waits, directly or
 * through its LSA team, for every rail arrival. The rules of both barriers hold (nccl_device/lsa_barrier.h,
 * nccl_device/gin_barrier.h): the same sequence of syncs on an index on every member, one group per index. */
#ifndef NCCL_DEVICE_BARRIER_H_
#define NCCL_DEVICE_BARRIER_H_

#include "gin_barrier.h"
#include "lsa_barrier.h"

#if NCCL_DEVICE_HALF_
#include <new>

template <typename Coop>
struct ncclBarrierSession {
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeam innerTeam, ncclTeam outerTeam, ncclGin net,
                                        ncclLsaBarrierHandle innerBarHandle, ncclGinBarrierHandle outerBarHandle,
                                        uint32_t index, bool multimem = false, ncclMultimemHandle innerMmHandle = {})
      : coop_(coop), outerRanks_(outerTeam.nRanks) {
    lsa_ = new (lsaSpace_)
        ncclLsaBarrierSession<Coop>(coop, net.comm, innerTeam, innerBarHandle, index, multimem, innerMmHandle);
    gin_ = new (ginSpace_) ncclGinBarrierSession<Coop>(coop, net, outerTeam, outerBarHandle, index);
  }
  /* The world: the LSA team's barriers (lsaBarrier) inside, the rail team's GIN barriers (railGinBarrier) outside. */
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagWorld, ncclGin net, uint32_t index, bool multimem = false)
      : ncclBarrierSession(coop, ncclTeamLsa(net.comm), ncclTeamRail(net.comm), net, net.comm.lsaBarrier,
                           net.comm.railGinBarrier, index, multimem, net.comm.lsaMultimem) {}
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagLsa tag, ncclDevComm const& comm, uint32_t index,
                                        bool multimem = false)
      : coop_(coop), outerRanks_(1) {
    lsa_ = new (lsaSpace_) ncclLsaBarrierSession<Coop>(coop, comm, tag, index, multimem);
  }
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagRail tag, ncclGin net, uint32_t index)
      : coop_(coop), outerRanks_(ncclTeamRail(net.comm).nRanks) {
    gin_ = new (ginSpace_) ncclGinBarrierSession<Coop>(coop, net, tag, index);
  }
  NCCL_DEVICE_INLINE ~ncclBarrierSession() {
    if (gin_ != nullptr) gin_->~ncclGinBarrierSession<Coop>();
    if (lsa_ != nullptr) lsa_->~ncclLsaBarrierSession<Coop>();
  }
  ncclBarrierSession(ncclBarrierSession const&) = delete;
  ncclBarrierSession& operator=(ncclBarrierSession const&) = delete;

  /* The halves (the caller must not ask for one its constructor did not make: a null reference). */
  NCCL_DEVICE_INLINE ncclLsaBarrierSession<Coop>& lsaBarrier() { return *lsa_; }
  NCCL_DEVICE_INLINE ncclGinBarrierSession<Coop>& ginBarrier() { return *gin_; }

  NCCL_DEVICE_INLINE void sync(Coop coop, cuda::memory_order order,
                               ncclGinFenceLevel fence = NCCL_BRAID_GIN_FENCE_ALL_) {
    if (lsa_ != nullptr) lsa_->sync(coop, order);
    if (gin_ == nullptr) return;
    gin_->sync(coop, order, fence); /* an outer team of one only fences */
    if (lsa_ != nullptr && outerRanks_ > 1) lsa_->sync(coop, order);
  }
  NCCL_DEVICE_INLINE ncclResult_t sync(Coop coop, cuda::memory_order order, ncclGinFenceLevel fence,
                                       uint64_t timeoutCycles) {
    if (lsa_ != nullptr) {
      const ncclResult_t r = lsa_->sync(coop, order, timeoutCycles);
      if (r != ncclSuccess) return r;
    }
    if (gin_ == nullptr) return ncclSuccess;
    const ncclResult_t r = gin_->sync(coop, order, fence, timeoutCycles); /* an outer team of one only fences */
    if (r != ncclSuccess || lsa_ == nullptr || outerRanks_ <= 1) return r;
    return lsa_->sync(coop, order, timeoutCycles);
  }

 private:
  Coop coop_;
  int outerRanks_;
  ncclLsaBarrierSession<Coop>* lsa_ = nullptr;
  ncclGinBarrierSession<Coop>* gin_ = nullptr;
  alignas(ncclLsaBarrierSession<Coop>) char lsaSpace_[sizeof(ncclLsaBarrierSession<Coop>)];
  alignas(ncclGinBarrierSession<Coop>) char ginSpace_[sizeof(ncclGinBarrierSession<Coop>)];
};

/* One hybrid barrier, start to end. */
template <typename Coop>
NCCL_DEVICE_INLINE void ncclBarrier(Coop coop, ncclTeamTagWorld tag, ncclGin net, uint32_t index,
                                    cuda::memory_order order = cuda::memory_order_acq_rel,
                                    ncclGinFenceLevel fence = NCCL_BRAID_GIN_FENCE_ALL_, bool multimem = false) {
  ncclBarrierSession<Coop>(coop, tag, net, index, multimem).sync(coop, order, fence);
}
template <typename Coop>
NCCL_DEVICE_INLINE void ncclBarrier(Coop coop, ncclTeamTagRail tag, ncclGin net, uint32_t index,
                                    cuda::memory_order order = cuda::memory_order_acq_rel,
                                    ncclGinFenceLevel fence = NCCL_BRAID_GIN_FENCE_ALL_) {
  ncclBarrierSession<Coop>(coop, tag, net, index).sync(coop, order, fence);
}
#endif /* NCCL_DEVICE_HALF_ */

#endif /* NCCL_DEVICE_BARRIER_H_ */
