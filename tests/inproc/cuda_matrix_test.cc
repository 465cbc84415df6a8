// Every collective with a reduction or a copy, under each algorithm and protocol braid runs on CUDA communicators
// (NCCL_ALGO Ring / Tree, NCCL_PROTO LL / LL128 / Simple), on 1, 5 and 9 ranks (threads; 9 ranks on the fake's 4
// devices, so up to three share one), on the strict fake driver and the CTA emulator: exact results, bitwise; the
// copies (all-to-all, gather, scatter, send/recv) too. Eight ranks sharing one GPU, as threads and as four
// processes. And three processes on two GPUs with each protocol and NVLS-style.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/cuda_coll_cases.h"
#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"

namespace {

using namespace braid_test;

class CudaMatrix : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
    setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
  }
  void TearDown() override {
    unsetenv("NCCL_ALGO");
    unsetenv("NCCL_PROTO");
    unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
  }
};

std::vector<Case> matrixCases() {
  std::vector<Case> cases;
  for (Kind k : {Kind::kAllReduce, Kind::kReduceScatter, Kind::kAllGather, Kind::kBroadcast, Kind::kReduce}) {
    cases.push_back(Case{k, ncclFloat32, ncclSum, 1, false});
    cases.push_back(Case{k, ncclBfloat16, ncclMax, 3001, true});
    cases.push_back(Case{k, ncclInt64, ncclNumOps, 20000, false});  // PreMulSum, a scalar per rank
  }
  for (Kind k : {Kind::kAllToAll, Kind::kGather, Kind::kScatter, Kind::kSendRecv}) {
    cases.push_back(Case{k, ncclFloat32, ncclSum, 1, false});
    cases.push_back(Case{k, ncclFloat8e4m3, ncclSum, 3001, false});
    cases.push_back(Case{k, ncclInt64, ncclSum, 20000, false});
  }
  return cases;
}

// What braid's trees run: all-reduce, reduce and broadcast (NCCL's set); the rest would be refused by name.
bool treeRuns(const Case& c) {
  return c.kind == Kind::kAllReduce || c.kind == Kind::kReduce || c.kind == Kind::kBroadcast;
}

TEST_P(CudaMatrix, EveryAlgorithmAndProtocol) {
  const int n = GetParam();
  for (const char* algo : {"Ring", "Tree"}) {
    for (const char* proto : {"LL", "LL128", "Simple"}) {
      SCOPED_TRACE(std::string(algo) + "/" + proto);
      setenv("NCCL_ALGO", algo, 1);
      setenv("NCCL_PROTO", proto, 1);
      std::vector<Case> cases = matrixCases();
      if (std::string(algo) == "Tree") {
        cases.erase(std::remove_if(cases.begin(), cases.end(), [](const Case& c) { return !treeRuns(c); }),
                    cases.end());
      }
      runAll(n, cases, [](int r) { return r % 4; });
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, CudaMatrix, ::testing::Values(1, 5, 9));

// Every datatype with every reduction (PreMulSum with its scalar on the host and in device memory) through each
// protocol's kernel, all-reduce and reduce-scatter on 3 ranks: the kernels' element loops, bitwise as the host
// computes them (on a GPU, tests/gpu/run.sh, this is the check of the device code generation).
TEST_F(CudaMatrix, EveryDatatypeAndReductionThroughEachProtocol) {
  const ncclDataType_t types[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,   ncclInt64,      ncclUint64,
                                  ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  std::vector<Case> cases;
  for (ncclDataType_t t : types) {
    for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, ncclNumOps}) {
      cases.push_back(Case{Kind::kAllReduce, t, op, 1001, op == ncclMax});
      cases.push_back(Case{Kind::kReduceScatter, t, op, 333, false});
    }
    cases.push_back(Case{Kind::kAllReduce, t, ncclNumOps, 1001, false, true});
    cases.push_back(Case{Kind::kReduceScatter, t, ncclNumOps, 333, true, true});
  }
  setenv("NCCL_ALGO", "Ring", 1);
  for (const char* proto : {"LL", "LL128", "Simple"}) {
    SCOPED_TRACE(proto);
    setenv("NCCL_PROTO", proto, 1);
    runAll(3, cases);
  }
}

// Every collective, a small and a larger count.
std::vector<Case> everyKind() {
  std::vector<Case> cases;
  for (Kind k : {Kind::kAllReduce, Kind::kReduceScatter, Kind::kAllGather, Kind::kBroadcast, Kind::kReduce,
                 Kind::kAllToAll, Kind::kGather, Kind::kScatter, Kind::kSendRecv}) {
    cases.push_back(Case{k, ncclFloat32, ncclSum, 7, false});
    cases.push_back(Case{k, ncclFloat16, ncclMin, 2500, k == Kind::kAllReduce});
  }
  return cases;
}

// Eight ranks share one GPU (the most the issue asks for): every CTA of every rank resident at once (the launch
// policy caps channels), each on its own internal stream, each protocol, every collective.
// Buffers that run over two cuMem mappings back to back (as PyTorch's expandable segments lay out theirs): every
// collective with a reduction and the ring's protocols, exact, also within such a buffer registered whole; and a
// buffer past the end of its allocation is refused by name, saying how far it reaches.
TEST_F(CudaMatrix, BuffersOverBackToBackCuMemMappings) {
  const size_t seg = size_t{2} << 20;  // the fake's granularity: one mapping each
  std::vector<Case> cases;
  for (bool inPlace : {false, true}) {
    cases.push_back(Case{Kind::kAllReduce, ncclFloat32, ncclSum, (2 * seg - 64) / 4, inPlace});
    cases.push_back(Case{Kind::kReduceScatter, ncclInt32, ncclMax, (seg + 4096) / 8, inPlace});
    cases.push_back(Case{Kind::kAllGather, ncclInt8, ncclSum, seg - 100, inPlace});
  }
  std::vector<std::string> errs(2);
  const auto res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    const Driver& drv = Driver::get();
    size_t mapped[2] = {0, 0};
    char* a = static_cast<char*>(drv.cuMemMake(seg, r, {r}, false, &mapped[0], 2));
    char* b = static_cast<char*>(drv.cuMemMake(seg, r, {r}, false, &mapped[1], 2));
    if (a == nullptr || b == nullptr || mapped[0] != 2 * seg) return ncclSystemError;
    ncclResult_t result = ncclSuccess;
    for (const char* proto : {"Simple", "LL"}) {
      setenv("NCCL_PROTO", proto, 1);
      for (const Case& c : cases) {
        const std::string e = runCase(c, r, 2, comm, stream, a, b);
        if (!e.empty() && result == ncclSuccess) {
          errs[static_cast<size_t>(r)] = std::string(proto) + " " + describe(c) + ": " + e;
          result = ncclInternalError;
        }
      }
    }
    unsetenv("NCCL_PROTO");
    // Registered whole, then used from its second mapping: still the registered buffer.
    void* h = nullptr;
    if (ncclCommRegister(comm, a, mapped[0], &h) != ncclSuccess) return ncclInternalError;
    for (bool inPlace : {false, true}) {
      const Case c{Kind::kAllReduce, ncclFloat32, ncclSum, seg / 8, inPlace};
      const std::string e = runCase(c, r, 2, comm, stream, a + seg + 4096, b);
      if (!e.empty() && result == ncclSuccess) {
        errs[static_cast<size_t>(r)] = "registered, " + describe(c) + ": " + e + " " + ncclGetLastError(comm);
        result = ncclInternalError;
      }
    }
    if (ncclCommDeregister(comm, h) != ncclSuccess) return ncclInternalError;
    char* small = static_cast<char*>(drv.alloc(4096));
    const ncclResult_t past = ncclAllReduce(small, small, 2048, ncclFloat32, ncclSum, comm, stream);
    const std::string why = ncclGetLastError(comm);
    if (result == ncclSuccess &&
        (past != ncclInvalidArgument ||
         why.find("8192 bytes run past the end of its allocation, 4096 bytes in") == std::string::npos)) {
      errs[static_cast<size_t>(r)] = "past the end: " + why;
      result = ncclInternalError;
    }
    drv.memFree(reinterpret_cast<unsigned long long>(small));
    drv.cuMemDrop(a, mapped[0], 2);
    drv.cuMemDrop(b, mapped[1], 2);
    return result;
  });
  for (size_t r = 0; r < res.size(); ++r) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r << ": " << errs[r];
}

TEST_F(CudaMatrix, EightRanksShareOneGpu) {
  for (const char* proto : {"LL", "LL128", "Simple"}) {
    SCOPED_TRACE(proto);
    setenv("NCCL_PROTO", proto, 1);
    runAll(8, everyKind(), [](int) { return 0; });
  }
  setenv("NCCL_ALGO", "Tree", 1);
  std::vector<Case> tree = everyKind();
  tree.erase(std::remove_if(tree.begin(), tree.end(), [](const Case& c) { return !treeRuns(c); }), tree.end());
  runAll(8, tree, [](int) { return 0; });
}

}  // namespace

namespace {

// Three processes on two fake GPUs (two ranks share GPU 0 across processes), the GPUs under one switch: FIFOs and
// direct areas imported from other processes, same GPU and peer GPU, each protocol. No fixture: the parent must not
// initialise CUDA before it forks.
TEST(CudaMatrixProcesses, ThreeProcessesOnTwoGpus) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  const std::string topo = writeFakeGpuTopology(false);
  setenv("NCCL_TOPO_FILE", topo.c_str(), 1);
  setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
  for (const char* setting : {"LL", "LL128", "Simple", "NVLS"}) {
    const bool nvls = std::string(setting) == "NVLS";
    setenv(nvls ? "NCCL_ALGO" : "NCCL_PROTO", setting, 1);
    std::vector<int> codes = runProcesses(
        3,
        [&](int r, ncclComm_t comm) {
          const Driver& drv = Driver::get();
          void* stream = nullptr;
          drv.streamCreate(&stream, 1);
          std::vector<Case> cases = {Case{Kind::kAllReduce, ncclFloat32, ncclSum, 70000, false},
                                     Case{Kind::kReduceScatter, ncclFloat16, ncclNumOps, 3001, true},
                                     Case{Kind::kAllGather, ncclInt32, ncclSum, 1000, false}};
          if (!nvls) cases.push_back(Case{Kind::kBroadcast, ncclUint8, ncclSum, 5000, true});
          char* a = static_cast<char*>(drv.alloc(70000 * 4 * 3));
          char* b = static_cast<char*>(drv.alloc(70000 * 4 * 3));
          int code = 0;
          for (const Case& c : cases) {
            const std::string e = runCase(c, r, 3, comm, static_cast<cudaStream_t>(stream), a, b);
            if (!e.empty()) {
              fprintf(stderr, "rank %d: %s: %s\n", r, describe(c).c_str(), e.c_str());
              code = 10;
              break;
            }
          }
          drv.memFree(reinterpret_cast<unsigned long long>(a));
          drv.memFree(reinterpret_cast<unsigned long long>(b));
          drv.streamDestroy(stream);
          return code;
        },
        120, nullptr, nullptr,
        [](int r) {
          if (!Driver::get().use(r % 2)) _exit(20);
        });
    for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << setting << " rank " << r;
    unsetenv("NCCL_ALGO");
    unsetenv("NCCL_PROTO");
  }
  unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
  unsetenv("NCCL_TOPO_FILE");
  unlink(topo.c_str());
}

// The emulator's chaos (BRAID_EMU_CHAOS: seeded random yields and sleeps at every barrier and back-off) through the
// public API: every collective on 3 ranks, two of them sharing a GPU, LL and Simple, still exact.
TEST_F(CudaMatrix, EveryCollectiveUnderEmulatorChaos) {
  BRAID_REQUIRE_FAKE("the CTA emulator");
  setenv("BRAID_EMU_CHAOS", "20261203", 1);
  for (const char* proto : {"LL", "Simple"}) {
    SCOPED_TRACE(proto);
    setenv("NCCL_PROTO", proto, 1);
    runAll(3, everyKind(), [](int r) { return r / 2; });
  }
  unsetenv("BRAID_EMU_CHAOS");
}

// Nine ranks on one GPU stay within its 32 hardware queues: 3 streams each (the user's, braid's internal one and its
// initialising one, which the P2P self-test shares), 27. A tenth stream per rank (the self-test had its own) made
// 36, and streams sharing queues stalled the all-to-all's connection set-up behind a kernel until BRAID_TIMEOUT.
TEST_F(CudaMatrix, NineRanksShareOneGpuWithinItsQueues) {
  setenv("NCCL_PROTO", "LL", 1);
  setenv("BRAID_TIMEOUT", "20", 1);
  runAll(9, everyKind(), [](int) { return 0; });
  unsetenv("BRAID_TIMEOUT");
}

// Four processes share one fake GPU (FIFOs and direct areas imported between them, the same device's memory):
// every collective, with the default choice and NVLS-style.
TEST(CudaMatrixProcesses, FourProcessesShareOneGpu) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  const std::string topo = writeFakeGpuTopology(false);
  setenv("NCCL_TOPO_FILE", topo.c_str(), 1);
  setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
  for (const char* algo : {"", "NVLS"}) {
    const bool nvls = *algo != '\0';
    if (nvls) setenv("NCCL_ALGO", algo, 1);
    std::vector<int> codes = runProcesses(
        4,
        [&](int r, ncclComm_t comm) {
          const Driver& drv = Driver::get();
          void* stream = nullptr;
          drv.streamCreate(&stream, 1);
          std::vector<Case> cases = everyKind();
          if (nvls) {
            cases = {Case{Kind::kAllReduce, ncclFloat32, ncclSum, 70000, false},
                     Case{Kind::kReduceScatter, ncclBfloat16, ncclMax, 3001, true},
                     Case{Kind::kAllGather, ncclInt32, ncclSum, 1000, false}};
          }
          const size_t bytes = 70000 * 4 * 4;
          char* a = static_cast<char*>(drv.alloc(bytes));
          char* b = static_cast<char*>(drv.alloc(bytes));
          int code = 0;
          for (const Case& c : cases) {
            const std::string e = runCase(c, r, 4, comm, static_cast<cudaStream_t>(stream), a, b);
            if (!e.empty()) {
              fprintf(stderr, "rank %d: %s: %s\n", r, describe(c).c_str(), e.c_str());
              code = 10;
              break;
            }
          }
          drv.memFree(reinterpret_cast<unsigned long long>(a));
          drv.memFree(reinterpret_cast<unsigned long long>(b));
          drv.streamDestroy(stream);
          return code;
        },
        180, nullptr, nullptr,
        [](int) {
          if (!Driver::get().use(0)) _exit(20);
        });
    for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << (nvls ? "NVLS" : "default") << " rank " << r;
    unsetenv("NCCL_ALGO");
  }
  unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
  unsetenv("NCCL_TOPO_FILE");
  unlink(topo.c_str());
}

}  // namespace
