// NCCL 2.31's per-collective configuration honoured: ncclCollConfig_t.algSelection restricts the call's algorithms
// (NCCL_ALGO's grammar, within the communicator's NCCL_ALGO), forceAlgSelection decides whether a selection that
// leaves nothing fails the call or is ignored, and minCTAs/maxCTAs bound the call's channels on the FIFO path.
// 4 thread ranks; the TUNING line names the choice, the links connected name the channels used; results exact.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/harness.h"
#include "tests/common/log_capture.h"
#include "tests/common/scoped_env.h"

namespace braid_test {
namespace {

constexpr int kRanks = 4;

// An all-reduce of `count` floats through ncclAllReduceConfig(cc) on every rank, checked exactly.
std::vector<ncclResult_t> allReduceWith(const ncclCollConfig_t& cc, size_t count) {
  return runThreads(kRanks, [&](int rank, ncclComm_t comm) -> ncclResult_t {
    std::vector<float> a(count, static_cast<float>(rank + 1)), b(count, -1.0f);
    ncclResult_t r = ncclAllReduceConfig(a.data(), b.data(), count, ncclFloat, ncclSum, comm, nullptr, &cc);
    if (r != ncclSuccess) return r;
    for (size_t i = 0; i < count; i += 31) {
      if (b[i] != 10.0f) return ncclInternalError;
    }
    return ncclSuccess;
  });
}

// What the TUNING line of the all-reduce of `bytes` chose ("Tree/Simple").
std::string chosen(const std::string& log, size_t bytes) {
  const size_t at = log.find("allreduce " + std::to_string(bytes) + " bytes");
  if (at == std::string::npos) return "";
  const size_t arrow = log.find(" -> ", at);
  return log.substr(arrow + 4, log.find(' ', arrow + 4) - arrow - 4);
}

std::string run(const ncclCollConfig_t& cc, size_t count, ncclResult_t expect = ncclSuccess) {
  LogCapture cap("INIT,TUNING");
  std::vector<ncclResult_t> rc = allReduceWith(cc, count);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(rc[static_cast<size_t>(r)], expect) << "rank " << r;
  return cap.textOf(getpid());
}

TEST(CollConfig, AlgSelectionChoosesTheCallsAlgorithm) {
  const size_t count = 256 * 1024;  // 1 MiB: the model takes NVLS-style among threads
  ncclCollConfig_t plain = NCCL_COLLCONFIG_INITIALIZER;
  const std::string model = chosen(run(plain, count), count * 4);
  ASSERT_FALSE(model.empty());
  ASSERT_NE(model, "Tree/Simple");
  ncclCollConfig_t tree = NCCL_COLLCONFIG_INITIALIZER;
  tree.algSelection = "tree";
  EXPECT_EQ(chosen(run(tree, count), count * 4).substr(0, 5), "Tree/");
  ncclCollConfig_t ring = NCCL_COLLCONFIG_INITIALIZER;
  ring.algSelection = "allreduce:^nvls,tree";
  EXPECT_EQ(chosen(run(ring, count), count * 4).substr(0, 5), "Ring/");
}

TEST(CollConfig, ASelectionThatLeavesNothingFailsOrIsIgnored) {
  const size_t count = 4096;
  // The communicator allows the ring only; the call asks for the tree: nothing is left.
  ScopedEnv algo("NCCL_ALGO", "ring");
  ncclCollConfig_t tree = NCCL_COLLCONFIG_INITIALIZER;
  tree.algSelection = "tree";
  LogCapture cap("INIT,TUNING,COLL");
  std::vector<ncclResult_t> rc = allReduceWith(tree, count);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(rc[static_cast<size_t>(r)], ncclInvalidArgument) << "rank " << r;
  tree.forceAlgSelection = 0;
  rc = allReduceWith(tree, count);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(rc[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
  const std::string log = cap.textOf(getpid());
  EXPECT_NE(log.find("NCCL_ALGO and config->algSelection=\"ring\" and \"tree\" leaves no algorithm for allreduce"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("config->algSelection=\"tree\" ignored (forceAlgSelection=0)"), std::string::npos) << log;
  EXPECT_EQ(chosen(log, count * 4).substr(0, 5), "Ring/") << log;
}

// The links a call connects are those of the channels it uses (links connect at first use).
int channelsConnected(const std::string& log) {
  int n = 0;
  for (int c = 0; c < 8; ++c) {
    char tag[32];
    snprintf(tag, sizeof(tag), "Channel %02d : ", c);
    if (log.find(tag) != std::string::npos) n = c + 1;
  }
  return n;
}

TEST(CollConfig, MinAndMaxCtasBoundTheCallsChannels) {
  ScopedEnv channels("NCCL_MIN_NCHANNELS", "4");
  ScopedEnv algo("NCCL_ALGO", "ring");
  const size_t big = 1024 * 1024, small = 2048;  // 8 KiB: one channel by size, enough units for four
  ncclCollConfig_t plain = NCCL_COLLCONFIG_INITIALIZER;
  EXPECT_EQ(channelsConnected(run(plain, big)), 4) << "a 4 MiB ring uses every channel";
  EXPECT_EQ(channelsConnected(run(plain, small)), 1) << "8 KiB uses one";
  ncclCollConfig_t narrow = NCCL_COLLCONFIG_INITIALIZER;
  narrow.maxCTAs = 2;
  EXPECT_EQ(channelsConnected(run(narrow, big)), 2);
  ncclCollConfig_t wide = NCCL_COLLCONFIG_INITIALIZER;
  wide.minCTAs = 3;
  EXPECT_EQ(channelsConnected(run(wide, small)), 3);
  wide.minCTAs = 64;  // no more than the communicator has
  EXPECT_EQ(channelsConnected(run(wide, small)), 4);
}

// Ranks that pass different selections would run different algorithms: BRAID_CHECK_CALLS names it.
TEST(CollConfig, CheckCallsComparesTheConfiguration) {
  ScopedEnv check("BRAID_CHECK_CALLS", "1");
  std::vector<ncclResult_t> rc = runThreads(2, [](int rank, ncclComm_t comm) -> ncclResult_t {
    ncclCollConfig_t cc = NCCL_COLLCONFIG_INITIALIZER;
    cc.algSelection = rank == 0 ? "ring" : "tree";
    std::vector<float> a(1000, 1.0f);
    const ncclResult_t r = ncclAllReduceConfig(a.data(), a.data(), 1000, ncclFloat, ncclSum, comm, nullptr, &cc);
    EXPECT_EQ(r, ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("algSelection #"), std::string::npos) << ncclGetLastError(comm);
    return ncclSuccess;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(rc[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
  std::vector<ncclResult_t> bounds = runThreads(2, [](int rank, ncclComm_t comm) -> ncclResult_t {
    ncclCollConfig_t cc = NCCL_COLLCONFIG_INITIALIZER;
    cc.maxCTAs = rank + 1;
    std::vector<float> a(1000, 1.0f);
    EXPECT_EQ(ncclAllReduceConfig(a.data(), a.data(), 1000, ncclFloat, ncclSum, comm, nullptr, &cc), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("maxCTAs"), std::string::npos) << ncclGetLastError(comm);
    return ncclSuccess;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(bounds[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

}  // namespace
}  // namespace braid_test
