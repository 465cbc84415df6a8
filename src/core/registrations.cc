#include "src/core/registrations.h"

#include <atomic>

namespace braid {

void* Registrations::add(const void* base, size_t bytes, uint64_t bufferId) {
  // Handles count up from a per-process counter, so one communicator's handle is never another's.
  static std::atomic<uintptr_t> next{0};
  Registration r;
  r.handle = reinterpret_cast<void*>((next.fetch_add(1) + 1) << 4);
  r.base = static_cast<const char*>(base);
  r.bytes = bytes;
  r.bufferId = bufferId;
  std::lock_guard<std::mutex> lock(mu_);
  byHandle_[r.handle] = r;
  return r.handle;
}

Status Registrations::remove(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (byHandle_.erase(handle) == 0) {
    return invalidArgument(
        "handle=%p is not a registration of this communicator (never returned by its ncclCommRegister, or already "
        "deregistered)",
        handle);
  }
  return Status::ok();
}

bool Registrations::find(const void* p, size_t bytes, Registration* out) const {
  const char* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [h, r] : byHandle_) {
    if (c >= r.base && c < r.base + r.bytes && bytes <= static_cast<size_t>(r.base + r.bytes - c)) {
      *out = r;
      return true;
    }
  }
  return false;
}

}  // namespace braid
