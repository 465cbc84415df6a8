/* A tuner plugin built as a third party builds one: C99, only include/nccl_tuner.h. Compiled once per ABI version
 * (BRAID_TUNER_ABI = 3, 5 or 7). What it does is set by the environment the test gives it:
 *   BRAID_TEST_TUNER_FORCE=ALGO/PROTO    sets that cost-table entry to 0 for all-reduce ("tree/simple", "pat/simple")
 *   BRAID_TEST_TUNER_CHANNELS=N          sets *nChannels for all-reduce
 *   BRAID_TEST_TUNER_FAIL=1              getCollInfo returns ncclInternalError
 *   BRAID_TEST_TUNER_INIT_FAIL=1         init returns ncclInternalError
 *   BRAID_TEST_TUNER_INIT_FAIL_NTH=N     the N-th init of the process (1-based) returns ncclInternalError
 *   BRAID_TEST_TUNER_LOG=path            appends one line per call: "init v<abi> nranks nnodes", "coll <func> <bytes>
 *                                        <ring/simple> <tree/simple> <pat/simple>", "finalize"
 *   BRAID_TEST_TUNER_RING_LATENCY=us     (v5, v7) sets NCCL's base latency of every ring protocol to `us` in the
 *                                        constants init receives, as a plugin that retunes NCCL's model does
 *   BRAID_TEST_TUNER_EDIT_NTH=N          with the above: only the N-th init of the process (1-based) edits */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_tuner.h"

#ifndef BRAID_TUNER_ABI
#define BRAID_TUNER_ABI 7
#endif

typedef struct {
  int forceAlgo, forceProto, channels, fail;
  char log[512];
} SampleCtx;

static void logLine(const SampleCtx* c, const char* line) {
  if (c->log[0] == 0) return;
  FILE* f = fopen(c->log, "a");
  if (f == NULL) return;
  fputs(line, f);
  fclose(f);
}

static int algoId(const char* s) {
  if (strncmp(s, "tree", 4) == 0) return NCCL_ALGO_TREE;
  if (strncmp(s, "ring", 4) == 0) return NCCL_ALGO_RING;
  if (strncmp(s, "nvlstree", 8) == 0) return NCCL_ALGO_NVLS_TREE;
  if (strncmp(s, "nvls", 4) == 0) return NCCL_ALGO_NVLS;
  if (strncmp(s, "pat", 3) == 0) return NCCL_ALGO_PAT;
  return NCCL_ALGO_UNDEF;
}

static int protoId(const char* s) {
  const char* p = strchr(s, '/');
  if (p == NULL) return NCCL_PROTO_UNDEF;
  if (strcmp(p + 1, "ll") == 0) return NCCL_PROTO_LL;
  if (strcmp(p + 1, "ll128") == 0) return NCCL_PROTO_LL128;
  if (strcmp(p + 1, "simple") == 0) return NCCL_PROTO_SIMPLE;
  return NCCL_PROTO_UNDEF;
}

static ncclResult_t sampleInit(void** ctx, size_t nRanks, size_t nNodes) {
  const char* env;
  SampleCtx* c;
  char line[128];
  static int inits = 0;
  const int nth = __atomic_add_fetch(&inits, 1, __ATOMIC_RELAXED);
  if (getenv("BRAID_TEST_TUNER_INIT_FAIL") != NULL) return ncclInternalError;
  if ((env = getenv("BRAID_TEST_TUNER_INIT_FAIL_NTH")) != NULL && atoi(env) == nth) return ncclInternalError;
  c = (SampleCtx*)calloc(1, sizeof(SampleCtx));
  if (c == NULL) return ncclSystemError;
  c->forceAlgo = NCCL_ALGO_UNDEF;
  c->forceProto = NCCL_PROTO_UNDEF;
  if ((env = getenv("BRAID_TEST_TUNER_FORCE")) != NULL) {
    c->forceAlgo = algoId(env);
    c->forceProto = protoId(env);
  }
  if ((env = getenv("BRAID_TEST_TUNER_CHANNELS")) != NULL) c->channels = atoi(env);
  c->fail = getenv("BRAID_TEST_TUNER_FAIL") != NULL;
  if ((env = getenv("BRAID_TEST_TUNER_LOG")) != NULL) snprintf(c->log, sizeof(c->log), "%s", env);
  snprintf(line, sizeof(line), "init v%d %zu %zu\n", BRAID_TUNER_ABI, nRanks, nNodes);
  logLine(c, line);
  *ctx = c;
  return ncclSuccess;
}

static ncclResult_t sampleGetCollInfo(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                                      float** collCostTable, int numAlgo, int numProto, int regBuff, int* nChannels) {
  SampleCtx* c = (SampleCtx*)ctx;
  float(*table)[NCCL_NUM_PROTOCOLS] = (float(*)[NCCL_NUM_PROTOCOLS])collCostTable;
  char line[256];
  (void)numPipeOps;
  (void)regBuff;
  if (numAlgo != NCCL_NUM_ALGORITHMS || numProto != NCCL_NUM_PROTOCOLS) return ncclInvalidArgument;
  snprintf(line, sizeof(line), "coll %d %zu %g %g %g\n", (int)collType, nBytes,
           table[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE], table[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE],
           table[NCCL_ALGO_PAT][NCCL_PROTO_SIMPLE]);
  logLine(c, line);
  if (c->fail) return ncclInternalError;
  if (collType != ncclFuncAllReduce) return ncclSuccess;
  if (c->forceAlgo >= 0 && c->forceProto >= 0) table[c->forceAlgo][c->forceProto] = 0.0f;
  if (c->channels > 0) *nChannels = c->channels;
  return ncclSuccess;
}

static ncclResult_t sampleFinalize(void* ctx) {
  logLine((SampleCtx*)ctx, "finalize\n");
  free(ctx);
  return ncclSuccess;
}

#if BRAID_TUNER_ABI != 3
static void editConstants(double baseLatencies[][NCCL_NUM_PROTOCOLS_V5]) {
  const char* env = getenv("BRAID_TEST_TUNER_RING_LATENCY");
  const char* nth = getenv("BRAID_TEST_TUNER_EDIT_NTH");
  static int edits = 0;
  const int call = __atomic_add_fetch(&edits, 1, __ATOMIC_RELAXED);
  int p;
  if (env == NULL || (nth != NULL && atoi(nth) != call)) return;
  for (p = 0; p < NCCL_NUM_PROTOCOLS_V5; ++p) baseLatencies[NCCL_ALGO_RING][p] = atof(env);
}
#endif

#if BRAID_TUNER_ABI == 3
static ncclResult_t initV3(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** ctx) {
  (void)logFunction;
  return sampleInit(ctx, nRanks, nNodes);
}
static ncclResult_t getCollInfoV3(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                                  int numAlgo, int numProto, int* nChannels) {
  return sampleGetCollInfo(ctx, collType, nBytes, numPipeOps, collCostTable, numAlgo, numProto, 0, nChannels);
}
__attribute__((visibility("default")))
const ncclTuner_v3_t ncclTunerPlugin_v3 = {"braid-sample-v3", initV3, getCollInfoV3, sampleFinalize};
#elif BRAID_TUNER_ABI == 5
static ncclResult_t initV5(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                           ncclNvlDomainInfo_v5_t* nvl, ncclTunerConstants_v5_t* constants) {
  (void)commId;
  (void)logFunction;
  /* NCCL's defaults arrive: Hopper's one-node LL cap is 141 GB/s; one NVLink domain per host. */
  if (constants->llMaxBws[NCCL_HOPPER_COMPCAP_IDX][NCCL_TUNING_SCALE_1NODE] != 141.0) return ncclInvalidArgument;
  if (nvl->nNvlDomains != (int)nNodes || nvl->maxRanksPerNvlDomain < 1) return ncclInvalidArgument;
  editConstants(constants->baseLatencies);
  return sampleInit(ctx, nRanks, nNodes);
}
__attribute__((visibility("default")))
const ncclTuner_v5_t ncclTunerPlugin_v5 = {"braid-sample-v5", initV5, sampleGetCollInfo, sampleFinalize};
#else
static ncclResult_t initV7(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                           ncclNvlDomainInfo_v7_t* nvl, ncclTunerConstants_v7_t* constants) {
  (void)commId;
  (void)logFunction;
  if (constants->llMaxBws[NCCL_HOPPER_COMPCAP_IDX][NCCL_TUNING_SCALE_1NODE] != 141.0) return ncclInvalidArgument;
  if (nvl->nNvlDomains != (int)nNodes || nvl->maxRanksPerNvlDomain < 1) return ncclInvalidArgument;
  editConstants(constants->baseLatencies);
  return sampleInit(ctx, nRanks, nNodes);
}
/* An older table too, as real plugins export: the loader must take v7. */
__attribute__((visibility("default"))) const ncclTuner_v3_t ncclTunerPlugin_v3 = {"braid-sample-old", NULL, NULL, NULL};
__attribute__((visibility("default")))
const ncclTuner_v7_t ncclTunerPlugin_v7 = {"braid-sample-v7", initV7, sampleGetCollInfo, sampleFinalize, NULL};
#endif
