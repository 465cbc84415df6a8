// A lock for critical sections of a few instructions that are almost never contended (a handle's pointer swap):
// lock and unlock are one atomic each, where a std::mutex costs two library calls.
#pragma once

#include <sched.h>

#include <atomic>

#include "src/common/wait.h"

namespace braid {

// BasicLockable (std::lock_guard works). Not fair and not recursive. A waiter yields its CPU after a few spins,
// so a holder preempted on an oversubscribed host gets it back.
class SpinLock {
 public:
  void lock() {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 64) {
          sched_yield();
        } else {
          cpuRelax();
        }
      }
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace braid
