// A stand-in for libcudart, so the perf tools' device-buffer path runs on machines without a GPU
// (BRAID_PERF_CUDART=<this library>). "Device" memory is host memory from cudaMalloc or from braid's ncclMemAlloc,
// copies are memcpy, and streams are the NULL stream, so braid (a host library) can run the operations while the
// driver goes through its device steps: images filled on the host, copied in, the result copied back and checked.
// FAKE_CUDART_DEVICES sets the device count (default 2); FAKE_CUDART_LOG names a file that gets one line per
// process at exit with the calls counted, so a test can see the copies and synchronizations happened.
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kSuccess = 0;
constexpr int kErrorMemoryAllocation = 2;
constexpr int kErrorInvalidDevice = 101;

std::atomic<long> gCopies{0};
std::atomic<long> gCopiedBytes{0};
std::atomic<long> gSyncs{0};
std::atomic<long> gStreams{0};
std::atomic<long> gSetDevice{0};

int deviceCount() {
  const char* v = std::getenv("FAKE_CUDART_DEVICES");
  return v != nullptr && *v != '\0' ? std::atoi(v) : 2;
}

struct ExitLog {
  ~ExitLog() {
    const char* path = std::getenv("FAKE_CUDART_LOG");
    if (path == nullptr || *path == '\0') return;
    if (FILE* f = std::fopen(path, "a")) {
      std::fprintf(f, "pid=%d copies=%ld bytes=%ld syncs=%ld streams=%ld setdevice=%ld\n", static_cast<int>(getpid()),
                   gCopies.load(), gCopiedBytes.load(), gSyncs.load(), gStreams.load(), gSetDevice.load());
      std::fclose(f);
    }
  }
} gExitLog;

}  // namespace

extern "C" {

int cudaGetDeviceCount(int* count) {
  *count = deviceCount();
  return kSuccess;
}

int cudaSetDevice(int device) {
  if (device < 0 || device >= deviceCount()) return kErrorInvalidDevice;
  ++gSetDevice;
  return kSuccess;
}

int cudaMemcpy(void* dst, const void* src, size_t bytes, int /*kind*/) {
  std::memmove(dst, src, bytes);
  ++gCopies;
  gCopiedBytes += static_cast<long>(bytes);
  return kSuccess;
}

int cudaMemset(void* dst, int value, size_t bytes) {
  std::memset(dst, value, bytes);
  return kSuccess;
}

int cudaMalloc(void** p, size_t bytes) {
  *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  return *p != nullptr ? kSuccess : kErrorMemoryAllocation;
}

int cudaFree(void* p) {
  std::free(p);
  return kSuccess;
}

int cudaStreamCreateWithFlags(void** stream, unsigned /*flags*/) {
  *stream = nullptr;  // the NULL stream: braid's host communicators take only that
  ++gStreams;
  return kSuccess;
}

int cudaStreamSynchronize(void* /*stream*/) {
  ++gSyncs;
  return kSuccess;
}

int cudaStreamDestroy(void* /*stream*/) {
  return kSuccess;
}

int cudaDeviceSynchronize() {
  ++gSyncs;
  return kSuccess;
}

const char* cudaGetErrorString(int error) {
  return error == kErrorInvalidDevice ? "invalid device ordinal (fake)" : "fake CUDA error";
}

int cudaDeviceGetPCIBusId(char* bus, int len, int device) {
  std::snprintf(bus, static_cast<size_t>(len), "0000:%02x:00.0", 0x10 + device);
  return kSuccess;
}

int cudaGetDeviceProperties_v2(void* props, int /*device*/) {
  std::strcpy(static_cast<char*>(props), "Fake GPU");
  return kSuccess;
}

}  // extern "C"
