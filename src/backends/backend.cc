#include "src/backends/backend.h"

#include "src/backends/cpu/cpu_backend.h"
#include "src/backends/cuda/cuda_backend.h"

namespace braid {

const char* backendKindName(BackendKind kind) {
  return kind == BackendKind::kCuda ? "cuda" : "host";
}

Result<std::unique_ptr<Backend>> createBackend(const BackendChoice& choice) {
  if (choice.kind == BackendKind::kHost) return std::unique_ptr<Backend>(new CpuBackend());
  return CudaBackend::create(static_cast<CUcontext>(choice.cudaContext));
}

}  // namespace braid
