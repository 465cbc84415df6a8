// A strict fake of the CUDA driver API that braid calls (src/backends/cuda/cu_api.h), built as libcuda.so.1 in
// build/fake_cuda/ (a folder whose path contains "fake"), so braid finds it through BRAID_CUDA_DRIVER or first on
// LD_LIBRARY_PATH. It answers as the real driver does where braid could get the rules wrong (DESIGN-CUDA.md 2.4):
// nothing works before cuInit; the current context is per thread and calls that need one fail with
// CUDA_ERROR_INVALID_CONTEXT without it; device memory is host memory in a reserved region per device whose
// addresses are reused last-freed-first after cuMemFree and whose freed bytes are poisoned (0xDB), while
// CU_POINTER_ATTRIBUTE_BUFFER_ID stays unique per allocation, so a cache keyed by address breaks here as it would on
// a GPU; cuGetProcAddress answers by base name and version, with the _v2 entry points.
//
// Streams run their work in order on a thread each: the legacy NULL stream waits for earlier work on the context's
// blocking streams and they wait for it, non-blocking streams are independent; events, stream waits, host
// functions (which may not call CUDA: CUDA_ERROR_NOT_PERMITTED), asynchronous copies and memsets (device ranges
// checked), and cuMemFree waits for the device's streams, as cudaFree does.
//
// A child forked after cuInit cannot use CUDA: every call there fails with CUDA_ERROR_NOT_INITIALIZED (braid's
// tests fork their ranks before any CUDA call, as they must on a GPU).
//
// Stricter than the driver where the driver allows either answer: a host function's CUDA call always fails (the
// driver "may" refuse it), and host functions on independent streams run concurrently (the driver may serialise
// them): braid must rely on neither.
//
// Pinned host memory (cuMemHostAlloc: mapped at the same address, memory type host, refused by cuMemFree and by
// device-only calls) and modules and launches (fake_kernels.cc: only the CTA emulator's image loads, kernels run
// over the emulator on the stream's thread, a failed kernel leaves the sticky CUDA_ERROR_LAUNCH_FAILED).
// Peer access and cuMem (fake_vmm.cc: physical memory as memfds, so exported descriptors work across processes).
// Stream capture, graphs and user objects (fake_graphs.cc); the per-thread default stream (CU_STREAM_PER_THREAD,
// made per thread and device, blocking with respect to the legacy stream). Multicast objects (fake_multicast.cc,
// within one process). Legacy IPC comes next.
//
// Knobs: BRAID_FAKE_CUDA_DEVICES=N (default 2; 0 makes cuInit fail with CUDA_ERROR_NO_DEVICE);
// BRAID_FAKE_CUDA_NO_P2P=1: cuDeviceCanAccessPeer says 0 for every pair (a PCIe system without peer access);
// BRAID_FAKE_CUDA_NO_P2P_ATOMICS=1: cuDeviceGetP2PAttribute says no native atomics for every pair;
// BRAID_FAKE_CUDA_P2P_DROP="1>0" (or "all"): copies from device 1's streams into device 0's memory vanish (a PCIe
// path that drops peer writes; kernels' stores are not affected);
// BRAID_FAKE_CUDA_SM_SLOTS=N resident CTA slots per device (default 132);
// BRAID_FAKE_CUDA_FAIL="cuMemAlloc#2=2,cuInit=100": the n-th call of a function (every call without #n) returns
// that CUresult instead.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/fake_cuda/fake_cuda.h"

using namespace fakecuda;

namespace {

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
const ErrorText kErrors[] = {
    {kSuccess, "CUDA_SUCCESS", "no error"},
    {kInvalidValue, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {kOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {kNotInitialized, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {kNoDevice, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {kInvalidDevice, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {kInvalidImage, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {kInvalidContext, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {kNoBinaryForGpu, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {kInvalidHandle, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {kNotFound, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {kNotReady, "CUDA_ERROR_NOT_READY", "device not ready"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
    {kLaunchFailed, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
    {kNotPermitted, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {kNotSupported, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {kIllegalState, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {kCaptureUnsupported, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "the capture was not initiated in this stream"},
    {904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "capturing stream has unjoined work"},
    {905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "dependency created on uncaptured work in another stream"},
    {kCaptureInvalidated, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
};

// cuGetErrorName (name) and cuGetErrorString: an unknown code is CUDA_ERROR_INVALID_VALUE with a null text.
CUresult describeError(CUresult error, const char** pStr, bool name) {
  if (pStr == nullptr) return kInvalidValue;
  for (const ErrorText& e : kErrors) {
    if (e.code == error) {
      *pStr = name ? e.name : e.text;
      return kSuccess;
    }
  }
  *pStr = nullptr;
  return kInvalidValue;
}

}  // namespace

FAKE_API CUresult cuGetErrorName(CUresult error, const char** pStr) {
  return describeError(error, pStr, true);
}

FAKE_API CUresult cuGetErrorString(CUresult error, const char** pStr) {
  return describeError(error, pStr, false);
}

FAKE_API CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return kInvalidValue;
  *version = kDriverVersion;
  return kSuccess;
}

FAKE_API CUresult cuInit(unsigned flags) {
  FAKE_ENTER("cuInit");
  if (flags != 0) return kInvalidValue;
  if (s.initialized) return kSuccess;
  const char* v = getenv("BRAID_FAKE_CUDA_DEVICES");
  s.count = v != nullptr && *v != '\0' ? atoi(v) : 2;
  if (s.count <= 0) return kNoDevice;
  s.devices.resize(static_cast<size_t>(s.count));
  for (int d = 0; d < s.count; ++d) {
    void* base = mmap(nullptr, kRegionBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) return kOutOfMemory;
    s.devices[static_cast<size_t>(d)].base = static_cast<char*>(base);
    s.devices[static_cast<size_t>(d)].primary.device = d;
  }
  s.initialized = true;
  s.initPid.store(static_cast<int>(getpid()));
  return kSuccess;
}

FAKE_API CUresult cuDeviceGetCount(int* count) {
  FAKE_ENTER("cuDeviceGetCount");
  FAKE_REQUIRE_INIT();
  if (count == nullptr) return kInvalidValue;
  *count = s.count;
  return kSuccess;
}

FAKE_API CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  FAKE_ENTER("cuDeviceGet");
  FAKE_REQUIRE_INIT();
  if (device == nullptr) return kInvalidValue;
  if (ordinal < 0 || ordinal >= s.count) return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}

FAKE_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  FAKE_ENTER("cuDeviceGetName");
  FAKE_REQUIRE_INIT();
  if (name == nullptr || len <= 0) return kInvalidValue;
  if (dev < 0 || dev >= s.count) return kInvalidDevice;
  snprintf(name, static_cast<size_t>(len), "braid fake GPU %d", dev);
  return kSuccess;
}

FAKE_API CUresult cuDeviceGetAttribute(int* value, int attrib, CUdevice dev) {
  FAKE_ENTER("cuDeviceGetAttribute");
  FAKE_REQUIRE_INIT();
  if (value == nullptr) return kInvalidValue;
  if (dev < 0 || dev >= s.count) return kInvalidDevice;
  switch (attrib) {
    case 16:  // multiprocessors: an H200's, or the resident CTA slots BRAID_FAKE_CUDA_SM_SLOTS sets
      *value = residentSlots();
      return kSuccess;
    case 33:  // PCI bus id
      *value = 0x18 + dev;
      return kSuccess;
    case 34:  // PCI device id
    case 50:  // PCI domain id
      *value = 0;
      return kSuccess;
    case 41:   // unified addressing
    case 102:  // virtual memory management
    case 103:  // POSIX fd handles
      *value = 1;
      return kSuccess;
    case 75:  // compute capability 9.0
      *value = 9;
      return kSuccess;
    case 76:
      *value = 0;
      return kSuccess;
    case 132:  // multicast (fake_multicast.cc), unless BRAID_FAKE_CUDA_NO_MULTICAST=1
      *value = noMulticast() ? 0 : 1;
      return kSuccess;
    default:
      return kInvalidValue;  // an attribute the fake does not model is an error, never a made-up value
  }
}

FAKE_API CUresult cuDevicePrimaryCtxRetain(void** pctx, CUdevice dev) {
  FAKE_ENTER("cuDevicePrimaryCtxRetain");
  FAKE_REQUIRE_INIT();
  if (pctx == nullptr) return kInvalidValue;
  if (dev < 0 || dev >= s.count) return kInvalidDevice;
  Context& c = s.devices[static_cast<size_t>(dev)].primary;
  ++c.refs;
  *pctx = &c;
  return kSuccess;
}

FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  FAKE_ENTER("cuDevicePrimaryCtxRelease");
  FAKE_REQUIRE_INIT();
  if (dev < 0 || dev >= s.count) return kInvalidDevice;
  Context& c = s.devices[static_cast<size_t>(dev)].primary;
  if (c.refs <= 0) return kInvalidContext;  // released more often than retained
  --c.refs;
  return kSuccess;
}

FAKE_API CUresult cuCtxGetCurrent(void** pctx) {
  FAKE_ENTER("cuCtxGetCurrent");
  FAKE_REQUIRE_INIT();
  if (pctx == nullptr) return kInvalidValue;
  *pctx = tlsCurrent;
  return kSuccess;
}

FAKE_API CUresult cuCtxSetCurrent(void* ctx) {
  FAKE_ENTER("cuCtxSetCurrent");
  FAKE_REQUIRE_INIT();
  auto* c = static_cast<Context*>(ctx);
  if (c != nullptr) {
    bool known = false;
    for (Device& d : s.devices) known = known || &d.primary == c;
    if (!known || c->refs <= 0) return kInvalidContext;
  }
  tlsCurrent = c;
  return kSuccess;
}

FAKE_API CUresult cuCtxGetDevice(CUdevice* device) {
  FAKE_ENTER("cuCtxGetDevice");
  FAKE_REQUIRE_INIT();
  if (device == nullptr) return kInvalidValue;
  if (tlsCurrent == nullptr) return kInvalidContext;
  *device = tlsCurrent->device;
  return kSuccess;
}

FAKE_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, unsigned long long flags,
                                      int* symbolStatus) {
  if (symbol == nullptr || pfn == nullptr || flags > 2) return kInvalidValue;
  if (cudaVersion > kDriverVersion) return kInvalidValue;
  // sinceVersion: entry points newer than CUDA 12.0; asked for at an older version, the driver answers "found, but
  // not at that version" (CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) and no pointer.
  struct Entry {
    const char* name;
    void* fn;
    int sinceVersion = 0;
  };
  static const Entry kEntries[] = {
      {"cuGetErrorName", reinterpret_cast<void*>(&cuGetErrorName)},
      {"cuGetErrorString", reinterpret_cast<void*>(&cuGetErrorString)},
      {"cuDriverGetVersion", reinterpret_cast<void*>(&cuDriverGetVersion)},
      {"cuInit", reinterpret_cast<void*>(&cuInit)},
      {"cuDeviceGetCount", reinterpret_cast<void*>(&cuDeviceGetCount)},
      {"cuDeviceGet", reinterpret_cast<void*>(&cuDeviceGet)},
      {"cuDeviceGetName", reinterpret_cast<void*>(&cuDeviceGetName)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&cuDeviceGetAttribute)},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&cuDevicePrimaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&cuDevicePrimaryCtxRelease_v2)},
      {"cuCtxGetCurrent", reinterpret_cast<void*>(&cuCtxGetCurrent)},
      {"cuCtxSetCurrent", reinterpret_cast<void*>(&cuCtxSetCurrent)},
      {"cuCtxGetDevice", reinterpret_cast<void*>(&cuCtxGetDevice)},
      {"cuMemAlloc", reinterpret_cast<void*>(&cuMemAlloc_v2)},
      {"cuMemFree", reinterpret_cast<void*>(&cuMemFree_v2)},
      {"cuPointerGetAttribute", reinterpret_cast<void*>(&cuPointerGetAttribute)},
      {"cuGetProcAddress", reinterpret_cast<void*>(&cuGetProcAddress_v2)},
      {"cuStreamCreate", reinterpret_cast<void*>(&cuStreamCreate)},
      {"cuStreamDestroy", reinterpret_cast<void*>(&cuStreamDestroy_v2)},
      {"cuStreamSynchronize", reinterpret_cast<void*>(&cuStreamSynchronize)},
      {"cuStreamQuery", reinterpret_cast<void*>(&cuStreamQuery)},
      {"cuCtxSynchronize", reinterpret_cast<void*>(&cuCtxSynchronize)},
      {"cuStreamBeginCapture", reinterpret_cast<void*>(&cuStreamBeginCapture_v2)},
      {"cuStreamEndCapture", reinterpret_cast<void*>(&cuStreamEndCapture)},
      {"cuStreamIsCapturing", reinterpret_cast<void*>(&cuStreamIsCapturing)},
      {"cuStreamGetCtx", reinterpret_cast<void*>(&cuStreamGetCtx)},
      {"cuStreamWaitEvent", reinterpret_cast<void*>(&cuStreamWaitEvent)},
      {"cuEventCreate", reinterpret_cast<void*>(&cuEventCreate)},
      {"cuEventDestroy", reinterpret_cast<void*>(&cuEventDestroy_v2)},
      {"cuEventRecord", reinterpret_cast<void*>(&cuEventRecord)},
      {"cuEventQuery", reinterpret_cast<void*>(&cuEventQuery)},
      {"cuEventSynchronize", reinterpret_cast<void*>(&cuEventSynchronize)},
      {"cuLaunchHostFunc", reinterpret_cast<void*>(&cuLaunchHostFunc)},
      {"cuMemcpyAsync", reinterpret_cast<void*>(&cuMemcpyAsync)},
      {"cuMemsetD8Async", reinterpret_cast<void*>(&cuMemsetD8Async)},
      {"cuMemHostAlloc", reinterpret_cast<void*>(&cuMemHostAlloc)},
      {"cuMemHostGetDevicePointer", reinterpret_cast<void*>(&cuMemHostGetDevicePointer_v2)},
      {"cuMemFreeHost", reinterpret_cast<void*>(&cuMemFreeHost)},
      {"cuMemHostRegister", reinterpret_cast<void*>(&cuMemHostRegister_v2)},
      {"cuMemHostUnregister", reinterpret_cast<void*>(&cuMemHostUnregister)},
      {"cuLibraryLoadData", reinterpret_cast<void*>(&cuLibraryLoadData)},
      {"cuLibraryUnload", reinterpret_cast<void*>(&cuLibraryUnload)},
      {"cuLibraryGetKernel", reinterpret_cast<void*>(&cuLibraryGetKernel)},
      {"cuKernelGetFunction", reinterpret_cast<void*>(&cuKernelGetFunction)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&cuLaunchKernel)},
      {"cuDeviceCanAccessPeer", reinterpret_cast<void*>(&cuDeviceCanAccessPeer)},
      {"cuDeviceGetP2PAttribute", reinterpret_cast<void*>(&cuDeviceGetP2PAttribute)},
      {"cuCtxEnablePeerAccess", reinterpret_cast<void*>(&cuCtxEnablePeerAccess)},
      {"cuCtxDisablePeerAccess", reinterpret_cast<void*>(&cuCtxDisablePeerAccess)},
      {"cuMemGetAllocationGranularity", reinterpret_cast<void*>(&cuMemGetAllocationGranularity)},
      {"cuMemCreate", reinterpret_cast<void*>(&cuMemCreate)},
      {"cuMemRelease", reinterpret_cast<void*>(&cuMemRelease)},
      {"cuMemExportToShareableHandle", reinterpret_cast<void*>(&cuMemExportToShareableHandle)},
      {"cuMemImportFromShareableHandle", reinterpret_cast<void*>(&cuMemImportFromShareableHandle)},
      {"cuMemAddressReserve", reinterpret_cast<void*>(&cuMemAddressReserve)},
      {"cuMemAddressFree", reinterpret_cast<void*>(&cuMemAddressFree)},
      {"cuMemMap", reinterpret_cast<void*>(&cuMemMap)},
      {"cuMemUnmap", reinterpret_cast<void*>(&cuMemUnmap)},
      {"cuMemSetAccess", reinterpret_cast<void*>(&cuMemSetAccess)},
      {"cuMemGetAddressRange", reinterpret_cast<void*>(&cuMemGetAddressRange_v2)},
      {"cuMemRetainAllocationHandle", reinterpret_cast<void*>(&cuMemRetainAllocationHandle)},
      {"cuMemGetAllocationPropertiesFromHandle", reinterpret_cast<void*>(&cuMemGetAllocationPropertiesFromHandle)},
      {"cuMemGetAccess", reinterpret_cast<void*>(&cuMemGetAccess)},
      {"cuStreamGetCaptureInfo", reinterpret_cast<void*>(&cuStreamGetCaptureInfo_v2)},
      {"cuThreadExchangeStreamCaptureMode", reinterpret_cast<void*>(&cuThreadExchangeStreamCaptureMode)},
      {"cuGraphInstantiate", reinterpret_cast<void*>(&cuGraphInstantiateWithFlags)},
      {"cuGraphInstantiateWithFlags", reinterpret_cast<void*>(&cuGraphInstantiateWithFlags)},
      {"cuGraphLaunch", reinterpret_cast<void*>(&cuGraphLaunch)},
      {"cuGraphExecDestroy", reinterpret_cast<void*>(&cuGraphExecDestroy)},
      {"cuGraphDestroy", reinterpret_cast<void*>(&cuGraphDestroy)},
      {"cuUserObjectCreate", reinterpret_cast<void*>(&cuUserObjectCreate)},
      {"cuUserObjectRelease", reinterpret_cast<void*>(&cuUserObjectRelease)},
      {"cuGraphRetainUserObject", reinterpret_cast<void*>(&cuGraphRetainUserObject)},
      {"cuMulticastCreate", reinterpret_cast<void*>(&cuMulticastCreate), 12010},
      {"cuMulticastAddDevice", reinterpret_cast<void*>(&cuMulticastAddDevice), 12010},
      {"cuMulticastBindAddr", reinterpret_cast<void*>(&cuMulticastBindAddr), 12010},
      {"cuMulticastUnbind", reinterpret_cast<void*>(&cuMulticastUnbind), 12010},
      {"cuMulticastGetGranularity", reinterpret_cast<void*>(&cuMulticastGetGranularity), 12010},
  };
  for (const Entry& e : kEntries) {
    if (strcmp(e.name, symbol) != 0) continue;
    const bool enough = cudaVersion >= e.sinceVersion;
    *pfn = enough ? e.fn : nullptr;
    if (symbolStatus != nullptr) *symbolStatus = enough ? 0 : 2;
    return kSuccess;
  }
  // As the driver: success, a null pointer and CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND.
  *pfn = nullptr;
  if (symbolStatus != nullptr) *symbolStatus = 1;
  return kSuccess;
}
