#include "src/backends/cuda/device_memory.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "src/common/logging.h"

namespace braid {

Result<std::unique_ptr<CudaDeviceMemory>> CudaDeviceMemory::create(const CuApi* api, CUcontext ctx, int device) {
  std::unique_ptr<CudaDeviceMemory> m(new CudaDeviceMemory(api, ctx, device));
  ScopedContext scope(api, ctx);
  BRAID_RETURN_IF_ERROR(api->check(api->streamCreate(&m->stream_, kCuStreamNonBlocking), "cuStreamCreate"));
  return m;
}

Status CudaDeviceMemory::replaceStream() {
  ScopedContext scope(api_, ctx_);
  CUstream fresh = nullptr;
  BRAID_RETURN_IF_ERROR(api_->check(api_->streamCreate(&fresh, kCuStreamNonBlocking), "cuStreamCreate"));
  (void)api_->streamDestroy(stream_);
  stream_ = fresh;
  return Status::ok();
}

CudaDeviceMemory::~CudaDeviceMemory() {
  if (stream_ == nullptr) return;
  ScopedContext scope(api_, ctx_);
  (void)api_->streamDestroy(stream_);
}

namespace {

// Kernels on each of the two devices can load and store the other's memory (the driver is asked both ways).
bool peerAccessBothWays(const CuApi* api, int a, int b) {
  int there = 0, back = 0;
  return api->deviceCanAccessPeer(&there, a, b) == kCuSuccess && api->deviceCanAccessPeer(&back, b, a) == kCuSuccess &&
         there != 0 && back != 0;
}

// `bytes` rounded up to the recommended granularity for memory on `prop`'s device.
Result<size_t> granuleRound(const CuApi* api, const CuMemAllocationProp& prop, size_t bytes) {
  size_t gran = 0;
  BRAID_RETURN_IF_ERROR(api->check(api->memGetAllocationGranularity(&gran, &prop, kCuMemAllocGranularityRecommended),
                                   "cuMemGetAllocationGranularity"));
  if (gran == 0) gran = size_t{2} << 20;
  const size_t n = std::max<size_t>(bytes, 1);
  return (n + gran - 1) / gran * gran;
}

// ncclMemAlloc's allocations by start; each keeps its physical handle (exported when a peer maps it).
struct MemAlloc {
  size_t bytes;
  int device;
  std::vector<int> devices;  // with access
  CUmemGenericAllocationHandle handle;
};
std::mutex gAllocMu;
std::map<CUdeviceptr, MemAlloc> gAllocs;

}  // namespace

Result<CUdeviceptr> mapAndGrant(const CuApi* api, CUmemGenericAllocationHandle handle, size_t bytes,
                                const std::vector<int>& devices, bool keep, size_t align) {
  CUdeviceptr ptr = 0;
  Status st = api->check(api->memAddressReserve(&ptr, bytes, align, 0, 0), "cuMemAddressReserve");
  bool mapped = false;
  if (st.isOk()) {
    st = api->check(api->memMap(ptr, bytes, 0, handle, 0), "cuMemMap");
    mapped = st.isOk();
  }
  if (!keep) (void)api->memRelease(handle);
  if (st.isOk()) {
    std::vector<CuMemAccessDesc> access(devices.size());
    for (size_t i = 0; i < devices.size(); ++i) access[i].location.id = devices[i];
    st = api->check(api->memSetAccess(ptr, bytes, access.data(), access.size()), "cuMemSetAccess");
  }
  if (!st.isOk() && ptr != 0) {
    if (mapped) (void)api->memUnmap(ptr, bytes);
    (void)api->memAddressFree(ptr, bytes);
  }
  BRAID_RETURN_IF_ERROR(st);
  return ptr;
}

Status unmapAndFree(const CuApi* api, CUdeviceptr ptr, size_t bytes) {
  BRAID_RETURN_IF_ERROR(api->check(api->memUnmap(ptr, bytes), "cuMemUnmap"));
  return api->check(api->memAddressFree(ptr, bytes), "cuMemAddressFree");
}

bool CudaDeviceMemory::canAccessPeer(int peerDevice) const {
  return peerDevice == device_ || peerAccessBothWays(api_, device_, peerDevice);
}

Result<DeviceFifoMem> CudaDeviceMemory::mapHandle(CUmemGenericAllocationHandle handle, size_t bytes,
                                                  const std::vector<int>& devices) const {
  const CuApi* api = api_;
  BRAID_ASSIGN_OR_RETURN(CUdeviceptr ptr, mapAndGrant(api, handle, bytes, devices));
  CUcontext ctx = ctx_;
  DeviceFifoMem m;
  m.base = reinterpret_cast<char*>(ptr);
  m.bytes = bytes;
  m.owner = std::shared_ptr<void>(m.base, [api, ctx, bytes](void* p) {
    ScopedContext scope(api, ctx);
    RelaxedCaptureMode relaxed(api);
    Status s = unmapAndFree(api, reinterpret_cast<CUdeviceptr>(p), bytes);
    if (!s.isOk()) BRAID_WARN("releasing a p2p FIFO at %p: %s", p, s.message().c_str());
  });
  return m;
}

Result<DeviceFifoMem> CudaDeviceMemory::alloc(size_t bytes, const void* head, size_t headBytes,
                                              const std::vector<int>& peerDevices, bool exportable) const {
  ScopedContext scope(api_, ctx_);
  RelaxedCaptureMode relaxed(api_);  // connections are made at first use, maybe while the user captures
  CuMemAllocationProp prop;
  prop.location.id = device_;
  prop.requestedHandleTypes = exportable ? kCuMemHandleTypePosixFd : 0;
  BRAID_ASSIGN_OR_RETURN(const size_t rounded, granuleRound(api_, prop, bytes));
  CUmemGenericAllocationHandle handle = 0;
  BRAID_RETURN_IF_ERROR(api_->check(api_->memCreate(&handle, rounded, &prop, 0), "cuMemCreate")
                            .withContext(strPrintf("allocating a %zu-byte p2p FIFO on GPU %d", rounded, device_)));
  int fd = -1;
  if (exportable) {
    Status st = api_->check(api_->memExportToShareableHandle(&fd, handle, kCuMemHandleTypePosixFd, 0),
                            "cuMemExportToShareableHandle");
    if (!st.isOk()) {
      (void)api_->memRelease(handle);
      return st;
    }
  }
  std::vector<int> devices{device_};
  for (int d : peerDevices) {
    if (d != device_) devices.push_back(d);
  }
  Result<DeviceFifoMem> m = mapHandle(handle, rounded, devices);
  if (!m.isOk()) {
    if (fd >= 0) close(fd);
    return m.status();
  }
  m.value().exportFd = fd;
  // Physical memory comes uninitialised: LL slots must start with no valid flag, counters at zero.
  Status st = api_->check(api_->memsetD8Async(reinterpret_cast<CUdeviceptr>(m.value().base), 0, rounded, stream_),
                          "cuMemsetD8Async");
  if (st.isOk() && headBytes > 0) {
    st = api_->check(api_->memcpyAsync(reinterpret_cast<CUdeviceptr>(m.value().base),
                                       reinterpret_cast<CUdeviceptr>(head), headBytes, stream_),
                     "cuMemcpyAsync");
  }
  if (st.isOk()) st = api_->check(api_->streamSynchronize(stream_), "cuStreamSynchronize");
  if (!st.isOk()) {
    if (fd >= 0) close(fd);
    return st.withContext("initialising a p2p FIFO");
  }
  return m;
}

Result<DeviceFifoMem> CudaDeviceMemory::import(int fd, size_t bytes) const {
  ScopedContext scope(api_, ctx_);
  RelaxedCaptureMode relaxed(api_);  // connections are made at first use, maybe while the user captures
  CUmemGenericAllocationHandle handle = 0;
  BRAID_RETURN_IF_ERROR(
      api_->check(api_->memImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                                     kCuMemHandleTypePosixFd),
                  "cuMemImportFromShareableHandle"));
  return mapHandle(handle, bytes, {device_});
}

Result<void*> cuMemAllocShareable(const CuApi* api, int device, size_t bytes) {
  CuMemAllocationProp prop;
  prop.location.id = device;
  prop.requestedHandleTypes = kCuMemHandleTypePosixFd;
  BRAID_ASSIGN_OR_RETURN(const size_t rounded, granuleRound(api, prop, bytes));
  int count = 0;
  BRAID_RETURN_IF_ERROR(api->check(api->deviceGetCount(&count), "cuDeviceGetCount"));
  std::vector<int> devices{device};
  for (int d = 0; d < count; ++d) {
    if (d != device && peerAccessBothWays(api, device, d)) devices.push_back(d);
  }
  CUmemGenericAllocationHandle handle = 0;
  BRAID_RETURN_IF_ERROR(api->check(api->memCreate(&handle, rounded, &prop, 0), "cuMemCreate")
                            .withContext(strPrintf("ncclMemAlloc of %zu bytes on GPU %d", bytes, device)));
  Result<CUdeviceptr> ptr = mapAndGrant(api, handle, rounded, devices, true);
  if (!ptr.isOk()) {
    (void)api->memRelease(handle);
    return ptr.status();
  }
  std::lock_guard<std::mutex> lock(gAllocMu);
  gAllocs[ptr.value()] = MemAlloc{rounded, device, devices, handle};
  return reinterpret_cast<void*>(ptr.value());
}

Result<bool> cuMemFreeShareable(const CuApi* api, void* p) {
  MemAlloc a{};
  {
    std::lock_guard<std::mutex> lock(gAllocMu);
    auto it = gAllocs.find(reinterpret_cast<CUdeviceptr>(p));
    if (it == gAllocs.end()) return false;
    a = it->second;
    gAllocs.erase(it);
  }
  (void)api->memRelease(a.handle);  // the mapping holds the memory until it goes
  BRAID_RETURN_IF_ERROR(unmapAndFree(api, reinterpret_cast<CUdeviceptr>(p), a.bytes).withContext("ncclMemFree"));
  return true;
}

namespace {

// A mapping the program made itself with cuMemCreate and cuMemMap (NCCL's rule: the mapping cuMemGetAddressRange
// names, and the handle of its physical memory). Peers import that handle whole and map it from its start, so a
// mapping of part of a larger allocation (cuMemMap at an offset) would show them the wrong bytes: the driver does
// not tell that offset, and NCCL makes the same assumption.
Result<ShareableRange> findProgramCuMem(const CuApi* api, const void* p, size_t bytes) {
  const auto at = reinterpret_cast<CUdeviceptr>(p);
  CUdeviceptr base = 0;
  size_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
  if (api->memGetAddressRange(&base, &size, at) != kCuSuccess ||
      api->memRetainAllocationHandle(&handle, reinterpret_cast<void*>(base)) != kCuSuccess) {
    return invalidArgument(
        "it is neither ncclMemAlloc nor cuMem memory (cudaMalloc memory has no cuMem handle that peers could map; "
        "allocate it with ncclMemAlloc, or cuMemCreate and cuMemMap)");
  }
  CuMemAllocationProp prop;
  Status st =
      api->check(api->memGetAllocationPropertiesFromHandle(&prop, handle), "cuMemGetAllocationPropertiesFromHandle");
  (void)api->memRelease(handle);  // the program's mapping keeps it
  BRAID_RETURN_IF_ERROR(st);
  if (prop.location.type != CuMemLocation{}.type) {
    return invalidArgument("its cuMem allocation is not GPU memory (location type %d)", prop.location.type);
  }
  if (bytes > size - (at - base)) {
    return invalidArgument(
        "it spans more than one cuMem mapping (the one holding it starts at %p and ends after %zu bytes): braid "
        "registers buffers within one mapping (NCCL 2.29's multi-segment registration is not built)",
        reinterpret_cast<void*>(base), size);
  }
  ShareableRange r;
  r.base = reinterpret_cast<const char*>(base);
  r.bytes = size;
  r.device = prop.location.id;
  int count = 0;
  BRAID_RETURN_IF_ERROR(api->check(api->deviceGetCount(&count), "cuDeviceGetCount"));
  for (int d = 0; d < count; ++d) {
    CuMemLocation where;
    where.id = d;
    unsigned long long flags = 0;
    if (api->memGetAccess(&flags, &where, base) == kCuSuccess && flags == CuMemAccessDesc{}.flags) {
      r.devices.push_back(d);
    }
  }
  return r;
}

}  // namespace

Result<ShareableRange> findShareable(const CuApi* api, const void* p, size_t bytes) {
  const auto at = reinterpret_cast<CUdeviceptr>(p);
  {
    std::lock_guard<std::mutex> lock(gAllocMu);
    auto it = gAllocs.upper_bound(at);
    if (it != gAllocs.begin()) {
      --it;
      if (at - it->first < it->second.bytes) {
        const size_t room = it->second.bytes - static_cast<size_t>(at - it->first);
        if (bytes > room) {
          return invalidArgument("it runs %zu bytes past the end of its ncclMemAlloc allocation", bytes - room);
        }
        ShareableRange r;
        r.base = reinterpret_cast<const char*>(it->first);
        r.bytes = it->second.bytes;
        r.device = it->second.device;
        r.devices = it->second.devices;
        return r;
      }
    }
  }
  return findProgramCuMem(api, p, bytes);
}

Result<int> exportShareable(const CuApi* api, const void* base) {
  CUmemGenericAllocationHandle handle = 0;
  bool retained = false;
  {
    std::lock_guard<std::mutex> lock(gAllocMu);
    auto it = gAllocs.find(reinterpret_cast<CUdeviceptr>(base));
    if (it != gAllocs.end()) handle = it->second.handle;  // valid while the allocation lives (the caller's part)
  }
  if (handle == 0) {
    // The program's own mapping: its handle, for as long as the export takes.
    BRAID_RETURN_IF_ERROR(
        api->check(api->memRetainAllocationHandle(&handle, const_cast<void*>(base)), "cuMemRetainAllocationHandle"));
    retained = true;
    CuMemAllocationProp prop;
    Status st =
        api->check(api->memGetAllocationPropertiesFromHandle(&prop, handle), "cuMemGetAllocationPropertiesFromHandle");
    if (st.isOk() && (prop.requestedHandleTypes & kCuMemHandleTypePosixFd) == 0) {
      st = invalidArgument(
          "its cuMem allocation was made without CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR in requestedHandleTypes, "
          "so other processes cannot map it");
    }
    if (!st.isOk()) {
      (void)api->memRelease(handle);
      return st;
    }
  }
  int fd = -1;
  Status st = api->check(api->memExportToShareableHandle(&fd, handle, kCuMemHandleTypePosixFd, 0),
                         "cuMemExportToShareableHandle");
  if (retained) (void)api->memRelease(handle);
  BRAID_RETURN_IF_ERROR(st);
  return fd;
}

}  // namespace braid
