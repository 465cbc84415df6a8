#include "src/common/wait.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace braid {
namespace {

// The state letter of /proc/<pid>/stat ("pid (comm) S ..."); comm may hold spaces and parentheses, so the state is
// the first field after the last ')'. 0 when unreadable (gone, or not visible from this namespace).
char processState(int32_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[512];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');
  return close != nullptr && close[1] == ' ' ? close[2] : 0;
}

}  // namespace

bool processGone(int32_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  const char state = processState(pid);
  return state == 'Z' || state == 'X';
}

Status stoppedPeer(const WaitContext& ctx) {
  for (int r = 0; r < ctx.nLocalPids; ++r) {
    const int32_t pid = ctx.localPids[r];
    if (pid <= 0) continue;
    const char state = processState(pid);
    if (state == 'T' || state == 't') {
      return remoteError(
          "rank %d: peer rank %d (pid %d on this host) is stopped (process state %c: SIGSTOP, a debugger or job "
          "control), so every rank waiting on it stalls; continue it (kill -CONT %d) or kill it",
          ctx.rank, r, static_cast<int>(pid), state, static_cast<int>(pid));
    }
  }
  return Status::ok();
}

}  // namespace braid
