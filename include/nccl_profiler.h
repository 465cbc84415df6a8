/*
 * nccl_profiler.h: braid's profiler-plugin ABI, binary compatible with NCCL's ncclProfiler_v4 .. ncclProfiler_v7.
 *
 * A profiler plugin is a shared library exporting a table of C function pointers under a versioned symbol:
 *
 *     ncclProfiler_v7 (ncclProfiler_v7_t, NCCL 2.31-2.32)    ncclProfiler_v6 (ncclProfiler_v6_t, 2.29-2.30)
 *     ncclProfiler_v5 (ncclProfiler_v5_t, 2.28)              ncclProfiler_v4 (ncclProfiler_v4_t, 2.27)
 *
 * braid takes the newest one the library exports; plugins built against NVIDIA's headers load unchanged (the types
 * below have NCCL's members, order and sizes, checked on LP64 by tests/profiler/profiler_abi_c11.c).
 *
 * WHERE IT IS LOOKED FOR (NCCL_PROFILER_PLUGIN, NCCL's rule)
 *   unset: libnccl-profiler.so, then the net plugin's library; "X": X as given (a path or soname), then
 *   libnccl-profiler-X.so when X has no '/' and is not lib*.so; any prefix of "STATIC_PLUGIN": the program itself;
 *   "none": no profiler. A library that cannot be loaded, or exports none of the symbols, is not an error (INFO;
 *   WARN when NCCL_PROFILER_PLUGIN named it). The library is loaded once per process.
 *
 * CONTRACT (what braid emits; docs/profiler.md)
 *   init() runs once per communicator, on every rank, at ncclCommInit*; finalize() when it is destroyed. Every
 *   init() gets the same process-wide int as eActivationMask: the plugin writes the event types it wants there
 *   (NCCL's example plugins read NCCL_PROFILE_EVENT_MASK for it) and may change it at any time; braid reads it at
 *   each API call. Events (v5+), per communicator and group:
 *     GroupApi   at the group's first operation on the communicator (parentObj NULL); states GroupStartApiStop
 *                right after, GroupEndApiStart when the group launches; stopped when the group's work is done.
 *     CollApi / P2pApi   one per API call (parentObj: the GroupApi event), started and stopped within the call.
 *     Group      when the group launches (parentObj NULL), stopped after its operations' events.
 *     Coll / P2p one per operation (parentObj: its CollApi/P2pApi event, v4: the Group event; parentGroup: the
 *                Group event); on host communicators started when braid chose its algorithm and stopped when
 *                the operation is complete, on CUDA communicators stopped once it is enqueued (NCCL's timing).
 *     KernelLaunch  CUDA communicators (ring and tree path): around the launch of the group's kernels (parentObj:
 *                the GroupApi event; kernelLaunch.stream: the first stream of the group's operations).
 *   A parent is started whenever any of its descendants' bits is in the mask (NCCL does the same); a plugin
 *   filters by its own mask. A stopped event's handle stays a valid parent until its children are stopped.
 *   braid does not emit KernelCh, KernelPhase, ProxyOp, ProxyStep, ProxyCtrl, NetPlugin or the
 *   copy-engine events (no such stages exist on host communicators, and the CUDA backend's kernel timestamps are
 *   not collected yet).
 *   The strings in a descriptor are valid during startEvent only.
 *
 * This header is C11 (anonymous unions, as in NCCL's own) and needs nccl.h and nccl_net.h (the logger type).
 */
#ifndef NCCL_PROFILER_H_
#define NCCL_PROFILER_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nccl.h"
#include "nccl_net.h"

#ifdef __cplusplus
extern "C" {
#else
#include <stdbool.h>
#endif

/* Event types: one bit each (eActivationMask is an OR of them; a descriptor's `type` is one). */
enum {
  ncclProfileGroup = (1 << 0),
  ncclProfileColl = (1 << 1),
  ncclProfileP2p = (1 << 2),
  ncclProfileProxyOp = (1 << 3),
  ncclProfileProxyStep = (1 << 4),
  ncclProfileProxyCtrl = (1 << 5),
  ncclProfileKernelCh = (1 << 6),
  ncclProfileNetPlugin = (1 << 7),
  ncclProfileGroupApi = (1 << 8),      /* v5 */
  ncclProfileCollApi = (1 << 9),       /* v5 */
  ncclProfileP2pApi = (1 << 10),       /* v5 */
  ncclProfileKernelLaunch = (1 << 11), /* v5 */
  ncclProfileCeColl = (1 << 12),       /* v6 */
  ncclProfileCeSync = (1 << 13),       /* v6 */
  ncclProfileCeBatch = (1 << 14),      /* v6 */
  ncclProfileKernelPhase = (1 << 15)   /* v7 */
};

/* Event states (recordEventState), NCCL's numbers. */
typedef enum {
  ncclProfilerProxyOpSendPosted = 0,
  ncclProfilerProxyOpSendRemFifoWait = 1,
  ncclProfilerProxyOpSendTransmitted = 2,
  ncclProfilerProxyOpSendDone = 3,
  ncclProfilerProxyOpRecvPosted = 4,
  ncclProfilerProxyOpRecvReceived = 5,
  ncclProfilerProxyOpRecvTransmitted = 6,
  ncclProfilerProxyOpRecvDone = 7,
  ncclProfilerProxyStepSendGPUWait = 8,
  ncclProfilerProxyStepSendWait = 9,
  ncclProfilerProxyStepRecvWait = 10,
  ncclProfilerProxyStepRecvFlushWait = 11,
  ncclProfilerProxyStepRecvGPUWait = 12,
  ncclProfilerProxyCtrlIdle = 13,
  ncclProfilerProxyCtrlActive = 14,
  ncclProfilerProxyCtrlSleep = 15,
  ncclProfilerProxyCtrlWakeup = 16,
  ncclProfilerProxyCtrlAppend = 17,
  ncclProfilerProxyCtrlAppendEnd = 18,
  ncclProfilerProxyOpInProgress_v4 = 19,
  ncclProfilerProxyStepSendPeerWait_v4 = 20,
  ncclProfilerNetPluginUpdate = 21,
  ncclProfilerKernelChStop = 22,
  ncclProfilerGroupStartApiStop = 23, /* v5 */
  ncclProfilerGroupEndApiStart = 24,  /* v5 */
  ncclProfilerCeCollStart = 25,       /* v6 */
  ncclProfilerCeCollComplete = 26,
  ncclProfilerCeSyncStart = 27,
  ncclProfilerCeSyncComplete = 28,
  ncclProfilerCeBatchStart = 29,
  ncclProfilerCeBatchComplete = 30,
  ncclProfilerKernelPhaseStop = 31 /* v7 */
} ncclProfilerEventState_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v4_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v5_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v6_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v7_t;

/* Network-defined events: netPlugin.id is the type | the version. */
#define NCCL_PROFILER_NET_VER_BITS (16)
#define NCCL_PROFILER_NET_VER_MASK (~0U >> NCCL_PROFILER_NET_VER_BITS)
#define NCCL_PROFILER_NET_TYPE_MASK (~0U << NCCL_PROFILER_NET_VER_BITS)
typedef enum {
  NCCL_PROFILER_NET_TYPE_IB = (1U << NCCL_PROFILER_NET_VER_BITS),
  NCCL_PROFILER_NET_TYPE_SOCK = (2U << NCCL_PROFILER_NET_VER_BITS)
} ncclProfilerNetType;

/* ---- v4 (NCCL 2.27) ------------------------------------------------------------------------------------------ */
typedef struct {
  uint8_t type; /* uint8_t in v4 only */
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} ncclProfilerEventDescr_v4_t;

typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} ncclProfilerEventStateArgs_v4_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v4_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v4_t eState,
                                   ncclProfilerEventStateArgs_v4_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v4_t;

/* ---- v5 (NCCL 2.28): API events, a 64-bit type, the communicator id first in init -------------------------- */
typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} ncclProfilerEventDescr_v5_t;

typedef ncclProfilerEventStateArgs_v4_t ncclProfilerEventStateArgs_v5_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v5_t eState,
                                   ncclProfilerEventStateArgs_v5_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v5_t;

/* ---- v6 (NCCL 2.29): v5 plus copy-engine collective events ------------------------------------------------- */
typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
} ncclProfilerEventDescr_v6_t;

typedef ncclProfilerEventStateArgs_v5_t ncclProfilerEventStateArgs_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v6_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v6_t eState,
                                   ncclProfilerEventStateArgs_v6_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v6_t;

/* ---- v7 (NCCL 2.31): user tags (ncclCollConfig_t.userProfilerTag), symmetric-kernel variants, kernel phases -- */
typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
      uint64_t userTag; /* 0: untagged */
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
      uint64_t userTag;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
      const char* kernelVariant; /* a symmetric kernel's variant, else NULL */
      bool isSymColl;
      uint64_t userTag;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
      uint64_t userTag;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
      uint64_t userTag;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
    struct {
      uint8_t channelId;
      uint8_t phaseId; /* 0 initial sync, 1 compute, 2 final sync */
      const char* phaseName;
      uint64_t pTimer;
    } kernelPhase;
  };
} ncclProfilerEventDescr_v7_t;

typedef ncclProfilerEventStateArgs_v6_t ncclProfilerEventStateArgs_v7_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v7_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v7_t eState,
                                   ncclProfilerEventStateArgs_v7_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} ncclProfiler_v7_t;

typedef ncclProfiler_v7_t ncclProfiler_t;
typedef ncclProfilerEventDescr_v7_t ncclProfilerEventDescr_t;
typedef ncclProfilerEventStateArgs_v7_t ncclProfilerEventStateArgs_t;

#ifdef __cplusplus
}
#endif

#endif /* NCCL_PROFILER_H_ */
