// The differential probe that keeps the fake CUDA driver honest (DESIGN-CUDA.md 2.4): it makes the driver calls
// braid makes, in the sequences braid makes them, and prints each result by name, one line each. CI runs it against
// the fake (ctest cuda_api_probe_fake, which compares with tests/fixtures/cuda_probe/expected.txt); tests/gpu/run.sh
// runs it against the real driver and diffs with the same file, so a line that differs says the fake (or braid's
// belief about the driver) is wrong. Lines starting with "~" are where the driver documents a choice ("may"): the
// fake answers strictly and the real driver may not, so the GPU diff leaves them out.
//
//   cuda_api_probe          (the driver from BRAID_CUDA_DRIVER, default libcuda.so.1)
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "src/backends/cuda/cu_api.h"

namespace {

using namespace braid;

const CuApi* gApi = nullptr;

std::string name(CUresult r) {
  const char* n = nullptr;
  if (gApi->getErrorName(r, &n) != kCuSuccess || n == nullptr) return "CUresult " + std::to_string(r);
  return n;
}

void line(const char* label, CUresult r, const std::string& extra = "") {
  printf("%s: %s%s\n", label, name(r).c_str(), extra.c_str());
}

}  // namespace

int main() {
  Result<const CuApi*> api = cuApi();
  if (!api.isOk()) {
    fprintf(stderr, "cuda_api_probe: %s\n", api.status().message().c_str());
    return 2;
  }
  gApi = api.value();
  const CuApi& cu = *gApi;
  int count = 0;
  // (Each call is made before its line is printed: function arguments have no order.)
  CUresult r = cu.deviceGetCount(&count);
  line("cuDeviceGetCount", r, count > 0 ? " (at least 1)" : " (none)");
  CUdevice dev = -1;
  line("cuDeviceGet(count)", cu.deviceGet(&dev, count));
  line("cuDeviceGet(-1)", cu.deviceGet(&dev, -1));

  // A thread that never chose a context.
  CUcontext none = reinterpret_cast<CUcontext>(1);
  CUdeviceptr p = 0;
  std::thread([&] { r = cu.ctxGetCurrent(&none); }).join();
  line("cuCtxGetCurrent on a new thread", r, none == nullptr ? " (null)" : " (not null)");
  std::thread([&] { r = cu.memAlloc(&p, 4096); }).join();
  line("cuMemAlloc without a context", r);

  CUcontext ctx = nullptr;
  line("cuDevicePrimaryCtxRetain(0)", cu.devicePrimaryCtxRetain(&ctx, 0));
  line("cuCtxSetCurrent(primary)", cu.ctxSetCurrent(ctx));
  line("cuMemAlloc(0 bytes)", cu.memAlloc(&p, 0));
  CUdeviceptr a = 0;
  line("cuMemAlloc(4096)", cu.memAlloc(&a, 4096));
  unsigned type = 0;
  r = cu.pointerGetAttribute(&type, 2, a);
  line("cuPointerGetAttribute(MEMORY_TYPE, device)", r, type == kCuMemoryTypeDevice ? " (device)" : " (not device)");
  CUdeviceptr start = 0;
  r = cu.pointerGetAttribute(&start, 11, a + 100);
  line("cuPointerGetAttribute(RANGE_START_ADDR, inside)", r, start == a ? " (the allocation's start)" : " (elsewhere)");
  size_t size = 0;
  r = cu.pointerGetAttribute(&size, 12, a);
  line("cuPointerGetAttribute(RANGE_SIZE)", r, " (" + std::to_string(size) + ")");
  unsigned long long idA = 0, idB = 1;
  line("cuPointerGetAttribute(BUFFER_ID)", cu.pointerGetAttribute(&idA, 7, a));
  int host = 0;
  line("cuPointerGetAttribute(MEMORY_TYPE, pageable host memory)",
       cu.pointerGetAttribute(&type, 2, reinterpret_cast<CUdeviceptr>(&host)));
  line("cuMemFree", cu.memFree(a));
  line("cuMemFree again", cu.memFree(a));
  CUdeviceptr b = 0;
  line("cuMemAlloc(4096) again", cu.memAlloc(&b, 4096));
  r = cu.pointerGetAttribute(&idB, 7, b);
  line("cuPointerGetAttribute(BUFFER_ID) of the new buffer", r,
       idB != idA ? " (a new id)" : " (the freed buffer's id)");

  CUstream s = nullptr;
  line("cuStreamCreate(flags 2)", cu.streamCreate(&s, 2));
  line("cuStreamCreate(NON_BLOCKING)", cu.streamCreate(&s, kCuStreamNonBlocking));
  CUevent ev = nullptr;
  line("cuEventCreate(DISABLE_TIMING)", cu.eventCreate(&ev, kCuEventDisableTiming));
  line("cuEventQuery(never recorded)", cu.eventQuery(ev));
  CUevent refused = nullptr;
  line("cuEventCreate(INTERPROCESS without DISABLE_TIMING)", cu.eventCreate(&refused, 0x4));
  line("cuStreamWaitEvent(flags 2)", cu.streamWaitEvent(s, ev, 2));
  line("cuMemsetD8Async(device, whole buffer)", cu.memsetD8Async(b, 1, 4096, s));
  line("cuMemsetD8Async(pageable host memory)", cu.memsetD8Async(reinterpret_cast<CUdeviceptr>(&host), 0, 4, s));
  static CUresult inside = -1;
  line("cuLaunchHostFunc", cu.launchHostFunc(
                               s,
                               [](void*) {
                                 CUdeviceptr q = 0;
                                 inside = gApi->memAlloc(&q, 64);
                               },
                               nullptr));
  line("cuStreamSynchronize", cu.streamSynchronize(s));
  printf("~cuMemAlloc inside a host function: %s\n", name(inside).c_str());
  line("cuStreamDestroy", cu.streamDestroy(s));
  line("cuMemFree(after stream work)", cu.memFree(b));
  line("cuDevicePrimaryCtxRelease(0)", cu.devicePrimaryCtxRelease(0));
  // CUDA does not survive fork: a child of a process that initialised it.
  fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    int n = -1;
    line("cuDeviceGetCount in a child forked after cuInit", cu.deviceGetCount(&n));
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return 0;
}
