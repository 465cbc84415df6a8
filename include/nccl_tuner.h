/*
 * nccl_tuner.h: braid's tuner-plugin ABI, binary compatible with NCCL's ncclTuner_v3 .. ncclTuner_v7.
 *
 * A tuner plugin is a shared library exporting a table of C function pointers under a versioned symbol:
 *
 *     ncclTunerPlugin_v7 (ncclTuner_v7_t, NCCL 2.32)    ncclTunerPlugin_v6 (ncclTuner_v6_t, 2.30)
 *     ncclTunerPlugin_v5 (ncclTuner_v5_t, 2.28)         ncclTunerPlugin_v4 (ncclTuner_v4_t, 2.24)
 *     ncclTunerPlugin_v3 (ncclTuner_v3_t, 2.22)
 *
 * braid takes the newest one the library exports. Plugins built against NVIDIA's headers load unchanged: the types
 * below have NCCL's members, order and sizes.
 *
 * WHERE IT IS LOOKED FOR (NCCL_TUNER_PLUGIN)
 *   unset: libnccl-tuner.so, then the net plugin's library (NCCL_NET_PLUGIN's rule: libnccl-net.so or
 *   libnccl-net-NAME.so), as NCCL 2.28+ does (one library may provide several plugin kinds); "NAME":
 *   libnccl-tuner-NAME.so, then NAME as given (a path or soname); "none": no tuner. A library that cannot be loaded,
 *   or exports no tuner symbol, is not an error: braid's own model decides (INFO; WARN when NCCL_TUNER_PLUGIN named
 *   it).
 *
 * CONTRACT
 *   init() runs once per communicator, on every rank, at ncclCommInit*; finalize()/destroy() when it is destroyed.
 *   getCollInfo() is asked about a collective (not send/receive, not all-to-all: NCCL asks about neither) before
 *   braid picks its algorithm; collCostTable points at a float[numAlgo][numProto] (cast to float**, as NCCL does)
 *   holding braid's predicted microseconds for every pair braid can run for it, NCCL_ALGO_PROTO_IGNORE (-1) for the
 *   rest. The plugin may lower or raise entries (0 forces a pair, -1 removes it) and may set *nChannels (unset:
 *   braid's own count). braid then runs the cheapest entry >= 0. An entry the plugin turns on that was -1 is
 *   ignored, with a WARN naming it: braid has no such schedule on that communicator. If the plugin returns an error
 *   or leaves no entry, braid's own choice runs.
 *   Every rank must get the same answers, as in NCCL: the ranks of one collective must run the same algorithm,
 *   protocol and channel count. At init braid checks that every rank loaded the same plugin (name and version);
 *   when one did not, no rank of that communicator uses a tuner (WARN).
 *   The v5+ constants are NCCL's GPU model defaults. braid reads them back after init(): when the plugin edited
 *   them (alike on every rank), a CUDA communicator's NCCL GPU model is rebuilt from them (v7's Rubin row is not
 *   read; not in deterministic mode; docs/tuner.md). getChunkSize (v6, v7) is not called: braid's chunk is its
 *   FIFO slot.
 *
 * This header is C99 and needs nccl.h and nccl_net.h (the logger type).
 */
#ifndef NCCL_TUNER_H_
#define NCCL_TUNER_H_

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"
#include "nccl_net.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The collective a question is about (NCCL's ncclFunc_t values). */
typedef enum {
  ncclFuncBroadcast = 0,
  ncclFuncReduce = 1,
  ncclFuncAllGather = 2,
  ncclFuncReduceScatter = 3,
  ncclFuncAllReduce = 4,
  ncclFuncSendRecv = 5,
  ncclFuncSend = 6,
  ncclFuncRecv = 7,
  ncclFuncAlltoAll = 8,
  ncclFuncScatter = 9,
  ncclFuncGather = 10,
  ncclFuncAllGatherV = 11,
  ncclFuncPutSignal = 12,
  ncclFuncSignal = 13,
  ncclFuncWaitSignal = 14,
  ncclNumFuncs = 15
} ncclFunc_t;

/* Cost-table rows and columns. */
#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NCCL_TUNING_IGNORE -1.0
#define NCCL_ALGO_PROTO_IGNORE NCCL_TUNING_IGNORE

#define NCCL_NUM_ALGORITHMS_V5 7
#define NCCL_NUM_PROTOCOLS_V5 3
#define NCCL_NUM_HW_LINKS_V5 3
#define NCCL_NUM_COMPCAPS_V5 4
#define NCCL_NUM_TUNING_SCALES_V5 3
#define NCCL_NUM_COMPCAPS_V7 5
#define NCCL_NUM_ALGORITHMS NCCL_NUM_ALGORITHMS_V5
#define NCCL_NUM_PROTOCOLS NCCL_NUM_PROTOCOLS_V5

/* Link kinds, compute-capability rows and node-count scales of the constants. */
#define NCCL_HW_NVLINK 0
#define NCCL_HW_PCI 1
#define NCCL_HW_NET 2
#define NCCL_VOLTA_COMPCAP_IDX 0
#define NCCL_AMPERE_COMPCAP_IDX 1
#define NCCL_HOPPER_COMPCAP_IDX 2
#define NCCL_BLACKWELL_COMPCAP_IDX 3
#define NCCL_TUNING_SCALE_1NODE 0
#define NCCL_TUNING_SCALE_2NODES 1
#define NCCL_TUNING_SCALE_4NODES 2

/* v5+: NVLink domains of the communicator (braid: one per host). */
typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;
typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;
typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v7_t;

/* v5/v6: NCCL's GPU model constants (latencies in us, bandwidths in GB/s). */
typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double hwLatencies[NCCL_NUM_HW_LINKS_V5][NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double llMaxBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V5][NCCL_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v5_t;
typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;

/* v7: the same with a fifth compute-capability row. */
typedef struct {
  double baseLatencies[NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double hwLatencies[NCCL_NUM_HW_LINKS_V5][NCCL_NUM_ALGORITHMS_V5][NCCL_NUM_PROTOCOLS_V5];
  double llMaxBws[NCCL_NUM_COMPCAPS_V7][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS_V7][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS_V7][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxTreeBws[NCCL_NUM_COMPCAPS_V7][NCCL_NUM_TUNING_SCALES_V5];
  double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS_V7][NCCL_NUM_TUNING_SCALES_V5];
} ncclTunerConstants_v7_t;

/* v3 (NCCL 2.22): the cost-table interface. */
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v3_t;

/* v4 (2.24): getCollInfo learns whether the buffers can be registered. */
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} ncclTuner_v4_t;

/* v5 (2.28): communicator id, NVLink domains and the editable constants at init; finalize. */
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v5_t* nvlDomainInfo, ncclTunerConstants_v5_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* context);
} ncclTuner_v5_t;

/* v6 (2.30): an optional chunk-size hook (may be NULL). */
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v6_t* nvlDomainInfo, ncclTunerConstants_v6_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* context);
  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algo, int proto, int nChannels,
                               size_t* chunkSize);
} ncclTuner_v6_t;

/* v7 (2.32): the v6 functions over the five-row constants. */
typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       ncclNvlDomainInfo_v7_t* nvlDomainInfo, ncclTunerConstants_v7_t* constants);
  ncclResult_t (*getCollInfo)(void* context, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* context);
  ncclResult_t (*getChunkSize)(void* context, ncclFunc_t collType, size_t nBytes, int algo, int proto, int nChannels,
                               size_t* chunkSize);
} ncclTuner_v7_t;

typedef ncclTuner_v7_t ncclTuner_t;
typedef ncclTunerConstants_v7_t ncclTunerConstants_t;
typedef ncclNvlDomainInfo_v7_t ncclNvlDomainInfo_t;
#define NCCL_TUNER_PLUGIN_SYMBOL "ncclTunerPlugin_v7"

#ifdef __cplusplus
}
#endif

#endif /* NCCL_TUNER_H_ */
