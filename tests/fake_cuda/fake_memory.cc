// The strict fake CUDA driver's memory: cuMemAlloc/cuMemFree (addresses reused last-freed-first, freed bytes
// poisoned, buffer ids never reused, frees wait for the device's queued work), pointer attributes, and
// stream-ordered copies and memsets with their ranges checked. fake_driver.cc says what the fake models.
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/fake_cuda/fake_cuda.h"

using namespace fakecuda;

namespace {

// BRAID_FAKE_CUDA_P2P_DROP="1>0,2>1" (or "all"): copies from a stream of device a into memory of device b vanish,
// as on a PCIe path that drops peer writes.
bool p2pDrops(int from, int to) {
  if (from == to) return false;
  const char* v = getenv("BRAID_FAKE_CUDA_P2P_DROP");
  if (v == nullptr || *v == '\0') return false;
  if (strcmp(v, "all") == 0) return true;
  const std::string want = std::to_string(from) + ">" + std::to_string(to);
  const std::string list = std::string(",") + v + ",";
  return list.find("," + want + ",") != std::string::npos;
}

}  // namespace

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  FAKE_ENTER("cuMemAlloc");
  FAKE_REQUIRE_INIT();
  if (CUresult r = captureForbids(s); r != kSuccess) return r;
  if (tlsCurrent == nullptr) return kInvalidContext;
  FAKE_REQUIRE_HEALTHY();
  if (dptr == nullptr || bytes == 0) return kInvalidValue;
  if (bytes > kRegionBytes) return kOutOfMemory;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  Device& d = s.devices[static_cast<size_t>(tlsCurrent->device)];
  CUdeviceptr at = 0;
  // The most recently freed range that fits comes back first, as a caching allocator's would.
  for (size_t i = d.freed.size(); i-- > 0;) {
    if (d.freed[i].second == rounded) {
      at = d.freed[i].first;
      d.freed.erase(d.freed.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (at == 0) {
    if (rounded > kRegionBytes - d.used) return kOutOfMemory;
    char* p = d.base + d.used;
    // The pages under the new range become usable (mprotect takes whole pages; a page may hold several buffers).
    const uintptr_t page = 4096;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p) / page * page;
    const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + rounded + page - 1) / page * page;
    if (mprotect(reinterpret_cast<void*>(lo), hi - lo, PROT_READ | PROT_WRITE) != 0) return kOutOfMemory;
    d.used += rounded;
    at = reinterpret_cast<CUdeviceptr>(p);
  }
  s.allocations[at] = Allocation{rounded, s.nextBufferId++, tlsCurrent->device};
  *dptr = at;
  return kSuccess;
}

FAKE_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  FAKE_ENTER("cuMemFree");
  FAKE_REQUIRE_INIT();
  if (CUresult r = captureForbids(s); r != kSuccess) return r;
  if (tlsCurrent == nullptr) return kInvalidContext;
  auto it = s.allocations.find(dptr);
  // Never allocated, freed twice, inside a buffer, or pinned host memory (cuMemFreeHost's).
  if (it == s.allocations.end() || it->second.pinned || it->second.vmm) return kInvalidValue;
  // Like cudaFree: the device's queued work finishes first.
  const int device = it->second.device;
  std::vector<Dep> pending;
  if (s.devices[static_cast<size_t>(device)].legacy) {
    const auto& l = s.devices[static_cast<size_t>(device)].legacy;
    pending.emplace_back(l, l->enqueued);
  }
  for (auto& kv : s.streams) {
    if (kv.second->device == device) pending.emplace_back(kv.second, kv.second->enqueued);
  }
  lock.unlock();
  for (const Dep& d : pending) waitFor(d);
  lock.lock();
  it = s.allocations.find(dptr);
  if (it == s.allocations.end()) return kInvalidValue;  // freed by another thread meanwhile
  memset(reinterpret_cast<void*>(dptr), kPoison, it->second.bytes);
  s.devices[static_cast<size_t>(it->second.device)].freed.emplace_back(dptr, it->second.bytes);
  s.allocations.erase(it);
  return kSuccess;
}

FAKE_API CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  FAKE_ENTER("cuPointerGetAttribute");
  FAKE_REQUIRE_INIT();
  if (data == nullptr) return kInvalidValue;
  auto it = findAllocation(s, ptr);
  if (it == s.allocations.end()) return kInvalidValue;  // not memory the driver knows (host memory, freed)
  const Allocation& a = it->second;
  switch (attribute) {
    case 1:  // context
      *static_cast<void**>(data) = &s.devices[static_cast<size_t>(a.device)].primary;
      return kSuccess;
    case 2:  // memory type: device, or host for pinned memory
      *static_cast<unsigned*>(data) = a.pinned ? 1 : 2;
      return kSuccess;
    case 7:  // buffer id
      *static_cast<unsigned long long*>(data) = a.bufferId;
      return kSuccess;
    case 9:  // device ordinal
      *static_cast<int*>(data) = a.device;
      return kSuccess;
    case 11:  // range start
      *static_cast<CUdeviceptr*>(data) = it->first;
      return kSuccess;
    case 12:  // range size
      *static_cast<size_t*>(data) = a.bytes;
      return kSuccess;
    default:
      return kInvalidValue;
  }
}

FAKE_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, void* hStream) {
  FAKE_ENTER("cuMemcpyAsync");
  FAKE_REQUIRE_INIT();
  FAKE_REQUIRE_HEALTHY();
  std::shared_ptr<Stream> st;
  if (CUresult r = resolveStream(s, hStream, &st); r != kSuccess) return r;
  if (bytes == 0) return kSuccess;
  if (dst == 0 || src == 0 || !rangeOk(s, dst, bytes, false) || !rangeOk(s, src, bytes, false)) return kInvalidValue;
  // A copy into another device's memory crosses the P2P path, which BRAID_FAKE_CUDA_P2P_DROP may break.
  auto to = findAllocation(s, dst);
  if (to != s.allocations.end() && !to->second.pinned && p2pDrops(st->device, to->second.device)) {
    enqueue(s, st, nullptr);
    return kSuccess;
  }
  enqueue(s, st,
          [dst, src, bytes] { memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes); });
  return kSuccess;
}

FAKE_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, void* hStream) {
  FAKE_ENTER("cuMemsetD8Async");
  FAKE_REQUIRE_INIT();
  FAKE_REQUIRE_HEALTHY();
  std::shared_ptr<Stream> st;
  if (CUresult r = resolveStream(s, hStream, &st); r != kSuccess) return r;
  if (n == 0) return kSuccess;
  if (!rangeOk(s, dst, n, true)) return kInvalidValue;  // device memory only, within one allocation
  enqueue(s, st, [dst, value, n] { memset(reinterpret_cast<void*>(dst), value, n); });
  return kSuccess;
}

// Page-locked host memory, mapped into the device's address space at the same address (unified addressing).
// Flags: CU_MEMHOSTALLOC_PORTABLE 1, DEVICEMAP 2, WRITECOMBINED 4.
FAKE_API CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned flags) {
  FAKE_ENTER("cuMemHostAlloc");
  FAKE_REQUIRE_INIT();
  if (CUresult r = captureForbids(s); r != kSuccess) return r;
  if (tlsCurrent == nullptr) return kInvalidContext;
  FAKE_REQUIRE_HEALTHY();
  if (pp == nullptr || bytes == 0 || (flags & ~7u) != 0) return kInvalidValue;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return kOutOfMemory;
  Allocation a{bytes, s.nextBufferId++, tlsCurrent->device};
  a.pinned = true;
  s.allocations[reinterpret_cast<CUdeviceptr>(p)] = a;
  *pp = p;
  return kSuccess;
}

FAKE_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned flags) {
  FAKE_ENTER("cuMemHostGetDevicePointer");
  FAKE_REQUIRE_INIT();
  if (pdptr == nullptr || flags != 0) return kInvalidValue;
  auto it = findAllocation(s, reinterpret_cast<CUdeviceptr>(p));
  if (it == s.allocations.end() || !it->second.pinned) return kInvalidValue;  // not page-locked memory
  *pdptr = reinterpret_cast<CUdeviceptr>(p);
  return kSuccess;
}

FAKE_API CUresult cuMemFreeHost(void* p) {
  FAKE_ENTER("cuMemFreeHost");
  FAKE_REQUIRE_INIT();
  if (CUresult r = captureForbids(s); r != kSuccess) return r;
  auto it = s.allocations.find(reinterpret_cast<CUdeviceptr>(p));
  if (it == s.allocations.end() || !it->second.pinned || it->second.registered) return kInvalidValue;
  const size_t bytes = it->second.bytes;
  s.allocations.erase(it);
  munmap(p, bytes);
  return kSuccess;
}

// The program's own memory made page-locked and mapped (CU_MEMHOSTREGISTER_PORTABLE 1, DEVICEMAP 2, IOMEMORY 4,
// READ_ONLY 8). A range that overlaps memory the driver already knows is refused (the driver says
// CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712, for registered memory).
FAKE_API CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned flags) {
  FAKE_ENTER("cuMemHostRegister");
  FAKE_REQUIRE_INIT();
  if (CUresult r = captureForbids(s); r != kSuccess) return r;
  if (tlsCurrent == nullptr) return kInvalidContext;
  if (p == nullptr || bytes == 0 || (flags & ~15u) != 0) return kInvalidValue;
  const auto at = reinterpret_cast<CUdeviceptr>(p);
  auto next = s.allocations.lower_bound(at);
  if (findAllocation(s, at) != s.allocations.end() || (next != s.allocations.end() && next->first < at + bytes)) {
    return 712;
  }
  Allocation a{bytes, s.nextBufferId++, tlsCurrent->device};
  a.pinned = true;
  a.registered = true;
  s.allocations[at] = a;
  return kSuccess;
}

FAKE_API CUresult cuMemHostUnregister(void* p) {
  FAKE_ENTER("cuMemHostUnregister");
  FAKE_REQUIRE_INIT();
  auto it = s.allocations.find(reinterpret_cast<CUdeviceptr>(p));
  // CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED (713) for memory that was not registered there.
  if (it == s.allocations.end() || !it->second.registered) return 713;
  s.allocations.erase(it);
  return kSuccess;
}
