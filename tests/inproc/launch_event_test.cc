// NCCL 2.32's ncclCollConfig_t.launchCompletionEvent: a CUDA communicator (on the strict fake driver) records the
// caller's event on the call's stream ahead of the collective; a host communicator refuses one by name; configs of
// 2.31's size (without the field) still work.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/fake_cuda_ranks.h"

namespace {

using namespace braid_test;

std::string lastError() {
  return ncclGetLastError(nullptr);
}

TEST(LaunchEvent, ACudaCommunicatorRecordsItOnTheCallsStreamAheadOfTheCollective) {
  const Driver& drv = Driver::get();
  if (drv.lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
  auto eventCreate = reinterpret_cast<int (*)(void**, unsigned)>(dlsym(drv.lib, "cuEventCreate"));
  auto eventQuery = reinterpret_cast<int (*)(void*)>(dlsym(drv.lib, "cuEventQuery"));
  auto eventDestroy = reinterpret_cast<int (*)(void*)>(dlsym(drv.lib, "cuEventDestroy_v2"));
  auto hostFunc = reinterpret_cast<int (*)(void*, void (*)(void*), void*)>(dlsym(drv.lib, "cuLaunchHostFunc"));
  ASSERT_TRUE(eventCreate && eventQuery && eventDestroy && hostFunc);
  constexpr int kNotReady = 600;  // CUDA_ERROR_NOT_READY
  constexpr size_t kCount = 4096;
  std::vector<int> pendingWhileHeld(2, -1), afterwards(2, -1);
  std::vector<float> result(2, 0.0f);
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    void* buf = drv.alloc(kCount * 4);
    std::vector<float> host(kCount, static_cast<float>(r + 1));
    drv.copy(buf, host.data(), kCount * 4, stream);
    void* event = nullptr;
    if (eventCreate(&event, 0x2 /* disable timing */) != 0) return ncclInternalError;
    // The stream is held by a host function until the check below: an event recorded on it cannot complete
    // before that, while one that was never recorded reads as complete.
    std::atomic<bool> release{false};
    auto hold = [](void* p) {
      auto* flag = static_cast<std::atomic<bool>*>(p);
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!flag->load() && std::chrono::steady_clock::now() < end) std::this_thread::yield();
    };
    if (hostFunc(stream, hold, &release) != 0) return ncclInternalError;
    ncclCollConfig_t cc = NCCL_COLLCONFIG_INITIALIZER;
    cc.launchCompletionEvent = reinterpret_cast<cudaEvent_t>(event);
    const ncclResult_t called = ncclAllReduceConfig(buf, buf, kCount, ncclFloat32, ncclSum, comm, stream, &cc);
    pendingWhileHeld[static_cast<size_t>(r)] = eventQuery(event);
    release = true;
    if (called != ncclSuccess) return called;
    drv.copy(host.data(), buf, kCount * 4, stream);
    if (drv.streamSync(stream) != 0) return ncclUnhandledCudaError;
    afterwards[static_cast<size_t>(r)] = eventQuery(event);
    result[static_cast<size_t>(r)] = host[kCount - 1];
    eventDestroy(event);
    return ncclSuccess;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << "rank " << r;
    EXPECT_EQ(pendingWhileHeld[static_cast<size_t>(r)], kNotReady) << "rank " << r << ": the event was not recorded";
    EXPECT_EQ(afterwards[static_cast<size_t>(r)], 0) << "rank " << r;
    EXPECT_EQ(result[static_cast<size_t>(r)], 3.0f) << "rank " << r;
  }
}

TEST(LaunchEvent, AHostCommunicatorRefusesOneAndTakes231SizedConfigs) {
  ncclComm_t c[2];
  ASSERT_EQ(ncclCommInitAll(c, 2, nullptr), ncclSuccess);
  std::vector<std::vector<float>> buf(2, std::vector<float>(100, 1.0f));
  ncclCollConfig_t cc = NCCL_COLLCONFIG_INITIALIZER;
  EXPECT_EQ(cc.size, 72u);
  EXPECT_EQ(cc.launchCompletionEvent, nullptr);
  cc.launchCompletionEvent = reinterpret_cast<cudaEvent_t>(0x1000);
  EXPECT_EQ(ncclAllReduceConfig(buf[0].data(), buf[0].data(), 100, ncclFloat32, ncclSum, c[0], nullptr, &cc),
            ncclInvalidUsage);
  EXPECT_NE(lastError().find("config->launchCompletionEvent=0x1000 is a CUDA event, and a host communicator launches "
                             "no kernel"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(ncclAlltoAllConfig(buf[0].data(), buf[1].data(), 50, ncclFloat32, c[0], nullptr, &cc), ncclInvalidUsage);
  // A program built against a 2.31 header passes 64 bytes and no event field: accepted, the field not read.
  ncclCollConfig_t old = NCCL_COLLCONFIG_INITIALIZER;
  old.size = 64;
  old.launchCompletionEvent = reinterpret_cast<cudaEvent_t>(0x1000);  // past the caller's struct: never read
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ncclAllReduceConfig(buf[r].data(), buf[r].data(), 100, ncclFloat32, ncclSum, c[r], nullptr, &old),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(buf[1][99], 2.0f);
  old.size = 56;
  EXPECT_EQ(ncclAllReduceConfig(buf[0].data(), buf[0].data(), 100, ncclFloat32, ncclSum, c[0], nullptr, &old),
            ncclInvalidArgument);
  for (ncclComm_t comm : c) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
