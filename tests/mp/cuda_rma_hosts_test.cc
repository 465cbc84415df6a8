// One-sided operations of CUDA communicators toward ranks of another "host" (NCCL_HOSTID), on the strict fake driver
// with braid's kernels on the CTA emulator: processes, each on a GPU of its own. The other host's window is out of
// load/store reach, so each ncclPutSignal copies its data to a pinned stage in stream order and, when the stream gets
// there, a host function hands it to the messenger's sender thread (src/core/rma_net.h); the receiver's proxy copies
// it into the GPU window and then sets the signal word, which the waiting kernel reads. Checked: data of one slot
// and of many, in order (the last of 50 puts to one place wins), that the source buffer may be overwritten on the
// stream right after the put (the stage holds its data), a put larger than the staging budget (in pieces), a signal
// alone, a wait in stream order, what ncclCommQueryProperties says, a dead peer named by a later call, and
// BRAID_RMA_NET=0 refused by name.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "nccl.h"
#include "nccl_device.h"
#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"
#include "tests/common/log_capture.h"

namespace braid_test {
namespace {

// Rank r of n processes on GPU r, the first half on host a; `env` set in each child.
std::vector<int> gpuRanksOnTwoHosts(int n, const std::function<int(int, ncclComm_t, void*)>& body,
                                    std::vector<pid_t>* pids, const char* env = nullptr) {
  return runProcesses(
      n,
      [&body](int r, ncclComm_t comm) {
        void* stream = nullptr;
        if (Driver::get().streamCreate(&stream, 1) != 0) return 90;
        const int rc = body(r, comm, stream);
        Driver::get().streamDestroy(stream);
        return rc;
      },
      120, pids, nullptr,
      [n, env](int r) {
        LogCapture::reopenInChild();
        setenv("NCCL_HOSTID", r < n / 2 ? "host-a" : "host-b", 1);
        if (env != nullptr) putenv(const_cast<char*>(env));
        if (Driver::get().lib == nullptr || !Driver::get().use(r)) _exit(91);  // the fake did not load
      });
}

#define CHECK_OR(cond, code)                                                 \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "rank %d: %s failed (line %d)\n", r, #cond, __LINE__); \
      return code;                                                           \
    }                                                                        \
  } while (0)

class CudaRmaHosts : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Driver::loaded()) GTEST_SKIP() << "this process already initialised CUDA, which does not survive fork";
    BRAID_REQUIRE_FAKE_NOT_LOADED("ranks of two hosts by NCCL_HOSTID on one machine's GPUs");
  }
};

// Each rank puts into the GPU window of its peer on the other host and waits for the peer's puts; `env` in each
// child, and a check of what the ranks logged.
void putsAndSignalsReachGpuWindowsOfOtherHosts(const char* env) {
  LogCapture log("INIT,NET");
  std::vector<pid_t> pids;
  const std::vector<int> codes = gpuRanksOnTwoHosts(
      2,
      [](int r, ncclComm_t comm, void* stream) {
        const Driver& drv = Driver::get();
        const int peer = 1 - r;
        constexpr size_t kInts = (size_t{300} << 10) / sizeof(int) + 3;  // several 64 KB messages, and a tail
        constexpr size_t kWinInts = kInts + 64;
        ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
        CHECK_OR(ncclCommQueryProperties(comm, &props) == ncclSuccess && props.hostRmaSupport, 10);
        void* win = nullptr;
        CHECK_OR(ncclMemAlloc(&win, kWinInts * sizeof(int)) == ncclSuccess, 11);
        std::vector<int> host(kWinInts, -1);
        drv.copy(win, host.data(), kWinInts * sizeof(int), stream);
        CHECK_OR(drv.streamSync(stream) == 0, 12);
        ncclWindow_t w = nullptr;
        CHECK_OR(ncclCommWindowRegister(comm, win, kWinInts * sizeof(int), &w, NCCL_WIN_DEFAULT) == ncclSuccess, 13);
        // The source in GPU memory, overwritten on the stream right after the put: the put still carries the old data.
        void* src = drv.alloc(kInts * sizeof(int));
        std::vector<int> big(kInts), zeros(kInts, 0);
        for (size_t i = 0; i < kInts; ++i) big[i] = static_cast<int>(i * 7 + static_cast<size_t>(r));
        drv.copy(src, big.data(), kInts * sizeof(int), stream);
        CHECK_OR(ncclPutSignal(src, kInts, ncclInt32, peer, w, 64 * sizeof(int), 0, 0, 0, comm,
                               static_cast<cudaStream_t>(stream)) == ncclSuccess,
                 14);
        drv.copy(src, zeros.data(), kInts * sizeof(int), stream);
        // 50 small puts to ints 0..3 from one device buffer rewritten between them: the last wins.
        void* small = drv.alloc(4 * sizeof(int));
        std::vector<int> four(4);
        for (int k = 0; k < 50; ++k) {
          four = {k, k + r, -k, 1000 * r};
          drv.copy(small, four.data(), sizeof(int) * 4, stream);
          CHECK_OR(drv.streamSync(stream) == 0, 15);  // the host vector is rewritten next round
          CHECK_OR(ncclPutSignal(small, 4, ncclInt32, peer, w, 0, 0, 0, 0, comm, static_cast<cudaStream_t>(stream)) ==
                       ncclSuccess,
                   16);
        }
        CHECK_OR(ncclSignal(peer, 0, 0, 0, comm, static_cast<cudaStream_t>(stream)) == ncclSuccess, 17);
        // 1 + 50 + 1 signals from the peer, awaited in stream order; then its data, whole and in order.
        ncclWaitSignalDesc_t d{52, peer, 0, 0};
        CHECK_OR(ncclWaitSignal(1, &d, comm, static_cast<cudaStream_t>(stream)) == ncclSuccess, 18);
        drv.copy(host.data(), win, kWinInts * sizeof(int), stream);
        CHECK_OR(drv.streamSync(stream) == 0, 19);
        CHECK_OR(host[0] == 49 && host[1] == 49 + peer && host[2] == -49 && host[3] == 1000 * peer, 20);
        for (size_t i = 0; i < kInts; ++i) {
          if (host[64 + i] != static_cast<int>(i * 7 + static_cast<size_t>(peer))) {
            fprintf(stderr, "rank %d: element %zu is %d\n", r, i, host[64 + i]);
            return 21;
          }
        }
        // Both ranks' puts have landed before either deregisters.
        int token = 1, sum = 0;
        void* one = drv.alloc(sizeof(int));
        drv.copy(one, &token, sizeof(int), stream);
        CHECK_OR(ncclAllReduce(one, one, 1, ncclInt32, ncclSum, comm, static_cast<cudaStream_t>(stream)) == ncclSuccess,
                 22);
        drv.copy(&sum, one, sizeof(int), stream);
        CHECK_OR(drv.streamSync(stream) == 0 && sum == 2, 23);
        CHECK_OR(ncclCommWindowDeregister(comm, w) == ncclSuccess, 24);
        drv.memFree(reinterpret_cast<unsigned long long>(src));
        drv.memFree(reinterpret_cast<unsigned long long>(small));
        drv.memFree(reinterpret_cast<unsigned long long>(one));
        CHECK_OR(ncclMemFree(win) == ncclSuccess, 25);
        return 0;
      },
      &pids, env);
  ASSERT_EQ(codes.size(), 2u);
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
  for (pid_t pid : pids) {
    const std::string t = log.textOf(pid);
    EXPECT_NE(t.find("one-sided operations toward 1 rank(s) on other hosts go as messages via"), std::string::npos)
        << t;
    EXPECT_EQ(t.find("stopped"), std::string::npos) << t;
    EXPECT_EQ(t.find("not sent"), std::string::npos) << t;
  }
}

TEST_F(CudaRmaHosts, PutsAndSignalsReachGpuWindowsOfOtherHosts) {
  putsAndSignalsReachGpuWindowsOfOtherHosts(nullptr);
}

// A staging budget of 256 KB: the 300 KB put goes in five 64 KB pieces, the call waiting for room while earlier
// pieces are unsent; the data and the signal still arrive whole and in order.
TEST_F(CudaRmaHosts, APutLargerThanTheStagingBudgetGoesInPieces) {
  putsAndSignalsReachGpuWindowsOfOtherHosts("BRAID_RMA_STAGE_BYTES=262144");
}

// A peer of the other host dies (kill -9) after the registration: puts toward it are sent by the sender thread
// after the call returned, so the failure comes back from a later call, ncclRemoteError naming the peer, well
// before BRAID_TIMEOUT; and the communicator still ends (the harness destroys it) without waiting for the dead peer.
TEST_F(CudaRmaHosts, APutTowardADeadPeerFailsByNameOnALaterCall) {
  std::vector<pid_t> pids;
  const std::vector<int> codes = gpuRanksOnTwoHosts(
      2,
      [](int r, ncclComm_t comm, void* stream) {
        const Driver& drv = Driver::get();
        constexpr size_t kBytes = 256 << 10;
        void* win = nullptr;
        CHECK_OR(ncclMemAlloc(&win, kBytes) == ncclSuccess, 10);
        ncclWindow_t w = nullptr;
        CHECK_OR(ncclCommWindowRegister(comm, win, kBytes, &w, NCCL_WIN_DEFAULT) == ncclSuccess, 11);
        if (r == 1) raise(SIGKILL);
        void* src = drv.alloc(kBytes);
        const auto t0 = std::chrono::steady_clock::now();
        ncclResult_t st = ncclSuccess;
        double s = 0;
        while (st == ncclSuccess && s < 30) {
          st = ncclPutSignal(src, kBytes, ncclInt8, 1, w, 0, 0, 0, 0, comm, static_cast<cudaStream_t>(stream));
          CHECK_OR(drv.streamSync(stream) == 0, 12);
          s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        const std::string e = ncclGetLastError(comm);
        if (st != ncclRemoteError || e.find("rank 1") == std::string::npos || s >= 30) {
          fprintf(stderr, "rank 0: %d after %.1f s: %s\n", st, s, e.c_str());
          return 13;
        }
        drv.memFree(reinterpret_cast<unsigned long long>(src));
        return 0;
      },
      &pids, "BRAID_TIMEOUT=60");
  ASSERT_EQ(codes.size(), 2u);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 128 + SIGKILL);
}

// A peer that sent its put and then ended its communicator (its connection closed after its goodbye): a wait for
// the signal it sent still succeeds, with the data (regression: the wait was refused as "it ended its
// communicator" before it ran).
TEST_F(CudaRmaHosts, AWaitForSignalsThatCameBeforeThePeerEndedSucceeds) {
  std::vector<pid_t> pids;
  const std::vector<int> codes = gpuRanksOnTwoHosts(
      2,
      [](int r, ncclComm_t comm, void* stream) {
        const Driver& drv = Driver::get();
        void* win = nullptr;
        CHECK_OR(ncclMemAlloc(&win, 4096) == ncclSuccess, 10);
        ncclWindow_t w = nullptr;
        CHECK_OR(ncclCommWindowRegister(comm, win, 4096, &w, NCCL_WIN_DEFAULT) == ncclSuccess, 11);
        int value = 4242;
        void* src = drv.alloc(sizeof(int));
        drv.copy(src, &value, sizeof(int), stream);
        if (r == 1) {
          CHECK_OR(ncclPutSignal(src, 1, ncclInt32, 0, w, 16, 0, 0, 0, comm, static_cast<cudaStream_t>(stream)) ==
                       ncclSuccess,
                   12);
          CHECK_OR(drv.streamSync(stream) == 0, 13);
          return 0;  // the harness ends its communicator: the put leaves first, then the goodbye
        }
        sleep(2);  // rank 1 has ended meanwhile
        ncclWaitSignalDesc_t d{1, 1, 0, 0};
        CHECK_OR(ncclWaitSignal(1, &d, comm, static_cast<cudaStream_t>(stream)) == ncclSuccess, 14);
        int got = 0;
        drv.copy(&got, static_cast<char*>(win) + 16, sizeof(int), stream);
        CHECK_OR(drv.streamSync(stream) == 0 && got == 4242, 15);
        return 0;
      },
      &pids, "BRAID_TIMEOUT=30");
  ASSERT_EQ(codes.size(), 2u);
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

TEST_F(CudaRmaHosts, TurnedOffTheyAreRefusedByName) {
  std::vector<pid_t> pids;
  const std::vector<int> codes = gpuRanksOnTwoHosts(
      2,
      [](int r, ncclComm_t comm, void* stream) {
        ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
        CHECK_OR(ncclCommQueryProperties(comm, &props) == ncclSuccess && !props.hostRmaSupport, 10);
        void* win = nullptr;
        CHECK_OR(ncclMemAlloc(&win, 4096) == ncclSuccess, 11);
        ncclWindow_t w = nullptr;
        CHECK_OR(ncclCommWindowRegister(comm, win, 4096, &w, NCCL_WIN_DEFAULT) == ncclSuccess, 12);
        CHECK_OR(ncclSignal(1 - r, 0, 0, 0, comm, static_cast<cudaStream_t>(stream)) == ncclInvalidUsage, 13);
        CHECK_OR(std::string(ncclGetLastError(comm)).find("BRAID_RMA_NET=0") != std::string::npos, 14);
        CHECK_OR(ncclCommWindowDeregister(comm, w) == ncclSuccess && ncclMemFree(win) == ncclSuccess, 15);
        return 0;
      },
      &pids, "BRAID_RMA_NET=0");
  ASSERT_EQ(codes.size(), 2u);
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

}  // namespace
}  // namespace braid_test
