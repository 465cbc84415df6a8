/* braid's nccl_device/gin.h: GPU-initiated networking (GIN), NCCL's device class ncclGin and its actions.
 *
 * What braid builds: GIN among the ranks of one LSA team, by load/store, and toward ranks of other LSA teams on
 * other hosts by a CPU proxy (NCCL_GIN_TYPE_PROXY, ncclBraidGinNet below). A device communicator gets GIN contexts
 * (ncclDevComm::ginContextCount, up to 4) when its world is one LSA team, or when it asks for GIN, each host's ranks
 * are exactly one LSA team and one-sided messages are on (BRAID_RMA_NET); elsewhere (GPUs of one host without
 * load/store reach, hosts of different sizes) ncclDevCommCreate refuses GIN by name on every rank. Toward another host:
 * put, putValue, signal and get with indexed and VA signals and counters, flush, flushAsync and wait, and the GIN
 * barriers built on signals.
 *
 * How it works, and what that gives the API's guarantees:
 *   - put / putValue / get within the LSA team: the group's threads copy through the peer's LSA pointer of the
 *     window, so the data has landed in the peer's memory when the call returns. Weak and strong signals are therefore
 * the same (every put the group made before the signal is visible to whoever sees the signal); flush, flushAsync and
 * wait only order memory.
 *   - signals: 64-bit words in the device communicator's resource window, one per signal id on every rank. A remote
 *     action adds to the peer's word with a release atomic (system scope) after the group's copy; waits read this
 *     rank's word with acquire. VA signals are 64-bit words of a window (8-byte aligned offsets). Atomics on a peer's
 *     memory need links that carry them (NVLink, NVSwitch): ncclDevCommCreate refuses GIN where the driver says an
 *     LSA member's GPU lacks them.
 *   - counters: 64-bit words of this rank, incremented once the put's source has been read (at once, here).
 *   - signal shadows: one 64-bit word per signal id on this rank, the caller's to use (NCCL's rule).
 *   - Signal and counter ids must be below the counts ncclDevCommCreate gave (reqs->ginSignalCount plus the
 *     resource requirements' and the GIN barriers'); an id out of range, a context index at or above
 *     ginContextCount, or a peer outside the team (or outside this rank's LSA team without network GIN) traps the
 * kernel with a message naming it (on braid's emulator the launch fails with that message).
 *   - Signals and counters are shared by every context of the device communicator. The backend mask, the resource
 *     sharing mode, descriptors, the release scopes and optFlags are accepted and change nothing here.
 *   - Toward a rank of another host (outside the LSA team, by proxy): the group's leader queues a descriptor once the
 *     group's writes are done, and the call returns; the data lands later, before the signal that comes with it
 *     (one queue for every context, one connection per peer: a peer sees this rank's puts before the signals queued
 *     after them). The counter of a put counts once the proxy has read its source; flush (and flushAsync's wait)
 *     waits until the proxy has read the sources of everything queued so far and every get queued so far has landed
 *     (the peer's proxy reads the data and sends it back; a get not answered within BRAID_TIMEOUT, or whose peer
 *     failed, ends with a WARN, its data not landed, and the flush goes on). A signal or counter reads as its word
 *     plus its network word (what the proxy added); resetSignal and resetCounter set the word so that the sum is 0.
 *     A VA signal toward another host is added to the peer's window word itself, by an atomic of the peer's GPU
 *     (a one-thread kernel its messenger launches after the data lands), so it counts with what LSA peers add.
 *     A full queue (256 descriptors) makes the leader wait for the proxy. A GIN barrier's Put fence (its default)
 *     waits until this rank's puts, values and VA signals toward other hosts have landed, at every destination,
 *     barrier member or not: the proxy sends each peer it wrote to since the last fence an empty request on the same
 *     connection, which the peer's messenger answers once everything before it has landed (one round trip per such
 *     peer; a fence with nothing new to cover queues nothing, see braidFence_).
 *
 * Waits (waitSignal, waitCounter, waitSignalMeetShadow, waitSignalFollowShadow, flush) end early when the
 * communicator is aborted; their timeout overloads return ncclTimeout after timeoutCycles (clock64 cycles; nanoseconds
 * on braid's emulator), ncclInProgress after an abort, else ncclSuccess, the same on every thread of the group.
 *
 * Counter and signal waits compare "rolling" (NCCL's rule): the wait ends once `least` is at or before the word's
 * value on a circle of 2^bits; counters use at most 56 bits. */
#ifndef NCCL_DEVICE_GIN_H_
#define NCCL_DEVICE_GIN_H_

#include "../nccl_net.h"
#include "core.h"

/* The backends a kernel's ncclGin may dispatch to (NCCL's mask; braid's implementation is one for all). */
#define NCCL_GIN_BACKEND_MASK_ALL                                                              \
  ((1u << (unsigned)NCCL_NET_DEVICE_GIN_PROXY) | (1u << (unsigned)NCCL_NET_DEVICE_GIN_GDAKI) | \
   (1u << (unsigned)NCCL_NET_DEVICE_GIN_GPI) | (1u << (unsigned)NCCL_NET_DEVICE_GIN_EFA_GDA))

#define NCCL_GIN_MAX_CONTEXTS 4

enum ncclGinOptFlags {
  ncclGinOptFlagsDefault = 0,
  ncclGinOptFlagsMaySkipCreditCheck = (1 << 0),
  ncclGinOptFlagsAggregateRequests = (1 << 1),
};

typedef enum ncclGinSignalOp_t { ncclGinSignalInc = 0, ncclGinSignalAdd } ncclGinSignalOp_t;

/* GIN toward ranks outside the LSA team (other hosts): braid's proxy (NCCL_GIN_TYPE_PROXY). The leader of the calling
 * group writes a descriptor into the device communicator's queue in host-mapped memory; a host thread of the rank
 * (src/api/gin_net.h) reads the source, sends it with its signal as one-sided messages (src/core/rma_net.h), counts
 * the local action and marks the descriptor done. The peer's messenger lands the data in its window, then adds the
 * signal to its network signal word. A signal or counter reads as the sum of its word in the resource window (LSA
 * peers add there by atomics) and its network word (only the proxy writes it). */
#define NCCL_BRAID_GIN_NET_SLOTS 256u
#define NCCL_BRAID_GIN_NONE 0xffffffffu
#define NCCL_BRAID_GIN_VA 0xfffffffeu /* ncclBraidGinDesc::signal: a VA signal (vaWindow, vaOffset) */
/* Fence: done once every put and value queued before it has landed at its destination (the peer answered). */
enum {
  ncclBraidGinNetPut = 1,
  ncclBraidGinNetValue = 2,
  ncclBraidGinNetSignal = 3,
  ncclBraidGinNetGet = 4,
  ncclBraidGinNetFence = 5
};
typedef struct ncclBraidGinDesc {
  uint64_t seq;      /* the descriptor's index + 1, stored last (release): the proxy reads it then */
  uint32_t op;       /* ncclBraidGinNet* */
  int32_t peer;      /* world rank */
  uint32_t window;   /* the destination window's registration number (Get: the peer's window read from) */
  uint32_t signal;   /* the peer's signal id to add to, or NCCL_BRAID_GIN_NONE */
  uint64_t offset;   /* in the destination window (Get: in the peer's window) */
  uint64_t src;      /* Put: the source's address on this rank; Value: the value's bytes; Get: the registration
                        number of this rank's window the data goes to */
  uint64_t bytes;    /* Put, Get: of the data; Value: the value's size (at most 8) */
  uint64_t amount;   /* added to the signal (Get: the offset in this rank's window) */
  uint32_t counter;  /* this rank's counter to count once the source is read, or NCCL_BRAID_GIN_NONE */
  uint32_t vaWindow; /* signal NCCL_BRAID_GIN_VA: the registration number of the peer's window holding the VA
                        signal, `amount` added to its word at vaOffset after the data lands */
  uint64_t vaOffset;
} ncclBraidGinDesc;
typedef struct ncclBraidGinNet { /* in device memory; the arrays in host-mapped memory */
  uint64_t claimed;              /* descriptors claimed so far (device atomics) */
  ncclBraidGinDesc* descs;       /* [NCCL_BRAID_GIN_NET_SLOTS], descriptor i at i % slots */
  const uint64_t* done;          /* descriptors the proxy has finished (sources read), in order */
  const uint64_t* signals;       /* [ginSignalCount] what peers of other LSA teams added */
  const uint64_t* counters;      /* [ginCounterCount] what the proxy counted */
  uint64_t writes;               /* puts, values and VA signals queued so far (device atomics), counted once queued */
  uint64_t reads;                /* gets queued so far, likewise */
  uint64_t fencedWrites;         /* how many of those writes a finished Put fence covers (a barrier's) */
  uint64_t fencedReads;          /* how many of those gets a finished Get fence covers */
  uint32_t descBytes;            /* the library's sizeof(ncclBraidGinDesc): a kernel built against another braid's
                                    header traps rather than queue descriptors its proxy cannot read */
  uint32_t pad_;
} ncclBraidGinNet;

/* An outstanding flushAsync, for wait(). */
typedef union {
  uint64_t braidAlign_[2];
  char opaque[16];
} ncclGinRequest_t;

#ifdef __cplusplus
enum ncclGinResourceSharingMode : uint8_t {
  NCCL_GIN_RESOURCE_SHARING_GPU = 0,
  NCCL_GIN_RESOURCE_SHARING_CTA = 1,
  NCCL_GIN_RESOURCE_SHARING_THREAD = 2,
};

/* Descriptor space a caller may give in __shared__ memory (unused by braid). */
struct ncclGinDescriptorSmem {
  alignas(64) char space[128];
};

/* Remote actions of put/signal (applied on the peer after the data), local actions, and tags: NCCL's names. */
struct ncclGin_None {};
struct ncclGin_StrongVASignalInc {
  ncclWindow_t signalWindow;
  size_t signalOffset;
};
struct ncclGin_WeakVASignalInc {
  ncclWindow_t signalWindow;
  size_t signalOffset;
};
struct ncclGin_VASignalInc { /* NCCL deprecates it for the Strong/Weak forms */
  ncclWindow_t signalWindow;
  size_t signalOffset;
};
struct ncclGin_StrongVASignalAdd {
  ncclWindow_t signalWindow;
  size_t signalOffset;
  uint64_t value;
};
struct ncclGin_WeakVASignalAdd {
  ncclWindow_t signalWindow;
  size_t signalOffset;
  uint64_t value;
};
struct ncclGin_VASignalAdd {
  ncclWindow_t signalWindow;
  size_t signalOffset;
  uint64_t value;
};
struct ncclGin_StrongSignalAdd {
  ncclGinSignal_t signal;
  uint64_t value;
};
struct ncclGin_WeakSignalAdd {
  ncclGinSignal_t signal;
  uint64_t value;
};
struct ncclGin_SignalAdd {
  ncclGinSignal_t signal;
  uint64_t value;
};
struct ncclGin_StrongSignalInc {
  ncclGinSignal_t signal;
};
struct ncclGin_WeakSignalInc {
  ncclGinSignal_t signal;
};
struct ncclGin_SignalInc {
  ncclGinSignal_t signal;
};
struct ncclGin_CounterInc {
  ncclGinCounter_t counter;
};
struct ncclGin_WeakCounterInc {
  ncclGinCounter_t counter;
};
struct ncclGin_DescriptorSmem {
  ncclGinDescriptorSmem* descriptor;
};
struct ncclGin_SegmentDevice {};
struct ncclGin_SegmentMixed {};
struct ncclGin_SegmentHostNuma {};
#endif /* __cplusplus */

#if NCCL_DEVICE_HALF_
namespace nccl_braid_ {
/* a is at or before b on a circle of 2^bits (NCCL's rolling_less_equal). */
NCCL_HOST_DEVICE_INLINE bool rollingLe(uint64_t a, uint64_t b, int bits) {
  const uint64_t m = bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
  return ((b - a) & m) <= (m >> 1);
}
NCCL_HOST_DEVICE_INLINE uint64_t lowBits(uint64_t v, int bits) {
  return bits >= 64 ? v : v & ((uint64_t(1) << bits) - 1);
}

/* The group copies `bytes` from src to dst, in the widest words both addresses allow. */
struct alignas(16) Words16 {
  uint64_t lo, hi;
};
template <typename Word, typename Coop>
NCCL_DEVICE_INLINE size_t copyWords(Coop coop, char* dst, const char* src, size_t bytes) {
  const size_t n = bytes / sizeof(Word);
  for (size_t i = static_cast<size_t>(coop.thread_rank()); i < n; i += static_cast<size_t>(coop.size())) {
    reinterpret_cast<Word*>(dst)[i] = reinterpret_cast<const Word*>(src)[i];
  }
  return n * sizeof(Word);
}
template <typename Coop>
NCCL_DEVICE_INLINE void coopCopy(Coop coop, char* dst, const char* src, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src);
  size_t done = 0;
  if ((a & 15u) == 0) {
    done = copyWords<Words16>(coop, dst, src, bytes);
  } else if ((a & 7u) == 0) {
    done = copyWords<uint64_t>(coop, dst, src, bytes);
  } else if ((a & 3u) == 0) {
    done = copyWords<uint32_t>(coop, dst, src, bytes);
  }
  (void)copyWords<char>(coop, dst + done, src + done, bytes - done);
}

/* A signal's or counter's network word (what the proxy added; 0 where GIN does not reach other LSA teams), and its
 * value: its word plus its network word. */
NCCL_DEVICE_INLINE uint64_t ginNetValue(const uint64_t* net, cuda::memory_order order) {
  return net == nullptr ? 0 : atomicLoad64(net, order);
}
NCCL_DEVICE_INLINE uint64_t ginValue(const uint64_t* word, const uint64_t* net, cuda::memory_order order) {
  return atomicLoad64(word, order) + ginNetValue(net, order);
}

/* Polls the value until `least` is rolling-at-or-before it (see the header comment for the results). */
template <typename Coop>
NCCL_DEVICE_INLINE ncclResult_t ginWait(Coop coop, ncclDevComm const& comm, const uint64_t* word, const uint64_t* net,
                                        uint64_t least, int bits, cuda::memory_order order, bool timed,
                                        uint64_t timeoutCycles) {
  const uint64_t start = timed ? cycles() : 0;
  bool timedOut = false, gone = false;
  for (uint32_t polls = 1; !rollingLe(least, ginValue(word, net, order), bits); ++polls) {
    if ((polls & 63u) != 0) continue;
    if (aborted(comm)) {
      gone = true;
      break;
    }
    if (timed && cycles() - start >= timeoutCycles) {
      timedOut = true;
      break;
    }
    backOff();
  }
  if (!coopAny(coop, gone || timedOut)) return ncclSuccess;
  return coopAny(coop, gone) ? ncclInProgress : ncclTimeout;
}
}  // namespace nccl_braid_

template <unsigned backendMask>
struct ncclGin_BackendMask {
  ncclDevComm const& comm;
  uint32_t nConnections : 8, connectionId : 8, _ginBackend : 8;
  uint32_t contextId;
  ncclGinResourceSharingMode resourceSharingMode;

  /* Context `contextIndex` of the device communicator (below comm.ginContextCount, else the kernel traps). */
  NCCL_DEVICE_INLINE ncclGin_BackendMask(ncclDevComm const& c, int contextIndex,
                                         ncclGinResourceSharingMode mode = NCCL_GIN_RESOURCE_SHARING_GPU)
      : comm(c),
        nConnections(1),
        connectionId(0),
        _ginBackend(0),
        contextId(static_cast<uint32_t>(contextIndex)),
        resourceSharingMode(mode),
        _ginHandle(nullptr),
        _signalShadows(nullptr) {
    if (contextIndex < 0 || contextIndex >= static_cast<int>(c.ginContextCount)) {
      nccl_braid_::trap(
          "ncclGin: the context index is not below ncclDevComm::ginContextCount (braid gives GIN contexts only when "
          "ncclDevCommCreate was asked for GIN)");
    }
  }

  NCCL_DEVICE_INLINE bool _supportsStrongSignal() const { return true; }
  NCCL_DEVICE_INLINE bool _flushesAllPutsOnAnySignal() const { return true; }

  /* ---- one-sided data movement ---- */
  template <typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None, typename Coop = ncclCoopThread,
            typename DescriptorSmem = ncclGin_None, typename SegmentType = ncclGin_SegmentDevice>
  NCCL_DEVICE_INLINE void put(ncclTeam team, int peer, ncclWindow_t dstWnd, size_t dstOffset, ncclWindow_t srcWnd,
                              size_t srcOffset, size_t bytes, RemoteAction remoteAction = ncclGin_None{},
                              LocalAction localAction = ncclGin_None{}, Coop coop = ncclCoopThread{},
                              DescriptorSmem = ncclGin_None{}, cuda::thread_scope = cuda::thread_scope_thread,
                              cuda::thread_scope = cuda::thread_scope_device, uint32_t = ncclGinOptFlagsDefault,
                              SegmentType = ncclGin_SegmentDevice{}) const {
    if (dstWnd == nullptr || srcWnd == nullptr) nccl_braid_::trap("ncclGin::put: a null window");
    const int world = worldPeer(team, peer, "ncclGin::put: the peer is not a member of the team");
    const int lsa = lsaOf(world);
    if (lsa < 0) {
      const char* from = static_cast<const char*>(ncclGetLocalPointer(srcWnd, srcOffset));
      netPost(coop, world, ncclBraidGinNetPut, dstWnd, dstOffset, reinterpret_cast<uintptr_t>(from), bytes,
              remoteAction, localAction, "ncclGin::put: the peer is outside this rank's LSA team");
      return;
    }
    char* dst = static_cast<char*>(ncclGetLsaPointer(dstWnd, dstOffset, lsa));
    const char* src = static_cast<const char*>(ncclGetLocalPointer(srcWnd, srcOffset));
    if (dst == nullptr) nccl_braid_::trap("ncclGin::put: the peer's window is out of load/store reach");
    coop.sync(); /* the group's writes to the source are complete */
    nccl_braid_::coopCopy(coop, dst, src, bytes);
    coop.sync();
    if (coop.thread_rank() == 0) {
      localDone(localAction);
      remote(lsa, remoteAction);
    }
    coop.sync();
  }
  template <typename T, typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None,
            typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None,
            typename SegmentType = ncclGin_SegmentDevice>
  NCCL_DEVICE_INLINE void put(ncclTeam team, int peer, ncclSymPtr<T> dstElts, ncclSymPtr<T> srcElts, size_t nElts,
                              RemoteAction remoteAction = ncclGin_None{}, LocalAction localAction = ncclGin_None{},
                              Coop coop = ncclCoopThread{}, DescriptorSmem d = ncclGin_None{},
                              cuda::thread_scope given = cuda::thread_scope_thread,
                              cuda::thread_scope required = cuda::thread_scope_device,
                              uint32_t optFlags = ncclGinOptFlagsDefault,
                              SegmentType seg = ncclGin_SegmentDevice{}) const {
    put(team, peer, dstElts.window, dstElts.offset, srcElts.window, srcElts.offset, nElts * sizeof(T), remoteAction,
        localAction, coop, d, given, required, optFlags, seg);
  }
  /* Stores `value` (at most 8 bytes) at the peer's window offset, then the remote action. */
  template <typename T, typename RemoteAction = ncclGin_None, typename Coop = ncclCoopThread,
            typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void putValue(ncclTeam team, int peer, ncclWindow_t dstWnd, size_t dstOffset, T value,
                                   RemoteAction remoteAction = ncclGin_None{}, Coop coop = ncclCoopThread{},
                                   DescriptorSmem = ncclGin_None{}, cuda::thread_scope = cuda::thread_scope_thread,
                                   cuda::thread_scope = cuda::thread_scope_device,
                                   uint32_t = ncclGinOptFlagsDefault) const {
    static_assert(sizeof(T) <= 8, "ncclGin::putValue takes values of at most 8 bytes");
    if (dstWnd == nullptr) nccl_braid_::trap("ncclGin::putValue: a null window");
    const int world = worldPeer(team, peer, "ncclGin::putValue: the peer is not a member of the team");
    const int lsa = lsaOf(world);
    if (lsa < 0) {
      uint64_t bits = 0;
      memcpy(&bits, &value, sizeof(T));
      netPost(coop, world, ncclBraidGinNetValue, dstWnd, dstOffset, bits, sizeof(T), remoteAction, ncclGin_None{},
              "ncclGin::putValue: the peer is outside this rank's LSA team");
      return;
    }
    T* dst = static_cast<T*>(ncclGetLsaPointer(dstWnd, dstOffset, lsa));
    if (dst == nullptr) nccl_braid_::trap("ncclGin::putValue: the peer's window is out of load/store reach");
    coop.sync();
    if (coop.thread_rank() == 0) {
      *dst = value;
      remote(lsa, remoteAction);
    }
    coop.sync();
  }
  template <typename T, typename RemoteAction = ncclGin_None, typename Coop = ncclCoopThread,
            typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void putValue(ncclTeam team, int peer, ncclSymPtr<T> dst, T value,
                                   RemoteAction remoteAction = ncclGin_None{}, Coop coop = ncclCoopThread{},
                                   DescriptorSmem d = ncclGin_None{},
                                   cuda::thread_scope given = cuda::thread_scope_thread,
                                   cuda::thread_scope required = cuda::thread_scope_device,
                                   uint32_t optFlags = ncclGinOptFlagsDefault) const {
    putValue(team, peer, dst.window, dst.offset, value, remoteAction, coop, d, given, required, optFlags);
  }
  /* The remote action alone (a signal), after everything the group wrote before. */
  template <typename RemoteAction, typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void signal(ncclTeam team, int peer, RemoteAction remoteAction, Coop coop = ncclCoopThread(),
                                 DescriptorSmem = ncclGin_None{}, cuda::thread_scope = cuda::thread_scope_thread,
                                 cuda::thread_scope = cuda::thread_scope_device,
                                 uint32_t = ncclGinOptFlagsDefault) const {
    const int world = worldPeer(team, peer, "ncclGin::signal: the peer is not a member of the team");
    const int lsa = lsaOf(world);
    if (lsa < 0) {
      netPost(coop, world, ncclBraidGinNetSignal, nullptr, 0, 0, 0, remoteAction, ncclGin_None{},
              "ncclGin::signal: the peer is outside this rank's LSA team");
      return;
    }
    coop.sync();
    if (coop.thread_rank() == 0) remote(lsa, remoteAction);
    coop.sync();
  }
  /* Reads `bytes` of the peer's window into this rank's. Within the LSA team: landed when the call returns. From a
   * rank of another host: queued for the proxy, landed once a later flush (or wait after flushAsync) returns; gets
   * may land in any order. */
  template <typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None,
            typename SegmentType = ncclGin_SegmentDevice>
  NCCL_DEVICE_INLINE void get(ncclTeam team, int peer, ncclWindow_t remoteWnd, size_t remoteOffset,
                              ncclWindow_t localWnd, size_t localOffset, size_t bytes, Coop coop = ncclCoopThread{},
                              DescriptorSmem = ncclGin_None{}, uint32_t = ncclGinOptFlagsDefault,
                              SegmentType = ncclGin_SegmentDevice{}) const {
    if (remoteWnd == nullptr || localWnd == nullptr) nccl_braid_::trap("ncclGin::get: a null window");
    const int world = worldPeer(team, peer, "ncclGin::get: the peer is not a member of the team");
    const int lsa = lsaOf(world);
    if (lsa < 0) {
      netPost(coop, world, ncclBraidGinNetGet, remoteWnd, remoteOffset, localWnd->registration, bytes, ncclGin_None{},
              ncclGin_None{}, "ncclGin::get: the peer is outside this rank's LSA team", localOffset);
      return;
    }
    const char* src = static_cast<const char*>(ncclGetLsaPointer(remoteWnd, remoteOffset, lsa));
    char* dst = static_cast<char*>(ncclGetLocalPointer(localWnd, localOffset));
    if (src == nullptr) nccl_braid_::trap("ncclGin::get: the peer's window is out of load/store reach");
    coop.sync();
    nccl_braid_::coopCopy(coop, dst, src, bytes);
    coop.sync();
  }

  /* ---- completion: within the LSA team puts and gets are complete on return; toward other hosts, see flush ---- */
  /* Toward other LSA teams: until the proxy has read the sources of every descriptor queued so far (of any context)
   * and handed them to the network, and every get queued so far has landed here. Within the LSA team puts and gets
   * are complete on return: memory order only. */
  template <typename Coop, typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void flush(Coop coop, cuda::memory_order = cuda::memory_order_acquire,
                                DescriptorSmem = ncclGin_None{}) const {
    coop.sync();
    (void)netDrained(coop, netClaimed(), false, 0);
  }
  template <typename Coop, typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE ncclResult_t flush(Coop coop, cuda::memory_order, DescriptorSmem, uint64_t timeoutCycles) const {
    coop.sync();
    return netDrained(coop, netClaimed(), true, timeoutCycles);
  }
  template <typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void flushAsync(ncclTeam team, uint32_t peer, ncclGinRequest_t* outRequest,
                                     Coop coop = ncclCoopThread{}, uint32_t = ncclGinOptFlagsDefault,
                                     DescriptorSmem = ncclGin_None{}) const {
    (void)worldPeer(team, static_cast<int>(peer), "ncclGin::flushAsync: the peer is not a member of the team");
    coop.sync();
    const uint64_t upTo = netClaimed();
    /* Every thread's request (each may hold its own): what the group queued before it, for wait(). */
    if (outRequest != nullptr) memcpy(outRequest->opaque, &upTo, sizeof(upTo));
    coop.sync();
  }
  template <typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void wait(ncclGinRequest_t& request, Coop coop = ncclCoopThread{}, DescriptorSmem = ncclGin_None{},
                               cuda::memory_order = cuda::memory_order_acquire) const {
    (void)netDrained(coop, requestMark(request), false, 0);
  }
  template <typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE ncclResult_t wait(ncclGinRequest_t& request, Coop coop, DescriptorSmem, cuda::memory_order,
                                       uint64_t timeoutCycles) const {
    return netDrained(coop, requestMark(request), true, timeoutCycles);
  }

  /* ---- counters (this rank's) ---- */
  NCCL_DEVICE_INLINE uint64_t readCounter(ncclGinCounter_t counter, int bits = 56,
                                          cuda::memory_order order = cuda::memory_order_acquire) const {
    return nccl_braid_::lowBits(nccl_braid_::ginValue(counterWord(counter), netCounter(counter), order), bits);
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitCounter(Coop coop, ncclGinCounter_t counter, uint64_t least, int bits = 56,
                                      cuda::memory_order order = cuda::memory_order_acquire) const {
    (void)nccl_braid_::ginWait(coop, comm, counterWord(counter), netCounter(counter), least, bits, order, false, 0);
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE ncclResult_t waitCounter(Coop coop, ncclGinCounter_t counter, uint64_t least, int bits,
                                              cuda::memory_order order, uint64_t timeoutCycles) const {
    return nccl_braid_::ginWait(coop, comm, counterWord(counter), netCounter(counter), least, bits, order, true,
                                timeoutCycles);
  }
  /* The value reads 0 after (no put counting it may be outstanding, as in NCCL). */
  NCCL_DEVICE_INLINE void resetCounter(ncclGinCounter_t counter) const {
    nccl_braid_::atomicStore64(counterWord(counter),
                               0 - nccl_braid_::ginNetValue(netCounter(counter), cuda::memory_order_relaxed),
                               cuda::memory_order_relaxed);
  }

  /* ---- signals (this rank's words; peers add to them) ---- */
  NCCL_DEVICE_INLINE uint64_t* getSignalShadowPtr(ncclGinSignal_t signal) const {
    return ginWord(comm.ginShadows, signal, comm.ginSignalCount, "ncclGin: the signal id is out of range");
  }
  NCCL_DEVICE_INLINE void increaseSignalShadow(ncclGinSignal_t signal, uint64_t delta) const {
    *getSignalShadowPtr(signal) += delta;
  }
  NCCL_DEVICE_INLINE uint64_t readSignal(ncclGinSignal_t signal, int bits = 64,
                                         cuda::memory_order order = cuda::memory_order_acquire) const {
    return nccl_braid_::lowBits(nccl_braid_::ginValue(signalWord(signal), netSignal(signal), order), bits);
  }
  NCCL_DEVICE_INLINE uint64_t readSignal(ncclWindow_t signalWindow, size_t signalOffset, int bits = 64,
                                         cuda::memory_order order = cuda::memory_order_acquire) const {
    return nccl_braid_::lowBits(nccl_braid_::atomicLoad64(vaWord(signalWindow, signalOffset), order), bits);
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitSignal(Coop coop, ncclGinSignal_t signal, uint64_t least, int bits = 64,
                                     cuda::memory_order order = cuda::memory_order_acquire) const {
    (void)nccl_braid_::ginWait(coop, comm, signalWord(signal), netSignal(signal), least, bits, order, false, 0);
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE ncclResult_t waitSignal(Coop coop, ncclGinSignal_t signal, uint64_t least, int bits,
                                             cuda::memory_order order, uint64_t timeoutCycles) const {
    return nccl_braid_::ginWait(coop, comm, signalWord(signal), netSignal(signal), least, bits, order, true,
                                timeoutCycles);
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitSignal(Coop coop, ncclWindow_t signalWindow, size_t signalOffset, uint64_t least,
                                     int bits = 64, cuda::memory_order order = cuda::memory_order_acquire) const {
    (void)nccl_braid_::ginWait(coop, comm, vaWord(signalWindow, signalOffset), nullptr, least, bits, order, false, 0);
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE ncclResult_t waitSignal(Coop coop, ncclWindow_t signalWindow, size_t signalOffset, uint64_t least,
                                             int bits, cuda::memory_order order, uint64_t timeoutCycles) const {
    return nccl_braid_::ginWait(coop, comm, vaWord(signalWindow, signalOffset), nullptr, least, bits, order, true,
                                timeoutCycles);
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitSignalMeetShadow(Coop coop, ncclGinSignal_t signal, int bits = 64,
                                               cuda::memory_order order = cuda::memory_order_acquire) const {
    waitSignal(coop, signal, *getSignalShadowPtr(signal), bits, order);
  }
  /* Waits until the signal is at least leastDelta past its shadow; then *before is the old shadow, *delta how far
   * the signal had gone past it, and the shadow is the signal's value. */
  template <typename Coop, typename Uint>
  NCCL_DEVICE_INLINE void waitSignalFollowShadow(Coop coop, ncclGinSignal_t signal, Uint leastDelta, Uint* before,
                                                 Uint* delta, int bits = 64,
                                                 cuda::memory_order order = cuda::memory_order_acquire) const {
    uint64_t* shadow = getSignalShadowPtr(signal);
    const uint64_t old = *shadow;
    waitSignal(coop, signal, old + static_cast<uint64_t>(leastDelta), bits, order); /* ends with the group together */
    if (coop.thread_rank() == 0) *shadow = readSignal(signal, bits, order); /* one reading for the whole group */
    coop.sync();
    const uint64_t now = *shadow;
    *before = static_cast<Uint>(old);
    *delta = static_cast<Uint>(nccl_braid_::lowBits(now - old, bits));
    coop.sync(); /* every thread has read the shadow before a later call moves it */
  }
  NCCL_DEVICE_INLINE void resetSignal(ncclGinSignal_t signal) const {
    nccl_braid_::atomicStore64(signalWord(signal),
                               0 - nccl_braid_::ginNetValue(netSignal(signal), cuda::memory_order_relaxed),
                               cuda::memory_order_relaxed);
    *getSignalShadowPtr(signal) = 0;
  }
  NCCL_DEVICE_INLINE void resetSignal(ncclWindow_t signalWindow, size_t signalOffset) const {
    nccl_braid_::atomicStore64(vaWord(signalWindow, signalOffset), 0, cuda::memory_order_relaxed);
  }

  /* braid's, for the barriers' fences (nccl_device/gin_barrier.h): every thread of the group waits until, with
   * `puts`, this rank's puts, values and VA signals toward other hosts have landed at their destinations, and with
   * `gets`, its gets have landed here (results as flush's timed overload). A fence that a finished one already
   * covers (no such operation queued since) costs nothing but the group's sync. */
  template <typename Coop>
  NCCL_DEVICE_INLINE ncclResult_t braidFence_(Coop coop, bool puts, bool gets, bool timed,
                                              uint64_t timeoutCycles) const {
    ncclBraidGinNet* net = comm.ginNet;
    if (net == nullptr) return netDrained(coop, 0, timed, timeoutCycles);
    const uint64_t writes = nccl_braid_::atomicLoad64(&net->writes, cuda::memory_order_acquire);
    const uint64_t reads = nccl_braid_::atomicLoad64(&net->reads, cuda::memory_order_acquire);
    /* One decision for the group (the post below syncs it). */
    const bool fenceWrites = nccl_braid_::coopAny(
        coop, puts && writes != nccl_braid_::atomicLoad64(&net->fencedWrites, cuda::memory_order_acquire));
    const bool drainReads = nccl_braid_::coopAny(
        coop, gets && reads != nccl_braid_::atomicLoad64(&net->fencedReads, cuda::memory_order_acquire));
    if (!fenceWrites && !drainReads) {
      coop.sync();
      return timed && nccl_braid_::coopAny(coop, nccl_braid_::aborted(comm)) ? ncclInProgress : ncclSuccess;
    }
    if (fenceWrites) {
      netPost(coop, comm.rank, ncclBraidGinNetFence, nullptr, 0, 0, 0, ncclGin_None{}, ncclGin_None{}, "");
    } else {
      coop.sync();
    }
    const ncclResult_t r = netDrained(coop, netClaimed(), timed, timeoutCycles);
    /* What the leader read before the fence was queued is covered now (a race with another group's record can only
     * lower it, which costs a later fence, never skips one). */
    if (r == ncclSuccess && coop.thread_rank() == 0) {
      if (fenceWrites && writes > nccl_braid_::atomicLoad64(&net->fencedWrites, cuda::memory_order_relaxed)) {
        nccl_braid_::atomicStore64(&net->fencedWrites, writes, cuda::memory_order_release);
      }
      if (drainReads && reads > nccl_braid_::atomicLoad64(&net->fencedReads, cuda::memory_order_relaxed)) {
        nccl_braid_::atomicStore64(&net->fencedReads, reads, cuda::memory_order_release);
      }
    }
    return r;
  }

  /* braid's: unused, kept for NCCL's member names. */
  void* _ginHandle;
  uint64_t* _signalShadows;

 private:
  /* `peer` of `team` as a world rank; traps (with `what`) for one outside the team. */
  NCCL_DEVICE_INLINE int worldPeer(ncclTeam team, int peer, const char* what) const {
    if (peer < 0 || peer >= team.nRanks) nccl_braid_::trap(what);
    return comm.rank + (peer - team.rank) * team.stride;
  }
  /* A world rank as an LSA member index, or -1 outside this rank's LSA team. */
  NCCL_DEVICE_INLINE int lsaOf(int world) const {
    const int lsa = world - (comm.rank - comm.lsaRank);
    return lsa < 0 || lsa >= comm.lsaSize ? -1 : lsa;
  }

  /* ---- toward other LSA teams: descriptors for the proxy (see ncclBraidGinNet) ---- */
  NCCL_DEVICE_INLINE const uint64_t* netSignal(ncclGinSignal_t s) const {
    return comm.ginNet == nullptr || s >= comm.ginSignalCount ? nullptr : comm.ginNet->signals + s;
  }
  NCCL_DEVICE_INLINE const uint64_t* netCounter(ncclGinCounter_t c) const {
    return comm.ginNet == nullptr || c >= comm.ginCounterCount ? nullptr : comm.ginNet->counters + c;
  }
  NCCL_DEVICE_INLINE uint64_t netClaimed() const {
    if (comm.ginNet == nullptr) return 0;
    return nccl_braid_::atomicLoad64(&comm.ginNet->claimed, cuda::memory_order_acquire);
  }
  NCCL_DEVICE_INLINE static uint64_t requestMark(const ncclGinRequest_t& r) {
    uint64_t upTo;
    memcpy(&upTo, r.opaque, sizeof(upTo));
    return upTo;
  }
  /* Every thread of the group waits until the proxy finished descriptors [0, upTo); the results as ginWait's. */
  template <typename Coop>
  NCCL_DEVICE_INLINE ncclResult_t netDrained(Coop coop, uint64_t upTo, bool timed, uint64_t timeoutCycles) const {
    if (comm.ginNet == nullptr) {
      coop.sync();
      return timed && nccl_braid_::coopAny(coop, nccl_braid_::aborted(comm)) ? ncclInProgress : ncclSuccess;
    }
    return nccl_braid_::ginWait(coop, comm, comm.ginNet->done, nullptr, upTo, 64, cuda::memory_order_acquire, timed,
                                timeoutCycles);
  }
  NCCL_DEVICE_INLINE void netRemote(ncclBraidGinDesc&, ncclGin_None) const {}
  template <typename A>
  NCCL_DEVICE_INLINE auto netRemote(ncclBraidGinDesc& d, A a) const -> decltype(void(a.signal)) {
    if (a.signal >= comm.ginSignalCount) nccl_braid_::trap("ncclGin: the signal id is out of range");
    d.signal = a.signal;
    d.amount = amountOf(a, 0);
  }
  template <typename A>
  NCCL_DEVICE_INLINE auto netRemote(ncclBraidGinDesc& d, A a) const -> decltype(void(a.signalWindow)) {
    if (a.signalWindow == nullptr || (a.signalOffset & 7u) != 0) {
      nccl_braid_::trap("ncclGin: a VA signal's window is null, or its offset is not 8-byte aligned");
    }
    d.signal = NCCL_BRAID_GIN_VA;
    d.vaWindow = a.signalWindow->registration;
    d.vaOffset = a.signalOffset;
    d.amount = amountOf(a, 0);
  }
  NCCL_DEVICE_INLINE void netLocal(ncclBraidGinDesc&, ncclGin_None) const {}
  template <typename A>
  NCCL_DEVICE_INLINE auto netLocal(ncclBraidGinDesc& d, A a) const -> decltype(void(a.counter)) {
    if (a.counter >= comm.ginCounterCount) nccl_braid_::trap("ncclGin: the counter id is out of range");
    d.counter = a.counter;
  }
  /* The group's leader queues one descriptor once the group's writes (the source) are done; the others wait. */
  template <typename Coop, typename RemoteAction, typename LocalAction>
  NCCL_DEVICE_INLINE void netPost(Coop coop, int world, uint32_t op, ncclWindow_t dst, size_t offset, uint64_t src,
                                  size_t bytes, RemoteAction remoteAction, LocalAction localAction, const char* outside,
                                  uint64_t amount = 0) const {
    ncclBraidGinNet* net = comm.ginNet;
    if (net == nullptr) nccl_braid_::trap(outside); /* no network GIN on this device communicator */
    if (net->descBytes != sizeof(ncclBraidGinDesc)) {
      nccl_braid_::trap(
          "ncclGin: this kernel was compiled against another braid's nccl_device.h (its GIN descriptors differ): "
          "rebuild it against the headers of the braid it runs with");
    }
    coop.sync();
    if (coop.thread_rank() == 0) {
      ncclBraidGinDesc d;
      d.op = op;
      d.peer = world;
      d.window = dst == nullptr ? NCCL_BRAID_GIN_NONE : dst->registration;
      d.signal = NCCL_BRAID_GIN_NONE;
      d.offset = offset;
      d.src = src;
      d.bytes = bytes;
      d.amount = amount;
      d.counter = NCCL_BRAID_GIN_NONE;
      d.vaWindow = NCCL_BRAID_GIN_NONE;
      d.vaOffset = 0;
      netRemote(d, remoteAction);
      netLocal(d, localAction);
      const uint64_t i = nccl_braid_::atomicAdd64(&net->claimed, 1, cuda::memory_order_relaxed);
      /* Room: the proxy has finished the descriptor that used this slot before. */
      for (uint32_t polls = 1;
           i >= nccl_braid_::atomicLoad64(net->done, cuda::memory_order_acquire) + NCCL_BRAID_GIN_NET_SLOTS; ++polls) {
        if ((polls & 63u) == 0) {
          if (nccl_braid_::aborted(comm)) break;
          nccl_braid_::backOff();
        }
      }
      ncclBraidGinDesc* slot = net->descs + (i % NCCL_BRAID_GIN_NET_SLOTS);
      d.seq = 0;
      memcpy(reinterpret_cast<char*>(slot) + sizeof(uint64_t), reinterpret_cast<const char*>(&d) + sizeof(uint64_t),
             sizeof(d) - sizeof(uint64_t));
      /* Release at system scope: the descriptor, and the group's source writes the barrier ordered before it. */
      nccl_braid_::atomicStore64(&slot->seq, i + 1, cuda::memory_order_release);
      /* Counted once queued, for the fences (braidFence_): a fence queued after this count covers it. */
      if (op == ncclBraidGinNetPut || op == ncclBraidGinNetValue || d.signal == NCCL_BRAID_GIN_VA) {
        nccl_braid_::atomicAdd64(&net->writes, 1, cuda::memory_order_release);
      } else if (op == ncclBraidGinNetGet) {
        nccl_braid_::atomicAdd64(&net->reads, 1, cuda::memory_order_release);
      }
    }
    coop.sync();
  }
  NCCL_DEVICE_INLINE uint64_t* ginWord(ncclDevResourceHandle h, uint32_t id, uint32_t count, const char* what) const {
    if (id >= count) nccl_braid_::trap(what);
    return static_cast<uint64_t*>(ncclGetResourceBufferLocalPointer(comm, h)) + id;
  }
  NCCL_DEVICE_INLINE uint64_t* signalWord(ncclGinSignal_t s) const {
    return ginWord(comm.ginSignals, s, comm.ginSignalCount, "ncclGin: the signal id is out of range");
  }
  NCCL_DEVICE_INLINE uint64_t* counterWord(ncclGinCounter_t c) const {
    return ginWord(comm.ginCounters, c, comm.ginCounterCount, "ncclGin: the counter id is out of range");
  }
  NCCL_DEVICE_INLINE uint64_t* vaWord(ncclWindow_t w, size_t offset, int lsa = -1) const {
    void* p = w == nullptr ? nullptr : lsa < 0 ? ncclGetLocalPointer(w, offset) : ncclGetLsaPointer(w, offset, lsa);
    if (p == nullptr || (reinterpret_cast<uintptr_t>(p) & 7u) != 0) {
      nccl_braid_::trap("ncclGin: a VA signal's window is null or out of reach, or its offset is not 8-byte aligned");
    }
    return static_cast<uint64_t*>(p);
  }
  /* The peer's signal word `s` (its resource window, through this rank's LSA view). */
  NCCL_DEVICE_INLINE uint64_t* peerSignal(int lsa, ncclGinSignal_t s) const {
    if (s >= comm.ginSignalCount) nccl_braid_::trap("ncclGin: the signal id is out of range");
    void* base = ncclGetResourceBufferLsaPointer(comm, comm.ginSignals, lsa);
    if (base == nullptr) nccl_braid_::trap("ncclGin: the peer's signals are out of load/store reach");
    return static_cast<uint64_t*>(base) + s;
  }
  NCCL_DEVICE_INLINE void add(uint64_t* w, uint64_t v) const {
    nccl_braid_::atomicAdd64(w, v, cuda::memory_order_release);
  }
  /* The remote actions: an indexed signal (.signal) or a VA signal (.signalWindow/.signalOffset) of the peer, by
   * .value for the Add forms and by 1 for the Inc forms. */
  template <typename A>
  NCCL_DEVICE_INLINE static auto amountOf(A a, int) -> decltype(uint64_t(a.value)) {
    return a.value;
  }
  template <typename A>
  NCCL_DEVICE_INLINE static uint64_t amountOf(A, long) {
    return 1;
  }
  NCCL_DEVICE_INLINE void remote(int, ncclGin_None) const {}
  template <typename A>
  NCCL_DEVICE_INLINE auto remote(int l, A a) const -> decltype(void(a.signal)) {
    add(peerSignal(l, a.signal), amountOf(a, 0));
  }
  template <typename A>
  NCCL_DEVICE_INLINE auto remote(int l, A a) const -> decltype(void(a.signalWindow)) {
    add(vaWord(a.signalWindow, a.signalOffset, l), amountOf(a, 0));
  }
  NCCL_DEVICE_INLINE void localDone(ncclGin_None) const {}
  NCCL_DEVICE_INLINE void localDone(ncclGin_WeakCounterInc a) const { add(counterWord(a.counter), 1); }
  NCCL_DEVICE_INLINE void localDone(ncclGin_CounterInc a) const { add(counterWord(a.counter), 1); }
};

template <ncclNetDeviceType backend>
using ncclGin_BackendOne = ncclGin_BackendMask<(1u << (int)backend)>;
using ncclGin = ncclGin_BackendMask<NCCL_GIN_BACKEND_MASK_ALL>;
#endif /* NCCL_DEVICE_HALF_ */

#endif /* NCCL_DEVICE_GIN_H_ */
