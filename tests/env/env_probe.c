/* A one-rank program for the env plugin tests (tests/inproc/env_plugin_test.cc): it reads NCCL_BUFFSIZE through the
 * parameter API, makes a host communicator and all-reduces 8 floats, printing what happened. Exit status 0 when the
 * all-reduce gave the right sum, 1 when a call failed (its error and ncclGetLastError printed). */
#include <stdio.h>
#include <stdlib.h>

#include "nccl.h"

int main(void) {
  ncclParamHandle_t h;
  int64_t buffsize = -1;
  ncclUniqueId id;
  ncclComm_t comm;
  float data[8];
  int i;
  ncclResult_t rc = ncclParamBind(&h, "NCCL_BUFFSIZE");
  if (rc == ncclSuccess) rc = ncclParamGetI64(h, &buffsize);
  printf("param NCCL_BUFFSIZE=%lld (rc %d)\n", (long long)buffsize, (int)rc);
  rc = ncclGetUniqueId(&id);
  if (rc == ncclSuccess) rc = ncclCommInitRank(&comm, 1, id, 0);
  if (rc != ncclSuccess) {
    printf("init failed: %d: %s\n", (int)rc, ncclGetLastError(NULL));
    return 1;
  }
  for (i = 0; i < 8; ++i) data[i] = (float)i;
  rc = ncclAllReduce(data, data, 8, ncclFloat, ncclSum, comm, NULL);
  if (rc != ncclSuccess) {
    printf("all-reduce failed: %d: %s\n", (int)rc, ncclGetLastError(comm));
    return 1;
  }
  for (i = 0; i < 8; ++i) {
    if (data[i] != (float)i) {
      printf("all-reduce gave %f at %d\n", data[i], i);
      return 1;
    }
  }
  printf("all-reduce ok\n");
  return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
}
