// The p2p transport on CUDA communicators (transports/p2p, docs/cuda.md), on the strict fake driver: which pairs
// use it (the host topology and NCCL_P2P_LEVEL, NCCL_P2P_DISABLE, the driver's answer where the topology does not
// show the GPUs), exact results over it, and ranks in different processes attaching to each other's FIFOs through
// exported cuMem handles; and which model chooses the algorithms (NCCL's GPU model when the topology shows the
// GPUs). The decisions are read from the INFO log, where braid names each pair's.
#include <gtest/gtest.h>
#include <stdlib.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // ncclResetDebugInit: the only way to reopen the log
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"
#include "tests/common/log_capture.h"

namespace {

using namespace braid_test;

// An all-reduce of `count` floats on n ranks (device r each), exact.
std::vector<ncclResult_t> allReduce(int n, size_t count) {
  const Driver& drv = Driver::get();
  return runCudaRanks(n, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    std::vector<float> in(count), out(count, -1);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((i + static_cast<size_t>(r)) % 11);
    void* buf = drv.alloc(count * 4);
    drv.copy(buf, in.data(), count * 4, stream);
    ncclResult_t st = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, stream);
    if (st != ncclSuccess) return st;
    drv.copy(out.data(), buf, count * 4, stream);
    if (drv.streamSync(stream) != 0) return ncclUnhandledCudaError;
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    if (async != ncclSuccess) return async;
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int p = 0; p < n; ++p) want += static_cast<float>((i + static_cast<size_t>(p)) % 11);
      if (out[i] != want) {
        ADD_FAILURE() << "rank " << r << " element " << i << ": " << out[i] << ", expected " << want;
        return ncclInternalError;
      }
    }
    drv.memFree(reinterpret_cast<unsigned long long>(buf));
    return ncclSuccess;
  });
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

class CudaP2p : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
  }
  void TearDown() override {
    unsetenv("NCCL_TOPO_FILE");
    unsetenv("NCCL_P2P_LEVEL");
    unsetenv("NCCL_P2P_DISABLE");
    unsetenv("BRAID_FAKE_CUDA_NO_P2P");
    unsetenv("BRAID_FAKE_CUDA_P2P_DROP");
    unsetenv("BRAID_TIMEOUT");
    unsetenv("NCCL_PROTO");
  }
};

// Two GPUs under one switch use P2P; a pair across CPU sockets (SYS, beyond the default level PXB) goes through
// host memory, until NCCL_P2P_LEVEL=SYS allows it; NCCL_P2P_DISABLE=1 turns P2P off. Results are exact each time.
TEST_F(CudaP2p, TheTopologyAndTheKnobsDecideWhichPairsUseP2p) {
  BRAID_REQUIRE_FAKE("the fake GPUs' topology file");
  const std::string topo = writeFakeGpuTopology(true);
  setenv("NCCL_TOPO_FILE", topo.c_str(), 1);
  {
    LogCapture log;
    for (ncclResult_t r : allReduce(3, 70000)) EXPECT_EQ(r, ncclSuccess);
    const std::string t = log.textOf(getpid());
    EXPECT_TRUE(has(t, "rank 0 (GPU 0) and rank 1 (GPU 1): P2P, path PIX")) << t;
    // The topology shows the GPUs: NCCL's GPU model chooses algorithms and protocols.
    EXPECT_TRUE(has(t, "rank 0: algorithms and protocols chosen by NCCL's GPU model (3 ranks, 1 node(s), sm 90-90"))
        << t;
    EXPECT_TRUE(has(t, "rank 0 (GPU 0) and rank 2 (GPU 2): no P2P (host memory), path SYS")) << t;
    EXPECT_TRUE(has(t, "via p2p")) << t;
    EXPECT_TRUE(has(t, "via inproc")) << t;
  }
  {
    setenv("NCCL_P2P_LEVEL", "SYS", 1);
    LogCapture log;
    for (ncclResult_t r : allReduce(3, 70000)) EXPECT_EQ(r, ncclSuccess);
    const std::string t = log.textOf(getpid());
    EXPECT_TRUE(has(t, "rank 0 (GPU 0) and rank 2 (GPU 2): P2P, path SYS, NCCL_P2P_LEVEL SYS")) << t;
    EXPECT_FALSE(has(t, "via inproc")) << t;
    unsetenv("NCCL_P2P_LEVEL");
  }
  {
    setenv("NCCL_P2P_DISABLE", "1", 1);
    LogCapture log;
    for (ncclResult_t r : allReduce(3, 70000)) EXPECT_EQ(r, ncclSuccess);
    const std::string t = log.textOf(getpid());
    EXPECT_TRUE(has(t, "rank 0 (GPU 0) and rank 1 (GPU 1): no P2P (host memory), NCCL_P2P_DISABLE=1")) << t;
    EXPECT_FALSE(has(t, "via p2p ")) << t;
    unsetenv("NCCL_P2P_DISABLE");
  }
  unlink(topo.c_str());
}

// Where the topology does not show the GPUs, ranks of one process ask the driver: peers it refuses go through
// host memory.
TEST_F(CudaP2p, WithoutTheGpusInTheTopologyTheDriverDecides) {
  BRAID_REQUIRE_FAKE("BRAID_FAKE_CUDA_NO_P2P");
  {
    LogCapture log;
    for (ncclResult_t r : allReduce(2, 5000)) EXPECT_EQ(r, ncclSuccess);
    const std::string t = log.textOf(getpid());
    EXPECT_TRUE(has(t, "P2P, GPUs not in the topology")) << t;
    EXPECT_TRUE(has(t, "the driver says peer access is possible")) << t;
    EXPECT_TRUE(has(t, "chosen by the host cost model: the topology")) << t;
  }
  {
    setenv("BRAID_FAKE_CUDA_NO_P2P", "1", 1);
    LogCapture log;
    for (ncclResult_t r : allReduce(2, 5000)) EXPECT_EQ(r, ncclSuccess);
    const std::string t = log.textOf(getpid());
    EXPECT_TRUE(has(t, "the driver says peer access is impossible")) << t;
    EXPECT_TRUE(has(t, "via inproc")) << t;
  }
}

// A path that drops peer writes (the fake's BRAID_FAKE_CUDA_P2P_DROP="1>0": copies from GPU 1 into GPU 0's memory
// vanish) fails the init-time self-test for that pair only, within BRAID_TIMEOUT: it goes through host memory with
// a WARN naming both GPUs, the other pairs keep P2P, and the results are exact.
TEST_F(CudaP2p, APathThatDropsWritesFallsBackToHostMemory) {
  BRAID_REQUIRE_FAKE("BRAID_FAKE_CUDA_P2P_DROP");
  setenv("BRAID_FAKE_CUDA_P2P_DROP", "1>0", 1);
  setenv("BRAID_TIMEOUT", "2", 1);
  LogCapture log;
  for (ncclResult_t r : allReduce(3, 70000)) EXPECT_EQ(r, ncclSuccess);
  const std::string t = log.textOf(getpid());
  EXPECT_TRUE(has(t, "rank 0 (GPU 0) and rank 1 (GPU 1): P2P writes from GPU 1 to GPU 0 did not arrive within 2 s"))
      << t;
  EXPECT_TRUE(has(t, "rank 1 (GPU 1) and rank 0 (GPU 0): P2P writes from GPU 1 to GPU 0 did not arrive")) << t;
  EXPECT_TRUE(has(t, "rank 0: P2P self-test: 1 of 2 peers verified")) << t;
  EXPECT_TRUE(has(t, "rank 2: P2P self-test: 2 of 2 peers verified")) << t;
  EXPECT_TRUE(has(t, "via inproc")) << t;
  EXPECT_TRUE(has(t, "via p2p")) << t;
}

// Every protocol over P2P FIFOs, several sizes (the LL slots start zeroed in memory the driver hands out as
// poison).
TEST_F(CudaP2p, EveryProtocolOverP2pFifos) {
  for (const char* proto : {"LL", "LL128", "Simple"}) {
    setenv("NCCL_PROTO", proto, 1);
    for (size_t count : {size_t{1}, size_t{3000}, size_t{300000}}) {
      for (ncclResult_t r : allReduce(3, count)) EXPECT_EQ(r, ncclSuccess) << proto << " " << count;
    }
  }
}

// Ranks in two processes, their GPUs under one switch: each attaches to the other's FIFO by importing the cuMem
// handle it exported (a descriptor passed over a Unix socket). No fixture: the parent must not initialise CUDA
// before it forks.
TEST(CudaP2pProcesses, ImportEachOthersFifos) {
  BRAID_REQUIRE_FAKE_NOT_LOADED("the fake GPUs' topology (path PIX)");
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  const std::string topo = writeFakeGpuTopology(false);
  setenv("NCCL_TOPO_FILE", topo.c_str(), 1);
  LogCapture log;
  std::vector<pid_t> pids;
  std::vector<int> codes = runProcesses(2, checkedAllReducesOfTwo, 120, &pids, nullptr, [](int r) {
    LogCapture::reopenInChild();
    if (!Driver::get().use(r)) _exit(20);
  });
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
  for (size_t r = 0; r < pids.size(); ++r) {
    const std::string t = log.textOf(pids[r]);
    EXPECT_TRUE(has(t, "P2P, path PIX")) << t;
    EXPECT_TRUE(has(t, "via p2p")) << t;
  }
  unsetenv("NCCL_TOPO_FILE");
  unlink(topo.c_str());
}

}  // namespace
