// Multicast objects of the strict fake CUDA driver (tests/fake_cuda/fake_multicast.cc), through braid's driver
// table: the order the driver imposes (every device added before any bind or map), granularity, what binds, the
// slot limit, and what a mapping is (closed to plain access; resolved for multimem through the emulator's hook).
// Each case runs in a child process (the table loads once per process).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/backends/cuda/cu_api.h"
#include "src/backends/cuda/device_memory.h"
#include "tests/unit/fake_cuda_util.h"

namespace braid {
namespace {

constexpr size_t kTwoMiB = size_t{2} << 20;

// cuMem memory of `bytes` on `device`, mapped with access for it.
CUdeviceptr physOn(const CuApi& api, int device, size_t bytes) {
  CuMemAllocationProp prop;
  prop.location.id = device;
  CUmemGenericAllocationHandle h = 0;
  CHECK_OR_EXIT(api.memCreate(&h, bytes, &prop, 0) == kCuSuccess, 50);
  Result<CUdeviceptr> p = mapAndGrant(&api, h, bytes, {device});
  CHECK_OR_EXIT(p.isOk(), 51);
  return p.value();
}

TEST(FakeCudaMulticast, TheDriversOrderAndRules) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    CHECK_OR_EXIT(api.hasMulticast(), 1);  // asked for at CUDA 12.1
    int attr = 0;
    CHECK_OR_EXIT(api.deviceGetAttribute(&attr, static_cast<int>(CuDeviceAttr::kMulticast), 0) == kCuSuccess, 2);
    CHECK_OR_EXIT(attr == 1, 3);
    CuMulticastObjectProp prop;
    prop.numDevices = 2;
    size_t gran = 0;
    CHECK_OR_EXIT(api.multicastGetGranularity(&gran, &prop, kCuMulticastGranularityMinimum) == kCuSuccess, 4);
    CHECK_OR_EXIT(gran == kTwoMiB, 5);
    CUmemGenericAllocationHandle mc = 0;
    prop.size = gran + 1;
    CHECK_OR_EXIT(api.multicastCreate(&mc, &prop) == kCuErrorInvalidValue, 6);  // not a granule multiple
    prop.size = gran;
    CHECK_OR_EXIT(api.multicastCreate(&mc, &prop) == kCuSuccess, 7);
    const CUdeviceptr a = physOn(api, 0, gran), b = physOn(api, 1, gran);
    CHECK_OR_EXIT(api.multicastAddDevice(mc, 0) == kCuSuccess, 8);
    CHECK_OR_EXIT(api.multicastAddDevice(mc, 0) == kCuErrorInvalidValue, 9);  // once per device
    // Device 1 not added yet: the driver would block; the fake refuses, so a missing barrier shows.
    CHECK_OR_EXIT(api.multicastBindAddr(mc, 0, a, gran, 0) == kCuErrorNotPermitted, 10);
    CHECK_OR_EXIT(api.multicastAddDevice(mc, 1) == kCuSuccess, 11);
    CHECK_OR_EXIT(api.multicastBindAddr(mc, 0, a + 256, gran, 0) == kCuErrorInvalidValue, 12);  // misaligned
    CHECK_OR_EXIT(api.multicastBindAddr(mc, 0, a, gran, 0) == kCuSuccess, 13);
    CHECK_OR_EXIT(api.multicastBindAddr(mc, 0, a, gran, 0) == kCuErrorInvalidValue, 14);  // device 0 bound there
    CHECK_OR_EXIT(api.multicastBindAddr(mc, 0, b, gran, 0) == kCuSuccess, 15);
    CHECK_OR_EXIT(unmapAndFree(&api, a, gran).code() == Code::kCudaError, 16);  // still bound: unbind first
    Result<CUdeviceptr> m = mapAndGrant(&api, mc, gran, {0, 1}, true);
    CHECK_OR_EXIT(m.isOk(), 17);
    int fd = -1;
    CHECK_OR_EXIT(api.memExportToShareableHandle(&fd, mc, kCuMemHandleTypePosixFd, 0) == 801, 18);  // one process
    CHECK_OR_EXIT(unmapAndFree(&api, m.value(), gran).isOk(), 19);
    CHECK_OR_EXIT(api.multicastUnbind(mc, 0, 0, gran) == kCuSuccess, 20);
    CHECK_OR_EXIT(api.multicastUnbind(mc, 0, 0, gran) == kCuErrorInvalidValue, 21);
    CHECK_OR_EXIT(api.multicastUnbind(mc, 1, 0, gran) == kCuSuccess, 22);
    CHECK_OR_EXIT(api.memRelease(mc) == kCuSuccess, 23);
    CHECK_OR_EXIT(unmapAndFree(&api, a, gran).isOk(), 24);
    CHECK_OR_EXIT(unmapAndFree(&api, b, gran).isOk(), 25);
  });
}

// An object made to be shared with other processes binds only memory that can be shared too (the driver's rule).
TEST(FakeCudaMulticast, AnExportableObjectBindsOnlyExportableMemory) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    CuMulticastObjectProp prop;
    prop.numDevices = 1;
    prop.size = kTwoMiB;
    prop.handleTypes = kCuMemHandleTypePosixFd;
    CUmemGenericAllocationHandle mc = 0;
    CHECK_OR_EXIT(api.multicastCreate(&mc, &prop) == kCuSuccess, 1);
    CHECK_OR_EXIT(api.multicastAddDevice(mc, 0) == kCuSuccess, 2);
    const CUdeviceptr plain = physOn(api, 0, kTwoMiB);
    CHECK_OR_EXIT(api.multicastBindAddr(mc, 0, plain, kTwoMiB, 0) == kCuErrorInvalidValue, 3);
    CuMemAllocationProp shareable;
    shareable.requestedHandleTypes = kCuMemHandleTypePosixFd;
    CUmemGenericAllocationHandle h = 0;
    CHECK_OR_EXIT(api.memCreate(&h, kTwoMiB, &shareable, 0) == kCuSuccess, 4);
    Result<CUdeviceptr> p = mapAndGrant(&api, h, kTwoMiB, {0});
    CHECK_OR_EXIT(p.isOk(), 5);
    CHECK_OR_EXIT(api.multicastBindAddr(mc, 0, p.value(), kTwoMiB, 0) == kCuSuccess, 6);
    CHECK_OR_EXIT(api.multicastUnbind(mc, 0, 0, kTwoMiB) == kCuSuccess, 7);
    CHECK_OR_EXIT(api.memRelease(mc) == kCuSuccess, 8);
  });
}

TEST(FakeCudaMulticast, SlotsRunOutAndNoMulticastSaysSo) {
  BRAID_IN_CHILD({
    setenv("BRAID_FAKE_CUDA_MC_SLOTS", "2", 1);
    const CuApi& api = fakeOn(0);
    CuMulticastObjectProp prop;
    prop.numDevices = 1;
    prop.size = kTwoMiB;
    CUmemGenericAllocationHandle h[3] = {};
    CHECK_OR_EXIT(api.multicastCreate(&h[0], &prop) == kCuSuccess, 1);
    CHECK_OR_EXIT(api.multicastCreate(&h[1], &prop) == kCuSuccess, 2);
    CHECK_OR_EXIT(api.multicastCreate(&h[2], &prop) == kCuErrorOutOfMemory, 3);
    CHECK_OR_EXIT(api.memRelease(h[0]) == kCuSuccess, 4);
    CHECK_OR_EXIT(api.multicastCreate(&h[2], &prop) == kCuSuccess, 5);
    setenv("BRAID_FAKE_CUDA_NO_MULTICAST", "1", 1);
    int attr = 1;
    CHECK_OR_EXIT(api.deviceGetAttribute(&attr, static_cast<int>(CuDeviceAttr::kMulticast), 0) == kCuSuccess, 6);
    CHECK_OR_EXIT(attr == 0, 7);
    CHECK_OR_EXIT(api.multicastCreate(&h[0], &prop) == 801, 8);  // CUDA_ERROR_NOT_SUPPORTED
  });
}

}  // namespace
}  // namespace braid
