// The CUDA runtime subset the perf tools use (perf/common/cuda_runtime.cc), as a thin layer over the strict fake
// driver: built as libcudart.so.13 next to the fake libcuda.so.1 (build/fake_cuda), so a program that loads the
// runtime at run time (BRAID_PERF_CUDART, or first on LD_LIBRARY_PATH) drives fake devices whose contexts, memory
// and streams braid's CUDA communicators see, exactly as a real runtime sits on the real driver: cudaSetDevice makes
// the device's primary context current, cudaMalloc is cuMemAlloc, cudaMemcpy and cudaMemset are synchronous on the
// legacy stream, cudaDeviceSynchronize waits for every stream of the device. Errors come back as the runtime's
// codes for the driver's (the values the two share: invalid value 1, out of memory 2, not initialised 3, no device
// 100, invalid device 101; anything else is cudaErrorUnknown 999).
//
// Only what the perf tools, the compat consumer (tests/compat/cudart_consumer.cc) and tests/gpu/copy_bandwidth.cc
// call, exported under the
// toolkit's symbol version (fake_runtime.map), so a program linked against the toolkit's libcudart.so binds here.
// BRAID_FAKE_CUDART_LOG names a file that gets one line per process at exit with the copies, synchronisations, streams
// and device choices counted, so a test sees that the copies happened.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "tests/fake_cuda/fake_cuda.h"

namespace {

constexpr int kUnknown = 999;

int toRuntime(CUresult r) {
  switch (r) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 100:
    case 101:
      return r;
    default:
      return kUnknown;
  }
}

// cuInit once; then the calling thread needs a current context (device 0's primary unless cudaSetDevice chose).
CUresult ensureContext() {
  static std::once_flag once;
  static CUresult init = 0;
  std::call_once(once, [] { init = cuInit(0); });
  if (init != 0) return init;
  void* ctx = nullptr;
  if (cuCtxGetCurrent(&ctx) == 0 && ctx != nullptr) return 0;
  CUresult r = cuDevicePrimaryCtxRetain(&ctx, 0);
  return r != 0 ? r : cuCtxSetCurrent(ctx);
}

std::atomic<long> gCopies{0}, gSyncs{0}, gStreams{0}, gSetDevice{0};

struct CallLog {
  ~CallLog() {
    const char* path = getenv("BRAID_FAKE_CUDART_LOG");
    if (path == nullptr || *path == '\0') return;
    if (FILE* f = fopen(path, "a")) {
      fprintf(f, "pid=%d copies=%ld syncs=%ld streams=%ld setdevice=%ld\n", static_cast<int>(getpid()), gCopies.load(),
              gSyncs.load(), gStreams.load(), gSetDevice.load());
      fclose(f);
    }
  }
} gCallLog;

}  // namespace

FAKE_API int cudaGetDeviceCount(int* count) {
  if (count == nullptr) return 1;
  CUresult r = ensureContext();
  if (r != 0) return toRuntime(r);
  return toRuntime(cuDeviceGetCount(count));
}

FAKE_API int cudaSetDevice(int device) {
  ++gSetDevice;
  CUresult r = ensureContext();
  if (r != 0) return toRuntime(r);
  void* ctx = nullptr;
  r = cuDevicePrimaryCtxRetain(&ctx, device);  // the runtime keeps it retained for the process
  return toRuntime(r != 0 ? r : cuCtxSetCurrent(ctx));
}

FAKE_API int cudaMalloc(void** p, size_t bytes) {
  if (p == nullptr) return 1;
  CUresult r = ensureContext();
  if (r != 0) return toRuntime(r);
  CUdeviceptr d = 0;
  r = cuMemAlloc_v2(&d, bytes);
  *p = reinterpret_cast<void*>(d);
  return toRuntime(r);
}

FAKE_API int cudaFree(void* p) {
  if (p == nullptr) return 0;
  CUresult r = ensureContext();
  return toRuntime(r != 0 ? r : cuMemFree_v2(reinterpret_cast<CUdeviceptr>(p)));
}

FAKE_API int cudaMemcpy(void* dst, const void* src, size_t bytes, int /*kind: unified addressing decides*/) {
  ++gCopies;
  CUresult r = ensureContext();
  if (r == 0) r = cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes, nullptr);
  if (r == 0) r = cuStreamSynchronize(nullptr);
  return toRuntime(r);
}

FAKE_API int cudaMemcpyAsync(void* dst, const void* src, size_t bytes, int /*kind*/, void* stream) {
  ++gCopies;
  CUresult r = ensureContext();
  if (r == 0) r = cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes, stream);
  return toRuntime(r);
}

FAKE_API int cudaMemset(void* p, int value, size_t bytes) {
  CUresult r = ensureContext();
  if (r == 0) r = cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(p), static_cast<unsigned char>(value), bytes, nullptr);
  if (r == 0) r = cuStreamSynchronize(nullptr);
  return toRuntime(r);
}

FAKE_API int cudaStreamCreateWithFlags(void** stream, unsigned flags) {
  ++gStreams;
  CUresult r = ensureContext();
  return toRuntime(r != 0 ? r : cuStreamCreate(stream, flags));
}

FAKE_API int cudaStreamCreate(void** stream) {
  return cudaStreamCreateWithFlags(stream, 0);
}

FAKE_API int cudaStreamSynchronize(void* stream) {
  ++gSyncs;
  return toRuntime(cuStreamSynchronize(stream));
}

FAKE_API int cudaStreamDestroy(void* stream) {
  return toRuntime(cuStreamDestroy_v2(stream));
}

FAKE_API int cudaDeviceSynchronize() {
  ++gSyncs;
  CUresult r = ensureContext();
  return toRuntime(r != 0 ? r : cuCtxSynchronize());
}

FAKE_API const char* cudaGetErrorString(int error) {
  const char* s = nullptr;
  if (error == kUnknown || cuGetErrorString(error, &s) != 0 || s == nullptr) return "unknown error";
  return s;
}

FAKE_API int cudaDeviceGetPCIBusId(char* id, int len, int device) {
  int bus = 0;
  CUresult r = ensureContext();
  if (r == 0) r = cuDeviceGetAttribute(&bus, 33, device);
  if (r != 0) return toRuntime(r);
  if (id == nullptr || len < 13) return 1;
  snprintf(id, static_cast<size_t>(len), "0000:%02x:00.0", bus);
  return 0;
}

// cudaDeviceProp begins with char name[256] in every CUDA version; nothing else of it is filled.
FAKE_API int cudaGetDeviceProperties_v2(void* props, int device) {
  CUresult r = ensureContext();
  if (r == 0 && props == nullptr) return 1;
  return toRuntime(r != 0 ? r : cuDeviceGetName(static_cast<char*>(props), 256, device));
}
