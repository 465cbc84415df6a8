/* braid's nccl_device/reduce_copy.h: NCCL 2.29's reduce and copy building blocks over LSA pointers, for kernels.
 *
 * Each call is made by every thread of a group (Coop), which share the elements among them (thread k of the group
 * handles elements k, k + size, ...). Sums are in the order of the sources (member 0 first), in T's own arithmetic
 * (half, __nv_bfloat16 and fp8 in float, rounded once at the end), so every rank that reduces the same sources gets the
 * same bits. Sources and destinations:
 *   - Lsa forms: a symmetric pointer (or window + byte offset) seen at every member of a team (ncclTeam, or the LSA
 *     team of an ncclDevComm): member p's copy is ptr.peerPtr(team, p);
 *   - lambda forms: src(k) / dst(k) return the k-th source / destination pointer (T*), for k in [0, n);
 *   - Local forms: n arrays `stride` elements apart from one pointer.
 * There are no ordering guarantees with respect to other ranks: bracket the calls with an LSA barrier.
 *   - Multimem forms: a multicast pointer (ncclGetMultimemPointer, or a window / ncclSymPtr and the device
 *     communicator's ncclMultimemHandle, whose windows have a multicast mapping: see core.h): a load-reduce through it
 *     reads the sum of every LSA member's value (in the switch's order, so sums that are not exact may differ in
 *     the last bits from the Lsa forms'; every rank reads the same), a store writes every member's. T is float,
 *     double, a 32/64-bit integer, half, __nv_bfloat16 or fp8 (__nv_fp8_e4m3, __nv_fp8_e5m2). The switch works on
 *     32-bit words at the narrowest, so half and bf16 go by pairs (summed in f32, rounded once) and fp8 by quads
 *     (summed in f16, NCCL's form; the switch's fp8 sums exist on sm_100a, sm_101a, sm_120a and sm_121a only, and a
 *     kernel built for another target that reaches one traps): an element alone in its word (a start past a word
 *     boundary, a count that leaves a partial word) is read through its word (whose rest must lie inside the
 *     mapping) and cannot be stored through the switch: the window and ncclSymPtr destination forms store such an
 * element to every LSA member's copy instead, and the raw-pointer forms trap. The UNROLL parameter is accepted for
 * NCCL's signatures and is a hint only. */
#ifndef NCCL_DEVICE_REDUCE_COPY_H_
#define NCCL_DEVICE_REDUCE_COPY_H_

#include "core.h"
#include "ptr.h"

#if NCCL_DEVICE_HALF_
#include <type_traits>
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif
#endif

#if NCCL_DEVICE_HALF_
namespace nccl_braid_ {
/* void, for an integral element count: keeps the lambda forms out of overload resolution for the team forms (where
 * a count would otherwise pass for the destinations' number and a team for the count). */
template <typename I>
using IfCount = typename std::enable_if<std::is_integral<I>::value>::type;
/* What sums of T accumulate in: half and bf16 in float, rounded once at the end; every other type in itself. */
template <typename T>
struct Acc {
  typedef T Type;
  static NCCL_DEVICE_INLINE T in(T v) { return v; }
  static NCCL_DEVICE_INLINE T out(T v) { return v; }
};
template <>
struct Acc<__half> {
  typedef float Type;
  static NCCL_DEVICE_INLINE float in(__half v) { return __half2float(v); }
  static NCCL_DEVICE_INLINE __half out(float v) { return __float2half_rn(v); }
};
template <>
struct Acc<__nv_bfloat16> {
  typedef float Type;
  static NCCL_DEVICE_INLINE float in(__nv_bfloat16 v) { return __bfloat162float(v); }
  static NCCL_DEVICE_INLINE __nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
};
/* fp8 (cuda_fp8.h's types): in float, converted back once (saturating to the finite range, as CUDA's constructors). */
template <typename F8>
struct AccFp8 {
  typedef float Type;
  static NCCL_DEVICE_INLINE float in(F8 v) { return static_cast<float>(v); }
  static NCCL_DEVICE_INLINE F8 out(float v) { return F8(v); }
};
template <>
struct Acc<__nv_fp8_e4m3> : AccFp8<__nv_fp8_e4m3> {};
template <>
struct Acc<__nv_fp8_e5m2> : AccFp8<__nv_fp8_e5m2> {};
/* The common loop: for each element i of this thread's share, dst-side `put(i, v)` of the fold of `get(k, i)`. */
template <typename T, typename Coop, typename IntCount, typename Get, typename Put>
NCCL_DEVICE_INLINE void reduceCopyLoop(Coop coop, int nSrc, IntCount count, Get get, Put put) {
  for (IntCount i = static_cast<IntCount>(coop.thread_rank()); i < count; i += static_cast<IntCount>(coop.size())) {
    typename Acc<T>::Type acc = Acc<T>::in(get(0, i));
    for (int k = 1; k < nSrc; ++k) acc = acc + Acc<T>::in(get(k, i));
    put(i, Acc<T>::out(acc));
  }
}
template <typename T>
NCCL_DEVICE_INLINE T* teamPtr(ncclSymPtr<T> p, ncclTeam team, int member) {
  return p.peerPtr(team, member);
}
template <typename T>
struct McSummable {
  static constexpr bool value = std::is_same<T, float>::value || std::is_same<T, double>::value ||
                                std::is_same<T, int32_t>::value || std::is_same<T, uint32_t>::value ||
                                std::is_same<T, int64_t>::value || std::is_same<T, uint64_t>::value ||
                                std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value ||
                                std::is_same<T, __nv_fp8_e4m3>::value || std::is_same<T, __nv_fp8_e5m2>::value;
};
/* The element types narrower than the switch's 32-bit word: how many share a word, and the word's load-reduce
 * (half and bf16 in pairs summed in f32; fp8 in quads summed in f16, NCCL's forms). */
template <typename T>
struct Narrow {
  static constexpr int kPer = static_cast<int>(4 / sizeof(T));
  static NCCL_DEVICE_INLINE uint32_t load(const void* w) {
    return kPer == 2 ? mcLoadSumPair(w, std::is_same<T, __nv_bfloat16>::value)
                     : mcLoadSumQuad(w, std::is_same<T, __nv_fp8_e5m2>::value);
  }
};
/* `count` narrow elements from byte address `anchor`, as units a thread handles: the elements alone before the first
 * word boundary, the whole words (kPer elements each), then the elements alone after the last. */
template <typename T, typename IntCount>
struct NarrowUnits {
  IntCount lead, words, total;
  NCCL_DEVICE_INLINE NarrowUnits(uintptr_t anchor, IntCount count) {
    const IntCount before = static_cast<IntCount>(((4u - (anchor & 3u)) & 3u) / sizeof(T));
    lead = before < count ? before : count;
    words = (count - lead) / Narrow<T>::kPer;
    total = count - words * (Narrow<T>::kPer - 1);
  }
  NCCL_DEVICE_INLINE IntCount first(IntCount u) const {
    return u < lead ? u : u < lead + words ? lead + (u - lead) * Narrow<T>::kPer : u + words * (Narrow<T>::kPer - 1);
  }
  NCCL_DEVICE_INLINE int size(IntCount u) const { return u >= lead && u < lead + words ? Narrow<T>::kPer : 1; }
};
template <typename T>
NCCL_DEVICE_INLINE constexpr void requireSummable() {
  static_assert(McSummable<T>::value,
                "braid's multimem building blocks take float, double, 32/64-bit integers, half, __nv_bfloat16 and fp8 "
                "(the switch's word forms)");
}
/* One element of 4 or 8 bytes stored through the switch. */
template <typename T>
NCCL_DEVICE_INLINE void mcStoreOne(T* mcDst, T v) {
  uint64_t w = 0;
  __builtin_memcpy(&w, &v, sizeof(T));
  mcStoreWord(mcDst, w, static_cast<int>(sizeof(T)));
}
/* kPer narrow elements (one 32-bit word) stored through the switch at word-aligned mcDst. */
template <typename T>
NCCL_DEVICE_INLINE void mcStoreNarrowWord(T* mcDst, const T* v) {
  uint32_t word = 0;
  __builtin_memcpy(&word, v, sizeof(word));
  mcStoreWord(mcDst, word, 4);
}
/* The group's walk over `count` narrow elements laid out from multicast address `anchor` (NarrowUnits): f(i, n) for
 * each of this thread's units, n being kPer for a whole word and 1 for an element alone in its word. */
template <typename T, typename Coop, typename IntCount, typename F>
NCCL_DEVICE_INLINE void forNarrowUnits(Coop coop, uintptr_t anchor, IntCount count, F f) {
  if (anchor % sizeof(T) != 0) trap("ncclMultimem* (half, bf16): a multicast pointer not aligned to its elements");
  const NarrowUnits<T, IntCount> units(anchor, count);
  for (IntCount u = static_cast<IntCount>(coop.thread_rank()); u < units.total;
       u += static_cast<IntCount>(coop.size())) {
    f(units.first(u), units.size(u));
  }
}
/* A 16-bit element alone in its 32-bit word cannot be stored through the switch: the raw-pointer forms' rule. */
struct NoEdgeStore {
  template <typename T, typename IntCount>
  NCCL_DEVICE_INLINE void operator()(IntCount, T) const {
    trap(
        "ncclMultimem* (half, bf16, fp8): an element alone in its 32-bit word (at either end of a range that does "
        "not fill whole words) cannot be stored through the switch; the window and ncclSymPtr forms store it to each "
        "LSA member");
  }
};
/* The window and ncclSymPtr forms' rule: such an element goes to every LSA member's copy (LSA pointers). */
template <typename T>
struct LsaEdgeStore {
  ncclSymPtr<T> dst;
  template <typename IntCount>
  NCCL_DEVICE_INLINE void operator()(IntCount i, T v) const {
    for (int p = 0; p < dst.window->lsaSize; ++p) dst.lsaPtr(p)[i] = v;
  }
};
NCCL_DEVICE_INLINE void checkMultimemPointers(const void* mcSrc, const void* src, const void* dst, const void* mcDst) {
  // A null multicast pointer is a window without a mapping, or a handle of a device communicator made without
  // lsaMultimem: a kernel error, not a silent no-op.
  if (mcSrc == nullptr && src == nullptr) trap("ncclMultimem*: the source multicast pointer is null");
  if (mcDst == nullptr && dst == nullptr) trap("ncclMultimem*: the destination multicast pointer is null");
}
/* Element i of this thread's share: dst[i] = the switch's sum at mcSrc[i] (null mcSrc: src[i] from local memory);
 * then, with mcDst, stored to every member's mcDst[i]. 32- and 64-bit elements: one word each. */
template <typename T, typename Coop, typename IntCount, typename Edge>
NCCL_DEVICE_INLINE void multimemLoop(std::false_type /*pairs*/, Coop coop, const T* mcSrc, const T* src, T* dst,
                                     T* mcDst, IntCount count, Edge) {
  for (IntCount i = static_cast<IntCount>(coop.thread_rank()); i < count; i += static_cast<IntCount>(coop.size())) {
    const T v = mcSrc != nullptr ? mcLoadSum(mcSrc + i) : src[i];
    if (dst != nullptr) dst[i] = v;
    if (mcDst != nullptr) mcStoreOne(mcDst + i, v);
  }
}
/* Half, bf16 and fp8: by the 32-bit words of the multicast destination (of the source when there is none), so each
 * word is one load-reduce and one store; an element alone in its word (at either end of the range) is read through
 * its whole word and stored by `edge`. */
template <typename T>
NCCL_DEVICE_INLINE T mcLoadSumNarrow(const T* p) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  const uint32_t word = Narrow<T>::load(reinterpret_cast<const void*>(at & ~uintptr_t(3))) >> (8 * (at & 3));
  T v;
  __builtin_memcpy(&v, &word, sizeof(v));  // little-endian: the element's bytes are the word's low ones now
  return v;
}
template <typename T, typename Coop, typename IntCount, typename Edge>
NCCL_DEVICE_INLINE void multimemLoop(std::true_type /*narrow*/, Coop coop, const T* mcSrc, const T* src, T* dst,
                                     T* mcDst, IntCount count, Edge edge) {
  constexpr int kPer = Narrow<T>::kPer;
  const uintptr_t anchor = reinterpret_cast<uintptr_t>(mcDst != nullptr ? mcDst : mcSrc);
  forNarrowUnits<T>(coop, anchor, count, [&](IntCount i, int n) {
    T v[kPer];
    if (mcSrc != nullptr && n == kPer && (reinterpret_cast<uintptr_t>(mcSrc + i) & 3) == 0) {
      const uint32_t word = Narrow<T>::load(mcSrc + i);
      __builtin_memcpy(v, &word, sizeof(word));
    } else {
      for (int j = 0; j < n; ++j) v[j] = mcSrc != nullptr ? mcLoadSumNarrow(mcSrc + i + j) : src[i + j];
    }
    for (int j = 0; dst != nullptr && j < n; ++j) dst[i + j] = v[j];
    if (mcDst == nullptr) return;
    if (n == kPer) {
      mcStoreNarrowWord(mcDst + i, v);
    } else {
      edge(i, v[0]);
    }
  });
}
template <typename T, typename Coop, typename IntCount, typename Edge = NoEdgeStore>
NCCL_DEVICE_INLINE void multimemLoop(Coop coop, const T* mcSrc, const T* src, T* dst, T* mcDst, IntCount count,
                                     Edge edge = Edge()) {
  requireSummable<T>();
  checkMultimemPointers(mcSrc, src, dst, mcDst);
  multimemLoop(std::integral_constant<bool, (sizeof(T) < 4)>(), coop, mcSrc, src, dst, mcDst, count, edge);
}
template <typename T>
NCCL_DEVICE_INLINE T mcLoadAnyOf(std::true_type, const T* p) {
  return mcLoadSumNarrow(p);
}
template <typename T>
NCCL_DEVICE_INLINE T mcLoadAnyOf(std::false_type, const T* p) {
  return mcLoadSum(p);
}
/* The mixed forms' pieces: one multicast load-reduce of any summable T (half and bf16 through their word), the sum
 * of n sources in source order (in Acc), and the loop that stores value(i) through nDst multicast destinations:
 * 32/64-bit elements one word each; half and bf16 by pairs on the first destination's words (every destination
 * must sit at the same place in its word), an element alone in its word going to `edge`. */
template <typename T>
NCCL_DEVICE_INLINE T mcLoadAny(const T* p) {
  requireSummable<T>();
  return mcLoadAnyOf(std::integral_constant<bool, (sizeof(T) < 4)>(), p);
}
template <typename T, typename Get>
NCCL_DEVICE_INLINE T sumOf(int n, Get get) {
  typename Acc<T>::Type acc = Acc<T>::in(get(0));
  for (int k = 1; k < n; ++k) acc = acc + Acc<T>::in(get(k));
  return Acc<T>::out(acc);
}
template <typename T, typename Coop, typename IntCount, typename Value, typename McDst, typename Edge>
NCCL_DEVICE_INLINE void mcStoreLoop(std::false_type /*pairs*/, Coop coop, IntCount count, Value value, int nDst,
                                    McDst mcDst, Edge) {
  for (IntCount i = static_cast<IntCount>(coop.thread_rank()); i < count; i += static_cast<IntCount>(coop.size())) {
    const T v = value(i);
    for (int k = 0; k < nDst; ++k) mcStoreOne(mcDst(k) + i, v);
  }
}
template <typename T, typename Coop, typename IntCount, typename Value, typename McDst, typename Edge>
NCCL_DEVICE_INLINE void mcStoreLoop(std::true_type /*narrow*/, Coop coop, IntCount count, Value value, int nDst,
                                    McDst mcDst, Edge edge) {
  if (nDst < 1) return;
  const uintptr_t anchor = reinterpret_cast<uintptr_t>(mcDst(0));
  for (int k = 0; k < nDst; ++k) {
    if (((reinterpret_cast<uintptr_t>(mcDst(k)) ^ anchor) & 3) != 0) {
      trap("ncclMultimem* (half, bf16, fp8): multicast destinations at different places in their 32-bit words");
    }
  }
  constexpr int kPer = Narrow<T>::kPer;
  forNarrowUnits<T>(coop, anchor, count, [&](IntCount i, int n) {
    if (n != kPer) {
      edge(i, value(i));
      return;
    }
    T v[kPer];
    for (int j = 0; j < kPer; ++j) v[j] = value(i + j);
    for (int k = 0; k < nDst; ++k) mcStoreNarrowWord(mcDst(k) + i, v);
  });
}
template <typename T, typename Coop, typename IntCount, typename Value, typename McDst, typename Edge>
NCCL_DEVICE_INLINE void mcStoreLoop(Coop coop, IntCount count, Value value, int nDst, McDst mcDst, Edge edge) {
  requireSummable<T>();
  for (int k = 0; k < nDst; ++k) {
    if (mcDst(k) == nullptr) trap("ncclMultimem*: the destination multicast pointer is null");
  }
  mcStoreLoop<T>(std::integral_constant<bool, (sizeof(T) < 4)>(), coop, count, value, nDst, mcDst, edge);
}
}  // namespace nccl_braid_

/* ---- Multimem (NVLS): N -> 1 through the switch, 1 -> N through it, and both. ---- */
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclMultimemReduceSum(Coop coop, T* mcSrc, T* dst, IntCount count) {
  nccl_braid_::multimemLoop<T>(coop, mcSrc, static_cast<const T*>(nullptr), dst, static_cast<T*>(nullptr), count);
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclMultimemReduceSum(Coop coop, ncclSymPtr<T> src, T* dst,
                                                                        IntCount count, ncclMultimemHandle mm) {
  ncclMultimemReduceSum<T, Coop, IntCount, UNROLL>(coop, src.multimemPtr(mm), dst, count);
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclMultimemReduceSum(Coop coop, ncclWindow_t w, size_t offset,
                                                                        T* dst, IntCount count, ncclMultimemHandle mm) {
  ncclMultimemReduceSum<T, Coop, IntCount, UNROLL>(coop, ncclSymPtr<T>(w, offset), dst, count, mm);
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclMultimemCopy(Coop coop, T* src, T* mcDst, IntCount count) {
  nccl_braid_::multimemLoop<T>(coop, static_cast<const T*>(nullptr), src, static_cast<T*>(nullptr), mcDst, count);
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclMultimemCopy(Coop coop, T* src, ncclSymPtr<T> dst, IntCount count,
                                                                   ncclMultimemHandle mm) {
  nccl_braid_::multimemLoop<T>(coop, static_cast<const T*>(nullptr), src, static_cast<T*>(nullptr), dst.multimemPtr(mm),
                               count, nccl_braid_::LsaEdgeStore<T>{dst});
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclMultimemCopy(Coop coop, T* src, ncclWindow_t w, size_t offset,
                                                                   IntCount count, ncclMultimemHandle mm) {
  ncclMultimemCopy<T, Coop, IntCount, UNROLL>(coop, src, ncclSymPtr<T>(w, offset), count, mm);
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclMultimemReduceSumCopy(Coop coop, T* mcSrc, T* mcDst,
                                                                            IntCount count) {
  nccl_braid_::multimemLoop<T>(coop, mcSrc, static_cast<const T*>(nullptr), static_cast<T*>(nullptr), mcDst, count);
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclMultimemReduceSumCopy(Coop coop, ncclWindow_t srcWin,
                                                                            size_t srcOffset, ncclMultimemHandle srcMm,
                                                                            ncclWindow_t dstWin, size_t dstOffset,
                                                                            ncclMultimemHandle dstMm, IntCount count) {
  const ncclSymPtr<T> dst(dstWin, dstOffset);
  nccl_braid_::multimemLoop<T>(coop, static_cast<const T*>(ncclSymPtr<T>(srcWin, srcOffset).multimemPtr(srcMm)),
                               static_cast<const T*>(nullptr), static_cast<T*>(nullptr), dst.multimemPtr(dstMm), count,
                               nccl_braid_::LsaEdgeStore<T>{dst});
}

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

/* ---- Mixed sides (NCCL 2.29): LSA sources into multicast destinations, multicast sources into LSA destinations, and
 * the lambda forms of each, where src(k) / dst(k) give the k-th pointer (a multicast pointer on a multimem side).
 * Several multicast sources are summed in source order, each one load-reduce (half and bf16 round once per source).
 * Half and bf16 stores through the switch go by 32-bit pairs: an element alone in its word goes to every LSA
 * member's copy in the ncclSymPtr forms and traps in the lambda and raw-pointer forms. ---- */
template <typename T, typename Coop, typename SrcLambda, typename DstLambda, typename RedOp, typename IntCount,
          int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceMultimemCopy(Coop coop, SrcLambda src, int nSrc,
                                                                            DstLambda dst, int nDst, RedOp const& red,
                                                                            IntCount count) {
  nccl_braid_::mcStoreLoop<T>(
      coop, count,
      [&](IntCount i) {
        T acc = src(0)[i];
        for (int k = 1; k < nSrc; ++k) acc = red(acc, src(k)[i]);
        return acc;
      },
      nDst, dst, nccl_braid_::NoEdgeStore());
}
template <typename T, typename Coop, typename SrcLambda, typename DstLambda, typename IntCount,
          int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceSumMultimemCopy(Coop coop, SrcLambda src, int nSrc,
                                                                               DstLambda dst, int nDst,
                                                                               IntCount count) {
  nccl_braid_::mcStoreLoop<T>(
      coop, count, [&](IntCount i) { return nccl_braid_::sumOf<T>(nSrc, [&](int k) { return src(k)[i]; }); }, nDst, dst,
      nccl_braid_::NoEdgeStore());
}
template <typename T, typename Coop, typename SrcLambda, typename DstLambda, typename IntCount,
          int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclMultimemReduceSumLsaCopy(Coop coop, SrcLambda src, int nSrc,
                                                                               DstLambda dst, int nDst,
                                                                               IntCount count) {
  nccl_braid_::reduceCopyLoop<T>(
      coop, nSrc, count, [&](int k, IntCount i) { return nccl_braid_::mcLoadAny<T>(src(k) + i); },
      [&](IntCount i, T v) {
        for (int k = 0; k < nDst; ++k) dst(k)[i] = v;
      });
}
template <typename T, typename Coop, typename SrcLambda, typename DstLambda, typename IntCount,
          int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclMultimemReduceSumMultimemCopy(Coop coop, SrcLambda src, int nSrc,
                                                                                    DstLambda dst, int nDst,
                                                                                    IntCount count) {
  nccl_braid_::mcStoreLoop<T>(
      coop, count,
      [&](IntCount i) {
        return nccl_braid_::sumOf<T>(nSrc, [&](int k) { return nccl_braid_::mcLoadAny<T>(src(k) + i); });
      },
      nDst, dst, nccl_braid_::NoEdgeStore());
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceSumMultimemCopy(Coop coop, ncclSymPtr<T> src,
                                                                               ncclTeam srcTeam, ncclSymPtr<T> dst,
                                                                               ncclMultimemHandle dstMm,
                                                                               IntCount count) {
  T* mcDst = dst.multimemPtr(dstMm);
  nccl_braid_::mcStoreLoop<T>(
      coop, count,
      [&](IntCount i) {
        return nccl_braid_::sumOf<T>(srcTeam.nRanks, [&](int k) { return nccl_braid_::teamPtr(src, srcTeam, k)[i]; });
      },
      1, [&](int) { return mcDst; }, nccl_braid_::LsaEdgeStore<T>{dst});
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaReduceSumMultimemCopy(Coop coop, ncclSymPtr<T> src,
                                                                               ncclTeam srcTeam, T* mcDst,
                                                                               IntCount count) {
  nccl_braid_::mcStoreLoop<T>(
      coop, count,
      [&](IntCount i) {
        return nccl_braid_::sumOf<T>(srcTeam.nRanks, [&](int k) { return nccl_braid_::teamPtr(src, srcTeam, k)[i]; });
      },
      1, [&](int) { return mcDst; }, nccl_braid_::NoEdgeStore());
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclMultimemReduceSumLsaCopy(Coop coop, T* mcSrc, ncclSymPtr<T> dst,
                                                                               ncclTeam dstTeam, IntCount count) {
  if (mcSrc == nullptr) nccl_braid_::trap("ncclMultimem*: the source multicast pointer is null");
  nccl_braid_::reduceCopyLoop<T>(
      coop, 1, count, [&](int, IntCount i) { return nccl_braid_::mcLoadAny<T>(mcSrc + i); },
      [&](IntCount i, T v) {
        for (int k = 0; k < dstTeam.nRanks; ++k) nccl_braid_::teamPtr(dst, dstTeam, k)[i] = v;
      });
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclMultimemReduceSumLsaCopy(Coop coop, ncclSymPtr<T> src,
                                                                               ncclMultimemHandle srcMm,
                                                                               ncclSymPtr<T> dst, ncclTeam dstTeam,
                                                                               IntCount count) {
  ncclMultimemReduceSumLsaCopy<T, Coop, IntCount, UNROLL>(coop, src.multimemPtr(srcMm), dst, dstTeam, count);
}
template <typename T, typename Coop, typename IntCount, int UNROLL = 4 * 16 / sizeof(T)>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclMultimemReduceSumCopy(Coop coop, ncclSymPtr<T> src,
                                                                            ncclMultimemHandle srcMm, ncclSymPtr<T> dst,
                                                                            ncclMultimemHandle dstMm, IntCount count) {
  ncclMultimemReduceSumCopy<T, Coop, IntCount, UNROLL>(coop, src.window, src.offset, srcMm, dst.window, dst.offset,
                                                       dstMm, count);
}

/* ---- ncclLsaCopyTma (NCCL 2.32): ncclLsaCopy through the Tensor Memory Accelerator, staged in the caller's shared
 * memory (SmemBytesTotal bytes at smemPtr). braid's is the plain LSA copy on every architecture (smemPtr unused; NCCL's
 * does nothing below sm_100), and it checks NCCL's requirements, which NCCL leaves undefined: Coop a thread, a warp or
 * a CTA; sizeof(T) dividing 16; count * sizeof(T) a multiple of 16; the source, every destination and smemPtr
 * 16-byte aligned (a violation traps, naming it). ---- */
namespace nccl_braid_ {
template <typename Coop>
struct TmaCoop : std::false_type {};
template <>
struct TmaCoop<ncclCoopThread> : std::true_type {};
template <>
struct TmaCoop<ncclCoopWarp> : std::true_type {};
template <>
struct TmaCoop<ncclCoopCta> : std::true_type {};
template <typename T, typename Coop, int SmemBytesTotal, typename IntCount>
NCCL_DEVICE_INLINE void checkTma(const T* src, ncclSymPtr<T> dst, IntCount count, const char* smem) {
  static_assert(TmaCoop<Coop>::value, "ncclLsaCopyTma: Coop must be ncclCoopThread, ncclCoopWarp or ncclCoopCta");
  static_assert(16 % sizeof(T) == 0, "ncclLsaCopyTma: sizeof(T) must divide 16");
  static_assert(SmemBytesTotal >= 32, "ncclLsaCopyTma: SmemBytesTotal must be at least 32 bytes");
  if ((static_cast<size_t>(count) * sizeof(T)) % 16 != 0) {
    trap("ncclLsaCopyTma: count * sizeof(T) must be a multiple of 16");
  }
  if (((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(smem) |
        reinterpret_cast<uintptr_t>(dst.localPtr())) &
       15) != 0) {
    trap("ncclLsaCopyTma: the source, the destination and smemPtr must be 16-byte aligned");
  }
}
}  // namespace nccl_braid_
template <typename T, typename Coop, typename IntCount, int SmemBytesTotal>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaCopyTma(Coop coop, T* src, ncclSymPtr<T> dst, IntCount count,
                                                                 ncclTeam team, char* smemPtr) {
  nccl_braid_::checkTma<T, Coop, SmemBytesTotal>(src, dst, count, smemPtr);
  ncclLsaCopy<T, Coop, IntCount>(coop, src, dst, count, team);
}
template <typename T, typename Coop, typename IntCount, int SmemBytesTotal>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaCopyTma(Coop coop, T* src, ncclSymPtr<T> dst, IntCount count,
                                                                 ncclDevComm_t comm, char* smemPtr) {
  ncclLsaCopyTma<T, Coop, IntCount, SmemBytesTotal>(coop, src, dst, count, ncclTeamLsa(comm), smemPtr);
}
template <typename T, typename Coop, typename IntCount, int SmemBytesTotal>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaCopyTma(Coop coop, T* src, ncclWindow_t w, size_t offset,
                                                                 IntCount count, ncclTeam team, char* smemPtr) {
  ncclLsaCopyTma<T, Coop, IntCount, SmemBytesTotal>(coop, src, ncclSymPtr<T>(w, offset), count, team, smemPtr);
}
template <typename T, typename Coop, typename IntCount, int SmemBytesTotal>
NCCL_DEVICE_INLINE nccl_braid_::IfCount<IntCount> ncclLsaCopyTma(Coop coop, T* src, ncclWindow_t w, size_t offset,
                                                                 IntCount count, ncclDevComm_t comm, char* smemPtr) {
  ncclLsaCopyTma<T, Coop, IntCount, SmemBytesTotal>(coop, src, ncclSymPtr<T>(w, offset), count, ncclTeamLsa(comm),
                                                    smemPtr);
}
#endif /* NCCL_DEVICE_HALF_ */
#endif /* NCCL_DEVICE_REDUCE_COPY_H_ */
