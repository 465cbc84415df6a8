#include "src/backends/backend.h"

#include "src/backends/cpu/cpu_backend.h"

namespace braid {

const char* backendKindName(BackendKind kind) {
  return kind == BackendKind::kCuda ? "cuda" : "host";
}

Result<std::unique_ptr<Backend>> createBackend(BackendKind kind) {
  if (kind == BackendKind::kHost) return std::unique_ptr<Backend>(new CpuBackend());
  return invalidUsage("the %s backend is not built yet (BRAID_BACKEND): braid runs on host memory",
                      backendKindName(kind));
}

}  // namespace braid
