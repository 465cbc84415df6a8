#include "src/common/numa.h"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace braid {
namespace {

// <numaif.h>'s values; libnuma's header is not needed for two constants.
constexpr int kMpolPreferred = 1;
constexpr unsigned kMpolMfMove = 2;
constexpr int kMaxNumaNodes = 1024;

}  // namespace

Status bindThisThread(const std::vector<int>& cpus) {
  if (cpus.empty()) return Status::ok();
  cpu_set_t set;
  CPU_ZERO(&set);
  std::string list;
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) return invalidArgument("CPU %d is out of range for an affinity mask", c);
    CPU_SET(c, &set);
    list += (list.empty() ? "" : ",") + std::to_string(c);
  }
  int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (rc != 0) return errnoError(rc, "binding a thread to CPUs %s", list.c_str());
  return Status::ok();
}

bool moveThisThreadTo(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  cpu_set_t saved, one;
  if (pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) != 0 || !CPU_ISSET(cpu, &saved)) return false;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  // The first call migrates the thread before it returns; the second only widens the mask again.
  const bool moved = pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
  (void)pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
  return moved;
}

Status preferNumaNode(void* addr, size_t bytes, int node) {
  if (node < 0 || bytes == 0) return Status::ok();
  if (node >= kMaxNumaNodes) return invalidArgument("NUMA node %d is out of range", node);
  unsigned long mask[kMaxNumaNodes / (8 * sizeof(unsigned long))] = {};
  mask[static_cast<size_t>(node) / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
  // The kernel reads maxnode - 1 bits. MPOL_MF_MOVE also moves pages already allocated (a /dev/shm segment's, by
  // posix_fallocate) as long as only this process maps them.
  if (syscall(SYS_mbind, addr, bytes, kMpolPreferred, mask, static_cast<unsigned long>(kMaxNumaNodes) + 1,
              kMpolMfMove) != 0) {
    return errnoError(errno, "mbind of %zu bytes to NUMA node %d", bytes, node);
  }
  return Status::ok();
}

}  // namespace braid
