/* braid's nccl_device/coop.h: cooperative groups, the sets of threads that call a device-API function together.
 *
 * Every device-API call that takes a Coop is made by all threads of that group alike (the same arguments, the same
 * call), and each group type says which threads those are, its size, a thread's rank in it, and how they
 * synchronise:
 *   ncclCoopTile<N>  an aligned power-of-two set of N lanes of one warp (N <= 32): lanes [k*N, k*N + N);
 *   ncclCoopThread   one thread (ncclCoopTile<1>); ncclCoopWarp: the whole warp (ncclCoopTile<32>);
 *   ncclCoopLanes    the lanes of this warp in a mask (every lane of the mask must make the call);
 *   ncclCoopWarpSpan warps [warp0, warp0 + nWarps) of the CTA, synchronising on named barrier 1 + id (ids 0..14:
 *                    two spans that run at once need different ids);
 *   ncclCoopCta      every thread of the CTA;
 *   ncclCoopAny      any of these, chosen at run time (built from one implicitly; default-built, the CTA): for code
 *                    that takes a group without being a template. It forwards to the group it holds with a switch on
 *                    its kind, never an indirect call, so it holds the six types above only (NCCL's also wraps
 *                    user-defined groups).
 * Device code only (nvcc, or braid's emulator: see portable.h). */
#ifndef NCCL_DEVICE_COOP_H_
#define NCCL_DEVICE_COOP_H_
#include <string.h>

#include "portable.h"

#if NCCL_DEVICE_HALF_
template <int nThreadsPow2>
struct ncclCoopTile {
  static_assert(nThreadsPow2 >= 1 && nThreadsPow2 <= 32 && (nThreadsPow2 & (nThreadsPow2 - 1)) == 0,
                "ncclCoopTile: a power of two from 1 to 32 threads");
  NCCL_DEVICE_INLINE int thread_rank() const { return nccl_braid_::lane() & (nThreadsPow2 - 1); }
  NCCL_DEVICE_INLINE constexpr int size() const { return nThreadsPow2; }
  NCCL_DEVICE_INLINE constexpr int num_threads() const { return nThreadsPow2; }
  /* This tile's lanes as a warp mask. */
  NCCL_DEVICE_INLINE uint32_t laneMask() const {
    const uint32_t ones = nThreadsPow2 == 32 ? 0xffffffffu : ((1u << nThreadsPow2) - 1u);
    return ones << (nccl_braid_::lane() & ~(nThreadsPow2 - 1));
  }
  NCCL_DEVICE_INLINE void sync() {
    if (nThreadsPow2 > 1) __syncwarp(laneMask());
  }
};
typedef ncclCoopTile<1> ncclCoopThread;
typedef ncclCoopTile<32> ncclCoopWarp;

struct ncclCoopLanes {
  uint32_t lmask;
  NCCL_DEVICE_INLINE constexpr ncclCoopLanes(uint32_t mask = 0xffffffffu) : lmask(mask) {}
  NCCL_DEVICE_INLINE int thread_rank() const { return __popc(lmask & nccl_braid_::lanemaskLt()); }
  NCCL_DEVICE_INLINE int size() const { return __popc(lmask); }
  NCCL_DEVICE_INLINE int num_threads() const { return __popc(lmask); }
  NCCL_DEVICE_INLINE void sync() { __syncwarp(lmask); }
};

struct ncclCoopWarpSpan {
  uint32_t warp0 : 8, nWarps : 8, id : 8;
  NCCL_DEVICE_INLINE constexpr ncclCoopWarpSpan(int firstWarp, int warps, int barrierId)
      : warp0(static_cast<uint32_t>(firstWarp)),
        nWarps(static_cast<uint32_t>(warps)),
        id(static_cast<uint32_t>(barrierId)) {}
  NCCL_DEVICE_INLINE int thread_rank() const { return static_cast<int>(threadIdx.x) - 32 * static_cast<int>(warp0); }
  NCCL_DEVICE_INLINE int size() const { return 32 * static_cast<int>(nWarps); }
  NCCL_DEVICE_INLINE int num_threads() const { return 32 * static_cast<int>(nWarps); }
  NCCL_DEVICE_INLINE void sync() {
#if defined(__CUDACC__)
    asm volatile("bar.sync %0, %1;" ::"r"(1 + id), "r"(32 * nWarps) : "memory");
#else
    braid_emu::namedBarrier(static_cast<int>(1 + id), static_cast<int>(32 * nWarps));
#endif
  }
};

struct ncclCoopCta {
  NCCL_DEVICE_INLINE int thread_rank() const { return static_cast<int>(threadIdx.x); }
  NCCL_DEVICE_INLINE int size() const { return static_cast<int>(blockDim.x); }
  NCCL_DEVICE_INLINE int num_threads() const { return static_cast<int>(blockDim.x); }
  NCCL_DEVICE_INLINE void sync() { __syncthreads(); }
};

struct ncclCoopAny {
  NCCL_DEVICE_INLINE ncclCoopAny() : kind_(kCta), arg_(0) {}
  template <int N>
  NCCL_DEVICE_INLINE ncclCoopAny(ncclCoopTile<N>) : kind_(kTile), arg_(N) {}
  NCCL_DEVICE_INLINE ncclCoopAny(ncclCoopLanes c) : kind_(kLanes), arg_(c.lmask) {}
  NCCL_DEVICE_INLINE ncclCoopAny(ncclCoopWarpSpan c) : kind_(kSpan), arg_(c.warp0 | c.nWarps << 8 | c.id << 16) {}
  NCCL_DEVICE_INLINE ncclCoopAny(ncclCoopCta) : kind_(kCta), arg_(0) {}

  NCCL_DEVICE_INLINE int thread_rank() const {
    switch (kind_) {
      case kTile:
        return nccl_braid_::lane() & static_cast<int>(arg_ - 1);
      case kLanes:
        return __popc(arg_ & nccl_braid_::lanemaskLt());
      case kSpan:
        return span().thread_rank();
      default:
        return static_cast<int>(threadIdx.x);
    }
  }
  NCCL_DEVICE_INLINE int size() const {
    switch (kind_) {
      case kTile:
        return static_cast<int>(arg_);
      case kLanes:
        return __popc(arg_);
      case kSpan:
        return span().size();
      default:
        return static_cast<int>(blockDim.x);
    }
  }
  NCCL_DEVICE_INLINE int num_threads() const { return size(); }
  NCCL_DEVICE_INLINE void sync() {
    switch (kind_) {
      case kTile:
        if (arg_ > 1) __syncwarp(laneMask());
        break;
      case kLanes:
        __syncwarp(arg_);
        break;
      case kSpan: {
        ncclCoopWarpSpan s = span();
        s.sync();
        break;
      }
      default:
        __syncthreads();
    }
  }
  /* The group's lanes in this thread's warp (every lane for a group wider than a warp). */
  NCCL_DEVICE_INLINE uint32_t laneMask() const {
    if (kind_ == kLanes) return arg_;
    if (kind_ != kTile || arg_ == 32) return 0xffffffffu;
    return ((1u << arg_) - 1u) << (nccl_braid_::lane() & ~static_cast<int>(arg_ - 1));
  }
  NCCL_DEVICE_INLINE bool isThread() const { return kind_ == kTile && arg_ == 1; }
  NCCL_DEVICE_INLINE bool withinWarp() const { return kind_ == kTile || kind_ == kLanes; }
  /* The warp-span it holds (meaningful when it holds one). */
  NCCL_DEVICE_INLINE ncclCoopWarpSpan span() const {
    return ncclCoopWarpSpan(static_cast<int>(arg_ & 0xff), static_cast<int>((arg_ >> 8) & 0xff),
                            static_cast<int>((arg_ >> 16) & 0xff));
  }
  NCCL_DEVICE_INLINE bool isSpan() const { return kind_ == kSpan; }

 private:
  enum Kind : uint32_t { kTile, kLanes, kSpan, kCta };
  Kind kind_;
  uint32_t arg_; /* tile: its size; lanes: the mask; span: warp0 | nWarps << 8 | id << 16 */
};

/* The group's lanes within this thread's warp (every lane for groups wider than a warp). */
template <int N>
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopTile<N> coop) {
  return coop.laneMask();
}
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopLanes coop) {
  return coop.lmask;
}
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopWarpSpan) {
  return 0xffffffffu;
}
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopCta) {
  return 0xffffffffu;
}
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopAny coop) {
  return coop.laneMask();
}

/* Whether the group is one thread (statically). */
template <int N>
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopTile<N>) {
  return N == 1;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopLanes) {
  return false;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopWarpSpan) {
  return false;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopCta) {
  return false;
}
/* ncclCoopAny knows its kind at run time only. */
NCCL_DEVICE_INLINE bool ncclCoopIsThread(ncclCoopAny coop) {
  return coop.isThread();
}

/* Whether the group lies within one warp (statically). */
template <int N>
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopTile<N>) {
  return true;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopLanes) {
  return true;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopWarpSpan) {
  return false;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopCta) {
  return false;
}
NCCL_DEVICE_INLINE bool ncclCoopWithinWarp(ncclCoopAny coop) {
  return coop.withinWarp();
}

/* This thread's part of `coop` that lies in its own warp: the lanes active now (no argument), the warp for a group
 * wider than one, or the group itself when it is already within a warp. */
NCCL_DEVICE_INLINE ncclCoopLanes ncclCoopCoalesced() {
  return ncclCoopLanes(__activemask());
}
template <typename Coop>
NCCL_DEVICE_INLINE ncclCoopWarp ncclCoopCoalesced(Coop) {
  return ncclCoopWarp();
}
NCCL_DEVICE_INLINE ncclCoopLanes ncclCoopCoalesced(ncclCoopLanes coop) {
  return coop;
}
template <int N>
NCCL_DEVICE_INLINE ncclCoopTile<N> ncclCoopCoalesced(ncclCoopTile<N> coop) {
  return coop;
}
NCCL_DEVICE_INLINE ncclCoopLanes ncclCoopCoalesced(ncclCoopAny coop) {
  return ncclCoopLanes(coop.laneMask());
}
/* ---- ncclCoopBcast: the value of the group's thread `root` (its thread_rank), on every thread of the group. ----
 * Within a warp by shuffles; across warps through a CTA-shared stash (one slot for the CTA, one per warp-span id),
 * where entrySync (default) first waits until the group's previous broadcast has been read. T: trivially copyable,
 * at most 16 bytes across warps. */
namespace nccl_braid_ {
struct Stash16 {
  uint64_t words[2];
};
NCCL_DEVICE_INLINE Stash16* ctaStash() { /* [0]: ncclCoopCta; [1 + id]: ncclCoopWarpSpan id */
#if defined(__CUDACC__)
  __shared__ Stash16 stash[17];
  return stash;
#else
  return static_cast<Stash16*>(braid_emu::blockStash(17 * sizeof(Stash16)));
#endif
}
template <typename T>
NCCL_DEVICE_INLINE T warpBcast(uint32_t mask, T value, int srcLane) {
  constexpr int kWords = static_cast<int>((sizeof(T) + 3) / 4);
  uint32_t w[kWords] = {};
  memcpy(w, &value, sizeof(T));
  for (int i = 0; i < kWords; ++i) w[i] = __shfl_sync(mask, w[i], srcLane);
  memcpy(&value, w, sizeof(T));
  return value;
}
template <typename Coop, typename T>
NCCL_DEVICE_INLINE T stashBcast(Coop coop, Stash16* slot, T value, int root, bool entrySync) {
  static_assert(sizeof(T) <= sizeof(Stash16), "ncclCoopBcast across warps: at most 16 bytes");
  if (entrySync) coop.sync();
  if (coop.thread_rank() == root) memcpy(slot, &value, sizeof(T));
  coop.sync();
  memcpy(&value, slot, sizeof(T));
  return value;
}
}  // namespace nccl_braid_

template <int N, typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopTile<N> coop, T value, int root, bool entrySync = true) {
  (void)entrySync; /* a shuffle needs none */
  return nccl_braid_::warpBcast(coop.laneMask(), value, (nccl_braid_::lane() & ~(N - 1)) + root);
}
template <typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopLanes coop, T value, int root, bool entrySync = true) {
  (void)entrySync;
  uint32_t m = coop.lmask; /* the lane of the root-th member: clear the lower set bits */
  for (int i = 0; i < root; ++i) m &= m - 1;
  return nccl_braid_::warpBcast(coop.lmask, value, __ffs(static_cast<int>(m)) - 1);
}
template <typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopWarpSpan coop, T value, int root, bool entrySync = true) {
  return nccl_braid_::stashBcast(coop, nccl_braid_::ctaStash() + 1 + coop.id, value, root, entrySync);
}
template <typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopCta coop, T value, int root, bool entrySync = true) {
  return nccl_braid_::stashBcast(coop, nccl_braid_::ctaStash(), value, root, entrySync);
}
template <typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopAny coop, T value, int root, bool entrySync = true) {
  if (coop.withinWarp()) return ncclCoopBcast(ncclCoopLanes(coop.laneMask()), value, root, entrySync);
  if (coop.isSpan()) return ncclCoopBcast(coop.span(), value, root, entrySync);
  return ncclCoopBcast(ncclCoopCta(), value, root, entrySync);
}

namespace nccl_braid_ {
/* Whether v holds on any thread of the group (every thread of the group calls it). */
template <int N>
NCCL_DEVICE_INLINE bool coopAny(ncclCoopTile<N> coop, bool v) {
  return N == 1 ? v : __any_sync(coop.laneMask(), v) != 0;
}
NCCL_DEVICE_INLINE bool coopAny(ncclCoopLanes coop, bool v) {
  return __any_sync(coop.lmask, v) != 0;
}
NCCL_DEVICE_INLINE bool coopAny(ncclCoopCta, bool v) {
  return __syncthreads_or(v) != 0;
}
NCCL_DEVICE_INLINE bool coopAny(ncclCoopWarpSpan coop, bool v) {
#if defined(__CUDACC__)
  int out;
  asm volatile("{ .reg .pred p, q; setp.ne.s32 p, %1, 0; bar.red.or.pred q, %2, %3, p; selp.s32 %0, 1, 0, q; }"
               : "=r"(out)
               : "r"(v ? 1 : 0), "r"(1 + coop.id), "r"(32 * coop.nWarps)
               : "memory");
  return out != 0;
#else
  return braid_emu::namedBarrierOr(static_cast<int>(1 + coop.id), static_cast<int>(32 * coop.nWarps), v);
#endif
}
NCCL_DEVICE_INLINE bool coopAny(ncclCoopAny coop, bool v) {
  if (coop.isThread()) return v;
  if (coop.withinWarp()) return coopAny(ncclCoopLanes(coop.laneMask()), v);
  if (coop.isSpan()) return coopAny(coop.span(), v);
  return coopAny(ncclCoopCta(), v);
}
}  // namespace nccl_braid_
#endif /* NCCL_DEVICE_HALF_ */
#endif /* NCCL_DEVICE_COOP_H_ */
