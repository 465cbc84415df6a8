// braid's kernels through the driver table on the strict fake driver (src/backends/cuda/kernel_image.h): the fake
// refuses the fatbin and loads the emulator's image, and checks every address a kernel is given before running it
// over the CTA emulator (pageable memory, another device's, past an allocation: named). Also what goes wrong: a
// kernel that fails leaves the sticky CUDA_ERROR_LAUNCH_FAILED, bad launch shapes are named, pinned memory follows
// the driver's rules. Cases that load the driver run in a child process (the table loads once per process); the
// kernels' results through the driver are checked by the CUDA communicators' tests (tests/inproc/cuda_comm_test.cc).
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "src/backends/cuda/emu/emu_kernels.h"
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

// Work in the host's heap (as the CPU backend keeps it): the fake checks every address the kernel's parameter leads
// to before running it, and names what a GPU would fault on; the launch fails with the sticky
// CUDA_ERROR_LAUNCH_FAILED. (The CUDA backend puts its work in pinned memory: CudaComm.* in tests/inproc.)
TEST(CudaKernels, AKernelGivenPageableMemoryIsRefusedByName) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    JobShape s;
    s.nranks = 1;
    s.count = 100;
    RingJob job(s);
    CHECK_OR_EXIT(launchKernel(api, ProtoId::kSimple, job.rank(0).args, 32, nullptr).isOk(), 10);
    const Status sync = api.check(api.streamSynchronize(nullptr), "cuStreamSynchronize");
    CHECK_OR_EXIT(sync.message().find("CUDA_ERROR_LAUNCH_FAILED") != std::string::npos, 11);
  });
}

// The reach check itself, on the emulator's image: each kind of memory the fake tells apart.
TEST(CudaKernels, TheReachCheckNamesWhatAGpuFaultsOn) {
  JobShape s;
  s.nranks = 1;
  s.count = 100;
  RingJob job(s);
  const EmuImage* img = emuImage();
  char err[1024];
  // Everything pageable: the first thing checked (the channel table) is named.
  const EmuDriverHooks pageable = {[](const void*, size_t, int) { return static_cast<int>(kPageable); }, nullptr};
  ASSERT_NE(img->launch(0, 0, 4, 1, 4, &job.rank(0).args, &pageable, err, sizeof(err)), 0);
  EXPECT_NE(std::string(err).find("the channel table at"), std::string::npos) << err;
  EXPECT_NE(std::string(err).find("is pageable host memory"), std::string::npos) << err;
  // Only the input buffer on another device.
  static const void* input = nullptr;
  input = job.rank(0).args.channels[0].items[0].input;
  const EmuDriverHooks otherDevice = {
      [](const void* p, size_t, int) { return p == input ? static_cast<int>(kOtherDevice) : 0; }, nullptr};
  ASSERT_NE(img->launch(0, 0, 4, 1, 4, &job.rank(0).args, &otherDevice, err, sizeof(err)), 0);
  EXPECT_NE(std::string(err).find("channel 0 item 0's input buffer at"), std::string::npos) << err;
  EXPECT_NE(std::string(err).find("is memory of another device: a GPU would fault there"), std::string::npos) << err;
  // All reachable: the kernel runs (one rank: a local copy) and the status word stays clean.
  const EmuDriverHooks reachable = {[](const void*, size_t, int) { return 0; }, nullptr};
  ASSERT_STREQ(img->names[0], "braidKernelSimple");
  ASSERT_EQ(img->launch(0, 0, 4, 1, 4, &job.rank(0).args, &reachable, err, sizeof(err)), 0) << err;
  EXPECT_EQ(job.rank(0).status.code, static_cast<uint32_t>(DevStatusCode::kRunning));
}

// What a GPU needs aligned and a host forgives: a status word, FIFO slots that do not start on a 128-byte line, or
// slots that are not whole lines, are named before the kernel runs.
TEST(CudaKernels, MisalignedWordsAndSlotsAreNamed) {
  JobShape s;
  s.nranks = 2;
  s.count = 100;
  RingJob job(s);
  const EmuImage* img = emuImage();
  char err[1024];
  const EmuDriverHooks reachable = {[](const void*, size_t, int) { return 0; }, nullptr};
  KernelArgs args = job.rank(0).args;
  alignas(8) char statusBytes[sizeof(DevStatus) + 2];
  args.status = reinterpret_cast<DevStatus*>(statusBytes + 2);
  ASSERT_NE(img->launch(0, 0, 4, 1, 4, &args, &reachable, err, sizeof(err)), 0);
  EXPECT_NE(std::string(err).find("the status word at"), std::string::npos) << err;
  EXPECT_NE(std::string(err).find("is not 8-byte aligned: a GPU faults on it"), std::string::npos) << err;
  // A connector whose slots start 64 bytes into a line, then one whose Simple slot is not whole lines.
  ConnSlot& conn = const_cast<ConnSlot&>(job.rank(0).args.channels[0].conns[0]);
  const ConnSlot kept = conn;
  conn.view.slots += 64;
  ASSERT_NE(img->launch(0, 0, 4, 1, 4, &job.rank(0).args, &reachable, err, sizeof(err)), 0);
  EXPECT_NE(std::string(err).find("channel 0 connector 0's FIFO slots at"), std::string::npos) << err;
  EXPECT_NE(std::string(err).find("is not 128-byte aligned"), std::string::npos) << err;
  conn = kept;
  conn.view.slotBytes -= 8;
  ASSERT_NE(img->launch(0, 0, 4, 1, 4, &job.rank(0).args, &reachable, err, sizeof(err)), 0);
  EXPECT_NE(std::string(err).find("not whole 128-byte lines"), std::string::npos) << err;
  conn = kept;
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
