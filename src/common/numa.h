// Placing a rank's threads and memory on its NUMA node, without libnuma (the two system calls it wraps).
#pragma once

#include <cstddef>
#include <vector>

#include "src/common/status.h"

namespace braid {

// Binds the calling thread to `cpus` (no-op when empty). Errors name the CPUs and errno.
[[nodiscard]] Status bindThisThread(const std::vector<int>& cpus);

// Moves the calling thread onto `cpu` now and gives it its affinity mask back at once: a placement, not a binding.
// The thread stays there while it runs alone on that CPU, and the mask the user (or launcher) set is unchanged.
// False when the kernel refused (`cpu` outside the mask) or the mask could not be read.
bool moveThisThreadTo(int cpu);

// Pages of [addr, addr + bytes) go to NUMA node `node` when possible (MPOL_PREFERRED: another node when that one is
// full): pages not touched yet when first touched, pages already allocated are moved if only this process maps
// them. `addr` must be page-aligned, as mmap's results are. No-op when node < 0.
[[nodiscard]] Status preferNumaNode(void* addr, size_t bytes, int node);

}  // namespace braid
