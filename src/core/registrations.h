// A communicator's registered buffers (ncclCommRegister / ncclCommDeregister).
//
// A registration is keyed by the allocation's identity, not only its address: a CUDA communicator records the
// driver's buffer id (CU_POINTER_ATTRIBUTE_BUFFER_ID, unique per allocation in the process), because caching
// allocators free and reallocate at the same addresses. A collective on an address inside a registration whose
// allocation is gone (freed, maybe reallocated) is refused by name instead of trusting a stale record. Host
// communicators record the range (buffer id 0: host memory has no such id).
//
// What registration changes: the backend is told (Backend::registered), and the CUDA backend's NVLS-style
// collectives read a registered ncclMemAlloc buffer in place, its peers having mapped it at registration
// (src/backends/cuda/direct_registry.h). The FIFO paths do not use registrations; NCCL also answers success for
// registrations it does not use.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "src/common/status.h"

namespace braid {

struct Registration {
  void* handle = nullptr;  // what ncclCommRegister returned
  const char* base = nullptr;
  size_t bytes = 0;
  uint64_t bufferId = 0;  // the allocation's id at registration (0: host memory, not checked)
};

class Registrations {
 public:
  // Records [base, base + bytes); the handle is unique in the process (a handle of another communicator is
  // unknown here).
  void* add(const void* base, size_t bytes, uint64_t bufferId);
  // Errors (kInvalidArgument) name the handle when this communicator did not register it (or deregistered it).
  [[nodiscard]] Status remove(void* handle);
  // The registration containing [p, p + bytes), if any.
  bool find(const void* p, size_t bytes, Registration* out) const;

 private:
  mutable std::mutex mu_;
  std::map<void*, Registration> byHandle_;
};

}  // namespace braid
