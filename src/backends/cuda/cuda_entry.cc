// The process-level entry points of the CUDA backend that need no communicator (src/backends/backend.h): which
// backend a new communicator gets, and ncclMemAlloc / ncclMemFree on CUDA threads. They ask the driver the program
// loaded itself, and never load or initialise it for a program that does not use CUDA.
#include <dlfcn.h>
#include <strings.h>

#include "src/backends/backend.h"
#include "src/backends/cuda/cu_api.h"
#include "src/backends/cuda/device_memory.h"
#include "src/common/params.h"

namespace braid {

namespace {

// The driver library, if the program loaded it (never loads it).
void* loadedDriver() {
  return dlopen(params::CudaDriver().c_str(), RTLD_NOW | RTLD_NOLOAD);
}

// The calling thread's current context through the loaded driver itself: null when there is none, when the
// driver is not initialised, or when it is not loaded.
CUcontext currentContextIfLoaded() {
  void* lib = loadedDriver();
  if (lib == nullptr) return nullptr;
  using GetCurrentFn = CUresult (*)(CUcontext*);
  auto getCurrent = reinterpret_cast<GetCurrentFn>(dlsym(lib, "cuCtxGetCurrent"));
  CUcontext ctx = nullptr;
  if (getCurrent == nullptr || getCurrent(&ctx) != kCuSuccess) ctx = nullptr;
  dlclose(lib);
  return ctx;
}

}  // namespace

Result<BackendChoice> chooseBackend(int device) {
  const std::string want = params::Backend();
  BackendChoice c;
  if (strcasecmp(want.c_str(), "host") == 0) return c;
  if (!want.empty() && strcasecmp(want.c_str(), "cuda") != 0) {
    return invalidArgument("%s=\"%s\": use host or cuda (unset: cuda when this thread has a current CUDA context)",
                           params::kBackend.name, want.c_str());
  }
  c.cudaContext = currentContextIfLoaded();
  if (!want.empty()) {
    c.kind = BackendKind::kCuda;  // forced: CudaBackend::create loads the driver and names what is missing
  } else if (c.cudaContext != nullptr) {
    c.kind = BackendKind::kCuda;
  }
  if (c.kind == BackendKind::kCuda && device >= 0) c.cudaDevice = device;
  return c;
}

Result<void*> cudaAllocIfCurrent(size_t bytes) {
  CUcontext ctx = currentContextIfLoaded();
  if (ctx == nullptr || strcasecmp(params::Backend().c_str(), "host") == 0) return static_cast<void*>(nullptr);
  BRAID_ASSIGN_OR_RETURN(const CuApi* api, cuApi());
  CUdevice dev = -1;
  BRAID_RETURN_IF_ERROR(api->check(api->ctxGetDevice(&dev), "cuCtxGetDevice"));
  return cuMemAllocShareable(api, dev, bytes);
}

Result<bool> cudaFreeIfDevice(void* p) {
  // Asked of the loaded driver itself, so a program that loaded CUDA but never initialised it is not initialised
  // here (an uninitialised driver answers CUDA_ERROR_NOT_INITIALIZED: not device memory).
  void* lib = loadedDriver();
  if (lib == nullptr) return false;
  using AttributeFn = CUresult (*)(void*, int, CUdeviceptr);
  auto attribute = reinterpret_cast<AttributeFn>(dlsym(lib, "cuPointerGetAttribute"));
  unsigned type = 0;
  const auto at = reinterpret_cast<CUdeviceptr>(p);
  const bool device = attribute != nullptr &&
                      attribute(&type, static_cast<int>(CuPointerAttr::kMemoryType), at) == kCuSuccess &&
                      type == kCuMemoryTypeDevice;
  dlclose(lib);
  if (!device) return false;
  BRAID_ASSIGN_OR_RETURN(const CuApi* api, cuApi());
  CUcontext ctx = nullptr;
  BRAID_RETURN_IF_ERROR(api->check(api->pointerGetAttribute(&ctx, static_cast<int>(CuPointerAttr::kContext), at),
                                   "cuPointerGetAttribute(CONTEXT)"));
  ScopedContext scope(api, ctx);
  BRAID_ASSIGN_OR_RETURN(bool mine, cuMemFreeShareable(api, p));
  if (!mine) BRAID_RETURN_IF_ERROR(api->check(api->memFree(at), "cuMemFree"));  // not ncclMemAlloc's: as cudaFree
  return true;
}

}  // namespace braid
