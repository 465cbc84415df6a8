// What the device-API kernel tests share (after tests/devapi/device_shim.h): the fixture of tests whose kernels run
// on the CTA emulator over the strict fake driver, a launch configuration, and the per-rank check.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>

#include "tests/common/fake_cuda_ranks.h"
#include "tests/common/harness.h"

namespace braid_test {

class FakeGpuKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Driver::get().lib == nullptr) GTEST_SKIP() << "the fake CUDA driver did not load";
    BRAID_REQUIRE_FAKE("kernels run on the CTA emulator, which reads the fake's device memory from the host");
  }
};

// A launch of `grid` CTAs of `block` threads with a 60-second deadline and the emulator's scheduling chaos.
inline braid::EmuLaunchConfig cfgOf(int grid, int block, const char* name) {
  braid::EmuLaunchConfig cfg;
  cfg.grid = grid;
  cfg.block = block;
  cfg.deadlineSec = 60;
  cfg.name = name;
  cfg.chaosSeed = 0x5eed;
  return cfg;
}

// A process rank's body on a stream of its own: 0, or 100 + the ncclResult_t it failed with (an exit code).
inline int onOwnStream(int r, ncclComm_t comm, ncclResult_t (*body)(int, int, ncclComm_t, cudaStream_t), int n) {
  void* stream = nullptr;
  Driver::get().streamCreate(&stream, 1);
  const ncclResult_t rc = body(r, n, comm, static_cast<cudaStream_t>(stream));
  Driver::get().streamDestroy(stream);
  return rc == ncclSuccess ? 0 : 100 + static_cast<int>(rc);
}

// `n` ranks as processes, rank r on GPU r (its CUDA context current at init: CUDA communicators), `before` run first
// in each child (environment settings): each one's exit code. The caller skips when this process has CUDA already.
inline std::vector<int> runGpuProcesses(int n, const std::function<int(int, ncclComm_t)>& body,
                                        const std::function<void(int)>& before = nullptr) {
  return runProcesses(n, body, 120, nullptr, nullptr, [before](int r) {
    if (before) before(r);
    if (!Driver::get().use(r)) _exit(20);
  });
}

}  // namespace braid_test

// In a rank's body (with `r` its rank): returns `code` as its ncclResult_t, saying which check failed, unless cond.
#define CHECK_OR(cond, code)                                                 \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "rank %d: %s failed (line %d)\n", r, #cond, __LINE__); \
      return static_cast<ncclResult_t>(code);                                \
    }                                                                        \
  } while (0)
