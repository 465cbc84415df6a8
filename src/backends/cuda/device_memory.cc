#include "src/backends/cuda/device_memory.h"

#include <unistd.h>

#include "src/common/logging.h"

namespace braid {

Result<std::unique_ptr<CudaDeviceMemory>> CudaDeviceMemory::create(const CuApi* api, CUcontext ctx, int device) {
  std::unique_ptr<CudaDeviceMemory> m(new CudaDeviceMemory(api, ctx, device));
  ScopedContext scope(api, ctx);
  BRAID_RETURN_IF_ERROR(api->check(api->streamCreate(&m->stream_, kCuStreamNonBlocking), "cuStreamCreate"));
  return m;
}

CudaDeviceMemory::~CudaDeviceMemory() {
  if (stream_ == nullptr) return;
  ScopedContext scope(api_, ctx_);
  (void)api_->streamDestroy(stream_);
}

bool CudaDeviceMemory::canAccessPeer(int peerDevice) const {
  if (peerDevice == device_) return true;
  int there = 0, back = 0;
  return api_->deviceCanAccessPeer(&there, device_, peerDevice) == kCuSuccess &&
         api_->deviceCanAccessPeer(&back, peerDevice, device_) == kCuSuccess && there != 0 && back != 0;
}

Result<DeviceFifoMem> CudaDeviceMemory::mapHandle(CUmemGenericAllocationHandle handle, size_t bytes,
                                                  const std::vector<int>& devices) const {
  const CuApi* api = api_;
  CUdeviceptr ptr = 0;
  Status st = api->check(api->memAddressReserve(&ptr, bytes, 0, 0, 0), "cuMemAddressReserve");
  if (st.isOk()) {
    st = api->check(api->memMap(ptr, bytes, 0, handle, 0), "cuMemMap");
    if (!st.isOk()) (void)api->memAddressFree(ptr, bytes);
  }
  (void)api->memRelease(handle);  // the mapping holds the memory from here on
  BRAID_RETURN_IF_ERROR(st);
  CUcontext ctx = ctx_;
  DeviceFifoMem m;
  m.base = reinterpret_cast<char*>(ptr);
  m.bytes = bytes;
  m.owner = std::shared_ptr<void>(m.base, [api, ctx, bytes](void* p) {
    ScopedContext scope(api, ctx);
    const auto at = reinterpret_cast<CUdeviceptr>(p);
    Status s = api->check(api->memUnmap(at, bytes), "cuMemUnmap");
    if (s.isOk()) s = api->check(api->memAddressFree(at, bytes), "cuMemAddressFree");
    if (!s.isOk()) BRAID_WARN("releasing a p2p FIFO at %p: %s", p, s.message().c_str());
  });
  std::vector<CuMemAccessDesc> access;
  for (int d : devices) {
    CuMemAccessDesc a;
    a.location.id = d;
    access.push_back(a);
  }
  BRAID_RETURN_IF_ERROR(api->check(api->memSetAccess(ptr, bytes, access.data(), access.size()), "cuMemSetAccess"));
  return m;
}

Result<DeviceFifoMem> CudaDeviceMemory::alloc(size_t bytes, const void* head, size_t headBytes,
                                              const std::vector<int>& peerDevices, bool exportable) const {
  ScopedContext scope(api_, ctx_);
  CuMemAllocationProp prop;
  prop.location.id = device_;
  prop.requestedHandleTypes = exportable ? kCuMemHandleTypePosixFd : 0;
  size_t gran = 0;
  BRAID_RETURN_IF_ERROR(api_->check(api_->memGetAllocationGranularity(&gran, &prop, kCuMemAllocGranularityRecommended),
                                    "cuMemGetAllocationGranularity"));
  if (gran == 0) gran = size_t{2} << 20;
  const size_t rounded = (bytes + gran - 1) / gran * gran;
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
  if (st.isOk()) {
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
  CUmemGenericAllocationHandle handle = 0;
  BRAID_RETURN_IF_ERROR(
      api_->check(api_->memImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                                     kCuMemHandleTypePosixFd),
                  "cuMemImportFromShareableHandle"));
  return mapHandle(handle, bytes, {device_});
}

}  // namespace braid
