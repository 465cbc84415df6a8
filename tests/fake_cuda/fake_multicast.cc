// The strict fake CUDA driver's multicast objects (NVLS), as braid's direct collectives use them: create, add
// every device, bind each device's memory by address, map the object into a reserved range, give devices access;
// unbind, unmap, release. The emulator's multimem operations reach the bound buffers through resolveMulticast.
//
// The driver's rules, checked: sizes, offsets and bound addresses are multiples of the granularity (2 MiB); every
// device is added before anything is bound or mapped (the driver blocks until then; the fake refuses, so code that
// skips the barrier between the two fails here instead of hanging on a GPU); a device is added once, and at most
// numDevices of them; only memory of an added device binds, from a cuMem mapping (not cuMemAlloc); an exportable
// object binds only exportable memory; a multicast mapping is never reachable by plain loads or stores.
//
// What the fake does not model: sharing an object with another process (cuMemExportToShareableHandle on it returns
// CUDA_ERROR_NOT_SUPPORTED), so braid's multi-process multicast takes its fallback here.
//
// Knobs: BRAID_FAKE_CUDA_NO_MULTICAST=1 (the attribute says 0 and cuMulticastCreate fails with
// CUDA_ERROR_NOT_SUPPORTED: no NVSwitch); BRAID_FAKE_CUDA_MC_SLOTS=N live objects at most (default 128, as the
// driver's limit in NCCL issue #2077; CUDA_ERROR_OUT_OF_MEMORY past it); BRAID_FAKE_CUDA_MC_SEED=S seeds the order
// in which each object's switch combines its devices' values (a fresh permutation per object).
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>

#include "tests/fake_cuda/fake_cuda.h"

using namespace fakecuda;

namespace {

// CUmulticastObjectProp, with the driver's layout (cuda.h).
struct McProp {
  unsigned numDevices;
  size_t size;
  unsigned long long handleTypes;
  unsigned long long flags;
};

long envLong(const char* name, long dflt) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? strtol(v, nullptr, 10) : dflt;
}

bool aligned(size_t v) {
  return v % kGranularity == 0;
}

Multicast* live(State& s, unsigned long long h) {
  auto it = s.multicast.find(h);
  return it == s.multicast.end() || it->second.released ? nullptr : &it->second;
}

bool added(const Multicast& m, int dev) {
  for (int d : m.devices) {
    if (d == dev) return true;
  }
  return false;
}

}  // namespace

namespace fakecuda {

bool noMulticast() {
  const char* v = getenv("BRAID_FAKE_CUDA_NO_MULTICAST");
  return v != nullptr && strcmp(v, "1") == 0;
}

CUresult mapMulticast(State& s, CUdeviceptr ptr, size_t bytes, size_t offset, unsigned long long handle) {
  Multicast* m = live(s, handle);
  if (m == nullptr) return kInvalidHandle;
  if (m->devices.size() < m->numDevices) return kNotPermitted;  // the driver would block until all are added
  if (offset > m->size || bytes > m->size - offset) return kInvalidValue;
  auto r = s.reserved.upper_bound(ptr);
  if (r == s.reserved.begin()) return kInvalidValue;
  --r;
  if (ptr < r->first || bytes > r->first + r->second - ptr) return kInvalidValue;
  auto next = s.allocations.lower_bound(ptr);
  if (findAllocation(s, ptr) != s.allocations.end() || (next != s.allocations.end() && next->first < ptr + bytes)) {
    return kInvalidValue;
  }
  // The pages stay as reserved (inaccessible): only multimem operations reach the bound buffers.
  Allocation a{bytes, s.nextBufferId++, m->devices.front()};
  a.vmm = true;
  a.handle = handle;
  a.multicast = true;
  a.mcOffset = offset;
  s.allocations[ptr] = a;
  ++m->mappings;
  return kSuccess;
}

void unmapMulticast(State& s, const Allocation& a) {
  auto it = s.multicast.find(a.handle);
  if (it == s.multicast.end()) return;
  --it->second.mappings;
  if (it->second.released && it->second.mappings == 0) s.multicast.erase(it);
}

bool releaseMulticast(State& s, unsigned long long handle, CUresult* result) {
  auto it = s.multicast.find(handle);
  if (it == s.multicast.end()) return false;
  if (it->second.released) {
    *result = kInvalidValue;
    return true;
  }
  it->second.released = true;  // mappings keep it until unmapped, as on the driver
  if (it->second.mappings == 0) s.multicast.erase(it);
  *result = kSuccess;
  return true;
}

std::atomic<unsigned long long> gResolves{0};

int resolveMulticast(const void* mc, size_t bytes, int device, void** uc, int max) {
  gResolves.fetch_add(1, std::memory_order_relaxed);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const auto at = reinterpret_cast<CUdeviceptr>(mc);
  auto a = findAllocation(s, at);
  if (a == s.allocations.end() || !a->second.multicast) return 0;
  if (bytes > a->first + a->second.bytes - at) return 0;
  if (device < 0 || (a->second.accessMask >> device & 1u) == 0) return 0;
  auto it = s.multicast.find(a->second.handle);
  if (it == s.multicast.end()) return 0;
  const Multicast& m = it->second;
  const size_t off = a->second.mcOffset + (at - a->first);
  if (static_cast<int>(m.order.size()) > max) return 0;
  int n = 0;
  for (int slot : m.order) {
    const int dev = m.devices[static_cast<size_t>(slot)];
    const McBinding* b = nullptr;
    for (const McBinding& c : m.bindings) {
      if (c.device == dev && c.mcOffset <= off && off + bytes <= c.mcOffset + c.bytes) b = &c;
    }
    if (b == nullptr) return 0;  // a device bound nothing here: a GPU's result is undefined, the fake's an error
    uc[n++] = reinterpret_cast<void*>(b->uc + (off - b->mcOffset));
  }
  return n;
}

}  // namespace fakecuda

FAKE_API CUresult cuMulticastGetGranularity(size_t* granularity, const void* prop, int option) {
  FAKE_ENTER("cuMulticastGetGranularity");
  FAKE_REQUIRE_INIT();
  if (granularity == nullptr || prop == nullptr || (option != 0 && option != 1)) return kInvalidValue;
  const auto* p = static_cast<const McProp*>(prop);
  if (p->numDevices == 0 || p->numDevices > static_cast<unsigned>(s.count)) return kInvalidValue;
  *granularity = kGranularity;
  return kSuccess;
}

FAKE_API CUresult cuMulticastCreate(unsigned long long* mcHandle, const void* prop) {
  FAKE_ENTER("cuMulticastCreate");
  FAKE_REQUIRE_INIT();
  FAKE_REQUIRE_HEALTHY();
  if (mcHandle == nullptr || prop == nullptr) return kInvalidValue;
  if (noMulticast()) return kNotSupported;
  const auto* p = static_cast<const McProp*>(prop);
  if (p->numDevices == 0 || p->numDevices > static_cast<unsigned>(s.count)) return kInvalidValue;
  if (p->size == 0 || !aligned(p->size) || p->flags != 0 || (p->handleTypes & ~kHandleTypeFd) != 0) {
    return kInvalidValue;
  }
  long liveObjects = 0;
  for (const auto& kv : s.multicast) liveObjects += kv.second.released ? 0 : 1;
  if (liveObjects >= envLong("BRAID_FAKE_CUDA_MC_SLOTS", 128)) return kOutOfMemory;
  Multicast m;
  m.numDevices = p->numDevices;
  m.size = p->size;
  m.exportable = (p->handleTypes & kHandleTypeFd) != 0;
  for (unsigned i = 0; i < p->numDevices; ++i) m.order.push_back(static_cast<int>(i));
  std::mt19937_64 gen(static_cast<uint64_t>(envLong("BRAID_FAKE_CUDA_MC_SEED", 1)) * 0x9E3779B97F4A7C15ull +
                      ++s.multicastCreated);
  std::shuffle(m.order.begin(), m.order.end(), gen);
  *mcHandle = s.nextHandle++;
  s.multicast[*mcHandle] = m;
  return kSuccess;
}

FAKE_API CUresult cuMulticastAddDevice(unsigned long long mcHandle, CUdevice dev) {
  FAKE_ENTER("cuMulticastAddDevice");
  FAKE_REQUIRE_INIT();
  Multicast* m = live(s, mcHandle);
  if (m == nullptr) return kInvalidValue;
  if (dev < 0 || dev >= s.count) return kInvalidDevice;
  if (added(*m, dev) || m->devices.size() >= m->numDevices) return kInvalidValue;
  if (!m->bindings.empty() || m->mappings > 0) return kNotPermitted;
  m->devices.push_back(dev);
  return kSuccess;
}

FAKE_API CUresult cuMulticastBindAddr(unsigned long long mcHandle, size_t mcOffset, CUdeviceptr memptr, size_t size,
                                      unsigned long long flags) {
  FAKE_ENTER("cuMulticastBindAddr");
  FAKE_REQUIRE_INIT();
  Multicast* m = live(s, mcHandle);
  if (m == nullptr) return kInvalidValue;
  if (flags != 0 || size == 0 || !aligned(size) || !aligned(mcOffset) || !aligned(memptr)) return kInvalidValue;
  if (mcOffset > m->size || size > m->size - mcOffset) return kInvalidValue;
  if (m->devices.size() < m->numDevices) return kNotPermitted;  // the driver would block until all are added
  auto a = findAllocation(s, memptr);
  if (a == s.allocations.end() || !a->second.vmm || a->second.multicast) return kInvalidValue;  // not cuMem memory
  if (size > a->first + a->second.bytes - memptr) return kInvalidValue;
  const int dev = a->second.device;
  if (!added(*m, dev)) return kInvalidDevice;
  if (m->exportable) {  // "externally shareable multicast objects can be bound only to externally shareable memory"
    auto ph = s.phys.find(a->second.handle);
    if (ph == s.phys.end() || !ph->second.exportable) return kInvalidValue;
  }
  for (const McBinding& b : m->bindings) {
    if (b.device == dev && mcOffset < b.mcOffset + b.bytes && b.mcOffset < mcOffset + size) return kInvalidValue;
  }
  m->bindings.push_back(McBinding{dev, memptr, mcOffset, size});
  return kSuccess;
}

FAKE_API CUresult cuMulticastUnbind(unsigned long long mcHandle, CUdevice dev, size_t mcOffset, size_t size) {
  FAKE_ENTER("cuMulticastUnbind");
  FAKE_REQUIRE_INIT();
  auto it = s.multicast.find(mcHandle);
  if (it == s.multicast.end()) return kInvalidValue;
  std::vector<McBinding>& bs = it->second.bindings;
  for (size_t i = 0; i < bs.size(); ++i) {
    if (bs[i].device == dev && bs[i].mcOffset == mcOffset && bs[i].bytes == size) {
      bs.erase(bs.begin() + static_cast<long>(i));
      return kSuccess;
    }
  }
  return kInvalidValue;
}

// For tests: how many multimem ranges kernels have resolved so far (each CTA thread's load-reduce or store of a
// range counts once), so a test can tell a switch reduction from a peer-pointer one.
FAKE_API unsigned long long braidFakeCudaMulticastResolves() {
  return fakecuda::gResolves.load();
}

// For tests that launch kernels on the emulator themselves (device-API kernels, tests/devapi): the driver's answer
// to "which buffers does this multicast address stand for", as the fake's own launches pass it (EmuMulticastFn).
FAKE_API int braidFakeCudaResolveMulticast(const void* mc, size_t bytes, int device, void** uc, int max) {
  return fakecuda::resolveMulticast(mc, bytes, device, uc, max);
}
