// Windows on a CUDA communicator (src/core/windows.h): what a rank offers of its ncclMemAlloc buffer and how a peer
// maps it. A rank of the same process reaches it at its own address when its GPU has access (ncclMemAlloc maps for
// every device with peer access); a rank of another process of this host fetches the allocation's POSIX descriptor
// from the owner's descriptor server (fd_share.h) and maps it for its GPU. Nothing else is a CUDA window: NCCL also
// takes only VMM (cuMem) memory, and braid maps only ncclMemAlloc's (an allocation of the program's own cuMem
// allocator is refused by name).
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <cstddef>

#include <string>

#include "src/backends/backend.h"
#include "src/backends/cuda/cuda_direct.h"
#include "src/backends/cuda/device_memory.h"

namespace braid {

// The owner's side. Errors: kInvalidArgument naming `base` when it is not ncclMemAlloc memory. A descriptor that
// cannot be exported only leaves other processes without the window (said at INFO).
Result<WindowDesc> exportCudaWindow(const CuApi* api, int rank, const void* base, size_t bytes, int otherProcesses);
// A peer's side (never an error: out of reach is a reason).
WindowPeer importCudaWindow(const CudaDeviceMemory& memory, double timeoutSec, const WindowDesc& mine,
                            const WindowDesc& theirs);
void withdrawCudaWindow(const WindowDesc& mine);
// Backend::bindWindowMulticast: a multicast object of its own for the window at `base` (every rank's buffer bound at
// offset 0, as cuda_multicast.h binds the direct areas), made only where the communicator's direct areas have one:
// that agreement already covers what every rank would check (NCCL_NVLS_ENABLE, deterministic mode, driver and device
// support, distinct GPUs). `direct` null: none. A buffer whose address or allocation does not fit the multicast
// granularity fails the bind on its rank, and every rank falls back (said in *why). Best effort whatever
// NCCL_NVLS_ENABLE says (1 requires the communicator's multicast, not every window's): never an error but a
// failed all-gather.
Result<WindowMulticast> bindCudaWindowMulticast(const CudaDeviceMemory& memory, const CudaDirect* direct, int rank,
                                                void* base, size_t bindBytes, const AllGatherFn& allGather,
                                                double timeoutSec, std::string* why);
// Zeroed ncclMemAlloc memory on memory's device (its stream does the zeroing), for the signal area.
Result<void*> allocCudaWindowMemory(const CudaDeviceMemory& memory, size_t bytes);

// Device memory for descriptors device code reads (Backend::allocDeviceBlock), and its synchronous fill from host
// memory on memory's stream.
Result<void*> allocCudaDeviceBlock(const CuApi* api, size_t bytes);
[[nodiscard]] Status writeCudaDeviceBlock(const CudaDeviceMemory& memory, void* dst, const void* src, size_t bytes);

// Backend::addSignal: `amount` added to the 64-bit device word at `word` by braid's signal kernel (rma_kernel.h) on
// memory's stream, complete at return (the driver's stream memory operations store and wait but do not add).
// `area`: kCudaAddAreaBytes of host-mapped memory for the kernel's arguments, one add at a time; `abortWord`: the
// backend's. The kernel needs room on the GPU: when it has not run after timeoutSec (a kernel filling every SM?) or
// the communicator is aborted, an error naming that, with *stuck set: it is still queued, so the caller gives it
// the area for good and memory a fresh stream (CudaDeviceMemory::replaceStream).
inline constexpr size_t kCudaAddAreaBytes = 256;
[[nodiscard]] Status addCudaDeviceWord(const CudaDeviceMemory& memory, char* area, const uint32_t* abortWord,
                                       double timeoutSec, uint64_t* word, uint64_t amount, bool* stuck);

}  // namespace braid
