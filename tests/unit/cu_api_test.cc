// The CUDA driver table (src/backends/cuda/cu_api.h) against the strict fake driver (tests/fake_cuda/). Each case
// runs in a child process: the table is loaded once per process, from the library BRAID_CUDA_DRIVER names then.
#include "src/backends/cuda/cu_api.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include "tests/unit/fake_cuda_util.h"

namespace braid {
namespace {

TEST(CuApi, LoadsTheDriverTheKnobNamesThroughGetProcAddress) {
  BRAID_IN_CHILD({
    const CuApi& api = loadFake();
    CHECK_OR_EXIT(api.name == BRAID_FAKE_CUDA_DRIVER, 10);
    CHECK_OR_EXIT(api.driverVersion == 13000, 11);
    int n = 0;
    CHECK_OR_EXIT(api.check(api.deviceGetCount(&n), "cuDeviceGetCount").isOk() && n == 2, 12);
    CUdevice dev = -1;
    CHECK_OR_EXIT(api.check(api.deviceGet(&dev, 1), "cuDeviceGet").isOk() && dev == 1, 13);
    int major = 0;
    CHECK_OR_EXIT(
        api.deviceGetAttribute(&major, static_cast<int>(CuDeviceAttr::kComputeCapabilityMajor), dev) == kCuSuccess &&
            major == 9,
        14);
    char name[64];
    CHECK_OR_EXIT(api.deviceGetName(name, sizeof(name), dev) == kCuSuccess && strstr(name, "fake") != nullptr, 15);
  });
}

TEST(CuApi, ErrorsNameTheCallAndTheDriversError) {
  BRAID_IN_CHILD({
    const CuApi& api = loadFake();
    CUdeviceptr p = 0;
    // No current context on this thread: the driver refuses, and the Status says who and why.
    const Status st = api.check(api.memAlloc(&p, 1024), "cuMemAlloc");
    CHECK_OR_EXIT(st.code() == Code::kCudaError, 10);
    fprintf(stderr, "%s\n", st.message().c_str());
    CHECK_OR_EXIT(st.message() == "cuMemAlloc: CUDA_ERROR_INVALID_CONTEXT (201): invalid device context", 11);
    CUdevice dev = 0;
    const Status bad = api.check(api.deviceGet(&dev, 7), "cuDeviceGet(7)");
    CHECK_OR_EXIT(bad.message().find("cuDeviceGet(7): CUDA_ERROR_INVALID_DEVICE (101)") == 0, 12);
  });
}

TEST(CuApi, AMissingOrUnusableDriverIsANamedError) {
  BRAID_IN_CHILD({
    setenv("BRAID_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
    Result<const CuApi*> api = cuApi();
    CHECK_OR_EXIT(!api.isOk(), 10);
    fprintf(stderr, "%s\n", api.status().message().c_str());
    CHECK_OR_EXIT(
        api.status().message().find("no usable CUDA driver (BRAID_CUDA_DRIVER=/nonexistent/libcuda.so.1)") == 0, 11);
  });
  BRAID_IN_CHILD({
    setenv("BRAID_CUDA_DRIVER", BRAID_FAKE_CUDA_DRIVER, 1);
    setenv("BRAID_FAKE_CUDA_DEVICES", "0", 1);
    Result<const CuApi*> api = cuApi();
    CHECK_OR_EXIT(!api.isOk(), 10);
    fprintf(stderr, "%s\n", api.status().message().c_str());
    CHECK_OR_EXIT(api.status().message().find("cuInit: CUDA_ERROR_NO_DEVICE (100)") != std::string::npos, 11);
  });
}

TEST(FakeCuda, TheCurrentContextIsPerThread) {
  BRAID_IN_CHILD({
    const CuApi& api = loadFake();
    CUcontext ctx = nullptr;
    CHECK_OR_EXIT(api.devicePrimaryCtxRetain(&ctx, 1) == kCuSuccess && ctx != nullptr, 10);
    CHECK_OR_EXIT(api.ctxSetCurrent(ctx) == kCuSuccess, 11);
    CUdevice dev = -1;
    CHECK_OR_EXIT(api.ctxGetDevice(&dev) == kCuSuccess && dev == 1, 12);
    CUresult other = kCuSuccess;
    std::thread([&] {
      CUdeviceptr p = 0;
      other = api.memAlloc(&p, 64);  // this thread never set a context
    }).join();
    CHECK_OR_EXIT(other == kCuErrorInvalidContext, 13);
    CHECK_OR_EXIT(api.devicePrimaryCtxRelease(1) == kCuSuccess, 14);
    CHECK_OR_EXIT(api.devicePrimaryCtxRelease(1) == kCuErrorInvalidContext, 15);  // once more than retained
  });
}

TEST(FakeCuda, AddressesComeBackAfterFreeButBufferIdsNeverDo) {
  BRAID_IN_CHILD({
    const CuApi& api = loadFake();
    CUcontext ctx = nullptr;
    CHECK_OR_EXIT(api.devicePrimaryCtxRetain(&ctx, 0) == kCuSuccess && api.ctxSetCurrent(ctx) == kCuSuccess, 10);
    CUdeviceptr a = 0, b = 0;
    CHECK_OR_EXIT(api.memAlloc(&a, 4096) == kCuSuccess, 11);
    memset(reinterpret_cast<void*>(a), 0x11, 4096);
    unsigned long long idA = 0, idB = 0;
    CHECK_OR_EXIT(api.pointerGetAttribute(&idA, static_cast<int>(CuPointerAttr::kBufferId), a + 100) == kCuSuccess, 12);
    CUdeviceptr start = 0;
    size_t size = 0;
    CHECK_OR_EXIT(
        api.pointerGetAttribute(&start, static_cast<int>(CuPointerAttr::kRangeStart), a + 100) == kCuSuccess &&
            start == a,
        13);
    CHECK_OR_EXIT(
        api.pointerGetAttribute(&size, static_cast<int>(CuPointerAttr::kRangeSize), a) == kCuSuccess && size == 4096,
        14);
    unsigned type = 0;
    CHECK_OR_EXIT(api.pointerGetAttribute(&type, static_cast<int>(CuPointerAttr::kMemoryType), a) == kCuSuccess &&
                      type == kCuMemoryTypeDevice,
                  15);
    CHECK_OR_EXIT(api.memFree(a) == kCuSuccess, 16);
    CHECK_OR_EXIT(api.memFree(a) == kCuErrorInvalidValue, 17);  // twice
    CHECK_OR_EXIT(api.pointerGetAttribute(&idB, static_cast<int>(CuPointerAttr::kBufferId), a) == kCuErrorInvalidValue,
                  18);  // freed memory is not the driver's any more
    CHECK_OR_EXIT(api.memAlloc(&b, 4096) == kCuSuccess, 19);
    CHECK_OR_EXIT(b == a, 20);  // the address comes back...
    CHECK_OR_EXIT(
        api.pointerGetAttribute(&idB, static_cast<int>(CuPointerAttr::kBufferId), b) == kCuSuccess && idB != idA,
        21);                                                            // ...as another buffer
    CHECK_OR_EXIT(reinterpret_cast<unsigned char*>(b)[0] == 0xDB, 22);  // poisoned, not the old contents
    int hostVar = 0;
    CHECK_OR_EXIT(api.pointerGetAttribute(&type, static_cast<int>(CuPointerAttr::kMemoryType),
                                          reinterpret_cast<CUdeviceptr>(&hostVar)) == kCuErrorInvalidValue,
                  23);
  });
}

// Regression: allocations that start inside a page (cuMemAlloc aligns to 256 bytes) failed with
// CUDA_ERROR_OUT_OF_MEMORY once the fake made pages usable by unaligned ranges.
TEST(FakeCuda, ManySmallAllocationsAreUsable) {
  BRAID_IN_CHILD({
    const CuApi& api = loadFake();
    CUcontext ctx = nullptr;
    CHECK_OR_EXIT(api.devicePrimaryCtxRetain(&ctx, 0) == kCuSuccess && api.ctxSetCurrent(ctx) == kCuSuccess, 10);
    for (int i = 0; i < 100; ++i) {
      CUdeviceptr p = 0;
      CHECK_OR_EXIT(api.memAlloc(&p, 300) == kCuSuccess, 11);
      memset(reinterpret_cast<void*>(p), i, 300);
    }
  });
}

TEST(FakeCuda, AChildForkedAfterInitCannotUseCuda) {
  BRAID_IN_CHILD({
    const CuApi& api = loadFake();  // cuInit ran in this process
    const pid_t child = fork();
    if (child == 0) {
      int n = -1;
      _exit(api.deviceGetCount(&n) == kCuErrorNotInitialized && api.init(0) == kCuErrorNotInitialized ? 0 : 1);
    }
    int status = -1;
    CHECK_OR_EXIT(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0, 10);
    int n = 0;
    CHECK_OR_EXIT(api.deviceGetCount(&n) == kCuSuccess && n == 2, 11);  // the parent still can
  });
}

TEST(FakeCuda, InjectedFailuresReachTheCaller) {
  BRAID_IN_CHILD({
    const CuApi& api = loadFake("2", "cuMemAlloc#2=2");
    CUcontext ctx = nullptr;
    CHECK_OR_EXIT(api.devicePrimaryCtxRetain(&ctx, 0) == kCuSuccess && api.ctxSetCurrent(ctx) == kCuSuccess, 10);
    CUdeviceptr p = 0;
    CHECK_OR_EXIT(api.memAlloc(&p, 64) == kCuSuccess, 11);
    const Status st = api.check(api.memAlloc(&p, 64), "cuMemAlloc");
    CHECK_OR_EXIT(st.message().find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos, 12);
    CHECK_OR_EXIT(api.memAlloc(&p, 64) == kCuSuccess, 13);  // only the second call
  });
}

}  // namespace
}  // namespace braid
