/* braid's nccl_device.h: NCCL's device API (NCCL 2.28.9's names and host-visible layouts), for kernels compiled
 * with nvcc against braid's headers alone.
 *
 * What is here (and works):
 *   - the host functions of the device API: ncclDevCommCreate/Destroy, the teams (ncclTeamWorld, ncclTeamLsa,
 *     ncclTeamRail, rank translation), the requirement helpers (ncclLsaBarrierCreateRequirement,
 *     ncclLLA2ACalcSlots, ncclLLA2ACreateRequirement, ncclGinBarrierCreateRequirement);
 *   - the team algebra, callable from host and device code (ncclTeamRankIsMember, ncclTeamRankToTeam,
 *     ncclTeamInnerFactor/OuterFactor, ncclTeamRankInDifference, the ncclDevComm overloads).
 * What is not built yet, said plainly: the device-side half (ncclCoop* groups, ncclLsaBarrierSession,
 * ncclGetLsaPointer and the other pointer accessors, ncclSymPtr, the LL all-to-all session, the reduce/copy
 * building blocks). Until it is, ncclDevCommCreate returns ncclInvalidUsage with a WARN saying so, on every
 * communicator, and GIN requests are refused by name (braid has no GPU-initiated networking). See docs/device_api.md.
 *
 * The layout of ncclDevComm is braid's (NCCL documents no ABI for the device API either): build kernels against
 * the headers of the library they run with. */
#ifndef NCCL_DEVICE_H_
#define NCCL_DEVICE_H_

#include "nccl.h"
#include "nccl_device/core.h"
#include "nccl_device/gin_barrier.h"
#include "nccl_device/ll_a2a.h"
#include "nccl_device/lsa_barrier.h"

#endif /* NCCL_DEVICE_H_ */
