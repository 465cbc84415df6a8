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

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "src/backends/cuda/cu_api.h"
#include "src/backends/cuda/kernel_image.h"

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

  // Pinned, mapped host memory (where a kernel's status and abort words live).
  void* pinned = nullptr;
  line("cuMemHostAlloc(flags 8)", cu.memHostAlloc(&pinned, 4096, 8));
  line("cuMemHostAlloc(PORTABLE|DEVICEMAP)",
       cu.memHostAlloc(&pinned, 4096, kCuMemHostAllocPortable | kCuMemHostAllocDeviceMap));
  CUdeviceptr mapped = 0;
  r = cu.memHostGetDevicePointer(&mapped, pinned, 0);
  line("cuMemHostGetDevicePointer", r,
       mapped == reinterpret_cast<CUdeviceptr>(pinned) ? " (the host address)" : " (another address)");
  r = cu.pointerGetAttribute(&type, 2, reinterpret_cast<CUdeviceptr>(pinned));
  line("cuPointerGetAttribute(MEMORY_TYPE, pinned)", r, type == kCuMemoryTypeHost ? " (host)" : " (not host)");
  line("cuMemHostGetDevicePointer(pageable host memory)", cu.memHostGetDevicePointer(&mapped, &host, 0));

  // braid's kernels: the library loads (the fatbin on a GPU, the emulator's image on the fake), and a kernel with
  // one empty channel runs to its end and leaves the status word alone.
  static const unsigned char zeros[256] = {0};
  CUlibrary junk = nullptr;
  printf("~cuLibraryLoadData(zeros): %s\n",
         name(cu.libraryLoadData(&junk, zeros, nullptr, nullptr, 0, nullptr, nullptr, 0)).c_str());
  Result<const KernelLibrary*> kl = kernelLibrary(cu);
  printf("braid's kernels load: %s\n", kl.isOk() ? "ok" : kl.status().message().c_str());
  if (kl.isOk()) {
    CUkernel k = nullptr;
    line("cuLibraryGetKernel(unknown name)", cu.libraryGetKernel(&k, kl.value()->library, "braidKernelNope"));
    CUfunction fn = nullptr;
    line("cuKernelGetFunction(Simple)",
         cu.kernelGetFunction(&fn, kl.value()->kernels[static_cast<int>(ProtoId::kSimple)]));
    auto* ch = static_cast<ChannelWorkDesc*>(pinned);
    *ch = ChannelWorkDesc{};
    auto* st = reinterpret_cast<DevStatus*>(static_cast<char*>(pinned) + 1024);
    devStatusInit(st);
    KernelArgs args;
    args.channels = ch;
    args.nchannels = 1;
    args.status = st;
    args.timeoutNs = 10ull * 1000 * 1000 * 1000;
    void* params[] = {&args};
    CUstream ks = nullptr;
    r = cu.streamCreate(&ks, kCuStreamNonBlocking);
    CUcontext sctx = nullptr;
    r = cu.streamGetCtx(ks, &sctx);
    line("cuStreamGetCtx(created stream)", r, sctx == ctx ? " (the primary context)" : " (another context)");
    std::thread([&] { r = cu.streamGetCtx(nullptr, &sctx); }).join();
    line("cuStreamGetCtx(NULL) without a context", r);
    // Stream capture, as braid meets it (it refuses to be captured).
    int capture = -1;
    line("cuStreamBeginCapture(NULL stream)", cu.streamBeginCapture(nullptr, 2));
    line("cuStreamBeginCapture(created, relaxed)", cu.streamBeginCapture(ks, 2));
    r = cu.streamIsCapturing(ks, &capture);
    line("cuStreamIsCapturing(capturing)", r, " (" + std::to_string(capture) + ")");
    line("cuStreamSynchronize(capturing)", cu.streamSynchronize(ks));
    r = cu.streamIsCapturing(ks, &capture);
    line("cuStreamIsCapturing(after the synchronize)", r, " (" + std::to_string(capture) + ")");
    CUgraph graph = nullptr;
    line("cuStreamEndCapture(invalidated)", cu.streamEndCapture(ks, &graph));
    r = cu.streamIsCapturing(ks, &capture);
    line("cuStreamIsCapturing(ended)", r, " (" + std::to_string(capture) + ")");
    line("cuLaunchKernel(1025 threads)", cu.launchKernel(fn, 1, 1, 1, 1025, 1, 1, 0, ks, params, nullptr));
    line("cuLaunchKernel(empty channel, 64 threads)", cu.launchKernel(fn, 1, 1, 1, 64, 1, 1, 0, ks, params, nullptr));
    r = cu.streamSynchronize(ks);
    line("cuStreamSynchronize(after the kernel)", r,
         st->code == static_cast<uint32_t>(DevStatusCode::kRunning) && st->claimed == 0 ? " (status word untouched)"
                                                                                        : " (status word set)");
    line("cuStreamDestroy(kernel stream)", cu.streamDestroy(ks));
  }
  // cuMem, as the p2p transport's FIFOs and ncclMemAlloc use it.
  {
    CuMemAllocationProp prop;
    prop.location.id = 0;
    prop.requestedHandleTypes = kCuMemHandleTypePosixFd;
    size_t gran = 0;
    r = cu.memGetAllocationGranularity(&gran, &prop, kCuMemAllocGranularityRecommended);
    line("cuMemGetAllocationGranularity(recommended)", r,
         gran > 0 && (gran & (gran - 1)) == 0 ? " (a power of two)" : " (not a power of two)");
    CUmemGenericAllocationHandle h = 0;
    line("cuMemCreate(granularity + 1)", cu.memCreate(&h, gran + 1, &prop, 0));
    line("cuMemCreate(exportable)", cu.memCreate(&h, gran, &prop, 0));
    int fd = -1;
    r = cu.memExportToShareableHandle(&fd, h, kCuMemHandleTypePosixFd, 0);
    line("cuMemExportToShareableHandle(posix fd)", r, fd >= 0 ? " (a descriptor)" : " (none)");
    CUdeviceptr va = 0;
    line("cuMemAddressReserve", cu.memAddressReserve(&va, gran, 0, 0, 0));
    line("cuMemMap", cu.memMap(va, gran, 0, h, 0));
    line("cuMemRelease(mapped)", cu.memRelease(h));
    line("cuMemFree(a cuMem mapping)", cu.memFree(va));
    line("cuMemAddressFree(still mapped)", cu.memAddressFree(va, gran));
    CuMemAccessDesc access;
    access.location.id = 0;
    line("cuMemSetAccess(device 0)", cu.memSetAccess(va, gran, &access, 1));
    CUmemGenericAllocationHandle imported = 0;
    line("cuMemImportFromShareableHandle(own descriptor)",
         cu.memImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                         kCuMemHandleTypePosixFd));
    if (fd >= 0) close(fd);
    line("cuMemRelease(imported)", cu.memRelease(imported));
    line("cuMemUnmap", cu.memUnmap(va, gran));
    line("cuMemAddressFree", cu.memAddressFree(va, gran));
    int can = -1;
    r = cu.deviceCanAccessPeer(&can, 0, 0);
    line("cuDeviceCanAccessPeer(0, 0)", r, " (" + std::to_string(can) + ")");
  }
  // Multicast, as braid's NVLS setup (src/backends/cuda/cuda_multicast.cc) makes the calls, on one device: the
  // attribute (a machine choice: "~"), then, only where it says 1, the object's life with the rules the fake
  // enforces. Its lines start with "mc:" so that tests/gpu/run.sh can leave them out where the GPU has no multicast.
  // Binding before every device was added is not probed: the real driver blocks there (the fake refuses).
  {
    int supported = -1;
    r = cu.deviceGetAttribute(&supported, static_cast<int>(CuDeviceAttr::kMulticast), 0);
    printf("~multicast supported: %d\n", r == kCuSuccess ? supported : -1);
    printf("~multicast entry points: %s\n", cu.hasMulticast() ? "all" : "missing");
    if (supported == 1 && cu.hasMulticast()) {
      CuMulticastObjectProp mp;
      mp.numDevices = 1;
      size_t mgran = 0;
      r = cu.multicastGetGranularity(&mgran, &mp, kCuMulticastGranularityMinimum);
      line("mc: cuMulticastGetGranularity(minimum)", r,
           mgran > 0 && (mgran & (mgran - 1)) == 0 ? " (a power of two)" : " (not a power of two)");
      CUmemGenericAllocationHandle mc = 0;
      mp.size = mgran + 1;
      line("mc: cuMulticastCreate(granularity + 1)", cu.multicastCreate(&mc, &mp));
      mp.size = mgran;
      line("mc: cuMulticastCreate", cu.multicastCreate(&mc, &mp));
      line("mc: cuMulticastAddDevice(0)", cu.multicastAddDevice(mc, 0));
      printf("~mc: cuMulticastAddDevice(0) again: %s\n", name(cu.multicastAddDevice(mc, 0)).c_str());
      CuMemAllocationProp prop;
      prop.location.id = 0;
      CUmemGenericAllocationHandle h = 0;
      r = cu.memCreate(&h, mgran, &prop, 0);
      CUdeviceptr uc = 0;
      if (r == kCuSuccess) r = cu.memAddressReserve(&uc, mgran, mgran, 0, 0);
      if (r == kCuSuccess) r = cu.memMap(uc, mgran, 0, h, 0);
      CuMemAccessDesc access;
      access.location.id = 0;
      if (r == kCuSuccess) r = cu.memSetAccess(uc, mgran, &access, 1);
      line("mc: cuMem memory to bind", r);
      line("mc: cuMulticastBindAddr(misaligned)", cu.multicastBindAddr(mc, 0, uc + 256, mgran - 256, 0));
      line("mc: cuMulticastBindAddr", cu.multicastBindAddr(mc, 0, uc, mgran, 0));
      printf("~mc: cuMemUnmap(bound memory): %s\n", name(cu.memUnmap(uc, mgran)).c_str());
      CUdeviceptr mva = 0;
      line("mc: cuMemAddressReserve(multicast)", cu.memAddressReserve(&mva, mgran, mgran, 0, 0));
      line("mc: cuMemMap(multicast)", cu.memMap(mva, mgran, 0, mc, 0));
      line("mc: cuMemSetAccess(multicast, device 0)", cu.memSetAccess(mva, mgran, &access, 1));
      int fd = -1;
      printf("~mc: cuMemExportToShareableHandle(multicast, not exportable): %s\n",
             name(cu.memExportToShareableHandle(&fd, mc, kCuMemHandleTypePosixFd, 0)).c_str());
      if (fd >= 0) close(fd);
      line("mc: cuMemUnmap(multicast)", cu.memUnmap(mva, mgran));
      line("mc: cuMemAddressFree(multicast)", cu.memAddressFree(mva, mgran));
      line("mc: cuMulticastUnbind", cu.multicastUnbind(mc, 0, 0, mgran));
      line("mc: cuMulticastUnbind again", cu.multicastUnbind(mc, 0, 0, mgran));
      line("mc: cuMemRelease(multicast)", cu.memRelease(mc));
      (void)cu.memUnmap(uc, mgran);
      (void)cu.memAddressFree(uc, mgran);
      (void)cu.memRelease(h);
    }
  }
  // Capture, as braid's captured launches meet it: an allocation in a thread-local capture invalidates it; in
  // relaxed mode it is allowed; a user object retained by the graph is destroyed after the graph and its
  // executable graph are.
  {
    CUstream cs = nullptr;
    r = cu.streamCreate(&cs, kCuStreamNonBlocking);
    CUdeviceptr buf = 0;
    r = cu.memAlloc(&buf, 4096);
    CUgraph graph = nullptr;
    line("cuStreamBeginCapture(thread-local)", cu.streamBeginCapture(cs, 1));
    CUdeviceptr q = 0;
    line("cuMemAlloc while capturing (thread-local)", cu.memAlloc(&q, 4096));
    line("cuStreamEndCapture(after the allocation)", cu.streamEndCapture(cs, &graph));
    line("cuStreamBeginCapture(thread-local) again", cu.streamBeginCapture(cs, 1));
    int mode = kCuCaptureModeRelaxed;
    line("cuThreadExchangeStreamCaptureMode(relaxed)", cu.threadExchangeStreamCaptureMode(&mode));
    r = cu.memAlloc(&q, 4096);
    line("cuMemAlloc while capturing (relaxed)", r);
    if (r == kCuSuccess) (void)cu.memFree(q);
    (void)cu.threadExchangeStreamCaptureMode(&mode);
    line("cuMemsetD8Async(captured)", cu.memsetD8Async(buf, 7, 4096, cs));
    int status = -1;
    unsigned long long id = 0;
    CUgraph capturing = nullptr;
    r = cu.streamGetCaptureInfo(cs, &status, &id, &capturing, nullptr, nullptr);
    line("cuStreamGetCaptureInfo", r,
         " (status " + std::to_string(status) + (capturing ? ", a graph)" : ", no graph)"));
    static std::atomic<int> destroyed{0};
    CUuserObject obj = nullptr;
    line("cuUserObjectCreate", cu.userObjectCreate(
                                   &obj, &destroyed, [](void* p) { static_cast<std::atomic<int>*>(p)->store(1); }, 1,
                                   kCuUserObjectNoDestructorSync));
    line("cuGraphRetainUserObject(move)", cu.graphRetainUserObject(capturing, obj, 1, kCuGraphUserObjectMove));
    line("cuStreamEndCapture", cu.streamEndCapture(cs, &graph));
    CUgraphExec exec = nullptr;
    line("cuGraphInstantiate", cu.graphInstantiate(&exec, graph, 0));
    line("cuGraphLaunch", cu.graphLaunch(exec, cs));
    line("cuStreamSynchronize(after the graph)", cu.streamSynchronize(cs));
    line("cuGraphDestroy", cu.graphDestroy(graph));
    const bool early = destroyed.load() != 0;
    line("cuGraphExecDestroy", cu.graphExecDestroy(exec), early ? " (destructor ran before)" : "");
    for (int i = 0; i < 1000 && destroyed.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    printf("user object destructor: %s\n", destroyed.load() != 0 ? "ran" : "did not run within 1 s");
    (void)cu.memFree(buf);
    (void)cu.streamDestroy(cs);
  }
  line("cuMemFreeHost", cu.memFreeHost(pinned));
  line("cuMemFreeHost again", cu.memFreeHost(pinned));
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
