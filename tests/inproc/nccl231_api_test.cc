// NCCL 2.29-2.31's host API through braid's nccl.h: the parameter API, growing a communicator, the collectives'
// per-call configurations, ncclTimeout, and the functions braid declares but does not implement yet (each an
// ncclInvalidUsage naming itself).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/harness.h"

namespace braid_test {
namespace {

std::string lastError() {
  return ncclGetLastError(nullptr);
}

TEST(ParamApi, KnobsByNameWithOrWithoutThePrefixReadLive) {
  ncclParamHandle_t algo = nullptr, again = nullptr, timeout = nullptr;
  ASSERT_EQ(ncclParamBind(&algo, "NCCL_ALGO"), ncclSuccess);
  ASSERT_EQ(ncclParamBind(&again, "ALGO"), ncclSuccess);
  EXPECT_EQ(algo, again);
  setenv("NCCL_ALGO", "Ring", 1);
  const char* text = nullptr;
  ASSERT_EQ(ncclParamGetStr(algo, &text), ncclSuccess);
  EXPECT_STREQ(text, "Ring");
  char buf[16];
  int len = 0;
  ASSERT_EQ(ncclParamGet(algo, buf, sizeof(buf), &len), ncclSuccess);
  EXPECT_EQ(len, 4);
  EXPECT_STREQ(buf, "Ring");
  EXPECT_EQ(ncclParamGet(algo, buf, 4, &len), ncclInvalidArgument);  // no room for the NUL
  int valueLen = 0;
  ASSERT_EQ(ncclParamGetParameter("NCCL_ALGO", &text, &valueLen), ncclSuccess);
  EXPECT_STREQ(text, "Ring");
  EXPECT_EQ(valueLen, 4);
  unsetenv("NCCL_ALGO");
  ASSERT_EQ(ncclParamBind(&timeout, "BRAID_TIMEOUT"), ncclSuccess);
  setenv("BRAID_TIMEOUT", "300", 1);
  int32_t i32 = 0;
  uint64_t u64 = 0;
  int8_t i8 = 0;
  EXPECT_EQ(ncclParamGetI32(timeout, &i32), ncclSuccess);
  EXPECT_EQ(i32, 300);
  EXPECT_EQ(ncclParamGetU64(timeout, &u64), ncclSuccess);
  EXPECT_EQ(u64, 300u);
  EXPECT_EQ(ncclParamGetI8(timeout, &i8), ncclInvalidArgument);  // 300 does not fit
  EXPECT_NE(lastError().find("BRAID_TIMEOUT=\"300\" is not a signed integer from -128 to 127"), std::string::npos)
      << lastError();
  setenv("BRAID_TIMEOUT", "-1", 1);
  uint32_t u32 = 0;
  EXPECT_EQ(ncclParamGetU32(timeout, &u32), ncclInvalidArgument);
  unsetenv("BRAID_TIMEOUT");
  EXPECT_EQ(ncclParamGetI32(timeout, &i32), ncclSuccess);  // the default
  EXPECT_EQ(i32, 60);
  EXPECT_EQ(ncclParamGetI32(algo, &i32), ncclInvalidArgument);  // unset, no default
  ncclParamHandle_t none = nullptr;
  EXPECT_EQ(ncclParamBind(&none, "NCCL_NO_SUCH_KNOB"), ncclInvalidArgument);
  EXPECT_NE(lastError().find("\"NCCL_NO_SUCH_KNOB\" names no parameter"), std::string::npos) << lastError();
  EXPECT_EQ(ncclParamGetI32(reinterpret_cast<ncclParamHandle_t>(&i32), &i32), ncclInvalidArgument);
  const char** keys = nullptr;
  int n = 0;
  ASSERT_EQ(ncclParamGetAllParameterKeys(&keys, &n), ncclSuccess);
  bool debug = false, braid = false;
  for (int k = 0; k < n; ++k) {
    debug = debug || strcmp(keys[k], "NCCL_DEBUG") == 0;
    braid = braid || strcmp(keys[k], "BRAID_TIMEOUT") == 0;
  }
  EXPECT_TRUE(debug && braid) << n << " keys";
  ncclParamDumpAll();  // to the log at INFO; nothing to check but that it returns
}

// Two ranks grow to three: rank 0 makes the id, the new rank joins with it, the existing ranks keep their ranks, and
// the three-rank all-reduce is exact.
TEST(Grow, TwoRanksTakeInAThird) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclUniqueId growId;
  std::atomic<bool> idReady{false};
  std::vector<std::string> errs(3);
  auto allReduce = [](ncclComm_t comm, int r) -> std::string {
    std::vector<float> buf(5000, static_cast<float>(r + 1));
    if (ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) {
      return std::string("all-reduce: ") + ncclGetLastError(comm);
    }
    return buf[4999] == 6.0f ? "" : "value " + std::to_string(buf[4999]);
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, 2, id, r) != ncclSuccess) {
        errs[r] = "init";
        return;
      }
      if (r == 0) {
        if (ncclCommGetUniqueId(comm, &growId) != ncclSuccess) {
          errs[r] = std::string("ncclCommGetUniqueId: ") + ncclGetLastError(comm);
          return;
        }
        ncclUniqueId second;
        if (ncclCommGetUniqueId(comm, &second) != ncclInvalidUsage) errs[r] = "a second pending id was given";
        idReady = true;
      }
      ncclComm_t grown = nullptr;
      if (ncclCommGrow(comm, 3, r == 0 ? &growId : nullptr, -1, &grown, nullptr) != ncclSuccess) {
        errs[r] += std::string("ncclCommGrow: ") + ncclGetLastError(comm);
        ncclCommDestroy(comm);
        return;
      }
      int rank = -1, count = 0;
      ncclCommUserRank(grown, &rank);
      ncclCommCount(grown, &count);
      if (rank != r || count != 3) errs[r] += "rank " + std::to_string(rank) + " of " + std::to_string(count);
      errs[r] += allReduce(grown, r);
      ncclCommDestroy(grown);
      ncclCommDestroy(comm);
    });
  }
  threads.emplace_back([&] {
    while (!idReady.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ncclComm_t grown = nullptr;
    if (ncclCommGrow(nullptr, 3, &growId, 2, &grown, nullptr) != ncclSuccess) {
      errs[2] = std::string("ncclCommGrow (new rank): ") + ncclGetLastError(nullptr);
      return;
    }
    errs[2] = allReduce(grown, 2);
    ncclCommDestroy(grown);
  });
  for (auto& t : threads) t.join();
  for (size_t r = 0; r < errs.size(); ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
}

TEST(Grow, BadArgumentsAreNamed) {
  ncclComm_t c[1];
  ASSERT_EQ(ncclCommInitAll(c, 1, nullptr), ncclSuccess);
  ncclComm_t out = nullptr;
  ncclUniqueId id;
  EXPECT_EQ(ncclCommGrow(c[0], 1, nullptr, -1, &out, nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("nRanks=1 must be more than the communicator's 1 ranks"), std::string::npos)
      << lastError();
  EXPECT_EQ(ncclCommGrow(c[0], 2, nullptr, 0, &out, nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("an existing rank passes -1"), std::string::npos) << lastError();
  EXPECT_EQ(ncclCommGrow(nullptr, 2, nullptr, 1, &out, nullptr), ncclInvalidArgument);
  EXPECT_NE(lastError().find("must pass the root's uniqueId"), std::string::npos) << lastError();
  EXPECT_EQ(ncclCommGrow(nullptr, 2, &id, 2, &out, nullptr), ncclInvalidArgument);
  // The only existing rank passes no id: nobody is the root.
  EXPECT_EQ(ncclCommGrow(c[0], 2, nullptr, -1, &out, nullptr), ncclInvalidUsage);
  EXPECT_NE(lastError().find("0 existing ranks passed a uniqueId"), std::string::npos) << lastError();
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(ncclCommDestroy(c[0]), ncclSuccess);
}

// The nccl*Config variants: NULL and the initializer's defaults are the plain call; what braid does not honour per
// call yet, and a config not made from the initializer, are refused by name.
TEST(CollConfig, DefaultsRunAndUnhonouredFieldsAreNamed) {
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  ncclCollConfig_t cc = NCCL_COLLCONFIG_INITIALIZER;
  cc.userProfilerTag = 42;  // accepted (a v7 profiler plugin sees it: profiler_plugin_test.cc)
  std::vector<std::vector<float>> in(2, std::vector<float>(2000)), out(2, std::vector<float>(4000));
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < in[r].size(); ++i) in[r][i] = static_cast<float>(r + 1);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ncclAllReduceConfig(in[r].data(), out[r].data(), 2000, ncclFloat32, ncclSum, c[r], nullptr, &cc),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(out[0][1999], 3.0f);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ncclAllGatherConfig(in[r].data(), out[r].data(), 2000, ncclFloat32, c[r], nullptr, nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(out[1][0], 1.0f);
  EXPECT_EQ(out[1][3999], 2.0f);
  // Honoured per call since 2.31 support (tests/inproc/coll_config_test.cc; nvlsCTAs on CUDA communicators in
  // cuda_multicast_test.cc); bad bounds are refused.
  ncclCollConfig_t nvls = NCCL_COLLCONFIG_INITIALIZER;
  nvls.nvlsCTAs = 65;
  EXPECT_EQ(ncclAllReduceConfig(in[0].data(), out[0].data(), 1, ncclFloat32, ncclSum, c[0], nullptr, &nvls),
            ncclInvalidArgument);
  EXPECT_NE(lastError().find("config->nvlsCTAs=65 must be in 1..64"), std::string::npos) << lastError();
  ncclCollConfig_t bounded = NCCL_COLLCONFIG_INITIALIZER;
  bounded.minCTAs = 3;
  bounded.maxCTAs = 2;
  EXPECT_EQ(ncclAllReduceConfig(in[0].data(), out[0].data(), 1, ncclFloat32, ncclSum, c[0], nullptr, &bounded),
            ncclInvalidArgument);
  EXPECT_NE(lastError().find("config->minCTAs=3 exceeds config->maxCTAs=2"), std::string::npos) << lastError();
  bounded.minCTAs = 0;
  EXPECT_EQ(ncclAllReduceConfig(in[0].data(), out[0].data(), 1, ncclFloat32, ncclSum, c[0], nullptr, &bounded),
            ncclInvalidArgument);
  EXPECT_NE(lastError().find("config->minCTAs=0 must be in 1..64"), std::string::npos) << lastError();
  ncclCollConfig_t selected = NCCL_COLLCONFIG_INITIALIZER;
  selected.algSelection = "Bogus";
  EXPECT_EQ(ncclBroadcastConfig(in[0].data(), out[0].data(), 1, ncclFloat32, 0, c[0], nullptr, &selected),
            ncclInvalidArgument);
  EXPECT_NE(lastError().find("config->algSelection"), std::string::npos) << lastError();
  ncclCollConfig_t raw{};
  EXPECT_EQ(ncclReduceScatterConfig(in[0].data(), out[0].data(), 1, ncclFloat32, ncclSum, c[0], nullptr, &raw),
            ncclInvalidArgument);
  EXPECT_NE(lastError().find("NCCL_COLLCONFIG_INITIALIZER"), std::string::npos) << lastError();
  ncclCollConfig_t forced = NCCL_COLLCONFIG_INITIALIZER;
  forced.forceAlgSelection = 2;
  EXPECT_EQ(ncclAlltoAllConfig(in[0].data(), out[0].data(), 1, ncclFloat32, c[0], nullptr, &forced),
            ncclInvalidArgument);
  for (ncclComm_t comm : c) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(Nccl231, TimeoutHasItsCodeAndText) {
  EXPECT_EQ(static_cast<int>(ncclTimeout), 8);
  EXPECT_EQ(static_cast<int>(ncclNumResults), 9);
  EXPECT_EQ(std::string(ncclGetErrorString(ncclTimeout)), "operation timed out");
}

// ncclCommMemStats' figures add up on a one-rank communicator: nothing to suspend (no link), nothing kept by a
// direct segment (one rank has none), so the total is the sum of the two, 0.
TEST(Nccl231, MemStatsFiguresAddUp) {
  ncclComm_t c[1];
  ASSERT_EQ(ncclCommInitAll(c, 1, nullptr), ncclSuccess);
  uint64_t suspend = 1, persist = 1, total = 1;
  ASSERT_EQ(ncclCommMemStats(c[0], ncclStatGpuMemSuspend, &suspend), ncclSuccess);
  ASSERT_EQ(ncclCommMemStats(c[0], ncclStatGpuMemPersist, &persist), ncclSuccess);
  ASSERT_EQ(ncclCommMemStats(c[0], ncclStatGpuMemTotal, &total), ncclSuccess);
  EXPECT_EQ(total, suspend + persist);
  EXPECT_EQ(total, 0u);
  EXPECT_EQ(ncclCommDestroy(c[0]), ncclSuccess);
}

}  // namespace
}  // namespace braid_test
