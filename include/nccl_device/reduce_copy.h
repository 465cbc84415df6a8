/* braid's nccl_device/reduce_copy.h: NCCL 2.29's reduce and copy building blocks over LSA pointers, for kernels.
 *
 * Each call is made by every thread of a group (Coop), which share the elements among them (thread k of the group
 * handles elements k, k + size, ...). Sums are in the order of the sources (member 0 first), in T's own arithmetic,
 * so every rank that reduces the same sources gets the same bits. Sources and destinations:
 *   - Lsa forms: a symmetric pointer (or window + byte offset) seen at every member of a team (ncclTeam, or the LSA
 *     team of an ncclDevComm): member p's copy is ptr.peerPtr(team, p);
 *   - lambda forms: src(k) / dst(k) return the k-th source / destination pointer (T*), for k in [0, n);
 *   - Local forms: n arrays `stride` elements apart from one pointer.
 * There are no ordering guarantees with respect to other ranks: bracket the calls with an LSA barrier.
 * Multimem forms (NVLS multicast) are not built yet: braid creates no multicast objects. The UNROLL parameter is
 * accepted for NCCL's signatures and is a hint only. */
#ifndef NCCL_DEVICE_REDUCE_COPY_H_
#define NCCL_DEVICE_REDUCE_COPY_H_

#include "core.h"
#include "ptr.h"

#if NCCL_DEVICE_HALF_
#include <type_traits>
#endif

#if NCCL_DEVICE_HALF_
namespace nccl_braid_ {
/* void, for an integral element count: keeps the lambda forms out of overload resolution for the team forms (where
 * a count would otherwise pass for the destinations' number and a team for the count). */
template <typename I>
using IfCount = typename std::enable_if<std::is_integral<I>::value>::type;
/* The common loop: for each element i of this thread's share, dst-side `put(i, v)` of the fold of `get(k, i)`. */
template <typename T, typename Coop, typename IntCount, typename Get, typename Put>
NCCL_DEVICE_INLINE void reduceCopyLoop(Coop coop, int nSrc, IntCount count, Get get, Put put) {
  for (IntCount i = static_cast<IntCount>(coop.thread_rank()); i < count; i += static_cast<IntCount>(coop.size())) {
    T acc = get(0, i);
    for (int k = 1; k < nSrc; ++k) acc = acc + get(k, i);
    put(i, acc);
  }
}
template <typename T>
NCCL_DEVICE_INLINE T* teamPtr(ncclSymPtr<T> p, ncclTeam team, int member) {
  return p.peerPtr(team, member);
}
}  // namespace nccl_braid_

/* ---- N -> 1: reduce-sum into one local destination. ---- */
template <typename T, typename Coop, typename SrcLambda, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceSum(Coop coop, SrcLambda src, int nSrc, T* dst,
                                                                   IntCount count) {
  nccl_braid_::reduceCopyLoop<T>(
      coop, nSrc, count, [&](int k, IntCount i) { return src(k)[i]; }, [&](IntCount i, T v) { dst[i] = v; });
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceSum(Coop coop, ncclSymPtr<T> src, T* dst, IntCount count,
                                                                   ncclTeam team) {
  nccl_braid_::reduceCopyLoop<T>(
      coop, team.nRanks, count, [&](int k, IntCount i) { return nccl_braid_::teamPtr(src, team, k)[i]; },
      [&](IntCount i, T v) { dst[i] = v; });
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceSum(Coop coop, ncclSymPtr<T> src, T* dst, IntCount count,
                                                                   ncclDevComm_t comm) {
  ncclLsaReduceSum<T, Coop, IntCount, UNROLL>(coop, src, dst, count, ncclTeamLsa(comm));
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceSum(Coop coop, ncclWindow_t w, size_t offset, T* dst,
                                                                   IntCount count, ncclTeam team) {
  ncclLsaReduceSum<T, Coop, IntCount, UNROLL>(coop, ncclSymPtr<T>(w, offset), dst, count, team);
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceSum(Coop coop, ncclWindow_t w, size_t offset, T* dst,
                                                                   IntCount count, ncclDevComm_t comm) {
  ncclLsaReduceSum<T, Coop, IntCount, UNROLL>(coop, ncclSymPtr<T>(w, offset), dst, count, ncclTeamLsa(comm));
}
template <typename T, typename Coop, typename SrcLambda, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLocalReduceSum(Coop coop, SrcLambda src, int nSrc, T* dst,
                                                                     IntCount count) {
  ncclLsaReduceSum<T, Coop, SrcLambda, IntCount, UNROLL>(coop, src, nSrc, dst, count);
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLocalReduceSum(Coop coop, int nSrc, T* src, size_t srcStride,
                                                                     T* dst, IntCount count) {
  nccl_braid_::reduceCopyLoop<T>(
      coop, nSrc, count, [&](int k, IntCount i) { return src[static_cast<size_t>(k) * srcStride + i]; },
      [&](IntCount i, T v) { dst[i] = v; });
}

/* ---- 1 -> N: copy one local source to several destinations. ---- */
template <typename T, typename Coop, typename DstLambda, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaCopy(Coop coop, T* src, DstLambda dst, int nDst,
                                                              IntCount count) {
  nccl_braid_::reduceCopyLoop<T>(
      coop, 1, count, [&](int, IntCount i) { return src[i]; },
      [&](IntCount i, T v) {
        for (int k = 0; k < nDst; ++k) dst(k)[i] = v;
      });
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaCopy(Coop coop, T* src, ncclSymPtr<T> dst, IntCount count,
                                                              ncclTeam team) {
  nccl_braid_::reduceCopyLoop<T>(
      coop, 1, count, [&](int, IntCount i) { return src[i]; },
      [&](IntCount i, T v) {
        for (int k = 0; k < team.nRanks; ++k) nccl_braid_::teamPtr(dst, team, k)[i] = v;
      });
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaCopy(Coop coop, T* src, ncclSymPtr<T> dst, IntCount count,
                                                              ncclDevComm_t comm) {
  ncclLsaCopy<T, Coop, IntCount, UNROLL>(coop, src, dst, count, ncclTeamLsa(comm));
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaCopy(Coop coop, T* src, ncclWindow_t w, size_t offset,
                                                              IntCount count, ncclTeam team) {
  ncclLsaCopy<T, Coop, IntCount, UNROLL>(coop, src, ncclSymPtr<T>(w, offset), count, team);
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaCopy(Coop coop, T* src, ncclWindow_t w, size_t offset,
                                                              IntCount count, ncclDevComm_t comm) {
  ncclLsaCopy<T, Coop, IntCount, UNROLL>(coop, src, ncclSymPtr<T>(w, offset), count, ncclTeamLsa(comm));
}
template <typename T, typename Coop, typename DstLambda, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLocalCopy(Coop coop, T* src, DstLambda dst, int nDst,
                                                                IntCount count) {
  ncclLsaCopy<T, Coop, DstLambda, IntCount, UNROLL>(coop, src, dst, nDst, count);
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLocalCopy(Coop coop, T* src, int nDst, T* dst, size_t dstStride,
                                                                IntCount count) {
  nccl_braid_::reduceCopyLoop<T>(
      coop, 1, count, [&](int, IntCount i) { return src[i]; },
      [&](IntCount i, T v) {
        for (int k = 0; k < nDst; ++k) dst[static_cast<size_t>(k) * dstStride + i] = v;
      });
}

/* ---- N -> M: reduce-sum the sources and store the sum into every destination. ---- */
template <typename T, typename Coop, typename SrcLambda, typename DstLambda, typename IntCount,
          int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceSumLsaCopy(Coop coop, SrcLambda src, int nSrc,
                                                                          DstLambda dst, int nDst, IntCount count) {
  nccl_braid_::reduceCopyLoop<T>(
      coop, nSrc, count, [&](int k, IntCount i) { return src(k)[i]; },
      [&](IntCount i, T v) {
        for (int k = 0; k < nDst; ++k) dst(k)[i] = v;
      });
}
/* The same with any reduction: red(acc, v) folds the sources in order (red is a callable object). */
template <typename T, typename Coop, typename SrcLambda, typename DstLambda, typename RedOp, typename IntCount,
          int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceLsaCopy(Coop coop, SrcLambda src, int nSrc,
                                                                       DstLambda dst, int nDst, RedOp const& red,
                                                                       IntCount count) {
  for (IntCount i = static_cast<IntCount>(coop.thread_rank()); i < count; i += static_cast<IntCount>(coop.size())) {
    T acc = src(0)[i];
    for (int k = 1; k < nSrc; ++k) acc = red(acc, src(k)[i]);
    for (int k = 0; k < nDst; ++k) dst(k)[i] = acc;
  }
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceSumCopy(Coop coop, ncclSymPtr<T> src, ncclTeam srcTeam,
                                                                       ncclSymPtr<T> dst, ncclTeam dstTeam,
                                                                       IntCount count) {
  nccl_braid_::reduceCopyLoop<T>(
      coop, srcTeam.nRanks, count, [&](int k, IntCount i) { return nccl_braid_::teamPtr(src, srcTeam, k)[i]; },
      [&](IntCount i, T v) {
        for (int k = 0; k < dstTeam.nRanks; ++k) nccl_braid_::teamPtr(dst, dstTeam, k)[i] = v;
      });
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceSumCopy(Coop coop, ncclSymPtr<T> src, ncclSymPtr<T> dst,
                                                                       IntCount count, ncclTeam team) {
  ncclLsaReduceSumCopy<T, Coop, IntCount, UNROLL>(coop, src, team, dst, team, count);
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceSumCopy(Coop coop, ncclSymPtr<T> src, ncclSymPtr<T> dst,
                                                                       IntCount count, ncclDevComm_t comm) {
  ncclLsaReduceSumCopy<T, Coop, IntCount, UNROLL>(coop, src, ncclTeamLsa(comm), dst, ncclTeamLsa(comm), count);
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceSumCopy(Coop coop, ncclWindow_t srcWin, size_t srcOffset,
                                                                       ncclWindow_t dstWin, size_t dstOffset,
                                                                       IntCount count, ncclTeam team) {
  ncclLsaReduceSumCopy<T, Coop, IntCount, UNROLL>(coop, ncclSymPtr<T>(srcWin, srcOffset), team,
                                                  ncclSymPtr<T>(dstWin, dstOffset), team, count);
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceSumCopy(Coop coop, ncclWindow_t srcWin, size_t srcOffset,
                                                                       ncclWindow_t dstWin, size_t dstOffset,
                                                                       IntCount count, ncclDevComm_t comm) {
  ncclLsaReduceSumCopy<T, Coop, IntCount, UNROLL>(coop, srcWin, srcOffset, dstWin, dstOffset, count, ncclTeamLsa(comm));
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLocalReduceSumCopy(Coop coop, int nSrc, T* src, size_t srcStride,
                                                                         int nDst, T* dst, size_t dstStride,
                                                                         IntCount count) {
  nccl_braid_::reduceCopyLoop<T>(
      coop, nSrc, count, [&](int k, IntCount i) { return src[static_cast<size_t>(k) * srcStride + i]; },
      [&](IntCount i, T v) {
        for (int k = 0; k < nDst; ++k) dst[static_cast<size_t>(k) * dstStride + i] = v;
      });
}
#endif /* NCCL_DEVICE_HALF_ */
#endif /* NCCL_DEVICE_REDUCE_COPY_H_ */
