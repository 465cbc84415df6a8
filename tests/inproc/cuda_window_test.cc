// Windows and one-sided operations on CUDA communicators (src/backends/cuda/cuda_windows.h, the signal kernel in
// src/backends/common/rma_kernel.h), on the strict fake driver and the CTA emulator: puts by the copy engine and
// signals in stream order around a ring of ranks on three GPUs, ranks sharing a GPU, ranks in two processes (the
// windows imported from exported cuMem handles), and the failure paths: cudaMalloc memory, a signal that never
// comes (the kernel's deadline), revocation of a waiting communicator, graph capture. Every element checked.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "nccl.h"
#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"

namespace {

using namespace braid_test;

class CudaWindows : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
  }
  void TearDown() override {
    unsetenv("NCCL_MULTI_RANK_GPU_ENABLE");
    unsetenv("BRAID_TIMEOUT");
  }
};

int element(int rank, int round, size_t i) {
  return rank * 100003 + round * 7919 + static_cast<int>(i);
}

// Rounds of a ring on device windows: rank r puts its block (device memory) into rank (r + 1) % n's window at slot
// r and waits, on its stream, for rank (r - 1 + n) % n's put, then reads that slot back and checks it; a signal
// back frees the slot for the next round. 0, or the step that failed (reason on stderr). The window's memory comes
// from ncclMemAlloc, or with `device` >= 0 from the program's own cuMemCreate on that device (exportable, with
// access for every device), in `segments` mappings back to back.
int deviceRing(int r, int n, ncclComm_t comm, cudaStream_t stream, size_t count, int rounds, int device = -1,
               int segments = 1, int putCtx = 0, int backCtx = 0, int backSignals = 1) {
  const Driver& drv = Driver::get();
  const size_t slot = count * sizeof(int);
  void* win = nullptr;
  size_t mapped = 0;
  if (device >= 0) {
    std::vector<int> all;
    for (int d = 0; d < drv.devices; ++d) all.push_back(d);
    const size_t each = (slot * static_cast<size_t>(n) + static_cast<size_t>(segments) - 1) / segments;
    win = drv.cuMemMake(each, device, all, true, &mapped, segments);
    if (win == nullptr) return 9;
  } else if (ncclMemAlloc(&win, slot * static_cast<size_t>(n)) != ncclSuccess) {
    return 10;
  }
  ncclWindow_t w = nullptr;
  if (ncclCommWindowRegister(comm, win, slot * static_cast<size_t>(n), &w, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess) {
    fprintf(stderr, "rank %d: register: %s\n", r, ncclGetLastError(comm));
    return 11;
  }
  void* user = nullptr;
  if (ncclWinGetUserPtr(comm, w, &user) != ncclSuccess || user != win) return 12;
  void* mine = drv.alloc(slot);
  const int next = (r + 1) % n, prev = (r - 1 + n) % n;
  std::vector<int> host(count), got(count);
  int code = 0;
  for (int k = 0; k < rounds && code == 0; ++k) {
    for (size_t i = 0; i < count; ++i) host[i] = element(r, k, i);
    drv.copy(mine, host.data(), slot, stream);
    ncclWaitSignalDesc_t in{1, prev, 0, putCtx}, back{backSignals, next, 0, backCtx};
    if (ncclPutSignal(mine, count, ncclInt32, next, w, slot * static_cast<size_t>(r), 0, putCtx, 0, comm, stream) !=
            ncclSuccess ||
        ncclWaitSignal(1, &in, comm, stream) != ncclSuccess) {
      fprintf(stderr, "rank %d: %s\n", r, ncclGetLastError(comm));
      code = 13;
      break;
    }
    drv.copy(got.data(), static_cast<char*>(win) + slot * static_cast<size_t>(prev), slot, stream);
    bool sent = true;
    for (int b = 0; b < backSignals; ++b) sent = sent && ncclSignal(prev, 0, backCtx, 0, comm, stream) == ncclSuccess;
    if (!sent || ncclWaitSignal(1, &back, comm, stream) != ncclSuccess) {
      code = 14;
      break;
    }
    if (drv.streamSync(stream) != 0) code = 15;
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    if (async != ncclSuccess) {
      fprintf(stderr, "rank %d: %s\n", r, ncclGetLastError(comm));
      code = 16;
    }
    for (size_t i = 0; i < count && code == 0; ++i) {
      if (got[i] != element(prev, k, i)) {
        fprintf(stderr, "rank %d round %d element %zu: %d\n", r, k, i, got[i]);
        code = 17;
      }
    }
  }
  drv.memFree(reinterpret_cast<unsigned long long>(mine));
  if (ncclCommWindowDeregister(comm, w) != ncclSuccess) code = code != 0 ? code : 18;
  if (device >= 0) {
    drv.cuMemDrop(win, mapped, segments);
  } else {
    ncclMemFree(win);
  }
  return code;
}

// A child rank's set-up: GPU r current.
void useOwnGpu(int r) {
  if (!Driver::get().use(r)) _exit(20);
}

// deviceRing on two processes with a GPU each: each rank's code. `own`: on the program's own cuMem memory, in
// `segments` mappings.
std::vector<int> ringOfTwoProcesses(size_t count, int rounds, bool own, int segments = 1) {
  return runProcesses(
      2,
      [=](int r, ncclComm_t comm) {
        void* stream = nullptr;
        Driver::get().streamCreate(&stream, 1);
        const int code =
            deviceRing(r, 2, comm, static_cast<cudaStream_t>(stream), count, rounds, own ? r : -1, segments);
        Driver::get().streamDestroy(stream);
        return code;
      },
      120, nullptr, nullptr, useOwnGpu);
}

TEST_F(CudaWindows, PutsAndSignalsAroundARingOfGpus) {
  const auto res = runCudaRanks(3, [](int r, ncclComm_t comm, cudaStream_t stream) {
    return deviceRing(r, 3, comm, stream, 50000, 6) == 0 ? ncclSuccess : ncclInternalError;
  });
  for (size_t r = 0; r < res.size(); ++r) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
}

// NCCL 2.31's contexts on CUDA communicators (NCCL_NUM_RMA_CTX=3, the signal area made at init by
// NCCL_RMA_EAGER_INIT=1): on two ranks, each put signals on context 2 and each reply is two signals on context 1 of
// the same pair, each awaited on its own word (one word for both would let a round's wait end on the last round's
// replies, before its data).
TEST_F(CudaWindows, PutsAndSignalsOnOtherContexts) {
  setenv("NCCL_NUM_RMA_CTX", "3", 1);
  setenv("NCCL_RMA_EAGER_INIT", "1", 1);
  const auto res = runCudaRanks(2, [](int r, ncclComm_t comm, cudaStream_t stream) {
    return deviceRing(r, 2, comm, stream, 30000, 20, -1, 1, 2, 1, 2) == 0 ? ncclSuccess : ncclInternalError;
  });
  unsetenv("NCCL_NUM_RMA_CTX");
  unsetenv("NCCL_RMA_EAGER_INIT");
  for (size_t r = 0; r < res.size(); ++r) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
}

TEST_F(CudaWindows, RanksSharingAGpu) {
  setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
  const auto res = runCudaRanks(
      3,
      [](int r, ncclComm_t comm, cudaStream_t stream) {
        return deviceRing(r, 3, comm, stream, 4097, 4) == 0 ? ncclSuccess : ncclInternalError;
      },
      nullptr, [](int) { return 0; });
  for (size_t r = 0; r < res.size(); ++r) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
}

TEST(CudaWindowsProcesses, WindowsAreMappedAcrossProcesses) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  const std::vector<int> codes = ringOfTwoProcesses(100000, 5, false);
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// The program's own cuMem mappings (cuMemCreate, cuMemMap, cuMemSetAccess) are windows as ncclMemAlloc's are: between
// threads on their GPUs, and across processes through the allocation's exported descriptor.
TEST_F(CudaWindows, TheProgramsOwnCuMemMappingsAreWindows) {
  const auto res = runCudaRanks(3, [](int r, ncclComm_t comm, cudaStream_t stream) {
    return deviceRing(r, 3, comm, stream, 30000, 4, r) == 0 ? ncclSuccess : ncclInternalError;
  });
  for (size_t r = 0; r < res.size(); ++r) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
}

TEST(CudaWindowsProcesses, TheProgramsOwnCuMemMappingsAreMappedAcrossProcesses) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  const std::vector<int> codes = ringOfTwoProcesses(30000, 3, true);
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// Across processes, a mapping made without the POSIX descriptor handle type cannot be offered: the window has no
// such peer, and a put toward it is refused by name.
TEST(CudaWindowsProcesses, AMappingThatCannotBeExportedIsOutOfReach) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  std::vector<int> codes = runProcesses(
      2,
      [](int r, ncclComm_t comm) {
        const Driver& drv = Driver::get();
        size_t mapped = 0;
        void* win = drv.cuMemMake(4096, r, {r}, false, &mapped);
        if (win == nullptr) return 10;
        ncclWindow_t w = nullptr;
        if (ncclCommWindowRegister(comm, win, 4096, &w, 0) != ncclSuccess) return 11;
        void* stream = nullptr;
        drv.streamCreate(&stream, 1);
        const ncclResult_t put =
            ncclPutSignal(win, 16, ncclInt32, 1 - r, w, 0, 0, 0, 0, comm, static_cast<cudaStream_t>(stream));
        const std::string err = ncclGetLastError(comm);
        drv.streamSync(stream);
        drv.streamDestroy(stream);
        int code = 0;
        if (put != ncclInvalidUsage || err.find("could not offer it to other processes") == std::string::npos) {
          fprintf(stderr, "rank %d: put gave %d: %s\n", r, static_cast<int>(put), err.c_str());
          code = 12;
        }
        if (ncclCommWindowDeregister(comm, w) != ncclSuccess && code == 0) code = 13;
        drv.cuMemDrop(win, mapped);
        return code;
      },
      120, nullptr, nullptr, useOwnGpu);
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// A window over several mappings back to back (NCCL 2.29's multi-segment registration, as PyTorch's expandable
// segments lay out memory): between threads, and across processes, where each mapping's allocation is exported and
// the peer maps them back to back.
TEST_F(CudaWindows, WindowsOverSeveralMappings) {
  const auto res = runCudaRanks(3, [](int r, ncclComm_t comm, cudaStream_t stream) {
    return deviceRing(r, 3, comm, stream, 300000, 3, r, 2) == 0 ? ncclSuccess : ncclInternalError;
  });
  for (size_t r = 0; r < res.size(); ++r) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
}

TEST(CudaWindowsProcesses, WindowsOverSeveralMappingsAcrossProcesses) {
  if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
  // 2.4 MB over three 2 MiB mappings: the window covers two of them.
  const std::vector<int> codes = ringOfTwoProcesses(300000, 3, true, 3);
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// cudaMalloc memory is not a window (NCCL takes only cuMem memory): the rank that offers it names it, the other
// names that rank.
TEST_F(CudaWindows, CudaMallocMemoryIsRefusedByName) {
  std::vector<std::string> errs(2);
  const auto res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t) {
    const Driver& drv = Driver::get();
    void* p = nullptr;
    if (r == 0) {
      p = drv.alloc(4096);
    } else if (ncclMemAlloc(&p, 4096) != ncclSuccess) {
      return ncclSystemError;
    }
    ncclWindow_t w = nullptr;
    const ncclResult_t st = ncclCommWindowRegister(comm, p, 4096, &w, 0);
    errs[static_cast<size_t>(r)] = ncclGetLastError(comm);
    if (r == 0) {
      drv.memFree(reinterpret_cast<unsigned long long>(p));
    } else {
      ncclMemFree(p);
    }
    return st;
  });
  EXPECT_EQ(res[0], ncclInvalidArgument);
  EXPECT_NE(errs[0].find("is neither ncclMemAlloc nor cuMem memory"), std::string::npos) << errs[0];
  EXPECT_EQ(res[1], ncclInvalidUsage);
  EXPECT_NE(errs[1].find("rank 0 could not register its part of the window"), std::string::npos) << errs[1];
}

// A wait whose signal never comes: the enqueue succeeds, the kernel gives up at BRAID_TIMEOUT and the communicator
// reports what it waited for.
TEST_F(CudaWindows, AWaitThatNeverEndsFailsAtTheDeadline) {
  setenv("BRAID_TIMEOUT", "2", 1);
  std::vector<std::string> errs(2);
  std::atomic<bool> over{false};
  const auto res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    void* p = nullptr;
    if (ncclMemAlloc(&p, 4096) != ncclSuccess) return ncclSystemError;
    ncclWindow_t w = nullptr;
    ncclResult_t st = ncclCommWindowRegister(comm, p, 4096, &w, 0);
    if (st == ncclSuccess && r == 0) {
      ncclWaitSignalDesc_t d{2, 1, 0, 0};
      st = ncclWaitSignal(1, &d, comm, stream);
      Driver::get().streamSync(stream);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      errs[0] = ncclGetLastError(comm);
      if (st == ncclSuccess) st = async == ncclRemoteError ? ncclSuccess : ncclInternalError;
      over = true;
    } else if (st == ncclSuccess) {
      st = ncclSignal(0, 0, 0, 0, comm, stream);
      Driver::get().streamSync(stream);
      while (!over.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ncclCommWindowDeregister(comm, w);
    ncclMemFree(p);
    return st;
  });
  for (size_t r = 0; r < res.size(); ++r) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
  EXPECT_NE(errs[0].find("rank 1 sent 1 signals, not the 2 awaited"), std::string::npos) << errs[0];
}

// A kernel waiting for a signal stops when its communicator is revoked from another thread.
TEST_F(CudaWindows, RevokeStopsAWaitingKernel) {
  setenv("BRAID_TIMEOUT", "0", 1);  // no deadline: only the revocation ends the wait
  const auto res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    void* p = nullptr;
    if (ncclMemAlloc(&p, 4096) != ncclSuccess) return ncclSystemError;
    ncclWindow_t w = nullptr;
    ncclResult_t st = ncclCommWindowRegister(comm, p, 4096, &w, 0);
    if (st == ncclSuccess && r == 0) {
      ncclWaitSignalDesc_t d{1, 1, 0, 0};
      st = ncclWaitSignal(1, &d, comm, stream);
      std::thread revoker([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT);
      });
      const int synced = Driver::get().streamSync(stream);  // returns once the kernel stopped
      revoker.join();
      if (st == ncclSuccess && synced != 0) st = ncclInternalError;
      if (st == ncclSuccess && ncclSignal(1, 0, 0, 0, comm, stream) != ncclInvalidUsage) st = ncclInternalError;
    }
    ncclCommWindowDeregister(comm, w);
    ncclMemFree(p);
    return st;
  });
  for (size_t r = 0; r < res.size(); ++r) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
}

// One-sided operations cannot be captured into a CUDA graph (nor can NCCL's, 2.29-2.31): refused by name, and the
// refused call counts nothing (the put after the capture pairs with the peer's first wait).
TEST_F(CudaWindows, GraphCaptureIsRefusedByName) {
  auto begin = reinterpret_cast<int (*)(void*, int)>(dlsym(Driver::get().lib, "cuStreamBeginCapture_v2"));
  auto end = reinterpret_cast<int (*)(void*, void**)>(dlsym(Driver::get().lib, "cuStreamEndCapture"));
  auto destroy = reinterpret_cast<int (*)(void*)>(dlsym(Driver::get().lib, "cuGraphDestroy"));
  ASSERT_NE(begin, nullptr);
  std::vector<std::string> errs(2);
  const auto res = runCudaRanks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    void* p = nullptr;
    if (ncclMemAlloc(&p, 4096) != ncclSuccess) return ncclSystemError;
    ncclWindow_t w = nullptr;
    ncclResult_t st = ncclCommWindowRegister(comm, p, 4096, &w, 0);
    if (st == ncclSuccess && r == 0) {
      begin(stream, 2);  // relaxed
      const ncclResult_t captured = ncclSignal(1, 0, 0, 0, comm, stream);
      errs[0] = ncclGetLastError(comm);
      void* graph = nullptr;
      end(stream, &graph);
      if (graph != nullptr) destroy(graph);
      if (captured != ncclInvalidUsage) st = ncclInternalError;
      if (st == ncclSuccess) st = ncclSignal(1, 0, 0, 0, comm, stream);
    } else if (st == ncclSuccess) {
      ncclWaitSignalDesc_t d{1, 0, 0, 0};
      st = ncclWaitSignal(1, &d, comm, stream);
    }
    if (Driver::get().streamSync(stream) != 0 && st == ncclSuccess) st = ncclInternalError;
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    if (st == ncclSuccess) st = async;
    ncclCommWindowDeregister(comm, w);
    ncclMemFree(p);
    return st;
  });
  for (size_t r = 0; r < res.size(); ++r) EXPECT_EQ(res[r], ncclSuccess) << "rank " << r;
  EXPECT_NE(errs[0].find("being captured into a CUDA graph"), std::string::npos) << errs[0];
}

}  // namespace
