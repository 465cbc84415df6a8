// CUDA communicators through the public API on the strict fake driver (tests/fake_cuda): ranks that are threads,
// each with a fake device's context current, collectives on device buffers and non-blocking streams, run by
// braid's kernels on the CTA emulator. The calls return before the work is done; the stream's synchronisation
// sees it finished. Then what goes wrong: a host pointer, a rank that never comes (the kernel's deadline reaches
// ncclCommGetAsyncError), ncclCommAbort of a waiting kernel, ranks that disagree on the backend, ranks in other
// processes (not built yet: an explicit error).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"
#include "tests/common/log_capture.h"

namespace {

using namespace braid_test;

class CudaComm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
  }
};

struct CollCase {
  const char* name;
  std::function<ncclResult_t(const void*, void*, size_t, ncclComm_t, cudaStream_t, int)> call;
  size_t sendMul, recvMul;  // buffer sizes in units of count
  std::function<float(int rank, size_t i, int n, size_t count)> input;
  std::function<float(int rank, size_t i, int n, size_t count)> expected;
};

std::vector<CollCase> collCases() {
  auto in = [](int r, size_t i, int, size_t) { return static_cast<float>((i * 3 + static_cast<size_t>(r)) % 13); };
  return {
      {"AllReduce",
       [](const void* s, void* d, size_t c, ncclComm_t comm, cudaStream_t st, int) {
         return ncclAllReduce(s, d, c, ncclFloat, ncclSum, comm, st);
       },
       1, 1, in,
       [](int, size_t i, int n, size_t) {
         float x = 0;
         for (int p = 0; p < n; ++p) x += static_cast<float>((i * 3 + static_cast<size_t>(p)) % 13);
         return x;
       }},
      {"AllGather",
       [](const void* s, void* d, size_t c, ncclComm_t comm, cudaStream_t st, int) {
         return ncclAllGather(s, d, c, ncclFloat, comm, st);
       },
       1, 0, in, [](int, size_t i, int, size_t c) { return static_cast<float>(((i % c) * 3 + i / c) % 13); }},
      {"Broadcast",
       [](const void* s, void* d, size_t c, ncclComm_t comm, cudaStream_t st, int) {
         return ncclBroadcast(s, d, c, ncclFloat, 1, comm, st);
       },
       1, 1, in, [](int, size_t i, int, size_t) { return static_cast<float>((i * 3 + 1) % 13); }},
      {"ReduceScatter",
       [](const void* s, void* d, size_t c, ncclComm_t comm, cudaStream_t st, int) {
         return ncclReduceScatter(s, d, c, ncclFloat, ncclMax, comm, st);
       },
       0, 1, in,
       [](int r, size_t i, int n, size_t c) {
         float x = 0;
         for (int p = 0; p < n; ++p) {
           x = std::max(x, static_cast<float>(((static_cast<size_t>(r) * c + i) * 3 + static_cast<size_t>(p)) % 13));
         }
         return x;
       }},
  };
}

// Every collective above, on 2 and 3 ranks, with the default protocol choice and forced LL, LL128 and Simple: the calls
// return at once, the stream then holds the finished result.
TEST_F(CudaComm, CollectivesOnDeviceBuffersAndStreams) {
  const Driver& drv = Driver::get();
  for (const char* proto : {"", "LL", "LL128", "Simple"}) {
    if (*proto != '\0') {
      setenv("NCCL_PROTO", proto, 1);
    } else {
      unsetenv("NCCL_PROTO");
    }
    for (int n : {2, 3}) {
      for (const CollCase& cc : collCases()) {
        for (size_t count : {size_t{1}, size_t{1000}, size_t{70000}}) {
          std::vector<ncclResult_t> res = runCudaRanks(n, [&](int r, ncclComm_t comm, cudaStream_t stream) {
            const size_t sendCount = count * (cc.sendMul == 0 ? static_cast<size_t>(n) : cc.sendMul);
            const size_t recvCount = count * (cc.recvMul == 0 ? static_cast<size_t>(n) : cc.recvMul);
            std::vector<float> host(sendCount), out(recvCount, -1);
            for (size_t i = 0; i < sendCount; ++i) host[i] = cc.input(r, i, n, count);
            void* send = drv.alloc(sendCount * 4);
            void* recv = drv.alloc(recvCount * 4);
            drv.copy(send, host.data(), sendCount * 4, stream);
            drv.copy(recv, out.data(), recvCount * 4, stream);
            ncclResult_t st = cc.call(send, recv, count, comm, stream, r);
            if (st == ncclSuccess) {
              drv.copy(out.data(), recv, recvCount * 4, stream);
              if (drv.streamSync(stream) != 0) st = ncclUnhandledCudaError;
            }
            ncclResult_t async = ncclSuccess;
            ncclCommGetAsyncError(comm, &async);
            if (st == ncclSuccess) st = async;
            size_t wrong = 0;
            for (size_t i = 0; i < recvCount && st == ncclSuccess; ++i) {
              if (out[i] != cc.expected(r, i, n, count)) ++wrong;
            }
            EXPECT_EQ(wrong, 0u) << cc.name << " rank " << r << " of " << n << " count " << count << " proto " << proto;
            drv.memFree(reinterpret_cast<unsigned long long>(send));
            drv.memFree(reinterpret_cast<unsigned long long>(recv));
            return st;
          });
          for (ncclResult_t r : res) {
            ASSERT_EQ(r, ncclSuccess) << cc.name << " n=" << n << " count=" << count << " proto=" << proto << ": "
                                      << ncclGetLastError(nullptr);
          }
        }
      }
    }
  }
  unsetenv("NCCL_PROTO");
}

// Grouped sends and receives around a ring, on streams, in one group.
TEST_F(CudaComm, GroupedSendRecv) {
  const Driver& drv = Driver::get();
  const size_t count = 5000;
  std::vector<ncclResult_t> res = runCudaRanks(3, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    std::vector<float> host(count), out(count, -1);
    for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>(r * 10000 + static_cast<int>(i));
    void* send = drv.alloc(count * 4);
    void* recv = drv.alloc(count * 4);
    drv.copy(send, host.data(), count * 4, stream);
    ncclGroupStart();
    ncclSend(send, count, ncclFloat, (r + 1) % 3, comm, stream);
    ncclRecv(recv, count, ncclFloat, (r + 2) % 3, comm, stream);
    ncclResult_t st = ncclGroupEnd();
    drv.copy(out.data(), recv, count * 4, stream);
    if (drv.streamSync(stream) != 0) st = ncclUnhandledCudaError;
    const int from = (r + 2) % 3;
    for (size_t i = 0; i < count && st == ncclSuccess; ++i) {
      if (out[i] != static_cast<float>(from * 10000 + static_cast<int>(i))) {
        ADD_FAILURE() << "rank " << r << " element " << i << " = " << out[i];
        break;
      }
    }
    drv.memFree(reinterpret_cast<unsigned long long>(send));
    drv.memFree(reinterpret_cast<unsigned long long>(recv));
    return st;
  });
  for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess) << ncclGetLastError(nullptr);
}

// ncclMemAlloc on a thread with a current context gives device memory of its device; collectives use it;
// ncclMemFree frees it (and host memory from a thread without one, as before).
TEST_F(CudaComm, MemAllocGivesDeviceMemory) {
  const Driver& drv = Driver::get();
  auto memType = reinterpret_cast<int (*)(void*, int, unsigned long long)>(dlsym(drv.lib, "cuPointerGetAttribute"));
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    void* buf = nullptr;
    if (ncclMemAlloc(&buf, 4000) != ncclSuccess) return ncclInternalError;
    unsigned type = 0;
    int ordinal = -1;
    EXPECT_EQ(memType(&type, 2, reinterpret_cast<unsigned long long>(buf)), 0);
    EXPECT_EQ(type, 2u) << "device memory";
    EXPECT_EQ(memType(&ordinal, 9, reinterpret_cast<unsigned long long>(buf)), 0);
    EXPECT_EQ(ordinal, drv.deviceFor(r));
    // cuMem physical memory, rounded up to the driver's granularity (2 MiB), as NCCL's ncclMemAlloc.
    size_t range = 0;
    EXPECT_EQ(memType(&range, 12, reinterpret_cast<unsigned long long>(buf)), 0);
    EXPECT_EQ(range, size_t{2} << 20);
    std::vector<float> ones(1000, 1.0f), out(1000, 0.0f);
    drv.copy(buf, ones.data(), 4000, stream);
    ncclResult_t st = ncclAllReduce(buf, buf, 1000, ncclFloat, ncclSum, comm, stream);
    drv.copy(out.data(), buf, 4000, stream);
    if (drv.streamSync(stream) != 0) st = ncclUnhandledCudaError;
    EXPECT_EQ(out[999], 2.0f);
    if (ncclMemFree(buf) != ncclSuccess) st = ncclInternalError;
    return st;
  });
  for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess) << ncclGetLastError(nullptr);
  // A thread without a context: host memory, freed as such.
  std::thread([] {
    void* p = nullptr;
    ASSERT_EQ(ncclMemAlloc(&p, 100), ncclSuccess);
    memset(p, 1, 100);
    EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  }).join();
}

// A grouped init runs on other threads: the backend is still the one of the thread that called
// ncclCommInitRank (its current context), as NCCL's device is.
TEST_F(CudaComm, GroupedInitKeepsTheCallersContext) {
  const Driver& drv = Driver::get();
  // Two ranks on one device's legacy stream would wait for each other (docs/cuda.md): a device each.
  if (drv.devices < 2) GTEST_SKIP() << "needs 2 devices (each rank on its device's legacy stream)";
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(drv.use(r));
    ASSERT_EQ(ncclCommInitRank(&comms[r], 2, id, r), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    int dev = -1;
    EXPECT_EQ(ncclCommCuDevice(comms[r], &dev), ncclSuccess);
    EXPECT_EQ(dev, r);
  }
  // One thread drives both ranks in a group, on each device's legacy stream.
  void* bufs[2];
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(drv.use(r));
    bufs[r] = drv.alloc(400);
    std::vector<float> v(100, static_cast<float>(r + 1));
    drv.copy(bufs[r], v.data(), 400, nullptr);
    drv.streamSync(nullptr);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(drv.use(r));
    ASSERT_EQ(ncclAllReduce(bufs[r], bufs[r], 100, ncclFloat, ncclSum, comms[r], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(drv.use(r));
    std::vector<float> out(100, 0);
    drv.copy(out.data(), bufs[r], 400, nullptr);
    EXPECT_EQ(drv.streamSync(nullptr), 0);
    EXPECT_EQ(out[0], 3.0f) << "rank " << r;
    drv.memFree(reinterpret_cast<unsigned long long>(bufs[r]));
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

// ncclCommInitAll from one thread with device 0 current: rank i goes on devlist[i], or on device i without a list,
// as NCCL sets each device current (it used to put every rank on the caller's device, and fail: "ranks 0 and 1 use
// the same GPU"); an all-reduce over them, one stream each in a group, is exact.
TEST_F(CudaComm, InitAllPutsEachRankOnItsDevice) {
  const Driver& drv = Driver::get();
  if (drv.devices < 3) GTEST_SKIP() << "needs 3 devices";
  ASSERT_TRUE(drv.use(0));
  const int list[3] = {2, 0, 1};
  for (const int* devlist : {list, static_cast<const int*>(nullptr)}) {
    const int n = devlist != nullptr ? 3 : 2;
    ncclComm_t comms[3] = {};
    ASSERT_EQ(ncclCommInitAll(comms, n, devlist), ncclSuccess) << ncclGetLastError(nullptr);
    void* bufs[3] = {};
    void* streams[3] = {};
    for (int r = 0; r < n; ++r) {
      int dev = -1;
      EXPECT_EQ(ncclCommCuDevice(comms[r], &dev), ncclSuccess);
      EXPECT_EQ(dev, devlist != nullptr ? devlist[r] : r);
      ASSERT_TRUE(drv.use(dev));
      bufs[r] = drv.alloc(400);
      drv.streamCreate(&streams[r], 1);
      std::vector<float> v(100, static_cast<float>(r + 1));
      drv.copy(bufs[r], v.data(), 400, streams[r]);
      drv.streamSync(streams[r]);
    }
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(
          ncclAllReduce(bufs[r], bufs[r], 100, ncclFloat, ncclSum, comms[r], static_cast<cudaStream_t>(streams[r])),
          ncclSuccess);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    for (int r = 0; r < n; ++r) {
      int dev = -1;
      ncclCommCuDevice(comms[r], &dev);
      ASSERT_TRUE(drv.use(dev));
      std::vector<float> out(100, 0);
      drv.copy(out.data(), bufs[r], 400, streams[r]);
      EXPECT_EQ(drv.streamSync(streams[r]), 0);
      EXPECT_EQ(out[99], static_cast<float>(n * (n + 1) / 2)) << "rank " << r;
      drv.memFree(reinterpret_cast<unsigned long long>(bufs[r]));
      drv.streamDestroy(streams[r]);
      EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
    }
  }
}

// ncclCommShrink on CUDA communicators: rank 2 of 3 leaves, the others shrink it away; the new communicator is a
// CUDA one on the same devices, and its all-reduce on device buffers is exact.
TEST_F(CudaComm, ShrinkAwayARankThatLeft) {
  const Driver& drv = Driver::get();
  std::vector<ncclResult_t> res = runCudaRanks(3, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    if (r == 2) return ncclSuccess;  // leaves
    int gone = 2;
    ncclComm_t shrunk = nullptr;
    ncclResult_t st = ncclCommShrink(comm, &gone, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT);
    if (st != ncclSuccess) return st;
    int dev = -1;
    ncclCommCuDevice(shrunk, &dev);
    void* buf = drv.alloc(4000);
    std::vector<float> v(1000, static_cast<float>(r + 1)), out(1000, 0);
    drv.copy(buf, v.data(), 4000, stream);
    st = ncclAllReduce(buf, buf, 1000, ncclFloat, ncclSum, shrunk, stream);
    drv.copy(out.data(), buf, 4000, stream);
    if (st == ncclSuccess && (drv.streamSync(stream) != 0 || out[999] != 3.0f || dev != drv.deviceFor(r))) {
      st = ncclInternalError;
    }
    drv.memFree(reinterpret_cast<unsigned long long>(buf));
    ncclCommDestroy(shrunk);
    return st;
  });
  for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess) << ncclGetLastError(nullptr);
}

// A watchdog thread polls ncclCommGetAsyncError (as PyTorch's does) while the ranks launch back to back.
TEST_F(CudaComm, GetAsyncErrorFromAnotherThreadWhileLaunching) {
  const Driver& drv = Driver::get();
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    std::thread watchdog([&] {
      while (!stop.load()) {
        ncclResult_t e = ncclSuccess;
        if (ncclCommGetAsyncError(comm, &e) != ncclSuccess || e != ncclSuccess) bad.fetch_add(1);
      }
    });
    void* buf = drv.alloc(40000);
    ncclResult_t st = ncclSuccess;
    for (int i = 0; i < 50 && st == ncclSuccess; ++i) {
      st = ncclAllReduce(buf, buf, 10000, ncclFloat, ncclSum, comm, stream);
    }
    if (drv.streamSync(stream) != 0) st = ncclUnhandledCudaError;
    stop.store(true);
    watchdog.join();
    drv.memFree(reinterpret_cast<unsigned long long>(buf));
    EXPECT_EQ(bad.load(), 0);
    return st;
  });
  for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess) << ncclGetLastError(nullptr);
}

TEST_F(CudaComm, AStreamOfAnotherDeviceIsANamedError) {
  const Driver& drv = Driver::get();
  if (drv.devices < 4) GTEST_SKIP() << "needs 4 devices (device 3's stream), " << drv.devices << " here";
  std::vector<std::string> msgs(2);
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t) {
    void* buf = drv.alloc(400);
    void* other = nullptr;
    drv.use(3);
    drv.streamCreate(&other, 1);
    drv.use(r);
    ncclResult_t st = ncclAllReduce(buf, buf, 100, ncclFloat, ncclSum, comm, static_cast<cudaStream_t>(other));
    msgs[static_cast<size_t>(r)] = ncclGetLastError(comm);
    drv.streamDestroy(other);
    drv.memFree(reinterpret_cast<unsigned long long>(buf));
    return st == ncclInvalidArgument ? ncclSuccess : ncclInternalError;
  });
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r], ncclSuccess);
    EXPECT_NE(msgs[r].find("belongs to device 3; this communicator runs on device " + std::to_string(r)),
              std::string::npos)
        << msgs[r];
  }
}

// Ranks as processes (forked before any CUDA call, as they must be), each on its own fake device: FIFOs in
// registered shared memory, or with NCCL_SHM_DISABLE=1 in pinned memory the network proxy sends from.
void processRanks(const char* shmDisable) {
  if (Driver::loaded())
    GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork: run "
                    "the test alone (ctest does)";
  std::vector<int> codes = runProcesses(
      2,
      [](int r, ncclComm_t comm) {
        int dev = -1;
        if (ncclCommCuDevice(comm, &dev) != ncclSuccess || dev != Driver::get().deviceFor(r)) return 10;
        return checkedAllReducesOfTwo(r, comm);
      },
      120, nullptr, nullptr,
      [shmDisable](int r) {
        if (shmDisable != nullptr) setenv("NCCL_SHM_DISABLE", shmDisable, 1);
        if (!Driver::get().use(r)) _exit(20);
      });
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// No fixture: the parent must not initialise CUDA before it forks.
TEST(CudaCommProcesses, OverSharedMemory) {
  processRanks(nullptr);
}
TEST(CudaCommProcesses, OverTheNetwork) {
  processRanks("1");
}

// kill -9 of a process rank while the other's kernel waits for it: the survivor's watch sees the process gone and
// stops its kernel a 3 s grace later (not at BRAID_TIMEOUT, 30 s here; the kernel stops, never traps), and
// ncclCommGetAsyncError says ncclRemoteError naming the rank and its process. No fixture: the parent must not
// initialise CUDA before it forks.
TEST(CudaCommProcesses, KillNineOfAPeerReachesGetAsyncError) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  std::vector<int> codes = runProcesses(
      2,
      [](int r, ncclComm_t comm) {
        const Driver& drv = Driver::get();
        void* stream = nullptr;
        drv.streamCreate(&stream, 1);
        void* buf = drv.alloc(4 * 5000);
        auto allReduce = [&] {
          return ncclAllReduce(buf, buf, 5000, ncclFloat, ncclSum, comm, static_cast<cudaStream_t>(stream));
        };
        if (allReduce() != ncclSuccess || drv.streamSync(stream) != 0) return 10;
        if (r == 1) kill(getpid(), SIGKILL);  // gone between two collectives
        const auto t0 = std::chrono::steady_clock::now();
        if (allReduce() != ncclSuccess) return 11;  // the call returns before the kernel runs
        drv.streamSync(stream);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm, &async);
        const std::string msg = ncclGetLastError(comm);
        if (async != ncclRemoteError) {
          fprintf(stderr, "rank 0: async %d after %.1f s: %s\n", async, s, msg.c_str());
          return 12;
        }
        if (msg.find("rank 1 (process ") == std::string::npos || msg.find("exited") == std::string::npos || s > 10) {
          fprintf(stderr, "rank 0 after %.1f s: %s\n", s, msg.c_str());
          return 13;
        }
        return 0;  // the harness destroys the communicator: that must work after a failure too
      },
      60, nullptr, nullptr,
      [](int r) {
        setenv("BRAID_TIMEOUT", "30", 1);
        if (!Driver::get().use(r)) _exit(20);
      });
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 128 + SIGKILL);
}

// Two ranks on one GPU: refused by name unless NCCL_MULTI_RANK_GPU_ENABLE=1, then they work (each its own stream
// and kernels, sharing the device's resident slots).
TEST_F(CudaComm, SeveralRanksOnOneGpuNeedTheOptIn) {
  const Driver& drv = Driver::get();
  ncclUniqueId id;
  std::vector<ncclResult_t> res(2);
  std::vector<std::string> msgs(2);
  for (const char* enable : {"0", "1"}) {
    setenv("NCCL_MULTI_RANK_GPU_ENABLE", enable, 1);
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    std::thread t[2];
    for (int r = 0; r < 2; ++r) {
      t[r] = std::thread([&, r] {
        ASSERT_TRUE(drv.use(0));
        ncclComm_t comm = nullptr;
        res[static_cast<size_t>(r)] = ncclCommInitRank(&comm, 2, id, r);
        msgs[static_cast<size_t>(r)] = ncclGetLastError(comm);
        if (comm == nullptr) return;
        // A stream each: two ranks on one device's legacy stream would wait for each other (on a GPU too).
        void* stream = nullptr;
        drv.streamCreate(&stream, 1);
        void* buf = drv.alloc(4000);
        std::vector<float> v(1000, 1.0f), out(1000, 0);
        drv.copy(buf, v.data(), 4000, stream);
        res[static_cast<size_t>(r)] =
            ncclAllReduce(buf, buf, 1000, ncclFloat, ncclSum, comm, static_cast<cudaStream_t>(stream));
        drv.copy(out.data(), buf, 4000, stream);
        if (drv.streamSync(stream) != 0 || out[999] != 2.0f) res[static_cast<size_t>(r)] = ncclInternalError;
        drv.memFree(reinterpret_cast<unsigned long long>(buf));
        drv.streamDestroy(stream);
        ncclCommDestroy(comm);
      });
    }
    for (auto& th : t) th.join();
    for (size_t r = 0; r < 2; ++r) {
      if (*enable == '0') {
        EXPECT_EQ(res[r], ncclInvalidUsage);
        EXPECT_NE(msgs[r].find("ranks 0 and 1 use the same GPU (device 0 here): set NCCL_MULTI_RANK_GPU_ENABLE=1"),
                  std::string::npos)
            << msgs[r];
      } else {
        EXPECT_EQ(res[r], ncclSuccess) << msgs[r];
      }
    }
  }
  unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
}

// Ranks that share a GPU share its resident CTAs: with 4 slots (SMs) and 3 ranks on one device, each runs one
// channel even when NCCL_MIN_NCHANNELS asks for 4, since CTAs that could not all be resident would wait for each
// other forever (the emulator reports that deadlock when the limit is removed).
TEST_F(CudaComm, RanksOnOneGpuShareItsResidentCtas) {
  setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
  setenv("BRAID_FAKE_CUDA_SM_SLOTS", "4", 1);
  setenv("NCCL_MIN_NCHANNELS", "4", 1);
  std::vector<int> channels(3, -1);
  std::vector<ncclResult_t> res = runCudaRanks(
      3,
      [&](int r, ncclComm_t comm, cudaStream_t stream) {
        const Driver& drv = Driver::get();
        void* buf = drv.alloc(4 * 100000);
        std::vector<float> v(100000, static_cast<float>(r + 1)), out(100000, 0);
        drv.copy(buf, v.data(), v.size() * 4, stream);
        ncclResult_t st = ncclAllReduce(buf, buf, v.size(), ncclFloat, ncclSum, comm, stream);
        drv.copy(out.data(), buf, v.size() * 4, stream);
        if (st == ncclSuccess && (drv.streamSync(stream) != 0 || out[99999] != 6.0f)) st = ncclInternalError;
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm, &async);
        drv.memFree(reinterpret_cast<unsigned long long>(buf));
        return st != ncclSuccess ? st : async;
      },
      nullptr, [](int) { return 0; });
  unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
  unsetenv("BRAID_FAKE_CUDA_SM_SLOTS");
  unsetenv("NCCL_MIN_NCHANNELS");
  for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess);
}

// Three ranks sharing a GPU keep at least 9 streams busy: with the driver's default 8 hardware queues some share
// one, and kernels that wait for each other can stall behind a stream's wait (the fake reproduces it:
// FakeCudaStreams.StreamsBeyondTheConnectionsShareAHardwareQueue). The lowest rank on the GPU warns, naming the
// remedy; with 32 queues nobody does.
TEST_F(CudaComm, RanksSharingAGpuBeyondItsQueuesAreWarnedOf) {
  setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
  for (const char* connections : {"8", "32"}) {
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", connections, 1);  // read by braid at init; the fake's queues stay as made
    LogCapture log("INIT");
    std::vector<ncclResult_t> res = runCudaRanks(
        3, [](int, ncclComm_t, cudaStream_t) { return ncclSuccess; }, nullptr, [](int) { return 0; });
    for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess);
    const std::string text = log.textOf(getpid());
    const size_t warned =
        occurrences(text,
                    "rank 0: 3 ranks share this GPU with at least 9 streams, more than its 8 hardware queues "
                    "(CUDA_DEVICE_MAX_CONNECTIONS)");
    EXPECT_EQ(warned, std::string(connections) == "8" ? 1u : 0u) << connections << ": " << text;
    EXPECT_EQ(occurrences(text, "hardware queues"), warned) << text;  // only the lowest rank says it
  }
  unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 1);  // the tests' default (fake_cuda_ranks.h)
}

// cudaStreamPerThread (CU_STREAM_PER_THREAD, 0x2): each rank's thread's own default stream, as programs built with
// --default-stream per-thread pass it. The collective is ordered on it like on any stream.
TEST_F(CudaComm, ThePerThreadDefaultStream) {
  const Driver& drv = Driver::get();
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t) {
    auto perThread = reinterpret_cast<cudaStream_t>(0x2);
    std::vector<float> in(5000, static_cast<float>(r + 1)), out(5000, 0);
    void* buf = drv.alloc(in.size() * 4);
    drv.copy(buf, in.data(), in.size() * 4, perThread);
    ncclResult_t st = ncclAllReduce(buf, buf, in.size(), ncclFloat, ncclSum, comm, perThread);
    drv.copy(out.data(), buf, out.size() * 4, perThread);
    if (st == ncclSuccess && (drv.streamSync(perThread) != 0 || out[0] != 3.0f || out[4999] != 3.0f)) {
      st = ncclInternalError;
    }
    drv.memFree(reinterpret_cast<unsigned long long>(buf));
    return st;
  });
  for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess) << ncclGetLastError(nullptr);
}

// The state rank `rank`'s communicator's flight recorder gives its collective `seq` in a dump ("" if absent).
std::string flightState(const std::string& dump, int rank, int seq) {
  const size_t comm = dump.find("\"rank\": " + std::to_string(rank) + ", \"nranks\"");
  if (comm == std::string::npos) return "";
  const size_t end = dump.find("\"comm_id\"", comm);
  const size_t op = dump.find("{\"coll_seq\": " + std::to_string(seq) + ",", comm);
  if (op == std::string::npos || (end != std::string::npos && op > end)) return "";
  const size_t st = dump.find("\"state\": \"", op);
  return st == std::string::npos ? "" : dump.substr(st + 10, dump.find('"', st + 10) - st - 10);
}

// The flight recorder of a CUDA communicator: a collective whose kernel still waits for its peer is "started", not
// finished, though its call returned long ago; once the kernel finished, the next call on the owner's thread ends
// it. (A dump that said "finished" for a hung collective would send `braid-info --analyze` the wrong way.)
TEST_F(CudaComm, TheFlightRecorderEndsACallWhenItsKernelFinishes) {
  const Driver& drv = Driver::get();
  char dir[] = "/tmp/braid-fr-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/fr-" + std::to_string(getpid()) + ".json";
  setenv("BRAID_FLIGHT_RECORDER_FILE", (std::string(dir) + "/fr-%p.json").c_str(), 1);
  // SIGUSR1 makes the process write its dump; wait for a new one.
  auto dump = [&] {
    unlink(file.c_str());
    raise(SIGUSR1);
    for (int i = 0; i < 500; ++i) {
      const std::string t = readFileText(file);
      if (t.find("]}") != std::string::npos && t.rfind('}') == t.size() - 2) return t;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return readFileText(file);
  };
  std::atomic<int> phase{0};
  std::string whileWaiting, afterwards;
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    void* buf = drv.alloc(4000);
    auto allReduce = [&] { return ncclAllReduce(buf, buf, 1000, ncclFloat, ncclSum, comm, stream); };
    if (allReduce() != ncclSuccess || drv.streamSync(stream) != 0) return ncclInternalError;  // collective 0
    if (r == 0) {
      if (allReduce() != ncclSuccess) return ncclInternalError;  // collective 1: waits for rank 1
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      whileWaiting = dump();
      phase.store(1);
      if (drv.streamSync(stream) != 0) return ncclInternalError;
      while (phase.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (allReduce() != ncclSuccess || drv.streamSync(stream) != 0) return ncclInternalError;  // collective 2
      afterwards = dump();
    } else {
      while (phase.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (allReduce() != ncclSuccess || drv.streamSync(stream) != 0) return ncclInternalError;  // collective 1
      phase.store(2);
      if (allReduce() != ncclSuccess || drv.streamSync(stream) != 0) return ncclInternalError;  // collective 2
    }
    drv.memFree(reinterpret_cast<unsigned long long>(buf));
    return ncclSuccess;
  });
  unsetenv("BRAID_FLIGHT_RECORDER_FILE");
  unlink(file.c_str());
  rmdir(dir);
  for (ncclResult_t r : res) EXPECT_EQ(r, ncclSuccess);
  EXPECT_EQ(flightState(whileWaiting, 0, 0), "finished") << whileWaiting;
  EXPECT_EQ(flightState(whileWaiting, 0, 1), "started") << whileWaiting;
  EXPECT_EQ(flightState(afterwards, 0, 1), "finished") << afterwards;
}

TEST_F(CudaComm, AHostPointerIsANamedError) {
  const Driver& drv = Driver::get();
  std::vector<std::string> msgs(2);
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    std::vector<float> host(100);
    void* dev = drv.alloc(400);
    ncclResult_t st = ncclAllReduce(host.data(), dev, 100, ncclFloat, ncclSum, comm, stream);
    msgs[static_cast<size_t>(r)] = ncclGetLastError(comm);
    drv.memFree(reinterpret_cast<unsigned long long>(dev));
    return st == ncclInvalidArgument ? ncclSuccess : ncclInternalError;
  });
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r], ncclSuccess);
    EXPECT_NE(msgs[r].find("sendbuff="), std::string::npos) << msgs[r];
    EXPECT_NE(msgs[r].find("is not memory the CUDA driver knows"), std::string::npos) << msgs[r];
  }
}

// Rank 0 runs an all-reduce rank 1 never joins: the call returns at once, and the kernel's deadline
// (BRAID_TIMEOUT) reaches ncclCommGetAsyncError as ncclRemoteError naming the connection it waited on.
TEST_F(CudaComm, AMissingPeerReachesGetAsyncError) {
  const Driver& drv = Driver::get();
  setenv("BRAID_TIMEOUT", "1", 1);
  std::string msg;
  std::atomic<bool> done{false};
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    void* buf = drv.alloc(4000);
    // Together once: the links are made at first use, which waits for the peer on the calling thread.
    if (ncclAllReduce(buf, buf, 1000, ncclFloat, ncclSum, comm, stream) != ncclSuccess || drv.streamSync(stream) != 0) {
      return ncclInternalError;
    }
    if (r == 1) {
      while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      drv.memFree(reinterpret_cast<unsigned long long>(buf));
      return ncclSuccess;
    }
    const auto t0 = std::chrono::steady_clock::now();
    ncclResult_t st = ncclAllReduce(buf, buf, 1000, ncclFloat, ncclSum, comm, stream);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1)) << "the call waited for the kernel";
    ncclResult_t async = ncclSuccess;
    while (st == ncclSuccess && async == ncclSuccess &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)) {
      ncclCommGetAsyncError(comm, &async);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    msg = ncclGetLastError(comm);
    drv.streamSync(stream);
    drv.memFree(reinterpret_cast<unsigned long long>(buf));
    done.store(true);
    return st == ncclSuccess && async == ncclRemoteError ? ncclSuccess : ncclInternalError;
  });
  unsetenv("BRAID_TIMEOUT");
  EXPECT_EQ(res[0], ncclSuccess) << msg;
  EXPECT_NE(msg.find("no progress for 1 s"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
}

// ncclCommAbort stops a kernel waiting forever (BRAID_TIMEOUT=0) for a rank that never comes.
TEST_F(CudaComm, AbortStopsAWaitingKernel) {
  const Driver& drv = Driver::get();
  drv.prepare(2);
  setenv("BRAID_TIMEOUT", "0", 1);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[2] = {nullptr, nullptr};
  std::thread t[2];
  for (int r = 0; r < 2; ++r) {
    t[r] = std::thread([&, r] {
      ASSERT_TRUE(drv.use(r));
      ASSERT_EQ(ncclCommInitRank(&comms[r], 2, id, r), ncclSuccess);
    });
  }
  for (auto& th : t) th.join();
  unsetenv("BRAID_TIMEOUT");
  ASSERT_TRUE(comms[0] != nullptr && comms[1] != nullptr);
  // Together once (the links are made at first use), each on a stream of its own (two ranks sharing a GPU's
  // legacy stream would wait for each other).
  void* bufs[2] = {nullptr, nullptr};
  for (int r = 0; r < 2; ++r) {
    t[r] = std::thread([&, r] {
      ASSERT_TRUE(drv.use(r));
      bufs[r] = drv.alloc(4000);
      void* own = nullptr;
      drv.streamCreate(&own, 1);
      ASSERT_EQ(ncclAllReduce(bufs[r], bufs[r], 1000, ncclFloat, ncclSum, comms[r], static_cast<cudaStream_t>(own)),
                ncclSuccess);
      ASSERT_EQ(drv.streamSync(own), 0);
      drv.streamDestroy(own);
    });
  }
  for (auto& th : t) th.join();
  ASSERT_TRUE(drv.use(0));
  void* stream = nullptr;
  drv.streamCreate(&stream, 1);
  void* buf = bufs[0];
  // Rank 0 alone: its kernel waits for rank 1 with no deadline.
  ASSERT_EQ(ncclAllReduce(buf, buf, 1000, ncclFloat, ncclSum, comms[0], static_cast<cudaStream_t>(stream)),
            ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(comms[0]), ncclSuccess);
  EXPECT_EQ(drv.streamSync(stream), 0);  // the kernel ended
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(ncclCommDestroy(comms[1]), ncclSuccess);
  drv.memFree(reinterpret_cast<unsigned long long>(buf));
  ASSERT_TRUE(drv.use(1));
  drv.memFree(reinterpret_cast<unsigned long long>(bufs[1]));
  drv.streamDestroy(stream);
}

// ncclCommRegister keys a registration by the allocation's buffer id: collectives on a registered buffer run; once
// the buffer is freed (and its address maybe reused), a collective there is refused by name instead of trusting the
// stale registration; a host pointer cannot be registered on a CUDA communicator.
TEST_F(CudaComm, RegistrationsFollowTheAllocationNotTheAddress) {
  const Driver& drv = Driver::get();
  std::vector<std::string> msgs(2);
  std::vector<ncclResult_t> res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    void* buf = drv.alloc(4000);
    void* handle = nullptr;
    if (ncclCommRegister(comm, buf, 4000, &handle) != ncclSuccess || handle == nullptr) return ncclInternalError;
    std::vector<float> in(1000, 1.0f + static_cast<float>(r)), out(1000, 0);
    drv.copy(buf, in.data(), 4000, stream);
    if (ncclAllReduce(buf, buf, 1000, ncclFloat, ncclSum, comm, stream) != ncclSuccess) return ncclInternalError;
    drv.copy(out.data(), buf, 4000, stream);
    if (drv.streamSync(stream) != 0 || out[999] != 3.0f) return ncclInternalError;
    std::vector<char> host(64);
    void* hostHandle = nullptr;
    if (ncclCommRegister(comm, host.data(), host.size(), &hostHandle) != ncclInvalidArgument) return ncclInternalError;
    const std::string hostMsg = ncclGetLastError(comm);
    if (hostMsg.find("buff=") == std::string::npos) {
      ADD_FAILURE() << hostMsg;
      return ncclInternalError;
    }
    // Both ranks free their registered buffers, then allocate again (the fake reuses addresses, as caching
    // allocators do): the old registration must not vouch for what is there now.
    drv.memFree(reinterpret_cast<unsigned long long>(buf));
    void* again = drv.alloc(4000);
    ncclResult_t st = ncclAllReduce(buf, buf, 1000, ncclFloat, ncclSum, comm, stream);
    msgs[static_cast<size_t>(r)] = ncclGetLastError(comm);
    if (ncclCommDeregister(comm, handle) != ncclSuccess) return ncclInternalError;
    drv.memFree(reinterpret_cast<unsigned long long>(again));
    return st;
  });
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r], ncclInvalidUsage) << msgs[r];
    EXPECT_NE(msgs[r].find("registered with ncclCommRegister"), std::string::npos) << msgs[r];
    EXPECT_NE(msgs[r].find("call ncclCommDeregister before freeing a registered buffer"), std::string::npos) << msgs[r];
  }
}

// One rank with a current context (cuda), one without (host): init fails on both, naming the two backends.
TEST_F(CudaComm, RanksThatDisagreeOnTheBackendFailInit) {
  std::vector<ncclResult_t> res = runCudaRanks(
      2, [](int, ncclComm_t, cudaStream_t) { return ncclSuccess; }, [](int r) { return r == 0; });
  for (ncclResult_t r : res) EXPECT_EQ(r, ncclInvalidUsage);
  const std::string msg = ncclGetLastError(nullptr);
  EXPECT_NE(msg.find("memory: every rank of a communicator must use the same backend"), std::string::npos) << msg;
}

// A host communicator still refuses a stream, and names the remedy.
TEST_F(CudaComm, AStreamOnAHostCommunicatorIsRefused) {
  setenv("BRAID_BACKEND", "host", 1);
  std::vector<ncclResult_t> res = runCudaRanks(1, [](int, ncclComm_t comm, cudaStream_t stream) {
    float x = 1;
    ncclResult_t st = ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, stream);
    const std::string msg = ncclGetLastError(comm);
    EXPECT_NE(msg.find("works on host memory"), std::string::npos) << msg;
    return st == ncclInvalidUsage ? ncclSuccess : ncclInternalError;
  });
  unsetenv("BRAID_BACKEND");
  EXPECT_EQ(res[0], ncclSuccess);
}

}  // namespace
