// The latency path allocates nothing once warm: a small all-reduce between ranks (threads of this process, on the
// NVLS-style path over their buffers), or of a one-rank communicator, makes no heap allocation on the calling
// thread. Allocations are counted by
// replacing the global operator new, which the library's containers use, so this is an executable of its own.
// BRAID_CHECK_CALLS, which exchanges the calls' descriptions, allocates per group: the count sees it, so the
// counter is known to work.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "nccl.h"
#include "tests/common/harness.h"

namespace {
thread_local bool tlsCounting = false;
thread_local long tlsAllocations = 0;
}  // namespace

void* operator new(size_t bytes) {
  if (tlsCounting) ++tlsAllocations;
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}

namespace braid_test {
namespace {

// Allocations per rank while each issues `iters` 8-byte all-reduces after a warm-up.
std::vector<long> allocationsPerRank(int n, int iters) {
  std::vector<long> counted(static_cast<size_t>(n), -1);
  auto results = runThreads(n, [&](int rank, ncclComm_t comm) {
    float in[2] = {1.0f, static_cast<float>(rank)}, out[2] = {0, 0};
    for (int i = 0; i < 50; ++i) {
      ncclResult_t r = ncclAllReduce(in, out, 2, ncclFloat, ncclSum, comm, nullptr);
      if (r != ncclSuccess) return r;
    }
    tlsAllocations = 0;
    tlsCounting = true;
    for (int i = 0; i < iters; ++i) {
      ncclResult_t r = ncclAllReduce(in, out, 2, ncclFloat, ncclSum, comm, nullptr);
      if (r != ncclSuccess) {
        tlsCounting = false;
        return r;
      }
    }
    tlsCounting = false;
    counted[static_cast<size_t>(rank)] = tlsAllocations;
    return out[0] == static_cast<float>(n) ? ncclSuccess : ncclInternalError;
  });
  for (ncclResult_t r : results) EXPECT_EQ(r, ncclSuccess);
  return counted;
}

TEST(LatencyPath, SmallAllReduceAllocatesNothing) {
  for (int n : {1, 2, 3}) {  // one rank: a copy on the calling thread, no program
    std::vector<long> counted = allocationsPerRank(n, 200);
    for (int r = 0; r < n; ++r) EXPECT_EQ(counted[static_cast<size_t>(r)], 0) << "rank " << r << " of " << n;
  }
}

TEST(LatencyPath, TheCounterSeesAllocations) {
  setenv("BRAID_CHECK_CALLS", "1", 1);
  std::vector<long> counted = allocationsPerRank(2, 20);
  unsetenv("BRAID_CHECK_CALLS");
  for (long c : counted) EXPECT_GE(c, 20) << "BRAID_CHECK_CALLS allocates per call; the counter saw none";
}

}  // namespace
}  // namespace braid_test
