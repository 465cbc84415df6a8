#include "src/common/cma.h"

#include <sys/uio.h>

#include <cerrno>

namespace braid {
namespace {

// One call may move fewer bytes than asked (it stops at a page it cannot access): the rest is asked again, and a
// call that moves nothing is the error.
Status transfer(bool write, pid_t pid, void* local, void* remote, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    iovec l{static_cast<char*>(local) + done, bytes - done};
    iovec r{static_cast<char*>(remote) + done, bytes - done};
    const ssize_t n = write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return errnoError(n < 0 ? errno : EFAULT, "%s %zu bytes at %p of process %d",
                        write ? "process_vm_writev: writing" : "process_vm_readv: reading", bytes - done,
                        static_cast<char*>(remote) + done, static_cast<int>(pid));
    }
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

}  // namespace

Status cmaRead(pid_t pid, void* local, const void* remote, size_t bytes) {
  return transfer(false, pid, local, const_cast<void*>(remote), bytes);
}

Status cmaWrite(pid_t pid, void* remote, const void* local, size_t bytes) {
  return transfer(true, pid, const_cast<void*>(local), remote, bytes);
}

}  // namespace braid
