// What the GIN process tests (gin_kernels_test.cc, gin_hosts_test.cc) share: ranks as GPU processes on two
// "hosts" (NCCL_HOSTID), windows of ncclMemAlloc memory, a rank's stream with its small host-side steps, and whether
// a process is stopped.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"
#include "tests/devapi/kernel_test_util.h"

namespace gin_test {

using namespace braid_test;

// `n` GPU processes, ranks below n/2 on host a and the rest on host b (NCCL_HOSTID), with `name`=`value` set in each
// (when name is given); expects every rank's exit code 0.
inline void expectOnTwoHosts(int n, const std::function<int(int, ncclComm_t)>& body, const char* name = nullptr,
                             const char* value = nullptr) {
  const std::vector<int> codes = runGpuProcesses(n, body, [n, name, value](int r) {
    setenv("NCCL_HOSTID", r < (n + 1) / 2 ? "host-a" : "host-b", 1);
    if (name != nullptr) setenv(name, value, 1);
  });
  ASSERT_EQ(codes.size(), static_cast<size_t>(n));
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << n << " ranks, rank " << r;
}

// A window of `bytes` of ncclMemAlloc memory, zeroed.
struct Win {
  void* buf = nullptr;
  ncclWindow_t win = nullptr;
  bool make(ncclComm_t comm, size_t bytes, cudaStream_t stream) {
    if (ncclMemAlloc(&buf, bytes) != ncclSuccess) return false;
    std::vector<char> zeros(bytes, 0);
    Driver::get().copy(buf, zeros.data(), bytes, stream);
    return Driver::get().streamSync(stream) == 0 &&
           ncclCommWindowRegister(comm, buf, bytes, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess && win != nullptr;
  }
  bool drop(ncclComm_t comm) {
    return ncclCommWindowDeregister(comm, win) == ncclSuccess && ncclMemFree(buf) == ncclSuccess;
  }
};

// A rank's stream and the small host-side steps the process tests share: fill, check, a barrier, a sum.
struct GpuRank {
  ncclComm_t comm;
  void* stream = nullptr;
  cudaStream_t s = nullptr;
  void* word = nullptr;
  explicit GpuRank(ncclComm_t c) : comm(c) {
    Driver::get().streamCreate(&stream, 1);
    s = static_cast<cudaStream_t>(stream);
    word = Driver::get().alloc(sizeof(int));
  }
  ~GpuRank() {
    Driver::get().memFree(reinterpret_cast<unsigned long long>(word));
    Driver::get().streamDestroy(stream);
  }
  bool fill(void* dst, size_t bytes, unsigned char v) {
    std::vector<unsigned char> h(bytes, v);
    return put(dst, h.data(), bytes);
  }
  // Copies in stream order and waits for it.
  bool put(void* dst, const void* src, size_t bytes) {
    Driver::get().copy(dst, src, bytes, s);
    return Driver::get().streamSync(s) == 0;
  }
  // Every byte of [from, to) of `buf` is v.
  bool allBytes(const void* buf, size_t from, size_t to, unsigned char v) {
    std::vector<unsigned char> h(to - from);
    if (!put(h.data(), static_cast<const char*>(buf) + from, to - from)) return false;
    for (size_t i = 0; i < h.size(); ++i) {
      if (h[i] != v) {
        fprintf(stderr, "byte %zu is %d, not %d\n", from + i, h[i], v);
        return false;
      }
    }
    return true;
  }
  // The sum of every rank's `v` (-1 on failure).
  int sum(int v) {
    Driver::get().copy(word, &v, sizeof(int), s);
    if (ncclAllReduce(word, word, 1, ncclInt32, ncclSum, comm, s) != ncclSuccess) return -1;
    int out = -1;
    Driver::get().copy(&out, word, sizeof(int), s);
    return Driver::get().streamSync(s) == 0 ? out : -1;
  }
  bool barrier() { return sum(1) > 0; }
};

// Whether process `pid` is stopped (SIGSTOP): its state in /proc/<pid>/stat is T.
inline bool processStopped(int pid) {
  const std::string stat = readFileText("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'T';
}

// Continues process `pid` (SIGCONT) when it goes out of scope, whatever happened; now() continues it at once.
struct ContinueOnExit {
  int pid;
  ~ContinueOnExit() { now(); }
  void now() const { kill(pid, SIGCONT); }
};

inline std::atomic<int>& continuedFlag() {
  static std::atomic<int> continued{0};  // lock-free: set in a signal handler
  return continued;
}

// The stop of the stopped-peer tests (2 ranks; both call it): rank 0 stops rank 1 (SIGSTOP) only once both have
// finished every collective so far. A rank that stopped itself as soon as its own collective returned could still
// owe the other that collective's last message (its network proxy sends it after the kernel ends), and the other's
// collective then failed at BRAID_TIMEOUT (seen in CI). Rank 1 marks a file named after the ranks' common parent and
// waits until it has been continued (SIGCONT); rank 0 waits for the mark, stops rank 1 and waits until it is
// stopped. Returns rank 1's pid on rank 0 (stopped: continue it, ContinueOnExit), 0 on rank 1 once continued, -1
// when a step failed.
inline int stopRankOne(int r, GpuRank& g) {
  const int peerPid = g.sum(r == 1 ? static_cast<int>(getpid()) : 0);
  if (peerPid <= 0) return -1;
  const std::string mark = "/tmp/braid-gin-stop-" + std::to_string(getppid());
  if (r == 1) {
    signal(SIGCONT, [](int) { continuedFlag().store(1); });
    FILE* f = fopen(mark.c_str(), "w");
    if (f == nullptr) return -1;
    fclose(f);
    for (int i = 0; i < 600000 && continuedFlag().load() == 0; ++i) usleep(100);
    return continuedFlag().load() != 0 ? 0 : -1;
  }
  for (int i = 0; i < 20000 && access(mark.c_str(), F_OK) != 0; ++i) usleep(1000);
  if (unlink(mark.c_str()) != 0 || kill(peerPid, SIGSTOP) != 0) return -1;
  for (int i = 0; i < 20000 && !processStopped(peerPid); ++i) usleep(1000);
  return processStopped(peerPid) ? peerPid : -1;
}

}  // namespace gin_test
