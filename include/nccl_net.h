/*
 * nccl_net.h: braid's network-plugin ABI, binary compatible with NCCL's ncclNet_v8 to ncclNet_v12.
 *
 * A network ("net plugin") is a table of C function pointers exported from a shared library under a versioned
 * symbol name:
 *
 *     ncclNetPlugin_v12   (type ncclNet_v12_t, NCCL 2.30-2.32)
 *     ncclNetPlugin_v11   (type ncclNet_v11_t, NCCL 2.28-2.29)
 *     ncclNetPlugin_v10   (type ncclNet_v10_t)
 *     ncclNetPlugin_v9    (type ncclNet_v9_t)
 *     ncclNetPlugin_v8    (type ncclNet_v8_t)
 *
 * A plugin may export several; the loader takes the newest it supports. Plugins written against NVIDIA's
 * ext-net headers (aws-ofi-nccl, nccl-rdma-sharp-plugins, ...) load unchanged: the structs below have the same
 * members, in the same order, with the same types. braid's own networks (Socket, IB, OFI) implement ncclNet_v8_t
 * through this same header, so every test of a built-in network also tests the plugin path.
 *
 * This header is C99 and needs only nccl.h (for ncclResult_t) and <stdint.h>/<stddef.h>.
 *
 * CONTRACT (applies to every version)
 *
 * Threads. init() is called once (v8-v10; v11+: once per communicator, the first before anything else), from one
 *   thread at a time. After that, calls on *different*
 *   comm objects may come from different threads at the same time; calls on *one* comm object (a listen, send or
 *   receive comm, and the requests made from it) are never concurrent: the caller serialises them. devices() and
 *   getProperties() may be called from any thread.
 *
 * Blocking. No function may wait for the remote peer. listen() returns at once. connect() and accept() make what
 *   progress they can and return ncclSuccess with *sendComm / *recvComm == NULL when the connection is not yet
 *   established; the caller calls again (with the same handle / listenComm) until it is non-NULL. isend() and
 *   irecv() return at once; *request == NULL means "cannot be posted now, try again later" (too many requests in
 *   flight: at most NCCL_NET_MAX_REQUESTS per comm), not an error. test() reports progress and never waits.
 *
 * Handles. listen() writes at most NCCL_NET_HANDLE_MAXSIZE bytes into `handle`; the caller ships those bytes to
 *   the peer by its own means and passes them to connect(). connect() may use the handle buffer as scratch
 *   space to remember where a pending connection stands, so the caller must pass the same buffer on each retry.
 *
 * Matching. Messages between one send comm and one receive comm are matched in order. irecv() with n > 1 (up to
 *   the device's maxRecvs) posts a group of n buffers; each incoming isend goes to the buffer whose tag equals its
 *   tag. A message larger than its receive buffer is an error (the receiver's test() fails); a smaller one is
 *   fine and test() reports the size received.
 *
 * Memory. Buffers passed to isend/irecv must be registered with regMr()/regMrDmaBuf() on the same comm (or any
 *   comm of the same device when regIsGlobal is set), and stay valid until the request completes. The plugin owns
 *   comm objects, requests and memory handles; the caller releases them with closeSend/closeRecv/closeListen,
 *   test() returning done=1 (requests) and deregMr(). A request is invalid after test() reported done.
 *   Properties' name and pciPath strings belong to the plugin and stay valid until the plugin is unloaded.
 *
 * Errors. Any function may fail with ncclSystemError (local OS or library failure), ncclRemoteError (the peer
 *   went away or misbehaved), ncclInvalidArgument / ncclInvalidUsage (caller error) or ncclInternalError. A
 *   plugin explains a failure through the logger given to init() (level NCCL_LOG_WARN) before returning it.
 *   After an error on a comm, the only valid call on it is its close function.
 */
#ifndef NCCL_NET_H_
#define NCCL_NET_H_

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most bytes listen() may write into the connection handle. */
#define NCCL_NET_HANDLE_MAXSIZE 128
/* Most requests a comm object has in flight; isend/irecv beyond that return *request == NULL. */
#define NCCL_NET_MAX_REQUESTS 32
/* Largest message the ABI can describe (1 TiB). */
#define NCCL_MAX_NET_SIZE_BYTES (1 * 1024 * 1024 * 1024 * 1024L)
/* Reserved for the v11+ ABI (a receive whose completion the caller does not need); the v8-v10 path never uses it. */
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1

/* Memory kinds: bits of ncclNetProperties.ptrSupport and values of regMr's `type`. */
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

/* Logging. The values are NCCL's; braid's logger (src/common/logging.h) uses the same numbers. */
typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5,
  NCCL_LOG_ATTN = 6 /* NCCL 2.32: a notice, between WARN and INFO in verbosity */
} ncclDebugLogLevel;

typedef enum {
  NCCL_INIT = 1,
  NCCL_COLL = 2,
  NCCL_P2P = 4,
  NCCL_SHM = 8,
  NCCL_NET = 16,
  NCCL_GRAPH = 32,
  NCCL_TUNING = 64,
  NCCL_ENV = 128,
  NCCL_ALLOC = 256,
  NCCL_CALL = 512,
  NCCL_PROXY = 1024,
  NCCL_NVLS = 2048,
  NCCL_BOOTSTRAP = 4096,
  NCCL_REG = 8192,
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

/* The logger handed to init(): printf-style; `flags` is a mask of ncclDebugLogSubSys. Thread-safe. */
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);

/* v10 profiler hook handed to init(). braid has no profiler plugin yet and always passes NULL. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* phandle, int64_t pluginId,
                                               void* extData);

/* Device offload ("unpack" of GPU-direct TCPX-style networks). Host networks report NCCL_NET_DEVICE_HOST. */
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
#define NCCL_NET_MTU_SIZE 4096
#define NCCL_NET_DEVICE_UNPACK_VERSION 0x7
/* The GIN values name GPU-initiated networking backends (nccl_device/gin.h's backend masks); no braid network
 * reports them. */
typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2,
  NCCL_NET_DEVICE_GIN_GDAKI = 3,
  NCCL_NET_DEVICE_GIN_GPI = 4,
  NCCL_NET_DEVICE_GIN_EFA_GDA = 5
} ncclNetDeviceType;

/* Returned through connect/accept's last argument when a plugin offloads to the device; braid passes NULL there
 * (it never asks for offload), so plugins must leave it alone. */
typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v8_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v9_t ncclNetDeviceHandle_v10_t;

/* ---------------------------------------------------------------------------------------------------------------
 * Version 8 (NCCL 2.19-2.21): int sizes on isend/irecv.
 * ------------------------------------------------------------------------------------------------------------- */
typedef struct {
  char* name;                      /* device name, for logs ("eth0", "mlx5_0") */
  char* pciPath;                   /* sysfs path of the PCI device, or NULL when it has none */
  uint64_t guid;                   /* identifies the NIC chip (several PCI functions may share one) */
  int ptrSupport;                  /* NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF */
  int regIsGlobal;                 /* 1: a memory handle is valid on every comm of the device */
  int speed;                       /* port speed, Mbit/s */
  int port;                        /* port number (IB) or 0 */
  float latency;                   /* network latency, microseconds (0: unknown) */
  int maxComms;                    /* most comm objects the device supports */
  int maxRecvs;                    /* most buffers one grouped irecv accepts */
  ncclNetDeviceType netDeviceType; /* offload kind */
  int netDeviceVersion;            /* offload version (NCCL_NET_DEVICE_INVALID_VERSION for host) */
} ncclNetProperties_v8_t;

typedef struct {
  const char* name; /* network name: matched case-insensitively against NCCL_NET */
  /* Called once before anything else. Returning an error means "this network is unusable here". */
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  /* Number of devices; 0 is a valid answer (the loader then tries the next network). */
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  /* Creates a listening object on device `dev` and writes its connection handle (<= 128 bytes). */
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* Non-blocking: *sendComm stays NULL until established; call again with the same handle. */
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v8_t** sendDevComm);
  /* Non-blocking: *recvComm stays NULL until a peer's connect() reached this listener. */
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t** recvDevComm);
  /* Registers [data, data+size) of kind `type` (NCCL_PTR_*) on comm (a send or receive comm). */
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  /* Same for memory described by a DMA-BUF fd and offset. Networks without DMA-BUF return ncclInternalError. */
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  /* Posts a send of `size` bytes with `tag`. *request NULL: retry later. */
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  /* Posts a group of n receives (n <= maxRecvs): buffer i takes the message whose tag is tags[i], of at most
   * sizes[i] bytes. One request covers the group. */
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  /* Makes received CUDA data visible to the GPU; for host memory it completes at once (or *request = NULL). */
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  /* *done = 1 when complete; then sizes[i] (if sizes != NULL) holds the bytes moved for each buffer of the request
   * (one entry for a send) and the request is released. */
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  /* Device-offload plugins only: a device-usable copy of mhandle. Others return ncclInternalError. */
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  /* Device-offload plugins only: the device finished with a receive. Others return ncclSuccess or an error. */
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v8_t;

/* ---------------------------------------------------------------------------------------------------------------
 * Version 9 (NCCL 2.22-2.23): size_t sizes on isend/irecv, virtual devices, forceFlush, max transfer sizes.
 * ------------------------------------------------------------------------------------------------------------- */
#define NCCL_NET_MAX_DEVS_PER_NIC_V9 4
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V9];
} ncclNetVDeviceProps_v9_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush; /* 1: the caller must iflush every receive */
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v9_t vProps; /* physical devices behind a virtual one */
  size_t maxP2pBytes;              /* largest point-to-point message */
  size_t maxCollBytes;             /* largest collective message */
} ncclNetProperties_v9_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v9_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v9_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  /* Fuses the physical devices in props into one virtual device; *d receives its index. */
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v9_t* props);
} ncclNet_v9_t;

/* ---------------------------------------------------------------------------------------------------------------
 * Version 10 (NCCL 2.24-2.26): per-connection config (traffic class), profiler handles on isend/irecv.
 * ------------------------------------------------------------------------------------------------------------- */
#define NCCL_NET_MAX_DEVS_PER_NIC_V10 4
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V10];
} ncclNetVDeviceProps_v10_t;

#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1
typedef struct {
  int trafficClass; /* plugin-specific traffic class, or NCCL_NET_TRAFFIC_CLASS_UNDEF */
} ncclNetCommConfig_v10_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v10_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v10_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v10_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v10_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  /* phandle: the caller's profiler handle (braid passes NULL). */
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v10_t* props);
} ncclNet_v10_t;

/* ---------------------------------------------------------------------------------------------------------------
 * Version 11 (NCCL 2.28-2.29): a context per communicator. init() runs once for every communicator that uses the
 * network, with the communicator's id and config, and returns the plugin's context for it; listen() and connect()
 * take that context (connect no longer takes the config); finalize(ctx) releases it when the communicator is done
 * with the network (after every comm object made through it is closed). setNetAttr(ctx, attr), which may be NULL,
 * hints at how the communicator will use the network. devices(), getProperties() and makeVDevice() stay
 * process-wide, and are called only after a first init(). Every other function keeps its v10 signature.
 * ------------------------------------------------------------------------------------------------------------- */
#define NCCL_NET_MAX_DEVS_PER_NIC_V11 4
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V11];
} ncclNetVDeviceProps_v11_t;

typedef ncclNetCommConfig_v10_t ncclNetCommConfig_v11_t;
typedef ncclNetDeviceHandle_v10_t ncclNetDeviceHandle_v11_t;

/* Reserved for NCCL's multi-request posting (maxMultiRequestSize); braid never passes it. */
#define NCCL_NET_MULTI_REQUEST 0x2

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v11_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize; /* most requests one multi-request may hold (1: none) */
} ncclNetProperties_v11_t;

/* setNetAttr's hints. Every field may be NCCL_NET_ATTR_UNDEF (-1): nothing is said about it. */
#define NCCL_NET_ATTR_UNDEF -1
typedef struct {
  int32_t maxConcurrentPeers; /* peers one rank talks to at once through this communicator */
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer; /* connections (channels) to one peer */
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;
typedef struct {
  ncclNetCommAttr_v11_t sendCommAttr;
  ncclNetCommAttr_v11_t recvCommAttr;
  uint32_t op;    /* bit (1 << ncclFunc_t) per collective kind (nccl_tuner.h) */
  uint32_t algo;  /* bit (1 << NCCL_ALGO_*) */
  uint32_t proto; /* bit (1 << NCCL_PROTO_*) */
} ncclNetAttr_v11_t;
#define NCCL_NET_ATTR_INIT                                                                            \
  {                                                                                                   \
    {NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF},             \
        {NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF},         \
        (uint32_t)NCCL_NET_ATTR_UNDEF, (uint32_t)NCCL_NET_ATTR_UNDEF, (uint32_t)NCCL_NET_ATTR_UNDEF \
  }

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config, ncclDebugLogger_t logFunction,
                       ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v11_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v11_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v11_t* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v11_t* netAttr);
} ncclNet_v11_t;

/* ---------------------------------------------------------------------------------------------------------------
 * Version 12 (NCCL 2.30-2.32): v11's functions, up to 8 devices per virtual NIC, and each device's rail and plane.
 * ------------------------------------------------------------------------------------------------------------- */
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
#define NCCL_NET_ID_UNDEF -1
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

typedef ncclNetCommConfig_v11_t ncclNetCommConfig_v12_t;
typedef ncclNetDeviceHandle_v11_t ncclNetDeviceHandle_v12_t;
typedef ncclNetCommAttr_v11_t ncclNetCommAttr_v12_t;
typedef ncclNetAttr_v11_t ncclNetAttr_v12_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v12_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;  /* the rail the device is on, or NCCL_NET_ID_UNDEF */
  int16_t planeId; /* its plane, or NCCL_NET_ID_UNDEF */
} ncclNetProperties_v12_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config, ncclDebugLogger_t logFunction,
                       ncclProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm, ncclNetDeviceHandle_v12_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v12_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v12_t* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v12_t* netAttr);
} ncclNet_v12_t;

/* The names newest-first, for plugin authors who want one spelling (NCCL 2.30's). */
#define NCCL_NET_MAX_DEVS_PER_NIC NCCL_NET_MAX_DEVS_PER_NIC_V12
typedef ncclNet_v12_t ncclNet_t;
typedef ncclNetProperties_v12_t ncclNetProperties_t;
typedef ncclNetVDeviceProps_v12_t ncclNetVDeviceProps_t;
typedef ncclNetCommConfig_v12_t ncclNetCommConfig_t;
typedef ncclNetDeviceHandle_v12_t ncclNetDeviceHandle_t;
typedef ncclNetAttr_v12_t ncclNetAttr_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_NET_H_ */
