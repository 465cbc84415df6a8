// Cross-memory attach: copying to and from another process's private memory with one copy
// (process_vm_readv/process_vm_writev), as Open MPI's shared-memory transport does for large messages. It needs
// the permission ptrace would need (same user; Yama's ptrace_scope, containers and seccomp may refuse it), so
// callers probe it first and fall back when it is refused.
#pragma once

#include <sys/types.h>

#include <cstddef>

#include "src/common/status.h"

namespace braid {

// Copies `bytes` from `remote` in process `pid` to `local`. Errors name the process, the address and errno.
[[nodiscard]] Status cmaRead(pid_t pid, void* local, const void* remote, size_t bytes);
// Copies `bytes` from `local` to `remote` in process `pid`.
[[nodiscard]] Status cmaWrite(pid_t pid, void* remote, const void* local, size_t bytes);

}  // namespace braid
