// Device-API kernels written the way NCCL's users write them (nccl_device.h alone: LSA barriers, LSA and peer
// pointers, symmetric pointers into resource buffers, cooperative groups). One source: nvcc compiles it for sm_90
// (tests/devcode/nccl_device_header_test.sh), and g++ runs it on braid's CTA emulator over fake-GPU communicators
// (tests/devapi/device_kernels_test.cc, after tests/devapi/device_shim.h).
#pragma once

#include <nccl_device.h>

// Sum all-reduce of `count` floats, two-shot over the LSA team: each rank reduces its share of the elements from
// every member's send window (member order, so every rank computes the same bits) and stores the sums into every
// member's receive window; barrier `blockIdx.x` of the device communicator brackets the exchange.
__global__ void lsaTwoShotAllReduce(ncclWindow_t sendWin, ncclWindow_t recvWin, size_t count, ncclDevComm devComm) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, devComm, ncclTeamTagLsa(), blockIdx.x);
  bar.sync(cta, cuda::memory_order_acq_rel);  // every member's input is in place
  const int n = devComm.lsaSize;
  const size_t share = (count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
  const size_t lo = share * static_cast<size_t>(devComm.lsaRank);
  const size_t hi = lo + share < count ? lo + share : count;
  for (size_t i = lo + blockIdx.x * blockDim.x + threadIdx.x; i < hi;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float sum = 0;
    for (int p = 0; p < n; ++p) sum += static_cast<const float*>(ncclGetLsaPointer(sendWin, 0, p))[i];
    for (int p = 0; p < n; ++p) static_cast<float*>(ncclGetLsaPointer(recvWin, 0, p))[i] = sum;
  }
  bar.sync(cta, cuda::memory_order_acq_rel);  // every member's sums have landed here
}

// Per group (barrier index = the group's number in the grid): the group's threads write this rank's stamp into its
// slot of every LSA peer's resource buffer through ncclSymPtr::peerPtr, a barrier of the group, then the group reads
// what each peer wrote into its own buffer (localPtr) into out[group * lsaSize + peer]. Stamp: round * 1000 + world
// rank * 10 + group. A closing barrier ends the launch only once no member still reads its buffer, so the next
// launch's writes (of any grouping) never meet a slow peer's reads (ThreadSanitizer found the race without it).
template <typename Coop>
__device__ void lsaGroupStamps(Coop coop, int group, ncclDevComm const& devComm, ncclDevResourceHandle scratch,
                               int round, int* out) {
  const ncclTeam lsa = ncclTeamLsa(devComm);
  ncclLsaBarrierSession<Coop> bar(coop, devComm, ncclTeamTagLsa(), static_cast<uint32_t>(group));
  ncclSymPtr<int> slots = ncclGetResourceBuffer(devComm, scratch);
  // Thread k writes to (and reads from) member n - 1 - k, while the barrier's thread m signals (and waits for) member
  // m: the data crosses from one thread of the group to another, so the group's own synchronisation is exercised.
  for (int k = coop.thread_rank(); k < lsa.nRanks; k += coop.size()) {
    const int p = lsa.nRanks - 1 - k;
    *(slots + (group * lsa.nRanks + lsa.rank)).peerPtr(lsa, p) = round * 1000 + devComm.rank * 10 + group;
  }
  bar.sync(coop, cuda::memory_order_acq_rel);
  for (int k = coop.thread_rank(); k < lsa.nRanks; k += coop.size()) {
    const int p = lsa.nRanks - 1 - k;
    out[group * lsa.nRanks + p] = *(slots + (group * lsa.nRanks + p)).localPtr();
  }
  bar.sync(coop, cuda::memory_order_acq_rel);
}

// The groups of lsaStamps: what makes a group, and how many a CTA of `threads` has.
enum StampGroup { kStampCta, kStampWarp, kStampTile8, kStampThread, kStampLanes, kStampWarpSpan, kStampGroupKinds };
__host__ __device__ inline int stampGroupsPerCta(int kind, int threads) {
  switch (kind) {
    case kStampCta:
      return 1;
    case kStampTile8:
      return threads / 8;
    case kStampThread:
      return threads;
    case kStampWarpSpan:
      return threads / 64;
    default:
      return threads / 32;  // warps, and the lanes of each warp
  }
}

// lsaGroupStamps of the group itself, or (any) of it as an ncclCoopAny: the barrier session and the loops then run
// on the type-erased group.
template <typename Coop>
__device__ void lsaStampsAs(bool any, Coop coop, int group, ncclDevComm const& devComm, ncclDevResourceHandle scratch,
                            int round, int* out) {
  if (any) {
    lsaGroupStamps(ncclCoopAny(coop), group, devComm, scratch, round, out);
  } else {
    lsaGroupStamps(coop, group, devComm, scratch, round, out);
  }
}

// lsaGroupStamps with every group of one kind (blockDim.x a multiple of 64), as ncclCoopAny when `any`.
__global__ void lsaStamps(int kind, bool any, ncclDevComm devComm, ncclDevResourceHandle scratch, int round, int* out) {
  const int t = static_cast<int>(threadIdx.x), per = stampGroupsPerCta(kind, static_cast<int>(blockDim.x));
  const int base = static_cast<int>(blockIdx.x) * per;
  switch (kind) {
    case kStampCta:
      lsaStampsAs(any, ncclCoopCta(), base, devComm, scratch, round, out);
      break;
    case kStampWarp:
      lsaStampsAs(any, ncclCoopWarp(), base + t / 32, devComm, scratch, round, out);
      break;
    case kStampTile8:
      lsaStampsAs(any, ncclCoopTile<8>(), base + t / 8, devComm, scratch, round, out);
      break;
    case kStampThread:
      lsaStampsAs(any, ncclCoopThread(), base + t, devComm, scratch, round, out);
      break;
    case kStampLanes:
      lsaStampsAs(any, ncclCoopLanes(0xffffffffu), base + t / 32, devComm, scratch, round, out);
      break;
    default:
      lsaStampsAs(any, ncclCoopWarpSpan(t / 64 * 2, 2, t / 64), base + t / 64, devComm, scratch, round, out);
      break;
  }
}

// One barrier sync that gives up after timeoutCycles: thread 0 stores the result (an ncclResult_t) in *result.
__global__ void lsaTimedSync(ncclDevComm devComm, unsigned long long timeoutCycles, int* result) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, devComm, ncclTeamTagLsa(), 0);
  const ncclResult_t r = bar.sync(cta, cuda::memory_order_acq_rel, timeoutCycles);
  if (threadIdx.x == 0) *result = static_cast<int>(r);
}

// LL all-to-all: a 12-byte value (two slots, maxElts apart), a double and a broadcast int folded by recvReduce.
struct LlTriple {
  int a, b, c;
};
__host__ __device__ inline int llStamp(int round, int src, int dst, int block) {
  return round * 100000 + src * 1000 + dst * 10 + block;
}

// `rounds` epochs from round `firstRound`, LL block blockIdx.x per CTA: rank r sends member p the triple
// {s, -s, 3s} in slot r and the double 2s in slot n + r (s = llStamp(round, r, p, block)), and broadcasts
// round * 100 + 7r + block in slot 2n + r; then it receives all of them. Per round and CTA, out gets 5 values per
// source member (the triple, the double, and the recvReduce sum of the broadcasts, the same for every source).
__global__ void llExchange(ncclDevComm devComm, ncclLLA2AHandle handle, int firstRound, int rounds, long long* out) {
  ncclCoopCta cta;
  const ncclTeam lsa = ncclTeamLsa(devComm);
  const int n = lsa.nRanks, me = lsa.rank, b = static_cast<int>(blockIdx.x);
  ncclLLA2ASession<ncclCoopCta> ll(cta, devComm, lsa, handle, blockIdx.x, 3 * n);
  for (int k = 0; k < rounds; ++k) {
    const int round = firstRound + k;
    for (int p = static_cast<int>(threadIdx.x); p < n; p += static_cast<int>(blockDim.x)) {
      const int s = llStamp(round, devComm.rank, ncclTeamRankToWorld(devComm, lsa, p), b);
      ll.send(p, me, LlTriple{s, -s, 3 * s});
      ll.send(p, n + me, 2.0 * s);
    }
    if (threadIdx.x == 0) ll.bcast(2 * n + me, round * 100 + 7 * devComm.rank + b);
    long long* row = out + (static_cast<size_t>(k) * gridDim.x + blockIdx.x) * 5u * static_cast<size_t>(n);
    for (int q = static_cast<int>(threadIdx.x); q < n; q += static_cast<int>(blockDim.x)) {
      const LlTriple t = ll.recv<LlTriple>(q);
      const double d = ll.recv<double>(n + q);
      const int sum = ll.recvReduce<2, int>(
          2 * n, n, 1, [](int v) { return v; }, [](int x, int y) { return x + y; });
      row[5 * q + 0] = t.a;
      row[5 * q + 1] = t.b;
      row[5 * q + 2] = t.c;
      row[5 * q + 3] = static_cast<long long>(d);
      row[5 * q + 4] = sum;
    }
    ll.endEpoch(cta);
  }
}

// ncclCoopBcast in every group kind: each group broadcasts, twice, a 12-byte value from a root that depends on the
// group and the repeat; thread t writes what it got to out[(repeat * kinds + kind) * blockDim.x + t] (one CTA).
__host__ __device__ inline LlTriple bcastValue(int kind, int repeat, int group, int root) {
  return LlTriple{kind * 1000 + repeat * 100 + group, root, -group};
}
template <typename Coop>
__device__ void bcastIn(Coop coop, int kind, int group, LlTriple* out) {
  for (int repeat = 0; repeat < 2; ++repeat) {
    const int root = (group + 3 * repeat + 1) % coop.size();
    const LlTriple mine = coop.thread_rank() == root ? bcastValue(kind, repeat, group, root) : LlTriple{-1, -1, -1};
    out[(repeat * kStampGroupKinds + kind) * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)] =
        ncclCoopBcast(coop, mine, root);
  }
}
template <typename Coop>
__device__ void bcastAs(bool any, Coop coop, int kind, int group, LlTriple* out) {
  if (any) {
    bcastIn(ncclCoopAny(coop), kind, group, out);
  } else {
    bcastIn(coop, kind, group, out);
  }
}
constexpr unsigned kBcastLanes = 0x5555aaaau;  // half the lanes of a warp, scattered
__global__ void coopBroadcasts(bool any, LlTriple* out) {
  const int t = static_cast<int>(threadIdx.x);
  bcastAs(any, ncclCoopCta(), kStampCta, 0, out);
  bcastAs(any, ncclCoopWarp(), kStampWarp, t / 32, out);
  bcastAs(any, ncclCoopTile<8>(), kStampTile8, t / 8, out);
  bcastAs(any, ncclCoopThread(), kStampThread, t, out);
  if ((kBcastLanes >> (t % 32)) & 1u) bcastAs(any, ncclCoopLanes(kBcastLanes), kStampLanes, t / 32, out);
  bcastAs(any, ncclCoopWarpSpan(t / 64 * 2, 2, t / 64), kStampWarpSpan, t / 64, out);
}

// out[i] = the window ncclFindWindow finds for ptrs[i] (null when none), each looked up by one thread.
__global__ void lsaFindWindows(ncclDevComm devComm, const void* const* ptrs, int n, ncclWindow_t* out) {
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) {
    out[i] = ncclFindWindow(ncclCoopThread(), devComm, ptrs[i]);
  }
}

// The two-shot all-reduce again, but from NCCL 2.29's building blocks (reduce_copy.h); `variant` picks the forms:
// 0 ncclLsaReduceSum + ncclLsaCopy (symmetric pointers, devComm); 1 ncclLsaReduceSumCopy (windows, team);
// 2 ncclLsaReduceSumLsaCopy (lambdas); 3 ncclLsaReduceLsaCopy with a sum functor; 4 ncclLsaReduceSum, then
// ncclLsaCopyTma (NCCL 2.32) for the 16-byte-aligned middle of the slice and ncclLsaCopy for its ends.
struct BlockSum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
__global__ void lsaBlocksAllReduce(int variant, ncclWindow_t sendWin, ncclWindow_t recvWin, size_t count,
                                   ncclDevComm devComm) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, devComm, ncclTeamTagLsa(), blockIdx.x);
  bar.sync(cta, cuda::memory_order_acq_rel);
  const int n = devComm.lsaSize;
  const size_t share = (count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
  const size_t lo = share * static_cast<size_t>(devComm.lsaRank);
  const size_t hi = lo + share < count ? lo + share : count;
  // This CTA's slice of this rank's share.
  const size_t per = (share + gridDim.x - 1) / gridDim.x;
  const size_t a = lo + per * blockIdx.x < hi ? lo + per * blockIdx.x : hi;
  const size_t b = a + per < hi ? a + per : hi;
  const size_t bytes = a * sizeof(float);
  const ncclTeam lsa = ncclTeamLsa(devComm);
  auto srcOf = [&](int k) { return static_cast<float*>(ncclGetLsaPointer(sendWin, bytes, k)); };
  auto dstOf = [&](int k) { return static_cast<float*>(ncclGetLsaPointer(recvWin, bytes, k)); };
  switch (variant) {
    case 0: {
      float* mine = static_cast<float*>(ncclGetLocalPointer(recvWin, bytes));
      ncclLsaReduceSum(cta, ncclSymPtr<float>(sendWin, bytes), mine, b - a, devComm);
      cta.sync();  // the sums this CTA's threads wrote, before they are copied out
      ncclLsaCopy(cta, mine, ncclSymPtr<float>(recvWin, bytes), b - a, devComm);
      break;
    }
    case 1:
      ncclLsaReduceSumCopy<float>(cta, sendWin, bytes, recvWin, bytes, b - a, lsa);
      break;
    case 2:
      ncclLsaReduceSumLsaCopy<float>(cta, srcOf, n, dstOf, n, b - a);
      break;
    case 3:
      ncclLsaReduceLsaCopy<float>(cta, srcOf, n, dstOf, n, BlockSum(), b - a);
      break;
    default: {
      float* mine = static_cast<float*>(ncclGetLocalPointer(recvWin, 0));
      ncclLsaReduceSum(cta, ncclSymPtr<float>(sendWin, bytes), mine + a, b - a, devComm);
      cta.sync();
      const size_t midLo = (a + 3) / 4 * 4 < b ? (a + 3) / 4 * 4 : b, midHi = b / 4 * 4 > midLo ? b / 4 * 4 : midLo;
#if defined(__CUDACC__)
      __shared__ alignas(16) char stage[64];
#else
      alignas(16) char stage[64];  // the emulator models no __shared__; braid's copy only checks its alignment
#endif
      const ncclSymPtr<float> recv(recvWin, 0);
      ncclLsaCopy(cta, mine + a, recv + a, midLo - a, devComm);
      ncclLsaCopyTma<float, ncclCoopCta, size_t, 64>(cta, mine + midLo, recvWin, midLo * sizeof(float), midHi - midLo,
                                                     devComm, stage);
      ncclLsaCopy(cta, mine + midHi, recv + midHi, b - midHi, devComm);
      break;
    }
  }
  bar.sync(cta, cuda::memory_order_acq_rel);
}

// ncclLsaCopyTma with a count that is not a whole number of 16-byte units: traps, naming the rule.
__global__ void lsaTmaMisuse(ncclWindow_t win, ncclDevComm devComm) {
  alignas(16) static float src[4];
  alignas(16) static char stage[32];
  ncclLsaCopyTma<float, ncclCoopCta, int, 32>(ncclCoopCta(), src, win, 0, 3, devComm, stage);
}

// The Local forms on one CTA: dst = sum of nSrc strided arrays, copies of it into nDst strided arrays (two ways),
// and the fused ncclLocalReduceSumCopy into out2.
__global__ void localBlocks(int nSrc, float* src, size_t stride, float* sum, int nDst, float* out1, float* out2,
                            float* out3, int count) {
  ncclCoopCta cta;
  ncclLocalReduceSum(cta, nSrc, src, stride, sum, count);
  cta.sync();
  ncclLocalCopy(cta, sum, nDst, out1, stride, count);
  ncclLocalCopy(
      cta, sum, [&](int k) { return out3 + static_cast<size_t>(k) * stride; }, nDst, count);
  ncclLocalReduceSumCopy(cta, nSrc, src, stride, nDst, out2, stride, count);
}
