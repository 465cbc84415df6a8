// NCCL 2.32's Flow device API (include/nccl_device/flow.h) running: a ring all-reduce written with ncclFlowProcessor
// (tests/devapi/flow_kernels.cuh) on braid's CTA emulator, over device communicators of CUDA communicators on the
// strict fake driver (ranks as threads, one fake GPU each). Every element is checked, over several launches (the
// connections resume their steps), for the Simple, LL and LL128 protocols, two slots per step, two parts (rings in
// both directions) and direct sends into the next rank's output window; misuse is a kernel error naming the rule.
#include "tests/devapi/device_shim.h"
// (the shim first: it turns on the headers' device half)
#include "tests/devapi/flow_kernels.cuh"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"
#include "tests/devapi/gin_test_util.h"
#include "tests/devapi/kernel_test_util.h"

namespace {

using namespace braid_test;

class FlowKernels : public FakeGpuKernels {};

struct FlowCase {
  FlowVariant variant;
  FlowRingShape shape;
  int nWorkerWarps;
  bool directGather;
  int grid;
  bool ginResources = true;  // (Gin variants) GIN signals and staging FIFOs asked for; false: no GIN contexts at all
};

float flowInput(int rank, int round, size_t i) {
  return static_cast<float>((rank + 1) * 7 + round * 3 + static_cast<int>(i % 113));
}

int signalWarps(FlowVariant v) {
  const bool ll128 = v == kFlowLL128 || v == kFlowGinLL128;
  return ncclFlowGetSignalWarpsPerPart(ll128 ? ncclFlowProtocolLL128 : ncclFlowProtocolSimple);
}

// Every rank has finished what it did with its buffers before any goes on (a direct send writes the next rank's
// output window, which that rank fills and reads between launches).
ncclResult_t ranksMeet(ncclComm_t comm, cudaStream_t stream, float* word) {
  if (ncclAllReduce(word, word, 1, ncclFloat, ncclSum, comm, stream) != ncclSuccess) return ncclInternalError;
  return Driver::get().streamSync(stream) == 0 ? ncclSuccess : ncclUnhandledCudaError;
}

// Rounds of the ring all-reduce of `c` on rank r: ncclSuccess, or why not.
ncclResult_t flowRounds(int r, int nRanks, ncclComm_t comm, cudaStream_t stream, const FlowCase& c) {
  constexpr int kRounds = 3;
  constexpr size_t kCount = 1337;  // chunks, blocks and halves of every size, the last ones short
  const Driver& drv = Driver::get();
  const size_t bytes = kCount * sizeof(float);
  void *send = nullptr, *recv = nullptr;
  CHECK_OR(ncclMemAlloc(&send, bytes) == ncclSuccess && ncclMemAlloc(&recv, bytes) == ncclSuccess, 10);
  ncclWindow_t sendWin = nullptr, recvWin = nullptr;
  CHECK_OR(ncclCommWindowRegister(comm, send, bytes, &sendWin, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 11);
  CHECK_OR(ncclCommWindowRegister(comm, recv, bytes, &recvWin, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 11);
  FlowRingResources res{};
  ncclDevResourceRequirements bufs[3];
  const bool gin = (c.variant == kFlowGinSimple || c.variant == kFlowGinLL128) && c.ginResources;
  flowRingRequirements(c.grid, c.shape, &res, bufs, gin);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.resourceRequirementsList = &bufs[0];
  if (gin) reqs.ginSignalCount = flowRingGinSignals(c.grid, c.shape);
  ncclDevComm dc{};
  if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) {
    fprintf(stderr, "rank %d: %s\n", r, ncclGetLastError(comm));
    return ncclInternalError;
  }
  float* word = static_cast<float*>(drv.alloc(sizeof(float)));
  ncclFlowShmem* shmem = static_cast<ncclFlowShmem*>(drv.alloc(sizeof(ncclFlowShmem)));
  std::vector<float> in(kCount), out(kCount);
  const int threads = 32 * (c.nWorkerWarps + c.shape.nParts * signalWarps(c.variant));
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < kCount; ++i) in[i] = flowInput(r, round, i);
    std::vector<float> stale(kCount, -1.0f);
    drv.copy(send, in.data(), bytes, stream);
    drv.copy(recv, stale.data(), bytes, stream);
    CHECK_OR(ranksMeet(comm, stream, word) == ncclSuccess, 13);
    braid::Status st = braid_emu::launch(cfgOf(c.grid, threads, "flowRingKernel"), [&] {
      flowRingKernel(c.variant, dc, c.shape, res, sendWin, recvWin, kCount, c.nWorkerWarps, c.directGather, shmem);
    });
    if (!st.isOk()) {
      fprintf(stderr, "rank %d round %d: %s\n", r, round, st.message().c_str());
      return ncclInternalError;
    }
    drv.copy(out.data(), recv, bytes, stream);
    CHECK_OR(drv.streamSync(stream) == 0, 13);
    for (size_t i = 0; i < kCount; ++i) {
      float want = 0;
      for (int p = 0; p < nRanks; ++p) want += flowInput(p, round, i);
      if (out[i] != want) {
        fprintf(stderr, "rank %d round %d element %zu: %f, expected %f\n", r, round, i, out[i], want);
        return ncclInternalError;
      }
    }
    CHECK_OR(ranksMeet(comm, stream, word) == ncclSuccess, 13);
  }
  drv.memFree(reinterpret_cast<unsigned long long>(word));
  drv.memFree(reinterpret_cast<unsigned long long>(shmem));
  CHECK_OR(ncclDevCommDestroy(comm, &dc) == ncclSuccess, 14);
  CHECK_OR(ncclCommWindowDeregister(comm, sendWin) == ncclSuccess, 15);
  CHECK_OR(ncclCommWindowDeregister(comm, recvWin) == ncclSuccess, 15);
  CHECK_OR(ncclMemFree(send) == ncclSuccess && ncclMemFree(recv) == ncclSuccess, 15);
  return ncclSuccess;
}

void expectRingAllReduce(int nRanks, const FlowCase& c) {
  auto res = runCudaRanks(
      nRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) { return flowRounds(r, nRanks, comm, stream, c); });
  for (int r = 0; r < nRanks; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

TEST_F(FlowKernels, SimpleRingAllReduceIsExactAcrossLaunches) {
  expectRingAllReduce(3, FlowCase{kFlowSimple, FlowRingShape{1, 2, 256}, 2, false, 2});
}

TEST_F(FlowKernels, FourRanksAndTwoSlotsPerStep) {
  expectRingAllReduce(4, FlowCase{kFlowSimple2Slots, FlowRingShape{1, 3, 128}, 2, false, 1});
}

TEST_F(FlowKernels, LlAndLl128KeepTheirSlotCapacities) {
  expectRingAllReduce(3, FlowCase{kFlowLL, FlowRingShape{1, 2, 64}, 2, false, 2});
  expectRingAllReduce(3, FlowCase{kFlowLL128, FlowRingShape{1, 2, 256}, 2, false, 1});
}

TEST_F(FlowKernels, TwoPartsRunRingsBothWays) {
  expectRingAllReduce(3, FlowCase{kFlowSimple, FlowRingShape{2, 2, 128}, 4, false, 1});
}

TEST_F(FlowKernels, DirectSendsWriteTheNextRanksOutputWindow) {
  expectRingAllReduce(3, FlowCase{kFlowSimple, FlowRingShape{1, 2, 256}, 2, true, 2});
}

TEST_F(FlowKernels, OneRankCopiesThrough) {
  expectRingAllReduce(1, FlowCase{kFlowSimple, FlowRingShape{1, 2, 256}, 2, false, 1});
}

// Each rank passes nSteps stamps to the next rank of a 3-rank ring through one connection of `shape` (GIN or LSA),
// with NCCL's split roles (one thread waits and fills, another mirrors the step and posts), over several launches:
// every stamp must arrive in order.
void expectStampsPassInOrder(bool gin, FlowRingShape shape, int nSteps) {
  constexpr int kRanks = 3, kLaunches = 3;
  auto res = runCudaRanks(kRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) -> ncclResult_t {
    const Driver& drv = Driver::get();
    FlowRingResources res{};
    ncclDevResourceRequirements bufs[3];
    flowRingRequirements(1, shape, &res, bufs, gin);
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.resourceRequirementsList = &bufs[0];
    if (gin) reqs.ginSignalCount = flowRingGinSignals(1, shape);
    ncclDevComm dc{};
    CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess, 10);
    CHECK_OR(!gin || dc.ginContextCount >= 1, 10);
    int* out = static_cast<int*>(drv.alloc(static_cast<size_t>(nSteps) * sizeof(int)));
    std::vector<int> got(static_cast<size_t>(nSteps));
    const int prev = (r + kRanks - 1) % kRanks;
    for (int launch = 0; launch < kLaunches; ++launch) {
      braid::Status st = braid_emu::launch(cfgOf(1, 64, "flowConnPass"),
                                           [&] { flowConnPass(dc, shape, res, gin, launch, nSteps, out); });
      if (!st.isOk()) {
        fprintf(stderr, "rank %d launch %d: %s\n", r, launch, st.message().c_str());
        return ncclInternalError;
      }
      drv.copy(got.data(), out, got.size() * sizeof(int), stream);
      CHECK_OR(drv.streamSync(stream) == 0, 11);
      for (int s = 0; s < nSteps; ++s) {
        if (got[static_cast<size_t>(s)] != launch * 1000 + prev * 100 + s) {
          fprintf(stderr, "rank %d launch %d step %d: %d\n", r, launch, s, got[static_cast<size_t>(s)]);
          return ncclInternalError;
        }
      }
    }
    // The next rank's receiver may still be posting credits into this rank's resource window: every rank's kernels
    // end before any rank destroys its device communicator (ncclDevCommDestroy is local).
    float* word = static_cast<float*>(drv.alloc(sizeof(float)));
    CHECK_OR(ranksMeet(comm, stream, word) == ncclSuccess, 12);
    drv.memFree(reinterpret_cast<unsigned long long>(word));
    drv.memFree(reinterpret_cast<unsigned long long>(out));
    return ncclDevCommDestroy(comm, &dc);
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// ncclLsaFlowConn: more steps than slots, across launches.
TEST_F(FlowKernels, ConnectionsWithSplitRolesPassEveryStepInOrder) {
  expectStampsPassInOrder(false, FlowRingShape{1, 2, 64}, 7);
}

// A processor with a GIN mask reaches peers it can load and store over LSA: its device communicator has no GIN
// resources here, so a connection that went over GIN would end the kernel.
TEST_F(FlowKernels, GinMaskedProcessorsTakeLsaPeersOverLsa) {
  expectRingAllReduce(3, FlowCase{kFlowGinSimple, FlowRingShape{1, 3, 256}, 2, false, 2, false});
  expectRingAllReduce(3, FlowCase{kFlowGinLL128, FlowRingShape{2, 2, 256}, 4, false, 1, false});
}

// ncclGinFlowConn (GIN by load/store between ranks of one process): the posted signal values resume with the steps.
TEST_F(FlowKernels, GinConnectionsPassEveryStepInOrder) {
  expectStampsPassInOrder(true, FlowRingShape{1, 3, 64}, 11);
}

// A transfer larger than its slots, and a launch of another shape, end the kernel with the rule they broke.
TEST_F(FlowKernels, MisuseIsAKernelErrorNamingTheRule) {
  constexpr int kRanks = 2;
  auto res = runCudaRanks(kRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) -> ncclResult_t {
    const Driver& drv = Driver::get();
    const FlowRingShape shape{1, 2, 256};
    FlowRingResources res{};
    ncclDevResourceRequirements bufs[3];
    flowRingRequirements(1, shape, &res, bufs);
    ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.resourceRequirementsList = &bufs[0];
    ncclDevComm dc{};
    CHECK_OR(ncclDevCommCreate(comm, &reqs, &dc) == ncclSuccess, 10);
    void* send = nullptr;
    CHECK_OR(ncclMemAlloc(&send, 4096) == ncclSuccess, 11);
    ncclWindow_t sendWin = nullptr;
    CHECK_OR(ncclCommWindowRegister(comm, send, 4096, &sendWin, 0) == ncclSuccess, 11);
    ncclFlowShmem* shmem = static_cast<ncclFlowShmem*>(drv.alloc(sizeof(ncclFlowShmem)));
    auto launch = [&](int threads, const int* partWorkerWarps) {
      return braid_emu::launch(cfgOf(1, threads, "flowTooLarge"),
                               [&] { flowTooLarge(dc, shape, res, sendWin, 2, shmem, partWorkerWarps); });
    };
    braid::Status st = launch(128, nullptr);
    CHECK_OR(!st.isOk() && st.message().find("does not fit in SlotsPerProcess slots") != std::string::npos, 12);
    st = launch(96, nullptr);
    CHECK_OR(!st.isOk() && st.message().find("nWorkerWarps at least 2 * nParts") != std::string::npos, 13);
    // Worker warps that do not add up (threads would be left outside every part's barrier).
    const int oneWarp[1] = {1};
    st = launch(128, oneWarp);
    CHECK_OR(!st.isOk() && st.message().find("partWorkerWarps must give each part at least 2") != std::string::npos,
             13);
    drv.memFree(reinterpret_cast<unsigned long long>(shmem));
    CHECK_OR(ncclCommWindowDeregister(comm, sendWin) == ncclSuccess, 14);
    CHECK_OR(ncclMemFree(send) == ncclSuccess, 14);
    (void)stream;
    return ncclDevCommDestroy(comm, &dc);
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// Rings across two hosts (GPU processes, NCCL_HOSTID): the connections to ranks of the other host go over GIN (the
// proxy), those within a host over LSA. 2 ranks: both of each rank's peers over GIN; 4 ranks, two per host: one over
// each. Simple with two slots per step, and LL128 with two parts (rings both ways).
TEST(FlowProcesses, RingsAcrossHostsMixLsaAndGinConnections) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("kernels run on the CTA emulator, which reads the fake's device memory from the host");
  for (int n : {2, 4}) {
    for (const FlowCase& c : {FlowCase{kFlowGinSimple, FlowRingShape{1, 3, 256}, 2, false, 2},
                              FlowCase{kFlowGinLL128, FlowRingShape{2, 2, 256}, 4, false, 1}}) {
      gin_test::expectOnTwoHosts(n, [n, c](int r, ncclComm_t comm) {
        gin_test::GpuRank g(comm);
        return flowRounds(r, n, comm, g.s, c) == ncclSuccess ? 0 : 1;
      });
    }
  }
}

// Across hosts, what braid does not build is a kernel error naming it: ncclLsaFlowProcessor (no GIN mask) toward a
// rank of another host, and a direct send over GIN.
TEST(FlowProcesses, WhatGinCannotDoIsAKernelErrorNamingIt) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  BRAID_REQUIRE_FAKE_NOT_LOADED("kernels run on the CTA emulator, which reads the fake's device memory from the host");
  struct Misuse {
    FlowVariant variant;
    bool direct;
    const char* message;
  };
  for (const Misuse& m : {Misuse{kFlowSimple, false, "the processor has no GIN backend mask (ncclLsaFlowProcessor)"},
                          Misuse{kFlowGinSimple, true, "a direct send or receive with a peer over GIN is not built"}}) {
    gin_test::expectOnTwoHosts(2, [m](int r, ncclComm_t comm) {
      gin_test::GpuRank g(comm);
      const FlowRingShape shape{1, 2, 256};
      FlowRingResources res{};
      ncclDevResourceRequirements bufs[3];
      flowRingRequirements(1, shape, &res, bufs, true);
      ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
      reqs.resourceRequirementsList = &bufs[0];
      reqs.ginSignalCount = flowRingGinSignals(1, shape);
      ncclDevComm dc{};
      if (ncclDevCommCreate(comm, &reqs, &dc) != ncclSuccess) return 10;
      gin_test::Win send, recv;
      if (!send.make(comm, 4096, g.s) || !recv.make(comm, 4096, g.s)) return 11;
      ncclFlowShmem* shmem = static_cast<ncclFlowShmem*>(Driver::get().alloc(sizeof(ncclFlowShmem)));
      const braid::Status st = braid_emu::launch(cfgOf(1, 32 * (2 + 2), "flowRingKernel"), [&] {
        flowRingKernel(m.variant, dc, shape, res, send.win, recv.win, 1024, 2, m.direct, shmem);
      });
      if (st.isOk() || st.message().find(m.message) == std::string::npos) {
        fprintf(stderr, "rank %d: expected a kernel error naming \"%s\", got: %s\n", r, m.message,
                st.isOk() ? "success" : st.message().c_str());
        return 12;
      }
      Driver::get().memFree(reinterpret_cast<unsigned long long>(shmem));
      if (!g.barrier()) return 13;
      return ncclDevCommDestroy(comm, &dc) == ncclSuccess && send.drop(comm) && recv.drop(comm) ? 0 : 14;
    });
  }
}

}  // namespace
