// The CUDA driver API, all of it through one table (DESIGN-CUDA.md 2.4). libcuda.so.1, or the library
// BRAID_CUDA_DRIVER names, is opened at run time, and every entry point is resolved with cuGetProcAddress at the
// CUDA version braid is written against (kCuApiVersion), so a driver's versioned symbols (cuMemAlloc_v2,
// cuDevicePrimaryCtxRelease_v2, ...) bind by ABI rather than by name. libnccl.so.2 links neither libcuda nor the
// CUDA runtime, and loads on machines without them. The types and constants braid needs are declared here, with the
// driver API's values: library sources never include cuda.h.
//
// Every call's result becomes a Status that names the call and the driver's error name and text (check()).
// Thread safety: the table is immutable once loaded; the driver's own rules apply to the calls.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/common/status.h"

namespace braid {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
using CUcontext = CUctx_st*;
struct CUstream_st;  // the type nccl.h's cudaStream_t points to
using CUstream = CUstream_st*;
struct CUevent_st;
using CUevent = CUevent_st*;
using CUhostFn = void (*)(void*);
struct CUlib_st;
using CUlibrary = CUlib_st*;
struct CUkern_st;
using CUkernel = CUkern_st*;
struct CUfunc_st;
using CUfunction = CUfunc_st*;
struct CUgraph_st;
using CUgraph = CUgraph_st*;
struct CUgraphExec_st;
using CUgraphExec = CUgraphExec_st*;
struct CUuserObject_st;
using CUuserObject = CUuserObject_st*;

// CUresult values (the driver API's).
constexpr CUresult kCuSuccess = 0;
constexpr CUresult kCuErrorInvalidValue = 1;
constexpr CUresult kCuErrorOutOfMemory = 2;
constexpr CUresult kCuErrorNotInitialized = 3;
constexpr CUresult kCuErrorNoDevice = 100;
constexpr CUresult kCuErrorInvalidDevice = 101;
constexpr CUresult kCuErrorInvalidImage = 200;
constexpr CUresult kCuErrorInvalidContext = 201;
constexpr CUresult kCuErrorNoBinaryForGpu = 209;
constexpr CUresult kCuErrorInvalidHandle = 400;
constexpr CUresult kCuErrorNotFound = 500;
constexpr CUresult kCuErrorNotReady = 600;
constexpr CUresult kCuErrorPeerAccessUnsupported = 217;
constexpr CUresult kCuErrorPeerAccessAlreadyEnabled = 704;
constexpr CUresult kCuErrorLaunchFailed = 719;
constexpr CUresult kCuErrorNotPermitted = 800;

// Stream capture: CUstreamCaptureStatus, CUstreamCaptureMode, and the user object flags.
constexpr int kCuCaptureStatusNone = 0;
constexpr int kCuCaptureStatusActive = 1;
constexpr int kCuCaptureStatusInvalidated = 2;
constexpr int kCuCaptureModeRelaxed = 2;
constexpr unsigned kCuUserObjectNoDestructorSync = 1;
constexpr unsigned kCuGraphUserObjectMove = 1;

// Stream and event flags, and the legacy NULL stream's handle.
constexpr unsigned kCuStreamNonBlocking = 0x1;
constexpr unsigned kCuEventDisableTiming = 0x2;
// cuMemHostAlloc flags.
constexpr unsigned kCuMemHostAllocPortable = 0x1;
constexpr unsigned kCuMemHostAllocDeviceMap = 0x2;
inline CUstream cuStreamLegacy() {
  return reinterpret_cast<CUstream>(0x1);
}

// Virtual memory management (cuMem*): the driver API's structs, with its layout, and the values braid passes.
using CUmemGenericAllocationHandle = unsigned long long;
struct CuMemLocation {
  int type = 1;  // CU_MEM_LOCATION_TYPE_DEVICE
  int id = 0;    // device ordinal
};
struct CuMemAllocationProp {
  int type = 1;                  // CU_MEM_ALLOCATION_TYPE_PINNED
  int requestedHandleTypes = 0;  // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR (1) to export a descriptor
  CuMemLocation location;
  void* win32HandleMetaData = nullptr;
  unsigned char compressionType = 0;
  unsigned char gpuDirectRDMACapable = 0;
  unsigned short usage = 0;
  unsigned char reserved[4] = {};
};
static_assert(sizeof(CuMemAllocationProp) == 32, "CUmemAllocationProp's layout");
struct CuMemAccessDesc {
  CuMemLocation location;
  int flags = 3;  // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
};
constexpr int kCuMemHandleTypePosixFd = 1;
constexpr int kCuMemAllocGranularityRecommended = 1;

// Multicast objects (CUDA 12.1): CUmulticastObjectProp with the driver's layout, and its granularity options.
struct CuMulticastObjectProp {
  unsigned numDevices = 0;
  size_t size = 0;
  unsigned long long handleTypes = 0;  // kCuMemHandleTypePosixFd to share it with other processes
  unsigned long long flags = 0;
};
static_assert(sizeof(CuMulticastObjectProp) == 32, "CUmulticastObjectProp's layout");
constexpr int kCuMulticastGranularityMinimum = 0;
// The CUDA version whose multicast entry points braid asks for (they do not exist at kCuApiVersion).
constexpr int kCuMulticastApiVersion = 12010;

// CUdevice_attribute values braid reads.
enum class CuDeviceAttr : int {
  kSmCount = 16,
  kPciBusId = 33,
  kPciDeviceId = 34,
  kUnifiedAddressing = 41,
  kPciDomainId = 50,
  kComputeCapabilityMajor = 75,
  kComputeCapabilityMinor = 76,
  kVirtualMemoryManagement = 102,
  kPosixFdHandles = 103,
  kMulticast = 132,
};

// CUpointer_attribute values braid reads, and CUmemorytype's.
enum class CuPointerAttr : int {
  kContext = 1,
  kMemoryType = 2,
  kBufferId = 7,
  kDeviceOrdinal = 9,
  kRangeStart = 11,
  kRangeSize = 12,
};
constexpr unsigned kCuMemoryTypeHost = 1;
constexpr unsigned kCuMemoryTypeDevice = 2;

// The CUDA version whose entry points braid asks cuGetProcAddress for, and the oldest driver it accepts.
constexpr int kCuApiVersion = 12000;

struct CuApi {
  std::string name;                     // the library loaded (loadTableOnce's fields)
  std::vector<std::string> notDefault;  // (unused: entry points come from cuGetProcAddress, not ELF versions)
  int driverVersion = 0;                // cuDriverGetVersion: 1000 * major + 10 * minor

  CUresult (*getErrorName)(CUresult, const char**) = nullptr;
  CUresult (*getErrorString)(CUresult, const char**) = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*deviceGetCount)(int*) = nullptr;
  CUresult (*deviceGet)(CUdevice*, int) = nullptr;
  CUresult (*deviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*deviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*devicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*devicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*ctxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*ctxSetCurrent)(CUcontext) = nullptr;
  CUresult (*ctxGetDevice)(CUdevice*) = nullptr;
  CUresult (*memAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*memFree)(CUdeviceptr) = nullptr;
  CUresult (*pointerGetAttribute)(void*, int, CUdeviceptr) = nullptr;
  CUresult (*streamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*streamDestroy)(CUstream) = nullptr;
  CUresult (*streamSynchronize)(CUstream) = nullptr;
  CUresult (*streamQuery)(CUstream) = nullptr;
  CUresult (*streamGetCtx)(CUstream, CUcontext*) = nullptr;
  CUresult (*streamIsCapturing)(CUstream, int*) = nullptr;  // CUstreamCaptureStatus: 0 none, 1 active, 2 invalidated
  CUresult (*streamBeginCapture)(CUstream, int) = nullptr;  // for the probe and tests
  CUresult (*streamEndCapture)(CUstream, CUgraph*) = nullptr;
  // CUDA 12.0's form: status, capture id, the graph being captured, its dependencies (braid passes null).
  CUresult (*streamGetCaptureInfo)(CUstream, int*, unsigned long long*, CUgraph*, const void**, size_t*) = nullptr;
  CUresult (*threadExchangeStreamCaptureMode)(int*) = nullptr;
  CUresult (*userObjectCreate)(CUuserObject*, void*, CUhostFn, unsigned, unsigned) = nullptr;
  CUresult (*userObjectRelease)(CUuserObject, unsigned) = nullptr;
  CUresult (*graphRetainUserObject)(CUgraph, CUuserObject, unsigned, unsigned) = nullptr;
  // Instantiating, launching and destroying graphs: the program's side (the probe and tests), not braid's.
  CUresult (*graphInstantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*graphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*graphExecDestroy)(CUgraphExec) = nullptr;
  CUresult (*graphDestroy)(CUgraph) = nullptr;
  CUresult (*streamWaitEvent)(CUstream, CUevent, unsigned) = nullptr;
  CUresult (*eventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*eventDestroy)(CUevent) = nullptr;
  CUresult (*eventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*eventQuery)(CUevent) = nullptr;
  CUresult (*eventSynchronize)(CUevent) = nullptr;
  CUresult (*launchHostFunc)(CUstream, CUhostFn, void*) = nullptr;
  CUresult (*memcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*memsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream) = nullptr;
  CUresult (*memHostAlloc)(void**, size_t, unsigned) = nullptr;
  CUresult (*memHostGetDevicePointer)(CUdeviceptr*, void*, unsigned) = nullptr;
  CUresult (*memFreeHost)(void*) = nullptr;
  CUresult (*memHostRegister)(void*, size_t, unsigned) = nullptr;  // flags as cuMemHostAlloc's
  CUresult (*memHostUnregister)(void*) = nullptr;
  // Modules (CUDA 12.0's context-independent loading): jit and library options are never passed.
  CUresult (*libraryLoadData)(CUlibrary*, const void*, void*, void**, unsigned, void*, void**, unsigned) = nullptr;
  CUresult (*libraryUnload)(CUlibrary) = nullptr;
  CUresult (*libraryGetKernel)(CUkernel*, CUlibrary, const char*) = nullptr;
  CUresult (*kernelGetFunction)(CUfunction*, CUkernel) = nullptr;
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                           void**, void**) = nullptr;
  // Peer access and virtual memory management (the p2p transport's FIFOs).
  CUresult (*deviceCanAccessPeer)(int*, CUdevice, CUdevice) = nullptr;
  CUresult (*deviceGetP2PAttribute)(int*, int, CUdevice, CUdevice) = nullptr;  // CUdevice_P2PAttribute
  CUresult (*ctxEnablePeerAccess)(CUcontext, unsigned) = nullptr;
  CUresult (*memGetAllocationGranularity)(size_t*, const CuMemAllocationProp*, int) = nullptr;
  CUresult (*memCreate)(CUmemGenericAllocationHandle*, size_t, const CuMemAllocationProp*,
                        unsigned long long) = nullptr;
  CUresult (*memRelease)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*memExportToShareableHandle)(void*, CUmemGenericAllocationHandle, int, unsigned long long) = nullptr;
  CUresult (*memImportFromShareableHandle)(CUmemGenericAllocationHandle*, void*, int) = nullptr;
  CUresult (*memAddressReserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*memAddressFree)(CUdeviceptr, size_t) = nullptr;
  CUresult (*memMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
  CUresult (*memUnmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*memSetAccess)(CUdeviceptr, size_t, const CuMemAccessDesc*, size_t) = nullptr;
  // The program's own cuMem allocations (windows and registrations of memory ncclMemAlloc did not make).
  CUresult (*memGetAddressRange)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;
  CUresult (*memRetainAllocationHandle)(CUmemGenericAllocationHandle*, void*) = nullptr;
  CUresult (*memGetAllocationPropertiesFromHandle)(CuMemAllocationProp*, CUmemGenericAllocationHandle) = nullptr;
  CUresult (*memGetAccess)(unsigned long long*, const CuMemLocation*, CUdeviceptr) = nullptr;
  // Multicast (NVLS). Optional: null when the driver predates CUDA 12.1 (hasMulticast() says which).
  CUresult (*multicastCreate)(CUmemGenericAllocationHandle*, const CuMulticastObjectProp*) = nullptr;
  CUresult (*multicastAddDevice)(CUmemGenericAllocationHandle, CUdevice) = nullptr;
  CUresult (*multicastBindAddr)(CUmemGenericAllocationHandle, size_t, CUdeviceptr, size_t,
                                unsigned long long) = nullptr;
  CUresult (*multicastUnbind)(CUmemGenericAllocationHandle, CUdevice, size_t, size_t) = nullptr;
  CUresult (*multicastGetGranularity)(size_t*, const CuMulticastObjectProp*, int) = nullptr;
  bool hasMulticast() const {
    return multicastCreate != nullptr && multicastAddDevice != nullptr && multicastBindAddr != nullptr &&
           multicastUnbind != nullptr && multicastGetGranularity != nullptr;
  }

  // `r` from `call` as a Status: ok, or kCudaError "<call>: CUDA_ERROR_X (<driver's text>)".
  [[nodiscard]] Status check(CUresult r, const char* call) const;
};

// Waits for the work queued on `stream` so far (an event recorded now) until `deadline` or, with `abortWord`, until
// that word is non-zero: true once the work is done, false when either came first (the work stays queued). Errors
// name the driver call.
[[nodiscard]] Result<bool> waitStreamUntil(const CuApi* api, CUstream stream,
                                           std::chrono::steady_clock::time_point deadline,
                                           const uint32_t* abortWord = nullptr);

// The table, loaded once per process (cuInit(0) included). Errors (kCudaError... kSystemError for a library that
// cannot be loaded) name the library and BRAID_CUDA_DRIVER, a driver older than kCuApiVersion, or the entry point
// the driver lacks.
[[nodiscard]] Result<const CuApi*> cuApi();

// Relaxed stream capture interaction mode for the calling thread, for a scope: braid allocates launch memory while
// a user's stream is being captured (cudaStreamCaptureModeGlobal would forbid that, and invalidate the capture).
class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(const CuApi* api) : api_(api) {
    if (api_->threadExchangeStreamCaptureMode(&mode_) != kCuSuccess) api_ = nullptr;
  }
  ~RelaxedCaptureMode() {
    if (api_ != nullptr) (void)api_->threadExchangeStreamCaptureMode(&mode_);
  }

 private:
  const CuApi* api_;
  int mode_ = kCuCaptureModeRelaxed;
};

// Makes `ctx` current on the calling thread for a scope and restores the caller's after: NCCL switches devices
// inside a group that drives communicators on several of them.
class ScopedContext {
 public:
  ScopedContext(const CuApi* api, CUcontext ctx) : api_(api) {
    if (api_->ctxGetCurrent(&saved_) != kCuSuccess) saved_ = nullptr;
    if (saved_ != ctx) {
      switched_ = api_->ctxSetCurrent(ctx) == kCuSuccess;
    }
  }
  ~ScopedContext() {
    if (switched_) (void)api_->ctxSetCurrent(saved_);
  }

 private:
  const CuApi* api_;
  CUcontext saved_ = nullptr;
  bool switched_ = false;
};

}  // namespace braid
