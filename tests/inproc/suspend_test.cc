// ncclCommSuspend / ncclCommResume / ncclCommMemStats on host communicators: suspending with NCCL_SUSPEND_MEM
// releases the links' FIFOs (the figure ncclCommMemStats reported), operations are refused until the resume, and
// after it the links connect anew and results are exact. Ranks as threads here; as processes on two hosts (shared
// memory and the network) in tests/mp/suspend_hosts_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/harness.h"
#include "tests/common/scoped_env.h"

namespace braid_test {
namespace {

constexpr int kRanks = 4;

// An all-reduce of `count` floats, checked exactly.
ncclResult_t allReduce(int rank, ncclComm_t comm, size_t count) {
  std::vector<float> a(count, static_cast<float>(rank + 1)), b(count, -1.0f);
  ncclResult_t r = ncclAllReduce(a.data(), b.data(), count, ncclFloat, ncclSum, comm, nullptr);
  if (r != ncclSuccess) return r;
  for (size_t i = 0; i < count; i += 97) {
    if (b[i] != 10.0f) return ncclInternalError;
  }
  return ncclSuccess;
}

uint64_t stat(ncclComm_t comm, ncclCommMemStat_t s) {
  uint64_t v = ~uint64_t(0);
  EXPECT_EQ(ncclCommMemStats(comm, s, &v), ncclSuccess);
  return v;
}

TEST(Suspend, ReleasesTheLinksRefusesWorkAndResumesExactly) {
  // The ring (among threads the NVLS-style path would need no link).
  ScopedEnv ring("NCCL_ALGO", "ring");
  std::vector<uint64_t> released(kRanks);
  std::vector<ncclResult_t> rc = runThreads(kRanks, [&](int rank, ncclComm_t comm) -> ncclResult_t {
    ncclResult_t r = ncclSuccess;
    EXPECT_EQ(stat(comm, ncclStatGpuMemSuspend), 0u) << "no link before the first operation";
    if ((r = allReduce(rank, comm, 256 * 1024)) != ncclSuccess) return r;
    const uint64_t before = stat(comm, ncclStatGpuMemSuspend);
    EXPECT_GT(before, 0u);
    EXPECT_EQ(stat(comm, ncclStatGpuMemSuspended), 0u);
    // What suspending keeps: the direct path's shared segment, which rank 0 created (the others map it).
    const uint64_t persist = stat(comm, ncclStatGpuMemPersist);
    if (rank == 0) {
      EXPECT_GT(persist, 0u);
    } else {
      EXPECT_EQ(persist, 0u);
    }
    EXPECT_EQ(stat(comm, ncclStatGpuMemTotal), persist + before);
    // flags 0: nothing to release, nothing changes.
    if ((r = ncclCommSuspend(comm, 0)) != ncclSuccess) return r;
    EXPECT_EQ(stat(comm, ncclStatGpuMemSuspended), 0u);
    if ((r = ncclCommSuspend(comm, NCCL_SUSPEND_MEM)) != ncclSuccess) return r;
    EXPECT_EQ(stat(comm, ncclStatGpuMemSuspended), 1u);
    released[static_cast<size_t>(rank)] = stat(comm, ncclStatGpuMemSuspend);
    EXPECT_EQ(released[static_cast<size_t>(rank)], before) << "what it released is what it reported";
    EXPECT_EQ(stat(comm, ncclStatGpuMemPersist), persist);
    EXPECT_EQ(stat(comm, ncclStatGpuMemTotal), persist) << "while suspended it holds only what persists";
    // Refused while suspended, with the remedy; a second suspend too.
    std::vector<float> x(8, 1.0f);
    EXPECT_EQ(ncclAllReduce(x.data(), x.data(), 8, ncclFloat, ncclSum, comm, nullptr), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("call ncclCommResume on every rank first"), std::string::npos)
        << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclInvalidUsage);
    if ((r = ncclCommResume(comm)) != ncclSuccess) return r;
    EXPECT_EQ(stat(comm, ncclStatGpuMemSuspended), 0u);
    EXPECT_EQ(stat(comm, ncclStatGpuMemSuspend), 0u) << "no link until the next operation connects them";
    EXPECT_EQ(ncclCommResume(comm), ncclInvalidUsage);
    // The links connect anew, and results are exact, twice (the second reuses them).
    for (int i = 0; i < 2; ++i) {
      if ((r = allReduce(rank, comm, 256 * 1024)) != ncclSuccess) return r;
    }
    EXPECT_EQ(stat(comm, ncclStatGpuMemSuspend), before);
    // Suspend again and destroy while suspended (runThreads destroys the communicator).
    return ncclCommSuspend(comm, NCCL_SUSPEND_MEM);
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(rc[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// Only rank 0 suspends: its barrier times out, and the communicator is unusable from then on (no rank may go on
// in the other state), with the failure named, instead of a later collective waiting on released links.
TEST(Suspend, ABarrierSomeRankMissesLeavesTheCommunicatorFailed) {
  ScopedEnv timeout("BRAID_TIMEOUT", "1");
  std::vector<ncclResult_t> rc = runThreads(2, [](int rank, ncclComm_t comm) -> ncclResult_t {
    if (rank != 0) return ncclSuccess;
    const ncclResult_t s = ncclCommSuspend(comm, NCCL_SUSPEND_MEM);
    EXPECT_NE(s, ncclSuccess);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("ncclCommSuspend"), std::string::npos) << ncclGetLastError(comm);
    float x = 1;
    EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, nullptr), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("unusable after an earlier error"), std::string::npos)
        << ncclGetLastError(comm);
    return ncclSuccess;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(rc[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

TEST(Suspend, BadArgumentsAreNamed) {
  std::vector<ncclResult_t> rc = runThreads(2, [](int, ncclComm_t comm) -> ncclResult_t {
    uint64_t v = 0;
    EXPECT_EQ(ncclCommMemStats(comm, ncclStatGpuMemSuspend, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclCommMemStats(comm, static_cast<ncclCommMemStat_t>(9), &v), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("stat=9"), std::string::npos) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommSuspend(comm, 0x10), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("flags=0x10"), std::string::npos) << ncclGetLastError(comm);
    EXPECT_EQ(ncclCommSuspend(nullptr, NCCL_SUSPEND_MEM), ncclInvalidArgument);
    ncclGroupStart();
    EXPECT_EQ(ncclCommSuspend(comm, NCCL_SUSPEND_MEM), ncclInvalidUsage);
    ncclGroupEnd();
    return ncclSuccess;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(rc[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

}  // namespace
}  // namespace braid_test
