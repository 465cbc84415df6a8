// GPU memory for the p2p transport's FIFOs (transports/transport.h's DeviceMemory) on one CUDA device, through
// the driver's virtual memory management: cuMemCreate'd physical memory (exportable as a POSIX descriptor when a
// peer process must map it), reserved, mapped and given access with cuMemSetAccess for this device and for the
// devices of in-process peers. The same calls serve every case (same GPU, another GPU of the process, another
// process), so peer access never depends on cuCtxEnablePeerAccess state that other code of the program changes.
//
// Initialisation (the control block, zeroed slots) is copied on a private non-blocking stream, so setting up a
// connection never waits behind the communicator's running kernels.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "src/backends/cuda/cu_api.h"
#include "transports/transport.h"

namespace braid {

class CudaDeviceMemory final : public DeviceMemory {
 public:
  // On `ctx` (the backend's), device ordinal `device`. Errors name the driver call.
  static Result<std::unique_ptr<CudaDeviceMemory>> create(const CuApi* api, CUcontext ctx, int device);
  ~CudaDeviceMemory() override;

  int device() const override { return device_; }
  const CuApi* api() const { return api_; }
  bool canAccessPeer(int peerDevice) const override;
  Result<DeviceFifoMem> alloc(size_t bytes, const void* head, size_t headBytes, const std::vector<int>& peerDevices,
                              bool exportable) const override;
  Result<DeviceFifoMem> import(int fd, size_t bytes) const override;
  // Another process's memory exported segment by segment (exportShareable): each descriptor's allocation mapped,
  // whole, back to back in one range (`sizes` bytes each) for this device. The caller closes the descriptors.
  Result<DeviceFifoMem> importSegments(const std::vector<int>& fds, const std::vector<size_t>& sizes) const;
  // Its private stream, for initialising copies and the P2P self-test: one stream for all of them, since every
  // stream a rank keeps takes one of the GPU's hardware queues (CUDA_DEVICE_MAX_CONNECTIONS) from ranks sharing it.
  CUstream stream() const { return stream_; }
  // After work on it that never finished (a stuck self-test copy): a fresh stream for what follows. The old one's
  // work goes on (the driver keeps a destroyed stream's work), and what that work uses stays the caller's.
  [[nodiscard]] Status replaceStream();

 private:
  CudaDeviceMemory(const CuApi* api, CUcontext ctx, int device) : api_(api), ctx_(ctx), device_(device) {}
  // mapSegmentsAndGrant (below) of `handles`, released either way (the mappings keep the memory); the owner unmaps
  // and frees the range.
  Result<DeviceFifoMem> mapSegments(const std::vector<CUmemGenericAllocationHandle>& handles,
                                    const std::vector<size_t>& sizes, const std::vector<int>& devices) const;

  const CuApi* api_;
  CUcontext ctx_;
  int device_;
  CUstream stream_ = nullptr;
};

// Reserves one range of the segments' total size (aligned to `align`, 0: the driver's choice), maps handles[i]
// (sizes[i] bytes) there back to back and gives `devices` read-write access to all of it; releases the handles
// either way unless `keep` (the mappings keep the memory). On failure nothing is left mapped or reserved.
Result<CUdeviceptr> mapSegmentsAndGrant(const CuApi* api, const std::vector<CUmemGenericAllocationHandle>& handles,
                                        const std::vector<size_t>& sizes, const std::vector<int>& devices,
                                        bool keep = false, size_t align = 0);
// Unmaps each segment and frees the range mapSegmentsAndGrant made.
[[nodiscard]] Status unmapSegmentsAndFree(const CuApi* api, CUdeviceptr ptr, const std::vector<size_t>& sizes);
// The PCI identity of GPU `device` as Backend::gpuPciId gives it (domain, bus, device; + 1), 0 when the driver does
// not say.
uint64_t gpuPciIdOf(const CuApi* api, int device);
// One segment of each.
Result<CUdeviceptr> mapAndGrant(const CuApi* api, CUmemGenericAllocationHandle handle, size_t bytes,
                                const std::vector<int>& devices, bool keep = false, size_t align = 0);
[[nodiscard]] Status unmapAndFree(const CuApi* api, CUdeviceptr ptr, size_t bytes);

// ncclMemAlloc on a thread with a current context on `device`: `bytes` (at least 1) rounded up to the driver's
// granularity, of physical memory exportable as a POSIX descriptor (so peers of other processes can map it when
// it is registered), mapped for `device` and every device that has peer access with it (as NCCL's ncclMemAlloc).
Result<void*> cuMemAllocShareable(const CuApi* api, int device, size_t bytes);
// Unmaps and frees memory from cuMemAllocShareable; false (nothing done) when `p` is not the start of one.
Result<bool> cuMemFreeShareable(const CuApi* api, void* p);

// What holds [p, p + bytes) for peers to map: the cuMemAllocShareable (ncclMemAlloc) allocation, or else cuMem
// mappings the program made itself (cuMemCreate, cuMemMap), one or several back to back (NCCL 2.29's multi-segment
// registration), found through the driver as NCCL does. An error says why the range cannot be shared (cudaMalloc
// memory, mappings of different GPUs, host memory, more than kMaxFdsPerMessage mappings).
struct ShareableRange {
  const char* base = nullptr;    // the first mapping's start
  size_t bytes = 0;              // mapped, from base: the sum of `segments`
  int device = -1;               // where its memory is
  std::vector<int> devices;      // devices with read-write access to all of it (its own and its peers')
  std::vector<size_t> segments;  // the sizes of its mappings, in order (one for ncclMemAlloc)
};
Result<ShareableRange> findShareable(const CuApi* api, const void* p, size_t bytes);
// POSIX descriptors of each segment's allocation, in order (the caller closes them), for another process to map
// with CudaDeviceMemory::importSegments. The program's own allocations must have been made with
// CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; the error says so otherwise.
Result<std::vector<int>> exportShareable(const CuApi* api, const ShareableRange& range);
// Segment sizes as bytes (an offer's info, a request's tail) and back; false when `in` does not hold `count`.
std::string encodeSegments(const std::vector<size_t>& sizes);
bool decodeSegments(const std::string& in, size_t count, std::vector<size_t>* sizes);

}  // namespace braid
