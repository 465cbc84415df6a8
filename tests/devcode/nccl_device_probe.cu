// A device-API user's translation unit, compiled by nvcc against braid's headers alone
// (tests/devcode/nccl_device_header_test.sh): a kernel that takes the device communicator by value and uses the
// team algebra, and host code that asks for a device communicator the way NCCL's examples do.
#include <nccl_device.h>

__global__ void probeTeams(ncclDevComm dc, int* out) {
  ncclTeam lsa = ncclTeamLsa(dc);
  ncclTeam rail = ncclTeamRail(dc);
  int peer = (lsa.rank + 1) % lsa.nRanks;
  out[0] = ncclTeamRankToWorld(dc, lsa, peer);
  out[1] = ncclTeamRankIsMember(rail, lsa, peer) ? 1 : 0;
  out[2] = ncclTeamRankInDifference(ncclTeamWorld(dc), lsa, 0);
  out[3] = ncclTeamInnerFactor(ncclTeamWorld(dc), dc.lsaSize).nRanks;
}

ncclResult_t probeHost(ncclComm_t comm, ncclDevComm* dc) {
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  ncclResult_t qrc = ncclCommQueryProperties(comm, &props);
  if (qrc != ncclSuccess || !props.deviceApiSupport) return qrc == ncclSuccess ? ncclInvalidUsage : qrc;
  ncclLsaBarrierHandle barrier;
  ncclDevResourceRequirements barrierReq;
  ncclResult_t rc = ncclLsaBarrierCreateRequirement(ncclTeamLsa(comm), 4, &barrier, &barrierReq);
  if (rc != ncclSuccess) return rc;
  ncclDevCommRequirements reqs = {};
  reqs.resourceRequirementsList = &barrierReq;
  reqs.lsaBarrierCount = 4;
  rc = ncclDevCommCreate(comm, &reqs, dc);
  if (rc != ncclSuccess) return rc;
  (void)ncclLLA2ACalcSlots(64, 8);
  return ncclDevCommDestroy(comm, dc);
}
