// A device-API user's translation unit, compiled by nvcc against braid's headers alone
// (tests/devcode/nccl_device_header_test.sh): kernels that take the device communicator by value and use the team
// algebra, the coop groups, the LSA barrier (also with a timeout) and the pointer accessors, and host code that asks
// for a device communicator the way NCCL's examples do.
#include <nccl_device.h>

#include "../devapi/flow_kernels.cuh"       // the Flow device API (NCCL 2.32): a ring all-reduce, as CI runs it
#include "../devapi/gin_hosts_kernels.cuh"  // GIN fences and VA signals toward other hosts: likewise
#include "../devapi/gin_kernels.cuh"        // GIN puts, signals, counters and barriers: what CI runs on the emulator
#include "../devapi/lsa_kernels.cuh"  // LSA barriers, LSA/peer/symmetric pointers, coops: what CI runs on the emulator
#include "../devapi/multimem_kernels.cuh"  // NVLS multicast building blocks: what CI runs on the emulator

__global__ void probeTeams(ncclDevComm dc, int* out) {
  ncclTeam lsa = ncclTeamLsa(dc);
  ncclTeam rail = ncclTeamRail(dc);
  int peer = (lsa.rank + 1) % lsa.nRanks;
  out[0] = ncclTeamRankToWorld(dc, lsa, peer);
  out[1] = ncclTeamRankIsMember(rail, lsa, peer) ? 1 : 0;
  out[2] = ncclTeamRankInDifference(ncclTeamWorld(dc), lsa, 0);
  out[3] = ncclTeamInnerFactor(ncclTeamWorld(dc), dc.lsaSize).nRanks;
}

// Every coop type through the calls that take one.
template <typename Coop>
__device__ int coopProbe(Coop coop, ncclDevComm const& dc, uint32_t index) {
  ncclLsaBarrierSession<Coop> bar(coop, dc, ncclTeamTagLsa(), index);
  bar.arrive(coop, cuda::memory_order_release);
  bar.wait(coop, cuda::memory_order_acquire);
  const int r = static_cast<int>(bar.sync(coop, cuda::memory_order_relaxed, 1000000ull));
  coop.sync();
  return r + coop.thread_rank() + coop.size() + static_cast<int>(ncclCoopGetLaneMask(coop) & 1u) +
         (ncclCoopIsThread(coop) ? 1 : 0) + (ncclCoopWithinWarp(coop) ? 2 : 0);
}

__global__ void probeCoops(ncclDevComm dc, ncclWindow_t win, int* out) {
  int v = coopProbe(ncclCoopCta(), dc, 0);
  v += coopProbe(ncclCoopWarp(), dc, 1 + threadIdx.x / 32);
  v += coopProbe(ncclCoopTile<8>(), dc, 2);
  v += coopProbe(ncclCoopThread(), dc, 3);
  v += coopProbe(ncclCoopLanes(0xffffffffu), dc, 4);
  v += coopProbe(ncclCoopWarpSpan(0, 2, 0), dc, 5);
  v += coopProbe(ncclCoopCoalesced(ncclCoopCta()), dc, 6);
  ncclSymPtr<float> p(win, 64);
  p += 3;
  p = p - 1;
  float* local = p.localPtr();
  float* peer = p.peerPtr(ncclTeamWorld(dc), 0);
  float* lsa = (p + 1).lsaPtr(0);
  void* mc = ncclGetLsaMultimemPointer(win, 0, dc);
  out[threadIdx.x] =
      v + (local == peer) + (lsa != nullptr) + (mc == nullptr) + static_cast<int>(p - ncclSymPtr<float>(win, 0));
}

// Every multimem building block, for every element type the switch forms cover (each its own PTX).
template <typename T>
__device__ void multimemProbe(ncclWindow_t win, ncclDevComm const& dc, T* local) {
  ncclCoopCta cta;
  ncclSymPtr<T> p(win, 0);
  ncclMultimemReduceSum(cta, win, 0, local, 4, dc.lsaMultimem);
  ncclMultimemReduceSum(cta, p, local, 4, dc.lsaMultimem);
  ncclMultimemReduceSum(cta, p.lsaMultimemPtr(dc), local, 4);
  ncclMultimemCopy(cta, local, win, 64, 4, dc.lsaMultimem);
  ncclMultimemCopy(cta, local, p + 32, 4, dc.lsaMultimem);
  ncclMultimemReduceSumCopy<T>(cta, win, 0, dc.lsaMultimem, win, 128, dc.lsaMultimem, 4);
}

__global__ void probeMultimem(ncclWindow_t win, ncclDevComm dc, void* local) {
  multimemProbe(win, dc, static_cast<float*>(local));
  multimemProbe(win, dc, static_cast<double*>(local));
  multimemProbe(win, dc, static_cast<int32_t*>(local));
  multimemProbe(win, dc, static_cast<uint32_t*>(local));
  multimemProbe(win, dc, static_cast<int64_t*>(local));
  multimemProbe(win, dc, static_cast<uint64_t*>(local));
  multimemProbe(win, dc, static_cast<half*>(local));
  multimemProbe(win, dc, static_cast<__nv_bfloat16*>(local));
}

// Half precision: the LSA forms (summed in float) and the kernels CI runs on the emulator.
__global__ void probeHalf(ncclWindow_t win, ncclDevComm dc, half* h, __nv_bfloat16* b) {
  ncclCoopCta cta;
  ncclLsaReduceSum(cta, win, 0, h, 4, dc);
  ncclLsaReduceSum(cta, win, 0, b, 4, dc);
  ncclLsaCopy(cta, h, win, 0, 4, dc);
  ncclLocalReduceSum(cta, 2, b, 4, b, 4);
}
template __global__ void multimemHalf<half>(ncclWindow_t, ncclWindow_t, size_t, size_t, half*, half*, int, ncclDevComm);
template __global__ void multimemHalf<__nv_bfloat16>(ncclWindow_t, ncclWindow_t, size_t, size_t, __nv_bfloat16*,
                                                     __nv_bfloat16*, int, ncclDevComm);
template __global__ void multimemHalfRawCopy<half>(ncclWindow_t, half*, size_t, ncclDevComm);
template __global__ void lsaSumInto<__nv_bfloat16>(ncclWindow_t, __nv_bfloat16*, size_t, ncclDevComm);
template __global__ void multimemHalf<__nv_fp8_e4m3>(ncclWindow_t, ncclWindow_t, size_t, size_t, __nv_fp8_e4m3*,
                                                     __nv_fp8_e4m3*, int, ncclDevComm);
template __global__ void multimemHalf<__nv_fp8_e5m2>(ncclWindow_t, ncclWindow_t, size_t, size_t, __nv_fp8_e5m2*,
                                                     __nv_fp8_e5m2*, int, ncclDevComm);
template __global__ void lsaSumInto<__nv_fp8_e4m3>(ncclWindow_t, __nv_fp8_e4m3*, size_t, ncclDevComm);
template __global__ void mixedAllReduce<__nv_fp8_e5m2>(int, ncclWindow_t, ncclWindow_t, size_t, ncclDevComm);

template __global__ void multimemAllReduce<float>(bool, ncclWindow_t, ncclWindow_t, size_t, ncclDevComm);
template __global__ void mixedAllReduce<float>(int, ncclWindow_t, ncclWindow_t, size_t, ncclDevComm);
template __global__ void ginTeamBarrierRing<ncclCoopThread>(ncclWindow_t, uint64_t, ncclGinBarrierHandle, ncclDevComm,
                                                            uint64_t*);
template __global__ void ginTeamBarrierRing<ncclCoopWarp>(ncclWindow_t, uint64_t, ncclGinBarrierHandle, ncclDevComm,
                                                          uint64_t*);
template __global__ void mixedAllReduce<int64_t>(int, ncclWindow_t, ncclWindow_t, size_t, ncclDevComm);
template __global__ void mixedAllReduce<__nv_bfloat16>(int, ncclWindow_t, ncclWindow_t, size_t, ncclDevComm);
// The Flow processor with a GIN backend mask and NCCL's GIN configuration fields (braid runs its LSA peers), LL128's
// one signalling warp, NCCL's sum operator and __shared__ memory as NCCL's users declare it.
__global__ void probeFlowGinMask(ncclDevComm dc, ncclFlowConfig<1> config, float* buf) {
  __shared__ ncclFlowShmem shmem;
  const int peer = (dc.rank + 1) % dc.nRanks;
  const int workers = static_cast<int>(blockDim.x) / 32 - ncclFlowGetSignalWarpsPerPart(ncclFlowProtocolLL128);
  ncclFlowProcessor<1, 1, 1, ncclFlowProtocolLL128> flow(dc, config, &peer, 1, &peer, 1, blockIdx.x, workers, shmem);
  flow.process(ncclFlowSend(), ncclFlowRecv(), ncclSymPtr<float>(), ncclSymPtr<float>(), [&](int) { return buf; }, 1,
               [&](int) { return buf; }, 1, nccl::utility::OpSum<float>(), 16);
  flow.close();
}


ncclResult_t probeHost(ncclComm_t comm, ncclDevComm* dc) {
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  ncclResult_t qrc = ncclCommQueryProperties(comm, &props);
  if (qrc != ncclSuccess || !props.deviceApiSupport) return qrc == ncclSuccess ? ncclInvalidUsage : qrc;
  ncclLsaBarrierHandle barrier;
  ncclDevResourceRequirements barrierReq;
  ncclResult_t rc = ncclLsaBarrierCreateRequirement(ncclTeamLsa(comm), 4, &barrier, &barrierReq);
  if (rc != ncclSuccess) return rc;
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.resourceRequirementsList = &barrierReq;
  reqs.lsaBarrierCount = 4;
  rc = ncclDevCommCreate(comm, &reqs, dc);
  if (rc != ncclSuccess) return rc;
  (void)ncclLLA2ACalcSlots(64, 8);
  return ncclDevCommDestroy(comm, dc);
}

