/* braid's nccl_device/gin_barrier.h: barriers over GPU-initiated networking. braid has no GIN: declared so that
 * programs compile and link; the function returns ncclInvalidUsage with a WARN naming it. */
#ifndef NCCL_DEVICE_GIN_BARRIER_H_
#define NCCL_DEVICE_GIN_BARRIER_H_

#include "core.h"

struct ncclGinBarrierHandle {
  ncclGinSignal_t signal0;
  ncclDevResourceHandle_t bufHandle;
};

/* Always ncclInvalidUsage (no GIN in braid); ncclInvalidArgument first for an invalid comm or NULL pointer. */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team,
                                                                           int nBarriers,
                                                                           ncclGinBarrierHandle_t* outHandle,
                                                                           ncclDevResourceRequirements_t* outReq);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team,
                                                                            int nBarriers,
                                                                            ncclGinBarrierHandle_t* outHandle,
                                                                            ncclDevResourceRequirements_t* outReq);

#endif /* NCCL_DEVICE_GIN_BARRIER_H_ */
