// Helpers for tests that load the strict fake CUDA driver (tests/fake_cuda/) through braid's driver table. The table
// loads once per process, from the library BRAID_CUDA_DRIVER names then, so every such test runs its body in a child
// process (BRAID_IN_CHILD) and reports failures by exit code.
#pragma once

#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>

#include "src/backends/cuda/cu_api.h"

// Exits the child with `code` (printing the condition) unless `cond` holds.
#define CHECK_OR_EXIT(cond, code)             \
  do {                                        \
    if (!(cond)) {                            \
      fprintf(stderr, "failed: %s\n", #cond); \
      exit(code);                             \
    }                                         \
  } while (0)

// Runs the braced body in a child process; the test passes when the body ends (the child exits 0).
#define BRAID_IN_CHILD(...) EXPECT_EXIT(([&] { __VA_ARGS__ exit(0); })(), ::testing::ExitedWithCode(0), "")

namespace braid {

// The fake's table, with BRAID_FAKE_CUDA_DEVICES and BRAID_FAKE_CUDA_FAIL set first; exits 3 when it fails to load.
inline const CuApi& loadFake(const char* devices = "2", const char* fail = nullptr) {
  setenv("BRAID_CUDA_DRIVER", BRAID_FAKE_CUDA_DRIVER, 1);
  setenv("BRAID_FAKE_CUDA_DEVICES", devices, 1);
  if (fail != nullptr) setenv("BRAID_FAKE_CUDA_FAIL", fail, 1);
  Result<const CuApi*> api = cuApi();
  if (!api.isOk()) {
    fprintf(stderr, "%s\n", api.status().message().c_str());
    exit(3);
  }
  return *api.value();
}

// The same with `device`'s primary context current on this thread; exits 2 when that fails.
inline const CuApi& fakeOn(int device, const char* fail = nullptr) {
  const CuApi& api = loadFake("2", fail);
  CUcontext ctx = nullptr;
  CHECK_OR_EXIT(api.devicePrimaryCtxRetain(&ctx, device) == kCuSuccess && api.ctxSetCurrent(ctx) == kCuSuccess, 2);
  return api;
}

}  // namespace braid
