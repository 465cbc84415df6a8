/* compat_no_rdma_needed's program: links only libnccl.so.2 and runs an all-reduce over two ranks (threads of this
 * process, one group call), so it shows the library loads and works where libibverbs and libfabric cannot be
 * loaded (no_rdma_needed.sh hides them). */
#include <nccl.h>
#include <stdio.h>

int main(void) {
  ncclComm_t comms[2];
  float x[2][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}};
  int v = 0;
  int r;
  if (ncclGetVersion(&v) != ncclSuccess || v != NCCL_VERSION_CODE) return 1;
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) return 2;
  if (ncclGroupStart() != ncclSuccess) return 3;
  for (r = 0; r < 2; ++r) {
    if (ncclAllReduce(x[r], x[r], 4, ncclFloat, ncclSum, comms[r], NULL) != ncclSuccess) return 3;
  }
  if (ncclGroupEnd() != ncclSuccess) return 3;
  for (r = 0; r < 2; ++r) {
    if (x[r][0] != 11 || x[r][3] != 44) return 4;
    if (ncclCommDestroy(comms[r]) != ncclSuccess) return 5;
  }
  printf("no_rdma_consumer: all-reduce over 2 ranks ok (NCCL %d)\n", v);
  return 0;
}
