// Streams and events of the strict fake CUDA driver (tests/fake_cuda/), through braid's driver table: the ordering
// rules braid's CUDA communicators will rely on, as the real driver defines them. Each case runs in a child
// process (the table is loaded once per process).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "src/backends/cuda/cu_api.h"
#include "tests/unit/fake_cuda_util.h"

namespace braid {
namespace {

struct Gate {
  std::atomic<int> value{0};
  // Waits up to 5 s for value >= want.
  bool waitFor(int want) {
    for (int i = 0; i < 5000 && value.load() < want; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return value.load() >= want;
  }
};

TEST(FakeCudaStreams, WorkRunsInOrderAndEventsSayWhenItIsDone) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    CUstream s = nullptr;
    CHECK_OR_EXIT(api.streamCreate(&s, kCuStreamNonBlocking) == kCuSuccess, 10);
    static Gate release, order;
    CHECK_OR_EXIT(api.launchHostFunc(
                      s,
                      [](void*) {
                        release.waitFor(1);
                        order.value.store(1);
                      },
                      nullptr) == kCuSuccess,
                  11);
    CHECK_OR_EXIT(api.launchHostFunc(
                      s,
                      [](void*) {
                        if (order.value.load() == 1) order.value.store(2);
                      },
                      nullptr) == kCuSuccess,
                  12);
    CUevent ev = nullptr;
    CHECK_OR_EXIT(api.eventCreate(&ev, kCuEventDisableTiming) == kCuSuccess, 13);
    CHECK_OR_EXIT(api.eventRecord(ev, s) == kCuSuccess, 14);
    CHECK_OR_EXIT(api.eventQuery(ev) == kCuErrorNotReady, 15);
    CHECK_OR_EXIT(api.streamQuery(s) == kCuErrorNotReady, 16);
    release.value.store(1);
    CHECK_OR_EXIT(api.eventSynchronize(ev) == kCuSuccess, 17);
    CHECK_OR_EXIT(order.value.load() == 2, 18);  // both ran, in order
    CHECK_OR_EXIT(api.eventQuery(ev) == kCuSuccess && api.streamQuery(s) == kCuSuccess, 19);
    CHECK_OR_EXIT(api.eventDestroy(ev) == kCuSuccess && api.eventDestroy(ev) == kCuErrorInvalidHandle, 20);
    CHECK_OR_EXIT(api.streamDestroy(s) == kCuSuccess && api.streamDestroy(s) == kCuErrorInvalidHandle, 21);
  });
}

TEST(FakeCudaStreams, TheLegacyStreamWaitsForBlockingStreamsButNotForNonBlockingOnes) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    CUstream blocking = nullptr, independent = nullptr;
    CHECK_OR_EXIT(api.streamCreate(&blocking, 0) == kCuSuccess, 10);
    CHECK_OR_EXIT(api.streamCreate(&independent, kCuStreamNonBlocking) == kCuSuccess, 11);
    static Gate legacyRan, blockingRan;
    // A non-blocking stream's task that only ends once legacy work has run: the legacy stream must not wait
    // for it (if it did, both would wait for 5 s and the flag would say so).
    static std::atomic<bool> sawLegacy{false};
    CHECK_OR_EXIT(api.launchHostFunc(
                      independent, [](void*) { sawLegacy = legacyRan.waitFor(1); }, nullptr) == kCuSuccess,
                  12);
    // A blocking stream's task the legacy work must wait for.
    CHECK_OR_EXIT(api.launchHostFunc(
                      blocking,
                      [](void*) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(50));
                        blockingRan.value.store(1);
                      },
                      nullptr) == kCuSuccess,
                  13);
    static std::atomic<int> blockingSeenByLegacy{-1};
    CHECK_OR_EXIT(api.launchHostFunc(
                      nullptr,
                      [](void*) {
                        blockingSeenByLegacy = blockingRan.value.load();
                        legacyRan.value.store(1);
                      },
                      nullptr) == kCuSuccess,
                  14);
    CHECK_OR_EXIT(api.streamSynchronize(nullptr) == kCuSuccess, 15);
    CHECK_OR_EXIT(blockingSeenByLegacy.load() == 1, 16);
    CHECK_OR_EXIT(api.streamSynchronize(independent) == kCuSuccess && sawLegacy.load(), 17);
    // And the other way: work queued on a blocking stream after legacy work waits for it.
    static Gate legacySlow;
    static std::atomic<int> legacySeenByBlocking{-1};
    CHECK_OR_EXIT(api.launchHostFunc(
                      cuStreamLegacy(),
                      [](void*) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(50));
                        legacySlow.value.store(1);
                      },
                      nullptr) == kCuSuccess,
                  18);
    CHECK_OR_EXIT(api.launchHostFunc(
                      blocking, [](void*) { legacySeenByBlocking = legacySlow.value.load(); }, nullptr) == kCuSuccess,
                  19);
    CHECK_OR_EXIT(api.streamSynchronize(blocking) == kCuSuccess && legacySeenByBlocking.load() == 1, 20);
  });
}

TEST(FakeCudaStreams, AStreamWaitsForAnEventOfAnother) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    CUstream a = nullptr, b = nullptr;
    CHECK_OR_EXIT(api.streamCreate(&a, kCuStreamNonBlocking) == kCuSuccess, 10);
    CHECK_OR_EXIT(api.streamCreate(&b, kCuStreamNonBlocking) == kCuSuccess, 11);
    static std::atomic<int> produced{0}, consumed{-1};
    CHECK_OR_EXIT(api.launchHostFunc(
                      a,
                      [](void*) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(50));
                        produced = 1;
                      },
                      nullptr) == kCuSuccess,
                  12);
    CUevent ev = nullptr;
    CHECK_OR_EXIT(api.eventCreate(&ev, 0) == kCuSuccess && api.eventRecord(ev, a) == kCuSuccess, 13);
    CHECK_OR_EXIT(api.streamWaitEvent(b, ev, 0) == kCuSuccess, 14);
    CHECK_OR_EXIT(api.launchHostFunc(
                      b, [](void*) { consumed = produced.load(); }, nullptr) == kCuSuccess,
                  15);
    CHECK_OR_EXIT(api.streamSynchronize(b) == kCuSuccess && consumed.load() == 1, 16);
    CHECK_OR_EXIT(api.streamWaitEvent(b, ev, 2) == kCuErrorInvalidValue, 17);  // 0 and CU_EVENT_WAIT_EXTERNAL only
  });
}

TEST(FakeCudaStreams, HostFunctionsMayNotCallCuda) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    static const CuApi* table = &api;
    static std::atomic<int> result{-1};
    CHECK_OR_EXIT(api.launchHostFunc(
                      nullptr,
                      [](void*) {
                        CUdeviceptr p = 0;
                        result = table->memAlloc(&p, 64);
                      },
                      nullptr) == kCuSuccess,
                  10);
    CHECK_OR_EXIT(api.streamSynchronize(nullptr) == kCuSuccess, 11);
    CHECK_OR_EXIT(result.load() == kCuErrorNotPermitted, 12);
  });
}

TEST(FakeCudaStreams, CopiesAndMemsetsAreStreamOrderedAndRangeChecked) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    CUdeviceptr d = 0;
    CHECK_OR_EXIT(api.memAlloc(&d, 1000) == kCuSuccess, 10);  // rounded to 1024 by the fake
    char host[1024];
    memset(host, 0, sizeof(host));
    CHECK_OR_EXIT(api.memsetD8Async(d, 0x5a, 1024, nullptr) == kCuSuccess, 11);
    CHECK_OR_EXIT(api.memcpyAsync(reinterpret_cast<CUdeviceptr>(host), d, 1024, nullptr) == kCuSuccess, 12);
    CHECK_OR_EXIT(api.streamSynchronize(nullptr) == kCuSuccess, 13);
    CHECK_OR_EXIT(host[0] == 0x5a && host[1023] == 0x5a, 14);
    CHECK_OR_EXIT(api.memsetD8Async(d + 512, 0, 513, nullptr) == kCuErrorInvalidValue, 15);  // past the end
    CHECK_OR_EXIT(api.memsetD8Async(reinterpret_cast<CUdeviceptr>(host), 0, 8, nullptr) == kCuErrorInvalidValue,
                  16);  // not device memory
    CHECK_OR_EXIT(api.memcpyAsync(d + 1000, reinterpret_cast<CUdeviceptr>(host), 100, nullptr) == kCuErrorInvalidValue,
                  17);
  });
}

// CU_STREAM_PER_THREAD is the calling thread's own stream: work on it is ordered, another thread's per-thread
// stream is another stream, and the legacy stream waits for it (it is a blocking stream).
TEST(FakeCudaStreams, ThePerThreadStreamIsEachThreadsOwn) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    const CUstream perThread = reinterpret_cast<CUstream>(0x2);
    CUdeviceptr d = 0;
    CHECK_OR_EXIT(api.memAlloc(&d, 1024) == kCuSuccess, 10);
    char host[1024] = {};
    Gate gate;
    // A host function holds this thread's per-thread stream until the gate opens.
    CHECK_OR_EXIT(api.launchHostFunc(
                      perThread, [](void* g) { static_cast<Gate*>(g)->waitFor(1); }, &gate) == kCuSuccess,
                  11);
    CHECK_OR_EXIT(api.memsetD8Async(d, 0x33, 1024, perThread) == kCuSuccess, 12);
    // Another thread's per-thread stream does not wait for it.
    CUresult other = kCuErrorInvalidValue;
    std::thread([&] {
      CUcontext ctx = nullptr;
      if (api.devicePrimaryCtxRetain(&ctx, 0) != kCuSuccess || api.ctxSetCurrent(ctx) != kCuSuccess) return;
      other = api.streamSynchronize(perThread);
    }).join();
    CHECK_OR_EXIT(other == kCuSuccess, 13);
    CHECK_OR_EXIT(api.streamQuery(perThread) == kCuErrorNotReady, 14);
    gate.value.store(1);
    // The legacy stream waits for the per-thread stream's work.
    CHECK_OR_EXIT(api.memcpyAsync(reinterpret_cast<CUdeviceptr>(host), d, 1024, nullptr) == kCuSuccess, 15);
    CHECK_OR_EXIT(api.streamSynchronize(nullptr) == kCuSuccess, 16);
    CHECK_OR_EXIT(host[0] == 0x33 && host[1023] == 0x33, 17);
  });
}

TEST(FakeCudaStreams, FreeingWaitsForTheDevicesQueuedWork) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    CUstream s = nullptr;
    CHECK_OR_EXIT(api.streamCreate(&s, kCuStreamNonBlocking) == kCuSuccess, 10);
    CUdeviceptr d = 0;
    CHECK_OR_EXIT(api.memAlloc(&d, 256) == kCuSuccess, 11);
    static std::atomic<bool> finished{false};
    CHECK_OR_EXIT(api.launchHostFunc(
                      s,
                      [](void*) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(100));
                        finished = true;
                      },
                      nullptr) == kCuSuccess,
                  12);
    CHECK_OR_EXIT(api.memFree(d) == kCuSuccess, 13);
    CHECK_OR_EXIT(finished.load(), 14);  // cuMemFree returned only after the stream's work
  });
}

// Streams beyond CUDA_DEVICE_MAX_CONNECTIONS share a hardware queue, which starts work in issue order: with one
// queue, a stream's second task (which waits for its first) holds back another stream's task issued after it, so
// the first task never sees what that one does; with two queues it does.
void sharedQueue(const char* connections, bool wantSeen) {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", connections, 1);
  const CuApi& api = fakeOn(0);
  CUstream a = nullptr, b = nullptr;
  CHECK_OR_EXIT(api.streamCreate(&a, kCuStreamNonBlocking) == kCuSuccess, 10);
  CHECK_OR_EXIT(api.streamCreate(&b, kCuStreamNonBlocking) == kCuSuccess, 11);
  static std::atomic<int> flag{0};
  static std::atomic<bool> seen{false};
  auto waitForFlag = [](void*) {
    for (int i = 0; i < 300 && flag.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    seen = flag.load() != 0;
  };
  CHECK_OR_EXIT(api.launchHostFunc(a, waitForFlag, nullptr) == kCuSuccess, 12);
  CHECK_OR_EXIT(api.launchHostFunc(
                    a, [](void*) {}, nullptr) == kCuSuccess,
                13);
  CHECK_OR_EXIT(api.launchHostFunc(
                    b, [](void*) { flag.store(1); }, nullptr) == kCuSuccess,
                14);
  CHECK_OR_EXIT(api.streamSynchronize(a) == kCuSuccess && api.streamSynchronize(b) == kCuSuccess, 15);
  CHECK_OR_EXIT(flag.load() == 1, 16);  // it ran in the end either way
  CHECK_OR_EXIT(seen.load() == wantSeen, 17);
}

TEST(FakeCudaStreams, StreamsBeyondTheConnectionsShareAHardwareQueue) {
  BRAID_IN_CHILD({ sharedQueue("1", false); });
  BRAID_IN_CHILD({ sharedQueue("2", true); });
}

}  // namespace
}  // namespace braid
