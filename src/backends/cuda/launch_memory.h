// Memory of a CUDA backend's launches (work images in pinned host memory; LL staging, scratch and staged copies in
// device memory), reused from launch to launch instead of allocated and freed each time.
//
// Why: cuMemFree (like cudaFree) waits for all work queued on the device, and the CUDA programming guide lists
// device and page-locked allocations among the operations that keep commands of different streams from running
// concurrently. With several ranks on one GPU, a rank freeing its finished launch's memory would wait for a
// co-located rank's kernel that waits for this rank's next launch: a deadlock (the fake driver models cuMemFree's
// wait and showed it). So blocks go back to a free list when a launch ends and are freed only at destruction.
//
// Thread safety: any thread (the owner launches; ncclCommGetAsyncError may reclaim finished launches elsewhere).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

#include "src/backends/cuda/cu_api.h"
#include "src/common/status.h"

namespace braid {

// Kernels use host pointers as they are: pinned memory must be mapped at the same device address (unified
// addressing; every 64-bit CUDA platform has it). An error names `what` otherwise.
[[nodiscard]] Status cuMappedAtSameAddress(const CuApi* api, void* p, const char* what);
// Portable, device-mapped pinned memory at the same address for host and device. Errors name the call and `what`.
[[nodiscard]] Result<void*> cuPinnedAlloc(const CuApi* api, size_t bytes, const char* what);

class LaunchMemory {
 public:
  LaunchMemory(const CuApi* api, CUcontext ctx) : api_(api), ctx_(ctx) {}
  ~LaunchMemory();  // frees every block (the caller's context need not be current)

  // A block of at least `bytes` (sizes are rounded up to a power of two, at least 4 KB, so blocks are reused
  // across launches of similar sizes). Errors name the driver call and `what`.
  [[nodiscard]] Result<CUdeviceptr> takeDevice(size_t bytes, const char* what);
  [[nodiscard]] Result<void*> takePinned(size_t bytes, const char* what);
  // Returns a block taken above (its size as asked or rounded).
  void give(CUdeviceptr p);
  void give(void* pinned);

  static size_t roundedSize(size_t bytes);
  // Bytes of every device block allocated so far, taken or free (they are freed at destruction only).
  size_t deviceBytesHeld() const;

 private:
  const CuApi* api_;
  CUcontext ctx_;
  mutable std::mutex mu_;
  std::multimap<size_t, CUdeviceptr> freeDevice_;
  std::multimap<size_t, void*> freePinned_;
  std::map<CUdeviceptr, size_t> deviceSize_;  // every device block, taken or free
  std::map<void*, size_t> pinnedSize_;
};

}  // namespace braid
