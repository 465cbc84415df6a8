// Fault-tolerant communicators through the C API (src/core/elastic.h): ncclCommShrink after a rank left or died,
// ncclCommRevoke of a communicator with a collective stuck on another thread, and ncclGroupSimulateEnd pricing a
// group without running it. Ranks as threads, and as processes for a rank killed with SIGKILL. Every result exact.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/harness.h"
#include "tests/common/log_capture.h"

namespace braid_test {
namespace {

using Clock = std::chrono::steady_clock;

// An all-reduce of `count` floats on comm, rank r of n contributing r + 1 + i % 5: "" or what went wrong.
std::string checkedAllReduce(ncclComm_t comm, int r, int n, size_t count = 4099) {
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(r + 1 + static_cast<int>(i % 5));
  const ncclResult_t st = ncclAllReduce(buf.data(), buf.data(), count, ncclFloat32, ncclSum, comm, nullptr);
  if (st != ncclSuccess) return std::string("ncclAllReduce: ") + ncclGetLastError(comm);
  for (size_t i = 0; i < count; ++i) {
    const float want = static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 5));
    if (buf[i] != want) return "element " + std::to_string(i) + ": " + std::to_string(buf[i]);
  }
  return "";
}

// fn(rank, comm) on n threads of one communicator, which fn owns (it destroys or aborts it).
std::vector<std::string> onThreads(int n, const std::function<std::string(int, ncclComm_t)>& fn) {
  return runThreadsChecked(n, fn, {}, /*destroy=*/false);
}

// Rank 3 of 4 leaves after init (it takes no part in anything after): the other three shrink it away, keep their
// order, and their all-reduce is exact.
TEST(Shrink, TheRemainingRanksGoOnWithoutOneThatLeft) {
  const std::vector<std::string> errs = onThreads(4, [](int r, ncclComm_t comm) -> std::string {
    if (r == 3) return ncclCommDestroy(comm) == ncclSuccess ? "" : "destroy";
    int gone = 3;
    ncclComm_t shrunk = nullptr;
    if (ncclCommShrink(comm, &gone, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT) != ncclSuccess) {
      return std::string("ncclCommShrink: ") + ncclGetLastError(comm);
    }
    int count = 0, rank = -1;
    ncclCommCount(shrunk, &count);
    ncclCommUserRank(shrunk, &rank);
    if (count != 3 || rank != r) return "count " + std::to_string(count) + " rank " + std::to_string(rank);
    std::string e = checkedAllReduce(shrunk, r, 3);
    ncclCommDestroy(shrunk);
    ncclCommDestroy(comm);
    return e;
  });
  for (size_t r = 0; r < errs.size(); ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
}

// Rank 1 of 3 dies (it aborts its communicator) while the others wait for it in an all-reduce: they fail with
// ncclRemoteError, shrink with NCCL_SHRINK_ABORT, and go on as ranks 0 and 1 of two. NCCL_SHRINK_DEFAULT on the failed
// communicator is refused by name first.
TEST(Shrink, AfterARankDiedWithShrinkAbort) {
  setenv("BRAID_TIMEOUT", "5", 1);
  std::atomic<bool> died{false};
  const std::vector<std::string> errs = onThreads(3, [&](int r, ncclComm_t comm) -> std::string {
    if (r == 1) {
      ncclCommAbort(comm);
      died = true;
      return "";
    }
    while (!died.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::vector<float> buf(1000, 1.0f);
    const ncclResult_t st = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    if (st != ncclRemoteError) return "the all-reduce with a dead peer returned " + std::to_string(st);
    int gone = 1;
    ncclComm_t shrunk = nullptr;
    if (ncclCommShrink(comm, &gone, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT) != ncclInvalidUsage) {
      return "NCCL_SHRINK_DEFAULT on a failed communicator was accepted";
    }
    const std::string refusal = ncclGetLastError(comm);
    if (refusal.find("shrink it with NCCL_SHRINK_ABORT") == std::string::npos) return "refusal: " + refusal;
    if (ncclCommShrink(comm, &gone, 1, &shrunk, nullptr, NCCL_SHRINK_ABORT) != ncclSuccess) {
      return std::string("ncclCommShrink(ABORT): ") + ncclGetLastError(comm);
    }
    const int newRank = r == 0 ? 0 : 1;
    int rank = -1;
    ncclCommUserRank(shrunk, &rank);
    if (rank != newRank) return "rank " + std::to_string(rank);
    std::string e = checkedAllReduce(shrunk, newRank, 2);
    if (e.empty()) e = checkedAllReduce(shrunk, newRank, 2, 1 << 20);  // and a large one
    ncclCommDestroy(shrunk);
    ncclCommDestroy(comm);
    return e;
  });
  unsetenv("BRAID_TIMEOUT");
  for (size_t r = 0; r < errs.size(); ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
}

// Rank 1 of three processes is killed (SIGKILL) before an all-reduce: the survivors' all-reduce fails with
// ncclRemoteError, they shrink with NCCL_SHRINK_ABORT and their all-reduces are exact.
TEST(ShrinkProcesses, AfterARankIsKilled) {
  setenv("BRAID_TIMEOUT", "10", 1);
  std::vector<int> codes = runProcesses(3, [](int r, ncclComm_t comm) {
    if (r == 1) raise(SIGKILL);
    std::vector<float> buf(1000, 1.0f);
    const ncclResult_t st = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    if (st != ncclRemoteError) {
      fprintf(stderr, "rank %d: the all-reduce with a killed peer returned %d\n", r, st);
      return 11;
    }
    int gone = 1;
    ncclComm_t shrunk = nullptr;
    if (ncclCommShrink(comm, &gone, 1, &shrunk, nullptr, NCCL_SHRINK_ABORT) != ncclSuccess) {
      fprintf(stderr, "rank %d: ncclCommShrink: %s\n", r, ncclGetLastError(comm));
      return 12;
    }
    const int newRank = r == 0 ? 0 : 1;
    std::string e = checkedAllReduce(shrunk, newRank, 2);
    if (e.empty()) e = checkedAllReduce(shrunk, newRank, 2, 1 << 20);
    ncclCommDestroy(shrunk);
    if (!e.empty()) fprintf(stderr, "rank %d: %s\n", r, e.c_str());
    return e.empty() ? 0 : 13;
  });
  unsetenv("BRAID_TIMEOUT");
  ASSERT_EQ(codes.size(), 3u);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 128 + SIGKILL);
  EXPECT_EQ(codes[2], 0);
}

TEST(Shrink, BadListsAreNamedErrors) {
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  ncclComm_t out = nullptr;
  int self = 0, far = 7, twice[2] = {1, 1};
  EXPECT_EQ(ncclCommShrink(c[0], &self, 1, &out, nullptr, 0), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(c[0])).find("names this rank (0)"), std::string::npos)
      << ncclGetLastError(c[0]);
  EXPECT_EQ(ncclCommShrink(c[0], &far, 1, &out, nullptr, 0), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(c[0])).find("rank 7, out of range for 2 ranks"), std::string::npos);
  EXPECT_EQ(ncclCommShrink(c[0], twice, 2, &out, nullptr, 0), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(c[0])).find("names rank 1 twice"), std::string::npos);
  EXPECT_EQ(ncclCommShrink(c[0], nullptr, 1, &out, nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(c[0], &far, -1, &out, nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommShrink(c[0], &far, 1, &out, nullptr, 5), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(c[0])).find("shrinkFlags=5"), std::string::npos);
  EXPECT_EQ(ncclCommShrink(c[0], &far, 1, nullptr, nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(out, nullptr);
  for (ncclComm_t comm : c) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// A collective stuck on one thread (its peer never comes) ends when another thread revokes the communicator; the
// revoked communicator refuses collectives and finalize by name, and still splits (both ranks revoked) into one
// that works.
TEST(Revoke, StopsAStuckCollectiveAndTheCommunicatorStillSplits) {
  setenv("BRAID_TIMEOUT", "0", 1);  // no deadline: only the revocation ends the wait
  std::atomic<bool> stuck{false};
  std::atomic<bool> revoked{false};
  const std::vector<std::string> errs = onThreads(2, [&](int r, ncclComm_t comm) -> std::string {
    std::vector<float> buf(1000, 1.0f);
    if (r == 0) {
      // Waits for rank 1, which is not coming: revoked from a watchdog thread.
      std::thread watchdog([&] {
        while (!stuck.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        if (ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclSuccess) revoked = true;
      });
      stuck = true;
      const auto t0 = Clock::now();
      const ncclResult_t st = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
      watchdog.join();
      if (st == ncclSuccess) return "the stuck all-reduce succeeded";
      if (Clock::now() - t0 > std::chrono::seconds(20)) return "the revocation took too long";
      if (!revoked.load()) return std::string("ncclCommRevoke: ") + ncclGetLastError(comm);
    } else {
      while (!revoked.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) != ncclSuccess) {
        return std::string("ncclCommRevoke: ") + ncclGetLastError(comm);
      }
    }
    if (ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr) != ncclInvalidUsage ||
        std::string(ncclGetLastError(comm)).find("was revoked with ncclCommRevoke") == std::string::npos) {
      return std::string("a collective on the revoked communicator: ") + ncclGetLastError(comm);
    }
    if (ncclCommFinalize(comm) != ncclInvalidUsage) return "finalize of a revoked communicator was accepted";
    if (ncclCommRevoke(comm, 0) != ncclInvalidUsage) return "a second revocation was accepted";
    ncclResult_t async = ncclInProgress;
    ncclCommGetAsyncError(comm, &async);
    if (async != ncclSuccess) return "revoked, quiet, yet the state is " + std::to_string(async);
    ncclComm_t child = nullptr;
    if (ncclCommSplit(comm, 0, r, &child, nullptr) != ncclSuccess) {
      return std::string("ncclCommSplit: ") + ncclGetLastError(comm);
    }
    std::string e = checkedAllReduce(child, r, 2);
    ncclCommDestroy(child);
    ncclCommDestroy(comm);
    return e;
  });
  unsetenv("BRAID_TIMEOUT");
  for (size_t r = 0; r < errs.size(); ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
}

TEST(Revoke, FlagsMustBeZero) {
  ncclComm_t c[1];
  ASSERT_EQ(ncclCommInitAll(c, 1, nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommRevoke(c[0], 1), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(c[0])).find("revokeFlags=1 must be NCCL_REVOKE_DEFAULT"), std::string::npos);
  EXPECT_EQ(ncclCommRevoke(nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDestroy(c[0]), ncclSuccess);
}

// ncclGroupSimulateEnd prices a group with the cost model and runs none of it: the buffers stay as they were, the
// estimate is the sum of what INFO says of each operation, the communicator goes on after. Bad calls are named.
TEST(GroupSimulate, PricesTheGroupAndRunsNothing) {
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  std::vector<std::vector<float>> bufs(2, std::vector<float>(1 << 20, 1.0f));
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  {
    LogCapture log("TUNING");
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(ncclAllReduce(bufs[r].data(), bufs[r].data(), 1 << 20, ncclFloat32, ncclSum, c[r], nullptr),
                ncclSuccess);
      ASSERT_EQ(ncclBroadcast(bufs[r].data(), bufs[r].data(), 1000, ncclFloat32, 0, c[r], nullptr), ncclSuccess);
    }
    ASSERT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess) << ncclGetLastError(nullptr);
    const std::string text = log.textOf(getpid());
    EXPECT_EQ(occurrences(text, "ncclGroupSimulateEnd: comm"), 4u) << text;
    // Each rank's two operations, one after the other; the two ranks side by side: rank 0's sum.
    double sum = 0;
    size_t at = text.find("rank 0: AllReduce of 4194304 bytes");
    ASSERT_NE(at, std::string::npos) << text;
    for (const char* what : {"rank 0: AllReduce of 4194304 bytes", "rank 0: Broadcast of 4000 bytes"}) {
      at = text.find(what);
      ASSERT_NE(at, std::string::npos) << text;
      const size_t comma = text.find("), ", text.find("channel(s", at));
      sum += std::stod(text.substr(comma + 3));
    }
    EXPECT_GT(sim.estimatedTime, 0.0f);
    EXPECT_NEAR(sim.estimatedTime, sum, sum * 1e-3 + 0.02) << text;
  }
  for (int r = 0; r < 2; ++r) EXPECT_EQ(bufs[r][0], 1.0f) << "the simulated all-reduce ran";
  // The communicators still work together.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ncclAllReduce(bufs[r].data(), bufs[r].data(), 8, ncclFloat32, ncclSum, c[r], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(bufs[0][0], 2.0f);
  // Without a group, without an initializer, without the struct.
  EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("without a matching ncclGroupStart"), std::string::npos);
  ncclSimInfo_t raw{};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupSimulateEnd(&raw), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("NCCL_SIM_INFO_INITIALIZER"), std::string::npos);
  EXPECT_EQ(ncclGroupSimulateEnd(nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  for (ncclComm_t comm : c) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
}  // namespace braid_test
