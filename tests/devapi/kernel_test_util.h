// What the device-API kernel tests share (after tests/devapi/device_shim.h): the fixture of tests whose kernels run
// on the CTA emulator over the strict fake driver, a launch configuration, and the per-rank check.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>

#include "tests/common/fake_cuda_ranks.h"

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

}  // namespace braid_test

// In a rank's body (with `r` its rank): returns `code` as its ncclResult_t, saying which check failed, unless cond.
#define CHECK_OR(cond, code)                                                 \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "rank %d: %s failed (line %d)\n", r, #cond, __LINE__); \
      return static_cast<ncclResult_t>(code);                                \
    }                                                                        \
  } while (0)
