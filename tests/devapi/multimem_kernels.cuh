// Device-API kernels that sum through NVLS multicast (the multimem building blocks of nccl_device/reduce_copy.h),
// written as NCCL's users write them. One source: nvcc compiles it for sm_90 (tests/devcode/nccl_device_header_test.sh)
// and g++ runs it on braid's CTA emulator over fake-GPU communicators (tests/devapi/multimem_kernels_test.cc).
#pragma once

#include <nccl_device.h>

// Sum all-reduce of `count` T through NVLS multicast (the device communicator made with lsaMultimem): between two
// LSA barriers, two-shot: each rank sums its share of the elements in the switch, from the send window's multicast
// pointer, and stores the sums through the receive window's into every member's receive buffer
// (ncclMultimemReduceSumCopy); one-shot: each rank sums every element into its own receive buffer
// (ncclMultimemReduceSum), and nothing is stored through the switch.
template <typename T>
__global__ void multimemAllReduce(bool oneShot, ncclWindow_t sendWin, ncclWindow_t recvWin, size_t count,
                                  ncclDevComm devComm) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, devComm, ncclTeamTagLsa(), blockIdx.x, /*multimem=*/true);
  bar.sync(cta, cuda::memory_order_acq_rel);  // every member's input is in place
  const size_t n = oneShot ? 1 : static_cast<size_t>(devComm.lsaSize);
  const size_t share = (count + n - 1) / n;
  const size_t rankLo = oneShot ? 0 : share * static_cast<size_t>(devComm.lsaRank);
  const size_t rankHi = rankLo + share < count ? rankLo + share : count;
  // This CTA's part of the rank's share.
  const size_t per = (rankHi - rankLo + gridDim.x - 1) / gridDim.x;
  const size_t lo = rankLo + per * blockIdx.x < rankHi ? rankLo + per * blockIdx.x : rankHi;
  const size_t hi = lo + per < rankHi ? lo + per : rankHi;
  if (oneShot) {
    ncclMultimemReduceSum(cta, sendWin, lo * sizeof(T), static_cast<T*>(ncclGetLocalPointer(recvWin, 0)) + lo, hi - lo,
                          devComm.lsaMultimem);
  } else {
    ncclMultimemReduceSumCopy<T>(cta, sendWin, lo * sizeof(T), devComm.lsaMultimem, recvWin, lo * sizeof(T),
                                 devComm.lsaMultimem, hi - lo);
  }
  bar.sync(cta, cuda::memory_order_acq_rel);  // every member's sums have landed here
}

// Where a window's multicast pointer is, through the device communicator's handle (null: none).
__global__ void multimemPointer(ncclWindow_t win, ncclDevComm devComm, void** out) {
  if (threadIdx.x == 0) *out = ncclGetLsaMultimemPointer(win, 0, devComm);
}

// One-shot sum of `count` floats of window `win` into `out` through the device communicator's multicast handle
// (traps when the window or the handle has no multicast mapping).
__global__ void multimemSumInto(ncclWindow_t win, ncclDevComm devComm, float* out, size_t count) {
  ncclMultimemReduceSum(ncclCoopCta(), win, 0, out, count, devComm.lsaMultimem);
}

// Rounds of an LSA barrier asked to arrive through the switch (multimem; it falls back to LSA stores where the device
// communicator has no multicast): each round every rank writes a stamp into its scratch buffer, syncs, reads every
// member's stamp through LSA pointers into out[round * lsaSize + member], and syncs again before the next overwrite.
__global__ void multimemBarrierStamps(ncclDevComm devComm, ncclDevResourceHandle scratch, int rounds, int* out) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, devComm, ncclTeamTagLsa(), 1, /*multimem=*/true);  // index 1 of 2
  int* mine = static_cast<int*>(ncclGetResourceBufferLocalPointer(devComm, scratch));
  for (int round = 0; round < rounds; ++round) {
    if (threadIdx.x == 0) mine[0] = round * 100 + devComm.rank;  // a plain store, published by the arrival
    bar.sync(cta, cuda::memory_order_acq_rel);
    for (int p = static_cast<int>(threadIdx.x); p < devComm.lsaSize; p += static_cast<int>(blockDim.x)) {
      out[round * devComm.lsaSize + p] = *static_cast<int*>(ncclGetResourceBufferLsaPointer(devComm, scratch, p));
    }
    bar.sync(cta, cuda::memory_order_acq_rel);
  }
}

// Epochs of the LL all-to-all whose broadcasts go through the switch (multimem; LSA stores where the device
// communicator has no multicast): each epoch every rank broadcasts a stamp into slot lsaRank, then receives every
// member's: out[round * lsaSize + member].
__global__ void multimemLlBcast(ncclDevComm devComm, ncclLLA2AHandle handle, int rounds, int* out) {
  ncclCoopCta cta;
  ncclLLA2ASession<ncclCoopCta> ll(cta, devComm, ncclTeamLsa(devComm), handle, 0, devComm.lsaSize, /*multimem=*/true,
                                   devComm.lsaMultimem);
  for (int round = 0; round < rounds; ++round) {
    if (threadIdx.x == 0) ll.bcast(devComm.lsaRank, round * 100 + devComm.rank);
    for (int p = static_cast<int>(threadIdx.x); p < devComm.lsaSize; p += static_cast<int>(blockDim.x)) {
      out[round * devComm.lsaSize + p] = ll.template recv<int>(p);
    }
    ll.endEpoch(cta);
  }
}

// Half precision (T = half or __nv_bfloat16) through the switch, `count` elements from element `first` of the windows
// (odd firsts and counts leave elements alone in their 32-bit words): every rank sums the send window into `out`
// (ncclMultimemReduceSum), and rank `writer` copies `src` into every member's receive window (ncclMultimemCopy, the
// window form, whose lone elements go through LSA pointers).
template <typename T>
__global__ void multimemHalf(ncclWindow_t sendWin, ncclWindow_t recvWin, size_t first, size_t count, T* out, T* src,
                             int writer, ncclDevComm devComm) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, devComm, ncclTeamTagLsa(), 0, /*multimem=*/true);
  bar.sync(cta, cuda::memory_order_acq_rel);
  ncclMultimemReduceSum(cta, sendWin, first * sizeof(T), out, count, devComm.lsaMultimem);
  if (devComm.lsaRank == writer) {
    ncclMultimemCopy(cta, src, recvWin, first * sizeof(T), count, devComm.lsaMultimem);
  }
  bar.sync(cta, cuda::memory_order_acq_rel);
}

// The raw-pointer copy of `count` elements from element 1 of `win` (its first element is alone in its word): traps.
template <typename T>
__global__ void multimemHalfRawCopy(ncclWindow_t win, T* src, size_t count, ncclDevComm devComm) {
  ncclMultimemCopy(ncclCoopCta(), src, static_cast<T*>(ncclGetLsaMultimemPointer(win, sizeof(T), devComm)), count);
}

// The LSA sum of `count` elements of `win` into `out`, between two barriers.
template <typename T>
__global__ void lsaSumInto(ncclWindow_t win, T* out, size_t count, ncclDevComm devComm) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, devComm, ncclTeamTagLsa(), 0);
  bar.sync(cta, cuda::memory_order_acq_rel);
  ncclLsaReduceSum(cta, win, 0, out, count, devComm);
  bar.sync(cta, cuda::memory_order_acq_rel);
}

// A max, for ncclLsaReduceMultimemCopy's generic reduction.
struct MaxOf {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return nccl_braid_::Acc<T>::in(a) < nccl_braid_::Acc<T>::in(b) ? b : a;  // fp8 has no operator<
  }
};

// Two-shot all-reduce of `count` T from the mixed building blocks (NCCL 2.29's LSA/multimem mixes), one form per
// launch, between two LSA barriers: each rank reduces its share [lo, hi) and stores it into every member's receive
// buffer. Forms: 0 LSA sources into the receive window's multicast ncclSymPtr; 1 the same into a raw multicast
// pointer; 2 multicast source ncclSymPtr into LSA destinations; 3 a raw multicast source into LSA destinations; 4-6
// the lambda forms (LSA -> multicast, multicast -> LSA, multicast -> multicast); 7 the generic reduction (a max)
// into a multicast destination; 8 multicast -> multicast by ncclSymPtr.
template <typename T>
__global__ void mixedAllReduce(int form, ncclWindow_t sendWin, ncclWindow_t recvWin, size_t count,
                               ncclDevComm devComm) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> bar(cta, devComm, ncclTeamTagLsa(), 0, /*multimem=*/true);
  bar.sync(cta, cuda::memory_order_acq_rel);
  const ncclTeam lsa = ncclTeamLsa(devComm);
  const size_t share = (count + static_cast<size_t>(lsa.nRanks) - 1) / static_cast<size_t>(lsa.nRanks);
  const size_t lo = share * static_cast<size_t>(lsa.rank) < count ? share * static_cast<size_t>(lsa.rank) : count;
  const size_t n = lo + share < count ? share : count - lo;
  const ncclSymPtr<T> src = ncclSymPtr<T>(sendWin, 0) + lo, dst = ncclSymPtr<T>(recvWin, 0) + lo;
  const ncclMultimemHandle mm = devComm.lsaMultimem;
  T* mcSrc = src.multimemPtr(mm);
  T* mcDst = dst.multimemPtr(mm);
  auto lsaSrc = [&](int k) { return src.lsaPtr(k); };
  auto lsaDst = [&](int k) { return dst.lsaPtr(k); };
  auto mcSrcOf = [&](int) { return mcSrc; };
  auto mcDstOf = [&](int) { return mcDst; };
  switch (form) {
    case 0:
      ncclLsaReduceSumMultimemCopy(cta, src, lsa, dst, mm, n);
      break;
    case 1:
      ncclLsaReduceSumMultimemCopy(cta, src, lsa, mcDst, n);
      break;
    case 2:
      ncclMultimemReduceSumLsaCopy(cta, src, mm, dst, lsa, n);
      break;
    case 3:
      ncclMultimemReduceSumLsaCopy(cta, mcSrc, dst, lsa, n);
      break;
    case 4:
      ncclLsaReduceSumMultimemCopy<T>(cta, lsaSrc, lsa.nRanks, mcDstOf, 1, n);
      break;
    case 5:
      ncclMultimemReduceSumLsaCopy<T>(cta, mcSrcOf, 1, lsaDst, lsa.nRanks, n);
      break;
    case 6:
      ncclMultimemReduceSumMultimemCopy<T>(cta, mcSrcOf, 1, mcDstOf, 1, n);
      break;
    case 7:
      ncclLsaReduceMultimemCopy<T>(cta, lsaSrc, lsa.nRanks, mcDstOf, 1, MaxOf(), n);
      break;
    default:
      ncclMultimemReduceSumCopy(cta, src, mm, dst, mm, n);
      break;
  }
  bar.sync(cta, cuda::memory_order_acq_rel);
}
