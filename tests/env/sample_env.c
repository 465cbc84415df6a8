/*
 * A sample env plugin (include/nccl_env.h), built like a third-party one: C99, against braid's public headers only.
 * BRAID_ENV_ABI picks the table it exports: 2 (ncclEnvPlugin_v2), 1 (ncclEnvPlugin_v1), 0 (none: a library that is
 * not an env plugin).
 *
 * What it answers comes from the process environment, so that tests can drive it:
 *   BRAID_SAMPLE_ENV="NAME=VALUE;NAME=VALUE"  the variables it has (every other name: NULL);
 *   BRAID_SAMPLE_ENV_LOG=PATH                 appends "init MAJOR.MINOR.PATCH", "get NAME", "finalize" lines;
 *   BRAID_SAMPLE_ENV_FAIL=1                   init() fails.
 * v2's init logs one INFO line through the logger it is given.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_env.h"

#ifndef BRAID_ENV_ABI
#define BRAID_ENV_ABI 2
#endif

#define kMaxEntries 32

static char table[4096];
static const char* names[kMaxEntries];
static const char* values[kMaxEntries];
static int entries;

static void note(const char* what, const char* name) {
  const char* path = getenv("BRAID_SAMPLE_ENV_LOG");
  if (path == NULL) return;
  FILE* f = fopen(path, "a");
  if (f == NULL) return;
  fprintf(f, "%s%s%s\n", what, name != NULL ? " " : "", name != NULL ? name : "");
  fclose(f);
}

static ncclResult_t start(uint8_t major, uint8_t minor, uint8_t patch) {
  char line[64];
  const char* spec = getenv("BRAID_SAMPLE_ENV");
  char* at;
  snprintf(line, sizeof(line), "init %u.%u.%u", (unsigned)major, (unsigned)minor, (unsigned)patch);
  note(line, NULL);
  if (getenv("BRAID_SAMPLE_ENV_FAIL") != NULL) return ncclInternalError;
  entries = 0;
  snprintf(table, sizeof(table), "%s", spec != NULL ? spec : "");
  at = table;
  while (*at != '\0' && entries < kMaxEntries) {
    char* end = strchr(at, ';');
    char* eq;
    if (end != NULL) *end = '\0';
    eq = strchr(at, '=');
    if (eq != NULL) {
      *eq = '\0';
      names[entries] = at;
      values[entries] = eq + 1;
      ++entries;
    }
    if (end == NULL) break;
    at = end + 1;
  }
  return ncclSuccess;
}

static ncclResult_t sampleFinalize(void) {
  note("finalize", NULL);
  return ncclSuccess;
}

static const char* sampleGetEnv(const char* name) {
  int i;
  note("get", name);
  for (i = 0; i < entries; ++i) {
    if (strcmp(names[i], name) == 0) return values[i];
  }
  return NULL;
}

#if BRAID_ENV_ABI == 2
static ncclResult_t sampleInit(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix,
                               ncclDebugLogger_t logFunction) {
  ncclResult_t rc = start(major, minor, patch);
  (void)suffix;
  if (rc == ncclSuccess && logFunction != NULL) {
    logFunction(NCCL_LOG_INFO, NCCL_INIT | NCCL_ENV, __FILE__, __LINE__, "braidsample env plugin: %d variable(s)",
                entries);
  }
  return rc;
}

__attribute__((visibility("default")))
const ncclEnv_v2_t ncclEnvPlugin_v2 = {"braidsample", sampleInit, sampleFinalize, sampleGetEnv};
#elif BRAID_ENV_ABI == 1
static ncclResult_t sampleInit(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix) {
  (void)suffix;
  return start(major, minor, patch);
}

__attribute__((visibility("default")))
const ncclEnv_v1_t ncclEnvPlugin_v1 = {"braidsample1", sampleInit, sampleFinalize, sampleGetEnv};
#else
__attribute__((visibility("default"))) int braidSampleNotAnEnvPlugin = 1;
/* Referenced so that the static functions are used. */
__attribute__((visibility("default"))) void* braidSampleUnused[] = {(void*)start, (void*)sampleFinalize,
                                                                    (void*)sampleGetEnv};
#endif
