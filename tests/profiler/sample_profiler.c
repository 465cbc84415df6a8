/* A profiler plugin built as a third party builds one: C99, only include/nccl_profiler.h. Compiled once per ABI
 * version (BRAID_PROFILER_ABI = 4, 5, 6 or 7). It records every event it is given, one line each, to the file
 * BRAID_TEST_PROFILER_LOG names (appended; lines of one event never interleave with another's):
 *   init v<abi> rank=<r> nranks=<n> nnodes=<n> name=<commName>          finalize rank=<r>
 *   start <id> <Type> rank=<r> parent=<id or 0> [fields]                stop <id>
 *   state <id> <state number>                                           decline <Type> rank=<r>
 * Fields: GroupApi depth=; CollApi/P2pApi func= count= dtype= [root=] [tag=]; Coll func= count= dtype= root= algo=
 * proto= seq= group= [tag=]; P2p func= count= dtype= peer= group= [tag=]. Like NCCL's example plugin it takes its
 * mask from NCCL_PROFILE_EVENT_MASK (decimal; unset: every type) and declines (a NULL handle) any type outside it.
 * BRAID_TEST_PROFILER_INIT_FAIL=1 makes init fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl_profiler.h"

#ifndef BRAID_PROFILER_ABI
#define BRAID_PROFILER_ABI 7
#endif

#if BRAID_PROFILER_ABI == 4
typedef ncclProfilerEventDescr_v4_t Descr;
typedef ncclProfilerEventStateArgs_v4_t StateArgs;
#elif BRAID_PROFILER_ABI == 5
typedef ncclProfilerEventDescr_v5_t Descr;
typedef ncclProfilerEventStateArgs_v5_t StateArgs;
#elif BRAID_PROFILER_ABI == 6
typedef ncclProfilerEventDescr_v6_t Descr;
typedef ncclProfilerEventStateArgs_v6_t StateArgs;
#else
typedef ncclProfilerEventDescr_v7_t Descr;
typedef ncclProfilerEventStateArgs_v7_t StateArgs;
#endif

typedef struct {
  int rank;
  int mask;
  char log[512];
} Ctx;

/* Events are never freed: a stopped parent stays valid for its children, and the test reads ids through them. */
typedef struct {
  unsigned long id;
  const Ctx* ctx;
} Event;

static unsigned long gNextId = 1;

static void emit(const Ctx* c, const char* line) {
  FILE* f;
  if (c->log[0] == 0) return;
  f = fopen(c->log, "a");
  if (f == NULL) return;
  fputs(line, f); /* one short line per fopen: a single append write */
  fclose(f);
}

static const char* typeName(unsigned long type) {
  switch (type) {
    case ncclProfileGroup:
      return "Group";
    case ncclProfileColl:
      return "Coll";
    case ncclProfileP2p:
      return "P2p";
    case ncclProfileGroupApi:
      return "GroupApi";
    case ncclProfileCollApi:
      return "CollApi";
    case ncclProfileP2pApi:
      return "P2pApi";
    case ncclProfileKernelLaunch:
      return "KernelLaunch";
    default:
      return "Other";
  }
}

static unsigned long idOf(void* handle) {
  return handle == NULL ? 0 : ((Event*)handle)->id;
}

static ncclResult_t initCommon(void** context, int* eActivationMask, const char* commName, int nNodes, int nranks,
                               int rank) {
  const char* env;
  Ctx* c;
  char line[256];
  if (getenv("BRAID_TEST_PROFILER_INIT_FAIL") != NULL) return ncclInternalError;
  c = (Ctx*)calloc(1, sizeof(Ctx));
  if (c == NULL) return ncclSystemError;
  c->rank = rank;
  env = getenv("NCCL_PROFILE_EVENT_MASK");
  c->mask = env != NULL ? atoi(env) : 0xffff;
  __atomic_store_n(eActivationMask, c->mask, __ATOMIC_RELAXED);
  if ((env = getenv("BRAID_TEST_PROFILER_LOG")) != NULL) snprintf(c->log, sizeof(c->log), "%s", env);
  snprintf(line, sizeof(line), "init v%d rank=%d nranks=%d nnodes=%d name=%s\n", BRAID_PROFILER_ABI, rank, nranks,
           nNodes, commName != NULL ? commName : "(null)");
  emit(c, line);
  *context = c;
  return ncclSuccess;
}

#if BRAID_PROFILER_ABI == 4
static ncclResult_t sampleInit(void** context, int* eActivationMask, const char* commName, uint64_t commHash,
                               int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) {
  (void)commHash;
  (void)logfn;
  return initCommon(context, eActivationMask, commName, nNodes, nranks, rank);
}
#else
static ncclResult_t sampleInit(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                               int nranks, int rank, ncclDebugLogger_t logfn) {
  (void)commId;
  (void)logfn;
  return initCommon(context, eActivationMask, commName, nNodes, nranks, rank);
}
#endif

static ncclResult_t sampleStart(void* context, void** eHandle, Descr* d) {
  const Ctx* c = (const Ctx*)context;
  char line[512];
  char fields[384] = "";
  Event* e;
  *eHandle = NULL;
  if ((c->mask & (int)d->type) == 0) {
    snprintf(line, sizeof(line), "decline %s rank=%d\n", typeName(d->type), d->rank);
    emit(c, line);
    return ncclSuccess;
  }
  e = (Event*)calloc(1, sizeof(Event));
  if (e == NULL) return ncclSystemError;
  /* Unique across the processes that append to one log: the pid above 20 bits of a per-process counter. */
  e->id = ((unsigned long)getpid() << 20) | __atomic_fetch_add(&gNextId, 1, __ATOMIC_RELAXED);
  e->ctx = c;
  switch (d->type) {
    case ncclProfileColl:
      snprintf(fields, sizeof(fields), " func=%s count=%zu dtype=%s root=%d algo=%s proto=%s seq=%llu", d->coll.func,
               d->coll.count, d->coll.datatype, d->coll.root, d->coll.algo != NULL ? d->coll.algo : "(null)",
               d->coll.proto != NULL ? d->coll.proto : "(null)", (unsigned long long)d->coll.seqNumber);
#if BRAID_PROFILER_ABI >= 5
      snprintf(fields + strlen(fields), sizeof(fields) - strlen(fields), " group=%lu", idOf(d->coll.parentGroup));
#endif
#if BRAID_PROFILER_ABI >= 7
      snprintf(fields + strlen(fields), sizeof(fields) - strlen(fields), " tag=%llu",
               (unsigned long long)d->coll.userTag);
#endif
      break;
    case ncclProfileP2p:
      snprintf(fields, sizeof(fields), " func=%s count=%zu dtype=%s peer=%d", d->p2p.func, d->p2p.count,
               d->p2p.datatype, d->p2p.peer);
#if BRAID_PROFILER_ABI >= 5
      snprintf(fields + strlen(fields), sizeof(fields) - strlen(fields), " group=%lu", idOf(d->p2p.parentGroup));
#endif
      break;
#if BRAID_PROFILER_ABI >= 5
    case ncclProfileGroupApi:
      snprintf(fields, sizeof(fields), " depth=%d", d->groupApi.groupDepth);
      break;
    case ncclProfileCollApi:
      snprintf(fields, sizeof(fields), " func=%s count=%zu dtype=%s root=%d", d->collApi.func, d->collApi.count,
               d->collApi.datatype, d->collApi.root);
#if BRAID_PROFILER_ABI >= 7
      snprintf(fields + strlen(fields), sizeof(fields) - strlen(fields), " tag=%llu",
               (unsigned long long)d->collApi.userTag);
#endif
      break;
    case ncclProfileP2pApi:
      snprintf(fields, sizeof(fields), " func=%s count=%zu dtype=%s", d->p2pApi.func, d->p2pApi.count,
               d->p2pApi.datatype);
      break;
#endif
    default:
      break;
  }
  snprintf(line, sizeof(line), "start %lu %s rank=%d parent=%lu%s\n", e->id, typeName(d->type), d->rank,
           idOf(d->parentObj), fields);
  emit(c, line);
  *eHandle = e;
  return ncclSuccess;
}

static ncclResult_t sampleStop(void* eHandle) {
  const Event* e = (const Event*)eHandle;
  char line[64];
  if (e == NULL) return ncclInvalidArgument; /* braid never stops a declined (NULL) event */
  snprintf(line, sizeof(line), "stop %lu\n", e->id);
  emit(e->ctx, line);
  return ncclSuccess;
}

static ncclResult_t sampleState(void* eHandle, ncclProfilerEventState_t state, StateArgs* args) {
  const Event* e = (const Event*)eHandle;
  char line[64];
  (void)args;
  if (e == NULL) return ncclInvalidArgument;
  snprintf(line, sizeof(line), "state %lu %d\n", e->id, (int)state);
  emit(e->ctx, line);
  return ncclSuccess;
}

static ncclResult_t sampleFinalize(void* context) {
  Ctx* c = (Ctx*)context;
  char line[64];
  snprintf(line, sizeof(line), "finalize rank=%d\n", c->rank);
  emit(c, line);
  free(c);
  return ncclSuccess;
}

#if BRAID_PROFILER_ABI == 4
__attribute__((visibility("default"))) const ncclProfiler_v4_t ncclProfiler_v4 = {
    "braid-sample-v4", sampleInit, sampleStart, sampleStop, sampleState, sampleFinalize};
#elif BRAID_PROFILER_ABI == 5
__attribute__((visibility("default"))) const ncclProfiler_v5_t ncclProfiler_v5 = {
    "braid-sample-v5", sampleInit, sampleStart, sampleStop, sampleState, sampleFinalize};
#elif BRAID_PROFILER_ABI == 6
__attribute__((visibility("default"))) const ncclProfiler_v6_t ncclProfiler_v6 = {
    "braid-sample-v6", sampleInit, sampleStart, sampleStop, sampleState, sampleFinalize};
#else
__attribute__((visibility("default"))) const ncclProfiler_v7_t ncclProfiler_v7 = {
    "braid-sample-v7", sampleInit, sampleStart, sampleStop, sampleState, sampleFinalize};
#endif
