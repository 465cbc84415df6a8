#include "src/backends/cuda/cu_api.h"

#include <thread>
#include <type_traits>

#include "src/common/dyn_lib.h"
#include "src/common/params.h"

namespace braid {
namespace {

// cuGetProcAddress_v2 (CUDA 12.0): symbol, function pointer, CUDA version, flags (CU_GET_PROC_ADDRESS_DEFAULT = 0),
// and whether the symbol was found (CU_GET_PROC_ADDRESS_SUCCESS = 0).
using GetProcAddressFn = CUresult (*)(const char*, void**, int, unsigned long long, int*);

Status bindAll(DynLib& lib, CuApi* t) {
  GetProcAddressFn getProc = nullptr;
  BRAID_RETURN_IF_ERROR(
      lib.bind(getProc, "cuGetProcAddress_v2", nullptr)
          .withContext(strPrintf("%s is older than CUDA 12.0 (no cuGetProcAddress_v2)", lib.name().c_str())));
  Status missing;
  auto get = [&](auto& fn, const char* symbol) {
    void* p = nullptr;
    int found = -1;
    const CUresult r = getProc(symbol, &p, kCuApiVersion, 0, &found);
    if ((r != kCuSuccess || p == nullptr || found != 0) && missing.isOk()) {
      missing =
          Status(Code::kCudaError,
                 strPrintf("the CUDA driver %s has no entry point %s for CUDA %d.%d (cuGetProcAddress returned "
                           "%d, symbol status %d)",
                           lib.name().c_str(), symbol, kCuApiVersion / 1000, kCuApiVersion % 1000 / 10, r, found));
      return;
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  CUresult (*driverGetVersion)(int*) = nullptr;
  get(driverGetVersion, "cuDriverGetVersion");
  get(t->getErrorName, "cuGetErrorName");
  get(t->getErrorString, "cuGetErrorString");
  get(t->init, "cuInit");
  get(t->deviceGetCount, "cuDeviceGetCount");
  get(t->deviceGet, "cuDeviceGet");
  get(t->deviceGetName, "cuDeviceGetName");
  get(t->deviceGetAttribute, "cuDeviceGetAttribute");
  get(t->devicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  get(t->devicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease");
  get(t->ctxGetCurrent, "cuCtxGetCurrent");
  get(t->ctxSetCurrent, "cuCtxSetCurrent");
  get(t->ctxGetDevice, "cuCtxGetDevice");
  get(t->memAlloc, "cuMemAlloc");
  get(t->memFree, "cuMemFree");
  get(t->pointerGetAttribute, "cuPointerGetAttribute");
  get(t->streamCreate, "cuStreamCreate");
  get(t->streamDestroy, "cuStreamDestroy");
  get(t->streamSynchronize, "cuStreamSynchronize");
  get(t->streamQuery, "cuStreamQuery");
  get(t->streamGetCtx, "cuStreamGetCtx");
  get(t->streamIsCapturing, "cuStreamIsCapturing");
  get(t->streamBeginCapture, "cuStreamBeginCapture");
  get(t->streamEndCapture, "cuStreamEndCapture");
  get(t->streamGetCaptureInfo, "cuStreamGetCaptureInfo");
  get(t->threadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode");
  get(t->userObjectCreate, "cuUserObjectCreate");
  get(t->userObjectRelease, "cuUserObjectRelease");
  get(t->graphRetainUserObject, "cuGraphRetainUserObject");
  get(t->graphInstantiate, "cuGraphInstantiate");  // CUDA 12.0's: cuGraphInstantiateWithFlags
  get(t->graphLaunch, "cuGraphLaunch");
  get(t->graphExecDestroy, "cuGraphExecDestroy");
  get(t->graphDestroy, "cuGraphDestroy");
  get(t->streamWaitEvent, "cuStreamWaitEvent");
  get(t->eventCreate, "cuEventCreate");
  get(t->eventDestroy, "cuEventDestroy");
  get(t->eventRecord, "cuEventRecord");
  get(t->eventQuery, "cuEventQuery");
  get(t->eventSynchronize, "cuEventSynchronize");
  get(t->launchHostFunc, "cuLaunchHostFunc");
  get(t->memcpyAsync, "cuMemcpyAsync");
  get(t->memsetD8Async, "cuMemsetD8Async");
  get(t->memHostAlloc, "cuMemHostAlloc");
  get(t->memHostGetDevicePointer, "cuMemHostGetDevicePointer");
  get(t->memFreeHost, "cuMemFreeHost");
  get(t->memHostRegister, "cuMemHostRegister");
  get(t->memHostUnregister, "cuMemHostUnregister");
  get(t->libraryLoadData, "cuLibraryLoadData");
  get(t->libraryUnload, "cuLibraryUnload");
  get(t->libraryGetKernel, "cuLibraryGetKernel");
  get(t->kernelGetFunction, "cuKernelGetFunction");
  get(t->launchKernel, "cuLaunchKernel");
  get(t->deviceCanAccessPeer, "cuDeviceCanAccessPeer");
  get(t->deviceGetP2PAttribute, "cuDeviceGetP2PAttribute");
  get(t->ctxEnablePeerAccess, "cuCtxEnablePeerAccess");
  get(t->memGetAllocationGranularity, "cuMemGetAllocationGranularity");
  get(t->memCreate, "cuMemCreate");
  get(t->memRelease, "cuMemRelease");
  get(t->memExportToShareableHandle, "cuMemExportToShareableHandle");
  get(t->memImportFromShareableHandle, "cuMemImportFromShareableHandle");
  get(t->memAddressReserve, "cuMemAddressReserve");
  get(t->memAddressFree, "cuMemAddressFree");
  get(t->memMap, "cuMemMap");
  get(t->memUnmap, "cuMemUnmap");
  get(t->memSetAccess, "cuMemSetAccess");
  get(t->memGetAddressRange, "cuMemGetAddressRange");
  get(t->memRetainAllocationHandle, "cuMemRetainAllocationHandle");
  get(t->memGetAllocationPropertiesFromHandle, "cuMemGetAllocationPropertiesFromHandle");
  get(t->memGetAccess, "cuMemGetAccess");
  BRAID_RETURN_IF_ERROR(missing);
  // Multicast is optional: a driver without it (older than 12.1) runs NVLS-style collectives over peer pointers.
  auto optional = [&](auto& fn, const char* symbol) {
    void* p = nullptr;
    int found = -1;
    if (getProc(symbol, &p, kCuMulticastApiVersion, 0, &found) == kCuSuccess && p != nullptr && found == 0) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    }
  };
  optional(t->multicastCreate, "cuMulticastCreate");
  optional(t->multicastAddDevice, "cuMulticastAddDevice");
  optional(t->multicastBindAddr, "cuMulticastBindAddr");
  optional(t->multicastUnbind, "cuMulticastUnbind");
  optional(t->multicastGetGranularity, "cuMulticastGetGranularity");
  BRAID_RETURN_IF_ERROR(t->check(driverGetVersion(&t->driverVersion), "cuDriverGetVersion"));
  if (t->driverVersion < kCuApiVersion) {
    return Status(Code::kCudaError, strPrintf("the CUDA driver %s supports CUDA %d.%d; braid needs %d.%d or newer",
                                              lib.name().c_str(), t->driverVersion / 1000, t->driverVersion % 1000 / 10,
                                              kCuApiVersion / 1000, kCuApiVersion % 1000 / 10));
  }
  return t->check(t->init(0), "cuInit");
}

}  // namespace

Status CuApi::check(CUresult r, const char* call) const {
  if (r == kCuSuccess) return Status::ok();
  const char* name = nullptr;
  const char* text = nullptr;
  if (getErrorName == nullptr || getErrorName(r, &name) != kCuSuccess || name == nullptr) name = "unknown CUresult";
  if (getErrorString == nullptr || getErrorString(r, &text) != kCuSuccess || text == nullptr) text = "";
  return Status(Code::kCudaError, strPrintf("%s: %s (%d)%s%s", call, name, r, *text != '\0' ? ": " : "", text));
}

Result<bool> waitStreamUntil(const CuApi* api, CUstream stream, std::chrono::steady_clock::time_point deadline,
                             const uint32_t* abortWord) {
  CUevent e = nullptr;
  BRAID_RETURN_IF_ERROR(api->check(api->eventCreate(&e, kCuEventDisableTiming), "cuEventCreate"));
  Status st = api->check(api->eventRecord(e, stream), "cuEventRecord");
  bool done = false;
  for (int polls = 0; st.isOk(); ++polls) {
    const CUresult r = api->eventQuery(e);
    if (r == kCuSuccess) {
      done = true;
      break;
    }
    if (r != kCuErrorNotReady) {
      st = api->check(r, "cuEventQuery");
      break;
    }
    if (abortWord != nullptr && __atomic_load_n(abortWord, __ATOMIC_ACQUIRE) != 0) break;
    if (std::chrono::steady_clock::now() > deadline) break;
    // Short work (a one-thread kernel) ends within the first polls; longer waits sleep between them.
    if (polls >= 64) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  (void)api->eventDestroy(e);
  BRAID_RETURN_IF_ERROR(st);
  return done;
}

Result<const CuApi*> cuApi() {
  const std::string lib = params::CudaDriver();
  Result<const CuApi*> t = loadTableOnce<CuApi>(lib, bindAll);
  if (!t.isOk()) {
    return t.status().withContext(strPrintf("no usable CUDA driver (%s=%s)", params::kCudaDriver.name, lib.c_str()));
  }
  return t;
}

}  // namespace braid
