#include "src/backends/backend.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>

#include "src/backends/cpu/cpu_backend.h"
#include "src/backends/cuda/cuda_backend.h"

namespace braid {

Result<void*> Backend::allocDeviceBlock(size_t bytes) {
  void* p = std::calloc(1, bytes == 0 ? 1 : bytes);
  if (p == nullptr) return systemError("out of host memory allocating a %zu-byte descriptor block", bytes);
  return p;
}

Status Backend::writeDeviceBlock(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return Status::ok();
}

Result<void*> Backend::allocHostMapped(size_t bytes) {
  void* p = std::calloc(1, bytes == 0 ? 1 : bytes);
  if (p == nullptr) return systemError("out of host memory allocating %zu bytes", bytes);
  return p;
}

void Backend::freeHostMapped(void* p) {
  std::free(p);
}

Status Backend::readDeviceBlock(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return Status::ok();
}

Status Backend::storeSignal(uint64_t* word, uint64_t value) {
  __atomic_store_n(word, value, __ATOMIC_RELEASE);
  return Status::ok();
}

Status Backend::addSignal(uint64_t* word, uint64_t amount) {
  __atomic_fetch_add(word, amount, __ATOMIC_RELEASE);
  return Status::ok();
}

void Backend::freeDeviceBlock(void* p) {
  std::free(p);
}

const char* backendKindName(BackendKind kind) {
  return kind == BackendKind::kCuda ? "cuda" : "host";
}

int coResidentChannelCap(const std::vector<RankResources>& ranks) {
  std::map<std::pair<uint64_t, uint64_t>, int> onGpu;
  for (const RankResources& r : ranks) {
    if (r.gpuPciId != 0) ++onGpu[{r.hostHash, r.gpuPciId}];
  }
  int cap = INT_MAX;
  for (const RankResources& r : ranks) {
    if (r.gpuPciId == 0 || r.residentCtas <= 0) continue;
    cap = std::min(cap, std::max(1, r.residentCtas / onGpu[{r.hostHash, r.gpuPciId}]));
  }
  return cap;
}

std::string sharedQueueWarning(const std::vector<RankResources>& ranks, int rank, int64_t connections) {
  const RankResources& me = ranks[static_cast<size_t>(rank)];
  if (me.gpuPciId == 0) return "";
  int sharing = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].gpuPciId != me.gpuPciId || ranks[r].hostHash != me.hostHash) continue;
    if (static_cast<int>(r) < rank) return "";  // a lower rank says it
    ++sharing;
  }
  if (sharing < 2 || static_cast<int64_t>(sharing) * kStreamsPerCudaRank <= connections) return "";
  return strPrintf(
      "%d ranks share this GPU with at least %d streams, more than its %lld hardware queues "
      "(CUDA_DEVICE_MAX_CONNECTIONS): streams sharing a queue start their work in issue order, so kernels of ranks "
      "that wait for each other can stall until BRAID_TIMEOUT; set CUDA_DEVICE_MAX_CONNECTIONS=32 before the program "
      "initialises CUDA",
      sharing, sharing * kStreamsPerCudaRank, static_cast<long long>(connections));
}

Result<std::unique_ptr<Backend>> createBackend(const BackendChoice& choice) {
  if (choice.kind == BackendKind::kHost) return std::unique_ptr<Backend>(new CpuBackend());
  return CudaBackend::create(static_cast<CUcontext>(choice.cudaContext), choice.cudaDevice, choice.nvlsHostMode);
}

}  // namespace braid
