/*
 * nccl.h -- braid's implementation of the NCCL C API, version 2.32.3.
 *
 * braid is a collective-communication library that is source- and binary-compatible with NVIDIA NCCL: a program
 * written against NCCL's nccl.h compiles against this header unchanged and runs against libnccl.so.2 built from
 * braid. Names, signatures, enum values, macro values and struct layouts here are those of NCCL 2.32 (the test
 * tests/compat/ compares them with NVIDIA's 2.28.9 header, the CUDA toolkit's, plus a checked list of what 2.29-2.32
 * changed). The comments are braid's own and describe braid's behaviour, which is the contract for this library.
 *
 * ----------------------------------------------------------------------------------------------------------------
 * Language and CUDA headers
 * ----------------------------------------------------------------------------------------------------------------
 * This header is valid C99 (also under -pedantic) and valid C++. It needs no CUDA installation: the only CUDA type
 * in the API is cudaStream_t, and braid can spell that type itself. The policy is:
 *
 *   - If BRAID_NO_CUDA_HEADERS is defined, no CUDA header is included, and cudaStream_t is declared here as
 *     `typedef struct CUstream_st* cudaStream_t;`, which is the very type CUDA declares (same tag, same
 *     pointer), so the API and ABI, including C++ name mangling of user functions taking a cudaStream_t, are
 *     identical either way.
 *   - Otherwise, if BRAID_USE_CUDA_HEADERS is defined, or this is a CUDA translation unit (__CUDACC__), or
 *     cuda_runtime.h was already included, or the compiler supports __has_include and finds <cuda_runtime.h> on
 *     the include path, this header includes <cuda_runtime.h> and <cuda_fp16.h>, plus <cuda_bf16.h> (CUDA >= 11.0)
 *     and, in C++, <cuda_fp8.h> (CUDA >= 11.8), as NVIDIA's header does, so code that relies on nccl.h pulling in
 *     the CUDA runtime keeps compiling.
 *   - Otherwise cudaStream_t is declared here as above.
 *
 * BRAID_NCCL_CUDA_HEADERS is defined to 1 when the CUDA headers were included and to 0 otherwise.
 * Note for strict C99 users: C99 forbids repeating a typedef. If this header declared cudaStream_t itself and a
 * CUDA header is included later in the same C99 translation unit, the compiler reports a redefinition; include the
 * CUDA headers first (this header then uses them) or compile as C11 or C++, where the repetition is legal. CUDA's
 * own headers are not C99 -pedantic clean anyway.
 *
 * ----------------------------------------------------------------------------------------------------------------
 * Conventions that hold for every function below unless its comment says otherwise
 * ----------------------------------------------------------------------------------------------------------------
 * Results. Every ncclResult_t function returns ncclSuccess or one of:
 *   ncclInvalidArgument  a NULL pointer where one is required, a rank, root, peer, count, datatype, op or flag out
 *                        of range, a config not initialized with NCCL_CONFIG_INITIALIZER, a NULL or destroyed
 *                        communicator, or a pointer that was never a communicator (braid checks every handle
 *                        against the ones it returned before using it).
 *   ncclInvalidUsage     a valid argument at the wrong time: a communicator that was aborted, revoked, finalized or
 *                        that failed; mismatched ncclGroupStart/ncclGroupEnd; a function this build does not
 *                        implement (see "Not yet implemented" below).
 *   ncclSystemError      an operating-system call failed (sockets, shared memory, threads, memory allocation).
 *   ncclUnhandledCudaError  a CUDA call failed.
 *   ncclRemoteError      a peer failed, exited, aborted, or made no progress within the BRAID_TIMEOUT deadline (a
 *                        dead peer is reported, never waited on forever), or the network broke. The message names
 *                        the peer's rank and host.
 *   ncclInternalError    a bug in braid; please report it with the NCCL_DEBUG=INFO log.
 *   ncclInProgress       only on a non-blocking communicator (config.blocking = 0): the call was accepted and
 *                        completes in the background; poll ncclCommGetAsyncError.
 * On any failure braid logs a WARN line (shown when NCCL_DEBUG=WARN or more verbose) and records a message that
 * ncclGetLastError returns: the calling thread's, when its latest call failed (so with ranks as threads, another rank
 * failing at the same time does not replace it), else the process's most recent WARN. Output arguments of a failed call
 * are not meaningful; braid leaves them unmodified where it can. No function calls exit() or abort(), and no C++
 * exception crosses this API.
 *
 * Communicator states. A communicator is usable from a successful init until ncclCommFinalize, ncclCommRevoke,
 * ncclCommAbort or ncclCommDestroy, or until an error is reported on it. After an asynchronous error (for example a
 * dead peer) further operations on it fail; the useful calls are then the query functions, ncclCommGetAsyncError,
 * ncclCommShrink with NCCL_SHRINK_ABORT (the remaining ranks go on without the failed ones), ncclCommRevoke,
 * ncclCommAbort and ncclCommDestroy.
 *
 * Thread safety. Functions that take no communicator (ncclGetVersion, ncclGetUniqueId, ncclGetErrorString,
 * ncclMemAlloc, ncclMemFree) may be called from any thread at any time. Different communicators may be used
 * concurrently from different threads. Calls on one communicator must be serialized by the caller (one thread at a
 * time, or external locking), with these exceptions, which may be called from any thread at any time, even while
 * another thread is inside a call on the same communicator: ncclCommAbort, ncclCommGetAsyncError, ncclCommCount,
 * ncclCommCuDevice, ncclCommUserRank, ncclGetLastError. Group state (ncclGroupStart/ncclGroupEnd nesting and the
 * operations collected so far) belongs to the calling thread.
 *
 * Ordering. Every rank of a communicator must issue that communicator's collective operations (collectives,
 * ncclCommSplit, ncclCommShrink, ncclCommWindowRegister, ...) in the same order, with matching arguments (count,
 * datatype, op, root). A mismatch is undefined behaviour: braid may detect it and fail, or hang until BRAID_TIMEOUT
 * turns the hang into ncclRemoteError.
 *
 * Device and host communicators. A device communicator is bound to a CUDA device and its buffers are device memory
 * (or memory the device can access); its operations are ordered on the CUDA stream passed to each call and the call
 * returns once the work is enqueued, as in NCCL. A host communicator is bound to no CUDA device and its buffers are
 * ordinary host (CPU) memory; braid creates one when the communicator is initialized without a usable CUDA device
 * (for example in a build without CUDA or when no device is visible; see the docs for the parameters that select it
 * explicitly). Host communicators follow the same rules as device ones, plus:
 *   - An operation called with a NULL stream has completed, and its output buffers hold the result, when the call
 *     returns; inside a group, when the outermost ncclGroupEnd returns. This is the normal way to use them.
 *   - The meaning of a non-NULL stream on a host communicator depends on the build: braid either orders the work
 *     after the work already submitted to that stream, or rejects the call with ncclInvalidUsage. Portable host
 *     code passes NULL.
 *   - ncclCommCuDevice reports -1, unless the communicator was created by ncclCommInitAll with a non-NULL devlist,
 *     in which case it reports that rank's devlist entry.
 *
 * Versions. This header declares NCCL 2.32's host API with NCCL's types, values and layouts, and NCCL_VERSION_CODE
 * says 2.32.3: 2.32's additions are ncclSetEncryption (TLS for braid's own TCP connections),
 * ncclCollConfig_t.launchCompletionEvent and NCCL_WIN_CFT_COUNTED (refused: CFT is not built). The device API is in
 * nccl_device.h (docs/device_api.md), with 2.32's Flow processor over LSA and the versioned device requirements;
 * GPU-initiated networking (GIN) works among the ranks of one LSA team (load/store) and toward ranks of other hosts
 * by a CPU proxy (NCCL_GIN_TYPE_PROXY); GIN's other network backends and the Compute Fabric Transport (CFT) are
 * declared where programs name them and refused by name at run time, as NCCL refuses them on systems without that
 * hardware.
 *
 * Not yet implemented. Every function declared here is exported by libnccl.so.2 (as nccl* and pnccl*), but a given
 * build of braid may not implement all of them. A function that is not implemented returns ncclInvalidUsage and logs
 * a WARN naming the function; it does not crash and does not change any state. The ones that may be in that
 * situation are ncclCommSuspend on a CUDA communicator while a CUDA graph that captured its collectives exists.
 * ncclCommInitRankScalable accepts several ids but every rank meets at the first one's root. One-sided operations
 * toward a peer this rank cannot map (another host) return ncclInvalidUsage naming the peer.
 * See src/api for which are implemented in this version.
 *
 * Profiling twins. Every function also exists with a "p" prefix (pncclAllReduce, ...) with the same signature and
 * behaviour, in the style of MPI's PMPI interface, so a tool can interpose on ncclX and forward to pncclX.
 */

#ifndef NCCL_H_
#define NCCL_H_

/* Marks this nccl.h as braid's. Put braid's include directory ahead of any directory that holds NVIDIA's nccl.h (on
 * some machines /usr/local/include does); `#ifndef BRAID_NCCL_H` / `#error` in a source file catches a mix-up. */
#define BRAID_NCCL_H 1

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#if !defined(BRAID_NO_CUDA_HEADERS)
#if defined(BRAID_USE_CUDA_HEADERS) || defined(__CUDACC__) || defined(__CUDA_RUNTIME_H__)
#define BRAID_NCCL_CUDA_HEADERS 1
#elif defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#define BRAID_NCCL_CUDA_HEADERS 1
#endif
#endif
#endif
#if !defined(BRAID_NCCL_CUDA_HEADERS)
#define BRAID_NCCL_CUDA_HEADERS 0
#endif

#if BRAID_NCCL_CUDA_HEADERS
#include <cuda_runtime.h>

#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#elif !defined(__DRIVER_TYPES_H__)
/* The CUDA runtime's stream and event handles, spelled exactly as CUDA spells them (opaque struct pointers). */
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
#endif

/* ---- Version ------------------------------------------------------------------------------------------------ */

/* The NCCL API version this header describes. */
#define NCCL_MAJOR 2
#define NCCL_MINOR 32
#define NCCL_PATCH 3
#define NCCL_SUFFIX ""

/* Encodes a version as one integer: X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z from 2.9 on (2.28.9 ->
 * 22809). ncclGetVersion reports the library's version in this encoding. */
#define NCCL_VERSION_CODE 23203
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))

#if defined(__GNUC__)
#define BRAID_NCCL_DEPRECATED_(msg) __attribute__((deprecated(msg)))
#else
#define BRAID_NCCL_DEPRECATED_(msg)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Handles and identifiers -------------------------------------------------------------------------------- */

/* A communicator: one rank's membership in a group of ranks. Opaque; created by an init or split function and
 * released by ncclCommDestroy or ncclCommAbort. */
typedef struct ncclComm* ncclComm_t;
/* A registered memory window (ncclCommWindowRegister). Opaque. */
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

/* The rendezvous token of a communicator: produced by ncclGetUniqueId on one rank and handed, as plain bytes, to
 * every rank (over MPI, a file, a launcher, ...). braid stores the bootstrap root's address and a random secret in
 * it; its contents are otherwise unspecified. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* ---- Results ------------------------------------------------------------------------------------------------ */

/* See "Results" at the top of this file for when braid returns each code. */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8, /* NCCL 2.30: a device-side wait ran out of time (braid reports its own deadlines as
                      ncclRemoteError, naming the peer) */
  ncclNumResults = 9
} ncclResult_t;

/* ---- Constants ---------------------------------------------------------------------------------------------- */

/* "Not set" values of ncclConfig_t fields: braid then uses its default (or the environment's value). */
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
/* ncclCommSplit color of a rank that joins no new communicator. */
#define NCCL_SPLIT_NOCOLOR -1
/* "Not set" value of float fields (ncclSimInfo_t.estimatedTime). */
#define NCCL_UNDEF_FLOAT -1.0f

/* ncclCommWindowRegister flags. COLL_SYMMETRIC: every rank registers a buffer of the same size at the same point of
 * the communicator's order, which lets collectives address peers' windows directly. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
/* NCCL 2.29+: operations on the window keep their issue order; NCCL 2.31: register for GPU-initiated networking only.
 */
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_GIN_ONLY 0x04
/* NCCL 2.32: register for the Compute Fabric Transport's counted operations only. CFT is not built in braid: a
 * registration with it fails with ncclInvalidUsage naming the flag. */
#define NCCL_WIN_CFT_COUNTED 0x08

/* Buffers of symmetric windows must be aligned to, and sized in multiples of, this many bytes. */
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy values: how many GPU thread blocks (CTAs) a communicator may use. DEFAULT favours speed,
 * EFFICIENCY favours leaving the GPU to compute, ZERO asks for no CTAs where copy engines can do the work. Host
 * communicators accept and ignore the policy. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink flags. DEFAULT: the parent is healthy and idle. ABORT: first stop whatever the parent still has in
 * flight (use this after a rank failed), then shrink. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke flags; the only valid value is 0. */
#define NCCL_REVOKE_DEFAULT 0x00

/* ncclCommSuspend flags (NCCL 2.29): release the communicator's dynamic memory while suspended. */
#define NCCL_SUSPEND_MEM 0x01

/* ncclConfig_t.hostCftMode values (NCCL 2.31, the Compute Fabric Transport of Blackwell systems; braid has none and
 * accepts every value). */
typedef enum {
  ncclHostCftDefault = NCCL_CONFIG_UNDEF_INT,
  ncclHostCftEnable = 1,
  ncclHostCftDisable = 2,
  ncclHostCftFallback = 3
} ncclHostCftMode_t;

/* ncclConfig_t.nvlsHostMode values (NCCL 2.31-2.32): which host-side NVLS components a CUDA communicator may use;
 * flags may be combined. DisableTransport: no multicast for the communicator (its NVLS-style collectives run over
 * peer pointers, which NCCL_ALGO still decides, and its windows get no multicast mappings); DisableSymmetricMultimem:
 * collectives on windows stay off the switch; Disable: both. Another value is ncclInvalidArgument. */
typedef enum {
  ncclNvlsHostModeDefault = NCCL_CONFIG_UNDEF_INT,
  ncclNvlsHostModeEnable = 0,
  ncclNvlsHostModeDisableTransport = 1 << 0,
  ncclNvlsHostModeDisableSymmetricMultimem = 1 << 1,
  ncclNvlsHostModeDisable = INT_MAX
} ncclNvlsHostMode_t;

/* ---- Communicator configuration ----------------------------------------------------------------------------- */

/* Options for ncclCommInitRankConfig, ncclCommInitRankScalable, ncclCommSplit and ncclCommShrink. Always start from
 * NCCL_CONFIG_INITIALIZER and assign only the fields you want to set: the first three fields identify the caller's
 * layout (size, a magic number and the version), and a config that lacks the magic number is rejected with
 * ncclInvalidArgument. A field left at its UNDEF value takes braid's default, which the matching NCCL_* environment
 * variable can change; an environment variable that is set overrides a config field (braid logs when it does).
 * Fields that only mean something on GPUs are validated and then ignored by host communicators. */
typedef struct ncclConfig_v23100 {
  /* Set by NCCL_CONFIG_INITIALIZER; never assign these. */
  size_t size;
  unsigned int magic;
  unsigned int version;
  /* 1 (default): init, split, finalize and group calls block until done. 0: they may return ncclInProgress and
   * complete in the background (poll ncclCommGetAsyncError). */
  int blocking;
  /* GPU thread-block cluster size, 0..8 (device communicators only). */
  int cgaClusterSize;
  /* Bounds on the number of channels (GPU blocks, or worker threads of a host communicator). */
  int minCTAs;
  int maxCTAs;
  /* Name of the network module to use (for example "Socket", "IB", "Libfabric"); NCCL_NET overrides it. */
  const char* netName;
  /* 1: communicators split from this one may share its resources. Default 0. */
  int splitShare;
  /* Network traffic class for this communicator's network traffic (where the network supports one). */
  int trafficClass;
  /* Name shown in logs for this communicator. The string is copied during the call. */
  const char* commName;
  /* 1 enables in-network reduction (CollNet) where available; braid has no CollNet support yet and ignores it. */
  int collnetEnable;
  /* One of NCCL_CTA_POLICY_*. */
  int CTAPolicy;
  /* 1: communicators shrunk from this one may share its resources. Default 0. */
  int shrinkShare;
  /* Number of channels for NVLS-style algorithms. */
  int nvlsCTAs;
  /* Channels per network peer for point-to-point traffic (a power of two). */
  int nChannelsPerNetPeer;
  /* 1 schedules work with NVLink-connected peers first. */
  int nvlinkCentricSched;
  /* NCCL 2.29-2.31 fields. numRmaCtx (default 1, 0 turns one-sided operations off, NCCL_NUM_RMA_CTX overrides),
   * numRmaSig (signals per context, default 1) and rmaEagerInit (1: the one-sided signal area is set up at init, so
   * ncclSignal and ncclWaitSignal work before any window registration; NCCL_RMA_EAGER_INIT overrides) are honoured
   * and must be alike on every rank. The others are accepted and ignored by braid: how CUDA graphs use the
   * communicator, the most point-to-point peers, stream ordering of graph launches, implicit launch order, and the
   * two modes above. */
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
  int launchOrderImplicit;
  int numRmaSig;
  int rmaEagerInit;
  int hostCftMode;  /* an ncclHostCftMode_t */
  int nvlsHostMode; /* an ncclNvlsHostMode_t, or an OR of its flags */
} ncclConfig_t;

/* Initial value of every ncclConfig_t: `ncclConfig_t config = NCCL_CONFIG_INITIALIZER;`. */
#define NCCL_CONFIG_INITIALIZER                                                     \
  {                                                                                 \
    sizeof(ncclConfig_t),                                 /* size */                \
        0xcafebeef,                                       /* magic */               \
        NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */             \
        NCCL_CONFIG_UNDEF_INT,                            /* blocking */            \
        NCCL_CONFIG_UNDEF_INT,                            /* cgaClusterSize */      \
        NCCL_CONFIG_UNDEF_INT,                            /* minCTAs */             \
        NCCL_CONFIG_UNDEF_INT,                            /* maxCTAs */             \
        NCCL_CONFIG_UNDEF_PTR,                            /* netName */             \
        NCCL_CONFIG_UNDEF_INT,                            /* splitShare */          \
        NCCL_CONFIG_UNDEF_INT,                            /* trafficClass */        \
        NCCL_CONFIG_UNDEF_PTR,                            /* commName */            \
        NCCL_CONFIG_UNDEF_INT,                            /* collnetEnable */       \
        NCCL_CONFIG_UNDEF_INT,                            /* CTAPolicy */           \
        NCCL_CONFIG_UNDEF_INT,                            /* shrinkShare */         \
        NCCL_CONFIG_UNDEF_INT,                            /* nvlsCTAs */            \
        NCCL_CONFIG_UNDEF_INT,                            /* nChannelsPerNetPeer */ \
        NCCL_CONFIG_UNDEF_INT,                            /* nvlinkCentricSched */  \
        NCCL_CONFIG_UNDEF_INT,                            /* graphUsageMode */      \
        NCCL_CONFIG_UNDEF_INT,                            /* numRmaCtx */           \
        NCCL_CONFIG_UNDEF_INT,                            /* maxP2pPeers */         \
        NCCL_CONFIG_UNDEF_INT,                            /* graphStreamOrdering */ \
        NCCL_CONFIG_UNDEF_INT,                            /* launchOrderImplicit */ \
        NCCL_CONFIG_UNDEF_INT,                            /* numRmaSig */           \
        NCCL_CONFIG_UNDEF_INT,                            /* rmaEagerInit */        \
        NCCL_CONFIG_UNDEF_INT,                            /* hostCftMode */         \
        NCCL_CONFIG_UNDEF_INT                             /* nvlsHostMode */        \
  }

/* One vendor option of a per-collective configuration (NCCL 2.31): a key (a vendor's own id, below 2^24 and not 0, and
 * its option) and a value, chained through `next` (no cycles, no repeated keys). NCCL ignores every option; braid
 * ignores the ones it does not own (it owns none yet). */
typedef struct ncclConfigExt {
  struct ncclConfigExt* next;
  struct {
    int vendorId;
    int optionId;
  } key;
  union {
    int i;
    const char* s;
    void* raw;
  } val;
} ncclConfigExt_t;

/* Options of one collective call, for the nccl*Config variants of the collectives (NCCL 2.31). Start from
 * NCCL_COLLCONFIG_INITIALIZER (the first three fields identify the caller's layout) and set the same values on every
 * rank. NCCL_CONFIG_UNDEF_INT / NULL leave a field to the communicator. The caller keeps the struct, and what it points
 * to, alive for the call. */
typedef struct ncclCollConfig_v23200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclConfigExt_t* ext;
  /* Bounds (1..64) on the channels (GPU blocks, or a host communicator's worker threads) this call may use on the
   * ring and tree paths, within the communicator's channels and the call's size (a channel never gets nothing). */
  int minCTAs;
  int maxCTAs;
  /* Channels of NVLS-style algorithms (not honoured by braid yet: ncclInvalidUsage when set). */
  int nvlsCTAs;
  /* GPU thread-block cluster size (the same for every collective of a group). */
  int cgaClusterSize;
  /* Which algorithms this call may use, in NCCL_ALGO's syntax ("Ring", "^Tree", ...); NULL or "": the choice is
   * braid's. */
  const char* algSelection;
  /* 1 (default): a selection that leaves no algorithm is an error; 0: braid then chooses as without one. */
  int forceAlgSelection;
  /* NCCL_CTA_POLICY_* for this call; UNDEF: the communicator's. */
  int CTAPolicy;
  /* Passed verbatim to profiler plugins with this call's events; values with the top bit set are NCCL's. */
  uint64_t userProfilerTag;
  /* NCCL 2.32: a CUDA event of the caller's (cudaEventDisableTiming) that the call records on its stream, in stream
   * order before the collective's kernel, so the event completes as that kernel can start (NCCL records it there
   * too with a CUDA older than 12.3; braid has no launch-completion attribute path yet). NULL: none. Every rank
   * passes one or none; keep it alive until it completed (and through a captured graph's runs). A host communicator
   * refuses a non-NULL one with ncclInvalidUsage. Configs of 2.31's size (without this field) are accepted. */
  cudaEvent_t launchCompletionEvent;
} ncclCollConfig_t;

/* Initial value of every ncclCollConfig_t: `ncclCollConfig_t cc = NCCL_COLLCONFIG_INITIALIZER;`. */
#define NCCL_COLLCONFIG_INITIALIZER                                               \
  {                                                                               \
    sizeof(ncclCollConfig_t),                             /* size */              \
        0xcafebeef,                                       /* magic */             \
        NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */           \
        NCCL_CONFIG_UNDEF_PTR,                            /* ext */               \
        NCCL_CONFIG_UNDEF_INT,                            /* minCTAs */           \
        NCCL_CONFIG_UNDEF_INT,                            /* maxCTAs */           \
        NCCL_CONFIG_UNDEF_INT,                            /* nvlsCTAs */          \
        NCCL_CONFIG_UNDEF_INT,                            /* cgaClusterSize */    \
        NCCL_CONFIG_UNDEF_PTR,                            /* algSelection */      \
        1,                                                /* forceAlgSelection */ \
        NCCL_CONFIG_UNDEF_INT,                            /* CTAPolicy */         \
        0,                                                /* userProfilerTag */   \
        NCCL_CONFIG_UNDEF_PTR                             /* launchCompletionEvent */ \
  }

/* Result of ncclGroupSimulateEnd. Start from NCCL_SIM_INFO_INITIALIZER (the first three fields identify the caller's
 * layout; a struct without the magic number is rejected with ncclInvalidArgument). */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  /* Estimated time of the simulated group, in microseconds, from braid's cost model. */
  float estimatedTime;
} ncclSimInfo_t;

/* Initial value of every ncclSimInfo_t: `ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;`. */
#define NCCL_SIM_INFO_INITIALIZER                                             \
  {                                                                           \
    sizeof(ncclSimInfo_t),                                /* size */          \
        0x74685283,                                       /* magic */         \
        NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */       \
        NCCL_UNDEF_FLOAT                                  /* estimatedTime */ \
  }

/* Encryption of braid's own TCP connections (NCCL 2.32), set with ncclSetEncryption. Start from
 * NCCL_ENCRYPTION_CONFIG_INITIALIZER (plain TCP); a struct without its magic number is rejected. The two mode values
 * are braid's: NVIDIA's header, which would fix them, is not among the sources braid could check (docs/multihost.md). */
#define NCCL_ENCRYPTION_MODE_NONE 0 /* plain TCP (the default) */
#define NCCL_ENCRYPTION_MODE_PSK 1  /* TLS 1.3 authenticated by a pre-shared key of at least 32 bytes */

typedef struct ncclEncryptionConfig_v23200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  /* NCCL_ENCRYPTION_MODE_NONE or NCCL_ENCRYPTION_MODE_PSK. */
  int mode;
  /* NCCL_ENCRYPTION_MODE_PSK: the key, a NUL-terminated string of at least 32 bytes, the same in every process of the
   * job (copied: it may be freed after the call). */
  const char* psk;
} ncclEncryptionConfig_t;

#define NCCL_ENCRYPTION_CONFIG_INITIALIZER                                   \
  {                                                                          \
    sizeof(ncclEncryptionConfig_t),                       /* size */         \
        0xcafebeef,                                       /* magic */        \
        NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */      \
        NCCL_ENCRYPTION_MODE_NONE,                        /* mode */         \
        NCCL_CONFIG_UNDEF_PTR                             /* psk */          \
  }

/* ---- Memory ------------------------------------------------------------------------------------------------- */

/* Allocates at least `size` bytes suited to braid's zero-copy paths (registration, windows) and stores the address
 * in *ptr. On a CUDA device (the current one) this is device memory that peers can map; without a usable CUDA device
 * it is page-aligned, zeroed host memory, allocated and mapped before the call returns (as device memory is: no page
 * faults later; a size above the host's memory, or a host out of memory, fails here, though under a cgroup limit the
 * kernel may instead stop the process here). The allocation may be rounded up to the allocation granularity.
 * Thread-safe.
 * Errors: ncclInvalidArgument (ptr NULL, or a size no allocation can have, such as SIZE_MAX), ncclSystemError or
 * ncclUnhandledCudaError (allocation failed), ncclInvalidUsage (not implemented in this build). */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);

/* Frees memory returned by ncclMemAlloc. ptr NULL is a no-op that succeeds. The memory must no longer be
 * registered or in use by an operation. Thread-safe. Errors (nothing is freed): ncclInvalidArgument naming ptr when
 * it is not the start of a live ncclMemAlloc buffer (never allocated by it, already freed, memory from malloc, or a
 * pointer inside such a buffer), ncclUnhandledCudaError, ncclInvalidUsage (not implemented in this build). */
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* ---- Library information and errors ------------------------------------------------------------------------- */

/* Stores the library's version in NCCL_VERSION encoding in *version (braid reports the NCCL API version it
 * implements, 23203 for this header). Compare with NCCL_VERSION_CODE to detect a header/library mismatch. Never
 * blocks; thread-safe. Errors: ncclInvalidArgument (version NULL). */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/* Returns a static, human-readable description of `result` (never NULL; an unknown code gets a generic text). The
 * string must not be freed. Thread-safe. For the details of the last failure use ncclGetLastError. */
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/* Returns the message braid recorded for the most recent failure (the text of its WARN line), or "" if there was
 * none. `comm` may be NULL; braid accepts it for compatibility and may use it to prefer a failure recorded on that
 * communicator. The returned pointer stays valid until the next failing braid call; copy the text to keep it.
 * Thread-safe. */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/* Re-reads the logging environment (NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE) the next time braid logs.
 * Deprecated in NCCL and kept for compatibility; not thread-safe with respect to concurrent logging setup. */
BRAID_NCCL_DEPRECATED_("ncclResetDebugInit is deprecated and will be removed from the NCCL API")
void ncclResetDebugInit(void);
BRAID_NCCL_DEPRECATED_("pncclResetDebugInit is deprecated and will be removed from the NCCL API")
void pncclResetDebugInit(void);

/* ---- Communicator creation ---------------------------------------------------------------------------------- */

/* Creates a new unique id in *uniqueId for one communicator. Call it on one rank, send the 128 bytes to every rank,
 * and pass it to each rank's init call. The calling process starts the bootstrap root (a listening socket and a
 * background thread), so it must stay alive until every rank has finished initializing; a new id is needed for each
 * communicator created this way. If NCCL_COMM_ID=host:port is set, the id names that address instead and rank 0's
 * init listens there. Does not block on other ranks. Thread-safe. Errors: ncclInvalidArgument (uniqueId NULL),
 * ncclSystemError (no usable network interface, socket or thread failure). */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/* Sets how this process's braid-owned TCP connections are protected (NCCL 2.32): with NCCL_ENCRYPTION_MODE_PSK,
 * every bootstrap connection and every connection of the built-in Socket network made afterwards is TLS 1.3,
 * authenticated by the key (each connection gets fresh traffic keys, with forward secrecy); a peer without the same
 * key cannot connect (its connection is refused, with a WARN naming it). NCCL_ENCRYPTION_MODE_NONE (or a NULL config)
 * returns to plain TCP. Call it before ncclGetUniqueId and every init, with the same key in every process, and keep it
 * for the job: connections already made keep what they had. Not covered: shared memory and CUDA paths inside a host,
 * and the libfabric, IB and plugin networks (their own transports). Loads OpenSSL 3 (libssl.so.3, libcrypto.so.3) on
 * first use. Thread-safe. Errors: ncclInvalidArgument (no initializer, an unknown mode, a NULL or short key),
 * ncclSystemError (OpenSSL 3 cannot be loaded; the message says which library). */
ncclResult_t ncclSetEncryption(const ncclEncryptionConfig_t* config);
ncclResult_t pncclSetEncryption(const ncclEncryptionConfig_t* config);

/* Creates this process's rank `rank` (0 <= rank < nranks) of an nranks-rank communicator identified by commId, with
 * the options in `config` (NULL means all defaults), and stores it in *comm. Every rank calls it with the same
 * nranks and commId and a distinct rank. A device communicator is bound to the CUDA device that is current on the
 * calling thread; without a usable device the communicator is a host communicator. Collective: in blocking mode it
 * returns when all ranks have joined and the communicator is ready, and fails with ncclRemoteError if they do not
 * join within BRAID_TIMEOUT; in non-blocking mode it may return ncclInProgress with *comm already set, and
 * ncclCommGetAsyncError(*comm) reports when it is ready. A thread that initializes several ranks must wrap the calls
 * in ncclGroupStart/ncclGroupEnd (they then complete at ncclGroupEnd); otherwise use one thread or process per
 * rank. Errors: ncclInvalidArgument (comm NULL, nranks < 1, rank out of range, bad config), ncclSystemError,
 * ncclRemoteError (a rank failed or timed out, or the id is stale), ncclUnhandledCudaError. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config);

/* ncclCommInitRankConfig with config NULL (blocking, all defaults). */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/* Creates, in one call from one thread, all ndev ranks of a communicator that lives entirely in this process:
 * comm[i] becomes rank i, bound to CUDA device devlist[i] (devices 0..ndev-1 when devlist is NULL). The caller
 * provides comm with room for ndev handles. Without CUDA the ranks are host communicators; they report devlist[i]
 * from ncclCommCuDevice when a devlist was given and -1 otherwise. Blocks until all ranks are ready; on failure no
 * communicator is left behind. Errors: ncclInvalidArgument (comm NULL, ndev < 1, a devlist entry that is negative
 * or not a visible device on a device build), ncclSystemError, ncclUnhandledCudaError. */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/* Like ncclCommInitRankConfig, but rendezvous uses nId ids (commIds[0..nId-1], each from ncclGetUniqueId, the same
 * list in the same order on every rank) to spread the bootstrap load over several roots. nId == 1 is exactly
 * ncclCommInitRankConfig. Errors: as ncclCommInitRankConfig, plus ncclInvalidArgument (nId < 1 or nId > nranks,
 * commIds NULL) and ncclInvalidUsage where this build does not support nId > 1. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                       ncclConfig_t* config);

/* Splits `comm` into disjoint communicators: ranks passing the same color (>= 0) form one new communicator, ordered
 * by key and, for equal keys, by their rank in comm; a rank passing NCCL_SPLIT_NOCOLOR gets *newcomm = NULL. Every
 * rank of comm must call it (it is a collective on comm, in comm's operation order). config NULL makes each new
 * communicator inherit comm's configuration. The new communicator is of the same kind (device or host) and on the
 * same device as comm. Blocking behaviour follows the new communicator's config, as for init. Errors:
 * ncclInvalidArgument (comm or newcomm NULL, color < 0 other than NCCL_SPLIT_NOCOLOR, bad config),
 * ncclInvalidUsage (comm not usable), ncclRemoteError, ncclSystemError. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);

/* Creates in *newcomm a communicator of all ranks of comm except the excludeRanksCount ranks listed in
 * excludeRanksList, keeping their relative order (ranks are renumbered densely). Called by every remaining rank with
 * the same list; the excluded ranks do not call it (they may be dead). shrinkFlags is NCCL_SHRINK_DEFAULT or
 * NCCL_SHRINK_ABORT (stop comm's in-flight operations first; required when a rank has failed). config NULL inherits
 * comm's configuration. comm remains valid and must still be destroyed or aborted. Errors: ncclInvalidArgument (bad
 * list, flags or config), ncclInvalidUsage (comm not usable, or not implemented in this build), ncclRemoteError. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags);

/* NCCL 2.29: growing a communicator with new ranks. ncclCommGetUniqueId makes, on one existing rank (the root of the
 * growth), the id the new ranks join with; it fails while the previous id has not been used by an ncclCommGrow. Then
 * every rank calls ncclCommGrow with the new size: existing ranks pass comm (the root its id, the others NULL) and
 * rank -1, and keep their ranks; new ranks pass comm NULL, the id and their rank (the old size and up). Collective
 * over the old and the new ranks. Errors: ncclInvalidArgument (bad sizes, ranks or a missing id), ncclInvalidUsage
 * (not implemented in this build), the init errors of the new communicator. */
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          ncclConfig_t* config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                           ncclConfig_t* config);

/* ---- Communicator teardown ---------------------------------------------------------------------------------- */

/* Completes every operation issued on comm and then synchronizes with the other ranks so that shared resources can
 * be released safely. Collective: every rank calls it. Blocking mode: returns when done. Non-blocking mode: returns
 * ncclInProgress; ncclCommGetAsyncError reports ncclSuccess once done. Afterwards only ncclCommDestroy (which then
 * does not block) and the query functions may be used on comm. Errors: ncclInvalidArgument (comm NULL),
 * ncclInvalidUsage (already finalized, revoked or aborted), ncclRemoteError (a peer failed or timed out). */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/* Releases comm and everything it owns; the handle is invalid afterwards. If comm was not finalized, braid first
 * completes its outstanding operations and may wait for peers to stop using shared resources (at most BRAID_TIMEOUT);
 * after a failure prefer ncclCommAbort, which does not wait. comm NULL is a no-op that succeeds. No other call may be
 * in progress on comm. Errors: ncclRemoteError (waiting failed; resources are still released), ncclSystemError. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/* Stops everything in flight on comm without waiting for peers, then releases comm; the handle is invalid
 * afterwards. May be called from any thread, including while another thread is blocked in a call on comm: that call
 * returns promptly with an error, and the caller must not use comm after it returns. Peers still using the
 * communicator see ncclRemoteError instead of hanging. comm NULL is a no-op that succeeds. Always releases what it
 * can; errors are reported but leave nothing to clean up. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/* Stops all in-flight operations on comm, so that it can then be destroyed, split or shrunk safely after a failure.
 * May be called from another thread while a call on comm is blocked (that call returns with an error, as do its
 * peers' waiting on this rank). braid returns once comm is quiescent (at most BRAID_TIMEOUT; ncclCommGetAsyncError
 * then reports ncclSuccess, NCCL's state after its ncclInProgress). Collectives on a revoked communicator fail with
 * ncclInvalidUsage; it cannot be finalized and does not share resources with splits/shrinks. revokeFlags must be
 * NCCL_REVOKE_DEFAULT. Errors: ncclInvalidArgument (comm NULL, flags != 0), ncclInvalidUsage (already revoked or
 * finalized), ncclRemoteError (not quiescent by the deadline). */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* NCCL 2.29: releasing a communicator's dynamic memory while it is not in use. ncclCommSuspend with NCCL_SUSPEND_MEM
 * frees what braid can make again (connection buffers); the communicator then refuses operations until ncclCommResume,
 * and the first operation after it connects anew. Both are collective (every rank calls them, outside a group, with
 * nothing in flight); flags 0 does nothing. ncclCommMemStats reports bytes of memory braid allocated for comm that
 * suspending frees (GpuMemSuspend; while suspended, what it freed) and whether it is suspended (GpuMemSuspended, 0 or
 * 1), what it keeps across a suspend (GpuMemPersist: the direct path's segment or areas, launch memory) and what it
 * holds now (GpuMemTotal: Persist plus the links unless suspended); on a host communicator the figures are host
 * memory, and small host structures (plans, tables) are not counted. A CUDA communicator waits for its launches before
 * releasing, and refuses while a CUDA graph that captured its collectives exists (the graph keeps the FIFOs'
 * addresses). Errors: ncclInvalidArgument (comm or value NULL, a bad stat, unknown flag bits), ncclInvalidUsage
 * (suspended twice, resumed while not suspended, inside a group, a live captured graph on some rank). */
typedef enum {
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);

/* ---- Communicator queries ----------------------------------------------------------------------------------- */

/* Stores comm's state in *asyncError: ncclSuccess (ready, no error), ncclInProgress (a non-blocking call on comm is
 * still running), or the error that an asynchronous failure (dead peer, network failure, abort by a peer, timeout)
 * left on comm. Never blocks; may be called from any thread at any time; polling it also drives the progress of
 * non-blocking initialization. Errors (of the call itself): ncclInvalidArgument (comm or asyncError NULL). */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

/* Stores the number of ranks of comm in *count. Never blocks; thread-safe. Errors: ncclInvalidArgument (NULL
 * argument), ncclInvalidUsage (comm not yet initialized, in non-blocking mode). */
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);

/* Stores comm's CUDA device in *device; -1 for a host communicator (unless created by ncclCommInitAll with a
 * devlist, see there). Never blocks; thread-safe. Errors: ncclInvalidArgument (NULL argument), ncclInvalidUsage. */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);

/* Stores this rank's rank in comm (0..count-1) in *rank. Never blocks; thread-safe. Errors: ncclInvalidArgument
 * (NULL argument), ncclInvalidUsage. */
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* ---- Buffer registration ------------------------------------------------------------------------------------ */

/* Registers [buff, buff + size) with comm for zero-copy transfers and stores a handle in *handle. Registration is a
 * performance hint: operations on unregistered buffers work too, and braid may register nothing and still succeed.
 * Local (not collective). The buffer must stay allocated until ncclCommDeregister. Errors: ncclInvalidArgument (NULL
 * comm, buff or handle), ncclInvalidUsage (comm not usable, or not implemented in this build), ncclSystemError,
 * ncclUnhandledCudaError. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);

/* Releases a registration made by ncclCommRegister on the same comm; operations using the buffer must have
 * completed. Errors: ncclInvalidArgument (NULL comm, unknown handle), ncclInvalidUsage (not implemented). */
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/* Registers [buff, buff + size) as a memory window of comm and stores its handle in *win. Collective: every rank
 * calls it, in comm's operation order; inside a group it runs at ncclGroupEnd, which writes *win. Sizes may differ
 * between ranks. winFlags: NCCL_WIN_DEFAULT, or any of NCCL_WIN_COLL_SYMMETRIC (buff aligned to
 * NCCL_WIN_REQUIRED_ALIGNMENT; ncclMemAlloc memory is), NCCL_WIN_STRICT_ORDERING, NCCL_WIN_GIN_ONLY (NCCL_WIN_CFT_COUNTED:
 * ncclInvalidUsage, CFT is not built). The window
 * reaches the peers that can map the buffer: ranks of this process, and ranks of other processes of this host when
 * it is ncclMemAlloc memory; a CUDA communicator takes only ncclMemAlloc memory. With NCCL_WIN_ENABLE=0 (on any
 * rank) *win is NULL and nothing is registered. Errors: ncclInvalidArgument (NULL argument, bad flags or alignment,
 * memory the communicator cannot offer), ncclInvalidUsage (comm not usable, another rank could not register),
 * ncclRemoteError, ncclSystemError, ncclUnhandledCudaError. */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);

/* Releases a window of comm (NULL: nothing to do). Local to the rank, as NCCL 2.29+ documents; operations using it
 * must have completed. Errors: ncclInvalidArgument (NULL comm, a window this communicator does not hold). */
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* NCCL 2.29: the buffer a window was registered with. Errors: ncclInvalidArgument (NULL arguments, a window this
 * communicator did not register). */
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);

/* ---- Reduction operators and data types --------------------------------------------------------------------- */

/* Makes ncclNumOps an enum constant of the size every NCCL enum has, for ncclMaxRedOp below. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;

/* Reduction operators. ncclAvg sums and then divides by the number of ranks (integer types: truncating division).
 * Values from ncclNumOps up to ncclMaxRedOp are operators created at run time by ncclRedOpCreatePreMulSum. */
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  /* Count of built-in operators, and the smallest value a created operator can have. */
  ncclNumOps = 5,
  /* Largest valid operator value: the largest signed value that fits the enum's size, kept so that the enum's size,
   * and hence the ABI, never changes. */
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/* Element types. Names with the same value are aliases (ncclChar = ncclInt8, ncclInt = ncclInt32, ncclHalf =
 * ncclFloat16, ncclFloat = ncclFloat32, ncclDouble = ncclFloat64). ncclBfloat16 is bfloat16; ncclFloat8e4m3 and
 * ncclFloat8e5m2 are the 8-bit floating-point formats with 4 exponent + 3 mantissa and 5 + 2 bits. */
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of a ncclRedOpCreatePreMulSum operator lives and when braid reads it. */
typedef enum {
  /* *scalar is read each time an operation using the operator executes (on a device communicator, by the GPU;
   * on a host communicator, by braid's worker). It must stay valid and accessible until the last such operation
   * has completed. */
  ncclScalarDevice = 0,
  /* *scalar is host memory read once, before ncclRedOpCreatePreMulSum returns. */
  ncclScalarHostImmediate = 1
} ncclScalarResidence_t;

/* Creates, in *op, the operator "multiply each rank's input by *scalar, then sum": all-reducing x_r with it yields
 * scalar * sum(x_r). *scalar has type `datatype`. The operator may be used only with comm and with that datatype
 * (other uses fail with ncclInvalidArgument). Local; not collective (but ranks that use it in one collective must
 * all have created an operator). Same thread rules as other calls on comm. Errors: ncclInvalidArgument (NULL op,
 * scalar or comm, datatype or residence out of range), ncclInvalidUsage (too many live operators, comm not usable),
 * ncclSystemError. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);

/* Destroys an operator created by ncclRedOpCreatePreMulSum on comm. It may be destroyed as soon as the last call
 * that was given it has returned (braid keeps what queued work still needs). Errors: ncclInvalidArgument (built-in
 * operator, unknown operator, or one created on another communicator). */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- Collective operations ---------------------------------------------------------------------------------- *
 *
 * Rules shared by every operation below:
 *   - count arguments are numbers of elements of `datatype`, not bytes. A count of 0 is valid: the call still has
 *     to be made by every rank that takes part, and moves no data.
 *   - Buffers: device memory (or memory the device can access) on a device communicator, host memory on a host
 *     communicator. A buffer that count > 0 requires must not be NULL. Send and receive buffers must not overlap,
 *     except in the exact in-place arrangement each operation names.
 *   - Device communicator: the call returns once the operation is enqueued on `stream`; it runs in stream order and
 *     is complete when the stream reaches that point. Calls may be captured into CUDA graphs.
 *   - Host communicator: with a NULL stream the operation has completed when the call returns (inside a group: when
 *     the outermost ncclGroupEnd returns). See "Device and host communicators" at the top.
 *   - Every rank calls each operation in the same order on a communicator (see "Ordering"); within one thread,
 *     operations of several communicators, or of several ranks driven by that thread, must be grouped
 *     (ncclGroupStart/ncclGroupEnd), since each one may wait for the others' progress.
 *   - Errors: ncclInvalidArgument (NULL comm, NULL buffer with count > 0, datatype, op, root or peer out of range, an
 *     operator created for another communicator or datatype, overlapping buffers that braid detects),
 *     ncclInvalidUsage (comm not usable), ncclRemoteError (on host communicators, where the operation runs during
 *     the call; on device communicators failures after enqueue are reported by ncclCommGetAsyncError and later
 *     calls), ncclUnhandledCudaError, ncclSystemError, ncclInProgress (non-blocking communicators).
 */

/* Reduce: combines the count elements of sendbuff of every rank with op and writes the result into recvbuff of rank
 * `root` (a rank of comm, not a device number). recvbuff is not used, and may be NULL, on the other ranks. In place
 * on the root when sendbuff == recvbuff. */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream);

/* Broadcast, in-place form (older API): copies count elements of buff on rank root into buff on every other rank.
 * Equivalent to ncclBroadcast(buff, buff, ...). */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);

/* Broadcast: copies count elements of sendbuff on rank root into recvbuff on every rank (root included). sendbuff is
 * used only on the root. In place on the root when sendbuff == recvbuff. */
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream);

/* All-reduce: combines the count elements of sendbuff of every rank with op and writes the same result into
 * recvbuff of every rank. In place when sendbuff == recvbuff. */
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                            ncclComm_t comm, cudaStream_t stream);

/* Reduce-scatter: sendbuff holds nranks * recvcount elements on every rank; they are combined with op element-wise
 * across ranks, and block i (elements [i * recvcount, (i + 1) * recvcount)) of the result goes to recvbuff of rank
 * i. In place when recvbuff == sendbuff + rank * recvcount (in elements). */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);

/* All-gather: every rank contributes sendcount elements; recvbuff (nranks * sendcount elements) of every rank
 * receives rank i's contribution at offset i * sendcount. In place when sendbuff == recvbuff + rank * sendcount. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream);

/* All-to-all: sendbuff and recvbuff each hold nranks * count elements; block j of rank i's sendbuff lands in block
 * i of rank j's recvbuff (block k = elements [k * count, (k + 1) * count)). sendbuff and recvbuff must not overlap. */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream);

/* Gather: every rank sends count elements of sendbuff to rank root, whose recvbuff (nranks * count elements)
 * receives rank i's elements at offset i * count. recvbuff is not used on other ranks. In place on the root when
 * sendbuff == recvbuff + root * count. */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);

/* Scatter: rank root sends elements [i * count, (i + 1) * count) of its sendbuff (nranks * count elements) to rank
 * i, which receives them in recvbuff. sendbuff is not used on other ranks. In place on the root when
 * recvbuff == sendbuff + root * count. */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream);

/* NCCL 2.31: each collective with a per-call configuration (ncclCollConfig_t, NCCL_COLLCONFIG_INITIALIZER), set alike
 * on every rank. config NULL is the plain call. Same semantics, buffers and errors as the plain call, plus
 * ncclInvalidArgument for a config not made from the initializer, an algSelection braid cannot parse or, with
 * forceAlgSelection, one that leaves no algorithm for the collective. */
ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                 ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t pncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                 ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t pncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                  ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                              ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                              const ncclCollConfig_t* config);
ncclResult_t pncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                               ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                               const ncclCollConfig_t* config);
ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                 ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t pncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                  ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                     ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                     const ncclCollConfig_t* config);
ncclResult_t pncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                      const ncclCollConfig_t* config);
ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t pncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                 ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                              ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t pncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t pncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);

/* ---- Point-to-point operations ------------------------------------------------------------------------------ *
 *
 * ncclSend to rank `peer` is matched with an ncclRecv from this rank on the peer, with the same count and datatype;
 * sends and receives between a pair of ranks match in the order they were issued. A send or receive does not
 * complete until its partner is posted, so operations that must progress together (an exchange, a shift, sends to
 * several peers) have to be in one ncclGroupStart/ncclGroupEnd; outside a group, two ranks that both send first
 * deadlock (braid turns that into ncclRemoteError after BRAID_TIMEOUT). On a host communicator with a NULL stream,
 * an ungrouped send or receive returns after its transfer has completed. A rank may send to and receive from itself
 * within a group. Errors as for collectives (peer out of range is ncclInvalidArgument).
 */

/* Sends count elements of sendbuff to rank peer. */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

/* Receives count elements from rank peer into recvbuff. */
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

/* NCCL 2.29: one-sided operations on windows. ncclPutSignal writes count elements of localbuff into peer's window
 * peerWin (this rank's handle of the window) at byte offset peerWinOffset and then raises signal sigIdx of context ctx
 * there; ncclSignal raises the signal alone; ncclWaitSignal waits until each descriptor's peer raised its signal
 * opCnt more times than this rank waited for so far, after which the data of those puts is in this rank's window.
 * ctx lies in [0, numRmaCtx) and sigIdx in [0, numRmaSig) of the communicator's config (each pair of ranks has
 * numRmaCtx x numRmaSig independent signals each way), and flags must be 0. Host communicators: puts and signals toward
 * ranks of this host complete at the call; toward ranks of other hosts they return once queued as messages (localbuff
 * may be reused at once; they wait for room under BRAID_TIMEOUT); a wait returns when its signals arrived (inside a
 * group: at ncclGroupEnd); stream must be NULL. CUDA communicators: enqueued on stream, not inside a graph capture. The
 * first ncclCommWindowRegister creates the signal area they use (init does with rmaEagerInit=1). Errors:
 * ncclInvalidArgument (bad arguments, ctx or sigIdx out of range, offset past the end of the peer's window),
 * ncclInvalidUsage (no signal area yet, a peer this rank cannot reach: another process's private memory, another host
 * with BRAID_RMA_NET=0, a capture), ncclRemoteError (a wait or a queued put past BRAID_TIMEOUT, or whose peer process
 * exited or connection failed). */
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                            ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
typedef struct {
  int opCnt;  /* signal operations to wait for */
  int peer;   /* from this rank */
  int sigIdx; /* on this signal */
  int ctx;    /* of this context */
} ncclWaitSignalDesc_t;
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);

/* ---- Groups ------------------------------------------------------------------------------------------------- *
 *
 * A group collects the calls a thread makes between ncclGroupStart and the matching ncclGroupEnd and starts them
 * together at the outermost ncclGroupEnd. Groups serve three purposes: one thread driving several ranks (or
 * several communicators) without deadlocking, send/receive operations that must progress concurrently, and fusing
 * several operations of one communicator into one launch. Groups nest; only the outermost ncclGroupEnd acts.
 * Communicator initialization (init, split) may be grouped the same way, but not in the same group as operations.
 * Group state is per thread: a group opened on one thread cannot be closed on another.
 */

/* Opens a (possibly nested) group on the calling thread. Never blocks. Errors: none in normal use. */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);

/* Closes the innermost group; closing the outermost one starts everything collected. For device communicators it
 * returns once the operations are enqueued on their streams; for host communicators with NULL streams, once they
 * have completed. Errors of the collected calls that braid can only detect now are returned here (the first one
 * found); communicators initialized in the group that failed are left in the error state. With non-blocking
 * communicators it may return ncclInProgress. Errors: ncclInvalidUsage (no group open on this thread), plus any
 * error of the collected calls. */
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/* Closes the outermost group like ncclGroupEnd but runs nothing: the collected operations are planned, their time is
 * estimated with braid's cost model, stored in simInfo->estimatedTime (microseconds), and the operations are then
 * discarded. simInfo must be initialized with NCCL_SIM_INFO_INITIALIZER. Errors: ncclInvalidArgument (simInfo NULL
 * or not initialized), ncclInvalidUsage (no group open, or not implemented in this build). */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

/* ---- Parameters (NCCL 2.30) ----------------------------------------------------------------------------------- */

/* braid's knobs (braid-info lists them: NCCL_* for NCCL's, BRAID_* for braid's) by name, with or without the NCCL_
 * prefix: their values as the communicators see them (environment, then configuration file, then default).
 * ncclParamBind looks a knob up once; the handle belongs to braid and lives as long as the library. The typed getters
 * fail with ncclInvalidArgument when the value does not parse as an integer or does not fit the type; ncclParamGetStr
 * gives the text (valid until the thread's next ncclParamGetStr); ncclParamGet copies it (NUL-terminated) into out and
 * sets *len to its bytes, failing when maxLen is too small. ncclParamGetParameter is the keyed form of GetStr (valid
 * until the thread's next call). ncclParamGetAllParameterKeys lists every knob's name (a table valid until the
 * thread's next call); ncclParamDumpAll writes every knob and its value to the log at INFO. Errors: ncclInvalidArgument
 * (NULL arguments, an unknown key). Thread-safe. */
typedef struct ncclParamHandle* ncclParamHandle_t;
ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key);
ncclResult_t pncclParamBind(ncclParamHandle_t* out, const char* key);
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t pncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t pncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t pncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t pncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t pncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t pncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t pncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t* out);
ncclResult_t pncclParamGetU64(ncclParamHandle_t h, uint64_t* out);
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out);
ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char** out);
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
ncclResult_t pncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen);
ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen);
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen);
ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen);
void ncclParamDumpAll(void);
void pncclParamDumpAll(void);

/* ==== braid extensions: NOT part of NCCL's API ====================================================================
 * Programs that must also build against NVIDIA's nccl.h test the macro first:
 *   #ifdef BRAID_HAS_ALLTOALLV ... #endif
 * The functions are named braid*, never nccl*, so they can never clash with a function NCCL adds later. */
#define BRAID_HAS_ALLTOALLV 1

/* Variable-count all-to-all, in MPI_Alltoallv's shape (counts and displacements in elements):
 * rank r sends sendcounts[p] elements starting at sendbuff + sdispls[p] to rank p, and receives recvcounts[p]
 * elements from rank p into recvbuff + rdispls[p]. Each array has nranks entries. Counts must match pairwise:
 * rank r's sendcounts[p] must equal rank p's recvcounts[r] (as in MPI, a mismatch is erroneous; braid then typically
 * fails with ncclRemoteError after BRAID_TIMEOUT). Zero counts skip that pair. Receive regions must not overlap one
 * another; send regions may overlap receive regions (braid then reads a snapshot taken at the call). Same blocking,
 * group and stream rules as ncclAlltoAll (it is a group of ncclSend/ncclRecv). Errors: ncclInvalidArgument (NULL
 * comm or arrays, a NULL buffer with a non-zero count, a count or displacement whose byte offset overflows, bad
 * datatype), ncclInvalidUsage (communicator not usable), ncclRemoteError (a peer failed). */
ncclResult_t braidAlltoAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[], void* recvbuff,
                            const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype, ncclComm_t comm,
                            cudaStream_t stream);

/* The launcher that started this process, as braid reads it: braid's tools (braid-train, the perf tools) use this
 * rather than reading launcher variables themselves, so every program agrees on ranks and on the rendezvous.
 * Rank and size come from the first complete pair of WORLD_SIZE/RANK (braidrun, torchrun), OMPI_COMM_WORLD_SIZE/
 * OMPI_COMM_WORLD_RANK (Open MPI), PMI_SIZE/PMI_RANK (MPICH, Intel MPI, Slurm's PMI), SLURM_STEP_NUM_TASKS/
 * SLURM_PROCID (srun); without any, the process is rank 0 of 1 and source is "". The rendezvous, commId, is
 * NCCL_COMM_ID when set; else MASTER_ADDR (under srun without it, the first host of SLURM_STEP_NODELIST; else
 * 127.0.0.1) and MASTER_PORT (default 29500), plus one under torchrun (TORCHELASTIC_RUN_ID set), because
 * torchrun's agent already listens on MASTER_PORT with its own store. To initialise from it, every rank sets
 * NCCL_COMM_ID to commId, calls ncclGetUniqueId, then ncclCommInitRank(&comm, nranks, id, rank).
 * Thread-safe; reads the environment at each call. Errors: ncclInvalidArgument (env NULL; a size that is not a
 * positive integer or a rank not below it, naming the variable and value). A malformed MASTER_PORT is not an error
 * here (an MPI launch may not need it): masterPort is then 0, rendezvousError says why, and commId is "" unless
 * NCCL_COMM_ID is set. */
#define BRAID_HAS_LAUNCH_ENV 1
typedef struct {
  int rank;                  /* this process's rank among the launched processes */
  int nranks;                /* launched processes */
  int localRank;             /* among its host's processes (LOCAL_RANK, ...); rank when no launcher says */
  int localSize;             /* processes on its host (LOCAL_WORLD_SIZE, ...); 0 when a launcher does not say */
  int torchrun;              /* 1 under torchrun */
  int commIdFromUser;        /* 1 when commId is the user's NCCL_COMM_ID */
  int masterPort;            /* where global rank 0's bootstrap listens; 0 when unusable */
  char source[64];           /* the variables rank and size came from, e.g. "WORLD_SIZE/RANK"; "" without one */
  char masterAddr[256];      /* global rank 0's host */
  char commId[320];          /* "host:port" of the rendezvous; "" when unusable */
  char rendezvousError[256]; /* why masterPort is 0 ("" when it is usable) */
} braidLaunchEnv_t;
ncclResult_t braidGetLaunchEnv(braidLaunchEnv_t* env);

#ifdef __cplusplus
} /* extern "C" */
#endif

#undef BRAID_NCCL_DEPRECATED_

#endif /* NCCL_H_ */
