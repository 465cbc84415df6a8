// GIN (include/nccl_device/gin.h, gin_barrier.h, barrier.h) running: the kernels of tests/devapi/gin_kernels.cuh on
// braid's CTA emulator over device communicators of CUDA communicators on the strict fake driver (ranks as threads,
// one fake GPU each, the world one LSA team). Puts, values and gets land exactly; signals, VA signals, counters and
// shadows count what they must across launches; barriers order the rounds; misuse traps by name; the requirements'
// GIN ids are numbered as NCCL numbers them.
#include "tests/devapi/device_shim.h"
// (the shim first: it turns on the headers' device half)
#include "tests/devapi/gin_kernels.cuh"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include <functional>
#include <string>
#include <vector>

#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"
#include "tests/devapi/gin_test_util.h"
#include "tests/devapi/kernel_test_util.h"

namespace {

using namespace braid_test;
using namespace gin_test;

class GinKernels : public FakeGpuKernels {};

// A device communicator asking for one GIN signal is refused with ncclInvalidUsage and a message containing `why`:
// 0, or 1 (another result) or 2 (another message).
int ginRefused(ncclComm_t comm, const char* why) {
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.ginSignalCount = 1;
  ncclDevComm dc{};
  if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidUsage) return 1;
  return std::string(ncclGetLastError(comm)).find(why) == std::string::npos ? 2 : 0;
}

// GIN refused with `why` (as ginRefused), and a device communicator asked for no GIN made with no contexts and no
// network GIN: 0, or the failed step (1, 2 the refusal; 3 the contexts; 4 the destruction).
int refusedWithNoContexts(ncclComm_t comm, const char* why) {
  const int refused = ginRefused(comm, why);
  if (refused != 0) return refused;
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ncclDevComm dc{};
  if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess || dc.ginContextCount != 0 || dc.ginNet != nullptr) return 3;
  return ncclDevCommDestroy(comm, &dc) == ncclSuccess ? 0 : 4;
}

float valueOf(int rank, int round, size_t i) {
  return static_cast<float>(rank * 1000 + round * 7 + static_cast<int>(i % 101));
}

// ginAllGather for kRounds launches on every context in turn: every element, and signal 0 and counter 0 counting
// every round's puts.
ncclResult_t allGatherRounds(int r, int n, ncclComm_t comm, cudaStream_t stream) {
  constexpr int kGrid = 2, kBlock = 64, kRounds = 4;
  constexpr size_t kCount = 777;  // not a multiple of 4 floats: the copy's tail
  const Driver& drv = Driver::get();
  Win send, recv;
  CHECK_OR(send.make(comm, kCount * sizeof(float), stream), 10);
  CHECK_OR(recv.make(comm, kCount * sizeof(float) * static_cast<size_t>(n), stream), 10);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.ginSignalCount = 1;
  reqs.ginCounterCount = 1;
  reqs.worldGinBarrierCount = kGrid;
  ncclDevComm dc{};
  if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) {
    fprintf(stderr, "rank %d: %s\n", r, ncclGetLastError(comm));
    return ncclInternalError;
  }
  // NCCL's numbering: the requirements' signal first, then the world barriers' (kGrid barriers of n signals).
  CHECK_OR(dc.ginContextCount == 4 && dc.ginSignalCount == 1u + kGrid * static_cast<uint32_t>(n), 11);
  CHECK_OR(dc.ginCounterCount == 1 && dc.worldGinBarrier.signal0 == 1, 11);
  std::vector<float> in(kCount), got(kCount * static_cast<size_t>(n));
  std::vector<uint64_t> out(kGinOutWords, 0);
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < kCount; ++i) in[i] = valueOf(r, round, i);
    drv.copy(send.buf, in.data(), kCount * sizeof(float), stream);
    CHECK_OR(drv.streamSync(stream) == 0, 12);
    const int context = round % dc.ginContextCount;
    braid::Status st = braid_emu::launch(cfgOf(kGrid, kBlock, "ginAllGather"), [&] {
      ginAllGather(send.win, recv.win, kCount, round, context, dc, out.data());
    });
    if (!st.isOk()) {
      fprintf(stderr, "rank %d round %d: %s\n", r, round, st.message().c_str());
      return ncclInternalError;
    }
    drv.copy(got.data(), recv.buf, got.size() * sizeof(float), stream);
    CHECK_OR(drv.streamSync(stream) == 0, 13);
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < kCount; ++i) {
        const float want = valueOf(p, round, i);
        if (got[static_cast<size_t>(p) * kCount + i] != want) {
          fprintf(stderr, "rank %d round %d from %d element %zu: %f, expected %f\n", r, round, p, i,
                  got[static_cast<size_t>(p) * kCount + i], want);
          return ncclInternalError;
        }
      }
    }
    const uint64_t puts = static_cast<uint64_t>(n) * static_cast<uint64_t>(round + 1);
    CHECK_OR(out[kGinSignal0] == puts && out[kGinCounter0] == puts, 14);
  }
  CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess, 15);
  CHECK_OR(send.drop(comm) && recv.drop(comm), 16);
  return ncclSuccess;
}

TEST_F(GinKernels, AllGatherByPutsSignalsAndCountersIsExactAcrossLaunches) {
  constexpr int kRanks = 3;
  auto res = runCudaRanks(
      kRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) { return allGatherRounds(r, kRanks, comm, stream); });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// ginValuesAndGets for several rounds: values with VA signals, gets, signal shadows, counter reset, the hybrid
// world barrier and its timed sync.
ncclResult_t valuesRounds(int r, int n, ncclComm_t comm, cudaStream_t stream) {
  constexpr int kRounds = 3;
  constexpr size_t kCount = 301, kValueOffset = 0, kGetOffset = 64;
  const Driver& drv = Driver::get();
  Win send, recv, sig;
  CHECK_OR(send.make(comm, kCount * sizeof(float), stream), 10);
  CHECK_OR(recv.make(comm, kGetOffset + kCount * sizeof(float), stream), 10);
  CHECK_OR(sig.make(comm, 8 * static_cast<size_t>(n), stream), 10);
  // Signals 0-1 of the requirements, counters 0-1: one of each here, one from a resource requirement.
  ncclGinSignal_t sigStart = 99;
  ncclGinCounter_t ctrStart = 99;
  ncclDevResourceRequirements extra{};
  extra.ginSignalCount = 1;
  extra.ginCounterCount = 1;
  extra.outGinSignalStart = &sigStart;
  extra.outGinCounterStart = &ctrStart;
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.ginSignalCount = 1;
  reqs.ginCounterCount = 1;
  reqs.barrierCount = 1;  // the world's barriers: LSA barriers inside, the rail team's GIN barriers outside
  reqs.ginContextCount = 1;
  reqs.resourceRequirementsList = &extra;
  ncclDevComm dc{};
  if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) {
    fprintf(stderr, "rank %d: %s\n", r, ncclGetLastError(comm));
    return ncclInternalError;
  }
  CHECK_OR(sigStart == 1 && ctrStart == 1 && dc.ginContextCount == 1, 11);
  CHECK_OR(dc.railGinBarrier.signal0 == 2 && dc.ginSignalCount == 3 && dc.ginCounterCount == 2, 11);  // rail: 1 rank
  std::vector<float> in(kCount), got(kCount);
  std::vector<uint64_t> out(kGinOutWords, 0);
  const int prev = (r + n - 1) % n;
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < kCount; ++i) in[i] = valueOf(r, round, i);
    drv.copy(send.buf, in.data(), kCount * sizeof(float), stream);
    CHECK_OR(drv.streamSync(stream) == 0, 12);
    braid::Status st = braid_emu::launch(cfgOf(1, 96, "ginValuesAndGets"), [&] {
      ginValuesAndGets(send.win, recv.win, sig.win, kValueOffset, kGetOffset, kCount, round, dc, out.data());
    });
    if (!st.isOk()) {
      fprintf(stderr, "rank %d round %d: %s\n", r, round, st.message().c_str());
      return ncclInternalError;
    }
    drv.copy(got.data(), static_cast<char*>(recv.buf) + kGetOffset, kCount * sizeof(float), stream);
    CHECK_OR(drv.streamSync(stream) == 0, 13);
    for (size_t i = 0; i < kCount; ++i) CHECK_OR(got[i] == valueOf(prev, round, i), 14);
    CHECK_OR(out[kGinValue] == static_cast<uint64_t>(round) * 100u + static_cast<uint64_t>(prev), 15);
    CHECK_OR(out[kGinVaSignal] == 2u * static_cast<uint64_t>(round + 1), 16);
    CHECK_OR(out[kGinBefore] == 3u * static_cast<uint64_t>(round) && out[kGinDelta] == 3, 17);
    CHECK_OR(out[kGinCounter1] == 1 && out[kGinCounter1Reset] == 0, 18);
    CHECK_OR(out[kGinTimedSync] == ncclSuccess, 19);
  }
  CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess, 20);
  CHECK_OR(send.drop(comm) && recv.drop(comm) && sig.drop(comm), 21);
  return ncclSuccess;
}

TEST_F(GinKernels, ValuesVaSignalsGetsShadowsAndTheHybridBarrier) {
  for (int n : {2, 3}) {
    auto res =
        runCudaRanks(n, [&](int r, ncclComm_t comm, cudaStream_t stream) { return valuesRounds(r, n, comm, stream); });
    for (int r = 0; r < n; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << n << " ranks, rank " << r;
  }
}

// kRounds launches of ginTeamBarrierRing on rank r of n (the whole CTA or one thread): each round's stamp from the
// previous rank, and the timed sync's success.
ncclResult_t barrierRingRounds(int r, int n, ncclComm_t comm, cudaStream_t stream, bool oneThread) {
  constexpr int kRounds = 5;
  Win win;
  CHECK_OR(win.make(comm, 8 * static_cast<size_t>(n), stream), 10);
  ncclGinBarrierHandle bar{};
  ncclDevResourceRequirements barReq{};
  CHECK_OR(ncclGinBarrierCreateRequirement(comm, ncclTeamWorld(comm), 1, &bar, &barReq) == ncclSuccess, 11);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.ginSignalCount = 5;
  reqs.resourceRequirementsList = &barReq;
  ncclDevComm dc{};
  CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess, 12);
  CHECK_OR(bar.signal0 == 5 && dc.ginSignalCount == 5u + static_cast<uint32_t>(n), 13);
  std::vector<uint64_t> out(2, 0);
  const int prev = (r + n - 1) % n;
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t stamp = 1000u * static_cast<uint64_t>(round) + static_cast<uint64_t>(r);
    braid::Status st = braid_emu::launch(cfgOf(1, oneThread ? 1 : 64, "ginTeamBarrierRing"), [&] {
      if (oneThread) {
        ginTeamBarrierRing<ncclCoopThread>(win.win, stamp, bar, dc, out.data());
      } else {
        ginTeamBarrierRing<ncclCoopCta>(win.win, stamp, bar, dc, out.data());
      }
    });
    if (!st.isOk()) {
      fprintf(stderr, "rank %d round %d: %s\n", r, round, st.message().c_str());
      return ncclInternalError;
    }
    CHECK_OR(out[0] == 1000u * static_cast<uint64_t>(round) + static_cast<uint64_t>(prev) && out[1] == ncclSuccess, 14);
  }
  CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess && win.drop(comm), 15);
  return ncclSuccess;
}

// A GIN barrier from ncclGinBarrierCreateRequirement (its signals numbered after the requirements' own) orders bare
// puts, over 4 ranks and 5 launches; synced by a CTA, and by one thread for all three peers (which deadlocked when a
// thread waited for one peer before signalling the next).
TEST_F(GinKernels, ABarrierOfTheCallersOwnOrdersPuts) {
  constexpr int kRanks = 4;
  for (bool oneThread : {false, true}) {
    auto res = runCudaRanks(kRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) {
      return barrierRingRounds(r, kRanks, comm, stream, oneThread);
    });
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << (oneThread ? "one thread" : "a CTA") << ", rank " << r;
    }
  }
}

// GIN signals are atomic adds on peers' GPU memory: GPUs whose links carry no atomics (a PCIe system,
// BRAID_FAKE_CUDA_NO_P2P_ATOMICS=1) get no GIN, by name when it is asked for.
TEST_F(GinKernels, RefusedWithoutNativePeerAtomics) {
  setenv("BRAID_FAKE_CUDA_NO_P2P_ATOMICS", "1", 1);
  auto res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t) -> ncclResult_t {
    CHECK_OR(ginRefused(comm, "has no native peer atomics") == 0, 10);
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = 1;
    ncclDevComm dc{};
    CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess && dc.ginContextCount == 0, 12);
    CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess, 13);
    return ncclSuccess;
  });
  unsetenv("BRAID_FAKE_CUDA_NO_P2P_ATOMICS");
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// A wait with a timeout ends with ncclTimeout; a context, signal or peer out of range traps the kernel by name; a
// device communicator asked for no GIN still has contexts (the world is one LSA team) but no signals.
TEST_F(GinKernels, TimeoutsAndMisuse) {
  auto res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t) -> ncclResult_t {
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.ginSignalCount = 2;
    ncclDevComm dc{};
    CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess, 10);
    std::vector<uint64_t> out(1, 0);
    braid::Status st =
        braid_emu::launch(cfgOf(1, 32, "ginWaitsInVain"), [&] { ginWaitsInVain(2000000, dc, out.data()); });
    CHECK_OR(st.isOk() && out[0] == ncclTimeout, 11);
    const char* why[] = {"the context index is not below ncclDevComm::ginContextCount",
                         "ncclGin: the signal id is out of range",
                         "ncclGin::signal: the peer is not a member of the team"};
    for (int what = 0; what < 3; ++what) {
      st = braid_emu::launch(cfgOf(1, 32, "ginMisuse"), [&] { ginMisuse(what, dc); });
      if (st.isOk() || st.message().find(why[what]) == std::string::npos) {
        fprintf(stderr, "rank %d misuse %d: %s\n", r, what, st.message().c_str());
        return ncclInternalError;
      }
    }
    CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess, 12);
    reqs = ncclDevCommRequirements(NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER);
    reqs.lsaBarrierCount = 1;
    CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess, 13);
    CHECK_OR(dc.ginContextCount == 4 && dc.ginSignalCount == 0 && dc.ginCounterCount == 0, 14);
    st = braid_emu::launch(cfgOf(1, 32, "ginMisuse"), [&] { ginMisuse(1, dc); });
    CHECK_OR(!st.isOk() && st.message().find("signal id is out of range") != std::string::npos, 15);
    CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess, 16);
    return ncclSuccess;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// Ranks of two processes on one host are one LSA team: GIN puts, signals and the world barrier cross the
// processes through the mapped windows and resource windows.
TEST(GinProcesses, AllGatherByPutsAcrossProcesses) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("kernels run on the CTA emulator, which reads the fake's device memory from the host");
  const std::vector<int> codes =
      runGpuProcesses(2, [](int r, ncclComm_t comm) { return onOwnStream(r, comm, allGatherRounds, 2); });
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// The same check across processes: each process finds the other's GPU by its PCI identity and asks the driver.
TEST(GinProcesses, RefusedAcrossProcessesWithoutNativePeerAtomics) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("the fake driver says which links carry atomics");
  const std::vector<int> codes = runGpuProcesses(
      2, [](int, ncclComm_t comm) { return ginRefused(comm, "has no native peer atomics"); },
      [](int) { setenv("BRAID_FAKE_CUDA_NO_P2P_ATOMICS", "1", 1); });
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// Ranks on two "hosts" (NCCL_HOSTID) are two LSA teams: GIN reaches the other host by proxy (src/api/gin_net.h):
// the kernels queue descriptors, a host thread per rank sends them as one-sided messages, and the peer adds the
// signals to its network words. The all-gather rounds of the one-host test, exact, on two processes (each its own LSA
// team) and on four (two per host: puts to the LSA partner by load/store, to the other host by proxy; the world
// barrier over both).
TEST(GinProcesses, AllGatherAcrossHostsByProxyIsExact) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("kernels run on the CTA emulator, which reads the fake's device memory from the host");
  for (int n : {2, 4}) {
    expectOnTwoHosts(n, [n](int r, ncclComm_t comm) {
      ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
      if (ncclCommQueryProperties(comm, &props) != ncclSuccess || props.ginType != NCCL_GIN_TYPE_PROXY) return 30;
      const int gathered = onOwnStream(r, comm, allGatherRounds, n);
      if (gathered != 0) return gathered;
      // Values with no signal of their own, ordered by a GIN barrier over the world (a CTA, then one thread).
      for (bool oneThread : {false, true}) {
        void* stream = nullptr;
        Driver::get().streamCreate(&stream, 1);
        const ncclResult_t rc = barrierRingRounds(r, n, comm, static_cast<cudaStream_t>(stream), oneThread);
        Driver::get().streamDestroy(stream);
        if (rc != ncclSuccess) return 40 + static_cast<int>(rc);
      }
      return 0;
    });
  }
}

// With BRAID_RMA_NET=0 a request for GIN is refused by name, and the properties say there is no network GIN.
TEST(GinProcesses, WithoutOneSidedMessagesGinAcrossHostsIsRefusedByName) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("kernels run on the CTA emulator, which reads the fake's device memory from the host");
  expectOnTwoHosts(
      2,
      [](int, ncclComm_t comm) {
        const int refused = refusedWithNoContexts(comm, "BRAID_RMA_NET=0 turned off one-sided messages");
        if (refused != 0) return refused;
        // The hybrid world barrier needs GIN across hosts: refused alike, naming barrierCount.
        ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
        reqs.barrierCount = 1;
        ncclDevComm dc{};
        if (ncclDevCommCreate(comm, &reqs, &dc) != ncclInvalidUsage ||
            std::string(ncclGetLastError(comm)).find("barrierCount 1") == std::string::npos)
          return 6;
        ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
        if (ncclCommQueryProperties(comm, &props) != ncclSuccess || props.ginType != NCCL_GIN_TYPE_NONE) return 5;
        return 0;
      },
      "BRAID_RMA_NET", "0");
}

// A GIN value toward another host that its receiver drops (past the end of the window: device code does not check
// the peer's size) is a WARN there and nothing more: the next ncclPutSignal from the same rank, on the same
// connection, still lands and signals (regression: the drop was charged to it, and its wait hung to the deadline).
TEST(GinProcesses, ADroppedGinValueDoesNotCostTheNextPutItsSignal) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("kernels run on the CTA emulator, which reads the fake's device memory from the host");
  expectOnTwoHosts(
      2,
      [](int r, ncclComm_t comm) {
        ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
        reqs.ginSignalCount = 1;
        ncclDevComm dc{};
        if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) return 10;
        GpuRank g(comm);
        Win win;
        if (!win.make(comm, 4096, g.s)) return 11;
        if (r == 0) {
          braid::Status st =
              braid_emu::launch(cfgOf(1, 32, "ginValueThenFlush"), [&] { ginValueThenFlush(win.win, 1 << 20, dc); });
          if (!st.isOk()) return 12;
          int value = 77;
          void* src = Driver::get().alloc(sizeof(int));
          Driver::get().copy(src, &value, sizeof(int), g.s);
          if (ncclPutSignal(src, 1, ncclInt32, 1, win.win, 0, 0, 0, 0, comm, g.s) != ncclSuccess ||
              Driver::get().streamSync(g.s) != 0)
            return 13;
          Driver::get().memFree(reinterpret_cast<unsigned long long>(src));
        } else {
          ncclWaitSignalDesc_t d{1, 0, 0, 0};
          if (ncclWaitSignal(1, &d, comm, g.s) != ncclSuccess) return 14;
          int got = 0;
          if (!g.put(&got, win.buf, sizeof(int)) || got != 77) return 15;
        }
        if (g.sum(1) != 2) return 16;  // both are done before either ends
        if (ncclDevCommDestroy(comm, &dc) != ncclSuccess || !win.drop(comm)) return 17;
        return 0;
      },
      "BRAID_TIMEOUT", "20");
}

// A byte of rank r's window at i, for the get tests.
unsigned char getByte(int r, size_t i) {
  return static_cast<unsigned char>((i * 7 + static_cast<size_t>(r) * 31 + i / 251) & 0xff);
}

// GIN gets from every other rank, on two hosts: 2 processes (the peer by proxy) and 4, two per host (the LSA partner
// by copies, the other host's two by proxy). 1.5 MB + 13 bytes each (several of the proxy's 1 MB pieces and a tail),
// to an odd offset, two CTAs on two contexts, one flush each: every byte is checked after it. Then a get past the
// end of the peer's window: the peer refuses it with a WARN, the flush still returns, nothing lands, and a get right
// after it is exact. Then 300 gets from one thread and one flush: more than the queue's 256 slots, each outstanding
// while later ones are queued.
TEST(GinProcesses, GetsFromOtherHostsByProxyAreExact) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("kernels run on the CTA emulator, which reads the fake's device memory from the host");
  for (int n : {2, 4}) {
    expectOnTwoHosts(
        n,
        [n](int r, ncclComm_t comm) {
          constexpr size_t kBytes = (size_t{3} << 19) + 13, kSkew = 5;
          ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
          reqs.ginSignalCount = 1;
          reqs.ginContextCount = 2;
          ncclDevComm dc{};
          if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) return 10;
          GpuRank g(comm);
          Win from, into;
          const size_t intoBytes = kBytes * static_cast<size_t>(n) + 64;
          if (!from.make(comm, kBytes, g.s) || !into.make(comm, intoBytes, g.s)) return 11;
          std::vector<unsigned char> mine(kBytes);
          for (size_t i = 0; i < kBytes; ++i) mine[i] = getByte(r, i);
          if (!g.put(from.buf, mine.data(), kBytes)) return 12;
          if (!g.barrier()) return 13;  // every rank's data is in before anyone reads it
          braid::Status st = braid_emu::launch(cfgOf(2, 64, "ginGetEveryPeer"), [&] {
            ginGetEveryPeer(from.win, 0, into.win, kBytes, kSkew, false, dc);
          });
          if (!st.isOk()) {
            fprintf(stderr, "rank %d: %s\n", r, st.message().c_str());
            return 14;
          }
          std::vector<unsigned char> got(intoBytes);
          if (!g.put(got.data(), into.buf, intoBytes)) return 15;
          for (int q = 0; q < n; ++q) {
            for (size_t i = 0; q != r && i < kBytes; ++i) {
              const unsigned char b = got[static_cast<size_t>(q) * kBytes + kSkew + i];
              if (b != getByte(q, i)) {
                fprintf(stderr, "rank %d: byte %zu from rank %d is %d, not %d\n", r, i, q, b, getByte(q, i));
                return 16;
              }
            }
          }
          // Past the end of the peer's window (from another host): refused there, the flush returns, nothing lands.
          if (!g.fill(into.buf, intoBytes, 0) || !g.barrier()) return 17;
          st = braid_emu::launch(cfgOf(1, 32, "ginGetEveryPeer"),
                                 [&] { ginGetEveryPeer(from.win, kBytes - 8, into.win, 16, 0, true, dc); });
          if (!st.isOk()) return 18;
          const int other = (r + n / 2) % n;  // on the other host
          if (!g.allBytes(into.buf, static_cast<size_t>(other) * 16, static_cast<size_t>(other) * 16 + 16, 0))
            return 20;
          st = braid_emu::launch(cfgOf(1, 32, "ginGetEveryPeer"),
                                 [&] { ginGetEveryPeer(from.win, kBytes - 16, into.win, 16, 0, true, dc); });
          if (!st.isOk()) return 21;
          if (!g.put(got.data(), into.buf, intoBytes)) return 22;
          for (size_t i = 0; i < 16; ++i) {
            if (got[static_cast<size_t>(other) * 16 + i] != getByte(other, kBytes - 16 + i)) return 23;
          }
          // More gets than the queue's slots (300 of 64 bytes from the other host), one flush.
          st = braid_emu::launch(cfgOf(1, 1, "ginManyGets"),
                                 [&] { ginManyGets(from.win, into.win, other, 0, 64, 300, dc); });
          if (!st.isOk()) return 24;
          if (!g.put(got.data(), into.buf, intoBytes)) return 25;
          for (size_t i = 0; i < 300 * 64; ++i) {
            if (got[i] != getByte(other, i)) {
              fprintf(stderr, "rank %d: byte %zu of the many gets is %d, not %d\n", r, i, got[i], getByte(other, i));
              return 26;
            }
          }
          if (!g.barrier()) return 27;  // both are done before either ends
          if (ncclDevCommDestroy(comm, &dc) != ncclSuccess || !from.drop(comm) || !into.drop(comm)) return 28;
          return 0;
        },
        "BRAID_TIMEOUT", "20");
  }
}

// The get-failure tests' set-up: a device communicator with one GIN signal and a 4096-byte window holding 0xab on rank
// 1 (the one the gets read) and 0 on rank 0. 0, or the step that failed (10..12).
int getPair(int r, ncclComm_t comm, ncclDevComm* dc, GpuRank& g, Win* win) {
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.ginSignalCount = 1;
  if (ncclDevCommCreate(comm, &reqs, dc) != ncclSuccess) return 10;
  if (!win->make(comm, 4096, g.s)) return 11;
  return g.fill(win->buf, 4096, r == 1 ? 0xab : 0) ? 0 : 12;
}

// 64 bytes from every rank of another host into slot q (at q * 64 + skew) of the window, and the seconds its flush
// took; negative when the launch failed.
double timedGet(const Win& win, size_t skew, const ncclDevComm& dc) {
  const auto t0 = std::chrono::steady_clock::now();
  braid::Status st = braid_emu::launch(cfgOf(1, 32, "ginGetEveryPeer"),
                                       [&] { ginGetEveryPeer(win.win, 0, win.win, 64, skew, true, dc); });
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st.isOk() ? sec : -1;
}

// A get toward a peer that destroyed its device communicator is refused at once by the peer's messenger (a failed
// end, not silence): the flush returns well before BRAID_TIMEOUT, and nothing lands.
TEST(GinProcesses, AGetTowardADestroyedDeviceCommunicatorIsRefusedAtOnce) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("kernels run on the CTA emulator, which reads the fake's device memory from the host");
  expectOnTwoHosts(
      2,
      [](int r, ncclComm_t comm) {
        ncclDevComm dc{};
        GpuRank g(comm);
        Win win;
        if (const int failed = getPair(r, comm, &dc, g, &win)) return failed;
        if (r == 1 && ncclDevCommDestroy(comm, &dc) != ncclSuccess) return 13;
        if (!g.barrier()) return 14;
        if (r == 0) {
          const double sec = timedGet(win, 0, dc);
          if (sec < 0) return 15;
          if (sec > 10) {
            fprintf(stderr, "the flush returned after %.1f s (BRAID_TIMEOUT=20)\n", sec);
            return 16;
          }
          if (!g.allBytes(win.buf, 64, 128, 0)) return 17;  // slot 1 (64..127) stayed as it was
          if (ncclDevCommDestroy(comm, &dc) != ncclSuccess) return 18;
        }
        if (!g.barrier() || !win.drop(comm)) return 19;
        return 0;
      },
      "BRAID_TIMEOUT", "20");
}

// A get toward a peer that is alive but silent (its process stopped: SIGSTOP) ends at BRAID_TIMEOUT=2 with a WARN:
// the flush returns, the data did not land. Once the peer goes on (SIGCONT) its late answer is dropped, not landed
// in a buffer that is the user's again, and a later get from it is exact.
TEST(GinProcesses, AGetNobodyAnswersEndsAtTheDeadlineAndItsLateAnswerIsDropped) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("kernels run on the CTA emulator, which reads the fake's device memory from the host");
  expectOnTwoHosts(
      2,
      [](int r, ncclComm_t comm) {
        ncclDevComm dc{};
        GpuRank g(comm);
        Win win;
        if (const int failed = getPair(r, comm, &dc, g, &win)) return failed;
        const int stopped = stopRankOne(r, g);  // rank 0 continues rank 1 after its get ended
        if (stopped < 0) return 13;
        if (r == 0) {
          const ContinueOnExit cont{stopped};
          const double sec = timedGet(win, 0, dc);
          cont.now();
          if (sec < 0) return 15;
          if (sec < 1.5 || sec > 30) {
            fprintf(stderr, "the flush returned after %.1f s (BRAID_TIMEOUT=2)\n", sec);
            return 16;
          }
          // A later get from the same peer: answered after the late one (one connection, answered in order).
          if (timedGet(win, 1024, dc) < 0) return 17;
          if (!g.allBytes(win.buf, 1024 + 64, 1024 + 128, 0xab)) return 18;  // the later one landed
          if (!g.allBytes(win.buf, 64, 128, 0)) return 19;                   // the late one did not
        }
        if (!g.barrier()) return 20;
        if (ncclDevCommDestroy(comm, &dc) != ncclSuccess || !win.drop(comm)) return 21;
        return 0;
      },
      "BRAID_TIMEOUT", "2");
}

// Hosts of different sizes (ranks 0 and 1 on one, rank 2 on another) make LSA teams of one rank: ranks 0 and 1 share
// a host in different LSA teams, which the proxy does not serve. Every rank refuses GIN alike, rank 2 too (it used to
// accept it alone and wait for the others), and a device communicator asked for no GIN gets no contexts anywhere.
TEST(GinProcesses, UnevenHostsAreRefusedOnEveryRank) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("ranks of two hosts by NCCL_HOSTID on one machine's GPUs");
  expectOnTwoHosts(
      3, [](int, ncclComm_t comm) { return refusedWithNoContexts(comm, "on one host but in different LSA teams"); },
      "BRAID_TIMEOUT", "20");
}

}  // namespace
