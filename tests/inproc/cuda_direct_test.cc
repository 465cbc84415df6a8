// NVLS-style (direct) collectives on CUDA communicators (src/backends/cuda/cuda_direct.h and the direct kernel,
// src/backends/common/direct_kernel.h), on the strict fake driver and the CTA emulator. NCCL_ALGO=NVLS forces the
// path (on GPUs the model never picks it by itself yet), so a communicator that could not set it up fails the
// call instead of quietly taking the ring. Checked bitwise: every datatype and reduction, one-shot and two-shot
// all-reduce, reduce-scatter and all-gather, in and out of place, several rounds, ranks sharing a GPU, ranks in
// two processes (the areas imported from exported cuMem handles), graph replay, and the failure paths.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/cuda_coll_cases.h"
#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"

namespace {

using namespace braid_test;

class CudaDirect : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
    setenv("NCCL_ALGO", "NVLS", 1);
  }
  void TearDown() override {
    unsetenv("NCCL_ALGO");
    unsetenv("NCCL_P2P_DISABLE");
    unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
    unsetenv("BRAID_TIMEOUT");
  }
};

const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,   ncclInt64,      ncclUint64,
                                 ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

// Every datatype with every reduction (PreMulSum with a different scalar on each rank), one-shot all-reduce and
// reduce-scatter, 3 ranks on 3 GPUs: bitwise what the host computes.
TEST_F(CudaDirect, EveryDatatypeAndReduction) {
  std::vector<Case> cases;
  for (ncclDataType_t t : kTypes) {
    for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, ncclNumOps}) {
      cases.push_back(Case{Kind::kAllReduce, t, op, 1000, op == ncclMax});
      cases.push_back(Case{Kind::kReduceScatter, t, op, 333, op == ncclMin});
    }
    cases.push_back(Case{Kind::kAllGather, t, ncclSum, 257, t == ncclInt8});
  }
  runAll(3, cases);
}

// Sizes: 1 element; one-shot; two-shot (above 256 KB) over several rounds of every lane, with a count no lane
// width divides; reduce-scatter and all-gather over several rounds; in and out of place; 2 and 4 ranks.
TEST_F(CudaDirect, SizesAndRounds) {
  std::vector<Case> cases;
  for (bool inPlace : {false, true}) {
    for (size_t count : {size_t{1}, size_t{5000}, size_t{70000}, size_t{300001}}) {
      cases.push_back(Case{Kind::kAllReduce, ncclFloat32, ncclSum, count, inPlace});
    }
    cases.push_back(Case{Kind::kAllReduce, ncclFloat16, ncclAvg, 200003, inPlace});
    for (size_t count : {size_t{1}, size_t{40000}}) {
      cases.push_back(Case{Kind::kReduceScatter, ncclFloat32, ncclSum, count, inPlace});
      cases.push_back(Case{Kind::kAllGather, ncclInt32, ncclSum, count, inPlace});
    }
  }
  runAll(2, cases);
  runAll(4, cases);
}

// Four ranks on two GPUs (two each): the same GPU's areas, and another GPU's, in one operation.
TEST_F(CudaDirect, RanksSharingAGpu) {
  setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
  std::vector<Case> cases = {
      Case{Kind::kAllReduce, ncclFloat32, ncclSum, 3000, true},
      Case{Kind::kAllReduce, ncclBfloat16, ncclMax, 100000, false},
      Case{Kind::kReduceScatter, ncclFloat64, ncclAvg, 20000, false},
      Case{Kind::kAllGather, ncclUint8, ncclSum, 70000, true},
  };
  runAll(4, cases, [](int r) { return r / 2; });
}

// With P2P off the ranks cannot reach each other's areas: no direct collectives, and NCCL_ALGO=NVLS is refused by
// name rather than run another way.
TEST_F(CudaDirect, WithoutP2pNvlsIsRefused) {
  setenv("NCCL_P2P_DISABLE", "1", 1);
  std::vector<std::string> msgs(2);
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    void* buf = Driver::get().alloc(4000);
    ncclResult_t st = ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, comm, stream);
    msgs[static_cast<size_t>(r)] = ncclGetLastError(comm);
    Driver::get().streamSync(stream);
    Driver::get().memFree(reinterpret_cast<unsigned long long>(buf));
    return st;
  });
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r], ncclInvalidUsage) << msgs[r];
    EXPECT_NE(msgs[r].find("NVLS"), std::string::npos) << msgs[r];
  }
}

// Without NCCL_ALGO the GPU path takes the ring or tree (the staged peer-pointer schedules are chosen only when
// asked, until they have run on a GPU), and the result is the same.
TEST_F(CudaDirect, NotChosenUnlessAsked) {
  unsetenv("NCCL_ALGO");
  runAll(2, {Case{Kind::kAllReduce, ncclFloat32, ncclSum, 5000, false}});
}

// A rank whose peer never comes: its kernel stops at BRAID_TIMEOUT and the error names the rank it waited for.
TEST_F(CudaDirect, AMissingPeerIsNamedAtTheDeadline) {
  setenv("BRAID_TIMEOUT", "1", 1);
  const Driver& drv = Driver::get();
  std::string msg;
  std::atomic<bool> done{false};
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    void* buf = drv.alloc(4000);
    if (r == 1) {
      while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      drv.memFree(reinterpret_cast<unsigned long long>(buf));
      return ncclSuccess;
    }
    ncclResult_t st = ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, comm, stream);
    drv.streamSync(stream);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    msg = ncclGetLastError(comm);
    drv.memFree(reinterpret_cast<unsigned long long>(buf));
    done.store(true);
    return st == ncclSuccess && async == ncclRemoteError ? ncclSuccess : ncclInternalError;
  });
  EXPECT_EQ(res[0], ncclSuccess) << msg;
  EXPECT_NE(msg.find("braidKernelDirect on lane"), std::string::npos) << msg;
  EXPECT_NE(msg.find("waiting for rank 1"), std::string::npos) << msg;
}

// A captured all-reduce replays with new inputs between eager direct calls: generations live in the areas, not in
// the captured work.
TEST_F(CudaDirect, GraphReplays) {
  const Driver& drv = Driver::get();
  auto sym = [&](const char* name) { return dlsym(drv.lib, name); };
  auto begin = reinterpret_cast<int (*)(void*, int)>(sym("cuStreamBeginCapture_v2"));
  auto end = reinterpret_cast<int (*)(void*, void**)>(sym("cuStreamEndCapture"));
  auto instantiate = reinterpret_cast<int (*)(void**, void*, unsigned long long)>(sym("cuGraphInstantiateWithFlags"));
  auto launch = reinterpret_cast<int (*)(void*, void*)>(sym("cuGraphLaunch"));
  auto execDestroy = reinterpret_cast<int (*)(void*)>(sym("cuGraphExecDestroy"));
  auto destroy = reinterpret_cast<int (*)(void*)>(sym("cuGraphDestroy"));
  constexpr int kRanks = 3;
  constexpr size_t kCount = 70000;  // two-shot, several rounds
  std::vector<ncclResult_t> res = runCudaRanks(kRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    const size_t bytes = kCount * 4;
    void* send = drv.alloc(bytes);
    void* recv = drv.alloc(bytes);
    std::vector<float> in(kCount), out(kCount);
    auto value = [](int rank, size_t i, int tag) {
      return static_cast<float>((i * 5 + static_cast<size_t>(rank) * 3 + static_cast<size_t>(tag)) % 19);
    };
    auto check = [&](int tag) {
      drv.copy(out.data(), recv, bytes, stream);
      if (drv.streamSync(stream) != 0) return false;
      for (size_t i = 0; i < kCount; ++i) {
        float want = 0;
        for (int p = 0; p < kRanks; ++p) want += value(p, i, tag);
        if (out[i] != want) return false;
      }
      return true;
    };
    auto setInput = [&](int tag) {
      for (size_t i = 0; i < kCount; ++i) in[i] = value(r, i, tag);
      drv.copy(send, in.data(), bytes, stream);
    };
    setInput(0);
    if (ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream) != ncclSuccess || !check(0)) {
      return ncclInternalError;
    }
    void* graph = nullptr;
    void* exec = nullptr;
    if (begin(stream, 1) != 0) return ncclSystemError;
    if (ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) return ncclInternalError;
    if (end(stream, &graph) != 0 || instantiate(&exec, graph, 0) != 0) return ncclSystemError;
    for (int replay = 1; replay <= 3; ++replay) {
      setInput(replay);
      if (launch(exec, stream) != 0 || !check(replay)) return ncclInternalError;
      setInput(10 + replay);  // an eager call between replays
      if (ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream) != ncclSuccess || !check(10 + replay)) {
        return ncclInternalError;
      }
    }
    execDestroy(exec);
    destroy(graph);
    drv.memFree(reinterpret_cast<unsigned long long>(send));
    drv.memFree(reinterpret_cast<unsigned long long>(recv));
    return ncclSuccess;
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
}

// Ranks in two processes, their GPUs under one switch: each maps the other's area from an exported cuMem handle.
// No fixture: the parent must not initialise CUDA before it forks.
TEST(CudaDirectProcesses, ImportEachOthersAreas) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  const std::string topo = writeFakeGpuTopology(false);
  setenv("NCCL_TOPO_FILE", topo.c_str(), 1);
  setenv("NCCL_ALGO", "NVLS", 1);
  std::vector<int> codes = runProcesses(2, checkedAllReducesOfTwo, 120, nullptr, nullptr, [](int r) {
    if (!Driver::get().use(r)) _exit(20);
  });
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_TOPO_FILE");
  unlink(topo.c_str());
}

}  // namespace
