// Driver failures reaching CUDA communicators, injected into the strict fake (braidFakeCudaInject: from that point of
// the run on, the n-th call of a function fails with a given CUresult): each surfaces as an error that names the
// call and the driver's error, on every rank, within BRAID_TIMEOUT, never as a hang or a crash. And destroying a
// communicator whose kernel waits for a peer that never comes returns within the deadline, without an abort.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/cuda_coll_cases.h"
#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"

namespace {

using namespace braid_test;
using Clock = std::chrono::steady_clock;

class CudaFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
    BRAID_REQUIRE_FAKE("braidFakeCudaInject");
    inject_ = reinterpret_cast<void (*)(const char*)>(dlsym(Driver::get().lib, "braidFakeCudaInject"));
    ASSERT_NE(inject_, nullptr);
    setenv("BRAID_TIMEOUT", "5", 1);
  }
  void TearDown() override {
    if (inject_ != nullptr) inject_("");
    unsetenv("BRAID_TIMEOUT");
  }
  void (*inject_)(const char*) = nullptr;
};

// ncclMemAlloc when the driver has no memory left: the error names cuMemCreate and CUDA_ERROR_OUT_OF_MEMORY; the next
// allocation works.
TEST_F(CudaFailure, NcclMemAllocOutOfMemory) {
  ASSERT_TRUE(Driver::get().use(0));
  inject_("cuMemCreate#1=2");
  void* p = nullptr;
  EXPECT_EQ(ncclMemAlloc(&p, 4096), ncclUnhandledCudaError);
  const std::string msg = ncclGetLastError(nullptr);
  EXPECT_NE(msg.find("cuMemCreate"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << msg;
  ASSERT_EQ(ncclMemAlloc(&p, 4096), ncclSuccess);
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
}

// A pinned allocation fails during init (the abort word, cursors, FIFOs: whichever comes first): the rank that hit it
// returns the driver's error by name, the others fail too instead of waiting for it forever.
TEST_F(CudaFailure, InitWithoutPinnedMemoryFailsEveryRank) {
  inject_("cuMemHostAlloc#1=2");
  std::vector<std::string> msgs(2);
  const auto t0 = Clock::now();
  std::vector<ncclResult_t> res(2, ncclSuccess);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      if (!Driver::get().use(r)) return;
      ncclComm_t comm = nullptr;
      res[static_cast<size_t>(r)] = ncclCommInitRank(&comm, 2, id, r);
      msgs[static_cast<size_t>(r)] = ncclGetLastError(comm);
      if (comm != nullptr) ncclCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(20));
  EXPECT_TRUE(res[0] != ncclSuccess && res[1] != ncclSuccess) << msgs[0] << " / " << msgs[1];
  const bool named = (res[0] == ncclUnhandledCudaError && msgs[0].find("cuMemHostAlloc") != std::string::npos) ||
                     (res[1] == ncclUnhandledCudaError && msgs[1].find("cuMemHostAlloc") != std::string::npos);
  EXPECT_TRUE(named) << msgs[0] << " / " << msgs[1];
}

// A launch the driver refuses: the ring's work cannot be copied to the device, or the NVLS-style kernel cannot be
// launched. The collective returns the driver's error by name on the rank that hit it; its peer's kernel, left
// waiting, reaches ncclCommGetAsyncError by the deadline naming that rank. Nothing hangs.
TEST_F(CudaFailure, ALaunchTheDriverRefusesIsANamedError) {
  const char* const kCases[][3] = {{"Ring", "cuMemcpyAsync#1=1", "cuMemcpyAsync"},
                                   {"NVLS", "cuLaunchKernel#1=1", "cuLaunchKernel"}};
  for (const auto& c : kCases) {
    SCOPED_TRACE(c[0]);
    setenv("NCCL_ALGO", c[0], 1);
    std::vector<std::string> msgs(2);
    std::atomic<int> ready{0};
    std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
      const Driver& drv = Driver::get();
      void* buf = drv.alloc(4000);
      // Together once, so the links exist; then rank 0's next launch is refused.
      ncclResult_t st = ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, comm, stream);
      if (st != ncclSuccess || drv.streamSync(stream) != 0) return ncclInternalError;
      ++ready;
      while (ready.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (r == 0) {
        inject_(c[1]);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0's launch makes the refused call
      }
      const auto t0 = Clock::now();
      st = ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, comm, stream);
      ncclResult_t async = ncclSuccess;
      while (st == ncclSuccess && async == ncclSuccess && Clock::now() - t0 < std::chrono::seconds(20)) {
        ncclCommGetAsyncError(comm, &async);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      msgs[static_cast<size_t>(r)] = ncclGetLastError(comm);
      drv.streamSync(stream);
      drv.memFree(reinterpret_cast<unsigned long long>(buf));
      return st != ncclSuccess ? st : async;
    });
    inject_("");
    EXPECT_EQ(res[0], ncclUnhandledCudaError) << msgs[0];
    EXPECT_NE(msgs[0].find(c[2]), std::string::npos) << msgs[0];
    EXPECT_EQ(res[1], ncclRemoteError) << msgs[1];  // its peer never came: the deadline, by name
    EXPECT_NE(msgs[1].find("rank 0"), std::string::npos) << msgs[1];
  }
  unsetenv("NCCL_ALGO");
}

// ncclCommDestroy of a communicator whose kernel waits for a peer that never comes (no ncclCommAbort): it returns
// within BRAID_TIMEOUT plus a little (it waits that long for the kernel, then stops it through the abort word),
// never hangs on an implicit synchronisation.
TEST_F(CudaFailure, DestroyWithAKernelWaitingForAPeerReturns) {
  setenv("BRAID_TIMEOUT", "2", 1);
  const Driver& drv = Driver::get();
  drv.prepare(2);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::atomic<int> together{0};
  std::atomic<bool> done{false};
  Clock::duration took{};
  ncclResult_t destroyed = ncclInternalError;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ASSERT_TRUE(drv.use(r));
      ncclComm_t comm = nullptr;
      ASSERT_EQ(ncclCommInitRank(&comm, 2, id, r), ncclSuccess);
      void* stream = nullptr;
      drv.streamCreate(&stream, 1);
      void* buf = drv.alloc(4000);
      const auto s = static_cast<cudaStream_t>(stream);
      EXPECT_EQ(ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, comm, s), ncclSuccess);
      EXPECT_EQ(drv.streamSync(stream), 0);
      ++together;
      if (r == 1) {
        // Never joins rank 0's second all-reduce; leaves only once rank 0 destroyed its communicator.
        while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      } else {
        while (together.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        EXPECT_EQ(ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, comm, s), ncclSuccess);
        const auto t0 = Clock::now();
        destroyed = ncclCommDestroy(comm);
        took = Clock::now() - t0;
        comm = nullptr;
        done.store(true);
      }
      drv.streamSync(stream);
      if (comm != nullptr) ncclCommDestroy(comm);
      drv.memFree(reinterpret_cast<unsigned long long>(buf));
      drv.streamDestroy(stream);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(destroyed, ncclSuccess);
  // It waits BRAID_TIMEOUT for the kernel (which stops itself there too), then aborts: well under 15 s.
  EXPECT_LT(took, std::chrono::seconds(15)) << std::chrono::duration<double>(took).count() << " s";
}

}  // namespace
