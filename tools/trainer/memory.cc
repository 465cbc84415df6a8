#include "tools/trainer/memory.h"

#include <algorithm>

namespace braid::trainer {

const char* memKindName(MemKind k) {
  switch (k) {
    case MemKind::kParams:
      return "params";
    case MemKind::kGrads:
      return "grads";
    case MemKind::kOptimizer:
      return "optimizer";
    case MemKind::kGathered:
      return "gathered";
    case MemKind::kGradBuckets:
      return "grad_buckets";
    case MemKind::kCommBuffers:
      return "comm_buffers";
    case MemKind::kCount:
      break;
  }
  return "?";
}

void MemoryLedger::add(MemKind k, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto i = static_cast<size_t>(k);
  current_[i] += bytes;
  peak_[i] = std::max(peak_[i], current_[i]);
}

int64_t MemoryLedger::current(MemKind k) const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_[static_cast<size_t>(k)];
}

int64_t MemoryLedger::peak(MemKind k) const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_[static_cast<size_t>(k)];
}

void MemoryLedger::resetPeaks() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_ = current_;
}

}  // namespace braid::trainer
