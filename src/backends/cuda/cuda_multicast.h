// NVLS multicast for the CUDA backend's direct (NVLS-style) collectives: one multicast object per communicator,
// every rank's direct area bound to it at offset 0, mapped by every rank (and one per window, for the windows'
// own mappings: cuda_windows.h). An offset of the mapping then reads as
// the reduction of every rank's area at that offset (multimem.ld_reduce) and a store to it lands in every area
// (multimem.st): src/backends/common/multimem.h and direct_kernel.h use it.
//
// Setup is collective (one to three all-gathers, as many on every rank: each round's verdict is agreed before the
// next): rank 0 creates the
// object for nranks devices (exportable, and offered as a descriptor, when ranks of other processes take part),
// every rank adds its device; after every rank added, each binds its area and maps the object. Every failure is
// agreed on: either every rank has the mapping or none keeps anything, and the communicator's direct collectives
// use peer pointers, with an INFO line naming the rank and the call that failed. NCCL_NVLS_ENABLE=1 turns that
// fallback into an init error (NCCL's "NVLS required" behaviour is opt-in here: its unconditional failure is a known
// complaint).
//
// Not set up (and why) when NCCL_NVLS_ENABLE=0, BRAID_DETERMINISTIC=1, two ranks share a GPU (a multicast team
// holds each device once), the driver predates CUDA 12.1 or a device lacks CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED,
// or the communicator already holds BRAID_NVLS_OBJECTS objects (its direct areas' one and its windows').
//
// Thread safety: created and destroyed on the communicator's thread. The destructor unmaps, unbinds this rank's
// area and releases the object (the last rank of the process that holds it does), before the area goes.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "src/backends/cuda/cu_api.h"
#include "src/common/fd_share.h"
#include "src/common/status.h"
#include "transports/shm/shared_segment.h"  // AllGatherFn

namespace braid {

class CudaMulticast {
 public:
  struct Rank {
    int pid = 0;
    int device = -1;
  };
  // Collective. `area`/`areaBytes`: this rank's area (a cuMem mapping of that many bytes: the direct area, or a
  // window's buffer to the end of its allocation); `bindBytes` the part the object must cover (rounded up to the
  // multicast granularity, at most areaBytes). Null (not an error) with *why set when multicast is not used; an
  // error only when `required` (NCCL_NVLS_ENABLE=1, for the direct areas) or when the all-gather fails.
  // `held`: the communicator's count of its live objects (the budget's), shared by its direct areas and windows; an
  // object created counts in it until it is released.
  static Result<std::unique_ptr<CudaMulticast>> create(const CuApi* api, int rank, const std::vector<Rank>& ranks,
                                                       char* area, size_t areaBytes, size_t bindBytes,
                                                       const AllGatherFn& allGather, double timeoutSec,
                                                       std::string* why, bool required,
                                                       const std::shared_ptr<std::atomic<int>>& held,
                                                       const char* off = nullptr);
  ~CudaMulticast();
  CudaMulticast(const CudaMulticast&) = delete;
  CudaMulticast& operator=(const CudaMulticast&) = delete;

  char* base() const { return base_; }  // this process's mapping
  size_t bytes() const { return bytes_; }

 private:
  CudaMulticast() = default;
  void release();

  const CuApi* api_ = nullptr;
  int device_ = -1;
  CUmemGenericAllocationHandle handle_ = 0;
  bool held_ = false;   // this rank holds a reference on handle_ (heldHandles())
  bool bound_ = false;  // this rank's area is bound at offset 0
  char* area_ = nullptr;
  char* base_ = nullptr;  // mapped
  size_t bytes_ = 0;
  std::shared_ptr<std::atomic<int>> counted_;  // the budget's count this object is in, until released
};

}  // namespace braid
