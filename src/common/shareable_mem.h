// Host memory that other processes of the job can map: what ncclMemAlloc returns on host communicators.
//
// An allocation is a memfd mapped MAP_SHARED. A peer process maps it through /proc/<pid>/fd/<fd> (same user), so
// collectives on such buffers read and write peers' buffers directly, with no copy through a FIFO (the host
// counterpart of NCCL's registered or symmetric buffers). Memory from malloc stays private; collectives then use
// the FIFO path. A memfd needs no /dev/shm space and leaves nothing behind when the process dies.
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "src/common/status.h"

namespace braid {

// Where a buffer lives, as another process of this host can find it. Plain data: it travels between processes.
struct MemHandle {
  int32_t pid = 0;      // the owning process
  int32_t fd = -1;      // its memfd in that process; -1: private memory, reachable only from the same process
  uint64_t ino = 0;     // the memfd's inode, so a reused fd number is never mistaken for the allocation
  uint64_t addr = 0;    // the buffer's address in the owner's address space
  uint64_t offset = 0;  // the buffer's offset in the memfd
  uint64_t allocBytes = 0;
};

// Allocates `bytes` of shareable, page-aligned, zeroed memory (memfd); falls back to private memory when memfd is
// unavailable (then *shareable is false). The pages are allocated and mapped before it returns (not at first touch;
// where the kernel or a sandbox refuses fallocate, at first touch as before).
// Errors: kInvalidArgument (a size no allocation can have), kSystemError (more than the host's memory, or the
// memory could not be allocated).
Result<void*> allocShareable(size_t bytes, bool* shareable);
// Frees memory from allocShareable. Errors (nothing freed): kInvalidArgument naming `p` when it is not the start of
// a live allocation from allocShareable (never allocated, already freed, or memory from malloc).
[[nodiscard]] Status freeShareable(void* p);
// Describes [p, p + bytes) for peers. A buffer inside one shareable allocation gets its memfd; any other buffer a
// handle with fd -1 (usable only by threads of this process).
MemHandle describeBuffer(const void* p, size_t bytes);

// One process's mappings of its peers' shareable allocations, cached until destroyed.
class PeerMappings {
 public:
  PeerMappings() = default;
  ~PeerMappings();
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;

  // The local address of the buffer `h` describes: the address itself within this process, otherwise a mapping of
  // the owner's memfd. An error names the owner's pid when the memory cannot be reached. `epoch` identifies the
  // caller's operation: mappings not used by the last two epochs may be unmapped to make room (peers free and
  // reallocate buffers, and a mapping keeps a freed allocation alive).
  Result<char*> resolve(const MemHandle& h, uint64_t epoch = 0);
  size_t cachedMappings() const { return maps_.size(); }

 private:
  struct Mapping {
    void* base = nullptr;
    size_t bytes = 0;
    uint64_t lastEpoch = 0;
  };
  static constexpr size_t kMaxCached = 64;
  std::mutex mu_;
  std::map<std::pair<int32_t, uint64_t>, Mapping> maps_;  // by (pid, inode)
};

// Mappings of at most this many bytes are populated when asked.
constexpr size_t kPopulateMaxBytes = size_t{1} << 30;

// Maps a peer's memfd [0, bytes) read-write; used for the collectives' shared control segment and FIFOs too.
// populate: every page is mapped before it returns (when bytes <= kPopulateMaxBytes), so operations take no page
// faults on it; a segment whose pages its owners should place (first touch, NUMA) passes false.
Result<void*> mapPeerFd(int32_t pid, int32_t fd, uint64_t ino, size_t bytes, bool populate);

}  // namespace braid
