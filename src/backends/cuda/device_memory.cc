#include "src/backends/cuda/device_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>

#include "src/common/fd_share.h"
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

Result<CUdeviceptr> mapSegmentsAndGrant(const CuApi* api, const std::vector<CUmemGenericAllocationHandle>& handles,
                                        const std::vector<size_t>& sizes, const std::vector<int>& devices, bool keep,
                                        size_t align) {
  const size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
  CUdeviceptr ptr = 0;
  Status st = handles.size() == sizes.size() && !handles.empty()
                  ? api->check(api->memAddressReserve(&ptr, total, align, 0, 0), "cuMemAddressReserve")
                  : invalidArgument("%zu handles for %zu segments", handles.size(), sizes.size());
  size_t mapped = 0, off = 0;
  for (; st.isOk() && mapped < handles.size(); off += sizes[mapped], ++mapped) {
    st = api->check(api->memMap(ptr + off, sizes[mapped], 0, handles[mapped], 0), "cuMemMap");
    if (!st.isOk() && handles.size() > 1)
      st = st.withContext(strPrintf("segment %zu of %zu", mapped + 1, handles.size()));
    if (!st.isOk()) break;
  }
  if (!keep) {
    for (CUmemGenericAllocationHandle h : handles) (void)api->memRelease(h);
  }
  if (st.isOk()) {
    std::vector<CuMemAccessDesc> access(devices.size());
    for (size_t i = 0; i < devices.size(); ++i) access[i].location.id = devices[i];
    st = api->check(api->memSetAccess(ptr, total, access.data(), access.size()), "cuMemSetAccess");
  }
  if (!st.isOk() && ptr != 0) {
    off = 0;
    for (size_t i = 0; i < mapped; off += sizes[i], ++i) (void)api->memUnmap(ptr + off, sizes[i]);
    (void)api->memAddressFree(ptr, total);
  }
  BRAID_RETURN_IF_ERROR(st);
  return ptr;
}

Status unmapSegmentsAndFree(const CuApi* api, CUdeviceptr ptr, const std::vector<size_t>& sizes) {
  size_t off = 0;
  for (size_t s : sizes) {
    BRAID_RETURN_IF_ERROR(api->check(api->memUnmap(ptr + off, s), "cuMemUnmap"));
    off += s;
  }
  return api->check(api->memAddressFree(ptr, off), "cuMemAddressFree");
}

uint64_t gpuPciIdOf(const CuApi* api, int device) {
  int domain = 0, bus = 0, dev = 0;
  if (api->deviceGetAttribute(&domain, static_cast<int>(CuDeviceAttr::kPciDomainId), device) != kCuSuccess ||
      api->deviceGetAttribute(&bus, static_cast<int>(CuDeviceAttr::kPciBusId), device) != kCuSuccess ||
      api->deviceGetAttribute(&dev, static_cast<int>(CuDeviceAttr::kPciDeviceId), device) != kCuSuccess) {
    return 0;
  }
  // +1: a GPU at PCI 0000:00:00 still differs from "no GPU".
  return (static_cast<uint64_t>(domain) << 32 | static_cast<uint64_t>(bus) << 8 | static_cast<uint64_t>(dev)) + 1;
}

Result<CUdeviceptr> mapAndGrant(const CuApi* api, CUmemGenericAllocationHandle handle, size_t bytes,
                                const std::vector<int>& devices, bool keep, size_t align) {
  return mapSegmentsAndGrant(api, {handle}, {bytes}, devices, keep, align);
}

Status unmapAndFree(const CuApi* api, CUdeviceptr ptr, size_t bytes) {
  return unmapSegmentsAndFree(api, ptr, {bytes});
}

bool CudaDeviceMemory::canAccessPeer(int peerDevice) const {
  return peerDevice == device_ || peerAccessBothWays(api_, device_, peerDevice);
}

Result<DeviceFifoMem> CudaDeviceMemory::mapSegments(const std::vector<CUmemGenericAllocationHandle>& handles,
                                                    const std::vector<size_t>& sizes,
                                                    const std::vector<int>& devices) const {
  const CuApi* api = api_;
  BRAID_ASSIGN_OR_RETURN(CUdeviceptr ptr, mapSegmentsAndGrant(api, handles, sizes, devices));
  CUcontext ctx = ctx_;
  DeviceFifoMem m;
  m.base = reinterpret_cast<char*>(ptr);
  m.bytes = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
  m.owner = std::shared_ptr<void>(m.base, [api, ctx, sizes](void* p) {
    ScopedContext scope(api, ctx);
    RelaxedCaptureMode relaxed(api);
    Status s = unmapSegmentsAndFree(api, reinterpret_cast<CUdeviceptr>(p), sizes);
    if (!s.isOk()) BRAID_WARN("releasing device memory at %p: %s", p, s.message().c_str());
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
  Result<DeviceFifoMem> m = mapSegments({handle}, {rounded}, devices);
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
  return importSegments({fd}, {bytes});
}

Result<DeviceFifoMem> CudaDeviceMemory::importSegments(const std::vector<int>& fds,
                                                       const std::vector<size_t>& sizes) const {
  if (fds.empty() || fds.size() != sizes.size()) {
    return invalidArgument("%zu descriptors for %zu segments", fds.size(), sizes.size());
  }
  ScopedContext scope(api_, ctx_);
  RelaxedCaptureMode relaxed(api_);  // connections are made at first use, maybe while the user captures
  std::vector<CUmemGenericAllocationHandle> handles;
  for (size_t i = 0; i < fds.size(); ++i) {
    CUmemGenericAllocationHandle handle = 0;
    Status st =
        api_->check(api_->memImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<intptr_t>(fds[i])),
                                                       kCuMemHandleTypePosixFd),
                    "cuMemImportFromShareableHandle");
    if (!st.isOk()) {
      for (CUmemGenericAllocationHandle h : handles) (void)api_->memRelease(h);
      return fds.size() > 1 ? st.withContext(strPrintf("segment %zu of %zu", i + 1, fds.size())) : st;
    }
    handles.push_back(handle);
  }
  return mapSegments(handles, sizes, {device_});  // the mappings keep the memory; the handles go
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

// Mappings the program made itself with cuMemCreate and cuMemMap, back to back from the one holding `p` (NCCL's
// rule: the mapping cuMemGetAddressRange names, and the handle of its physical memory). Peers import each handle
// whole and map it from its start, so a mapping of part of a larger allocation (cuMemMap at an offset) would show
// them the wrong bytes: the driver does not tell that offset, and NCCL makes the same assumption.
Result<ShareableRange> findProgramCuMem(const CuApi* api, const void* p, size_t bytes) {
  const auto at = reinterpret_cast<CUdeviceptr>(p);
  CUdeviceptr base = 0;
  size_t size = 0;
  if (api->memGetAddressRange(&base, &size, at) != kCuSuccess) base = 0;
  ShareableRange r;
  r.base = reinterpret_cast<const char*>(base);
  int count = 0;
  BRAID_RETURN_IF_ERROR(api->check(api->deviceGetCount(&count), "cuDeviceGetCount"));
  const CUdeviceptr end = at + bytes;
  CUdeviceptr cur = base;
  do {
    CUdeviceptr segBase = cur;
    size_t segSize = size;
    if (cur != base && (api->memGetAddressRange(&segBase, &segSize, cur) != kCuSuccess || segBase != cur)) {
      return invalidArgument("it runs past the end of its cuMem mappings, %zu bytes in", static_cast<size_t>(cur - at));
    }
    CUmemGenericAllocationHandle handle = 0;
    if (base == 0 || api->memRetainAllocationHandle(&handle, reinterpret_cast<void*>(cur)) != kCuSuccess) {
      if (cur == base) {
        return invalidArgument(
            "it is neither ncclMemAlloc nor cuMem memory (cudaMalloc memory has no cuMem handle that peers could "
            "map; allocate it with ncclMemAlloc, or cuMemCreate and cuMemMap)");
      }
      return invalidArgument("the memory %zu bytes in is not a cuMem mapping", static_cast<size_t>(cur - at));
    }
    CuMemAllocationProp prop;
    Status st =
        api->check(api->memGetAllocationPropertiesFromHandle(&prop, handle), "cuMemGetAllocationPropertiesFromHandle");
    (void)api->memRelease(handle);  // the program's mapping keeps it
    BRAID_RETURN_IF_ERROR(st);
    if (prop.location.type != CuMemLocation{}.type) {
      return invalidArgument("its cuMem allocation is not GPU memory (location type %d)", prop.location.type);
    }
    if (r.segments.empty()) {
      r.device = prop.location.id;
    } else if (prop.location.id != r.device) {
      return invalidArgument("its cuMem mappings are memory of GPUs %d and %d", r.device, prop.location.id);
    }
    if (r.segments.size() == kMaxFdsPerMessage) {
      return invalidArgument("it spans more than %zu cuMem mappings, the most braid shares", kMaxFdsPerMessage);
    }
    // Devices with read-write access to every mapping.
    std::vector<int> devices;
    for (int d = 0; d < count; ++d) {
      CuMemLocation where;
      where.id = d;
      unsigned long long flags = 0;
      const bool rw = api->memGetAccess(&flags, &where, cur) == kCuSuccess && flags == CuMemAccessDesc{}.flags;
      const bool before = r.segments.empty() || std::find(r.devices.begin(), r.devices.end(), d) != r.devices.end();
      if (rw && before) devices.push_back(d);
    }
    r.devices = std::move(devices);
    r.segments.push_back(segSize);
    cur = segBase + segSize;
  } while (cur < end);
  r.bytes = static_cast<size_t>(cur - base);
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
        r.segments.push_back(r.bytes);
        return r;
      }
    }
  }
  return findProgramCuMem(api, p, bytes);
}

Result<std::vector<int>> exportShareable(const CuApi* api, const ShareableRange& range) {
  std::vector<int> fds;
  auto fail = [&](Status st) {
    for (int fd : fds) close(fd);
    return st;
  };
  CUmemGenericAllocationHandle mine = 0;
  {
    std::lock_guard<std::mutex> lock(gAllocMu);
    auto it = gAllocs.find(reinterpret_cast<CUdeviceptr>(range.base));
    if (it != gAllocs.end()) mine = it->second.handle;  // valid while the allocation lives (the caller's part)
  }
  size_t offset = 0;
  for (size_t seg : range.segments) {
    CUmemGenericAllocationHandle handle = mine;
    if (handle == 0) {
      // The program's own mapping: its handle, for as long as the export takes.
      void* at = const_cast<char*>(range.base + offset);
      Status st = api->check(api->memRetainAllocationHandle(&handle, at), "cuMemRetainAllocationHandle");
      if (!st.isOk()) return fail(st);
      CuMemAllocationProp prop;
      st = api->check(api->memGetAllocationPropertiesFromHandle(&prop, handle),
                      "cuMemGetAllocationPropertiesFromHandle");
      if (st.isOk() && (prop.requestedHandleTypes & kCuMemHandleTypePosixFd) == 0) {
        st = invalidArgument(
            "its cuMem allocation%s was made without CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR in "
            "requestedHandleTypes, so other processes cannot map it",
            offset == 0 ? "" : strPrintf(" %zu bytes in", offset).c_str());
      }
      if (!st.isOk()) {
        (void)api->memRelease(handle);
        return fail(st);
      }
    }
    int fd = -1;
    Status st = api->check(api->memExportToShareableHandle(&fd, handle, kCuMemHandleTypePosixFd, 0),
                           "cuMemExportToShareableHandle");
    if (handle != mine) (void)api->memRelease(handle);
    if (!st.isOk()) return fail(st);
    fds.push_back(fd);
    offset += seg;
  }
  return fds;
}

std::string encodeSegments(const std::vector<size_t>& sizes) {
  std::string out;
  for (size_t s : sizes) {
    const uint64_t v = s;
    out.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  return out;
}

bool decodeSegments(const std::string& in, size_t count, std::vector<size_t>* sizes) {
  if (in.size() != count * sizeof(uint64_t)) return false;
  sizes->resize(count);
  for (size_t i = 0; i < count; ++i) {
    uint64_t v = 0;
    memcpy(&v, in.data() + i * sizeof(v), sizeof(v));
    (*sizes)[i] = static_cast<size_t>(v);
  }
  return true;
}

}  // namespace braid
