// braid's kernels through the driver table on the strict fake driver (src/backends/cuda/kernel_image.h): the fake
// refuses the fatbin and loads the emulator's image, cuLaunchKernel runs the kernels over the CTA emulator on the
// stream's thread, ranks that are threads each launch on their own device and stream, and the results are the CPU
// backend's bit for bit. Also what goes wrong: a kernel that fails leaves the sticky CUDA_ERROR_LAUNCH_FAILED,
// bad launch shapes are named, pinned memory follows the driver's rules. Each case runs in a child process (the
// driver table loads once per process).
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "src/backends/cuda/kernel_image.h"
#include "tests/common/elem_compare.h"
#include "tests/emu/ring_job.h"
#include "tests/unit/fake_cuda_util.h"

namespace braid {
namespace {

using emu_test::JobShape;
using emu_test::RingJob;

TEST(CudaKernels, TheFakeLoadsTheEmulatorImageAndRefusesTheFatbin) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    Result<const KernelLibrary*> lib = kernelLibrary(api);
    CHECK_OR_EXIT(lib.isOk(), 10);
    CHECK_OR_EXIT(lib.value()->source == "the CTA emulator's host image", 11);
    for (CUkernel k : lib.value()->kernels) CHECK_OR_EXIT(k != nullptr, 12);
    size_t bytes = 0;
    if (const void* fatbin = kernelFatbin(&bytes)) {
      CHECK_OR_EXIT(bytes > 1000, 13);
      CUlibrary l = nullptr;
      CHECK_OR_EXIT(api.libraryLoadData(&l, fatbin, nullptr, nullptr, 0, nullptr, nullptr, 0) == kCuErrorNoBinaryForGpu,
                    14);
    }
  });
}

// Two ranks as threads, each on its own fake device and non-blocking stream: the kernels run on the emulator, the
// host thread returns at once, and the stream's synchronisation sees the finished result.
TEST(CudaKernels, RingAllReduceThroughTheDriverMatchesTheHost) {
  BRAID_IN_CHILD({
    const CuApi& api = loadFake("2");
    for (ProtoId p : {ProtoId::kSimple, ProtoId::kLL, ProtoId::kLL128}) {
      JobShape s;
      s.nranks = 2;
      s.nchannels = 2;
      s.count = 3001;
      s.proto = p;
      s.chunkBytes = 1920;
      RingJob host(s, 5);
      host.runHost();
      RingJob job(s, 5);
      Status st[2];
      std::thread ranks[2];
      for (int r = 0; r < 2; ++r) {
        ranks[r] = std::thread([&, r] {
          CUcontext ctx = nullptr;
          CUstream stream = nullptr;
          st[r] = api.check(api.devicePrimaryCtxRetain(&ctx, r), "retain");
          if (st[r].isOk()) st[r] = api.check(api.ctxSetCurrent(ctx), "set");
          if (st[r].isOk()) st[r] = api.check(api.streamCreate(&stream, kCuStreamNonBlocking), "stream");
          if (st[r].isOk()) st[r] = launchKernel(api, p, job.rank(r).args, 32, stream);
          if (st[r].isOk()) st[r] = api.check(api.streamSynchronize(stream), "cuStreamSynchronize");
          if (stream != nullptr) (void)api.streamDestroy(stream);
        });
      }
      for (auto& t : ranks) t.join();
      for (int r = 0; r < 2; ++r) {
        if (!st[r].isOk()) fprintf(stderr, "rank %d: %s\n", r, st[r].message().c_str());
        CHECK_OR_EXIT(st[r].isOk(), 10);
        CHECK_OR_EXIT(job.rank(r).status.code == static_cast<uint32_t>(DevStatusCode::kRunning), 11);
        CHECK_OR_EXIT(testing_elem::firstDifference(s.dtype, job.rank(r).out, host.rank(r).out, s.count) == s.count,
                      12);
      }
    }
  });
}

TEST(CudaKernels, AFailedKernelLeavesTheStickyLaunchFailure) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    JobShape s;
    s.nranks = 1;
    s.count = 100;
    RingJob job(s);
    Result<const KernelLibrary*> lib = kernelLibrary(api);
    CHECK_OR_EXIT(lib.isOk(), 10);
    CUfunction fn = nullptr;
    CHECK_OR_EXIT(api.kernelGetFunction(&fn, lib.value()->kernels[static_cast<int>(ProtoId::kSimple)]) == kCuSuccess,
                  11);
    // Two CTAs for one channel: the emulator refuses the launch, as a kernel that trapped would fail on a GPU.
    KernelArgs args = job.rank(0).args;
    void* params[] = {&args};
    CHECK_OR_EXIT(api.launchKernel(fn, 2, 1, 1, 4, 1, 1, 0, nullptr, params, nullptr) == kCuSuccess, 12);
    const Status sync = api.check(api.streamSynchronize(nullptr), "cuStreamSynchronize");
    fprintf(stderr, "%s\n", sync.message().c_str());
    CHECK_OR_EXIT(sync.message().find("CUDA_ERROR_LAUNCH_FAILED") != std::string::npos, 13);
    CUdeviceptr p = 0;
    CHECK_OR_EXIT(api.memAlloc(&p, 64) == kCuErrorLaunchFailed, 14);  // sticky: the context is unusable
  });
}

TEST(CudaKernels, BadLaunchesAreNamed) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    JobShape s;
    s.nranks = 1;
    RingJob job(s);
    const Status many = launchKernel(api, ProtoId::kSimple, job.rank(0).args, 1024, nullptr);
    CHECK_OR_EXIT(many.code() == Code::kInvalidArgument, 10);
    CHECK_OR_EXIT(many.message().find("1024 threads per CTA: must be 1..512") != std::string::npos, 11);
    KernelArgs none = job.rank(0).args;
    none.nchannels = 0;
    CHECK_OR_EXIT(launchKernel(api, ProtoId::kSimple, none, 32, nullptr).code() == Code::kInvalidArgument, 12);
    // A launch from a thread without a context: the driver's error, named with the kernel.
    Status noCtx;
    std::thread([&] { noCtx = launchKernel(api, ProtoId::kLL, job.rank(0).args, 32, nullptr); }).join();
    fprintf(stderr, "%s\n", noCtx.message().c_str());
    CHECK_OR_EXIT(noCtx.code() == Code::kCudaError, 13);
    CHECK_OR_EXIT(noCtx.message().find("CUDA_ERROR_INVALID_CONTEXT") != std::string::npos, 14);
  });
}

TEST(CudaKernels, PinnedMemoryFollowsTheDriversRules) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(1);
    void* p = nullptr;
    CHECK_OR_EXIT(api.memHostAlloc(&p, 1000, kCuMemHostAllocDeviceMap) == kCuSuccess, 10);
    CUdeviceptr d = 0;
    CHECK_OR_EXIT(api.memHostGetDevicePointer(&d, static_cast<char*>(p) + 10, 0) == kCuSuccess, 11);
    CHECK_OR_EXIT(d == reinterpret_cast<CUdeviceptr>(p) + 10, 12);
    unsigned type = 0;
    CHECK_OR_EXIT(api.pointerGetAttribute(&type, static_cast<int>(CuPointerAttr::kMemoryType),
                                          reinterpret_cast<CUdeviceptr>(p)) == kCuSuccess &&
                      type == kCuMemoryTypeHost,
                  13);
    int ordinal = -1;
    CHECK_OR_EXIT(api.pointerGetAttribute(&ordinal, static_cast<int>(CuPointerAttr::kDeviceOrdinal),
                                          reinterpret_cast<CUdeviceptr>(p)) == kCuSuccess &&
                      ordinal == 1,
                  14);
    memset(p, 7, 1000);  // host memory: the host writes it directly
    CHECK_OR_EXIT(api.memFree(reinterpret_cast<CUdeviceptr>(p)) == kCuErrorInvalidValue, 16);
    CHECK_OR_EXIT(api.memFreeHost(static_cast<char*>(p) + 1) == kCuErrorInvalidValue, 17);
    CHECK_OR_EXIT(api.memFreeHost(p) == kCuSuccess, 18);
    CHECK_OR_EXIT(api.memHostGetDevicePointer(&d, p, 0) == kCuErrorInvalidValue, 19);
  });
}

}  // namespace
}  // namespace braid
