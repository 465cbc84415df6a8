// Peer access and virtual memory management of the strict fake CUDA driver (tests/fake_cuda/fake_vmm.cc), through
// braid's driver table: the rules the p2p transport relies on, as the driver defines them. Each case runs in a
// child process (the table loads once per process).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "src/backends/cuda/cu_api.h"
#include "src/common/fd_share.h"
#include "tests/unit/fake_cuda_util.h"

namespace braid {
namespace {

constexpr size_t kTwoMiB = size_t{2} << 20;

CUmemGenericAllocationHandle create(const CuApi& api, int device, size_t bytes, bool exportable) {
  CuMemAllocationProp prop;
  prop.location.id = device;
  prop.requestedHandleTypes = exportable ? kCuMemHandleTypePosixFd : 0;
  CUmemGenericAllocationHandle h = 0;
  CHECK_OR_EXIT(api.memCreate(&h, bytes, &prop, 0) == kCuSuccess, 10);
  return h;
}

// Reserves and maps `h`, with read-write access for `device`.
CUdeviceptr mapFor(const CuApi& api, CUmemGenericAllocationHandle h, size_t bytes, int device) {
  CUdeviceptr p = 0;
  CHECK_OR_EXIT(api.memAddressReserve(&p, bytes, 0, 0, 0) == kCuSuccess, 11);
  CHECK_OR_EXIT(api.memMap(p, bytes, 0, h, 0) == kCuSuccess, 12);
  CuMemAccessDesc a;
  a.location.id = device;
  CHECK_OR_EXIT(api.memSetAccess(p, bytes, &a, 1) == kCuSuccess, 13);
  return p;
}

TEST(FakeCudaVmm, MappingFollowsTheDriversRules) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    CuMemAllocationProp prop;
    size_t gran = 0;
    CHECK_OR_EXIT(api.memGetAllocationGranularity(&gran, &prop, kCuMemAllocGranularityRecommended) == kCuSuccess, 1);
    CHECK_OR_EXIT(gran == kTwoMiB, 2);
    CUmemGenericAllocationHandle h = 0;
    CHECK_OR_EXIT(api.memCreate(&h, gran + 1, &prop, 0) == kCuErrorInvalidValue, 3);  // not a granule multiple
    h = create(api, 0, gran, false);
    int fd = -1;
    CHECK_OR_EXIT(api.memExportToShareableHandle(&fd, h, kCuMemHandleTypePosixFd, 0) == kCuErrorNotPermitted, 4);
    CUdeviceptr p = 0;
    CHECK_OR_EXIT(api.memAddressReserve(&p, gran, 0, 0, 0) == kCuSuccess, 5);
    CHECK_OR_EXIT(api.memMap(p, gran, 0, h, 0) == kCuSuccess, 6);
    CHECK_OR_EXIT(api.memRelease(h) == kCuSuccess, 7);                      // the mapping keeps the memory
    CHECK_OR_EXIT(api.memFree(p) == kCuErrorInvalidValue, 8);               // a mapping is not cuMemAlloc's
    CHECK_OR_EXIT(api.memAddressFree(p, gran) == kCuErrorInvalidValue, 9);  // still mapped
    CuMemAccessDesc a;
    a.location.id = 0;
    CHECK_OR_EXIT(api.memSetAccess(p, gran, &a, 1) == kCuSuccess, 14);
    unsigned char first = 0;
    memcpy(&first, reinterpret_cast<void*>(p), 1);
    CHECK_OR_EXIT(first == 0xDB, 15);  // new physical memory is not cleared
    CHECK_OR_EXIT(api.memUnmap(p, gran) == kCuSuccess, 16);
    CHECK_OR_EXIT(api.memAddressFree(p, gran) == kCuSuccess, 17);
  });
}

TEST(FakeCudaVmm, PeerAccessIsExplicit) {
  BRAID_IN_CHILD({
    const CuApi& api = fakeOn(0);
    int can = -1;
    CHECK_OR_EXIT(api.deviceCanAccessPeer(&can, 0, 1) == kCuSuccess && can == 1, 1);
    CHECK_OR_EXIT(api.deviceCanAccessPeer(&can, 0, 0) == kCuSuccess && can == 0, 2);
    CUcontext peer = nullptr;
    CHECK_OR_EXIT(api.devicePrimaryCtxRetain(&peer, 1) == kCuSuccess, 3);
    CHECK_OR_EXIT(api.ctxEnablePeerAccess(peer, 0) == kCuSuccess, 4);
    CHECK_OR_EXIT(api.ctxEnablePeerAccess(peer, 0) == kCuErrorPeerAccessAlreadyEnabled, 5);
  });
  BRAID_IN_CHILD({
    setenv("BRAID_FAKE_CUDA_NO_P2P", "1", 1);
    const CuApi& api = fakeOn(0);
    int can = -1;
    CHECK_OR_EXIT(api.deviceCanAccessPeer(&can, 0, 1) == kCuSuccess && can == 0, 1);
    CUcontext peer = nullptr;
    CHECK_OR_EXIT(api.devicePrimaryCtxRetain(&peer, 1) == kCuSuccess, 2);
    CHECK_OR_EXIT(api.ctxEnablePeerAccess(peer, 0) == kCuErrorPeerAccessUnsupported, 3);
  });
}

// An exported handle, passed to another process (src/common/fd_share.h) and imported there, is the same memory.
TEST(FakeCudaVmm, AnExportedHandleMapsTheSamePagesInAnotherProcess) {
  BRAID_IN_CHILD({
    int toChild[2], toParent[2];
    CHECK_OR_EXIT(pipe(toChild) == 0 && pipe(toParent) == 0, 1);
    const pid_t pid = fork();  // before any CUDA call: CUDA does not survive fork
    if (pid == 0) {
      const CuApi& api = fakeOn(1);
      FdTicket t;
      CHECK_OR_EXIT(read(toChild[0], &t, sizeof(t)) == sizeof(t), 30);
      Result<int> fd = fetchFd(t, 10);
      CHECK_OR_EXIT(fd.isOk(), 31);
      CUmemGenericAllocationHandle h = 0;
      CHECK_OR_EXIT(api.memImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<intptr_t>(fd.value())),
                                                     kCuMemHandleTypePosixFd) == kCuSuccess,
                    32);
      close(fd.value());
      const CUdeviceptr p = mapFor(api, h, kTwoMiB, 1);
      CHECK_OR_EXIT(memcmp(reinterpret_cast<void*>(p), "from the owner", 15) == 0, 33);
      memcpy(reinterpret_cast<void*>(p + 100), "from the peer", 14);
      const char done = 1;
      CHECK_OR_EXIT(write(toParent[1], &done, 1) == 1, 34);
      _exit(0);
    }
    const CuApi& api = fakeOn(0);
    const CUmemGenericAllocationHandle h = create(api, 0, kTwoMiB, true);
    int fd = -1;
    CHECK_OR_EXIT(api.memExportToShareableHandle(&fd, h, kCuMemHandleTypePosixFd, 0) == kCuSuccess, 2);
    const CUdeviceptr p = mapFor(api, h, kTwoMiB, 0);
    memcpy(reinterpret_cast<void*>(p), "from the owner", 15);
    Result<FdTicket> t = offerFd(fd);
    CHECK_OR_EXIT(t.isOk(), 3);
    close(fd);
    CHECK_OR_EXIT(write(toChild[1], &t.value(), sizeof(FdTicket)) == sizeof(FdTicket), 4);
    char done = 0;
    CHECK_OR_EXIT(read(toParent[0], &done, 1) == 1, 5);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_OR_EXIT(WIFEXITED(status) && WEXITSTATUS(status) == 0, 6);
    CHECK_OR_EXIT(memcmp(reinterpret_cast<void*>(p + 100), "from the peer", 14) == 0, 7);
  });
}

}  // namespace
}  // namespace braid
