/* braid's nccl_device/lsa_barrier.h: barriers among the LSA team (host half; see nccl_device.h for what the
 * device half lacks). */
#ifndef NCCL_DEVICE_LSA_BARRIER_H_
#define NCCL_DEVICE_LSA_BARRIER_H_

#include "core.h"

struct ncclLsaBarrierHandle {
  ncclDevResourceHandle_t bufHandle; /* written at ncclDevCommCreate */
  int nBarriers;
};

/* Fills *outReq with the resource buffer that nBarriers barriers over `team` need (one 32-bit epoch word per
 * (barrier, member), in 128-byte lines) and points it at outHandle->bufHandle; chain *outReq into
 * ncclDevCommRequirements::resourceRequirementsList. Pure host computation, thread-safe. ncclInvalidArgument for
 * nBarriers < 1, team.nRanks < 1 or a NULL pointer. */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                                           ncclLsaBarrierHandle_t* outHandle,
                                                                           ncclDevResourceRequirements_t* outReq);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                                            ncclLsaBarrierHandle_t* outHandle,
                                                                            ncclDevResourceRequirements_t* outReq);

#endif /* NCCL_DEVICE_LSA_BARRIER_H_ */
