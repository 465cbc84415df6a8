// Byte accounting of what a rank holds: every buffer the ZeRO engine allocates is a TrackedBuffer charged to one
// kind, so the figures braid-train prints are the bytes actually allocated, not a formula.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace braid::trainer {

enum class MemKind : int {
  kParams,       // working parameters held between steps (full, or this rank's shard)
  kGrads,        // gradients held between backward and the optimizer (full, or this rank's shard)
  kOptimizer,    // fp32 master weights (mixed precision only), Adam m and v
  kGathered,     // stage 3: parameters of units gathered for compute (transient)
  kGradBuckets,  // stages 2/3: a unit's full gradient waiting for its reduce-scatter (transient)
  kCommBuffers,  // packed send/receive buffers of a collective (transient)
  kCount
};

const char* memKindName(MemKind k);

class MemoryLedger {
 public:
  void add(MemKind k, int64_t bytes);
  int64_t current(MemKind k) const;
  int64_t peak(MemKind k) const;
  void resetPeaks();

 private:
  mutable std::mutex mu_;
  std::array<int64_t, static_cast<size_t>(MemKind::kCount)> current_{};
  std::array<int64_t, static_cast<size_t>(MemKind::kCount)> peak_{};
};

// Zero-initialised bytes charged to a ledger for as long as the buffer lives. Buffers that collectives read and
// write come from ncclMemAlloc: on a host communicator that memory is shared with the other ranks' processes, so
// braid reduces straight from the peers' buffers (its direct path) in rank order, the same order for all-reduce
// and reduce-scatter; heap buffers would take the FIFO path, where the two orders differ in the last bits.
class TrackedBuffer {
 public:
  TrackedBuffer(MemoryLedger* ledger, MemKind kind, size_t bytes);
  ~TrackedBuffer();
  TrackedBuffer(const TrackedBuffer&) = delete;
  TrackedBuffer& operator=(const TrackedBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  float* floats() { return reinterpret_cast<float*>(data_); }
  const float* floats() const { return reinterpret_cast<const float*>(data_); }
  size_t size() const { return size_; }

 private:
  MemoryLedger* ledger_;
  MemKind kind_;
  size_t size_;
  bool shared_;
  uint8_t* data_ = nullptr;
  std::vector<uint8_t> heap_;
};

using Buffer = std::shared_ptr<TrackedBuffer>;

inline Buffer makeBuffer(MemoryLedger* ledger, MemKind kind, size_t bytes) {
  return std::make_shared<TrackedBuffer>(ledger, kind, bytes);
}

}  // namespace braid::trainer
