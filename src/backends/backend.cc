#include "src/backends/backend.h"

#include <algorithm>
#include <climits>
#include <map>

#include "src/backends/cpu/cpu_backend.h"
#include "src/backends/cuda/cuda_backend.h"

namespace braid {

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

Result<std::unique_ptr<Backend>> createBackend(const BackendChoice& choice) {
  if (choice.kind == BackendKind::kHost) return std::unique_ptr<Backend>(new CpuBackend());
  return CudaBackend::create(static_cast<CUcontext>(choice.cudaContext));
}

}  // namespace braid
