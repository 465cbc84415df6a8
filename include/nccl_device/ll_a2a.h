/* braid's nccl_device/ll_a2a.h: the LL all-to-all over the LSA team (host half; see nccl_device.h). */
#ifndef NCCL_DEVICE_LL_A2A_H_
#define NCCL_DEVICE_LL_A2A_H_

#include "core.h"

struct ncclLLA2AHandle {
  ncclDevResourceHandle_t bufHandle; /* written at ncclDevCommCreate */
  uint32_t nSlots;
};

/* Slots one block needs to send maxElts elements of up to maxEltSize bytes each: a slot is one 16-byte LL line
 * carrying 8 bytes of data and 8 of flags. -1 for a negative count or a size outside [1, 2^20]. */
NCCL_EXTERN_C NCCL_HOST_ONLY_ int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
NCCL_EXTERN_C NCCL_HOST_ONLY_ int pncclLLA2ACalcSlots(int maxElts, int maxEltSize);

/* Fills *outReq with the resource buffer of nBlocks blocks of nSlots slots each (double-buffered) and points it
 * at outHandle->bufHandle. ncclInvalidArgument for nBlocks < 1, nSlots < 1 or a NULL pointer. */
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots,
                                                                      ncclLLA2AHandle_t* outHandle,
                                                                      ncclDevResourceRequirements_t* outReq);
NCCL_EXTERN_C NCCL_HOST_ONLY_ ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots,
                                                                       ncclLLA2AHandle_t* outHandle,
                                                                       ncclDevResourceRequirements_t* outReq);

#endif /* NCCL_DEVICE_LL_A2A_H_ */
