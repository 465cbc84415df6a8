// The strict fake CUDA driver's peer access and virtual memory management (cuMem*), as braid's p2p transport uses
// them. Physical memory (cuMemCreate) is a memfd named after its device, so a descriptor exported with
// CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR and passed to another process (SCM_RIGHTS) imports there as the same
// pages, as on a GPU. New physical memory holds the poison byte (the driver does not clear it).
//
// The driver's rules, checked: sizes and offsets are multiples of the granularity (2 MiB, an H100's); a mapping
// lies inside one reservation and one handle; a mapping is inaccessible (PROT_NONE, and a kernel given it fails)
// until cuMemSetAccess names the device; only exportable handles export; cuMemAddressFree of a range with mappings
// and cuMemFree of a mapping fail; cuMemRetainAllocationHandle adds a reference that cuMemRelease drops. The
// program's queries (cuMemGetAddressRange: the mapping; cuMemGetAllocationPropertiesFromHandle; cuMemGetAccess)
// answer from the same records, and copies may run over mappings back to back. Peer access: cuDeviceCanAccessPeer says
// 1 for distinct devices (0 for all with BRAID_FAKE_CUDA_NO_P2P=1); a kernel reaches another device's cuMemAlloc memory
// only after cuCtxEnablePeerAccess from the launching device's context.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/fake_cuda/fake_cuda.h"

using namespace fakecuda;

namespace {

constexpr CUresult kPeerUnsupported = 217, kPeerAlreadyEnabled = 704, kPeerNotEnabled = 705;

// CUmemLocation and CUmemAllocationProp, with the driver's layout (cuda.h).
struct Location {
  int type;  // CU_MEM_LOCATION_TYPE_DEVICE = 1
  int id;
};
struct AllocProp {
  int type;                  // CU_MEM_ALLOCATION_TYPE_PINNED = 1
  int requestedHandleTypes;  // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
  Location location;
  void* win32HandleMetaData;
  unsigned char compressionType, gpuDirectRDMACapable;
  unsigned short usage;
  unsigned char reserved[4];
};
struct AccessDesc {
  Location location;
  int flags;  // CU_MEM_ACCESS_FLAGS_PROT_NONE 0, READ 1, READWRITE 3
};

bool noP2p() {
  const char* v = getenv("BRAID_FAKE_CUDA_NO_P2P");
  return v != nullptr && strcmp(v, "1") == 0;
}

CUresult checkProp(const State& s, const void* p) {
  if (p == nullptr) return kInvalidValue;
  const auto* prop = static_cast<const AllocProp*>(p);
  if (prop->type != 1 || prop->location.type != 1) return kInvalidValue;
  if (prop->location.id < 0 || prop->location.id >= s.count) return kInvalidDevice;
  if ((prop->requestedHandleTypes & ~kHandleTypeFd) != 0) return kNotSupported;
  return kSuccess;
}

// The reservation that holds [p, p + n), or s.reserved.end().
std::map<CUdeviceptr, size_t>::iterator reservationOf(State& s, CUdeviceptr p, size_t n) {
  auto it = s.reserved.upper_bound(p);
  if (it == s.reserved.begin()) return s.reserved.end();
  --it;
  if (p < it->first || n > it->first + it->second - p) return s.reserved.end();
  return it;
}

void dropPhys(State& s, unsigned long long h) {
  auto it = s.phys.find(h);
  if (it == s.phys.end() || !it->second.released || it->second.mappings > 0) return;
  close(it->second.fd);
  s.phys.erase(it);
}

}  // namespace

// CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED (2) follows cuDeviceCanAccessPeer; NATIVE_ATOMIC_SUPPORTED (3) too,
// unless BRAID_FAKE_CUDA_NO_P2P_ATOMICS=1 (a PCIe system whose links carry no atomics); PERFORMANCE_RANK (1) is 0.
FAKE_API CUresult cuDeviceGetP2PAttribute(int* value, int attrib, CUdevice src, CUdevice dst) {
  FAKE_ENTER("cuDeviceGetP2PAttribute");
  FAKE_REQUIRE_INIT();
  if (value == nullptr || attrib < 1 || attrib > 4) return kInvalidValue;
  if (src < 0 || src >= s.count || dst < 0 || dst >= s.count || src == dst) return kInvalidDevice;
  const char* v = getenv("BRAID_FAKE_CUDA_NO_P2P_ATOMICS");
  const bool access = !noP2p();
  *value = attrib == 1 ? 0 : attrib == 3 ? (access && !(v != nullptr && strcmp(v, "1") == 0)) : access;
  return kSuccess;
}

FAKE_API CUresult cuDeviceCanAccessPeer(int* canAccess, CUdevice dev, CUdevice peer) {
  FAKE_ENTER("cuDeviceCanAccessPeer");
  FAKE_REQUIRE_INIT();
  if (canAccess == nullptr) return kInvalidValue;
  if (dev < 0 || dev >= s.count || peer < 0 || peer >= s.count) return kInvalidDevice;
  *canAccess = dev != peer && !noP2p() ? 1 : 0;
  return kSuccess;
}

FAKE_API CUresult cuCtxEnablePeerAccess(void* peerCtx, unsigned flags) {
  FAKE_ENTER("cuCtxEnablePeerAccess");
  FAKE_REQUIRE_INIT();
  if (tlsCurrent == nullptr) return kInvalidContext;
  if (flags != 0) return kInvalidValue;
  const auto* peer = static_cast<const Context*>(peerCtx);
  int peerDev = -1;
  for (size_t d = 0; d < s.devices.size(); ++d) {
    if (&s.devices[d].primary == peer) peerDev = static_cast<int>(d);
  }
  if (peerDev < 0) return kInvalidContext;
  if (peerDev == tlsCurrent->device) return kInvalidDevice;
  if (noP2p()) return kPeerUnsupported;
  bool& on = s.peerAccess[{tlsCurrent->device, peerDev}];
  if (on) return kPeerAlreadyEnabled;
  on = true;
  return kSuccess;
}

FAKE_API CUresult cuCtxDisablePeerAccess(void* peerCtx) {
  FAKE_ENTER("cuCtxDisablePeerAccess");
  FAKE_REQUIRE_INIT();
  if (tlsCurrent == nullptr) return kInvalidContext;
  for (size_t d = 0; d < s.devices.size(); ++d) {
    if (&s.devices[d].primary != peerCtx) continue;
    auto it = s.peerAccess.find({tlsCurrent->device, static_cast<int>(d)});
    if (it == s.peerAccess.end() || !it->second) return kPeerNotEnabled;
    it->second = false;
    return kSuccess;
  }
  return kInvalidContext;
}

FAKE_API CUresult cuMemGetAllocationGranularity(size_t* granularity, const void* prop, int option) {
  FAKE_ENTER("cuMemGetAllocationGranularity");
  FAKE_REQUIRE_INIT();
  if (granularity == nullptr || (option != 0 && option != 1)) return kInvalidValue;
  if (CUresult r = checkProp(s, prop); r != kSuccess) return r;
  *granularity = kGranularity;
  return kSuccess;
}

FAKE_API CUresult cuMemCreate(unsigned long long* handle, size_t bytes, const void* prop, unsigned long long flags) {
  FAKE_ENTER("cuMemCreate");
  FAKE_REQUIRE_INIT();
  FAKE_REQUIRE_HEALTHY();
  if (handle == nullptr || flags != 0 || bytes == 0 || bytes % kGranularity != 0) return kInvalidValue;
  if (CUresult r = checkProp(s, prop); r != kSuccess) return r;
  const auto* p = static_cast<const AllocProp*>(prop);
  char name[64];
  snprintf(name, sizeof(name), "fake-cuda-vmm-dev%d", p->location.id);
  const int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return kOutOfMemory;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    return kOutOfMemory;
  }
  // The driver hands out memory as it was: poison, not zeros.
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    close(fd);
    return kOutOfMemory;
  }
  memset(m, kPoison, bytes);
  munmap(m, bytes);
  PhysMem pm;
  pm.fd = fd;
  pm.bytes = bytes;
  pm.device = p->location.id;
  pm.exportable = (p->requestedHandleTypes & kHandleTypeFd) != 0;
  *handle = s.nextHandle++;
  s.phys[*handle] = pm;
  return kSuccess;
}

FAKE_API CUresult cuMemRelease(unsigned long long handle) {
  FAKE_ENTER("cuMemRelease");
  FAKE_REQUIRE_INIT();
  if (CUresult r = kSuccess; releaseMulticast(s, handle, &r)) return r;
  auto it = s.phys.find(handle);
  if (it == s.phys.end() || it->second.released) return kInvalidValue;
  // Mappings keep the memory until unmapped, as on the driver.
  if (--it->second.refs == 0) it->second.released = true;
  dropPhys(s, handle);
  return kSuccess;
}

FAKE_API CUresult cuMemExportToShareableHandle(void* out, unsigned long long handle, int type,
                                               unsigned long long flags) {
  FAKE_ENTER("cuMemExportToShareableHandle");
  FAKE_REQUIRE_INIT();
  if (out == nullptr || flags != 0 || type != kHandleTypeFd) return kInvalidValue;
  if (s.multicast.count(handle) != 0) return kNotSupported;  // multicast across processes is not modelled
  auto it = s.phys.find(handle);
  if (it == s.phys.end() || it->second.released) return kInvalidValue;
  if (!it->second.exportable) return kNotPermitted;  // not created with the POSIX fd handle type
  const int fd = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return kOutOfMemory;
  *static_cast<int*>(out) = fd;
  return kSuccess;
}

FAKE_API CUresult cuMemImportFromShareableHandle(unsigned long long* handle, void* osHandle, int type) {
  FAKE_ENTER("cuMemImportFromShareableHandle");
  FAKE_REQUIRE_INIT();
  if (handle == nullptr || type != kHandleTypeFd) return kInvalidValue;
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(osHandle));
  // Only a descriptor this fake exported is physical memory: its name says so, and which device holds it.
  char link[64], target[256];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof(target) - 1);
  if (n <= 0) return kInvalidValue;
  target[n] = '\0';
  int device = -1;
  if (sscanf(target, "/memfd:fake-cuda-vmm-dev%d", &device) != 1 || device < 0 || device >= s.count) {
    return kInvalidValue;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) return kInvalidValue;
  const int mine = fcntl(fd, F_DUPFD_CLOEXEC, 0);  // the caller may close its descriptor at once
  if (mine < 0) return kOutOfMemory;
  PhysMem pm;
  pm.fd = mine;
  pm.bytes = static_cast<size_t>(st.st_size);
  pm.device = device;
  pm.exportable = true;
  *handle = s.nextHandle++;
  s.phys[*handle] = pm;
  return kSuccess;
}

// The program's side of its own allocations: which mapping holds an address, its physical memory's handle (one more
// reference, released with cuMemRelease), how that memory was created, and who may access it.
FAKE_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  FAKE_ENTER("cuMemGetAddressRange");
  FAKE_REQUIRE_INIT();
  auto it = findAllocation(s, ptr);
  if (it == s.allocations.end() || it->second.pinned || it->second.multicast) return kNotFound;
  if (base != nullptr) *base = it->first;
  if (size != nullptr) *size = it->second.bytes;
  return kSuccess;
}

FAKE_API CUresult cuMemRetainAllocationHandle(unsigned long long* handle, void* addr) {
  FAKE_ENTER("cuMemRetainAllocationHandle");
  FAKE_REQUIRE_INIT();
  if (handle == nullptr) return kInvalidValue;
  auto it = findAllocation(s, reinterpret_cast<CUdeviceptr>(addr));
  // cuMemAlloc memory has no handle: CUDA_ERROR_INVALID_VALUE, as on the driver.
  if (it == s.allocations.end() || !it->second.vmm || it->second.multicast) return kInvalidValue;
  auto p = s.phys.find(it->second.handle);
  if (p == s.phys.end()) return kInvalidValue;
  ++p->second.refs;
  p->second.released = false;
  *handle = it->second.handle;
  return kSuccess;
}

FAKE_API CUresult cuMemGetAllocationPropertiesFromHandle(void* prop, unsigned long long handle) {
  FAKE_ENTER("cuMemGetAllocationPropertiesFromHandle");
  FAKE_REQUIRE_INIT();
  auto it = s.phys.find(handle);
  if (prop == nullptr || it == s.phys.end() || it->second.released) return kInvalidValue;
  AllocProp out{};
  out.type = 1;
  out.requestedHandleTypes = it->second.exportable ? kHandleTypeFd : 0;
  out.location = Location{1, it->second.device};
  memcpy(prop, &out, sizeof(out));
  return kSuccess;
}

FAKE_API CUresult cuMemGetAccess(unsigned long long* flags, const void* location, CUdeviceptr ptr) {
  FAKE_ENTER("cuMemGetAccess");
  FAKE_REQUIRE_INIT();
  if (flags == nullptr || location == nullptr) return kInvalidValue;
  const auto* loc = static_cast<const Location*>(location);
  if (loc->type != 1) return kInvalidValue;
  if (loc->id < 0 || loc->id >= s.count) return kInvalidDevice;
  auto it = findAllocation(s, ptr);
  if (it == s.allocations.end() || !it->second.vmm) return kInvalidValue;
  *flags = (it->second.accessMask >> loc->id & 1u) != 0 ? 3 : 0;
  return kSuccess;
}

FAKE_API CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t bytes, size_t align, CUdeviceptr addr,
                                      unsigned long long flags) {
  FAKE_ENTER("cuMemAddressReserve");
  FAKE_REQUIRE_INIT();
  if (ptr == nullptr || flags != 0 || bytes == 0 || bytes % kGranularity != 0) return kInvalidValue;
  if (align == 0) align = kGranularity;
  if ((align & (align - 1)) != 0) return kInvalidValue;
  (void)addr;  // a hint, which the driver may ignore too
  void* m = mmap(nullptr, bytes + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return kOutOfMemory;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(m);
  const uintptr_t at = (lo + align - 1) / align * align;
  if (at > lo) munmap(m, at - lo);
  if (at + bytes < lo + bytes + align) munmap(reinterpret_cast<void*>(at + bytes), lo + bytes + align - at - bytes);
  s.reserved[at] = bytes;
  *ptr = at;
  return kSuccess;
}

FAKE_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t bytes) {
  FAKE_ENTER("cuMemAddressFree");
  FAKE_REQUIRE_INIT();
  auto it = s.reserved.find(ptr);
  if (it == s.reserved.end() || it->second != bytes) return kInvalidValue;
  auto m = s.allocations.lower_bound(ptr);
  if (m != s.allocations.end() && m->first < ptr + bytes) return kInvalidValue;  // still mapped
  munmap(reinterpret_cast<void*>(ptr), bytes);
  s.reserved.erase(it);
  return kSuccess;
}

FAKE_API CUresult cuMemMap(CUdeviceptr ptr, size_t bytes, size_t offset, unsigned long long handle,
                           unsigned long long flags) {
  FAKE_ENTER("cuMemMap");
  FAKE_REQUIRE_INIT();
  if (flags != 0 || bytes == 0 || bytes % kGranularity != 0 || offset % kGranularity != 0) return kInvalidValue;
  if (s.multicast.count(handle) != 0) return mapMulticast(s, ptr, bytes, offset, handle);
  auto h = s.phys.find(handle);
  if (h == s.phys.end() || h->second.released) return kInvalidHandle;
  if (offset > h->second.bytes || bytes > h->second.bytes - offset) return kInvalidValue;
  if (reservationOf(s, ptr, bytes) == s.reserved.end()) return kInvalidValue;
  if (findAllocation(s, ptr) != s.allocations.end()) return kInvalidValue;  // already mapped there
  auto next = s.allocations.lower_bound(ptr);
  if (next != s.allocations.end() && next->first < ptr + bytes) return kInvalidValue;
  void* m = mmap(reinterpret_cast<void*>(ptr), bytes, PROT_NONE, MAP_SHARED | MAP_FIXED, h->second.fd,
                 static_cast<off_t>(offset));
  if (m == MAP_FAILED) return kOutOfMemory;
  Allocation a{bytes, s.nextBufferId++, h->second.device};
  a.vmm = true;
  a.handle = handle;
  s.allocations[ptr] = a;
  ++h->second.mappings;
  return kSuccess;
}

FAKE_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t bytes) {
  FAKE_ENTER("cuMemUnmap");
  FAKE_REQUIRE_INIT();
  auto it = s.allocations.find(ptr);
  if (it == s.allocations.end() || !it->second.vmm || it->second.bytes != bytes) return kInvalidValue;
  if (it->second.multicast) {
    unmapMulticast(s, it->second);
    s.allocations.erase(it);
    return kSuccess;
  }
  // Memory still bound to a multicast object is unbound first (the driver's order; NCCL's too).
  for (const auto& kv : s.multicast) {
    for (const McBinding& b : kv.second.bindings) {
      if (b.uc < ptr + bytes && ptr < b.uc + b.bytes) return kNotPermitted;
    }
  }
  // The range stays reserved: anonymous, inaccessible pages in place of the mapping.
  mmap(reinterpret_cast<void*>(ptr), bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  const unsigned long long h = it->second.handle;
  s.allocations.erase(it);
  auto p = s.phys.find(h);
  if (p != s.phys.end()) --p->second.mappings;
  dropPhys(s, h);
  return kSuccess;
}

FAKE_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t bytes, const void* desc, size_t count) {
  FAKE_ENTER("cuMemSetAccess");
  FAKE_REQUIRE_INIT();
  if (desc == nullptr || count == 0) return kInvalidValue;
  const auto* d = static_cast<const AccessDesc*>(desc);
  for (size_t i = 0; i < count; ++i) {
    if (d[i].location.type != 1 || (d[i].flags != 0 && d[i].flags != 1 && d[i].flags != 3)) return kInvalidValue;
    if (d[i].location.id < 0 || d[i].location.id >= s.count) return kInvalidDevice;
  }
  // The range must be covered by mappings, back to back.
  std::vector<Allocation*> covered;
  for (CUdeviceptr at = ptr; at < ptr + bytes;) {
    auto it = s.allocations.find(at);
    if (it == s.allocations.end() || !it->second.vmm) return kInvalidValue;
    covered.push_back(&it->second);
    at += it->second.bytes;
  }
  for (Allocation* a : covered) {
    for (size_t i = 0; i < count; ++i) {
      const unsigned bit = 1u << d[i].location.id;
      a->accessMask = d[i].flags == 0 ? a->accessMask & ~bit : a->accessMask | bit;
    }
  }
  // A multicast mapping stays closed to plain loads and stores: the emulator's multimem operations go through
  // resolveMulticast.
  if (covered.front()->multicast) return kSuccess;
  // Host threads run the emulated kernels, so the pages open for them once any device may touch them.
  const int prot = covered.front()->accessMask != 0 ? PROT_READ | PROT_WRITE : PROT_NONE;
  if (mprotect(reinterpret_cast<void*>(ptr), bytes, prot) != 0) return kInvalidValue;
  return kSuccess;
}
