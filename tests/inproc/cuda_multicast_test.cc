// NVLS multicast under the CUDA backend's direct collectives (src/backends/cuda/cuda_multicast.h, the multimem
// loops of src/backends/common/multimem.h), on the strict fake driver (fake_multicast.cc: the driver's order and
// rules, a seeded reduction order per object) and the CTA emulator. Checked: results bitwise as the host computes
// for exact inputs, the switch really used (the fake counts multimem resolutions) for the dtype/op pairs it
// covers and not for the others, the fallback to peer pointers with an INFO line naming the rank and the failed
// call, NCCL_NVLS_ENABLE=0 and =1, BRAID_DETERMINISTIC, the object budget and a device without multicast; and a
// call's ncclCollConfig_t.nvlsCTAs bounding the CTAs of its NVLS-style launch.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/cuda_coll_cases.h"
#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/log_capture.h"

namespace {

using namespace braid_test;

class CudaMulticast : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Driver::get().lib == nullptr || !Driver::get().fake) GTEST_SKIP() << "needs the fake CUDA driver";
    resolves_ = reinterpret_cast<unsigned long long (*)()>(dlsym(Driver::get().lib, "braidFakeCudaMulticastResolves"));
    inject_ = reinterpret_cast<void (*)(const char*)>(dlsym(Driver::get().lib, "braidFakeCudaInject"));
    ASSERT_NE(resolves_, nullptr);
    ASSERT_NE(inject_, nullptr);
    setenv("NCCL_ALGO", "NVLS", 1);
  }
  void TearDown() override {
    for (const char* v : {"NCCL_ALGO", "NCCL_NVLS_ENABLE", "BRAID_DETERMINISTIC", "BRAID_NVLS_OBJECTS",
                          "BRAID_FAKE_CUDA_NO_MULTICAST"}) {
      unsetenv(v);
    }
    if (inject_ != nullptr) inject_("");
  }
  unsigned long long resolves() const { return resolves_(); }
  unsigned long long (*resolves_)() = nullptr;
  void (*inject_)(const char*) = nullptr;
};

// What the switch covers: sums of 32/64-bit integers, f16, bf16, f32, f64; min/max of integers and 16-bit floats;
// avg and PreMulSum as sums. One-shot and two-shot all-reduce and reduce-scatter, in and out of place.
std::vector<Case> coveredCases() {
  std::vector<Case> cases;
  for (bool inPlace : {false, true}) {
    cases.push_back(Case{Kind::kAllReduce, ncclFloat32, ncclSum, 5000, inPlace});
    cases.push_back(Case{Kind::kAllReduce, ncclFloat32, ncclSum, 100003, inPlace});  // two-shot, several rounds
    cases.push_back(Case{Kind::kAllReduce, ncclFloat16, ncclAvg, 200003, inPlace});  // two-shot, odd count
    cases.push_back(Case{Kind::kAllReduce, ncclBfloat16, ncclMax, 3001, inPlace});
    cases.push_back(Case{Kind::kAllReduce, ncclInt64, ncclMin, 3000, inPlace});
    cases.push_back(Case{Kind::kAllReduce, ncclInt32, ncclNumOps, 777, inPlace});
    cases.push_back(Case{Kind::kAllReduce, ncclFloat64, ncclAvg, 4000, inPlace});
    cases.push_back(Case{Kind::kReduceScatter, ncclUint32, ncclMax, 9999, inPlace});
    cases.push_back(Case{Kind::kReduceScatter, ncclFloat16, ncclSum, 333, inPlace});
  }
  return cases;
}

TEST_F(CudaMulticast, CoveredReductionsGoThroughTheSwitchBitwiseAsTheHost) {
  for (int n : {3, 4}) {
    // Each case on a communicator of its own, so that each is seen to take the switch.
    for (const Case& c : coveredCases()) {
      LogCapture log("INIT,NVLS");
      const unsigned long long before = resolves();
      runAll(n, {c});
      EXPECT_GT(resolves(), before) << n << " ranks: " << describe(c);
      EXPECT_EQ(occurrences(log.textOf(getpid()), "NVLS multicast on:"), static_cast<size_t>(n)) << describe(c);
    }
  }
}

// Pairs the switch does not cover (products, f32/f64 min/max, 8-bit types) and all-gather run over peer pointers
// on the same communicator: correct, and no multimem access.
TEST_F(CudaMulticast, UncoveredPairsUsePeerPointers) {
  const std::vector<Case> cases = {
      Case{Kind::kAllReduce, ncclFloat32, ncclProd, 5000, false},
      Case{Kind::kAllReduce, ncclFloat32, ncclMax, 5000, true},
      Case{Kind::kAllReduce, ncclFloat64, ncclMin, 70000, false},
      Case{Kind::kAllReduce, ncclInt8, ncclSum, 5000, false},
      Case{Kind::kReduceScatter, ncclUint8, ncclMax, 3000, false},
      Case{Kind::kAllGather, ncclFloat32, ncclSum, 3000, false},
  };
  LogCapture log("INIT,NVLS");
  const unsigned long long before = resolves();
  runAll(3, cases);
  EXPECT_EQ(resolves(), before);
  EXPECT_EQ(occurrences(log.textOf(getpid()), "NVLS multicast on:"), 3u);  // on, and not used for these
}

// Any failure of the setup falls back on every rank, with INFO naming the rank and the call; results are right.
TEST_F(CudaMulticast, AFailedBindFallsBackToPeerPointers) {
  LogCapture log("INIT,NVLS");
  inject_("cuMulticastBindAddr#2=2");  // the second rank to bind runs out of memory
  const unsigned long long before = resolves();
  runAll(3, {Case{Kind::kAllReduce, ncclFloat32, ncclSum, 5000, false}});
  EXPECT_EQ(resolves(), before);
  const std::string text = log.textOf(getpid());
  EXPECT_EQ(occurrences(text, "NVLS multicast off, the NVLS-style collectives use peer pointers: rank "), 3u) << text;
  EXPECT_NE(text.find("cuMulticastBindAddr: CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << text;
}

// NCCL_NVLS_ENABLE=1: the same failure fails the communicator's init, naming the variable and the call.
TEST_F(CudaMulticast, RequiredByNcclNvlsEnableAFailureFailsInit) {
  setenv("NCCL_NVLS_ENABLE", "1", 1);
  inject_("cuMulticastAddDevice#1=801");
  std::vector<std::string> errors(2);
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int, ncclComm_t, cudaStream_t) { return ncclSuccess; });
  for (ncclResult_t r : res) EXPECT_EQ(r, ncclInvalidUsage);
  const std::string last = ncclGetLastError(nullptr);
  EXPECT_NE(last.find("NCCL_NVLS_ENABLE=1 requires it"), std::string::npos) << last;
  EXPECT_NE(last.find("cuMulticastAddDevice"), std::string::npos) << last;
}

// Off by choice or by the machine: every rank says why, and the collectives still run (over peer pointers).
TEST_F(CudaMulticast, OffAndWhy) {
  struct Way {
    const char* var;
    const char* value;
    const char* why;
  };
  const Way ways[] = {
      {"NCCL_NVLS_ENABLE", "0", "NCCL_NVLS_ENABLE=0"},
      {"BRAID_DETERMINISTIC", "1", "BRAID_DETERMINISTIC=1"},
      {"BRAID_NVLS_OBJECTS", "0", "(BRAID_NVLS_OBJECTS=0)"},
      {"BRAID_FAKE_CUDA_NO_MULTICAST", "1", "CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is 0"},
  };
  for (const Way& w : ways) {
    setenv(w.var, w.value, 1);
    LogCapture log("INIT,NVLS");
    const unsigned long long before = resolves();
    runAll(2, {Case{Kind::kAllReduce, ncclFloat32, ncclSum, 5000, false}});
    EXPECT_EQ(resolves(), before) << w.var;
    const std::string text = log.textOf(getpid());
    EXPECT_EQ(occurrences(text, "NVLS multicast off"), 2u) << w.var << ": " << text;
    EXPECT_NE(text.find(w.why), std::string::npos) << w.var << ": " << text;
    unsetenv(w.var);
  }
}

// NCCL 2.32's ncclConfig_t.nvlsHostMode: a communicator made with ncclNvlsHostModeDisableTransport (or Disable) gets
// no multicast, says so on every rank, and its NVLS-style collectives run over peer pointers, exact; even with
// NCCL_NVLS_ENABLE=1, which the config overrides for its communicator. A value that is not a mode is refused by name.
TEST_F(CudaMulticast, NvlsHostModeTurnsMulticastOffForItsCommunicator) {
  constexpr size_t kCount = 5000;
  // The last round sets it on rank 0 only, under NCCL_NVLS_ENABLE=1: every rank goes on without multicast (none
  // fails its init while another waits).
  for (int round = 0; round < 3; ++round) {
    const int mode = round == 0 ? static_cast<int>(ncclNvlsHostModeDisableTransport) : ncclNvlsHostModeDisable;
    setenv("NCCL_NVLS_ENABLE", round == 0 ? "2" : "1", 1);
    LogCapture log("INIT,NVLS");
    const unsigned long long before = resolves();
    std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
      ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
      cfg.nvlsHostMode = round == 2 && r == 1 ? static_cast<int>(ncclNvlsHostModeEnable) : mode;
      ncclComm_t child = nullptr;
      if (ncclCommSplit(comm, 0, r, &child, &cfg) != ncclSuccess) return ncclInternalError;
      const Driver& drv = Driver::get();
      float* buf = static_cast<float*>(drv.alloc(kCount * 4));
      std::vector<float> host(kCount, static_cast<float>(r + 1));
      drv.copy(buf, host.data(), kCount * 4, stream);
      ncclResult_t st = ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, child, stream);
      drv.copy(host.data(), buf, kCount * 4, stream);
      if (drv.streamSync(stream) != 0) st = ncclSystemError;
      for (size_t i = 0; i < kCount && st == ncclSuccess; ++i) {
        if (host[i] != 3.0f) st = ncclInternalError;
      }
      drv.memFree(reinterpret_cast<unsigned long long>(buf));
      ncclCommDestroy(child);
      return st;
    });
    for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess) << "round " << round;
    EXPECT_EQ(resolves(), before) << "round " << round;
    const std::string text = log.textOf(getpid());
    EXPECT_EQ(occurrences(text, "ncclConfig_t.nvlsHostMode disables the NVLS transport"), 2u) << text;
  }
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.nvlsHostMode = 4;
    ncclComm_t child = nullptr;
    const ncclResult_t st = ncclCommSplit(comm, 0, r, &child, &cfg);
    const std::string last = ncclGetLastError(comm);
    return st == ncclInvalidArgument &&
                   last.find("config->nvlsHostMode=4 is not an ncclNvlsHostMode_t") != std::string::npos
               ? ncclSuccess
               : ncclInternalError;
  });
  for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess);
}

// nvlsCTAs: the call runs on that many of the launch's lanes (the others skip it), exactly, with and without the
// switch, and the lanes stay in step for the calls after it. Seen through the switch: each lane that reduces a round
// resolves the multicast mapping once per thread, so a call on 1 of 4 lanes resolves a quarter as often.
TEST_F(CudaMulticast, NvlsCtasBoundTheLanesOfACall) {
  LogCapture log("COLL");
  setenv("NCCL_MIN_NCHANNELS", "4", 1);
  constexpr size_t kCount = 8000;  // one round: 2000 elements on each of 4 lanes, or all 8000 on one
  auto run = [&](const char* mc, bool bounded, bool alternate) {
    setenv("NCCL_NVLS_ENABLE", mc, 1);
    std::vector<std::string> errors(3);
    std::vector<ncclResult_t> res = runCudaRanks(3, [&](int r, ncclComm_t comm, cudaStream_t stream) {
      const Driver& drv = Driver::get();
      char* in = static_cast<char*>(drv.alloc(kCount * 4));
      char* out = static_cast<char*>(drv.alloc(kCount * 4));
      std::vector<float> host(kCount);
      for (size_t i = 0; i < kCount; ++i) host[i] = static_cast<float>((i % 97) + r);
      drv.copy(in, host.data(), kCount * 4, stream);
      ncclCollConfig_t cc = NCCL_COLLCONFIG_INITIALIZER;
      cc.nvlsCTAs = 1;
      ncclResult_t st = ncclSuccess;
      for (int call = 0; call < 3 && st == ncclSuccess; ++call) {
        const bool withBound = bounded && !(alternate && call == 1);
        st = ncclAllReduceConfig(in, out, kCount, ncclFloat32, ncclSum, comm, stream, withBound ? &cc : nullptr);
        if (st != ncclSuccess) break;
        drv.copy(host.data(), out, kCount * 4, stream);
        if (drv.streamSync(stream) != 0) st = ncclSystemError;
        for (size_t i = 0; i < kCount && st == ncclSuccess; ++i) {
          if (host[i] != static_cast<float>(3 * (i % 97) + 3)) {
            errors[static_cast<size_t>(r)] = "call " + std::to_string(call) + " element " + std::to_string(i);
            st = ncclInternalError;
          }
        }
      }
      drv.memFree(reinterpret_cast<unsigned long long>(in));
      drv.memFree(reinterpret_cast<unsigned long long>(out));
      return st;
    });
    for (int r = 0; r < 3; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << r << ": " << errors[r];
  };
  unsigned long long before = resolves();
  run("2", true, false);
  const unsigned long long oneLane = resolves() - before;
  before = resolves();
  run("2", false, false);
  const unsigned long long allLanes = resolves() - before;
  EXPECT_GT(oneLane, 0u);
  EXPECT_GE(allLanes, 3 * oneLane) << "1 lane: " << oneLane << ", 4 lanes: " << allLanes;
  // Bounded calls around an unbounded one, through the switch and over peer pointers: the lanes stay in step.
  run("2", true, true);
  run("0", true, true);
  unsetenv("NCCL_MIN_NCHANNELS");
  EXPECT_GE(occurrences(log.textOf(getpid()), "runs on 1 of 4 lanes (nvlsCTAs)"), 3u * 3u);
}

}  // namespace
