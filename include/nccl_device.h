/* braid's nccl_device.h: NCCL's device API (NCCL 2.32's names; braid's layouts), for kernels compiled with nvcc
 * against braid's headers alone.
 *
 * What is here (and works):
 *   - the host functions: ncclDevCommCreate/Destroy (a resource window with LSA barriers and requested buffers;
 *     NCCL 2.29's versioned requirements, made by NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER), the teams (ncclTeamWorld,
 *     ncclTeamLsa, ncclTeamRail, rank translation), the requirement helpers (ncclLsaBarrierCreateRequirement,
 *     ncclLLA2ACalcSlots, ncclLLA2ACreateRequirement), ncclCommQueryProperties, and the 2.29 host pointer queries
 *     (ncclGetLsaDevicePointer, ncclGetPeerDevicePointer, ncclGetLsaMultimemDevicePointer,
 *     ncclGetMultimemDevicePointer);
 *   - the team algebra, in host and device code;
 *   - in device code: the cooperative groups (coop.h: ncclCoopTile/Thread/Warp/Lanes/WarpSpan/Cta, ncclCoopAny,
 *     their helpers, ncclCoopBcast); the pointer accessors (ncclGetLocalPointer, ncclGetLsaPointer, ncclGetPeerPointer,
 * the resource buffer ones, ncclFindWindow); ncclSymPtr (ptr.h); ncclLsaBarrierSession with arrive/wait/sync and
 *     the 2.30 timeout overloads (lsa_barrier.h); ncclLLA2ASession (ll_a2a.h: send, bcast, recv, recvUnrolled,
 *     recvReduce, endEpoch); the reduce/copy building blocks of 2.29 in their LSA, Local, multimem and mixed
 *     LSA/multimem forms (reduce_copy.h); NCCL 2.32's Flow processor (flow.h: ncclFlowProcessor over LSA and,
 *     toward peers out of load/store reach, GIN; the Simple, LL and LL128 protocols; lsa_flow.h: ncclLsaFlowConn;
 *     gin_flow.h: ncclGinFlowConn);
 *     GIN (gin.h: ncclGin; gin_barrier.h: ncclGinBarrierSession; barrier.h: the hybrid ncclBarrierSession) among
 *     the ranks of one LSA team by load/store, and toward ranks of other hosts by a CPU proxy where each host's
 *     ranks are one LSA team (NCCL_GIN_TYPE_PROXY).
 *
 * NVLS multicast: windows of a communicator with multicast get mappings of their own (ncclGetLsaMultimemPointer,
 * ncclDevCommCreate's lsaMultimem) and the building blocks' multimem forms for float, double, 32/64-bit integers,
 * half and __nv_bfloat16 (by 32-bit pairs) and fp8 (by quads, sm_100a/101a/120a/121a): see reduce_copy.h for
 * elements alone in their word.
 *
 * LSA barriers' arrivals and LL all-to-all broadcasts go through multicast with their multimem argument where the
 * buffer has a multicast mapping and the session's team is the whole LSA team.
 *
 * Not built yet, said plainly: GIN's network backends other than the proxy (GDAKI, GPI, EFA GDA; refused by name),
 * GIN where a host's ranks are not one LSA team (refused by name), Flow's direct transfers over GIN (a kernel error
 * naming them), and CFT (declared where programs name them,
 * refused by name: braid has no Compute Fabric Transport). See docs/device_api.md.
 *
 * The layouts of ncclDevComm and ncclWindow_vidmem are braid's (NCCL documents no ABI for the device API either):
 * build kernels against the headers of the library they run with. */
#ifndef NCCL_DEVICE_H_
#define NCCL_DEVICE_H_

#include "nccl.h"
#include "nccl_device/barrier.h"
#include "nccl_device/coop.h"
#include "nccl_device/flow.h"
#include "nccl_device/core.h"
#include "nccl_device/gin.h"
#include "nccl_device/gin_barrier.h"
#include "nccl_device/ll_a2a.h"
#include "nccl_device/lsa_barrier.h"
#include "nccl_device/ptr.h"
#include "nccl_device/reduce_copy.h"

#endif /* NCCL_DEVICE_H_ */
