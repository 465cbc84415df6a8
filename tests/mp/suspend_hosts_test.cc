// ncclCommSuspend / ncclCommResume between processes on two "hosts" (NCCL_HOSTID): the links released are shared
// memory inside a host and network connections between the hosts; after the resume they connect anew and every
// collective is exact.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <vector>

#include "nccl.h"
#include "tests/common/harness.h"

namespace braid_test {
namespace {

int exactAllReduceAndBroadcast(int rank, ncclComm_t comm) {
  const size_t n = 300 * 1000;
  std::vector<int32_t> a(n, rank + 1), b(n, -1);
  if (ncclAllReduce(a.data(), b.data(), n, ncclInt32, ncclSum, comm, nullptr) != ncclSuccess) return 10;
  for (size_t i = 0; i < n; i += 101)
    if (b[i] != 10) return 11;
  std::vector<int32_t> c(1000, rank == 2 ? 5 : 0);
  if (ncclBroadcast(c.data(), c.data(), 1000, ncclInt32, 2, comm, nullptr) != ncclSuccess) return 12;
  return c[999] == 5 ? 0 : 13;
}

TEST(SuspendHosts, LinksOfSharedMemoryAndTheNetworkConnectAnewAfterResume) {
  auto status = runProcesses(
      4,
      [](int r, ncclComm_t comm) {
        if (int e = exactAllReduceAndBroadcast(r, comm)) return e;
        uint64_t bytes = 0, flag = 0;
        if (ncclCommMemStats(comm, ncclStatGpuMemSuspend, &bytes) != ncclSuccess || bytes == 0) return 1;
        if (ncclCommSuspend(comm, NCCL_SUSPEND_MEM) != ncclSuccess) return 2;
        if (ncclCommMemStats(comm, ncclStatGpuMemSuspended, &flag) != ncclSuccess || flag != 1) return 3;
        int32_t x = 0;
        if (ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, nullptr) != ncclInvalidUsage) return 4;
        if (ncclCommResume(comm) != ncclSuccess) return 5;
        for (int i = 0; i < 3; ++i) {
          if (int e = exactAllReduceAndBroadcast(r, comm)) return 20 + e;
        }
        return 0;
      },
      120, nullptr, nullptr, [](int r) { setenv("NCCL_HOSTID", r < 2 ? "host-a" : "host-b", 1); });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(status[static_cast<size_t>(r)], 0) << "rank " << r;
}

}  // namespace
}  // namespace braid_test
