#include "perf/common/cuda_runtime.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace braid::perf {
namespace {

constexpr int kCudaSuccess = 0;
constexpr int kCudaMemcpyDefault = 4;       // cudaMemcpyDefault: direction from the pointers (UVA)
constexpr unsigned kStreamNonBlocking = 1;  // cudaStreamNonBlocking
// cudaDeviceProp begins with char name[256] in every CUDA version; the buffer is larger than any version's struct.
constexpr size_t kPropertiesBytes = 16384;
constexpr size_t kNameBytes = 256;

template <typename Fn>
bool bind(void* lib, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*out == nullptr && missing->empty()) *missing = name;
  return *out != nullptr;
}

}  // namespace

const CudaRuntime& CudaRuntime::get() {
  static const CudaRuntime runtime;
  return runtime;
}

CudaRuntime::CudaRuntime() {
  std::vector<std::string> names;
  if (const char* chosen = std::getenv("BRAID_PERF_CUDART"); chosen != nullptr && *chosen != '\0') {
    names.emplace_back(chosen);
  } else {
    names = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"};
  }
  void* lib = nullptr;
  for (const std::string& name : names) {
    lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
      library_ = name;
      break;
    }
    if (why_.empty()) why_ = dlerror();  // the first candidate's reason is the telling one
  }
  if (lib == nullptr) return;
  why_.clear();
  std::string missing;
  bind(lib, "cudaGetDeviceCount", &getCount_, &missing);
  bind(lib, "cudaSetDevice", &setDevice_, &missing);
  bind(lib, "cudaMemcpy", &memcpy_, &missing);
  bind(lib, "cudaMemset", &memset_, &missing);
  bind(lib, "cudaMalloc", &malloc_, &missing);
  bind(lib, "cudaFree", &free_, &missing);
  bind(lib, "cudaStreamCreateWithFlags", &streamCreate_, &missing);
  bind(lib, "cudaStreamSynchronize", &streamSync_, &missing);
  bind(lib, "cudaStreamDestroy", &streamDestroy_, &missing);
  bind(lib, "cudaDeviceSynchronize", &deviceSync_, &missing);
  bind(lib, "cudaGetErrorString", &errorString_, &missing);
  if (!missing.empty()) {
    why_ = library_ + " has no " + missing;
    return;
  }
  std::string unused;
  bind(lib, "cudaDeviceGetPCIBusId", &busId_, &unused);  // optional: only the "# Using devices" line uses them
  if (!bind(lib, "cudaGetDeviceProperties_v2", &properties_, &unused)) {
    bind(lib, "cudaGetDeviceProperties", &properties_, &unused);
  }
  int count = 0;
  if (const int rc = getCount_(&count); rc != kCudaSuccess) {
    why_ = "cudaGetDeviceCount: " + std::string(errorString_(rc));
    return;
  }
  if (count <= 0) {
    why_ = "cudaGetDeviceCount found no device";
    return;
  }
  deviceCount_ = count;
}

bool CudaRuntime::check(int rc, const char* call, std::string* error) const {
  if (rc == kCudaSuccess) return true;
  *error = std::string(call) + " failed: " + errorString_(rc);
  return false;
}

bool CudaRuntime::setDevice(int device, std::string* error) const {
  return check(setDevice_(device), ("cudaSetDevice(" + std::to_string(device) + ")").c_str(), error);
}

bool CudaRuntime::copy(void* dst, const void* src, size_t bytes, std::string* error) const {
  return bytes == 0 || check(memcpy_(dst, src, bytes, kCudaMemcpyDefault), "cudaMemcpy", error);
}

bool CudaRuntime::fill(void* dst, int value, size_t bytes, std::string* error) const {
  return bytes == 0 || check(memset_(dst, value, bytes), "cudaMemset", error);
}

bool CudaRuntime::allocate(void** p, size_t bytes, std::string* error) const {
  return check(malloc_(p, bytes), "cudaMalloc", error);
}

void CudaRuntime::release(void* p) const {
  if (p != nullptr) (void)free_(p);
}

bool CudaRuntime::createStream(cudaStream_t* stream, std::string* error) const {
  return check(streamCreate_(stream, kStreamNonBlocking), "cudaStreamCreateWithFlags", error);
}

bool CudaRuntime::synchronize(cudaStream_t stream, std::string* error) const {
  return check(streamSync_(stream), "cudaStreamSynchronize", error);
}

bool CudaRuntime::synchronizeDevice(std::string* error) const {
  return check(deviceSync_(), "cudaDeviceSynchronize", error);
}

void CudaRuntime::destroyStream(cudaStream_t stream) const {
  if (stream != nullptr) (void)streamDestroy_(stream);
}

std::string CudaRuntime::describe(int device) const {
  char bus[32] = {0};
  if (busId_ == nullptr || busId_(bus, sizeof(bus), device) != kCudaSuccess) std::snprintf(bus, sizeof(bus), "cuda");
  // nccl-tests prints domain:bus:device ("0000:18:00"); the runtime adds the function (".0").
  if (char* dot = std::strrchr(bus, '.'); dot != nullptr) *dot = '\0';
  std::string name = "GPU";
  if (properties_ != nullptr) {
    std::vector<char> props(kPropertiesBytes, 0);
    if (properties_(props.data(), device) == kCudaSuccess && props[0] != '\0') {
      name.assign(props.data(), strnlen(props.data(), kNameBytes));
    }
  }
  return "[" + std::string(bus) + "] " + name;
}

}  // namespace braid::perf
