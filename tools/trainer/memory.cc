#include "tools/trainer/memory.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "nccl.h"

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

TrackedBuffer::TrackedBuffer(MemoryLedger* ledger, MemKind kind, size_t bytes)
    : ledger_(ledger), kind_(kind), size_(bytes), shared_(kind == MemKind::kCommBuffers || kind == MemKind::kGathered) {
  if (shared_ && bytes > 0) {
    void* p = nullptr;
    if (ncclMemAlloc(&p, bytes) != ncclSuccess || p == nullptr) throw std::bad_alloc();
    data_ = static_cast<uint8_t*>(p);
    std::memset(data_, 0, bytes);
  } else {
    shared_ = false;
    heap_.assign(bytes, 0);
    data_ = heap_.data();
  }
  ledger_->add(kind_, static_cast<int64_t>(bytes));
}

TrackedBuffer::~TrackedBuffer() {
  if (shared_) (void)ncclMemFree(data_);
  ledger_->add(kind_, -static_cast<int64_t>(size_));
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
