#include "src/backends/cuda/launch_memory.h"

#include "src/common/logging.h"

namespace braid {

Status cuMappedAtSameAddress(const CuApi* api, void* p, const char* what) {
  CUdeviceptr d = 0;
  BRAID_RETURN_IF_ERROR(api->check(api->memHostGetDevicePointer(&d, p, 0), "cuMemHostGetDevicePointer"));
  if (d == reinterpret_cast<CUdeviceptr>(p)) return Status::ok();
  return Status(Code::kCudaError,
                strPrintf("pinned memory for %s is mapped at another device address (no unified addressing)", what));
}

Result<void*> cuPinnedAlloc(const CuApi* api, size_t bytes, const char* what) {
  void* p = nullptr;
  BRAID_RETURN_IF_ERROR(api->check(api->memHostAlloc(&p, bytes, kCuMemHostAllocPortable | kCuMemHostAllocDeviceMap),
                                   strPrintf("cuMemHostAlloc(%zu bytes for %s)", bytes, what).c_str()));
  Status mapped = cuMappedAtSameAddress(api, p, what);
  if (!mapped.isOk()) {
    (void)api->memFreeHost(p);
    return mapped;
  }
  return p;
}

size_t LaunchMemory::deviceBytesHeld() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t total = 0;
  for (const auto& d : deviceSize_) total += d.second;
  return total;
}

size_t LaunchMemory::roundedSize(size_t bytes) {
  size_t r = 4096;
  while (r < bytes) r <<= 1;
  return r;
}

Result<CUdeviceptr> LaunchMemory::takeDevice(size_t bytes, const char* what) {
  const size_t size = roundedSize(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = freeDevice_.find(size);
    if (it != freeDevice_.end()) {
      const CUdeviceptr p = it->second;
      freeDevice_.erase(it);
      return p;
    }
  }
  ScopedContext scope(api_, ctx_);
  RelaxedCaptureMode relaxed(api_);  // a launch may be made while the user's streams are being captured
  CUdeviceptr p = 0;
  BRAID_RETURN_IF_ERROR(
      api_->check(api_->memAlloc(&p, size), strPrintf("cuMemAlloc(%zu bytes for %s)", size, what).c_str()));
  std::lock_guard<std::mutex> lock(mu_);
  deviceSize_[p] = size;
  return p;
}

Result<void*> LaunchMemory::takePinned(size_t bytes, const char* what) {
  const size_t size = roundedSize(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = freePinned_.find(size);
    if (it != freePinned_.end()) {
      void* p = it->second;
      freePinned_.erase(it);
      return p;
    }
  }
  ScopedContext scope(api_, ctx_);
  RelaxedCaptureMode relaxed(api_);
  BRAID_ASSIGN_OR_RETURN(void* p, cuPinnedAlloc(api_, size, what));
  std::lock_guard<std::mutex> lock(mu_);
  pinnedSize_[p] = size;
  return p;
}

void LaunchMemory::give(CUdeviceptr p) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = deviceSize_.find(p);
  if (it != deviceSize_.end()) freeDevice_.emplace(it->second, p);
}

void LaunchMemory::give(void* pinned) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pinnedSize_.find(pinned);
  if (it != pinnedSize_.end()) freePinned_.emplace(it->second, pinned);
}

LaunchMemory::~LaunchMemory() {
  ScopedContext scope(api_, ctx_);
  RelaxedCaptureMode relaxed(api_);
  for (const auto& [p, size] : deviceSize_) (void)api_->memFree(p);
  for (const auto& [p, size] : pinnedSize_) (void)api_->memFreeHost(p);
}

}  // namespace braid
