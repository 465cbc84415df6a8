// ncclCommSuspend / ncclCommResume / ncclCommMemStats on CUDA communicators (src/core/suspend.cc and the CUDA
// backend's quiesceLinks), on the strict fake driver and the CTA emulator: the device FIFOs of the links are
// released (their bytes as mapped, granularity included), operations are refused until the resume, and the first
// collective after it connects anew with exact results; a live CUDA graph that captured the communicator's work
// refuses the suspend on every rank (nothing is released), and once the graphs are destroyed it succeeds.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/fake_cuda_ranks.h"

namespace {

using namespace braid_test;

class CudaSuspend : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
    setenv("NCCL_ALGO", "Ring", 1);  // the FIFO path: links in device memory
  }
  void TearDown() override { unsetenv("NCCL_ALGO"); }
};

constexpr int kRanks = 3;
constexpr size_t kCount = 5000;
constexpr size_t kTwoMiB = size_t{2} << 20;

// An all-reduce of `tag`-dependent inputs, checked exactly.
bool allReduceExact(int r, ncclComm_t comm, cudaStream_t stream, void* buf, int tag) {
  const Driver& drv = Driver::get();
  std::vector<float> in(kCount), out(kCount);
  for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<float>((i + static_cast<size_t>(r * 7 + tag)) % 13);
  drv.copy(buf, in.data(), kCount * 4, stream);
  if (ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) return false;
  drv.copy(out.data(), buf, kCount * 4, stream);
  if (drv.streamSync(stream) != 0) return false;
  for (size_t i = 0; i < kCount; ++i) {
    float want = 0;
    for (int p = 0; p < kRanks; ++p) want += static_cast<float>((i + static_cast<size_t>(p * 7 + tag)) % 13);
    if (out[i] != want) return false;
  }
  return true;
}

TEST_F(CudaSuspend, ReleasesDeviceFifosRefusesWorkAndResumesExactly) {
  std::vector<std::string> errors(kRanks);
  std::vector<ncclResult_t> res = runCudaRanks(kRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    std::string& e = errors[static_cast<size_t>(r)];
    const Driver& drv = Driver::get();
    void* buf = drv.alloc(kCount * 4);
    if (!allReduceExact(r, comm, stream, buf, 0)) e = "the first all-reduce";
    uint64_t held = 0, flag = 7, after = 0;
    if (e.empty() && ncclCommMemStats(comm, ncclStatGpuMemSuspend, &held) != ncclSuccess) e = "MemStats";
    // Each receiving end of a ring link owns a device FIFO, mapped in whole granules.
    if (e.empty() && (held == 0 || held % kTwoMiB != 0)) e = "GpuMemSuspend " + std::to_string(held);
    // What it keeps: its launch memory (work images, device blocks) at least.
    uint64_t persist = 0, total = 0;
    if (e.empty() && (ncclCommMemStats(comm, ncclStatGpuMemPersist, &persist) != ncclSuccess || persist == 0)) {
      e = "GpuMemPersist " + std::to_string(persist);
    }
    if (e.empty() && (ncclCommMemStats(comm, ncclStatGpuMemTotal, &total) != ncclSuccess || total != persist + held)) {
      e = "GpuMemTotal " + std::to_string(total);
    }
    if (e.empty() && ncclCommSuspend(comm, NCCL_SUSPEND_MEM) != ncclSuccess) e = ncclGetLastError(comm);
    if (e.empty() && (ncclCommMemStats(comm, ncclStatGpuMemTotal, &total) != ncclSuccess || total != persist)) {
      e = "GpuMemTotal while suspended " + std::to_string(total);
    }
    if (e.empty() && (ncclCommMemStats(comm, ncclStatGpuMemSuspended, &flag) != ncclSuccess || flag != 1)) {
      e = "not suspended";
    }
    if (e.empty() && (ncclCommMemStats(comm, ncclStatGpuMemSuspend, &after) != ncclSuccess || after != held)) {
      e = "released " + std::to_string(after) + " of " + std::to_string(held);
    }
    if (e.empty() && ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, comm, stream) != ncclInvalidUsage) {
      e = "an all-reduce while suspended was not refused";
    }
    if (e.empty() && ncclCommResume(comm) != ncclSuccess) e = ncclGetLastError(comm);
    for (int tag = 1; tag <= 3 && e.empty(); ++tag) {
      if (!allReduceExact(r, comm, stream, buf, tag)) e = "all-reduce " + std::to_string(tag) + " after the resume";
    }
    if (e.empty() && (ncclCommMemStats(comm, ncclStatGpuMemSuspend, &after) != ncclSuccess || after != held)) {
      e = "after the resume the links hold " + std::to_string(after) + ", before " + std::to_string(held);
    }
    drv.memFree(reinterpret_cast<unsigned long long>(buf));
    return e.empty() ? ncclSuccess : ncclInternalError;
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << r << ": " << errors[r];
}

// A CUDA graph that captured an all-reduce keeps the FIFOs' addresses: rank 0 holds one, so its suspend is refused,
// and the other ranks, which hold none, refuse too, naming rank 0; nothing is released (the communicator keeps
// working); with the graph destroyed the suspend goes through.
TEST_F(CudaSuspend, ALiveCapturedGraphOnOneRankRefusesItOnEveryRank) {
  const Driver& drv = Driver::get();
  const Graphs g(drv.lib);
  std::vector<std::string> errors(kRanks);
  std::vector<ncclResult_t> res = runCudaRanks(kRanks, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    std::string& e = errors[static_cast<size_t>(r)];
    void* buf = drv.alloc(kCount * 4);
    void* graph = nullptr;
    void* exec = nullptr;
    if (!allReduceExact(r, comm, stream, buf, 0)) e = "the first all-reduce";
    // Rank 0 captures its second all-reduce and replays it; the others call theirs directly (they pair up).
    if (e.empty() && r == 0) {
      if (g.begin(stream, 1) != 0) e = "begin capture";
      if (e.empty() && ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) {
        e = "capture";
      }
      if (e.empty() && (g.end(stream, &graph) != 0 || g.instantiate(&exec, graph, 0) != 0)) e = "instantiate";
      if (e.empty() && (g.launch(exec, stream) != 0 || drv.streamSync(stream) != 0)) e = "replay";
    } else if (e.empty()) {
      if (ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, comm, stream) != ncclSuccess ||
          drv.streamSync(stream) != 0) {
        e = "the second all-reduce";
      }
    }
    if (e.empty()) {
      const std::string want = r == 0 ? "CUDA graph(s) that captured" : "rank 0 could not suspend, so no rank did";
      if (ncclCommSuspend(comm, NCCL_SUSPEND_MEM) != ncclInvalidUsage) {
        e = "suspended while rank 0 holds a live graph";
      } else if (std::string(ncclGetLastError(comm)).find(want) == std::string::npos) {
        e = std::string("the refusal does not say '") + want + "': " + ncclGetLastError(comm);
      }
    }
    uint64_t flag = 1;
    if (e.empty() && (ncclCommMemStats(comm, ncclStatGpuMemSuspended, &flag) != ncclSuccess || flag != 0)) {
      e = "a refused suspend left the communicator suspended";
    }
    if (e.empty() && !allReduceExact(r, comm, stream, buf, 1)) e = "an all-reduce after the refused suspend";
    if (exec != nullptr) g.execDestroy(exec);
    if (graph != nullptr) g.destroy(graph);
    if (e.empty() && ncclCommSuspend(comm, NCCL_SUSPEND_MEM) != ncclSuccess) e = ncclGetLastError(comm);
    if (e.empty() && ncclCommResume(comm) != ncclSuccess) e = ncclGetLastError(comm);
    if (e.empty() && !allReduceExact(r, comm, stream, buf, 2)) e = "an all-reduce after the resume";
    drv.memFree(reinterpret_cast<unsigned long long>(buf));
    return e.empty() ? ncclSuccess : ncclInternalError;
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(res[static_cast<size_t>(r)], ncclSuccess) << r << ": " << errors[r];
}

}  // namespace
