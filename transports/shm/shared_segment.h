// A memory segment that every rank of a communicator on one host maps: the control segment of the NVLS-style
// ("direct") collectives. The transport layer owns it because it is connection setup, like a FIFO's: rank 0 creates
// an anonymous memfd, the ranks exchange (pid, fd, inode) through the communicator's all-gather, every other rank
// maps it through /proc/<pid>/fd, and all agree whether every rank managed to. A CUDA backend's multicast object
// (NVLS) will be set up beside it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "src/common/status.h"

namespace braid {

// Collective over the communicator's ranks: every rank passes an array of nranks entries of `bytesPerRank` with its
// own entry filled; on return every entry is (the bootstrap's all-gather).
using AllGatherFn = std::function<Status(void* data, size_t bytesPerRank)>;

class SharedSegment {
 public:
  // Collective. Returns nullptr (not an error) when some rank could not map the segment (no memfd, or
  // /proc/<pid>/fd not reachable: another PID namespace, ptrace restrictions); an INFO line on that rank says why.
  // The memory starts zeroed. Errors: the all-gather failed.
  static Result<std::unique_ptr<SharedSegment>> create(const AllGatherFn& allGather, int rank, int nranks,
                                                       size_t bytes);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  char* base() const { return base_; }
  size_t bytes() const { return bytes_; }

 private:
  SharedSegment() = default;
  char* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace braid
